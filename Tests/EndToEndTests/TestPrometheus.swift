// A private Debian Prometheus for the end-to-end tests: its own configuration, data folder and loopback port,
// never the system's service (which the `prometheus` package starts on hosts with systemd, on port 9090).
import Foundation
import TestSupport

final class TestPrometheus {
    static let binary = "/usr/bin/prometheus"
    let port: Int
    let directory: URL
    private var pid: pid_t?

    /// Starts Prometheus with `configuration` (YAML) in `directory` and returns once it answers `/-/ready`. It runs
    /// under `timeout`, so a test run that dies without stopping it does not leave it behind for long.
    init(configuration: String, directory: URL) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else { throw StackError("\(Self.binary) is missing: run `make deps`") }
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let configurationPath = directory.appendingPathComponent("prometheus.yml").path
        try configuration.write(toFile: configurationPath, atomically: true, encoding: .utf8)
        var lastLog = ""
        // A port another test's nginx or a stray process holds makes Prometheus exit at once: take another.
        for _ in 0..<5 {
            let port = Stack.randomPorts() + 1
            let data = directory.appendingPathComponent("data-\(port)").path
            let logPath = directory.appendingPathComponent("prometheus-\(port).log").path
            let pid = try Self.spawn(["/usr/bin/timeout", "120", Self.binary, "--config.file=\(configurationPath)",
                                      "--storage.tsdb.path=\(data)", "--web.listen-address=127.0.0.1:\(port)"], log: logPath)
            if try Self.waitReady(pid: pid, port: port) {
                self.port = port
                self.pid = pid
                return
            }
            lastLog = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        }
        throw StackError("Prometheus did not start: \(lastLog)")
    }

    private static func spawn(_ command: [String], log: String) throws -> pid_t {
        let fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StackError("cannot open \(log)") }
        defer { close(fd) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, fd, 1)
        posix_spawn_file_actions_adddup2(&actions, fd, 2)
        return try spawnProgram(command[0], Array(command.dropFirst()), environment: ProcessInfo.processInfo.environment, actions: &actions)
    }

    /// True once `/-/ready` answers 200; false when the process exited first (a port taken, say).
    private static func waitReady(pid: pid_t, port: Int) throws -> Bool {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid { return false }
            let answer = try run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2",
                                                   "http://127.0.0.1:\(port)/-/ready"])
            if answer.stdout == "200" { return true }
            usleep(50_000)
        }
        throw StackError("Prometheus on port \(port) was not ready within 30 s")
    }

    /// `GET /api/v1/<path>` with `parameters`; the `data` of a `"status": "success"` answer.
    func api(_ path: String, _ parameters: [String: String] = [:]) throws -> Any {
        var arguments = ["-s", "--max-time", "10", "-G", "http://127.0.0.1:\(port)/api/v1/\(path)"]
        for (name, value) in parameters.sorted(by: { $0.key < $1.key }) { arguments += ["--data-urlencode", "\(name)=\(value)"] }
        let answer = try run("/usr/bin/curl", arguments)
        guard let object = try? JSONSerialization.jsonObject(with: Data(answer.stdout.utf8)) as? [String: Any],
              object["status"] as? String == "success", let data = object["data"] else {
            throw StackError("Prometheus /api/v1/\(path) \(parameters): \(answer.stdout)")
        }
        return data
    }

    /// An instant query's series: their labels and values.
    func query(_ expression: String) throws -> [(labels: [String: String], value: Double)] {
        let data = try api("query", ["query": expression]) as? [String: Any]
        return (data?["result"] as? [[String: Any]] ?? []).map { series in
            let value = (series["value"] as? [Any])?.last as? String
            return (series["metric"] as? [String: String] ?? [:], value.flatMap(Double.init) ?? .nan)
        }
    }

    func stop() {
        guard let pid else { return }
        kill(pid, SIGTERM)  // timeout passes it on to Prometheus
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        self.pid = nil
    }

    var log: String {
        (try? String(contentsOfFile: directory.appendingPathComponent("prometheus-\(port).log").path, encoding: .utf8)) ?? ""
    }

    deinit { stop() }
}
