// Published vectors: Wycheproof (JWS, JWK, raw RS256 and ES256), a real Google ID token, and RFC 7520 example 4.1.
import Foundation
import IDToken
import Signing
import Testing

// MARK: - Wycheproof json_web_signature_test.json

struct JWSVector: Sendable, CustomTestStringConvertible {
    let tcId: Int
    let group: String
    let comment: String
    let jws: String
    let result: String
    let publicJWK: String?
    var testDescription: String { "tcId \(tcId) \(group)/\(comment) (\(result))" }
}

typealias T = TestData

func loadJWSVectors(_ file: String) throws -> [JWSVector] {
    let doc = try T.json(file)
    var out: [JWSVector] = []
    for g in try T.member(doc, "testGroups", as: [[String: Any]].self) {
        // A group's public key is either one JWK or a JWKS ({"keys": [...]}).
        var jwk: String?
        if let pub = g["public"] as? [String: Any] {
            if let keys = pub["keys"] as? [Any] { jwk = try keys.map { try T.jsonText($0) }.joined(separator: ",") }
            else { jwk = try T.jsonText(pub) }
        }
        for t in try T.member(g, "tests", as: [[String: Any]].self) {
            out.append(JWSVector(tcId: try T.member(t, "tcId", as: NSNumber.self).intValue, group: try T.member(g, "comment"), comment: try T.member(t, "comment"),
                                 jws: try T.member(t, "jws"), result: try T.member(t, "result"), publicJWK: jwk))
        }
    }
    return out
}

/// The `alg` a vector's header names, when the header decodes at all.
func headerAlg(_ jws: String) -> String? {
    guard let first = jws.split(separator: ".", omittingEmptySubsequences: false).first,
          let bytes = Base64URL.decode(first),
          let obj = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else { return nil }
    return obj["alg"] as? String
}

/// Loaded once; a missing or malformed file fails `wycheproofJWSVectorsArePresent` with the file's name.
let jwsVectors = Result { try loadJWSVectors("wycheproof/json_web_signature_test.json") }

@Test func wycheproofJWSVectorsArePresent() throws {
    #expect(try jwsVectors.get().count == 401)
}

/// RS256/ES256 vectors: every `valid` verifies and every `invalid` is refused at the JWS layer.
/// Every other algorithm (HS*, PS*, RS384/512, ES512) is refused by policy with `unsupported_algorithm`,
/// even when Wycheproof calls the token valid. (The files contain no `acceptable` JWS cases.)
@Test(arguments: (try? jwsVectors.get()) ?? [])
func wycheproofJWS(_ v: JWSVector) throws {
    // The group's key next to an unrelated RSA key, so the set loads even when the group's key is refused.
    let keys = try KeySet(jwks: Array("{\"keys\":[\(Keys.rsa2.publicJWK)\(v.publicJWK.map { "," + $0 } ?? "")]}".utf8))
    let code = Fixture.code(JWS.verify(v.jws, keys: keys))
    let alg = headerAlg(v.jws)
    let allowed = alg == "RS256" || alg == "ES256"
    #expect(v.result != "acceptable")
    if allowed && v.result == "valid" {
        #expect(code == "ok")
    } else {
        #expect(code != "ok")
    }
    if !allowed && v.result == "valid" {
        // Well-formed tokens of other algorithms: refused for the algorithm. Two Wycheproof "valid" HS256
        // cases insert a character that lenient decoders skip; strict base64url refuses them first.
        #expect(code == "unsupported_algorithm" || (v.group == "base64" && code == "bad_base64"))
    }
}

// MARK: - Wycheproof json_web_key_test.json

let jwkVectors = Result { () throws -> [(String, JWSVector)] in
    let doc = try T.json("wycheproof/json_web_key_test.json")
    var out: [(String, JWSVector)] = []
    for g in try T.member(doc, "testGroups", as: [[String: Any]].self) {
        guard let set = (g["public"] ?? g["private"]) as? [String: Any] else { throw T.VectorError("JWK group without a key") }
        for t in try T.member(g, "tests", as: [[String: Any]].self) {
            out.append((try T.jsonText(set), JWSVector(tcId: try T.member(t, "tcId", as: NSNumber.self).intValue, group: try T.member(g, "comment"),
                                                       comment: try T.member(t, "comment"), jws: try T.member(t, "jws"),
                                                       result: try T.member(t, "result"), publicJWK: nil)))
        }
    }
    return out
}

@Test func wycheproofJWKVectorsArePresent() throws {
    #expect(try jwkVectors.get().count == 26)
}

struct JWKVector: Sendable, CustomTestStringConvertible {
    let jwks: String
    let v: JWSVector
    let expected: String
    var testDescription: String { v.testDescription + " -> \(expected)" }
}

/// Expected outcome per Wycheproof JWK case under our key-set rules (see docs/verification.md):
/// HMAC/AES (`oct`) keys are never loaded, so a set of only such keys is `invalid_key_set`.
let jwkExpectations: [Int: String] = [
    1: "unsupported_algorithm",     // mixed oct + EC set; HS256 token refused by policy
    2: "invalid_key_set", 3: "invalid_key_set",   // HS256 sets: oct keys are not loaded (valid in Wycheproof; refused by policy)
    4: "invalid_key_set",           // duplicate kid among oct keys
    5: "ok",                        // RS256 with a proper key
    6: "invalid_key_set",           // use: enc
    7: "invalid_key_set",           // ROCA-fingerprinted modulus: weak_key, the only key
    8: "invalid_key_set",           // 1024-bit RSA: weak_key, the only key
    9: "invalid_key_set",           // e = 1: weak_key, the only key
    10: "invalid_key_set", 11: "invalid_key_set", 12: "invalid_key_set",
    13: "invalid_key_set", 14: "invalid_key_set", 15: "invalid_key_set",   // HS long keys: valid in Wycheproof; HMAC refused
    16: "invalid_key_set", 17: "invalid_key_set", 18: "invalid_key_set",
    19: "invalid_key_set", 20: "invalid_key_set", // EC key with alg ES521 / ES224
    21: "invalid_key_set",          // use: enc
    22: "invalid_key_set",          // point not on the curve
    23: "invalid_key_set",          // crv P-384 with P-256 coordinates
    24: "invalid_key_set",          // kty RSA with EC members
    25: "invalid_key_set", 26: "invalid_key_set",   // AES keys
]

@Test(arguments: ((try? jwkVectors.get()) ?? []).map { JWKVector(jwks: $0.0, v: $0.1, expected: jwkExpectations[$0.1.tcId] ?? "missing expectation") })
func wycheproofJWK(_ c: JWKVector) {
    let code: String
    do {
        let keys = try KeySet(jwks: Array(c.jwks.utf8))
        code = Fixture.code(JWS.verify(c.v.jws, keys: keys))
    } catch {
        code = error.code.name
    }
    #expect(code == c.expected)
    // Every Wycheproof-valid case we accept is RS256; every invalid one is refused.
    if c.v.result == "invalid" { #expect(code != "ok") }
}

@Test func wycheproofWeakKeysAreRefusedWithTheirReason() throws {
    let doc = try TestData.json("wycheproof/json_web_key_test.json")
    for (comment, expected) in [("keysize_too_small", "weak_key"), ("jws_rsa_roca_key", "weak_key"), ("exponentOne", "weak_key"), ("invalid_point", "unusable_key"),
                                ("wrong_curve", "unusable_key"), ("wrong_kty", "unusable_key"), ("invalid_use", "unusable_key")] {
        let group = try #require(try T.member(doc, "testGroups", as: [[String: Any]].self).first { $0["comment"] as? String == comment })
        let key = try #require(try T.member(try T.member(group, "public", as: [String: Any].self), "keys", as: [Any].self).first)
        // Next to a good key the set loads, and the refused entry's reason is recorded and reported for its kid.
        let keys = try KeySet(jwks: Array("{\"keys\":[\(Keys.rsa.publicJWK),\(try T.jsonText(key))]}".utf8))
        #expect(keys.rejectedKeys.map(\.reason.code.name) == [expected], "\(comment)")
        let jws: String = try T.member(try #require(try T.member(group, "tests", as: [[String: Any]].self).first), "jws")
        let code = Fixture.code(JWS.verify(jws, keys: keys))
        #expect(code == expected || code == "unsupported_algorithm" || code == "algorithm_mismatch", "\(comment): \(code)")
    }
}

// MARK: - Raw signature vectors (RS256 and ES256 primitives)

@Test func wycheproofRSASignature2048SHA256() throws {
    let doc = try TestData.json("wycheproof/rsa_signature_2048_sha256_test.json")
    var checked = 0
    for g in try T.member(doc, "testGroups", as: [[String: Any]].self) {
        let keys = try KeySet(jwks: Array("{\"keys\":[\(try T.jsonText(try T.member(g, "keyJwk", as: Any.self)))]}".utf8))
        let key = try keys.key(for: "none").get()
        for t in try T.member(g, "tests", as: [[String: Any]].self) {
            let sig = hex(try T.member(t, "sig")), msg = hex(try T.member(t, "msg"))
            let ok = sig.count == key.signatureLength
                && sig.withUnsafeBytes { s in msg.withUnsafeBytes { key.verify(signature: s, message: $0) } }
            switch try T.member(t, "result", as: String.self) {
            case "valid": #expect(ok, "tcId \(t["tcId"] ?? "?")")
            // `acceptable` (tcId 8, DigestInfo without the NULL parameter): we refuse it, as OpenSSL does.
            default: #expect(!ok, "tcId \(t["tcId"] ?? "?") \(t["comment"] ?? "")")
            }
            checked += 1
        }
    }
    #expect(checked == 259)
}

@Test func wycheproofECDSAP256SHA256P1363() throws {
    let doc = try TestData.json("wycheproof/ecdsa_secp256r1_sha256_p1363_test.json")
    var checked = 0
    for g in try T.member(doc, "testGroups", as: [[String: Any]].self) {
        // Every group has the uncompressed point (some lack publicKeyJwk): 04 ‖ x ‖ y.
        let point = hex(try T.member(try T.member(g, "publicKey", as: [String: Any].self), "uncompressed"))
        try #require(point.count == 65)
        let jwk: [String: Any] = ["kty": "EC", "crv": "P-256", "kid": "none",
                                  "x": Base64URL.encode(Array(point[1..<33])), "y": Base64URL.encode(Array(point[33..<65]))]
        let keys = try KeySet(jwks: Array("{\"keys\":[\(try T.jsonText(jwk))]}".utf8))
        let key = try keys.key(for: "none").get()
        for t in try T.member(g, "tests", as: [[String: Any]].self) {
            let sig = hex(try T.member(t, "sig")), msg = hex(try T.member(t, "msg"))
            let ok = sig.count == 64 && sig.withUnsafeBytes { s in msg.withUnsafeBytes { key.verify(signature: s, message: $0) } }
            #expect(ok == (try T.member(t, "result", as: String.self) == "valid"), "tcId \(t["tcId"] ?? "?") \(t["comment"] ?? "")")
            checked += 1
        }
    }
    #expect(checked == 262)
}

// MARK: - A real Google ID token

struct GoogleToken {
    let jwt: String
    let iat: Int64
    let exp: Int64
    let keys: KeySet
    static func load() throws -> GoogleToken {
        let doc = try T.json("google/service_account_id_token_2020.json")
        let payload = try T.member(doc, "payload", as: [String: Any].self)
        return GoogleToken(jwt: try T.member(doc, "jwt"), iat: try T.member(payload, "iat", as: NSNumber.self).int64Value,
                           exp: try T.member(payload, "exp", as: NSNumber.self).int64Value,
                           keys: try KeySet(jwks: TestData.bytes("google/federated_keys.json")))
    }
}

/// The real token is a service account's (Google-signed, `aud` a URL, `azp` and `email` the account's address): its
/// signature verifies with Google's keys, and the claim rules then refuse it, as every service account's, at any
/// clock inside its lifetime.
@Test func realGoogleServiceAccountTokenVerifiesAsJWSAndIsRefusedAsAServiceAccount() throws {
    let g = try GoogleToken.load()
    let jws = try JWS.verify(g.jwt, keys: g.keys).get()
    #expect(jws.keyID == "f9d97b4cae90bcd76aeb20026f6b770cac221783")
    let verifier = Verifier(policy: Policy(clientIDs: ["https://example.com/path"]))
    for now in [g.iat, g.iat + 1800, g.exp, g.exp + 60] {
        #expect(Fixture.code(verifier.verify(g.jwt, keys: g.keys, now: now)) == "service_account")
    }
}

@Test func realGoogleTokenIsRefusedOneSecondPastExpiryAndSkew() throws {
    let g = try GoogleToken.load()
    let verifier = Verifier(policy: Policy(clientIDs: ["https://example.com/path"]))
    #expect(Fixture.code(verifier.verify(g.jwt, keys: g.keys, now: g.exp + 61)) == "expired")
}

@Test func realGoogleTokenIsRefusedForAnotherAudience() throws {
    let g = try GoogleToken.load()
    let verifier = Verifier(policy: Policy(clientIDs: [Fixture.clientID]))
    #expect(Fixture.code(verifier.verify(g.jwt, keys: g.keys, now: g.iat + 10)) == "bad_audience")
}

@Test func googleKeySetLoadsBothKeys() throws {
    let keys = try KeySet(jwks: TestData.bytes("google/federated_keys.json"))
    #expect(keys.keyIDs == ["28b741e8de984a47159f19e6d7783e9d4fa810db", "f9d97b4cae90bcd76aeb20026f6b770cac221783"])
    #expect(keys.rejectedKeys.isEmpty)
}

// MARK: - RFC 7520 (JOSE cookbook) 4.1

@Test func joseCookbookRS256ExampleVerifiesAtTheJWSLayer() throws {
    let key = try TestData.bytes("jose-cookbook/3_3.rsa_public_key.json")
    let keys = try KeySet(jwks: Array("{\"keys\":[".utf8) + key + Array("]}".utf8))
    let doc = try TestData.json("jose-cookbook/4_1.rsa_v15_signature.json")
    let compact: String = try T.member(try T.member(doc, "output", as: [String: Any].self), "compact")
    let payload: String = try T.member(try T.member(doc, "input", as: [String: Any].self), "payload")
    let jws = try JWS.verify(compact, keys: keys).get()
    #expect(jws.payload == Array(payload.utf8))
    // Not JSON, so the claim layer refuses it.
    #expect(Fixture.code(Verifier(policy: Fixture.policy).verify(compact, keys: keys, now: Fixture.now)) == "bad_payload")
}
