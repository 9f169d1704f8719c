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
    /// `workers` < 1 or `maxBodyBytes` < 0.
    public static let badConfiguration = Self("bad_configuration")
    /// FCGX_Init, pipe or pthread_create failed.
    public static let startFailed = Self("start_failed")
    /// `run` was called while it was already running, or after it returned.
    public static let alreadyRun = Self("already_run")
    /// Accepting connections failed for a reason that retrying cannot fix (e.g. the socket was closed).
    public static let acceptFailed = Self("accept_failed")
}
