// The service's configuration: TOKENSIGNIN_* environment variables, each overridable by a flag (docs/configuration.md).

import IDToken

/// Everything `tokensignin serve` needs to know, validated once at start-up.
///
/// Built from the environment plus command-line flags; a flag overrides its variable. An empty value
/// (`TOKENSIGNIN_LISTEN=` in a systemd `EnvironmentFile`, or `--listen=`) counts as unset, so a flag can
/// also reset a variable to its default. Every missing or malformed setting throws a `SignInError`
/// (`.invalidConfiguration`) whose message names the variable.
public struct Configuration: Sendable, Equatable {
    /// OAuth client IDs accepted as the token's audience (web, iOS, Android). Never empty.
    public var clientIDs: [String]
    /// Where Google's key set is fetched from (https, or http on a loopback host for tests).
    public var jwksURL: String
    /// A local key set file used instead of `jwksURL` when set.
    public var jwksFile: String?
    /// A unix socket path or `host:port`; nil means the FastCGI socket inherited as fd 0.
    public var listen: String?
    /// Default-lane requests (sign-ins and everything that is not a check) running at once (1...1024).
    public var workers: Int
    /// Checks-lane requests (`/auth/session`, `/healthz`, `/readyz`, `/metrics`) running at once (1...1024).
    public var checkWorkers: Int
    /// The longest a FastCGI request may take to arrive, first byte to last, in seconds (1...300).
    public var requestTimeout: Int64
    /// Google Workspace domains (`hd` claim) allowed to sign in, lower-cased; empty means any account.
    public var hostedDomains: [String]
    /// Tolerance in seconds for `iat`/`exp` checks (0...600).
    public var clockSkew: Int64
    /// A libpq connection URL or nil to use libpq's `PG*` environment variables.
    public var databaseURL: String?
    /// Absolute session lifetime in seconds.
    public var sessionTTL: Int64
    /// Idle session lifetime in seconds; never more than `sessionTTL`.
    public var sessionIdleTTL: Int64
    /// Name of the session cookie (an RFC 9110 token).
    public var cookieName: String
    /// Origins of the site's own pages, for the Origin check on cookie-authenticated state changes.
    public var siteOrigins: [Origin]
    /// Where the web form flow answers `303 See Other`: a local path or an https URL on a site origin.
    public var signInRedirect: String

    /// The body cap handed to the FastCGI server (fixed; nginx should cap lower with `client_max_body_size`).
    public static let maxBodyBytes = 64 * 1024

    /// The libpq conninfo string: the database URL, or "" to let libpq read `PG*` variables.
    public var conninfo: String { databaseURL ?? "" }

    /// The verification policy these settings describe.
    public var policy: Policy {
        Policy(clientIDs: clientIDs, hostedDomains: hostedDomains, clockSkew: clockSkew)
    }

    /// The Origin check over `siteOrigins`.
    public var originCheck: OriginCheck { OriginCheck(siteOrigins: siteOrigins) }

    /// Reads and validates every setting.
    /// - Parameters:
    ///   - environment: the process environment (only `TOKENSIGNIN_*` keys are read).
    ///   - arguments: flags after the subcommand, `--name value` or `--name=value` (see `Setting.flag`).
    ///   - processorCount: the machine's cores, for the default worker count.
    public init(environment: [String: String], arguments: [String] = [], processorCount: Int) throws(SignInError) {
        var values: [Setting: String] = [:]
        for setting in Setting.allCases {
            if let value = environment[setting.variable] { values[setting] = value }
        }
        for (setting, value) in try Self.parseFlags(arguments) { values[setting] = value }
        // Empty means unset, whatever its source.
        func value(_ setting: Setting) -> String? {
            guard let raw = values[setting] else { return nil }
            let trimmed = raw.trimmingASCIISpaces()
            return trimmed.isEmpty ? nil : trimmed
        }

        // TOKENSIGNIN_CLIENT_IDS
        guard let clientIDsText = value(.clientIDs) else { throw Self.invalid("\(Setting.clientIDs.variable) is required") }
        clientIDs = try Self.list(clientIDsText, .clientIDs)
        for id in clientIDs where !id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
            throw Self.invalid("\(Setting.clientIDs.variable) has a client ID with a space or non-ASCII character: '\(id)'")
        }

        // TOKENSIGNIN_JWKS_URL
        jwksURL = value(.jwksURL) ?? Self.defaultJWKSURL
        guard Self.isAcceptableKeySetURL(jwksURL) else {
            throw Self.invalid("\(Setting.jwksURL.variable) must be an https:// URL (or http:// on 127.0.0.1, [::1] or localhost), got '\(jwksURL)'")
        }

        // TOKENSIGNIN_JWKS_FILE
        jwksFile = value(.jwksFile)

        // TOKENSIGNIN_LISTEN (the FastCGI module parses the address itself)
        listen = value(.listen)
        if let listen, !listen.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) {
            throw Self.invalid("\(Setting.listen.variable) must be a unix socket path or host:port without spaces, got '\(listen)'")
        }

        // TOKENSIGNIN_WORKERS
        if let text = value(.workers) {
            guard let number = Self.decimal(text), (1...1024).contains(number) else {
                throw Self.invalid("\(Setting.workers.variable) must be a positive integer (1...1024), got '\(text)'")
            }
            workers = Int(number)
        } else {
            workers = Self.defaultWorkers(processorCount: processorCount)
        }

        // TOKENSIGNIN_CHECK_WORKERS
        if let text = value(.checkWorkers) {
            guard let number = Self.decimal(text), (1...1024).contains(number) else {
                throw Self.invalid("\(Setting.checkWorkers.variable) must be a positive integer (1...1024), got '\(text)'")
            }
            checkWorkers = Int(number)
        } else {
            checkWorkers = Self.defaultWorkers(processorCount: processorCount)
        }

        // TOKENSIGNIN_REQUEST_TIMEOUT
        if let text = value(.requestTimeout) {
            guard let seconds = Self.parseDuration(text), seconds <= 300 else {
                throw Self.invalid("\(Setting.requestTimeout.variable) must be a duration from 1s to 300s (e.g. 10s), got '\(text)'")
            }
            requestTimeout = seconds
        } else {
            requestTimeout = Self.defaultRequestTimeout
        }

        // TOKENSIGNIN_HOSTED_DOMAINS
        if let text = value(.hostedDomains) {
            hostedDomains = try Self.list(text, .hostedDomains).map { $0.lowercased() }
            for domain in hostedDomains where !Self.isDomainName(domain) {
                throw Self.invalid("\(Setting.hostedDomains.variable) has a malformed domain: '\(domain)'")
            }
        } else {
            hostedDomains = []
        }

        // TOKENSIGNIN_CLOCK_SKEW
        if let text = value(.clockSkew) {
            guard let number = Self.decimal(text), (0...600).contains(number) else {
                throw Self.invalid("\(Setting.clockSkew.variable) must be a whole number of seconds (0...600), got '\(text)'")
            }
            clockSkew = number
        } else {
            clockSkew = 60
        }

        // TOKENSIGNIN_DATABASE_URL (never echoed: it may carry a password)
        databaseURL = value(.databaseURL)
        if let url = databaseURL, !(url.hasPrefix("postgresql://") || url.hasPrefix("postgres://")) {
            throw Self.invalid("\(Setting.databaseURL.variable) must start with postgresql:// or postgres://")
        }

        // TOKENSIGNIN_SESSION_TTL and TOKENSIGNIN_SESSION_IDLE_TTL
        sessionTTL = try Self.duration(value(.sessionTTL), .sessionTTL) ?? Self.defaultSessionTTL
        if let idle = try Self.duration(value(.sessionIdleTTL), .sessionIdleTTL) {
            guard idle <= sessionTTL else {
                throw Self.invalid("\(Setting.sessionIdleTTL.variable) (\(idle)s) must not exceed \(Setting.sessionTTL.variable) (\(sessionTTL)s)")
            }
            sessionIdleTTL = idle
        } else {
            // The default never exceeds a shorter explicit absolute lifetime.
            sessionIdleTTL = min(Self.defaultSessionIdleTTL, sessionTTL)
        }

        // TOKENSIGNIN_COOKIE_NAME
        cookieName = value(.cookieName) ?? Self.defaultCookieName
        guard Cookies.isCookieName(cookieName) else {
            throw Self.invalid("\(Setting.cookieName.variable) must be a token (letters, digits and !#$%&'*+-.^_`|~), got '\(cookieName)'")
        }

        // TOKENSIGNIN_SITE_ORIGINS
        if let text = value(.siteOrigins) {
            var origins: [Origin] = []
            for item in try Self.list(text, .siteOrigins) {
                guard let origin = Origin(parsing: item) else {
                    throw Self.invalid("\(Setting.siteOrigins.variable) has a malformed origin (want scheme://host[:port], no path): '\(item)'")
                }
                guard origin.scheme == "https" || origin.isLoopback else {
                    throw Self.invalid("\(Setting.siteOrigins.variable) has an http origin that is not loopback (use https): '\(item)'")
                }
                origins.append(origin)
            }
            siteOrigins = origins
        } else {
            siteOrigins = []
        }

        // TOKENSIGNIN_SIGNIN_REDIRECT
        signInRedirect = value(.signInRedirect) ?? "/"
        guard Self.isAcceptableRedirect(signInRedirect, siteOrigins: siteOrigins) else {
            throw Self.invalid("\(Setting.signInRedirect.variable) must be a path starting with a single '/' or an https URL on one of \(Setting.siteOrigins.variable), got '\(signInRedirect)'")
        }
    }

    // MARK: Defaults

    public static let defaultJWKSURL = "https://www.googleapis.com/oauth2/v3/certs"
    public static let defaultCookieName = "__Host-tokensignin"
    public static let defaultSessionTTL: Int64 = 30 * 86_400
    public static let defaultSessionIdleTTL: Int64 = 7 * 86_400
    public static let defaultRequestTimeout: Int64 = 10

    /// Two workers per core (they mostly wait on PostgreSQL), within 1...1024.
    public static func defaultWorkers(processorCount: Int) -> Int {
        min(max(processorCount, 1), 512) * 2
    }

    // MARK: Durations

    /// The longest accepted duration: ten years, far beyond any sane session and far from overflow.
    public static let maxDurationSeconds: Int64 = 10 * 365 * 86_400

    /// Parses a positive duration: plain seconds (`90`) or a number with a unit `s`, `m`, `h` or `d`
    /// (`90s`, `15m`, `12h`, `30d`). Returns seconds, or nil for zero, signs, spaces, other units, empty
    /// text, or anything above `maxDurationSeconds`.
    public static func parseDuration(_ text: some StringProtocol) -> Int64? {
        var digits = Substring(text)
        var unit: Int64 = 1
        switch digits.last {
        case "s": unit = 1; digits = digits.dropLast()
        case "m": unit = 60; digits = digits.dropLast()
        case "h": unit = 3_600; digits = digits.dropLast()
        case "d": unit = 86_400; digits = digits.dropLast()
        default: break
        }
        guard let number = decimal(digits) else { return nil }
        let (seconds, overflow) = number.multipliedReportingOverflow(by: unit)
        guard !overflow, seconds > 0, seconds <= maxDurationSeconds else { return nil }
        return seconds
    }

    // MARK: Flags and usage

    /// One configurable setting: its environment variable and its flag.
    public enum Setting: String, CaseIterable, Sendable {
        case clientIDs = "CLIENT_IDS"
        case jwksURL = "JWKS_URL"
        case jwksFile = "JWKS_FILE"
        case listen = "LISTEN"
        case workers = "WORKERS"
        case checkWorkers = "CHECK_WORKERS"
        case requestTimeout = "REQUEST_TIMEOUT"
        case hostedDomains = "HOSTED_DOMAINS"
        case clockSkew = "CLOCK_SKEW"
        case databaseURL = "DATABASE_URL"
        case sessionTTL = "SESSION_TTL"
        case sessionIdleTTL = "SESSION_IDLE_TTL"
        case cookieName = "COOKIE_NAME"
        case siteOrigins = "SITE_ORIGINS"
        case signInRedirect = "SIGNIN_REDIRECT"

        /// The environment variable, e.g. `TOKENSIGNIN_CLIENT_IDS`.
        public var variable: String { "TOKENSIGNIN_" + rawValue }
        /// The flag, the variable in kebab case without the prefix, e.g. `--client-ids`.
        public var flag: String { "--" + rawValue.lowercased().replacing("_", with: "-") }

        /// One line for `usage`: default and meaning.
        public var help: String {
            switch self {
            case .clientIDs: "required; comma-separated OAuth client IDs accepted as audience"
            case .jwksURL: "Google's key set URL (default \(Configuration.defaultJWKSURL))"
            case .jwksFile: "a local JWKS file used instead of the URL (default: unset)"
            case .listen: "unix socket path or host:port (default: the socket inherited as fd 0)"
            case .workers: "sign-ins and the rest running at once, 1...1024 (default: 2 per core)"
            case .checkWorkers: "session checks and health running at once, 1...1024 (default: 2 per core)"
            case .requestTimeout: "longest a FastCGI request may take to arrive, 1s...300s (default 10s)"
            case .hostedDomains: "comma-separated Workspace domains allowed (default: any account)"
            case .clockSkew: "seconds of clock tolerance, 0...600 (default 60)"
            case .databaseURL: "postgresql:// URL (default: libpq's PG* variables)"
            case .sessionTTL: "absolute session lifetime, e.g. 30d, 12h, 90 (default 30d)"
            case .sessionIdleTTL: "idle session lifetime, at most SESSION_TTL (default 7d)"
            case .cookieName: "session cookie name (default \(Configuration.defaultCookieName))"
            case .siteOrigins: "comma-separated origins of the site, e.g. https://example.com (default: none)"
            case .signInRedirect: "303 target of the web form flow: /path or https URL on a site origin (default /)"
            }
        }
    }

    /// Every variable and flag, one per line, for `tokensignin serve --help` and start-up errors.
    public static var usage: String {
        var lines = ["Settings (environment variable, or the flag after it, which wins):"]
        for setting in Setting.allCases {
            let names = "\(setting.variable), \(setting.flag)"
            lines.append("  " + names.paddedRight(to: 52) + setting.help)
        }
        lines.append("Durations: seconds (90) or a number with s, m, h or d (15m, 12h, 30d).")
        return lines.joined(separator: "\n")
    }

    /// Parses `--name value` and `--name=value`; an unknown, repeated or valueless flag is an error.
    static func parseFlags(_ arguments: [String]) throws(SignInError) -> [(Setting, String)] {
        var result: [(Setting, String)] = []
        var seen: Set<Setting> = []
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            let name: Substring
            var value: String?
            if let equals = argument.firstIndex(of: "=") {
                name = argument[..<equals]
                value = String(argument[argument.index(after: equals)...])
            } else {
                name = Substring(argument)
            }
            guard let setting = Setting.allCases.first(where: { $0.flag == name }) else {
                throw invalid("unknown option '\(name)'")
            }
            if value == nil {
                index += 1
                guard index < arguments.endIndex else { throw invalid("\(setting.flag) needs a value") }
                value = arguments[index]
            }
            guard seen.insert(setting).inserted else { throw invalid("\(setting.flag) is given more than once") }
            result.append((setting, value!))
            index += 1
        }
        return result
    }

    // MARK: Validation helpers

    static func invalid(_ message: String) -> SignInError { SignInError(.invalidConfiguration, message) }

    /// Only ASCII digits (no sign, no spaces), at most 18 of them so the value fits in Int64.
    static func decimal(_ text: some StringProtocol) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(text)
    }

    /// A comma-separated list, items trimmed; an empty item is an error naming the setting.
    static func list(_ text: String, _ setting: Setting) throws(SignInError) -> [String] {
        let items = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingASCIISpaces() }
        guard !items.contains(where: \.isEmpty) else {
            throw invalid("\(setting.variable) has an empty entry in '\(text)'")
        }
        return items
    }

    static func duration(_ text: String?, _ setting: Setting) throws(SignInError) -> Int64? {
        guard let text else { return nil }
        guard let seconds = parseDuration(text) else {
            throw invalid("\(setting.variable) must be a positive duration like 90, 90s, 15m, 12h or 30d (at most 3650d), got '\(text)'")
        }
        return seconds
    }

    static func isAcceptableKeySetURL(_ url: String) -> Bool {
        guard url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), let separator = url.firstRange(of: "://") else { return false }
        let scheme = url[..<separator.lowerBound].lowercased()
        let rest = url[separator.upperBound...]
        let authority = rest.prefix(while: { $0 != "/" && $0 != "?" && $0 != "#" })
        guard scheme == "https" || scheme == "http", let origin = Origin(parsing: "\(scheme)://\(authority)") else { return false }
        return scheme == "https" || origin.isLoopback
    }

    static func isDomainName(_ domain: String) -> Bool {
        guard domain.utf8.count <= 253 else { return false }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        return labels.allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }
        }
    }

    /// A local path (one leading '/', not '//' or '/\', which browsers read as another host) or an https
    /// URL whose origin is a site origin. No spaces or control characters.
    static func isAcceptableRedirect(_ target: String, siteOrigins: [Origin]) -> Bool {
        guard target.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return false }
        if target.hasPrefix("/") {
            let second = target.dropFirst().first
            return second != "/" && second != "\\"
        }
        guard let separator = target.firstRange(of: "://") else { return false }
        let afterScheme = target[separator.upperBound...]
        let authorityEnd = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? afterScheme.endIndex
        guard afterScheme[authorityEnd...].first.map({ $0 == "/" }) ?? true else { return false }
        guard let origin = Origin(parsing: target[..<authorityEnd]), origin.scheme == "https" else { return false }
        return siteOrigins.contains(origin)
    }
}

extension String {
    /// The string followed by spaces up to `width` columns (at least one space).
    fileprivate func paddedRight(to width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
