// The one error type of the SignIn module: a refused setting or a refused request body.

/// A SignIn failure. Equality is on `code` only.
///
/// `detail` is written for operators: for configuration errors it names the setting (it is the message
/// `serve` prints at start-up); for request errors it is for logs only and never contains a token.
public struct SignInError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable, machine-readable reason, used in logs and metrics (not sent to clients as such).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        init(_ name: String) { self.name = name }
        public var description: String { name }
    }

    public let code: Code
    /// For configuration errors, the full message naming the setting; otherwise log context.
    public let detail: String

    public init(_ code: Code, _ detail: String = "") {
        self.code = code
        self.detail = detail
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// The configuration message for `.invalidConfiguration` (it names the setting and never echoes a
    /// secret); only the code name for request errors, whose detail belongs in logs.
    public var description: String {
        code == .invalidConfiguration || code == .serverFailed ? detail : code.name
    }
}

extension SignInError.Code {
    /// A setting is missing or malformed; `detail` names it.
    public static let invalidConfiguration = Self("invalid_configuration")
    /// The request's Content-Type is not one `POST /tokensignin` accepts (HTTP 415).
    public static let unsupportedMediaType = Self("unsupported_media_type")
    /// The body cannot be parsed: bad JSON, bad percent-encoding, invalid UTF-8, duplicate fields (HTTP 400).
    public static let malformedBody = Self("malformed_body")
    /// The body parsed but carries no (or an empty) ID token (HTTP 400).
    public static let missingToken = Self("missing_token")
    /// The ID token is longer than `SignInRequest.maxTokenBytes` (HTTP 400).
    public static let tokenTooLarge = Self("token_too_large")
    /// The web form's `g_csrf_token` is missing or differs from the cookie of that name (HTTP 403).
    public static let csrfMismatch = Self("csrf_mismatch")
}

extension SignInError.Code {
    /// The responder could not start or stopped on a fatal server error; `detail` says why.
    public static let serverFailed = Self("server_failed")
}
