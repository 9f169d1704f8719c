// The session cache's shared heartbeats: which moment a heartbeat vouches for (Vouching), and a listener on a real
// PostgreSQL that leaves the heartbeats to another process of its role, but not to a process of another role.
import Foundation
import Logging
@testable import Sessions
import Store
import Synchronization
import TestSupport
import Testing
import Threads

@Suite struct VouchingTests {
    static let own = Vouching.Sender(pid: 100, started: 1_800_000_000_000_000)
    static let ownPID = own.pid
    static let ms: UInt64 = 1_000_000

    /// A sender-role lookup that answers `same` and counts the questions.
    final class Roles: @unchecked Sendable {
        var asked: [Int32] = []
        let same: Bool
        init(same: Bool) { self.same = same }
        func answer(_ sender: Vouching.Sender) throws(StoreError) -> Bool { asked.append(sender.pid); return same }
    }

    /// A heartbeat of transaction `id`, numbered `number` by its sender, whose server process says it started at
    /// `started` (by default when this listener's own did).
    static func beat(_ id: Int64, _ number: UInt64 = 0, started: Int64 = own.started) -> Vouching.Heartbeat {
        Vouching.Heartbeat(id: id, number: number, started: started)
    }

    @Test func ownHeartbeatVouchesAsOfWhenItWasSent() throws {
        var vouching = Vouching(own: Self.own)
        let roles = Roles(same: false)
        let first = vouching.sending(at: 10 * Self.ms)
        let second = vouching.sending(at: 60 * Self.ms)
        #expect(try vouching.received(Self.beat(500, first), from: Self.ownPID, now: 61 * Self.ms, sameRole: roles.answer) == 10 * Self.ms)
        #expect(try vouching.received(Self.beat(510, second), from: Self.ownPID, now: 62 * Self.ms, sameRole: roles.answer) == 60 * Self.ms)
        #expect(try vouching.received(Self.beat(511, second), from: Self.ownPID, now: 63 * Self.ms, sameRole: roles.answer) == nil,
                "a number already used (or never sent) vouches for nothing")
        #expect(try vouching.received(Self.beat(512, 99), from: Self.ownPID, now: 64 * Self.ms, sameRole: roles.answer) == nil)
        #expect(roles.asked.isEmpty, "its own server process is not looked up")
    }

    @Test func anotherProcesssNumbersAreNotItsOwn() throws {
        var vouching = Vouching(own: Self.own)
        let roles = Roles(same: true)
        let number = vouching.sending(at: 10 * Self.ms)
        #expect(try vouching.received(Self.beat(500, number), from: 7, now: 11 * Self.ms, sameRole: roles.answer) == nil,
                "the same number from another process (a previous connection of this responder, say) is not this one's")
    }

    @Test func anotherRespondersHeartbeatVouchesAsOfTheLatestSnapshotItCommittedAfter() throws {
        var vouching = Vouching(own: Self.own)
        let roles = Roles(same: true)
        vouching.took(snapshot: 700, at: 10 * Self.ms)
        vouching.took(snapshot: 702, at: 35 * Self.ms)
        vouching.took(snapshot: 705, at: 60 * Self.ms)
        // Id 699 is below every xmax: it had completed before the first snapshot was taken, so it vouches for nothing.
        #expect(try vouching.received(Self.beat(699), from: 7, now: 61 * Self.ms, sameRole: roles.answer) == nil)
        // Id 703 committed after the snapshots with xmax 700 and 702, not necessarily after the one with 705.
        #expect(try vouching.received(Self.beat(703), from: 7, now: 62 * Self.ms, sameRole: roles.answer) == 35 * Self.ms)
        // Those two are used up; 705 is still open.
        #expect(try vouching.received(Self.beat(704), from: 8, now: 63 * Self.ms, sameRole: roles.answer) == nil)
        #expect(try vouching.received(Self.beat(705), from: 8, now: 64 * Self.ms, sameRole: roles.answer) == 60 * Self.ms)
        #expect(roles.asked == [7, 8], "each sender's role asked once")
    }

    @Test func ownHeartbeatAlsoClosesTheSnapshotsBeforeIt() throws {
        var vouching = Vouching(own: Self.own)
        let roles = Roles(same: false)
        vouching.took(snapshot: 700, at: 10 * Self.ms)
        let number = vouching.sending(at: 20 * Self.ms)
        vouching.took(snapshot: 704, at: 30 * Self.ms)
        #expect(try vouching.received(Self.beat(703, number), from: Self.ownPID, now: 31 * Self.ms, sameRole: roles.answer) == 20 * Self.ms)
        #expect(try vouching.received(Self.beat(704, 99), from: Self.ownPID, now: 32 * Self.ms, sameRole: roles.answer) == 30 * Self.ms,
                "a heartbeat of its own that it no longer remembers still counts as one of its role's")
    }

    @Test func anotherRolesHeartbeatVouchesForNothingAndItsRoleIsAskedAgainOnlyAfterTheInterval() throws {
        var vouching = Vouching(own: Self.own)
        vouching.senderCheckInterval = .milliseconds(100)
        let roles = Roles(same: false)
        vouching.took(snapshot: 700, at: 10 * Self.ms)
        #expect(try vouching.received(Self.beat(9_999, started: 5), from: 42, now: 20 * Self.ms, sameRole: roles.answer) == nil)
        #expect(try vouching.received(Self.beat(9_999, started: 5), from: 42, now: 50 * Self.ms, sameRole: roles.answer) == nil)
        #expect(roles.asked == [42])
        #expect(try vouching.received(Self.beat(9_999, started: 5), from: 42, now: 130 * Self.ms, sameRole: roles.answer) == nil)
        #expect(roles.asked == [42, 42], "asked once more: the process ID may belong to another process by now")
    }

    /// Snapshots are worth taking only while another process of the role sends heartbeats: its own do not count,
    /// nor another role's.
    @Test func othersAreHeardOnlyThroughTheirOwnRecentHeartbeats() throws {
        var vouching = Vouching(own: Self.own)
        let roles = Roles(same: false)
        let number = vouching.sending(at: 10 * Self.ms)
        _ = try vouching.received(Self.beat(500, number), from: Self.ownPID, now: 11 * Self.ms, sameRole: roles.answer)
        _ = try vouching.received(Self.beat(501), from: 42, now: 12 * Self.ms, sameRole: roles.answer)
        #expect(!vouching.hearsOthers(within: .seconds(1), now: 13 * Self.ms))
        let sameRole = Roles(same: true)
        _ = try vouching.received(Self.beat(502), from: 43, now: 20 * Self.ms, sameRole: sameRole.answer)
        #expect(vouching.hearsOthers(within: .seconds(1), now: 1_020 * Self.ms))
        #expect(!vouching.hearsOthers(within: .seconds(1), now: 1_021 * Self.ms))
    }

    @Test func onlyTheRecentSnapshotsAndSendersAreKept() throws {
        var vouching = Vouching(own: Self.own)
        let roles = Roles(same: true)
        for i in 0..<40 { vouching.took(snapshot: Int64(1_000 + i), at: UInt64(i) * Self.ms) }
        // The oldest 24 are gone: a heartbeat that comes after only them vouches for nothing.
        #expect(try vouching.received(Self.beat(1_020), from: 7, now: 50 * Self.ms, sameRole: roles.answer) == nil)
        #expect(try vouching.received(Self.beat(1_024), from: 7, now: 51 * Self.ms, sameRole: roles.answer) == 24 * Self.ms)
        for pid in 1...Int32(Vouching.keptSenders) {
            _ = try vouching.received(Self.beat(1), from: 1_000 + pid, now: 52 * Self.ms, sameRole: roles.answer)
        }
        let asked = roles.asked.count
        _ = try vouching.received(Self.beat(1), from: 7, now: 53 * Self.ms, sameRole: roles.answer)
        #expect(roles.asked.count == asked + 1, "past \(Vouching.keptSenders) senders, what was known is forgotten")
    }

    /// A process ID given to another process (the one that had it gone) is looked up again, with the start the
    /// payload claims; and an own number from a process that only claims this one's start is not its own.
    @Test func aProcessIDIsKnownOnlyTogetherWithItsStart() throws {
        var vouching = Vouching(own: Self.own)
        let roles = Roles(same: true)
        vouching.took(snapshot: 700, at: 10 * Self.ms)
        #expect(try vouching.received(Self.beat(701, started: 5), from: 7, now: 11 * Self.ms, sameRole: roles.answer) == 10 * Self.ms)
        vouching.took(snapshot: 702, at: 20 * Self.ms)
        let other = Roles(same: false)
        #expect(try vouching.received(Self.beat(9_999, started: 6), from: 7, now: 21 * Self.ms, sameRole: other.answer) == nil,
                "process 7 with another start is another process: looked up, and of another role")
        #expect(other.asked == [7])
        let number = vouching.sending(at: 30 * Self.ms)
        #expect(try vouching.received(Self.beat(9_999, number), from: 8, now: 31 * Self.ms, sameRole: other.answer) == nil,
                "this connection's start claimed by process 8 makes it neither this connection nor of its role")
    }

    /// The payload is `<transaction id> <number> <start>`; anything else is no heartbeat.
    @Test(arguments: [("705 3 1800000000000000", Vouching.Heartbeat(id: 705, number: 3, started: 1_800_000_000_000_000)),
                      ("705 3", nil), ("705 3 1 2", nil), ("x 3 1", nil), ("705 -3 1", nil), (" 705 3 1", nil),
                      ("705 3 x", nil), ("", nil)])
    func heartbeatPayloads(payload: String, expected: Vouching.Heartbeat?) {
        #expect(Vouching.Heartbeat(payload) == expected)
    }
}

/// A listener on the test cluster, with heartbeats of another process sent beside it.
@Suite struct SharedHeartbeatTests {
    /// Sends a heartbeat as another responder would, every 5 ms on `conninfo`, until `stop`.
    final class Sender: @unchecked Sendable {
        let stop = Atomic<Bool>(false)
        let done = Atomic<Bool>(false)
        let failure = Mutex<String?>(nil)

        init(conninfo: String) {
            _ = Threads.start(detached: true) { [self] in
                defer { done.store(true, ordering: .releasing) }
                do throws(StoreError) {
                    let connection = try Connection(conninfo: conninfo)
                    let (_, started) = try connection.execute(Queries.heartbeatSelf).decode(row: 0, as: Int.self, Int64.self)
                    while !stop.load(ordering: .acquiring) {
                        try connection.execute(Queries.heartbeat, [CacheListener.heartbeatChannel, "1", started])
                        Thread.sleep(forTimeInterval: 0.005)
                    }
                } catch {
                    failure.withLock { $0 = "\(error)" }
                }
            }
        }

        func finish() {
            stop.store(true, ordering: .releasing)
            while !done.load(ordering: .acquiring) { Thread.sleep(forTimeInterval: 0.005) }
        }
    }

    /// Runs a listener on `db` with heartbeats sent beside it on `senderConninfo` and returns the heartbeats the
    /// listener sent itself over 2 s (after it first became usable), and whether its cache was usable at the end.
    static func ownHeartbeats(db: TestDatabase, senderConninfo: String) throws -> (sent: Int, usable: Bool, failure: String?) {
        let cache = SessionCache(capacity: 10, idleTimeout: 3600)
        let listener = CacheListener(cache: cache, conninfo: db.conninfo, log: Log { _ in })
        #expect(listener.start())
        defer { listener.stop() }
        #expect(waitUntil(seconds: 10, every: 0.01) { cache.isUsable }, "the listener's own heartbeat makes the cache usable")
        let sender = Sender(conninfo: senderConninfo)
        Thread.sleep(forTimeInterval: 0.2)
        let before = cache.figures.heartbeats
        Thread.sleep(forTimeInterval: 2)
        let sent = cache.figures.heartbeats - before
        let usable = cache.isUsable
        sender.finish()
        return (sent, usable, sender.failure.withLock { $0 })
    }

    /// Another process of the listener's role heartbeating every 5 ms vouches for its cache: alone it would send
    /// one every 50 ms (about 40 in 2 s); here it has no need to.
    @Test func aListenerLeavesTheHeartbeatsToAnotherProcessOfItsRole() throws {
        let db = try TestDatabase.migrated("shared_heartbeat")
        let (sent, usable, failure) = try Self.ownHeartbeats(db: db, senderConninfo: db.conninfo)
        #expect(failure == nil)
        #expect(sent <= 10, "sent \(sent) of its own while another process heartbeat every 5 ms")
        #expect(usable)
    }

    /// Any role that can connect may NOTIFY the heartbeat channel: another role's heartbeats vouch for nothing,
    /// and the listener keeps sending its own.
    @Test func anotherRolesHeartbeatsVouchForNothing() throws {
        let db = try TestDatabase.migrated("forged_heartbeat")
        let admin = try db.connect()
        let role = "heartbeat_forger_\(randomHex(4))"
        try admin.query("CREATE ROLE \(role) LOGIN")
        defer { _ = try? admin.query("DROP OWNED BY \(role)"); _ = try? admin.query("DROP ROLE IF EXISTS \(role)") }
        let (sent, usable, failure) = try Self.ownHeartbeats(db: db, senderConninfo: db.conninfo + " user=\(role)")
        #expect(failure == nil)
        #expect(sent >= 15, "sent only \(sent) of its own beside another role's heartbeats")
        #expect(usable)
    }
}
