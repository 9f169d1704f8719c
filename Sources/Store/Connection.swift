// Connection: one libpq connection used by one thread at a time, with parameterised and prepared statements.
import CLibPQ

/// One PostgreSQL connection. Not shared between threads: each worker owns its own.
///
/// When a call finds the connection broken it throws a retryable `connection_lost`; the next call first
/// re-establishes the connection (PQreset) and prepares statements again as they are used.
public final class Connection {
    private let pg: OpaquePointer
    /// SQL of the statements prepared on the current server session, by name.
    private var prepared: [String: String] = [:]
    /// Set when a call found the connection broken; the next call resets it first.
    private var needsReset = false

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
        // A request never waits on a lock or a runaway query for long: a DBA's open transaction holding a
        // user's row must not pin every worker. The conninfo's own `options` wins; migrations lift both.
        ("options", "-c statement_timeout=5000 -c lock_timeout=2000"),
    ]

    /// Connects with a libpq connection string (`host=... dbname=...` or `postgresql://...`); "" uses
    /// libpq's PG* environment variables. Text is exchanged as UTF-8 whatever the conninfo says.
    public init(conninfo: String) throws(StoreError) {
        let pairs = Connection.defaults + [("dbname", conninfo), ("client_encoding", "UTF8")]
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

    /// The server's process ID for this session (for pg_stat_activity and pg_terminate_backend).
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
        let result = try Connection.withParameters(params) { count, values in
            PQexecParams(pg, sql, count, nil, values, nil, nil, 0)
        }
        return try rows(from: result)
    }

    /// Runs a named prepared statement, preparing it first if this server session has not seen it.
    @discardableResult
    public func execute(_ statement: Statement, _ params: [any SQLParameter] = []) throws(StoreError) -> Rows {
        try ensureConnected()
        try prepareIfNeeded(statement)
        let result = try Connection.withParameters(params) { count, values in
            PQexecPrepared(pg, statement.name, count, values, nil, nil, 0)
        }
        do {
            return try rows(from: result)
        } catch where error.sqlState == "26000" && PQtransactionStatus(pg) == PQTRANS_IDLE {
            // The session lost its prepared statements (DISCARD ALL, a pooler); nothing ran, so prepare again.
            prepared[statement.name] = nil
            try prepareIfNeeded(statement)
            let again = try Connection.withParameters(params) { count, values in
                PQexecPrepared(pg, statement.name, count, values, nil, nil, 0)
            }
            return try rows(from: again)
        }
    }

    /// Runs a script of one or more statements separated by semicolons (simple query protocol, no
    /// parameters), e.g. a migration file. Stops at the first failing statement.
    public func run(script: String) throws(StoreError) {
        try ensureConnected()
        if script.utf8.contains(0) { throw StoreError(.invalidParameter, "script contains a NUL character") }
        _ = try rows(from: PQexec(pg, script))
    }

    /// Runs `body` between BEGIN and COMMIT; rolls back and rethrows when it throws.
    public func transaction<T>(_ body: (Connection) throws(StoreError) -> T) throws(StoreError) -> T {
        try query("BEGIN")
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
        if let result = PQexec(pg, "ROLLBACK") { PQclear(result) }
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
        _ = try rows(from: PQprepare(pg, statement.name, statement.sql, 0, nil))
        prepared[statement.name] = statement.sql
    }

    // MARK: - Results

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
        let lost = PQstatus(pg) != CONNECTION_OK
        guard let result else {
            needsReset = needsReset || lost
            return StoreError(lost ? .connectionLost : .queryFailed, Connection.firstLine(PQerrorMessage(pg)))
        }
        let sqlState = Connection.field(result, CLibPQ_diagSQLState())
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

    private static func field(_ result: OpaquePointer, _ code: Int32) -> String? {
        PQresultErrorField(result, code).map { String(cString: $0) }
    }

    private static func firstLine(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "" }
        return String(String(cString: message).split(separator: "\n", maxSplits: 1).first ?? "")
    }

    // MARK: - C strings

    /// Lays the parameters out in one NUL-separated buffer and hands libpq pointers into it (NULL for nil).
    private static func withParameters(
        _ params: [any SQLParameter], _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?) -> OpaquePointer?
    ) throws(StoreError) -> OpaquePointer? {
        var buffer: [CChar] = [0]
        var offsets: [Int?] = []
        offsets.reserveCapacity(params.count)
        for value in params {
            guard let param = value.sqlText else { offsets.append(nil); continue }
            // libpq reads text parameters up to the first NUL; refuse rather than silently truncate.
            if param.utf8.contains(0) { throw StoreError(.invalidParameter, "a parameter contains a NUL character") }
            offsets.append(buffer.count)
            buffer.append(contentsOf: param.utf8.map { CChar(bitPattern: $0) })
            buffer.append(0)
        }
        return buffer.withUnsafeBufferPointer { chars in
            let base = chars.baseAddress!
            let pointers: [UnsafePointer<CChar>?] = offsets.map { $0.map { base + $0 } }
            return pointers.withUnsafeBufferPointer { body(Int32(params.count), $0.baseAddress) }
        }
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

    /// Copies names, values and counts out of libpq's memory.
    func rows() -> Rows {
        let rowCount = Int(PQntuples(pointer))
        let columnCount = Int(PQnfields(pointer))
        let columns = (0..<columnCount).map { String(cString: PQfname(pointer, Int32($0))) }
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
        let affected = Int(String(cString: PQcmdTuples(pointer))) ?? 0
        let tag = String(cString: PQcmdStatus(pointer))
        return Rows(columns: columns, count: rowCount, affectedRows: affected, commandTag: tag, values: values)
    }
}
