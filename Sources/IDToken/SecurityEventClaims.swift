// What the security event verifier reads of a SET's payload: the addressing every signed payload must have, and
// the claims and events the full check reads.
import FoundationEssentials

/// Something inside `events` that is not as RFC 8417 and Google's RISC describe it.
struct EventsError: Error { let detail: String }

/// The addressing of a signed payload, read strictly (`iss`, `aud`: a wrong type is a refusal), and what an
/// unparsed token is recorded under, read leniently (`jti`, `iat`, the one event type: anything unusable is nil).
struct SecurityEventEnvelope: Decodable {
    var iss: String?
    var aud: [String]?
    /// Whether the payload has an `events` member of any type (an ID token has none).
    var hasEvents = false
    /// `iat` when it is a number from 1970 through 9999.
    var iat: Int64?
    /// `jti` when it is a string of 1 to 256 characters without a control character.
    var usableJTI: String?
    /// The one member name of `events` when it is an object with exactly one, of 1 to 256 characters without a
    /// control character.
    var usableType: String?

    enum CodingKeys: String, CodingKey { case iss, aud, iat, jti, events }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        iss = try c.claimString(.iss)
        aud = try c.claimAudience(.aud)
        hasEvents = c.contains(.events)
        iat = ((try? c.claimTime(.iat)) ?? nil).flatMap { SecurityEventVerifier.issuedAtRange.contains($0) ? $0 : nil }
        let limits = SecurityEventVerifier.limits
        if let jti = (try? c.decodeIfPresent(String.self, forKey: .jti)) ?? nil, !jti.isEmpty,
           ClaimText.problem(jti, maxScalars: limits.jti) == nil {
            usableJTI = jti
        }
        if let events = try? c.nestedContainer(keyedBy: MemberName.self, forKey: .events), events.allKeys.count == 1,
           let type = events.allKeys.first?.stringValue, !type.isEmpty, ClaimText.problem(type, maxScalars: limits.type) == nil {
            usableType = type
        }
    }
}

/// The payload members the full check reads. Wrong types throw ClaimTypeError (top-level claims) or EventsError
/// (inside `events`). `iss` and `aud` were read with the addressing; `exp` is read but never refused.
struct EventClaims: Decodable {
    struct Event {
        var type: String
        var subject: SecurityEvent.Subject?
        var reason: String?
        var state: String?
    }

    var iat: Int64?
    /// `exp` when it is a number: a SET does not expire (RFC 8417), so neither its type nor its value matter.
    var exp: Int64?
    var jti: String?
    /// nil when the payload has no `events` member; ordered by type.
    var events: [Event]?
    var subID: SecurityEvent.Subject?

    enum CodingKeys: String, CodingKey { case iat, exp, jti, events, subID = "sub_id" }
    enum EventKeys: String, CodingKey { case subject, reason, state }
    enum SubjectKeys: String, CodingKey { case subjectType = "subject_type", format, iss, sub }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        iat = try c.claimTime(.iat)
        exp = (try? c.claimTime(.exp)) ?? nil
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
            /// A member that is absent or null (`"reason": null`: no reason) is nil.
            func present(_ key: EventKeys) -> Bool {
                body.contains(key) && !((try? body.decodeNil(forKey: key)) ?? false)
            }
            func string(_ key: EventKeys) throws -> String? {
                guard present(key) else { return nil }
                guard let value = try? body.decode(String.self, forKey: key) else { throw EventsError(detail: "event member \(key.rawValue) is not a string") }
                return value
            }
            var subject: SecurityEvent.Subject?
            if present(.subject) {
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
