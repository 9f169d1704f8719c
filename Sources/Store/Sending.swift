// Sending one statement or script and reading its answer, every wait for it bounded by the response timeout,
// and what libpq reports turned into StoreErrors.
import CLibPQ
#if canImport(Glibc)
import Glibc
#endif

extension Connection {
    /// Runs `sql` with `$n` parameters (text format; a nil value is NULL) through the extended protocol.
    @discardableResult
    public func query(_ sql: String, _ params: [any SQLParameter] = []) throws(StoreError) -> Rows {
        try query(sql) { () throws(StoreError) in try Connection.texts(params) }
    }

    /// Runs a named prepared statement, preparing it first if this server session has not seen it. Behind a
    /// transaction pooler the same SQL runs unnamed instead (the session may be another client's next).
    @discardableResult
    public func execute(_ statement: Statement, _ params: [any SQLParameter] = []) throws(StoreError) -> Rows {
        try execute(statement) { () throws(StoreError) in try Connection.texts(params) }
    }

    /// Runs a typed statement with its parameters read from `arguments`, as `execute(_:_:)` runs a statement.
    @discardableResult
    public func execute<Arguments>(_ statement: TypedStatement<Arguments>, _ arguments: Arguments) throws(StoreError) -> Rows {
        try execute(statement.statement) { () throws(StoreError) in try statement.texts(arguments) }
    }

    /// Runs a typed statement that has no parameters.
    @discardableResult
    public func execute(_ statement: TypedStatement<Void>) throws(StoreError) -> Rows {
        try execute(statement, ())
    }

    // `texts` makes the parameters' texts where the statement is about to be sent (again, for a statement prepared
    // again): whether positional or typed, they are checked at the same point of a call.

    func query(_ sql: String, texts: () throws(StoreError) -> ParameterTexts) throws(StoreError) -> Rows {
        try ensureConnected()
        if pooler == .transaction && !isInTransaction { return try withLocalTimeouts(sql, texts()) }
        let sent = Connection.withTexts(try texts()) { count, values in
            PQsendQueryParams(pg, sql, count, nil, values, nil, nil, 0)
        }
        return try rows(from: results(sent: sent))
    }

    func execute(_ statement: Statement, texts: () throws(StoreError) -> ParameterTexts) throws(StoreError) -> Rows {
        if pooler == .transaction { return try query(statement.sql, texts: texts) }
        try ensureConnected()
        try prepareIfNeeded(statement)
        let sent = Connection.withTexts(try texts()) { count, values in
            PQsendQueryPrepared(pg, statement.name, count, values, nil, nil, 0)
        }
        do {
            return try rows(from: results(sent: sent))
        } catch where error.sqlState == "26000" && PQtransactionStatus(pg) == PQTRANS_IDLE {
            // The session lost its prepared statements (DISCARD ALL, a pooler); nothing ran, so prepare again.
            prepared[statement.name] = nil
            try prepareIfNeeded(statement)
            let again = Connection.withTexts(try texts()) { count, values in
                PQsendQueryPrepared(pg, statement.name, count, values, nil, nil, 0)
            }
            return try rows(from: results(sent: again))
        }
    }

    /// Runs a script of one or more statements separated by semicolons (simple query protocol, no
    /// parameters), e.g. a migration file. Stops at the first failing statement.
    public func run(script: String) throws(StoreError) {
        try ensureConnected()
        if script.utf8.contains(0) { throw StoreError(.invalidParameter, "script contains a NUL character") }
        _ = try rows(from: results(sent: PQsendQuery(pg, script)))
    }

    /// The outcome of what a PQsend call (`sent`: its return value) queued, as PQexec gives it: the first error,
    /// else the last result; nil when nothing was sent (`failure(nil)` then reads libpq's message). Every wait
    /// is bounded by `responseTimeout`.
    func results(sent: Int32) throws(StoreError) -> OpaquePointer? {
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
    func awaitResult(statements: Int = 1) throws(StoreError) {
        guard let base = responseTimeoutMilliseconds else { return }
        let limit = Int32(clamping: Int(base) + (statements - 1) * Connection.statementTimeoutMilliseconds)
        let tls = PQsslInUse(pg) == 1
        while PQisBusy(pg) == 1 {
            // Bytes TLS has already decrypted do not wake poll: take them first (libpq's own wait does the same).
            if tls {
                guard PQconsumeInput(pg) == 1 else { throw pipelineBroken() }
                if PQisBusy(pg) == 0 { break }
            }
            guard try socketReadable(waitingUpTo: limit) else {
                // What the server does with the statement is unknown: this session is not used again.
                needsReset = true
                throw StoreError(.timedOut, "no answer from the server in \(limit) ms; the connection is dropped")
            }
            guard PQconsumeInput(pg) == 1 else { throw pipelineBroken() }
        }
    }

    /// Whether the server's socket has something to read (or was closed) within `milliseconds`; false when the time
    /// ran out. A signal does not cut the wait short of something to read.
    func socketReadable(waitingUpTo milliseconds: Int32) throws(StoreError) -> Bool {
        var pending = pollfd(fd: PQsocket(pg), events: Int16(POLLIN), revents: 0)
        guard pending.fd >= 0 else { throw pipelineBroken() }
        var ready: Int32
        repeat { ready = poll(&pending, 1, milliseconds) } while ready < 0 && errno == EINTR
        guard ready >= 0 else { throw pipelineBroken() }
        return ready > 0
    }

    /// Copies a result out and frees it, or turns it into a StoreError (marking the connection for reset).
    func rows(from pointer: OpaquePointer?) throws(StoreError) -> Rows {
        guard let pointer else { throw failure(nil) }
        let result = QueryResult(pointer)
        let status = PQresultStatus(result.pointer)
        guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK || status == PGRES_EMPTY_QUERY else {
            throw failure(result.pointer)
        }
        return result.rows()
    }

    func failure(_ result: OpaquePointer?) -> StoreError {
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

    static func firstLine(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "" }
        return String(String(cString: message).split(separator: "\n", maxSplits: 1).first ?? "")
    }

    /// The error for a connection libpq could not read, or a pipeline that did not go as libpq promises; the next
    /// call starts a new session.
    func pipelineBroken() -> StoreError {
        let error = failure(nil)
        needsReset = true
        return error.code == .connectionLost ? error : StoreError(.connectionLost, error.detail)
    }
}
