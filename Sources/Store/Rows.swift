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

/// The result of one statement, copied out of libpq (text format; `nil` is SQL NULL). The column names and the
/// command tag are kept as the bytes libpq gave, and made Strings only when asked for: a caller that decodes
/// rows by position never reads them.
public struct Rows: Sendable {
    /// The number of rows returned.
    public let count: Int
    /// The number of columns.
    public let columnCount: Int
    /// Rows inserted, updated or deleted (libpq's PQcmdTuples); 0 when the statement reports none.
    public let affectedRows: Int
    // The column names in order, then the command tag, each followed by a NUL (names cannot contain one).
    private let labels: [UInt8]
    // Row-major values: row r, column c is at r * columnCount + c.
    let values: [String?]

    init(columnCount: Int, count: Int, affectedRows: Int, labels: [UInt8], values: [String?]) {
        self.columnCount = columnCount
        self.count = count
        self.affectedRows = affectedRows
        self.labels = labels
        self.values = values
    }

    /// Column names in order.
    public var columns: [String] { Array(splitLabels.prefix(columnCount)) }

    /// The command tag, e.g. `INSERT 0 1` or `SELECT 3`.
    public var commandTag: String { splitLabels.last ?? "" }

    private var splitLabels: [String] {
        labels.split(separator: 0, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) }
    }

    public var isEmpty: Bool { count == 0 }

    /// The value at `row`, `column`; traps when either is out of range, like an array.
    public subscript(row: Int, column: Int) -> String? {
        precondition(row >= 0 && row < count && column >= 0 && column < columnCount, "Rows index out of range")
        return values[row * columnCount + column]
    }

    /// The same as `rows[row, column]`, spelled out.
    public subscript(row row: Int, column column: Int) -> String? { self[row, column] }

    /// The value at `row` in the column named `column`; traps when there is no such column.
    public subscript(row row: Int, column column: String) -> String? {
        guard let index = columnIndex(column) else { preconditionFailure("no column \(column)") }
        return self[row, index]
    }

    /// The index of the column named `name`, if the result has one.
    public func columnIndex(_ name: String) -> Int? { columns.firstIndex(of: name) }
}
