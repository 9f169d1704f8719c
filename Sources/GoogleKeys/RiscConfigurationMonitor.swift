// Google's RISC configuration, read at start and daily: a drift of its issuer or jwks_uri from what the receiver
// uses is reported, and POST /risc then verifies with a key cache of its own on the discovered jwks_uri.
import IDToken
import Synchronization
import Threads

/// Reads Google's RISC configuration in the background (`start`: at once, then every `interval`) and compares it with
/// what the receiver uses: Google's issuer, and the ID tokens' key set URL (`TOKENSIGNIN_JWKS_URL`). A `jwks_uri` that
/// differs gets a second `KeyCache`, which security event tokens are then verified with (`keys`); ID tokens keep
/// theirs. A failed read is reported and changes nothing: the last outcome stands. docs/risc.md.
public final class RiscConfigurationMonitor: Sendable {
    /// What the last reads found, for `/readyz`, `/metrics` and tests.
    public struct Status: Sendable, Equatable {
        /// Reads started, and those that failed (transport, status, a document without issuer or jwks_uri).
        public var checks = 0
        public var failures = 0
        /// The last document read; nil before the first that could be read.
        public var discovered: RiscConfiguration?
        /// Why the last read failed; nil after a success.
        public var lastError: String?
        /// The discovered issuer is not one the receiver accepts (`https://accounts.google.com/`, with or without
        /// the slash).
        public var issuerMismatch = false
        /// The discovered `jwks_uri` is not the key set URL the receiver uses.
        public var jwksMismatch = false
        /// The `jwks_uri` whose own key cache security events are verified with; nil: the ID tokens' keys (no
        /// mismatch, or a discovered URI that may not be fetched: not https).
        public var securityEventKeysURL: String?
        /// Either mismatch: an operator should look (docs/risc.md, "Google's RISC configuration").
        public var mismatch: Bool { issuerMismatch || jwksMismatch }

        /// Nothing read yet.
        public init() {}
    }

    /// What one read found: the configuration matches, differs, or could not be read.
    public enum Outcome: Sendable, Equatable {
        case matches
        case mismatch
        case failed(KeyFetchFailure)
    }

    /// The document's URL.
    public let url: String
    /// The key set URL the receiver uses for ID tokens (and, while they match, for security events).
    public let expectedJWKS: String
    private let tokenKeys: KeyCache
    private let keySettings: KeyCache.Settings
    private let interval: Duration
    private let limits = FetchLimits(maxBodyBytes: RiscConfiguration.maxBytes, connectTimeoutMilliseconds: 5_000,
                                     totalTimeoutMilliseconds: 10_000)
    private let report: @Sendable (Outcome, Status) -> Void
    private let state = Mutex(State())
    private let stopped = Monitor(false)

    private struct State {
        var status = Status()
        /// The second key cache, on `status.securityEventKeysURL`.
        var eventKeys: KeyCache?
    }

    /// - Parameters:
    ///   - url: the document (`https://`, or `http://` to a loopback host).
    ///   - expectedJWKS: the key set URL the receiver is configured with (`TOKENSIGNIN_JWKS_URL`).
    ///   - tokenKeys: the ID tokens' key cache, which security events use while the configuration matches.
    ///   - keySettings: the settings of a second key cache, when one is needed.
    ///   - report: called after every read (on the reading thread), with its outcome and the status it left.
    public init(url: String, expectedJWKS: String, tokenKeys: KeyCache, keySettings: KeyCache.Settings = KeyCache.Settings(),
                interval: Duration = .seconds(86_400), report: @escaping @Sendable (Outcome, Status) -> Void = { _, _ in }) {
        self.url = url
        self.expectedJWKS = expectedJWKS
        self.tokenKeys = tokenKeys
        self.keySettings = keySettings
        self.interval = interval
        self.report = report
    }

    /// Reads the configuration on a background thread at once and then every `interval`, until `stop`; never blocks.
    public func start() {
        let started = Threads.start(detached: true) { [self] in
            repeat { check() } while !stopped.wait(until: { $0 }, deadline: monotonicDeadline(after: interval))
        }
        if started == nil { finish(.failed(.noThread)) }
    }

    /// Ends the background reads (the one under way, if any, finishes first).
    public func stop() {
        stopped.update { $0 = true }
    }

    /// Reads the configuration once, on the calling thread, and applies what it says; returns the outcome.
    @discardableResult
    public func check() -> Outcome {
        state.withLock { $0.status.checks += 1 }
        switch RiscConfiguration.fetch(url, limits: limits) {
        case .failure(let failure):
            return finish(.failed(failure))
        case .success(let discovered):
            let issuerMatches = SecurityEventVerifier.issuers.contains(discovered.issuer)
            let jwksMatches = discovered.jwksURI == expectedJWKS
            // A discovered key set URL that may not be fetched (not https) is reported, never used.
            let keysURL = jwksMatches || KeyFetch.urlProblem(discovered.jwksURI) != nil ? nil : discovered.jwksURI
            let created: KeyCache? = state.withLock { state in
                state.status.discovered = discovered
                state.status.lastError = nil
                state.status.issuerMismatch = !issuerMatches
                state.status.jwksMismatch = !jwksMatches
                let previous = state.status.securityEventKeysURL
                state.status.securityEventKeysURL = keysURL
                guard let keysURL else {
                    state.eventKeys = nil
                    return nil
                }
                guard previous != keysURL else { return nil }  // the cache it already has
                let keys = KeyCache(source: .url(keysURL), settings: keySettings)
                state.eventKeys = keys
                return keys
            }
            created?.start()
            return finish(issuerMatches && jwksMatches ? .matches : .mismatch)
        }
    }

    @discardableResult
    private func finish(_ outcome: Outcome) -> Outcome {
        let status: Status = state.withLock { state in
            if case .failed(let failure) = outcome {
                state.status.failures += 1
                state.status.lastError = failure.description
            }
            return state.status
        }
        report(outcome, status)
        return outcome
    }

    public var status: Status { state.withLock { $0.status } }

    /// The key cache security event tokens are verified with now: the discovered `jwks_uri`'s when it differs from
    /// the ID tokens' (and may be fetched), otherwise the ID tokens' own.
    public var keys: KeyCache { state.withLock { $0.eventKeys } ?? tokenKeys }

    /// Verifies a security event token with `keys` (the same unknown-kid refetch as `KeyCache.verify`).
    public func verify(_ token: String, with verifier: SecurityEventVerifier, now: Int64) -> Result<AcceptedSecurityEvent, IDTokenError> {
        keys.verify(token, with: verifier, now: now)
    }
}
