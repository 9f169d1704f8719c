// Swift values in and out of statements: parameters bound in text format, columns decoded by type.

/// A value that can be a statement parameter (`$n`), in PostgreSQL's text format; nil is SQL NULL.
public protocol SQLParameter: Sendable {
    /// Appends the value's text to `text` and returns true; returns false, appending nothing, for SQL NULL.
    /// Written straight into the statement's parameter buffer (`Connection`): no String per parameter.
    func appendSQLText(to text: inout [UInt8]) -> Bool
}

extension SQLParameter {
    /// The text `appendSQLText` writes (nil for SQL NULL; bytes that are not UTF-8 read as U+FFFD).
    public var sqlText: String? {
        var text: [UInt8] = []
        return appendSQLText(to: &text) ? String(decoding: text, as: UTF8.self) : nil
    }
}

/// A value that can be decoded from one column of a result (text format; nil is SQL NULL).
public protocol SQLDecodable {
    /// Throws `.unexpectedResult` when the text is not a value of this type (our SQL and our Swift disagree).
    init(sqlText: String?) throws(StoreError)
}

extension String: SQLParameter, SQLDecodable {
    public func appendSQLText(to text: inout [UInt8]) -> Bool {
        text.append(contentsOf: utf8)
        return true
    }
    public init(sqlText: String?) throws(StoreError) {
        guard let sqlText else { throw StoreError(.unexpectedResult, "NULL where text was expected") }
        self = sqlText
    }
}

extension Int64: SQLParameter, SQLDecodable {
    public func appendSQLText(to text: inout [UInt8]) -> Bool {
        Self.appendDecimal(self, to: &text)
        return true
    }

    /// `value` in decimal, with a `-` when negative (what `String(value)` spells): the digits lowest first, then
    /// put in order.
    static func appendDecimal(_ value: Int64, to text: inout [UInt8]) {
        if value < 0 { text.append(UInt8(ascii: "-")) }
        let start = text.count
        var magnitude = value.magnitude
        repeat {
            text.append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        text.withUnsafeMutableBufferPointer { $0[start...].reverse() }  // in place (the Array's own slice would copy)
    }
    public init(sqlText: String?) throws(StoreError) {
        guard let sqlText, let value = Int64(sqlText) else {
            throw StoreError(.unexpectedResult, "'\(sqlText ?? "NULL")' where a bigint was expected")
        }
        self = value
    }
}

extension Int {
    /// The value of `digits` when they are ASCII decimal digits and nothing else; nil when there are none, another
    /// byte is among them, or the value is beyond `Int`. Store's one reader of unsigned decimal text: the count of a
    /// command tag, a migration's number. (A column's value, which may be signed, is `Int64(sqlText:)`.)
    init?(asciiDigits digits: some Sequence<UInt8>) {
        var value = 0
        var any = false
        for byte in digits {
            guard byte.isASCIIDigit else { return nil }
            let (tens, over) = value.multipliedReportingOverflow(by: 10)
            let (next, carry) = tens.addingReportingOverflow(Int(byte &- UInt8(ascii: "0")))
            guard !over, !carry else { return nil }
            value = next
            any = true
        }
        guard any else { return nil }
        self = value
    }
}

extension UInt8 {
    /// `0` to `9` in ASCII.
    var isASCIIDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
}

extension Int: SQLParameter, SQLDecodable {
    public func appendSQLText(to text: inout [UInt8]) -> Bool { Int64(self).appendSQLText(to: &text) }
    public init(sqlText: String?) throws(StoreError) {
        self = Int(try Int64(sqlText: sqlText))
    }
}

extension Bool: SQLParameter, SQLDecodable {
    public func appendSQLText(to text: inout [UInt8]) -> Bool {
        text.append(contentsOf: (self ? "true" : "false").utf8)
        return true
    }
    public init(sqlText: String?) throws(StoreError) {
        switch sqlText {
        case "t": self = true
        case "f": self = false
        default: throw StoreError(.unexpectedResult, "'\(sqlText ?? "NULL")' where a boolean was expected")
        }
    }
}

/// Whole numbers as a PostgreSQL array literal (`{1,2,3}`), for `= ANY ($1::bigint[])`.
extension Array: SQLParameter where Element == Int64 {
    public func appendSQLText(to text: inout [UInt8]) -> Bool {
        text.append(UInt8(ascii: "{"))
        for (index, value) in enumerated() {
            if index > 0 { text.append(UInt8(ascii: ",")) }
            Int64.appendDecimal(value, to: &text)
        }
        text.append(UInt8(ascii: "}"))
        return true
    }
}

extension Optional: SQLParameter where Wrapped: SQLParameter {
    public func appendSQLText(to text: inout [UInt8]) -> Bool { self?.appendSQLText(to: &text) ?? false }
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
    public func appendSQLText(to text: inout [UInt8]) -> Bool {
        Int64.appendDecimal(seconds, to: &text)
        text.append(contentsOf: " seconds".utf8)
        return true
    }
}

/// Bytes bound as lower-case hex for `decode($n, 'hex')` (e.g. a SHA-256 digest for a bytea column).
public struct SQLHexBytes: SQLParameter, Hashable {
    public let bytes: [UInt8]
    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Two lower-case hex digits per byte (a session hash is bound per sign-in and per check).
    public func appendSQLText(to text: inout [UInt8]) -> Bool {
        for byte in bytes {
            text.append(Self.digit(byte >> 4))
            text.append(Self.digit(byte & 0x0f))
        }
        return true
    }

    private static func digit(_ value: UInt8) -> UInt8 { value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10 }
}

extension Rows {
    /// Decodes row `row` into a tuple of Swift values, one per column in order; the column count must match.
    /// Inlinable so callers get it specialized for their types (no generic metadata looked up per row).
    @inlinable
    public func decode<each T: SQLDecodable>(row: Int, as types: repeat (each T).Type) throws(StoreError) -> (repeat each T) {
        var count = 0
        for _ in repeat (each T).self { count += 1 }
        guard count == columnCount else {
            throw StoreError(.unexpectedResult, "expected \(count) columns, the statement returned \(columnCount)")
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
