// Worker lanes: session checks have workers of their own that sign-ins can never take, and a full or slow
// lane is answered by the server itself instead of leaving requests waiting.
@testable import FastCGI
import Foundation
import Glibc
import Synchronization
import Testing

private typealias Raw = RawFastCGIConnection

/// Lane 1 for `/check...` paths, lane 0 for everything else.
private let byPath: @Sendable (Request) -> Int = { $0.path.hasPrefix("/check") ? 1 : 0 }

private let busy = Response(status: 503, contentType: "text/plain", body: "busy", headers: [("Retry-After", "1")])

/// A handler that blocks until `release` for paths starting with /block, recording who handled what.
private func handler(lane: String, entered: Latch, release: Latch, seen: Trace) -> @Sendable (Request) -> Response {
    { request in
        seen.append("\(lane) \(request.path)")
        if request.path.hasPrefix("/block") {
            entered.signal()
            _ = release.wait(for: 1, seconds: 30)
        }
        return Response(status: 200, contentType: "text/plain", body: "\(lane) \(request.path)")
    }
}

/// Lines appended from any thread, in order.
private final class Trace: Sendable {
    private let storage = Mutex<[String]>([])
    func append(_ line: String) { storage.withLock { $0.append(line) } }
    var lines: [String] { storage.withLock { $0 } }
}

@Suite(.serialized) struct LaneTests {
    /// The issue "protected site never waits": with every default worker held (a sign-in stuck on a lock),
    /// session checks are still answered by their own lane.
    @Test func checksAreAnsweredWhileEveryDefaultWorkerIsHeld() throws {
        let dir = try TempDir()
        let entered = Latch(), release = Latch()
        let seen = Trace()
        let server = try Server(listen: .unix(dir.file("s")),
                                lanes: [Lane(name: "default", workers: 2), Lane(name: "checks", workers: 1)],
                                limits: Limits(maxBodyBytes: 64))
        let running = RunningServer(server, classify: byPath, overloaded: busy,
                                    handlers: [handler(lane: "default", entered: entered, release: release, seen: seen),
                                               handler(lane: "checks", entered: entered, release: release, seen: seen)])
        defer { running.stop() }
        let blocked = try (0..<2).map { _ in try Raw(unixPath: dir.file("s")) }
        for (index, connection) in blocked.enumerated() { try connection.send(params: ["DOCUMENT_URI": "/block\(index)"], keep: true) }
        try #require(entered.wait(for: 2))  // both default workers are held now
        let check = try Raw(unixPath: dir.file("s"))
        for round in 0..<5 {
            try check.send(params: ["DOCUMENT_URI": "/check/\(round)"], keep: true)
            #expect(try check.readResponse().body == Array("checks /check/\(round)".utf8))
        }
        #expect(entered.count == 2 && !release.wait(for: 1, seconds: 0))  // still held while the checks were answered
        release.signal()
        for (index, connection) in blocked.enumerated() {
            #expect(try connection.readResponse().body == Array("default /block\(index)".utf8))
        }
    }

    /// A checks worker never handles a sign-in: a sign-in pipelined behind a check on one connection goes to
    /// the default lane (and waits for it), and a check behind a sign-in to the checks lane.
    @Test func pipelinedRequestsEachGoToTheirOwnLane() throws {
        let dir = try TempDir()
        let entered = Latch(), release = Latch()
        let seen = Trace()
        let server = try Server(listen: .unix(dir.file("s")),
                                lanes: [Lane(name: "default", workers: 1), Lane(name: "checks", workers: 1)],
                                limits: Limits(maxBodyBytes: 64))
        let running = RunningServer(server, classify: byPath, overloaded: busy,
                                    handlers: [handler(lane: "default", entered: entered, release: release, seen: seen),
                                               handler(lane: "checks", entered: entered, release: release, seen: seen)])
        defer { running.stop() }
        let connection = try Raw(unixPath: dir.file("s"))
        try connection.write(Raw.request(params: ["DOCUMENT_URI": "/check/a"], keep: true)
            + Raw.request(params: ["DOCUMENT_URI": "/signin"], keep: true)
            + Raw.request(params: ["DOCUMENT_URI": "/check/b"], keep: true)
            + Raw.request(params: ["DOCUMENT_URI": "/check/c"], keep: true))
        for expected in ["checks /check/a", "default /signin", "checks /check/b", "checks /check/c"] {
            #expect(try connection.readResponse().body == Array(expected.utf8))
        }
        #expect(seen.lines == ["checks /check/a", "default /signin", "checks /check/b", "checks /check/c"])
    }

    /// A full queue is answered by the server with the application's overload response, never dropped.
    @Test func aFullQueueGetsTheOverloadAnswer() throws {
        let dir = try TempDir()
        let entered = Latch(), release = Latch()
        let seen = Trace()
        let reports = Recorder()
        let server = try Server(listen: .unix(dir.file("s")),
                                lanes: [Lane(name: "default", workers: 1, queueLimit: 1, maxWait: .seconds(30))],
                                limits: Limits(maxBodyBytes: 64))
        let running = RunningServer(server, classify: byPath, overloaded: busy,
                                    report: { reports.record(Request(params: ["code": $0.code.name, "detail": $0.detail])) },
                                    handlers: [handler(lane: "default", entered: entered, release: release, seen: seen)])
        defer { running.stop() }
        let holder = try Raw(unixPath: dir.file("s"))
        try holder.send(params: ["DOCUMENT_URI": "/block"], keep: true)
        try #require(entered.wait(for: 1))
        let queued = try Raw(unixPath: dir.file("s"))
        try queued.send(params: ["DOCUMENT_URI": "/queued"], keep: true)
        let refused = try Raw(unixPath: dir.file("s"))
        // The queue holds /queued or the refused one, whichever the dispatcher read first; the other is answered
        // at once with 503, while the worker is still held.
        try refused.send(params: ["DOCUMENT_URI": "/refused"], keep: true)
        let first = try Self.firstAnswer(of: [queued, refused])
        #expect(first.response.headLines.first == "Status: 503 Service Unavailable")
        #expect(first.response.values("Retry-After") == ["1"])
        #expect(release.count == 0)
        release.signal()
        #expect(try holder.readResponse().body == Array("default /block".utf8))
        let other = first.index == 0 ? refused : queued
        #expect(try other.readResponse().headLines.first == "Status: 200 OK")
        #expect(server.statistics.overloaded == 1)
        #expect(reports.requests.map { $0.params["code"] } == ["overloaded"])
        #expect(reports.requests.first?.params["detail"] == "lane default")
    }

    /// A request that waited in its lane's queue longer than `maxWait` gets the overload answer from the
    /// dispatcher, even while every worker of the lane is still held.
    @Test func aRequestWaitingPastMaxWaitIsAnsweredByTheServer() throws {
        let dir = try TempDir()
        let entered = Latch(), release = Latch()
        let seen = Trace()
        let server = try Server(listen: .unix(dir.file("s")),
                                lanes: [Lane(name: "default", workers: 1, maxWait: .milliseconds(200))],
                                limits: Limits(maxBodyBytes: 64))
        let running = RunningServer(server, classify: byPath, overloaded: busy,
                                    handlers: [handler(lane: "default", entered: entered, release: release, seen: seen)])
        defer { running.stop() }
        let holder = try Raw(unixPath: dir.file("s"))
        try holder.send(params: ["DOCUMENT_URI": "/block"], keep: true)
        try #require(entered.wait(for: 1))
        let waiting = try Raw(unixPath: dir.file("s"))
        try waiting.send(params: ["DOCUMENT_URI": "/waits"], keep: true)
        #expect(try waiting.readResponse(seconds: 10).body == Array("busy".utf8))
        #expect(release.count == 0)  // answered while the only worker was still held
        // The connection carries on: its next request waits for the worker again.
        release.signal()
        #expect(try holder.readResponse().body == Array("default /block".utf8))
        try waiting.send(params: ["DOCUMENT_URI": "/again"], keep: true)
        #expect(try waiting.readResponse().body == Array("default /again".utf8))
        #expect(seen.lines == ["default /block", "default /again"])
    }

    @Test func lanesWithoutWorkersOrQueuesAreRefused() {
        for lanes in [[], [Lane(name: "x", workers: 0)], [Lane(name: "x", workers: 1, queueLimit: 0)],
                      [Lane(name: "x", workers: 1, maxWait: .zero)]] {
            #expect(throws: FastCGIError(.badConfiguration)) {
                try Server(listen: .tcp(host: "127.0.0.1", port: 0), lanes: lanes, limits: Limits(maxBodyBytes: 1))
            }
        }
    }

    /// The answer that arrives first on any of `connections`.
    private static func firstAnswer(of connections: [Raw]) throws -> (index: Int, response: CGIResponse) {
        var pending = connections.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
        guard poll(&pending, nfds_t(pending.count), 10_000) > 0,
              let index = pending.firstIndex(where: { $0.revents & Int16(POLLIN) != 0 }) else { throw TestFailure("no answer") }
        return (index, try connections[index].readResponse())
    }
}
