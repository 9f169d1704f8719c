// One key fetch in progress, which requests may wait on for a bounded time.
import Threads

/// One fetch in progress; threads that need its outcome wait on it, each at most for its own bound.
final class Flight: Sendable {
    let startedAt: Duration
    /// When the flight began on the monotonic clock (real time, whatever the cache's clock says).
    private let launched = monotonicNanoseconds()
    private let done = Monitor(false)

    init(startedAt: Duration) {
        self.startedAt = startedAt
    }

    /// Waits until the fetch has finished or `timeout` (real time) has passed; true when it has finished.
    func wait(timeout: Duration) -> Bool {
        done.wait(until: { $0 }, deadline: monotonicDeadline(after: timeout))
    }

    /// Waits until the fetch has finished or `bound` (real time) has passed since it began; true when it has
    /// finished. A request that joins a fetch already running for longer than `bound` does not wait at all.
    func wait(atMostSinceLaunch bound: Duration) -> Bool {
        done.wait(until: { $0 }, deadline: monotonicDeadline(after: bound, from: launched))
    }

    func finish() {
        done.update { $0 = true }
    }
}
