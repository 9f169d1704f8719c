// The sign-in, session lookup and revocation statements against the real schema.
import Foundation
import TestSupport
@testable import SignIn
import Store
import Testing

@Suite struct SignInStatementTests {
    /// Parameters of one sign-in for `sub`, with a fresh random token hash.
    static func params(sub: String, email: String = "ada@example.com", name: String = "Ada",
                       tokenHash: String = randomHex()) -> [String?] {
        [sub, email, "true", name, "Ada", "Lovelace", "https://example.com/a.png", "en", nil,
         tokenHash, "30 days", "client-web.apps.googleusercontent.com", "Test/1.0", "192.0.2.7"]
    }

    @Test func firstSignInCreatesTheUserAndASession() throws {
        let db = try TestDatabase.migrated("signin_first")
        let connection = try db.connect()
        let hash = randomHex()
        let rows = try connection.execute(Queries.signIn, Self.params(sub: "sub-1", tokenHash: hash))
        #expect(rows.count == 1)
        #expect(rows[row: 0, column: "created"] == "t")
        #expect(rows[row: 0, column: "refusal"] == nil)
        #expect(rows[row: 0, column: "google_sub"] == "sub-1")
        let sessionID = try #require(rows[row: 0, column: "session_id"])
        let expires = try #require(rows[row: 0, column: "expires_at"])
        #expect(expires.hasSuffix("Z") && expires.count == 20)

        let session = try connection.query("""
            SELECT encode(token_hash, 'hex'), client_id, host(ip), expires_at - created_at > interval '29 days'
              FROM signin.sessions WHERE id = $1::bigint
            """, [sessionID])
        #expect(session[0, 0] == hash)
        #expect(session[0, 1] == "client-web.apps.googleusercontent.com")
        #expect(session[0, 2] == "192.0.2.7")
        #expect(session[0, 3] == "t")
        let audit = try connection.query("SELECT outcome, reason, session_id::text, google_sub FROM signin.sign_ins")
        #expect(audit.count == 1)
        #expect(audit[0, 0] == "success")
        #expect(audit[0, 1] == nil)
        #expect(audit[0, 2] == sessionID)
        #expect(audit[0, 3] == "sub-1")
    }

    @Test func secondSignInUpdatesTheProfileAndOpensAnotherSession() throws {
        let db = try TestDatabase.migrated("signin_second")
        let connection = try db.connect()
        let first = try connection.execute(Queries.signIn, Self.params(sub: "sub-2"))
        let second = try connection.execute(
            Queries.signIn, Self.params(sub: "sub-2", email: "new@example.com", name: "Ada L."))
        #expect(second[row: 0, column: "created"] == "f")
        #expect(second[row: 0, column: "user_id"] == first[row: 0, column: "user_id"])
        #expect(second[row: 0, column: "email"] == "new@example.com")
        #expect(second[row: 0, column: "session_id"] != first[row: 0, column: "session_id"])
        let users = try connection.query("SELECT count(*), max(name), bool_and(updated_at >= created_at) FROM signin.users")
        #expect(users[0, 0] == "1")
        #expect(users[0, 1] == "Ada L.")
        #expect(try connection.query("SELECT count(*) FROM signin.sessions")[0, 0] == "2")
    }

    @Test func missingEmailVerifiedIsFalseAndLongUserAgentIsCut() throws {
        let db = try TestDatabase.migrated("signin_optional")
        let connection = try db.connect()
        var params = Self.params(sub: "sub-o")
        params[2] = nil
        params[12] = String(repeating: "u", count: 5000)
        try connection.execute(Queries.signIn, params)
        #expect(try connection.query("SELECT email_verified FROM signin.users")[0, 0] == "f")
        #expect(try connection.query("SELECT length(user_agent) FROM signin.sessions")[0, 0] == "1024")
    }

    @Test func emailIsNotAnIdentityTwoSubsWithOneEmailAreTwoUsers() throws {
        let db = try TestDatabase.migrated("signin_email")
        let connection = try db.connect()
        let a = try connection.execute(Queries.signIn, Self.params(sub: "sub-a", email: "same@example.com"))
        let b = try connection.execute(Queries.signIn, Self.params(sub: "sub-b", email: "same@example.com"))
        #expect(b[row: 0, column: "created"] == "t")
        #expect(a[row: 0, column: "user_id"] != b[row: 0, column: "user_id"])
    }

    @Test func concurrentFirstSignInsOfOneNewSubMakeOneUserAndFortySessions() throws {
        let db = try TestDatabase.migrated("signin_race")
        let conninfo = db.conninfo
        let threads = 40
        let ready = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0), done = DispatchGroup()
        let outcomes = Outcomes()
        for _ in 0..<threads {
            done.enter()
            Thread {
                defer { done.leave() }
                do throws(StoreError) {
                    let connection = try Connection(conninfo: conninfo)
                    ready.signal()
                    go.wait()
                    let rows = try connection.execute(Queries.signIn, Self.params(sub: "racing-sub"))
                    outcomes.add(created: rows[row: 0, column: "created"], userID: rows[row: 0, column: "user_id"])
                } catch {
                    ready.signal()
                    outcomes.fail("\(error): \(error.detail)")
                }
            }.start()
        }
        for _ in 0..<threads { ready.wait() }
        for _ in 0..<threads { go.signal() }
        #expect(done.wait(timeout: .now() + 120) == .success)

        let result = outcomes.snapshot
        #expect(result.failures == [])
        #expect(result.created.filter { $0 == "t" }.count == 1)
        #expect(result.created.count == threads)
        #expect(Set(result.userIDs).count == 1)
        let connection = try db.connect()
        #expect(try connection.query("SELECT count(*) FROM signin.users")[0, 0] == "1")
        #expect(try connection.query("SELECT count(*) FROM signin.sessions")[0, 0] == String(threads))
        #expect(try connection.query("SELECT count(*) FROM signin.sign_ins WHERE outcome = 'success'")[0, 0]
                == String(threads))
    }

    @Test func disabledUserGetsNoSessionAndAFailureAuditRow() throws {
        let db = try TestDatabase.migrated("signin_disabled")
        let connection = try db.connect()
        try connection.execute(Queries.signIn, Self.params(sub: "sub-d"))
        try connection.query("""
            UPDATE signin.users SET disabled_at = now(), disabled_reason = 'abuse' WHERE google_sub = $1
            """, ["sub-d"])
        let rows = try connection.execute(Queries.signIn, Self.params(sub: "sub-d"))
        #expect(rows[row: 0, column: "refusal"] == "account_disabled")
        #expect(rows[row: 0, column: "session_id"] == nil)
        #expect(try connection.query("SELECT count(*) FROM signin.sessions")[0, 0] == "1")
        let audit = try connection.query("SELECT outcome, reason FROM signin.sign_ins ORDER BY id DESC LIMIT 1")
        #expect(audit[0, 0] == "failure")
        #expect(audit[0, 1] == "account_disabled")
    }

    @Test func blockedGoogleSignInGetsNoSession() throws {
        let db = try TestDatabase.migrated("signin_blocked")
        let connection = try db.connect()
        try connection.execute(Queries.signIn, Self.params(sub: "sub-x"))
        try connection.query("UPDATE signin.users SET google_sign_in_blocked_at = now() WHERE google_sub = 'sub-x'")
        let rows = try connection.execute(Queries.signIn, Self.params(sub: "sub-x"))
        #expect(rows[row: 0, column: "refusal"] == "google_sign_in_blocked")
        #expect(rows[row: 0, column: "session_id"] == nil)
    }

    @Test func sameTokenHashTwiceIsAUniqueViolationAndChangesNothing() throws {
        let db = try TestDatabase.migrated("signin_dup")
        let connection = try db.connect()
        let hash = randomHex()
        try connection.execute(Queries.signIn, Self.params(sub: "sub-1", tokenHash: hash))
        #expect(throws: StoreError(.uniqueViolation)) {
            try connection.execute(Queries.signIn, Self.params(sub: "sub-new", tokenHash: hash))
        }
        #expect(try connection.query("SELECT count(*) FROM signin.users")[0, 0] == "1")
    }

    @Test(arguments: [
        (0, "not 32 bytes", "sign in with a 31-byte hash"),
        (1, "empty sub", "sign in with an empty sub"),
    ])
    func schemaRefusesMalformedRows(_ which: Int, _ label: String, _ what: String) throws {
        let db = try TestDatabase.migrated("signin_bad_\(which)")
        let connection = try db.connect()
        let params = which == 0 ? Self.params(sub: "s", tokenHash: randomHex(31)) : Self.params(sub: "")
        #expect(throws: StoreError(.constraintViolation), "\(label)") {
            try connection.execute(Queries.signIn, params)
        }
    }

    // MARK: - Session lookup and revocation

    /// A user with one session; returns (token hash, user id).
    static func signedIn(_ connection: Connection, sub: String = "sub-s") throws -> (String, String) {
        let hash = randomHex()
        let rows = try connection.execute(Queries.signIn, params(sub: sub, tokenHash: hash))
        return (hash, rows[row: 0, column: "user_id"]!)
    }

    @Test func liveSessionLooksUpItsUser() throws {
        let db = try TestDatabase.migrated("lookup_live")
        let connection = try db.connect()
        let (hash, userID) = try Self.signedIn(connection)
        let rows = try connection.execute(Queries.checkSession, [hash, "1 hour"])
        #expect(rows.count == 1)
        #expect(rows[row: 0, column: "user_id"] == userID)
        #expect(rows[row: 0, column: "google_sub"] == "sub-s")
        #expect(rows[row: 0, column: "email"] == "ada@example.com")
        #expect(try connection.execute(Queries.checkSession, [randomHex(), "1 hour"]).isEmpty)
    }

    @Test(arguments: [
        ("revoked", "UPDATE signin.sessions SET revoked_at = now(), revoked_reason = 'operator'"),
        ("expired", "UPDATE signin.sessions SET created_at = now() - interval '2 days', expires_at = now() - interval '1 s'"),
        ("idle", "UPDATE signin.sessions SET last_seen_at = now() - interval '2 hours'"),
        ("user disabled", "UPDATE signin.users SET disabled_at = now()"),
    ])
    func deadSessionLooksUpNothing(_ why: String, _ change: String) throws {
        let db = try TestDatabase.migrated("lookup_dead")
        let connection = try db.connect()
        let (hash, _) = try Self.signedIn(connection)
        try connection.query(change)
        #expect(try connection.execute(Queries.checkSession, [hash, "1 hour"]).isEmpty, "\(why)")
    }

    @Test func lookupRefreshesLastSeenAtAtMostOnceAMinute() throws {
        let db = try TestDatabase.migrated("lookup_seen")
        let connection = try db.connect()
        let (hash, _) = try Self.signedIn(connection)
        let setSeen = "UPDATE signin.sessions SET last_seen_at = now() - $1::interval RETURNING last_seen_at::text"
        let lastSeen = "SELECT last_seen_at::text, now() - last_seen_at < interval '5 s' FROM signin.sessions"

        let recent = try connection.query(setSeen, ["30 seconds"])[0, 0]
        #expect(try connection.execute(Queries.checkSession, [hash, "1 hour"]).count == 1)
        #expect(try connection.query(lastSeen)[0, 0] == recent)  // not rewritten within the minute

        try connection.query(setSeen, ["2 minutes"])
        #expect(try connection.execute(Queries.checkSession, [hash, "1 hour"]).count == 1)
        #expect(try connection.query(lastSeen)[0, 1] == "t")  // refreshed
    }

    @Test func revokeOneEndsThatSessionOnly() throws {
        let db = try TestDatabase.migrated("revoke_one")
        let connection = try db.connect()
        let (hash, userID) = try Self.signedIn(connection)
        let (other, _) = try Self.signedIn(connection)
        let revoked = try connection.execute(Queries.signOut, [hash, "1 hour", "false"])
        #expect(revoked.count == 1)
        #expect(revoked[0, 1] == "1")
        #expect(try connection.query("SELECT user_id FROM signin.sessions WHERE token_hash = decode($1, 'hex')", [hash])[0, 0] == userID)
        #expect(try connection.execute(Queries.signOut, [hash, "1 hour", "false"]).isEmpty)  // no longer signed in
        #expect(try connection.execute(Queries.checkSession, [hash, "1 hour"]).isEmpty)
        #expect(try connection.execute(Queries.checkSession, [other, "1 hour"]).count == 1)
        #expect(try connection.query("SELECT revoked_reason FROM signin.sessions WHERE revoked_at IS NOT NULL")[0, 0]
                == "sign_out")
    }

    @Test func revokeAllEndsEverySessionOfThatUserOnly() throws {
        let db = try TestDatabase.migrated("revoke_all")
        let connection = try db.connect()
        let (a1, userID) = try Self.signedIn(connection, sub: "sub-a")
        let (a2, _) = try Self.signedIn(connection, sub: "sub-a")
        let (b1, _) = try Self.signedIn(connection, sub: "sub-b")
        let revoked = try connection.execute(Queries.signOut, [a1, "1 hour", "true"])
        #expect(revoked[0, 1] == "2")
        #expect(try connection.query("SELECT DISTINCT revoked_reason FROM signin.sessions WHERE user_id = $1::bigint", [userID])[0, 0] == "sign_out_all")
        #expect(try connection.execute(Queries.checkSession, [a1, "1 hour"]).isEmpty)
        #expect(try connection.execute(Queries.checkSession, [a2, "1 hour"]).isEmpty)
        #expect(try connection.execute(Queries.checkSession, [b1, "1 hour"]).count == 1)
        #expect(try connection.query("SELECT count(*) FROM signin.active_sessions")[0, 0] == "1")
    }

    @Test func failureBeforeTheDatabaseIsAuditedWithItsReason() throws {
        let db = try TestDatabase.migrated("audit_failure")
        let connection = try db.connect()
        try connection.execute(Queries.signInFailure, ["bad_audience", nil, "2001:db8::1", "UA"])
        let row = try connection.query("SELECT outcome, reason, host(ip), user_id IS NULL FROM signin.sign_ins")
        #expect(row[0, 0] == "failure" && row[0, 1] == "bad_audience" && row[0, 2] == "2001:db8::1" && row[0, 3] == "t")
        #expect(throws: StoreError(.constraintViolation)) {
            try connection.execute(Queries.signInFailure, ["Not A Code", nil, nil, nil])
        }
    }

    @Test func pruningDeletesOnlyLongDeadSessions() throws {
        let db = try TestDatabase.migrated("prune")
        let connection = try db.connect()
        let (live, _) = try Self.signedIn(connection)
        let (old, _) = try Self.signedIn(connection)
        try connection.query("""
            UPDATE signin.sessions SET revoked_at = now() - interval '31 days', revoked_reason = 'sign_out'
             WHERE token_hash = decode($1, 'hex')
            """, [old])
        let pruned = try connection.query("""
            DELETE FROM signin.sessions
             WHERE expires_at < now() - interval '30 days' OR revoked_at < now() - interval '30 days'
            """)
        #expect(pruned.affectedRows == 1)
        #expect(try connection.execute(Queries.checkSession, [live, "1 hour"]).count == 1)
        #expect(try connection.query("SELECT count(*) FROM signin.sign_ins")[0, 0] == "2")  // audit kept
    }

    @Test func unknownRevocationReasonIsRefused() throws {
        let db = try TestDatabase.migrated("revoke_reason")
        let connection = try db.connect()
        let (hash, _) = try Self.signedIn(connection)
        #expect(throws: StoreError(.constraintViolation)) {
            try connection.query("UPDATE signin.sessions SET revoked_at = now(), revoked_reason = 'because' WHERE token_hash = decode($1, 'hex')", [hash])
        }
    }
}

/// What the racing threads saw.
final class Outcomes: @unchecked Sendable {
    // SAFETY: every access to the arrays holds `lock`.
    private let lock = NSLock()
    private var created: [String?] = [], userIDs: [String?] = [], failures: [String] = []
    func add(created c: String?, userID: String?) { lock.withLock { created.append(c); userIDs.append(userID) } }
    func fail(_ message: String) { lock.withLock { failures.append(message) } }
    var snapshot: (created: [String?], userIDs: [String?], failures: [String]) {
        lock.withLock { (created, userIDs, failures) }
    }
}

@Suite struct DatabaseDocsTests {
    @Test(arguments: StatementCatalog.statements)
    func docsShowTheTestedStatementVerbatim(_ statement: Statement) throws {
        let docs = try String(contentsOfFile: repositoryRoot + "/docs/database.md", encoding: .utf8)
        #expect(docs.contains(statement.sql), "docs/database.md is out of date for \(statement.name)")
    }
}
