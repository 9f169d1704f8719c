// Connection: one libpq connection used by one thread at a time, with parameterised and prepared statements.
import CLibPQ
#if canImport(Glibc)
import Glibc
#endif

/// What sits between a connection and PostgreSQL, which decides what may live on the server session.
public enum Pooler: String, Sendable, CaseIterable {
    /// PostgreSQL itself: the timeouts go in the `options` startup parameter, and statements are prepared once
    /// per connection under their names.
    case none
    /// A pooler that hands the server session to another client after every transaction (PgBouncer's
    /// `pool_mode = transaction`). Stock PgBouncer refuses the `options` startup parameter, and a named
    /// statement or a session-level SET would land on whichever client gets the session next: every statement
    /// is unnamed, and the timeouts are set for one transaction at a time, in the same round trip.
    case transaction
}

/// One PostgreSQL connection. Not shared between threads: each worker owns its own.
///
/// When a call finds the connection broken it throws a retryable `connection_lost`; the next call first
/// re-establishes the connection (PQreset: with a multi-host conninfo, libpq picks a host again as
/// `target_session_attrs` says) and, without a pooler, prepares statements again as they are used.
public final class Connection {
    private let pg: OpaquePointer
    /// What the conninfo points at; decides how statements and timeouts are sent.
    public let pooler: Pooler
    /// SQL of the statements prepared on the current server session, by name (never with a transaction pooler).
    private var prepared: [String: String] = [:]
    /// Set when a call found the connection broken; the next call resets it first.
    private var needsReset = false
    /// The longest the connection waits for PostgreSQL's next byte while an answer is due (nil: as long as it
    /// takes); past it the connection is dropped (`responseTimeout`).
    private let responseTimeoutMilliseconds: Int32?

    /// A request never waits on a lock or a runaway query for long: a DBA's open transaction holding a user's
    /// row must not pin every worker. Migrations lift both inside their own transactions.
    public static let statementTimeoutMilliseconds = 5_000
    public static let lockTimeoutMilliseconds = 2_000

    /// Defaults applied before the caller's conninfo, so the caller's values win: never hang on connect,
    /// notice a dead peer, and name ourselves in pg_stat_activity.
    static let defaults: [(String, String)] = [
        ("connect_timeout", "5"),
        ("keepalives", "1"),
        ("keepalives_idle", "30"),
        ("keepalives_interval", "10"),
        ("keepalives_count", "3"),
        ("tcp_user_timeout", "30000"),  // ms a write may stay unacknowledged before the connection is dead
        ("fallback_application_name", "tokensignin"),
    ]

    /// The timeouts as a startup parameter, for every server session of a direct connection. The conninfo's
    /// own `options` wins.
    static let timeoutOptions = ("options", "-c statement_timeout=\(statementTimeoutMilliseconds) -c lock_timeout=\(lockTimeoutMilliseconds)")

    /// The timeouts for the current transaction only (`set_config(..., true)` is SET LOCAL), sent ahead of each
    /// statement behind a transaction pooler. Constants, not parameters: nothing here comes from input.
    static let localTimeouts = "SELECT set_config('statement_timeout', '\(statementTimeoutMilliseconds)', true), "
        + "set_config('lock_timeout', '\(lockTimeoutMilliseconds)', true)"

    /// BEGIN and the timeouts for that transaction, in one simple query (one round trip, like BEGIN alone).
    static let beginWithLocalTimeouts = "BEGIN; SET LOCAL statement_timeout = \(statementTimeoutMilliseconds); "
        + "SET LOCAL lock_timeout = \(lockTimeoutMilliseconds)"

    /// Connects with a libpq connection string (`host=... dbname=...` or `postgresql://...`, several hosts
    /// allowed); "" uses libpq's PG* environment variables. Text is exchanged as UTF-8 whatever the conninfo
    /// says. `pooler` says what the conninfo points at (PostgreSQL, or a transaction pooler in front of it).
    ///
    /// `responseTimeout` bounds every wait for the server's answer: when PostgreSQL sends nothing for that long
    /// while an answer is due (a frozen backend or storage, a pooler queueing the statement), the call throws a
    /// retryable `timed_out` and the connection is dropped (the next call starts a new session). The server's own
    /// `statement_timeout` ends a statement that runs too long with an answer; this is for a server that cannot
    /// answer. A pipeline of n statements may be silent `statementTimeoutMilliseconds` longer for each statement
    /// after the first (its answers come at its Sync). nil waits as long as the server takes (migrations, whose
    /// statements may run for minutes).
    public init(conninfo: String, pooler: Pooler = .none, responseTimeout: Duration? = nil) throws(StoreError) {
        let startup = pooler == .none ? Connection.defaults + [Connection.timeoutOptions] : Connection.defaults
        let pairs = startup + [("dbname", conninfo), ("client_encoding", "UTF8")]
        let connection = Connection.withCStringArrays(pairs) { keywords, values in
            PQconnectdbParams(keywords, values, 1)
        }
        guard let connection else { throw StoreError(.connectionFailed, "libpq could not allocate a connection") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Connection.firstLine(PQerrorMessage(connection))
            PQfinish(connection)
            throw StoreError(.connectionFailed, message)
        }
        CLibPQ_silenceNotices(connection)
        pg = connection
        self.pooler = pooler
        responseTimeoutMilliseconds = responseTimeout.map { Int32(clamping: max(1, Int($0 / .milliseconds(1)))) }
    }

    deinit { PQfinish(pg) }

    /// Checks that libpq can parse `conninfo` (a URL or `key=value` pairs: unknown parameters, bad ports,
    /// broken quoting) without connecting. Throws `.invalidParameter` with libpq's message.
    public static func validate(conninfo: String) throws(StoreError) {
        var message: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &message) else {
            defer { if let message { PQfreemem(message) } }
            throw StoreError(.invalidParameter, firstLine(message.map { UnsafePointer($0) }))
        }
        PQconninfoFree(options)
    }

    /// True while libpq believes the connection is usable (it learns otherwise only when a call fails).
    public var isConnected: Bool { !needsReset && PQstatus(pg) == CONNECTION_OK }

    /// The server's process ID for this session (for pg_stat_activity and pg_terminate_backend); behind a
    /// pooler, whatever key the pooler made up for the client connection.
    public var backendPID: Int { Int(PQbackendPID(pg)) }

    /// The value libpq is using for a connection option (`host`, `dbname`, `connect_timeout`, ...), for logs
    /// and checks. Never returns the password.
    public func setting(_ keyword: String) -> String? {
        guard keyword != "password", let options = PQconninfo(pg) else { return nil }
        defer { PQconninfoFree(options) }
        var option = options
        while let name = option.pointee.keyword {
            if String(cString: name) == keyword { return option.pointee.val.map { String(cString: $0) } }
            option += 1
        }
        return nil
    }

    /// Runs `sql` with `$n` parameters (text format; a nil value is NULL) through the extended protocol.
    @discardableResult
    public func query(_ sql: String, _ params: [any SQLParameter] = []) throws(StoreError) -> Rows {
        try ensureConnected()
        if pooler == .transaction && !isInTransaction { return try withLocalTimeouts(sql, params) }
        let sent = try Connection.withParameters(params) { count, values in
            PQsendQueryParams(pg, sql, count, nil, values, nil, nil, 0)
        }
        return try rows(from: results(sent: sent))
    }

    /// Runs a named prepared statement, preparing it first if this server session has not seen it. Behind a
    /// transaction pooler the same SQL runs unnamed instead (the session may be another client's next).
    @discardableResult
    public func execute(_ statement: Statement, _ params: [any SQLParameter] = []) throws(StoreError) -> Rows {
        if pooler == .transaction { return try query(statement.sql, params) }
        try ensureConnected()
        try prepareIfNeeded(statement)
        let sent = try Connection.withParameters(params) { count, values in
            PQsendQueryPrepared(pg, statement.name, count, values, nil, nil, 0)
        }
        do {
            return try rows(from: results(sent: sent))
        } catch where error.sqlState == "26000" && PQtransactionStatus(pg) == PQTRANS_IDLE {
            // The session lost its prepared statements (DISCARD ALL, a pooler); nothing ran, so prepare again.
            prepared[statement.name] = nil
            try prepareIfNeeded(statement)
            let again = try Connection.withParameters(params) { count, values in
                PQsendQueryPrepared(pg, statement.name, count, values, nil, nil, 0)
            }
            return try rows(from: results(sent: again))
        }
    }

    /// Runs `statement` once for each parameter list in one pipeline: every statement, then one Sync, in one
    /// write and one round trip. The statements run in order in one implicit transaction, which holds every
    /// row lock they take until its end: statements that lock rows must take them in one order across batches
    /// (sign-ins run in `google_sub` order; `Queries.checkSession` takes none it waits for). Every item gets its own
    /// rows or its own error: a statement that fails aborts the ones queued after it (and rolls back what the
    /// ones before it wrote), and the aborted ones run again in the next pipeline, so a batch of n takes at
    /// most n + 1 round trips however its statements fail. A failure that is no item's own (a timeout, the
    /// server going away: `StoreError.isOutage`) is given to every item still pending at once. A lock not
    /// granted, a deadlock or a serialization failure is one item's own only for statements that wait on rows
    /// (`waitsOnRows`, another transaction holds that item's rows), and only once per call: a second one (a
    /// table lock meets every statement) fails every pending item, so a batch waits at most two lock timeouts;
    /// for statements that wait on no row such a failure can only be a table's lock, an outage. Throws only what
    /// every item would meet alike (the connection lost, a pipeline libpq and we disagree on): the caller may
    /// run the whole batch again, so only batch statements that may run twice (the round that was running may
    /// have committed). Behind
    /// a transaction pooler the timeouts lead the pipeline (SET LOCAL for its transaction) and the statement
    /// runs unnamed.
    public func executeBatch(_ statement: Statement, _ batch: [[any SQLParameter]],
                             waitsOnRows: Bool = false) throws(StoreError) -> [Result<Rows, StoreError>] {
        var results = [Result<Rows, StoreError>?](repeating: nil, count: batch.count)
        var texts: [ParameterTexts] = []
        texts.reserveCapacity(batch.count)
        var pending: [Int] = []
        for (index, params) in batch.enumerated() {
            // Parameters are checked (count, NUL) before anything is queued: half a pipeline cannot be taken back.
            do throws(StoreError) {
                texts.append(try Connection.texts(params))
                pending.append(index)
            } catch {
                texts.append(ParameterTexts(count: 0))
                results[index] = .failure(error)
            }
        }
        guard !pending.isEmpty else { return results.map { $0! } }
        try ensureConnected()
        if pooler == .none { try prepareIfNeeded(statement) }
        var reprepared = false
        var ownLockFailures = waitsOnRows ? 1 : 0
        while !pending.isEmpty {
            var again: [Int] = []
            var lostStatements = false
            var outage: StoreError?
            for (index, outcome) in zip(pending, try pipeline(statement, pending.map { texts[$0] })) {
                switch outcome {
                case .done(let rows):
                    results[index] = .success(rows)
                case .failed(let error) where error.sqlState == "26000" && pooler == .none && !reprepared:
                    lostStatements = true  // DISCARD ALL or a pooler: nothing of it ran; prepared again below
                    again.append(index)
                case .failed(let error):
                    results[index] = .failure(error)
                    guard error.isRetryable else { break }
                    if !error.isOutage && ownLockFailures > 0 {
                        ownLockFailures -= 1  // a lock, a deadlock, a lost race: this item's own
                    } else {
                        outage = outage ?? error
                    }
                case .aborted:
                    again.append(index)
                }
            }
            if let outage {
                // A timeout, the server going away or out of resources: not this item's own fault, and what the
                // others would meet too. They get it now (a 503 each) instead of one round trip, and one timeout,
                // each (and so is a lock failure past the budget above: a table's lock, not a row's).
                for index in again { results[index] = .failure(outage) }
                again = []
                lostStatements = false
            }
            if lostStatements {
                reprepared = true
                prepared[statement.name] = nil
                try prepareIfNeeded(statement)
            }
            pending = again
        }
        return results.map { $0! }
    }

    private enum Outcome {
        case done(Rows)
        case failed(StoreError)
        /// Skipped by the server after an earlier statement of the same pipeline failed.
        case aborted
    }

    /// Sends the statements and a Sync in one write and reads every result.
    private func pipeline(_ statement: Statement, _ batch: [ParameterTexts]) throws(StoreError) -> [Outcome] {
        guard PQenterPipelineMode(pg) == 1 else { throw pipelineBroken() }
        var sent = true
        if pooler == .transaction {
            sent = PQsendQueryParams(pg, Connection.localTimeouts, 0, nil, nil, nil, nil, 0) == 1
        }
        for texts in batch where sent {
            sent = Connection.withTexts(texts) { count, values in
                pooler == .none
                    ? PQsendQueryPrepared(pg, statement.name, count, values, nil, nil, 0) == 1
                    : PQsendQueryParams(pg, statement.sql, count, nil, values, nil, nil, 0) == 1
            }
        }
        // A half-sent pipeline leaves libpq's queue in a state no later call can use: start afresh next call.
        guard sent, PQpipelineSync(pg) == 1 else { throw pipelineBroken() }
        var outcomes: [Outcome] = []
        outcomes.reserveCapacity(batch.count)
        let leading = pooler == .transaction ? 1 : 0
        var leadFailed: StoreError?
        // The server answers a pipeline at its Sync, when every statement has run, each within statement_timeout.
        let statements = leading + batch.count
        for position in 0..<statements {
            try awaitResult(statements: statements)
            guard let pointer = PQgetResult(pg) else { throw pipelineBroken() }
            let result = QueryResult(pointer)
            let status = PQresultStatus(result.pointer)
            let outcome: Outcome
            if status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK || status == PGRES_EMPTY_QUERY {
                outcome = .done(result.rows())
            } else if status == PGRES_PIPELINE_ABORTED {
                outcome = leadFailed.map { .failed($0) } ?? .aborted
            } else {
                let error = failure(result.pointer)
                if needsReset { throw error }  // the session is gone (or unusable): nothing more will come
                outcome = .failed(error)
            }
            if position < leading {
                // The timeouts failed: every statement after them is aborted and gets that error.
                if case .failed(let error) = outcome { leadFailed = error }
            } else {
                outcomes.append(outcome)
            }
            // Each statement's results end with a NULL; anything else means libpq and we disagree.
            if let extra = PQgetResult(pg) {
                PQclear(extra)
                throw pipelineBroken()
            }
        }
        try awaitResult(statements: statements)
        guard let sync = PQgetResult(pg) else { throw pipelineBroken() }
        let synced = PQresultStatus(sync) == PGRES_PIPELINE_SYNC
        PQclear(sync)
        guard synced, PQexitPipelineMode(pg) == 1 else { throw pipelineBroken() }
        // A failure before the end leaves the rest aborted: the ones done before it were rolled back too.
        if let failed = outcomes.firstIndex(where: { if case .failed = $0 { true } else { false } }) {
            for index in 0..<failed { if case .done = outcomes[index] { outcomes[index] = .aborted } }
        }
        return outcomes
    }

    /// Runs a script of one or more statements separated by semicolons (simple query protocol, no
    /// parameters), e.g. a migration file. Stops at the first failing statement.
    public func run(script: String) throws(StoreError) {
        try ensureConnected()
        if script.utf8.contains(0) { throw StoreError(.invalidParameter, "script contains a NUL character") }
        _ = try rows(from: results(sent: PQsendQuery(pg, script)))
    }

    /// Runs `body` between BEGIN and COMMIT; rolls back and rethrows when it throws. Behind a transaction
    /// pooler, the BEGIN carries the timeouts for this transaction (SET LOCAL, the same round trip).
    public func transaction<T>(_ body: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
        if pooler == .transaction {
            try run(script: Connection.beginWithLocalTimeouts)
        } else {
            try query("BEGIN")
        }
        let value: T
        do {
            value = try body(self)
        } catch {
            rollbackQuietly()
            throw error
        }
        try query("COMMIT")
        return value
    }

    /// Whether the server session is inside a transaction block (idle in transaction or failed).
    public var isInTransaction: Bool {
        let status = PQtransactionStatus(pg)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE
    }

    /// Ends a failed or abandoned transaction; a broken connection is reset on the next call anyway.
    func rollbackQuietly() {
        guard !needsReset, PQstatus(pg) == CONNECTION_OK, isInTransaction else { return }
        if let result = try? results(sent: PQsendQuery(pg, "ROLLBACK")) { PQclear(result) }
    }

    // MARK: - Behind a transaction pooler

    /// Runs `sql` after `localTimeouts` in one pipeline, one round trip: the two statements and the Sync after
    /// them are one implicit transaction on one server session (a pooler hands the session on only after the
    /// Sync), so the timeouts hold for this statement and end with it. A failure of either rolls both back.
    private func withLocalTimeouts(_ sql: String, _ params: [any SQLParameter]) throws(StoreError) -> Rows {
        // Parameters are checked (a NUL) before anything is queued.
        let texts = try Connection.texts(params)
        switch try pipeline(Statement(name: "", sql: sql), [texts])[0] {
        case .done(let rows): return rows
        case .failed(let error): throw error
        case .aborted: throw StoreError(.unexpectedResult, "the statement was not run")
        }
    }

    /// The error for a connection libpq could not read, or a pipeline that did not go as libpq promises; the next
    /// call starts a new session.
    private func pipelineBroken() -> StoreError {
        let error = failure(nil)
        needsReset = true
        return error.code == .connectionLost ? error : StoreError(.connectionLost, error.detail)
    }

    // MARK: - Connection state

    private func ensureConnected() throws(StoreError) {
        guard needsReset || PQstatus(pg) != CONNECTION_OK else { return }
        // A new server session: no prepared statements, no transaction.
        prepared.removeAll()
        PQreset(pg)
        guard PQstatus(pg) == CONNECTION_OK else {
            needsReset = true
            throw StoreError(.connectionFailed, Connection.firstLine(PQerrorMessage(pg)))
        }
        CLibPQ_silenceNotices(pg)
        needsReset = false
    }

    private func prepareIfNeeded(_ statement: Statement) throws(StoreError) {
        if let sql = prepared[statement.name] {
            guard sql == statement.sql else {
                throw StoreError(.invalidParameter, "two statements are named \(statement.name)")
            }
            return
        }
        _ = try rows(from: results(sent: PQsendPrepare(pg, statement.name, statement.sql, 0, nil)))
        prepared[statement.name] = statement.sql
    }

    // MARK: - Results

    /// The outcome of what a PQsend call (`sent`: its return value) queued, as PQexec gives it: the first error,
    /// else the last result; nil when nothing was sent (`failure(nil)` then reads libpq's message). Every wait
    /// is bounded by `responseTimeout`.
    private func results(sent: Int32) throws(StoreError) -> OpaquePointer? {
        guard sent == 1 else { return nil }
        var kept: OpaquePointer?
        do {
            while true {
                try awaitResult()
                guard let next = PQgetResult(pg) else { break }
                let status = PQresultStatus(next)
                if let earlier = kept, PQresultStatus(earlier) == PGRES_FATAL_ERROR {
                    PQclear(next)  // the first error stands (the server skips the rest of a script after it)
                } else {
                    if let earlier = kept { PQclear(earlier) }
                    kept = next
                }
                // COPY is not driven here: libpq would hand the same state back for ever.
                if status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH { break }
            }
        } catch {
            if let kept { PQclear(kept) }
            throw error
        }
        return kept
    }

    /// Returns once libpq can hand over the next result without blocking, having waited at most
    /// `responseTimeout` for each byte from the server, plus a statement timeout for each further statement of a
    /// pipeline (the server sends its answers when it reaches the Sync, not as each statement ends, so a slow
    /// but working server may be silent that long). Without a timeout, libpq's own PQgetResult waits.
    private func awaitResult(statements: Int = 1) throws(StoreError) {
        guard let base = responseTimeoutMilliseconds else { return }
        let limit = Int32(clamping: Int(base) + (statements - 1) * Connection.statementTimeoutMilliseconds)
        let tls = PQsslInUse(pg) == 1
        while PQisBusy(pg) == 1 {
            // Bytes TLS has already decrypted do not wake poll: take them first (libpq's own wait does the same).
            if tls {
                guard PQconsumeInput(pg) == 1 else { throw pipelineBroken() }
                if PQisBusy(pg) == 0 { break }
            }
            var pending = pollfd(fd: PQsocket(pg), events: Int16(POLLIN), revents: 0)
            guard pending.fd >= 0 else { throw pipelineBroken() }
            let ready = poll(&pending, 1, limit)
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 {
                // What the server does with the statement is unknown: this session is not used again.
                needsReset = true
                throw StoreError(.timedOut, "no answer from the server in \(limit) ms; the connection is dropped")
            }
            guard ready > 0, PQconsumeInput(pg) == 1 else { throw pipelineBroken() }
        }
    }

    /// Copies a result out and frees it, or turns it into a StoreError (marking the connection for reset).
    private func rows(from pointer: OpaquePointer?) throws(StoreError) -> Rows {
        guard let pointer else { throw failure(nil) }
        let result = QueryResult(pointer)
        let status = PQresultStatus(result.pointer)
        guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK || status == PGRES_EMPTY_QUERY else {
            throw failure(result.pointer)
        }
        return result.rows()
    }

    private func failure(_ result: OpaquePointer?) -> StoreError {
        guard let result else {
            let lost = isGone()
            needsReset = needsReset || lost
            return StoreError(lost ? .connectionLost : .queryFailed, Connection.firstLine(PQerrorMessage(pg)))
        }
        let sqlState = Connection.field(result, CLibPQ_diagSQLState())
        // Without a SQLSTATE the error is libpq's own, and may be the lost connection itself.
        let lost = sqlState == nil ? isGone() : PQstatus(pg) != CONNECTION_OK
        let constraint = Connection.field(result, CLibPQ_diagConstraintName())
        let message = Connection.field(result, CLibPQ_diagMessagePrimary())
            ?? Connection.firstLine(PQresultErrorMessage(result))
        if lost || sqlState.map(StoreError.losesConnection(sqlState:)) == true {
            needsReset = true
            return StoreError(.connectionLost, sqlState: sqlState, constraint: constraint, message)
        }
        let status = PQresultStatus(result)
        guard status == PGRES_FATAL_ERROR else {
            // COPY or another mode Store does not drive: the session is unusable, start a fresh one next call.
            needsReset = true
            return StoreError(.queryFailed, sqlState: sqlState, constraint: constraint, "unexpected result status")
        }
        let code = StoreError.code(forSQLState: sqlState)
        return StoreError(code, sqlState: sqlState, constraint: constraint, message)
    }

    /// Whether the server session is gone. A server that crashed (or was stopped in immediate mode) closes the
    /// socket after a mere WARNING; libpq then reports the failed write ("server closed the connection
    /// unexpectedly") before it has read the end of the stream, and PQstatus still says the connection is fine.
    /// Reading what the socket holds (it never waits) settles it.
    private func isGone() -> Bool {
        PQstatus(pg) != CONNECTION_OK || PQconsumeInput(pg) == 0 || PQstatus(pg) != CONNECTION_OK
    }

    private static func field(_ result: OpaquePointer, _ code: Int32) -> String? {
        PQresultErrorField(result, code).map { String(cString: $0) }
    }

    private static func firstLine(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "" }
        return String(String(cString: message).split(separator: "\n", maxSplits: 1).first ?? "")
    }

    // MARK: - C strings

    /// Lays the parameters out in one NUL-separated buffer and hands libpq pointers into it (NULL for nil).
    private static func withParameters<R>(
        _ params: [any SQLParameter], _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?) -> R
    ) throws(StoreError) -> R {
        withTexts(try texts(params), body)
    }

    /// The parameters' text, checked: the protocol's limit on their number, and no NUL (libpq reads text
    /// parameters up to the first NUL; refused rather than silently truncated). Refused here, before anything
    /// is sent (in a pipeline, half of it would be).
    private static func texts(_ params: [any SQLParameter]) throws(StoreError) -> ParameterTexts {
        guard params.count <= 65_535 else { throw StoreError(.invalidParameter, "more than 65535 parameters") }
        var texts = ParameterTexts(count: params.count)
        for index in params.indices {
            let start = texts.bytes.count
            guard params[index].appendSQLText(to: &texts.bytes) else {
                assert(texts.bytes.count == start, "a NULL parameter appended text")
                texts.offsets.append(-1)
                continue
            }
            let clean = texts.bytes.withUnsafeBufferPointer { all in
                all.count == start || memchr(all.baseAddress! + start, 0, all.count - start) == nil
            }
            guard clean else { throw StoreError(.invalidParameter, "a parameter contains a NUL character") }
            texts.offsets.append(start)
            texts.bytes.append(0)
        }
        return texts
    }

    private static func withTexts<R>(_ texts: ParameterTexts, _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
        texts.bytes.withUnsafeBufferPointer { bytes in bytes.withMemoryRebound(to: CChar.self) { chars in
            withUnsafeTemporaryAllocation(of: UnsafePointer<CChar>?.self, capacity: max(texts.offsets.count, 1)) { pointers in
                for (index, offset) in texts.offsets.enumerated() {
                    pointers[index] = offset < 0 ? nil : UnsafePointer(chars.baseAddress! + offset)
                }
                return body(Int32(texts.offsets.count), UnsafePointer(pointers.baseAddress))
            }
        } }
    }

    /// Two NULL-terminated C string arrays (keywords, values) for PQconnectdbParams.
    private static func withCStringArrays<R>(
        _ pairs: [(String, String)],
        _ body: (UnsafePointer<UnsafePointer<CChar>?>, UnsafePointer<UnsafePointer<CChar>?>) -> R
    ) -> R {
        var buffer: [CChar] = []
        var offsets: [(Int, Int)] = []
        for (key, value) in pairs {
            let k = buffer.count
            buffer.append(contentsOf: key.utf8.map { CChar(bitPattern: $0) } + [0])
            let v = buffer.count
            buffer.append(contentsOf: value.utf8.prefix { $0 != 0 }.map { CChar(bitPattern: $0) } + [0])
            offsets.append((k, v))
        }
        return buffer.withUnsafeBufferPointer { chars in
            let base = chars.baseAddress!
            let keywords: [UnsafePointer<CChar>?] = offsets.map { base + $0.0 } + [nil]
            let values: [UnsafePointer<CChar>?] = offsets.map { base + $0.1 } + [nil]
            return keywords.withUnsafeBufferPointer { k in
                values.withUnsafeBufferPointer { v in body(k.baseAddress!, v.baseAddress!) }
            }
        }
    }
}

/// A PGresult owned for one scope: cleared when the struct goes away, never copied.
struct QueryResult: ~Copyable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { PQclear(pointer) }

    /// Copies values and counts out of libpq's memory, and the column names and command tag as bytes.
    func rows() -> Rows {
        let rowCount = Int(PQntuples(pointer))
        let columnCount = Int(PQnfields(pointer))
        var labels: [UInt8] = []
        labels.reserveCapacity(16 * columnCount + 16)
        func appendLabel(_ text: UnsafePointer<CChar>?) {
            if let text { labels.append(contentsOf: UnsafeRawBufferPointer(start: text, count: strlen(text))) }
            labels.append(0)
        }
        for column in 0..<Int32(columnCount) { appendLabel(PQfname(pointer, column)) }
        appendLabel(PQcmdStatus(pointer))
        var values: [String?] = []
        values.reserveCapacity(rowCount * columnCount)
        for row in 0..<Int32(rowCount) {
            for column in 0..<Int32(columnCount) {
                if PQgetisnull(pointer, row, column) == 1 {
                    values.append(nil)
                } else {
                    values.append(String(cString: PQgetvalue(pointer, row, column)))
                }
            }
        }
        return Rows(columnCount: columnCount, count: rowCount, affectedRows: Self.count(PQcmdTuples(pointer)),
                    labels: labels, values: values)
    }

    /// PQcmdTuples' decimal count; 0 when it is empty (the statement reports none), not a count, or beyond `Int`.
    private static func count(_ text: UnsafePointer<CChar>?) -> Int {
        guard let text else { return 0 }
        var value = 0, at = 0
        while text[at] != 0 {
            let digit = Int(text[at]) - 0x30
            guard (0...9).contains(digit) else { return 0 }
            let (tens, over) = value.multipliedReportingOverflow(by: 10)
            let (next, carry) = tens.addingReportingOverflow(digit)
            guard !over, !carry else { return 0 }
            value = next
            at += 1
        }
        return value
    }
}

/// One statement's parameters as libpq takes them: their texts in one buffer, each ended by a NUL, and where
/// each starts (-1 for SQL NULL). Built once per statement (`Connection.texts`), read by every send of it.
struct ParameterTexts {
    var bytes: [UInt8] = []
    var offsets: [Int] = []

    init(count: Int) {
        offsets.reserveCapacity(count)
        bytes.reserveCapacity(count * 16)
    }
}
