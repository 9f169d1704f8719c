// How the responder is deployed: start-up refusals, the inherited FastCGI socket, nginx's rate limit.
import Foundation
import Testing
import TestSupport

@Suite struct DeploymentEndToEndTests {
    @Test(arguments: [
        ([String: String](), "TOKENSIGNIN_CLIENT_IDS"),
        (["TOKENSIGNIN_CLIENT_IDS": "a.apps.googleusercontent.com", "TOKENSIGNIN_WORKERS": "many"], "TOKENSIGNIN_WORKERS"),
        (["TOKENSIGNIN_CLIENT_IDS": "a.apps.googleusercontent.com", "TOKENSIGNIN_SESSION_TTL": "1w"], "TOKENSIGNIN_SESSION_TTL"),
        (["TOKENSIGNIN_CLIENT_IDS": "a.apps.googleusercontent.com", "TOKENSIGNIN_JWKS_FILE": "/nonexistent/jwks.json",
          "TOKENSIGNIN_LISTEN": "SOCKET"], "TOKENSIGNIN_JWKS_FILE"),
    ])
    func startUpStopsNamingAMissingOrMalformedSetting(environment: [String: String], setting: String) throws {
        let socket = NSTemporaryDirectory() + "tokensignin-startup-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        defer { try? FileManager.default.removeItem(atPath: socket) }
        var clean = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("TOKENSIGNIN_") }
        clean.merge(environment.mapValues { $0 == "SOCKET" ? socket : $0 }) { $1 }
        let result = try runProgram(Paths.binary, ["serve"], environment: clean)
        #expect(result.status != 0)
        #expect(result.stderrText.contains(setting), "\(result.stderrText)")
    }

    @Test func servesOnTheSocketInheritedFromSpawnFcgi() throws {
        let stack = try Stack("spawnfcgi", launch: .spawnFCGI)
        let answer = try stack.signIn(try stack.token(sub: "180000000000000000001"))
        #expect(answer.status == 200, "\(answer)")
        #expect(stack.serverLog.contains(#"listen="fd 0""#), "\(stack.serverLog)")
        #expect(stack.stopServer() == 0, "SIGTERM is a graceful stop with exit status 0")
        #expect(stack.serverLog.contains("event=stopped"), "\(stack.serverLog)")
    }

    @Test func nginxLimitsSignInsPerClientAddress() throws {
        let stack = try Stack("ratelimit", rateLimit: true)
        var statuses: [Int] = []
        for _ in 0..<40 {
            statuses.append(try stack.request("POST", "/tokensignin", headers: ["Content-Type": "text/plain"], body: "x").status)
        }
        #expect(statuses.contains(415), "requests within the burst reach the responder")
        #expect(statuses.contains(429), "a burst beyond the limit is refused by nginx: \(statuses)")
    }
}
