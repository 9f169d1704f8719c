// /readyz tells the truth through nginx: a responder whose URL names a standby first and no target_session_attrs
// is not ready while a worker sits on the standby, lets that connection go and finds the primary; the session
// cache's listener asks for the primary from the start (a standby cannot LISTEN).
import Foundation
import Testing

@Suite(.serialized) struct ReadinessEndToEndTests {
    @Test func aURLWithoutTargetSessionAttrsFindsThePrimaryAndReadyzSaysWhatIsWrongUntilThen() throws {
        let root = ProcessInfo.processInfo.environment["TS_TEST_RUNDIR"] ?? NSTemporaryDirectory()
        // Under folders scripts/with-test-db destroys (…/pg and …/pg-*), whatever happens here.
        let folder = root + "/readiness-\(getpid())"
        let primary = folder + "/pg", standby = folder + "/pg-standby"
        let cluster = Paths.script("pgcluster")
        try #require(try run(cluster, ["start", primary, "55703"]).status == 0)
        defer { _ = try? run(cluster, ["destroy", primary]) }
        let made = try run(cluster, ["standby", standby, "55704", primary, "55703", "sync"])
        try #require(made.status == 0, "\(made.stderr)")
        defer { _ = try? run(cluster, ["destroy", standby]) }
        let socket = { (dir: String, port: String) throws -> String in
            let env = try run(cluster, ["env", dir, port]).stdout
            return String(try #require(env.firstMatch(of: /PGHOST='([^']*)'/)?.1))
        }
        let primarySocket = try socket(primary, "55703")
        let hosts = "\(try socket(standby, "55704")),\(primarySocket)"
        let encoded = hosts.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: ",-._")))!
        // The URL of the issue: several hosts, no target_session_attrs, the standby first (as after a failover).
        let url = "postgresql://postgres@/e2e_readiness_\(getpid())?host=\(encoded)&port=55704,55703"
        let stack = try Stack("readiness", environment: ["TOKENSIGNIN_DATABASE_URL": url],
                              postgres: ["PGHOST": primarySocket, "PGPORT": "55703", "PGUSER": "postgres"])

        // The first probe's worker connects to the standby: not ready, and says why.
        let first = try stack.operatorsRequest("GET", "/readyz")
        #expect(first.status == 503 && (first.json["reasons"] as? [String] ?? []).contains("database_read_only"), "\(first)")
        // A sign-in whose worker meets the standby first is retried on the primary at once.
        let signedIn = try stack.signIn(try stack.token(sub: "180000000000000000001"))
        #expect(signedIn.status == 200, "\(signedIn)")
        let session = try #require((signedIn.json["session"] as? [String: Any])?["token"] as? String)
        let check = try stack.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(session)"])
        #expect(check.status == 200 && check.header("X-User-Sub") == "180000000000000000001", "\(check)")

        // The workers find the primary, and so does the session cache's listener (it always asks libpq for a
        // writable server): ready, the cache in use.
        #expect(stableReadiness(stack) == [])
        let metrics = try stack.operatorsRequest("GET", "/metrics").body
        #expect(metrics.contains("tokensignin_session_cache_usable 1\n"))
        let readOnlyCount = metrics.firstMatch(of: /tokensignin_not_ready_total\{reason="database_read_only"\} (\d+)/).flatMap { Int($0.1) }
        #expect((readOnlyCount ?? 0) >= 1, "\(metrics)")
        #expect(try stack.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(session)"]).status == 200)
        #expect(stack.serverLog.contains("event=database_read_only"))
    }

    /// The reasons of /readyz once 16 answers in a row, 2.4 s in all (longer than the session cache's grace at start),
    /// agreed: each worker answers for its own connection (any of the responder's 9 workers may take a probe, and
    /// lets the standby go at its first), so a few answers differ before they settle; nil when they did not in time.
    private func stableReadiness(_ stack: Stack) -> [String]? {
        let deadline = Date().addingTimeInterval(30)
        var last: [String]?
        var same = 0
        while Date() < deadline {
            guard let answer = try? stack.operatorsRequest("GET", "/readyz") else { continue }
            let reasons = answer.status == 200 ? [] : answer.json["reasons"] as? [String] ?? ["?"]
            same = reasons == last ? same + 1 : 1
            last = reasons
            if same == 16 { return reasons }
            usleep(150_000)
        }
        return nil
    }
}
