// Rows: one statement's result copied out of libpq (column names, text values, counts), and the PGresult it
// is copied from.
import CLibPQ
#if canImport(Glibc)
import Glibc
#endif

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

/// A PGresult owned for one scope: cleared when the struct goes away, never copied.
struct QueryResult: ~Copyable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { PQclear(pointer) }

    /// Copies values and counts out of libpq's memory, and the column names and command tag as bytes.
    func rows() -> Rows {
        let rowCount = Int(PQntuples(pointer))
        let columnCount = Int(PQnfields(pointer))
        var labels: [UInt8] = []
        labels.reserveCapacity(16 * columnCount + 16)
        func appendLabel(_ text: UnsafePointer<CChar>?) {
            if let text { labels.append(contentsOf: UnsafeRawBufferPointer(start: text, count: strlen(text))) }
            labels.append(0)
        }
        for column in 0..<Int32(columnCount) { appendLabel(PQfname(pointer, column)) }
        appendLabel(PQcmdStatus(pointer))
        var values: [String?] = []
        values.reserveCapacity(rowCount * columnCount)
        for row in 0..<Int32(rowCount) {
            for column in 0..<Int32(columnCount) {
                if PQgetisnull(pointer, row, column) == 1 {
                    values.append(nil)
                } else {
                    values.append(String(cString: PQgetvalue(pointer, row, column)))
                }
            }
        }
        return Rows(columnCount: columnCount, count: rowCount, affectedRows: Self.count(PQcmdTuples(pointer)),
                    labels: labels, values: values)
    }

    /// PQcmdTuples' decimal count; 0 when it is empty (the statement reports none), not a count, or beyond `Int`.
    private static func count(_ text: UnsafePointer<CChar>?) -> Int {
        guard let text else { return 0 }
        return Int(asciiDigits: UnsafeRawBufferPointer(start: text, count: strlen(text))) ?? 0
    }
}
