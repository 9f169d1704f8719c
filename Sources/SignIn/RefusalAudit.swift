// The sign-in audit's share of a flood: refused sign-ins recorded at a bounded rate, the rest only counted.
import Synchronization

/// Decides which refused sign-ins (bad tokens) get their row in `signin.sign_ins`: per client network (an IPv4
/// address, an IPv6 /64) and reason at most `perKey` a second, and at most `total` a second in all, so a flood of bad
/// tokens cannot grow the table without bound. Shared by every worker; one short lock a refusal, fixed memory.
package final class RefusalAudit: Sendable {
    /// One (network, reason) of a table slot: its hash, the second it counts, and how many it let through then.
    private struct Slot {
        var key = 0
        var second: Int64 = 0
        var admitted = 0
    }

    private struct State {
        var slots: [Slot]
        var second: Int64 = 0
        var admitted = 0
    }

    private let perKey: Int
    private let total: Int
    private let state: Mutex<State>

    /// `slots`: the table's size; two keys that share a slot share its budget (the bound holds, a legitimate client
    /// may lose a row in a flood).
    package init(perKey: Int = 2, total: Int = 100, slots: Int = 4096) {
        self.perKey = perKey
        self.total = total
        state = Mutex(State(slots: Array(repeating: Slot(), count: slots)))
    }

    /// Whether the refusal of `reason` from `network` (nil: no address) at `now` (Unix seconds) is recorded.
    package func admit(network: String?, reason: String, now: Int64) -> Bool {
        var hasher = Hasher()
        hasher.combine(network)
        hasher.combine(reason)
        let key = hasher.finalize()
        return state.withLock { state in
            if state.second != now { (state.second, state.admitted) = (now, 0) }
            guard state.admitted < total else { return false }
            let index = Int(UInt(bitPattern: key) % UInt(state.slots.count))
            var slot = state.slots[index]
            if slot.key != key || slot.second != now { slot = Slot(key: key, second: now, admitted: 0) }
            guard slot.admitted < perKey else { return false }
            slot.admitted += 1
            state.slots[index] = slot
            state.admitted += 1
            return true
        }
    }
}
