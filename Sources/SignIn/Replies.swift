// HTTP answers: builders over FastCGI's Response, the documented error codes, a small JSON encoder.

import FastCGI
import IDToken

/// Builders for the answers the routes give; `Response` is FastCGI's (the one reply type).
extension Response {
    /// A JSON answer with `Content-Type: application/json` and `Cache-Control: no-store`, then `headers`
    /// (e.g. `Set-Cookie`).
    static func json(status: Int = 200, _ value: JSONValue, headers: [(name: String, value: String)] = []) -> Response {
        json(status: status, encoded: value.encoded(), headers: headers)
    }

    /// `json` of a body already encoded (`JSONObjectWriter`). Room is left for one more header (`X-Request-Id`).
    static func json(status: Int = 200, encoded: [UInt8], headers: [(name: String, value: String)] = []) -> Response {
        var body = encoded
        body.append(UInt8(ascii: "\n"))
        var all = jsonHeaders
        all.reserveCapacity(jsonHeaders.count + headers.count + 1)
        all.append(contentsOf: headers)
        return Response(status: status, headers: all, body: body)
    }

    /// `303 See Other` to `location` (the web form flow), `Cache-Control: no-store`, then `headers`.
    static func seeOther(_ location: String, headers: [(name: String, value: String)] = []) -> Response {
        Response(status: 303, headers: [("Location", location), ("Cache-Control", "no-store")] + headers)
    }

    /// `204 No Content`, not to be cached, then `headers`.
    static func noContent(headers: [(name: String, value: String)] = []) -> Response {
        Response(status: 204, headers: [("Cache-Control", "no-store")] + headers)
    }

    /// The first value of header `name` (case-insensitive), or nil.
    func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first(where: { $0.name.lowercased() == wanted })?.value
    }

    static let jsonHeaders: [(name: String, value: String)] = [
        ("Content-Type", "application/json"), ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"),
    ]
}

/// The `error` codes of JSON error bodies, each with its status (docs/http.md).
public enum ErrorCode: String, Sendable, CaseIterable {
    /// 400: malformed body, missing or overlong token.
    case invalidRequest = "invalid_request"
    /// 401: the ID token failed verification (any reason; the reason goes to logs only).
    case invalidToken = "invalid_token"
    /// 403: the account may not sign in (hosted domain not allowed, account disabled or blocked).
    case accessDenied = "access_denied"
    /// 403: a cross-site request forgery defence refused the request (g_csrf_token or Origin check).
    case csrfCheckFailed = "csrf_check_failed"
    /// 404: no such path.
    case notFound = "not_found"
    /// 405: the path exists, the method does not (with `Allow`).
    case methodNotAllowed = "method_not_allowed"
    /// 413: the body exceeds the cap.
    case requestTooLarge = "request_too_large"
    /// 415: unsupported Content-Type.
    case unsupportedMediaType = "unsupported_media_type"
    /// 500: a fault of the server itself, never of the input.
    case serverError = "server_error"
    /// 503: database or Google's keys unavailable (with `Retry-After`).
    case temporarilyUnavailable = "temporarily_unavailable"

    public var status: Int {
        switch self {
        case .invalidRequest: 400
        case .invalidToken: 401
        case .accessDenied, .csrfCheckFailed: 403
        case .notFound: 404
        case .methodNotAllowed: 405
        case .requestTooLarge: 413
        case .unsupportedMediaType: 415
        case .serverError: 500
        case .temporarilyUnavailable: 503
        }
    }
}

/// A JSON object written member by member straight into bytes, exactly as `JSONValue.object` encodes the same
/// members, for the answer every sign-in gets (no tree of values built first).
struct JSONObjectWriter {
    private(set) var bytes: [UInt8]
    private var needsComma = false

    init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    /// A member's name: a literal of ours, printable ASCII without `"` or `\`, so written as it is (checked in
    /// debug builds, which the tests run: every sign-in answer passes here).
    private mutating func key(_ name: StaticString) {
        assert(name.withUTF8Buffer { $0.allSatisfy { $0 >= 0x20 && $0 < 0x7f && $0 != 0x22 && $0 != 0x5c } })
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: "\":".utf8)
        needsComma = true
    }

    /// A string member, `null` when nil.
    mutating func string(_ name: StaticString, _ value: String?) {
        key(name)
        if let value { JSONValue.writeString(value, into: &bytes) } else { bytes.append(contentsOf: "null".utf8) }
    }

    mutating func int(_ name: StaticString, _ value: Int64) {
        key(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    mutating func bool(_ name: StaticString, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// An object member whose members `body` writes.
    mutating func object(_ name: StaticString, _ body: (inout JSONObjectWriter) -> Void) {
        key(name)
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
        body(&self)
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    /// The object's bytes, closed.
    consuming func finished() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }
}

/// A JSON value to encode; objects keep their key order. Built by hand for the few small bodies we send.
public indirect enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    /// A string, or `null` when nil (optional claims such as `name`).
    public static func string(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }

    /// Compact UTF-8 JSON.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(into: &out)
        return out
    }

    /// Compact JSON as a String.
    public var json: String { String(decoding: encoded(), as: UTF8.self) }

    func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value): out.append(contentsOf: String(value).utf8)
        case .string(let value): JSONValue.writeString(value, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Writes a quoted JSON string (RFC 8259): `"` and `\` escaped, control characters as `\n`-style or
    /// `\u00XX`, U+2028/U+2029 as `\u2028`/`\u2029` (harmless, and safe if ever embedded in a script).
    /// A Swift String is always valid Unicode, so the output is always valid UTF-8.
    public static func writeString(_ string: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { bytes in
            // Runs of bytes that need no escape are copied as they are; one pass, no per-character work.
            var run = 0
            var index = 0
            while true {
                index = JSONString.plainEnd(UnsafeRawBufferPointer(bytes), from: index, forOutput: true)
                guard index < bytes.count else { break }
                let byte = bytes[index]
                let escape: [UInt8]
                var width = 1
                switch byte {
                case 0x22: escape = Array(#"\""#.utf8)
                case 0x5C: escape = Array(#"\\"#.utf8)
                case 0x0A: escape = Array(#"\n"#.utf8)
                case 0x0D: escape = Array(#"\r"#.utf8)
                case 0x09: escape = Array(#"\t"#.utf8)
                case 0x08: escape = Array(#"\b"#.utf8)
                case 0x0C: escape = Array(#"\f"#.utf8)
                case 0x00..<0x20, 0x7F: escape = unicodeEscape(UInt32(byte))
                case 0xE2 where index + 2 < bytes.count && bytes[index + 1] == 0x80 && (bytes[index + 2] == 0xA8 || bytes[index + 2] == 0xA9):
                    escape = unicodeEscape(bytes[index + 2] == 0xA8 ? 0x2028 : 0x2029)  // U+2028, U+2029
                    width = 3
                default:
                    index += 1
                    continue
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<index]))
                out.append(contentsOf: escape)
                index += width
                run = index
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<bytes.count]))
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func unicodeEscape(_ value: UInt32) -> [UInt8] {
        let hex = Array("0123456789abcdef".utf8)
        return Array(#"\u"#.utf8) + stride(from: 12, through: 0, by: -4).map { hex[Int((value >> UInt32($0)) & 0xF)] }
    }

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool { lhs.encoded() == rhs.encoded() }
}
