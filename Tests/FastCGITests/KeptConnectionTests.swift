// Connections the web server keeps open between requests (FCGI_KEEP_CONN, nginx `fastcgi_keep_conn on`),
// driven record by record with a raw FastCGI client so the order of requests on each connection is exact.
@testable import FastCGI
import Foundation
import Glibc
import Testing

@Suite(.serialized) struct KeptConnectionTests {
    /// The starvation case: one worker, three kept connections, requests arriving on each in turn.
    /// A worker tied to the connection it served last would never see the request on the next one.
    @Test func oneWorkerServesRequestsOnEveryKeptConnection() throws {
        let dir = try TempDir()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64),
                                    handler: pathEcho)
        defer { running.stop() }
        let connections = try (0..<3).map { _ in try RawFastCGIConnection(unixPath: dir.file("s")) }
        for round in 0..<3 {
            for (index, connection) in connections.enumerated() {
                let path = "/c\(index)/r\(round)"
                try connection.send(params: ["REQUEST_METHOD": "GET", "DOCUMENT_URI": path], keep: true)
                #expect(try connection.readResponse().body == Array(path.utf8))
            }
        }
    }

    @Test func requestsAnsweredOutOfConnectionOrder() throws {
        let dir = try TempDir()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64),
                                    handler: pathEcho)
        defer { running.stop() }
        let first = try RawFastCGIConnection(unixPath: dir.file("s"))
        let second = try RawFastCGIConnection(unixPath: dir.file("s"))
        try first.send(params: ["DOCUMENT_URI": "/a"], keep: true)
        #expect(try first.readResponse().body == Array("/a".utf8))
        // `first` stays open and idle; the next request comes on `second`, then `first` again.
        try second.send(params: ["DOCUMENT_URI": "/b"], keep: true)
        #expect(try second.readResponse().body == Array("/b".utf8))
        try first.send(params: ["DOCUMENT_URI": "/c"], keep: true)
        #expect(try first.readResponse().body == Array("/c".utf8))
    }

    @Test func oneKeptConnectionCarriesManyRequests() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 2, maxBodyBytes: 64),
                                    handler: recordingHandler(recorder))
        defer { running.stop() }
        let connection = try RawFastCGIConnection(unixPath: dir.file("s"))
        for index in 0..<50 {
            let body = Array(repeating: UInt8(index), count: index % 7)
            try connection.send(params: ["DOCUMENT_URI": "/n/\(index)", "CONTENT_LENGTH": "\(body.count)"],
                                stdin: body, keep: true)
            #expect(try connection.readResponse().body == Array("ok \(body.count)".utf8))
        }
        #expect(recorder.requests.map(\.path) == (0..<50).map { "/n/\($0)" })
        #expect(recorder.requests.map(\.body) == (0..<50).map { Array(repeating: UInt8($0), count: $0 % 7) })
    }

    @Test func withoutTheKeepFlagTheConnectionIsClosedAfterTheAnswer() throws {
        let dir = try TempDir()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64),
                                    handler: pathEcho)
        defer { running.stop() }
        let connection = try RawFastCGIConnection(unixPath: dir.file("s"))
        try connection.send(params: ["DOCUMENT_URI": "/once"], keep: false)
        #expect(try connection.readResponse().body == Array("/once".utf8))
        #expect(connection.closedByPeer())
    }

    /// A connection the web server did not ask to keep is closed by the responder right after the answer;
    /// the worker does not wait for the peer to hang up first (libfcgi's close waited up to 2 s).
    @Test func closingAnUnkeptConnectionDoesNotWaitForThePeer() throws {
        let dir = try TempDir()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64),
                                    handler: pathEcho)
        defer { running.stop() }
        let lingering = try RawFastCGIConnection(unixPath: dir.file("s"))
        try lingering.send(params: ["DOCUMENT_URI": "/one"], keep: false)
        #expect(try lingering.readResponse().body == Array("/one".utf8))
        // `lingering` stays open on this side; the only worker must already be free.
        let next = try RawFastCGIConnection(unixPath: dir.file("s"))
        try next.send(params: ["DOCUMENT_URI": "/two"], keep: false)
        #expect(try next.readResponse(seconds: 1.5).body == Array("/two".utf8))
        #expect(lingering.closedByPeer())
    }

    /// A body declared over the cap is answered at once (the handler sees `bodyTooLarge`), then read past and
    /// dropped, so the kept connection carries the next request.
    @Test func bodyOverTheCapIsSkippedAndTheKeptConnectionServesTheNextRequest() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 16),
                                    handler: recordingHandler(recorder))
        defer { running.stop() }
        let connection = try RawFastCGIConnection(unixPath: dir.file("s"))
        let body = Array(repeating: UInt8(9), count: 40)
        try connection.send(params: ["DOCUMENT_URI": "/big", "CONTENT_LENGTH": "40"], stdin: body, keep: true)
        #expect(try connection.readResponse().body == Array("ok 0".utf8))
        try connection.send(params: ["DOCUMENT_URI": "/after"], keep: true)
        #expect(try connection.readResponse().body == Array("ok 0".utf8))
        #expect(recorder.requests.map(\.bodyTooLarge) == [true, false])
        #expect(recorder.requests.map(\.path) == ["/big", "/after"])
    }

    /// Stdin beyond CONTENT_LENGTH is read past (not taken as the body) and the connection stays usable.
    @Test func bodyBeyondContentLengthIsDrainedAndTheConnectionServesTheNextRequest() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let running = RunningServer(try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64),
                                    handler: recordingHandler(recorder))
        defer { running.stop() }
        let connection = try RawFastCGIConnection(unixPath: dir.file("s"))
        // The rest of stdin follows the declared length: it must not be taken for the start of the next request.
        let bytes = RawFastCGIConnection.request(params: ["DOCUMENT_URI": "/short", "CONTENT_LENGTH": "4"],
                                                 stdin: Array("abcdefghij".utf8), keep: true)
        try connection.write(bytes)
        #expect(try connection.readResponse().body == Array("ok 4".utf8))
        try connection.send(params: ["DOCUMENT_URI": "/next", "CONTENT_LENGTH": "2"], stdin: Array("xy".utf8), keep: true)
        #expect(try connection.readResponse().body == Array("ok 2".utf8))
        #expect(recorder.requests.map(\.body) == [Array("abcd".utf8), Array("xy".utf8)])
    }

    @Test func aKeptConnectionTheWebServerClosesIsForgotten() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64)
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        var connection: RawFastCGIConnection? = try RawFastCGIConnection(unixPath: dir.file("s"))
        try connection?.send(params: ["DOCUMENT_URI": "/x"], keep: true)
        #expect(try connection?.readResponse().body == Array("/x".utf8))
        #expect(server.waitForOpenConnections { $0 == 1 })
        connection = nil  // closes it
        #expect(server.waitForOpenConnections { $0 == 0 })
        // The worker is free for the next connection.
        let next = try RawFastCGIConnection(unixPath: dir.file("s"))
        try next.send(params: ["DOCUMENT_URI": "/y"], keep: true)
        #expect(try next.readResponse().body == Array("/y".utf8))
    }

    /// A connection that has not sent a byte holds no worker: the only worker serves another connection.
    @Test func aSilentConnectionDoesNotHoldTheWorker() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64)
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        let silent = try RawFastCGIConnection(unixPath: dir.file("s"))
        #expect(server.waitForOpenConnections { $0 == 1 })  // accepted, and waiting in the set while it says nothing
        let talking = try RawFastCGIConnection(unixPath: dir.file("s"))
        try talking.send(params: ["DOCUMENT_URI": "/t"], keep: false)
        #expect(try talking.readResponse().body == Array("/t".utf8))
        // Accepted while silent, it waited in the set; when it speaks, it is served, and kept.
        try silent.send(params: ["DOCUMENT_URI": "/s1"], keep: true)
        #expect(try silent.readResponse().body == Array("/s1".utf8))
        try silent.send(params: ["DOCUMENT_URI": "/s2"], keep: true)
        #expect(try silent.readResponse().body == Array("/s2".utf8))
    }

    /// A request already waiting when its connection is accepted is served by the accepting worker; kept,
    /// the connection then joins the set like any other.
    @Test func aConnectionWhoseRequestIsWaitingIsServedAtOnceThenKept() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64)
        let connection = try RawFastCGIConnection(unixPath: dir.file("s"))  // queued before any worker runs
        try connection.send(params: ["DOCUMENT_URI": "/early"], keep: true)
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        #expect(try connection.readResponse().body == Array("/early".utf8))
        try connection.send(params: ["DOCUMENT_URI": "/later"], keep: true)
        #expect(try connection.readResponse().body == Array("/later".utf8))
        #expect(server.openConnections == 1)
    }

    /// stop() while a request waits on a kept connection (its worker busy with another): it is answered
    /// before `run` returns, and the connection is closed after its answer.
    @Test func stopAnswersRequestsAlreadyWaitingOnKeptConnections() throws {
        let dir = try TempDir()
        let entered = Latch()
        let release = Latch()
        let server = try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64)
        let running = RunningServer(server) { request in
            if request.path == "/slow" {
                entered.signal()
                _ = release.wait(for: 1)
            }
            return Response(status: 200, contentType: "text/plain", body: request.path)
        }
        let kept = try RawFastCGIConnection(unixPath: dir.file("s"))
        try kept.send(params: ["DOCUMENT_URI": "/b1"], keep: true)
        #expect(try kept.readResponse().body == Array("/b1".utf8))
        let slow = try RawFastCGIConnection(unixPath: dir.file("s"))
        try slow.send(params: ["DOCUMENT_URI": "/slow"], keep: true)
        #expect(entered.wait(for: 1))
        // Waits for the only worker; answered whether it arrived before the stop or during the drain.
        try kept.send(params: ["DOCUMENT_URI": "/b2"], keep: true)
        server.stop()
        release.signal()
        #expect(try slow.readResponse().body == Array("/slow".utf8))
        #expect(try kept.readResponse().body == Array("/b2".utf8))
        #expect(running.waitForReturn() != nil)
        // Closed after the answer (right after it, or once idle: DrainTests pin which).
        #expect(slow.closedByPeer(discarding: true))
        #expect(kept.closedByPeer(discarding: true))
    }

    /// Garbage instead of a request: the connection is closed at once, without lingering on the worker.
    @Test func garbageIsClosedWithoutHoldingTheWorker() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64)
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        let garbage = try RawFastCGIConnection(unixPath: dir.file("s"))
        try garbage.write(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(garbage.closedByPeer())
        let next = try RawFastCGIConnection(unixPath: dir.file("s"))
        try next.send(params: ["DOCUMENT_URI": "/ok"], keep: false)
        #expect(try next.readResponse(seconds: 1.5).body == Array("/ok".utf8))
        #expect(server.waitForOpenConnections { $0 == 0 })
    }

    /// Only the responder role is served: an authorizer or filter request is refused with END_REQUEST
    /// FCGI_UNKNOWN_ROLE, its records are ignored, and the connection carries on.
    @Test(arguments: [UInt16(2), 3, 0, 0xffff])
    func otherRolesAreRefusedWithUnknownRole(role: UInt16) throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let server = try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64)
        let running = RunningServer(server, handler: recordingHandler(recorder))
        defer { running.stop() }
        let other = try RawFastCGIConnection(unixPath: dir.file("s"))
        var bytes = RawFastCGIConnection.request(params: ["DOCUMENT_URI": "/role"], keep: true)
        bytes[8] = UInt8(role >> 8)  // BEGIN_REQUEST body: role (2 bytes, big-endian), flags
        bytes[9] = UInt8(role & 0xff)
        try other.write(bytes)
        #expect(try other.readRecord() == .init(type: 3, id: 1, content: [0, 0, 0, 0, 3, 0, 0, 0]))
        try other.send(params: ["DOCUMENT_URI": "/responder"], keep: true)
        #expect(try other.readResponse().body == Array("ok 0".utf8))
        #expect(recorder.requests.map(\.path) == ["/responder"])
    }

    /// A peer that sends part of a request and stalls holds no worker, and is closed at the request timeout; a
    /// request whose body stalls is not handled at all (its body would be cut short).
    @Test func stalledRequestsAreClosedAtTheRequestTimeout() throws {
        let dir = try TempDir()
        let recorder = Recorder()
        let server = try Server(listen: .unix(dir.file("s")), workers: 1, maxBodyBytes: 64,
                                requestTimeout: .milliseconds(300))
        let running = RunningServer(server, handler: recordingHandler(recorder))
        defer { running.stop() }
        let full = RawFastCGIConnection.request(params: ["DOCUMENT_URI": "/stalled", "CONTENT_LENGTH": "10"],
                                                stdin: Array("0123456789".utf8), keep: true)
        let headerOnly = try RawFastCGIConnection(unixPath: dir.file("s"))
        try headerOnly.write(Array(full.prefix(12)))  // inside BEGIN_REQUEST
        #expect(headerOnly.closedByPeer(seconds: 5, discarding: true))
        let bodyCut = try RawFastCGIConnection(unixPath: dir.file("s"))
        try bodyCut.write(Array(full.dropLast(8 + 6)))  // params and the first 4 body bytes, then silence
        #expect(bodyCut.closedByPeer(seconds: 5, discarding: true))
        #expect(recorder.requests.isEmpty)
        let next = try RawFastCGIConnection(unixPath: dir.file("s"))
        try next.send(params: ["DOCUMENT_URI": "/next"], keep: false)
        #expect(try next.readResponse().body == Array("ok 0".utf8))
        #expect(recorder.requests.map(\.path) == ["/next"])
    }

    /// Several workers, many clients at once, kept and unkept connections mixed, descriptor numbers reused
    /// as connections come and go: every request gets its own answer, and no connection is left counted.
    @Test func manyClientsOnKeptAndUnkeptConnectionsAllGetTheirAnswers() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), workers: 3, maxBodyBytes: 64)
        let running = RunningServer(server, handler: pathEcho)
        defer { running.stop() }
        let clients = 8, perClient = 60
        let done = Latch()
        let wrong = Recorder()
        for client in 0..<clients {
            Thread { [path = dir.file("s")] in
                var connection: RawFastCGIConnection?
                for index in 0..<perClient {
                    let keep = (client + index) % 3 != 0
                    let uri = "/c\(client)/\(index)"
                    do {
                        if connection == nil { connection = try RawFastCGIConnection(unixPath: path) }
                        try connection?.send(params: ["DOCUMENT_URI": uri], keep: keep)
                        let body = try connection?.readResponse().body
                        if body != Array(uri.utf8) { wrong.record(Request(params: ["DOCUMENT_URI": uri], body: [])) }
                    } catch {
                        wrong.record(Request(params: ["DOCUMENT_URI": uri], body: []))
                    }
                    if !keep { connection = nil }
                }
                connection = nil
                done.signal()
            }.start()
        }
        #expect(done.wait(for: clients, seconds: 30))
        #expect(wrong.requests.map(\.path) == [])
        #expect(server.waitForOpenConnections { $0 == 0 })
    }

    @Test func stopClosesIdleKeptConnections() throws {
        let dir = try TempDir()
        let server = try Server(listen: .unix(dir.file("s")), workers: 2, maxBodyBytes: 64)
        let running = RunningServer(server, handler: pathEcho)
        let connection = try RawFastCGIConnection(unixPath: dir.file("s"))
        try connection.send(params: ["DOCUMENT_URI": "/x"], keep: true)
        #expect(try connection.readResponse().body == Array("/x".utf8))
        #expect(server.waitForOpenConnections { $0 == 1 })
        #expect(running.stop() != nil)
        #expect(server.openConnections == 0)
        #expect(connection.closedByPeer(discarding: true))  // after the farewell record (DrainTests)
    }
}

/// Answers with the request path as the body.
private let pathEcho: @Sendable (Request) -> Response = { request in
    Response(status: 200, contentType: "text/plain", body: request.path)
}
