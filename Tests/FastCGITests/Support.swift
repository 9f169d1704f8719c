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

/// A counter that lets a test wait until something happened on another thread.
final class Latch: Sendable {
    private let state = Mutex<Int>(0)
    func signal() { state.withLock { $0 += 1 } }
    var count: Int { state.withLock { $0 } }
    /// Waits until the count reaches `target`; false on timeout.
    func wait(for target: Int, seconds: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while count < target {
            if Date() > deadline { return false }
            usleep(2000)
        }
        return true
    }
}

/// A Server whose `run` is on its own thread.
final class RunningServer: Sendable {
    let server: Server
    private let outcome = Outcome()

    private final class Outcome: Sendable {
        let result = Mutex<Result<Void, FastCGIError>?>(nil)
    }

    init(_ server: Server, handler: @escaping @Sendable (Request) -> Response) {
        self.server = server
        let thread = Thread { [server, outcome] in
            do throws(FastCGIError) {
                try server.run { _ in ClosureHandler(handler) }
                outcome.result.withLock { $0 = .success(()) }
            } catch {
                outcome.result.withLock { $0 = .failure(error) }
            }
        }
        thread.start()
    }

    var hasReturned: Bool { outcome.result.withLock { $0 != nil } }

    /// Waits for `run` to return; nil on timeout.
    func waitForReturn(seconds: Double = 10) -> Result<Void, FastCGIError>? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let done = outcome.result.withLock({ $0 }) { return done }
            usleep(2000)
        }
        return nil
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
final class RawFastCGIConnection {
    let fd: Int32

    init(unixPath: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
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
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw TestFailure("short write") }
    }

    /// Reads records up to END_REQUEST and returns the CGI response from the STDOUT records.
    func readResponse(seconds: Double = 5) throws -> CGIResponse {
        var stdout: [UInt8] = []
        while true {
            let header = try read(count: 8, seconds: seconds)
            let type = header[1]
            let content = Int(header[4]) << 8 | Int(header[5])
            let body = try read(count: content + Int(header[6]), seconds: seconds)
            if type == 6 { stdout += body.prefix(content) }
            if type == 3 { return try CGIResponse(stdout) }
        }
    }

    /// True when the responder closes the connection within `seconds`: no more bytes, then end of file
    /// (with `discarding`, any bytes it still sends first are skipped).
    func closedByPeer(seconds: Double = 5, discarding: Bool = false) -> Bool {
        var byte: UInt8 = 0
        while true {
            var pending = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pending, 1, Int32(seconds * 1000)) == 1 else { return false }
            let got = Glibc.read(fd, &byte, 1)
            if got == 0 { return true }
            if got < 0 || !discarding { return false }
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

    private static func record(type: UInt8, _ content: [UInt8]) -> [UInt8] {
        [1, type, 0, 1, UInt8(content.count >> 8), UInt8(content.count & 0xff), 0, 0] + content
    }

    private static func length(_ count: Int) -> [UInt8] {
        count < 128 ? [UInt8(count)]
            : [UInt8(count >> 24 | 0x80), UInt8(count >> 16 & 0xff), UInt8(count >> 8 & 0xff), UInt8(count & 0xff)]
    }
}
