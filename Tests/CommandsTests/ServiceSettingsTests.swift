// One source of truth for the idle timeout: the responder records its session settings in signin.service_settings,
// and prune and `sessions list` judge idleness by them whatever their own environment says.
import Foundation
@testable import IDToken
import Logging
@testable import Sessions
import Store
import TestSupport
import Testing

@Suite struct ServiceSettingsTests {
    /// The service of these tests: sessions live 60 days and die after 30 days unused.
    static let servicePolicy = SessionPolicy(lifetime: 60 * 86_400, idleTimeout: 30 * 86_400, maxSessionsPerUser: 100)

    static func service(_ db: TestDatabase, policy: SessionPolicy = servicePolicy, log: Log = Log { _ in }) -> PostgresStore {
        PostgresStore(conninfo: db.conninfo, policy: policy, log: log, recordsSettings: true)
    }

    /// Signs `sub` in and makes the session unused for `idleDays`.
    static func session(_ store: PostgresStore, _ db: TestDatabase, sub: String, idleDays: Int) throws -> SessionToken.Hash {
        let token = SessionToken.generate()
        guard case .signedIn(let signedIn) = try store.signIn(verifiedToken(sub: sub), TestStores.session(token.hash)) else {
            throw StoreError(.unexpectedResult, "refused")
        }
        try db.connect().query("UPDATE signin.sessions SET last_seen_at = now() - $2::interval WHERE id = $1",
                               [signedIn.sessionID, SQLInterval(seconds: Int64(idleDays) * 86_400)])
        return token.hash
    }

    static func recorded(_ db: TestDatabase) throws -> [String?] {
        let rows = try db.connect().query("""
            SELECT session_idle_timeout::text, session_lifetime::text, updated_by, extract(epoch FROM updated_at)::text
              FROM signin.service_settings
            """)
        return rows.isEmpty ? [] : (0..<4).map { rows[0, $0] }
    }

    @Test func theResponderRecordsItsSettingsOnceAndWarnsWhenAnotherChangesThem() throws {
        let db = try TestDatabase.migrated("settings_record")
        let lines = LockedLines()
        try Self.service(db, log: Log { lines.append($0) }).ping()
        let first = try Self.recorded(db)
        #expect(Array(first.prefix(3)) == ["30 days", "60 days", Version.line])
        #expect(lines.all.filter { $0.contains("event=session_settings_recorded") }.count == 1, "\(lines.all)")

        // Another worker with the same settings writes nothing and says nothing.
        try Self.service(db, log: Log { lines.append($0) }).ping()
        #expect(try Self.recorded(db) == first)
        #expect(lines.all.count == 1)

        // A responder started with another environment changes them, and says so with what they were.
        let week = SessionPolicy(lifetime: 30 * 86_400, idleTimeout: 7 * 86_400, maxSessionsPerUser: 100)
        try Self.service(db, policy: week, log: Log { lines.append($0) }).ping()
        #expect(try Array(Self.recorded(db).prefix(2)) == ["7 days", "30 days"])
        let changed = lines.all.filter { $0.contains("event=session_settings_changed") }
        #expect(changed.count == 1 && changed[0].contains("idle_timeout_before=2592000") && changed[0].contains("idle_timeout=604800"),
                "\(lines.all)")

        // An operator command's store never writes its own.
        let hour = SessionPolicy(lifetime: 3_600, idleTimeout: 3_600, maxSessionsPerUser: 1)
        try PostgresStore(conninfo: db.conninfo, policy: hour, log: Log { _ in }).ping()
        #expect(runCommand(["sessions", "list", "--user", "nobody"],
                           environment: ["TOKENSIGNIN_DATABASE_URL": databaseURL(db.name), "TOKENSIGNIN_SESSION_IDLE_TTL": "1h",
                                         "TOKENSIGNIN_SESSION_TTL": "1h"]).status == 1)
        #expect(try Array(Self.recorded(db).prefix(2)) == ["7 days", "30 days"])
    }

    @Test func aMissingTableOrGrantIsLoggedAndTheRequestStillServed() throws {
        let db = try TestDatabase.migrated("settings_missing")
        try db.connect().query("DROP TABLE signin.service_settings CASCADE")
        let lines = LockedLines()
        let store = Self.service(db, log: Log { lines.append($0) })
        let hash = try Self.session(store, db, sub: "sub-m", idleDays: 0)
        #expect(try store.liveSession(hash) != nil)
        #expect(lines.all.contains { $0.contains("event=session_settings_not_recorded") && $0.contains("sqlstate=42P01") }, "\(lines.all)")
    }

    /// The environments a prune may be started with by mistake: none (defaults: 7 days idle), shorter ones.
    @Test(arguments: [
        [:],
        ["TOKENSIGNIN_SESSION_IDLE_TTL": "1d"],
        ["TOKENSIGNIN_SESSION_IDLE_TTL": "1h", "TOKENSIGNIN_SESSION_TTL": "2h"],
    ])
    func pruneNeverDeletesASessionTheServiceConsidersLive(environment: [String: String]) throws {
        let db = try TestDatabase.migrated("settings_prune")
        let service = Self.service(db)
        let live = try Self.session(service, db, sub: "sub-live", idleDays: 10)
        let dead = try Self.session(service, db, sub: "sub-dead", idleDays: 31)

        let prune = runCommand(["prune"], environment: environment.merging(["TOKENSIGNIN_DATABASE_URL": databaseURL(db.name)]) { $1 })
        #expect(prune.status == 0, "\(prune.err)")
        #expect(prune.out.first?.hasPrefix("idle timeout 30d, as recorded by \(Version.line) at ") == true, "\(prune.out)")
        #expect(prune.out.last == "pruned 1 session(s) and 0 sign-in audit row(s)")
        #expect(try service.liveSession(live) != nil, "the service's live session survived")
        #expect(try service.liveSession(dead) == nil)
        #expect(try db.connect().query("SELECT count(*) FROM signin.sessions")[0, 0] == "1")
    }

    @Test func withNothingRecordedPruneDeletesNoSessionForIdlenessOnlyExpiredOnes() throws {
        let db = try TestDatabase.migrated("settings_none")
        let store = PostgresStore(conninfo: db.conninfo, policy: TestStores.policy, log: Log { _ in })
        _ = try Self.session(store, db, sub: "sub-idle", idleDays: 20)
        let expired = try Self.session(store, db, sub: "sub-expired", idleDays: 0)
        try db.connect().query("""
            UPDATE signin.sessions SET created_at = now() - interval '31 days', expires_at = now() - interval '1 day'
             WHERE token_hash = decode($1, 'hex')
            """, [expired])
        let prune = runCommand(["prune"], environment: ["TOKENSIGNIN_DATABASE_URL": databaseURL(db.name)])
        #expect(prune.status == 0, "\(prune.err)")
        #expect(prune.out == ["idle timeout: none recorded by the responder yet, so no session was pruned for idleness",
                              "pruned 1 session(s) and 0 sign-in audit row(s)"])
        let left = try db.connect().query("SELECT u.google_sub FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id")
        #expect(left.count == 1 && left[0, 0] == "sub-idle")
    }

    @Test func theIdleWalkReachesEverySessionWhateverTheBatch() throws {
        let db = try TestDatabase.migrated("settings_walk")
        let service = Self.service(db)
        // 25 sessions, every other one idle beyond the timeout; batch 1 walks them 10 ids at a time.
        for index in 0..<25 { _ = try Self.session(service, db, sub: "sub-\(index)", idleDays: index % 2 == 0 ? 40 : 1) }
        // Gaps in the ids, as deletions leave them: ids 11...14 go.
        try db.connect().query("DELETE FROM signin.sessions WHERE id IN (SELECT id FROM signin.sessions ORDER BY id LIMIT 4 OFFSET 10)")
        let pruned = try PostgresStore(conninfo: db.conninfo, policy: TestStores.policy, log: Log { _ in })
            .prune(PrunePolicy(batch: 1))
        #expect(pruned.sessions == 11 && pruned.settings?.idleTimeout == 30 * 86_400)
        #expect(try db.connect().query("SELECT count(*) FROM signin.sessions WHERE last_seen_at < now() - interval '30 days'")[0, 0] == "0")
        #expect(try db.connect().query("SELECT count(*) FROM signin.sessions")[0, 0] == "10")
    }

    @Test func sessionsListJudgesIdlenessByTheRecordedTimeout() throws {
        let db = try TestDatabase.migrated("settings_list")
        let service = Self.service(db)
        _ = try Self.session(service, db, sub: "sub-list", idleDays: 10)
        _ = try Self.session(service, db, sub: "sub-list", idleDays: 31)
        let list = runCommand(["sessions", "list", "--user", "sub-list"],
                              environment: ["TOKENSIGNIN_DATABASE_URL": databaseURL(db.name), "TOKENSIGNIN_SESSION_IDLE_TTL": "1d"])
        #expect(list.status == 0, "\(list.err)")
        #expect(list.out.dropFirst().map { $0.split(separator: "\t")[4] } == ["idle", "active"], "\(list.out)")
    }
}
