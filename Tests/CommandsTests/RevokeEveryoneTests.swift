// `tokensignin sessions revoke --all [--created-before TIMESTAMP]`: signing everyone out, its RFC 3339 timestamps,
// and the restore runbook it serves (a dump taken before a sign-out brings the session back to life).
import Foundation
@testable import IDToken
import Logging
@testable import Sessions
import Store
import TestSupport
import Testing

@Suite struct RevokeEveryoneTests {
    static func signIn(_ store: PostgresStore, _ sub: String) throws -> (id: Int64, hash: SessionToken.Hash) {
        try TestStores.signIn(store, sub)
    }

    static func reasons(_ db: TestDatabase) throws -> [String: String?] {
        let rows = try db.connect().query("SELECT id, revoked_reason FROM signin.sessions")
        return Dictionary(uniqueKeysWithValues: (0..<rows.count).map { (rows[$0, 0] ?? "", rows[$0, 1]) })
    }

    @Test func everySessionNotYetDeadIsRevokedIdleOnesTooBatchAfterBatch() throws {
        let db = try TestDatabase.migrated("revoke_all")
        let store = TestStores.store(db)
        let live = try Self.signIn(store, "sub-a"), idle = try Self.signIn(store, "sub-a"), signedOut = try Self.signIn(store, "sub-a")
        let expired = try Self.signIn(store, "sub-b"), other = try Self.signIn(store, "sub-b"), third = try Self.signIn(store, "sub-c")
        _ = try store.signOut(signedOut.hash, everywhere: false)
        let sql = try db.connect()
        try sql.query("UPDATE signin.sessions SET last_seen_at = now() - interval '20 days' WHERE id = $1", [idle.id])
        try sql.query("UPDATE signin.sessions SET created_at = now() - interval '31 days', expires_at = now() - interval '1 day' WHERE id = $1",
                      [expired.id])

        let done = try store.revokeAllSessions(createdBefore: nil, batch: 2)
        #expect(done.revoked == 4)
        let reasons = try Self.reasons(db)
        for id in [live.id, idle.id, other.id, third.id] { #expect(reasons[String(id)] == "operator_all", "session \(id)") }
        #expect(reasons[String(signedOut.id)] == "sign_out", "an earlier revocation keeps its reason")
        #expect(reasons[String(expired.id)] == .some(nil), "an expired session is dead already")
        for hash in [live.hash, other.hash, third.hash] { #expect(try store.liveSession(hash) == nil) }
        #expect(try store.revokeAllSessions(createdBefore: nil).revoked == 0)
    }

    @Test func createdBeforeKeepsTheNewerSessionsAndNeverReachesPastNow() throws {
        let db = try TestDatabase.migrated("revoke_before")
        let store = TestStores.store(db)
        let old = try Self.signIn(store, "sub-old"), new = try Self.signIn(store, "sub-new")
        let sql = try db.connect()
        try sql.query("UPDATE signin.sessions SET created_at = now() - interval '2 days' WHERE id = $1", [old.id])
        let dayAgo = try #require(try sql.query("""
            SELECT to_char((now() - interval '1 day') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
            """)[0, 0])
        let env = ["TOKENSIGNIN_DATABASE_URL": databaseURL(db.name)]

        let run = runCommand(["sessions", "revoke", "--all", "--created-before", dayAgo], environment: env)
        #expect(run.status == 0, "\(run.err)")
        #expect(run.out == ["revoked 1 session(s) created before \(dayAgo.dropLast()).000000Z"])
        #expect(try store.liveSession(old.hash) == nil && store.liveSession(new.hash) != nil)

        // A cutoff in the future is now: what is opened while the command runs is kept, and the command ends.
        let future = runCommand(["sessions", "revoke", "--created-before", "2999-01-01T00:00:00+01:00", "--all"], environment: env)
        #expect(future.status == 0, "\(future.err)")
        #expect(future.out.count == 1 && future.out[0].hasPrefix("revoked 1 session(s) created before 20")
                && !future.out[0].contains("2999"), "\(future.out)")
        #expect(try store.liveSession(new.hash) == nil)
    }

    /// (arguments after `sessions revoke`): usage errors, exit 2, nothing revoked.
    @Test(arguments: [
        ["--all", "--created-before"],
        ["--all", "--created-before", "yesterday"],
        ["--all", "--created-before", "2026-11-29T12:00:00"],
        ["--all", "--created-before", "2026-02-29T12:00:00Z"],
        ["--all", "--created-before", "2026-11-29T12:00:00Z", "--created-before", "2026-11-29T12:00:00Z"],
        ["--all", "--all"],
        ["--all", "--user", "sub-x"],
        ["--created-before", "2026-11-29T12:00:00Z"],
        ["--all", "extra"],
    ])
    func malformedRevokeAllIsAUsageErrorAndRevokesNothing(arguments: [String]) throws {
        let db = try TestDatabase.migrated("revoke_usage")
        let session = try Self.signIn(TestStores.store(db), "sub-x")
        let run = runCommand(["sessions", "revoke"] + arguments, environment: ["TOKENSIGNIN_DATABASE_URL": databaseURL(db.name)])
        #expect(run.status == 2, "\(arguments): \(run.out) \(run.err)")
        #expect(run.err.joined().contains("usage") || run.err.joined().contains("RFC 3339"), "\(run.err)")
        #expect(try Self.reasons(db)[String(session.id)] == .some(nil))
    }

    @Test(arguments: [
        ("1970-01-01T00:00:00Z", 0),
        ("2026-11-29T12:00:00Z", 1_795_953_600),
        ("2026-11-29t13:00:00.123456789+01:00", 1_795_953_600),
        ("2026-11-29T11:30:00-00:30", 1_795_953_600),
        ("2024-02-29T00:00:00z", 1_709_164_800),
        ("1999-12-31T23:59:59Z", 946_684_799),
        ("2000-03-01T00:00:00Z", 951_868_800),
        ("0001-01-01T00:00:00Z", -62_135_596_800),
        ("2026-11-29T12:00:00-15:59", 1_795_953_600 + 15 * 3_600 + 59 * 60),
    ] as [(String, Int64)])
    func rfc3339TimestampsAreRead(text: String, unixSeconds: Int64) {
        #expect(RFC3339.unixSeconds(parsing: text) == unixSeconds)
    }

    @Test(arguments: [
        "", "2026-11-29", "2026-11-29T12:00:00", "2026-11-29 12:00:00Z", "2026-11-29T12:00Z", "2026-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z",
        "2026-11-29T24:00:00Z", "2026-11-29T23:60:00Z", "2026-11-29T23:59:60Z", "2026-11-29T12:00:00.Z",
        "2026-11-29T12:00:00.1234567890Z", "2026-11-29T12:00:00+0100", "2026-11-29T12:00:00+24:00", "2026-11-29T12:00:00+16:00", "+2026-11-29T12:00:00Z",
        "2026-11-29T12:00:00Z ", "２026-11-29T12:00:00Z", "2026-11-29T12:00:00ZZ", "0000-01-01T00:00:00Z",
        String(repeating: "9", count: 1000),
    ])
    func anythingElseIsNotAnRFC3339Timestamp(text: String) {
        #expect(RFC3339.unixSeconds(parsing: text) == nil, "\(text)")
    }

    /// The runbook of docs/database.md "Backups": a session signed out after the dump is live again in the restored
    /// database, until `sessions revoke --all`; a sign-in after that is kept.
    @Test func aRestoredDumpRevivesSignedOutSessionsUntilEveryoneIsSignedOut() throws {
        let db = try TestDatabase.migrated("backup")
        let store = TestStores.store(db)
        let session = try Self.signIn(store, "sub-restore")
        let dump = NSTemporaryDirectory() + "tokensignin-\(randomHex(4)).dump"
        defer { try? FileManager.default.removeItem(atPath: dump) }
        let environment = ProcessInfo.processInfo.environment
        let dumped = try runProgram("/usr/bin/pg_dump", ["--format=custom", "--file", dump, "--dbname", db.name], environment: environment)
        #expect(dumped.status == 0, "\(dumped.stderrText)")
        #expect(try store.signOut(session.hash, everywhere: true)?.revoked == 1)

        let restored = try TestDatabase("restored")
        let restore = try runProgram("/usr/bin/pg_restore", ["--exit-on-error", "--single-transaction", "--dbname", restored.name, dump],
                                     environment: environment)
        #expect(restore.status == 0, "\(restore.stderrText)")
        let after = TestStores.store(restored)
        #expect(try after.liveSession(session.hash) != nil, "the signed-out session is live again")

        let revoke = runCommand(["sessions", "revoke", "--all"], environment: ["TOKENSIGNIN_DATABASE_URL": databaseURL(restored.name)])
        #expect(revoke.status == 0 && revoke.out.first?.hasPrefix("revoked 1 session(s) created before ") == true, "\(revoke)")
        #expect(try after.liveSession(session.hash) == nil)
        let fresh = try Self.signIn(after, "sub-restore")
        #expect(try after.liveSession(fresh.hash) != nil)
    }
}
