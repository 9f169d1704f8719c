// Connection: connecting, parameters, errors and their codes, prepared statements, losing the server. What
// holds with and without a transaction pooler runs both ways, here straight against the test cluster.
import Foundation
import TestSupport
import Store
import Testing

@Suite struct ConnectionTests {
    @Test func unreachableServerFailsWithConnectionFailedWithoutHanging() throws {
        let start = Date()
        #expect(throws: StoreError(.connectionFailed)) {
            try Connection(conninfo: "host=/nonexistent/tokensignin port=1 dbname=x")
        }
        // A routable-nowhere address: bounded by connect_timeout, whatever the network does.
        #expect(throws: StoreError(.connectionFailed)) {
            try Connection(conninfo: "host=10.255.255.1 port=5432 dbname=x connect_timeout=2")
        }
        #expect(Date().timeIntervalSince(start) < 15)
    }

    @Test func connectionFailureIsRetryable() {
        #expect(StoreError(.connectionFailed).isRetryable)
        #expect(StoreError(.connectionLost).isRetryable)
    }

    @Test func malformedConninfoFailsWithConnectionFailed() {
        #expect(throws: StoreError(.connectionFailed)) { try Connection(conninfo: "host='unterminated") }
    }

    @Test func emptyConninfoUsesTheEnvironmentAndAppliesTheDefaults() throws {
        let connection = try Connection(conninfo: "")
        let rows = try connection.query("SELECT current_database(), current_setting('application_name')")
        #expect(rows[0, 0] == ProcessInfo.processInfo.environment["PGDATABASE"])
        #expect(rows[0, 1] == "tokensignin")
    }

    @Test func timeoutsAndKeepalivesAreOnUnlessTheConninfoSaysOtherwise() throws {
        let defaults = try Connection(conninfo: "")
        #expect(defaults.setting("connect_timeout") == "5")
        #expect(defaults.setting("keepalives") == "1")
        #expect(defaults.setting("client_encoding") == "UTF8")
        #expect(defaults.setting("password") == nil)
        let custom = try Connection(conninfo: "connect_timeout=9 client_encoding=LATIN1")
        #expect(custom.setting("connect_timeout") == "9")
        #expect(custom.setting("client_encoding") == "UTF8")  // Store always speaks UTF-8
    }

    @Test func uriConninfoWorks() throws {
        let env = ProcessInfo.processInfo.environment
        let host = try #require(env["PGHOST"]).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let connection = try Connection(
            conninfo: "postgresql:///\(env["PGDATABASE"] ?? "tokensignin")?host=\(host)&application_name=custom")
        #expect(try connection.query("SELECT current_setting('application_name')")[0, 0] == "custom")
    }

    @Test(arguments: [
        "plain", "", "it's \"quoted\"; DROP TABLE x; --", "ünïcødé ✓ 日本語 🙂", "back\\slash $1 %s",
        "line\nbreak\ttab",
    ], Pooler.allCases)
    func textParametersRoundTripUnchanged(_ value: String, pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let rows = try connection.query("SELECT $1::text, length($1::text)", [value])
        #expect(rows[0, 0] == value)
        #expect(rows[0, 1] == String(value.count))
    }

    @Test(arguments: Pooler.allCases)
    func longParameterRoundTrips(pooler: Pooler) throws {
        let value = String(repeating: "0123456789", count: 100_000)
        let rows = try Connection(conninfo: "", pooler: pooler).query("SELECT $1::text", [value])
        #expect(rows[0, 0] == value)
    }

    @Test(arguments: Pooler.allCases)
    func nullParametersAndNullValuesRoundTrip(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let rows = try connection.query("SELECT $1::text, $2::text IS NULL, $3::int + 1", [nil, nil, "41"])
        #expect(rows[0, 0] == nil)
        #expect(rows[0, 1] == "t")
        #expect(rows[0, 2] == "42")
    }

    /// Each parameter type writes its own text into the statement's buffer: PostgreSQL reads back the same
    /// values, the extremes of a bigint included, and a nil optional is NULL.
    @Test(arguments: Pooler.allCases)
    func typedParametersAreBoundAsPostgreSQLReadsThem(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let none: Int64? = nil
        let rows = try connection.query(
            """
            SELECT $1::bigint, $2::bigint, $3::bigint, $4::int, $5::boolean, $6::boolean,
                   extract(epoch FROM $7::interval)::bigint, encode(decode($8, 'hex'), 'hex'), $9::bigint IS NULL, $10::bigint
            """,
            [Int64.min, Int64.max, Int64(0), -42, true, false, SQLInterval(seconds: 2_592_000),
             SQLHexBytes([0x00, 0x01, 0xab, 0xff]), none, Optional(Int64(7))])
        #expect((0..<10).map { rows[0, $0] }
            == ["-9223372036854775808", "9223372036854775807", "0", "-42", "t", "f", "2592000", "0001abff", "t", "7"])
    }

    @Test(arguments: [Int64.min, Int64.min + 1, -10, -9, -1, 0, 1, 9, 10, 99, 100, 1_234_567_890, Int64.max - 1, Int64.max])
    func integerParametersAreSpelledInDecimal(_ value: Int64) {
        #expect(value.sqlText == String(value))
        #expect(Int(truncatingIfNeeded: value).sqlText == String(Int(truncatingIfNeeded: value)))
        #expect(SQLInterval(seconds: value).sqlText == "\(value) seconds")
    }

    /// The texts PostgreSQL would accept in other spellings too (`1`, upper-case hex), pinned as written.
    @Test func otherParametersAreSpelledExactly() {
        #expect(true.sqlText == "true" && false.sqlText == "false")
        #expect(SQLHexBytes([0x00, 0x01, 0xab, 0xff, 0x9a]).sqlText == "0001abff9a")
        #expect(SQLHexBytes([]).sqlText == "")
        #expect((nil as String?).sqlText == nil && Optional("x").sqlText == "x")
    }

    @Test(arguments: Pooler.allCases)
    func parameterWithNulIsRefusedNotTruncated(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        #expect(throws: StoreError(.invalidParameter)) { try connection.query("SELECT $1::text", ["a\u{0}b"]) }
        // In a later parameter, after an empty one and a NULL (each checked over its own bytes).
        let none: String? = nil
        #expect(throws: StoreError(.invalidParameter)) {
            try connection.query("SELECT $1::text, $2::text, $3::text, $4::text", ["ok", "", none, "\u{0}"])
        }
        #expect(try connection.query("SELECT $1::text, $2::text, $3::text", ["ok", "", none])[0, 0] == "ok")
        #expect(throws: StoreError(.invalidParameter)) {
            try connection.execute(Statement(name: "nul", sql: "SELECT $1::text"), ["a\u{0}b"])
        }
        #expect(try connection.query("SELECT 1")[0, 0] == "1")  // still usable
    }

    @Test(arguments: Pooler.allCases)
    func moreParametersThanTheProtocolCarriesAreRefusedBeforeSending(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let pid = connection.backendPID
        #expect(throws: StoreError(.invalidParameter)) {
            try connection.query("SELECT 1", [String](repeating: "x", count: 65_536))
        }
        #expect(try connection.query("SELECT 1")[0, 0] == "1")
        #expect(connection.backendPID == pid, "the same session: nothing was lost or reset")
    }

    @Test(arguments: Pooler.allCases)
    func rowsCarryColumnsCountsAndAffectedRows(pooler: Pooler) throws {
        let db = try TestDatabase("rows")
        let connection = try db.connect(pooler: pooler)
        try connection.query("CREATE TABLE t (id int PRIMARY KEY, label text)")
        let inserted = try connection.query("INSERT INTO t VALUES (1, 'a'), (2, NULL), (3, 'c')")
        #expect(inserted.affectedRows == 3)
        #expect(inserted.commandTag == "INSERT 0 3")
        #expect(inserted.columns.isEmpty && inserted.columnCount == 0)
        let rows = try connection.query("SELECT id, label FROM t WHERE id >= $1 ORDER BY id", ["2"])
        #expect(rows.columns == ["id", "label"])
        #expect(rows.columnCount == 2)
        #expect(rows.commandTag == "SELECT 2")
        #expect(rows.affectedRows == 2)
        #expect(rows.count == 2)
        #expect(rows[row: 0, column: "label"] == nil)
        #expect(rows[row: 1, column: 1] == "c")
        #expect(rows.columnIndex("missing") == nil)
        #expect(try connection.query("UPDATE t SET label = 'x' WHERE id > 1").affectedRows == 2)
        #expect(try connection.query("DELETE FROM t WHERE id = 99").affectedRows == 0)
        let named = try connection.query(#"SELECT 1 AS "a b", 2 AS "é", 3"#)
        #expect(named.columns == ["a b", "é", "?column?"])
        #expect(named.columnIndex("é") == 1)
        #expect(named.commandTag == "SELECT 1")
        let nothing = try connection.query("SELECT")
        #expect(nothing.columns.isEmpty && nothing.count == 1 && nothing.commandTag == "SELECT 1")
        let empty = try connection.query("")
        #expect(empty.columns.isEmpty && empty.count == 0 && empty.commandTag == "" && empty.affectedRows == 0)
    }

    @Test(arguments: Pooler.allCases)
    func uniqueViolationHasItsCodeSQLStateAndConstraint(pooler: Pooler) throws {
        let db = try TestDatabase("unique")
        let connection = try db.connect(pooler: pooler)
        try connection.query("CREATE TABLE t (k text CONSTRAINT t_k_key UNIQUE)")
        try connection.query("INSERT INTO t VALUES ($1)", ["secret-value"])
        do {
            try connection.query("INSERT INTO t VALUES ($1)", ["secret-value"])
            Issue.record("expected a unique violation")
        } catch {
            #expect(error.code == .uniqueViolation)
            #expect(error.sqlState == "23505")
            #expect(error.constraint == "t_k_key")
            #expect(!error.isRetryable)
            #expect(error.description == "unique_violation")
            #expect(!error.detail.contains("secret-value"))  // no DETAIL line echoing the row
        }
    }

    @Test(arguments: Pooler.allCases)
    func otherServerErrorsAreQueryFailedOrConstraintViolation(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        do {
            try connection.query("SELEC 1")
            Issue.record("expected a syntax error")
        } catch {
            #expect(error.code == .queryFailed)
            #expect(error.sqlState == "42601")
            #expect(!error.isRetryable)
        }
        do {
            try connection.query("SELECT $1::int", ["not a number"])
            Issue.record("expected a type error")
        } catch {
            #expect(error.code == .queryFailed)
            #expect(error.sqlState == "22P02")
        }
        let db = try TestDatabase("check")
        let other = try db.connect(pooler: pooler)
        try other.query("CREATE TABLE t (n int CHECK (n > 0))")
        #expect(throws: StoreError(.constraintViolation)) { try other.query("INSERT INTO t VALUES (-1)") }
    }

    /// Audit finding: a server that stops answering (a frozen backend or storage, a pooler holding the statement)
    /// held the worker for as long as it lasted. Each wait for an answer is now bounded by `responseTimeout`: the
    /// call throws a retryable `timed_out`, the session is dropped, and the next call runs on a new one.
    @Test(arguments: Pooler.allCases)
    func aServerThatStopsAnsweringCostsACallAtMostTheResponseTimeout(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler, responseTimeout: .milliseconds(300))
        let statement = Statement(name: "frozen_select", sql: "SELECT $1::int + 1")
        for call in ["query", "execute", "batch"] {
            let frozen = pid_t(connection.backendPID)
            #expect(kill(frozen, SIGSTOP) == 0, "the backend is this machine's")
            defer { kill(frozen, SIGCONT) }
            do {
                switch call {
                case "query": try connection.query("SELECT 1")
                case "execute": try connection.execute(statement, [1])
                default: _ = try connection.executeBatch(statement, [[1], [2]])
                }
                Issue.record("\(call): expected a timeout")
            } catch {
                #expect(error.code == .timedOut && error.isRetryable && error.isOutage, "\(call): \(error)")
            }
            kill(frozen, SIGCONT)
            // A new session answers; the frozen one is not used again.
            #expect(try connection.execute(statement, [41]).decode(row: 0, as: Int.self) == 42, "\(call)")
            #expect(connection.backendPID != Int(frozen))
        }
    }

    /// Review finding: a pipeline is answered at its Sync, once every statement has run, so a slow server that
    /// does answer is silent for the sum of the statements. Each statement after the first adds a statement
    /// timeout to the wait: three statements of 0.4 s each are not cut short by a 0.5 s response timeout.
    @Test(arguments: Pooler.allCases)
    func aSlowPipelineThatAnswersIsNotCutShort(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler, responseTimeout: .milliseconds(500))
        let statement = Statement(name: "slow_select", sql: "SELECT $1::int FROM pg_sleep(0.4)")
        let results = try connection.executeBatch(statement, [[1], [2], [3]])
        var values: [Int] = []
        for result in results { values.append(try result.get().decode(row: 0, as: Int.self)) }
        #expect(values == [1, 2, 3])
        // One statement alone gets the response timeout itself: a sleep past it is cut short. (Behind a
        // transaction pooler a statement is a pipeline of two, the timeouts leading it.)
        if pooler == .none {
            #expect(throws: StoreError(.timedOut)) { try connection.query("SELECT pg_sleep(0.8)") }
        }
    }

    @Test func timeoutsAreRetryableOutagesAndAMissingPrivilegeIsAFault() throws {
        let db = try TestDatabase("faults")
        let connection = try db.connect()
        try connection.query("SET statement_timeout = 50")
        do {
            try connection.query("SELECT pg_sleep(2)")
            Issue.record("the statement timeout did not fire")
        } catch {
            #expect(error.code == .timedOut && error.sqlState == "57014" && error.isRetryable)
        }
        try connection.query("RESET statement_timeout")
        let role = "no_privileges_\(randomHex(4))"
        try connection.query("CREATE TABLE secret (n int)")
        try connection.query("CREATE ROLE \(role)")
        defer { _ = try? connection.query("RESET ROLE"); _ = try? connection.query("DROP ROLE IF EXISTS \(role)") }
        try connection.query("SET ROLE \(role)")
        do {
            try connection.query("SELECT * FROM secret")
            Issue.record("read without the privilege")
        } catch {
            #expect(error.code == .permissionDenied && error.sqlState == "42501" && !error.isRetryable)
        }
        try connection.query("RESET ROLE")
        try connection.query("DROP TABLE secret")
    }

    @Test(arguments: [
        ("08006", true), ("08003", true), ("57P01", true), ("57P02", true), ("57P03", true),
        ("40001", true), ("40P01", true), ("57014", true), ("55P03", true), ("53300", true), ("25006", true),
        ("23505", false), ("42601", false), ("42501", false), ("42P01", false), ("23514", false),
    ])
    func retryableServerStates(_ sqlState: String, _ retryable: Bool) {
        #expect(StoreError(.queryFailed, sqlState: sqlState).isRetryable == retryable)
    }

    @Test(arguments: Pooler.allCases)
    func serializationFailureIsRetryable(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        do {
            try connection.query("DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '40001'; END $$")
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .serializationFailure)
            #expect(error.isRetryable)
        }
        #expect(try connection.query("SELECT 1")[0, 0] == "1")
    }

    @Test func preparedStatementIsPreparedOnceAndReused() throws {
        let connection = try Connection(conninfo: "")
        let statement = Statement(name: "add_one", sql: "SELECT $1::int + 1")
        #expect(try connection.execute(statement, ["1"])[0, 0] == "2")
        #expect(try connection.execute(statement, ["41"])[0, 0] == "42")
        let count = try connection.query("SELECT count(*) FROM pg_prepared_statements WHERE name = 'add_one'")
        #expect(count[0, 0] == "1")
    }

    @Test func twoStatementsWithOneNameAreRefused() throws {
        let connection = try Connection(conninfo: "")
        try connection.execute(Statement(name: "same", sql: "SELECT 1"))
        #expect(throws: StoreError(.invalidParameter)) {
            try connection.execute(Statement(name: "same", sql: "SELECT 2"))
        }
    }

    @Test func statementsDiscardedByTheServerArePreparedAgain() throws {
        let connection = try Connection(conninfo: "")
        let statement = Statement(name: "discard_me", sql: "SELECT $1::text")
        #expect(try connection.execute(statement, ["a"])[0, 0] == "a")
        try connection.query("DEALLOCATE ALL")  // what a pooler's DISCARD ALL does
        #expect(try connection.execute(statement, ["b"])[0, 0] == "b")
    }

    @Test(arguments: Pooler.allCases)
    func terminatedBackendThrowsRetryableThenNextCallReconnectsAndPreparesAgain(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let statement = Statement(name: "who", sql: "SELECT pg_backend_pid()::text || $1::text")
        let pid = connection.backendPID
        #expect(try connection.execute(statement, ["!"])[0, 0] == "\(pid)!")

        let admin = try Connection(conninfo: "")
        // With a timeout, pg_terminate_backend returns once the backend has exited (its socket is closed).
        #expect(try admin.query("SELECT pg_terminate_backend($1::int, 10000)", [String(pid)])[0, 0] == "t")

        do {
            try connection.execute(statement, ["!"])
            Issue.record("expected the call on a terminated backend to fail")
        } catch {
            #expect(error.code == .connectionLost)
            #expect(error.isRetryable)
        }
        let rows = try connection.execute(statement, ["?"])
        #expect(connection.backendPID != pid)
        #expect(rows[0, 0] == "\(connection.backendPID)?")
    }

    @Test(arguments: Pooler.allCases)
    func copyModeIsRefusedAndTheNextCallWorks(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        #expect(throws: StoreError(.queryFailed)) { try connection.query("COPY (SELECT 1) TO STDOUT") }
        #expect(try connection.query("SELECT 2")[0, 0] == "2")
    }

    @Test(arguments: Pooler.allCases)
    func transactionCommitsOrRollsBack(pooler: Pooler) throws {
        let db = try TestDatabase("tx")
        let connection = try db.connect(pooler: pooler)
        try connection.query("CREATE TABLE t (n int PRIMARY KEY)")
        try connection.transaction { (c) throws(StoreError) in
            try c.query("INSERT INTO t VALUES (1)")
            try c.query("INSERT INTO t VALUES (2)")
        }
        #expect(throws: StoreError(.uniqueViolation)) {
            try connection.transaction { (c) throws(StoreError) in
                try c.query("INSERT INTO t VALUES (3)")
                try c.query("INSERT INTO t VALUES (1)")
            }
        }
        #expect(!connection.isInTransaction)
        #expect(try connection.query("SELECT string_agg(n::text, ',' ORDER BY n) FROM t")[0, 0] == "1,2")
    }

    @Test(arguments: Pooler.allCases)
    func scriptRunsSeveralStatementsAndStopsAtTheFirstError(pooler: Pooler) throws {
        let db = try TestDatabase("script")
        let connection = try db.connect(pooler: pooler)
        try connection.run(script: "CREATE TABLE a (n int); INSERT INTO a VALUES (1); INSERT INTO a VALUES (2);")
        #expect(throws: StoreError(.queryFailed)) {
            try connection.run(script: "INSERT INTO a VALUES (3); SELEC oops; INSERT INTO a VALUES (4);")
        }
        // A multi-statement simple query is one implicit transaction: the failure undid (3) too.
        #expect(try connection.query("SELECT count(*) FROM a")[0, 0] == "2")
    }
}

/// Restarts a private server: the cluster the other suites share is never disturbed.
@Suite struct ServerRestartTests {
    /// A crash (or an immediate stop, or a failover's old primary dying) sends no error, only a WARNING before the
    /// socket closes: the next call must still be a retryable lost connection, never a query fault (a 500).
    @Test(arguments: Pooler.allCases)
    func aCrashedServerIsALostConnectionNotAQueryFault(pooler: Pooler) throws {
        let cluster = try PrivateCluster()
        let connection = try Connection(conninfo: cluster.conninfo, pooler: pooler)
        let statement = Statement(name: "echo", sql: "SELECT $1::text")
        #expect(try connection.execute(statement, ["before"])[0, 0] == "before")
        try cluster.control("crash")
        do {
            try connection.execute(statement, ["crashed"])
            Issue.record("a call on a crashed server succeeded")
        } catch {
            #expect(error.code == .connectionLost && error.isRetryable, "\(error.code): \(error.detail)")
        }
        #expect(!connection.isConnected)
        try cluster.control("start")
        #expect(try connection.execute(statement, ["after"])[0, 0] == "after")
    }

    @Test func preparedStatementsWorkAgainAfterTheServerRestarts() throws {
        let cluster = try PrivateCluster()
        let connection = try Connection(conninfo: cluster.conninfo)
        let statement = Statement(name: "echo", sql: "SELECT $1::text")
        #expect(try connection.execute(statement, ["before"])[0, 0] == "before")

        try cluster.control("stop")
        do {
            try connection.execute(statement, ["down"])
            Issue.record("expected the call to fail while the server is down")
        } catch {
            #expect(error.isRetryable)
        }
        // Still down: the reset attempt fails fast and retryably, no hang.
        #expect(throws: StoreError(.connectionFailed)) { try connection.execute(statement, ["still down"]) }

        try cluster.control("start")
        #expect(try connection.execute(statement, ["after"])[0, 0] == "after")
        #expect(connection.isConnected)

        // A restart while connected and idle (no stop window seen by the client).
        try cluster.control("restart")
        #expect(throws: StoreError(.connectionLost)) { try connection.execute(statement, ["restarted"]) }
        #expect(try connection.execute(statement, ["again"])[0, 0] == "again")
    }
}
