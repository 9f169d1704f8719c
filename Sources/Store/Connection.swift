// Connection: one libpq connection used by one thread at a time; opening it, its options and its settings.
import CLibPQ

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
    // Internal, not private, from here on: the extensions in Sending, Pipeline and ServerSession use them.
    let pg: OpaquePointer
    /// What the conninfo points at; decides how statements and timeouts are sent.
    public let pooler: Pooler
    /// SQL of the statements prepared on the current server session, by name (never with a transaction pooler).
    var prepared: [String: String] = [:]
    /// Set when a call found the connection broken; the next call resets it first.
    var needsReset = false
    /// The longest the connection waits for PostgreSQL's next byte while an answer is due (nil: as long as it
    /// takes); past it the connection is dropped (`responseTimeout`).
    let responseTimeoutMilliseconds: Int32?

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
