// A private HTTP server on 127.0.0.1 for the key-cache tests: a Python script that serves what files in a temp
// folder say (body, status, headers, delay), counts the requests per path, and reports its port on stdout.
import Foundation
import Synchronization
import Testing

/// One running server; `stop()` (or deinit) kills it. Paths are `/<name>`, configured by `set(...)`.
final class KeyCacheTestServer: Sendable {
    let root: String
    let port: Int
    private let process: Mutex<Process?>

    /// The server's logic; written into the temp folder so the test target needs no resource files.
    private static let script = #"""
    import http.server, os, ssl, sys, threading, time
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
        except FileNotFoundError:
            return default

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            name = self.path.strip("/").split("?")[0] or "index"
            with lock:  # counted before answering: a client that has its answer sees its request counted
                counts[name] = counts.get(name, 0) + 1
                put(os.path.join(root, name + ".count"), str(counts[name]))
            delay = read(name, "delay")
            if delay:
                time.sleep(float(delay))
            body = read(name, "body", b"")
            status = int(read(name, "status", b"200"))
            self.send_response(status)
            for line in (read(name, "headers", b"") or b"").decode().splitlines():
                if ":" in line:
                    key, value = line.split(":", 1)
                    self.send_header(key.strip(), value.strip())
            if read(name, "nolength") is None:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args):
            pass

    def watch_parent():  # stdin is a pipe from the test process: EOF means it is gone, so go too
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

    /// With `tls`, it serves https with a fresh self-signed certificate for 127.0.0.1 (`certificate` is its PEM).
    let certificate: String?

    init(tls: Bool = false) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("keycache-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try Self.script.write(toFile: root + "/server.py", atomically: true, encoding: .utf8)
        var arguments = [root + "/server.py", root]
        if tls {
            let openssl = Process()
            openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            openssl.arguments = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                                 "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", root + "/key.pem", "-out", root + "/cert.pem"]
            openssl.standardOutput = FileHandle.nullDevice
            openssl.standardError = FileHandle.nullDevice
            try openssl.run()
            openssl.waitUntilExit()
            arguments += [root + "/cert.pem", root + "/key.pem"]
            certificate = root + "/cert.pem"
        } else {
            certificate = nil
        }
        let process = Process()
        // The system python3 if there is one: a version-manager shim would run it as a grandchild we cannot kill.
        let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "/usr/local/bin/python3"
        process.executableURL = URL(fileURLWithPath: python)
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
        let port = Int(String(decoding: line.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)) ?? 0
        guard port > 0 else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw ServerDidNotStart()
        }
        self.port = port
        self.process = Mutex(process)
    }

    struct ServerDidNotStart: Error {}

    deinit { stop() }

    func url(_ name: String) -> String { "\(certificate == nil ? "http" : "https")://127.0.0.1:\(port)/\(name)" }

    /// Configures `/<name>`: what it answers from the next request on.
    func set(_ name: String, body: String? = nil, status: Int? = nil, headers: [String] = [], delay: Double? = nil,
             sendLength: Bool = true) throws {
        let folder = root + "/" + name
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

    /// How many requests `/<name>` has received.
    func count(_ name: String) -> Int {
        (try? String(contentsOfFile: root + "/" + name + ".count", encoding: .utf8)).flatMap { Int($0) } ?? 0
    }

    func stop() {
        process.withLock { process in
            guard let running = process else { return }
            kill(running.processIdentifier, SIGKILL)  // SIGTERM may arrive blocked: the test runner's mask is inherited
            running.waitUntilExit()
            process = nil
        }
        try? FileManager.default.removeItem(atPath: root)
    }
}
