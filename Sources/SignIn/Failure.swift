// The one error mapping: every failure a route meets becomes its HTTP answer, and its log line, here.
import FastCGI
import IDToken
import Store

/// An error on its way to the client: status, documented error code, fixed description, extra headers, and
/// what the log says about it (a reason code; the SQLSTATE for database faults). Never the token or the body.
package struct Failure: Sendable {
    var status: Int
    var code: ErrorCode
    var description: String
    var headers: [(name: String, value: String)] = []
    /// The precise reason for logs and metrics (`malformed_body`, `bad_audience`, `connection_lost`, ...).
    var reason: String
    var sqlState: String? = nil

    /// Seconds a client should wait before retrying when the database or Google's keys are unavailable.
    static let retryAfterDatabase = 2
    static let retryAfterKeys = 5

    /// True for faults of the server (5xx): logged at error level, never blamed on the client.
    var isServerFault: Bool { status >= 500 }

    /// For `POST /risc`: RFC 8935's error code (`invalid_request`, `invalid_key`, ...) when the SET was refused;
    /// the answer is then `400 {"err": ..., "description": ...}`.
    var securityEventError: String?

    /// The answer in the documented JSON shape `{"error": code, "error_description": description}`, or RFC 8935's
    /// `{"err": code, "description": description}` for a refused security event token.
    package var response: Response {
        if let securityEventError {
            return .json(status: 400, .object([("err", .string(securityEventError)), ("description", .string(description))]),
                         headers: headers)
        }
        return .json(status: status, .object([("error", .string(code.rawValue)), ("error_description", .string(description))]),
                     headers: headers)
    }

    /// The failure of `POST /risc` (RFC 8935): whatever is wrong with the request or the SET is a 400 with the
    /// RFC's code, so that Google does not retry it; our own outages keep their 503 (Google retries), and a
    /// fault of ours its 500. The verifier refuses only in its first stages (the JWS, the addressing): a SET
    /// signed by Google for us whose other claims cannot be read never gets here (it is recorded unparsed, 202),
    /// so the claim codes below come from a request that is not Google's SET for us at all.
    init(securityEvent error: any Error) {
        self.init(error)
        guard status < 500 else { return }
        let code: String
        switch error {
        case let error as IDTokenError:
            switch error.code {
            case .missingKid, .unknownKid, .weakKey, .unusableKey, .duplicateKid, .algorithmMismatch: code = "invalid_key"
            case .badSignature: code = "authentication_failed"
            case .badIssuer: code = "invalid_issuer"
            case .badAudience: code = "invalid_audience"
            case .tokenTooLarge, .malformed, .badBase64, .badHeader, .unsupportedAlgorithm, .embeddedKey, .unknownCrit,
                 .badPayload, .expired, .notYetValid, .issuedInFuture, .lifetimeTooLong, .missingClaim, .badClaimType,
                 .badSubject, .hostedDomainNotAllowed, .badClaimValue, .claimTooLong, .notAnIDToken, .notASecurityEvent,
                 .badEvents, .invalidKeySet, .keysUnavailable, .unauthorizedParty, .serviceAccount:
                code = "invalid_request"
            }
            description = Self.securityEventDescriptions[code] ?? "the security event token is not valid"
        default:
            code = "invalid_request"
        }
        securityEventError = code
        status = 400
        headers = []
    }

    private static let securityEventDescriptions = [
        "invalid_request": "the security event token is malformed or its claims are not acceptable",
        "invalid_key": "the security event token names no usable key",
        "authentication_failed": "the security event token's signature does not verify",
        "invalid_issuer": "the security event token's issuer is not Google",
        "invalid_audience": "the security event token is not for this service's client IDs",
    ]

    package init(_ code: ErrorCode, _ description: String, reason: String, headers: [(name: String, value: String)] = []) {
        self.securityEventError = nil
        self.status = code.status
        self.code = code
        self.description = description
        self.reason = reason
        self.headers = headers
    }

    /// Every error a route can meet: the client's faults (`SignInError`, a refused `IDTokenError`) get their 4xx;
    /// retryable infrastructure faults (`StoreError.isRetryable`, keys unavailable) 503 with Retry-After; any
    /// other fault (a missing table, a permission refused, a constraint our own SQL broke, a bug) 500.
    init(_ error: any Error) {
        switch error {
        case let error as SignInError: self.init(signIn: error)
        case let error as IDTokenError: self.init(token: error)
        case let error as StoreError: self.init(store: error)
        default: self.init(.serverError, "the server failed; the fault is logged", reason: "unexpected_error")
        }
    }

    private init(signIn error: SignInError) {
        let reason = error.code.name
        switch error.code {
        case .unsupportedMediaType:
            self.init(.unsupportedMediaType, "send application/json or application/x-www-form-urlencoded", reason: reason)
        case .malformedBody: self.init(.invalidRequest, "the request body is malformed", reason: reason)
        case .missingToken: self.init(.invalidRequest, "the request carries no ID token", reason: reason)
        case .tokenTooLarge: self.init(.invalidRequest, "the ID token is too long", reason: reason)
        case .invalidQuery: self.init(.invalidRequest, "a query parameter is malformed or out of range", reason: reason)
        case .csrfMismatch: self.init(.csrfCheckFailed, "the CSRF token does not match its cookie", reason: reason)
        case .crossSite: self.init(.csrfCheckFailed, "the request does not come from this site", reason: reason)
        case .bodyTooLarge: self.init(.requestTooLarge, "the request body is over 64 KB", reason: reason)
        // The route writes this detail as the description: it is a fixed sentence, never the body.
        case .malformedSecurityEvent: self.init(.invalidRequest, error.detail, reason: reason)
        case .notFound: self.init(.notFound, "no such resource", reason: reason)
        case .sessionNotFound: self.init(.notFound, "no such session", reason: reason)
        case .methodNotAllowed:
            self.init(.methodNotAllowed, "method not allowed", reason: reason,
                      headers: [("Allow", error.allow.joined(separator: ", "))])
        case .notSignedIn:
            self.init(.invalidToken, "no live session", reason: reason, headers: [("WWW-Authenticate", "Bearer")])
        case .idTokenRevoked: self.init(.invalidToken, "the ID token is not valid", reason: reason)
        case .accountRefused:
            self.init(.accessDenied, "this account may not sign in", reason: error.detail.isEmpty ? reason : error.detail)
        case .identityNotRepresentable:
            // A stored identity the headers cannot carry is a fault of the data, never of the client.
            self.init(.serverError, "the server failed; the fault is logged", reason: reason)
        }
    }

    private init(token error: IDTokenError) {
        let reason = error.code.name
        switch error.code {
        case .keysUnavailable:
            self.init(.temporarilyUnavailable, "Google's signing keys are unavailable", reason: reason,
                      headers: [("Retry-After", String(Self.retryAfterKeys))])
        case .hostedDomainNotAllowed:
            self.init(.accessDenied, "this account's domain may not sign in", reason: reason)
        case .tokenTooLarge, .malformed, .badBase64, .badHeader, .unsupportedAlgorithm, .embeddedKey, .unknownCrit, .missingKid,
             .unknownKid, .algorithmMismatch, .badSignature, .badPayload, .badIssuer, .badAudience, .expired, .notYetValid,
             .issuedInFuture, .lifetimeTooLong, .missingClaim, .badClaimType, .badSubject, .badClaimValue, .claimTooLong,
             .notAnIDToken, .notASecurityEvent, .badEvents, .weakKey, .unusableKey, .duplicateKid, .invalidKeySet,
             .unauthorizedParty, .serviceAccount:
            self.init(.invalidToken, "the ID token is not valid", reason: reason)
        }
    }

    private init(store error: StoreError) {
        if error.isRetryable {
            self.init(.temporarilyUnavailable, "the database is unavailable; try again shortly", reason: error.code.name,
                      headers: [("Retry-After", String(Self.retryAfterDatabase))])
        } else {
            self.init(.serverError, "the server failed; the fault is logged", reason: error.code.name)
        }
        sqlState = error.sqlState
    }
}
