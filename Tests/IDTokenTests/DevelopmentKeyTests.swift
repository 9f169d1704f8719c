// DevelopmentKey: generation, PEM round trip, public JWKS, and tokens that the verifier accepts.
import IDToken
import Testing

@Test(arguments: [DevelopmentKey.Kind.rsa2048, .p256])
func developmentKeyRoundTripsThroughPEM(_ kind: DevelopmentKey.Kind) throws {
    let key = kind == .rsa2048 ? Keys.rsa : Keys.ec
    #expect(key.pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
    let loaded = try DevelopmentKey(pem: key.pem)
    #expect(loaded.kind == kind && loaded.kid == key.kid && loaded.publicJWK == key.publicJWK)
    // A token from the reloaded key verifies against the original's JWKS.
    let keys = try KeySet(jwks: Array(key.jwks.utf8))
    #expect(Fixture.code(Fixture.verify(loaded.sign(claims: Fixture.claims), keys: keys)) == "ok")
}

@Test func developmentJWKSHasKidAlgAndUse() throws {
    #expect(Keys.rsa.jwks.contains("\"alg\":\"RS256\"") && Keys.rsa.jwks.contains("\"use\":\"sig\""))
    #expect(Keys.ec.jwks.contains("\"alg\":\"ES256\"") && Keys.ec.jwks.contains("\"crv\":\"P-256\""))
    #expect(try KeySet(jwks: Array(Keys.rsa.jwks.utf8)).keyIDs == [Keys.rsa.kid])
}

@Test func garbagePEMIsRefused() {
    #expect(throws: IDTokenError(.badPrivateKey)) { try DevelopmentKey(pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n") }
}

@Test func developmentKeysAreDistinct() throws {
    #expect(Keys.rsa.kid != Keys.rsa2.kid)
}
