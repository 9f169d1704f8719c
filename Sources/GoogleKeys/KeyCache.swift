// The shared cache of Google's signing keys: fetched once, refreshed ahead of expiry, served stale on errors.
import IDToken
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Where the signing keys come from.
public enum KeySource: Sendable, Hashable {
    /// A local JWKS file, read at the first use and again (cooldown permitting) on an unknown kid. Never HTTP.
    case file(String)
    /// A JWKS URL: `https://`, or `http://` to a loopback host only (tests, a local sidecar).
    case url(String)

    /// Google's JWKS endpoint: the keys of ID tokens and of Cross-Account Protection security event tokens.
    /// The one place this URL is written (configuration defaults and `tokensignin verify` use it).
    public static let googleURL = "https://www.googleapis.com/oauth2/v3/certs"
    public static let google = KeySource.url(googleURL)

    /// A message for the operator when this source can never work (a non-https URL), nil when it may.
    public var configurationProblem: String? {
        switch self {
        case .file(let path): path.isEmpty ? "empty JWKS file path" : nil
        case .url(let url): Self.urlProblem(url)
        }
    }

    /// nil when `url` may be fetched: `https://` to any host, `http://` only to a loopback host (tests, a local
    /// sidecar), never with user information; otherwise why not. libcurl's own URL parser decides, so the check
    /// and the fetch cannot read a URL differently.
    public static func urlProblem(_ url: String) -> String? {
        KeyFetch.urlProblem(url)
    }
}

/// Google's public keys for the whole process: worker threads call `verify` or `currentKeys` and block only
/// when there is nothing usable to serve. See docs/keys.md for the behaviour operators rely on.
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
        let limits = FetchLimits(maxBodyBytes: settings.maxBodyBytes,
                                 connectTimeoutMilliseconds: Self.milliseconds(settings.connectTimeout),
                                 totalTimeoutMilliseconds: Self.milliseconds(settings.totalTimeout))
        switch source {
        case .file(let path):
            self.init(settings: settings, clock: clock, fileSource: true) { () throws(KeyFetchFailure) in
                try KeyFetch.document(path: path, limit: limits.maxBodyBytes)
            }
        case .url(let url):
            self.init(settings: settings, clock: clock, fileSource: false) { () throws(KeyFetchFailure) in
                try KeyFetch.document(url: url, limits: limits)
            }
        }
    }

    /// The cache over any loader (tests inject one); a file source's keys never expire by time.
    init(settings: Settings, clock: @escaping @Sendable () -> Duration, fileSource: Bool,
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
        if let flight { runInBackground(flight) }
    }

    /// The keys to verify with now. Blocks only when none are usable (cold start, or expired and a fetch is due);
    /// throws `.keysUnavailable` when there are none and a fetch failed (retryable, not the token's fault).
    public func currentKeys() throws(IDTokenError) -> KeySet {
        try currentEntry().keys
    }

    /// Verifies `token` with the current keys; on `unknown_kid`, refetches once (cooldown permitting) and retries.
    public func verify(_ token: String, with verifier: Verifier, now: Int64) -> Result<VerifiedToken, IDTokenError> {
        let entry: Entry
        do { entry = try currentEntry() } catch { return .failure(error) }
        let first = verifier.verify(token, keys: entry.keys, now: now)
        guard case .failure(let error) = first, error.code == .unknownKid else { return first }
        switch refetchForUnknownKid(seen: entry.generation) {
        case .keys(let keys): return verifier.verify(token, keys: keys, now: now)
        case .coolingDown: return first
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

    // MARK: - The state machine

    /// One loaded key set. `generation` grows with every successful load.
    private struct Entry: Sendable {
        var keys: KeySet
        var generation: Int
        var fetchedAt: Duration
        var refreshAt: Duration
        var expiresAt: Duration
        var staleUntil: Duration
    }

    private struct State: Sendable {
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
    }

    private enum Step {
        case serve(Entry)
        case serveAndRefresh(Entry, Flight)
        case join(Flight)
        case lead(Flight)
        case fail(IDTokenError)
    }

    private func currentEntry() throws(IDTokenError) -> Entry {
        var tookPart = false  // after one fetch (led or joined), serve what there is or fail: never loop
        while true {
            let now = clock()
            let step: Step = state.withLock { state in
                if let entry = state.entry, now < entry.expiresAt {
                    guard now >= entry.refreshAt, state.flight == nil,
                          state.mayRetry(at: now, interval: settings.failureRetryInterval) else { return .serve(entry) }
                    return .serveAndRefresh(entry, state.beginFlight(at: now))
                }
                let usable = state.entry.flatMap { now < $0.staleUntil ? $0 : nil }
                if !tookPart {
                    // Expired: one request waits for the refetch; others keep the old keys meanwhile if they may.
                    if let flight = state.flight { return usable.map { .serve($0) } ?? .join(flight) }
                    if state.mayRetry(at: now, interval: settings.failureRetryInterval) {
                        return .lead(state.beginFlight(at: now))
                    }
                }
                if let usable { return .serve(usable) }
                return .fail(state.lastError ?? IDTokenError(.keysUnavailable, "no keys loaded"))
            }
            switch step {
            case .serve(let entry): return entry
            case .serveAndRefresh(let entry, let flight):
                runInBackground(flight)
                return entry
            case .join(let flight): flight.wait()
            case .lead(let flight): run(flight)
            case .fail(let error): throw error
            }
            tookPart = true
        }
    }

    private enum UnknownKidOutcome {
        case keys(KeySet)
        case coolingDown
        case failed(IDTokenError)
    }

    /// One refetch for an unknown kid, shared with any fetch in flight, at most once per cooldown.
    private func refetchForUnknownKid(seen generation: Int) -> UnknownKidOutcome {
        let now = clock()
        let step: Step = state.withLock { state in
            if let entry = state.entry, entry.generation != generation { return .serve(entry) }  // newer keys already
            if let flight = state.flight { return .join(flight) }
            if let last = state.lastUnknownKidRefetchAt, now - last < settings.unknownKidCooldown {
                return .fail(IDTokenError(.unknownKid, "refetch cooling down"))
            }
            state.lastUnknownKidRefetchAt = now
            state.unknownKidRefetches += 1
            return .lead(state.beginFlight(at: now))
        }
        switch step {
        case .serve(let entry): return .keys(entry.keys)
        case .fail: return .coolingDown
        case .join(let flight): flight.wait()
        case .lead(let flight): run(flight)
        case .serveAndRefresh: preconditionFailure("not a step of the unknown-kid path")
        }
        return state.withLock { state in
            if let entry = state.entry, entry.generation != generation { return .keys(entry.keys) }
            return .failed(state.lastError ?? IDTokenError(.keysUnavailable, "refetch failed"))
        }
    }

    /// Loads the keys on this thread, publishes the outcome, and wakes the flight's waiters.
    private func run(_ flight: Flight) {
        let outcome: Result<(KeySet, Int64?), KeyFetchFailure>
        do throws(KeyFetchFailure) {
            let document = try load()
            let keys: KeySet
            do { keys = try KeySet(jwks: document.body) } catch { throw .invalidKeySet(error.detail.isEmpty ? error.description : error.detail) }
            guard !keys.keyIDs.isEmpty else { throw .invalidKeySet("no keys") }
            outcome = .success((keys, document.freshFor))
        } catch {
            outcome = .failure(error)
        }
        let now = clock()
        state.withLock { state in
            state.flight = nil
            switch outcome {
            case .success(let (keys, freshFor)):
                let start = flight.startedAt  // max-age counts from the request: stay on the safe side
                let lifetime = state.neverExpires ? Duration.seconds(Int64.max / 4) : lifetime(freshFor)
                let generation = (state.entry?.generation ?? 0) + 1
                let expiresAt = start + lifetime
                state.entry = Entry(keys: keys, generation: generation, fetchedAt: now,
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

    /// Runs `flight` on a new detached thread; inline if no thread can be created.
    private func runInBackground(_ flight: Flight) {
        if !Thread.detach({ [self] in run(flight) }) { run(flight) }
    }

    private static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }
}

/// One fetch in progress; threads that need its outcome block on it until `finish()`.
// SAFETY: `done` is read and written only with `mutex` held; the pthread objects live in stable heap memory
// allocated in init and freed in deinit, which runs when no thread can still reach the flight.
private final class Flight: @unchecked Sendable {
    let startedAt: Duration
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var done = false

    init(startedAt: Duration) {
        self.startedAt = startedAt
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func wait() {
        pthread_mutex_lock(mutex)
        while !done { pthread_cond_wait(condition, mutex) }
        pthread_mutex_unlock(mutex)
    }

    func finish() {
        pthread_mutex_lock(mutex)
        done = true
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }
}

/// A detached POSIX thread for background refreshes (blocking libcurl calls stay off Swift's cooperative pool).
private enum Thread {
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    static func detach(_ run: @escaping @Sendable () -> Void) -> Bool {
        let body = Unmanaged.passRetained(Body(run)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let created = pthread_create(&thread, &attributes, { context in
            guard let context else { return nil }
            Unmanaged<Body>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, body)
        if created != 0 { Unmanaged<Body>.fromOpaque(body).release() }
        return created == 0
    }
}
