// Security event tokens (Cross-Account Protection): every documented shape verified, every refusal by its reason.
import Foundation
@testable import IDToken
import Signing
import Testing

/// Google-shaped SETs signed by the test keys.
enum SETFixture {
    static let issuer = "https://accounts.google.com/"
    static let sub = "7375626A656374"
    static let jti = "756E69717565206964656E746966696572"
    static let policy = Policy(clientIDs: [Fixture.clientID, Fixture.otherClientID])
    static let verifier = SecurityEventVerifier(policy: policy)

    static func subject(_ sub: String = sub, type: String = "iss-sub") -> ClaimValue {
        ["subject_type": .string(type), "iss": .string(issuer), "sub": .string(sub)]
    }

    static func claims(_ events: [String: ClaimValue], _ changes: [String: ClaimValue] = [:], removing: [String] = []) -> [String: ClaimValue] {
        var claims: [String: ClaimValue] = ["iss": .string(issuer), "aud": .string(Fixture.clientID), "iat": .integer(Fixture.now - 30),
                                            "jti": .string(jti), "events": .object(events)]
        for (k, v) in changes { claims[k] = v }
        for k in removing { claims[k] = nil }
        return claims
    }

    static func token(_ claims: [String: ClaimValue], key: DevelopmentKey = Keys.rsa) -> String {
        token(payload: ClaimValue.object(claims).jsonString, key: key)
    }

    static func token(payload: String, key: DevelopmentKey = Keys.rsa) -> String {
        key.sign(headerJSON: #"{"alg":"\#(key.algorithm.rawValue)","kid":"\#(key.kid)","typ":"secevent+jwt"}"#, payloadJSON: payload)
    }

    static func verify(_ token: String, keys: KeySet = Keys.set, now: Int64 = Fixture.now) -> Result<AcceptedSecurityEvent, IDTokenError> {
        verifier.verify(token, keys: keys, now: now)
    }

    /// The token verified, or the test fails.
    static func verified(_ token: String, now: Int64 = Fixture.now) throws -> VerifiedSecurityEvent {
        try #require(try verify(token, now: now).get().verified, "\(code(verify(token, now: now)))")
    }

    /// `ok` (verified), `unparsed:<why>` (accepted, not read), or the refusal's code.
    static func code(_ result: Result<AcceptedSecurityEvent, IDTokenError>) -> String {
        switch result {
        case .success(.verified): "ok"
        case .success(.unparsed(let set)): "unparsed:" + set.reason.code.name
        case .failure(let e): e.code.name
        }
    }
}

private typealias S = SETFixture
private let google = SecurityEvent.Subject(issuer: S.issuer, sub: S.sub)

struct AcceptedSETCase: Sendable, CustomTestStringConvertible {
    let name: String
    let events: [String: ClaimValue]
    var changes: [String: ClaimValue] = [:]
    let expected: [SecurityEvent]
    var testDescription: String { name }
}

@Test(arguments: [
    AcceptedSETCase(name: "sessionsRevoked", events: [SecurityEvent.sessionsRevoked: ["subject": S.subject()]],
                    expected: [SecurityEvent(type: SecurityEvent.sessionsRevoked, subject: google, reason: nil, state: nil)]),
    AcceptedSETCase(name: "tokensRevoked", events: [SecurityEvent.tokensRevoked: ["subject": S.subject()]],
                    expected: [SecurityEvent(type: SecurityEvent.tokensRevoked, subject: google, reason: nil, state: nil)]),
    AcceptedSETCase(name: "accountDisabledForHijacking",
                    events: [SecurityEvent.accountDisabled: ["subject": S.subject(), "reason": "hijacking"]],
                    expected: [SecurityEvent(type: SecurityEvent.accountDisabled, subject: google, reason: "hijacking", state: nil)]),
    AcceptedSETCase(name: "accountDisabledForBulkAccount",
                    events: [SecurityEvent.accountDisabled: ["subject": S.subject(), "reason": "bulk-account"]],
                    expected: [SecurityEvent(type: SecurityEvent.accountDisabled, subject: google, reason: "bulk-account", state: nil)]),
    AcceptedSETCase(name: "accountDisabledWithoutReason", events: [SecurityEvent.accountDisabled: ["subject": S.subject()]],
                    expected: [SecurityEvent(type: SecurityEvent.accountDisabled, subject: google, reason: nil, state: nil)]),
    AcceptedSETCase(name: "accountDisabledWithANullReasonHasNoReason",
                    events: [SecurityEvent.accountDisabled: ["subject": S.subject(), "reason": .null]],
                    expected: [SecurityEvent(type: SecurityEvent.accountDisabled, subject: google, reason: nil, state: nil)]),
    AcceptedSETCase(name: "aNullStateOrSubjectIsNone", events: [SecurityEvent.verification: ["state": .null, "subject": .null]],
                    expected: [SecurityEvent(type: SecurityEvent.verification, subject: nil, reason: nil, state: nil)]),
    AcceptedSETCase(name: "accountEnabled", events: [SecurityEvent.accountEnabled: ["subject": S.subject()]],
                    expected: [SecurityEvent(type: SecurityEvent.accountEnabled, subject: google, reason: nil, state: nil)]),
    AcceptedSETCase(name: "accountCredentialChangeRequired", events: [SecurityEvent.accountCredentialChangeRequired: ["subject": S.subject()]],
                    expected: [SecurityEvent(type: SecurityEvent.accountCredentialChangeRequired, subject: google, reason: nil, state: nil)]),
    AcceptedSETCase(name: "verificationWithState", events: [SecurityEvent.verification: ["state": "state-from-the-test-request"]],
                    expected: [SecurityEvent(type: SecurityEvent.verification, subject: nil, reason: nil, state: "state-from-the-test-request")]),
    AcceptedSETCase(name: "revokedOAuthTokenHasNoAccountSubject", events: [SecurityEvent.tokenRevoked: ["subject": [
        "subject_type": "oauth_token", "token_type": "refresh_token", "token_identifier_alg": "hash_base64_sha512_sha512", "token": "aGFzaA",
    ]]], expected: [SecurityEvent(type: SecurityEvent.tokenRevoked, subject: nil, reason: nil, state: nil)]),
    AcceptedSETCase(name: "topLevelSubIDIsTheSubjectOfEventsWithoutOne", events: [SecurityEvent.sessionsRevoked: [:]],
                    changes: ["sub_id": ["format": "iss_sub", "iss": .string(S.issuer), "sub": .string(S.sub)]],
                    expected: [SecurityEvent(type: SecurityEvent.sessionsRevoked, subject: google, reason: nil, state: nil)]),
    AcceptedSETCase(name: "anEventSubjectWinsOverSubID", events: [SecurityEvent.sessionsRevoked: ["subject": S.subject("other")]],
                    changes: ["sub_id": ["format": "iss_sub", "iss": .string(S.issuer), "sub": .string(S.sub)]],
                    expected: [SecurityEvent(type: SecurityEvent.sessionsRevoked, subject: .init(issuer: S.issuer, sub: "other"), reason: nil, state: nil)]),
    AcceptedSETCase(name: "idTokenClaimsSubject",
                    events: [SecurityEvent.accountDisabled: ["subject": ["subject_type": "id_token_claims", "iss": .string(S.issuer),
                                                                         "sub": .string(S.sub), "email": "user@example.com"]]],
                    expected: [SecurityEvent(type: SecurityEvent.accountDisabled, subject: google, reason: nil, state: nil)]),
    AcceptedSETCase(name: "idTokenClaimsSubjectWithoutSubIsNoSubject",
                    events: [SecurityEvent.accountDisabled: ["subject": ["subject_type": "id_token_claims", "iss": .string(S.issuer),
                                                                         "email": "user@example.com"]]],
                    expected: [SecurityEvent(type: SecurityEvent.accountDisabled, subject: nil, reason: nil, state: nil)]),
    AcceptedSETCase(name: "emailSubjectIsNoSubject",
                    events: [SecurityEvent.accountDisabled: ["subject": ["subject_type": "email", "email": "user@example.com"]]],
                    expected: [SecurityEvent(type: SecurityEvent.accountDisabled, subject: nil, reason: nil, state: nil)]),
    AcceptedSETCase(name: "unknownEventTypesAreReportedNotInterpreted", events: ["urn:example:custom": ["x": 1]],
                    expected: [SecurityEvent(type: "urn:example:custom", subject: nil, reason: nil, state: nil)]),
    AcceptedSETCase(name: "severalEventsComeOrderedByType",
                    events: [SecurityEvent.sessionsRevoked: ["subject": S.subject()], SecurityEvent.accountDisabled: ["subject": S.subject()]],
                    expected: [SecurityEvent(type: SecurityEvent.accountDisabled, subject: google, reason: nil, state: nil),
                               SecurityEvent(type: SecurityEvent.sessionsRevoked, subject: google, reason: nil, state: nil)]),
])
func acceptedSecurityEvent(_ c: AcceptedSETCase) throws {
    let verified = try S.verified(S.token(S.claims(c.events, c.changes)))
    #expect(verified.events == c.expected)
    #expect(verified.jti == S.jti && verified.issuer == S.issuer && verified.audience == Fixture.clientID)
    #expect(verified.issuedAt == Fixture.now - 30 && verified.expiresAt == nil && verified.keyID == Keys.rsa.kid)
    #expect(verified.issuedAheadBy == nil)
}

let revoked: [String: ClaimValue] = [SecurityEvent.sessionsRevoked: ["subject": S.subject()]]

@Test func bothIssuerSpellingsAreAccepted() {
    for issuer in ["https://accounts.google.com/", "https://accounts.google.com"] {
        #expect(S.code(S.verify(S.token(S.claims(revoked, ["iss": .string(issuer)])))) == "ok")
    }
}

@Test func anAudienceArrayNeedsOneConfiguredClient() throws {
    let verified = try S.verified(S.token(S.claims(revoked, ["aud": ["someone-else", .string(Fixture.otherClientID)]])))
    #expect(verified.audience == Fixture.otherClientID)
}

/// RFC 8417: a SET has no expiry, and Google says not to check one: `exp` in the past, or not a number, changes nothing.
@Test(arguments: [ClaimValue.integer(Fixture.now - 61), .integer(Fixture.now - 86_400 * 365), .integer(Fixture.now + 600), "soon", .null])
func anExpiryIsNeverChecked(exp: ClaimValue) throws {
    let verified = try S.verified(S.token(S.claims(revoked, ["exp": exp])))
    #expect(verified.events.map(\.type) == [SecurityEvent.sessionsRevoked])
    if case .integer(let seconds) = exp { #expect(verified.expiresAt == seconds) } else { #expect(verified.expiresAt == nil) }
}

/// An `iat` ahead of our clock is accepted as sent (the order of events is decided by it) and says how far ahead it is
/// when that is beyond the skew: our clock may be the one that is wrong, and Google would not redeliver after a 400.
@Test(arguments: [(Int64(0), nil), (60, nil), (61, 61), (86_400, 86_400)] as [(Int64, Int64?)])
func anIssuedAtAheadOfOurClockIsAcceptedAsSent(ahead: Int64, reported: Int64?) throws {
    let verified = try S.verified(S.token(S.claims(revoked, ["iat": .integer(Fixture.now + ahead)])))
    #expect(verified.issuedAt == Fixture.now + ahead)
    #expect(verified.issuedAheadBy == reported)
}

@Test func sixteenEventsAreAcceptedAndSeventeenAreBadEvents() throws {
    func events(_ n: Int) -> [String: ClaimValue] {
        Dictionary(uniqueKeysWithValues: (0..<n).map { ("urn:example:event:\($0)", ["subject": S.subject()] as ClaimValue) })
    }
    #expect(try S.verified(S.token(S.claims(events(16)))).events.count == 16)
    #expect(S.code(S.verify(S.token(S.claims(events(17))))) == "unparsed:bad_events")
}

@Test func anES256SignedEventIsVerifiedUnderTheSameRules() {
    #expect(S.code(S.verify(S.token(S.claims(revoked), key: Keys.ec))) == "ok")
}

@Test func anIDTokenIsNotASecurityEventAndASecurityEventIsNotAnIDToken() {
    let idToken = Keys.rsa.sign(claims: Fixture.claims)
    #expect(Fixture.code(Fixture.verify(idToken)) == "ok")
    #expect(S.code(S.verify(idToken)) == "not_a_security_event")
    let set = S.token(S.claims(revoked))
    #expect(S.code(S.verify(set)) == "ok")
    #expect(Fixture.code(Fixture.verify(set)) == "not_an_id_token")
    // Even with the ID-token issuer and lifetime claims added, the events claim decides.
    let hybrid = S.token(S.claims(revoked, ["iss": "https://accounts.google.com", "exp": .integer(Fixture.now + 600), "sub": "1"]))
    #expect(Fixture.code(Fixture.verify(hybrid)) == "not_an_id_token")
}

struct RefusedSETCase: Sendable, CustomTestStringConvertible {
    let name: String
    let payload: String
    let expected: String
    var testDescription: String { name }
}

func setPayload(_ events: [String: ClaimValue] = revoked, _ changes: [String: ClaimValue] = [:], removing: [String] = []) -> String {
    ClaimValue.object(S.claims(events, changes, removing: removing)).jsonString
}

func long(_ n: Int) -> ClaimValue { .string(String(repeating: "x", count: n)) }

/// What is still refused after the signature: a payload whose addressing cannot be read (not a JSON object, a name
/// twice, too deep), that is no SET (no `events`: an ID token), or whose issuer or audience is missing or wrong.
@Test(arguments: [
    // The addressing cannot be read, or it is no SET: -> RFC 8935 invalid_request.
    RefusedSETCase(name: "payloadThatIsNotJSONIsABadPayload", payload: "not json", expected: "bad_payload"),
    RefusedSETCase(name: "payloadWithADuplicateClaimIsABadPayload", payload: String(setPayload().dropLast()) + #","jti":"again"}"#, expected: "bad_payload"),
    RefusedSETCase(name: "payloadWithTheIssuerTwiceIsABadPayload",
                   payload: String(setPayload().dropLast()) + #","iss":"https://evil.example/"}"#, expected: "bad_payload"),
    RefusedSETCase(name: "duplicateEventTypeIsABadPayload",
                   payload: ClaimValue.object(S.claims([:])).jsonString.replacingOccurrences(of: #""events":{}"#,
                       with: #""events":{"urn:a":{},"urn:a":{"reason":"x"}}"#), expected: "bad_payload"),
    RefusedSETCase(name: "missingEventsIsNotASecurityEvent", payload: setPayload(removing: ["events"]), expected: "not_a_security_event"),
    RefusedSETCase(name: "missingIssuerIsAMissingClaim", payload: setPayload(removing: ["iss"]), expected: "missing_claim"),
    RefusedSETCase(name: "issuerAsNumberIsABadClaimType", payload: setPayload(revoked, ["iss": 1]), expected: "bad_claim_type"),
    RefusedSETCase(name: "missingAudienceIsAMissingClaim", payload: setPayload(removing: ["aud"]), expected: "missing_claim"),
    RefusedSETCase(name: "audienceAsNumberIsABadClaimType", payload: setPayload(revoked, ["aud": 1]), expected: "bad_claim_type"),
    // Issuer and audience: -> invalid_issuer, invalid_audience.
    RefusedSETCase(name: "issuerOfAnotherProviderIsRefused", payload: setPayload(revoked, ["iss": "https://evil.example/"]), expected: "bad_issuer"),
    RefusedSETCase(name: "issuerWithoutSchemeIsRefused", payload: setPayload(revoked, ["iss": "accounts.google.com"]), expected: "bad_issuer"),
    RefusedSETCase(name: "issuerOverHTTPIsRefused", payload: setPayload(revoked, ["iss": "http://accounts.google.com/"]), expected: "bad_issuer"),
    RefusedSETCase(name: "audienceOfAnotherClientIsRefused", payload: setPayload(revoked, ["aud": "123456789012-clientc.apps.googleusercontent.com"]),
                   expected: "bad_audience"),
    RefusedSETCase(name: "emptyAudienceArrayIsRefused", payload: setPayload(revoked, ["aud": []]), expected: "bad_audience"),
    // The addressing decides before the rest: a wrong issuer or audience is refused whatever else is wrong.
    RefusedSETCase(name: "aWrongIssuerIsRefusedEvenWithoutJTI", payload: setPayload([:], ["iss": "https://evil.example/"], removing: ["jti"]),
                   expected: "bad_issuer"),
    RefusedSETCase(name: "aWrongAudienceIsRefusedEvenWithBrokenEvents", payload: setPayload([:], ["aud": "someone-else", "iat": "now"]),
                   expected: "bad_audience"),
])
func refusedSecurityEvent(_ c: RefusedSETCase) {
    let token = S.token(payload: c.payload)
    #expect(token.utf8.count <= JWS.maxTokenBytes)
    #expect(S.code(S.verify(token)) == c.expected)
}

/// JSONDecoder takes raw control characters inside strings: an unparsed payload keeps them as received (the store
/// writes a NUL, which its text column cannot hold, as `\u0000`).
@Test func anUnparsedPayloadKeepsRawControlCharacters() throws {
    let payload = String(setPayload(revoked, removing: ["jti"]).dropLast()) + ",\"note\":\"a\u{0}b\u{1}c\"}"
    let set = try #require(try S.verify(S.token(payload: payload)).get().unparsed)
    #expect(set.claimsJSON == payload && set.reason.code == .missingClaim)
}

@Test func theLongestJTIAndStateAreVerified() throws {
    #expect(try S.verified(S.token(payload: setPayload(revoked, ["jti": long(256)]))).jti.count == 256)
    #expect(try S.verified(S.token(payload: setPayload([SecurityEvent.verification: ["state": long(1024)]]))).events.first?.state?.count == 1024)
}

/// What an unparsed SET is recorded under: its own `jti` when usable, else the digest of its payload.
enum UnparsedJTI: Sendable { case own, digest }

struct UnparsedSETCase: Sendable, CustomTestStringConvertible {
    let name: String
    let payload: String
    /// The code of the full check's refusal.
    let reason: String
    var jti: UnparsedJTI = .own
    /// The type it is recorded under.
    var type = SecurityEvent.sessionsRevoked
    var issuedAt: Int64? = Fixture.now - 30
    var testDescription: String { name }
}

/// Signed by Google, addressed to us, and not readable: accepted (never a 400, which Google would not redeliver) as
/// `.unparsed`, with the payload as received, why, and what it is recorded under.
@Test(arguments: [
    UnparsedSETCase(name: "missingIssuedAt", payload: setPayload(removing: ["iat"]), reason: "missing_claim", issuedAt: nil),
    UnparsedSETCase(name: "issuedAtAsString", payload: setPayload(revoked, ["iat": .string(String(Fixture.now))]), reason: "bad_claim_type",
                    issuedAt: nil),
    UnparsedSETCase(name: "issuedAtAfterTheYear9999", payload: setPayload(revoked, ["iat": .integer(253_402_300_800)]),
                    reason: "bad_claim_value", issuedAt: nil),
    UnparsedSETCase(name: "issuedAtBefore1970", payload: setPayload(revoked, ["iat": .integer(-1)]), reason: "bad_claim_value", issuedAt: nil),
    UnparsedSETCase(name: "missingJTI", payload: setPayload(removing: ["jti"]), reason: "missing_claim", jti: .digest),
    UnparsedSETCase(name: "jtiAsNumber", payload: setPayload(revoked, ["jti": 7]), reason: "bad_claim_type", jti: .digest),
    UnparsedSETCase(name: "emptyJTI", payload: setPayload(revoked, ["jti": ""]), reason: "bad_claim_value", jti: .digest),
    UnparsedSETCase(name: "jtiOf257Characters", payload: setPayload(revoked, ["jti": long(257)]), reason: "claim_too_long", jti: .digest),
    UnparsedSETCase(name: "jtiWithALineFeed", payload: setPayload(revoked, ["jti": "a\nb"]), reason: "bad_claim_value", jti: .digest),
    UnparsedSETCase(name: "eventsOverTheNestedMemberCap",
                    payload: setPayload(Dictionary(uniqueKeysWithValues: (0..<65).map { ("urn:e:\($0)", [:] as ClaimValue) })),
                    reason: "bad_payload", type: SecurityEventVerifier.unparsedType),
    UnparsedSETCase(name: "seventeenEvents",
                    payload: setPayload(Dictionary(uniqueKeysWithValues: (0..<17).map { ("urn:e:\($0)", [:] as ClaimValue) })),
                    reason: "bad_events", type: SecurityEventVerifier.unparsedType),
    UnparsedSETCase(name: "eventsAsAnArray", payload: setPayload([:], ["events": [[:]]]), reason: "bad_claim_type",
                    type: SecurityEventVerifier.unparsedType),
    UnparsedSETCase(name: "eventsAsAString", payload: setPayload([:], ["events": "sessions-revoked"]), reason: "bad_claim_type",
                    type: SecurityEventVerifier.unparsedType),
    UnparsedSETCase(name: "eventsAsNull", payload: setPayload([:], ["events": .null]), reason: "bad_claim_type",
                    type: SecurityEventVerifier.unparsedType),
    UnparsedSETCase(name: "emptyEvents", payload: setPayload([:]), reason: "bad_events", type: SecurityEventVerifier.unparsedType),
    UnparsedSETCase(name: "anEventThatIsAString", payload: setPayload([SecurityEvent.sessionsRevoked: "yes"]), reason: "bad_events"),
    UnparsedSETCase(name: "anEventThatIsNull", payload: setPayload([SecurityEvent.sessionsRevoked: .null]), reason: "bad_events"),
    UnparsedSETCase(name: "anEventThatIsAnArray", payload: setPayload([SecurityEvent.sessionsRevoked: [S.subject()]]), reason: "bad_events"),
    UnparsedSETCase(name: "aReasonThatIsNotAString", payload: setPayload([SecurityEvent.accountDisabled: ["subject": S.subject(), "reason": 1]]),
                    reason: "bad_events", type: SecurityEvent.accountDisabled),
    UnparsedSETCase(name: "aStateThatIsNotAString", payload: setPayload([SecurityEvent.verification: ["state": ["a"]]]), reason: "bad_events",
                    type: SecurityEvent.verification),
    UnparsedSETCase(name: "aSubjectThatIsNotAnObject", payload: setPayload([SecurityEvent.sessionsRevoked: ["subject": "7375626A"]]),
                    reason: "bad_events"),
    UnparsedSETCase(name: "anIssSubSubjectWithANumericSub",
                    payload: setPayload([SecurityEvent.sessionsRevoked: ["subject": ["subject_type": "iss-sub", "iss": .string(S.issuer), "sub": 7]]]),
                    reason: "bad_events"),
    UnparsedSETCase(name: "anEmptySubjectSub", payload: setPayload([SecurityEvent.sessionsRevoked: ["subject": S.subject("")]]), reason: "bad_events"),
    UnparsedSETCase(name: "anEmptyEventType", payload: setPayload(["": ["subject": S.subject()]]), reason: "bad_events",
                    type: SecurityEventVerifier.unparsedType),
    UnparsedSETCase(name: "subIDThatIsNotAnObject", payload: setPayload(revoked, ["sub_id": "7375626A"]), reason: "bad_claim_type"),
    UnparsedSETCase(name: "eventTypeOf257Characters", payload: setPayload(["urn:" + String(repeating: "t", count: 253): ["subject": S.subject()]]),
                    reason: "claim_too_long", type: SecurityEventVerifier.unparsedType),
    UnparsedSETCase(name: "reasonOf257Characters", payload: setPayload([SecurityEvent.accountDisabled: ["subject": S.subject(), "reason": long(257)]]),
                    reason: "claim_too_long", type: SecurityEvent.accountDisabled),
    UnparsedSETCase(name: "stateOf1025Characters", payload: setPayload([SecurityEvent.verification: ["state": long(1025)]]), reason: "claim_too_long",
                    type: SecurityEvent.verification),
    UnparsedSETCase(name: "subjectSubOf256Characters",
                    payload: setPayload([SecurityEvent.sessionsRevoked: ["subject": S.subject(String(repeating: "1", count: 256))]]),
                    reason: "claim_too_long"),
    UnparsedSETCase(name: "subjectSubWithACarriageReturn", payload: setPayload([SecurityEvent.sessionsRevoked: ["subject": S.subject("1\r2")]]),
                    reason: "bad_claim_value"),
    UnparsedSETCase(name: "subIDSubWithANul",
                    payload: setPayload([SecurityEvent.sessionsRevoked: [:]], ["sub_id": ["format": "iss_sub", "iss": .string(S.issuer), "sub": "1\u{0}"]]),
                    reason: "bad_claim_value"),
    UnparsedSETCase(name: "sixtyFiveClaims",
                    payload: setPayload(revoked, Dictionary(uniqueKeysWithValues: (0..<60).map { ("x\($0)", .integer(Int64($0))) })),
                    reason: "bad_payload"),
    UnparsedSETCase(name: "severalEventsOneBroken",
                    payload: setPayload([SecurityEvent.sessionsRevoked: ["subject": S.subject()], SecurityEvent.accountDisabled: ["reason": 1]]),
                    reason: "bad_events", type: SecurityEventVerifier.unparsedType),
])
func unparsedSecurityEvent(_ c: UnparsedSETCase) throws {
    let token = S.token(payload: c.payload)
    #expect(token.utf8.count <= JWS.maxTokenBytes)
    let result = S.verify(token)
    #expect(S.code(result) == "unparsed:" + c.reason)
    let set = try #require(try result.get().unparsed)
    #expect(set.claimsJSON == c.payload && set.issuer == S.issuer && set.audience == Fixture.clientID && set.keyID == Keys.rsa.kid)
    #expect(set.type == c.type && set.issuedAt == c.issuedAt)
    switch c.jti {
    case .own: #expect(set.jti == S.jti)
    case .digest: #expect(set.jti == "sha256:" + Digest.sha256(Array(c.payload.utf8)).map { String(format: "%02x", $0) }.joined())
    }
}

/// An unparsed SET is recorded under the same jti each time it comes (a redelivery changes nothing), and two
/// different ones without a usable jti under different ones.
@Test func anUnparsedSETWithoutAJTIIsNamedByItsPayload() throws {
    let first = setPayload(revoked, removing: ["jti"]), second = setPayload(revoked, ["iat": .integer(Fixture.now - 31)], removing: ["jti"])
    let a = try #require(try S.verify(S.token(payload: first)).get().unparsed)
    let again = try #require(try S.verify(S.token(payload: first, key: Keys.ec)).get().unparsed)
    let b = try #require(try S.verify(S.token(payload: second)).get().unparsed)
    #expect(a.jti == again.jti && a.jti != b.jti && a.jti.hasPrefix("sha256:") && a.jti.utf8.count == 71)
}

struct JOSESETCase: Sendable, CustomTestStringConvertible {
    let name: String
    let token: String
    let expected: String
    var testDescription: String { name }
}

let goodSET = S.token(S.claims(revoked))
let setParts = goodSET.split(separator: ".").map(String.init)
let setPayloadSegment = setParts[1]

@Test(arguments: [
    // Key problems: -> invalid_key.
    JOSESETCase(name: "unknownKidIsRefused", token: Keys.rsa.sign(headerJSON: #"{"alg":"RS256","kid":"no-such-key"}"#, payloadJSON: setPayload()),
                expected: "unknown_kid"),
    JOSESETCase(name: "missingKidIsRefused", token: Keys.rsa.sign(headerJSON: #"{"alg":"RS256"}"#, payloadJSON: setPayload()), expected: "missing_kid"),
    JOSESETCase(name: "rs256WithAnECKeyIsAnAlgorithmMismatch",
                token: Keys.rsa.sign(headerJSON: #"{"alg":"RS256","kid":"\#(Keys.ec.kid)"}"#, payloadJSON: setPayload()), expected: "algorithm_mismatch"),
    // The signature: -> authentication_failed.
    JOSESETCase(name: "anotherKeysSignatureIsABadSignature",
                token: Keys.rsa2.sign(headerJSON: #"{"alg":"RS256","kid":"\#(Keys.rsa.kid)"}"#, payloadJSON: setPayload()), expected: "bad_signature"),
    JOSESETCase(name: "aChangedPayloadIsABadSignature",
                token: setParts[0] + "." + Base64URL.encode(Array(setPayload(revoked, ["aud": .string(Fixture.otherClientID)]).utf8)) + "." + setParts[2],
                expected: "bad_signature"),
    // Shape and header: -> invalid_request.
    JOSESETCase(name: "hmacIsRefused", token: Keys.rsa.sign(headerJSON: #"{"alg":"HS256","kid":"\#(Keys.rsa.kid)"}"#, payloadJSON: setPayload()),
                expected: "unsupported_algorithm"),
    JOSESETCase(name: "algNoneIsRefused", token: Keys.rsa.sign(headerJSON: #"{"alg":"none","kid":"\#(Keys.rsa.kid)"}"#, payloadJSON: setPayload()),
                expected: "unsupported_algorithm"),
    JOSESETCase(name: "anEmbeddedKeyIsRefused",
                token: Keys.rsa.sign(headerJSON: #"{"alg":"RS256","kid":"\#(Keys.rsa.kid)","jwk":{}}"#, payloadJSON: setPayload()), expected: "embedded_key"),
    JOSESETCase(name: "twoSegmentsAreMalformed", token: setParts[0] + "." + setParts[1], expected: "malformed"),
    JOSESETCase(name: "paddingIsBadBase64", token: goodSET + "==", expected: "bad_base64"),
    JOSESETCase(name: "aHeaderThatIsNotJSONIsABadHeader", token: Keys.rsa.sign(headerJSON: "RS256", payloadJSON: setPayload()), expected: "bad_header"),
    JOSESETCase(name: "aTokenOver16KBIsRefusedUnparsed", token: String(repeating: "A", count: 16 * 1024 + 1), expected: "token_too_large"),
])
func securityEventJOSERule(_ c: JOSESETCase) {
    #expect(S.code(S.verify(c.token)) == c.expected)
}

@Test func aRejectedKeysKidReportsItsReason() throws {
    let weak = edited(Keys.rsa2.publicJWK, ["kid": "weak", "e": "AQ"])
    let keys = try KeySet(jwks: jwks(Keys.rsa.publicJWK, weak))
    let token = Keys.rsa2.sign(headerJSON: #"{"alg":"RS256","kid":"weak"}"#, payloadJSON: setPayload())
    #expect(S.code(S.verify(token, keys: keys)) == "weak_key")
}

@Test func aMaximumSizeEventsPayloadIsDecidedWithoutRecursionOrQuadraticWork() {
    // Sixteen events with 900-character states fill most of a 16 KB token; nesting at the limit inside one.
    var events = Dictionary(uniqueKeysWithValues: (0..<15).map { ("urn:e:\($0)", ["state": long(650)] as ClaimValue) })
    events["urn:e:deep"] = ["x": .array([.array([.array([.array([.array([.array([.array([.array([.array([.array([.array([.array([.array([])])])])])])])])])])])])])]
    let token = S.token(payload: setPayload(events))
    #expect(token.utf8.count <= JWS.maxTokenBytes)
    #expect(S.code(S.verify(token)) == "ok")
    events["urn:e:deep"] = ["x": .array([.array([.array([.array([.array([.array([.array([.array([.array([.array([.array([.array([.array([.array([])])])])])])])])])])])])])])]
    #expect(S.code(S.verify(S.token(payload: setPayload(events)))) == "bad_payload", "too deep to read its addressing safely")
}
