// The one error type of the FastCGI module: why the responder could not listen or keep serving.
import CodedErrors

/// A FastCGI start-up or serving failure. Equality is on `code` only; `detail` is for operators' logs.
public typealias FastCGIError = CodedFailure<FastCGIReason>

/// A stable, machine-readable reason; its raw value is the name logs and metrics carry.
public enum FastCGIReason: String, ReasonCode {
    /// The listen value is neither empty, a path, nor `host:port` with a numeric host and port.
    case badListenAddress = "bad_listen_address"
    /// socket/bind/listen/chmod failed (path missing, port in use, permission denied, ...).
    case listenFailed = "listen_failed"
    /// The inherited descriptor (fd 0, or fd 3 under systemd) is not a listening stream socket.
    case notASocket = "not_a_socket"
    /// No lane, a lane without workers or queue, a limit out of range, or `maxBodyBytes` < 0.
    case badConfiguration = "bad_configuration"
    /// epoll, eventfd or pthread_create failed.
    case startFailed = "start_failed"
    /// `run` was called while it was already running, or after it returned.
    case alreadyRun = "already_run"
    /// A worker thread could not take `Server.scheduling` (a system call filter, say): it serves under the
    /// policy it had (reported through `report`, never thrown).
    case schedulingRefused = "scheduling_refused"
    /// Accepting connections failed for a reason that retrying cannot fix (e.g. the socket was closed).
    case acceptFailed = "accept_failed"

    // Why a connection was closed (reported through `report`, never thrown to the caller of `run`).

    /// A record header whose version is not 1 (not FastCGI, or a stream out of step).
    case badVersion = "bad_version"
    /// A BEGIN_REQUEST whose body is not 8 bytes.
    case malformedBegin = "malformed_begin"
    /// A record the protocol does not allow at that point of a request (a second BEGIN_REQUEST for the same
    /// id, STDIN before PARAMS ended, DATA or STDOUT from the web server, ...).
    case unexpectedRecord = "unexpected_record"
    /// A request's PARAMS longer than `Limits.maxParamsBytes`.
    case paramsTooLarge = "params_too_large"
    /// More parameters than `Limits.maxParams`.
    case tooManyParams = "too_many_params"
    /// A name or value length that runs past the end of the PARAMS (or GET_VALUES) bytes.
    case malformedParams = "malformed_params"
    /// More than `Limits.maxDiscardBytes` of a too-large body to skip.
    case bodyTooLarge = "body_too_large"
    /// More than `Limits.maxStrayRecords` records outside any request.
    case tooManyStrayRecords = "too_many_stray_records"
    /// A request not complete within `Limits.requestTimeout`, or silent mid-request for `Limits.stallTimeout`.
    case requestTimedOut = "request_timed_out"
    /// The peer did not read an answer within `Limits.writeTimeout`, or the connection broke while writing.
    case writeFailed = "write_failed"
    /// The handler's response had a header that cannot be sent (not a token, CR/LF/NUL/control in a value,
    /// or `Status`): a generic 500 was sent instead.
    case invalidResponse = "invalid_response"
    /// A lane's queue was full, or a request waited in it too long: the `overloaded` response was sent.
    case overloaded = "overloaded"
}
