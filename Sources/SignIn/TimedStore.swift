// The stores as the routes call them: every database call timed into `tokensignin_database_seconds` by operation.
import IDToken
import Sessions

/// A decorator over a store that records how long each call took (`Metrics.database`), and how many calls a
/// batched one carried (`Metrics.databaseBatch`). The audit of a refused sign-in is not timed: it is best effort.
final class TimedStore: SessionStore, SecurityEventStore {
    private let store: any SessionStore & SecurityEventStore
    private let metrics: Metrics

    init(_ store: any SessionStore & SecurityEventStore, metrics: Metrics) {
        self.store = store
        self.metrics = metrics
    }

    /// Runs `call` and records its duration under `operation`, counting `batched` calls in it when there are several.
    private func timed<T>(_ operation: String, batched: Int = 1, _ call: () throws -> T) rethrows -> T {
        let started = ContinuousClock.now
        defer {
            let seconds = Metrics.seconds(since: started)
            if batched > 1 {
                metrics.databaseBatch(operation: operation, statements: batched, seconds: seconds)
            } else {
                metrics.database(operation: operation, seconds: seconds)
            }
        }
        return try call()
    }

    func signIn(_ token: VerifiedToken, _ session: NewSession) throws -> SignInOutcome {
        try timed("sign_in") { try store.signIn(token, session) }
    }

    func signIns(_ batch: [(token: VerifiedToken, session: NewSession)]) throws -> [Result<SignInOutcome, any Error>] {
        try timed("sign_in", batched: batch.count) { try store.signIns(batch) }
    }

    func recordRefusedSignIn(reason: String, clientID: String?, ip: String?, userAgent: String?) throws {
        try store.recordRefusedSignIn(reason: reason, clientID: clientID, ip: ip, userAgent: userAgent)
    }

    func liveSession(_ hash: SessionToken.Hash) throws -> LiveSession? {
        try timed("check_session") { try store.liveSession(hash) }
    }

    /// Always counted as a batch: the routes call it for two or more checks.
    func liveSessions(_ hashes: [SessionToken.Hash]) throws -> [Result<LiveSession?, any Error>] {
        let started = ContinuousClock.now
        defer { metrics.databaseBatch(operation: "check_session", statements: hashes.count, seconds: Metrics.seconds(since: started)) }
        return try store.liveSessions(hashes)
    }

    func signOut(_ hash: SessionToken.Hash, everywhere: Bool) throws -> SignedOut? {
        try timed("sign_out") { try store.signOut(hash, everywhere: everywhere) }
    }

    func listSessions(_ hash: SessionToken.Hash, limit: Int, after: Int64?) throws -> SessionPage? {
        try timed("list_sessions") { try store.listSessions(hash, limit: limit, after: after) }
    }

    func revokeSession(_ id: Int64, presentedBy hash: SessionToken.Hash) throws -> RevokeOutcome? {
        try timed("revoke_session") { try store.revokeSession(id, presentedBy: hash) }
    }

    func ping() throws {
        try timed("ping") { try store.ping() }
    }

    func applySecurityEvents(_ events: [SecurityEventRecord]) throws -> [AppliedSecurityEvent] {
        try timed("apply_security_event") { try store.applySecurityEvents(events) }
    }

    func recordUnparsedSecurityEvent(_ event: UnparsedSecurityEventRecord) throws -> AppliedSecurityEvent {
        try timed("record_unparsed_security_event") { try store.recordUnparsedSecurityEvent(event) }
    }
}
