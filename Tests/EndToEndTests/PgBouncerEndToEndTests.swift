// The whole path through a stock PgBouncer in transaction pooling mode: nginx -> responder (four workers) ->
// PgBouncer (two server sessions) -> PostgreSQL, with TOKENSIGNIN_DATABASE_POOLER=transaction; migrations too.
import Foundation
import Synchronization
import Testing
import TestSupport

/// One stack behind one PgBouncer for the suite (a stack per test would be slow); scripts/with-test-db stops
/// both when the run ends.
private enum PooledStack {
    static let poolSize = 2
    private static let made = Mutex<(bouncer: PgBouncer, stack: Stack)?>(nil)

    static func stack() throws -> Stack {
        try made.withLock { made in
            if let made { return made.stack }
            let bouncer = try PgBouncer("e2e-pgbouncer", poolSize: poolSize)
            // psql, `tokensignin migrate` and the responder all go through the pooler.
            let stack = try Stack("pgbouncer", environment: ["TOKENSIGNIN_WORKERS": "4"], postgres: [
                "PGHOST": bouncer.host, "PGPORT": String(bouncer.port), "PGUSER": "postgres",
                "TOKENSIGNIN_DATABASE_POOLER": "transaction",
            ])
            made = (bouncer, stack)
            return stack
        }
    }
}

@Suite(.serialized) final class PgBouncerEndToEndTests {
    let stack: Stack
    init() throws { stack = try PooledStack.stack() }

    private func signedIn(_ sub: String, userAgent: String = "e2e-test") throws -> String {
        let answer = try stack.signIn(try stack.token(sub: sub), userAgent: userAgent)
        try #require(answer.status == 200, "\(answer)")
        return try #require((answer.json["session"] as? [String: Any])?["token"] as? String)
    }

    private func check(_ token: String) throws -> Answer {
        try stack.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"])
    }

    @Test func signInCheckDevicesRevocationAndSignOutWorkThroughPgBouncer() throws {
        let phone = try signedIn("400000000000000000001", userAgent: "phone/1")
        let laptop = try signedIn("400000000000000000001", userAgent: "laptop/1")
        let checked = try check(phone)
        #expect(checked.status == 200 && checked.header("X-User-Sub") == "400000000000000000001", "\(checked)")

        let list = try stack.request("GET", "/sessions", headers: ["Authorization": "Bearer \(laptop)"])
        let sessions = try #require(list.json["sessions"] as? [[String: Any]], "\(list)")
        #expect(sessions.count == 2)
        let phoneID = "\(try #require(sessions.first { $0["user_agent"] as? String == "phone/1" })["id"]!)"
        let revoke = try stack.request("DELETE", "/sessions/\(phoneID)",
                                       headers: ["Cookie": "__Host-tokensignin=\(laptop)", "Origin": stack.siteOrigin])
        #expect(revoke.status == 204, "\(revoke)")
        #expect(try check(phone).status == 401)
        #expect(try check(laptop).status == 200)

        let signOut = try stack.request("POST", "/tokensignout", headers: ["Authorization": "Bearer \(laptop)"])
        #expect(signOut.status == 204, "\(signOut)")
        #expect(try check(laptop).status == 401)
        #expect(try stack.count("signin.sessions WHERE revoked_reason = 'sign_out'") == 1)
    }

    @Test func aSecurityEventsTransactionAppliesThroughPgBouncer() throws {
        let sub = "400000000000000000002"
        let first = try signedIn(sub), second = try signedIn(sub)
        // Two events in one SET: one transaction of several statements on one server session.
        let events = SecurityEventToken.event("sessions-revoked", sub: sub)
            .merging(SecurityEventToken.event("account-credential-change-required", sub: sub)) { $1 }
        let set = try SecurityEventToken(events: events, audience: stack.clientID).signed(by: stack)
        let answer = try stack.request("POST", "/risc", headers: ["Content-Type": "application/secevent+jwt"], body: set)
        #expect(answer.status == 202, "\(answer)")
        #expect(try check(first).status == 401 && check(second).status == 401)
        let outcomes = try stack.psql("SELECT outcome FROM signin.security_events WHERE subject_sub = '\(sub)' ORDER BY outcome")
        #expect(outcomes == [["flagged"], ["sessions_revoked"]], "\(outcomes)")
        #expect(try stack.count("signin.sessions s JOIN signin.users u ON u.id = s.user_id WHERE u.google_sub = '\(sub)' AND s.revoked_reason = 'security_event'") == 2)
        let redelivered = try stack.request("POST", "/risc", headers: ["Content-Type": "application/secevent+jwt"], body: set)
        #expect(redelivered.status == 202, "\(redelivered)")
        #expect(try stack.count("signin.security_events WHERE subject_sub = '\(sub)'") == 2, "applied once")
    }

    /// Four workers and the test's own psql share two server sessions: each sign-in and check lands on whichever
    /// session is free, the case where a named statement or a session-level SET would break.
    @Test func concurrentSignInsAndChecksShareThePoolsServerSessions() throws {
        let clients = 8, perClient = 6
        let failures = Mutex<[String]>([])
        let tokens = Mutex<[String]>([])
        let done = DispatchGroup()
        let stack = self.stack
        for client in 0..<clients {
            done.enter()
            Thread {
                defer { done.leave() }
                for n in 0..<perClient {
                    do {
                        let answer = try stack.signIn(try stack.token(sub: "4100000000000000\(client)\(n)"))
                        guard answer.status == 200, let session = (answer.json["session"] as? [String: Any])?["token"] as? String else {
                            failures.withLock { $0.append("sign-in: \(answer)") }
                            continue
                        }
                        let check = try stack.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(session)"])
                        if check.status != 200 { failures.withLock { $0.append("check: \(check)") } }
                        tokens.withLock { $0.append(session) }
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
            }.start()
        }
        #expect(done.wait(timeout: .now() + 300) == .success)
        #expect(failures.withLock { $0 } == [])
        #expect(tokens.withLock { $0.count } == clients * perClient)
        // The responder's four connections and psql's never had more than the pool's server sessions.
        let servers = try stack.psql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'")
        #expect(Int(servers.first?.first ?? "") ?? 99 <= PooledStack.poolSize, "\(servers)")
        #expect(!stack.serverLog.contains("status=503"), "no outage was seen behind the pooler")
        #expect(!stack.serverLog.contains("status=500"))
    }
}
