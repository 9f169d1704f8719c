// A Google service-account key file and the self-signed JWT made with it (RS256, kid, iss = sub, aud, iat, exp).
import Foundation
@testable import IDToken
import Signing
import Testing

@Suite struct ServiceAccountTests {
    /// A key file as Google hands it out, for a fresh RSA key; `privateKeyID` is the key's JWK thumbprint so the
    /// development JWKS can verify what it signs.
    static func keyFile(_ key: DevelopmentKey, changes: [String: Any?] = [:]) throws -> [UInt8] {
        var object: [String: Any] = [
            "type": "service_account", "project_id": "tokensignin-test", "private_key_id": key.kid,
            "private_key": key.pem, "client_email": "risc@tokensignin-test.iam.gserviceaccount.com",
            "client_id": "1234567890", "token_uri": "https://oauth2.googleapis.com/token",
        ]
        for (name, value) in changes { object[name] = value }
        return [UInt8](try JSONSerialization.data(withJSONObject: object))
    }

    @Test func theAssertionIsSignedByTheAccountsKeyWithTheClaimsGoogleWants() throws {
        let key = try DevelopmentKey.generate(.rsa2048)
        let account = try ServiceAccount(json: try Self.keyFile(key))
        #expect(account.clientEmail == "risc@tokensignin-test.iam.gserviceaccount.com" && account.privateKeyID == key.kid)
        let jwt = account.assertion(audience: "https://risc.googleapis.com/google.identity.risc.v1beta.RiscManagementService",
                                    now: 1_800_000_000)
        let verified = try JWS.verify(jwt, keys: KeySet(jwks: Array(key.jwks.utf8))).get()
        #expect(verified.keyID == key.kid && verified.algorithm == .rs256)
        let header = try #require(JSONSerialization.jsonObject(with: Data(Base64URL.decode(jwt.split(separator: ".")[0])!)) as? [String: Any])
        #expect(header["typ"] as? String == "JWT" && header["kid"] as? String == key.kid && header["alg"] as? String == "RS256")
        let claims = try #require(JSONSerialization.jsonObject(with: Data(verified.payload)) as? [String: Any])
        #expect(claims["iss"] as? String == account.clientEmail && claims["sub"] as? String == account.clientEmail)
        #expect(claims["aud"] as? String == "https://risc.googleapis.com/google.identity.risc.v1beta.RiscManagementService")
        #expect(claims["iat"] as? Int == 1_800_000_000 && claims["exp"] as? Int == 1_800_003_600)
        // Never longer than an hour, whatever is asked.
        let long = account.assertion(audience: "a", now: 0, lifetime: 86_400)
        let longClaims = try JSONSerialization.jsonObject(with: Data(Base64URL.decode(long.split(separator: ".")[1])!)) as? [String: Any]
        #expect(longClaims?["exp"] as? Int == 3600)
    }

    /// The changes to the file, by index (Any is not Sendable, so the table holds what the refusal names).
    static var changes: [[String: Any?]] { [
        ["type": "authorized_user"], ["client_email": nil], ["client_email": ""], ["private_key_id": nil],
        ["private_key_id": "a\"b"], ["private_key": nil], ["private_key": 42],
    ] }

    @Test(arguments: zip(0..<7, ["type", "client_email", "client_email", "private_key_id", "private_key_id", "private_key", "JSON"]))
    func aFileThatIsNotAServiceAccountKeyIsRefusedNamingWhy(index: Int, named: String) throws {
        let key = try DevelopmentKey.generate(.rsa2048)
        let file = try Self.keyFile(key, changes: Self.changes[index])
        do throws(SigningError) {
            _ = try ServiceAccount(json: file)
            Issue.record("accepted")
        } catch {
            #expect(error.code == .badServiceAccount && error.detail.contains(named), "\(error.detail)")
            #expect(!error.detail.contains("PRIVATE KEY"))
        }
    }

    @Test func onlyAnRSAKeyAndOnlyJSONWillDo() throws {
        let ec = try DevelopmentKey.generate(.p256)
        #expect(throws: SigningError(.badServiceAccount)) { try ServiceAccount(json: try Self.keyFile(ec)) }
        #expect(throws: SigningError(.badServiceAccount)) { try ServiceAccount(json: Array("not json".utf8)) }
        let rsa = try DevelopmentKey.generate(.rsa2048)
        #expect(throws: SigningError(.badPrivateKey)) {
            try ServiceAccount(json: try Self.keyFile(rsa, changes: ["private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"]))
        }
    }
}
