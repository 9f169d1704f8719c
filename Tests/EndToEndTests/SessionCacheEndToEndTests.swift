// The session cache across two responders of one site: whatever ends a session, wherever it is done, the other
// responder (which answers the session from memory) refuses it within 50 ms; also after its connections are
// terminated and after PostgreSQL restarts.
import Foundation
import Testing

/// Two responders (each with its own nginx) on one database: `a` is where changes are made, `b` where the session
/// is checked from its cache.
final class TwoResponders: @unchecked Sendable {
    // SAFETY: set in init, then only read; each test uses its own.
    let a: Stack
    let b: Stack

    init(_ name: String, postgres: [String: String] = [:]) throws {
        a = try Stack("\(name)a", postgres: postgres)
        b = try Stack("\(name)b", peerOf: a)
    }

    /// Signs `sub` in through `a`: the session's token, id and user id.
    func signIn(_ sub: String) throws -> (token: String, id: String, user: String) {
        let answer = try a.signIn(try a.token(sub: sub))
        try #require(answer.status == 200, "\(answer)")
        let token = try #require((answer.json["session"] as? [String: Any])?["token"] as? String)
        let check = try b.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"])
        try #require(check.status == 200, "\(check)")
        return (token, "\(try #require(check.json["session_id"]))", "\(try #require(check.json["user_id"]))")
    }

    /// How many checks `b` answered from memory so far.
    func hits() throws -> Int {
        let metrics = try b.operatorsRequest("GET", "/metrics").body
        let line = metrics.split(separator: "\n").first { $0.hasPrefix(#"tokensignin_session_cache_lookups_total{result="hit"}"#) }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
    }

    /// Checks `token` on `b` until the cache is usable and answers it from memory (so a revocation afterwards
    /// is a revocation of a cached session).
    func cached(_ token: String) throws {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let before = try hits()
            let check = try b.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"])
            try #require(check.status == 200, "\(check)")
            if try hits() > before { return }
            usleep(20_000)
        }
        Issue.record("b never answered the session from its cache")
    }

    /// Milliseconds from now until `b` refuses `token`: the start of the first check that answered 401, so the time
    /// a check takes through nginx is not counted; nil when it did not within 5 s.
    func refusal(_ token: String, after revoked: Date) throws -> Double? {
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            let started = Date()
            let check = try b.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"])
            if check.status == 401 { return max(0, started.timeIntervalSince(revoked) * 1000) }
            try #require(check.status == 200, "\(check)")
        }
        return nil
    }
}

@Suite(.serialized) struct SessionCacheEndToEndTests {
    /// Every way a session ends, made through the other responder, the CLI or a DBA's psql.
    enum Path: String, CaseIterable, Sendable {
        case delete, signOut, signOutAll, securityEvent, cliRevoke, prune, revokedAtByHand, expiresAtByHand, userDisabled, userDeleted
    }

    private func end(_ path: Path, _ two: TwoResponders, sub: String, session: (token: String, id: String, user: String)) throws {
        let a = two.a
        let sql = { (statement: String) throws in _ = try a.psql(statement) }
        switch path {
        case .delete:
            let other = try two.signIn(sub)
            let answer = try a.request("DELETE", "/sessions/\(session.id)", headers: ["Authorization": "Bearer \(other.token)"])
            #expect(answer.status == 204, "\(answer)")
        case .signOut:
            #expect(try a.request("POST", "/tokensignout", headers: ["Authorization": "Bearer \(session.token)"]).status == 204)
        case .signOutAll:
            let other = try two.signIn(sub)
            #expect(try a.request("POST", "/tokensignout?all=1", headers: ["Authorization": "Bearer \(other.token)"]).status == 204)
        case .securityEvent:
            let event = try SecurityEventToken(events: SecurityEventToken.event("sessions-revoked", sub: sub), audience: a.clientID).signed(by: a)
            #expect(try a.request("POST", "/risc", headers: ["Content-Type": "application/secevent+jwt"], body: event).status == 202)
        case .cliRevoke:
            let result = try run(Paths.binary, ["sessions", "revoke", "--session", session.id], environment: a.databaseEnvironment)
            #expect(result.status == 0, "\(result.stderr)")
        case .prune:
            // Idle in the database (last_seen_at is not a column the triggers watch), then pruned away.
            try sql("UPDATE signin.sessions SET last_seen_at = now() - interval '8 days' WHERE id = \(session.id)")
            let result = try run(Paths.binary, ["prune"], environment: a.databaseEnvironment)
            #expect(result.status == 0 && result.stdout.contains("pruned 1 session"), "\(result.stdout) \(result.stderr)")
        case .revokedAtByHand:
            try sql("UPDATE signin.sessions SET revoked_at = now(), revoked_reason = 'operator' WHERE id = \(session.id)")
        case .expiresAtByHand:
            try sql("UPDATE signin.sessions SET expires_at = now() - interval '1 second', created_at = now() - interval '1 hour' WHERE id = \(session.id)")
        case .userDisabled:
            try sql("UPDATE signin.users SET disabled_at = now() WHERE id = \(session.user)")
        case .userDeleted:
            try sql("DELETE FROM signin.users WHERE id = \(session.user)")
        }
    }

    @Test func everyWayASessionEndsIsRefusedByTheOtherResponderWithin50ms() throws {
        let two = try TwoResponders("cache")
        var delays: [String] = []
        for (index, path) in Path.allCases.enumerated() {
            let sub = "3900000000000000000\(String(format: "%02d", index))"
            let session = try two.signIn(sub)
            try two.cached(session.token)
            try end(path, two, sub: sub, session: session)
            let delay = try two.refusal(session.token, after: Date())
            #expect(delay.map { $0 <= 50 } == true, "\(path): refused after \(delay.map { "\($0) ms" } ?? "more than 5 s")")
            delays.append("\(path.rawValue)=\(Int(delay ?? -1))ms")
        }
        print("revocation seen by the other responder: \(delays.joined(separator: " "))")
    }

    /// Every responder connection terminated: the listener reconnects, the cache is refilled and kept true again.
    @Test func afterItsConnectionsAreTerminatedTheCacheIsTrueAgain() throws {
        let two = try TwoResponders("cacheterm")
        let session = try two.signIn("391000000000000000001")
        try two.cached(session.token)
        _ = try two.a.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
        // The first checks after it may go to PostgreSQL (the cache is emptied and waits for a heartbeat).
        try two.cached(session.token)
        try end(.revokedAtByHand, two, sub: "391000000000000000001", session: session)
        let delay = try two.refusal(session.token, after: Date())
        #expect(delay.map { $0 <= 50 } == true, "refused after \(delay.map { "\($0) ms" } ?? "more than 5 s")")
    }

    /// PostgreSQL restarted (a private cluster): checks go to it again once it is back, and the cache is true again.
    @Test func afterPostgreSQLRestartsTheCacheIsTrueAgain() throws {
        let root = ProcessInfo.processInfo.environment["TS_TEST_RUNDIR"] ?? NSTemporaryDirectory()
        let folder = root + "/cache-restart-\(getpid())/pg"
        let pgPort = String(57000 + Int(getpid() % 1000))
        let cluster = Paths.script("pgcluster")
        try run(cluster, ["start", folder, pgPort])
        defer { _ = try? run(cluster, ["stop", folder, pgPort]) }
        let host = try #require(try run(cluster, ["env", folder, pgPort]).stdout.firstMatch(of: /PGHOST='([^']*)'/)?.1)
        let two = try TwoResponders("cacherestart", postgres: ["PGHOST": String(host), "PGPORT": pgPort, "PGUSER": "postgres"])
        let session = try two.signIn("392000000000000000001")
        try two.cached(session.token)
        try run(cluster, ["restart", folder, pgPort])
        // While it was down nothing could be trusted; once back the cache fills again from PostgreSQL.
        try two.cached(session.token)
        try end(.userDisabled, two, sub: "392000000000000000001", session: session)
        let delay = try two.refusal(session.token, after: Date())
        #expect(delay.map { $0 <= 50 } == true, "refused after \(delay.map { "\($0) ms" } ?? "more than 5 s")")
    }

    /// `TOKENSIGNIN_SESSION_CACHE=off`: every check asks PostgreSQL, the cache's metrics are absent.
    @Test func turnedOffEveryCheckAsksPostgreSQL() throws {
        let stack = try Stack("cacheoff", environment: ["TOKENSIGNIN_SESSION_CACHE": "off"])
        let answer = try stack.signIn(try stack.token(sub: "393000000000000000001"))
        let token = try #require((answer.json["session"] as? [String: Any])?["token"] as? String)
        for _ in 0..<3 { #expect(try stack.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"]).status == 200) }
        let metrics = try stack.operatorsRequest("GET", "/metrics").body
        #expect(!metrics.contains("tokensignin_session_cache"))
        #expect(metrics.contains(#"tokensignin_database_seconds_count{operation="check_session"} 3"#), "\(metrics)")
        #expect(stack.serverLog.contains("session_cache=off"))
    }
}
