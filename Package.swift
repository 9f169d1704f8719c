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
        .systemLibrary(name: "CLinuxFastCGI", path: "Sources/CLinuxFastCGI"),
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL"),
        .systemLibrary(name: "CLibPQ", path: "Sources/CLibPQ"),
        .systemLibrary(name: "CCurl", path: "Sources/CCurl"),

        // The scaffolding of every module's one error type (reason codes as enums, equality on the code).
        .target(name: "CodedErrors", swiftSettings: strict),
        // Pure verification (no I/O); Google's keys fetched and cached apart; signing apart.
        .target(name: "IDToken", dependencies: ["CodedErrors", "COpenSSL"], swiftSettings: strict),
        .target(name: "GoogleKeys", dependencies: ["IDToken", "Threads", "CCurl"], swiftSettings: strict),
        .target(name: "Signing", dependencies: ["CodedErrors", "IDToken", "COpenSSL"], swiftSettings: strict),
        .target(name: "Store", dependencies: ["CLibPQ", "CodedErrors"], swiftSettings: strict),
        .target(name: "FastCGI", dependencies: ["CodedErrors", "Threads", "CLinuxFastCGI"], swiftSettings: strict),
        // The POSIX thread tools FastCGI and GoogleKeys share (threads, a monitor, monotonic deadlines).
        .target(name: "Threads", swiftSettings: strict),
        // What the process tells its operators: logfmt lines, a gate for repeated ones, RFC 3339 times, the version
        // line (`git describe` of the tree, stamped by Plugins/BuildStamp for `tokensignin --version`).
        .target(name: "Logging", swiftSettings: strict, plugins: ["BuildStamp"]),
        .plugin(name: "BuildStamp", capability: .buildTool()),

        // The three concerns, each a module so the compiler keeps the seams:
        // the domain (users, sessions, security events) and its stores, with every SQL statement; no HTTP.
        .target(name: "Sessions", dependencies: ["IDToken", "Signing", "Store", "Logging", "Threads"], swiftSettings: strict),
        // The HTTP application: one route table, requests, replies, the one error mapping, origin/CSRF, metrics; no SQL.
        .target(name: "SignIn", dependencies: ["CodedErrors", "Sessions", "IDToken", "GoogleKeys", "FastCGI", "Logging", "Store"],
                swiftSettings: strict),
        // The command line: settings, `serve`'s wiring, and the operators' commands, which reach the database
        // through Sessions.
        .target(name: "Commands", dependencies: ["CodedErrors", "SignIn", "Sessions", "IDToken", "GoogleKeys", "Signing", "FastCGI",
                                                 "Logging", "Store"], swiftSettings: strict),
        .executableTarget(name: "tokensignin", dependencies: ["Commands", "Logging"], swiftSettings: strict),

        .testTarget(name: "IDTokenTests", dependencies: ["IDToken", "Signing", "TestSupport"], exclude: ["Vectors"],
                    swiftSettings: strict),
        .testTarget(name: "GoogleKeysTests", dependencies: ["GoogleKeys", "IDToken", "Signing", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "SigningTests", dependencies: ["Signing", "IDToken", "TestSupport"], swiftSettings: strict),
        // Test support: running programs, and a private database per suite on the test cluster.
        .target(name: "TestSupport", dependencies: ["Store", "IDToken", "Sessions", "Logging"], path: "Tests/TestSupport", swiftSettings: strict),
        .testTarget(name: "StoreTests", dependencies: ["Store", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "FastCGITests", dependencies: ["FastCGI", "Threads", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "SessionsTests", dependencies: ["Sessions", "Commands", "Store", "IDToken", "Logging", "Threads", "TestSupport"],
                    swiftSettings: strict),
        .testTarget(name: "SignInTests", dependencies: ["SignIn", "Commands", "Sessions", "Store", "IDToken", "GoogleKeys", "FastCGI", "Logging",
                                                        "TestSupport"], swiftSettings: strict),
        .testTarget(name: "CommandsTests", dependencies: ["Commands", "SignIn", "Sessions", "Store", "IDToken", "GoogleKeys",
                                                          "Signing", "Logging", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "EndToEndTests", dependencies: ["IDToken", "Signing", "TestSupport"], swiftSettings: strict),
    ]
)

// Fuzz targets (Fuzz/<Name>/main.swift, each defining LLVMFuzzerTestOneInput): only when scripts/fuzz builds
// them with -sanitize=fuzzer,address, since without libFuzzer's main they do not link.
if ProcessInfo.processInfo.environment["TS_FUZZ"] == "1" {
    let fuzz: [(name: String, dependencies: [Target.Dependency])] = [
        ("FastCGIRecords", ["FastCGI"]), ("JOSE", ["IDToken", "Signing"]),
        ("RequestBodies", ["SignIn"]), ("Cookies", ["SignIn"]),
    ]
    for target in fuzz {
        package.targets.append(.executableTarget(name: "Fuzz\(target.name)", dependencies: target.dependencies,
                                                 path: "Fuzz/\(target.name)", exclude: ["corpus"],
                                                 swiftSettings: strict + [.unsafeFlags(["-parse-as-library"])]))
    }
}

// The verification benchmark (bench/VerifyBench): only when bench/verify builds it (in a build folder of its own), so
// every other `swift build` leaves it out.
if ProcessInfo.processInfo.environment["TS_BENCH"] == "1" {
    package.targets.append(.executableTarget(name: "verify-bench", dependencies: ["IDToken", "GoogleKeys", "Signing"],
                                             path: "bench/VerifyBench", swiftSettings: strict))
}
