// The one error type of the SignIn module: why a request was refused (the one mapping in `Failure` turns it into
// the answer).
import CodedErrors

/// A refused request. Equality is on `code` only; `detail` is for logs only and never contains a token. What a client
/// sees is decided by the one mapping in `Failure`.
public struct SignInError: CodedError {
    /// A stable, machine-readable reason, used in logs and metrics (not sent to clients as such).
    public enum Code: String, ReasonCode {
        // Request bodies (POST /tokensignin).
        /// The request's Content-Type is not one the route accepts.
        case unsupportedMediaType = "unsupported_media_type"
        /// The body cannot be parsed: bad JSON, bad percent-encoding, invalid UTF-8, duplicate fields.
        case malformedBody = "malformed_body"
        /// The body parsed but carries no (or an empty) ID token.
        case missingToken = "missing_token"
        /// The ID token is longer than `SignInRequest.maxTokenBytes`.
        case tokenTooLarge = "token_too_large"
        /// The web form's `g_csrf_token` is missing or differs from the cookie of that name.
        case csrfMismatch = "csrf_mismatch"
        /// The body of `POST /risc` is not one compact JWS of the accepted media types; `detail` is the description.
        case malformedSecurityEvent = "malformed_security_event"
        /// The body is over the server's cap (the FastCGI layer did not read it).
        case bodyTooLarge = "body_too_large"
        // Routing, sessions and forgery defences.
        /// No such path.
        case notFound = "not_found"
        /// The path exists but not with this method (`allow` lists the ones it has).
        case methodNotAllowed = "method_not_allowed"
        /// A query parameter is malformed or out of range (`GET /sessions?limit=`).
        case invalidQuery = "invalid_query"
        /// No live session was presented (none, malformed, unknown, revoked, expired, idle, user disabled).
        case notSignedIn = "not_signed_in"
        /// The session to revoke is not one of the user's live sessions.
        case sessionNotFound = "session_not_found"
        /// The Origin / Sec-Fetch-Site check refused a cookie-authenticated change, or a token post from another site.
        case crossSite = "cross_site"
        /// The ID token was issued before Google revoked the account's sessions (Cross-Account Protection).
        case idTokenRevoked = "id_token_revoked"
        /// The account may not sign in (disabled, Google sign-in blocked); `detail` says which.
        case accountRefused = "account_refused"
        /// A stored identity cannot be written as the headers the session check promises (a fault, answered 500).
        case identityNotRepresentable = "identity_not_representable"
    }

    public let code: Code
    /// Log context: which rule refused the request (never the body or a token).
    public let detail: String
    /// The methods the path allows, for `.methodNotAllowed` (the `Allow` header).
    public let allow: [String]

    public init(_ code: Code, _ detail: String = "", allow: [String] = []) {
        self.code = code
        self.detail = detail
        self.allow = allow
    }
}
