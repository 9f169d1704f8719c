// The session cache listener's bookkeeping of heartbeats: which moment an arriving heartbeat vouches for.
import Store

/// Matches the heartbeats that arrive with what one listener connection asked and sent (`CacheListener`). A
/// heartbeat's payload is its transaction id and its sender's number for it. One's own heartbeat vouches as of the moment it was sent. Any other
/// heartbeat, from a server process of the same role, vouches as of the latest snapshot whose `xmax` (the first
/// transaction id not completed when it was taken) is at most its id: it committed after that snapshot. Bounded:
/// a few recent snapshots and heartbeats (older ones are past the cache's bound anyway), and the senders looked up.
struct Vouching {
    /// Snapshots and own heartbeats kept: at one every 25 ms, 16 span 400 ms, four times the cache's bound.
    static let kept = 16
    /// Senders whose role is remembered; beyond that the memory starts again (each is looked up once more).
    static let keptSenders = 1_024

    /// This connection's server process.
    let ownPID: Int32
    /// How long a sender's role, once looked up, is taken as known (a process ID may be reused).
    var senderCheckInterval: Duration = .seconds(10)
    /// Snapshots in the order taken (their `xmax` never decreases): the `xmax` and when it was asked for.
    private var snapshots: [(xmax: Int64, at: UInt64)] = []
    /// Own heartbeats: the number and when it was sent.
    private var sent: [(number: UInt64, at: UInt64)] = []
    private var lastNumber: UInt64 = 0
    /// Senders looked up: whether they run as this connection's role, and when that was asked.
    private var senders: [Int32: (sameRole: Bool, at: UInt64)] = [:]
    /// When another process of this role last sent a heartbeat (0: never on this connection).
    private var othersHeardAt: UInt64 = 0

    init(ownPID: Int32) {
        self.ownPID = ownPID
    }

    /// Whether another process of this role has sent a heartbeat within `interval` of `now`: only then can a
    /// snapshot be vouched for by someone else's heartbeat (alone, the listener's own heartbeats need none).
    func hearsOthers(within interval: Duration, now: UInt64) -> Bool {
        othersHeardAt > 0 && now &- othersHeardAt <= interval.nanoseconds
    }

    /// A snapshot whose `xmax` came back for the statement sent at `at` (monotonic nanoseconds).
    mutating func took(snapshot xmax: Int64, at: UInt64) {
        snapshots.append((xmax, at))
        if snapshots.count > Self.kept { snapshots.removeFirst(snapshots.count - Self.kept) }
    }

    /// A heartbeat's payload: the sending transaction's id, and the number its sender gave it.
    struct Heartbeat: Equatable {
        var id: Int64
        var number: UInt64

        /// `<id> <number>`, both decimal; nil for anything else.
        init?(_ payload: String) {
            let words = payload.split(separator: " ", omittingEmptySubsequences: false)
            guard words.count == 2, let id = Int64(words[0]), let number = UInt64(words[1]) else { return nil }
            self.id = id
            self.number = number
        }

        init(id: Int64, number: UInt64) {
            self.id = id
            self.number = number
        }
    }

    /// The number of the heartbeat of its own about to be sent at `at`.
    mutating func sending(at: UInt64) -> UInt64 {
        lastNumber += 1
        sent.append((lastNumber, at))
        if sent.count > Self.kept { sent.removeFirst(sent.count - Self.kept) }
        return lastNumber
    }

    /// The moment (monotonic nanoseconds) `heartbeat` from server process `pid` vouches for the cache as of, or
    /// nil: a sender of another role, or nothing it comes after. `sameRole` asks PostgreSQL about a sender not
    /// looked up within `senderCheckInterval`.
    mutating func received(_ heartbeat: Heartbeat, from pid: Int32, now: UInt64,
                           sameRole: (Int32) throws(StoreError) -> Bool) throws(StoreError) -> UInt64? {
        var vouched: UInt64?
        if pid == ownPID, let index = sent.lastIndex(where: { $0.number == heartbeat.number }) {
            vouched = sent[index].at
            sent.removeFirst(index + 1)
        }
        guard try isSameRole(pid, now: now, sameRole: sameRole) else { return vouched }
        if pid != ownPID { othersHeardAt = now }
        if let index = snapshots.lastIndex(where: { $0.xmax <= heartbeat.id }) {
            vouched = max(vouched ?? 0, snapshots[index].at)
            snapshots.removeFirst(index + 1)
        }
        return vouched
    }

    private mutating func isSameRole(_ pid: Int32, now: UInt64,
                                     sameRole: (Int32) throws(StoreError) -> Bool) throws(StoreError) -> Bool {
        if pid == ownPID { return true }
        if let known = senders[pid], now &- known.at < senderCheckInterval.nanoseconds { return known.sameRole }
        let answer = try sameRole(pid)
        if senders.count >= Self.keptSenders { senders.removeAll(keepingCapacity: true) }
        senders[pid] = (answer, now)
        return answer
    }
}
