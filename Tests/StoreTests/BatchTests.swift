// Connection.executeBatch: one statement for many parameter lists in one pipeline, each item with its own
// outcome, with and without a transaction pooler (straight against the test cluster).
import Store
import Testing
import TestSupport

@Suite struct BatchTests {
    private static func values(_ results: [Result<Rows, StoreError>]) -> [String?] {
        results.map { result in (try? result.get()).map { $0[0, 0] } ?? nil }
    }

    @Test(arguments: Pooler.allCases)
    func everyItemGetsItsOwnRowsFromOneTransaction(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let statement = Statement(name: "batch_double", sql: "SELECT ($1::int * 2)::text, txid_current()::text")
        let results = try connection.executeBatch(statement, (1...6).map { [String($0)] })
        #expect(Self.values(results) == ["2", "4", "6", "8", "10", "12"])
        // One pipeline, one Sync: the items ran in one implicit transaction, so in one round trip.
        let transactions = Set(results.compactMap { try? $0.get()[0, 1] })
        #expect(transactions.count == 1)
        #expect(try connection.query("SELECT 1")[0, 0] == "1")  // out of pipeline mode again
    }

    /// A failing item aborts its transaction, and what the others wrote in it: they run again, so every item
    /// that succeeds has its writes committed, and the failing one none.
    @Test(arguments: Pooler.allCases)
    func aFailingItemLeavesTheOthersWritesCommitted(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let table = "batch_writes_\(pooler.rawValue)"
        try connection.run(script: "DROP TABLE IF EXISTS \(table); CREATE TABLE \(table) (n int)")
        defer { try? connection.run(script: "DROP TABLE \(table)") }
        let statement = Statement(name: "batch_insert_\(pooler.rawValue)", sql: "INSERT INTO \(table) VALUES (12 / $1::int) RETURNING n::text")
        let results = try connection.executeBatch(statement, ["1", "0", "4"].map { [$0] })
        #expect(Self.values(results) == ["12", nil, "3"])
        #expect(try connection.query("SELECT string_agg(n::text, ',' ORDER BY n) FROM \(table)")[0, 0] == "3,12")
    }

    @Test(arguments: Pooler.allCases)
    func aFailingItemGetsItsErrorAndTheOthersTheirRows(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let statement = Statement(name: "batch_divide", sql: "SELECT (12 / $1::int)::text")
        let results = try connection.executeBatch(statement, ["1", "0", "4", "0", "6"].map { [$0] })
        #expect(Self.values(results) == ["12", nil, "3", nil, "2"])
        for failed in [results[1], results[3]] {
            guard case .failure(let error) = failed else {
                Issue.record("expected division_by_zero, got \(failed)")
                continue
            }
            #expect(error.sqlState == "22012")
            #expect(!error.isRetryable)
        }
        #expect(try connection.query("SELECT 1")[0, 0] == "1")
    }

    /// Raises `state` for the items whose value starts with 'fail', returns the value for the others; every call
    /// counts in the sequence `<name>_calls` (not rolled back with the batch's transaction).
    private static func failing(_ connection: Connection, _ name: String, state: String) throws -> Statement {
        try connection.run(script: """
            DROP SEQUENCE IF EXISTS \(name)_calls; CREATE SEQUENCE \(name)_calls;
            CREATE OR REPLACE FUNCTION \(name)(value text) RETURNS text LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM nextval('\(name)_calls');
                IF value LIKE 'fail%' THEN RAISE EXCEPTION 'refused' USING ERRCODE = '\(state)'; END IF;
                RETURN value;
            END $$
            """)
        return Statement(name: name, sql: "SELECT \(name)($1::text)")
    }

    /// Runs `body` with a connection and `failing(name, state)`, dropped afterwards.
    private static func withFailing<R>(pooler: Pooler, _ name: String, state: String,
                                       _ body: (Connection, Statement) throws -> R) throws -> R {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let statement = try failing(connection, name, state: state)
        defer { drop(connection, name) }
        return try body(connection, statement)
    }

    private static func calls(_ connection: Connection, _ name: String) throws -> String? {
        try connection.query("SELECT CASE WHEN is_called THEN last_value ELSE 0 END::text FROM \(name)_calls")[0, 0]
    }

    private static func drop(_ connection: Connection, _ name: String) {
        try? connection.run(script: "DROP FUNCTION \(name)(text); DROP SEQUENCE \(name)_calls")
    }

    /// A failure that is no item's own (a statement timeout, the server out of resources) is what the other
    /// items would meet too: every item still pending gets it at once instead of a round trip (and a timeout) each.
    @Test(arguments: Pooler.allCases, ["57014", "53200"])
    func anOutageFailsEveryPendingItemAtOnce(pooler: Pooler, state: String) throws {
        let name = "batch_outage_\(pooler.rawValue)_\(state.lowercased())"
        try Self.withFailing(pooler: pooler, name, state: state) { connection, statement in
            let results = try connection.executeBatch(statement, [["a"], ["fail"], ["b"], ["c"]], waitsOnRows: true)
            for result in results {
                guard case .failure(let error) = result else {
                    Issue.record("expected \(state), got \(result)")
                    continue
                }
                #expect(error.sqlState == state && error.isRetryable && error.isOutage)
            }
            #expect(try Self.calls(connection, name) == "2")  // one round: a, then the failing one
            #expect(Self.values(try connection.executeBatch(statement, [["a"], ["b"]])) == ["a", "b"])
        }
    }

    /// A lock not granted, a deadlock or a serialization failure of a statement that waits on rows (a sign-in)
    /// is that statement's own (another transaction holds or changed its rows): it gets the error, a 503, and
    /// the batch's others run again and succeed.
    @Test(arguments: Pooler.allCases, ["55P03", "40P01", "40001"])
    func aLockFailureOfAStatementThatWaitsOnRowsIsTheItemsOwn(pooler: Pooler, state: String) throws {
        let name = "batch_lock_\(pooler.rawValue)_\(state.lowercased())"
        try Self.withFailing(pooler: pooler, name, state: state) { connection, statement in
            let results = try connection.executeBatch(statement, [["a"], ["fail"], ["b"], ["c"]], waitsOnRows: true)
            #expect(Self.values(results) == ["a", nil, "b", "c"])
            guard case .failure(let error) = results[1] else { return }
            #expect(error.sqlState == state && error.isRetryable && !error.isOutage)
        }
    }

    /// Once per batch only: a second lock failure in the same call (a table's lock meets every statement) fails
    /// every pending item, so the batch waits two lock timeouts at most, not one per item. Counted in calls: two
    /// rounds, not one per item.
    @Test(arguments: Pooler.allCases)
    func aSecondLockFailureFailsEveryPendingItem(pooler: Pooler) throws {
        let name = "batch_locks_\(pooler.rawValue)"
        try Self.withFailing(pooler: pooler, name, state: "55P03") { connection, statement in
            let results = try connection.executeBatch(statement, [["fail0"], ["fail1"], ["fail2"], ["fail3"]], waitsOnRows: true)
            #expect(results.allSatisfy { if case .failure(let error) = $0 { error.sqlState == "55P03" } else { false } })
            #expect(try Self.calls(connection, name) == "2")
        }
    }

    /// For statements that wait on no row (the session check), a lock not granted can only be a table's lock: it
    /// fails every pending item at once, in one round.
    @Test(arguments: Pooler.allCases)
    func aLockFailureOfAStatementThatWaitsOnNoRowFailsEveryPendingItem(pooler: Pooler) throws {
        let name = "batch_table_lock_\(pooler.rawValue)"
        try Self.withFailing(pooler: pooler, name, state: "55P03") { connection, statement in
            let results = try connection.executeBatch(statement, [["a"], ["fail"], ["b"], ["c"]])
            #expect(results.allSatisfy { if case .failure(let error) = $0 { error.sqlState == "55P03" } else { false } })
            #expect(try Self.calls(connection, name) == "2")
        }
    }

    /// The parameters share one buffer per statement: an empty text, a NULL and texts next to each other each
    /// keep their own place, in every item of a batch and in a single statement.
    @Test(arguments: Pooler.allCases)
    func emptyNullAndTextParametersKeepTheirPlaces(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let sql = "SELECT concat_ws('|', coalesce($1::text, 'NULL'), coalesce($2::text, 'NULL'), coalesce($3::text, 'NULL'), coalesce($4::text, 'NULL'))"
        let null: String? = nil
        let items: [[any SQLParameter]] = [["", null, "x", ""], [null, "", "", null], ["ab", "c", null, "défg"], [null, null, null, null]]
        let expected = ["|NULL|x|", "NULL|||NULL", "ab|c|NULL|défg", "NULL|NULL|NULL|NULL"]
        let results = try connection.executeBatch(Statement(name: "batch_places", sql: sql), items)
        #expect(Self.values(results) == expected)
        for (item, value) in zip(items, expected) {
            #expect(try connection.query(sql, item)[0, 0] == value)
        }
    }

    @Test(arguments: Pooler.allCases)
    func aParameterWithNulFailsItsItemOnly(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let statement = Statement(name: "batch_echo", sql: "SELECT $1::text")
        let results = try connection.executeBatch(statement, [["a"], ["b\u{0}c"], ["d"]])
        #expect(Self.values(results) == ["a", nil, "d"])
        #expect(throws: StoreError(.invalidParameter)) { try results[1].get() }
    }

    @Test(arguments: Pooler.allCases)
    func theTimeoutsHoldForEveryItem(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let statement = Statement(name: "batch_timeouts",
                                  sql: "SELECT current_setting('statement_timeout') || ' ' || current_setting('lock_timeout') || $1::text")
        let results = try connection.executeBatch(statement, [["!"], ["?"]])
        #expect(Self.values(results) == ["5s 2s!", "5s 2s?"])
    }

    @Test func aBatchWithNothingToSendSendsNothing() throws {
        let connection = try Connection(conninfo: "")
        let statement = Statement(name: "batch_none", sql: "SELECT $1::text")
        #expect(try connection.executeBatch(statement, []).isEmpty)
        let refused = try connection.executeBatch(statement, [["\u{0}"]])
        #expect(throws: StoreError(.invalidParameter)) { try refused[0].get() }
        // Not even prepared.
        #expect(try connection.query("SELECT count(*) FROM pg_prepared_statements WHERE name = 'batch_none'")[0, 0] == "0")
    }

    @Test func statementsDiscardedByTheServerArePreparedAgainForABatch() throws {
        let connection = try Connection(conninfo: "")
        let statement = Statement(name: "batch_discard", sql: "SELECT $1::text")
        #expect(try connection.execute(statement, ["a"])[0, 0] == "a")
        try connection.query("DEALLOCATE ALL")  // what a pooler's DISCARD ALL does
        #expect(Self.values(try connection.executeBatch(statement, [["b"], ["c"]])) == ["b", "c"])
    }

    @Test(arguments: Pooler.allCases)
    func aTerminatedBackendFailsTheWholeBatchRetryablyAndTheNextOneReconnects(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let statement = Statement(name: "batch_who", sql: "SELECT pg_backend_pid()::text || $1::text")
        let pid = connection.backendPID
        #expect(Self.values(try connection.executeBatch(statement, [["!"], ["?"]])) == ["\(pid)!", "\(pid)?"])
        let admin = try Connection(conninfo: "")
        #expect(try admin.query("SELECT pg_terminate_backend($1::int, 10000)", [String(pid)])[0, 0] == "t")
        do {
            _ = try connection.executeBatch(statement, [["!"], ["?"]])
            Issue.record("expected the batch on a terminated backend to fail")
        } catch {
            #expect(error.code == .connectionLost)
            #expect(error.isRetryable)
        }
        let again = try connection.executeBatch(statement, [["!"], ["?"]])
        #expect(connection.backendPID != pid)
        #expect(Self.values(again) == ["\(connection.backendPID)!", "\(connection.backendPID)?"])
    }
}
