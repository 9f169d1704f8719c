// The graceful stop: every request that reaches an open connection is answered, answers during the stop tell
// nginx not to reuse their connection, idle kept connections close, and an inherited socket keeps the
// connections queued on it for the next process.
@testable import FastCGI
import Foundation
import Glibc
import Testing

private typealias Raw = RawFastCGIConnection

private let pathEcho: @Sendable (Request) -> Response = { request in
    Response(status: 200, contentType: "text/plain", body: request.path)
}

@Suite(.serialized) struct DrainTests {
    /// An answer written once the stop has begun, on a kept connection, ends with an empty STDERR record after
    /// END_REQUEST (nginx keeps a connection only when END_REQUEST ends what it read), and the connection is
    /// then closed. Without the keep flag there is nothing to tell: no farewell record, just the close.
    @Test(arguments: [true, false])
    func anAnswerDuringTheStopIsWrittenThenTheConnectionCloses(keep: Bool) throws {
        let dir = try TempDir()
        let entered = Latch(), release = Latch()
        let server = try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64)
        let running = RunningServer(server) { request in
            entered.signal()
            _ = release.wait(for: 1, seconds: 20)
            return pathEcho(request)
        }
        let connection = try Raw(unixPath: dir.file("s"))
        try connection.send(params: ["DOCUMENT_URI": "/late"], keep: keep)
        try #require(entered.wait(for: 1))
        server.stop()
        #expect(eventually { access(dir.file("s"), F_OK) != 0 })  // the stop has begun
        release.signal()
        #expect(try connection.readResponse().body == Array("/late".utf8))
        if keep { #expect(try connection.readRecord() == .init(type: 7, id: 1, content: [])) }
        #expect(connection.closedByPeer())
        #expect(running.waitForReturn() != nil)
    }

    /// nginx may write on a kept connection at any moment: a request arriving on one during the stop is
    /// answered (and the connection closed after it), not dropped.
    @Test func aRequestOnAnIdleKeptConnectionDuringTheStopIsAnswered() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)],
                                limits: Limits(maxBodyBytes: 64, drainTimeout: .seconds(30), drainIdle: .seconds(30)))
        let running = RunningServer(server, handler: pathEcho)
        let kept = try Raw(unixPath: dir.file("s"))
        try kept.send(params: ["DOCUMENT_URI": "/before"], keep: true)
        #expect(try kept.readResponse().body == Array("/before".utf8))
        server.stop()
        #expect(try kept.readRecord() == .init(type: 7, id: 1, content: []))  // the stop's farewell
        #expect(!running.hasReturned)  // the kept connection is still open
        // As if nginx had picked the connection just before the farewell came: the request is answered.
        try kept.send(params: ["DOCUMENT_URI": "/during"], keep: true)
        #expect(try kept.readResponse().body == Array("/during".utf8))
        #expect(try kept.readRecord() == .init(type: 7, id: 1, content: []))
        #expect(kept.closedByPeer())
        #expect(running.waitForReturn() != nil)
    }

    /// At the stop every idle kept connection gets the farewell record, on which nginx closes it from its side
    /// (no close of ours can then meet a request nginx is sending); the drain ends when the peers have closed.
    @Test func idleKeptConnectionsGetTheFarewellAndTheDrainEndsWhenThePeersClose() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 2)],
                                limits: Limits(maxBodyBytes: 64, drainTimeout: .seconds(60), drainIdle: .seconds(60)))
        let running = RunningServer(server, handler: pathEcho)
        var kept = try (0..<3).map { _ in try Raw(unixPath: dir.file("s")) }
        for connection in kept {
            try connection.send(params: ["DOCUMENT_URI": "/k"], keep: true)
            #expect(try connection.readResponse().body == Array("/k".utf8))
        }
        server.stop()
        for connection in kept { #expect(try connection.readRecord() == .init(type: 7, id: 1, content: [])) }
        #expect(!running.hasReturned)
        kept.removeAll()  // the peers close, as nginx's keepalive close handler does
        let result = try #require(running.waitForReturn())
        #expect(throws: Never.self) { try result.get() }
        #expect(server.openConnections == 0)
    }

    /// A peer that ignores the farewell is closed by the responder `drainIdle` later.
    @Test func aPeerIgnoringTheFarewellIsClosedAfterDrainIdle() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)],
                                limits: Limits(maxBodyBytes: 64, drainTimeout: .seconds(60), drainIdle: .milliseconds(200)))
        let running = RunningServer(server, handler: pathEcho)
        let kept = try Raw(unixPath: dir.file("s"))
        try kept.send(params: ["DOCUMENT_URI": "/k"], keep: true)
        #expect(try kept.readResponse().body == Array("/k".utf8))
        server.stop()
        #expect(try kept.readRecord() == .init(type: 7, id: 1, content: []))
        #expect(kept.closedByPeer())
        #expect(running.waitForReturn() != nil)
    }

    /// `drainTimeout` bounds the stop whatever the connections do.
    @Test func theDrainTimeoutBoundsTheStop() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)],
                                limits: Limits(maxBodyBytes: 64, requestTimeout: .seconds(60), stallTimeout: .seconds(60),
                                               drainTimeout: .milliseconds(300), drainIdle: .seconds(60)))
        let running = RunningServer(server, handler: pathEcho)
        let kept = try Raw(unixPath: dir.file("s"))
        try kept.send(params: ["DOCUMENT_URI": "/k"], keep: true)
        #expect(try kept.readResponse().body == Array("/k".utf8))
        let partial = try Raw(unixPath: dir.file("s"))
        // The kept one ignores its farewell and the partial one never completes: both closed at the timeout.
        try partial.write(Array(Raw.request(params: ["DOCUMENT_URI": "/p"], keep: true).prefix(12)))
        #expect(server.waitForOpenConnections { $0 == 2 })
        #expect(running.stop() != nil)
        #expect(kept.closedByPeer(discarding: true))
        #expect(partial.closedByPeer())
    }

    /// A restart with the socket held elsewhere (systemd, a holder): the stopping server leaves connections
    /// queued on the socket to its successor, which answers them.
    @Test func connectionsQueuedOnAnInheritedSocketWaitForTheNextServer() throws {
        let dir = try TempDir()
        let holder = try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 16)  // owns the socket, never runs
        // Handed over by its number, as a process manager does: an adopting server lets it go, never closes it.
        let socket = try #require(holder.listener.withSocket { $0.raw })
        let first = try Server(adopting: Descriptor(socket), workers: 1, maxBodyBytes: 64)
        let firstRunning = RunningServer(first) { _ in Response(status: 200, contentType: "text/plain", body: "first") }
        let early = try Raw(unixPath: dir.file("s"))
        try early.send(params: ["DOCUMENT_URI": "/x"], keep: false)
        #expect(try early.readResponse().body == Array("first".utf8))
        #expect(firstRunning.stop() != nil)
        // Between the two processes: the connection is queued on the socket, its request waits.
        let between = try Raw(unixPath: dir.file("s"))
        try between.send(params: ["DOCUMENT_URI": "/y"], keep: true)
        let second = try Server(adopting: Descriptor(socket), workers: 1, maxBodyBytes: 64)
        let secondRunning = RunningServer(second) { _ in Response(status: 200, contentType: "text/plain", body: "second") }
        defer { secondRunning.stop() }
        #expect(try between.readResponse().body == Array("second".utf8))
    }
}
