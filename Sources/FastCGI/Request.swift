// One FastCGI request as the handler sees it: the web server's CGI parameters and the request body.
#if canImport(Glibc)
import Glibc
#endif

/// A request from the web server. Parameters are CGI/1.1 variables (nginx's `fastcgi_params`);
/// bytes that are not UTF-8 are replaced with U+FFFD.
public struct Request: Sendable {
    /// Every FastCGI parameter the web server sent, by name (`REQUEST_METHOD`, `HTTP_COOKIE`, ...).
    public let params: [String: String]
    /// The request body: at most `maxBodyBytes`; empty when `bodyTooLarge`.
    public let body: [UInt8]
    /// True when the body was longer than the server's `maxBodyBytes`; it was not read (answer 413).
    public let bodyTooLarge: Bool

    public init(params: [String: String], body: [UInt8] = [], bodyTooLarge: Bool = false) {
        self.params = params
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
        guard let address = remoteAddress, address.utf8.count <= 45 else { return nil }
        var buffer = (UInt64(0), UInt64(0))  // room for an in6_addr
        let family = address.contains(":") ? AF_INET6 : AF_INET
        return withUnsafeMutableBytes(of: &buffer) { inet_pton(family, address, $0.baseAddress) } == 1 ? address : nil
    }

    /// An HTTP request header by its HTTP name, case-insensitively: `header("User-Agent")` reads
    /// `HTTP_USER_AGENT`; `Content-Type` and `Content-Length` read the CGI variables without `HTTP_`.
    public func header(_ name: String) -> String? {
        params[Self.parameterName(forHeader: name)]
    }

    /// The CGI parameter that carries an HTTP header: upper case, `-` becomes `_`, prefixed `HTTP_`.
    public static func parameterName(forHeader name: String) -> String {
        // Built in one buffer: every header lookup of a request comes through here.
        var bytes = Array("HTTP_".utf8)
        bytes.reserveCapacity(5 + name.utf8.count)
        for byte in name.utf8 {
            if byte == UInt8(ascii: "-") {
                bytes.append(UInt8(ascii: "_"))
            } else if byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") {
                bytes.append(byte - 32)
            } else {
                bytes.append(byte)
            }
        }
        let upper = bytes[5...]
        if upper.elementsEqual("CONTENT_TYPE".utf8) || upper.elementsEqual("CONTENT_LENGTH".utf8) {
            return String(decoding: upper, as: UTF8.self)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private func nonEmpty(_ name: String) -> String? {
        guard let value = params[name], !value.isEmpty else { return nil }
        return value
    }
}
