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

// Warm up, then count verifications in a fixed wall-clock window.
for _ in 0..<500 { _ = verifier.verify(token, keys: keys, now: now) }
let clock = ContinuousClock()
let start = clock.now
var count = 0
var failures = 0
while clock.now - start < .seconds(seconds) {
    for _ in 0..<100 {
        if case .failure = verifier.verify(token, keys: keys, now: now) { failures += 1 }
    }
    count += 100
}
let elapsed = clock.now - start
let elapsedSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
let ours = Double(count) / elapsedSeconds
precondition(failures == 0, "verification failed during the benchmark")
print(String(format: "tokensignin verify (RS256, 1 core): %.0f verifications/s", ours))

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
print(String(format: "ratio: %.2f (target >= 0.80)", ours / reference))
