// The one error type of the IDToken module: why a token or a key set was refused, or why keys are missing.

/// A verification or key-set failure. Equality is on `code` only; `detail` is for logs, never for clients.
public struct IDTokenError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable, machine-readable reason (`expired`, `bad_audience`, `unknown_kid`, ...), used in logs and metrics.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        init(_ name: String) { self.name = name }
        public var description: String { name }
    }

    public let code: Code
    /// Extra context for operators' logs. Never contains the token itself.
    public let detail: String

    public init(_ code: Code, _ detail: String = "") {
        self.code = code
        self.detail = detail
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
    public var description: String { code.name }

    /// True when trying again later may succeed (keys unavailable): the client is not at fault.
    public var isRetryable: Bool { code == .keysUnavailable }
}

extension IDTokenError.Code {
    // Token shape and encoding.
    public static let tokenTooLarge = Self("token_too_large")
    public static let malformed = Self("malformed")
    public static let badBase64 = Self("bad_base64")
    public static let badHeader = Self("bad_header")
    // Header policy.
    public static let unsupportedAlgorithm = Self("unsupported_algorithm")
    public static let embeddedKey = Self("embedded_key")
    public static let unknownCrit = Self("unknown_crit")
    public static let missingKid = Self("missing_kid")
    public static let unknownKid = Self("unknown_kid")
    public static let algorithmMismatch = Self("algorithm_mismatch")
    // Signature.
    public static let badSignature = Self("bad_signature")
    // Claims.
    public static let badPayload = Self("bad_payload")
    public static let badIssuer = Self("bad_issuer")
    public static let badAudience = Self("bad_audience")
    public static let expired = Self("expired")
    public static let notYetValid = Self("not_yet_valid")
    public static let issuedInFuture = Self("issued_in_future")
    public static let lifetimeTooLong = Self("lifetime_too_long")
    public static let missingClaim = Self("missing_claim")
    public static let badClaimType = Self("bad_claim_type")
    public static let badSubject = Self("bad_subject")
    public static let hostedDomainNotAllowed = Self("hosted_domain_not_allowed")
    /// A string claim holds a control character (C0, such as NUL, CR or LF, or DEL).
    public static let badClaimValue = Self("bad_claim_value")
    /// A string claim is longer than the database stores (counted in Unicode scalars, as PostgreSQL's length()).
    public static let claimTooLong = Self("claim_too_long")
    /// An ID-token payload carrying `events`: a security event token, not an ID token.
    public static let notAnIDToken = Self("not_an_id_token")
    // Security event tokens (Cross-Account Protection).
    /// A payload without `events`: not a security event token (an ID token, for instance).
    public static let notASecurityEvent = Self("not_a_security_event")
    /// `events` empty, over the cap, or an event that is not an object or has members of the wrong type.
    public static let badEvents = Self("bad_events")
    // Keys.
    public static let weakKey = Self("weak_key")
    public static let unusableKey = Self("unusable_key")
    public static let duplicateKid = Self("duplicate_kid")
    public static let invalidKeySet = Self("invalid_key_set")
    public static let keysUnavailable = Self("keys_unavailable")
}
