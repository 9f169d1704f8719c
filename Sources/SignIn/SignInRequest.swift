// The body of `POST /tokensignin`: which of the three accepted forms it is, and the ID token it carries.
import IDToken

/// A parsed sign-in request body (docs/http.md, "Request bodies").
public enum SignInRequest: Sendable, Equatable {
    /// `application/json` `{"idToken": "..."}` (the iOS Swift sample).
    case json(idToken: String)
    /// `application/x-www-form-urlencoded` `idtoken=...` (the Objective-C and Android samples).
    case form(idToken: String)
    /// The Sign in with Google web form, `credential=...&g_csrf_token=...`, whose `g_csrf_token` matched the
    /// cookie of that name. Answered with `303` rather than JSON.
    case webForm(credential: String, csrfToken: String)

    /// The longest ID token accepted, in bytes (Google's are about 1.2 KB).
    public static let maxTokenBytes = 16 * 1024
    /// The double-submit cookie (and form field) Google's web flow sets.
    public static let csrfCookieName = "g_csrf_token"
    /// Nesting limit for JSON bodies, so a hostile body cannot exhaust the stack.
    static let maxJSONDepth = 32

    /// The ID token, whichever form carried it.
    public var idToken: String {
        switch self {
        case .json(let token), .form(let token): token
        case .webForm(let credential, _): credential
        }
    }

    /// True for the web form flow, which answers `303` to the configured page instead of JSON.
    public var isWebForm: Bool {
        if case .webForm = self { return true }
        return false
    }

    /// Classifies and parses a body.
    ///
    /// Throws `SignInError` with code `.unsupportedMediaType` (no or another Content-Type, or a charset
    /// other than UTF-8), `.malformedBody` (bad JSON, not an object, non-string `idToken`, bad
    /// percent-encoding, invalid UTF-8, a repeated `idToken`/`idtoken`/`credential`/`g_csrf_token`, both
    /// `idtoken` and `credential`), `.missingToken` (absent or empty token), `.tokenTooLarge`, or
    /// `.csrfMismatch` (web form whose `g_csrf_token` is missing, empty or differs from the cookie).
    public static func parse(contentType: String?, body: [UInt8], cookieHeader: String?) throws(SignInError) -> SignInRequest {
        switch try MediaType.classify(contentType) {
        case .json:
            return .json(idToken: try checked(try JSONBody.idToken(in: body)))
        case .form:
            return try parseForm(body, cookieHeader: cookieHeader)
        }
    }

    static func parseForm(_ body: [UInt8], cookieHeader: String?) throws(SignInError) -> SignInRequest {
        var idToken: String?
        var credential: String?
        var csrfToken: String?
        for (name, value) in try FormURLEncoded.decode(body) {
            switch name {
            case "idtoken": try setOnce(&idToken, value, name)
            case "credential": try setOnce(&credential, value, name)
            case csrfCookieName: try setOnce(&csrfToken, value, name)
            default: continue // Google's form also sends e.g. select_by; other fields are not ours to judge.
            }
        }
        if let credential {
            guard idToken == nil else { throw SignInError(.malformedBody, "both idtoken and credential") }
            // The CSRF check comes before anything of the token: a forged cross-site post learns nothing of it.
            let cookie = Cookies.value(named: csrfCookieName, in: cookieHeader)
            guard let csrfToken, let cookie, !csrfToken.isEmpty, constantTimeEqual(csrfToken, cookie) else {
                throw SignInError(.csrfMismatch, cookie == nil ? "no g_csrf_token cookie" : "g_csrf_token missing or different")
            }
            return .webForm(credential: try checked(credential), csrfToken: csrfToken)
        }
        return .form(idToken: try checked(idToken))
    }

    static func setOnce(_ slot: inout String?, _ value: String, _ name: String) throws(SignInError) {
        guard slot == nil else { throw SignInError(.malformedBody, "repeated field \(name)") }
        slot = value
    }

    static func checked(_ token: String?) throws(SignInError) -> String {
        guard let token, !token.isEmpty else { throw SignInError(.missingToken, "no ID token") }
        guard token.utf8.count <= maxTokenBytes else {
            throw SignInError(.tokenTooLarge, "ID token of \(token.utf8.count) bytes")
        }
        return token
    }

    /// Compares without an early exit, so timing reveals at most the lengths.
    static func constantTimeEqual(_ lhs: String, _ rhs: String) -> Bool {
        let a = Array(lhs.utf8), b = Array(rhs.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}

/// The two media types `POST /tokensignin` accepts.
enum MediaType {
    case json
    case form

    /// The `type/subtype` of a Content-Type value, lowercased, without its parameters ("" when nothing comes
    /// before the first `;`, as in `;` or `;application/jwt`). Also what `POST /risc` decides by.
    static func essence(of contentType: String) -> String {
        contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0].trimmingASCIIWhitespace().lowercased()
    }

    /// `type/subtype` case-insensitively, parameters after `;`; a `charset` other than UTF-8 is refused.
    static func classify(_ contentType: String?) throws(SignInError) -> MediaType {
        guard let contentType else { throw SignInError(.unsupportedMediaType, "no Content-Type") }
        // What clients send: without parameters, in lower case.
        if contentType == "application/json" { return .json }
        if contentType == "application/x-www-form-urlencoded" { return .form }
        let type: MediaType
        switch essence(of: contentType) {
        case "application/json": type = .json
        case "application/x-www-form-urlencoded": type = .form
        default: throw SignInError(.unsupportedMediaType, "unsupported Content-Type")
        }
        for parameter in contentType.split(separator: ";", omittingEmptySubsequences: false).dropFirst() {
            let parameter = parameter.trimmingASCIIWhitespace()
            // RFC 9110 allows empty parameters (`application/json;`, `a/b; ; charset=utf-8`).
            if parameter.isEmpty { continue }
            guard let equals = parameter.firstIndex(of: "=") else {
                throw SignInError(.unsupportedMediaType, "malformed Content-Type parameter")
            }
            guard parameter[..<equals].lowercased() == "charset" else { continue }
            var charset = parameter[parameter.index(after: equals)...].lowercased()
            if charset.count >= 2, charset.hasPrefix("\""), charset.hasSuffix("\"") { charset = String(charset.dropFirst().dropLast()) }
            guard charset == "utf-8" || charset == "utf8" else {
                throw SignInError(.unsupportedMediaType, "charset is not UTF-8")
            }
        }
        return type
    }
}

/// Strict `application/x-www-form-urlencoded` decoding.
package enum FormURLEncoded {
    /// Splits on `&` (empty pieces skipped), then on the first `=` (none: empty value); decodes `+` as space
    /// and `%XX`. A `%` not followed by two hex digits, or a name or value that is not UTF-8 after
    /// decoding, throws `.malformedBody`.
    static func decode(_ body: [UInt8]) throws(SignInError) -> [(String, String)] {
        var pairs: [(String, String)] = []
        for piece in body.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = piece.firstIndex(of: UInt8(ascii: "="))
            let name = try unescape(piece[..<(equals ?? piece.endIndex)])
            let value = equals.map { piece[piece.index(after: $0)...] } ?? []
            pairs.append((name, try unescape(value)))
        }
        return pairs
    }

    package static func unescape(_ bytes: ArraySlice<UInt8>, plusIsSpace: Bool = true) throws(SignInError) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "+") where plusIsSpace:
                out.append(0x20)
            case UInt8(ascii: "%"):
                guard index + 2 < bytes.endIndex,
                      let high = JSONString.hexValue(bytes[index + 1]), let low = JSONString.hexValue(bytes[index + 2]) else {
                    throw SignInError(.malformedBody, "bad percent-encoding")
                }
                out.append(high << 4 | low)
                index += 2
            default:
                out.append(byte)
            }
            index += 1
        }
        guard let string = String(validating: out, as: UTF8.self) else {
            throw SignInError(.malformedBody, "form field is not UTF-8")
        }
        return string
    }
}

/// Just enough of RFC 8259 to find `idToken` in a JSON object while validating the whole document.
struct JSONBody {
    let bytes: [UInt8]
    var index = 0

    /// The `idToken` string of a top-level object, or nil when absent. Other members are validated and
    /// ignored. Not JSON, not an object, invalid UTF-8, a non-string or repeated `idToken`: `.malformedBody`.
    static func idToken(in body: [UInt8]) throws(SignInError) -> String? {
        guard String(validating: body, as: UTF8.self) != nil else { throw malformed("body is not UTF-8") }
        var parser = JSONBody(bytes: body)
        parser.skipWhitespace()
        guard parser.peek == UInt8(ascii: "{") else { throw malformed("body is not a JSON object") }
        var token: String?
        try parser.object(depth: 1) { (parser, key) throws(SignInError) in
            guard key == "idToken" else { return false }
            guard token == nil else { throw malformed("repeated idToken") }
            guard parser.peek == UInt8(ascii: "\"") else { throw malformed("idToken is not a string") }
            token = try parser.string()
            return true
        }
        parser.skipWhitespace()
        guard parser.index == body.count else { throw malformed("trailing data after the JSON object") }
        return token
    }

    static func malformed(_ detail: String) -> SignInError { SignInError(.malformedBody, detail) }

    var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipWhitespace() {
        while let byte = peek, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    mutating func expect(_ byte: UInt8) throws(SignInError) {
        guard peek == byte else { throw Self.malformed("expected '\(Character(Unicode.Scalar(byte)))'") }
        index += 1
    }

    /// Parses an object at `index`; `member` may consume a member's value (returning true) or leave it to be skipped.
    mutating func object(depth: Int, member: (inout JSONBody, String) throws(SignInError) -> Bool) throws(SignInError) {
        guard depth <= SignInRequest.maxJSONDepth else { throw Self.malformed("JSON nested too deeply") }
        try expect(UInt8(ascii: "{"))
        skipWhitespace()
        if peek == UInt8(ascii: "}") { index += 1; return }
        while true {
            skipWhitespace()
            let key = try string()
            skipWhitespace()
            try expect(UInt8(ascii: ":"))
            skipWhitespace()
            if try !member(&self, key) { try value(depth: depth + 1) }
            skipWhitespace()
            if peek == UInt8(ascii: ",") { index += 1; continue }
            try expect(UInt8(ascii: "}"))
            return
        }
    }

    mutating func value(depth: Int) throws(SignInError) {
        guard depth <= SignInRequest.maxJSONDepth else { throw Self.malformed("JSON nested too deeply") }
        switch peek {
        case UInt8(ascii: "{"):
            try object(depth: depth) { (_, _) throws(SignInError) in false }
        case UInt8(ascii: "["):
            index += 1
            skipWhitespace()
            if peek == UInt8(ascii: "]") { index += 1; return }
            while true {
                skipWhitespace()
                try value(depth: depth + 1)
                skipWhitespace()
                if peek == UInt8(ascii: ",") { index += 1; continue }
                try expect(UInt8(ascii: "]"))
                return
            }
        case UInt8(ascii: "\""):
            _ = try string()
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        default: try number()
        }
    }

    mutating func literal(_ word: String) throws(SignInError) {
        for byte in word.utf8 { try expect(byte) }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    mutating func number() throws(SignInError) {
        if peek == UInt8(ascii: "-") { index += 1 }
        if peek == UInt8(ascii: "0") {
            index += 1
        } else {
            guard digits() > 0 else { throw Self.malformed("bad JSON value") }
        }
        if peek == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw Self.malformed("bad JSON number") }
        }
        if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
            index += 1
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw Self.malformed("bad JSON number") }
        }
    }

    mutating func digits() -> Int {
        var count = 0
        while let byte = peek, byte >= 0x30 && byte <= 0x39 { index += 1; count += 1 }
        return count
    }

    /// A string at `index`, unescaped. Raw control characters, bad escapes and lone surrogates are refused.
    mutating func string() throws(SignInError) -> String {
        try expect(UInt8(ascii: "\""))
        let start = index
        // Find the closing quote (an escape's second byte is never one); the content is decoded in one pass after.
        var escaped = false
        // The closing quote's index; -1: a raw control character first; nil: none.
        let closing: Int? = bytes.withUnsafeBytes { buffer in
            var at = start
            while true {
                at = JSONString.plainEnd(buffer, from: at)
                guard at < buffer.count else { return nil }
                let byte = buffer[at]
                if byte == UInt8(ascii: "\"") { return at }
                if byte < 0x20 { return -1 }
                escaped = true  // a backslash: it and the escaped byte
                at += 2
            }
        }
        guard let end = closing else { throw Self.malformed("unterminated JSON string") }
        guard end >= 0 else { throw Self.malformed("control character in JSON string") }
        index = end + 1
        // The body was validated as UTF-8 and escapes produce valid scalars, so decoding cannot fail.
        guard escaped else { return String(decoding: bytes[start..<end], as: UTF8.self) }
        var out: [UInt8] = []
        out.reserveCapacity(end - start)
        let decoded = bytes.withUnsafeBytes { JSONString.unescape($0, start, end, into: &out) }
        guard decoded else { throw Self.malformed("bad escape or lone surrogate in JSON string") }
        return String(decoding: out, as: UTF8.self)
    }
}
