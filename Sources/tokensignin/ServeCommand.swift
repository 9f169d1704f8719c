// `tokensignin serve`, `migrate`, `sessions` and `prune`: thin wrappers over the SignIn and Store modules.
#if canImport(Glibc)
import Glibc
#endif
import SignIn
import Store

/// The process environment as a dictionary.
func environmentDictionary() -> [String: String] {
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

/// One log line on stderr: an RFC 3339 UTC timestamp, then the logfmt fields.
let standardErrorLog = Log { line in
    var now = time(nil)
    var parts = tm()
    gmtime_r(&now, &parts)
    var buffer = [CChar](repeating: 0, count: 32)
    let length = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%SZ", &parts)
    let stamp = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    printError("ts=\(stamp) \(line)")
}

func serveCommand(_ args: ArraySlice<String>) -> Int32 {
    if args.contains("--help") || args.contains("-h") {
        print(Configuration.usage)
        return ExitCode.ok
    }
    let configuration: Configuration
    do {
        configuration = try Configuration(environment: environmentDictionary(), arguments: Array(args),
                                          processorCount: Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    } catch {
        printError("tokensignin serve: \(error)")
        return ExitCode.usage
    }
    do {
        try Serve.run(configuration, log: standardErrorLog, clock: { Int64(time(nil)) })
        return ExitCode.ok
    } catch {
        printError("tokensignin serve: \(error)")
        return ExitCode.invalid
    }
}

/// The database settings of the operator commands: TOKENSIGNIN_DATABASE_URL, else libpq's PG* variables.
private var conninfo: String { environment("TOKENSIGNIN_DATABASE_URL") ?? "" }

func migrateCommand(_ args: ArraySlice<String>) -> Int32 {
    var directory = environment("TOKENSIGNIN_SQL_DIR") ?? "sql"
    var rest = args
    while let option = rest.popFirst() {
        guard option == "--sql-dir", let value = rest.popFirst() else {
            printError("usage: tokensignin migrate [--sql-dir DIR]   (default: ./sql, or TOKENSIGNIN_SQL_DIR)")
            return ExitCode.usage
        }
        directory = value
    }
    do {
        let migrator = try Migrator(directory: directory)
        let applied = try migrator.migrate(on: try Connection(conninfo: conninfo))
        print(applied.isEmpty ? "migrate: the database is up to date" : "migrate: applied \(applied.joined(separator: ", "))")
        return ExitCode.ok
    } catch {
        printError("tokensignin migrate: \(error.code.name): \(error.detail)")
        return error.isRetryable ? ExitCode.keysUnavailable : ExitCode.invalid
    }
}

private func operatorCommands() -> OperatorCommands? {
    let idle = environment("TOKENSIGNIN_SESSION_IDLE_TTL")
    guard let idleTTL = idle.map({ Configuration.parseDuration($0) }) ?? Configuration.defaultSessionIdleTTL else {
        printError("TOKENSIGNIN_SESSION_IDLE_TTL must be a duration such as 7d, got '\(idle ?? "")'")
        return nil
    }
    return OperatorCommands(conninfo: conninfo, sessionIdleTTL: idleTTL, out: { print($0) }, err: { printError($0) })
}

func sessionsCommand(_ args: ArraySlice<String>) -> Int32 {
    operatorCommands()?.sessions(Array(args)) ?? ExitCode.usage
}

func pruneCommand(_ args: ArraySlice<String>) -> Int32 {
    operatorCommands()?.prune(Array(args)) ?? ExitCode.usage
}
