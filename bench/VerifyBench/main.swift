// verify-bench: RS256 ID-token verifications per second on one core, against `openssl speed rsa2048` in the same run.
import Foundation
import IDToken

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

let ours = rate { if case .success = verifier.verify(token, keys: keys, now: now) { true } else { false } }
print(String(format: "tokensignin verify (RS256, 1 core): %.0f verifications/s", ours))
// The JWS layer alone (base64url, header, RSA verify; no claims JSON), to show where the time goes.
let jwsOnly = rate { if case .success = JWS.verify(token, keys: keys) { true } else { false } }
print(String(format: "  JWS layer only:                    %.0f verifications/s", jwsOnly))

// Reference: OpenSSL's own RSA-2048 verify rate, same machine, same run.
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
print(String(format: "openssl speed rsa2048 verify (1 core):   %.0f verify/s", reference))
print(String(format: "ratio: %.2f (target >= 0.80); JWS layer only: %.2f", ours / reference, jwsOnly / reference))
