// The one error type of the Store module: why a connection, statement or migration failed.
import CodedErrors

/// A database failure. Equality is on `code` only; `detail` is for operators' logs, never for clients.
public struct StoreError: CodedError {
    /// A stable, machine-readable reason (`connection_lost`, `unique_violation`, ...), used in logs and metrics.
    public enum Code: String, ReasonCode {
        /// Could not open (or re-open) a connection: server down, wrong address, authentication refused, timeout.
        case connectionFailed = "connection_failed"
        /// The connection broke during a call (server restarted, backend terminated, network lost).
        case connectionLost = "connection_lost"
        /// The server rejected the statement (syntax, type, permission, check in a function, ...).
        case queryFailed = "query_failed"
        /// SQLSTATE 23505: a unique or primary-key constraint refused the row.
        case uniqueViolation = "unique_violation"
        /// Any other integrity constraint (class 23: check, foreign key, not null, exclusion).
        case constraintViolation = "constraint_violation"
        /// SQLSTATE 40001 or 40P01: the transaction lost a race; running it again may succeed.
        case serializationFailure = "serialization_failure"
        /// SQLSTATE 57014 or 55P03: the statement or lock timeout fired (a long lock, an overloaded server).
        case timedOut = "timed_out"
        /// SQLSTATE 42501: the role lacks a privilege (a deployment fault, not an outage).
        case permissionDenied = "permission_denied"
        /// A result did not have the shape the caller's SQL promises (column count, NULL, type): a bug, not an outage.
        case unexpectedResult = "unexpected_result"
        /// A parameter or statement libpq cannot carry (a NUL character in text, two statements under one name).
        case invalidParameter = "invalid_parameter"
        /// A migration file is unreadable, misnamed, duplicated, not UTF-8, failed, or ended its own transaction.
        case badMigration = "bad_migration"
        /// The migrations folder cannot be opened (mistyped, or not installed).
        case noMigrationFolder = "no_migration_folder"
        /// A migration file changed after it was applied; the database and the files no longer agree.
        case checksumMismatch = "checksum_mismatch"
    }

    public let code: Code
    /// The server's SQLSTATE (`23505`, `57P01`, ...) when the server sent one.
    public let sqlState: String?
    /// The constraint a violation hit (`users_google_sub_key`), when the server named one.
    public let constraint: String?
    /// libpq's or the server's primary message, for logs. Never includes parameter values (no DETAIL line).
    public let detail: String

    public init(_ code: Code, sqlState: String? = nil, constraint: String? = nil, _ detail: String = "") {
        self.code = code
        self.sqlState = sqlState
        self.constraint = constraint
        self.detail = detail
    }

    /// True when the same request may succeed if tried again: the database is down, restarting, failing over
    /// or overloaded, a timeout fired, or the transaction lost a race. The client is not at fault: answer 503.
    /// Anything else (a missing table, a permission refused, a constraint our own SQL broke) is a fault of the
    /// deployment or the code, and retrying will not help.
    public var isRetryable: Bool {
        switch code {
        case .connectionFailed, .connectionLost, .serializationFailure, .timedOut:
            return true
        case .queryFailed, .uniqueViolation, .constraintViolation, .permissionDenied, .unexpectedResult,
             .invalidParameter, .badMigration, .noMigrationFolder, .checksumMismatch:
            // A code made by hand may still carry the server's word that the condition passes (53300 as query_failed).
            return sqlState.map(StoreError.isRetryable(sqlState:)) ?? false
        }
    }

    /// A retryable failure that any statement would meet now (the connection, a timeout, the server out of
    /// resources or going down), as opposed to one that is a statement's own: a lock not granted, a deadlock, a
    /// serialization failure (another transaction holds or changed that statement's rows). In a batch, an outage
    /// fails every pending item; a statement's own failure only that one (`Connection.executeBatch`).
    public var isOutage: Bool {
        switch code {
        case .serializationFailure:
            return false
        case .connectionFailed, .connectionLost, .timedOut, .queryFailed, .uniqueViolation, .constraintViolation,
             .permissionDenied, .unexpectedResult, .invalidParameter, .badMigration, .noMigrationFolder,
             .checksumMismatch:
            // 55P03 is a lock not granted: that statement's rows, not the server.
            return isRetryable && sqlState != "55P03"
        }
    }

    /// Class 08 (connection exception), class 53 (insufficient resources: too many connections, out of memory
    /// or disk), 57P01-57P03 (shutdown, cannot connect now), 40001/40P01 (serialization failure, deadlock),
    /// 57014 (statement_timeout), 55P03 (lock_timeout), 25006 (read-only: we reached a standby after a failover).
    static func isRetryable(sqlState: String) -> Bool {
        sqlState.hasPrefix("08") || sqlState.hasPrefix("53")
            || ["57P01", "57P02", "57P03", "40001", "40P01", "57014", "55P03", "25006"].contains(sqlState)
    }

    /// States after which this connection must be re-established: the server session is gone, or the server is a
    /// read-only standby (after a failover libpq must pick the new primary again, `target_session_attrs`).
    static func losesConnection(sqlState: String) -> Bool {
        sqlState.hasPrefix("08") || ["57P01", "57P02", "57P03", "25006"].contains(sqlState)
    }

    /// The code for a server error with this SQLSTATE.
    static func code(forSQLState sqlState: String?) -> Code {
        guard let sqlState else { return .queryFailed }
        if losesConnection(sqlState: sqlState) { return .connectionLost }
        switch sqlState {
        case "23505": return .uniqueViolation
        case "40001", "40P01": return .serializationFailure
        case "57014", "55P03": return .timedOut
        case "42501": return .permissionDenied
        default: return sqlState.hasPrefix("23") ? .constraintViolation : .queryFailed
        }
    }
}
