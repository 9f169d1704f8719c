// What the routes verify tokens with: the key cache in production, a fixed table in route tests, and what it says
// of its keys.
import GoogleKeys
import IDToken

/// What verifies an ID token for the routes: the key cache in production, a fixed table in route tests.
package protocol TokenVerifying: Sendable {
    func verify(_ token: String, with verifier: Verifier, now: Int64) -> Result<VerifiedToken, IDTokenError>
    /// The same JOSE rules for Google's security event tokens: verified or unparsed once the signature, issuer and
    /// audience are good, refused otherwise.
    func verify(_ token: String, with verifier: SecurityEventVerifier, now: Int64) -> Result<AcceptedSecurityEvent, IDTokenError>
    /// Whether a usable key set is loaded, for `/readyz` and `/metrics`.
    var keyReadiness: KeyReadiness { get }
    /// Starts a background refresh of keys that are due for one, never waiting (`/readyz`: an idle responder's keys
    /// do not go stale for want of a sign-in).
    func refreshIfDue()
}

/// The key set's state as the operators' endpoints report it.
package struct KeyReadiness: Sendable, Equatable {
    /// A key set is loaded (fresh, or stale within grace).
    var loaded: Bool
    /// Served past its expiry because refreshes fail.
    var stale: Bool
    /// Seconds since the keys were fetched; nil when none were.
    var ageSeconds: Double?
    var fetches: Int
    var failures: Int
    /// What the reads of Google's RISC configuration found; nil when it is not read (`TOKENSIGNIN_RISC_CONFIGURATION_URL=off`).
    var riscConfiguration: RiscConfigurationMonitor.Status? = nil
}

extension KeyCache: TokenVerifying {
    package var keyReadiness: KeyReadiness {
        let status = self.status
        let age = status.lastSuccessAt.map { status.takenAt - $0 }
        return KeyReadiness(loaded: status.keyCount > 0, stale: status.isStale,
                            ageSeconds: age.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 },
                            fetches: status.fetches, failures: status.failures)
    }
}

/// The keys of `tokensignin serve`: ID tokens with Google's key cache, security event tokens with the key cache Google's
/// RISC configuration names (the same one unless its `jwks_uri` differs; docs/risc.md).
package struct GoogleKeySets: TokenVerifying {
    package let idTokens: KeyCache
    /// nil: the RISC configuration is not read, and security events use `idTokens`.
    package let risc: RiscConfigurationMonitor?

    package init(idTokens: KeyCache, risc: RiscConfigurationMonitor?) {
        self.idTokens = idTokens
        self.risc = risc
    }

    package func verify(_ token: String, with verifier: Verifier, now: Int64) -> Result<VerifiedToken, IDTokenError> {
        idTokens.verify(token, with: verifier, now: now)
    }

    package func verify(_ token: String, with verifier: SecurityEventVerifier, now: Int64) -> Result<AcceptedSecurityEvent, IDTokenError> {
        risc?.verify(token, with: verifier, now: now) ?? idTokens.verify(token, with: verifier, now: now)
    }

    package var keyReadiness: KeyReadiness {
        var readiness = idTokens.keyReadiness
        readiness.riscConfiguration = risc?.status
        return readiness
    }

    package func refreshIfDue() {
        idTokens.refreshIfDue()
        if let keys = risc?.keys, keys !== idTokens { keys.refreshIfDue() }
    }
}
