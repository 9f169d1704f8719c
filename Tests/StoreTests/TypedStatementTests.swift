// TypedStatement: the SQL text its key paths number, and its parameters bound from an arguments value, alone and
// in a batch, with and without a transaction pooler (straight against the test cluster).
import Store
import Testing
import TestSupport

/// What a sign-in binds, in the shape the application's statements take.
private struct Visit {
    var googleSub: String
    var email: String?
    var verified: Bool?
    var lifetime: SQLInterval
    var issuedAt: Int64
    var hash: SQLHexBytes
    var count: Int
    /// A computed property: bound through its key path rather than read in place.
    var shout: String { googleSub.uppercased() }
}

private enum Visits {
    static let echo = TypedStatement<Visit>(name: "typed_echo", """
        SELECT \(\.googleSub)::text, \(\.email)::text, \(\.verified)::boolean,
               extract(epoch FROM \(\.lifetime)::interval)::bigint, \(\.issuedAt)::bigint,
               encode(decode(\(\.hash), 'hex'), 'hex'), \(\.count)::int, \(\.googleSub)::text = \(\.shout)::text,
               \(\.email)::text IS NULL
        """)

    /// A fragment two statements could share: its key paths join the numbering of the statement it is put in.
    static let bySubject: SQLTemplate<Visit> = "google_sub = \(\.googleSub)"
    static let withFragment = TypedStatement<Visit>(name: "typed_fragment", """
        SELECT \(\.issuedAt)::bigint FROM (SELECT \(\.googleSub)::text AS google_sub) AS t WHERE \(bySubject)
        """)

    static let visit = Visit(googleSub: "110169484474386276334", email: "someone@example.com", verified: true,
                             lifetime: SQLInterval(seconds: 2_592_000), issuedAt: 1_764_000_000,
                             hash: SQLHexBytes([0x00, 0xab, 0xff]), count: -3)
}

@Suite struct TypedStatementTests {
    @Test func keyPathsAreNumberedInOrderOfFirstUseAndARepeatedOneKeepsItsNumber() {
        #expect(Visits.echo.name == "typed_echo")
        #expect(Visits.echo.sql == """
            SELECT $1::text, $2::text, $3::boolean,
                   extract(epoch FROM $4::interval)::bigint, $5::bigint,
                   encode(decode($6, 'hex'), 'hex'), $7::int, $1::text = $8::text,
                   $2::text IS NULL
            """)
        #expect(Visits.echo.parameterCount == 8)
        #expect(Visits.echo.statement == Statement(name: "typed_echo", sql: Visits.echo.sql))
    }

    @Test func aFragmentsKeyPathsJoinTheStatementsNumbering() {
        #expect(Visits.withFragment.sql
            == "SELECT $1::bigint FROM (SELECT $2::text AS google_sub) AS t WHERE google_sub = $2")
        #expect(Visits.withFragment.parameterCount == 2)
        let fragmentFirst = TypedStatement<Visit>(name: "typed_fragment_first", "WHERE \(Visits.bySubject) AND \(\.email) IS NULL")
        #expect(fragmentFirst.sql == "WHERE google_sub = $1 AND $2 IS NULL")
    }

    @Test func aStatementWithoutParametersIsItsText() throws {
        let ping = TypedStatement<Void>(name: "typed_ping", "SELECT 1")
        #expect(ping.sql == "SELECT 1" && ping.parameterCount == 0)
        #expect(try Connection(conninfo: "").execute(ping)[0, 0] == "1")
    }

    @Test(arguments: Pooler.allCases)
    func everyParameterIsBoundFromItsKeyPath(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let rows = try connection.execute(Visits.echo, Visits.visit)
        #expect((0..<9).map { rows[0, $0] }
            == ["110169484474386276334", "someone@example.com", "t", "2592000", "1764000000", "00abff", "-3", "t", "f"])
    }

    @Test(arguments: Pooler.allCases)
    func nilOptionalsAreNull(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        var visit = Visits.visit
        visit.email = nil
        visit.verified = nil
        let rows = try connection.execute(Visits.echo, visit)
        #expect(rows[0, 1] == nil && rows[0, 2] == nil && rows[0, 8] == "t")
    }

    @Test(arguments: Pooler.allCases)
    func aBatchBindsEachItemFromItsOwnArguments(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        let visits = (0..<4).map { index in
            var visit = Visits.visit
            visit.googleSub = "sub-\(index)"
            visit.email = index.isMultiple(of: 2) ? nil : "\(index)@example.com"
            visit.issuedAt = Int64(index)
            return visit
        }
        let results = try connection.executeBatch(Visits.echo, visits, waitsOnRows: true)
        let rows = try results.map { result in try result.get() }
        #expect(rows.map { $0[0, 0] } == ["sub-0", "sub-1", "sub-2", "sub-3"])
        #expect(rows.map { $0[0, 1] } == [nil, "1@example.com", nil, "3@example.com"])
        #expect(rows.map { $0[0, 4] } == ["0", "1", "2", "3"])
        #expect(rows.map { $0[0, 8] } == ["t", "f", "t", "f"])
        #expect(try connection.executeBatch(Visits.echo, []).isEmpty)
    }

    /// Checked as positional parameters are: a NUL fails its own item of a batch, before anything is sent.
    @Test(arguments: Pooler.allCases)
    func aParameterWithNulIsRefused(pooler: Pooler) throws {
        let connection = try Connection(conninfo: "", pooler: pooler)
        var broken = Visits.visit
        broken.email = "a\u{0}b"
        #expect(throws: StoreError(.invalidParameter)) { try connection.execute(Visits.echo, broken) }
        let results = try connection.executeBatch(Visits.echo, [Visits.visit, broken, Visits.visit])
        #expect(results.map { (try? $0.get())?[0, 0] } == ["110169484474386276334", nil, "110169484474386276334"])
        #expect(throws: StoreError(.invalidParameter)) { try results[1].get() }
    }

    /// Prepared by name once per server session, as a positional statement is, and prepared again when the server
    /// discarded it.
    @Test func aTypedStatementIsPreparedOnceUnderItsName() throws {
        let connection = try Connection(conninfo: "")
        #expect(try connection.execute(Visits.withFragment, Visits.visit)[0, 0] == "1764000000")
        #expect(try connection.execute(Visits.withFragment, Visits.visit)[0, 0] == "1764000000")
        let prepared = "SELECT count(*) FROM pg_prepared_statements WHERE name = 'typed_fragment'"
        #expect(try connection.query(prepared)[0, 0] == "1")
        try connection.query("DEALLOCATE ALL")  // what a pooler's DISCARD ALL does
        #expect(try connection.execute(Visits.withFragment, Visits.visit)[0, 0] == "1764000000")
        // The positional view of the same statement shares its preparation; other SQL under its name is refused.
        #expect(try connection.execute(Visits.withFragment.statement, ["7", Visits.visit.googleSub])[0, 0] == "7")
        #expect(throws: StoreError(.invalidParameter)) {
            try connection.execute(Statement(name: "typed_fragment", sql: "SELECT 2"))
        }
    }

    /// A literal `$n` would slip against the numbers the key paths get: building such a statement stops the program.
    @Test func aNumberedParameterInTheTextIsRefused() async {
        await #expect(processExitsWith: .failure) {
            _ = TypedStatement<Visit>(name: "typed_mixed", "SELECT \(\.googleSub)::text, $2::text")
        }
    }
}
