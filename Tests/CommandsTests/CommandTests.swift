// The commands in process (CommandIO captured): migrate's modes and refusals, exit codes mapped like HTTP.
@testable import Commands
import Foundation
import Logging
import Store
import TestSupport
import Testing

/// What a command printed and returned.
struct CommandRun {
    var status: Int32
    var out: [String]
    var err: [String]
}

/// A `TOKENSIGNIN_DATABASE_URL` for database `name` on the test cluster (libpq reads PG* variables from the
/// process, not from a command's environment, so in-process commands get the database this way).
func databaseURL(_ name: String, user: String = "postgres") -> String {
    let env = ProcessInfo.processInfo.environment
    let host = (env["PGHOST"] ?? "/tmp").replacingOccurrences(of: "/", with: "%2F")
    return "postgresql://\(user)@/\(name)?host=\(host)&port=\(env["PGPORT"] ?? "5432")"
}

/// Runs `arguments` with exactly `environment` and captures the output.
func runCommand(_ arguments: [String], environment env: [String: String] = [:], stdin: [UInt8] = []) -> CommandRun {
    let out = LockedLines(), err = LockedLines()
    let io = CommandIO(
        environment: env, processorCount: 2, out: { out.append($0) }, err: { err.append($0) }, log: Log { err.append($0) },
        now: { 1_800_000_000 }, readStandardInput: { _ in stdin },
        readFile: { path, _ in FileManager.default.contents(atPath: path).map { [UInt8]($0) } },
        fileMode: { path in ((try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? NSNumber)?.uint32Value })
    let status = Commands.run(arguments, io)
    return CommandRun(status: status, out: out.all, err: err.all)
}

@Suite struct MigrateCommandTests {
    /// A folder with copies of some of sql/'s files.
    static func folder(_ files: [String], edit: String? = nil) throws -> String {
        let dir = NSTemporaryDirectory() + "migrations-\(randomHex(4))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for file in files {
            var text = try String(contentsOfFile: repositoryRoot + "/sql/" + file, encoding: .utf8)
            if file == edit { text += "\n-- edited\n" }
            try text.write(toFile: dir + "/" + file, atomically: true, encoding: .utf8)
        }
        return dir
    }

    @Test func statusAndDryRunShowWithoutChangingAndMigrateApplies() throws {
        let db = try TestDatabase("cli_migrate")
        let env = ["TOKENSIGNIN_DATABASE_URL": databaseURL(db.name), "TOKENSIGNIN_SQL_DIR": repositoryRoot + "/sql"]
        let files = try FileManager.default.contentsOfDirectory(atPath: repositoryRoot + "/sql").filter(Migration.isMigrationFileName).sorted()

        let before = runCommand(["migrate", "--status"], environment: env)
        #expect(before.status == 0 && before.out == files.map { "pending\t\($0)" })
        let dry = runCommand(["migrate", "--dry-run"], environment: env)
        #expect(dry.status == 0 && dry.out == ["migrate --dry-run: would apply \(files.joined(separator: ", "))"])
        #expect(try db.connect().query("SELECT to_regclass('signin.users') IS NULL")[0, 0] == "t", "a dry run changes nothing")

        let applied = runCommand(["migrate"], environment: env)
        #expect(applied.status == 0 && applied.out == ["migrate: applied \(files.joined(separator: ", "))"])
        #expect(runCommand(["migrate"], environment: env).out == ["migrate: the database is up to date"])
        #expect(runCommand(["migrate", "--status"], environment: env).out == files.map { "applied\t\($0)" })
        #expect(runCommand(["migrate", "--dry-run"], environment: env).out == ["migrate --dry-run: nothing to apply"])
    }

    @Test func anEditedAppliedFileIsShownAndRefused() throws {
        let db = try TestDatabase("cli_edited")
        let original = try Self.folder(["001_users.sql"])
        let edited = try Self.folder(["001_users.sql"], edit: "001_users.sql")
        #expect(runCommand(["migrate", "--sql-dir", original], environment: ["TOKENSIGNIN_DATABASE_URL": databaseURL(db.name)]).status == 0)
        let status = runCommand(["migrate", "--status", "--sql-dir", edited], environment: ["TOKENSIGNIN_DATABASE_URL": databaseURL(db.name)])
        #expect(status.status == 1 && status.out.first?.hasPrefix("changed\t001_users.sql") == true)
        let migrate = runCommand(["migrate", "--sql-dir=\(edited)"], environment: ["TOKENSIGNIN_DATABASE_URL": databaseURL(db.name)])
        #expect(migrate.status == 1 && migrate.err.first?.contains("checksum_mismatch") == true)
        // A file applied by a newer release is listed, not touched.
        let fewer = try Self.folder([])
        try "SELECT 1;".write(toFile: fewer + "/002_other.sql", atomically: true, encoding: .utf8)
        #expect(runCommand(["migrate", "--status", "--sql-dir", fewer], environment: ["TOKENSIGNIN_DATABASE_URL": databaseURL(db.name)]).out
                == ["pending\t002_other.sql", "unknown\t001_users.sql\t(applied by a newer release; left alone)"])
    }

    /// (arguments, what the message says) — all usage errors (exit 2), nothing touched.
    @Test(arguments: [
        (["migrate", "--sql-dir", "/nonexistent/sql"], "cannot open folder /nonexistent/sql"),
        (["migrate", "--sql-dir", NSTemporaryDirectory()], "no migration files"),
        (["migrate", "--status", "--dry-run"], "usage: tokensignin migrate"),
        (["migrate", "--workers", "3"], "usage: tokensignin migrate"),
        (["migrate", "--sql-dir"], "usage: tokensignin migrate"),
    ])
    func refusalsAreUsageErrors(arguments: [String], message: String) {
        let run = runCommand(arguments, environment: ["TOKENSIGNIN_DATABASE_URL": databaseURL("nonexistent_db")])
        #expect(run.status == 2)
        #expect(run.err.joined().contains(message), "\(run.err)")
    }

    @Test func unreachableDatabaseIsThreeAndAMissingPrivilegeIsOne() throws {
        let down = runCommand(["migrate"], environment: ["TOKENSIGNIN_DATABASE_URL": "postgresql://127.0.0.1:9/none?connect_timeout=2"])
        #expect(down.status == 3 && down.err.first?.contains("database unavailable: connection_failed") == true)
        let db = try TestDatabase("cli_privilege")
        let admin = try db.connect()
        let role = "no_create_\(randomHex(4))"
        try admin.query("CREATE ROLE \(role) LOGIN")
        try admin.query("REVOKE CREATE ON DATABASE \(db.name) FROM PUBLIC")
        try admin.query("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        defer { _ = try? admin.query("DROP OWNED BY \(role)"); _ = try? admin.query("DROP ROLE IF EXISTS \(role)") }
        let denied = runCommand(["migrate"], environment: ["TOKENSIGNIN_DATABASE_URL": databaseURL(db.name, user: role),
                                                           "TOKENSIGNIN_SQL_DIR": repositoryRoot + "/sql"])
        #expect(denied.status == 1, "\(denied.err)")
        #expect(denied.err.first?.contains("SQLSTATE 42501") == true && denied.err.first?.contains("database error") == true)
    }
}
