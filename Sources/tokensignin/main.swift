// tokensignin: the process around the commands in SignIn — its environment, standard streams, files and clock.
#if canImport(Glibc)
import Glibc
#endif
import Commands
import Logging

/// Writes all of `text` and a newline to `fd` (partial writes and EINTR retried; a closed stream is given up).
private func writeLine(_ fd: Int32, _ text: String) {
    var line = text
    line.append("\n")
    line.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }
}

/// Reads `fd` to its end, or until more than `limit` bytes; nil on a read error.
private func readAll(_ fd: Int32, limit: Int) -> [UInt8]? {
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while out.count <= limit {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 { if errno == EINTR { continue }; return nil }
        if n == 0 { break }
        out += buffer[0..<n]
    }
    return out
}

/// The process environment as a dictionary.
private func environmentDictionary() -> [String: String] {
    var result: [String: String] = [:]
    var entry = environ
    while let pointer = entry.pointee {
        let pair = String(cString: pointer)
        if let equals = pair.firstIndex(of: "=") {
            result[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
        }
        entry += 1
    }
    return result
}

/// Log lines on stderr, each stamped with the time (RFC 3339 UTC, to the second), then the logfmt fields;
/// several lines in one write.
private func writeLog(_ lines: [String]) {
    let stamp = "ts=" + RFC3339.format(unixSeconds: Int64(time(nil))) + " "
    var text = ""
    text.reserveCapacity(lines.reduce(0) { $0 + stamp.utf8.count + $1.utf8.count + 1 })
    for (index, line) in lines.enumerated() {
        if index > 0 { text.append("\n") }
        text.append(stamp)
        text.append(line)
    }
    writeLine(2, text)
}

private let standardErrorLog = Log(sink: { writeLog([$0]) }, lines: writeLog)

let io = CommandIO(
    environment: environmentDictionary(),
    processorCount: Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))),
    out: { writeLine(1, $0) },
    err: { writeLine(2, $0) },
    log: standardErrorLog,
    now: { Int64(time(nil)) },
    readStandardInput: { readAll(0, limit: $0) },
    readFile: { path, limit in
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return readAll(fd, limit: limit)
    },
    fileMode: { path in
        var info = stat()
        return stat(path, &info) == 0 ? UInt32(info.st_mode) & 0o7777 : nil
    }
)
exit(Commands.run(Array(CommandLine.arguments.dropFirst()), io))
