// ID tokens as the verifier hands them over, for the tests of what comes after verification.
import IDToken

/// A verified token as the verifier would hand it over.
public func verifiedToken(sub: String, email: String? = "ada@example.com", emailVerified: Bool = true, name: String? = "Ada",
                   audience: String = "1234567890-web.apps.googleusercontent.com", issuedAt: Int64 = 1_800_000_000) -> VerifiedToken {
    VerifiedToken(subject: sub, audience: audience, issuer: "https://accounts.google.com", issuedAt: issuedAt,
                  expiresAt: 1_800_003_600, keyID: "kid", email: email, emailVerified: emailVerified, name: name,
                  givenName: nil, familyName: nil, picture: nil, locale: nil, hostedDomain: nil, claimsJSON: "{}")
}
