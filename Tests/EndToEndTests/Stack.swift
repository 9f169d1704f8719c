// A real stack for end-to-end tests: a fresh database on the test cluster, `tokensignin serve`, and nginx.
import Foundation
import Synchronization
import Testing
import TestSupport

/// An HTTP answer as curl saw it through nginx.
struct Answer: CustomStringConvertible {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: String

    func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }
    func headers(_ name: String) -> [String] {
        headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
    }
    var errorCode: String? { json["error"] as? String }
    var description: String { "\(status) \(body)" }
}

extension Answer {
    /// From what `curl -D - -o -` printed: the head, a blank line, the body.
    init(curlOutput raw: String) throws {
        guard let split = raw.range(of: "\r\n\r\n") else { throw StackError("no HTTP answer: \(raw)") }
        let lines = raw[..<split.lowerBound].components(separatedBy: "\r\n")
        guard let statusLine = lines.first, let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") else {
            throw StackError("bad status line: \(raw)")
        }
        let headers = lines.dropFirst().compactMap { line -> (name: String, value: String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        self.init(status: status, headers: headers, body: String(raw[split.upperBound...]))
    }
}

struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs a program with this process's environment plus `environment`.
@discardableResult
func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil) throws -> CommandResult {
    let result = try runProgram(executable, arguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                                stdin: Array((stdin ?? "").utf8))
    return CommandResult(status: result.status, stdout: result.stdoutText, stderr: result.stderrText)
}

enum Paths {
    static let repository: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()
    static let binary = repository.appendingPathComponent(".build/debug/tokensignin").path
    static func script(_ name: String) -> String { repository.appendingPathComponent("scripts/\(name)").path }
}


/// One stack per name for the whole test run (Swift Testing makes a suite instance per test; starting a
/// stack per test would be slow). Stacks are torn down by scripts/with-test-db when the run ends.
enum SharedStacks {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var stacks: [String: Stack] = [:]

    static func stack(_ name: String, environment: [String: String] = [:], rateLimit: Bool = false) throws -> Stack {
        try lock.withLock {
            if let stack = stacks[name] { return stack }
            let stack = try Stack(name, environment: environment, rateLimit: rateLimit)
            stacks[name] = stack
            return stack
        }
    }
}

/// One private stack. Each suite makes its own (own database, socket and port), so suites can run in parallel.
final class Stack: @unchecked Sendable {
    // SAFETY: the process handle and paths are set in init and only read afterwards; tests use one stack per suite.
    let directory: URL
    let database: String
    /// nginx's public HTTPS site; the application stand-in is on `port + 1`.
    let port: Int
    /// nginx's operators' listener (tokensignin-metrics.conf): /healthz, /readyz and /metrics, plain HTTP.
    var operatorsPort: Int { port + 2 }
    let clientID = "1000000000001-e2eclient.apps.googleusercontent.com"
    let otherClientID = "1000000000002-e2eother.apps.googleusercontent.com"
    let siteOrigin: String
    var kid = ""
    private var server: pid_t?
    private let extraEnvironment: [String: String]
    /// libpq settings of the cluster this stack uses (the shared test cluster unless a test brings its own).
    let postgres: [String: String]

    /// How the responder gets its socket: it creates it (TOKENSIGNIN_LISTEN), spawn-fcgi hands it over as fd 0,
    /// or scripts/socket-holder holds it and hands it to each `serve` it starts as fd 3 (LISTEN_FDS), as
    /// systemd socket activation does.
    enum Launch { case listen, spawnFCGI, holder }
    private let launch: Launch
    /// The stack whose database and keys this one shares (a second responder of one site); nil: its own.
    private let peerOf: Stack?

    /// `peerOf`: another stack whose database and key set this one uses, with a responder and an nginx of its own
    /// (two responder hosts of one deployment).
    init(_ name: String, environment: [String: String] = [:], postgres: [String: String] = [:],
         launch: Launch = .listen, rateLimit: Bool = false, peerOf: Stack? = nil) throws {
        guard ProcessInfo.processInfo.environment["PGHOST"] != nil else {
            throw StackError("end-to-end tests need the test cluster: run them with `make test`")
        }
        // Under the folder scripts/with-test-db cleans up, which stops whatever a crashed run left behind.
        let root = ProcessInfo.processInfo.environment["TS_TEST_RUNDIR"] ?? NSTemporaryDirectory()
        directory = URL(fileURLWithPath: root).appendingPathComponent("e2e-\(name)-\(getpid())")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        database = peerOf?.database ?? "e2e_\(name.lowercased())_\(getpid())"
        port = Self.randomPorts()
        siteOrigin = "https://127.0.0.1:\(port)"
        extraEnvironment = environment
        self.postgres = peerOf?.postgres ?? postgres
        self.launch = launch
        self.peerOf = peerOf

        if let peerOf {
            kid = peerOf.kid
        } else {
            try psql("DROP DATABASE IF EXISTS \(database)", database: "postgres")
            try psql("CREATE DATABASE \(database)", database: "postgres")
            let migrate = try run(Paths.binary, ["migrate"], environment: databaseEnvironment)
            guard migrate.status == 0 else { throw StackError("migrate failed: \(migrate.stderr)") }

            let keys = directory.appendingPathComponent("keys").path
            let keygen = try run(Paths.binary, ["dev", "keygen", "--out", keys])
            guard keygen.status == 0 else { throw StackError("keygen failed: \(keygen.stderr)") }
            kid = try String(contentsOfFile: keys + "/kid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        }

        try startServer()
        let nginx = try run(Paths.script("nginx-local"), ["start", directory.appendingPathComponent("nginx").path, String(port), socketPath],
                            environment: ["NGINX_RATE_LIMIT": rateLimit ? "on" : "off", "NGINX_METRICS_PORT": String(operatorsPort)])
        guard nginx.status == 0 else { throw StackError("nginx failed: \(nginx.stderr)") }
    }

    /// The first of three ports for nginx (the site; the application stand-in takes the next one, the
    /// operators' listener the one after), below the kernel's ephemeral range: a port inside it may be held
    /// at that moment by any outgoing connection (curl, libpq), and nginx's bind then fails with "Address
    /// already in use". The triples are handed out in turn from a random start, so two stacks of this test
    /// process never get the same one (drawn at random, two of the dozens alive at once did, now and then), and a
    /// triple whose ports something else holds is passed over.
    static func randomPorts() -> Int {
        portCursor.withLock { cursor in
            for _ in 0..<Self.portSpan / 3 {
                let first = cursor
                cursor += 3
                if cursor + 3 > Self.portTop { cursor = Self.portBottom }
                if (first..<first + 3).allSatisfy(portIsFree) { return first }
            }
            return cursor
        }
    }

    private static let portBottom = 20000
    private static let portTop: Int = {
        let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let ephemeralStart = range.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32768
        // A system whose ephemeral range starts low keeps the old spread (and its small risk).
        return ephemeralStart > portBottom + 4000 ? ephemeralStart : 40000
    }()
    private static var portSpan: Int { portTop - portBottom }
    private static let portCursor = Mutex<Int>(Int.random(in: portBottom..<(portTop - 3)) / 3 * 3)

    /// Whether a listening socket could be bound to 127.0.0.1:`port` just now (a probe: bound, then closed).
    private static func portIsFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return true }
        defer { close(fd) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    var socketPath: String { directory.appendingPathComponent("fcgi.sock").path }
    var keyPath: String { (peerOf?.directory ?? directory).appendingPathComponent("keys/dev-signing-key.pem").path }
    var jwksPath: String { (peerOf?.directory ?? directory).appendingPathComponent("keys/dev-jwks.json").path }
    var logPath: String { directory.appendingPathComponent("tokensignin.log").path }
    var holderStatusPath: String { directory.appendingPathComponent("holder.status").path }

    /// With `.holder`: how many `serve` processes the holder has started (0 before the first).
    var holderGeneration: Int {
        let text = (try? String(contentsOfFile: holderStatusPath, encoding: .utf8)) ?? ""
        return Int(text.split(separator: " ").first ?? "") ?? 0
    }

    /// With `.holder`: a restart the way `systemctl restart` does it (the running `serve` drains and exits,
    /// then a new one starts on the same socket); returns once the new one has been started.
    func restartServer() throws {
        guard launch == .holder, let pid = server else { throw StackError("restartServer needs launch: .holder") }
        let generation = holderGeneration
        kill(pid, SIGHUP)
        // The holder rewrites its status file once it has started the new process, which logs `started`
        // once it serves (a restart before that would stop a process that never served).
        func ready() -> Bool {
            holderGeneration > generation && serverLog.components(separatedBy: "event=started").count - 1 > generation
        }
        let deadline = Date().addingTimeInterval(20)
        while !ready() && Date() < deadline { usleep(5_000) }
        guard ready() else { throw StackError("the holder did not restart serve: \(serverLog)") }
    }

    var databaseEnvironment: [String: String] { postgres.merging(["PGDATABASE": database]) { $1 } }

    var serverEnvironment: [String: String] {
        databaseEnvironment.merging([
            "TOKENSIGNIN_LISTEN": socketPath,
            "TOKENSIGNIN_CLIENT_IDS": "\(clientID),\(otherClientID)",
            "TOKENSIGNIN_JWKS_FILE": jwksPath,
            // The stack's own development key set stands in for Google's, and Google's RISC configuration is not read.
            "TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS": "1",
            "TOKENSIGNIN_RISC_CONFIGURATION_URL": "off",
            "TOKENSIGNIN_WORKERS": "4",
            "TOKENSIGNIN_SITE_ORIGINS": siteOrigin,
            "TOKENSIGNIN_SIGNIN_REDIRECT": "/welcome",
        ]) { $1 }.merging(extraEnvironment) { $1 }
    }

    /// Starts `serve` (again) with the stack's environment, `overriding` some of it for this run.
    func startServer(overriding: [String: String] = [:]) throws {
        try? FileManager.default.removeItem(atPath: socketPath)
        let log = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard log >= 0 else { throw StackError("cannot open \(logPath)") }
        defer { close(log) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, log, 1)
        posix_spawn_file_actions_adddup2(&actions, log, 2)
        var environment = ProcessInfo.processInfo.environment.merging(serverEnvironment) { $1 }.merging(overriding) { $1 }
        let pid: pid_t
        switch launch {
        case .listen:
            pid = try spawnProgram(Paths.binary, ["serve"], environment: environment, actions: &actions)
        case .spawnFCGI:
            // spawn-fcgi creates the socket and execs `serve` with it as fd 0 (-n: no fork, so pid is ours).
            environment["TOKENSIGNIN_LISTEN"] = nil
            pid = try spawnProgram("/usr/bin/spawn-fcgi", ["-n", "-s", socketPath, "-M", "0660", "--", Paths.binary, "serve"],
                                   environment: environment, actions: &actions)
        case .holder:
            environment["TOKENSIGNIN_LISTEN"] = nil
            pid = try spawnProgram("/usr/bin/python3", [Paths.script("socket-holder"), "--socket", socketPath,
                                                        "--status", holderStatusPath, "--", Paths.binary, "serve"],
                                   environment: environment, actions: &actions)
        }
        server = pid
        try? String(pid).write(toFile: directory.appendingPathComponent("tokensignin.pid").path, atomically: true, encoding: .utf8)
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: socketPath) {
            var status: Int32 = 0
            guard waitpid(pid, &status, WNOHANG) == 0 else { server = nil; throw StackError("serve exited: \(serverLog)") }
            usleep(25_000)
        }
        guard FileManager.default.fileExists(atPath: socketPath) else { throw StackError("serve did not listen: \(serverLog)") }
    }

    /// SIGTERM (the graceful stop) and wait for the responder to exit; returns its exit status.
    @discardableResult
    func stopServer() -> Int32? {
        guard let pid = server else { return nil }
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        server = nil
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
    }

    var serverLog: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func shutdown() {
        _ = try? run(Paths.script("nginx-local"), ["stop", directory.appendingPathComponent("nginx").path])
        stopServer()
        if peerOf == nil { _ = try? psql("DROP DATABASE IF EXISTS \(database) WITH (FORCE)", database: "postgres") }
    }

    deinit { shutdown() }

    // MARK: tokens

    /// A development ID token signed by this stack's key (the server trusts it through TOKENSIGNIN_JWKS_FILE).
    func token(sub: String, aud: String? = nil, azp: String? = nil, email: String? = nil, emailVerified: Bool = true, name: String? = nil,
               hd: String? = nil, iat: Int? = nil, ttl: Int? = nil, key: String? = nil, kid: String? = nil) throws -> String {
        var arguments = ["dev", "token", "--key", key ?? keyPath, "--kid", kid ?? self.kid, "--aud", aud ?? clientID, "--sub", sub]
        if let azp { arguments += ["--azp", azp] }
        if let email { arguments += ["--email", email, "--email-verified", emailVerified ? "true" : "false"] }
        if let name { arguments += ["--name", name] }
        if let hd { arguments += ["--hd", hd] }
        if let iat { arguments += ["--iat", String(iat)] }
        if let ttl { arguments += ["--ttl", String(ttl)] }
        let result = try run(Paths.binary, arguments)
        guard result.status == 0 else { throw StackError("dev token failed: \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    // MARK: HTTP through nginx

    func request(_ method: String, _ path: String, headers: [String: String] = [:], body: String? = nil) throws -> Answer {
        try request(method, url: "https://127.0.0.1:\(port)\(path)", headers: headers, body: body)
    }

    /// A request to nginx's operators' listener (http://127.0.0.1:operatorsPort), where /healthz, /readyz and
    /// /metrics are served; the public site does not serve them.
    func operatorsRequest(_ method: String, _ path: String) throws -> Answer {
        try request(method, url: "http://127.0.0.1:\(operatorsPort)\(path)")
    }

    func request(_ method: String, url: String, headers: [String: String] = [:], body: String? = nil) throws -> Answer {
        var arguments = ["-sk", "-X", method, "-D", "-", "-o", "-", "--max-time", "20", url]
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { arguments += ["-H", "\(name): \(value)"] }
        if body != nil { arguments += ["--data-binary", "@-"] }
        let result = try run("/usr/bin/curl", arguments, stdin: body)
        return try Answer(curlOutput: result.stdout)
    }

    func signIn(_ token: String, userAgent: String = "e2e-test") throws -> Answer {
        try request("POST", "/tokensignin", headers: ["Content-Type": "application/json", "User-Agent": userAgent],
                    body: #"{"idToken":"\#(token)"}"#)
    }

    // MARK: database

    /// Runs SQL with psql and returns the rows as arrays of text.
    @discardableResult
    func psql(_ sql: String, database: String? = nil) throws -> [[String]] {
        let result = try run("/usr/bin/psql", ["-X", "-q", "-t", "-A", "-F", "\u{1f}", "-v", "ON_ERROR_STOP=1",
                                               "-d", database ?? self.database, "-c", sql], environment: postgres)
        guard result.status == 0 else { throw StackError("psql failed: \(result.stderr)") }
        return result.stdout.split(separator: "\n", omittingEmptySubsequences: true).map {
            $0.split(separator: "\u{1f}", omittingEmptySubsequences: false).map(String.init)
        }
    }

    func count(_ sqlFrom: String) throws -> Int {
        Int(try psql("SELECT count(*) FROM \(sqlFrom)").first?.first ?? "") ?? -1
    }
}

struct StackError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

