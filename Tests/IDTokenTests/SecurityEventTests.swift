// Security event tokens (Cross-Account Protection): every documented shape verified, every refusal by its reason.
import IDToken
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

    static func verify(_ token: String, keys: KeySet = Keys.set, now: Int64 = Fixture.now) -> Result<VerifiedSecurityEvent, IDTokenError> {
        verifier.verify(token, keys: keys, now: now)
    }

    static func code(_ result: Result<VerifiedSecurityEvent, IDTokenError>) -> String {
        switch result {
        case .success: "ok"
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
    let verified = try S.verify(S.token(S.claims(c.events, c.changes))).get()
    #expect(verified.events == c.expected)
    #expect(verified.jti == S.jti && verified.issuer == S.issuer && verified.audience == Fixture.clientID)
    #expect(verified.issuedAt == Fixture.now - 30 && verified.expiresAt == nil && verified.keyID == Keys.rsa.kid)
}

let revoked: [String: ClaimValue] = [SecurityEvent.sessionsRevoked: ["subject": S.subject()]]

@Test func bothIssuerSpellingsAreAccepted() {
    for issuer in ["https://accounts.google.com/", "https://accounts.google.com"] {
        #expect(S.code(S.verify(S.token(S.claims(revoked, ["iss": .string(issuer)])))) == "ok")
    }
}

@Test func anAudienceArrayNeedsOneConfiguredClient() throws {
    let verified = try S.verify(S.token(S.claims(revoked, ["aud": ["someone-else", .string(Fixture.otherClientID)]]))).get()
    #expect(verified.audience == Fixture.otherClientID)
}

@Test func expiryIsOptionalButEnforcedWhenPresent() throws {
    #expect(try S.verify(S.token(S.claims(revoked, ["exp": .integer(Fixture.now + 600)]))).get().expiresAt == Fixture.now + 600)
    #expect(S.code(S.verify(S.token(S.claims(revoked, ["exp": .integer(Fixture.now - 60)])))) == "ok")  // within skew
    #expect(S.code(S.verify(S.token(S.claims(revoked, ["exp": .integer(Fixture.now - 61)])))) == "expired")
}

@Test func issuedAtMayBeInTheFutureOnlyWithinTheSkew() {
    #expect(S.code(S.verify(S.token(S.claims(revoked, ["iat": .integer(Fixture.now + 60)])))) == "ok")
    #expect(S.code(S.verify(S.token(S.claims(revoked, ["iat": .integer(Fixture.now + 61)])))) == "issued_in_future")
}

@Test func sixteenEventsAreAcceptedAndSeventeenAreBadEvents() throws {
    func events(_ n: Int) -> [String: ClaimValue] {
        Dictionary(uniqueKeysWithValues: (0..<n).map { ("urn:example:event:\($0)", ["subject": S.subject()] as ClaimValue) })
    }
    #expect(try S.verify(S.token(S.claims(events(16)))).get().events.count == 16)
    #expect(S.code(S.verify(S.token(S.claims(events(17))))) == "bad_events")
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

@Test(arguments: [
    // Claims and their types: -> RFC 8935 invalid_request.
    RefusedSETCase(name: "payloadThatIsNotJSONIsABadPayload", payload: "not json", expected: "bad_payload"),
    RefusedSETCase(name: "payloadWithADuplicateClaimIsABadPayload", payload: String(setPayload().dropLast()) + #","jti":"again"}"#, expected: "bad_payload"),
    RefusedSETCase(name: "duplicateEventTypeIsABadPayload",
                   payload: ClaimValue.object(S.claims([:])).jsonString.replacingOccurrences(of: #""events":{}"#,
                       with: #""events":{"urn:a":{},"urn:a":{"reason":"x"}}"#), expected: "bad_payload"),
    RefusedSETCase(name: "eventsOverTheNestedMemberCapIsABadPayload",
                   payload: setPayload(Dictionary(uniqueKeysWithValues: (0..<65).map { ("urn:e:\($0)", [:] as ClaimValue) })), expected: "bad_payload"),
    RefusedSETCase(name: "missingEventsIsNotASecurityEvent", payload: setPayload(removing: ["events"]), expected: "not_a_security_event"),
    RefusedSETCase(name: "eventsAsAnArrayIsABadClaimType", payload: setPayload([:], ["events": [[:]]]), expected: "bad_claim_type"),
    RefusedSETCase(name: "eventsAsAStringIsABadClaimType", payload: setPayload([:], ["events": "sessions-revoked"]), expected: "bad_claim_type"),
    RefusedSETCase(name: "eventsAsNullIsABadClaimType", payload: setPayload([:], ["events": .null]), expected: "bad_claim_type"),
    RefusedSETCase(name: "emptyEventsAreBadEvents", payload: setPayload([:]), expected: "bad_events"),
    RefusedSETCase(name: "anEventThatIsAStringIsBadEvents", payload: setPayload([SecurityEvent.sessionsRevoked: "yes"]), expected: "bad_events"),
    RefusedSETCase(name: "anEventThatIsNullIsBadEvents", payload: setPayload([SecurityEvent.sessionsRevoked: .null]), expected: "bad_events"),
    RefusedSETCase(name: "anEventThatIsAnArrayIsBadEvents", payload: setPayload([SecurityEvent.sessionsRevoked: [S.subject()]]), expected: "bad_events"),
    RefusedSETCase(name: "aReasonThatIsNotAStringIsBadEvents",
                   payload: setPayload([SecurityEvent.accountDisabled: ["subject": S.subject(), "reason": 1]]), expected: "bad_events"),
    RefusedSETCase(name: "aStateThatIsNotAStringIsBadEvents", payload: setPayload([SecurityEvent.verification: ["state": ["a"]]]), expected: "bad_events"),
    RefusedSETCase(name: "aSubjectThatIsNotAnObjectIsBadEvents", payload: setPayload([SecurityEvent.sessionsRevoked: ["subject": "7375626A"]]),
                   expected: "bad_events"),
    RefusedSETCase(name: "anIssSubSubjectWithANumericSubIsBadEvents",
                   payload: setPayload([SecurityEvent.sessionsRevoked: ["subject": ["subject_type": "iss-sub", "iss": .string(S.issuer), "sub": 7]]]),
                   expected: "bad_events"),
    RefusedSETCase(name: "anEmptySubjectSubIsBadEvents", payload: setPayload([SecurityEvent.sessionsRevoked: ["subject": S.subject("")]]),
                   expected: "bad_events"),
    RefusedSETCase(name: "anEmptyEventTypeIsBadEvents", payload: setPayload(["": ["subject": S.subject()]]), expected: "bad_events"),
    RefusedSETCase(name: "subIDThatIsNotAnObjectIsABadClaimType", payload: setPayload(revoked, ["sub_id": "7375626A"]), expected: "bad_claim_type"),
    RefusedSETCase(name: "missingIssuerIsAMissingClaim", payload: setPayload(removing: ["iss"]), expected: "missing_claim"),
    RefusedSETCase(name: "issuerAsNumberIsABadClaimType", payload: setPayload(revoked, ["iss": 1]), expected: "bad_claim_type"),
    RefusedSETCase(name: "missingAudienceIsAMissingClaim", payload: setPayload(removing: ["aud"]), expected: "missing_claim"),
    RefusedSETCase(name: "audienceAsNumberIsABadClaimType", payload: setPayload(revoked, ["aud": 1]), expected: "bad_claim_type"),
    RefusedSETCase(name: "missingIssuedAtIsAMissingClaim", payload: setPayload(removing: ["iat"]), expected: "missing_claim"),
    RefusedSETCase(name: "issuedAtAsStringIsABadClaimType", payload: setPayload(revoked, ["iat": .string(String(Fixture.now))]), expected: "bad_claim_type"),
    RefusedSETCase(name: "issuedInTheFutureBeyondSkew", payload: setPayload(revoked, ["iat": .integer(Fixture.now + 61)]), expected: "issued_in_future"),
    RefusedSETCase(name: "expiredBeyondSkew", payload: setPayload(revoked, ["exp": .integer(Fixture.now - 61)]), expected: "expired"),
    RefusedSETCase(name: "expiryAsStringIsABadClaimType", payload: setPayload(revoked, ["exp": "soon"]), expected: "bad_claim_type"),
    RefusedSETCase(name: "missingJTIIsAMissingClaim", payload: setPayload(removing: ["jti"]), expected: "missing_claim"),
    RefusedSETCase(name: "jtiAsNumberIsABadClaimType", payload: setPayload(revoked, ["jti": 7]), expected: "bad_claim_type"),
    RefusedSETCase(name: "emptyJTIIsABadClaimValue", payload: setPayload(revoked, ["jti": ""]), expected: "bad_claim_value"),
    RefusedSETCase(name: "jtiOf256CharactersIsAccepted", payload: setPayload(revoked, ["jti": long(256)]), expected: "ok"),
    RefusedSETCase(name: "jtiOf257CharactersIsTooLong", payload: setPayload(revoked, ["jti": long(257)]), expected: "claim_too_long"),
    RefusedSETCase(name: "jtiWithALineFeedIsABadClaimValue", payload: setPayload(revoked, ["jti": "a\nb"]), expected: "bad_claim_value"),
    RefusedSETCase(name: "eventTypeOf257CharactersIsTooLong",
                   payload: setPayload(["urn:" + String(repeating: "t", count: 253): ["subject": S.subject()]]), expected: "claim_too_long"),
    RefusedSETCase(name: "reasonOf257CharactersIsTooLong",
                   payload: setPayload([SecurityEvent.accountDisabled: ["subject": S.subject(), "reason": long(257)]]), expected: "claim_too_long"),
    RefusedSETCase(name: "stateOf1024CharactersIsAccepted", payload: setPayload([SecurityEvent.verification: ["state": long(1024)]]), expected: "ok"),
    RefusedSETCase(name: "stateOf1025CharactersIsTooLong", payload: setPayload([SecurityEvent.verification: ["state": long(1025)]]),
                   expected: "claim_too_long"),
    RefusedSETCase(name: "subjectSubOf256CharactersIsTooLong",
                   payload: setPayload([SecurityEvent.sessionsRevoked: ["subject": S.subject(String(repeating: "1", count: 256))]]),
                   expected: "claim_too_long"),
    RefusedSETCase(name: "subjectSubWithACarriageReturnIsABadClaimValue",
                   payload: setPayload([SecurityEvent.sessionsRevoked: ["subject": S.subject("1\r2")]]), expected: "bad_claim_value"),
    RefusedSETCase(name: "subIDSubWithANulIsABadClaimValue",
                   payload: setPayload([SecurityEvent.sessionsRevoked: [:]], ["sub_id": ["format": "iss_sub", "iss": .string(S.issuer), "sub": "1\u{0}"]]),
                   expected: "bad_claim_value"),
    // Issuer and audience: -> invalid_issuer, invalid_audience.
    RefusedSETCase(name: "issuerOfAnotherProviderIsRefused", payload: setPayload(revoked, ["iss": "https://evil.example/"]), expected: "bad_issuer"),
    RefusedSETCase(name: "issuerWithoutSchemeIsRefused", payload: setPayload(revoked, ["iss": "accounts.google.com"]), expected: "bad_issuer"),
    RefusedSETCase(name: "issuerOverHTTPIsRefused", payload: setPayload(revoked, ["iss": "http://accounts.google.com/"]), expected: "bad_issuer"),
    RefusedSETCase(name: "audienceOfAnotherClientIsRefused", payload: setPayload(revoked, ["aud": "123456789012-clientc.apps.googleusercontent.com"]),
                   expected: "bad_audience"),
    RefusedSETCase(name: "emptyAudienceArrayIsRefused", payload: setPayload(revoked, ["aud": []]), expected: "bad_audience"),
])
func refusedSecurityEvent(_ c: RefusedSETCase) {
    let token = S.token(payload: c.payload)
    #expect(token.utf8.count <= JWS.maxTokenBytes)
    #expect(S.code(S.verify(token)) == c.expected)
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
    #expect(S.code(S.verify(S.token(payload: setPayload(events)))) == "bad_payload")
}
