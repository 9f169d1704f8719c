// The operator's commands: `tokensignin sessions list|revoke` and `tokensignin prune`.
import Store

/// Runs one operator command against the database and reports what it did. Exit codes: 0 done,
/// 1 failed (e.g. no such user), 2 usage error, 3 database unavailable.
public struct OperatorCommands {
    public typealias Output = (String) -> Void
    private let conninfo: String
    private let idleTTL: Int64
    private let out: Output
    private let err: Output

    public init(conninfo: String, sessionIdleTTL: Int64, out: @escaping Output, err: @escaping Output) {
        self.conninfo = conninfo
        self.idleTTL = sessionIdleTTL
        self.out = out
        self.err = err
    }

    public static let sessionsUsage = "usage: tokensignin sessions list --user SUB | sessions revoke --user SUB | sessions revoke --session ID"
    public static let pruneUsage = "usage: tokensignin prune [--revoked-retention DURATION] [--audit-retention DURATION] [--batch N]"

    /// `sessions list --user SUB`, `sessions revoke --user SUB`, `sessions revoke --session ID`.
    public func sessions(_ arguments: [String]) -> Int32 {
        guard arguments.count == 3, ["list", "revoke"].contains(arguments[0]) else { return usage(Self.sessionsUsage) }
        let (verb, option, value) = (arguments[0], arguments[1], arguments[2])
        guard !value.isEmpty else { return usage(Self.sessionsUsage) }
        switch (verb, option) {
        case ("list", "--user"):
            return withDatabase { connection throws(StoreError) in
                guard try connection.query(OperatorQueries.userExists, [value]).count == 1 else {
                    err("no user with sub \(value)")
                    return 1
                }
                let rows = try connection.query(OperatorQueries.listUserSessions, [value, Queries.interval(idleTTL)])
                out("id\tcreated_at\tlast_seen_at\texpires_at\tstate\tip\tclient_id\tuser_agent")
                for row in 0..<rows.count {
                    out((0..<8).map { Self.printable(rows[row, $0] ?? "-") }.joined(separator: "\t"))
                }
                return 0
            }
        case ("revoke", "--user"):
            return withDatabase { connection throws(StoreError) in
                guard try connection.query(OperatorQueries.userExists, [value]).count == 1 else {
                    err("no user with sub \(value)")
                    return 1
                }
                let rows = try connection.query(OperatorQueries.revokeUserSessions, [value])
                out("revoked \(rows.count) session(s) of user \(value)")
                return 0
            }
        case ("revoke", "--session"):
            guard let id = Int64(value), id > 0 else { return usage(Self.sessionsUsage) }
            return withDatabase { connection throws(StoreError) in
                guard try connection.query(OperatorQueries.sessionExists, [String(id)]).count == 1 else {
                    err("no session with id \(id)")
                    return 1
                }
                let rows = try connection.query(OperatorQueries.revokeSession, [String(id)])
                out(rows.count == 1 ? "revoked session \(id)" : "session \(id) was already revoked")
                return 0
            }
        default:
            return usage(Self.sessionsUsage)
        }
    }

    /// `prune`: deletes expired sessions, sessions revoked longer ago than the retention, and old audit
    /// rows, in batches of `--batch` rows (one short statement each, so sign-ins never wait on it).
    public func prune(_ arguments: [String]) -> Int32 {
        var revokedRetention: Int64 = 30 * 86_400
        var auditRetention: Int64 = 90 * 86_400
        var batch = 1_000
        var rest = arguments[...]
        while let option = rest.popFirst() {
            guard let value = rest.popFirst() else { return usage(Self.pruneUsage) }
            switch option {
            case "--revoked-retention":
                guard let seconds = Configuration.parseDuration(value) else { return usage(Self.pruneUsage) }
                revokedRetention = seconds
            case "--audit-retention":
                guard let seconds = Configuration.parseDuration(value) else { return usage(Self.pruneUsage) }
                auditRetention = seconds
            case "--batch":
                guard let n = Int(value), (1...100_000).contains(n) else { return usage(Self.pruneUsage) }
                batch = n
            default:
                return usage(Self.pruneUsage)
            }
        }
        return withDatabase { connection throws(StoreError) in
            var sessions = 0, signIns = 0
            while true {
                let deleted = try connection.query(OperatorQueries.pruneSessions,
                                                   [Queries.interval(idleTTL), Queries.interval(revokedRetention), String(batch)]).affectedRows
                sessions += deleted
                if deleted < batch { break }
            }
            while true {
                let deleted = try connection.query(OperatorQueries.pruneSignIns, [Queries.interval(auditRetention), String(batch)]).affectedRows
                signIns += deleted
                if deleted < batch { break }
            }
            out("pruned \(sessions) session(s) and \(signIns) sign-in audit row(s)")
            return 0
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
        err(text)
        return 2
    }

    private func withDatabase(_ body: (Connection) throws(StoreError) -> Int32) -> Int32 {
        do {
            let connection = try Connection(conninfo: conninfo)
            return try body(connection)
        } catch {
            err("database unavailable: \(error.code.name)\(error.sqlState.map { " (SQLSTATE \($0))" } ?? "")")
            return 3
        }
    }
}
