// A second nginx for tests that need locations of their own beside a stack's (built from the stack's copy of the
// shipped snippets), on a unix socket.
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
