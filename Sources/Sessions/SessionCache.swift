// The sessions a responder has validated, kept in memory and kept true by PostgreSQL's own notifications.
import Synchronization
import Threads

/// What a session check needs, by the presented token's hash, bounded (least recently used out), shared by the
/// workers of one responder. An entry is served only while the cache is **usable**: a heartbeat through PostgreSQL
/// has vouched for it (`CacheListener`) as of a moment within `bound`. Notifications are delivered in commit order,
/// so every revocation committed before that moment has been applied: a revocation committed at t is refused from
/// t + `bound` on, by every responder. Expiry and the idle timeout are judged on every hit; a
/// session that looks idle here is asked of PostgreSQL (another responder may have seen it since).
package final class SessionCache: Sendable {
    /// How a lookup went.
    package enum Lookup: Sendable, Equatable {
        /// Live, answered from memory.
        case hit(LiveSession)
        /// Ask PostgreSQL, then `insert` what it says with this generation.
        case miss(generation: UInt64)
        /// The cache cannot be trusted now (its listener is down or late): ask PostgreSQL, keep nothing.
        case unusable
    }

    private struct Entry {
        var hash: SessionToken.Hash
        var session: LiveSession
        /// Unix seconds: when PostgreSQL's `last_seen_at` was last written, as far as this responder knows.
        var recordedSeen: Int64
        /// Unix seconds: the last use this responder knows of (the idle timeout counts from here).
        var lastUse: Int64
        var newer = -1, older = -1
    }

    /// One lock's share of the entries: a table by hash, and a list from most to least recently used.
    private struct Shard {
        var slots: [Entry?] = []
        var free: [Int] = []
        var byHash: [SessionToken.Hash: Int] = [:]
        var newest = -1, oldest = -1

        mutating func unlink(_ index: Int) {
            let entry = slots[index]!
            if entry.newer >= 0 { slots[entry.newer]!.older = entry.older } else { newest = entry.older }
            if entry.older >= 0 { slots[entry.older]!.newer = entry.newer } else { oldest = entry.newer }
        }

        mutating func pushNewest(_ index: Int) {
            slots[index]!.newer = -1
            slots[index]!.older = newest
            if newest >= 0 { slots[newest]!.newer = index }
            newest = index
            if oldest < 0 { oldest = index }
        }

        mutating func remove(_ index: Int) {
            unlink(index)
            byHash[slots[index]!.hash] = nil
            slots[index] = nil
            free.append(index)
        }

        mutating func removeAll() {
            self = Shard()
        }
    }

    private static let shardCount = 16
    /// The idle timeout's reference: the database writes `last_seen_at` at most once a minute per session.
    package static let seenRefresh: Int64 = 60

    /// One lock's entries (a class: a Mutex cannot be copied into an array).
    private final class Locked: Sendable {
        let shard = Mutex(Shard())
        func withLock<R>(_ body: (inout Shard) -> R) -> R { shard.withLock { body(&$0) } }
    }

    private let shards: [Locked]
    private let perShard: Int
    private let idleTimeout: Int64
    /// How long ago the moment a heartbeat last vouched for the cache as of may be for the cache to be served from.
    package let bound: Duration
    /// Bumped by every eviction and flush: an insert of a lookup that began before one is dropped.
    private let generation = Atomic<UInt64>(0)
    /// The moment (`bootNanoseconds`) a heartbeat last vouched for the cache as of; 0: none since the cache was
    /// last disabled.
    private let confirmedAt = Atomic<UInt64>(0)
    /// Sessions whose `last_seen_at` is due to be written (the listener writes them in one statement).
    private let due = Mutex<Set<Int64>>([])
    private let counters = Counters()

    /// `capacity`: the most entries held; `idleTimeout`: the service's, in seconds.
    package init(capacity: Int, idleTimeout: Int64, bound: Duration = .milliseconds(100)) {
        perShard = max(1, (capacity + Self.shardCount - 1) / Self.shardCount)
        shards = (0..<Self.shardCount).map { _ in Locked() }
        self.idleTimeout = idleTimeout
        self.bound = bound
    }

    private func shard(_ hash: SessionToken.Hash) -> Locked {
        shards[Int(hash.bytes[0]) % Self.shardCount]
    }

    // MARK: workers

    /// Whether a heartbeat has vouched for the cache as of a moment within `bound`.
    package var isUsable: Bool { vouchedFor(within: bound, now: bootNanoseconds()) }

    /// The live session of `hash` at `now` (Unix seconds), from memory when the cache is usable and holds it live.
    package func lookup(_ hash: SessionToken.Hash, now: Int64) -> Lookup {
        guard isUsable else {
            counters.unusable.add(1, ordering: .relaxed)
            return .unusable
        }
        let before = generation.load(ordering: .acquiring)
        let found: LiveSession? = shard(hash).withLock { shard in
            guard let index = shard.byHash[hash], var entry = shard.slots[index] else { return nil }
            guard now < entry.session.expiresAt.unixSeconds, now - max(entry.lastUse, entry.recordedSeen) < idleTimeout else {
                shard.remove(index)  // dead here; PostgreSQL may know of a later use
                return nil
            }
            entry.lastUse = max(entry.lastUse, now)
            if now - entry.recordedSeen >= Self.seenRefresh {
                entry.recordedSeen = now
                due.withLock { _ = $0.insert(entry.session.sessionID) }
            }
            shard.slots[index] = entry
            shard.unlink(index)
            shard.pushNewest(index)
            return entry.session
        }
        if let found {
            counters.hits.add(1, ordering: .relaxed)
            return .hit(found)
        }
        counters.misses.add(1, ordering: .relaxed)
        return .miss(generation: before)
    }

    /// Keeps what PostgreSQL answered for `hash` at `now`, unless an eviction came since the lookup that gave
    /// `generation` (the answer may predate it). `lastSeen`: the session's `last_seen_at` as the check read it.
    package func insert(_ hash: SessionToken.Hash, _ session: LiveSession, lastSeen: Int64, now: Int64, generation expected: UInt64) {
        shard(hash).withLock { shard in
            guard generation.load(ordering: .acquiring) == expected else { return }
            let entry = Entry(hash: hash, session: session, recordedSeen: lastSeen, lastUse: now)
            if let index = shard.byHash[hash] {
                shard.unlink(index)
                shard.slots[index] = entry
                shard.pushNewest(index)
                return
            }
            if shard.byHash.count >= perShard, shard.oldest >= 0 { shard.remove(shard.oldest) }
            let index: Int
            if let reused = shard.free.popLast() {
                index = reused
                shard.slots[index] = entry
            } else {
                index = shard.slots.count
                shard.slots.append(entry)
            }
            shard.byHash[hash] = index
            shard.pushNewest(index)
        }
    }

    // MARK: evictions

    /// Forgets the session presented as `hash` (its own revocation, by the responder that made it).
    package func evict(hash: SessionToken.Hash) {
        generation.add(1, ordering: .sequentiallyConsistent)
        shard(hash).withLock { shard in if let index = shard.byHash[hash] { shard.remove(index) } }
    }

    /// Forgets every entry of these sessions or users (a notification, or this responder's own change).
    package func evict(sessions: Set<Int64> = [], users: Set<Int64> = []) {
        guard !sessions.isEmpty || !users.isEmpty else { return }
        generation.add(1, ordering: .sequentiallyConsistent)
        var evicted = 0
        for shard in shards {
            shard.withLock { shard in
                // A shard is small (capacity / 16): one pass beats keeping two more indexes up to date on every insert.
                var index = shard.newest
                while index >= 0 {
                    let entry = shard.slots[index]!
                    let next = entry.older
                    if sessions.contains(entry.session.sessionID) || users.contains(entry.session.userID) {
                        shard.remove(index)
                        evicted += 1
                    }
                    index = next
                }
            }
        }
        counters.evictions.add(evicted, ordering: .relaxed)
    }

    /// Forgets everything (a notification it cannot read, the listener reconnecting).
    package func flush() {
        generation.add(1, ordering: .sequentiallyConsistent)
        for shard in shards { shard.withLock { $0.removeAll() } }
    }

    // MARK: the listener

    /// A heartbeat vouched for the cache as of `sentAt` (`bootNanoseconds`): everything committed before then
    /// is applied.
    package func confirm(sentAt: UInt64) {
        confirmedAt.store(max(confirmedAt.load(ordering: .relaxed), sentAt), ordering: .releasing)
    }

    /// Whether a heartbeat has vouched for the cache as of `now` minus `age` or later (`bootNanoseconds`).
    package func vouchedFor(within age: Duration, now: UInt64) -> Bool {
        let confirmed = confirmedAt.load(ordering: .acquiring)
        return confirmed > 0 && now &- confirmed <= age.nanoseconds
    }

    /// The listener sent a heartbeat of its own (none had vouched for the cache lately).
    package func countHeartbeat() {
        counters.heartbeats.add(1, ordering: .relaxed)
    }

    /// The listener lost PostgreSQL: nothing is served from memory until a heartbeat vouches for it on a new connection.
    package func disable() {
        confirmedAt.store(0, ordering: .releasing)
        flush()
    }

    /// The sessions whose `last_seen_at` is due, taken (the listener writes them).
    package func takeDueSeen() -> [Int64] {
        due.withLock { due in
            defer { due.removeAll(keepingCapacity: true) }
            return Array(due)
        }
    }

    // MARK: figures

    /// Lookups by outcome, evictions and entries, for `/metrics`.
    package struct Figures: Sendable, Equatable {
        package var hits, misses, unusable, evictions, entries: Int
        /// Heartbeats this responder sent (others' heartbeats vouch for its cache too).
        package var heartbeats: Int
        package var usable: Bool
        /// Seconds since the moment a heartbeat last vouched for the cache as of; nil when none has since it was disabled.
        package var heartbeatAge: Double?
    }

    package var figures: Figures {
        Figures(hits: counters.hits.load(ordering: .relaxed), misses: counters.misses.load(ordering: .relaxed),
                unusable: counters.unusable.load(ordering: .relaxed), evictions: counters.evictions.load(ordering: .relaxed),
                entries: shards.reduce(0) { total, shard in total + shard.withLock { $0.byHash.count } },
                heartbeats: counters.heartbeats.load(ordering: .relaxed), usable: isUsable, heartbeatAge: heartbeatAge)
    }

    /// Seconds since the moment a heartbeat last vouched for the cache as of; nil when none has since it was disabled.
    package var heartbeatAge: Double? {
        let confirmed = confirmedAt.load(ordering: .acquiring)
        return confirmed == 0 ? nil : Double(bootNanoseconds() &- confirmed) / 1e9
    }

    private final class Counters: Sendable {
        let hits = Atomic<Int>(0), misses = Atomic<Int>(0), unusable = Atomic<Int>(0), evictions = Atomic<Int>(0),
            heartbeats = Atomic<Int>(0)
    }
}
