// Test support: a private database per test on the cluster scripts/with-test-db started, and a private cluster.
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Store

/// The repository root (Tests/DatabaseTestSupport/Support.swift is three levels down).
public let repositoryRoot: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().path

/// `count` random bytes as lower-case hex (stands in for SHA-256 of a session token).
public func randomHex(_ count: Int = 32) -> String {
    (0..<count).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
}

/// A fresh, uniquely named database on the test cluster (PG* environment), dropped on deinit, so suites
/// can run in parallel without seeing each other's rows.
public final class TestDatabase {
    public let name: String
    public var conninfo: String { "dbname=\(name)" }

    public init(_ label: String) throws {
        name = "store_\(label)_\(randomHex(6))"
        let admin = try Connection(conninfo: "")
        // Identifiers cannot be parameters; the name is ours (letters, digits, underscores), never input.
        try admin.query("CREATE DATABASE \(name)")
    }

    /// A database with sql/ applied.
    public static func migrated(_ label: String) throws -> TestDatabase {
        let db = try TestDatabase(label)
        try Migrator(directory: repositoryRoot + "/sql").migrate(on: try db.connect())
        return db
    }

    public func connect(pooler: Pooler = .none) throws -> Connection { try Connection(conninfo: conninfo, pooler: pooler) }

    deinit {
        if let admin = try? Connection(conninfo: "") {
            _ = try? admin.query("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        }
    }
}

/// A PostgreSQL cluster of its own (scripts/pgcluster), for tests that restart the server without
/// disturbing the suites running in parallel on the shared test cluster.
public final class PrivateCluster {
    public let directory: String
    public let port = 55499  // the socket lives in the cluster's own folder, so the port cannot clash

    public init() throws {
        directory = NSTemporaryDirectory() + "tokensignin-store-\(randomHex(4))"
        try control("start")
    }

    public var conninfo: String { "host=\(directory)/socket port=\(port) user=postgres dbname=tokensignin" }

    public func control(_ command: String) throws {
        let status = spawnAndWait([repositoryRoot + "/scripts/pgcluster", command, directory, String(port)])
        guard status == 0 else { throw StoreError(.queryFailed, "pgcluster \(command) exited \(status)") }
    }

    deinit { try? control("destroy") }
}

/// Runs a program with this process's environment and returns its exit status.
public func spawnAndWait(_ arguments: [String]) -> Int32 {
    (try? runProgram(arguments[0], Array(arguments.dropFirst()), environment: ProcessInfo.processInfo.environment).status) ?? -1
}

/// A private PgBouncer (scripts/pgbouncer-local: stock settings, `pool_mode = transaction`) on a unix socket in
/// its own folder, in front of the test cluster, so every client shares `poolSize` server sessions.
public final class PgBouncer {
    public let directory: String
    public let port: Int
    /// The socket folder clients connect to (PGHOST).
    public let host: String

    public init(_ label: String, poolSize: Int = 2) throws {
        let environment = ProcessInfo.processInfo.environment
        guard let serverHost = environment["PGHOST"], let serverPort = environment["PGPORT"] else {
            throw ProgramError("PgBouncer needs the test cluster: run the tests with `make test`")
        }
        // Under the folder scripts/with-test-db cleans up, which stops whatever a crashed run left behind.
        let root = environment["TS_TEST_RUNDIR"] ?? NSTemporaryDirectory()
        directory = root + "/\(label)-\(getpid())-\(randomHex(3))/pgbouncer"
        port = 6432
        let script = repositoryRoot + "/scripts/pgbouncer-local"
        let start = try runProgram(script, ["start", directory, String(port), serverHost, serverPort, String(poolSize)],
                                   environment: environment)
        guard start.status == 0 else { throw ProgramError("pgbouncer-local start failed: \(start.stderrText)") }
        let env = try runProgram(script, ["env", directory, String(port)], environment: environment).stdoutText
        guard let host = env.firstMatch(of: /PGHOST='([^']*)'/)?.1 else { throw ProgramError("no PGHOST in \(env)") }
        self.host = String(host)
    }

    /// A conninfo for `database` through the pooler.
    public func conninfo(_ database: String) -> String { "host=\(host) port=\(port) dbname=\(database)" }

    deinit { _ = spawnAndWait([repositoryRoot + "/scripts/pgbouncer-local", "stop", directory, String(port)]) }
}
