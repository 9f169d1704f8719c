// The operator's commands: `tokensignin sessions list|revoke` and `tokensignin prune`.

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
        if arguments.first == "revoke", arguments.dropFirst().contains("--all") { return revokeAll(Array(arguments.dropFirst())) }
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

    /// `sessions revoke --all [--created-before TIMESTAMP]`: signs everyone out (incident response, after restoring
    /// a backup). Revokes every session neither revoked nor expired that was created before TIMESTAMP (RFC 3339)
    /// or, without it, before the command started; sessions opened meanwhile are kept.
    private func revokeAll(_ arguments: [String]) -> Int32 {
        var createdBefore: String?
        var rest = arguments[...]
        while let option = rest.popFirst() {
            switch option {
            case "--all":
                continue
            case "--created-before" where createdBefore == nil:
                guard let value = rest.popFirst() else { return usage(Self.sessionsUsage) }
                guard RFC3339.unixSeconds(parsing: value) != nil else {
                    io.err("tokensignin sessions: --created-before needs an RFC 3339 timestamp such as 2026-11-29T12:00:00Z, got \(Self.printable(value))")
                    return ExitCode.usage
                }
                createdBefore = value
            default:
                return usage(Self.sessionsUsage)
            }
        }
        guard arguments.filter({ $0 == "--all" }).count == 1 else { return usage(Self.sessionsUsage) }
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
                guard seconds >= PrunePolicy.minimumAuditRetention else {
                    io.err("tokensignin prune: --audit-retention must be at least 7d: the service's role may not delete younger audit rows")
                    return ExitCode.usage
                }
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
            if let settings = pruned.settings {
                io.out("idle timeout \(Self.duration(settings.idleTimeout)), as recorded by \(Self.printable(settings.updatedBy)) at \(settings.updatedAt.rfc3339)")
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

    /// Seconds in the largest unit that divides them (`7d`, `36h`, `90m`, `45s`), as the duration settings read.
    static func duration(_ seconds: Int64) -> String {
        for (unit, size) in [("d", Int64(86_400)), ("h", 3_600), ("m", 60)] where seconds > 0 && seconds % size == 0 {
            return "\(seconds / size)\(unit)"
        }
        return "\(seconds)s"
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

extension RFC3339 {
    /// The Unix seconds (fraction dropped) of an RFC 3339 date-time (`2026-11-29T12:00:00Z`,
    /// `2026-11-29T13:00:00.5+01:00`; `T` and `Z` in either case), or nil for anything else: a missing offset, a
    /// leap second, a day the month does not have, year 0000 or an offset of 16 hours or more (PostgreSQL takes
    /// neither), more than 9 fractional digits.
    /// Linear, at most 40 characters.
    static func unixSeconds(parsing text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 40 else { return nil }
        var index = 0
        func number(_ width: Int) -> Int64? {
            guard index + width <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[index..<(index + width)] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int64(byte - 0x30)
            }
            index += width
            return value
        }
        func expect(_ allowed: String) -> Bool {
            guard index < bytes.count, allowed.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2), expect("Tt"),
              let hour = number(2), expect(":"), let minute = number(2), expect(":"), let second = number(2),
              year >= 1, (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              hour <= 23, minute <= 59, second <= 59 else { return nil }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            let digits = bytes[index...].prefix { $0 >= 0x30 && $0 <= 0x39 }.count
            guard (1...9).contains(digits) else { return nil }
            index += digits
        }
        var offset: Int64 = 0
        if expect("Zz") {
            offset = 0
        } else {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") else { return nil }
            let sign: Int64 = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            // PostgreSQL takes offsets below 16 hours; real ones span -12:00...+14:00.
            guard let offsetHour = number(2), expect(":"), let offsetMinute = number(2), offsetHour <= 15, offsetMinute <= 59 else {
                return nil
            }
            offset = sign * (offsetHour * 3_600 + offsetMinute * 60)
        }
        guard index == bytes.count else { return nil }
        return days(year: year, month: month, day: day) * 86_400 + hour * 3_600 + minute * 60 + second - offset
    }

    static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`, the inverse of `civil`).
    static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
