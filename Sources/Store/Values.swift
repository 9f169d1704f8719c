// Swift values in and out of statements: parameters bound in text format, columns decoded by type.

/// A value that can be a statement parameter (`$n`), in PostgreSQL's text format; nil is SQL NULL.
public protocol SQLParameter: Sendable {
    var sqlText: String? { get }
}

/// A value that can be decoded from one column of a result (text format; nil is SQL NULL).
public protocol SQLDecodable {
    /// Throws `.unexpectedResult` when the text is not a value of this type (our SQL and our Swift disagree).
    init(sqlText: String?) throws(StoreError)
}

extension String: SQLParameter, SQLDecodable {
    public var sqlText: String? { self }
    public init(sqlText: String?) throws(StoreError) {
        guard let sqlText else { throw StoreError(.unexpectedResult, "NULL where text was expected") }
        self = sqlText
    }
}

extension Int64: SQLParameter, SQLDecodable {
    public var sqlText: String? { String(self) }
    public init(sqlText: String?) throws(StoreError) {
        guard let sqlText, let value = Int64(sqlText) else {
            throw StoreError(.unexpectedResult, "'\(sqlText ?? "NULL")' where a bigint was expected")
        }
        self = value
    }
}

extension Int: SQLParameter, SQLDecodable {
    public var sqlText: String? { String(self) }
    public init(sqlText: String?) throws(StoreError) {
        self = Int(try Int64(sqlText: sqlText))
    }
}

extension Bool: SQLParameter, SQLDecodable {
    public var sqlText: String? { self ? "true" : "false" }
    public init(sqlText: String?) throws(StoreError) {
        switch sqlText {
        case "t": self = true
        case "f": self = false
        default: throw StoreError(.unexpectedResult, "'\(sqlText ?? "NULL")' where a boolean was expected")
        }
    }
}

extension Optional: SQLParameter where Wrapped: SQLParameter {
    public var sqlText: String? { self?.sqlText }
}

extension Optional: SQLDecodable where Wrapped: SQLDecodable {
    /// Inlinable, as `Rows.decode` is, so that a nullable column decodes without generic metadata looked up.
    @inlinable
    public init(sqlText: String?) throws(StoreError) {
        guard let sqlText else {
            self = nil
            return
        }
        self = try Wrapped(sqlText: sqlText)
    }
}

/// A duration bound to an `$n::interval` parameter.
public struct SQLInterval: SQLParameter, Hashable {
    public let seconds: Int64
    public init(seconds: Int64) { self.seconds = seconds }
    public var sqlText: String? { "\(seconds) seconds" }
}

/// Bytes bound as lower-case hex for `decode($n, 'hex')` (e.g. a SHA-256 digest for a bytea column).
public struct SQLHexBytes: SQLParameter, Hashable {
    public let hex: String
    public init(_ bytes: [UInt8]) {
        // Written into the string's own storage (a session hash is hashed per sign-in and per check).
        hex = String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (index, byte) in bytes.enumerated() {
                out[2 * index] = Self.digit(byte >> 4)
                out[2 * index + 1] = Self.digit(byte & 0x0f)
            }
            return bytes.count * 2
        }
    }

    private static func digit(_ value: UInt8) -> UInt8 { value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10 }
    public var sqlText: String? { hex }
}

extension Rows {
    /// Decodes row `row` into a tuple of Swift values, one per column in order; the column count must match.
    /// Inlinable so callers get it specialized for their types (no generic metadata looked up per row).
    @inlinable
    public func decode<each T: SQLDecodable>(row: Int, as types: repeat (each T).Type) throws(StoreError) -> (repeat each T) {
        var count = 0
        for _ in repeat (each T).self { count += 1 }
        guard count == columns.count else {
            throw StoreError(.unexpectedResult, "expected \(count) columns, the statement returned \(columns.count)")
        }
        guard row >= 0, row < self.count else { throw StoreError(.unexpectedResult, "no row \(row)") }
        var column = 0
        func next<U: SQLDecodable>(_ type: U.Type) throws(StoreError) -> U {
            defer { column += 1 }
            do {
                return try U(sqlText: self[row, column])
            } catch {
                throw StoreError(.unexpectedResult, "column \(columns[column]): \(error.detail)")
            }
        }
        return (repeat try next(each types))
    }
}
