// Test helpers: temp folders, child processes, a Server running on its own thread, cgi-fcgi as a real peer,
// and a raw FastCGI client for driving connections record by record.
import FastCGI
import Foundation
import Glibc
import Synchronization
import TestSupport

/// A private folder under /tmp (short, so unix socket paths fit in sun_path), removed on deinit.
final class TempDir: Sendable {
    let path: String
    init() throws {
        var template = Array("/tmp/fcgi-test-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw TestFailure("mkdtemp failed")
        }
        path = String(cString: made)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    func file(_ name: String) -> String { path + "/" + name }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

struct ProcessResult {
    let status: Int32
    let stdout: [UInt8]
    let stderr: String
}

/// Runs a program to completion with exactly `environment`, feeding `input` on stdin.
func runProcess(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                input: [UInt8] = []) throws -> ProcessResult {
    let result = try runProgram(executable, arguments, environment: environment, stdin: input)
    return ProcessResult(status: result.status, stdout: result.stdout, stderr: result.stderrText)
}

/// A CGI response as cgi-fcgi prints it (or nginx forwards it): head lines and body.
struct CGIResponse {
    let headLines: [String]
    let body: [UInt8]

    init(_ raw: [UInt8]) throws {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = raw.indices.first(where: { raw[$0...].starts(with: separator) }) else {
            throw TestFailure("no end of head in \(String(decoding: raw, as: UTF8.self))")
        }
        headLines = String(decoding: raw[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        body = Array(raw[(end + 4)...])
    }

    func values(_ name: String) -> [String] {
        headLines.compactMap { line in
            guard let colon = line.firstIndex(of: ":"),
                  line[..<colon].lowercased() == name.lowercased() else { return nil }
            return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
    }
}

/// Sends one request through libfcgi's own client: params are cgi-fcgi's whole environment.
func cgiFCGI(connect address: String, params: [String: String], body: [UInt8] = []) throws -> ProcessResult {
    var environment = params
    if environment["CONTENT_LENGTH"] == nil { environment["CONTENT_LENGTH"] = String(body.count) }
    return try runProcess("/usr/bin/cgi-fcgi", ["-bind", "-connect", address], environment: environment, input: body)
}

/// A handler built from a closure; every worker gets one.
final class ClosureHandler: Handler {
    let body: @Sendable (Request) -> Response
    init(_ body: @escaping @Sendable (Request) -> Response) { self.body = body }
    func handle(_ request: Request) -> Response { body(request) }
}

/// Requests the handlers saw, in arrival order.
final class Recorder: Sendable {
    private let seen = Mutex<[Request]>([])
    func record(_ request: Request) { seen.withLock { $0.append(request) } }
    var requests: [Request] { seen.withLock { $0 } }
}

/// A counter that lets a test wait until something happened on another thread (a condition variable: the
/// waiter wakes when the count changes; the timeout only bounds a failure).
final class Latch: @unchecked Sendable {
    // SAFETY: `value` is only touched with `condition` locked.
    private let condition = NSCondition()
    private var value = 0
    func signal() {
        condition.lock()
        value += 1
        condition.broadcast()
        condition.unlock()
    }
    var count: Int {
        condition.lock()
        defer { condition.unlock() }
        return value
    }
    /// Waits until the count reaches `target`; false on timeout.
    func wait(for target: Int, seconds: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while value < target {
            if !condition.wait(until: deadline) { return value >= target }
        }
        return true
    }
}

/// A Server whose `run` is on its own thread.
final class RunningServer: Sendable {
    let server: Server
    private let outcome = Outcome()

    private final class Outcome: @unchecked Sendable {
        // SAFETY: `result` is only touched with `condition` locked.
        let condition = NSCondition()
        var result: Result<Void, FastCGIError>?
    }

    init(_ server: Server, handler: @escaping @Sendable (Request) -> Response) {
        self.server = server
        start { () throws(FastCGIError) in try server.run { _ in ClosureHandler(handler) } }
    }

    /// Runs `server` with one lane, each worker's handler made by `makeHandler`; `batches` is each request's `Placement.batches`.
    init(_ server: Server, batches: @escaping @Sendable (Request) -> Bool = { _ in true },
         makeHandler: @escaping @Sendable (Int) -> any Handler) {
        self.server = server
        start { () throws(FastCGIError) in
            try server.run(place: { Placement(lane: 0, batches: batches($0)) },
                           overloaded: { _ in Response(status: 503, contentType: "text/plain", body: "overloaded\n") },
                           makeHandler: makeHandler)
        }
    }

    /// Runs `server` with `place` deciding each request's lane and batching, every request answered by `handler`.
    init(_ server: Server, place: @escaping @Sendable (Request) -> Placement, handler: @escaping @Sendable (Request) -> Response) {
        self.server = server
        start { () throws(FastCGIError) in
            try server.run(place: place, overloaded: { _ in Response(status: 503, contentType: "text/plain", body: "overloaded\n") }) { _ in
                ClosureHandler(handler)
            }
        }
    }

    /// Runs `server` with lanes: `classify` picks the lane, and a request of lane N is answered by `handlers[N]`.
    init(_ server: Server, classify: @escaping @Sendable (Request) -> Int, overloaded: Response,
         report: @escaping @Sendable (FastCGIError) -> Void = { _ in },
         handlers: [@Sendable (Request) -> Response]) {
        self.server = server
        start { () throws(FastCGIError) in
            try server.run(place: { Placement(lane: classify($0)) }, overloaded: { _ in overloaded }, report: report) { _ in
                ClosureHandler { request in handlers[classify(request)](request) }
            }
        }
    }

    private func start(_ body: @escaping @Sendable () throws(FastCGIError) -> Void) {
        let thread = Thread { [outcome] in
            let result: Result<Void, FastCGIError>
            do throws(FastCGIError) {
                try body()
                result = .success(())
            } catch {
                result = .failure(error)
            }
            outcome.condition.lock()
            outcome.result = result
            outcome.condition.broadcast()
            outcome.condition.unlock()
        }
        thread.start()
    }

    var hasReturned: Bool {
        outcome.condition.lock()
        defer { outcome.condition.unlock() }
        return outcome.result != nil
    }

    /// Waits for `run` to return; nil on timeout.
    func waitForReturn(seconds: Double = 10) -> Result<Void, FastCGIError>? {
        let deadline = Date().addingTimeInterval(seconds)
        outcome.condition.lock()
        defer { outcome.condition.unlock() }
        while outcome.result == nil {
            if !outcome.condition.wait(until: deadline) { break }
        }
        return outcome.result
    }

    /// stop(), then wait for `run` to return.
    @discardableResult
    func stop() -> Result<Void, FastCGIError>? {
        server.stop()
        return waitForReturn()
    }
}

/// A request handler that records the request and echoes a short summary.
func recordingHandler(_ recorder: Recorder) -> @Sendable (Request) -> Response {
    { request in
        recorder.record(request)
        return Response(status: 200, contentType: "text/plain", body: "ok \(request.body.count)")
    }
}

/// A FastCGI client connection over a unix socket, speaking the records by hand (request id 1, as nginx does).
final class RawFastCGIConnection: @unchecked Sendable {
    // SAFETY: the only state is the descriptor, set once; a test may write on one thread while it reads on
    // another, which a socket allows.
    let fd: Int32

    init(unixPath: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: unixPath.utf8) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw TestFailure("connect \(unixPath) failed")
        }
    }

    deinit { close(fd) }

    /// Sends one responder request (see `request`).
    func send(params: [String: String], stdin: [UInt8] = [], keep: Bool) throws {
        try write(Self.request(params: params, stdin: stdin, keep: keep))
    }

    /// The records of one responder request: BEGIN_REQUEST (with FCGI_KEEP_CONN when `keep`), the params,
    /// the stdin in one record, then the empty STDIN record that ends it.
    static func request(params: [String: String], stdin: [UInt8] = [], keep: Bool) -> [UInt8] {
        var bytes = record(type: 1, [0, 1, keep ? 1 : 0, 0, 0, 0, 0, 0])
        var pairs: [UInt8] = []
        for (name, value) in params.sorted(by: { $0.key < $1.key }) {
            pairs += length(name.utf8.count) + length(value.utf8.count) + Array(name.utf8) + Array(value.utf8)
        }
        if !pairs.isEmpty { bytes += record(type: 4, pairs) }
        bytes += record(type: 4, [])
        if !stdin.isEmpty { bytes += record(type: 5, stdin) }
        bytes += record(type: 5, [])
        return bytes
    }

    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw TestFailure("write failed: errno \(errno)") }
            offset += written
        }
    }

    /// Reads records up to END_REQUEST and returns the CGI response from the STDOUT records.
    func readResponse(seconds: Double = 5) throws -> CGIResponse {
        var stdout: [UInt8] = []
        while true {
            let record = try readRecord(seconds: seconds)
            if record.type == 6 { stdout += record.content }
            if record.type == 3 { return try CGIResponse(stdout) }
        }
    }

    /// True when the responder closes the connection within `seconds`: no more bytes, then end of file or a
    /// reset (with `discarding`, any bytes it still sends first are skipped).
    func closedByPeer(seconds: Double = 5, discarding: Bool = false) -> Bool {
        var byte: UInt8 = 0
        while true {
            var pending = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pending, 1, Int32(seconds * 1000)) == 1 else { return false }
            let got = Glibc.read(fd, &byte, 1)
            if got == 0 { return true }
            // A close with our bytes unread arrives as a reset: closed all the same.
            if got < 0 { return errno == ECONNRESET }
            if !discarding { return false }
        }
    }

    private func read(count: Int, seconds: Double) throws -> [UInt8] {
        var bytes: [UInt8] = []
        while bytes.count < count {
            var pending = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pending, 1, Int32(seconds * 1000)) == 1 else { throw TestFailure("no answer in \(seconds) s") }
            var chunk = [UInt8](repeating: 0, count: count - bytes.count)
            let got = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            guard got > 0 else { throw TestFailure("connection closed mid-response") }
            bytes += chunk.prefix(got)
        }
        return bytes
    }

    /// One record: header (version 1), content, then `padding` bytes of padding.
    static func record(type: UInt8, id: UInt16 = 1, _ content: [UInt8], padding: UInt8 = 0) -> [UInt8] {
        [1, type, UInt8(id >> 8), UInt8(id & 0xff), UInt8(content.count >> 8), UInt8(content.count & 0xff), padding, 0]
            + content + [UInt8](repeating: 0xAA, count: Int(padding))
    }

    /// Name-value pairs as PARAMS or GET_VALUES carry them, in the order given.
    static func pairs(_ list: [(String, String)]) -> [UInt8] {
        list.reduce(into: []) { bytes, pair in
            bytes += length(pair.0.utf8.count) + length(pair.1.utf8.count) + Array(pair.0.utf8) + Array(pair.1.utf8)
        }
    }

    /// BEGIN_REQUEST for `role` with FCGI_KEEP_CONN when `keep`.
    static func begin(id: UInt16 = 1, role: UInt16 = 1, keep: Bool, padding: UInt8 = 0) -> [UInt8] {
        record(type: 1, id: id, [UInt8(role >> 8), UInt8(role & 0xff), keep ? 1 : 0, 0, 0, 0, 0, 0], padding: padding)
    }

    /// A record as read back: type, request id, content.
    struct Record: Equatable {
        let type: UInt8
        let id: UInt16
        let content: [UInt8]
    }

    /// Reads one whole record.
    func readRecord(seconds: Double = 5) throws -> Record {
        let header = try read(count: 8, seconds: seconds)
        let content = Int(header[4]) << 8 | Int(header[5])
        let body = try read(count: content + Int(header[6]), seconds: seconds)
        return Record(type: header[1], id: UInt16(header[2]) << 8 | UInt16(header[3]), content: Array(body.prefix(content)))
    }

    static func length(_ count: Int) -> [UInt8] {
        count < 128 ? [UInt8(count)]
            : [UInt8(count >> 24 | 0x80), UInt8(count >> 16 & 0xff), UInt8(count >> 8 & 0xff), UInt8(count & 0xff)]
    }
}

/// Waits for a condition that a file-system or process event makes true (a socket file vanishing), checking
/// it every few milliseconds; false if it is still false after `seconds` (the bound of a failure).
func eventually(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline { return false }
        var pause = timespec(tv_sec: 0, tv_nsec: 2_000_000)
        nanosleep(&pause, nil)
    }
    return true
}
