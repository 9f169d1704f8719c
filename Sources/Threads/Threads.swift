// The POSIX thread tools the modules share: threads for blocking work (kept off Swift's cooperative pool), a
// monitor (a value behind a mutex, with a condition variable on the monotonic clock) and monotonic time.
import Glibc

/// Nanoseconds on the monotonic clock, for deadlines (never goes back when the wall clock is set).
package func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

/// Nanoseconds since boot, counting the time the host or VM was suspended (CLOCK_BOOTTIME), for ages that must not
/// look younger after a resume than they are: how long ago the session cache was last vouched for. Deadlines that a
/// condition variable waits on stay on `monotonicNanoseconds`.
package func bootNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_BOOTTIME, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

/// `duration` after `start` (monotonic nanoseconds), saturated instead of wrapping.
package func monotonicDeadline(after duration: Duration, from start: UInt64 = monotonicNanoseconds()) -> UInt64 {
    let (sum, overflow) = start.addingReportingOverflow(duration.nanoseconds)
    return overflow ? .max : sum
}

extension Duration {
    /// The duration in whole nanoseconds, saturated to what UInt64 holds (negatives are 0).
    package var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return .max }
        return whole &+ UInt64(attoseconds / 1_000_000_000)
    }
}

package enum Threads {
    private final class Body: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Starts `run` on a new pthread, joinable unless `detached`; nil (with `errno` set) when none could be
    /// created.
    package static func start(detached: Bool = false, _ run: @escaping @Sendable () -> Void) -> pthread_t? {
        let body = Unmanaged.passRetained(Body(run)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        if detached { pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED)) }
        var thread = pthread_t()
        let created = pthread_create(&thread, &attributes, { context in
            guard let context else { return nil }
            Unmanaged<Body>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, body)
        guard created == 0 else {
            Unmanaged<Body>.fromOpaque(body).release()
            errno = created
            return nil
        }
        return thread
    }
}

/// A value other threads can wait on: `update` changes it and wakes the waiters, `wait` blocks until a
/// predicate over it holds or a monotonic deadline passes.
package final class Monitor<Value>: @unchecked Sendable {
    // SAFETY: `value` is only touched with `mutex` held; the pthread objects are allocated once, never moved,
    // and freed in deinit when no thread can be waiting on them.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
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

    package var current: Value {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return value
    }

    /// Changes the value and wakes every waiter.
    package func update<Result>(_ change: (inout Value) -> Result) -> Result {
        pthread_mutex_lock(mutex)
        defer {
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }
        return change(&value)
    }

    /// Waits until `predicate(value)` holds, or until `deadline` (monotonic nanoseconds; nil: no limit) has
    /// passed; then runs `then` on the value, still under the lock, and returns whether the predicate held.
    @discardableResult
    package func wait(until predicate: (Value) -> Bool, deadline: UInt64?, then: (inout Value) -> Void = { _ in }) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !predicate(value) {
            guard let deadline else {
                pthread_cond_wait(condition, mutex)
                continue
            }
            guard monotonicNanoseconds() < deadline else { break }
            var until = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
            _ = pthread_cond_timedwait(condition, mutex, &until)
        }
        let held = predicate(value)
        then(&value)
        return held
    }
}

/// Leadership passed between threads (leader/followers): one thread at a time holds it, the others wait in
/// `take`. The holder may `pass` it (waking one waiter) or only `lend` it (waking nobody: a thread that comes
/// to `take` it meanwhile gets it at once) and `reclaim` it afterwards if nobody did; `rescue` wakes a waiter
/// for a baton lent too long.
package final class Baton: @unchecked Sendable {
    // SAFETY: the fields are only touched with `mutex` held; the pthread objects are allocated once, never
    // moved, and freed in deinit when no thread can be waiting on them.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var held = false
    /// When the holder lent it (monotonic ns), while nobody has taken it since.
    private var lentAt: UInt64?
    private var waiting = 0
    /// Waiters signalled and not yet awake (so one wake-up is not asked for twice).
    private var signalled = 0

    package init() {
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Waits until the baton is free, then holds it.
    package func take() {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while held {
            waiting += 1
            pthread_cond_wait(condition, mutex)
            waiting -= 1
            if signalled > 0 { signalled -= 1 }
        }
        held = true
        lentAt = nil
    }

    /// Frees it and wakes one waiter, if there is one that is not already being woken.
    package func pass() {
        pthread_mutex_lock(mutex)
        held = false
        lentAt = nil
        let wake = claimWakeUp()
        pthread_mutex_unlock(mutex)
        if wake { pthread_cond_signal(condition) }
    }

    /// Frees it without waking anyone.
    package func lend(now: UInt64) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        held = false
        lentAt = now
    }

    /// Holds it again if nobody took it since `lend`; false if somebody did.
    package func reclaim() -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        guard !held else { return false }
        held = true
        lentAt = nil
        return true
    }

    /// Lent and not taken (nor rescued) since.
    package var isLent: Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return !held && lentAt != nil
    }

    /// Wakes a waiter when the baton has been lent since before `cutoff` and nobody has taken it.
    package func rescue(lentBefore cutoff: UInt64) {
        pthread_mutex_lock(mutex)
        var wake = false
        if !held, let lentAt, lentAt < cutoff {
            self.lentAt = nil
            wake = claimWakeUp()
        }
        pthread_mutex_unlock(mutex)
        if wake { pthread_cond_signal(condition) }
    }

    /// Counts a wake-up for one waiter that is not already being woken (with `mutex` held); the caller signals
    /// after unlocking, so the woken thread does not at once block again on the mutex the signaller holds.
    private func claimWakeUp() -> Bool {
        guard waiting > signalled else { return false }
        signalled += 1
        return true
    }
}
