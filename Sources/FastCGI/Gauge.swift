// A count other threads can wait on: the open connections, for a drain and for tests that wait for a close.
import Threads

/// Updated when a connection opens or closes, never per request.
typealias Gauge = Monitor<Int>

extension Monitor<Int> {
    convenience init() { self.init(0) }

    func add(_ delta: Int) { update { $0 += delta } }

    /// Waits until `predicate(value)` holds; false if `timeout` passed first.
    func wait(timeout: Duration, until predicate: (Int) -> Bool) -> Bool {
        wait(until: predicate, deadline: monotonicDeadline(after: timeout))
    }
}
