// What a client sees when a dependency is missing: the database restarts, Google's keys cannot be fetched,
// or the hosted domain is not allowed.
import Foundation
import Testing
import TestSupport

@Suite(.serialized) struct OutageEndToEndTests {
    @Test func databaseRestartGives503DuringAndNormalAfter() throws {
        // A private cluster, so stopping it does not disturb the suites running beside this one.
        let root = ProcessInfo.processInfo.environment["TS_TEST_RUNDIR"] ?? NSTemporaryDirectory()
        let folder = root + "/outage-\(getpid())/pg"
        let pgPort = String(56000 + Int(getpid() % 1000))
        let cluster = Paths.script("pgcluster")
        try run(cluster, ["start", folder, pgPort])
        defer { _ = try? run(cluster, ["stop", folder, pgPort]) }
        let env = try run(cluster, ["env", folder, pgPort]).stdout
        let host = try #require(env.firstMatch(of: /PGHOST='([^']*)'/)?.1)
        let stack = try Stack("outage", postgres: ["PGHOST": String(host), "PGPORT": pgPort, "PGUSER": "postgres"])

        let before = try stack.signIn(try stack.token(sub: "150000000000000000001"))
        #expect(before.status == 200, "\(before)")
        let session = try #require((before.json["session"] as? [String: Any])?["token"] as? String)
        let check = { try stack.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(session)"]) }

        try run(cluster, ["stop", folder, pgPort])
        let during = try stack.signIn(try stack.token(sub: "150000000000000000002"))
        #expect(during.status == 503, "\(during)")
        #expect(during.header("Retry-After") != nil)
        #expect(during.errorCode == "temporarily_unavailable")
        let duringCheck = try check()
        #expect(duringCheck.status == 503, "never a false 200 or 401 while the database is down: \(duringCheck)")
        #expect(duringCheck.header("X-User-Id") == nil)
        // A security event Google pushes while the database is down gets 503, so Google retries it later.
        let event = try SecurityEventToken(events: SecurityEventToken.event("sessions-revoked", sub: "150000000000000000001"),
                                           audience: stack.clientID).signed(by: stack)
        let risc = try stack.request("POST", "/risc", headers: ["Content-Type": "application/secevent+jwt"], body: event)
        #expect(risc.status == 503 && risc.header("Retry-After") == "2", "never a 400 for our own outage: \(risc)")
        let notReady = try stack.operatorsRequest("GET", "/readyz")
        // The session cache's listener lost PostgreSQL too: once it noticed, the cache is not trusted either.
        let reasons = notReady.json["reasons"] as? [String] ?? []
        #expect(notReady.status == 503 && reasons.first == "database_unavailable"
                && Set(reasons).isSubset(of: ["database_unavailable", "session_cache_unusable"]), "\(notReady)")
        #expect(try stack.operatorsRequest("GET", "/healthz").status == 200, "alive, though not ready")

        try run(cluster, ["start", folder, pgPort])
        let after = try stack.signIn(try stack.token(sub: "150000000000000000003"))
        #expect(after.status == 200, "the lost connection is re-established on the next request: \(after)")
        #expect(try check().status == 200)
        // Ready again once the session cache's listener is back: it retries at most a second apart while PostgreSQL
        // is away, then needs a heartbeat to return, so readiness may lag the first answered request by that much.
        var ready = try stack.operatorsRequest("GET", "/readyz")
        #expect(try waitUntil(seconds: 10) {
            ready = try stack.operatorsRequest("GET", "/readyz")
            return ready.status == 200
        }, "\(ready)")
        #expect(try stack.count("signin.users WHERE google_sub = '150000000000000000002'") == 0)
        #expect(try stack.count("signin.users WHERE google_sub = '150000000000000000003'") == 1)
    }

    @Test func unreachableKeysGive503NotAnInvalidToken() throws {
        // Nothing listens on this loopback port: the key set can never be fetched.
        let stack = try Stack("nokeys", environment: ["TOKENSIGNIN_JWKS_FILE": "", "TOKENSIGNIN_JWKS_URL": "http://127.0.0.1:9/certs"])
        let answer = try stack.signIn(try stack.token(sub: "160000000000000000001"))
        #expect(answer.status == 503, "\(answer)")
        #expect(answer.header("Retry-After") != nil)
        let ready = try stack.operatorsRequest("GET", "/readyz")
        #expect(ready.status == 503 && (ready.json["reasons"] as? [String]) == ["keys_not_loaded"], "\(ready)")
        let event = try SecurityEventToken(events: SecurityEventToken.event("sessions-revoked", sub: "160000000000000000001"),
                                           audience: stack.clientID).signed(by: stack)
        let risc = try stack.request("POST", "/risc", headers: ["Content-Type": "application/secevent+jwt"], body: event)
        #expect(risc.status == 503 && risc.header("Retry-After") == "5", "Google's keys unavailable: retry later: \(risc)")
        #expect(try stack.count("signin.users") == 0)
    }

    @Test func hostedDomainOutsideTheAllowListIsForbidden() throws {
        let stack = try Stack("hd", environment: ["TOKENSIGNIN_HOSTED_DOMAINS": "example.com"])
        let inside = try stack.signIn(try stack.token(sub: "170000000000000000001", hd: "example.com"))
        #expect(inside.status == 200, "\(inside)")
        let outside = try stack.signIn(try stack.token(sub: "170000000000000000002", hd: "elsewhere.com"))
        #expect(outside.status == 403, "\(outside)")
        #expect(outside.errorCode == "access_denied")
        let none = try stack.signIn(try stack.token(sub: "170000000000000000003"))
        #expect(none.status == 403, "\(none)")
        #expect(try stack.count("signin.users WHERE google_sub IN ('170000000000000000002', '170000000000000000003')") == 0)
        #expect(try stack.count("signin.sign_ins WHERE reason = 'hosted_domain_not_allowed'") == 2)
    }
}
