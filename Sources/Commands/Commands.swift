// The command line: `tokensignin <command> ...` dispatched to the commands, with the process's I/O injected.
import Logging
import struct Store.StoreError

/// What a command may touch of its process: environment, output, files, the clock. The executable supplies
/// the real ones; tests can supply their own.
public struct CommandIO: Sendable {
    public var environment: [String: String]
    public var processorCount: Int
    /// One line to standard output (a newline is added).
    public var out: @Sendable (String) -> Void
    /// One line to standard error (a newline is added).
    public var err: @Sendable (String) -> Void
    /// The service's log (standard error, with timestamps).
    public var log: Log
    public var now: @Sendable () -> Int64
    /// Standard input to its end, or nil on a read error; more than `limit` bytes is returned as read so far.
    public var readStandardInput: @Sendable (_ limit: Int) -> [UInt8]?
    public var readFile: @Sendable (_ path: String, _ limit: Int) -> [UInt8]?
    /// The permission bits of a file, nil when it cannot be read (a key file open to others is warned about).
    public var fileMode: @Sendable (_ path: String) -> UInt32?

    public init(environment: [String: String], processorCount: Int, out: @escaping @Sendable (String) -> Void,
                err: @escaping @Sendable (String) -> Void, log: Log, now: @escaping @Sendable () -> Int64,
                readStandardInput: @escaping @Sendable (Int) -> [UInt8]?,
                readFile: @escaping @Sendable (String, Int) -> [UInt8]?,
                fileMode: @escaping @Sendable (String) -> UInt32? = { _ in nil }) {
        self.environment = environment
        self.processorCount = processorCount
        self.out = out
        self.err = err
        self.log = log
        self.now = now
        self.readStandardInput = readStandardInput
        self.readFile = readFile
        self.fileMode = fileMode
    }
}

/// Exit codes of every command (docs/operations.md): 0 done, 1 refused or failed (an invalid token, no such
/// user, a database fault that retrying will not fix), 2 usage or configuration error, 3 a dependency is
/// unavailable right now (the database, Google's keys): try again later.
enum ExitCode {
    static let ok: Int32 = 0
    static let failed: Int32 = 1
    static let usage: Int32 = 2
    static let unavailable: Int32 = 3
}

public enum Commands {
    public static let usage = """
        usage: tokensignin --version
               tokensignin serve [--help | --FLAG VALUE ...]   (settings: TOKENSIGNIN_* variables, see --help)
               tokensignin migrate [--sql-dir DIR] [--role ROLE] [--status | --dry-run]
               tokensignin sessions list --user SUB
               tokensignin sessions revoke --user SUB | --session ID | --all [--created-before RFC3339-TIMESTAMP]
               tokensignin prune [--revoked-retention DURATION] [--audit-retention DURATION] [--batch N]
               tokensignin verify [--client-id ID]... [--jwks FILE | --jwks-url URL] [--now UNIX_SECONDS]
                                  [--clock-skew SECONDS] [--hosted-domain DOMAIN]... TOKEN|-
               tokensignin risc configure --service-account FILE --receiver-url URL [--api URL]
               tokensignin risc verify --service-account FILE --state STRING [--api URL]
               tokensignin risc status|enable|disable|show --service-account FILE [--api URL]
               tokensignin dev keygen --out DIR [--kind rsa|p256] [--force]
               tokensignin dev token --key PEM --kid KID --aud CLIENT_ID [--azp CLIENT_ID] --sub SUB [--email E [--email-verified false]] [--name N] [--hd D]
                                     [--iat UNIX] [--ttl SECONDS] [--count N]
               tokensignin dev sql NAME [--parameters]
        """

    /// Runs `arguments` (without the program name) and returns the process's exit status.
    public static func run(_ arguments: [String], _ io: CommandIO) -> Int32 {
        let rest = Array(arguments.dropFirst())
        switch arguments.first {
        case "serve": return serve(rest, io)
        case "migrate": return migrate(rest, io)
        case "sessions": return OperatorCommands(io).sessions(rest)
        case "prune": return OperatorCommands(io).prune(rest)
        case "verify": return verify(rest, io)
        case "dev": return DevCommands(io).run(rest)
        case "risc": return RiscCommands(io).run(rest)
        case "--version" where rest.isEmpty:
            io.out(Version.line)
            return ExitCode.ok
        case "-h", "--help", "help":
            io.out(usage)
            return ExitCode.ok
        default:
            io.err(usage)
            return ExitCode.usage
        }
    }

    /// The settings every command reads, from the environment (and, for `serve`, its flags).
    static func configuration(_ io: CommandIO, arguments: [String] = [], requireClientIDs: Bool) throws(CommandError) -> Configuration {
        try Configuration(environment: io.environment, arguments: arguments, processorCount: io.processorCount,
                          requireClientIDs: requireClientIDs)
    }

    /// The exit status and message for a command's failure, mapped like the HTTP answers: the caller's fault
    /// 2, an outage (retryable) 3, anything else 1, with the SQLSTATE or reason for the operator.
    static func exit(for error: any Error, _ io: CommandIO, _ command: String) -> Int32 {
        // libpq may echo the whole database URL, password included: the same redaction as the settings'.
        let secrets = Configuration.secrets(in: io.environment)
        let io = CommandIO(environment: io.environment, processorCount: io.processorCount, out: io.out,
                           err: { [err = io.err] line in err(Configuration.redacted(line, secrets: secrets)) },
                           log: io.log, now: io.now, readStandardInput: io.readStandardInput, readFile: io.readFile,
                           fileMode: io.fileMode)
        switch error {
        case let error as CommandError where error.code == .usage || error.code == .invalidConfiguration:
            io.err("tokensignin \(command): \(error.detail)")
            return ExitCode.usage
        case let error as StoreError where error.code == .noMigrationFolder:
            io.err("tokensignin \(command): \(error.detail): set --sql-dir or TOKENSIGNIN_SQL_DIR")
            return ExitCode.usage
        case let error as StoreError:
            let state = error.sqlState.map { " (SQLSTATE \($0))" } ?? ""
            if error.isRetryable {
                io.err("tokensignin \(command): database unavailable: \(error.code.name)\(state): \(error.detail)")
                return ExitCode.unavailable
            }
            io.err("tokensignin \(command): database error: \(error.code.name)\(state): \(error.detail)")
            return ExitCode.failed
        default:
            io.err("tokensignin \(command): \(error)")
            return ExitCode.failed
        }
    }

    static func serve(_ arguments: [String], _ io: CommandIO) -> Int32 {
        if arguments.contains("--help") || arguments.contains("-h") {
            io.out(Configuration.usage)
            return ExitCode.ok
        }
        let configuration: Configuration
        do {
            configuration = try Self.configuration(io, arguments: arguments, requireClientIDs: true)
        } catch {
            io.err("tokensignin serve: \(error)")
            return ExitCode.usage
        }
        do {
            try Serve.run(configuration, log: io.log, clock: io.now, fileMode: io.fileMode)
            return ExitCode.ok
        } catch {
            io.err("tokensignin serve: \(error)")
            return error.code == .invalidConfiguration ? ExitCode.usage : ExitCode.failed
        }
    }
}
