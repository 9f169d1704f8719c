// The pure verifier of Google's security event tokens (Cross-Account Protection: RFC 8417 SETs pushed per RFC 8935).
import FoundationEssentials

/// One event of a verified security event token. Types are reported, not interpreted, here.
public struct SecurityEvent: Sendable, Hashable {
    /// The Google account an event is about: its issuer and `sub` (the user's `google_sub`).
    public struct Subject: Sendable, Hashable {
        public var issuer: String
        public var sub: String
        public init(issuer: String, sub: String) {
            self.issuer = issuer
            self.sub = sub
        }
    }

    /// The event type URI (see the constants below).
    public var type: String
    /// From the event's `subject` (`iss-sub` or `id_token_claims`), else the token's `sub_id` (`iss_sub`); nil
    /// for any other subject shape (a revoked OAuth token, an email address): an event about no known user.
    public var subject: Subject?
    /// `reason`, when present (account-disabled: `hijacking`, `bulk-account`).
    public var reason: String?
    /// `state`, when present (verification events echo the state the receiver asked for).
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
    /// The configured client ID the token is addressed to.
    public var audience: String
    public var issuedAt: Int64
    public var expiresAt: Int64?
    public var keyID: String
    /// At least one, at most `SecurityEventVerifier.maxEvents`, ordered by type.
    public var events: [SecurityEvent]
}

/// Verifies a security event token against a key set (Google signs them with the keys of its ID tokens), a policy
/// (its client IDs and clock skew) and a clock. The same strict JOSE rules as ID tokens; no I/O. The refusal
/// codes and the RFC 8935 error each should be answered with are listed in docs/verification.md.
public struct SecurityEventVerifier: Sendable {
    public let policy: Policy
    public init(policy: Policy) { self.policy = policy }

    /// Google's documentation writes the issuer with a trailing slash, its tokens without.
    public static let issuers = ["https://accounts.google.com/", "https://accounts.google.com"]
    public static let maxEvents = 16
    /// The longest accepted strings, in Unicode scalars (a subject's `sub` as `google_sub`: 255).
    package static let limits = (jti: 256, type: 256, reason: 256, state: 1024, issuer: 256, sub: 255)

    public func verify(_ token: String, keys: KeySet, now: Int64) -> Result<VerifiedSecurityEvent, IDTokenError> {
        switch JWS.verify(token, keys: keys) {
        case .success(let jws): checkClaims(payload: jws.payload, keyID: jws.keyID, now: now)
        case .failure(let error): .failure(error)
        }
    }

    func checkClaims(payload: [UInt8], keyID: String, now: Int64) -> Result<VerifiedSecurityEvent, IDTokenError> {
        let claims: EventClaims
        switch JSONObject.decode(EventClaims.self, from: payload, maxMembers: Policy.maxClaims) {
        case .success(let decoded): claims = decoded
        case .failure(.decoding(let error as ClaimTypeError)): return .failure(IDTokenError(.badClaimType, "claim \(error.claim)"))
        case .failure(.decoding(let error as EventsError)): return .failure(IDTokenError(.badEvents, error.detail))
        case .failure(let failure): return .failure(IDTokenError(.badPayload, failure.summary))
        }
        guard let events = claims.events else { return .failure(IDTokenError(.notASecurityEvent, "no events claim")) }
        guard let iss = claims.iss else { return .failure(IDTokenError(.missingClaim, "iss")) }
        guard Self.issuers.contains(iss) else { return .failure(IDTokenError(.badIssuer, "")) }
        guard let aud = claims.aud else { return .failure(IDTokenError(.missingClaim, "aud")) }
        guard let audience = aud.first(where: { a in policy.clientIDs.contains(where: { sameBytes($0, a) }) }) else {
            return .failure(IDTokenError(.badAudience, ""))
        }
        guard let iat = claims.iat else { return .failure(IDTokenError(.missingClaim, "iat")) }
        let skew = max(0, policy.clockSkew)
        if iat > now &+ skew { return .failure(IDTokenError(.issuedInFuture, "iat \(iat), now \(now)")) }
        if let exp = claims.exp, now > exp &+ skew { return .failure(IDTokenError(.expired, "exp \(exp), now \(now)")) }
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
        return .success(VerifiedSecurityEvent(jti: jti, issuer: iss, audience: audience, issuedAt: iat, expiresAt: claims.exp,
                                              keyID: keyID, events: verified))
    }
}

/// Something inside `events` that is not as RFC 8417 and Google's RISC describe it.
struct EventsError: Error { let detail: String }

/// The payload members the security event rules read. Wrong types throw ClaimTypeError (top-level claims) or
/// EventsError (inside `events`).
struct EventClaims: Decodable {
    struct Event {
        var type: String
        var subject: SecurityEvent.Subject?
        var reason: String?
        var state: String?
    }

    var iss: String?
    var aud: [String]?
    var iat: Int64?
    var exp: Int64?
    var jti: String?
    /// nil when the payload has no `events` member; ordered by type.
    var events: [Event]?
    var subID: SecurityEvent.Subject?

    enum CodingKeys: String, CodingKey { case iss, aud, iat, exp, jti, events, subID = "sub_id" }
    enum EventKeys: String, CodingKey { case subject, reason, state }
    enum SubjectKeys: String, CodingKey { case subjectType = "subject_type", format, iss, sub }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        iss = try c.claimString(.iss)
        aud = try c.claimAudience(.aud)
        iat = try c.claimTime(.iat)
        exp = try c.claimTime(.exp)
        jti = try c.claimString(.jti)
        if c.contains(.subID) {
            guard let container = try? c.nestedContainer(keyedBy: SubjectKeys.self, forKey: .subID) else { throw ClaimTypeError(claim: "sub_id") }
            do { subID = try Self.subject(container) } catch { throw ClaimTypeError(claim: "sub_id") }
        }
        guard c.contains(.events) else { return }
        guard let container = try? c.nestedContainer(keyedBy: MemberName.self, forKey: .events) else { throw ClaimTypeError(claim: "events") }
        let types = container.allKeys.sorted { $0.stringValue < $1.stringValue }
        guard !types.isEmpty else { throw EventsError(detail: "no events") }
        guard types.count <= SecurityEventVerifier.maxEvents else {
            throw EventsError(detail: "\(types.count) events (at most \(SecurityEventVerifier.maxEvents))")
        }
        events = try types.map { type in
            guard let body = try? container.nestedContainer(keyedBy: EventKeys.self, forKey: type) else {
                throw EventsError(detail: "an event is not an object")
            }
            func string(_ key: EventKeys) throws -> String? {
                guard body.contains(key) else { return nil }
                guard let value = try? body.decode(String.self, forKey: key) else { throw EventsError(detail: "event member \(key.rawValue) is not a string") }
                return value
            }
            var subject: SecurityEvent.Subject?
            if body.contains(.subject) {
                guard let container = try? body.nestedContainer(keyedBy: SubjectKeys.self, forKey: .subject) else {
                    throw EventsError(detail: "an event subject is not an object")
                }
                do { subject = try Self.subject(container) } catch { throw EventsError(detail: "an event subject has members of the wrong type") }
            }
            return Event(type: type.stringValue, subject: subject, reason: try string(.reason), state: try string(.state))
        }
    }

    /// An account subject (`iss-sub` or `id_token_claims`, or the `iss_sub` format of `sub_id`) as issuer and sub;
    /// nil for any other shape, or one without both. Throws when a member read has the wrong type.
    private static func subject(_ c: KeyedDecodingContainer<SubjectKeys>) throws -> SecurityEvent.Subject? {
        let kind = try c.decodeIfPresent(String.self, forKey: .subjectType)
        let format = try c.decodeIfPresent(String.self, forKey: .format)
        guard kind == "iss-sub" || kind == "id_token_claims" || format == "iss_sub" else { return nil }
        guard let iss = try c.decodeIfPresent(String.self, forKey: .iss),
              let sub = try c.decodeIfPresent(String.self, forKey: .sub) else { return nil }
        return SecurityEvent.Subject(issuer: iss, sub: sub)
    }
}
