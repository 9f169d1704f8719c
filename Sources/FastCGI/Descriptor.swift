// An owned file descriptor: one owner closes it, and closing it twice does not compile.
import Glibc

/// A descriptor this module opened (an accepted connection, the epoll set, the wake-up eventfd).
///
/// Moving it hands over the duty to close it; `close()` consumes it, and the deinit closes one that was
/// dropped, so there is no "caller owns it" convention to get wrong and no second close of a number the
/// kernel may already have given to someone else.
struct Descriptor: ~Copyable {
    let raw: Int32

    init(_ raw: Int32) { self.raw = raw }

    consuming func close() {
        Glibc.close(raw)
        discard self
    }

    deinit { Glibc.close(raw) }
}

/// Monotonic nanoseconds, for deadlines (never goes back when the wall clock is set).
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

extension Duration {
    /// The duration in whole nanoseconds, saturated to what UInt64 holds (negatives are 0).
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return .max }
        return whole &+ UInt64(attoseconds / 1_000_000_000)
    }
}
