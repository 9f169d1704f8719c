// The schema as a DBA meets it: every object says what it is for, the views agree with the statements, and the
// migrations that change a big table refuse a half-built index and leave their constraint validated.
import Foundation
@testable import IDToken
import Logging
@testable import Sessions
import Store
import TestSupport
import Testing

@Suite struct SchemaTests {
    @Test func everyTableViewColumnIndexAndFunctionOfSigninHasAComment() throws {
        let db = try TestDatabase.migrated("schema_comments")
        let missing = try db.connect().query("""
            SELECT c.relkind::text || ' ' || c.oid::regclass::text
              FROM pg_class c
             WHERE c.relnamespace = 'signin'::regnamespace AND c.relkind IN ('r', 'v', 'i')
               AND NOT EXISTS (SELECT FROM pg_index i WHERE i.indexrelid = c.oid AND i.indisprimary)
               AND obj_description(c.oid, 'pg_class') IS NULL
            UNION ALL
            SELECT 'column ' || c.oid::regclass::text || '.' || a.attname
              FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
             WHERE c.relnamespace = 'signin'::regnamespace AND c.relkind IN ('r', 'v')
               AND col_description(c.oid, a.attnum) IS NULL
            UNION ALL
            SELECT 'function ' || p.oid::regprocedure::text
              FROM pg_proc p WHERE p.pronamespace = 'signin'::regnamespace AND obj_description(p.oid, 'pg_proc') IS NULL
            """)
        #expect(missing.isEmpty, "\((0..<missing.count).map { missing[$0, 0] ?? "" })")
    }

    /// Migration 012: only an unparsed security event may lack its iat, it must keep its claims and why, and it can
    /// name no user nor have changed anything; an event that was read keeps no claims.
    @Test(arguments: [
        ("'recorded', NULL, NULL, NULL, NULL, NULL", "security_events_issued_at_unless_unparsed"),
        ("'unparsed', now(), NULL, 'r', NULL, NULL", "security_events_unparsed_keeps_claims"),
        ("'unparsed', now(), '{}', NULL, NULL, NULL", "security_events_unparsed_keeps_claims"),
        ("'recorded', now(), '{}', 'r', NULL, NULL", "security_events_unparsed_keeps_claims"),
        ("'unparsed', NULL, '{}', 'r', '1', NULL", "security_events_unparsed_changes_nothing"),
        ("'unparsed', NULL, '{}', 'r', NULL, now()", "security_events_applied_with_user"),
        ("'ignored', now(), NULL, NULL, NULL, NULL", "security_events_outcome_check"),
        ("'unparsed', NULL, repeat('x', 131073), 'r', NULL, NULL", "security_events_claims_check"),
    ])
    func theSecurityEventChecksKeepUnparsedRowsApart(values: String, constraint: String) throws {
        let db = try TestDatabase.migrated("schema_unparsed")
        let sql = try db.connect()
        try sql.query("""
            INSERT INTO signin.security_events (jti, issuer, event_type, outcome, issued_at, claims, unparsed_reason)
            VALUES ('ok-1', 'https://accounts.google.com/', 'unparsed', 'unparsed', NULL, '{}', 'bad_claim_type: claim iat')
            """)
        do {
            try sql.query("""
                INSERT INTO signin.security_events (jti, issuer, event_type, outcome, issued_at, claims, unparsed_reason, subject_sub,
                                                    applied_at)
                VALUES ('bad-1', 'https://accounts.google.com/', 'x', \(values))
                """)
            Issue.record("accepted: \(values)")
        } catch {
            #expect(error.sqlState == "23514" && error.detail.contains(constraint), "\(error.detail)")
        }
    }

    @Test func activeSessionsAreExactlyTheOnesTheCheckAccepts() throws {
        let db = try TestDatabase.migrated("schema_active")
        let week = SessionPolicy(lifetime: 30 * 86_400, idleTimeout: 7 * 86_400, maxSessionsPerUser: 100)
        let service = PostgresStore(conninfo: db.conninfo, policy: week, log: Log { _ in }, recordsSettings: true)
        var sessions: [(name: String, id: Int64, hash: SessionToken.Hash)] = []
        for (name, sub) in [("live", "sub-1"), ("live2", "sub-1"), ("idle", "sub-1"), ("revoked", "sub-1"), ("expired", "sub-1"),
                            ("disabled", "sub-2")] {
            let session = try TestStores.signIn(service, sub)
            sessions.append((name, session.id, session.hash))
        }
        let sql = try db.connect()
        try sql.query("UPDATE signin.sessions SET last_seen_at = now() - interval '8 days' WHERE id = $1", [sessions[2].id])
        try sql.query("UPDATE signin.sessions SET revoked_at = now(), revoked_reason = 'operator' WHERE id = $1", [sessions[3].id])
        try sql.query("UPDATE signin.sessions SET created_at = now() - interval '31 days', expires_at = now() - interval '1 day' WHERE id = $1",
                      [sessions[4].id])
        try sql.query("UPDATE signin.users SET disabled_at = now() WHERE google_sub = 'sub-2'")

        let view = try sql.query("""
            SELECT session_id, dies_at = least(expires_at, last_seen_at + interval '7 days') FROM signin.active_sessions ORDER BY session_id
            """)
        let inView = Set((0..<view.count).map { Int64(view[$0, 0] ?? "") })
        #expect(inView == [sessions[0].id, sessions[1].id])
        #expect((0..<view.count).allSatisfy { view[$0, 1] == "t" })
        for session in sessions {
            #expect(try (service.liveSession(session.hash) != nil) == inView.contains(session.id), "\(session.name)")
        }
        let perUser = try sql.query("SELECT google_sub, active_sessions FROM signin.active_sessions_per_user")
        #expect(perUser.count == 1 && perUser[0, 0] == "sub-1" && perUser[0, 1] == "2")
    }

    @Test func signInsPerDayCountAttemptsByUTCDayOutcomeAndReason() throws {
        let db = try TestDatabase.migrated("schema_per_day")
        let sql = try db.connect()
        try sql.query("INSERT INTO signin.users (google_sub) VALUES ('sub-d')")
        try sql.query("""
            INSERT INTO signin.sign_ins (at, user_id, outcome, reason, session_id)
            SELECT at::timestamptz, CASE WHEN known THEN (SELECT id FROM signin.users) END, outcome, reason, 1
              FROM (VALUES ('2026-01-01T23:59:59+00:00', true, 'success', NULL),
                           ('2026-01-01T23:30:00-05:00', true, 'success', NULL),
                           ('2026-01-01T10:00:00Z', false, 'failure', 'expired'),
                           ('2026-01-01T11:00:00Z', true, 'failure', 'account_disabled'),
                           ('2026-01-01T12:00:00Z', false, 'failure', 'expired')) AS t (at, known, outcome, reason)
            """)
        let rows = try sql.query("""
            SELECT day::text, outcome, coalesce(reason, '-'), attempts, known_user_attempts FROM signin.sign_ins_per_day
             ORDER BY 1, 2, 3
            """)
        #expect((0..<rows.count).map { row in (0..<5).map { rows[row, $0] ?? "" }.joined(separator: " ") } == [
            "2026-01-01 failure account_disabled 1 1",
            "2026-01-01 failure expired 2 0",
            "2026-01-01 success - 1 1",
            "2026-01-02 success - 1 1",
        ])
    }

    @Test func flaggedUsersAreTheDisabledTheBlockedAndTheFlagged() throws {
        let db = try TestDatabase.migrated("schema_flagged")
        let store = PostgresStoreTests.store(db)
        for sub in ["sub-ok", "sub-disabled", "sub-blocked", "sub-flagged"] { _ = try TestStores.signIn(store, sub) }
        let sql = try db.connect()
        try sql.query("UPDATE signin.users SET disabled_at = now(), disabled_reason = 'abuse' WHERE google_sub = 'sub-disabled'")
        try sql.query("UPDATE signin.users SET google_sign_in_blocked_at = now() WHERE google_sub = 'sub-blocked'")
        try sql.query("UPDATE signin.users SET flagged_at = now(), flagged_reason = 'bulk-account' WHERE google_sub = 'sub-flagged'")
        let rows = try sql.query("SELECT google_sub, disabled_reason, unrevoked_sessions FROM signin.flagged_users ORDER BY google_sub")
        #expect((0..<rows.count).map { "\(rows[$0, 0] ?? "") \(rows[$0, 1] ?? "-") \(rows[$0, 2] ?? "")" }
                == ["sub-blocked - 1", "sub-disabled abuse 1", "sub-flagged - 1"])
    }

    /// sql/ up to (not including) `before`, for building a database as an older release left it.
    static func folder(before: String) throws -> String {
        let dir = NSTemporaryDirectory() + "migrations-\(randomHex(4))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for file in try FileManager.default.contentsOfDirectory(atPath: repositoryRoot + "/sql")
        where Migration.isMigrationFileName(file) && file < before {
            try FileManager.default.copyItem(atPath: repositoryRoot + "/sql/" + file, toPath: dir + "/" + file)
        }
        return dir
    }

    @Test func aHandBuiltIndexOfAnotherShapeStopsTheIndexMigration() throws {
        let db = try TestDatabase("schema_bad_index")
        let sql = try db.connect()
        try Migrator(directory: Self.folder(before: "008")).migrate(on: sql)
        try sql.query("CREATE INDEX sessions_user_id_idx ON signin.sessions (user_id)")
        let error = #expect(throws: StoreError.self) { try Migrator(directory: repositoryRoot + "/sql").migrate(on: sql) }
        #expect(error?.code == .badMigration && error?.detail.contains("008_session_indexes.sql") == true, "\(String(describing: error))")
        #expect(try sql.query("SELECT count(*) FROM signin.schema_migrations WHERE name >= '008'")[0, 0] == "0")
        #expect(try sql.query("SELECT to_regclass('signin.sessions_user_id_live_idx') IS NOT NULL")[0, 0] == "t", "nothing dropped")
    }

    @Test func indexesBuiltConcurrentlyBeforehandAreKeptAndTheOldOneGoes() throws {
        let db = try TestDatabase("schema_concurrent")
        let sql = try db.connect()
        try Migrator(directory: Self.folder(before: "008")).migrate(on: sql)
        // The runbook of 008's header, outside any transaction.
        try sql.query("CREATE INDEX CONCURRENTLY IF NOT EXISTS sessions_user_id_idx ON signin.sessions (user_id, revoked_at)")
        let built = try sql.query("SELECT 'signin.sessions_user_id_idx'::regclass::oid")[0, 0]
        try Migrator(directory: Self.folder(before: "011")).migrate(on: sql)
        #expect(try sql.query("SELECT 'signin.sessions_user_id_idx'::regclass::oid")[0, 0] == built)
        #expect(try sql.query("SELECT to_regclass('signin.sessions_user_id_live_idx') IS NULL")[0, 0] == "t")
        let check = try sql.query("SELECT convalidated FROM pg_constraint WHERE conname = 'sessions_revoked_reason_check'")
        #expect(check.count == 1 && check[0, 0] == "t", "009's check is validated by 010 (015 makes it a domain's)")
        try Migrator(directory: repositoryRoot + "/sql").migrate(on: sql)
        #expect(try sql.query("SELECT 'signin.sessions_user_id_idx'::regclass::oid")[0, 0] == built)
    }
}
