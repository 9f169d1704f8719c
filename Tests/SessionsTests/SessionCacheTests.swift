// The session cache on its own: served only while a heartbeat came back within its bound, expiry and the idle
// timeout judged on every hit, least recently used out, evictions and the answers that predate them.
import Foundation
@testable import Sessions
import Testing
import Threads

@Suite struct SessionCacheTests {
    static let now: Int64 = 1_800_000_000

    static func hash(_ n: UInt8) -> SessionToken.Hash { SessionToken.Hash(bytes: [n] + Array(repeating: 7, count: 31)) }

    static func session(_ id: Int64, user: Int64 = 1, expires: Int64 = now + 3_600) -> LiveSession {
        LiveSession(sessionID: id, userID: user, sub: "sub-\(user)", email: nil, emailVerified: false,
                    expiresAt: Timestamp(unixSeconds: expires), lastSeenAt: Timestamp(unixSeconds: now))
    }

    /// A usable cache (a heartbeat just came back) holding session `id` for `hash`.
    static func usable(capacity: Int = 100, idle: Int64 = 600) -> SessionCache {
        let cache = SessionCache(capacity: capacity, idleTimeout: idle)
        cache.confirm(sentAt: bootNanoseconds())
        return cache
    }

    static func fill(_ cache: SessionCache, _ n: UInt8, _ session: LiveSession, now: Int64 = now) {
        guard case .miss(let generation) = cache.lookup(hash(n), now: now) else { Issue.record("not a miss"); return }
        cache.insert(hash(n), session, lastSeen: session.lastSeenAt.unixSeconds, now: now, generation: generation)
    }

    @Test func nothingIsServedBeforeAHeartbeatCameBackNorOnceItIsOlderThanTheBound() {
        let cache = SessionCache(capacity: 10, idleTimeout: 600, bound: .milliseconds(100))
        #expect(cache.lookup(Self.hash(1), now: Self.now) == .unusable)
        cache.confirm(sentAt: bootNanoseconds())
        Self.fill(cache, 1, Self.session(11))
        #expect(cache.lookup(Self.hash(1), now: Self.now) == .hit(Self.session(11)))
        cache.confirm(sentAt: bootNanoseconds() - 200_000_000)  // older than a confirmation it already has: kept
        #expect(cache.isUsable)
        let late = SessionCache(capacity: 10, idleTimeout: 600, bound: .milliseconds(100))
        late.confirm(sentAt: bootNanoseconds() - 150_000_000)
        #expect(late.lookup(Self.hash(1), now: Self.now) == .unusable, "a heartbeat sent 150 ms ago vouches for nothing now")
        cache.disable()
        #expect(cache.lookup(Self.hash(1), now: Self.now) == .unusable)
        cache.confirm(sentAt: bootNanoseconds())
        #expect(cache.lookup(Self.hash(1), now: Self.now) != .hit(Self.session(11)), "disabling empties it")
    }

    @Test func expiryAndTheIdleTimeoutAreJudgedOnEveryHit() {
        let cache = Self.usable(idle: 600)
        Self.fill(cache, 1, Self.session(11, expires: Self.now + 100))
        #expect(cache.lookup(Self.hash(1), now: Self.now + 99) == .hit(Self.session(11, expires: Self.now + 100)))
        #expect(cache.lookup(Self.hash(1), now: Self.now + 100) != .hit(Self.session(11, expires: Self.now + 100)), "expired")
        Self.fill(cache, 2, Self.session(12))
        #expect(cache.lookup(Self.hash(2), now: Self.now + 599) == .hit(Self.session(12)), "a use moves the idle deadline")
        #expect(cache.lookup(Self.hash(2), now: Self.now + 599 + 599) == .hit(Self.session(12)))
        #expect(cache.lookup(Self.hash(2), now: Self.now + 599 + 599 + 600) != .hit(Self.session(12)), "idle here: ask PostgreSQL")
    }

    @Test func theLeastRecentlyUsedGoFirstAndTheBoundHolds() {
        let cache = Self.usable(capacity: 16)  // one per shard: the first byte of the hash picks the shard
        Self.fill(cache, 0, Self.session(1))
        Self.fill(cache, 16, Self.session(2))  // same shard: the first is out
        #expect(cache.lookup(Self.hash(0), now: Self.now) != .hit(Self.session(1)))
        #expect(cache.lookup(Self.hash(16), now: Self.now) == .hit(Self.session(2)))
        let big = Self.usable(capacity: 32)
        for n in [0, 16] as [UInt8] { Self.fill(big, n, Self.session(Int64(n))) }
        _ = big.lookup(Self.hash(0), now: Self.now)  // 0 is now the most recently used of its shard
        Self.fill(big, 32, Self.session(32))
        #expect(big.lookup(Self.hash(0), now: Self.now) == .hit(Self.session(0)))
        #expect(big.lookup(Self.hash(16), now: Self.now) != .hit(Self.session(16)))
        let many = Self.usable(capacity: 64)
        for n in 0..<200 { Self.fill(many, UInt8(n), Self.session(Int64(n))) }
        #expect(many.figures.entries <= 64)
    }

    @Test func evictionsBySessionUserAndHashAndFlush() {
        let cache = Self.usable()
        Self.fill(cache, 1, Self.session(11, user: 1))
        Self.fill(cache, 2, Self.session(12, user: 1))
        Self.fill(cache, 3, Self.session(13, user: 2))
        Self.fill(cache, 4, Self.session(14, user: 3))
        cache.evict(sessions: [11])
        #expect(cache.lookup(Self.hash(1), now: Self.now) != .hit(Self.session(11, user: 1)))
        #expect(cache.lookup(Self.hash(2), now: Self.now) == .hit(Self.session(12, user: 1)))
        cache.evict(users: [1])
        #expect(cache.lookup(Self.hash(2), now: Self.now) != .hit(Self.session(12, user: 1)))
        cache.evict(hash: Self.hash(3))
        #expect(cache.lookup(Self.hash(3), now: Self.now) != .hit(Self.session(13, user: 2)))
        #expect(cache.lookup(Self.hash(4), now: Self.now) == .hit(Self.session(14, user: 3)))
        cache.flush()
        #expect(cache.figures.entries == 0)
    }

    /// An answer PostgreSQL gave before an eviction came may predate the revocation: it is not kept.
    @Test func anAnswerThatAnEvictionOvertookIsNotKept() {
        let cache = Self.usable()
        guard case .miss(let generation) = cache.lookup(Self.hash(1), now: Self.now) else { Issue.record("not a miss"); return }
        cache.evict(sessions: [999])
        cache.insert(Self.hash(1), Self.session(11), lastSeen: Self.now, now: Self.now, generation: generation)
        #expect(cache.figures.entries == 0)
        Self.fill(cache, 1, Self.session(11))
        #expect(cache.figures.entries == 1)
    }

    /// Hits that find `last_seen_at` a minute old or more make it due once, for the listener to write.
    @Test func aHitOnAStaleLastSeenMakesItDueOnce() {
        let cache = Self.usable(idle: 86_400)
        Self.fill(cache, 1, Self.session(11))
        _ = cache.lookup(Self.hash(1), now: Self.now + 30)
        #expect(cache.takeDueSeen().isEmpty)
        _ = cache.lookup(Self.hash(1), now: Self.now + 60)
        _ = cache.lookup(Self.hash(1), now: Self.now + 61)
        #expect(cache.takeDueSeen() == [11])
        #expect(cache.takeDueSeen().isEmpty)
    }

    /// What a trigger writes: sessions, users; anything else flushes.
    @Test(arguments: [("s 1 2 3", true, [1, 2, 3], []), ("u 7", true, [], [7]), ("flush", false, [], []),
                      ("s", false, [], []), ("s 1 x", false, [1], []), ("x 1", false, [], [])] as [(String, Bool, [Int64], [Int64])])
    func notificationsAreReadOrFlushEverything(payload: String, readable: Bool, sessions: [Int64], users: [Int64]) {
        var s: Set<Int64> = [], u: Set<Int64> = []
        #expect(CacheListener.read(payload, sessions: &s, users: &u) == readable)
        #expect(s == Set(sessions) && u == Set(users))
    }
}
