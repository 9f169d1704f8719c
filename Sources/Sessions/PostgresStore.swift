// The SessionStore on PostgreSQL: one worker's connection, its prepared statements, reconnect-and-retry, and
// every column decoded into Swift values.
import IDToken
import Logging
import Store

/// One worker's database. Opens its connection on first use; when a statement finds the connection lost
/// (PostgreSQL restarted, a failover), reconnects and runs it once more, so a client sees no error for it.
package final class PostgresStore: SessionStore, SecurityEventStore {
    private let conninfo: String
    /// What the conninfo points at: PostgreSQL, or a transaction pooler (no named statements, per-transaction timeouts).
    private let pooler: Pooler
    package let policy: SessionPolicy
    private let log: Log
    private let redact: @Sendable (String) -> String
    /// Called each time a connection is let go to be re-established, lost or found read-only (the responder counts
    /// them in `/metrics`).
    private let onReconnect: (@Sendable () -> Void)?
    private var connection: Connection?
    /// Set once a connection turned out read-only when the conninfo names several hosts and leaves
    /// `target_session_attrs` at `any`: the conninfo asking libpq for a writable server from then on (`dropReadOnly`).
    private var writableConninfo: String?
    /// Whether this store writes its policy into `signin.service_settings` (the responder's stores do; an operator
    /// command's must not, or a command run with another environment would change what the service is judged by).
    private let recordsSettings: Bool
    /// When this store last wrote (or tried to write) the settings; nil: not yet.
    private var settingsRecordedAt: ContinuousClock.Instant?

    /// - Parameters:
    ///   - redact: what every message from libpq goes through before it is logged (it may echo a password).
    ///   - recordsSettings: whether this store writes `policy` into `signin.service_settings` (the responder's do).
    package init(conninfo: String, pooler: Pooler = .none, policy: SessionPolicy, log: Log,
         redact: @escaping @Sendable (String) -> String = { $0 }, onReconnect: (@Sendable () -> Void)? = nil,
         recordsSettings: Bool = false) {
        self.conninfo = conninfo
        self.pooler = pooler
        self.policy = policy
        self.log = log
        self.redact = redact
        self.onReconnect = onReconnect
        self.recordsSettings = recordsSettings
    }

    /// How long a worker waits for PostgreSQL's next byte while an answer is due, before it drops the connection
    /// and answers 503: three statement timeouts (every statement ends by then, answered, unless the server
    /// cannot answer at all: a frozen backend or storage, a pooler queueing the statement); a batch's pipeline
    /// gets a statement timeout more for each further statement (`Connection.init`).
    package static let responseTimeout: Duration = .milliseconds(3 * Connection.statementTimeoutMilliseconds)

    /// Connection failures are logged with libpq's message, at most once per interval for the whole process
    /// (every worker fails alike while the database is down).
    package static let connectFailureLog = RateLimit(interval: .seconds(10))

    /// A read-only server met (a standby, or a database set read-only) is logged at most once per interval for the
    /// whole process (every worker meets it alike).
    package static let readOnlyLog = RateLimit(interval: .seconds(10))

    /// How often each worker writes its settings again: after a restore, a failover or a migrate that created the
    /// table while the service ran, `signin.service_settings` says the right thing again within this interval.
    package static let settingsRefresh: Duration = .seconds(300)
    /// A failed settings write is logged at most once per interval for the whole process.
    package static let settingsFailureLog = RateLimit(interval: .seconds(300))

    private var idleTimeout: SQLInterval { SQLInterval(seconds: policy.idleTimeout) }

    // MARK: SessionStore

    package func signIn(_ token: VerifiedToken, _ session: NewSession) throws -> SignInOutcome {
        let rows: Rows
        do throws(StoreError) {
            rows = try run(Queries.signIn, SignInArguments(token, session, policy))
        } catch {
            throw Self.signInFailure(error)
        }
        return try Self.signInOutcome(from: rows)
    }

    /// Sign-ins verified together, opened in one pipeline (one round trip and one transaction:
    /// `Connection.executeBatch`), each with its own outcome. Their statements run in the order of `google_sub`,
    /// so two batches that sign in the same users lock those rows in the same order and cannot deadlock.
    package func signIns(_ batch: [(token: VerifiedToken, session: NewSession)]) throws -> [Result<SignInOutcome, any Error>] {
        guard batch.count > 1 else { return batch.map { item in Result { try signIn(item.token, item.session) } } }
        // By the bytes of google_sub (as PostgreSQL's unique index tells them apart), then by position.
        let subjects = batch.map { Array($0.token.subject.utf8) }
        let order = batch.indices.sorted { a, b in
            subjects[a] == subjects[b] ? a < b : subjects[a].lexicographicallyPrecedes(subjects[b])
        }
        let results = try runBatch(Queries.signIn, order.map { SignInArguments(batch[$0].token, batch[$0].session, policy) },
                                   waitsOnRows: true)
        let decoded = Self.decoded(results, Self.signInOutcome(from:), failure: Self.signInFailure)
        // `order` is a permutation of the positions: every outcome goes back to its own request.
        var outcomes = decoded
        for (index, outcome) in zip(order, decoded) { outcomes[index] = outcome }
        return outcomes
    }

    /// A sign-in retried after a lost connection that meets the session its first attempt committed: the client
    /// never got it, so it must sign in again (a 503 it retries), not see a server fault.
    private static func signInFailure(_ error: StoreError) -> StoreError {
        guard error.code == .uniqueViolation, error.constraint == "sessions_token_hash_key" else { return error }
        return StoreError(.connectionLost, sqlState: error.sqlState, constraint: error.constraint, error.detail)
    }

    private static func signInOutcome(from rows: Rows) throws(StoreError) -> SignInOutcome {
        let (userID, created, refusal, sessionID, expiresAt) = try rows.decode(
            row: 0, as: Int64.self, Bool.self, String?.self, Int64?.self, Timestamp?.self)
        if let refusal {
            guard let reason = AccountRefusal(rawValue: refusal) else {
                throw StoreError(.unexpectedResult, "unknown refusal \(refusal)")
            }
            return .refused(userID: userID, reason)
        }
        guard let sessionID, let expiresAt else { throw StoreError(.unexpectedResult, "sign-in without a session") }
        return .signedIn(SignedIn(userID: userID, created: created, sessionID: sessionID, expiresAt: expiresAt))
    }

    package func recordRefusedSignIn(reason: String, clientID: String?, ip: String?, userAgent: String?) throws {
        try run(Queries.signInFailure, RefusedSignInArguments(reason: reason, clientID: clientID, ip: ip, userAgent: userAgent))
    }

    package func liveSession(_ hash: SessionToken.Hash) throws -> LiveSession? {
        try Self.liveSession(from: run(Queries.checkSession, CheckSessionArguments(hash: hash, idleTimeout: idleTimeout)))
    }

    /// Every check in one pipeline (one round trip); a lost connection is re-established and the batch run once
    /// more, as for one statement.
    package func liveSessions(_ hashes: [SessionToken.Hash]) throws -> [Result<LiveSession?, any Error>] {
        Self.decoded(try runBatch(Queries.checkSession, hashes.map { CheckSessionArguments(hash: $0, idleTimeout: idleTimeout) }),
                     Self.liveSession(from:))
    }

    /// Each item of a batch decoded by `decode`, or its error as `failure` makes it.
    private static func decoded<T>(_ results: [Result<Rows, StoreError>], _ decode: (Rows) throws(StoreError) -> T,
                                   failure: (StoreError) -> StoreError = { $0 }) -> [Result<T, any Error>] {
        results.map { result in
            switch result {
            case .success(let rows):
                do throws(StoreError) { return .success(try decode(rows)) } catch { return .failure(error) }
            case .failure(let error):
                return .failure(failure(error))
            }
        }
    }

    private static func liveSession(from rows: Rows) throws(StoreError) -> LiveSession? {
        guard rows.count == 1 else { return nil }
        let (sessionID, userID, sub, email, emailVerified, expiresAt, lastSeenAt) = try rows.decode(
            row: 0, as: Int64.self, Int64.self, String.self, String?.self, Bool.self, Timestamp.self, Timestamp.self)
        return LiveSession(sessionID: sessionID, userID: userID, sub: sub, email: email, emailVerified: emailVerified,
                           expiresAt: expiresAt, lastSeenAt: lastSeenAt)
    }

    package func signOut(_ hash: SessionToken.Hash, everywhere: Bool) throws -> SignedOut? {
        let rows = try run(Queries.signOut, SignOutArguments(hash: hash, idleTimeout: idleTimeout, everywhere: everywhere))
        guard rows.count == 1 else { return nil }
        let (sessionID, revoked, userID) = try rows.decode(row: 0, as: Int64.self, Int.self, Int64.self)
        return SignedOut(sessionID: sessionID, revoked: revoked, userID: userID)
    }

    package func listSessions(_ hash: SessionToken.Hash, limit: Int, after: Int64?) throws -> SessionPage? {
        let rows = try run(Queries.listSessions, ListSessionsArguments(hash: hash, idleTimeout: idleTimeout, limit: limit, after: after))
        guard !rows.isEmpty else { return nil }
        var sessions: [SessionSummary] = []
        for row in 0..<rows.count {
            let (current, id, created, lastSeen, expires, userAgent, ip, clientID) = try rows.decode(
                row: row, as: Int64.self, Int64?.self, Timestamp?.self, Timestamp?.self, Timestamp?.self, String?.self,
                String?.self, String?.self)
            guard let id else { continue }  // the empty page's single row
            guard let created, let lastSeen, let expires else { throw StoreError(.unexpectedResult, "session without times") }
            sessions.append(SessionSummary(id: id, createdAt: created, lastSeenAt: lastSeen, expiresAt: expires,
                                           userAgent: userAgent, ip: ip, clientID: clientID, current: id == current))
        }
        return SessionPage(newestFirst: sessions, limit: limit)
    }

    package func revokeSession(_ id: Int64, presentedBy hash: SessionToken.Hash) throws -> RevokeOutcome? {
        let rows = try run(Queries.revokeOwnSession, RevokeOwnSessionArguments(hash: hash, idleTimeout: idleTimeout, sessionID: id))
        guard rows.count == 1 else { return nil }
        let (by, revoked) = try rows.decode(row: 0, as: Int64.self, Int.self)
        return revoked > 0 ? .revoked(by: by) : .notFound
    }

    /// `/readyz`'s round trip. Throws what any statement would when the database does not answer; when it answers
    /// read-only (a standby: `pg_is_in_recovery()`; or `default_transaction_read_only`), drops this worker's
    /// connection, so the next statement connects again (`dropReadOnly`), and throws SQLSTATE 25006, as a write
    /// there would (`StoreError.isReadOnlyServer`).
    package func ping() throws {
        let (inRecovery, readOnly) = try run(Queries.readiness, []).decode(row: 0, as: Bool.self, Bool.self)
        guard inRecovery || readOnly else { return }
        let error = StoreError(.connectionLost, sqlState: StoreError.readOnlySQLState,
                               inRecovery ? "the server is a standby (in recovery)"
                                          : "the server's transactions are read-only (default_transaction_read_only)")
        dropReadOnly(error, operation: "ping")
        throw error
    }

    // MARK: SecurityEventStore

    package func applySecurityEvents(_ events: [SecurityEventRecord]) throws -> [AppliedSecurityEvent] {
        try inTransaction { (connection) throws(StoreError) -> [AppliedSecurityEvent] in
            var applied: [AppliedSecurityEvent] = []
            for event in events {
                let rows = try connection.execute(SecurityEventQueries.apply, event)
                guard rows.count == 1 else {
                    applied.append(AppliedSecurityEvent(type: event.type, userID: nil, outcome: AppliedSecurityEvent.duplicate,
                                                        sessionsRevoked: 0))
                    continue
                }
                let (userID, outcome, revoked) = try rows.decode(row: 0, as: Int64?.self, String.self, Int.self)
                applied.append(AppliedSecurityEvent(type: event.type, userID: userID, outcome: outcome, sessionsRevoked: revoked))
            }
            return applied
        }
    }

    package func recordUnparsedSecurityEvent(_ event: UnparsedSecurityEventRecord) throws -> AppliedSecurityEvent {
        let rows = try run(SecurityEventQueries.recordUnparsed, event)
        let outcome = rows.count == 1 ? UnparsedSecurityEventRecord.outcome : AppliedSecurityEvent.duplicate
        return AppliedSecurityEvent(type: event.type, userID: nil, outcome: outcome, sessionsRevoked: 0)
    }

    // MARK: connection

    /// Runs `statement`; when the connection turns out to have been lost, re-establishes it and tries once more.
    /// A sign-in retried after a lost commit fails on the unique token hash instead of opening two sessions.
    @discardableResult
    private func run(_ statement: Statement, _ params: [any SQLParameter]) throws(StoreError) -> Rows {
        try onceMore(statement.name) { (connection) throws(StoreError) -> Rows in try connection.execute(statement, params) }
    }

    /// `run` for a typed statement.
    @discardableResult
    private func run<Arguments>(_ statement: TypedStatement<Arguments>, _ arguments: Arguments) throws(StoreError) -> Rows {
        try onceMore(statement.name) { (connection) throws(StoreError) -> Rows in try connection.execute(statement, arguments) }
    }

    /// `run` for a batch (`Connection.executeBatch`): a lost connection is re-established and the batch run once more.
    private func runBatch<Arguments>(_ statement: TypedStatement<Arguments>, _ batch: [Arguments],
                                     waitsOnRows: Bool = false) throws(StoreError) -> [Result<Rows, StoreError>] {
        // A read-only server (25006) fails the whole pipeline (`Connection.executeBatch` throws it): let go here.
        try onceMore(statement.name) { (connection) throws(StoreError) -> [Result<Rows, StoreError>] in
            try connection.executeBatch(statement, batch, waitsOnRows: waitsOnRows)
        }
    }

    /// Runs `body` in one transaction (rolled back when it throws); a connection lost before the commit is
    /// re-established and the whole transaction run once more.
    private func inTransaction<T>(_ body: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
        try onceMore("transaction") { (connection) throws(StoreError) -> T in try connection.transaction(body) }
    }

    /// Runs `call` on this worker's connection; when it finds the connection lost, logs it, re-establishes it
    /// and runs `call` once more.
    private func onceMore<T>(_ operation: String, _ call: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
        do {
            return try call(database())
        } catch where error.code == .connectionLost {
            if error.isReadOnlyServer {
                dropReadOnly(error, operation: operation)
            } else {
                log.warning("database_reconnect", ["operation": operation, "sqlstate": error.sqlState])
            }
            onReconnect?()
            return try call(database())
        }
    }

    /// Lets go of a connection that turned out read-only (after a failover: the old primary, now a standby, or a
    /// standby libpq picked), so the next call connects again. libpq takes the first host of a multi-host conninfo
    /// that accepts a connection, which may be the same standby: when the conninfo names several hosts and leaves
    /// `target_session_attrs` at `any`, every later connection of this worker asks for a writable one
    /// (`target_session_attrs=read-write` after the operator's conninfo). With one host, it connects to it again.
    private func dropReadOnly(_ error: StoreError, operation: String) {
        if let connection, writableConninfo == nil, Self.picksAnyOfSeveralHosts(connection) {
            writableConninfo = Self.requiringReadWrite(conninfo)
        }
        connection = nil
        if let suppressed = Self.readOnlyLog.admit() {
            log.warning("database_read_only", ["operation": operation, "sqlstate": error.sqlState, "detail": error.detail,
                                               "next": writableConninfo == nil ? "reconnect" : "reconnect_read_write",
                                               "suppressed": suppressed > 0 ? String(suppressed) : nil])
        }
    }

    /// Whether libpq chose this connection's server among several hosts without asking for a writable one.
    private static func picksAnyOfSeveralHosts(_ connection: Connection) -> Bool {
        let hosts = connection.setting("host").flatMap { $0.isEmpty ? nil : $0 } ?? connection.setting("hostaddr") ?? ""
        return hosts.split(separator: ",").count > 1 && (connection.setting("target_session_attrs") ?? "any") == "any"
    }

    /// `conninfo` (a URL, `key=value` pairs, or "" for libpq's PG* variables) with `target_session_attrs=read-write`
    /// after everything it says: libpq keeps the last value of a parameter named twice.
    static func requiringReadWrite(_ conninfo: String) -> String {
        if conninfo.hasPrefix("postgresql://") || conninfo.hasPrefix("postgres://") {
            return conninfo + (conninfo.contains("?") ? "&" : "?") + "target_session_attrs=read-write"
        }
        return conninfo + " target_session_attrs=read-write"
    }

    /// Runs an operator's statement (prepared: prune and revoke --all run theirs batch after batch).
    func rows(_ statement: Statement, _ params: [any SQLParameter]) throws(StoreError) -> Rows {
        try database().execute(statement, params)
    }

    /// Writes this store's idle timeout and lifetime into `signin.service_settings` (a no-op when unchanged). A
    /// failure (migrations not applied yet, a missing grant, the connection lost) is logged and does not fail the
    /// request: the next write is due after `settingsRefresh`, and prune meanwhile goes by what is recorded.
    private func recordSettings(_ connection: Connection) {
        settingsRecordedAt = .now
        do {
            let rows = try connection.execute(ServiceSettingsQueries.record, [
                SQLInterval(seconds: policy.idleTimeout), SQLInterval(seconds: policy.lifetime), Version.line,
            ])
            guard rows.count == 1 else { return }
            let (idleBefore, lifetimeBefore) = try rows.decode(row: 0, as: Int64?.self, Int64?.self)
            let fields: KeyValuePairs<String, String?> = [
                "idle_timeout": String(policy.idleTimeout), "lifetime": String(policy.lifetime),
                "idle_timeout_before": idleBefore.map { String($0) }, "lifetime_before": lifetimeBefore.map { String($0) },
            ]
            // A change while other responders run means they disagree: say so loudly, each time it flips.
            if idleBefore == nil { log.info("session_settings_recorded", fields) } else { log.warning("session_settings_changed", fields) }
        } catch {
            if let suppressed = Self.settingsFailureLog.admit() {
                log.warning("session_settings_not_recorded", ["code": error.code.name, "sqlstate": error.sqlState,
                                                               "suppressed": suppressed > 0 ? String(suppressed) : nil])
            }
        }
    }

    /// This worker's connection, opened on first use (and again after a failed open).
    private func database() throws(StoreError) -> Connection {
        if let connection {
            if recordsSettings, settingsRecordedAt.map({ .now - $0 >= Self.settingsRefresh }) ?? true { recordSettings(connection) }
            return connection
        }
        do {
            let opened = try Connection(conninfo: writableConninfo ?? conninfo, pooler: pooler, responseTimeout: Self.responseTimeout)
            connection = opened
            if recordsSettings { recordSettings(opened) }
            return opened
        } catch {
            if let suppressed = Self.connectFailureLog.admit() {
                log.warning("database_connect_failed", ["code": error.code.name, "detail": redact(error.detail),
                                                        "suppressed": suppressed > 0 ? String(suppressed) : nil])
            }
            throw error
        }
    }
}

extension StoreError {
    /// SQLSTATE 25006, read_only_sql_transaction: what a write meets on a standby or in a read-only database.
    package static let readOnlySQLState = "25006"

    /// The server this connection reached may not write (a standby, `default_transaction_read_only`): another
    /// connection, to the primary, will do.
    package var isReadOnlyServer: Bool { sqlState == Self.readOnlySQLState }
}
