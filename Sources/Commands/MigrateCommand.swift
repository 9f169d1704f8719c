// `tokensignin migrate`: the schema's numbered migrations applied, listed or checked.
import Sessions

extension Commands {
    static let migrateUsage = "usage: tokensignin migrate [--sql-dir DIR] [--role ROLE] [--status | --dry-run]   (default: ./sql, or TOKENSIGNIN_SQL_DIR)"

    /// `migrate` applies what is pending; `--status` shows applied, pending, changed and unknown files;
    /// `--dry-run` checks the applied files and lists what `migrate` would apply, changing nothing. `--role`
    /// runs it all as that role (SET ROLE), so what the migrations create belongs to the schema's owner whoever
    /// logs in (a DBA, or the postgres account over peer authentication).
    static func migrate(_ arguments: [String], _ io: CommandIO) -> Int32 {
        do {
            let options: Arguments
            do {
                options = try Arguments(arguments, options: ["--status": .flag, "--dry-run": .flag, "--role": .value,
                                                             Setting.sqlDirectory.flag: .value])
            } catch {
                throw CommandError(.usage, migrateUsage)
            }
            let role = options.value("--role")
            guard options.positionals.isEmpty, !(options.has("--status") && options.has("--dry-run")),
                  role.map({ !$0.isEmpty && $0.utf8.count <= 63 }) ?? true else {
                throw CommandError(.usage, migrateUsage)
            }
            // Of the settings' flags, only the one that concerns migrations.
            let settings = options.value(Setting.sqlDirectory.flag).map { [Setting.sqlDirectory.flag, $0] } ?? []
            let configuration = try Self.configuration(io, arguments: settings, requireClientIDs: false)
            let migrations = try SchemaMigrations(directory: configuration.sqlDirectory)
            guard !migrations.isEmpty else {
                throw CommandError(.usage, "no migration files (NNN_name.sql) in \(configuration.sqlDirectory): set --sql-dir or TOKENSIGNIN_SQL_DIR")
            }
            let (conninfo, pooler) = (configuration.conninfo, configuration.databasePooler)
            guard options.has("--status") || options.has("--dry-run") else {
                let applied = try migrations.apply(conninfo: conninfo, pooler: pooler, role: role)
                io.out(applied.isEmpty ? "migrate: the database is up to date" : "migrate: applied \(applied.joined(separator: ", "))")
                return ExitCode.ok
            }
            let status = try migrations.status(conninfo: conninfo, pooler: pooler, role: role)
            if options.has("--status") {
                for name in status.applied { io.out("applied\t\(name)") }
                for name in status.pending { io.out("pending\t\(name)") }
                for name in status.changed { io.out("changed\t\(name)\t(edited after it was applied: migrate refuses to run)") }
                for name in status.unknown { io.out("unknown\t\(name)\t(applied by a newer release; left alone)") }
            } else {
                io.out(status.pending.isEmpty ? "migrate --dry-run: nothing to apply" : "migrate --dry-run: would apply \(status.pending.joined(separator: ", "))")
            }
            guard status.changed.isEmpty else {
                io.err("tokensignin migrate: \(status.changed.joined(separator: ", ")) changed after being applied")
                return ExitCode.failed
            }
            return ExitCode.ok
        } catch {
            return exit(for: error, io, "migrate")
        }
    }
}
