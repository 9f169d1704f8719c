// Load through nginx for the fault tests: curl config files (one connection per client, many transfers) run as
// background processes, each transfer's status (and time) written to a file.
import Foundation
import TestSupport

/// `count` distinct users' ID tokens signed by the stack's development key.
func mintTokens(_ stack: Stack, count: Int, sub: String = "restart-user") throws -> [String] {
    let result = try run(Paths.binary, ["dev", "token", "--key", stack.keyPath, "--kid", stack.kid, "--aud", stack.clientID,
                                        "--sub", sub, "--email", "\(sub)@example.com", "--ttl", "3600", "--count", String(count)])
    guard result.status == 0 else { throw StackError("dev token failed: \(result.stderr)") }
    let tokens = result.stdout.split(separator: "\n").map(String.init)
    guard tokens.count == count else { throw StackError("dev token printed \(tokens.count) tokens") }
    return tokens
}

/// One transfer in a curl config file (`curl -K`); transfers are separated by `next` and share one connection.
func curlEntry(url: String, headers: [String], data: String?, output: String, rate: String? = nil,
               writeOut: String = "%{http_code}\\n") -> String {
    func quoted(_ text: String) -> String { "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"" }
    var lines = ["url = \(quoted(url))", "insecure", "silent", "max-time = 60", "output = \(quoted(output))", "write-out = \"\(writeOut)\""]
    if let rate { lines.append("rate = \(rate)") }
    lines += headers.map { "header = \(quoted($0))" }
    if let data { lines.append("data-binary = \(quoted(data))") }
    return lines.joined(separator: "\n") + "\n"
}

/// Starts curl on a config file, its write-out (one status per transfer) going to `codes`.
func spawnCurl(config: String, codes: String) throws -> pid_t {
    let out = open(codes, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard out >= 0 else { throw StackError("cannot open \(codes)") }
    defer { close(out) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, out, 1)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    return try spawnProgram("/usr/bin/curl", ["-K", config], environment: ProcessInfo.processInfo.environment, actions: &actions)
}

func isRunning(_ pid: pid_t) -> Bool {
    var status: Int32 = 0
    return waitpid(pid, &status, WNOHANG) == 0
}

func waitForExit(_ pid: pid_t) -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    return status
}
