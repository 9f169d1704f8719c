// Behind a transaction pooler: no startup options, timeouts per statement or transaction and never beyond it,
// no named statement on a shared server session; against the test cluster and through a real, stock PgBouncer.
import Foundation
import Store
import Synchronization
import Testing
import TestSupport

@Suite struct TransactionPoolerTests {
    @Test(arguments: Pooler.allCases)
    func everyStatementRunsUnderTheTimeouts(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let timeouts = "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')"
        let statement = try connection.query(timeouts)
        #expect(statement[0, 0] == "5s" && statement[0, 1] == "2s")
        let prepared = try connection.execute(Statement(name: "timeouts", sql: timeouts))
        #expect(prepared[0, 0] == "5s" && prepared[0, 1] == "2s")
        let inTransaction = try connection.transaction { (c) throws(StoreError) in try c.query(timeouts) }
        #expect(inTransaction[0, 0] == "5s" && inTransaction[0, 1] == "2s")
    }

    @Test func transactionPoolerSendsNoStartupOptions() throws {
        #expect(try Connection(conninfo: "", pooler: .transaction).setting("options") ?? "" == "")
        #expect(try Connection(conninfo: "", pooler: .none).setting("options") == "-c statement_timeout=5000 -c lock_timeout=2000")
    }

    @Test func localTimeoutsEndWithTheirStatementOrTransaction() throws {
        let connection = try Connection(conninfo: "", pooler: .transaction)
        try connection.query("SELECT 1")
        // A script goes as it is: what it sees is the session's own setting, which nothing above changed.
        try connection.run(script: """
            CREATE TEMP TABLE after_statement AS
            SELECT current_setting('statement_timeout') AS statement, current_setting('lock_timeout') AS lock
            """)
        _ = try connection.transaction { (c) throws(StoreError) in try c.query("SELECT 1") }
        try connection.run(script: """
            CREATE TEMP TABLE after_transaction AS
            SELECT current_setting('statement_timeout') AS statement, current_setting('lock_timeout') AS lock
            """)
        let rows = try connection.query("SELECT a.statement, a.lock, t.statement, t.lock FROM after_statement a, after_transaction t")
        #expect((0..<4).map { rows[0, $0] } == ["0", "0", "0", "0"])
        #expect(!connection.isInTransaction)
    }

    @Test func lockTimeoutFiresForAStatementAndInATransaction() throws {
        let db = try TestDatabase("pool_lock")
        let holder = try db.connect()
        try holder.query("CREATE TABLE t (n int)")
        try holder.query("BEGIN")
        try holder.query("LOCK TABLE t IN ACCESS EXCLUSIVE MODE")
        defer { _ = try? holder.query("ROLLBACK") }
        let pooled = try db.connect(pooler: .transaction)
        do {
            try pooled.query("SELECT count(*) FROM t")
            Issue.record("the statement waited on the lock unbounded")
        } catch {
            #expect(error.code == .timedOut && error.sqlState == "55P03" && error.isRetryable)
        }
        do {
            _ = try pooled.transaction { (c) throws(StoreError) in try c.execute(Statement(name: "count_t", sql: "SELECT count(*) FROM t")) }
            Issue.record("the transaction waited on the lock unbounded")
        } catch {
            #expect(error.code == .timedOut && error.sqlState == "55P03")
        }
        #expect(!pooled.isInTransaction)
        #expect(try pooled.query("SELECT 1")[0, 0] == "1")
    }

    /// The statement timeout runs from the statement's own start, after the timeouts' statement in its pipeline.
    @Test func statementTimeoutFiresBehindATransactionPooler() throws {
        let pooled = try Connection(conninfo: "", pooler: .transaction)
        do {
            try pooled.query("SELECT pg_sleep($1::int)", ["30"])
            Issue.record("the statement ran past the statement timeout")
        } catch {
            #expect(error.code == .timedOut && error.sqlState == "57014")
        }
        #expect(try pooled.query("SELECT 2")[0, 0] == "2")
    }

    @Test func aFailedStatementRollsItsPipelineBackAndLeavesTheConnectionIdle() throws {
        let db = try TestDatabase("pool_fail")
        let pooled = try db.connect(pooler: .transaction)
        try pooled.query("CREATE TABLE t (n int PRIMARY KEY)")
        try pooled.query("INSERT INTO t VALUES (1)")
        #expect(throws: StoreError(.uniqueViolation)) { try pooled.query("INSERT INTO t VALUES (2), (1)") }
        #expect(!pooled.isInTransaction)
        #expect(try pooled.query("SELECT string_agg(n::text, ',') FROM t")[0, 0] == "1")
        #expect(throws: StoreError(.queryFailed)) { try pooled.query("SELEC 1") }
        #expect(try pooled.query("SELECT 3")[0, 0] == "3")
    }
}

/// Through Debian's stock PgBouncer in transaction pooling mode, one per test.
@Suite struct PgBouncerTests {
    @Test func stockPgBouncerRefusesTheStartupOptionsAndServesTheTransactionPooler() throws {
        let db = try TestDatabase("bouncer_connect")
        let bouncer = try PgBouncer("store-connect", poolSize: 1)
        do {
            _ = try Connection(conninfo: bouncer.conninfo(db.name), pooler: .none)
            Issue.record("PgBouncer took the options startup parameter")
        } catch {
            #expect(error.code == .connectionFailed && error.detail.contains("unsupported startup parameter: options"), "\(error.detail)")
        }
        let pooled = try Connection(conninfo: bouncer.conninfo(db.name), pooler: .transaction)
        #expect(try pooled.query("SELECT current_database(), current_setting('statement_timeout')")[0, 1] == "5s")
    }

    @Test func clientsSharingOneServerSessionNeverMeetEachOthersStatements() throws {
        let db = try TestDatabase("bouncer_share")
        let bouncer = try PgBouncer("store-share", poolSize: 1)
        try db.connect().query("CREATE TABLE t (client int, n int, PRIMARY KEY (client, n))")
        let conninfo = bouncer.conninfo(db.name)
        let clients = 4, rounds = 25
        let failures = Mutex<[String]>([])
        let done = DispatchGroup()
        for client in 0..<clients {
            done.enter()
            Thread {
                defer { done.leave() }
                do throws(StoreError) {
                    let connection = try Connection(conninfo: conninfo, pooler: .transaction)
                    let insert = Statement(name: "insert_t", sql: "INSERT INTO t VALUES ($1, $2) RETURNING n + 1")
                    for n in 0..<rounds {
                        let next = try connection.execute(insert, [client, 2 * n])[0, 0]
                        let inner = try connection.transaction { (c) throws(StoreError) in
                            try c.execute(insert, [client, 2 * n + 1])[0, 0]
                        }
                        guard next == String(2 * n + 1), inner == String(2 * n + 2) else {
                            throw StoreError(.unexpectedResult, "client \(client) round \(n): \(next ?? "nil") \(inner ?? "nil")")
                        }
                    }
                } catch {
                    failures.withLock { $0.append("client \(client): \(error.code) \(error.sqlState ?? "") \(error.detail)") }
                }
            }.start()
        }
        #expect(done.wait(timeout: .now() + 120) == .success)
        #expect(failures.withLock { $0 } == [])
        let pooled = try Connection(conninfo: conninfo, pooler: .transaction)
        #expect(try pooled.query("SELECT count(*) FROM t")[0, 0] == String(clients * rounds * 2))
        // The one server session every client used holds no statement of theirs.
        #expect(try pooled.query("SELECT count(*) FROM pg_prepared_statements")[0, 0] == "0")
    }

    @Test func timeoutsNeverLeakToTheNextClientOfTheServerSession() throws {
        let db = try TestDatabase("bouncer_leak")
        let bouncer = try PgBouncer("store-leak", poolSize: 1)
        let pooled = try Connection(conninfo: bouncer.conninfo(db.name), pooler: .transaction)
        let ours = try pooled.query("SELECT pg_backend_pid(), current_setting('statement_timeout')")
        #expect(ours[0, 1] == "5s")
        _ = try pooled.transaction { (c) throws(StoreError) in try c.query("SELECT 1") }
        // psql as the next client: the same server session (a pool of one), with its own settings untouched.
        var environment = ProcessInfo.processInfo.environment
        environment["PGHOST"] = bouncer.host
        environment["PGPORT"] = String(bouncer.port)
        environment["PGOPTIONS"] = nil
        let next = try runProgram("/usr/bin/psql", ["-X", "-A", "-t", "-d", db.name, "-c",
                                                    "SELECT pg_backend_pid() || ',' || current_setting('statement_timeout') || ',' || current_setting('lock_timeout')"],
                                  environment: environment)
        #expect(next.status == 0, "\(next.stderrText)")
        #expect(next.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines) == "\(ours[0, 0] ?? ""),0,0")
    }

    @Test func aServerSessionLostBehindPgBouncerIsRetryableAndTheNextCallWorks() throws {
        let db = try TestDatabase("bouncer_lost")
        let bouncer = try PgBouncer("store-lost", poolSize: 1)
        let pooled = try Connection(conninfo: bouncer.conninfo(db.name), pooler: .transaction)
        let server = try #require(try pooled.query("SELECT pg_backend_pid()")[0, 0])
        #expect(try Connection(conninfo: "").query("SELECT pg_terminate_backend($1::int, 10000)", [server])[0, 0] == "t")
        // PgBouncer may notice first and open another server session, or hand the loss to this client.
        do {
            try pooled.query("SELECT 1")
        } catch {
            #expect(error.isRetryable, "\(error.code) \(error.detail)")
        }
        let after = try pooled.query("SELECT pg_backend_pid()")[0, 0]
        #expect(after != nil && after != server)
    }
}
