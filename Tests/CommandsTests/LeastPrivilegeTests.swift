// The roles of sql/roles.sql on a real database: the service's role runs every statement of the service, prune and
// the operator commands and nothing else; the reader reads and never writes; later migrations need no new grants.
import Foundation
@testable import IDToken
import Logging
@testable import Sessions
@testable import SignIn
import Store
import TestSupport
import Testing

/// A fresh database whose owner, app and reader roles come from sql/roles.sql under names of its own (roles are
/// cluster-wide: suites running in parallel must not share them), plus an analyst who is a member of the reader.
/// Dropped together with its roles.
final class RoleDatabase {
    private var database: TestDatabase?
    let name: String
    let owner: String, app: String, reader: String, analyst: String

    /// Creates the roles (sql/roles.sql), migrates as the owner (`migrate --role`), runs sql/roles.sql again, as
    /// docs/database.md says to after every migrate. `empty`: only the database, no role yet.
    init(_ label: String, empty: Bool = false) throws {
        let database = try TestDatabase("roles_\(label)")
        self.database = database
        name = database.name
        let suffix = randomHex(4)
        (owner, app, reader, analyst) = ("owner_\(suffix)", "app_\(suffix)", "reader_\(suffix)", "analyst_\(suffix)")
        guard !empty else { return }
        try Self.check(roles())
        try admin().query("CREATE ROLE \(analyst) LOGIN IN ROLE \(reader)")
        try migrate()
        try Self.check(roles())
    }

    /// `tokensignin migrate --role OWNER` as the cluster's superuser, with `sqlDirectory`.
    func migrate(sqlDirectory: String = repositoryRoot + "/sql") throws {
        let run = runCommand(["migrate", "--role", owner],
                             environment: ["TOKENSIGNIN_DATABASE_URL": databaseURL(name), "TOKENSIGNIN_SQL_DIR": sqlDirectory])
        guard run.status == 0 else { throw ProgramError("migrate: \(run.err)") }
    }

    /// sql/roles.sql through psql, with this database's role names unless `variables` say otherwise.
    func roles(_ variables: [String: String] = [:]) throws -> ProgramResult {
        let names = ["owner": owner, "app": app, "reader": reader].merging(variables) { $1 }
        var arguments = ["-X", "-q", "-d", name]
        for (variable, value) in names.sorted(by: { $0.key < $1.key }) { arguments += ["-v", "\(variable)=\(value)"] }
        return try runProgram("/usr/bin/psql", arguments + ["-f", repositoryRoot + "/sql/roles.sql"],
                              environment: ProcessInfo.processInfo.environment)
    }

    static func check(_ result: ProgramResult) throws {
        guard result.status == 0 else { throw ProgramError("sql/roles.sql failed: \(result.stderrText)") }
    }

    /// The test cluster's superuser on this database.
    func admin() throws -> Connection { try Connection(conninfo: "dbname=\(name)") }

    /// A login as `role` (the test cluster trusts local logins).
    func connect(as role: String) throws -> Connection { try Connection(conninfo: "dbname=\(name) user=\(role)") }

    func store(as role: String, policy: SessionPolicy = TestStores.policy, recordsSettings: Bool = false) -> PostgresStore {
        PostgresStore(conninfo: "dbname=\(name) user=\(role)", policy: policy, log: Log { _ in }, recordsSettings: recordsSettings)
    }

    /// An in-process command's environment logging in as `role`.
    func environment(as role: String) -> [String: String] { ["TOKENSIGNIN_DATABASE_URL": databaseURL(name, user: role)] }

    deinit {
        database = nil  // drops the database (and with it every grant in it) first
        if let admin = try? Connection(conninfo: "") {
            for role in [analyst, reader, app, owner] { _ = try? admin.query("DROP ROLE IF EXISTS \(role)") }
        }
    }
}

/// One RoleDatabase for the tables of refusals, which change nothing when they pass (made on first use; the test
/// cluster, roles and all, is destroyed at the end of the run).
enum SharedRoleDatabase {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var database: RoleDatabase?

    static func get() throws -> RoleDatabase {
        try lock.withLock {
            if let database { return database }
            let made = try RoleDatabase("shared")
            database = made
            return made
        }
    }
}

/// The SQLSTATE a statement failed with, or nil when it succeeded.
func sqlState(_ connection: Connection, _ sql: String) -> String? {
    do {
        try connection.query(sql)
        return nil
    } catch {
        return error.sqlState ?? "no sqlstate: \(error)"
    }
}

@Suite struct LeastPrivilegeTests {
    @Test func theServiceRoleRunsEverythingTheServicePruneAndTheOperatorCommandsDo() throws {
        let db = try RoleDatabase("app_runs")
        let store = db.store(as: db.app, recordsSettings: true)
        let phone = SessionToken.generate(), laptop = SessionToken.generate()
        guard case .signedIn(let first) = try store.signIn(verifiedToken(sub: "sub-app"), TestStores.session(phone.hash)),
              case .signedIn(let second) = try store.signIn(verifiedToken(sub: "sub-app"), TestStores.session(laptop.hash)) else {
            Issue.record("refused")
            return
        }
        try store.recordRefusedSignIn(reason: "bad_audience", clientID: nil, ip: nil, userAgent: nil)
        #expect(try store.liveSession(phone.hash)?.sub == "sub-app")
        #expect(try store.listSessions(phone.hash, limit: 10, after: nil)?.sessions.count == 2)
        #expect(try store.revokeSession(second.sessionID, presentedBy: phone.hash) == .revoked(by: first.sessionID))
        #expect(try store.signOut(phone.hash, everywhere: true)?.revoked == 1)
        try store.ping()
        let applied = try store.applySecurityEvents([
            SecurityEventRecord(jti: "jti-app", issuer: "https://accounts.google.com/",
                                type: "https://schemas.openid.net/secevent/risc/event-type/sessions-revoked",
                                subject: "sub-app", reason: nil, state: nil, issuedAt: 1_800_000_000),
        ])
        #expect(applied.map(\.outcome) == ["sessions_revoked"])

        // The operator commands and prune, as the same role (the prune unit runs as the service's account).
        let third = SessionToken.generate()
        _ = try store.signIn(verifiedToken(sub: "sub-app", issuedAt: 1_900_000_000), TestStores.session(third.hash))
        #expect(try store.userExists(sub: "sub-app") && store.sessionExists(id: second.sessionID))
        #expect(try store.sessions(ofUser: "sub-app").count == 3)
        #expect(try store.revokeSessions(ofUser: "nobody") == 0)
        #expect(try store.revokeAllSessions(createdBefore: nil).revoked == 1)
        let admin = try db.admin()
        try admin.query("UPDATE signin.sessions SET revoked_at = now() - interval '40 days', created_at = now() - interval '50 days'")
        try admin.query("UPDATE signin.sign_ins SET at = now() - interval '100 days'")
        let pruned = try store.prune(PrunePolicy(batch: 2))
        #expect(pruned.sessions == 3 && pruned.signIns == 4)
        #expect(pruned.settings?.idleTimeout == TestStores.policy.idleTimeout)

        let prune = runCommand(["prune"], environment: db.environment(as: db.app))
        #expect(prune.status == 0, "\(prune.err)")
    }

    /// What the service's role must never do: read, change or delete the audit, touch the schema, delete users.
    @Test(arguments: [
        "SELECT count(*) FROM signin.sign_ins",
        "UPDATE signin.sign_ins SET reason = 'forged'",
        "DELETE FROM signin.sign_ins",
        "TRUNCATE signin.sign_ins",
        "DELETE FROM signin.users",
        "DELETE FROM signin.security_events",
        "UPDATE signin.security_events SET outcome = 'recorded'",
        "SELECT count(*) FROM signin.schema_migrations",
        "INSERT INTO signin.schema_migrations (name, checksum) VALUES ('999_x.sql', repeat('0', 64))",
        "SELECT count(*) FROM signin.active_sessions",
        "SELECT count(*) FROM signin.flagged_users",
        "DELETE FROM signin.service_settings",
        "TRUNCATE signin.sessions",
        "CREATE TABLE signin.stash (secret text)",
        "DROP TABLE signin.sessions",
        "ALTER TABLE signin.sign_ins DISABLE TRIGGER ALL",
        "CREATE SCHEMA elsewhere",
        "CREATE TABLE public.stash (secret text)",
    ])
    func theServiceRoleIsRefused(_ sql: String) throws {
        let db = try SharedRoleDatabase.get()
        #expect(sqlState(try db.connect(as: db.app), sql) == "42501", "\(sql)")
    }

    @Test func theAuditPruneFunctionKeepsTheLastWeekWhoeverCallsIt() throws {
        let db = try RoleDatabase("audit_floor")
        let app = try db.connect(as: db.app)
        #expect(sqlState(app, "SELECT signin.prune_sign_ins('6 days 23 hours', 10)") == "22023")
        #expect(sqlState(app, "SELECT signin.prune_sign_ins('7 days', 0)") == "22023")
        #expect(sqlState(app, "SELECT signin.prune_sign_ins('7 days', 10)") == nil)
        #expect(sqlState(try db.connect(as: db.analyst), "SELECT signin.prune_sign_ins('7 days', 10)") == "42501")
        let tooShort = runCommand(["prune", "--audit-retention", "6d"], environment: db.environment(as: db.app))
        #expect(tooShort.status == 2 && tooShort.err.joined().contains("at least 7d"), "\(tooShort.err)")
    }

    /// Every table and view the reader may read, and a write it must not make on each table.
    @Test(arguments: [
        ("signin.users", "UPDATE signin.users SET disabled_at = now()"),
        ("signin.sessions", "UPDATE signin.sessions SET revoked_at = NULL"),
        ("signin.sign_ins", "DELETE FROM signin.sign_ins"),
        ("signin.security_events", "INSERT INTO signin.security_events (jti, issuer, event_type, issued_at, outcome) VALUES ('j', 'i', 't', now(), 'recorded')"),
        ("signin.service_settings", "UPDATE signin.service_settings SET session_idle_timeout = '1 second'"),
        ("signin.schema_migrations", "DELETE FROM signin.schema_migrations"),
        ("signin.active_sessions", "SELECT signin.prune_sign_ins('30 days', 10)"),
        ("signin.active_sessions_per_user", "TRUNCATE signin.sessions"),
        ("signin.sign_ins_per_day", "CREATE TABLE signin.notes (note text)"),
        ("signin.flagged_users", "INSERT INTO signin.users (google_sub) VALUES ('forged')"),
    ])
    func theReaderReadsEveryRelationAndWritesNothing(relation: String, write: String) throws {
        let db = try SharedRoleDatabase.get()
        let analyst = try db.connect(as: db.analyst)
        #expect(sqlState(analyst, "SELECT count(*) FROM \(relation)") == nil, "\(relation)")
        #expect(sqlState(analyst, write) == "42501", "\(write)")
    }

    @Test func aRefusedPrivilegeIsAServerFaultForTheServiceAndExitOneForTheCommands() throws {
        let db = try RoleDatabase("refusal")
        _ = try db.store(as: db.app).signIn(verifiedToken(sub: "sub-r"), TestStores.session())
        do {
            _ = try db.store(as: db.analyst).signIn(verifiedToken(sub: "sub-r"), TestStores.session())
            Issue.record("the reader signed someone in")
        } catch let error as StoreError {
            #expect(error.code == .permissionDenied && error.sqlState == "42501")
            #expect(Failure(error).response.status == 500)
        }
        for command in [["sessions", "revoke", "--user", "sub-r"], ["sessions", "revoke", "--all"], ["prune"]] {
            let run = runCommand(command, environment: db.environment(as: db.analyst))
            #expect(run.status == 1 && run.err.joined().contains("SQLSTATE 42501"), "\(command): \(run.err)")
        }
        #expect(try db.admin().query("SELECT count(*) FROM signin.sessions WHERE revoked_at IS NULL")[0, 0] == "1")
    }

    @Test func objectsOfALaterMigrationNeedNoNewGrants() throws {
        let db = try RoleDatabase("later")
        let folder = NSTemporaryDirectory() + "later-migrations-\(randomHex(4))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for file in try FileManager.default.contentsOfDirectory(atPath: repositoryRoot + "/sql") where file.hasSuffix(".sql") {
            try FileManager.default.copyItem(atPath: repositoryRoot + "/sql/" + file, toPath: folder + "/" + file)
        }
        try """
            CREATE TABLE signin.later (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, note text);
            CREATE FUNCTION signin.later_count() RETURNS bigint LANGUAGE sql AS 'SELECT count(*) FROM signin.later';
            """.write(toFile: folder + "/999_later.sql", atomically: true, encoding: .utf8)
        try db.migrate(sqlDirectory: folder)

        let app = try db.connect(as: db.app)
        #expect(sqlState(app, "INSERT INTO signin.later (note) VALUES ('a')") == nil)
        #expect(sqlState(app, "UPDATE signin.later SET note = 'b'") == nil)
        #expect(sqlState(app, "SELECT signin.later_count()") == nil)
        #expect(sqlState(app, "DELETE FROM signin.later") == "42501")
        let analyst = try db.connect(as: db.analyst)
        #expect(sqlState(analyst, "SELECT note FROM signin.later") == nil)
        #expect(sqlState(analyst, "INSERT INTO signin.later (note) VALUES ('c')") == "42501")
        #expect(sqlState(analyst, "SELECT signin.later_count()") == "42501", "functions are not PUBLIC's")
        // Running the script again keeps the table usable (what default privileges gave) and changes nothing else.
        try RoleDatabase.check(db.roles())
        #expect(sqlState(app, "INSERT INTO signin.later (note) VALUES ('d')") == nil)
        #expect(sqlState(app, "SELECT count(*) FROM signin.sign_ins") == "42501")
    }

    @Test func anOlderDeploymentsSingleRoleBecomesTheServiceRoleAndLosesTheSchema() throws {
        let db = try RoleDatabase("convert", empty: true)
        // The older deployment walk: one role owns the database and migrates.
        let admin = try db.admin()
        try admin.query("CREATE ROLE \(db.app) LOGIN")
        try admin.query("ALTER DATABASE \(db.name) OWNER TO \(db.app)")
        let old = runCommand(["migrate"], environment: db.environment(as: db.app).merging(["TOKENSIGNIN_SQL_DIR": repositoryRoot + "/sql"]) { $1 })
        #expect(old.status == 0, "\(old.err)")
        _ = try db.store(as: db.app).signIn(verifiedToken(sub: "sub-old"), TestStores.session())

        try RoleDatabase.check(db.roles())
        let owners = try admin.query("""
            SELECT DISTINCT pg_get_userbyid(relowner) FROM pg_class WHERE relnamespace = 'signin'::regnamespace
            UNION SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'signin'
            UNION SELECT pg_get_userbyid(proowner) FROM pg_proc WHERE pronamespace = 'signin'::regnamespace
            UNION SELECT pg_get_userbyid(typowner) FROM pg_type WHERE typnamespace = 'signin'::regnamespace
            UNION SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()
            """)
        #expect(owners.count == 1 && owners[0, 0] == db.owner)
        let app = try db.connect(as: db.app)
        #expect(sqlState(app, "DROP TABLE signin.sign_ins") == "42501")
        #expect(sqlState(app, "SELECT count(*) FROM signin.sign_ins") == "42501")
        #expect(try db.store(as: db.app).sessions(ofUser: "sub-old").count == 1)
    }

    /// (variables, what the refusal says): nothing is created or changed.
    @Test(arguments: [
        (["app": "same_name", "reader": "same_name"], "three different roles"),
        (["app": "postgres"], "superuser"),
        (["owner": "Owner"], "not a plain lower-case identifier"),
        (["reader": "x; DROP TABLE signin.users"], "not a plain lower-case identifier"),
    ])
    func theRolesScriptRefusesNamesThatCannotWork(variables: [String: String], message: String) throws {
        let db = try SharedRoleDatabase.get()
        let run = try db.roles(variables)
        #expect(run.status != 0 && run.stderrText.contains(message), "\(run.stderrText)")
        #expect(try db.admin().query("SELECT count(*) FROM pg_roles WHERE rolname = 'same_name'")[0, 0] == "0")
    }

    @Test func everyRoleSaysWhatItIsFor() throws {
        let db = try SharedRoleDatabase.get()
        let comments = try db.admin().query("""
            SELECT r.rolname, shobj_description(r.oid, 'pg_authid') FROM pg_roles r WHERE r.rolname = ANY ($1::text[])
            """, ["{\(db.owner),\(db.app),\(db.reader)}"])
        #expect(comments.count == 3)
        for row in 0..<comments.count { #expect(comments[row, 1]?.hasPrefix("tokensignin: ") == true, "\(comments[row, 0] ?? "")") }
    }

    /// The service's role resolves unqualified names in signin, then pg_catalog, never in public; and no role but a
    /// superuser may create objects in public, where one could be planted to shadow a function a statement calls.
    @Test func theServiceRoleNeverResolvesNamesInASchemaOthersCanWrite() throws {
        let db = try SharedRoleDatabase.get()
        let app = try db.connect(as: db.app)
        #expect(try app.query("SHOW search_path")[0, 0] == "signin, pg_catalog")
        let configured = try db.admin().query("SELECT array_to_string(rolconfig, ',') FROM pg_roles WHERE rolname = $1", [db.app])
        #expect(configured[0, 0] == "search_path=signin, pg_catalog")
        for role in [db.app, db.reader, db.analyst] {
            #expect(try db.admin().query("SELECT has_schema_privilege($1, 'public', 'CREATE')", [role])[0, 0] == "f", "\(role)")
        }
        do {
            try app.query("CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE sql AS 'SELECT NULL::timestamptz'")
            Issue.record("the service's role created a function in public")
        } catch {
            #expect(error.code == .permissionDenied, "\(error.detail)")
        }
    }

    /// A database made by an older PostgreSQL (upgraded) still lets every role create in public: roles.sql takes it back.
    @Test func rolesTakesCreateOnPublicBackFromEveryone() throws {
        let db = try RoleDatabase("public_create", empty: true)
        try db.admin().query("GRANT CREATE ON SCHEMA public TO PUBLIC")
        try RoleDatabase.check(db.roles())
        #expect(try db.admin().query("SELECT has_schema_privilege($1, 'public', 'CREATE')", [db.app])[0, 0] == "f")
        #expect(try db.admin().query("SELECT count(*) FROM pg_namespace n, aclexplode(n.nspacl) a WHERE n.nspname = 'public' AND a.grantee = 0 AND a.privilege_type = 'CREATE'")[0, 0] == "0")
    }
}
