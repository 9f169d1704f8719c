// A process-wide "at most once per interval" gate for log lines that every worker would repeat.
import Synchronization

package final class RateLimit: Sendable {
    private let interval: Duration
    private let state = Mutex<(last: ContinuousClock.Instant?, suppressed: Int)>((nil, 0))

    package init(interval: Duration) { self.interval = interval }

    /// Nil when a line was let through less than `interval` ago (this one is counted as suppressed);
    /// otherwise how many were suppressed since the last one let through.
    package func admit(now: ContinuousClock.Instant = .now) -> Int? {
        state.withLock { state in
            if let last = state.last, now - last < interval {
                state.suppressed += 1
                return nil
            }
            defer { state = (now, 0) }
            return state.suppressed
        }
    }
}
