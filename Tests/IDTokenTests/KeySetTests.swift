// Key-set loading: which JWKS entries are used, which are rejected and why, and what a token naming them gets.
import IDToken
import Signing
import Testing

func jwks(_ entries: String...) -> [UInt8] { Array("{\"keys\":[\(entries.joined(separator: ","))]}".utf8) }

/// A copy of `jwk` (a flat JSON object of strings) with members replaced or added.
func edited(_ jwk: String, _ changes: [String: String]) -> String {
    var text = jwk
    text.removeLast()
    for (k, v) in changes {
        if let r = text.range(of: "\"\(k)\":\"") {
            let end = text[r.upperBound...].firstIndex(of: "\"")!
            text.replaceSubrange(r.lowerBound...end, with: "\"\(k)\":\"\(v)\"")
        } else {
            text += ",\"\(k)\":\"\(v)\""
        }
    }
    return text + "}"
}

struct KeySetFailureCase: Sendable, CustomTestStringConvertible {
    let name: String
    let document: String
    var testDescription: String { name }
}

@Test(arguments: [
    KeySetFailureCase(name: "notJSONIsAnInvalidKeySet", document: "not json"),
    KeySetFailureCase(name: "arrayAtTopIsAnInvalidKeySet", document: "[]"),
    KeySetFailureCase(name: "missingKeysIsAnInvalidKeySet", document: "{}"),
    KeySetFailureCase(name: "keysNotAnArrayIsAnInvalidKeySet", document: "{\"keys\":{}}"),
    KeySetFailureCase(name: "keysWithANonObjectIsAnInvalidKeySet", document: "{\"keys\":[1]}"),
    KeySetFailureCase(name: "emptyKeysIsAnInvalidKeySet", document: "{\"keys\":[]}"),
    KeySetFailureCase(name: "duplicateKeysMemberIsAnInvalidKeySet", document: "{\"keys\":[],\"keys\":[\(Keys.rsa.publicJWK)]}"),
    KeySetFailureCase(name: "onlyUnusableKeysIsAnInvalidKeySet", document: "{\"keys\":[{\"kty\":\"oct\",\"kid\":\"a\",\"k\":\"AAAA\"}]}"),
    KeySetFailureCase(name: "deeplyNestedDocumentIsAnInvalidKeySet",
                      document: "{\"x\":" + String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000) + "}"),
])
func keySetDocumentIsRefused(_ c: KeySetFailureCase) {
    #expect(throws: IDTokenError(.invalidKeySet)) { try KeySet(jwks: Array(c.document.utf8)) }
}

@Test func keySetOverOneMegabyteIsRefused() {
    let big = "{\"keys\":[\(Keys.rsa.publicJWK)],\"pad\":\"" + String(repeating: "x", count: KeySet.maxDocumentBytes) + "\"}"
    #expect(throws: IDTokenError(.invalidKeySet)) { try KeySet(jwks: Array(big.utf8)) }
}

struct EntryCase: Sendable, CustomTestStringConvertible {
    let name: String
    let entry: String
    let kid: String
    let expected: String
    var testDescription: String { name }
}

let rsaJWK = Keys.rsa2.publicJWK
let ecJWK = try! DevelopmentKey.generate(.p256).publicJWK

@Test(arguments: [
    EntryCase(name: "encryptionKeyIsNotUsed", entry: edited(rsaJWK, ["use": "enc", "kid": "k1"]), kid: "k1", expected: "unusable_key"),
    EntryCase(name: "keyOpsWithoutVerifyIsNotUsed", entry: edited(rsaJWK, ["kid": "k1"]).dropLast() + ",\"key_ops\":[\"encrypt\"]}",
              kid: "k1", expected: "unusable_key"),
    EntryCase(name: "unknownKeyTypeIsNotUsed", entry: "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"AAAA\",\"kid\":\"k1\"}",
              kid: "k1", expected: "unusable_key"),
    EntryCase(name: "rsaKeyForAnotherAlgorithmIsNotUsed", entry: edited(rsaJWK, ["alg": "PS256", "kid": "k1"]), kid: "k1",
              expected: "unusable_key"),
    EntryCase(name: "ecKeyForAnotherAlgorithmIsNotUsed", entry: edited(ecJWK, ["alg": "ES384", "kid": "k1"]), kid: "k1",
              expected: "unusable_key"),
    EntryCase(name: "ecKeyOnAnotherCurveIsNotUsed", entry: edited(ecJWK, ["crv": "P-384", "kid": "k1"]), kid: "k1",
              expected: "unusable_key"),
    EntryCase(name: "rsaKeyWithPaddedBase64IsNotUsed", entry: edited(rsaJWK, ["e": "AQAB==", "kid": "k1"]), kid: "k1",
              expected: "unusable_key"),
    EntryCase(name: "rsaKeyWithEvenExponentIsWeak", entry: edited(rsaJWK, ["e": "AQAA", "kid": "k1"]), kid: "k1", expected: "weak_key"),
    EntryCase(name: "rsaKeyWithExponentOneIsWeak", entry: edited(rsaJWK, ["e": "AQ", "kid": "k1"]), kid: "k1", expected: "weak_key"),
    EntryCase(name: "rsaKeyUnder2048BitsIsWeak", entry: edited(rsaJWK, ["n": String(Keys.rsa2.publicJWKMember("n").dropFirst(2)), "kid": "k1"]),
              kid: "k1", expected: "weak_key"),
    EntryCase(name: "kidOfNonStringTypeIsNotUsed", entry: "{\"kty\":\"RSA\",\"kid\":5}", kid: "5", expected: "unknown_kid"),
    EntryCase(name: "duplicateKidDropsBothKeys", entry: edited(Keys.rsa2.publicJWK, ["kid": Keys.rsa.kid]), kid: Keys.rsa.kid,
              expected: "duplicate_kid"),
    EntryCase(name: "keyWithoutAlgOrUseIsUsed", entry: "{\"kty\":\"RSA\",\"kid\":\"k1\",\"n\":\"\(Keys.rsa2.publicJWKMember("n"))\",\"e\":\"AQAB\"}",
              kid: "k1", expected: "bad_signature"),
])
func keySetEntry(_ c: EntryCase) throws {
    // Next to a usable key the document loads; the entry's fate shows in the result of a token naming its kid.
    let keys = try KeySet(jwks: jwks(Keys.rsa.publicJWK, Keys.ec.publicJWK, c.entry))
    let token = Keys.rsa.sign(claims: Fixture.claims, kid: c.kid)
    #expect(Fixture.code(Fixture.verify(token, keys: keys)) == c.expected)
    #expect(keys.contains(kid: c.kid) == (c.expected == "bad_signature"))
}

@Test func keySetListsUsableKidsAndRecordsRejections() throws {
    let keys = try KeySet(jwks: jwks(Keys.rsa.publicJWK, Keys.ec.publicJWK, edited(rsaJWK, ["use": "enc", "kid": "enc-key"])))
    #expect(keys.keyIDs == [Keys.rsa.kid, Keys.ec.kid].sorted())
    #expect(keys.contains(kid: Keys.rsa.kid) && keys.contains(kid: Keys.ec.kid) && !keys.contains(kid: "enc-key"))
    #expect(keys.rejectedKeys.map(\.kid) == ["enc-key"])
    #expect(keys.rejectedKeys.map(\.reason.code) == [.unusableKey])
}

@Test func noFallbackToAnotherKeyForAnUnknownKid() throws {
    let keys = try KeySet(jwks: jwks(Keys.rsa.publicJWK))
    // Correctly signed by the only key, but naming a kid that is not in the set.
    #expect(Fixture.code(Fixture.verify(Keys.rsa.sign(claims: Fixture.claims, kid: "other"), keys: keys)) == "unknown_kid")
}

@Test func errorsCompareByCodeAndDescribeOnlyTheCode() {
    #expect(IDTokenError(.expired, "exp 1") == IDTokenError(.expired, "exp 2"))
    #expect(IDTokenError(.expired) != IDTokenError(.badAudience))
    #expect(IDTokenError(.badSignature, "secret detail").description == "bad_signature")
    #expect(IDTokenError(.keysUnavailable).isRetryable && !IDTokenError(.unknownKid).isRetryable)
}

extension DevelopmentKey {
    /// One string member of the public JWK.
    func publicJWKMember(_ name: String) -> String {
        let r = publicJWK.range(of: "\"\(name)\":\"")!
        return String(publicJWK[r.upperBound...].prefix { $0 != "\"" })
    }
}
