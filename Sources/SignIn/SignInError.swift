// The one error type of the SignIn module: a refused setting, a refused request, or a command's usage error.

/// A SignIn failure. Equality is on `code` only.
///
/// `detail` is written for operators: for configuration errors it names the setting (it is the message
/// `serve` prints at start-up); for request errors it is for logs only and never contains a token. What a
/// client sees is decided by the one mapping in `Failure`.
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
    /// The methods the path allows, for `.methodNotAllowed` (the `Allow` header).
    public let allow: [String]

    public init(_ code: Code, _ detail: String = "", allow: [String] = []) {
        self.code = code
        self.detail = detail
        self.allow = allow
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// The message for `.invalidConfiguration`, `.serverFailed` and `.usage` (they name the setting or the
    /// argument and never echo a secret); only the code name for request errors, whose detail belongs in logs.
    public var description: String {
        [.invalidConfiguration, .serverFailed, .usage].contains(code) ? detail : code.name
    }
}

extension SignInError.Code {
    /// A setting is missing or malformed; `detail` names it.
    public static let invalidConfiguration = Self("invalid_configuration")
    /// The responder could not start or stopped on a fatal server error; `detail` says why.
    public static let serverFailed = Self("server_failed")
    /// A command's arguments are wrong; `detail` says how.
    public static let usage = Self("usage")

    // Request bodies (POST /tokensignin).
    /// The request's Content-Type is not one the route accepts.
    public static let unsupportedMediaType = Self("unsupported_media_type")
    /// The body cannot be parsed: bad JSON, bad percent-encoding, invalid UTF-8, duplicate fields.
    public static let malformedBody = Self("malformed_body")
    /// The body parsed but carries no (or an empty) ID token.
    public static let missingToken = Self("missing_token")
    /// The ID token is longer than `SignInRequest.maxTokenBytes`.
    public static let tokenTooLarge = Self("token_too_large")
    /// The web form's `g_csrf_token` is missing or differs from the cookie of that name.
    public static let csrfMismatch = Self("csrf_mismatch")
    /// The body of `POST /risc` is not one compact JWS of the accepted media types; `detail` is the description.
    public static let malformedSecurityEvent = Self("malformed_security_event")
    /// The body is over the server's cap (the FastCGI layer did not read it).
    public static let bodyTooLarge = Self("body_too_large")

    // Routing, sessions and forgery defences.
    /// No such path.
    public static let notFound = Self("not_found")
    /// The path exists but not with this method (`allow` lists the ones it has).
    public static let methodNotAllowed = Self("method_not_allowed")
    /// A query parameter is malformed or out of range (`GET /sessions?limit=`).
    public static let invalidQuery = Self("invalid_query")
    /// No live session was presented (none, malformed, unknown, revoked, expired, idle, user disabled).
    public static let notSignedIn = Self("not_signed_in")
    /// The session to revoke is not one of the user's live sessions.
    public static let sessionNotFound = Self("session_not_found")
    /// The Origin / Sec-Fetch-Site check refused a cookie-authenticated change, or a token post from another site.
    public static let crossSite = Self("cross_site")
    /// The ID token was issued before Google revoked the account's sessions (Cross-Account Protection).
    public static let idTokenRevoked = Self("id_token_revoked")
    /// The account may not sign in (disabled, Google sign-in blocked); `detail` says which.
    public static let accountRefused = Self("account_refused")
    /// A stored identity cannot be written as the headers the session check promises (a fault, answered 500).
    public static let identityNotRepresentable = Self("identity_not_representable")
}
