// STUB: the pure verifier, a function of (token, key set, policy, clock). The IDToken helper replaces it.

/// What the relying party accepts: its client IDs, hosted domains and clock skew.
public struct Policy: Sendable {
    public var clientIDs: [String]
    public var hostedDomains: [String]
    public var clockSkew: Int64
    public init(clientIDs: [String], hostedDomains: [String] = [], clockSkew: Int64 = 60) {
        self.clientIDs = clientIDs
        self.hostedDomains = hostedDomains
        self.clockSkew = clockSkew
    }
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
}

public struct Verifier: Sendable {
    public let policy: Policy
    public init(policy: Policy) { self.policy = policy }

    /// Verifies `token` against `keys` at `now` (Unix seconds). No I/O.
    public func verify(_ token: String, keys: KeySet, now: Int64) -> Result<VerifiedToken, IDTokenError> {
        .failure(IDTokenError(.unknownKid, "stub"))
    }
}
