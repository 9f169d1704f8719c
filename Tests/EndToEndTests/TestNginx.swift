// A second nginx for tests that need locations of their own beside a stack's (built from the stack's copy of the
// shipped snippets), on a unix socket; and stand-in applications behind it that answer with the identity headers
// they received, over HTTP, FastCGI or uwsgi.
import Foundation
import Testing
import TestSupport

/// nginx in the foreground as a child of the test, on `http` (the body of its `http { }`, given the folder nginx
/// runs in); its pid file lies where scripts/with-test-db stops whatever a crashed run left.
final class TestNginx: @unchecked Sendable {
    // SAFETY: set in init, the pid cleared only by stop(); a test uses its instance from one task.
    let directory: String
    private var pid: pid_t?

    /// The socket `http` should listen on (`listen unix:DIRECTORY/http.sock;`), for `request`.
    var socket: String { directory + "/http.sock" }
    var configuration: String { directory + "/nginx.conf" }

    init(_ name: String, http body: (_ directory: String) -> String) throws {
        let root = ProcessInfo.processInfo.environment["TS_TEST_RUNDIR"] ?? NSTemporaryDirectory()
        directory = root + "/e2e-\(name)-\(getpid())/nginx"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory + "/tmp", withIntermediateDirectories: true)
        let user = geteuid() == 0 ? "user root root;" : ""
        try """
            \(user)
            daemon off;
            worker_processes 1;
            pid \(directory)/nginx.pid;
            error_log \(directory)/error.log warn;
            events { worker_connections 256; }
            http {
                access_log \(directory)/access.log;
                client_body_temp_path \(directory)/tmp/body;
                proxy_temp_path \(directory)/tmp/proxy;
                fastcgi_temp_path \(directory)/tmp/fastcgi;
                uwsgi_temp_path \(directory)/tmp/uwsgi;
                scgi_temp_path \(directory)/tmp/scgi;
            \(body(directory))
            }
            """.write(toFile: configuration, atomically: true, encoding: .utf8)
    }

    /// `nginx -t`: nil when the configuration is valid, else what nginx said.
    func check() throws -> String? {
        let result = try runProgram("/usr/sbin/nginx", ["-t", "-q", "-p", directory, "-c", configuration, "-e", directory + "/error.log"],
                                    environment: ProcessInfo.processInfo.environment)
        return result.status == 0 ? nil : result.stderrText
    }

    func start() throws {
        if let problem = try check() { throw StackError("nginx -t: \(problem)") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let started = try spawnProgram("/usr/sbin/nginx", ["-p", directory, "-c", configuration, "-e", directory + "/error.log"],
                                       environment: ProcessInfo.processInfo.environment, actions: &actions)
        pid = started
        try waitForSocket(socket, process: started, what: "nginx (\(directory)/error.log)")
    }

    func stop() {
        guard let running = pid else { return }
        kill(running, SIGQUIT)
        var status: Int32 = 0
        while waitpid(running, &status, 0) == -1 && errno == EINTR {}
        pid = nil
    }

    deinit { stop() }

    /// One request to this nginx over its socket.
    func request(_ method: String, _ path: String, headers: [String] = []) throws -> Answer {
        var arguments = ["-s", "--unix-socket", socket, "-X", method, "-D", "-", "-o", "-", "--max-time", "20", "http://localhost\(path)"]
        for header in headers { arguments += ["-H", header] }
        return try Answer(curlOutput: try run("/usr/bin/curl", arguments).stdout)
    }
}

/// Waits (bounded) for a unix socket to appear, while the process that makes it is still running.
func waitForSocket(_ path: String, process: pid_t, what: String) throws {
    let deadline = Date().addingTimeInterval(20)
    while !FileManager.default.fileExists(atPath: path) {
        var status: Int32 = 0
        guard waitpid(process, &status, WNOHANG) == 0 else { throw StackError("\(what) exited before listening") }
        guard Date() < deadline else { throw StackError("\(what) did not listen on \(path)") }
        usleep(10_000)
    }
}

/// A stand-in application on a unix socket that answers every request with a JSON object of the identity
/// headers it received (absent ones absent): `{"X-User-Id": "42", ...}` by header name, for every upstream kind.
final class IdentityRecorder: @unchecked Sendable {
    // SAFETY: set in init, the pid cleared only by stop(); a test uses its instance from one task.
    let socket: String
    private var pid: pid_t?

    /// The application: HTTP/1.1 (`proxy_pass`), FastCGI or uwsgi, one request per connection.
    private static let script = #"""
    import json, os, socket, struct, sys, threading, time
    protocol, path = sys.argv[1], sys.argv[2]
    NAMES = {"x-user-id": "X-User-Id", "x-user-sub": "X-User-Sub", "x-user-email": "X-User-Email",
             "x-user-email-verified": "X-User-Email-Verified"}

    def exact(conn, n):
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def identity(pairs):  # header names, or CGI names (HTTP_X_USER_ID)
        seen = {}
        for name, value in pairs:
            key = name.lower()
            if key.startswith("http_"):
                key = key[5:].replace("_", "-")
            if key in NAMES:
                seen.setdefault(NAMES[key], []).append(value)
        return json.dumps({k: v[0] if len(v) == 1 else v for k, v in seen.items()}).encode()

    def fastcgi(conn):
        params = b""
        while True:
            _, kind, rid, clen, plen, _ = struct.unpack("!BBHHBB", exact(conn, 8))
            content = exact(conn, clen)
            exact(conn, plen)
            if kind == 4:
                params += content
            elif kind == 5 and clen == 0:
                break
        pairs, i = [], 0
        def length():
            nonlocal i
            if params[i] < 128:
                i += 1
                return params[i - 1]
            i += 4
            return struct.unpack("!I", params[i - 4:i])[0] & 0x7fffffff
        while i < len(params):
            n, v = length(), length()
            pairs.append((params[i:i + n].decode(), params[i + n:i + n + v].decode()))
            i += n + v
        out = b"Status: 200 OK\r\nContent-Type: application/json\r\n\r\n" + identity(pairs)
        record = lambda kind, body: struct.pack("!BBHHBB", 1, kind, rid, len(body), 0, 0) + body
        conn.sendall(record(6, out) + record(6, b"") + record(3, b"\0" * 8))

    def uwsgi(conn):
        _, size, _ = struct.unpack("<BHB", exact(conn, 4))
        data, pairs, i = exact(conn, size), [], 0
        while i < size:
            n = struct.unpack("<H", data[i:i + 2])[0]
            name = data[i + 2:i + 2 + n].decode()
            i += 2 + n
            m = struct.unpack("<H", data[i:i + 2])[0]
            pairs.append((name, data[i + 2:i + 2 + m].decode()))
            i += 2 + m
        reply(conn, identity(pairs))

    def http(conn):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                raise EOFError
            data += chunk
        lines = data.split(b"\r\n\r\n")[0].decode().split("\r\n")[1:]
        reply(conn, identity([tuple(part.strip() for part in line.split(":", 1)) for line in lines if ":" in line]))

    def reply(conn, body):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def serve(conn):
        try:
            {"fastcgi": fastcgi, "uwsgi": uwsgi, "http": http}[protocol](conn)
        except (EOFError, OSError):
            pass
        finally:
            conn.close()

    def watch_parent(parent):  # the test is gone (its child reparented): go too
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    server = socket.socket(socket.AF_UNIX)
    server.bind(path + ".tmp")
    server.listen(64)
    os.rename(path + ".tmp", path)  # appears once it accepts
    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
    """#

    enum Wire: String { case http, fastcgi, uwsgi }

    init(_ wire: Wire, socket: String) throws {
        self.socket = socket
        try? FileManager.default.removeItem(atPath: socket)
        let script = socket + ".py"
        try Self.script.write(toFile: script, atomically: true, encoding: .utf8)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, socket + ".log", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let started = try spawnProgram("/usr/bin/python3", [script, wire.rawValue, socket],
                                       environment: ProcessInfo.processInfo.environment, actions: &actions)
        pid = started
        try waitForSocket(socket, process: started, what: "the \(wire.rawValue) stand-in (\(socket).log)")
    }

    func stop() {
        guard let running = pid else { return }
        kill(running, SIGKILL)
        var status: Int32 = 0
        while waitpid(running, &status, 0) == -1 && errno == EINTR {}
        pid = nil
    }

    deinit { stop() }
}
