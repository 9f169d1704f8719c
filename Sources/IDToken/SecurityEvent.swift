// The pure verifier of Google's security event tokens (Cross-Account Protection: RFC 8417 SETs pushed per RFC 8935),
// in stages: the signature, then the addressing (issuer and audience), then everything else.
import FoundationEssentials

/// One event of a verified security event token. Types are reported, not interpreted, here.
public struct SecurityEvent: Sendable, Hashable {
    /// The Google account an event is about: its issuer and `sub` (the user's `google_sub`).
    public struct Subject: Sendable, Hashable {
        public var issuer: String
        public var sub: String
    }

    /// The event type URI (see the constants below).
    public var type: String
    /// From the event's `subject` (`iss-sub` or `id_token_claims`), else the token's `sub_id` (`iss_sub`); nil
    /// for any other subject shape (a revoked OAuth token, an email address): an event about no known user.
    public var subject: Subject?
    /// `reason`, when present and not null (account-disabled: `hijacking`, `bulk-account`).
    public var reason: String?
    /// `state`, when present and not null (verification events echo the state the receiver asked for).
    public var state: String?

    public init(type: String, subject: Subject?, reason: String?, state: String?) {
        self.type = type
        self.subject = subject
        self.reason = reason
        self.state = state
    }
}

extension SecurityEvent {
    // The event types of Google's Cross-Account Protection (https://developers.google.com/identity/protocols/risc).
    public static let sessionsRevoked = "https://schemas.openid.net/secevent/risc/event-type/sessions-revoked"
    public static let tokensRevoked = "https://schemas.openid.net/secevent/oauth/event-type/tokens-revoked"
    public static let tokenRevoked = "https://schemas.openid.net/secevent/oauth/event-type/token-revoked"
    public static let accountDisabled = "https://schemas.openid.net/secevent/risc/event-type/account-disabled"
    public static let accountEnabled = "https://schemas.openid.net/secevent/risc/event-type/account-enabled"
    public static let accountCredentialChangeRequired = "https://schemas.openid.net/secevent/risc/event-type/account-credential-change-required"
    public static let verification = "https://schemas.openid.net/secevent/risc/event-type/verification"
}

/// A security event token that passed every check.
public struct VerifiedSecurityEvent: Sendable, Hashable {
    /// The token's unique id: receivers keep it to ignore a token delivered twice.
    public var jti: String
    public var issuer: String
    /// The accepted audience (a configured RISC audience) the token is addressed to.
    public var audience: String
    /// As Google sent it, also when it is ahead of our clock: events are ordered by it.
    public var issuedAt: Int64
    /// `exp` when it is a number; never checked (RFC 8417: a SET does not expire; Google says not to check it).
    public var expiresAt: Int64?
    public var keyID: String
    /// At least one, at most `SecurityEventVerifier.maxEvents`, ordered by type.
    public var events: [SecurityEvent]
    /// Seconds `iat` is ahead of the verifier's clock, when that is more than the clock skew; nil otherwise. The
    /// event is accepted all the same (a clock of ours that is behind must not lose it); the receiver logs it.
    public var issuedAheadBy: Int64? = nil
}

/// A security event token whose signature, issuer and audience are good but whose other claims the receiver cannot
/// read (a claim of another type, a missing `jti`, an event in an unexpected shape). Google does not redeliver a
/// SET answered 400, so it is recorded as it came (`claimsJSON`) and accepted; nothing about it is applied to a user.
public struct UnparsedSecurityEvent: Sendable, Hashable {
    /// The payload's `jti` when it is a usable one (1 to 256 characters, no control character); otherwise
    /// `sha256:` and the hex SHA-256 of the payload, so a redelivery is recorded once all the same.
    public var jti: String
    public var issuer: String
    public var audience: String
    /// The type URI of the payload's one event when `events` is an object with one usable member name; otherwise
    /// `SecurityEventVerifier.unparsedType`.
    public var type: String
    /// `iat` when it is a number from 1970 through 9999; nil otherwise.
    public var issuedAt: Int64?
    public var keyID: String
    /// The payload as received: UTF-8 JSON, one object, at most a token's size (16 KiB).
    public var claimsJSON: String
    /// What the full check refused (`bad_claim_type`, `bad_events`, `missing_claim`, ...), for logs.
    public var reason: IDTokenError
}

/// What a security event token that passed the signature, issuer and audience checks is: verified, or unparsed.
public enum AcceptedSecurityEvent: Sendable, Hashable {
    case verified(VerifiedSecurityEvent)
    case unparsed(UnparsedSecurityEvent)

    /// The verified token, nil for an unparsed one.
    public var verified: VerifiedSecurityEvent? {
        if case .verified(let set) = self { set } else { nil }
    }

    /// The unparsed token, nil for a verified one.
    public var unparsed: UnparsedSecurityEvent? {
        if case .unparsed(let set) = self { set } else { nil }
    }
}

/// Verifies a security event token against a key set (Google signs them with the keys of its ID tokens), a policy
/// (the accepted audiences as its client IDs, and its clock skew) and a clock. No I/O. Three stages
/// (docs/verification.md): the JWS with the same strict rules as ID tokens; the addressing (a SET at all, `iss`,
/// `aud`), whose failures are refusals; then the other claims, whose failures make the token `.unparsed` instead.
public struct SecurityEventVerifier: Sendable {
    public let policy: Policy
    public init(policy: Policy) { self.policy = policy }

    /// Google's documentation writes the issuer with a trailing slash, its tokens without.
    public static let issuers = ["https://accounts.google.com/", "https://accounts.google.com"]
    public static let maxEvents = 16
    /// The event type an unparsed token is recorded under when its one event type cannot be read.
    public static let unparsedType = "unparsed"
    /// The `iat` values a timestamp column holds and a reader believes: 1970 through 9999. Since an `iat` ahead of
    /// our clock is no longer refused, one far outside this would otherwise reach the database and fail there.
    package static let issuedAtRange: ClosedRange<Int64> = 0...253_402_300_799
    /// The longest accepted strings, in Unicode scalars (a subject's `sub` as `google_sub`: 255).
    package static let limits = (jti: 256, type: 256, reason: 256, state: 1024, issuer: 256, sub: 255)
    /// Members of any object when looking for the addressing: far more than the full check's 64, so that a payload
    /// with many claims or events still has its issuer and audience read (and is recorded unparsed). A 16 KiB token
    /// holds fewer anyway; duplicate names and nesting beyond 16 stay refusals (which `iss` would count?).
    static let maxAddressedMembers = 2048

    /// `.success(.verified)` or `.success(.unparsed)` once the signature, issuer and audience are good; otherwise the
    /// refusal (docs/verification.md lists the codes and RFC 8935's `err` for each).
    public func verify(_ token: String, keys: KeySet, now: Int64) -> Result<AcceptedSecurityEvent, IDTokenError> {
        switch JWS.verify(token, keys: keys) {
        case .success(let jws): accept(payload: jws.payload, keyID: jws.keyID, now: now)
        case .failure(let error): .failure(error)
        }
    }

    /// The stages after the signature, on its payload.
    func accept(payload: [UInt8], keyID: String, now: Int64) -> Result<AcceptedSecurityEvent, IDTokenError> {
        let envelope: SecurityEventEnvelope, text: String
        switch JSONObject.decodeKeepingText(SecurityEventEnvelope.self, from: payload, maxMembers: Self.maxAddressedMembers,
                                            nestedMembers: Self.maxAddressedMembers) {
        case .success(let decoded): (envelope, text) = decoded
        case .failure(.decoding(let error as ClaimTypeError)): return .failure(IDTokenError(.badClaimType, "claim \(error.claim)"))
        case .failure(let failure): return .failure(IDTokenError(.badPayload, failure.summary))
        }
        guard envelope.hasEvents else { return .failure(IDTokenError(.notASecurityEvent, "no events claim")) }
        guard let iss = envelope.iss else { return .failure(IDTokenError(.missingClaim, "iss")) }
        guard Self.issuers.contains(iss) else { return .failure(IDTokenError(.badIssuer, "")) }
        guard let aud = envelope.aud else { return .failure(IDTokenError(.missingClaim, "aud")) }
        guard let audience = aud.first(where: { a in policy.clientIDs.contains(where: { sameBytes($0, a) }) }) else {
            return .failure(IDTokenError(.badAudience, ""))
        }
        switch checkClaims(payload: payload, issuer: iss, audience: audience, keyID: keyID, now: now) {
        case .success(let verified):
            return .success(.verified(verified))
        case .failure(let reason):
            return .success(.unparsed(UnparsedSecurityEvent(
                jti: envelope.usableJTI ?? "sha256:" + Digest.sha256(payload).map { hexDigit($0 >> 4) + hexDigit($0 & 0xF) }.joined(),
                issuer: iss, audience: audience, type: envelope.usableType ?? Self.unparsedType, issuedAt: envelope.iat,
                keyID: keyID, claimsJSON: text, reason: reason)))
        }
    }

    /// The full check of an addressed payload: every claim and event as RFC 8417 and Google's RISC describe them.
    func checkClaims(payload: [UInt8], issuer: String, audience: String, keyID: String, now: Int64)
        -> Result<VerifiedSecurityEvent, IDTokenError> {
        let claims: EventClaims
        switch JSONObject.decode(EventClaims.self, from: payload, maxMembers: Policy.maxClaims) {
        case .success(let decoded): claims = decoded
        case .failure(.decoding(let error as ClaimTypeError)): return .failure(IDTokenError(.badClaimType, "claim \(error.claim)"))
        case .failure(.decoding(let error as EventsError)): return .failure(IDTokenError(.badEvents, error.detail))
        case .failure(let failure): return .failure(IDTokenError(.badPayload, failure.summary))
        }
        guard let events = claims.events else { return .failure(IDTokenError(.notASecurityEvent, "no events claim")) }
        guard let iat = claims.iat else { return .failure(IDTokenError(.missingClaim, "iat")) }
        guard Self.issuedAtRange.contains(iat) else { return .failure(IDTokenError(.badClaimValue, "iat outside 1970...9999")) }
        guard let jti = claims.jti else { return .failure(IDTokenError(.missingClaim, "jti")) }
        if jti.isEmpty { return .failure(IDTokenError(.badClaimValue, "empty jti")) }
        if let code = ClaimText.problem(jti, maxScalars: Self.limits.jti) { return .failure(IDTokenError(code, "jti")) }

        var verified: [SecurityEvent] = []
        for (index, event) in events.enumerated() {
            let subject = event.subject ?? claims.subID
            func check(_ value: String?, _ limit: Int, _ member: String) -> IDTokenError? {
                guard let value, let code = ClaimText.problem(value, maxScalars: limit) else { return nil }
                return IDTokenError(code, "events[\(index)].\(member)")
            }
            if event.type.isEmpty { return .failure(IDTokenError(.badEvents, "an event type is empty")) }
            if subject?.sub.isEmpty == true { return .failure(IDTokenError(.badEvents, "events[\(index)]: empty subject sub")) }
            if let problem = check(event.type, Self.limits.type, "type") ?? check(event.reason, Self.limits.reason, "reason")
                ?? check(event.state, Self.limits.state, "state") ?? check(subject?.issuer, Self.limits.issuer, "subject.iss")
                ?? check(subject?.sub, Self.limits.sub, "subject.sub") {
                return .failure(problem)
            }
            verified.append(SecurityEvent(type: event.type, subject: subject, reason: event.reason, state: event.state))
        }
        // Ahead of our clock beyond the skew: accepted as sent (its iat still orders it), and reported.
        let skew = max(0, policy.clockSkew)
        let ahead = iat > now &+ skew ? iat &- now : nil
        return .success(VerifiedSecurityEvent(jti: jti, issuer: issuer, audience: audience, issuedAt: iat, expiresAt: claims.exp,
                                              keyID: keyID, events: verified, issuedAheadBy: ahead))
    }
}

/// One lower-case hex digit of `nibble` (0...15).
private func hexDigit(_ nibble: UInt8) -> String {
    String(UnicodeScalar(nibble < 10 ? 0x30 + nibble : 0x57 + nibble))
}
