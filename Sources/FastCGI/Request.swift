// One FastCGI request as the handler sees it: the web server's CGI parameters and the request body.
#if canImport(Glibc)
import Glibc
#endif

/// A request from the web server. Parameters are CGI/1.1 variables (nginx's `fastcgi_params`);
/// bytes that are not UTF-8 are replaced with U+FFFD.
public struct Request: Sendable {
    /// Every FastCGI parameter the web server sent, by name (`params["REQUEST_METHOD"]`, `HTTP_COOKIE`, ...).
    public let params: Parameters
    /// The request body: at most `maxBodyBytes`; empty when `bodyTooLarge`.
    public let body: [UInt8]
    /// True when the body was longer than the server's `maxBodyBytes`; it was not read (answer 413).
    public let bodyTooLarge: Bool
    /// `Placement.route` of the placement the server ran it by; -1 when it was not placed (built by hand, in tests).
    public internal(set) var route = -1

    public init(params: [String: String], body: [UInt8] = [], bodyTooLarge: Bool = false) {
        self.init(parameters: Parameters(params), body: body, bodyTooLarge: bodyTooLarge)
    }

    init(parameters: Parameters, body: [UInt8], bodyTooLarge: Bool) {
        self.params = parameters
        self.body = body
        self.bodyTooLarge = bodyTooLarge
    }

    /// `REQUEST_METHOD` (`GET`, `POST`, ...), or "" when the web server sent none.
    public var method: String { params["REQUEST_METHOD"] ?? "" }

    /// The decoded, normalised path (`DOCUMENT_URI`, as nginx's stock `fastcgi_params` sends it);
    /// without it, `REQUEST_URI` up to the `?` (still percent-encoded); "" when neither is present.
    public var path: String {
        if let uri = params["DOCUMENT_URI"], !uri.isEmpty { return uri }
        guard let uri = params["REQUEST_URI"] else { return "" }
        return uri.firstIndex(of: "?").map { String(uri[..<$0]) } ?? uri
    }

    /// `QUERY_STRING` without the `?`, still percent-encoded; "" when absent.
    public var query: String { params["QUERY_STRING"] ?? "" }

    /// `CONTENT_TYPE` as sent (parameters such as `; charset=utf-8` included); nil when absent or empty.
    public var contentType: String? { nonEmpty("CONTENT_TYPE") }

    /// `REMOTE_ADDR`: the client address as nginx saw it; nil when absent or empty.
    public var remoteAddress: String? { nonEmpty("REMOTE_ADDR") }

    /// REMOTE_ADDR when it is an IPv4 or IPv6 address (inet_pton), for an `inet` column; nil otherwise
    /// (a unix-socket peer such as `unix:`, or anything a misconfigured proxy chain let through).
    public var remoteIP: String? {
        guard let address = remoteAddress, address.utf8.count <= 45, !address.utf8.contains(0) else { return nil }
        var buffer = (UInt64(0), UInt64(0))  // room for an in6_addr
        let family = address.utf8.contains(UInt8(ascii: ":")) ? AF_INET6 : AF_INET
        let parsed = address.withCString { text in withUnsafeMutableBytes(of: &buffer) { inet_pton(family, text, $0.baseAddress) } }
        return parsed == 1 ? address : nil
    }

    /// The client's network as rate limits key it: an IPv4 address whole, an IPv6 address by its /64 (one
    /// subscriber's prefix: every address in it is theirs); nil when REMOTE_ADDR is not an address.
    public var remoteNetwork: String? {
        guard let address = remoteIP else { return nil }
        guard address.utf8.contains(UInt8(ascii: ":")) else { return address }
        var bytes = [UInt8](repeating: 0, count: 16)
        guard address.withCString({ text in bytes.withUnsafeMutableBytes { inet_pton(AF_INET6, text, $0.baseAddress) } }) == 1 else {
            return nil
        }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }

    /// An HTTP request header by its HTTP name, case-insensitively: `header("User-Agent")` reads
    /// `HTTP_USER_AGENT`; `Content-Type` and `Content-Length` read the CGI variables without `HTTP_`.
    public func header(_ name: String) -> String? {
        Self.withParameterName(forHeader: name) { params.value(named: $0) }
    }

    /// The CGI parameter that carries an HTTP header: upper case, `-` becomes `_`, prefixed `HTTP_`.
    public static func parameterName(forHeader name: String) -> String {
        withParameterName(forHeader: name) { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls `body` with the bytes of `parameterName(forHeader:)`, built on the stack (every header lookup of a
    /// request comes through here).
    private static func withParameterName<R>(forHeader name: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        let count = 5 + name.utf8.count
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { bytes in
            var at = 0
            for byte in "HTTP_".utf8 {
                bytes[at] = byte
                at += 1
            }
            for byte in name.utf8 {
                bytes[at] = byte == UInt8(ascii: "-") ? UInt8(ascii: "_") : byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") ? byte - 32 : byte
                at += 1
            }
            let upper = UnsafeBufferPointer(rebasing: bytes[5..<count])
            if (upper.count == 12 && upper.elementsEqual("CONTENT_TYPE".utf8)) || (upper.count == 14 && upper.elementsEqual("CONTENT_LENGTH".utf8)) {
                return body(upper)
            }
            return body(UnsafeBufferPointer(bytes))
        }
    }

    private func nonEmpty(_ name: String) -> String? {
        guard let value = params[name], !value.isEmpty else { return nil }
        return value
    }
}

/// A request's FastCGI parameters as they came: the PARAMS bytes and where each name and value lies in them.
/// A value is made into a String only when it is asked for (a request carries ~25 parameters, a handler reads
/// about ten). As nginx means them, the last of two parameters with one name wins (a `fastcgi_param` after
/// `include fastcgi_params` overrides), except `HTTP_COOKIE`: nginx sends one per `Cookie` header line, and
/// together they are one header (joined with "; ", first line first). Names are compared byte for byte: a name
/// that only looks like another after Unicode normalisation (`HTTP_COO\u{212A}IE`, with a Kelvin sign) is another
/// parameter, never part of the cookies. Bounded by the parser's limits: a lookup looks at every name once.
public struct Parameters: Sendable, Equatable {
    private let bytes: [UInt8]
    private let pairs: [(name: Range<Int>, value: Range<Int>)]

    /// `pairs` index `bytes` (the parser checked every range).
    init(bytes: [UInt8], pairs: [(name: Range<Int>, value: Range<Int>)]) {
        self.bytes = bytes
        self.pairs = pairs
    }

    static let none = Parameters(bytes: [], pairs: [])

    /// Parameters with these names and values (for tests and for requests not read from a socket).
    public init(_ dictionary: [String: String]) {
        var bytes: [UInt8] = []
        var pairs: [(name: Range<Int>, value: Range<Int>)] = []
        for (name, value) in dictionary.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
            let nameStart = bytes.count
            bytes.append(contentsOf: name.utf8)
            let valueStart = bytes.count
            bytes.append(contentsOf: value.utf8)
            pairs.append((nameStart..<valueStart, valueStart..<bytes.count))
        }
        self.init(bytes: bytes, pairs: pairs)
    }

    /// The value of the parameter `name` (exact bytes), or nil when the web server sent none.
    public subscript(name: String) -> String? {
        var name = name
        return name.withUTF8 { value(named: $0) }
    }

    /// The value of the parameter whose name is the bytes `key`.
    func value(named key: UnsafeBufferPointer<UInt8>) -> String? {
        bytes.withUnsafeBufferPointer { all -> String? in
            var value: String?
            forEachValue(named: key, in: all) { range in
                let text = String(decoding: UnsafeBufferPointer(rebasing: all[range]), as: UTF8.self)
                if value == nil { value = text } else { value!.append("; "); value!.append(text) }
            }
            return value
        }
    }

    /// Calls `body` with the range of each value a lookup of `key` joins, in order: every `HTTP_COOKIE` line,
    /// first line first; for any other name only the last one sent. The one place these rules are written.
    private func forEachValue(named key: UnsafeBufferPointer<UInt8>, in all: UnsafeBufferPointer<UInt8>,
                              _ body: (Range<Int>) -> Void) {
        pairs.withUnsafeBufferPointer { pairs in
            let count = key.count
            // Names of equal, non-zero length: then neither buffer is empty.
            func matches(_ name: Range<Int>) -> Bool {
                name.count == count && (count == 0 || memcmp(all.baseAddress! + name.lowerBound, key.baseAddress!, count) == 0)
            }
            let isCookie = count == Self.cookie.count
                && Self.cookie.withUnsafeBufferPointer { memcmp($0.baseAddress!, key.baseAddress!, count) == 0 }
            if isCookie {
                for index in 0..<pairs.count where matches(pairs[index].name) { body(pairs[index].value) }
                return
            }
            var index = pairs.count
            while index > 0 {
                index -= 1
                if matches(pairs[index].name) { return body(pairs[index].value) }
            }
        }
    }

    private static let cookie = Array("HTTP_COOKIE".utf8)

    /// Every parameter by its name's bytes, with the bytes of the value a lookup gives.
    private var resolved: [[UInt8]: [UInt8]] {
        bytes.withUnsafeBufferPointer { all in
            var resolved: [[UInt8]: [UInt8]] = [:]
            for pair in pairs {
                let name = Array(all[pair.name])
                guard resolved[name] == nil else { continue }
                var value: [UInt8]?
                name.withUnsafeBufferPointer { key in
                    forEachValue(named: key, in: all) { range in
                        if value == nil { value = Array(all[range]) } else { value! += "; ".utf8; value! += all[range] }
                    }
                }
                resolved[name] = value
            }
            return resolved
        }
    }

    /// Every parameter by name (for tests and logs; bytes that are not UTF-8 read as U+FFFD).
    public var dictionary: [String: String] {
        var all: [String: String] = [:]
        for (name, value) in resolved { all[String(decoding: name, as: UTF8.self)] = String(decoding: value, as: UTF8.self) }
        return all
    }

    /// Distinct names.
    public var count: Int { resolved.count }

    /// The same names (byte for byte) with the same values as lookups give them, whatever their order.
    public static func == (a: Parameters, b: Parameters) -> Bool { a.resolved == b.resolved }
}
