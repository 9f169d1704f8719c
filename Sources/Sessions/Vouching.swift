// The session cache listener's bookkeeping of heartbeats: which moment an arriving heartbeat vouches for.
import Store

/// Matches the heartbeats that arrive with what one listener connection asked and sent (`CacheListener`). A
/// heartbeat's payload is its transaction id, its sender's number for it and when the sending server process
/// started. One's own heartbeat vouches as of the moment it was sent. Any other heartbeat, from a server process of
/// the same role, vouches as of the latest snapshot whose `xmax` is at most its id (no transaction at or above a
/// snapshot's `xmax` had completed when it was taken, so the heartbeat committed after it). Bounded: a few recent
/// snapshots and heartbeats (older ones are past the cache's bound anyway), and the senders looked up.
struct Vouching {
    /// Snapshots and own heartbeats kept: at one every 25 ms, 16 span 400 ms, four times the cache's bound.
    static let kept = 16
    /// Senders whose role is remembered; beyond that the memory starts again (each is looked up once more).
    static let keptSenders = 1_024

    /// A server process: its ID and when it started (microseconds since the epoch). The start tells it from a later
    /// process given the same ID; other roles cannot read it.
    struct Sender: Hashable {
        var pid: Int32
        var started: Int64
    }

    /// This connection's server process.
    let own: Sender
    /// How long a sender's role, once looked up, is taken as known (a process ID may be reused).
    var senderCheckInterval: Duration = .seconds(10)
    /// Snapshots in the order taken (their `xmax` never decreases): the `xmax` and when it was asked for.
    private var snapshots: [(xmax: Int64, at: UInt64)] = []
    /// Own heartbeats: the number and when it was sent.
    private var sent: [(number: UInt64, at: UInt64)] = []
    private var lastNumber: UInt64 = 0
    /// Senders looked up: whether they run as this connection's role, and when that was asked.
    private var senders: [Sender: (sameRole: Bool, at: UInt64)] = [:]
    /// When another process of this role last sent a heartbeat (0: never on this connection).
    private var othersHeardAt: UInt64 = 0

    init(own: Sender) {
        self.own = own
    }

    /// Whether another process of this role has sent a heartbeat within `interval` of `now`: only then can a
    /// snapshot be vouched for by someone else's heartbeat (alone, the listener's own heartbeats need none).
    func hearsOthers(within interval: Duration, now: UInt64) -> Bool {
        othersHeardAt > 0 && now &- othersHeardAt <= interval.nanoseconds
    }

    /// A snapshot whose `xmax` came back for the statement sent at `at` (`bootNanoseconds`).
    mutating func took(snapshot xmax: Int64, at: UInt64) {
        snapshots.append((xmax, at))
        if snapshots.count > Self.kept { snapshots.removeFirst(snapshots.count - Self.kept) }
    }

    /// A heartbeat's payload: the sending transaction's id, the number its sender gave it, and when the sending
    /// server process says it started.
    struct Heartbeat: Equatable {
        var id: Int64
        var number: UInt64
        var started: Int64
    }

    /// The number of the heartbeat of its own about to be sent at `at`.
    mutating func sending(at: UInt64) -> UInt64 {
        lastNumber += 1
        sent.append((lastNumber, at))
        if sent.count > Self.kept { sent.removeFirst(sent.count - Self.kept) }
        return lastNumber
    }

    /// The moment (`bootNanoseconds`) `heartbeat` from server process `pid` (as PostgreSQL says) vouches for the
    /// cache as of, or nil: a sender of another role, or nothing it comes after. `sameRole` asks PostgreSQL about a
    /// sender (the process ID with the start the payload claims) not looked up within `senderCheckInterval`.
    mutating func received(_ heartbeat: Heartbeat, from pid: Int32, now: UInt64,
                           sameRole: (Sender) throws(StoreError) -> Bool) throws(StoreError) -> UInt64? {
        let sender = Sender(pid: pid, started: heartbeat.started)
        var vouched: UInt64?
        if sender == own, let index = sent.lastIndex(where: { $0.number == heartbeat.number }) {
            vouched = sent[index].at
            sent.removeFirst(index + 1)
        }
        guard try isSameRole(sender, now: now, sameRole: sameRole) else { return vouched }
        if sender != own { othersHeardAt = now }
        if let index = snapshots.lastIndex(where: { $0.xmax <= heartbeat.id }) {
            vouched = max(vouched ?? 0, snapshots[index].at)
            snapshots.removeFirst(index + 1)
        }
        return vouched
    }

    private mutating func isSameRole(_ sender: Sender, now: UInt64,
                                     sameRole: (Sender) throws(StoreError) -> Bool) throws(StoreError) -> Bool {
        if sender == own { return true }
        if let known = senders[sender], now &- known.at < senderCheckInterval.nanoseconds { return known.sameRole }
        let answer = try sameRole(sender)
        if senders.count >= Self.keptSenders { senders.removeAll(keepingCapacity: true) }
        senders[sender] = (answer, now)
        return answer
    }
}

extension Vouching.Heartbeat {
    /// `<id> <number> <started>`, all decimal; nil for anything else.
    init?(_ payload: String) {
        let words = payload.split(separator: " ", omittingEmptySubsequences: false)
        guard words.count == 3, let id = Int64(words[0]), let number = UInt64(words[1]), let started = Int64(words[2])
        else { return nil }
        self.init(id: id, number: number, started: started)
    }
}
