// The SessionStore contract, run against PostgreSQL (the real statements), the same through a stock PgBouncer in
// transaction pooling mode, and the in-memory store the route tests use, so the fast route tests stand on the
// behaviour of the real one.
import Foundation
@testable import IDToken
import Logging
@testable import Sessions
import Store
import TestSupport
import Testing

/// A store under test, with the hooks a test needs to age, disable or inspect rows behind the store's back.
final class StoreUnderTest: @unchecked Sendable {
    // SAFETY: each test makes its own and uses it from one thread.
    let store: any SessionStore & SecurityEventStore
    let disable: (String) throws -> Void
    let block: (String) throws -> Void
    /// Moves the session's absolute expiry into the past.
    let expire: (Int64) throws -> Void
    /// Makes the session unused for this many seconds.
    let idle: (Int64, Int64) throws -> Void
    let revokedReason: (Int64) throws -> String?
    /// (outcome, reason) of every audit row, oldest first.
    let audit: () throws -> [[String?]]
    /// (blocked, flagged reason) of the user with this sub.
    let userState: (String) throws -> (blocked: Bool, flaggedReason: String?)
    /// (jti, type, outcome, state, sessions revoked, user id is set) of every security event row, oldest first.
    let eventRows: () throws -> [[String?]]
    /// (jti, claims, unparsed reason, issued at in Unix seconds) of every security event row, oldest first.
    let unparsedRows: () throws -> [[String?]]
    private let keepAlive: AnyObject?

    init(store: any SessionStore & SecurityEventStore, disable: @escaping (String) throws -> Void, block: @escaping (String) throws -> Void,
         expire: @escaping (Int64) throws -> Void, idle: @escaping (Int64, Int64) throws -> Void,
         revokedReason: @escaping (Int64) throws -> String?, audit: @escaping () throws -> [[String?]],
         userState: @escaping (String) throws -> (blocked: Bool, flaggedReason: String?),
         eventRows: @escaping () throws -> [[String?]], unparsedRows: @escaping () throws -> [[String?]], keepAlive: AnyObject?) {
        self.userState = userState
        self.eventRows = eventRows
        self.unparsedRows = unparsedRows
        self.store = store
        self.disable = disable
        self.block = block
        self.expire = expire
        self.idle = idle
        self.revokedReason = revokedReason
        self.audit = audit
        self.keepAlive = keepAlive
    }

    enum Kind: String, CaseIterable, Sendable, CustomStringConvertible {
        /// PostgresStore straight to PostgreSQL, and through PgBouncer (`pool_mode = transaction`, two server
        /// sessions shared by the store and the test's own connection).
        case memory, postgres, pgbouncer
        var description: String { rawValue }
    }

    static func make(_ kind: Kind, maxSessions: Int = 100) throws -> StoreUnderTest {
        let policy = SessionPolicy(lifetime: 30 * 86_400, idleTimeout: 7 * 86_400, maxSessionsPerUser: maxSessions)
        switch kind {
        case .memory:
            let memory = InMemoryStore(policy: policy)
            return StoreUnderTest(
                store: memory,
                disable: { sub in for i in memory.users.indices where memory.users[i].sub == sub { memory.users[i].disabled = true } },
                block: { sub in for i in memory.users.indices where memory.users[i].sub == sub { memory.users[i].blockedAt = memory.now } },
                expire: { id in for i in memory.sessions.indices where memory.sessions[i].id == id { memory.sessions[i].expiresAt = memory.now - 1 } },
                idle: { id, seconds in
                    for i in memory.sessions.indices where memory.sessions[i].id == id { memory.sessions[i].lastSeenAt = memory.now - seconds }
                },
                revokedReason: { id in memory.sessions.first { $0.id == id }?.revokedReason },
                audit: { memory.audit.map { [$0.outcome, $0.reason] } },
                userState: { sub in
                    let user = memory.users.first { $0.sub == sub }
                    return (user?.blocked ?? false, user?.flaggedReason)
                },
                eventRows: {
                    memory.events.map { [$0.jti, $0.type, $0.outcome, $0.state, String($0.sessionsRevoked), $0.userID == nil ? "f" : "t"] }
                },
                unparsedRows: { memory.events.map { [$0.jti, $0.claims, $0.unparsedReason, $0.issuedAt.map { String($0) }] } },
                keepAlive: nil)
        case .postgres, .pgbouncer:
            let db = try TestDatabase.migrated("contract")
            let bouncer = kind == .pgbouncer ? try PgBouncer("contract", poolSize: 2) : nil
            let sql = try bouncer.map { try Connection(conninfo: $0.conninfo(db.name), pooler: .transaction) } ?? db.connect()
            let log = Log { _ in }
            let store = if let bouncer {
                PostgresStore(conninfo: bouncer.conninfo(db.name), pooler: .transaction, policy: policy, log: log)
            } else {
                PostgresStore(conninfo: db.conninfo, policy: policy, log: log)
            }
            return StoreUnderTest(
                store: store,
                disable: { sub in try sql.query("UPDATE signin.users SET disabled_at = now() WHERE google_sub = $1", [sub]) },
                block: { sub in try sql.query("UPDATE signin.users SET google_sign_in_blocked_at = now() WHERE google_sub = $1", [sub]) },
                expire: { id in
                    try sql.query("UPDATE signin.sessions SET created_at = now() - interval '2 days', expires_at = now() - interval '1 second' WHERE id = $1", [id])
                },
                idle: { id, seconds in
                    try sql.query("UPDATE signin.sessions SET last_seen_at = now() - $2::interval WHERE id = $1", [id, SQLInterval(seconds: seconds)])
                },
                revokedReason: { id in try sql.query("SELECT revoked_reason FROM signin.sessions WHERE id = $1", [id])[0, 0] },
                audit: {
                    let rows = try sql.query("SELECT outcome, reason FROM signin.sign_ins ORDER BY id")
                    return (0..<rows.count).map { [rows[$0, 0], rows[$0, 1]] }
                },
                userState: { sub in
                    let rows = try sql.query("SELECT google_sign_in_blocked_at IS NOT NULL, flagged_reason FROM signin.users WHERE google_sub = $1", [sub])
                    return (rows[0, 0] == "t", rows[0, 1])
                },
                eventRows: {
                    let rows = try sql.query("SELECT jti, event_type, outcome, state, sessions_revoked, user_id IS NOT NULL FROM signin.security_events ORDER BY id")
                    return (0..<rows.count).map { row in (0..<6).map { rows[row, $0] } }
                },
                unparsedRows: {
                    let rows = try sql.query("SELECT jti, claims, unparsed_reason, extract(epoch FROM issued_at)::bigint FROM signin.security_events ORDER BY id")
                    return (0..<rows.count).map { row in (0..<4).map { rows[row, $0] } }
                },
                keepAlive: Resources(database: db, bouncer: bouncer))
        }
    }
}

/// What a PostgreSQL store under test needs alive as long as it is used.
private final class Resources {
    let database: TestDatabase
    let bouncer: PgBouncer?
    init(database: TestDatabase, bouncer: PgBouncer?) {
        self.database = database
        self.bouncer = bouncer
    }
}

@Suite struct StoreContractTests {
    typealias Kind = StoreUnderTest.Kind

    /// Signs `sub` in and returns the session's id and token hash.
    static func signIn(_ store: any SessionStore, _ sub: String, agent: String? = "Test/1.0",
                       issuedAt: Int64 = 1_800_000_000) throws -> (SignedIn, SessionToken.Hash) {
        let token = SessionToken.generate()
        let outcome = try store.signIn(verifiedToken(sub: sub, issuedAt: issuedAt),
                                       NewSession(tokenHash: token.hash, clientID: "1234567890-web.apps.googleusercontent.com",
                                                  userAgent: agent, ip: "192.0.2.7"))
        guard case .signedIn(let signedIn) = outcome else { throw StoreError(.unexpectedResult, "refused: \(outcome)") }
        return (signedIn, token.hash)
    }

    @Test(arguments: Kind.allCases)
    func firstSignInCreatesTheUserAndLaterOnesReuseIt(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind)
        let (first, hash) = try Self.signIn(s.store, "sub-1")
        #expect(first.created)
        let (second, _) = try Self.signIn(s.store, "sub-1")
        #expect(!second.created)
        #expect(second.userID == first.userID)
        #expect(second.sessionID != first.sessionID)
        #expect(second.expiresAt > first.expiresAt || second.expiresAt == first.expiresAt)

        let live = try #require(try s.store.liveSession(hash))
        #expect(live.sessionID == first.sessionID && live.userID == first.userID && live.sub == "sub-1")
        #expect(live.email == "ada@example.com" && live.emailVerified)
        #expect(live.expiresAt == first.expiresAt)
        #expect(try s.audit() == [["success", nil], ["success", nil]])
    }

    /// The checks lane's batch: each hash answered as `liveSession` answers it alone, the use recorded for each.
    @Test(arguments: Kind.allCases)
    func checksLookedUpTogetherAnswerAsEachAlone(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind)
        let (ada, adaHash) = try Self.signIn(s.store, "sub-ada")
        let (expired, expiredHash) = try Self.signIn(s.store, "sub-exp")
        let (used, usedHash) = try Self.signIn(s.store, "sub-used")
        try s.expire(expired.sessionID)
        try s.idle(used.sessionID, 3_600)
        let before = try #require(try s.store.listSessions(usedHash, limit: 1, after: nil)?.sessions.first)
        let stranger = SessionToken.generate().hash
        let results = try s.store.liveSessions([adaHash, expiredHash, stranger, usedHash, adaHash])
        let found = try results.map { try $0.get()?.sessionID }
        #expect(found == [ada.sessionID, nil, nil, used.sessionID, ada.sessionID])
        #expect(try results[3].get() == s.store.liveSession(usedHash))
        #expect(try results[0].get()?.sub == "sub-ada")
        // The use was recorded: the session unused for an hour was seen just now.
        let after = try #require(try s.store.listSessions(usedHash, limit: 1, after: nil)?.sessions.first)
        #expect(after.lastSeenAt.unixSeconds - before.lastSeenAt.unixSeconds >= 3_500)
        #expect(try s.store.liveSessions([]).isEmpty)
    }

    /// The default lane's batch: sign-ins opened together, each answered as `signIn` answers it alone (a new
    /// user, a known one, a refused account, one new user twice in one batch), every session live for its user,
    /// an audit row each.
    @Test(arguments: Kind.allCases)
    func signInsOpenedTogetherAnswerAsEachAlone(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind)
        let (known, _) = try Self.signIn(s.store, "sub-known")
        _ = try Self.signIn(s.store, "sub-off")
        try s.disable("sub-off")
        let subs = ["sub-zed", "sub-known", "sub-off", "sub-zed", "sub-amy"]
        let sessions = subs.map { _ in SessionToken.generate() }
        let batch = zip(subs, sessions).map { sub, session in
            (token: verifiedToken(sub: sub), session: NewSession(tokenHash: session.hash, clientID: "1234567890-web.apps.googleusercontent.com",
                                                                 userAgent: "Batch/1.0", ip: "192.0.2.8"))
        }
        let outcomes = try s.store.signIns(batch).map { try $0.get() }
        guard case .signedIn(let zed) = outcomes[0], case .signedIn(let again) = outcomes[1],
              case .refused(_, .accountDisabled) = outcomes[2], case .signedIn(let zedAgain) = outcomes[3],
              case .signedIn(let amy) = outcomes[4] else {
            Issue.record("unexpected outcomes \(outcomes)")
            return
        }
        #expect(zed.created && !again.created && !zedAgain.created && amy.created)
        #expect(again.userID == known.userID && zedAgain.userID == zed.userID && amy.userID != zed.userID)
        #expect(Set([zed.sessionID, again.sessionID, zedAgain.sessionID, amy.sessionID]).count == 4)
        for (index, signedIn) in [(0, zed), (1, again), (3, zedAgain), (4, amy)] {
            let live = try #require(try s.store.liveSession(sessions[index].hash))
            #expect(live.sessionID == signedIn.sessionID && live.sub == subs[index])
        }
        #expect(try s.store.liveSession(sessions[2].hash) == nil)
        let audit = try s.audit().dropFirst(2).map { "\($0[0] ?? "-") \($0[1] ?? "-")" }.sorted()
        #expect(audit == ["failure account_disabled", "success -", "success -", "success -", "success -"])
        #expect(try s.store.signIns([]).isEmpty)
    }

    @Test(arguments: Kind.allCases)
    func unknownTokenIsNoSession(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind)
        let stranger = SessionToken.generate().hash
        #expect(try s.store.liveSession(stranger) == nil)
        #expect(try s.store.signOut(stranger, everywhere: true) == nil)
        #expect(try s.store.listSessions(stranger, limit: 10, after: nil) == nil)
        #expect(try s.store.revokeSession(1, presentedBy: stranger) == nil)
    }

    @Test(arguments: Kind.allCases)
    func expiredIdleAndDisabledSessionsAreNotLive(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind)
        let (expired, expiredHash) = try Self.signIn(s.store, "sub-e")
        let (idle, idleHash) = try Self.signIn(s.store, "sub-i")
        let (_, disabledHash) = try Self.signIn(s.store, "sub-d")
        let (_, fineHash) = try Self.signIn(s.store, "sub-f")
        try s.expire(expired.sessionID)
        try s.idle(idle.sessionID, 7 * 86_400 + 5)
        try s.disable("sub-d")
        for hash in [expiredHash, idleHash, disabledHash] {
            #expect(try s.store.liveSession(hash) == nil)
            #expect(try s.store.listSessions(hash, limit: 10, after: nil) == nil)
            #expect(try s.store.signOut(hash, everywhere: false) == nil)
        }
        #expect(try s.store.liveSession(fineHash) != nil)
        // Just inside the idle timeout is still live.
        let (almost, almostHash) = try Self.signIn(s.store, "sub-a")
        try s.idle(almost.sessionID, 7 * 86_400 - 60)
        #expect(try s.store.liveSession(almostHash) != nil)
    }

    @Test(arguments: Kind.allCases)
    func disabledOrBlockedAccountsAreRefusedAndAudited(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind)
        _ = try Self.signIn(s.store, "sub-x")
        _ = try Self.signIn(s.store, "sub-y")
        try s.disable("sub-x")
        try s.block("sub-y")
        for (sub, refusal) in [("sub-x", AccountRefusal.accountDisabled), ("sub-y", .googleSignInBlocked)] {
            let outcome = try s.store.signIn(verifiedToken(sub: sub), NewSession(tokenHash: SessionToken.generate().hash,
                                                                                clientID: "c", userAgent: nil, ip: nil))
            guard case .refused(_, let why) = outcome else {
                Issue.record("\(sub) signed in: \(outcome)")
                continue
            }
            #expect(why == refusal)
        }
        #expect(try s.audit().suffix(2) == [["failure", "account_disabled"], ["failure", "google_sign_in_blocked"]])
        try s.store.recordRefusedSignIn(reason: "bad_signature", clientID: nil, ip: "192.0.2.1", userAgent: nil)
        #expect(try s.audit().last == ["failure", "bad_signature"])
    }

    @Test(arguments: Kind.allCases)
    func signOutEndsThePresentedSessionOrAllOfTheUsers(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind)
        let (a, aHash) = try Self.signIn(s.store, "sub-o")
        let (b, bHash) = try Self.signIn(s.store, "sub-o")
        let (c, cHash) = try Self.signIn(s.store, "sub-o")
        let (other, otherHash) = try Self.signIn(s.store, "sub-other")

        #expect(try s.store.signOut(aHash, everywhere: false) == SignedOut(sessionID: a.sessionID, revoked: 1, userID: a.userID))
        #expect(try s.revokedReason(a.sessionID) == "sign_out")
        #expect(try s.store.liveSession(aHash) == nil)
        #expect(try s.store.liveSession(bHash) != nil)

        #expect(try s.store.signOut(bHash, everywhere: true) == SignedOut(sessionID: b.sessionID, revoked: 2, userID: b.userID))
        #expect(try s.revokedReason(c.sessionID) == "sign_out_all")
        #expect(try s.store.liveSession(cHash) == nil)
        #expect(try s.store.liveSession(otherHash)?.sessionID == other.sessionID)
    }

    @Test(arguments: Kind.allCases)
    func sessionsAreListedNewestFirstInPages(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind)
        var made: [SignedIn] = []
        var hash: SessionToken.Hash?
        for i in 0..<5 {
            let (signedIn, h) = try Self.signIn(s.store, "sub-l", agent: "agent-\(i)")
            made.append(signedIn)
            if i == 1 { hash = h }
        }
        let (gone, _) = try Self.signIn(s.store, "sub-l")
        try s.expire(gone.sessionID)
        _ = try Self.signIn(s.store, "sub-someone-else")

        let first = try #require(try s.store.listSessions(hash!, limit: 2, after: nil))
        #expect(first.sessions.map(\.id) == [made[4].sessionID, made[3].sessionID])
        #expect(first.next == made[3].sessionID)
        #expect(first.sessions[0].userAgent == "agent-4" && first.sessions[0].ip == "192.0.2.7")
        #expect(first.sessions[0].clientID == "1234567890-web.apps.googleusercontent.com")
        #expect(first.sessions.allSatisfy { !$0.current })

        let second = try #require(try s.store.listSessions(hash!, limit: 2, after: first.next))
        #expect(second.sessions.map(\.id) == [made[2].sessionID, made[1].sessionID])
        #expect(second.sessions.map(\.current) == [false, true])
        let third = try #require(try s.store.listSessions(hash!, limit: 2, after: second.next))
        #expect(third.sessions.map(\.id) == [made[0].sessionID])
        #expect(third.next == nil)
        // Past the last page: still signed in, no sessions.
        let beyond = try #require(try s.store.listSessions(hash!, limit: 2, after: made[0].sessionID))
        #expect(beyond == SessionPage(sessions: [], next: nil))
        let all = try #require(try s.store.listSessions(hash!, limit: 100, after: nil))
        #expect(all.sessions.count == 5 && all.next == nil)
    }

    @Test(arguments: Kind.allCases)
    func onlyOnesOwnLiveSessionsCanBeRevoked(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind)
        let (mine, myHash) = try Self.signIn(s.store, "sub-r")
        let (laptop, laptopHash) = try Self.signIn(s.store, "sub-r")
        let (old, _) = try Self.signIn(s.store, "sub-r")
        let (theirs, _) = try Self.signIn(s.store, "sub-stranger")
        try s.expire(old.sessionID)

        #expect(try s.store.revokeSession(theirs.sessionID, presentedBy: myHash) == .notFound)
        #expect(try s.store.revokeSession(old.sessionID, presentedBy: myHash) == .notFound)
        #expect(try s.store.revokeSession(999_999, presentedBy: myHash) == .notFound)
        #expect(try s.revokedReason(theirs.sessionID) == nil)
        #expect(try s.store.revokeSession(laptop.sessionID, presentedBy: myHash) == .revoked(by: mine.sessionID))
        #expect(try s.revokedReason(laptop.sessionID) == "user_revoked")
        #expect(try s.store.liveSession(laptopHash) == nil)
        #expect(try s.store.revokeSession(laptop.sessionID, presentedBy: myHash) == .notFound)
    }

    @Test(arguments: Kind.allCases)
    func signInBeyondTheLimitRevokesTheLeastRecentlyUsedSessions(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind, maxSessions: 3)
        var made: [(SignedIn, SessionToken.Hash)] = []
        for _ in 0..<5 { made.append(try Self.signIn(s.store, "sub-cap")) }
        #expect(try s.revokedReason(made[0].0.sessionID) == "session_limit")
        #expect(try s.revokedReason(made[1].0.sessionID) == "session_limit")
        for kept in made[2...] { #expect(try s.store.liveSession(kept.1) != nil) }
        #expect(try s.store.listSessions(made[4].1, limit: 100, after: nil)?.sessions.count == 3)
        // Another user's sessions do not count.
        _ = try Self.signIn(s.store, "sub-cap-other")
        #expect(try s.store.liveSession(made[2].1) != nil)
    }

    /// The phone signed in first and used a minute ago stays; the newer session idle past the timeout goes
    /// (by creation order it was the phone that would have been revoked).
    @Test(arguments: Kind.allCases)
    func theSessionLimitRevokesIdleSessionsBeforeOnesInUse(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind, maxSessions: 3)
        let phone = try Self.signIn(s.store, "sub-lru")
        let stale = try Self.signIn(s.store, "sub-lru")
        let laptop = try Self.signIn(s.store, "sub-lru")
        try s.idle(phone.0.sessionID, 60)
        try s.idle(stale.0.sessionID, 8 * 86_400)
        try s.idle(laptop.0.sessionID, 3_600)
        let tablet = try Self.signIn(s.store, "sub-lru")
        #expect(try s.revokedReason(stale.0.sessionID) == "session_limit")
        for kept in [phone, laptop, tablet] {
            #expect(try s.revokedReason(kept.0.sessionID) == nil)
            #expect(try s.store.liveSession(kept.1) != nil)
        }
    }
}

/// The security events contract (Cross-Account Protection), on both stores.
@Suite struct SecurityEventStoreContractTests {
    typealias Kind = StoreUnderTest.Kind

    static func event(_ type: String, sub: String? = "sub-v", jti: String = UUID().uuidString, reason: String? = nil,
                      state: String? = nil, iat: Int64 = 1_800_000_500) -> SecurityEventRecord {
        SecurityEventRecord(jti: jti, issuer: "https://accounts.google.com/", type: type, subject: sub, reason: reason,
                            state: state, issuedAt: iat)
    }

    static func signInOutcome(_ store: any SessionStore, _ sub: String, issuedAt: Int64) throws -> SignInOutcome {
        try store.signIn(verifiedToken(sub: sub, issuedAt: issuedAt),
                         NewSession(tokenHash: SessionToken.generate().hash, clientID: "c", userAgent: nil, ip: nil))
    }

    @Test(arguments: Kind.allCases.flatMap { kind in [SecurityEvent.sessionsRevoked, SecurityEvent.tokensRevoked].map { (kind, $0) } })
    func sessionsRevokedEndsEveryLiveSessionAndOlderIDTokens(kind: Kind, type: String) throws {
        let s = try StoreUnderTest.make(kind)
        let (a, aHash) = try StoreContractTests.signIn(s.store, "sub-v")
        let (_, bHash) = try StoreContractTests.signIn(s.store, "sub-v")
        let (_, otherHash) = try StoreContractTests.signIn(s.store, "sub-other")
        let applied = try s.store.applySecurityEvents([Self.event(type, iat: 1_800_000_500)])
        #expect(applied.map(\.outcome) == ["sessions_revoked"])
        #expect(applied[0].sessionsRevoked == 2 && applied[0].userID == a.userID)
        #expect(try s.store.liveSession(aHash) == nil && s.store.liveSession(bHash) == nil)
        #expect(try s.revokedReason(a.sessionID) == "security_event")
        #expect(try s.store.liveSession(otherHash) != nil)
        // An ID token issued before the event opens no session; one issued after does.
        #expect(try Self.signInOutcome(s.store, "sub-v", issuedAt: 1_800_000_499) == .refused(userID: a.userID, .idTokenRevoked))
        #expect(try s.audit().last == ["failure", "id_token_revoked"])
        guard case .signedIn = try Self.signInOutcome(s.store, "sub-v", issuedAt: 1_800_000_500) else {
            Issue.record("a token issued after the event should sign in")
            return
        }
    }

    @Test(arguments: Kind.allCases)
    func hijackingRevokesAndBlocksAndOnlyANewerEnableLiftsIt(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind)
        let (_, hash) = try StoreContractTests.signIn(s.store, "sub-v")
        let hijacked = try s.store.applySecurityEvents([Self.event(SecurityEvent.accountDisabled, reason: "hijacking", iat: 1_800_000_100)])
        #expect(hijacked.map(\.outcome) == ["sessions_revoked_and_blocked"])
        #expect(try s.store.liveSession(hash) == nil)
        #expect(try s.userState("sub-v").blocked)
        guard case .refused(_, .googleSignInBlocked) = try Self.signInOutcome(s.store, "sub-v", issuedAt: 1_800_000_900) else {
            Issue.record("a blocked account signed in")
            return
        }
        // An enable issued before the block (delivered late) does not lift it; a newer one does.
        let stale = try s.store.applySecurityEvents([Self.event(SecurityEvent.accountEnabled, iat: 1_800_000_050)])
        #expect(stale.map(\.outcome) == ["enable_stale"])
        #expect(try s.userState("sub-v").blocked)
        let enabled = try s.store.applySecurityEvents([Self.event(SecurityEvent.accountEnabled, iat: 1_800_000_200)])
        #expect(enabled.map(\.outcome) == ["unblocked"])
        #expect(try !s.userState("sub-v").blocked)
        guard case .signedIn = try Self.signInOutcome(s.store, "sub-v", issuedAt: 1_800_000_900) else {
            Issue.record("the re-enabled account could not sign in")
            return
        }
    }

    @Test(arguments: Kind.allCases)
    func disabledWithoutReasonBlocksButKeepsSessionsAndAnOlderDisableDoesNotUndoANewerEnable(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind)
        let (_, hash) = try StoreContractTests.signIn(s.store, "sub-v")
        #expect(try s.store.applySecurityEvents([Self.event(SecurityEvent.accountDisabled, iat: 1_800_000_100)]).map(\.outcome) == ["blocked"])
        #expect(try s.userState("sub-v").blocked && s.store.liveSession(hash) != nil)
        #expect(try s.store.applySecurityEvents([Self.event(SecurityEvent.accountEnabled, iat: 1_800_000_300)]).map(\.outcome) == ["unblocked"])
        // Out of order: a disable issued between the two arrives last and must not block again.
        #expect(try s.store.applySecurityEvents([Self.event(SecurityEvent.accountDisabled, iat: 1_800_000_200)]).map(\.outcome) == ["block_stale"])
        #expect(try !s.userState("sub-v").blocked)
        #expect(try s.store.applySecurityEvents([Self.event(SecurityEvent.accountDisabled, reason: "some-new-reason", iat: 1_800_000_400)])
                .map(\.outcome) == ["blocked"])
    }

    @Test(arguments: Kind.allCases.flatMap { kind in
        [(SecurityEvent.accountDisabled, "bulk-account", "bulk-account"),
         (SecurityEvent.accountCredentialChangeRequired, nil, "credential-change-required")].map { (kind, $0.0, $0.1, $0.2) }
    } as [(Kind, String, String?, String)])
    func flaggingEventsFlagForReviewAndChangeNothingElse(kind: Kind, type: String, reason: String?, flag: String) throws {
        let s = try StoreUnderTest.make(kind)
        let (_, hash) = try StoreContractTests.signIn(s.store, "sub-v")
        #expect(try s.store.applySecurityEvents([Self.event(type, reason: reason)]).map(\.outcome) == ["flagged"])
        let state = try s.userState("sub-v")
        #expect(!state.blocked && state.flaggedReason == flag)
        #expect(try s.store.liveSession(hash) != nil)
    }

    /// (events recorded before the account ever signed in, the first sign-in's token iat, its outcome, flagged reason):
    /// the first sign-in applies them, in the same statement, as if the user had existed when they arrived.
    @Test(arguments: Kind.allCases.flatMap { kind in [
        ([(SecurityEvent.sessionsRevoked, nil, 1_800_000_500)], 1_800_000_400, "id_token_revoked", nil),
        ([(SecurityEvent.tokensRevoked, nil, 1_800_000_500)], 1_800_000_600, "signed_in", nil),
        ([(SecurityEvent.accountDisabled, "hijacking", 1_800_000_500)], 1_800_000_600, "google_sign_in_blocked", nil),
        ([(SecurityEvent.accountDisabled, nil, 1_800_000_500)], 1_800_000_600, "google_sign_in_blocked", nil),
        ([(SecurityEvent.accountDisabled, nil, 1_800_000_500), (SecurityEvent.accountEnabled, nil, 1_800_000_550)],
         1_800_000_600, "signed_in", nil),
        ([(SecurityEvent.accountEnabled, nil, 1_800_000_450), (SecurityEvent.accountDisabled, "hijacking", 1_800_000_500)],
         1_800_000_600, "google_sign_in_blocked", nil),
        ([(SecurityEvent.accountDisabled, "bulk-account", 1_800_000_500)], 1_800_000_600, "signed_in", "bulk-account"),
        ([(SecurityEvent.accountCredentialChangeRequired, nil, 1_800_000_500)], 1_800_000_600, "signed_in", "credential-change-required"),
        ([(SecurityEvent.verification, nil, 1_800_000_500)], 1_800_000_400, "signed_in", nil),
    ].map { (kind, $0.0, $0.1, $0.2, $0.3) } } as [(Kind, [(String, String?, Int64)], Int64, String, String?)])
    func theFirstSignInAppliesTheEventsRecordedBeforeTheAccountWasKnown(kind: Kind, events: [(String, String?, Int64)],
                                                                         issuedAt: Int64, outcome: String, flag: String?) throws {
        let s = try StoreUnderTest.make(kind)
        let applied = try s.store.applySecurityEvents(events.enumerated().map { index, event in
            Self.event(event.0, sub: "sub-new", jti: "pending-\(index)", reason: event.1, iat: event.2)
        })
        #expect(applied.allSatisfy { $0.outcome == "unknown_user" || $0.outcome == "recorded" })
        let result = try Self.signInOutcome(s.store, "sub-new", issuedAt: issuedAt)
        switch result {
        case .signedIn: #expect(outcome == "signed_in")
        case .refused(_, let refusal): #expect(refusal.rawValue == outcome)
        }
        #expect(try s.userState("sub-new").flaggedReason == flag)
        // Another user is untouched by them.
        guard case .signedIn = try Self.signInOutcome(s.store, "sub-other", issuedAt: issuedAt) else {
            Issue.record("another user refused")
            return
        }
    }

    @Test(arguments: Kind.allCases)
    func verificationUnknownTypesAndUnknownUsersAreRecordedOnly(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind)
        let (_, hash) = try StoreContractTests.signIn(s.store, "sub-v")
        let applied = try s.store.applySecurityEvents([
            Self.event(SecurityEvent.verification, sub: nil, jti: "v1", state: "state-42"),
            Self.event("https://schemas.example/future-event", jti: "f1"),
            Self.event(SecurityEvent.sessionsRevoked, sub: "never-signed-in", jti: "u1"),
            Self.event(SecurityEvent.sessionsRevoked, sub: nil, jti: "n1"),
        ])
        #expect(applied.map(\.outcome) == ["recorded", "recorded", "unknown_user", "unknown_user"])
        #expect(try s.store.liveSession(hash) != nil)
        let rows = try s.eventRows()
        #expect(rows.count == 4)
        #expect(rows[0] == ["v1", SecurityEvent.verification, "recorded", "state-42", "0", "f"])
        #expect(rows[1][5] == "t", "the user is recorded even when nothing is applied to it")
    }

    @Test(arguments: Kind.allCases)
    func aRedeliveredEventIsAppliedOnce(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind)
        _ = try StoreContractTests.signIn(s.store, "sub-v")
        let event = Self.event(SecurityEvent.sessionsRevoked, jti: "jti-once", iat: 1_800_000_500)
        #expect(try s.store.applySecurityEvents([event]).map(\.outcome) == ["sessions_revoked"])
        let (_, later) = try StoreContractTests.signIn(s.store, "sub-v", issuedAt: 1_800_000_600)
        let again = try s.store.applySecurityEvents([event])
        #expect(again == [AppliedSecurityEvent(type: event.type, userID: nil, outcome: "duplicate", sessionsRevoked: 0)])
        #expect(try s.store.liveSession(later) != nil, "the redelivery must not end a session opened since")
        #expect(try s.eventRows().count == 1)
    }

    /// Item 10: a SET signed for us that could not be read is kept as it came (outcome unparsed, its claims and why),
    /// once however often it is delivered, and nothing about it reaches the user it may name.
    @Test(arguments: Kind.allCases.flatMap { kind in [Int64(1_800_000_500), nil].map { (kind, $0) } } as [(Kind, Int64?)])
    func anUnparsedEventIsRecordedWithItsClaimsOnceAndChangesNoUser(kind: Kind, issuedAt: Int64?) throws {
        let s = try StoreUnderTest.make(kind)
        let (_, hash) = try StoreContractTests.signIn(s.store, "sub-v")
        let claims = #"{"aud":"c","events":{"\#(SecurityEvent.accountDisabled)":{"reason":1,"subject":{"subject_type":"iss-sub","iss":"https://accounts.google.com/","sub":"sub-v"}}},"iss":"https://accounts.google.com/","jti":"u-1","note":"\u0000 é"}"#
        let record = UnparsedSecurityEventRecord(jti: "u-1", issuer: "https://accounts.google.com/", type: SecurityEvent.accountDisabled,
                                                 issuedAt: issuedAt, claims: claims, reason: "bad_events: event member reason is not a string")
        let applied = try s.store.recordUnparsedSecurityEvent(record)
        #expect(applied == AppliedSecurityEvent(type: SecurityEvent.accountDisabled, userID: nil, outcome: "unparsed", sessionsRevoked: 0))
        #expect(try s.store.recordUnparsedSecurityEvent(record).outcome == "duplicate")
        // The same jti and type read in full later (Google does not send one SET two ways) finds it recorded.
        #expect(try s.store.applySecurityEvents([Self.event(SecurityEvent.accountDisabled, jti: "u-1")]).map(\.outcome) == ["duplicate"])
        #expect(try s.store.liveSession(hash) != nil)
        #expect(try !s.userState("sub-v").blocked)
        #expect(try s.eventRows() == [["u-1", SecurityEvent.accountDisabled, "unparsed", nil, "0", "f"]])
        #expect(try s.unparsedRows() == [["u-1", claims, "bad_events: event member reason is not a string", issuedAt.map { String($0) }]])
        // A raw NUL (JSON parsers let it through inside strings) is kept as its escape: text cannot hold it.
        let raw = UnparsedSecurityEventRecord(jti: "u-2", issuer: "https://accounts.google.com/", type: "unparsed", issuedAt: nil,
                                              claims: "{\"note\":\"a\u{0}b\u{1}\"}", reason: "missing_claim: jti")
        #expect(try s.store.recordUnparsedSecurityEvent(raw).outcome == "unparsed")
        #expect(try s.unparsedRows().last?[1] == "{\"note\":\"a\\u0000b\u{1}\"}")
        // An event that was read keeps no claims.
        _ = try s.store.applySecurityEvents([Self.event(SecurityEvent.verification, sub: nil, jti: "v-1", state: "s")])
        #expect(try s.unparsedRows().last == ["v-1", nil, nil, "1800000500"])
    }

    @Test(arguments: Kind.allCases)
    func aSETWithSeveralEventsAppliesEach(kind: Kind) throws {
        let s = try StoreUnderTest.make(kind)
        _ = try StoreContractTests.signIn(s.store, "sub-v")
        let applied = try s.store.applySecurityEvents([
            Self.event(SecurityEvent.sessionsRevoked, jti: "multi"),
            Self.event(SecurityEvent.accountCredentialChangeRequired, jti: "multi"),
        ])
        #expect(applied.map(\.outcome) == ["sessions_revoked", "flagged"])
        #expect(try s.eventRows().map { $0[0] } == ["multi", "multi"])
        #expect(try s.store.applySecurityEvents([Self.event(SecurityEvent.sessionsRevoked, jti: "multi")]).map(\.outcome) == ["duplicate"])
    }
}
