// Reading the Cookie request header and building Set-Cookie values for the session cookie (RFC 6265).
import FastCGI

/// Cookie parsing and Set-Cookie construction.
public enum Cookies {
    /// Parses a `Cookie` header into (name, value) pairs in header order.
    ///
    /// Pairs are separated by `;` with optional spaces or tabs around them. A pair without `=`, with a
    /// name that is not a token, or with a value containing anything but cookie-octets is skipped, so one
    /// malformed cookie set by another app on the domain cannot hide ours. A value wrapped in double quotes
    /// is kept verbatim (quotes included), as browsers send it.
    public static func parse(_ header: String) -> [(name: String, value: String)] {
        var pairs: [(name: String, value: String)] = []
        for piece in header.split(separator: ";", omittingEmptySubsequences: true) {
            let pair = piece.trimmingASCIIWhitespace()
            guard let equals = pair.firstIndex(of: "=") else { continue }
            let name = String(pair[..<equals])
            let value = String(pair[pair.index(after: equals)...])
            guard isCookieName(name), isCookieValue(value) else { continue }
            pairs.append((name, value))
        }
        return pairs
    }

    /// The value of the first cookie called `name` in a `Cookie` header, or nil.
    ///
    /// First occurrence wins: browsers list cookies with longer paths first, and a `__Host-` cookie
    /// (Path=/, no Domain) cannot be shadowed by a sibling subdomain's cookie of the same name, while a
    /// later duplicate may be. Nil when the header is absent.
    public static func value(named name: String, in header: String?) -> String? {
        guard let header else { return nil }
        return parse(header).first(where: { $0.name == name })?.value
    }

    /// The session cookie: `<name>=<token>; Path=/; Max-Age=<seconds>; Secure; HttpOnly; SameSite=Lax`.
    ///
    /// Satisfies the `__Host-` prefix rules (Secure, Path=/, no Domain). `name` must be a token (the
    /// configuration checks it) and `token` cookie-octets (session tokens are base64url): a violation is
    /// a programming error and traps rather than emit a header a client could misparse.
    public static func sessionCookie(name: String, token: String, maxAge: Int64) -> String {
        precondition(isCookieName(name) && isCookieValue(token), "cookie name or value outside RFC 6265")
        var cookie = name
        cookie.reserveCapacity(name.utf8.count + token.utf8.count + 64)
        cookie.append("=")
        cookie.append(token)
        cookie.append("; Path=/; Max-Age=")
        cookie.append(String(max(maxAge, 0)))
        cookie.append("; Secure; HttpOnly; SameSite=Lax")
        return cookie
    }

    /// A cookie that makes the browser drop the session cookie (empty value, `Max-Age=0`), with the same
    /// attributes so it replaces the same cookie.
    public static func clearingCookie(name: String) -> String {
        precondition(isCookieName(name), "cookie name outside RFC 6265")
        return "\(name)=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Lax"
    }

    /// True when `name` is a non-empty RFC 9110 token (`!#$%&'*+-.^_`|~`, digits, letters).
    public static func isCookieName(_ name: some StringProtocol) -> Bool {
        Response.isToken(name)
    }

    /// True when `value` is `*cookie-octet` or `DQUOTE *cookie-octet DQUOTE` (RFC 6265 section 4.1.1):
    /// printable ASCII except space, `"`, `,`, `;` and `\`.
    public static func isCookieValue(_ value: some StringProtocol) -> Bool {
        func check(_ all: UnsafeBufferPointer<UInt8>) -> Bool {
            var bytes = all[...]
            if bytes.count >= 2, bytes.first == UInt8(ascii: "\""), bytes.last == UInt8(ascii: "\"") {
                bytes = bytes.dropFirst().dropLast()
            }
            return bytes.allSatisfy(isCookieOctet)
        }
        // A native string's bytes in one buffer (the usual case), else copied once.
        return value.utf8.withContiguousStorageIfAvailable(check) ?? Array(value.utf8).withUnsafeBufferPointer(check)
    }

    static func isCookieOctet(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x21, 0x23...0x2B, 0x2D...0x3A, 0x3C...0x5B, 0x5D...0x7E: true
        default: false
        }
    }
}
