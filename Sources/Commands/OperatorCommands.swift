// The operator's commands: `tokensignin sessions list|revoke` and `tokensignin prune`.
import Logging
import Sessions
import SignIn

/// Runs one operator command against the database and reports what it did. Exit codes as every command's:
/// 0 done, 1 failed (e.g. no such user, a database fault), 2 usage or configuration error, 3 database
/// unavailable. The database comes from the same `Configuration` as `serve`'s; idleness is judged by the idle
/// timeout the responder recorded in the database, whatever the command's own environment says.
struct OperatorCommands {
    private let io: CommandIO

    init(_ io: CommandIO) { self.io = io }

    static let sessionsUsage = "usage: tokensignin sessions list --user SUB | sessions revoke --user SUB | sessions revoke --session ID"
        + " | sessions revoke --all [--created-before RFC3339-TIMESTAMP]"
    static let pruneUsage = "usage: tokensignin prune [--revoked-retention DURATION] [--audit-retention DURATION (at least 7d)] [--batch N]"

    /// `sessions list --user SUB`, `sessions revoke --user SUB`, `sessions revoke --session ID`,
    /// `sessions revoke --all [--created-before TIMESTAMP]`.
    func sessions(_ arguments: [String]) -> Int32 {
        guard let verb = arguments.first,
              let options = try? Arguments(arguments.dropFirst(), options: ["--user": .value, "--session": .value,
                                                                            "--all": .flag, "--created-before": .value]),
              options.positionals.isEmpty else { return usage(Self.sessionsUsage) }
        switch (verb, options.given) {
        case ("list", ["--user"]):
            guard let sub = options.value("--user"), !sub.isEmpty else { return usage(Self.sessionsUsage) }
            return withStore("sessions") { store throws in
                guard try store.userExists(sub: sub) else { return missing("no user with sub \(sub)") }
                io.out("id\tcreated_at\tlast_seen_at\texpires_at\tstate\tip\tclient_id\tuser_agent")
                for s in try store.sessions(ofUser: sub) {
                    io.out([String(s.id), s.createdAt.rfc3339, s.lastSeenAt.rfc3339, s.expiresAt.rfc3339, s.state,
                            s.ip ?? "-", s.clientID ?? "-", s.userAgent ?? "-"].map(Self.printable).joined(separator: "\t"))
                }
                return ExitCode.ok
            }
        case ("revoke", ["--user"]):
            guard let sub = options.value("--user"), !sub.isEmpty else { return usage(Self.sessionsUsage) }
            return withStore("sessions") { store throws in
                guard try store.userExists(sub: sub) else { return missing("no user with sub \(sub)") }
                io.out("revoked \(try store.revokeSessions(ofUser: sub)) session(s) of user \(Self.printable(sub))")
                return ExitCode.ok
            }
        case ("revoke", ["--session"]):
            guard let id = options.value("--session").flatMap(SessionID.parse) else { return usage(Self.sessionsUsage) }
            return withStore("sessions") { store throws in
                guard try store.sessionExists(id: id) else { return missing("no session with id \(id)") }
                io.out(try store.revokeSession(id: id) ? "revoked session \(id)" : "session \(id) was already revoked")
                return ExitCode.ok
            }
        case ("revoke", ["--all"]), ("revoke", ["--all", "--created-before"]), ("revoke", ["--created-before", "--all"]):
            return revokeAll(createdBefore: options.value("--created-before"))
        default:
            return usage(Self.sessionsUsage)
        }
    }

    /// `sessions revoke --all [--created-before TIMESTAMP]`: signs everyone out (incident response, after restoring
    /// a backup). Revokes every session neither revoked nor expired that was created before TIMESTAMP (RFC 3339)
    /// or, without it, before the command started; sessions opened meanwhile are kept.
    private func revokeAll(createdBefore: String?) -> Int32 {
        if let createdBefore, RFC3339.unixSeconds(parsing: createdBefore) == nil {
            io.err("tokensignin sessions: --created-before needs an RFC 3339 timestamp such as 2026-11-29T12:00:00Z, got \(Self.printable(createdBefore))")
            return ExitCode.usage
        }
        return withStore("sessions") { store throws in
            let done = try store.revokeAllSessions(createdBefore: createdBefore)
            io.out("revoked \(done.revoked) session(s) created before \(done.cutoff)")
            return ExitCode.ok
        }
    }

    /// `prune`: deletes expired sessions, sessions idle beyond the responder's recorded idle timeout, sessions
    /// revoked longer ago than the retention, and old audit rows, in batches of `--batch` rows (one short
    /// statement each, so sign-ins never wait on it).
    func prune(_ arguments: [String]) -> Int32 {
        var policy = PrunePolicy.standard
        guard let options = try? Arguments(arguments, options: ["--revoked-retention": .value, "--audit-retention": .value,
                                                                "--batch": .value]),
              options.positionals.isEmpty else { return usage(Self.pruneUsage) }
        if let text = options.value("--revoked-retention") {
            guard let seconds = SettingText.seconds(text) else { return usage(Self.pruneUsage) }
            policy.revokedRetention = seconds
        }
        if let text = options.value("--audit-retention") {
            guard let seconds = SettingText.seconds(text) else { return usage(Self.pruneUsage) }
            guard seconds >= PrunePolicy.minimumAuditRetention else {
                io.err("tokensignin prune: --audit-retention must be at least 7d: the service's role may not delete younger audit rows")
                return ExitCode.usage
            }
            policy.auditRetention = seconds
        }
        if let text = options.value("--batch") {
            guard let n = SettingText.decimal(text), (1...100_000).contains(n) else { return usage(Self.pruneUsage) }
            policy.batch = Int(n)
        }
        return withStore("prune") { store throws in
            let pruned = try store.prune(policy)
            if let settings = pruned.settings {
                io.out("idle timeout \(SettingText.duration(settings.idleTimeout)), as recorded by \(Self.printable(settings.updatedBy)) at \(settings.updatedAt.rfc3339)")
            } else {
                io.out("idle timeout: none recorded by the responder yet, so no session was pruned for idleness")
            }
            io.out("pruned \(pruned.sessions) session(s) and \(pruned.signIns) sign-in audit row(s)")
            return ExitCode.ok
        }
    }

    /// A value safe to print on an operator's terminal: control characters (a User-Agent may carry escape
    /// sequences) are shown as `\u{..}`.
    static func printable(_ value: String) -> String {
        var out = ""
        for scalar in value.unicodeScalars {
            if scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private func usage(_ text: String) -> Int32 {
        io.err(text)
        return ExitCode.usage
    }

    private func missing(_ text: String) -> Int32 {
        io.err(Self.printable(text))
        return ExitCode.failed
    }

    private func withStore(_ command: String, _ body: (PostgresStore) throws -> Int32) -> Int32 {
        do {
            let configuration = try Commands.configuration(io, requireClientIDs: false)
            // Never records its own settings: only the responder's are the ones idleness is judged by.
            return try body(PostgresStore(configuration, log: io.log, recordsSettings: false))
        } catch {
            return Commands.exit(for: error, io, command)
        }
    }
}
