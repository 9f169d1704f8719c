// The Google claim policy: every acceptance and rejection rule, by name, as parameterised tables.
import IDToken
import Signing
import Testing

struct ClaimCase: Sendable, CustomTestStringConvertible {
    let name: String
    let changes: [String: ClaimValue]
    var removed: [String] = []
    var hostedDomains: [String] = []
    var clockSkew: Int64 = 60
    let expected: String
    var testDescription: String { name }
}

let n = Fixture.now

let rejectedClaimCases: [ClaimCase] = [
    ClaimCase(name: "issuerOfAnotherProviderIsRejected", changes: ["iss": "https://evil.example"], expected: "bad_issuer"),
    ClaimCase(name: "issuerWithHttpSchemeIsRejected", changes: ["iss": "http://accounts.google.com"], expected: "bad_issuer"),
    ClaimCase(name: "issuerWithTrailingSlashIsRejected", changes: ["iss": "https://accounts.google.com/"], expected: "bad_issuer"),
    ClaimCase(name: "missingIssuerIsRejected", changes: [:], removed: ["iss"], expected: "missing_claim"),
    ClaimCase(name: "issuerAsNumberIsABadClaimType", changes: ["iss": 1], expected: "bad_claim_type"),
    ClaimCase(name: "audienceOfAnotherClientIsRejected", changes: ["aud": "123456789012-clientc.apps.googleusercontent.com"], expected: "bad_audience"),
    ClaimCase(name: "audienceDifferingInCaseIsRejected", changes: ["aud": "123456789012-CLIENTA.apps.googleusercontent.com"], expected: "bad_audience"),
    ClaimCase(name: "audienceWithTrailingSpaceIsRejected", changes: ["aud": .string(Fixture.clientID + " ")], expected: "bad_audience"),
    ClaimCase(name: "audienceArrayWithOneUnknownEntryIsRejected",
              changes: ["aud": [.string(Fixture.clientID), "123456789012-clientc.apps.googleusercontent.com"]], expected: "bad_audience"),
    ClaimCase(name: "emptyAudienceArrayIsRejected", changes: ["aud": []], expected: "bad_audience"),
    ClaimCase(name: "missingAudienceIsRejected", changes: [:], removed: ["aud"], expected: "missing_claim"),
    ClaimCase(name: "audienceAsNumberIsABadClaimType", changes: ["aud": 7], expected: "bad_claim_type"),
    ClaimCase(name: "missingExpIsRejected", changes: [:], removed: ["exp"], expected: "missing_claim"),
    ClaimCase(name: "missingIatIsRejected", changes: [:], removed: ["iat"], expected: "missing_claim"),
    ClaimCase(name: "expAsStringIsABadClaimType", changes: ["exp": .string(String(n + 3500))], expected: "bad_claim_type"),
    ClaimCase(name: "expAsBooleanIsABadClaimType", changes: ["exp": true], expected: "bad_claim_type"),
    ClaimCase(name: "expAsNullIsABadClaimType", changes: ["exp": .null], expected: "bad_claim_type"),
    ClaimCase(name: "iatAsStringIsABadClaimType", changes: ["iat": .string(String(n - 100))], expected: "bad_claim_type"),
    ClaimCase(name: "nbfAsStringIsABadClaimType", changes: ["nbf": .string(String(n))], expected: "bad_claim_type"),
    ClaimCase(name: "expiredBeyondSkewIsRejected", changes: ["iat": .integer(n - 3700), "exp": .integer(n - 61)], expected: "expired"),
    ClaimCase(name: "expiredWithZeroSkewIsRejected", changes: ["iat": .integer(n - 3700), "exp": .integer(n - 1)],
              clockSkew: 0, expected: "expired"),
    ClaimCase(name: "notBeforeBeyondSkewIsRejected", changes: ["nbf": .integer(n + 61)], expected: "not_yet_valid"),
    ClaimCase(name: "issuedInTheFutureBeyondSkewIsRejected",
              changes: ["iat": .integer(n + 61), "exp": .integer(n + 3600)], expected: "issued_in_future"),
    ClaimCase(name: "lifetimeOverOneDayIsRejected",
              changes: ["iat": .integer(n - 100), "exp": .integer(n - 100 + 86401)], expected: "lifetime_too_long"),
    ClaimCase(name: "expBeforeIatIsRejected", changes: ["iat": .integer(n), "exp": .integer(n - 1)], expected: "lifetime_too_long"),
    ClaimCase(name: "missingSubjectIsRejected", changes: [:], removed: ["sub"], expected: "missing_claim"),
    ClaimCase(name: "emptySubjectIsRejected", changes: ["sub": ""], expected: "bad_subject"),
    ClaimCase(name: "subjectAsNumberIsABadClaimType", changes: ["sub": 110169484474386276], expected: "bad_claim_type"),
    ClaimCase(name: "emailVerifiedOtherStringIsABadClaimType", changes: ["email_verified": "yes"], expected: "bad_claim_type"),
    ClaimCase(name: "emailAsNumberIsABadClaimType", changes: ["email": 5], expected: "bad_claim_type"),
    ClaimCase(name: "hostedDomainMissingWhenRequiredIsRejected", changes: [:],
              hostedDomains: ["example.com"], expected: "hosted_domain_not_allowed"),
    ClaimCase(name: "otherHostedDomainIsRejected", changes: ["hd": "evil.example"],
              hostedDomains: ["example.com"], expected: "hosted_domain_not_allowed"),
    ClaimCase(name: "hostedDomainDifferingInCaseIsRejected", changes: ["hd": "Example.com"],
              hostedDomains: ["example.com"], expected: "hosted_domain_not_allowed"),
    ClaimCase(name: "hostedDomainAsNumberIsABadClaimType", changes: ["hd": 1],
              hostedDomains: ["example.com"], expected: "bad_claim_type"),
    // Who the token was issued to (azp): a client of the site's own Google Cloud project, or nobody else.
    ClaimCase(name: "authorizedPartyOfAnotherProjectIsRejected", changes: ["azp": "999999999999-clientc.apps.googleusercontent.com"],
              expected: "unauthorized_party"),
    ClaimCase(name: "authorizedPartyThatIsAServiceAccountsIdIsRejected", changes: ["azp": "104029292853099978293"],
              expected: "unauthorized_party"),
    ClaimCase(name: "authorizedPartyThatIsAnEmailIsRejected", changes: ["azp": "robot@project.iam.gserviceaccount.com"],
              removed: ["email"], expected: "unauthorized_party"),
    ClaimCase(name: "authorizedPartyWithTheProjectNumberButNoClientShapeIsRejected", changes: ["azp": "123456789012-x"],
              expected: "unauthorized_party"),
    ClaimCase(name: "authorizedPartyDifferingInCaseIsRejected", changes: ["azp": "123456789012-CLIENTC.apps.googleusercontent.com"],
              expected: "unauthorized_party"),
    ClaimCase(name: "authorizedPartyAsNumberIsABadClaimType", changes: ["azp": 7], expected: "bad_claim_type"),
    // Service accounts are programs, not people, whatever their token's audience.
    ClaimCase(name: "serviceAccountEmailIsRejected", changes: ["email": "robot@project.iam.gserviceaccount.com"],
              expected: "service_account"),
    ClaimCase(name: "serviceAccountEmailInCapitalsIsRejected", changes: ["email": "Robot@Project.IAM.GServiceAccount.COM"],
              expected: "service_account"),
    ClaimCase(name: "defaultComputeServiceAccountIsRejected",
              changes: ["email": "123456789012-compute@developer.gserviceaccount.com", "azp": "104029292853099978293"],
              expected: "service_account"),
]

let acceptedClaimCases: [ClaimCase] = [
    ClaimCase(name: "googleTokenIsAccepted", changes: [:], expected: "ok"),
    ClaimCase(name: "issuerWithoutSchemeIsAccepted", changes: ["iss": "accounts.google.com"], expected: "ok"),
    ClaimCase(name: "secondConfiguredClientIsAccepted", changes: ["aud": .string(Fixture.otherClientID)], expected: "ok"),
    ClaimCase(name: "audienceArrayOfConfiguredClientsIsAccepted",
              changes: ["aud": [.string(Fixture.clientID), .string(Fixture.otherClientID)]], expected: "ok"),
    ClaimCase(name: "expiredWithinSkewIsAccepted", changes: ["iat": .integer(n - 3700), "exp": .integer(n - 60)], expected: "ok"),
    ClaimCase(name: "notBeforeWithinSkewIsAccepted", changes: ["nbf": .integer(n + 60)], expected: "ok"),
    ClaimCase(name: "issuedInTheFutureWithinSkewIsAccepted",
              changes: ["iat": .integer(n + 60), "exp": .integer(n + 3660)], expected: "ok"),
    ClaimCase(name: "lifetimeOfExactlyOneDayIsAccepted",
              changes: ["iat": .integer(n - 100), "exp": .integer(n - 100 + 86400)], expected: "ok"),
    ClaimCase(name: "fractionalTimesAreAccepted", changes: ["iat": .number(Double(n) - 0.5), "exp": .number(Double(n) + 10.25)],
              expected: "ok"),
    ClaimCase(name: "emailVerifiedAsStringIsAccepted", changes: ["email_verified": "true"], expected: "ok"),
    ClaimCase(name: "missingEmailIsAccepted", changes: [:], removed: ["email", "email_verified"], expected: "ok"),
    ClaimCase(name: "allowedHostedDomainIsAccepted", changes: ["hd": "example.com"],
              hostedDomains: ["other.example", "example.com"], expected: "ok"),
    ClaimCase(name: "hostedDomainIgnoredWhenNoListIsConfigured", changes: ["hd": "anything.example"], expected: "ok"),
    ClaimCase(name: "noAuthorizedPartyIsAccepted", changes: [:], removed: ["azp"], expected: "ok"),
    ClaimCase(name: "authorizedPartyThatIsAnotherConfiguredClientIsAccepted", changes: ["azp": .string(Fixture.otherClientID)],
              expected: "ok"),
    ClaimCase(name: "authorizedPartyOfTheSameProjectIsAccepted",
              changes: ["azp": "123456789012-androidclient.apps.googleusercontent.com"], expected: "ok"),
    ClaimCase(name: "anEmailMerelyMentioningServiceAccountsIsAccepted", changes: ["email": "gserviceaccount.com@example.com"],
              expected: "ok"),
    ClaimCase(name: "unknownClaimsAreIgnored", changes: ["nonce": "n-0S6_WzA2Mj", "at_hash": "HK6E_P6Dh8Y93mRNtsDB1Q"],
              expected: "ok"),
]

func text(_ unit: String, _ count: Int) -> ClaimValue { .string(String(repeating: unit, count: count)) }

/// The database limits (sql/001_users.sql) and the control-character rule, at and one past each bound.
let storableClaimCases: [ClaimCase] = [
    ClaimCase(name: "subjectOf255CharactersIsAccepted", changes: ["sub": text("1", 255)], expected: "ok"),
    ClaimCase(name: "subjectOf256CharactersIsTooLong", changes: ["sub": text("1", 256)], expected: "claim_too_long"),
    ClaimCase(name: "emailOf320CharactersIsAccepted", changes: ["email": .string(String(repeating: "u", count: 308) + "@example.com")], expected: "ok"),
    ClaimCase(name: "emailOf321CharactersIsTooLong", changes: ["email": .string(String(repeating: "u", count: 309) + "@example.com")],
              expected: "claim_too_long"),
    // Counted as PostgreSQL's length() counts: Unicode scalars, not bytes (2 each here) nor characters (e + U+0301 is one).
    ClaimCase(name: "nameOf1024ScalarsIsAccepted", changes: ["name": text("e\u{301}", 512)], expected: "ok"),
    ClaimCase(name: "nameOf1025ScalarsIsTooLong", changes: ["name": .string(String(repeating: "e\u{301}", count: 512) + "x")], expected: "claim_too_long"),
    ClaimCase(name: "nameOf1024TwoByteScalarsIsAccepted", changes: ["name": text("\u{E9}", 1024)], expected: "ok"),
    ClaimCase(name: "givenNameOf1025CharactersIsTooLong", changes: ["given_name": text("g", 1025)], expected: "claim_too_long"),
    ClaimCase(name: "familyNameOf1025CharactersIsTooLong", changes: ["family_name": text("f", 1025)], expected: "claim_too_long"),
    ClaimCase(name: "pictureOf4096CharactersIsAccepted", changes: ["picture": text("p", 4096)], expected: "ok"),
    ClaimCase(name: "pictureOf4097CharactersIsTooLong", changes: ["picture": text("p", 4097)], expected: "claim_too_long"),
    ClaimCase(name: "localeOf64CharactersIsAccepted", changes: ["locale": text("l", 64)], expected: "ok"),
    ClaimCase(name: "localeOf65CharactersIsTooLong", changes: ["locale": text("l", 65)], expected: "claim_too_long"),
    ClaimCase(name: "hostedDomainOf253CharactersIsAccepted", changes: ["hd": text("d", 253)], expected: "ok"),
    ClaimCase(name: "hostedDomainOf254CharactersIsTooLong", changes: ["hd": text("d", 254)], expected: "claim_too_long"),
    ClaimCase(name: "nulInTheNameIsABadClaimValue", changes: ["name": "Test\u{0}User"], expected: "bad_claim_value"),
    ClaimCase(name: "crlfInTheSubjectIsABadClaimValue", changes: ["sub": "1\r\nX-User-Id: 2"], expected: "bad_claim_value"),
    ClaimCase(name: "lineFeedInTheEmailIsABadClaimValue", changes: ["email": "user@example.com\nX-User-Email: admin@example.com"],
              expected: "bad_claim_value"),
    ClaimCase(name: "tabInTheGivenNameIsABadClaimValue", changes: ["given_name": "Te\tst"], expected: "bad_claim_value"),
    ClaimCase(name: "deleteInTheFamilyNameIsABadClaimValue", changes: ["family_name": "Us\u{7F}er"], expected: "bad_claim_value"),
    ClaimCase(name: "escapeInThePictureIsABadClaimValue", changes: ["picture": "https://p.example/\u{1B}[2J"], expected: "bad_claim_value"),
    ClaimCase(name: "controlCharacterInTheLocaleIsABadClaimValue", changes: ["locale": "en\u{1}"], expected: "bad_claim_value"),
    ClaimCase(name: "controlCharacterInTheHostedDomainIsABadClaimValue", changes: ["hd": "example.com\r"], expected: "bad_claim_value"),
    ClaimCase(name: "controlCharacterIsRefusedBeforeLength", changes: ["name": .string(String(repeating: "n", count: 2000) + "\n")],
              expected: "bad_claim_value"),
    ClaimCase(name: "nonASCIITextIsAccepted", changes: ["name": "Zoë 李 👍🏽 مرحبا", "locale": "zh-Hant-TW"], expected: "ok"),
    ClaimCase(name: "controlCharactersInUnreadClaimsAreIgnored", changes: ["nonce": "a\u{0}b"], expected: "ok"),
    // A security event token presented as an ID token.
    ClaimCase(name: "payloadWithAnEventsClaimIsNotAnIDToken",
              changes: ["events": ["https://schemas.openid.net/secevent/risc/event-type/sessions-revoked": [:]]], expected: "not_an_id_token"),
    ClaimCase(name: "eventsClaimOfAnyTypeIsNotAnIDToken", changes: ["events": .null], expected: "not_an_id_token"),
]

@Test(arguments: storableClaimCases)
func storableClaimRule(_ c: ClaimCase) {
    let token = Keys.rsa.sign(claims: Fixture.claims(c.changes, removing: c.removed))
    #expect(token.utf8.count <= JWS.maxTokenBytes)
    #expect(Fixture.code(Fixture.verify(token)) == c.expected)
}

@Test(arguments: rejectedClaimCases + acceptedClaimCases)
func claimRule(_ c: ClaimCase) {
    let token = Keys.rsa.sign(claims: Fixture.claims(c.changes, removing: c.removed))
    let policy = Policy(clientIDs: Fixture.policy.clientIDs, hostedDomains: c.hostedDomains, clockSkew: c.clockSkew)
    #expect(Fixture.code(Fixture.verify(token, policy: policy)) == c.expected)
}

@Test func expiredOneSecondPastSkewIsRejectedAndAtSkewAccepted() {
    let token = Keys.rsa.sign(claims: Fixture.claims([:]))
    let exp = n + 3500
    #expect(Fixture.code(Fixture.verify(token, now: exp + 60)) == "ok")
    #expect(Fixture.code(Fixture.verify(token, now: exp + 61)) == "expired")
    #expect(Fixture.code(Fixture.verify(token, policy: Policy(clientIDs: [Fixture.clientID], clockSkew: 300), now: exp + 300)) == "ok")
}

@Test func verifiedTokenCarriesTheClaims() throws {
    let token = Keys.ec.sign(claims: Fixture.claims(["hd": "example.com", "email_verified": "true", "given_name": "Test",
                                                     "family_name": "User", "picture": "https://p.example/x", "locale": "en"]))
    let v = try Fixture.verify(token).get()
    #expect(v.subject == "110169484474386276334")
    #expect(v.audience == Fixture.clientID)
    #expect(v.issuer == "https://accounts.google.com")
    #expect(v.issuedAt == n - 100 && v.expiresAt == n + 3500)
    #expect(v.keyID == Keys.ec.kid)
    #expect(v.email == "user@example.com" && v.emailVerified)
    #expect(v.name == "Test User" && v.givenName == "Test" && v.familyName == "User")
    #expect(v.picture == "https://p.example/x" && v.locale == "en" && v.hostedDomain == "example.com")
    #expect(v.claimsJSON.hasPrefix("{") && v.claimsJSON.contains("\"sub\":\"110169484474386276334\""))
}

@Test func emailVerifiedFalseStringIsFalse() throws {
    let v = try Fixture.verify(Keys.rsa.sign(claims: Fixture.claims(["email_verified": "false"]))).get()
    #expect(!v.emailVerified)
}

struct PayloadCase: Sendable, CustomTestStringConvertible {
    let name: String
    let payload: [UInt8]
    let expected: String
    var testDescription: String { name }
}

@Test(arguments: [
    PayloadCase(name: "payloadThatIsNotJSONIsRejected", payload: Array("foo".utf8), expected: "bad_payload"),
    PayloadCase(name: "payloadThatIsAnArrayIsRejected", payload: Array("[1,2]".utf8), expected: "bad_payload"),
    PayloadCase(name: "emptyPayloadIsRejected", payload: [], expected: "bad_payload"),
    PayloadCase(name: "payloadWithInvalidUTF8IsRejected", payload: Array("{\"sub\":\"".utf8) + [0xFF, 0xFE] + Array("\"}".utf8),
                expected: "bad_payload"),
    PayloadCase(name: "payloadWithDuplicateClaimIsRejected",
                payload: Array(duplicateSubPayload().utf8), expected: "bad_payload"),
    PayloadCase(name: "payloadWithEscapedDuplicateClaimIsRejected",
                payload: Array(duplicateSubPayload(escaped: true).utf8), expected: "bad_payload"),
    PayloadCase(name: "deeplyNestedPayloadIsRejectedWithoutRecursion",
                payload: Array(("{\"x\":" + String(repeating: "[", count: 10_000)).utf8), expected: "bad_payload"),
    PayloadCase(name: "payloadWithTrailingGarbageIsRejected", payload: Array((Fixture.claimsText + "x").utf8), expected: "bad_payload"),
])
func payloadShape(_ c: PayloadCase) {
    let token = Keys.rsa.sign(header: Array("{\"alg\":\"RS256\",\"kid\":\"\(Keys.rsa.kid)\"}".utf8), payload: c.payload)
    let result = Fixture.verify(token)
    #expect(token.utf8.count <= JWS.maxTokenBytes)
    #expect(Fixture.code(result) == c.expected)
}

@Test func nestingWithinTheLimitIsAccepted() {
    let nested = String(repeating: "[", count: 10) + String(repeating: "]", count: 10)
    var text = Fixture.claimsText
    text.removeLast()
    let token = Keys.rsa.sign(payloadJSON: text + ",\"deep\":" + nested + "}")
    #expect(Fixture.code(Fixture.verify(token)) == "ok")
}

func duplicateSubPayload(escaped: Bool = false) -> String {
    var text = Fixture.claimsText
    text.removeLast()
    return text + (escaped ? ",\"s\\u0075b\":\"attacker\"}" : ",\"sub\":\"attacker\"}")
}

extension Fixture {
    static var claimsText: String { ClaimValue.object(claims).jsonString }
}
