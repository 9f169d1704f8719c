// What a sign-in writes since sql/015 (signin.sign_in): the user row only when the profile changed or
// last_sign_in_at is an hour old, the audit row without a foreign key, the domains that replaced the columns'
// CHECK constraints, and the migration that brought them keeping the views and triggers as they were.
import Foundation
@testable import IDToken
@testable import Sessions
import Store
import TestSupport
import Testing

@Suite struct SignInWriteTests {
    static func store(_ db: TestDatabase) -> PostgresStore { TestStores.store(db) }

    /// The user row's version (ctid and xmin change with every write), updated_at and last_sign_in_at.
    static func userRow(_ sql: Connection, _ sub: String) throws -> [String?] {
        let row = try sql.query("""
            SELECT ctid::text || '/' || xmin::text, updated_at::text, last_sign_in_at::text, email
              FROM signin.users WHERE google_sub = $1
            """, [sub])
        return (0..<4).map { row[0, $0] }
    }

    @Test func aReturningSignInWithTheSameClaimsWritesNoUserRow() throws {
        let db = try TestDatabase.migrated("write_same")
        let store = Self.store(db)
        let sql = try db.connect()
        _ = try store.signIn(verifiedToken(sub: "sub-same"), TestStores.session())
        let before = try Self.userRow(sql, "sub-same")
        guard case .signedIn(let again) = try store.signIn(verifiedToken(sub: "sub-same"), TestStores.session()) else {
            Issue.record("refused")
            return
        }
        #expect(!again.created)
        #expect(try Self.userRow(sql, "sub-same") == before, "the row was not written")
        #expect(try sql.query("SELECT count(*) FROM signin.sign_ins WHERE google_sub = 'sub-same' AND outcome = 'success'")[0, 0] == "2")
        #expect(try sql.query("SELECT count(*) FROM signin.sessions WHERE revoked_at IS NULL")[0, 0] == "2")
    }

    @Test func aChangedClaimUpdatesTheProfileAndUpdatedAt() throws {
        let db = try TestDatabase.migrated("write_changed")
        let store = Self.store(db)
        let sql = try db.connect()
        _ = try store.signIn(verifiedToken(sub: "sub-moved"), TestStores.session())
        try sql.query("UPDATE signin.users SET updated_at = updated_at - interval '1 day'")
        let before = try Self.userRow(sql, "sub-moved")
        _ = try store.signIn(verifiedToken(sub: "sub-moved", email: "ada@example.org"), TestStores.session())
        let after = try Self.userRow(sql, "sub-moved")
        #expect(after[3] == "ada@example.org")
        #expect(after[1] != before[1], "updated_at moved")
        #expect(after[2] != before[2], "the row is written anyway: last_sign_in_at too")
    }

    @Test(arguments: [("2 hours", true), ("59 minutes", false)])
    func lastSignInAtIsWrittenAgainOnceItIsAnHourOld(age: String, rewritten: Bool) throws {
        let db = try TestDatabase.migrated("write_hour")
        let store = Self.store(db)
        let sql = try db.connect()
        _ = try store.signIn(verifiedToken(sub: "sub-hour"), TestStores.session())
        try sql.query("UPDATE signin.users SET last_sign_in_at = now() - $1::interval, updated_at = now() - interval '1 day'", [age])
        let before = try Self.userRow(sql, "sub-hour")
        _ = try store.signIn(verifiedToken(sub: "sub-hour"), TestStores.session())
        let after = try Self.userRow(sql, "sub-hour")
        #expect((after[2] != before[2]) == rewritten)
        #expect(after[1] == before[1], "the profile did not change: updated_at stays")
        let fresh = try sql.query("SELECT last_sign_in_at > now() - interval '1 minute' FROM signin.users")[0, 0]
        #expect(fresh == (rewritten ? "t" : "f"))
    }

    @Test func aRefusedAccountGetsItsNewClaimsButNotASignInTime() throws {
        let db = try TestDatabase.migrated("write_refused")
        let store = Self.store(db)
        let sql = try db.connect()
        _ = try store.signIn(verifiedToken(sub: "sub-off"), TestStores.session())
        try sql.query("UPDATE signin.users SET disabled_at = now(), last_sign_in_at = now() - interval '2 hours'")
        let before = try Self.userRow(sql, "sub-off")
        guard case .refused(_, let reason) = try store.signIn(verifiedToken(sub: "sub-off", name: "Ada L."), TestStores.session()) else {
            Issue.record("signed in")
            return
        }
        #expect(reason == .accountDisabled)
        let after = try Self.userRow(sql, "sub-off")
        #expect(after[2] == before[2], "no sign-in happened")
        #expect(try sql.query("SELECT name FROM signin.users")[0, 0] == "Ada L.")
        let audit = try sql.query("SELECT outcome, reason, session_id FROM signin.sign_ins ORDER BY id DESC LIMIT 1")
        #expect(audit[0, 0] == "failure" && audit[0, 1] == "account_disabled" && audit[0, 2] == nil)
        #expect(try sql.query("SELECT count(*) FROM signin.sessions")[0, 0] == "1")
    }

    @Test func theAuditOutlivesItsUser() throws {
        let db = try TestDatabase.migrated("write_outlives")
        guard case .signedIn(let signedIn) = try Self.store(db).signIn(verifiedToken(sub: "sub-gone"), TestStores.session()) else {
            Issue.record("refused")
            return
        }
        let sql = try db.connect()
        try sql.query("DELETE FROM signin.users")
        #expect(try sql.query("SELECT count(*) FROM signin.sessions")[0, 0] == "0", "sessions go with their user")
        let audit = try sql.query("SELECT user_id, google_sub FROM signin.sign_ins")
        #expect(audit.count == 1 && audit[0, 0] == String(signedIn.userID) && audit[0, 1] == "sub-gone")
    }

    /// The rules the columns' CHECK constraints held until sql/015 hold as domains (and the multi-column ones as
    /// table CHECKs): each bad write is refused with check_violation, names its constraint and changes nothing.
    @Test(arguments: [
        ("INSERT INTO signin.users (google_sub) VALUES ('')", "google_sub_check"),
        ("INSERT INTO signin.users (google_sub) VALUES (repeat('s', 256))", "google_sub_check"),
        ("UPDATE signin.users SET email = repeat('e', 321)", "email_check"),
        ("UPDATE signin.users SET name = repeat('n', 1025)", "person_name_check"),
        ("UPDATE signin.users SET given_name = repeat('n', 1025)", "person_name_check"),
        ("UPDATE signin.users SET family_name = repeat('n', 1025)", "person_name_check"),
        ("UPDATE signin.users SET picture = repeat('p', 4097)", "picture_url_check"),
        ("UPDATE signin.users SET locale = repeat('l', 65)", "locale_check"),
        ("UPDATE signin.users SET hosted_domain = repeat('h', 254)", "hosted_domain_check"),
        ("UPDATE signin.users SET disabled_at = now(), disabled_reason = repeat('r', 1025)", "operator_note_check"),
        ("UPDATE signin.users SET disabled_reason = 'why'", "users_disabled_reason_needs_disabled_at"),
        ("UPDATE signin.users SET flagged_at = now(), flagged_reason = repeat('f', 65)", "flag_reason_check"),
        ("UPDATE signin.users SET flagged_reason = 'why'", "users_flagged_reason_needs_flagged_at"),
        ("UPDATE signin.sessions SET token_hash = '\\x00'", "sha256_check"),
        ("UPDATE signin.sessions SET revoked_at = now(), revoked_reason = 'bored'", "revoked_reason_check"),
        ("UPDATE signin.sessions SET revoked_reason = 'operator'", "sessions_revoked_reason_with_revoked_at"),
        ("UPDATE signin.sessions SET client_id = repeat('c', 256)", "client_id_check"),
        ("UPDATE signin.sessions SET user_agent = repeat('u', 1025)", "user_agent_check"),
        ("UPDATE signin.sessions SET expires_at = created_at", "sessions_expires_after_creation"),
        ("UPDATE signin.sign_ins SET google_sub = ''", "google_sub_check"),
        ("UPDATE signin.sign_ins SET outcome = 'maybe'", "sign_in_outcome_check"),
        ("UPDATE signin.sign_ins SET outcome = 'failure', reason = 'Not A Code'", "reason_code_check"),
        ("UPDATE signin.sign_ins SET outcome = 'failure'", "sign_ins_failure_has_reason"),
        ("UPDATE signin.sign_ins SET session_id = NULL", "sign_ins_success_has_session"),
        ("UPDATE signin.sign_ins SET client_id = repeat('c', 256)", "client_id_check"),
        ("UPDATE signin.sign_ins SET user_agent = repeat('u', 1025)", "user_agent_check"),
    ])
    func everyColumnRuleStillHolds(statement: String, constraint: String) throws {
        let db = try TestDatabase.migrated("write_rules")
        _ = try Self.store(db).signIn(verifiedToken(sub: "sub-rules"), TestStores.session())
        let sql = try db.connect()
        let everything = """
            SELECT (SELECT string_agg(u::text, ',') FROM signin.users u), (SELECT string_agg(s::text, ',') FROM signin.sessions s),
                   (SELECT string_agg(i::text, ',') FROM signin.sign_ins i)
            """
        let before = try sql.query(everything)
        let error = #expect(throws: StoreError.self) { try sql.query(statement) }
        #expect(error?.sqlState == "23514" && error?.detail.contains("\"\(constraint)\"") == true, "\(String(describing: error))")
        let after = try sql.query(everything)
        #expect((0..<3).map { after[0, $0] } == (0..<3).map { before[0, $0] }, "nothing changed")
    }

    /// sql/015 changes column types under the DBA views and the notification triggers: they come back as they
    /// were, with their comments and grants, and the rows are untouched.
    @Test func theTypeChangeKeepsViewsTriggersCommentsGrantsAndRows() throws {
        let db = try TestDatabase("write_migration")
        let sql = try db.connect()
        try Migrator(directory: SchemaTests.folder(before: "015")).migrate(on: sql)
        try sql.query("""
            WITH u AS (INSERT INTO signin.users (google_sub, email, name, last_sign_in_at) VALUES ('sub-kept', 'k@example.com', 'K', now())
                       RETURNING id),
                 s AS (INSERT INTO signin.sessions (user_id, token_hash, expires_at, client_id, user_agent)
                       SELECT id, sha256('kept'), now() + interval '1 day', 'client', 'agent' FROM u RETURNING id, user_id)
            INSERT INTO signin.sign_ins (user_id, google_sub, outcome, client_id, session_id) SELECT user_id, 'sub-kept', 'success', 'client', id FROM s
            """)
        try sql.query("GRANT SELECT ON signin.sign_ins_per_day TO PUBLIC")
        let catalog = """
            SELECT (SELECT string_agg(c.relname || ':' || coalesce(obj_description(c.oid, 'pg_class'), '') || ':' ||
                                      coalesce(c.relacl::text, '') || ':' ||
                                      (SELECT string_agg(a.attname || '=' || coalesce(col_description(c.oid, a.attnum), ''), ','
                                                         ORDER BY a.attnum)
                                         FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0), ';' ORDER BY c.relname)
                      FROM pg_class c WHERE c.relkind = 'v' AND c.relnamespace = 'signin'::regnamespace),
                   (SELECT string_agg(t.tgname || ':' || t.tgtype || ':' || t.tgattr::text || ':' ||
                                      coalesce(obj_description(t.oid, 'pg_trigger'), ''), ';' ORDER BY t.tgname)
                      FROM pg_trigger t WHERE NOT t.tgisinternal AND t.tgrelid::regclass::text LIKE 'signin.%'),
                   (SELECT string_agg(u::text, ',') FROM signin.users u), (SELECT string_agg(s::text, ',') FROM signin.sessions s),
                   (SELECT string_agg(i::text, ',') FROM signin.sign_ins i),
                   (SELECT string_agg(a::text, ',') FROM signin.active_sessions a)
            """
        let before = try sql.query(catalog)
        try Migrator(directory: repositoryRoot + "/sql").migrate(on: sql)
        let after = try sql.query(catalog)
        for column in 0..<6 { #expect(after[0, column] == before[0, column], "column \(column)") }
        #expect(before[0, 0]?.contains("=r/") == true && before[0, 1]?.contains("users_notify_changed") == true)
        // The domains are enforced for every value written (NOT VALID only spares the scan).
        #expect(try sql.query("SELECT count(*) FROM pg_constraint WHERE contypid <> 0 AND connamespace = 'signin'::regnamespace")[0, 0] == "14")
        #expect(try sql.query("SELECT count(*) FROM pg_constraint WHERE conrelid = 'signin.sign_ins'::regclass AND contype = 'f'")[0, 0] == "0")
    }
}
