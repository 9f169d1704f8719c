// LISTEN/NOTIFY on a real server: notifications arrive after commit, in order, each once; a wait is bounded; a
// terminated session is reported, not waited on.
import Foundation
import Store
import TestSupport
import Testing

@Suite struct NotificationTests {
    @Test func notificationsArriveAfterCommitInOrder() throws {
        let db = try TestDatabase("notify_order")
        let listener = try db.connect()
        try listener.query("LISTEN tokensignin_test")
        #expect(try listener.notifications(waitingUpTo: .milliseconds(20)).isEmpty)
        let sender = try db.connect()
        try sender.query("BEGIN")
        try sender.query("SELECT pg_notify('tokensignin_test', 'one'), pg_notify('tokensignin_test', 'two')")
        #expect(try listener.notifications(waitingUpTo: .milliseconds(100)).isEmpty, "nothing before the commit")
        try sender.query("COMMIT")
        try sender.query("SELECT pg_notify('other_channel', 'unheard'), pg_notify('tokensignin_test', 'three')")
        var received: [DatabaseNotification] = []
        let deadline = Date().addingTimeInterval(5)
        while received.count < 3, Date() < deadline { received += try listener.notifications(waitingUpTo: .seconds(1)) }
        #expect(received.map(\.payload) == ["one", "two", "three"])
        #expect(received.allSatisfy { $0.channel == "tokensignin_test" })
    }

    @Test func aWaitWithNothingToReceiveEndsAtItsLimit() throws {
        let db = try TestDatabase("notify_wait")
        let listener = try db.connect()
        try listener.query("LISTEN tokensignin_test")
        let started = ContinuousClock.now
        #expect(try listener.notifications(waitingUpTo: .milliseconds(200)).isEmpty)
        let waited = ContinuousClock.now - started
        #expect(waited >= .milliseconds(190) && waited < .seconds(5), "\(waited)")
    }

    @Test func aTerminatedSessionIsLostNotWaitedOn() throws {
        let db = try TestDatabase("notify_terminated")
        let listener = try db.connect()
        try listener.query("LISTEN tokensignin_test")
        try db.connect().query("SELECT pg_terminate_backend($1::int)", [listener.backendPID])
        var lost: StoreError?
        let deadline = Date().addingTimeInterval(5)
        while lost == nil, Date() < deadline {
            do { _ = try listener.notifications(waitingUpTo: .milliseconds(500)) } catch { lost = error }
        }
        #expect(lost?.code == .connectionLost)
    }
}
