// The one error type of the IDToken module: why a token or a key set was refused, or why keys are missing.
import CodedErrors

/// A verification or key-set failure. Equality is on `code` only; `detail` is for logs, never for clients.
public typealias IDTokenError = CodedFailure<IDTokenReason>

/// A stable, machine-readable reason (`expired`, `bad_audience`, `unknown_kid`, ...), used in logs and metrics.
public enum IDTokenReason: String, ReasonCode {
    // Token shape and encoding.
    case tokenTooLarge = "token_too_large"
    case malformed
    case badBase64 = "bad_base64"
    case badHeader = "bad_header"
    // Header policy.
    case unsupportedAlgorithm = "unsupported_algorithm"
    case embeddedKey = "embedded_key"
    case unknownCrit = "unknown_crit"
    case missingKid = "missing_kid"
    case unknownKid = "unknown_kid"
    case algorithmMismatch = "algorithm_mismatch"
    // Signature.
    case badSignature = "bad_signature"
    // Claims.
    case badPayload = "bad_payload"
    case badIssuer = "bad_issuer"
    case badAudience = "bad_audience"
    case expired
    case notYetValid = "not_yet_valid"
    case issuedInFuture = "issued_in_future"
    case lifetimeTooLong = "lifetime_too_long"
    case missingClaim = "missing_claim"
    case badClaimType = "bad_claim_type"
    case badSubject = "bad_subject"
    case hostedDomainNotAllowed = "hosted_domain_not_allowed"
    /// `azp` is present and is neither one of the client IDs nor a client of the same Google Cloud project: the
    /// token was issued to another party (a service account's metadata server, another project's client).
    case unauthorizedParty = "unauthorized_party"
    /// The token is a Google Cloud service account's (`email` ends in `.gserviceaccount.com`): not a person.
    case serviceAccount = "service_account"
    /// A string claim holds a control character (C0, such as NUL, CR or LF, or DEL).
    case badClaimValue = "bad_claim_value"
    /// A string claim is longer than the database stores (counted in Unicode scalars, as PostgreSQL's length()).
    case claimTooLong = "claim_too_long"
    /// An ID-token payload carrying `events`: a security event token, not an ID token.
    case notAnIDToken = "not_an_id_token"
    // Security event tokens (Cross-Account Protection).
    /// A payload without `events`: not a security event token (an ID token, for instance).
    case notASecurityEvent = "not_a_security_event"
    /// `events` empty, over the cap, or an event that is not an object or has members of the wrong type.
    case badEvents = "bad_events"
    // Keys.
    case weakKey = "weak_key"
    case unusableKey = "unusable_key"
    case duplicateKid = "duplicate_kid"
    case invalidKeySet = "invalid_key_set"
    case keysUnavailable = "keys_unavailable"
}

extension IDTokenError {
    /// True when trying again later may succeed (keys unavailable): the client is not at fault.
    public var isRetryable: Bool { code == .keysUnavailable }
}
