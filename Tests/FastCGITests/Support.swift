// Test helpers: temp folders, child processes, a Server running on its own thread, and cgi-fcgi as a real peer.
import FastCGI
import Foundation
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
