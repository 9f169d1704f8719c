// Batching lanes: the requests of a lane with `batch` > 1 that are ready together reach the handler in one
// `handle(batch:)` call, each still answered on its own connection, and never more than `batch` at once.
@testable import FastCGI
import Foundation
import Synchronization
import Testing

private typealias Raw = RawFastCGIConnection

/// Answers `/block` after `release`, and every other request with its path and the size of the call it came in.
private final class BatchHandler: Handler {
    let shared: Shared
    /// Responses to leave out of each batch's answer (a handler fault).
    let shortBy: Int

    init(shared: Shared, shortBy: Int) {
        self.shared = shared
        self.shortBy = shortBy
    }

    func handle(_ request: Request) -> Response {
        shared.sizes.withLock { $0.append(1) }
        return answer(request, size: 1)
    }

    func handle(batch: [Request]) -> [Response] {
        shared.sizes.withLock { $0.append(batch.count) }
        return Array(batch.map { answer($0, size: batch.count) }.dropLast(shortBy))
    }

    private func answer(_ request: Request, size: Int) -> Response {
        if request.path == "/block" {
            shared.entered.signal()
            _ = shared.release.wait(for: 1, seconds: 30)
        }
        return Response(status: 200, contentType: "text/plain", body: "\(request.path) in \(size)")
    }
}

/// Handlers shared by every worker, so the test sees every call.
private final class Shared: Sendable {
    let entered = Latch(), release = Latch()
    let sizes = Mutex<[Int]>([])
}

@Suite(.serialized) struct BatchTests {
    /// A server whose only lane batches up to `batch` requests, with one slot: while `/block` holds it, the
    /// requests that arrive wait in the lane's queue, and the next run takes them together.
    private static func serve(_ dir: TempDir, batch: Int, shortBy: Int = 0, shared: Shared) throws -> RunningServer {
        let server = try Server(listen: .unix(dir.file("s")),
                                lanes: [Lane(name: "checks", workers: 1, queueLimit: 64, maxWait: .seconds(30), batch: batch)],
                                limits: Limits(maxBodyBytes: 64))
        return RunningServer(server, makeHandler: { _ in
            BatchHandler(shared: shared, shortBy: shortBy)
        })
    }

    /// Sends `/block`, waits until it holds the lane, then sends `/r0`... on connections of their own and
    /// waits until all of them are queued.
    private static func queueBehindBlock(_ dir: TempDir, _ server: Server, count: Int, shared: Shared) throws -> (Raw, [Raw]) {
        let holder = try Raw(unixPath: dir.file("s"))
        try holder.send(params: ["DOCUMENT_URI": "/block"], keep: true)
        try #require(shared.entered.wait(for: 1))
        var queued: [Raw] = []
        for index in 0..<count {
            let connection = try Raw(unixPath: dir.file("s"))
            try connection.send(params: ["DOCUMENT_URI": "/r\(index)"], keep: true)
            queued.append(connection)
        }
        try #require(eventually { server.laneUsage.first?.waiting == count })
        return (holder, queued)
    }

    @Test func requestsWaitingTogetherAreHandledInOneCallEachOnItsOwnConnection() throws {
        let dir = try TempDir()
        let shared = Shared()
        let running = try Self.serve(dir, batch: 8, shared: shared)
        defer { running.stop() }
        let (holder, queued) = try Self.queueBehindBlock(dir, running.server, count: 5, shared: shared)
        shared.release.signal()
        #expect(try holder.readResponse().body == Array("/block in 1".utf8))
        for (index, connection) in queued.enumerated() {
            #expect(try connection.readResponse().body == Array("/r\(index) in 5".utf8))
        }
        #expect(shared.sizes.withLock { $0 } == [1, 5])
        // The connections carry on: the next request on one of them is answered alone.
        try queued[2].send(params: ["DOCUMENT_URI": "/again"], keep: true)
        #expect(try queued[2].readResponse().body == Array("/again in 1".utf8))
        #expect(eventually { running.server.laneUsage.first?.running == 0 })
    }

    @Test func aBatchIsNeverLargerThanTheLaneSays() throws {
        let dir = try TempDir()
        let shared = Shared()
        let running = try Self.serve(dir, batch: 2, shared: shared)
        defer { running.stop() }
        let (holder, queued) = try Self.queueBehindBlock(dir, running.server, count: 5, shared: shared)
        shared.release.signal()
        _ = try holder.readResponse()
        let bodies = try queued.map { try String(decoding: $0.readResponse().body, as: UTF8.self) }
        #expect(bodies == ["/r0 in 2", "/r1 in 2", "/r2 in 2", "/r3 in 2", "/r4 in 1"])
        #expect(shared.sizes.withLock { $0 } == [1, 2, 2, 1])
    }

    @Test func aLaneThatDoesNotBatchHandsRequestsOverOneAtATime() throws {
        let dir = try TempDir()
        let shared = Shared()
        let running = try Self.serve(dir, batch: 1, shared: shared)
        defer { running.stop() }
        let (holder, queued) = try Self.queueBehindBlock(dir, running.server, count: 3, shared: shared)
        shared.release.signal()
        _ = try holder.readResponse()
        for (index, connection) in queued.enumerated() {
            #expect(try connection.readResponse().body == Array("/r\(index) in 1".utf8))
        }
        #expect(shared.sizes.withLock { $0 } == [1, 1, 1, 1])
    }

    /// Fail closed: a handler that answers fewer requests than it was given leaves none unanswered; the
    /// requests without an answer get the 500 and a report.
    @Test func requestsTheHandlerLeftUnansweredGetA500() throws {
        let dir = try TempDir()
        let shared = Shared()
        let running = try Self.serve(dir, batch: 8, shortBy: 1, shared: shared)
        defer { running.stop() }
        let (holder, queued) = try Self.queueBehindBlock(dir, running.server, count: 3, shared: shared)
        shared.release.signal()
        _ = try holder.readResponse()
        #expect(try queued[0].readResponse().body == Array("/r0 in 3".utf8))
        #expect(try queued[1].readResponse().body == Array("/r1 in 3".utf8))
        #expect(try queued[2].readResponse().headLines.first == "Status: 500 Internal Server Error")
        #expect(running.server.statistics.invalidResponses == 1)
    }

    @Test(arguments: [0, 1025])
    func aBatchOutsideItsRangeIsRefused(batch: Int) {
        #expect(throws: FastCGIError(.badConfiguration)) {
            try Server(listen: .unix("/nonexistent/s"), lanes: [Lane(name: "checks", workers: 1, batch: batch)],
                       limits: Limits(maxBodyBytes: 64))
        }
    }
}
