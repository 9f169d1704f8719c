// Hostile and unusual record streams on a live server's socket: each closes (or is answered on) its own
// connection only, costs bounded memory and time, and never takes a worker from a well-behaved client.
@testable import FastCGI
import Foundation
import Glibc
import Synchronization
import Testing
import Threads

private typealias Raw = RawFastCGIConnection

/// Answers with the request path as the body.
private let pathEcho: @Sendable (Request) -> Response = { request in
    Response(status: 200, contentType: "text/plain", body: request.path)
}

/// The server still answers a normal request on a fresh connection.
private func stillServes(_ dir: TempDir, seconds: Double = 5) throws -> Bool {
    let next = try Raw(unixPath: dir.file("s"))
    try next.send(params: ["DOCUMENT_URI": "/alive"], keep: false)
    return try next.readResponse(seconds: seconds).body == Array("/alive".utf8)
}

@Suite(.serialized) struct ProtocolTests {
    /// Review finding 6: FCGI_GET_VALUES listing FCGI_MAX_CONNS four times overflowed libfcgi's stack buffer
    /// (SIGABRT, every worker gone). Now it gets one FCGI_GET_VALUES_RESULT naming each variable once.
    @Test func getValuesWithRepeatedNamesIsAnsweredOnce() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)],
                                limits: Limits(maxBodyBytes: 64, maxConnections: 50))
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        let connection = try Raw(unixPath: dir.file("s"))
        try connection.write(Raw.record(type: 9, id: 0, Raw.pairs(Array(repeating: ("FCGI_MAX_CONNS", ""), count: 4)
            + [("FCGI_MPXS_CONNS", "")])))
        #expect(try connection.readRecord() == .init(type: 10, id: 0, content: Raw.pairs([("FCGI_MAX_CONNS", "50"), ("FCGI_MPXS_CONNS", "0")])))
        try connection.write(Raw.record(type: 77, id: 0, []))
        #expect(try connection.readRecord() == .init(type: 11, id: 0, content: [77, 0, 0, 0, 0, 0, 0, 0]))
        // The same connection then carries a request.
        try connection.send(params: ["DOCUMENT_URI": "/after"], keep: true)
        #expect(try connection.readResponse().body == Array("/after".utf8))
    }

    /// Review finding 7: PARAMS name and value lengths of 0x7ffffffe each (a 28-byte record) overflowed
    /// libfcgi's sum and aborted the process. Now that connection alone is closed.
    @Test func overflowingParamLengthsCloseOnlyThatConnection() throws {
        let dir = try TempDir()
        let reports = Recorder()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)], limits: Limits(maxBodyBytes: 64))
        let running = RunningServer(server, classify: { _ in 0 }, overloaded: Response(status: 503),
                                    report: { reports.record(Request(params: ["code": $0.code.name])) }, handlers: [pathEcho])
        defer { running.stop() }
        let attacker = try Raw(unixPath: dir.file("s"))
        let record = Raw.record(type: 4, [0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xfe] + Array("ABCDEFGHIJKL".utf8))
        #expect(record.count == 28)
        try attacker.write(Raw.begin(keep: true) + record + Raw.record(type: 4, []))
        #expect(attacker.closedByPeer())
        #expect(try stillServes(dir))
        #expect(reports.requests.map { $0.params["code"] } == ["malformed_params"])
        #expect(server.statistics.protocolViolations == 1)
    }

    /// Review finding 8: libfcgi allocated each parameter at its declared length (up to 2 GB) with no cap on
    /// their number: four connections took the responder to 1.5 GB. Now PARAMS past `maxParamsBytes` close the
    /// connection, and what a connection holds is bounded by the limits, not by what it declares.
    @Test func hugeDeclaredParamsCostBoundedMemory() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)], limits: Limits(maxBodyBytes: 64))
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        let before = residentBytes()
        let attackers = try (0..<4).map { _ in try Raw(unixPath: dir.file("s")) }
        // A parameter declared at 2 GB - 1, then 16 MB of it in full-size records, on each of four connections.
        let declared = Raw.begin(keep: true) + Raw.record(type: 4, [0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff])
        let chunk = Raw.record(type: 4, Array(repeating: 0x41, count: 65535))
        for attacker in attackers {
            try attacker.write(declared)
            for _ in 0..<256 {
                guard (try? attacker.write(chunk)) != nil else { break }  // the responder closed it
            }
        }
        for attacker in attackers { #expect(attacker.closedByPeer(discarding: true)) }
        #expect(server.statistics.protocolViolations == 4)
        #expect(residentBytes() - before < 32 << 20, "resident memory grew by \(residentBytes() - before) bytes")
        #expect(try stillServes(dir))
    }

    /// Review finding 9: as many connections as workers each sending one byte stalled everyone (a normal
    /// request waited 30.7 s). No worker reads a connection now: a normal request is answered at once.
    @Test func connectionsSendingOneByteHoldNoWorker() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 2)],
                                limits: Limits(maxBodyBytes: 64, requestTimeout: .seconds(60), stallTimeout: .seconds(60)))
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        let stalled = try (0..<8).map { _ in try Raw(unixPath: dir.file("s")) }
        for connection in stalled { try connection.write([1]) }
        #expect(server.waitForOpenConnections { $0 == 8 })
        // Answered long before any of the stalled connections reaches its deadline (60 s).
        #expect(try stillServes(dir, seconds: 20))
    }

    /// Review finding 9, the trickle: one byte every so often no longer holds anything forever. A request must
    /// arrive whole within `requestTimeout` and never pause longer than `stallTimeout`.
    @Test(arguments: [("trickling under the stall limit", 50, 4.0), ("silent mid-request", 100_000, 0.3)])
    func slowRequestsAreClosedAtTheirDeadline(_ name: String, gapMilliseconds: Int, requestSeconds: Double) throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)],
                                limits: Limits(maxBodyBytes: 64, requestTimeout: .milliseconds(Int(requestSeconds * 1000)),
                                               stallTimeout: .milliseconds(300)))
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        let slow = try Raw(unixPath: dir.file("s"))
        let bytes = Raw.request(params: ["DOCUMENT_URI": "/slow", "HTTP_PAD": String(repeating: "p", count: 4000)], keep: true)
        let closed = Latch()
        Thread {
            // Keeps sending until the responder closes the connection (a write then fails).
            for byte in bytes {
                if (try? slow.write([byte])) == nil { break }
                // The slow peer itself: its pace is what the test is about, not an order of events.
                var pause = timespec(tv_sec: gapMilliseconds / 1000, tv_nsec: (gapMilliseconds % 1000) * 1_000_000)
                nanosleep(&pause, nil)
                if closed.count > 0 { break }
            }
        }.start()
        #expect(slow.closedByPeer(seconds: 10))
        closed.signal()
        #expect(server.statistics.timeouts == 1)
        #expect(try stillServes(dir))
    }

    /// A stop is not held up by a peer that trickles: its request is closed at its deadline.
    @Test func aTricklingPeerDoesNotHoldUpTheStopPastItsDeadline() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)],
                                limits: Limits(maxBodyBytes: 64, requestTimeout: .milliseconds(500)))
        let running = RunningServer(server, handler: pathEcho)
        let slow = try Raw(unixPath: dir.file("s"))
        try slow.write(Array(Raw.request(params: ["DOCUMENT_URI": "/slow"], keep: true).prefix(20)))
        #expect(server.waitForOpenConnections { $0 == 1 })
        #expect(running.stop() != nil)
        #expect(slow.closedByPeer())
    }

    /// Pipelining: a second request written right behind the first (even in the same write) is answered after it.
    @Test func pipelinedRequestsOnAKeptConnectionAreAnsweredInOrder() throws {
        let dir = try TempDir()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 2, maxBodyBytes: 64), handler: pathEcho)
        defer { running.stop() }
        let connection = try Raw(unixPath: dir.file("s"))
        try connection.write((1...3).flatMap { Raw.request(params: ["DOCUMENT_URI": "/p\($0)"], keep: true) })
        for index in 1...3 { #expect(try connection.readResponse().body == Array("/p\(index)".utf8)) }
        // The last one may end the connection: answered, then closed.
        try connection.write(Raw.request(params: ["DOCUMENT_URI": "/p4"], keep: true) + Raw.request(params: ["DOCUMENT_URI": "/p5"], keep: false))
        #expect(try connection.readResponse().body == Array("/p4".utf8))
        #expect(try connection.readResponse().body == Array("/p5".utf8))
        #expect(connection.closedByPeer())
    }

    /// Audit finding: while the body of a request answered as too large was skipped, empty PARAMS records cost
    /// nothing, so a peer streaming them kept one worker reading for ever, and with it the reading itself (no
    /// other request read, no connection accepted). Each record now costs its bytes on the wire against
    /// `maxDiscardBytes` (1 MiB + 32 KiB), and the connection is closed past it.
    @Test func emptyRecordsWhileABodyIsSkippedEndTheConnection() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64)
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        let attacker = try Raw(unixPath: dir.file("s"))
        try attacker.write(Raw.begin(keep: true) + Raw.record(type: 4, Raw.pairs([("DOCUMENT_URI", "/big"), ("CONTENT_LENGTH", "999999")]))
            + Raw.record(type: 4, []))
        #expect(try attacker.readResponse().body == Array("/big".utf8), "answered at once; its body is then skipped")
        let empties = Array(repeating: Raw.record(type: 4, []), count: 8192).flatMap { $0 }  // 64 KiB of empty records
        var written = 0
        while written < 8 << 20, (try? attacker.write(empties)) != nil { written += empties.count }
        #expect(written < 8 << 20, "the responder read the whole stream")
        #expect(attacker.closedByPeer(discarding: true))
        #expect(server.statistics.protocolViolations == 1 && server.statistics.timeouts == 0)
        #expect(try stillServes(dir))
    }

    /// A worker reads at most `Limits.readPerTurn` bytes of one connection before it gives the connection back to
    /// the line, so one peer's stream cannot keep a worker (or the reading) to itself; what was read stays
    /// buffered and is answered in order.
    @Test func aConnectionIsGivenBackAfterItsTurnsBytes() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)],
                                limits: Limits(maxBodyBytes: 64, readPerTurn: 1024))
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        let connection = try Raw(unixPath: dir.file("s"))
        let filler = String(repeating: "x", count: 600)
        try connection.write((1...8).flatMap { Raw.request(params: ["DOCUMENT_URI": "/p\($0)", "HTTP_X_FILLER": filler], keep: true) })
        for index in 1...8 { #expect(try connection.readResponse().body == Array("/p\(index)".utf8)) }
        #expect(server.turnsEnded >= 1)
    }

    @Test func paddedRecordsAreReadPastOnTheSocket() throws {
        let dir = try TempDir()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64), handler: pathEcho)
        defer { running.stop() }
        let connection = try Raw(unixPath: dir.file("s"))
        try connection.write(Raw.begin(keep: true, padding: 8) + Raw.record(type: 4, Raw.pairs([("DOCUMENT_URI", "/padded")]), padding: 3)
            + Raw.record(type: 4, [], padding: 255) + Raw.record(type: 5, [], padding: 7))
        #expect(try connection.readResponse().body == Array("/padded".utf8))
        try connection.send(params: ["DOCUMENT_URI": "/next"], keep: true)
        #expect(try connection.readResponse().body == Array("/next".utf8))
    }

    @Test func aSecondConcurrentRequestIDIsRefusedAndTheFirstAnswered() throws {
        let dir = try TempDir()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64), handler: pathEcho)
        defer { running.stop() }
        let connection = try Raw(unixPath: dir.file("s"))
        try connection.write(Raw.begin(id: 1, keep: true) + Raw.record(type: 4, id: 1, Raw.pairs([("DOCUMENT_URI", "/first")]))
            + Raw.begin(id: 2, keep: true))
        #expect(try connection.readRecord() == .init(type: 3, id: 2, content: [0, 0, 0, 0, 1, 0, 0, 0]))
        try connection.write(Raw.record(type: 4, id: 1, []) + Raw.record(type: 5, id: 1, []))
        #expect(try connection.readResponse().body == Array("/first".utf8))
    }

    @Test func anAbortedRequestIsEndedWithoutReachingTheHandler() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64), handler: recordingHandler(recorder))
        defer { running.stop() }
        let connection = try Raw(unixPath: dir.file("s"))
        try connection.write(Raw.begin(id: 5, keep: true) + Raw.record(type: 4, id: 5, Raw.pairs([("DOCUMENT_URI", "/aborted")]))
            + Raw.record(type: 2, id: 5, []))
        #expect(try connection.readRecord() == .init(type: 3, id: 5, content: [0, 0, 0, 0, 0, 0, 0, 0]))
        try connection.send(params: ["DOCUMENT_URI": "/kept"], keep: true)
        #expect(try connection.readResponse().body == Array("ok 0".utf8))
        #expect(recorder.requests.map(\.path) == ["/kept"])
    }

    /// Review (end of this round): a peer that streams BEGIN_REQUEST + ABORT_REQUEST pairs and reads the
    /// replies a trickle at a time kept its worker for ever (each write got a fresh `writeTimeout`, each abort
    /// reset the stray-record count). Two such peers held both threads of a one-worker server. Now a worker
    /// gives a connection back after `Dispatcher.turn` records, a management reply is never waited on, and a
    /// connection's waits for the peer to read are bounded in all until it is next idle.
    @Test func peersThatReadATrickleCannotKeepTheWorkers() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)],
                                limits: Limits(maxBodyBytes: 64, writeTimeout: .seconds(1)))
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        let attackers = try (0..<2).map { _ in try TrickleReader(dir.file("s")) }
        defer { for attacker in attackers { attacker.stop() } }
        for attacker in attackers { try #require(attacker.waitUntilAnswered(), "the responder never answered an attacker") }
        for _ in 0..<3 { #expect(try stillServes(dir, seconds: 5)) }
    }

    /// Review: the same peer held the graceful stop past `drainTimeout` (a held connection is not drained).
    /// While draining, a management reply closes its connection.
    @Test func aTrickleReaderDoesNotHoldUpTheStop() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)],
                                limits: Limits(maxBodyBytes: 64, writeTimeout: .seconds(30), drainTimeout: .seconds(1)))
        let running = RunningServer(server, handler: pathEcho)
        let attacker = try TrickleReader(dir.file("s"))
        defer { attacker.stop() }
        try #require(attacker.waitUntilAnswered(), "the responder never answered the attacker")
        let started = Date()
        server.stop()
        #expect(running.waitForReturn(seconds: 8) != nil, "the stop waited on the trickle reader")
        #expect(Date().timeIntervalSince(started) < 5)
    }

    /// Review: a kept connection that never sends another request (and is not nginx, which closes its idle
    /// ones) is closed after `idleTimeout`, so such peers cannot fill the connection slots.
    @Test func aKeptConnectionIdlePastTheIdleTimeoutIsClosed() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)],
                                limits: Limits(maxBodyBytes: 64, idleTimeout: .seconds(1)))
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        let kept = try Raw(unixPath: dir.file("s"))
        try kept.send(params: ["DOCUMENT_URI": "/once"], keep: true)
        #expect(try kept.readResponse().body == Array("/once".utf8))
        #expect(!kept.closedByPeer(seconds: 0.5), "closed before the idle timeout")
        #expect(kept.closedByPeer(seconds: 5), "still open well after the idle timeout")
        #expect(server.statistics.timeouts == 1)
    }

    /// The timer reads the clock once per tick; a connection a worker stamps after that (parked idle, or a
    /// request begun) must not look ages old to it. A tick whose clock is far older than every stamp closes
    /// nothing.
    @Test func stampsNewerThanTheTimersClockAreNotTimedOut() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)],
                                limits: Limits(maxBodyBytes: 64))
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        let idle = try Raw(unixPath: dir.file("s"))
        try idle.send(params: ["DOCUMENT_URI": "/once"], keep: true)
        #expect(try idle.readResponse().body == Array("/once".utf8))
        let arriving = try Raw(unixPath: dir.file("s"))
        try arriving.write(Raw.begin(keep: true))
        let dispatcher = try #require(server.current.withLock { $0 })
        try #require(eventually { server.openConnections == 2 })
        // Both parked: one idle, one with its request begun.
        try #require(eventually { server.parkedConnections == (idle: 1, begun: 1) })
        dispatcher.closeIdle(now: 1)
        dispatcher.tick(now: 1, drainStart: nil)
        #expect(server.statistics.timeouts == 0)
        try idle.send(params: ["DOCUMENT_URI": "/twice"], keep: true)
        #expect(try idle.readResponse().body == Array("/twice".utf8))
        try arriving.write(Raw.record(type: 4, Raw.pairs([("DOCUMENT_URI", "/late")])) + Raw.record(type: 4, [])
            + Raw.record(type: 5, []))
        #expect(try arriving.readResponse().body == Array("/late".utf8))
    }

    /// Garbage of every kind on many connections at once: each closed, the process and the workers untouched.
    @Test func malformedStreamsCloseTheirConnectionOnly() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), lanes: [Lane(name: "default", workers: 1)],
                                limits: Limits(maxBodyBytes: 8, maxParamsBytes: 1024, maxParams: 10, maxStrayRecords: 4,
                                               bodySlackBytes: 16, maxDiscardBytes: 1000))
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        let streams = ParserTests.violations.sorted { $0.key < $1.key }
        let connections = try streams.map { _ in try Raw(unixPath: dir.file("s")) }
        for (connection, stream) in zip(connections, streams) { try connection.write(stream.value) }
        for (connection, stream) in zip(connections, streams) {
            #expect(connection.closedByPeer(discarding: true), "\(stream.key)")
        }
        #expect(server.statistics.protocolViolations == streams.count)
        #expect(try stillServes(dir))
    }
}

/// This process's resident set size (VmRSS), in bytes.
private func residentBytes() -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
    return (Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0) * 1024
}

/// The review's attacker: streams BEGIN_REQUEST (keep) + ABORT_REQUEST pairs on one connection and reads the
/// replies 16 KiB every 200 ms, until `stop()` or the responder closes the connection.
private final class TrickleReader: Sendable {
    private let connection: Raw
    private let stopped = Atomic<Bool>(false)
    /// Reply bytes read so far.
    private let received = Atomic<Int>(0)

    init(_ path: String) throws {
        connection = try Raw(unixPath: path)
        let pair = Raw.begin(id: 1, keep: true) + Raw.record(type: 2, id: 1, [])
        let burst = Array([[UInt8]](repeating: pair, count: 2_000).joined())
        _ = Threads.start(detached: true) { [self] in
            while !stopped.load(ordering: .relaxed), (try? connection.write(burst)) != nil {}
        }
        _ = Threads.start(detached: true) { [self] in
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            while !stopped.load(ordering: .relaxed) {
                let got = chunk.withUnsafeMutableBytes { Glibc.recv(connection.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if got == 0 { return }
                if got > 0 { received.add(got, ordering: .relaxed) }
                usleep(200_000)  // the trickle: a peer that reads slowly is the attack, not an order of events
            }
        }
    }

    /// Waits until the responder has answered some of the stream: the attack is under way.
    func waitUntilAnswered(seconds: Double = 10) -> Bool {
        eventually(seconds: seconds) { received.load(ordering: .relaxed) > 0 }
    }

    func stop() { stopped.store(true, ordering: .relaxed) }
}
