// Small POSIX helpers for the subcommands: files, stdin, stderr, environment, argument parsing.
#if canImport(Glibc)
import Glibc
#endif

/// Exit codes shared by subcommands.
enum ExitCode {
    static let ok: Int32 = 0
    static let invalid: Int32 = 1
    static let usage: Int32 = 2
    static let keysUnavailable: Int32 = 3
}

func printError(_ message: String) {
    let bytes = Array((message + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { write(2, $0.baseAddress! + offset, $0.count - offset) }
        if n <= 0 { return }
        offset += n
    }
}

func environment(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    let s = String(cString: value)
    return s.isEmpty ? nil : s
}

/// Reads a whole file descriptor; nil on a read error.
func readAll(fd: Int32, limit: Int) -> [UInt8]? {
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 { if errno == EINTR { continue }; return nil }
        if n == 0 { return out }
        out += buffer[0..<n]
        if out.count > limit { return out }
    }
}

func readFile(_ path: String, limit: Int = 1 << 24) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    return readAll(fd: fd, limit: limit)
}

/// Writes `bytes` to `path` (created or truncated) with the given permission bits.
func writeFile(_ path: String, _ bytes: [UInt8], mode: mode_t) -> Bool {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if n < 0 { if errno == EINTR { continue }; return false }
        offset += n
    }
    return fchmod(fd, mode) == 0
}

func currentUnixTime() -> Int64 { Int64(time(nil)) }

func trimmed(_ s: some StringProtocol) -> String {
    let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\n" || $0 == "\r" || $0 == "\t" }
    return String(s.drop(while: isSpace).reversed().drop(while: isSpace).reversed())
}

/// A minimal `--flag value` parser: repeatable flags collect every value; positionals are kept in order.
struct ParsedArguments {
    var values: [String: [String]] = [:]
    var positionals: [String] = []

    init(_ args: ArraySlice<String>, flags: Set<String>) throws(UsageError) {
        var i = args.startIndex
        while i < args.endIndex {
            let arg = args[i]
            if arg.hasPrefix("--") {
                guard flags.contains(arg) else { throw UsageError(message: "unknown option \(arg)") }
                guard i + 1 < args.endIndex else { throw UsageError(message: "\(arg) needs a value") }
                values[arg, default: []].append(args[i + 1])
                i += 2
            } else {
                positionals.append(arg)
                i += 1
            }
        }
    }

    func single(_ flag: String) throws(UsageError) -> String? {
        guard let v = values[flag] else { return nil }
        guard v.count == 1 else { throw UsageError(message: "\(flag) given more than once") }
        return v[0]
    }

    func integer(_ flag: String) throws(UsageError) -> Int64? {
        guard let s = try single(flag) else { return nil }
        guard let n = Int64(s) else { throw UsageError(message: "\(flag) needs an integer") }
        return n
    }
}

struct UsageError: Error {
    let message: String
}
