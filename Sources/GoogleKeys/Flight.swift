// One key fetch in progress, which requests may wait on for a bounded time, and the thread it runs on.
#if canImport(Glibc)
import Glibc
#endif

/// One fetch in progress; threads that need its outcome wait on it, each at most for its own bound.
// SAFETY: `done` is read and written only with `mutex` held; the pthread objects live in stable heap memory
// allocated in init and freed in deinit, which runs when no thread can still reach the flight.
final class Flight: @unchecked Sendable {
    let startedAt: Duration
    /// When the flight began on the monotonic clock (real time, whatever the cache's clock says).
    private let launched: timespec
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var done = false

    init(startedAt: Duration) {
        self.startedAt = startedAt
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        launched = now
        pthread_mutex_init(mutex, nil)
        // Timed waits on the monotonic clock: a wall-clock step must not shorten or stretch them.
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Waits until the fetch has finished or `timeout` (real time) has passed; true when it has finished.
    func wait(timeout: Duration) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return wait(until: Self.adding(timeout, to: now))
    }

    /// Waits until the fetch has finished or `bound` (real time) has passed since it began; true when it has
    /// finished. A request that joins a fetch already running for longer than `bound` does not wait at all.
    func wait(atMostSinceLaunch bound: Duration) -> Bool {
        wait(until: Self.adding(bound, to: launched))
    }

    private func wait(until deadline: timespec) -> Bool {
        var deadline = deadline
        pthread_mutex_lock(mutex)
        while !done {
            if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { break }
        }
        let finished = done
        pthread_mutex_unlock(mutex)
        return finished
    }

    /// `instant + duration`, the duration bounded to a day so the result cannot overflow.
    private static func adding(_ duration: Duration, to instant: timespec) -> timespec {
        var result = instant
        let bounded = min(max(duration, .zero), .seconds(86_400))
        let (seconds, attoseconds) = bounded.components
        let nanoseconds = Int(instant.tv_nsec) + Int(attoseconds / 1_000_000_000)
        result.tv_sec += Int(seconds) + nanoseconds / 1_000_000_000
        result.tv_nsec = nanoseconds % 1_000_000_000
        return result
    }

    func finish() {
        pthread_mutex_lock(mutex)
        done = true
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }
}

/// A detached POSIX thread for key fetches (blocking libcurl calls stay off Swift's cooperative pool and off the
/// workers). FastCGI has a launcher of its own; the two are to be unified.
enum BackgroundThread {
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Starts `run` on a new detached thread; false when no thread could be created.
    static func start(_ run: @escaping @Sendable () -> Void) -> Bool {
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
