// PostgresStore against the real schema: what only the SQL itself can show (races, truncation, constraints,
// the once-a-minute last_seen_at write, the audit rows). The behaviour both stores share is StoreContractTests.
import Foundation
@testable import IDToken
import Logging
@testable import Sessions
import Store
import Synchronization
import TestSupport
import Testing

@Suite struct PostgresStoreTests {
    static let policy = TestStores.policy

    static func store(_ db: TestDatabase) -> PostgresStore { TestStores.store(db) }

    static func session(_ hash: SessionToken.Hash = SessionToken.generate().hash, agent: String? = "Test/1.0") -> NewSession {
        TestStores.session(hash, agent: agent)
    }

    @Test func signInWritesTheProfileTheSessionAndTheAuditRow() throws {
        let db = try TestDatabase.migrated("pg_signin")
        let token = SessionToken.generate()
        guard case .signedIn(let signedIn) = try Self.store(db).signIn(verifiedToken(sub: "sub-1"), Self.session(token.hash)) else {
            Issue.record("refused")
            return
        }
        let sql = try db.connect()
        let row = try sql.query("""
            SELECT encode(s.token_hash, 'hex'), s.client_id, host(s.ip), s.user_agent, u.email, u.name,
                   extract(epoch FROM s.expires_at)::bigint, s.expires_at - s.created_at > interval '29 days'
              FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id WHERE s.id = $1
            """, [signedIn.sessionID])
        #expect(row[0, 0] == token.hash.sqlText)
        #expect(row[0, 1] == "1234567890-clientweb.apps.googleusercontent.com" && row[0, 2] == "192.0.2.7" && row[0, 3] == "Test/1.0")
        #expect(row[0, 4] == "ada@example.com" && row[0, 5] == "Ada")
        #expect(row[0, 6] == String(signedIn.expiresAt.unixSeconds) && row[0, 7] == "t")
        let audit = try sql.query("SELECT outcome, reason, session_id, google_sub FROM signin.sign_ins")
        #expect(audit.count == 1 && audit[0, 0] == "success" && audit[0, 1] == nil)
        #expect(audit[0, 2] == String(signedIn.sessionID) && audit[0, 3] == "sub-1")
    }

    @Test func missingEmailVerifiedIsFalseAndLongUserAgentIsCut() throws {
        let db = try TestDatabase.migrated("pg_optional")
        _ = try Self.store(db).signIn(verifiedToken(sub: "sub-o", emailVerified: false),
                                      Self.session(agent: String(repeating: "u", count: 5000)))
        let sql = try db.connect()
        #expect(try sql.query("SELECT email_verified FROM signin.users")[0, 0] == "f")
        #expect(try sql.query("SELECT length(user_agent) FROM signin.sessions")[0, 0] == "1024")
    }

    @Test func emailIsNotAnIdentityTwoSubsWithOneEmailAreTwoUsers() throws {
        let db = try TestDatabase.migrated("pg_email")
        let store = Self.store(db)
        let a = try store.signIn(verifiedToken(sub: "sub-a", email: "same@example.com"), Self.session())
        let b = try store.signIn(verifiedToken(sub: "sub-b", email: "same@example.com"), Self.session())
        guard case .signedIn(let first) = a, case .signedIn(let second) = b else {
            Issue.record("refused")
            return
        }
        #expect(second.created && first.userID != second.userID)
    }

    @Test func concurrentFirstSignInsOfOneNewSubMakeOneUserAndFortySessions() throws {
        let db = try TestDatabase.migrated("pg_race")
        let threads = 40
        let ready = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0), done = DispatchGroup()
        let outcomes = Outcomes()
        let conninfo = db.conninfo
        for _ in 0..<threads {
            done.enter()
            Thread {
                defer { done.leave() }
                let store = PostgresStore(conninfo: conninfo, policy: Self.policy, log: Log { _ in })
                ready.signal()
                go.wait()
                do {
                    guard case .signedIn(let signedIn) = try store.signIn(verifiedToken(sub: "racing-sub"), Self.session()) else {
                        outcomes.fail("refused")
                        return
                    }
                    outcomes.add(created: signedIn.created, userID: signedIn.userID)
                } catch {
                    outcomes.fail("\(error)")
                }
            }.start()
        }
        for _ in 0..<threads { ready.wait() }
        for _ in 0..<threads { go.signal() }
        #expect(done.wait(timeout: .now() + 120) == .success)

        let result = outcomes.snapshot
        #expect(result.failures == [])
        #expect(result.created.filter { $0 }.count == 1)
        #expect(result.created.count == threads)
        #expect(Set(result.userIDs).count == 1)
        let sql = try db.connect()
        #expect(try sql.query("SELECT count(*) FROM signin.users")[0, 0] == "1")
        #expect(try sql.query("SELECT count(*) FROM signin.sessions")[0, 0] == String(threads))
        #expect(try sql.query("SELECT count(*) FROM signin.sign_ins WHERE outcome = 'success'")[0, 0] == String(threads))
    }

    @Test func repeatedTokenHashIsRetryableAndChangesNothing() throws {
        // Only a retry after a lost commit can meet its own hash: the client never got that session.
        let db = try TestDatabase.migrated("pg_dup")
        let store = Self.store(db)
        let hash = SessionToken.generate().hash
        _ = try store.signIn(verifiedToken(sub: "sub-1"), Self.session(hash))
        do {
            _ = try store.signIn(verifiedToken(sub: "sub-new"), Self.session(hash))
            Issue.record("accepted a repeated hash")
        } catch let error as StoreError {
            #expect(error.isRetryable)
        }
        #expect(try db.connect().query("SELECT count(*) FROM signin.users")[0, 0] == "1")
    }

    @Test func schemaRefusesMalformedRowsAsAFaultNotAnOutage() throws {
        let db = try TestDatabase.migrated("pg_bad")
        let store = Self.store(db)
        for (token, session) in [(verifiedToken(sub: "s"), Self.session(SessionToken.Hash(bytes: Array(repeating: 1, count: 31)))),
                                 (verifiedToken(sub: ""), Self.session())] {
            do {
                _ = try store.signIn(token, session)
                Issue.record("accepted")
            } catch let error as StoreError {
                #expect(error.code == .constraintViolation && !error.isRetryable)
            }
        }
        #expect(try db.connect().query("SELECT count(*) FROM signin.users")[0, 0] == "0")
    }

    @Test func checkRefreshesLastSeenAtAtMostOnceAMinute() throws {
        let db = try TestDatabase.migrated("pg_seen")
        let store = Self.store(db)
        let token = SessionToken.generate()
        _ = try store.signIn(verifiedToken(sub: "sub-s"), Self.session(token.hash))
        let sql = try db.connect()
        let setSeen = "UPDATE signin.sessions SET last_seen_at = now() - $1::interval RETURNING last_seen_at::text"
        let lastSeen = "SELECT last_seen_at::text, now() - last_seen_at < interval '5 s' FROM signin.sessions"

        let recent = try sql.query(setSeen, ["30 seconds"])[0, 0]
        #expect(try store.liveSession(token.hash) != nil)
        #expect(try sql.query(lastSeen)[0, 0] == recent)  // not rewritten within the minute

        try sql.query(setSeen, ["2 minutes"])
        #expect(try store.liveSession(token.hash) != nil)
        #expect(try sql.query(lastSeen)[0, 1] == "t")  // refreshed
    }

    /// A session row another transaction holds locked (a sign-out in progress, a DBA's open transaction) never
    /// makes a check wait: it is answered from what is committed, its refresh left to a later check; alone or
    /// in a batch (one transaction for all its checks).
    @Test func aCheckNeverWaitsOnALockedSessionRow() throws {
        let db = try TestDatabase.migrated("pg_locked")
        let store = Self.store(db)
        let (token, other) = (SessionToken.generate(), SessionToken.generate())
        guard case .signedIn(let locked) = try store.signIn(verifiedToken(sub: "sub-l"), Self.session(token.hash)),
              case .signedIn(let free) = try store.signIn(verifiedToken(sub: "sub-f"), Self.session(other.hash)) else {
            Issue.record("refused")
            return
        }
        let dba = try db.connect()
        try dba.query("UPDATE signin.sessions SET last_seen_at = now() - interval '1 hour'")  // both refreshes due
        try dba.query("BEGIN")
        try dba.query("SELECT 1 FROM signin.sessions WHERE id = $1 FOR UPDATE", [locked.sessionID])
        // Waiting would end in lock_timeout (2 s) and an error, not in the session.
        #expect(try store.liveSession(token.hash)?.sessionID == locked.sessionID)
        let batch = try store.liveSessions([token.hash, other.hash]).map { try $0.get()?.sessionID }
        #expect(batch == [locked.sessionID, free.sessionID])
        try dba.query("ROLLBACK")
        let seen = "SELECT now() - last_seen_at < interval '5 s' FROM signin.sessions WHERE id = $1"
        #expect(try dba.query(seen, [locked.sessionID])[0, 0] == "f")  // skipped while locked
        #expect(try dba.query(seen, [free.sessionID])[0, 0] == "t")
        #expect(try store.liveSession(token.hash) != nil)
        #expect(try dba.query(seen, [locked.sessionID])[0, 0] == "t")  // refreshed once the lock is gone
    }

    /// Sign-ins opened together are one transaction holding each user's row until its end; their statements run
    /// in `google_sub` order, so two batches signing in the same users in opposite orders queue behind each
    /// other instead of deadlocking (PostgreSQL would end one with 40P01 after `deadlock_timeout`, 1 s).
    @Test func batchesOfTheSameUsersInOppositeOrdersDoNotDeadlock() throws {
        let db = try TestDatabase.migrated("pg_batch_order")
        for sub in ["sub-a", "sub-b"] { _ = try Self.store(db).signIn(verifiedToken(sub: sub), Self.session()) }
        let dba = try db.connect()
        try dba.query("BEGIN")
        try dba.query("SELECT 1 FROM signin.users WHERE google_sub = 'sub-a' FOR UPDATE")
        // Watched from a connection of its own: a transaction sees pg_stat_activity as it was at its first look.
        let watcher = try db.connect()
        let waiting = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        let outcomes = Mutex<[[String]]>([])
        let done = DispatchGroup()
        for (number, subs) in [["sub-a", "sub-b"], ["sub-b", "sub-a"]].enumerated() {
            let conninfo = db.conninfo
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                let store = PostgresStore(conninfo: conninfo, policy: Self.policy, log: Log { _ in })
                let batch = subs.map { (token: verifiedToken(sub: $0), session: Self.session()) }
                let results = (try? store.signIns(batch)) ?? []
                let named = results.map { result -> String in
                    switch result {
                    case .success(.signedIn): "signed in"
                    case .success(let other): "\(other)"
                    case .failure(let error): "\(error)"
                    }
                }
                outcomes.withLock { $0.append(named) }
            }
            // Each batch is queued on a row lock before the next starts (and the first lock is released).
            var queued = false
            for _ in 0..<500 where !queued {
                queued = try watcher.query(waiting)[0, 0] == String(number + 1)
                if !queued { Thread.sleep(forTimeInterval: 0.002) }
            }
            try #require(queued, "batch \(number) never waited on the lock")
        }
        try dba.query("COMMIT")
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(outcomes.withLock { $0 } == [["signed in", "signed in"], ["signed in", "signed in"]])
    }

    @Test func failureBeforeTheDatabaseIsAuditedWithItsReason() throws {
        let db = try TestDatabase.migrated("pg_audit")
        let store = Self.store(db)
        try store.recordRefusedSignIn(reason: "bad_audience", clientID: nil, ip: "2001:db8::1", userAgent: "UA")
        let row = try db.connect().query("SELECT outcome, reason, host(ip), user_id IS NULL FROM signin.sign_ins")
        #expect(row[0, 0] == "failure" && row[0, 1] == "bad_audience" && row[0, 2] == "2001:db8::1" && row[0, 3] == "t")
        #expect(throws: StoreError(.constraintViolation)) {
            try store.recordRefusedSignIn(reason: "Not A Code", clientID: nil, ip: nil, userAgent: nil)
        }
    }

    @Test func unknownRevocationReasonIsRefused() throws {
        let db = try TestDatabase.migrated("pg_reason")
        _ = try Self.store(db).signIn(verifiedToken(sub: "sub-r"), Self.session())
        #expect(throws: StoreError(.constraintViolation)) {
            try db.connect().query("UPDATE signin.sessions SET revoked_at = now(), revoked_reason = 'because'")
        }
    }

    @Test func lostConnectionIsReestablishedAndTheStatementRunOnce() throws {
        let db = try TestDatabase.migrated("pg_reconnect")
        let store = Self.store(db)
        let token = SessionToken.generate()
        _ = try store.signIn(verifiedToken(sub: "sub-c"), Self.session(token.hash))
        let sql = try db.connect()
        try sql.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", [db.name])
        #expect(try store.liveSession(token.hash)?.sub == "sub-c")
        #expect(try sql.query("SELECT count(*) FROM signin.sessions")[0, 0] == "1")
    }

    /// A batch of sign-ins after the connection was lost runs once on a new one; a batch run again after its
    /// commit (its answer lost) meets its own token hashes: each item is a 503 to retry, and no second session.
    @Test func aBatchOfSignInsRunsOnceAfterALostConnectionAndNeverOpensASessionTwice() throws {
        let db = try TestDatabase.migrated("pg_batch_reconnect")
        let store = Self.store(db)
        _ = try store.signIn(verifiedToken(sub: "sub-x"), Self.session())
        let sql = try db.connect()
        try sql.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", [db.name])
        let batch = ["sub-y", "sub-x", "sub-z"].map { (token: verifiedToken(sub: $0), session: Self.session()) }
        let first = try store.signIns(batch).map { result -> Bool in if case .success(.signedIn) = result { true } else { false } }
        #expect(first == [true, true, true])
        #expect(try sql.query("SELECT count(*) FROM signin.sessions")[0, 0] == "4")
        let again = try store.signIns(batch)
        for result in again {
            guard case .failure(let error as StoreError) = result else {
                Issue.record("expected a retryable failure, got \(result)")
                continue
            }
            #expect(error.code == .connectionLost && error.isRetryable)
        }
        #expect(try sql.query("SELECT count(*) FROM signin.sessions")[0, 0] == "4")
    }

    @Test func operatorStatementsListRevokeAndPrune() throws {
        let db = try TestDatabase.migrated("pg_operator")
        let store = Self.store(db)
        let kept = SessionToken.generate()
        _ = try store.signIn(verifiedToken(sub: "sub-op"), Self.session())
        _ = try store.signIn(verifiedToken(sub: "sub-op"), Self.session(kept.hash))
        #expect(try store.userExists(sub: "sub-op") && !(try store.userExists(sub: "nobody")))
        let sessions = try store.sessions(ofUser: "sub-op")
        #expect(sessions.count == 2 && sessions.allSatisfy { $0.state == "active" })
        #expect(sessions[0].id > sessions[1].id)
        #expect(try store.revokeSession(id: sessions[1].id))
        #expect(!(try store.revokeSession(id: sessions[1].id)))
        #expect(try store.sessions(ofUser: "sub-op")[1].state == "revoked:operator")
        let sql = try db.connect()
        try sql.query("UPDATE signin.sessions SET revoked_at = now() - interval '31 days' WHERE id = $1", [sessions[1].id])
        let pruned = try store.prune(PrunePolicy(batch: 1))
        #expect(pruned.sessions == 1 && pruned.signIns == 0)
        #expect(try store.liveSession(kept.hash) != nil)
        #expect(try sql.query("SELECT count(*) FROM signin.sign_ins")[0, 0] == "2")  // audit kept
        #expect(try store.revokeSessions(ofUser: "sub-op") == 1)
        #expect(try store.liveSession(kept.hash) == nil)
    }
}

/// What the racing threads saw.
final class Outcomes: @unchecked Sendable {
    // SAFETY: every access to the arrays holds `lock`.
    private let lock = NSLock()
    private var created: [Bool] = [], userIDs: [Int64] = [], failures: [String] = []
    func add(created c: Bool, userID: Int64) { lock.withLock { created.append(c); userIDs.append(userID) } }
    func fail(_ message: String) { lock.withLock { failures.append(message) } }
    var snapshot: (created: [Bool], userIDs: [Int64], failures: [String]) {
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
