// The one error type of the FastCGI module: why the responder could not listen or keep serving.

/// A FastCGI start-up or serving failure. Equality is on `code` only; `detail` is for operators' logs.
public struct FastCGIError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable, machine-readable reason (`bad_listen_address`, `listen_failed`, ...).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        init(_ name: String) { self.name = name }
        public var description: String { name }
    }

    public let code: Code
    /// Extra context for logs (the address, the failing call and its errno text).
    public let detail: String

    public init(_ code: Code, _ detail: String = "") {
        self.code = code
        self.detail = detail
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
    public var description: String { code.name }
}

extension FastCGIError.Code {
    /// The listen value is neither empty, a path, nor `host:port` with a numeric host and port.
    public static let badListenAddress = Self("bad_listen_address")
    /// socket/bind/listen/chmod failed (path missing, port in use, permission denied, ...).
    public static let listenFailed = Self("listen_failed")
    /// The inherited descriptor (fd 0, or fd 3 under systemd) is not a listening stream socket.
    public static let notASocket = Self("not_a_socket")
    /// No lane, a lane without workers or queue, a limit out of range, or `maxBodyBytes` < 0.
    public static let badConfiguration = Self("bad_configuration")
    /// epoll, eventfd or pthread_create failed.
    public static let startFailed = Self("start_failed")
    /// `run` was called while it was already running, or after it returned.
    public static let alreadyRun = Self("already_run")
    /// A worker thread could not take `Server.scheduling` (a system call filter, say): it serves under the
    /// policy it had (reported through `report`, never thrown).
    public static let schedulingRefused = Self("scheduling_refused")
    /// Accepting connections failed for a reason that retrying cannot fix (e.g. the socket was closed).
    public static let acceptFailed = Self("accept_failed")

    // Why a connection was closed (reported through `ServerEvent`, never thrown to the caller of `run`).

    /// A record header whose version is not 1 (not FastCGI, or a stream out of step).
    public static let badVersion = Self("bad_version")
    /// A BEGIN_REQUEST whose body is not 8 bytes.
    public static let malformedBegin = Self("malformed_begin")
    /// A record the protocol does not allow at that point of a request (a second BEGIN_REQUEST for the same
    /// id, STDIN before PARAMS ended, DATA or STDOUT from the web server, ...).
    public static let unexpectedRecord = Self("unexpected_record")
    /// A request's PARAMS longer than `Limits.maxParamsBytes`.
    public static let paramsTooLarge = Self("params_too_large")
    /// More parameters than `Limits.maxParams`.
    public static let tooManyParams = Self("too_many_params")
    /// A name or value length that runs past the end of the PARAMS (or GET_VALUES) bytes.
    public static let malformedParams = Self("malformed_params")
    /// More than `Limits.maxDiscardBytes` of a too-large body to skip.
    public static let bodyTooLarge = Self("body_too_large")
    /// More than `Limits.maxStrayRecords` records outside any request.
    public static let tooManyStrayRecords = Self("too_many_stray_records")
    /// A request not complete within `Limits.requestTimeout`, or silent mid-request for `Limits.stallTimeout`.
    public static let requestTimedOut = Self("request_timed_out")
    /// The peer did not read an answer within `Limits.writeTimeout`, or the connection broke while writing.
    public static let writeFailed = Self("write_failed")
    /// The handler's response had a header that cannot be sent (not a token, CR/LF/NUL/control in a value,
    /// or `Status`): a generic 500 was sent instead.
    public static let invalidResponse = Self("invalid_response")
    /// A lane's queue was full, or a request waited in it too long: the `overloaded` response was sent.
    public static let overloaded = Self("overloaded")
}
