// The stores as the routes see them with the session cache: checks from memory when it can be trusted, and every
// revocation this responder makes evicted before it answers.
import IDToken

/// A decorator over a worker's store. A session check is answered from the `SessionCache` when it holds the session
/// live and is usable; otherwise it asks the store and keeps the answer. A change this responder makes (sign-out, a
/// revoked device, a security event) evicts what it ended before the route answers; every other change reaches the
/// cache through PostgreSQL's notifications (`CacheListener`).
package final class CachedSessionStore: SessionStore, SecurityEventStore {
    private let store: any SessionStore & SecurityEventStore
    private let cache: SessionCache
    /// Unix seconds, as the service's clock says.
    private let clock: @Sendable () -> Int64

    package init(_ store: any SessionStore & SecurityEventStore, cache: SessionCache, clock: @escaping @Sendable () -> Int64) {
        self.store = store
        self.cache = cache
        self.clock = clock
    }

    package func liveSession(_ hash: SessionToken.Hash) throws -> LiveSession? {
        let now = clock()
        switch cache.lookup(hash, now: now) {
        case .hit(let session): return session
        case .unusable: return try store.liveSession(hash)
        case .miss(let generation):
            let found = try store.liveSession(hash)
            if let found { cache.insert(hash, found, lastSeen: found.lastSeenAt.unixSeconds, now: now, generation: generation) }
            return found
        }
    }

    /// The batch's checks: those the cache holds from memory, the rest in one call to the store (one round trip).
    package func liveSessions(_ hashes: [SessionToken.Hash]) throws -> [Result<LiveSession?, any Error>] {
        let now = clock()
        var results = [Result<LiveSession?, any Error>?](repeating: nil, count: hashes.count)
        var asked: [(index: Int, generation: UInt64?)] = []
        for (index, hash) in hashes.enumerated() {
            switch cache.lookup(hash, now: now) {
            case .hit(let session): results[index] = .success(session)
            case .miss(let generation): asked.append((index, generation))
            case .unusable: asked.append((index, nil))
            }
        }
        if !asked.isEmpty {
            let answers: [Result<LiveSession?, any Error>] = asked.count == 1
                ? [Result { try store.liveSession(hashes[asked[0].index]) }]
                : try store.liveSessions(asked.map { hashes[$0.index] })
            for (slot, answer) in zip(asked, answers) {
                results[slot.index] = answer
                if let generation = slot.generation, case .success(let found?) = answer {
                    cache.insert(hashes[slot.index], found, lastSeen: found.lastSeenAt.unixSeconds, now: now, generation: generation)
                }
            }
        }
        return results.map { $0! }
    }

    /// Evicts what it ended before answering: the presented session, or every session of its user held here
    /// (cached or not, the presented one tells whose they are).
    package func signOut(_ hash: SessionToken.Hash, everywhere: Bool) throws -> SignedOut? {
        let done = try store.signOut(hash, everywhere: everywhere)
        cache.evict(hash: hash)
        if let done { cache.evict(sessions: [done.sessionID], users: everywhere ? [done.userID] : []) }
        return done
    }

    package func revokeSession(_ id: Int64, presentedBy hash: SessionToken.Hash) throws -> RevokeOutcome? {
        let outcome = try store.revokeSession(id, presentedBy: hash)
        if case .revoked? = outcome { cache.evict(sessions: [id]) }
        return outcome
    }

    package func applySecurityEvents(_ events: [SecurityEventRecord]) throws -> [AppliedSecurityEvent] {
        let applied = try store.applySecurityEvents(events)
        cache.evict(users: Set(applied.compactMap { $0.sessionsRevoked > 0 ? $0.userID : nil }))
        return applied
    }

    package func recordUnparsedSecurityEvent(_ event: UnparsedSecurityEventRecord) throws -> AppliedSecurityEvent {
        try store.recordUnparsedSecurityEvent(event)
    }

    // What does not concern the cache goes straight through.

    package func signIn(_ token: VerifiedToken, _ session: NewSession) throws -> SignInOutcome {
        try store.signIn(token, session)
    }

    package func signIns(_ batch: [(token: VerifiedToken, session: NewSession)]) throws -> [Result<SignInOutcome, any Error>] {
        try store.signIns(batch)
    }

    package func recordRefusedSignIn(reason: String, clientID: String?, ip: String?, userAgent: String?) throws {
        try store.recordRefusedSignIn(reason: reason, clientID: clientID, ip: ip, userAgent: userAgent)
    }

    package func listSessions(_ hash: SessionToken.Hash, limit: Int, after: Int64?) throws -> SessionPage? {
        try store.listSessions(hash, limit: limit, after: after)
    }

    package func ping() throws {
        try store.ping()
    }
}
