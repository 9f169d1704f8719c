// The pure verifier: a function of (token, key set, policy, clock) returning verified claims or a typed reason.
import FoundationEssentials

/// What the relying party accepts: its client IDs, hosted domains and clock skew.
public struct Policy: Sendable {
    public var clientIDs: [String]
    /// When non-empty, only tokens whose `hd` is exactly one of these are accepted.
    public var hostedDomains: [String]
    /// Seconds of tolerance on `exp`, `nbf` and `iat`.
    public var clockSkew: Int64
    public init(clientIDs: [String], hostedDomains: [String] = [], clockSkew: Int64 = 60) {
        self.clientIDs = clientIDs
        self.hostedDomains = hostedDomains
        self.clockSkew = clockSkew
    }

    /// The two issuer spellings Google uses.
    public static let googleIssuers = ["accounts.google.com", "https://accounts.google.com"]
    /// Longest accepted `exp - iat` (Google issues one-hour tokens).
    public static let maxLifetime: Int64 = 24 * 3600
    /// Members of a token's payload (Google's ID tokens have about fifteen).
    package static let maxClaims = 64
    /// The longest string claims accepted, in Unicode scalars: the CHECK constraints of `signin.users`.
    package static let claimLimits = (sub: 255, email: 320, name: 1024, picture: 4096, locale: 64, hostedDomain: 253)
}

/// The claims of a token that passed every check.
public struct VerifiedToken: Sendable, Hashable {
    public var subject: String
    public var audience: String
    public var issuer: String
    public var issuedAt: Int64
    public var expiresAt: Int64
    public var keyID: String
    public var email: String?
    public var emailVerified: Bool
    public var name: String?
    public var givenName: String?
    public var familyName: String?
    public var picture: String?
    public var locale: String?
    public var hostedDomain: String?
    /// The payload exactly as received (UTF-8 JSON object), for `tokensignin verify`'s output.
    public var claimsJSON: String

    package init(subject: String, audience: String, issuer: String, issuedAt: Int64, expiresAt: Int64, keyID: String,
                 email: String?, emailVerified: Bool, name: String?, givenName: String?, familyName: String?, picture: String?,
                 locale: String?, hostedDomain: String?, claimsJSON: String) {
        self.subject = subject
        self.audience = audience
        self.issuer = issuer
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.keyID = keyID
        self.email = email
        self.emailVerified = emailVerified
        self.name = name
        self.givenName = givenName
        self.familyName = familyName
        self.picture = picture
        self.locale = locale
        self.hostedDomain = hostedDomain
        self.claimsJSON = claimsJSON
    }
}

public struct Verifier: Sendable {
    public let policy: Policy
    /// The Google Cloud project numbers of the client IDs (`<number>-<id>.apps.googleusercontent.com`): an `azp` of
    /// one of these projects is the site's own (its Android or iOS client).
    private let projects: Set<Substring>

    public init(policy: Policy) {
        self.policy = policy
        projects = Set(policy.clientIDs.compactMap(Self.projectNumber(ofClientID:)))
    }

    /// The project number of an OAuth client ID, nil for anything that is not one.
    static func projectNumber(ofClientID id: String) -> Substring? {
        let suffix = ".apps.googleusercontent.com"
        guard id.hasSuffix(suffix), let dash = id.firstIndex(of: "-") else { return nil }
        let number = id[..<dash]
        let name = id[id.index(after: dash)...].dropLast(suffix.count)
        guard !number.isEmpty, number.utf8.count <= 20, number.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              !name.isEmpty, name.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7a) })
        else { return nil }
        return number
    }

    /// Who the token was issued to may sign in here: no `azp` (a web client's own token), one of the client IDs,
    /// or a client of the same Google Cloud project (the site's Android and iOS clients share its number).
    func isAuthorizedParty(_ azp: String?) -> Bool {
        guard let azp else { return true }
        if policy.clientIDs.contains(where: { sameBytes($0, azp) }) { return true }
        return Self.projectNumber(ofClientID: azp).map(projects.contains) ?? false
    }

    /// A Google Cloud service account's token: its `email` is in `.gserviceaccount.com` (any letter case).
    static func isServiceAccount(email: String?) -> Bool {
        guard let email else { return false }
        return email.utf8.count > ".gserviceaccount.com".utf8.count
            && email.lowercased().hasSuffix(".gserviceaccount.com")
    }

    /// Verifies `token` against `keys` at `now` (Unix seconds). No I/O.
    public func verify(_ token: String, keys: KeySet, now: Int64) -> Result<VerifiedToken, IDTokenError> {
        let jws: VerifiedJWS
        switch JWS.verify(token, keys: keys) {
        case .success(let v): jws = v
        case .failure(let e): return .failure(e)
        }
        return checkClaims(payload: jws.payload, keyID: jws.keyID, now: now)
    }

    /// The claim rules on an already signature-checked payload.
    func checkClaims(payload: [UInt8], keyID: String, now: Int64) -> Result<VerifiedToken, IDTokenError> {
        let claims: Claims, claimsJSON: String
        switch JSONObject.decodeKeepingText(Claims.self, from: payload, maxMembers: Policy.maxClaims) {
        case .success(let decoded): (claims, claimsJSON) = decoded
        case .failure(.decoding(let error as ClaimTypeError)):
            return .failure(IDTokenError(.badClaimType, "claim \(error.claim)"))
        case .failure(let f):
            return .failure(IDTokenError(.badPayload, f.summary))
        }
        if claims.hasEvents { return .failure(IDTokenError(.notAnIDToken, "the payload has an events claim")) }
        guard let iss = claims.iss else { return .failure(IDTokenError(.missingClaim, "iss")) }
        guard Policy.googleIssuers.contains(iss) else { return .failure(IDTokenError(.badIssuer, "")) }
        guard let aud = claims.aud else { return .failure(IDTokenError(.missingClaim, "aud")) }
        guard !aud.isEmpty, aud.allSatisfy({ a in policy.clientIDs.contains(where: { sameBytes($0, a) }) }) else {
            return .failure(IDTokenError(.badAudience, ""))
        }
        guard let exp = claims.exp else { return .failure(IDTokenError(.missingClaim, "exp")) }
        guard let iat = claims.iat else { return .failure(IDTokenError(.missingClaim, "iat")) }
        guard let sub = claims.sub else { return .failure(IDTokenError(.missingClaim, "sub")) }
        guard !sub.isEmpty else { return .failure(IDTokenError(.badSubject, "empty sub")) }
        let skew = max(0, policy.clockSkew)
        if now > exp &+ skew { return .failure(IDTokenError(.expired, "exp \(exp), now \(now)")) }
        if let nbf = claims.nbf, now &+ skew < nbf { return .failure(IDTokenError(.notYetValid, "nbf \(nbf), now \(now)")) }
        if iat > now &+ skew { return .failure(IDTokenError(.issuedInFuture, "iat \(iat), now \(now)")) }
        if exp < iat { return .failure(IDTokenError(.lifetimeTooLong, "exp before iat")) }
        if exp - iat > Policy.maxLifetime { return .failure(IDTokenError(.lifetimeTooLong, "exp - iat = \(exp - iat)")) }
        if !policy.hostedDomains.isEmpty {
            guard let hd = claims.hd, policy.hostedDomains.contains(hd) else {
                return .failure(IDTokenError(.hostedDomainNotAllowed, ""))
            }
        }
        // Service accounts can mint Google-signed ID tokens for any audience (metadata server, IAM generateIdToken):
        // they are programs, never users, and their `azp` is not one of the site's clients.
        if Self.isServiceAccount(email: claims.email) { return .failure(IDTokenError(.serviceAccount, "")) }
        guard isAuthorizedParty(claims.azp) else { return .failure(IDTokenError(.unauthorizedParty, "")) }
        if let problem = Self.unstorable(claims, sub: sub) { return .failure(problem) }
        return .success(VerifiedToken(
            subject: sub, audience: aud[0], issuer: iss, issuedAt: iat, expiresAt: exp, keyID: keyID,
            email: claims.email, emailVerified: claims.emailVerified ?? false, name: claims.name,
            givenName: claims.givenName, familyName: claims.familyName, picture: claims.picture,
            locale: claims.locale, hostedDomain: claims.hd,
            claimsJSON: claimsJSON))
    }
}

/// The rules on the text of a string claim that is stored or sent on.
enum ClaimText {
    /// nil when `text` has no control character (C0 or DEL) and at most `maxScalars` Unicode scalars (what
    /// PostgreSQL's length() counts); else the code of the rule it breaks. One pass over the UTF-8.
    static func problem(_ text: String, maxScalars: Int) -> IDTokenError.Code? {
        var scalars = 0
        for byte in text.utf8 {
            if byte < 0x20 || byte == 0x7F { return .badClaimValue }  // ASCII bytes never occur inside a multi-byte scalar
            if byte & 0xC0 != 0x80 { scalars += 1 }
        }
        return scalars > maxScalars ? .claimTooLong : nil
    }
}

extension Verifier {
    /// What is stored and sent on must fit the schema (sql/001_users.sql's CHECKs) and hold no control character
    /// (the identity headers for nginx are built from `sub` and `email`: no CR or LF may reach them).
    static func unstorable(_ claims: Claims, sub: String) -> IDTokenError? {
        func check(_ value: String?, _ limit: Int, _ claim: String) -> IDTokenError? {
            guard let value, let code = ClaimText.problem(value, maxScalars: limit) else { return nil }
            return IDTokenError(code, claim)
        }
        return check(sub, Policy.claimLimits.sub, "sub") ?? check(claims.email, Policy.claimLimits.email, "email")
            ?? check(claims.name, Policy.claimLimits.name, "name") ?? check(claims.givenName, Policy.claimLimits.name, "given_name")
            ?? check(claims.familyName, Policy.claimLimits.name, "family_name")
            ?? check(claims.picture, Policy.claimLimits.picture, "picture") ?? check(claims.locale, Policy.claimLimits.locale, "locale")
            ?? check(claims.hd, Policy.claimLimits.hostedDomain, "hd")
    }
}

/// Byte-for-byte UTF-8 equality (String's `==` compares canonical equivalence, which the audience rule must not).
func sameBytes(_ a: String, _ b: String) -> Bool {
    var a = a, b = b
    return a.withUTF8 { x in b.withUTF8 { y in x.count == y.count && x.elementsEqual(y) } }
}

/// A claim present with the wrong JSON type (for example `exp` as a string).
struct ClaimTypeError: Error { let claim: String }

/// The payload members the policy reads. Members present with the wrong type throw ClaimTypeError.
struct Claims: Decodable {
    var iss: String?
    var aud: [String]?
    /// The authorized party: the client the token was issued to.
    var azp: String?
    /// Expiry, issue and not-before times, in seconds since the epoch.
    var exp, iat, nbf: Int64?
    /// The Google account.
    var sub, email: String?
    var emailVerified: Bool?
    /// The profile a sign-in records.
    var name, givenName, familyName, picture, locale, hd: String?
    var hasEvents = false

    enum CodingKeys: String, CodingKey {
        case iss, aud, azp, exp, iat, nbf, sub, email, name, picture, locale, hd, events
        case emailVerified = "email_verified", givenName = "given_name", familyName = "family_name"
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        iss = try c.claimString(.iss)
        aud = try c.claimAudience(.aud)
        azp = try c.claimString(.azp)
        exp = try c.claimTime(.exp)
        iat = try c.claimTime(.iat)
        nbf = try c.claimTime(.nbf)
        sub = try c.claimString(.sub)
        email = try c.claimString(.email)
        emailVerified = try c.claimBoolean(.emailVerified)
        name = try c.claimString(.name)
        givenName = try c.claimString(.givenName)
        familyName = try c.claimString(.familyName)
        picture = try c.claimString(.picture)
        locale = try c.claimString(.locale)
        hd = try c.claimString(.hd)
        hasEvents = c.contains(.events)
    }
}

/// The claim types shared by ID tokens and security event tokens; a member of another JSON type throws ClaimTypeError.
extension KeyedDecodingContainer {
    /// A string claim; null or another type is refused. One keyed lookup on the happy path; `contains` only to
    /// tell null from absent.
    func claimString(_ key: Key) throws -> String? {
        do {
            if let v = try decodeIfPresent(String.self, forKey: key) { return v }
        } catch {
            throw ClaimTypeError(claim: key.stringValue)
        }
        if contains(key) { throw ClaimTypeError(claim: key.stringValue) }   // null
        return nil
    }

    /// A time claim: a JSON number (fractions allowed by RFC 7519, truncated); strings, booleans and null are refused.
    func claimTime(_ key: Key) throws -> Int64? {
        let d: Double
        do {
            guard let v = try decodeIfPresent(Double.self, forKey: key) else {
                if contains(key) { throw ClaimTypeError(claim: key.stringValue) }
                return nil
            }
            d = v
        } catch {
            throw ClaimTypeError(claim: key.stringValue)
        }
        guard d.isFinite, abs(d) < 9_007_199_254_740_992 else { throw ClaimTypeError(claim: key.stringValue) }
        return Int64(d.rounded(.down))
    }

    /// A boolean claim: `true`/`false`, or the strings `"true"`/`"false"` (Google has sent both); anything else,
    /// null included, is refused.
    func claimBoolean(_ key: Key) throws -> Bool? {
        if let b = try? decodeIfPresent(Bool.self, forKey: key) { return b }
        guard contains(key) else { return nil }
        guard let s = try? decode(String.self, forKey: key), s == "true" || s == "false" else {
            throw ClaimTypeError(claim: key.stringValue)
        }
        return s == "true"
    }

    /// `aud`: a string (as Google sends it) or an array of strings; tries the common form first.
    func claimAudience(_ key: Key) throws -> [String]? {
        if let one = try? decodeIfPresent(String.self, forKey: key) { return [one] }
        guard contains(key) else { return nil }
        guard let many = try? decode([String].self, forKey: key) else { throw ClaimTypeError(claim: key.stringValue) }
        return many
    }
}
