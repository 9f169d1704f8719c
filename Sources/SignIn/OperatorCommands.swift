// The operator's commands: `tokensignin sessions list|revoke` and `tokensignin prune`.

/// Runs one operator command against the database and reports what it did. Exit codes as every command's:
/// 0 done, 1 failed (e.g. no such user, a database fault), 2 usage or configuration error, 3 database
/// unavailable. Settings (database, idle timeout) come from the same `Configuration` as `serve`'s.
struct OperatorCommands {
    private let io: CommandIO

    init(_ io: CommandIO) { self.io = io }

    static let sessionsUsage = "usage: tokensignin sessions list --user SUB | sessions revoke --user SUB | sessions revoke --session ID"
    static let pruneUsage = "usage: tokensignin prune [--revoked-retention DURATION] [--audit-retention DURATION] [--batch N]"

    /// `sessions list --user SUB`, `sessions revoke --user SUB`, `sessions revoke --session ID`.
    func sessions(_ arguments: [String]) -> Int32 {
        guard arguments.count == 3, !arguments[2].isEmpty else { return usage(Self.sessionsUsage) }
        let (verb, option, value) = (arguments[0], arguments[1], arguments[2])
        switch (verb, option) {
        case ("list", "--user"):
            return withStore("sessions") { store throws in
                guard try store.userExists(sub: value) else { return missing("no user with sub \(value)") }
                io.out("id\tcreated_at\tlast_seen_at\texpires_at\tstate\tip\tclient_id\tuser_agent")
                for s in try store.sessions(ofUser: value) {
                    io.out([String(s.id), s.createdAt.rfc3339, s.lastSeenAt.rfc3339, s.expiresAt.rfc3339, s.state,
                            s.ip ?? "-", s.clientID ?? "-", s.userAgent ?? "-"].map(Self.printable).joined(separator: "\t"))
                }
                return ExitCode.ok
            }
        case ("revoke", "--user"):
            return withStore("sessions") { store throws in
                guard try store.userExists(sub: value) else { return missing("no user with sub \(value)") }
                io.out("revoked \(try store.revokeSessions(ofUser: value)) session(s) of user \(Self.printable(value))")
                return ExitCode.ok
            }
        case ("revoke", "--session"):
            guard let id = Route.sessionID(Substring(value)) else { return usage(Self.sessionsUsage) }
            return withStore("sessions") { store throws in
                guard try store.sessionExists(id: id) else { return missing("no session with id \(id)") }
                io.out(try store.revokeSession(id: id) ? "revoked session \(id)" : "session \(id) was already revoked")
                return ExitCode.ok
            }
        default:
            return usage(Self.sessionsUsage)
        }
    }

    /// `prune`: deletes expired sessions, sessions revoked longer ago than the retention, and old audit
    /// rows, in batches of `--batch` rows (one short statement each, so sign-ins never wait on it).
    func prune(_ arguments: [String]) -> Int32 {
        var policy = PrunePolicy()
        var rest = arguments[...]
        while let option = rest.popFirst() {
            guard let value = rest.popFirst() else { return usage(Self.pruneUsage) }
            switch option {
            case "--revoked-retention":
                guard let seconds = Configuration.parseDuration(value) else { return usage(Self.pruneUsage) }
                policy.revokedRetention = seconds
            case "--audit-retention":
                guard let seconds = Configuration.parseDuration(value) else { return usage(Self.pruneUsage) }
                policy.auditRetention = seconds
            case "--batch":
                guard let n = Configuration.decimal(value), (1...100_000).contains(n) else { return usage(Self.pruneUsage) }
                policy.batch = Int(n)
            default:
                return usage(Self.pruneUsage)
            }
        }
        return withStore("prune") { store throws in
            let pruned = try store.prune(policy)
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
            return try body(PostgresStore(configuration, log: io.log))
        } catch {
            return Commands.exit(for: error, io, command)
        }
    }
}
