// SigningKey and DevelopmentKey: which private keys load, PEM round trips, and signatures the verifier accepts.
import Foundation
import IDToken
import Signing
import Testing
import TestSupport

/// Keys generated once per test process (RSA generation is slow); nil only if libcrypto cannot generate keys.
enum GeneratedKeys {
    static let rsa = try? DevelopmentKey.generate(.rsa2048)
    static let rsa2 = try? DevelopmentKey.generate(.rsa2048)
    static let ec = try? DevelopmentKey.generate(.p256)

    static func key(_ kind: DevelopmentKey.Kind) throws -> DevelopmentKey {
        try #require(kind == .rsa2048 ? rsa : ec, "key generation failed")
    }
}

/// A PEM made by the `openssl` command (`openssl genpkey ARGS`, then optionally `openssl pkey THEN` on it).
func opensslPEM(_ genpkey: [String], then pkey: [String]? = nil) throws -> String {
    let generated = try runProgram("/usr/bin/openssl", ["genpkey"] + genpkey, environment: [:])
    try #require(generated.status == 0, "openssl genpkey \(genpkey): \(generated.stderrText)")
    guard let pkey else { return generated.stdoutText }
    let converted = try runProgram("/usr/bin/openssl", ["pkey"] + pkey, environment: [:], stdin: generated.stdout)
    try #require(converted.status == 0, "openssl pkey \(pkey): \(converted.stderrText)")
    return converted.stdoutText
}

struct KeyFileCase: Sendable, CustomTestStringConvertible {
    let name: String
    let genpkey: [String]
    var pkey: [String]? = nil
    var expected: SignatureAlgorithm?
    var testDescription: String { name }
}

@Test(arguments: [
    KeyFileCase(name: "rsa2048PKCS8IsAcceptedForRS256", genpkey: ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"], expected: .rs256),
    KeyFileCase(name: "rsa3072PKCS8IsAcceptedForRS256", genpkey: ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:3072"], expected: .rs256),
    KeyFileCase(name: "traditionalRSAPEMIsAccepted", genpkey: ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
                pkey: ["-traditional"], expected: .rs256),
    KeyFileCase(name: "p256PKCS8IsAcceptedForES256", genpkey: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], expected: .es256),
    KeyFileCase(name: "rsa1024IsRefused", genpkey: ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"]),
    KeyFileCase(name: "secp256k1IsRefusedAlthoughItHas256Bits", genpkey: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:secp256k1"]),
    KeyFileCase(name: "brainpool256IsRefused", genpkey: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:brainpoolP256r1"]),
    KeyFileCase(name: "p384IsRefused", genpkey: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"]),
    KeyFileCase(name: "ed25519IsRefused", genpkey: ["-algorithm", "ED25519"]),
    KeyFileCase(name: "rsaPSSKeyIsRefused", genpkey: ["-algorithm", "RSA-PSS", "-pkeyopt", "rsa_keygen_bits:2048"]),
    KeyFileCase(name: "encryptedKeyIsRefusedWithoutAPrompt",
                genpkey: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-aes-256-cbc", "-pass", "pass:secret"]),
    KeyFileCase(name: "publicKeyIsNotAPrivateKey", genpkey: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], pkey: ["-pubout"]),
])
func privateKeyFile(_ c: KeyFileCase) throws {
    let pem = try opensslPEM(c.genpkey, then: c.pkey)
    if let expected = c.expected {
        #expect(try SigningKey(pem: pem).algorithm == expected)
    } else {
        #expect(throws: SigningError(.badPrivateKey)) { try SigningKey(pem: pem) }
    }
}

@Test(arguments: ["", "not a key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"])
func garbagePEMIsRefused(_ text: String) {
    #expect(throws: SigningError(.badPrivateKey)) { try SigningKey(pem: text) }
    #expect(throws: SigningError(.badPrivateKey)) { try DevelopmentKey(pem: text) }
}

@Test func pemOverTheSizeLimitIsRefusedUnread() throws {
    let pem = try GeneratedKeys.key(.p256).pem
    let padded = pem + String(repeating: "\n", count: SigningKey.maxPEMBytes + 1 - pem.utf8.count)
    #expect(throws: SigningError(.badPrivateKey)) { try SigningKey(pem: padded) }
    #expect(try SigningKey(pem: String(padded.dropLast())).algorithm == .es256)
}

@Test(arguments: [DevelopmentKey.Kind.rsa2048, .p256])
func signingKeySignsACompactJWSTheVerifierAccepts(_ kind: DevelopmentKey.Kind) throws {
    let development = try GeneratedKeys.key(kind)
    let key = try SigningKey(pem: development.pem)
    let header = Array(#"{"alg":"\#(key.algorithm.rawValue)","kid":"\#(development.kid)","typ":"JWT"}"#.utf8)
    let payload = Array(#"{"iss":"sa@project.iam.gserviceaccount.com","aud":"https://risc.googleapis.com/google.identity.risc.v1beta.RiscManagementService"}"#.utf8)
    let token = key.sign(header: header, payload: payload)
    let keys = try KeySet(jwks: Array(development.jwks.utf8))
    let verified = try JWS.verify(token, keys: keys).get()
    #expect(verified.payload == payload && verified.keyID == development.kid && verified.algorithm == key.algorithm)
    // The signature is JOSE's: the modulus length for RS256, 64 bytes r‖s for ES256 (not DER).
    let signature = try #require(Base64URL.decode(token.split(separator: ".")[2]))
    #expect(signature.count == (kind == .rsa2048 ? 256 : 64))
    // Another key's signature under the same header is refused.
    let other = try #require(GeneratedKeys.rsa2)
    if kind == .rsa2048 { #expect(Fixture.code(JWS.verify(other.sign(header: header, payload: payload), keys: keys)) == "bad_signature") }
}

@Test func serviceAccountJSONKeyLoads() throws {
    // The shape of a Google service-account key file: the PEM is a JSON string with \n escapes.
    let pem = try GeneratedKeys.key(.rsa2048).pem
    let file = try JSONSerialization.data(withJSONObject: [
        "type": "service_account", "project_id": "p", "private_key_id": "0123abcd", "private_key": pem,
        "client_email": "risc@p.iam.gserviceaccount.com",
    ])
    #expect(String(decoding: file, as: UTF8.self).contains("\\n"))
    let object = try #require(try JSONSerialization.jsonObject(with: file) as? [String: Any])
    let key = try SigningKey(pem: try #require(object["private_key"] as? String))
    #expect(key.algorithm == .rs256)
}

@Test(arguments: [DevelopmentKey.Kind.rsa2048, .p256])
func keyDescriptionsCarryNoKeyMaterial(_ kind: DevelopmentKey.Kind) throws {
    let development = try GeneratedKeys.key(kind)
    let key = try SigningKey(pem: development.pem)
    let body = development.pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    for text in [String(describing: key), String(reflecting: key), String(describing: development), String(reflecting: development)] {
        #expect(!text.contains(body.prefix(24)) && !text.contains("PRIVATE KEY"))
    }
}

// MARK: - DevelopmentKey

@Test(arguments: [DevelopmentKey.Kind.rsa2048, .p256])
func developmentKeyRoundTripsThroughPEM(_ kind: DevelopmentKey.Kind) throws {
    let key = try GeneratedKeys.key(kind)
    #expect(key.pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
    let loaded = try DevelopmentKey(pem: key.pem)
    #expect(loaded.kind == kind && loaded.kid == key.kid && loaded.publicJWK == key.publicJWK)
    // A token from the reloaded key verifies against the original's JWKS.
    let keys = try KeySet(jwks: Array(key.jwks.utf8))
    #expect(Fixture.code(Verifier(policy: Fixture.policy).verify(loaded.sign(claims: Fixture.claims), keys: keys, now: Fixture.now)) == "ok")
}

@Test func developmentJWKSHasKidAlgAndUse() throws {
    let rsa = try GeneratedKeys.key(.rsa2048), ec = try GeneratedKeys.key(.p256)
    #expect(rsa.jwks.contains("\"alg\":\"RS256\"") && rsa.jwks.contains("\"use\":\"sig\""))
    #expect(ec.jwks.contains("\"alg\":\"ES256\"") && ec.jwks.contains("\"crv\":\"P-256\""))
    #expect(try KeySet(jwks: Array(rsa.jwks.utf8)).keyIDs == [rsa.kid])
}

@Test func developmentKeysAreDistinct() throws {
    #expect(try #require(GeneratedKeys.rsa).kid != (try #require(GeneratedKeys.rsa2)).kid)
}

// MARK: - SecureRandom

@Test func secureRandomGivesTheCountAskedForAndDiffersEachTime() {
    #expect(SecureRandom.bytes(0) == [])
    #expect(SecureRandom.bytes(32).count == 32)
    #expect(SecureRandom.bytes(32) != SecureRandom.bytes(32))
}

enum Fixture {
    static let clientID = "client-a.apps.googleusercontent.com"
    static let now: Int64 = 1_700_000_000
    static let policy = Policy(clientIDs: [clientID])
    static var claims: [String: ClaimValue] {
        ["iss": "https://accounts.google.com", "aud": .string(clientID), "sub": "1", "iat": .integer(now - 10), "exp": .integer(now + 3590)]
    }

    static func code<T>(_ result: Result<T, IDTokenError>) -> String {
        switch result {
        case .success: "ok"
        case .failure(let e): e.code.name
        }
    }
}
