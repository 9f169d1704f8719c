// A private HTTP server on 127.0.0.1 that records every request (method, path, headers, body) and answers what
// the test set for its path: a stand-in for an API the code under test calls (Google's RISC API).
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
    private let process: Mutex<Process?>

    private static let script = #"""
    import base64, http.server, json, os, sys, threading, time
    root = sys.argv[1]
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            record = {"method": self.command, "path": self.path, "body": base64.b64encode(body).decode(),
                      "headers": {k.lower(): v for k, v in self.headers.items()}}
            with lock:  # recorded before answering: a client that has its answer sees its request recorded
                with open(os.path.join(root, "requests.jsonl"), "a") as f:
                    f.write(json.dumps(record) + "\n")
            name = self.path.replace("/", "_")
            try:
                with open(os.path.join(root, name + ".status")) as f:
                    status = int(f.read())
            except FileNotFoundError:
                status = 200
            try:
                with open(os.path.join(root, name + ".body"), "rb") as f:
                    reply = f.read()
            except FileNotFoundError:
                reply = b"{}"
            try:
                with open(os.path.join(root, name + ".delay")) as f:
                    time.sleep(float(f.read()))  # an endpoint that hangs (the client's timeout comes first)
            except FileNotFoundError:
                pass
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
        do_GET = answer
        do_POST = answer
        def log_message(self, *args):
            pass

    def watch_parent():  # stdin is a pipe from the test process: end of file means it is gone
        sys.stdin.read()
        os._exit(0)
    threading.Thread(target=watch_parent, daemon=True).start()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
    """#

    public init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("recording-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try Self.script.write(toFile: root + "/server.py", atomically: true, encoding: .utf8)
        let process = Process()
        // The system python3: a version manager's shim would run it as a grandchild this cannot kill.
        process.executableURL = URL(fileURLWithPath: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "/usr/local/bin/python3")
        process.arguments = [root + "/server.py", root]
        process.standardInput = Pipe()
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        var line: [UInt8] = []
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line += chunk
        }
        guard let port = Int(String(decoding: line.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)), port > 0 else {
            process.terminate()
            throw ProgramError("the recording server did not start")
        }
        self.port = port
        self.process = Mutex(process)
    }

    deinit {
        process.withLock { process in
            if let running = process {
                kill(running.processIdentifier, SIGKILL)
                running.waitUntilExit()
            }
            process = nil
        }
        try? FileManager.default.removeItem(atPath: root)
    }

    public var base: String { "http://127.0.0.1:\(port)" }

    /// What `path` answers from the next request on, after holding each request `delay` seconds.
    public func answer(_ path: String, status: Int, body: String, delay: Double = 0) throws {
        let name = path.replacingOccurrences(of: "/", with: "_")
        try String(status).write(toFile: root + "/" + name + ".status", atomically: true, encoding: .utf8)
        try body.write(toFile: root + "/" + name + ".body", atomically: true, encoding: .utf8)
        try String(delay).write(toFile: root + "/" + name + ".delay", atomically: true, encoding: .utf8)
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
}
