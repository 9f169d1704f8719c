// Rows: the copied-out result of one statement (column names, text values, counts), and Statement.

/// A named statement, prepared on each connection the first time it runs there (run unnamed instead behind a
/// transaction pooler: see `Pooler`).
public struct Statement: Hashable, Sendable {
    /// The server-side name of the prepared statement; unique per SQL text within the application.
    public let name: String
    /// The SQL with `$1`, `$2`, ... parameters. Never build it from values.
    public let sql: String

    public init(name: String, sql: String) {
        self.name = name
        self.sql = sql
    }
}

/// The result of one statement, copied out of libpq (text format; `nil` is SQL NULL).
public struct Rows: Sendable {
    /// Column names in order.
    public let columns: [String]
    /// The number of rows returned.
    public let count: Int
    /// Rows inserted, updated or deleted (libpq's PQcmdTuples); 0 when the statement reports none.
    public let affectedRows: Int
    /// The command tag, e.g. `INSERT 0 1` or `SELECT 3`.
    public let commandTag: String
    // Row-major values: row r, column c is at r * columns.count + c.
    let values: [String?]

    init(columns: [String], count: Int, affectedRows: Int, commandTag: String, values: [String?]) {
        self.columns = columns
        self.count = count
        self.affectedRows = affectedRows
        self.commandTag = commandTag
        self.values = values
    }

    public var isEmpty: Bool { count == 0 }

    /// The value at `row`, `column`; traps when either is out of range, like an array.
    public subscript(row: Int, column: Int) -> String? {
        precondition(row >= 0 && row < count && column >= 0 && column < columns.count, "Rows index out of range")
        return values[row * columns.count + column]
    }

    /// The same as `rows[row, column]`, spelled out.
    public subscript(row row: Int, column column: Int) -> String? { self[row, column] }

    /// The value at `row` in the column named `column`; traps when there is no such column.
    public subscript(row row: Int, column column: String) -> String? {
        guard let index = columns.firstIndex(of: column) else { preconditionFailure("no column \(column)") }
        return self[row, index]
    }

    /// The index of the column named `name`, if the result has one.
    public func columnIndex(_ name: String) -> Int? { columns.firstIndex(of: name) }
}
