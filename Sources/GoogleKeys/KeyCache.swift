// The process-wide cache of Google's signing keys: refreshed in the background, served stale on errors, never waited on long.
import IDToken
import Synchronization
import Threads

/// Google's public keys for the whole process. Worker threads call `verify` (or `currentKeys`); every fetch runs on
/// a background thread. A request never waits for a fetch while usable keys exist (fresh, or stale within the
/// grace), and otherwise waits at most `Settings.maxWait` from the start of the fetch it waits on. See docs/keys.md for the behaviour operators rely on.
public final class KeyCache: Sendable {
    /// The tunables; the defaults suit Google's endpoint (max-age of several hours).
    public struct Settings: Sendable {
        /// Lifetime when the response has no `max-age` (a proxy stripped it, a file server).
        public var defaultLifetime: Duration = .seconds(300)
        /// Bounds on `max-age - Age`, so a `max-age=0` cannot make every request fetch.
        public var minimumLifetime: Duration = .seconds(60)
        public var maximumLifetime: Duration = .seconds(86_400)
        /// A request in the last fraction of the lifetime starts a background refresh and is served at once.
        public var refreshAheadFraction: Double = 0.1
        /// At most one refetch caused by an unknown kid per this interval (a flood of bogus kids costs one fetch).
        public var unknownKidCooldown: Duration = .seconds(60)
        /// After a failed fetch, no automatic retry before this interval.
        public var failureRetryInterval: Duration = .seconds(10)
        /// How long past expiry the last good keys are still served while refreshes fail.
        public var staleGrace: Duration = .seconds(86_400)
        /// The longest a request waits for a fetch (real time, counted from the start of the fetch): only when no
        /// usable keys are loaded, or for the refetch its unknown kid started. Then it is answered
        /// `keys_unavailable` while the fetch goes on; a request arriving when the fetch has already run that long
        /// is answered at once, so a hanging endpoint holds workers for one `maxWait`, not one per request.
        public var maxWait: Duration = .seconds(1)
        public var maxBodyBytes: Int = 1 << 20
        public var connectTimeout: Duration = .seconds(5)
        /// The whole fetch, connect included.
        public var totalTimeout: Duration = .seconds(10)
        public init() {}
    }

    /// A snapshot for health checks and metrics. Times are on the cache's monotonic clock (see `takenAt`).
    public struct Status: Sendable {
        public var takenAt: Duration
        public var keyIDs: [String]
        public var keyCount: Int { keyIDs.count }
        public var lastSuccessAt: Duration?
        public var expiresAt: Duration?
        /// The last instant the current keys may be served while refreshes fail.
        public var staleUntil: Duration?
        public var lastAttemptAt: Duration?
        /// The error of the last fetch when it failed; nil after a success.
        public var lastError: IDTokenError?
        public var fetches: Int
        public var failures: Int
        public var unknownKidRefetches: Int
        public var refreshing: Bool
        /// True when keys are being served past their expiry (refreshes failing).
        public var isStale: Bool { expiresAt.map { takenAt >= $0 } ?? false }
    }

    /// The monotonic clock of the default `init`: time since the first use.
    public static let systemClock: @Sendable () -> Duration = {
        let origin = ContinuousClock.now
        return { ContinuousClock.now - origin }
    }()

    private let load: @Sendable () throws(KeyFetchFailure) -> KeyDocument
    private let settings: Settings
    private let clock: @Sendable () -> Duration
    private let state = Mutex(State())

    public convenience init(source: KeySource = .google, settings: Settings = Settings(),
                            clock: @escaping @Sendable () -> Duration = KeyCache.systemClock) {
        let limits = FetchLimits(settings)
        let fileSource = if case .file = source { true } else { false }
        self.init(settings: settings, clock: clock, fileSource: fileSource) { () throws(KeyFetchFailure) in
            try KeyFetch.document(from: source, limits: limits)
        }
    }

    /// The cache over any loader (tests inject one); a file source's keys never expire by time.
    package init(settings: Settings, clock: @escaping @Sendable () -> Duration, fileSource: Bool,
                 load: @escaping @Sendable () throws(KeyFetchFailure) -> KeyDocument) {
        self.settings = settings
        self.clock = clock
        self.load = load
        state.withLock { $0.neverExpires = fileSource }
    }

    /// Starts loading the keys on a background thread if none are loaded or loading; never blocks.
    public func start() {
        let now = clock()
        let flight: Flight? = state.withLock { state in
            guard state.entry == nil, state.flight == nil else { return nil }
            return state.beginFlight(at: now)
        }
        if let flight { launch(flight) }
    }

    /// Starts a background refresh when the keys are due for one (in the refresh window, expired, stale or not
    /// loaded) and none runs or may run yet; never waits. `/readyz` calls it, so a responder that serves no sign-in
    /// (idle, or out of its load balancer because its keys went stale) still keeps its keys fresh.
    public func refreshIfDue() {
        let now = clock()
        let flight: Flight? = state.withLock { state in
            if let entry = state.entry, now < entry.refreshAt { return nil }
            guard state.flight == nil, state.mayRetry(at: now, interval: settings.failureRetryInterval) else { return nil }
            return state.beginFlight(at: now)
        }
        if let flight { launch(flight) }
    }

    /// The keys to verify with now. Waits (at most `maxWait`) only when none are usable; throws `keys_unavailable`
    /// when there are none (retryable: not the token's fault).
    public func currentKeys() throws(IDTokenError) -> KeySet {
        try usableEntry().get().keys
    }

    /// Verifies an ID token with the current keys (and, for an unknown kid, with a refetched set; see `verify(_:)`).
    public func verify(_ token: String, with verifier: Verifier, now: Int64) -> Result<VerifiedToken, IDTokenError> {
        verify { keys in verifier.verify(token, keys: keys, now: now) }
    }

    /// Verifies a security event token (Cross-Account Protection) with the same keys and the same unknown-kid rule.
    public func verify(_ token: String, with verifier: SecurityEventVerifier, now: Int64) -> Result<AcceptedSecurityEvent, IDTokenError> {
        verify { keys in verifier.verify(token, keys: keys, now: now) }
    }

    /// Runs `check` with the current keys. When it fails with `unknown_kid`, and no fetch is in flight, no unknown-kid
    /// refetch happened within the cooldown and no fetch failed within the retry interval, one background refetch
    /// starts; `check` runs again on its keys if they arrive within `maxWait`. Otherwise the refusal stands at once
    /// (`unknown_kid`), or is `keys_unavailable` when the refetch failed or is still running after `maxWait`.
    public func verify<Verified>(_ check: (KeySet) -> Result<Verified, IDTokenError>) -> Result<Verified, IDTokenError> {
        let entry: Entry
        switch usableEntry() {
        case .success(let e): entry = e
        case .failure(let e): return .failure(e)
        }
        let first = check(entry.keys)
        guard case .failure(let error) = first, error.code == .unknownKid else { return first }
        switch refetchForUnknownKid(seen: entry.generation) {
        case .keys(let keys): return check(keys)
        case .refused: return first
        case .failed(let error): return .failure(error)
        }
    }

    public var status: Status {
        let now = clock()
        return state.withLock { state in
            Status(takenAt: now, keyIDs: state.entry?.keys.keyIDs ?? [], lastSuccessAt: state.entry?.fetchedAt,
                   expiresAt: state.entry?.expiresAt, staleUntil: state.entry?.staleUntil,
                   lastAttemptAt: state.lastAttemptAt, lastError: state.lastError, fetches: state.fetches,
                   failures: state.failures, unknownKidRefetches: state.unknownKidRefetches,
                   refreshing: state.flight != nil)
        }
    }

    /// Waits (real time, at most `timeout`) for the fetch in flight, if any, to publish its outcome; true when none
    /// is left in flight. For tests, which wait on this event instead of sleeping.
    package func awaitFetch(timeout: Duration) -> Bool {
        guard let flight = state.withLock({ $0.flight }) else { return true }
        return flight.wait(timeout: timeout)
    }

    // MARK: - The state machine

    /// One loaded key set, immutable once published: the hot path copies one reference under the lock.
    private final class Entry: Sendable {
        let keys: KeySet
        /// Grows with every successful load.
        let generation: Int
        let fetchedAt: Duration
        let refreshAt: Duration
        let expiresAt: Duration
        let staleUntil: Duration

        init(keys: KeySet, generation: Int, fetchedAt: Duration, refreshAt: Duration, expiresAt: Duration, staleUntil: Duration) {
            self.keys = keys
            self.generation = generation
            self.fetchedAt = fetchedAt
            self.refreshAt = refreshAt
            self.expiresAt = expiresAt
            self.staleUntil = staleUntil
        }
    }

    private struct State {
        var entry: Entry?
        var flight: Flight?
        var neverExpires = false
        var lastAttemptAt: Duration?
        var lastFailureAt: Duration?
        var lastError: IDTokenError?
        var lastUnknownKidRefetchAt: Duration?
        var fetches = 0
        var failures = 0
        var unknownKidRefetches = 0

        mutating func beginFlight(at now: Duration) -> Flight {
            let flight = Flight(startedAt: now)
            self.flight = flight
            lastAttemptAt = now
            fetches += 1
            return flight
        }

        func mayRetry(at now: Duration, interval: Duration) -> Bool {
            lastFailureAt.map { now - $0 >= interval } ?? true
        }

        /// The current keys if they may still be served at `now` (fresh, or stale within the grace).
        func usable(at now: Duration) -> Entry? {
            entry.flatMap { now < $0.staleUntil ? $0 : nil }
        }
    }

    private enum Plan {
        case serve(Entry)
        case serveAndRefresh(Entry, Flight)
        /// No usable keys: wait for this flight (launching it first when it is new).
        case wait(Flight, launch: Bool)
        case fail(IDTokenError)
    }

    private func usableEntry() -> Result<Entry, IDTokenError> {
        let now = clock()
        let plan: Plan = state.withLock { state in
            // The hot path: fresh keys outside the refresh window.
            if let entry = state.entry, now < entry.refreshAt { return .serve(entry) }
            if let entry = state.usable(at: now) {
                // In the refresh window, expired, or stale: refresh in the background, never wait.
                guard state.flight == nil, state.mayRetry(at: now, interval: settings.failureRetryInterval) else { return .serve(entry) }
                return .serveAndRefresh(entry, state.beginFlight(at: now))
            }
            if let flight = state.flight { return .wait(flight, launch: false) }
            if state.mayRetry(at: now, interval: settings.failureRetryInterval) { return .wait(state.beginFlight(at: now), launch: true) }
            return .fail(state.lastError ?? IDTokenError(.keysUnavailable, "no keys loaded"))
        }
        switch plan {
        case .serve(let entry):
            return .success(entry)
        case .serveAndRefresh(let entry, let flight):
            launch(flight)
            return .success(entry)
        case .wait(let flight, let isNew):
            if isNew { launch(flight) }
            let finished = flight.wait(atMostSinceLaunch: settings.maxWait)
            let later = clock()
            return state.withLock { state in
                if let entry = state.usable(at: later) { return .success(entry) }
                if !finished { return .failure(IDTokenError(.keysUnavailable, "no keys yet: the key fetch is still running")) }
                return .failure(state.lastError ?? IDTokenError(.keysUnavailable, "no keys loaded"))
            }
        case .fail(let error):
            return .failure(error)
        }
    }

    private enum UnknownKidOutcome {
        case keys(KeySet)
        case refused
        case failed(IDTokenError)
    }

    /// At most one refetch for an unknown kid per cooldown, never while another fetch is in flight or soon after a
    /// failure; the request that starts it waits for it at most `maxWait`.
    private func refetchForUnknownKid(seen generation: Int) -> UnknownKidOutcome {
        let now = clock()
        let flight: Flight? = state.withLock { state in
            if let entry = state.entry, entry.generation != generation { return nil }  // newer keys already: checked below
            if state.flight != nil { return nil }
            if let last = state.lastUnknownKidRefetchAt, now - last < settings.unknownKidCooldown { return nil }
            guard state.mayRetry(at: now, interval: settings.failureRetryInterval) else { return nil }
            state.lastUnknownKidRefetchAt = now
            state.unknownKidRefetches += 1
            return state.beginFlight(at: now)
        }
        var finished = false
        if let flight {
            launch(flight)
            finished = flight.wait(atMostSinceLaunch: settings.maxWait)
        }
        return state.withLock { state in
            if let entry = state.entry, entry.generation != generation { return .keys(entry.keys) }
            guard flight != nil else { return .refused }
            if !finished { return .failed(IDTokenError(.keysUnavailable, "the key refetch for an unknown kid is still running")) }
            return .failed(state.lastError ?? IDTokenError(.keysUnavailable, "the key refetch failed"))
        }
    }

    /// Runs `flight` on a background thread; when no thread can be started, it fails like a fetch.
    private func launch(_ flight: Flight) {
        if Threads.start(detached: true, { [self] in run(flight) }) == nil { publish(.failure(.noThread), of: flight) }
    }

    /// Loads the keys (on the background thread), publishes the outcome and wakes the flight's waiters.
    private func run(_ flight: Flight) {
        do throws(KeyFetchFailure) {
            publish(.success(try KeyFetch.keySet(from: load())), of: flight)
        } catch {
            publish(.failure(error), of: flight)
        }
    }

    private func publish(_ outcome: Result<(keys: KeySet, freshFor: Int64?), KeyFetchFailure>, of flight: Flight) {
        let now = clock()
        state.withLock { state in
            state.flight = nil
            switch outcome {
            case .success(let (keys, freshFor)):
                let start = flight.startedAt  // max-age counts from the request: stay on the safe side
                let lifetime = state.neverExpires ? Duration.seconds(Int64.max / 4) : lifetime(freshFor)
                let expiresAt = start + lifetime
                state.entry = Entry(keys: keys, generation: (state.entry?.generation ?? 0) + 1, fetchedAt: now,
                                    refreshAt: expiresAt - lifetime * settings.refreshAheadFraction,
                                    expiresAt: expiresAt, staleUntil: expiresAt + settings.staleGrace)
                state.lastFailureAt = nil
                state.lastError = nil
            case .failure(let failure):
                state.lastFailureAt = now
                state.lastError = IDTokenError(.keysUnavailable, failure.description)
                state.failures += 1
            }
        }
        flight.finish()
    }

    private func lifetime(_ freshFor: Int64?) -> Duration {
        let lifetime = freshFor.map { Duration.seconds($0) } ?? settings.defaultLifetime
        return min(max(lifetime, settings.minimumLifetime), settings.maximumLifetime)
    }
}
