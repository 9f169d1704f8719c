// Web origins (scheme://host[:port]) and the Origin / Sec-Fetch-Site check for cookie-authenticated state changes.

/// A web origin, normalised: lower-case scheme and host, default port (80 for http, 443 for https) dropped.
public struct Origin: Hashable, Sendable, CustomStringConvertible {
    /// `http` or `https`.
    public let scheme: String
    /// Lower-case host name, IPv4 address, or bracketed IPv6 address (`[::1]`).
    public let host: String
    /// The port when it is not the scheme's default.
    public let port: Int?

    /// Parses `scheme://host[:port]` exactly as a browser sends it in an `Origin` header: no path (not even
    /// `/`), no query, no user info. Only `http` and `https` are origins we can serve; anything else is nil.
    public init?(parsing text: some StringProtocol) {
        let text = String(text)
        guard let separator = text.firstRange(of: "://") else { return nil }
        let scheme = text[..<separator.lowerBound].lowercased()
        guard scheme == "https" || scheme == "http" else { return nil }
        let authority = text[separator.upperBound...]
        guard !authority.isEmpty, !authority.contains(where: { "/?#@\\".contains($0) }) else { return nil }

        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[...close]
            let rest = authority[authority.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                portText = rest.dropFirst()
            }
            guard host.dropFirst().dropLast().allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }),
                  host.count > 2 else { return nil }
        } else if let colon = authority.firstIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty else { return nil }
        if !host.hasPrefix("[") {
            guard host.utf8.allSatisfy({ Self.isHostByte($0) }) else { return nil }
        }

        var port: Int?
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let value = Int(portText), (1...65535).contains(value) else { return nil }
            port = value
        }
        if (scheme == "https" && port == 443) || (scheme == "http" && port == 80) { port = nil }

        self.scheme = scheme
        self.host = host.lowercased()
        self.port = port
    }

    /// True for `localhost`, `127.0.0.1` and `[::1]`: the only hosts we accept over plain http.
    public var isLoopback: Bool { host == "localhost" || host == "127.0.0.1" || host == "[::1]" }

    /// The serialised origin, `scheme://host[:port]`.
    public var description: String {
        if let port { return "\(scheme)://\(host):\(port)" }
        return "\(scheme)://\(host)"
    }

    // Letters, digits, '-', '.', '_': host names and IPv4 addresses; no percent-encoded or IDN (punycode is ASCII).
    private static func isHostByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }
}

/// Decides whether a cookie-authenticated, state-changing request (sign-out, session revocation, ...) may
/// proceed, as a defence against cross-site request forgery on top of `SameSite=Lax`.
///
/// Rules (docs/http.md, "Origin check"):
/// 1. An `Origin` header is present: allowed only if it equals one of the site origins after normalisation
///    (case-insensitive scheme and host, default ports dropped). `Origin: null` is refused.
/// 2. No `Origin` header: allowed only if `Sec-Fetch-Site: same-origin`.
/// 3. Anything else is refused (no `Origin` and no or another `Sec-Fetch-Site`, a malformed `Origin`).
///
/// `decide` is NOT applied to `POST /tokensignin`: Google's web form posts cross-site from one of
/// `webFormOrigins` (accounts.google.com) and is protected by the `g_csrf_token` double-submit cookie instead;
/// `decideTokenPost` is the lighter rule for it.
public struct OriginCheck: Sendable {
    /// The outcome, with the reason for logs when refused.
    public enum Decision: Hashable, Sendable {
        case allowed
        case refused(reason: String)
    }

    public let siteOrigins: Set<Origin>
    /// The pages that may post the Sign in with Google web form cross-site: Google's own, unless configured.
    public let webFormOrigins: Set<Origin>

    public init(siteOrigins: [Origin], webFormOrigins: [Origin] = [OriginCheck.google]) {
        self.siteOrigins = Set(siteOrigins)
        self.webFormOrigins = Set(webFormOrigins)
    }

    /// Decides from the raw header values (`nil` when the header is absent).
    public func decide(origin: String?, secFetchSite: String?) -> Decision {
        if let origin {
            let trimmed = origin.trimmingASCIIWhitespace()
            if trimmed == "null" { return .refused(reason: "opaque Origin (null)") }
            guard let parsed = Origin(parsing: trimmed) else { return .refused(reason: "malformed Origin") }
            return siteOrigins.contains(parsed) ? .allowed : .refused(reason: "Origin is not a site origin")
        }
        if let secFetchSite, secFetchSite.trimmingASCIIWhitespace().lowercased() == "same-origin" {
            return .allowed
        }
        return .refused(reason: "no Origin and Sec-Fetch-Site is not same-origin")
    }

    /// The login-CSRF guard for `POST /tokensignin` with a `.json` or `.form` body: a browser always sends
    /// `Origin` on a POST, native apps do not. Allowed when there is no `Origin` (a native client) or it is a
    /// site origin; refused otherwise, so another site cannot post its own ID token from a victim's browser
    /// and sign the victim into the attacker's account. The web form (`webForm`) is posted cross-site by
    /// Google's page, so `webFormOrigins` are allowed for it as well; its `g_csrf_token` cookie protects it.
    ///
    /// Without `Origin`, a browser's `Sec-Fetch-Site` still tells another site's request apart (a form some browsers
    /// post without `Origin`): `cross-site` or `same-site` (another origin of the same site) is refused.
    public func decideTokenPost(origin: String?, secFetchSite: String? = nil, webForm: Bool = false) -> Decision {
        guard let origin else { return decideWithoutOrigin(secFetchSite: secFetchSite) }
        if webForm, let parsed = Origin(parsing: origin.trimmingASCIIWhitespace()), webFormOrigins.contains(parsed) {
            return .allowed
        }
        return decide(origin: origin, secFetchSite: nil)
    }

    /// A state-changing request that carries no `Origin` (a native app's, a Bearer-authenticated one): allowed unless a
    /// browser's `Sec-Fetch-Site` says it comes from another site or another origin of this one. Native clients
    /// send neither header.
    public func decideWithoutOrigin(secFetchSite: String?) -> Decision {
        guard let site = secFetchSite?.trimmingASCIIWhitespace().lowercased(), site == "cross-site" || site == "same-site" else {
            return .allowed
        }
        return .refused(reason: "no Origin and Sec-Fetch-Site is \(site)")
    }

    /// Sign in with Google's redirect mode posts the web form from Google's own page.
    public static let google = Origin(parsing: "https://accounts.google.com")!
}
