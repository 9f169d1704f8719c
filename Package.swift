// swift-tools-version:6.2
// tokensignin: the backend half of "Sign in with Google" (see README.md and docs/).
import Foundation
import PackageDescription

let strict: [SwiftSetting] = [.treatAllWarnings(as: .error)]

let package = Package(
    name: "tokensignin",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "tokensignin", targets: ["tokensignin"]),
    ],
    targets: [
        // System libraries from Debian's -dev packages (see `make deps`).
        .systemLibrary(name: "CFastCGI", path: "Sources/CFastCGI"),
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL"),
        .systemLibrary(name: "CLibPQ", path: "Sources/CLibPQ"),
        .systemLibrary(name: "CCurl", path: "Sources/CCurl"),

        .target(name: "IDToken", dependencies: ["COpenSSL", "CCurl"], swiftSettings: strict),
        .target(name: "Store", dependencies: ["CLibPQ"], swiftSettings: strict),
        .target(name: "FastCGI", dependencies: ["CFastCGI"], swiftSettings: strict),
        .target(name: "SignIn", dependencies: ["IDToken", "Store", "FastCGI"], swiftSettings: strict),
        .executableTarget(name: "tokensignin", dependencies: ["SignIn", "IDToken", "Store"], swiftSettings: strict),
        .executableTarget(name: "verify-bench", dependencies: ["IDToken"], path: "bench/VerifyBench", swiftSettings: strict),

        .testTarget(name: "IDTokenTests", dependencies: ["IDToken", "COpenSSL", "TestSupport"], swiftSettings: strict),
        // Test support: running programs, and a private database per suite on the test cluster.
        .target(name: "TestSupport", dependencies: ["Store"], path: "Tests/TestSupport", swiftSettings: strict),
        .testTarget(name: "StoreTests", dependencies: ["Store", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "FastCGITests", dependencies: ["FastCGI", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "SignInTests", dependencies: ["SignIn", "Store", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "EndToEndTests", dependencies: ["IDToken", "TestSupport"], swiftSettings: strict),
    ]
)

// Fuzz targets (Fuzz/<Name>/main.swift, each defining LLVMFuzzerTestOneInput): only when scripts/fuzz builds
// them with -sanitize=fuzzer,address, since without libFuzzer's main they do not link.
if ProcessInfo.processInfo.environment["TOKENSIGNIN_FUZZ"] == "1" {
    package.targets.append(.executableTarget(name: "FuzzFastCGIRecords", dependencies: ["FastCGI"], path: "Fuzz/FastCGIRecords",
                                             exclude: ["corpus"], swiftSettings: strict + [.unsafeFlags(["-parse-as-library"])]))
}
