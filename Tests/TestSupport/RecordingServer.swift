// A private HTTP(S) server on 127.0.0.1 that records every request (method, path, headers, body) and answers
// what the test set for its path (body, status, headers, a delay): a stand-in for the APIs the code under test
// calls (Google's keys, the RISC API). A Python script that reports its port on stdout.
import Foundation
import Synchronization

public final class RecordingServer: Sendable {
    public struct Recorded: Sendable {
        public var method: String
        public var path: String
        /// Header names in lower case.
        public var headers: [String: String]
        public var body: [UInt8]
    }

    public let root: String
    public let port: Int
    /// With `tls`, it serves https with a fresh self-signed certificate for 127.0.0.1 (this is its PEM file).
    public let certificate: String?
    private let process: Mutex<Process?>

    /// The server's logic; written into the temp folder so test targets need no resource files. The answer
    /// for path `/a/b` is configured by files in `<root>/a/b/` (see `set`).
    private static let script = #"""
    import base64, http.server, json, os, ssl, sys, threading, time
    root = sys.argv[1]
    lock = threading.Lock()
    counts = {}

    def put(path, text):
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.rename(path + ".tmp", path)

    def read(name, what, default=None):
        try:
            with open(os.path.join(root, name, what), "rb") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError):
            return default

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            name = self.path.strip("/").split("?")[0] or "index"
            record = {"method": self.command, "path": self.path, "body": base64.b64encode(body).decode(),
                      "headers": {k.lower(): v for k, v in self.headers.items()}}
            # Recorded and counted before answering: a client that has its answer sees its request recorded.
            with lock:
                with open(os.path.join(root, "requests.jsonl"), "a") as f:
                    f.write(json.dumps(record) + "\n")
                counts[name] = counts.get(name, 0) + 1
                put(os.path.join(root, name.replace("/", "_") + ".count"), str(counts[name]))
            delay = read(name, "delay")
            if delay:
                time.sleep(float(delay))  # an endpoint that hangs (the client's timeout comes first)
            reply = read(name, "body", b"")
            self.send_response(int(read(name, "status", b"200")))
            headers = [line.split(":", 1) for line in (read(name, "headers", b"") or b"").decode().splitlines() if ":" in line]
            for key, value in headers:
                self.send_header(key.strip(), value.strip())
            if not any(key.strip().lower() == "content-type" for key, _ in headers):
                self.send_header("Content-Type", "application/json")
            if read(name, "nolength") is None:
                self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            try:
                self.wfile.write(reply)
            except (BrokenPipeError, ConnectionResetError):
                pass
        do_GET = answer
        do_POST = answer

        def log_message(self, *args):
            pass

    def watch_parent():  # stdin is a pipe from the test process: end of file means it is gone, so go too
        sys.stdin.read()
        os._exit(0)
    threading.Thread(target=watch_parent, daemon=True).start()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if len(sys.argv) > 3:  # TLS with the given certificate and key
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[2], sys.argv[3])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)  # the test reads the port from this line
    server.serve_forever()
    """#

    public init(tls: Bool = false) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("recording-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try Self.script.write(toFile: root + "/server.py", atomically: true, encoding: .utf8)
        var arguments = [root + "/server.py", root]
        if tls {
            let made = try runProgram("/usr/bin/openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                                                           "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                                                           "-keyout", root + "/key.pem", "-out", root + "/cert.pem"],
                                      environment: ProcessInfo.processInfo.environment)
            guard made.status == 0 else { throw ProgramError("openssl req failed: \(made.stderrText)") }
            arguments += [root + "/cert.pem", root + "/key.pem"]
            certificate = root + "/cert.pem"
        } else {
            certificate = nil
        }
        let process = Process()
        // The system python3: a version manager's shim would run it as a grandchild this cannot kill.
        process.executableURL = URL(fileURLWithPath: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "/usr/local/bin/python3")
        process.arguments = arguments
        process.standardInput = Pipe()
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        // The port arrives as the script's first line; end of file (the script died) leaves it 0.
        var line: [UInt8] = []
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line += chunk
        }
        guard let port = Int(String(decoding: line.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)), port > 0 else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw ProgramError("the recording server did not start")
        }
        self.port = port
        self.process = Mutex(process)
    }

    deinit { stop() }

    /// Kills the server (SIGKILL: SIGTERM may arrive blocked, the test runner's mask is inherited) and removes
    /// its folder.
    public func stop() {
        process.withLock { process in
            guard let running = process else { return }
            kill(running.processIdentifier, SIGKILL)
            running.waitUntilExit()
            process = nil
        }
        try? FileManager.default.removeItem(atPath: root)
    }

    public var base: String { "\(certificate == nil ? "http" : "https")://127.0.0.1:\(port)" }

    /// The URL of `path` (with or without its leading slash).
    public func url(_ path: String) -> String { base + "/" + path.drop { $0 == "/" } }

    /// What `path` answers from the next request on: `body` (none when nil), `status` (200 when nil), extra
    /// header lines ("Name: value"; `Content-Type: application/json` unless one is given), after holding the
    /// request `delay` seconds, with or without a Content-Length.
    public func set(_ path: String, body: String? = nil, status: Int? = nil, headers: [String] = [], delay: Double? = nil,
                    sendLength: Bool = true) throws {
        let folder = root + "/" + Self.name(path)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        func put(_ file: String, _ text: String?) throws {
            let path = folder + "/" + file
            if let text { try text.write(toFile: path, atomically: true, encoding: .utf8) }
            else { try? FileManager.default.removeItem(atPath: path) }
        }
        try put("body", body)
        try put("status", status.map(String.init))
        try put("headers", headers.joined(separator: "\n"))
        try put("delay", delay.map { String($0) })
        try put("nolength", sendLength ? nil : "1")
    }

    /// What `path` answers from the next request on, after holding each request `delay` seconds.
    public func answer(_ path: String, status: Int, body: String, delay: Double = 0) throws {
        try set(path, body: body, status: status, delay: delay > 0 ? delay : nil)
    }

    /// How many requests `path` (its query aside) has received.
    public func count(_ path: String) -> Int {
        let file = root + "/" + Self.name(path).replacingOccurrences(of: "/", with: "_") + ".count"
        return (try? String(contentsOfFile: file, encoding: .utf8)).flatMap { Int($0) } ?? 0
    }

    /// Every request so far, oldest first.
    public var requests: [Recorded] {
        guard let text = try? String(contentsOfFile: root + "/requests.jsonl", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return Recorded(method: object["method"] as? String ?? "", path: object["path"] as? String ?? "",
                            headers: object["headers"] as? [String: String] ?? [:],
                            body: Data(base64Encoded: object["body"] as? String ?? "").map { [UInt8]($0) } ?? [])
        }
    }

    private static func name(_ path: String) -> String {
        let trimmed = path.drop { $0 == "/" }
        return String(trimmed.prefix { $0 != "?" })
    }
}
