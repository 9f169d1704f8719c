// verify-bench: RS256 ID-token verifications per second on one core (verifier alone, through the key cache, JWS layer), against `openssl speed rsa2048` in the same run (best of two rounds each).
import Foundation
import GoogleKeys
import IDToken
import Signing

let seconds = 3.0
let key = try DevelopmentKey.generate(.rsa2048)
let keys = try KeySet(jwks: Array(key.jwks.utf8))
let now: Int64 = 1_760_000_000
let token = key.sign(claims: [
    "iss": "https://accounts.google.com", "aud": "bench-client.apps.googleusercontent.com",
    "azp": "bench-client.apps.googleusercontent.com", "sub": "110169484474386276334",
    "email": "bench@example.com", "email_verified": true, "name": "Bench User",
    "picture": "https://lh3.googleusercontent.com/a/bench", "given_name": "Bench", "family_name": "User",
    "locale": "en", "iat": .integer(now - 10), "exp": .integer(now + 3590),
])
let verifier = Verifier(policy: Policy(clientIDs: ["bench-client.apps.googleusercontent.com"]))
guard case .success = verifier.verify(token, keys: keys, now: now) else { fatalError("benchmark token does not verify") }

// The path a sign-in takes: the process-wide key cache (here over a JWKS file), then the verifier.
let jwksPath = FileManager.default.temporaryDirectory.appendingPathComponent("verify-bench-\(getpid()).json").path
try Data(key.jwks.utf8).write(to: URL(fileURLWithPath: jwksPath))
defer { try? FileManager.default.removeItem(atPath: jwksPath) }
let cache = KeyCache(source: .file(jwksPath))
guard case .success = cache.verify(token, with: verifier, now: now) else { fatalError("benchmark token does not verify through the cache") }

// `verify-bench profile full|jws N`: exactly N calls and no timing or OpenSSL run, for `valgrind --tool=callgrind`.
if CommandLine.arguments.count == 4, CommandLine.arguments[1] == "profile", let n = Int(CommandLine.arguments[3]) {
    let full = CommandLine.arguments[2] == "full"
    for _ in 0..<n {
        let ok = full ? { if case .success = verifier.verify(token, keys: keys, now: now) { true } else { false } }()
                      : { if case .success = JWS.verify(token, keys: keys) { true } else { false } }()
        precondition(ok, "verification failed while profiling")
    }
    exit(0)
}

/// Runs `body` for `seconds` of wall-clock time after a warm-up; returns calls per second.
func rate(_ body: () -> Bool) -> Double {
    for _ in 0..<500 { precondition(body(), "verification failed during warm-up") }
    let clock = ContinuousClock()
    let start = clock.now
    var count = 0
    while clock.now - start < .seconds(seconds) {
        for _ in 0..<100 { precondition(body(), "verification failed during the benchmark") }
        count += 100
    }
    let elapsed = clock.now - start
    return Double(count) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}

/// `openssl speed -seconds 3 rsa2048`'s verify/s on this machine, now.
func opensslVerifyRate() throws -> Double {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["openssl", "speed", "-seconds", "3", "rsa2048"]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    // The summary line reads: "rsa 2048 bits 0.000700s 0.000020s   1428.6  49800.2" (sign/s, verify/s).
    guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("rsa 2048 bits") || $0.hasPrefix("rsa  2048 bits") }),
          let reference = line.split(separator: " ").last.flatMap({ Double($0) }) else {
        print("could not parse `openssl speed rsa2048` output")
        exit(1)
    }
    return reference
}

// Two rounds, each: OpenSSL's own RSA-2048 verify rate, then ours (full path), then the JWS layer alone.
// The machine is shared and noisy, so each figure is the best of its two rounds (the same rule for
// OpenSSL and for us); every round is printed too.
var best = (ours: 0.0, jws: 0.0, cached: 0.0, openssl: 0.0)
for round in 1...2 {
    let reference = try opensslVerifyRate()
    let ours = rate { if case .success = verifier.verify(token, keys: keys, now: now) { true } else { false } }
    let cached = rate { if case .success = cache.verify(token, with: verifier, now: now) { true } else { false } }
    // The JWS layer alone (base64url, header, SHA-256 and RSA verify; no claims JSON), to show where the time goes.
    let jwsOnly = rate { if case .success = JWS.verify(token, keys: keys) { true } else { false } }
    print(String(format: "round %d: openssl %.0f verify/s, tokensignin %.0f verifications/s (%.2f), through KeyCache %.0f/s (%.2f), JWS layer %.0f/s (%.2f)",
                 round, reference, ours, ours / reference, cached, cached / reference, jwsOnly, jwsOnly / reference))
    best = (max(best.ours, ours), max(best.jws, jwsOnly), max(best.cached, cached), max(best.openssl, reference))
}
print(String(format: "tokensignin verify (RS256, 1 core, full path): %.0f verifications/s", best.ours))
print(String(format: "  through KeyCache (the sign-in path):        %.0f verifications/s", best.cached))
print(String(format: "  JWS layer only (no claims):                  %.0f verifications/s", best.jws))
print(String(format: "openssl speed -seconds 3 rsa2048 verify:       %.0f verify/s", best.openssl))
print(String(format: "ratio (full path / openssl):  %.2f (target >= 0.80)", best.ours / best.openssl))
print(String(format: "ratio (KeyCache / openssl):   %.2f", best.cached / best.openssl))
print(String(format: "ratio (JWS layer / openssl):  %.2f", best.jws / best.openssl))
