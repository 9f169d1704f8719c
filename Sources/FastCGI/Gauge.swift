// A count other threads can wait on: the open connections, for a drain and for tests that wait for a close.
import Glibc

/// An integer with a condition variable: `wait(until:)` blocks until a change makes the predicate true.
/// Updated when a connection opens or closes, never per request.
final class Gauge: @unchecked Sendable {
    // SAFETY: `value` is only touched with `mutex` held; the pthread objects are allocated once, never moved,
    // and freed in deinit when no thread can be waiting on them.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var value = 0

    init() {
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

    var current: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return value
    }

    func add(_ delta: Int) {
        pthread_mutex_lock(mutex)
        value += delta
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    /// Waits until `predicate(value)` holds; false if `timeout` passed first.
    func wait(timeout: Duration, until predicate: (Int) -> Bool) -> Bool {
        let deadline = monotonicNanoseconds() &+ timeout.nanoseconds
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !predicate(value) {
            guard monotonicNanoseconds() < deadline else { return false }
            var until = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
            _ = pthread_cond_timedwait(condition, mutex, &until)
        }
        return true
    }
}
