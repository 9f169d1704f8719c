// Loading a JWKS document: one bounded, redirect-free libcurl GET (or a local file read), plus its freshness;
// the same bounded exchange serves Google's RISC API (RiscClient).
import CCurl
import IDToken

#if canImport(Glibc)
import Glibc
#endif

/// Why one load of the key set failed; the cache folds it into `IDTokenError(.keysUnavailable, detail)`.
public enum KeyFetchFailure: Error, Equatable, CustomStringConvertible {
    /// Not `https://`, and not `http://` to a loopback host.
    case refusedURL(String)
    /// DNS, connect, TLS, timeout: libcurl's own message.
    case transport(String)
    /// Any status but 200 (redirects included: none are followed).
    case status(Int)
    case bodyTooLarge(limit: Int)
    case file(String)
    /// The document is not a usable JWKS (or has no keys).
    case invalidKeySet(String)
    /// Another document (Google's RISC configuration) is not as expected.
    case invalidDocument(String)
    /// No thread could be started to run the fetch on.
    case noThread

    public var description: String {
        switch self {
        case .refusedURL(let why): "refused URL: \(why)"
        case .transport(let why): "transport: \(why)"
        case .status(let status): "HTTP status \(status)"
        case .bodyTooLarge(let limit): "body over \(limit) bytes"
        case .file(let why): "file: \(why)"
        case .invalidKeySet(let why): "invalid key set: \(why)"
        case .invalidDocument(let why): "invalid document: \(why)"
        case .noThread: "no thread could be started for the fetch"
        }
    }
}

/// One loaded key document and how long its source says it stays fresh.
package struct KeyDocument: Sendable {
    package var body: [UInt8]
    /// Seconds of freshness left (`max-age` minus `Age`), nil when the source says nothing.
    package var freshFor: Int64?

    package init(body: [UInt8], freshFor: Int64?) {
        self.body = body
        self.freshFor = freshFor
    }
}

/// The limits every HTTP fetch runs under.
package struct FetchLimits: Sendable {
    package var maxBodyBytes: Int
    package var connectTimeoutMilliseconds: Int
    package var totalTimeoutMilliseconds: Int
    /// A PEM bundle to trust instead of the system's (tests with a private CA); nil in production.
    package var trustedCAFile: String? = nil

    package init(maxBodyBytes: Int, connectTimeoutMilliseconds: Int, totalTimeoutMilliseconds: Int) {
        self.maxBodyBytes = maxBodyBytes
        self.connectTimeoutMilliseconds = connectTimeoutMilliseconds
        self.totalTimeoutMilliseconds = totalTimeoutMilliseconds
    }

    init(_ settings: KeyCache.Settings) {
        self.init(maxBodyBytes: settings.maxBodyBytes, connectTimeoutMilliseconds: Self.milliseconds(settings.connectTimeout),
                  totalTimeoutMilliseconds: Self.milliseconds(settings.totalTimeout))
    }

    private static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }
}

/// A raw HTTP response, headers in arrival order with lower-cased names (final response only).
package struct HTTPResponse: Sendable {
    package var status: Int
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]

    package func values(_ name: String) -> [String] { headers.filter { $0.name == name }.map(\.value) }
}

/// curl_global_init is not thread-safe: run it exactly once, lazily (Swift globals initialise once, atomically).
private let curlGlobalInit: CURLcode = curl_global_init(Int(CURL_GLOBAL_SSL | CURL_GLOBAL_WIN32))

package enum KeyFetch {
    static let loopbackHosts: Set<String> = ["127.0.0.1", "::1", "[::1]", "localhost"]

    /// nil when `url` may be fetched: `https://` anywhere, `http://` only to a loopback host (tests, sidecars).
    package static func urlProblem(_ url: String) -> String? {
        scheme(of: url).problem
    }

    private static func scheme(of url: String) -> (scheme: String, problem: String?) {
        // Printable ASCII only: what an operator types, and nothing libcurl might normalise (IDN, spaces).
        guard url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return ("", "not a valid URL (spaces or non-ASCII characters)") }
        guard let handle = curl_url() else { return ("", "out of memory") }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK else { return ("", "not a valid URL") }
        func part(_ which: CURLUPart) -> String? {
            var value: UnsafeMutablePointer<CChar>?
            guard curl_url_get(handle, which, &value, 0) == CURLUE_OK, let value else { return nil }
            defer { curl_free(value) }
            return String(cString: value).lowercased()
        }
        // `https://user@host` hides the real host from a reader (`https://accounts.google.com@evil.example`).
        if part(CURLUPART_USER) != nil || part(CURLUPART_PASSWORD) != nil { return ("", "user information is not allowed in the URL") }
        switch (part(CURLUPART_SCHEME), part(CURLUPART_HOST).flatMap { $0.isEmpty ? nil : $0 }) {
        case ("https", _?): return ("https", nil)
        case ("http", let host?) where loopbackHosts.contains(host): return ("http", nil)
        case ("http", _): return ("http", "http:// is allowed only to a loopback host; use https://")
        default: return ("", "only https:// URLs are allowed")
        }
    }

    /// GETs `url` with `limits`; follows no redirects.
    package static func get(_ url: String, limits: FetchLimits, userAgent: String = "tokensignin-keycache") throws(KeyFetchFailure) -> HTTPResponse {
        try send(url, limits: limits, userAgent: userAgent)
    }

    /// One bounded, redirect-free HTTP exchange: GET, or POST when `body` is given, with extra `headers`
    /// (`Name: value` lines without CR or LF).
    package static func send(_ url: String, body: [UInt8]? = nil, headers: [String] = [], limits: FetchLimits,
                             userAgent: String = "tokensignin-keycache") throws(KeyFetchFailure) -> HTTPResponse {
        let (scheme, problem) = scheme(of: url)
        if let problem { throw .refusedURL(problem) }
        guard curlGlobalInit == CURLE_OK else { throw .transport("curl_global_init failed") }
        guard let easy = curl_easy_init() else { throw .transport("curl_easy_init failed") }
        defer { curl_easy_cleanup(easy) }

        let transfer = Transfer(limit: limits.maxBodyBytes)
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        var setup = CURLE_OK
        func set(_ result: CURLcode) { if setup == CURLE_OK { setup = result } }
        set(CCurl_setopt_string(easy, CURLOPT_URL, url))
        set(CCurl_setopt_string(easy, CURLOPT_PROTOCOLS_STR, scheme))
        set(CCurl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0))
        set(CCurl_setopt_long(easy, CURLOPT_NOSIGNAL, 1))  // worker threads: no SIGALRM for DNS timeouts
        set(CCurl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, limits.connectTimeoutMilliseconds))
        set(CCurl_setopt_long(easy, CURLOPT_TIMEOUT_MS, limits.totalTimeoutMilliseconds))
        set(CCurl_setopt_long(easy, CURLOPT_MAXFILESIZE, limits.maxBodyBytes))  // early refusal by Content-Length
        set(CCurl_setopt_string(easy, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1"))
        set(CCurl_setopt_string(easy, CURLOPT_USERAGENT, userAgent))
        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headerList) }
        for header in headers {
            guard !header.utf8.contains(where: { $0 == 0x0d || $0 == 0x0a || $0 == 0 }),
                  let appended = curl_slist_append(headerList, header) else { throw .transport("unusable request header") }
            headerList = appended
        }
        if let headerList { set(CCurl_setopt_pointer(easy, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(headerList))) }
        // One byte at least, so the buffer has an address even for an empty POST (its size says 0).
        let payload = body.map { $0.isEmpty ? [0] : $0 } ?? []
        if let body {
            set(CCurl_setopt_long(easy, CURLOPT_POST, 1))
            set(CCurl_setopt_long(easy, CURLOPT_POSTFIELDSIZE, body.count))
        }
        if let file = limits.trustedCAFile { set(CCurl_setopt_string(easy, CURLOPT_CAINFO, file)) }
        set(CCurl_setopt_write(easy, writeCallback))
        set(CCurl_setopt_pointer(easy, CURLOPT_WRITEDATA, context))
        set(CCurl_setopt_header(easy, headerCallback))
        set(CCurl_setopt_pointer(easy, CURLOPT_HEADERDATA, context))
        guard setup == CURLE_OK else { throw .transport(message(setup)) }

        // libcurl reads the POST body from this buffer during the transfer: it stays pinned until perform returns.
        let result = payload.withUnsafeBytes { raw -> CURLcode in
            if body != nil, setup == CURLE_OK {
                let status = CCurl_setopt_pointer(easy, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: raw.baseAddress))
                guard status == CURLE_OK else { return status }
            }
            return withExtendedLifetime(transfer) { curl_easy_perform(easy) }
        }
        if transfer.tooLarge || result == CURLE_FILESIZE_EXCEEDED { throw .bodyTooLarge(limit: limits.maxBodyBytes) }
        if transfer.headerBytes > maxHeaderBytes { throw .transport("response headers over \(maxHeaderBytes) bytes") }
        guard result == CURLE_OK else { throw .transport(message(result)) }
        var status = 0
        guard CCurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK else {
            throw .transport("no response code")
        }
        return HTTPResponse(status: status, headers: transfer.headers, body: transfer.body)
    }

    /// The document of `source`: an HTTP GET or a file read.
    package static func document(from source: KeySource, limits: FetchLimits) throws(KeyFetchFailure) -> KeyDocument {
        switch source {
        case .file(let path): try document(path: path, limit: limits.maxBodyBytes)
        case .url(let url): try document(url: url, limits: limits)
        }
    }

    /// The key set in `document` and its freshness; a document that is not a JWKS with a usable key is a failure.
    package static func keySet(from document: KeyDocument) throws(KeyFetchFailure) -> (keys: KeySet, freshFor: Int64?) {
        let keys: KeySet
        do { keys = try KeySet(jwks: document.body) } catch {
            throw .invalidKeySet(error.detail.isEmpty ? error.description : error.detail)
        }
        guard !keys.keyIDs.isEmpty else { throw .invalidKeySet("no keys") }
        return (keys, document.freshFor)
    }

    /// Fetches a JWKS: status 200 only; freshness from Cache-Control and Age.
    package static func document(url: String, limits: FetchLimits) throws(KeyFetchFailure) -> KeyDocument {
        let response = try get(url, limits: limits)
        guard response.status == 200 else { throw .status(response.status) }
        return KeyDocument(body: response.body, freshFor: freshness(cacheControl: response.values("cache-control"), age: response.values("age")))
    }

    /// Reads a JWKS file of at most `limit` bytes; a file carries no freshness.
    package static func document(path: String, limit: Int) throws(KeyFetchFailure) -> KeyDocument {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .file("cannot open \(path): errno \(errno)") }
        defer { close(fd) }
        var body: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .file("cannot read \(path): errno \(errno)")
            }
            if count == 0 { break }
            body += chunk[0..<count]
            if body.count > limit { throw .bodyTooLarge(limit: limit) }
        }
        return KeyDocument(body: body, freshFor: nil)
    }

    /// Seconds a response stays fresh: `max-age` minus `Age`, 0 for `no-store`/`no-cache`, nil without `max-age`.
    package static func freshness(cacheControl: [String], age: [String]) -> Int64? {
        var maxAge: Int64?
        for directive in cacheControl.flatMap({ $0.split(separator: ",") }) {
            let token = trimmedOWS(directive).lowercased()
            if token == "no-store" || token == "no-cache" { return 0 }
            guard token.hasPrefix("max-age="), maxAge == nil else { continue }
            var value = token.dropFirst("max-age=".count)
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = value.dropFirst().dropLast() }
            maxAge = Int64(value).map { max(0, $0) } ?? 0  // RFC 9111 §4.2.1: an invalid max-age means stale
        }
        guard let maxAge else { return nil }
        let ageSeconds = age.first.flatMap { Int64(trimmedOWS($0[...])) }.map { max(0, $0) } ?? 0
        return max(0, maxAge - ageSeconds)
    }

    private static func message(_ code: CURLcode) -> String {
        guard let text = curl_easy_strerror(code) else { return "curl error \(code.rawValue)" }
        return String(cString: text)
    }
}

/// The mutable state of one transfer, reached from libcurl's callbacks through their user-data pointer.
private final class Transfer {
    let limit: Int
    var body: [UInt8] = []
    var headers: [(name: String, value: String)] = []
    var headerBytes = 0
    var tooLarge = false
    init(limit: Int) { self.limit = limit }
}

private let writeCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    guard let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    guard transfer.body.count + length <= transfer.limit else {
        transfer.tooLarge = true
        return 0  // anything but `length` aborts the transfer with CURLE_WRITE_ERROR
    }
    if let data, length > 0 {
        transfer.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length))
    }
    return length
}

private let headerCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    let length = size * count
    guard let context, let data else { return length }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    transfer.headerBytes += length
    guard transfer.headerBytes <= maxHeaderBytes else { return 0 }  // a flood of headers aborts the transfer
    let line = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    if line.hasPrefix("HTTP/") {
        transfer.headers = []  // a new status line (after 100 Continue): keep only the final response's headers
    } else if let colon = line.firstIndex(of: ":") {
        transfer.headers.append((trimmedOWS(line[..<colon]).lowercased(), trimmedOWS(line[line.index(after: colon)...])))
    }
    return length
}

/// All header lines of one transfer together (Google sends about 1 KB).
private let maxHeaderBytes = 64 * 1024

/// `text` without the optional whitespace of HTTP (spaces, tabs) and the line end (CR, LF) around it.
/// On Unicode scalars, since "\r\n" is a single Character.
private func trimmedOWS(_ text: Substring) -> String {
    let scalars = text.unicodeScalars
    let isOWS: (Unicode.Scalar) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
    guard let first = scalars.firstIndex(where: { !isOWS($0) }), let last = scalars.lastIndex(where: { !isOWS($0) }) else { return "" }
    return String(scalars[first...last])
}
