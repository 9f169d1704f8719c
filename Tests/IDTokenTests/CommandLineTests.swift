// `tokensignin verify` and `tokensignin dev` as a user runs them: the built binary, every exit code.
import Foundation
import IDToken
import Signing
import Testing
import TestSupport

struct RunResult {
    let status: Int32
    let stdout: String
    let stderr: String
}

enum CLI {
    /// The tokensignin built with these tests: beside the test bundle, else `.build/debug/tokensignin`.
    static let binary: URL = {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("tokensignin")
        if FileManager.default.isExecutableFile(atPath: beside.path) { return beside }
        return TestData.packageRoot.appendingPathComponent(".build/debug/tokensignin")
    }()

    static func run(_ args: [String], stdin: String? = nil, env: [String: String] = [:]) throws -> RunResult {
        // A clean environment: no TOKENSIGNIN_* from the caller.
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("TOKENSIGNIN_") }
        for (k, v) in env { environment[k] = v }
        let result = try runProgram(binary.path, args, environment: environment, stdin: Array((stdin ?? "").utf8))
        return RunResult(status: result.status, stdout: result.stdoutText, stderr: result.stderrText)
    }

    /// A temporary directory with a development key pair made by `tokensignin dev keygen`.
    static func keyDirectory() throws -> (dir: String, kid: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tokensignin-cli-\(UUID().uuidString)").path
        let r = try run(["dev", "keygen", "--out", dir])
        precondition(r.status == 0, "dev keygen failed: \(r.stderr)")
        return (dir, r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    static func token(_ dir: String, _ kid: String, extra: [String] = []) throws -> String {
        let r = try run(["dev", "token", "--key", dir + "/dev-signing-key.pem", "--kid", kid, "--aud", Fixture.clientID,
                         "--sub", "user-1", "--iat", String(Fixture.now - 100)] + extra)
        precondition(r.status == 0, "dev token failed: \(r.stderr)")
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Needs the tokensignin binary (`swift build --build-tests` builds it); without it every test here fails.
@Suite final class CommandLineTests {
    let dir: String
    let kid: String
    let token: String
    var jwks: String { dir + "/dev-jwks.json" }
    var now: String { String(Fixture.now) }

    init() throws {
        (dir, kid) = try CLI.keyDirectory()
        token = try CLI.token(dir, kid, extra: ["--email", "user@example.com", "--name", "User One"])
    }

    /// The folder holds a (development) private key: never leave it behind.
    deinit { try? FileManager.default.removeItem(atPath: dir) }

    @Test func validTokenExitsZeroWithClaimsOnStdout() throws {
        let r = try CLI.run(["verify", "--client-id", Fixture.clientID, "--jwks", jwks, "--now", now, token])
        #expect(r.status == 0)
        let claims = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as! [String: Any]
        #expect(claims["sub"] as? String == "user-1" && claims["email"] as? String == "user@example.com")
        #expect(r.stderr.isEmpty)
    }

    @Test func tokenFromStdinIsTrimmed() throws {
        let r = try CLI.run(["verify", "--client-id", Fixture.clientID, "--jwks", jwks, "--now", now, "-"], stdin: "\n  \(token) \n")
        #expect(r.status == 0)
    }

    @Test func clientIDsDefaultFromTheEnvironment() throws {
        let r = try CLI.run(["verify", "--jwks", jwks, "--now", now, token],
                            env: ["TOKENSIGNIN_CLIENT_IDS": "123456789012-other.apps.googleusercontent.com, \(Fixture.clientID)"])
        #expect(r.status == 0)
    }

    @Test func jwksFileDefaultsFromTheEnvironment() throws {
        let r = try CLI.run(["verify", "--client-id", Fixture.clientID, "--now", now, token],
                            env: ["TOKENSIGNIN_JWKS_FILE": jwks, "TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS": "1"])
        #expect(r.status == 0)
    }

    /// Keys from the settings that are not Google's (a JWKS file, another URL) are refused unless allowed, exit 2 and
    /// a message naming the setting that allows them; a key file named by `--jwks` is the operator's own choice.
    @Test(arguments: [
        (["--now", "NOW"], ["TOKENSIGNIN_JWKS_FILE": "JWKS"]),
        (["--jwks-url", "http://127.0.0.1:9/certs"], [:]),
        (["--jwks-url", "https://keys.example/certs"], [:]),
    ] as [([String], [String: String])])
    func nonGoogleKeysFromTheSettingsAreRefusedUnlessAllowed(flags: [String], env: [String: String]) throws {
        let flags = flags.map { $0 == "NOW" ? now : $0 }
        let env = env.mapValues { $0 == "JWKS" ? jwks : $0 }
        let r = try CLI.run(["verify", "--client-id", Fixture.clientID] + flags + [token], env: env)
        #expect(r.status == 2 && r.stderr.contains("TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS"), "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        let allowed = try CLI.run(["verify", "--client-id", Fixture.clientID] + flags + [token],
                                  env: env.merging(["TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS": "1"]) { $1 })
        #expect(allowed.status != 2, "\(allowed.stderr)")
    }

    @Test func expiredTokenExitsOneWithTheReason() throws {
        let r = try CLI.run(["verify", "--client-id", Fixture.clientID, "--jwks", jwks, "--now", String(Fixture.now + 3600), "--clock-skew", "0", token])
        #expect(r.status == 1)
        #expect(r.stderr == "invalid token: expired\n")
        #expect(r.stdout.isEmpty)
    }

    @Test func clockSkewFlagIsHonoured() throws {
        let r = try CLI.run(["verify", "--client-id", Fixture.clientID, "--jwks", jwks, "--now", String(Fixture.now + 3600), "--clock-skew", "200", token])
        #expect(r.status == 0)
    }

    @Test func otherAudienceExitsOne() throws {
        let r = try CLI.run(["verify", "--client-id", "123456789012-someoneelse.apps.googleusercontent.com", "--jwks", jwks, "--now", now, token])
        #expect(r.status == 1 && r.stderr == "invalid token: bad_audience\n")
    }

    @Test func hostedDomainFlagRestrictsTokens() throws {
        let r = try CLI.run(["verify", "--client-id", Fixture.clientID, "--jwks", jwks, "--now", now, "--hosted-domain", "example.com", token])
        #expect(r.status == 1 && r.stderr == "invalid token: hosted_domain_not_allowed\n")
        let withHD = try CLI.token(dir, kid, extra: ["--hd", "example.com"])
        let ok = try CLI.run(["verify", "--client-id", Fixture.clientID, "--jwks", jwks, "--now", now, "--hosted-domain", "example.com", withHD])
        #expect(ok.status == 0)
    }

    @Test func garbageTokenExitsOneAndIsNotEchoed() throws {
        let r = try CLI.run(["verify", "--client-id", Fixture.clientID, "--jwks", jwks, "--now", now, "secret-garbage"])
        #expect(r.status == 1 && r.stderr == "invalid token: malformed\n")
        let forged = String(token.dropLast(4)) + "AAAA"
        let f = try CLI.run(["verify", "--client-id", Fixture.clientID, "--jwks", jwks, "--now", now, forged])
        #expect(f.status == 1 && !f.stderr.contains(forged))
    }

    @Test(arguments: [
        ["verify", "--jwks", "/nonexistent", "x"],                                   // no client ID
        ["verify", "--client-id", "123456789012-c.apps.googleusercontent.com", "--jwks", "/nonexistent"],                    // no token
        ["verify", "--client-id", "123456789012-c.apps.googleusercontent.com", "--jwks", "/nonexistent", "a", "b"],          // two tokens
        ["verify", "--client-id", "123456789012-c.apps.googleusercontent.com", "--bogus", "1", "x"],                         // unknown option
        ["verify", "--client-id", "123456789012-c.apps.googleusercontent.com", "--now", "yesterday", "x"],                   // non-integer clock
        ["verify", "--client-id", "123456789012-c.apps.googleusercontent.com", "--clock-skew", "-5", "x"],                   // negative skew
        ["verify", "--client-id", "123456789012-c.apps.googleusercontent.com", "--jwks", "f", "--jwks-url", "https://x", "x"], // exclusive key sources
        ["verify", "--client-id"],                                                    // flag without value
        ["verify", "--client-id", "123456789012-c.apps.googleusercontent.com", "--jwks", "a", "--jwks", "b", "x"],           // one key source only
        ["frobnicate"],
        [],
        ["dev", "token", "--key", "k.pem"],                                          // missing required flags
        ["dev", "keygen"],
    ])
    func usageErrorsExitTwo(_ args: [String]) throws {
        let r = try CLI.run(args)
        #expect(r.status == 2)
        #expect(r.stderr.contains("usage: tokensignin"))
    }

    @Test func unreadableKeyFileExitsThree() throws {
        let r = try CLI.run(["verify", "--client-id", "123456789012-c.apps.googleusercontent.com", "--jwks", dir + "/missing.json", token])
        #expect(r.status == 3 && r.stderr.hasPrefix("keys unavailable"))
    }

    @Test func invalidKeySetExitsThree() throws {
        try Data("{\"keys\":[]}".utf8).write(to: URL(fileURLWithPath: dir + "/empty.json"))
        let r = try CLI.run(["verify", "--client-id", "123456789012-c.apps.googleusercontent.com", "--jwks", dir + "/empty.json", token])
        #expect(r.status == 3 && r.stderr.contains("invalid_key_set"))
    }

    @Test func unreachableKeyURLExitsThree() throws {
        let r = try CLI.run(["verify", "--client-id", "123456789012-c.apps.googleusercontent.com", "--jwks-url", "http://127.0.0.1:9/certs", token],
                            env: ["TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS": "1"])
        #expect(r.status == 3)
    }

    @Test func devKeygenWritesAPrivateKeyOnlyTheOwnerCanRead() throws {
        let attrs = try FileManager.default.attributesOfItem(atPath: dir + "/dev-signing-key.pem")
        #expect((attrs[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let keys = try KeySet(jwks: [UInt8](Data(contentsOf: URL(fileURLWithPath: jwks))))
        #expect(keys.keyIDs == [kid])
    }

    @Test func devTokenCountMintsDistinctUsers() throws {
        let r = try CLI.run(["dev", "token", "--key", dir + "/dev-signing-key.pem", "--kid", kid, "--aud", Fixture.clientID,
                             "--sub", "bench", "--count", "3", "--ttl", "600"])
        #expect(r.status == 0)
        let tokens = r.stdout.split(separator: "\n").map(String.init)
        #expect(tokens.count == 3)
        let keys = try KeySet(jwks: [UInt8](Data(contentsOf: URL(fileURLWithPath: jwks))))
        let verifier = Verifier(policy: Policy(clientIDs: [Fixture.clientID]))
        let subs = try tokens.map { try verifier.verify($0, keys: keys, now: Int64(Date().timeIntervalSince1970)).get().subject }
        #expect(subs == ["bench-1", "bench-2", "bench-3"])
    }
}
