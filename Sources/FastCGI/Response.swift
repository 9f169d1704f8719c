// The handler's answer and its CGI encoding: a Status line, header lines, a blank line, the body.

/// An HTTP response for the web server to send. Header order is kept; a name may repeat (Set-Cookie).
public struct Response: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A text body (UTF-8) with its Content-Type, e.g. `Response(status: 200, contentType: "application/json", body: json)`.
    public init(status: Int, contentType: String, body: String, headers: [(name: String, value: String)] = []) {
        self.init(status: status, headers: [("Content-Type", contentType)] + headers, body: Array(body.utf8))
    }

    /// The CGI response head, or nil when a header cannot be sent as given: a name that is not an HTTP
    /// token, a value with CR, LF, NUL or another control character (which could split the response), or a
    /// `Status` header (the status line is the server's). Such a response is never sent in part: the server
    /// answers `invalidReplacement` instead and reports it. Content-Length is added when missing (except
    /// for 1xx, 204 and 304); a status outside 100–599 is sent as 500.
    package func encodedHead() -> [UInt8]? {
        let code = (100...599).contains(status) ? status : 500
        var head: [UInt8] = []
        head.reserveCapacity(64 + headers.count * 48)
        head += Self.statusLines[code] ?? Array("Status: \(code)\r\n".utf8)
        var hasLength = false
        for (name, value) in headers {
            let nameLength = name.utf8.count
            if nameLength == 6, name.lowercased() == "status" { return nil }
            if nameLength == 14, name.lowercased() == "content-length" { hasLength = true }
            // Each checked as it is copied: one pass over a header's bytes.
            guard Self.append(name, to: &head, allowing: Self.isToken) else { return nil }
            head.append(UInt8(ascii: ":"))
            head.append(UInt8(ascii: " "))
            guard Self.append(value, to: &head, allowing: Self.isFieldValue) else { return nil }
            head.append(13)
            head.append(10)
        }
        if !hasLength && code >= 200 && code != 204 && code != 304 {
            head += Self.contentLengthPrefix
            head += String(body.count).utf8
            head.append(13)
            head.append(10)
        }
        head.append(13)
        head.append(10)
        return head
    }

    /// The generic answer that replaces a response whose head could not be encoded.
    static let invalidReplacement = Response(status: 500, contentType: "text/plain", body: "internal server error\n")

    /// True when `name` is a non-empty RFC 9110 token (`!#$%&'*+-.^_`|~`, digits, letters): a header or cookie name.
    package static func isToken(_ name: some StringProtocol) -> Bool {
        // A native string's bytes in one buffer (the usual case), else a copy that has them so.
        name.utf8.withContiguousStorageIfAvailable(isToken) ?? {
            var copy = String(name)
            return copy.withUTF8(isToken)
        }()
    }

    /// `isToken` of a name's UTF-8 bytes.
    static func isToken(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool { !bytes.isEmpty && bytes.allSatisfy(isTokenByte) }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
            true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
             UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    /// RFC 9110 field-value bytes: visible characters, space, tab and non-ASCII; no CR, LF, NUL or other controls.
    /// Eight bytes at a time: a word with no byte below 0x20 and none equal to 0x7F is clean as a whole; one that
    /// has such a byte (a tab, or a byte to refuse) is looked at byte by byte.
    static func isFieldValue(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        var offset = 0
        while offset + 8 <= bytes.count {
            let word = UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self)
            let below20 = (word &- ones &* 0x20) & ~word & highs      // a byte under 0x20 (exact for the first)
            let del = word ^ (ones &* 0x7F)
            let is7F = (del &- ones) & ~del & highs                    // a byte equal to 0x7F
            if below20 | is7F != 0, !UnsafeBufferPointer(start: base + offset, count: 8).allSatisfy(isValueByte) { return false }
            offset += 8
        }
        return UnsafeBufferPointer(start: base + offset, count: bytes.count - offset).allSatisfy(isValueByte)
    }

    private static func isValueByte(_ byte: UInt8) -> Bool { byte == 0x09 || (byte >= 0x20 && byte != 0x7F) }

    /// Appends `text`'s UTF-8 to `head` when `valid` accepts it; false (and `head` left to be dropped) otherwise.
    private static func append(_ text: String, to head: inout [UInt8], allowing valid: (UnsafeBufferPointer<UInt8>) -> Bool) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard valid(bytes) else { return false }
            head.append(contentsOf: bytes)
            return true
        }
    }

    /// `Status: <code> <reason>` and CRLF, for every code with a reason.
    private static let statusLines: [Int: [UInt8]] = reasons.reduce(into: [:]) { lines, entry in
        lines[entry.key] = Array("Status: \(entry.key) \(entry.value)\r\n".utf8)
    }
    private static let contentLengthPrefix = Array("Content-Length: ".utf8)

    static let reasons: [Int: String] = [
        100: "Continue", 101: "Switching Protocols",
        200: "OK", 201: "Created", 202: "Accepted", 204: "No Content",
        301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified",
        307: "Temporary Redirect", 308: "Permanent Redirect",
        400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
        405: "Method Not Allowed", 406: "Not Acceptable", 409: "Conflict", 410: "Gone",
        411: "Length Required", 413: "Content Too Large", 415: "Unsupported Media Type",
        422: "Unprocessable Content", 429: "Too Many Requests",
        500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
        503: "Service Unavailable", 504: "Gateway Timeout",
    ]
}
