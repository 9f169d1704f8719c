// A SessionStore in memory with a settable clock, for route tests; StoreContractTests hold it to PostgreSQL's behaviour.
import IDToken
import Logging
import Store


package final class InMemoryStore: SessionStore, SecurityEventStore {
    package struct User {
        package var id: Int64
        package var sub: String
        package var email: String?
        package var emailVerified: Bool
        package var name: String?
        package var disabled: Bool = false
        /// `google_sign_in_blocked_at`, `id_tokens_invalid_before`, `google_account_enabled_at` (Unix seconds).
        package var blockedAt: Int64?
        package var tokensInvalidBefore: Int64?
        package var enabledAt: Int64?
        package var flaggedReason: String?
        package var blocked: Bool { blockedAt != nil }
    }

    package struct EventRow: Equatable {
        package var jti: String
        package var type: String
        package var userID: Int64?
        package var outcome: String
        package var state: String?
        package var sessionsRevoked: Int
        /// The payload and why it was not read, for an unparsed event only.
        package var claims: String? = nil
        package var unparsedReason: String? = nil
        /// The SET's iat (Unix seconds); nil only for an unparsed event without a numeric one.
        package var issuedAt: Int64? = nil
        /// What a first sign-in of `subject` applies when no user had it (`unknown_user`).
        package var subject: String? = nil
        package var reason: String? = nil
    }

    package struct Session {
        package var id: Int64
        package var userID: Int64
        package var hash: SessionToken.Hash
        package var createdAt: Int64
        package var lastSeenAt: Int64
        package var expiresAt: Int64
        package var revokedReason: String?
        package var clientID: String?
        package var userAgent: String?
        package var ip: String?
    }

    package struct AuditRow: Equatable {
        package var outcome: String
        package var reason: String?
        package var sub: String?
        package var sessionID: Int64?
    }

    package let policy: SessionPolicy
    /// The store's clock (Unix seconds); tests move it to expire sessions.
    package var now: Int64 = 1_800_000_000
    package var users: [User] = []
    package var sessions: [Session] = []
    package var audit: [AuditRow] = []
    package var events: [EventRow] = []
    /// Thrown (once) by the next call, to stand in for an outage or a fault.
    package var nextError: StoreError?
    private var nextUserID: Int64 = 1
    private var nextSessionID: Int64 = 1
    /// The size of every `liveSessions` batch, in order (route tests check that checks were batched).
    private(set) var liveSessionBatches: [Int] = []
    /// The size of every `signIns` batch, in order.
    private(set) var signInBatches: [Int] = []
    /// Subs whose sign-ins fail with a lock not granted (one item of a batch failing on its own).
    package var lockedSubs: Set<String> = []

    package init(policy: SessionPolicy = SessionPolicy(lifetime: 30 * 86_400, idleTimeout: 7 * 86_400, maxSessionsPerUser: 100)) {
        self.policy = policy
    }

    private func failIfAsked() throws {
        if let error = nextError {
            nextError = nil
            throw error
        }
    }

    private func isLive(_ session: Session) -> Bool {
        session.revokedReason == nil && session.expiresAt > now && session.lastSeenAt > now - policy.idleTimeout
    }

    /// The live session with this hash whose user is not disabled (the statements' `liveSession`).
    private func authenticated(_ hash: SessionToken.Hash) -> Int? {
        guard let index = sessions.firstIndex(where: { $0.hash == hash }), isLive(sessions[index]),
              let user = users.first(where: { $0.id == sessions[index].userID }), !user.disabled else { return nil }
        return index
    }

    package func signIn(_ token: VerifiedToken, _ session: NewSession) throws -> SignInOutcome {
        try failIfAsked()
        let created: Bool
        let index: Int
        if let existing = users.firstIndex(where: { $0.sub == token.subject }) {
            index = existing
            created = false
        } else {
            users.append(firstSignIn(token.subject))
            nextUserID += 1
            index = users.count - 1
            created = true
        }
        users[index].email = token.email
        users[index].emailVerified = token.emailVerified
        users[index].name = token.name
        let user = users[index]
        let revoked = user.tokensInvalidBefore.map { token.issuedAt < $0 } ?? false
        if user.disabled || user.blocked || revoked {
            let refusal: AccountRefusal = user.disabled ? .accountDisabled : user.blocked ? .googleSignInBlocked : .idTokenRevoked
            audit.append(AuditRow(outcome: "failure", reason: refusal.rawValue, sub: user.sub, sessionID: nil))
            return .refused(userID: user.id, refusal)
        }
        // The (limit - 1) most recently used unexpired sessions stay, besides the new one.
        let live = sessions.indices.filter { sessions[$0].userID == user.id && sessions[$0].revokedReason == nil
            && sessions[$0].expiresAt > now }
            .sorted { (sessions[$0].lastSeenAt, sessions[$0].id) > (sessions[$1].lastSeenAt, sessions[$1].id) }
        for old in live.dropFirst(max(policy.maxSessionsPerUser - 1, 0)) { sessions[old].revokedReason = "session_limit" }
        let id = nextSessionID
        nextSessionID += 1
        sessions.append(Session(id: id, userID: user.id, hash: session.tokenHash, createdAt: now, lastSeenAt: now,
                                expiresAt: now + policy.lifetime, clientID: session.clientID, userAgent: session.userAgent,
                                ip: session.ip))
        audit.append(AuditRow(outcome: "success", reason: nil, sub: user.sub, sessionID: id))
        return .signedIn(SignedIn(userID: user.id, created: created, sessionID: id,
                                  expiresAt: Timestamp(unixSeconds: now + policy.lifetime)))
    }

    /// A new user, with what the events about its sub recorded before it existed say (as the sign-in statement's
    /// `pending`): revoked before the latest revocation, blocked by a disable no enable came after, flagged.
    private func firstSignIn(_ sub: String) -> User {
        var user = User(id: nextUserID, sub: sub, email: nil, emailVerified: false)
        var disabled: Int64?, flaggedAt: Int64?
        for event in events where event.subject == sub && event.userID == nil {
            guard let iat = event.issuedAt else { continue }  // an unparsed event, which names no subject anyway
            switch SecurityAction.of(type: event.type, reason: event.reason) {
            case .revokeSessions: user.tokensInvalidBefore = max(user.tokensInvalidBefore ?? iat, iat)
            case .revokeSessionsAndBlock:
                user.tokensInvalidBefore = max(user.tokensInvalidBefore ?? iat, iat)
                disabled = max(disabled ?? iat, iat)
            case .block: disabled = max(disabled ?? iat, iat)
            case .unblock: user.enabledAt = max(user.enabledAt ?? iat, iat)
            case .flag where iat >= (flaggedAt ?? .min):
                (flaggedAt, user.flaggedReason) = (iat, SecurityAction.flagReason(type: event.type, reason: event.reason))
            case .flag, .record: break
            }
        }
        if let disabled, disabled > (user.enabledAt ?? .min) { user.blockedAt = disabled }
        return user
    }

    /// One failure asked for (`failNext`) fails the whole batch, as a lost connection does on PostgreSQL.
    package func signIns(_ batch: [(token: VerifiedToken, session: NewSession)]) throws -> [Result<SignInOutcome, any Error>] {
        try failIfAsked()
        signInBatches.append(batch.count)
        return batch.map { item in
            Result {
                if lockedSubs.contains(item.token.subject) { throw StoreError(.timedOut, sqlState: "55P03", "lock timeout") }
                return try signIn(item.token, item.session)
            }
        }
    }

    package func recordRefusedSignIn(reason: String, clientID: String?, ip: String?, userAgent: String?) throws {
        try failIfAsked()
        audit.append(AuditRow(outcome: "failure", reason: reason, sub: nil, sessionID: nil))
    }

    package func liveSession(_ hash: SessionToken.Hash) throws -> LiveSession? {
        try failIfAsked()
        guard let index = authenticated(hash) else { return nil }
        let seen = sessions[index].lastSeenAt
        if seen < now - 60 { sessions[index].lastSeenAt = now }
        let session = sessions[index]
        let user = users.first { $0.id == session.userID }!
        return LiveSession(sessionID: session.id, userID: user.id, sub: user.sub, email: user.email,
                           emailVerified: user.emailVerified, expiresAt: Timestamp(unixSeconds: session.expiresAt),
                           lastSeenAt: Timestamp(unixSeconds: seen))
    }

    /// One failure asked for (`failNext`) fails the whole batch, as a lost connection does on PostgreSQL.
    package func liveSessions(_ hashes: [SessionToken.Hash]) throws -> [Result<LiveSession?, any Error>] {
        try failIfAsked()
        liveSessionBatches.append(hashes.count)
        return hashes.map { hash in Result { try liveSession(hash) } }
    }

    package func signOut(_ hash: SessionToken.Hash, everywhere: Bool) throws -> SignedOut? {
        try failIfAsked()
        guard let index = authenticated(hash) else { return nil }
        let me = sessions[index]
        var revoked = 0
        for i in sessions.indices where sessions[i].revokedReason == nil
            && (sessions[i].id == me.id || (everywhere && sessions[i].userID == me.userID)) {
            sessions[i].revokedReason = everywhere ? "sign_out_all" : "sign_out"
            revoked += 1
        }
        return SignedOut(sessionID: me.id, revoked: revoked, userID: me.userID)
    }

    package func listSessions(_ hash: SessionToken.Hash, limit: Int, after: Int64?) throws -> SessionPage? {
        try failIfAsked()
        guard let index = authenticated(hash) else { return nil }
        let me = sessions[index]
        let page = sessions.filter { session in session.userID == me.userID && isLive(session) && (after.map { session.id < $0 } ?? true) }
            .sorted { $0.id > $1.id }
            .map { SessionSummary(id: $0.id, createdAt: Timestamp(unixSeconds: $0.createdAt),
                                  lastSeenAt: Timestamp(unixSeconds: $0.lastSeenAt), expiresAt: Timestamp(unixSeconds: $0.expiresAt),
                                  userAgent: $0.userAgent, ip: $0.ip, clientID: $0.clientID, current: $0.id == me.id) }
        return SessionPage(newestFirst: page, limit: limit)
    }

    package func revokeSession(_ id: Int64, presentedBy hash: SessionToken.Hash) throws -> RevokeOutcome? {
        try failIfAsked()
        guard let index = authenticated(hash) else { return nil }
        let me = sessions[index]
        guard let target = sessions.firstIndex(where: { $0.id == id && $0.userID == me.userID && isLive($0) }) else {
            return .notFound
        }
        sessions[target].revokedReason = "user_revoked"
        return .revoked(by: me.id)
    }

    package func ping() throws {
        try failIfAsked()
    }

    package func applySecurityEvents(_ events: [SecurityEventRecord]) throws -> [AppliedSecurityEvent] {
        try failIfAsked()
        return events.map { event in
            guard !self.events.contains(where: { $0.jti == event.jti && $0.type == event.type }) else {
                return AppliedSecurityEvent(type: event.type, userID: nil, outcome: AppliedSecurityEvent.duplicate, sessionsRevoked: 0)
            }
            let action = event.action
            let index = event.subject.flatMap { sub in users.firstIndex { $0.sub == sub } }
            var outcome = "recorded"
            var revokedCount = 0
            if action != .record {
                if let index {
                    let iat = event.issuedAt
                    if action == .revokeSessions || action == .revokeSessionsAndBlock {
                        for i in sessions.indices where sessions[i].userID == users[index].id && sessions[i].revokedReason == nil {
                            sessions[i].revokedReason = "security_event"
                            revokedCount += 1
                        }
                        users[index].tokensInvalidBefore = max(users[index].tokensInvalidBefore ?? iat, iat)
                    }
                    switch action {
                    case .block, .revokeSessionsAndBlock:
                        if users[index].enabledAt.map({ $0 < iat }) ?? true {
                            users[index].blockedAt = max(users[index].blockedAt ?? iat, iat)
                        }
                        let blocked = users[index].blocked
                        outcome = action == .block ? (blocked ? "blocked" : "block_stale")
                            : (blocked ? "sessions_revoked_and_blocked" : "sessions_revoked_block_stale")
                    case .unblock:
                        if let blockedAt = users[index].blockedAt, blockedAt < iat { users[index].blockedAt = nil }
                        users[index].enabledAt = max(users[index].enabledAt ?? iat, iat)
                        outcome = users[index].blocked ? "enable_stale" : "unblocked"
                    case .flag:
                        users[index].flaggedReason = SecurityAction.flagReason(type: event.type, reason: event.reason)
                        outcome = "flagged"
                    case .revokeSessions:
                        outcome = "sessions_revoked"
                    case .record:
                        break
                    }
                } else {
                    outcome = "unknown_user"
                }
            }
            let userID = index.map { users[$0].id }
            self.events.append(EventRow(jti: event.jti, type: event.type, userID: userID, outcome: outcome, state: event.state,
                                        sessionsRevoked: revokedCount, issuedAt: event.issuedAt, subject: event.subject,
                                        reason: event.reason))
            return AppliedSecurityEvent(type: event.type, userID: userID, outcome: outcome, sessionsRevoked: revokedCount)
        }
    }

    package func recordUnparsedSecurityEvent(_ event: UnparsedSecurityEventRecord) throws -> AppliedSecurityEvent {
        try failIfAsked()
        var outcome = AppliedSecurityEvent.duplicate
        if !events.contains(where: { $0.jti == event.jti && $0.type == event.type }) {
            events.append(EventRow(jti: event.jti, type: event.type, userID: nil, outcome: UnparsedSecurityEventRecord.outcome, state: nil,
                                   sessionsRevoked: 0, claims: event.claims, unparsedReason: event.reason, issuedAt: event.issuedAt))
            outcome = UnparsedSecurityEventRecord.outcome
        }
        return AppliedSecurityEvent(type: event.type, userID: nil, outcome: outcome, sessionsRevoked: 0)
    }
}
