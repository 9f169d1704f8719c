// The service's configuration: TOKENSIGNIN_* environment variables, each overridable by a flag (docs/configuration.md).

import FastCGI
import GoogleKeys
import IDToken
import Logging
import Sessions
import SignIn
import Store

/// Everything `tokensignin serve` needs to know, validated once at start-up.
///
/// Built from the environment plus command-line flags; a flag overrides its variable. An empty value
/// (`TOKENSIGNIN_LISTEN=` in a systemd `EnvironmentFile`, or `--listen=`) counts as unset, so a flag can
/// also reset a variable to its default. Every missing or malformed setting throws a `CommandError`
/// (`.invalidConfiguration`) whose message names the variable.
public struct Configuration: Sendable, Equatable {
    /// OAuth client IDs accepted as the token's audience (web, iOS, Android). Never empty when required.
    public var clientIDs: [String]
    /// Where Google's key set is fetched from (https, or http on a loopback host for tests).
    public var jwksURL: String
    /// A local key set file used instead of `jwksURL` when set.
    public var jwksFile: String?
    /// The longest a sign-in waits for Google's keys when none are loaded yet, in milliseconds (0...10000);
    /// never waited on while usable keys exist.
    public var keyWait: Int64
    /// A unix socket path or `host:port`; nil means the FastCGI socket inherited as fd 0.
    public var listen: String?
    /// Default-lane requests (sign-ins and everything that is not a check) running at once (1...1024).
    public var workers: Int
    /// Checks-lane requests (`/auth/session`, `/healthz`, `/readyz`, `/metrics`) running at once (1...1024).
    public var checkWorkers: Int
    /// How the worker threads are scheduled: `adaptive` (the default: SCHED_BATCH while reading sign-ins), `inherit`
    /// (as the process started), `normal` or `batch`.
    public var workerScheduling: WorkerScheduling
    /// Sign-ins one worker may verify and open together, in one database round trip (1...64): 1 opens each on
    /// its own (lower latency at moderate load, more CPU per sign-in; docs/fastcgi.md "Batches").
    public var signInBatch: Int
    /// The longest a FastCGI request may take to arrive, first byte to last, in seconds (1...300).
    public var requestTimeout: Int64
    /// Google Workspace domains (`hd` claim) allowed to sign in, lower-cased; empty means any account.
    public var hostedDomains: [String]
    /// Tolerance in seconds for `iat`/`exp` checks (0...600).
    public var clockSkew: Int64
    /// A libpq connection URL or nil to use libpq's `PG*` environment variables.
    public var databaseURL: String?
    /// What the database settings point at: PostgreSQL (`none`) or a transaction pooler such as PgBouncer.
    public var databasePooler: Pooler
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
    /// Pages that may post the Sign in with Google web form cross-site (Google's; a stand-in in development).
    public var webFormOrigins: [Origin]
    /// Live sessions one user may hold; the least recently used beyond it are revoked at sign-in (1...10000).
    public var maxSessionsPerUser: Int
    /// The folder of migration files `tokensignin migrate` applies.
    public var sqlDirectory: String
    /// Whether `listen` may be a TCP address other than loopback (off: FastCGI has no authentication).
    public var allowRemoteListen: Bool
    /// Database passwords (from `TOKENSIGNIN_DATABASE_URL` and `PGPASSWORD`) that no message may repeat:
    /// libpq echoes a malformed URL whole.
    public var secrets: [String]

    /// The body cap handed to the FastCGI server (fixed; nginx should cap lower with `client_max_body_size`).
    public static let maxBodyBytes = 64 * 1024

    /// The libpq conninfo string: the database URL, or "" to let libpq read `PG*` variables.
    public var conninfo: String { databaseURL ?? "" }

    /// The verification policy these settings describe.
    public var policy: Policy {
        Policy(clientIDs: clientIDs, hostedDomains: hostedDomains, clockSkew: clockSkew)
    }

    /// Session lifetimes and the per-user limit, as the store applies them.
    public var sessionPolicy: SessionPolicy {
        SessionPolicy(lifetime: sessionTTL, idleTimeout: sessionIdleTTL, maxSessionsPerUser: maxSessionsPerUser)
    }

    /// The Origin check over `siteOrigins`.
    public var originCheck: OriginCheck { OriginCheck(siteOrigins: siteOrigins, webFormOrigins: webFormOrigins) }

    /// What the HTTP application reads of these settings.
    package var site: Site {
        Site(policy: policy, cookieName: cookieName, sessionTTL: sessionTTL, signInRedirect: signInRedirect, originCheck: originCheck)
    }

    /// Reads and validates every setting.
    /// - Parameters:
    ///   - environment: the process environment (only `TOKENSIGNIN_*` keys are read).
    ///   - arguments: flags after the subcommand, `--name value` or `--name=value` (see `Setting.flag`).
    ///   - processorCount: the machine's cores, for the default worker count.
    ///   - requireClientIDs: false for the commands that never verify a token (migrate, sessions, prune).
    public init(environment: [String: String], arguments: [String] = [], processorCount: Int,
                requireClientIDs: Bool = true) throws(CommandError) {
        var values: [Setting: String] = [:]
        for setting in Setting.allCases {
            if let value = environment[setting.variable] { values[setting] = value }
        }
        // A misspelt setting would silently take its default: every TOKENSIGNIN_ variable must be one we know.
        let known = Set(Setting.allCases.map(\.variable))
        if let unknown = environment.keys.filter({ $0.hasPrefix("TOKENSIGNIN_") && !known.contains($0) }).sorted().first {
            let hint = Self.closestSetting(to: unknown).map { " (did you mean \($0.variable)?)" } ?? ""
            throw Self.invalid("\(unknown) is not a setting\(hint); `tokensignin serve --help` lists them")
        }
        for (setting, value) in try Self.parseFlags(arguments) { values[setting] = value }
        // Empty means unset, whatever its source.
        func value(_ setting: Setting) -> String? {
            guard let raw = values[setting] else { return nil }
            let trimmed = raw.trimmingASCIIWhitespace()
            return trimmed.isEmpty ? nil : trimmed
        }

        // TOKENSIGNIN_CLIENT_IDS
        if let clientIDsText = value(.clientIDs) {
            clientIDs = try Self.list(clientIDsText, .clientIDs)
        } else if requireClientIDs {
            throw Self.invalid("\(Setting.clientIDs.variable) is required")
        } else {
            clientIDs = []
        }
        for id in clientIDs {
            // A client secret pasted here must not be printed back (into a terminal, a journal, a ticket).
            if id.hasPrefix("GOCSPX-") {
                throw Self.invalid("\(Setting.clientIDs.variable) holds a client secret (GOCSPX-...), not a client ID: remove it, and treat the secret as leaked")
            }
            guard Self.isClientID(id) else {
                let shown = id.utf8.count <= 120 && id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) ? "'\(id)'" : "a value of \(id.utf8.count) bytes"
                throw Self.invalid("\(Setting.clientIDs.variable) has \(shown), which is not an OAuth client ID (<digits>-<letters and digits>.apps.googleusercontent.com)")
            }
        }

        // TOKENSIGNIN_JWKS_URL
        jwksURL = value(.jwksURL) ?? KeySource.googleURL
        guard KeySource.urlProblem(jwksURL) == nil else {
            throw Self.invalid("\(Setting.jwksURL.variable) must be an https:// URL (or http:// on 127.0.0.1, [::1] or localhost), got '\(jwksURL)'")
        }

        // TOKENSIGNIN_JWKS_FILE
        jwksFile = value(.jwksFile)

        // TOKENSIGNIN_KEY_WAIT
        if let text = value(.keyWait) {
            guard let milliseconds = Self.parseMilliseconds(text), milliseconds <= 10_000 else {
                throw Self.invalid("\(Setting.keyWait.variable) must be a duration from 0 to 10s (e.g. 1s, 250ms), got '\(text)'")
            }
            keyWait = milliseconds
        } else {
            keyWait = Self.defaultKeyWait
        }

        // TOKENSIGNIN_LISTEN (the FastCGI module parses the address) and TOKENSIGNIN_ALLOW_REMOTE_LISTEN
        listen = value(.listen)
        if let listen, !listen.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) {
            throw Self.invalid("\(Setting.listen.variable) must be a unix socket path or host:port without spaces, got '\(listen)'")
        }
        allowRemoteListen = try Self.boolean(value(.allowRemoteListen), .allowRemoteListen) ?? false
        if let listen {
            let address: Listen
            do {
                address = try Listen.parse(listen)
            } catch {
                throw Self.invalid("\(Setting.listen.variable): \(error.detail)")
            }
            // FastCGI has no authentication: whoever reaches the socket can claim any client address or header.
            if case .tcp(let host, _) = address, !Self.isLoopbackHost(host), !allowRemoteListen {
                throw Self.invalid("\(Setting.listen.variable) is \(listen), which is not a loopback address: anyone who can reach it bypasses nginx (FastCGI has no authentication); use a unix socket or 127.0.0.1, or set \(Setting.allowRemoteListen.variable)=true if a firewall keeps it private")
            }
        }

        // TOKENSIGNIN_WORKERS
        workers = try Self.count(value(.workers), .workers, in: 1...1024, "a positive integer")
            ?? Self.defaultWorkers(processorCount: processorCount)

        // TOKENSIGNIN_CHECK_WORKERS
        checkWorkers = try Self.count(value(.checkWorkers), .checkWorkers, in: 1...1024, "a positive integer")
            ?? Self.defaultWorkers(processorCount: processorCount)

        // TOKENSIGNIN_WORKER_SCHEDULING
        workerScheduling = try Self.choice(value(.workerScheduling), .workerScheduling, "adaptive, inherit, normal or batch") ?? .adaptive

        // TOKENSIGNIN_SIGNIN_BATCH
        signInBatch = try Self.count(value(.signInBatch), .signInBatch, in: 1...64, "a whole number") ?? Self.defaultSignInBatch

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
        secrets = (databaseURL.map(Self.passwords(inURL:)) ?? []) + [environment["PGPASSWORD"]].compactMap { $0 }.filter { !$0.isEmpty }
        if let url = databaseURL {
            do {
                try Connection.validate(conninfo: url)
            } catch {
                let message = secrets.reduce(error.detail) { $0.replacing($1, with: "***") }
                throw Self.invalid("\(Setting.databaseURL.variable) is not a URL libpq accepts: \(message)")
            }
        }

        // TOKENSIGNIN_DATABASE_POOLER
        databasePooler = try Self.choice(value(.databasePooler), .databasePooler, "none or transaction") ?? .none

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
        if let text = value(.siteOrigins) { siteOrigins = try Self.origins(text, .siteOrigins) } else { siteOrigins = [] }

        // TOKENSIGNIN_SIGNIN_REDIRECT
        signInRedirect = value(.signInRedirect) ?? "/"
        guard Self.isAcceptableRedirect(signInRedirect, siteOrigins: siteOrigins) else {
            throw Self.invalid("\(Setting.signInRedirect.variable) must be a path starting with a single '/' or an https URL on one of \(Setting.siteOrigins.variable), got '\(signInRedirect)'")
        }

        // TOKENSIGNIN_WEB_FORM_ORIGINS
        // Replaces Google's origin: a development stand-in (scripts/local-run) is the only other page to allow.
        if let text = value(.webFormOrigins) {
            webFormOrigins = try Self.origins(text, .webFormOrigins)
        } else {
            webFormOrigins = [OriginCheck.google]
        }

        // TOKENSIGNIN_SQL_DIR
        sqlDirectory = value(.sqlDirectory) ?? "sql"

        // TOKENSIGNIN_MAX_SESSIONS_PER_USER
        maxSessionsPerUser = try Self.count(value(.maxSessionsPerUser), .maxSessionsPerUser, in: 1...10_000, "a whole number")
            ?? Self.defaultMaxSessionsPerUser
    }

    // MARK: Defaults

    public static let defaultCookieName = "__Host-tokensignin"
    public static let defaultSessionTTL: Int64 = 30 * 86_400
    public static let defaultSessionIdleTTL: Int64 = 7 * 86_400
    public static let defaultMaxSessionsPerUser = 100
    public static let defaultSignInBatch = 16
    public static let defaultRequestTimeout: Int64 = 10
    /// Milliseconds (docs/keys.md: a cold start answers 503 after this rather than holding the sign-in).
    public static let defaultKeyWait: Int64 = 1_000

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
    /// Whole milliseconds from `250ms`, `1s` or `0`, or nil.
    static func parseMilliseconds(_ text: some StringProtocol) -> Int64? {
        var digits = Substring(text)
        var unit: Int64 = 1_000
        if digits.hasSuffix("ms") {
            unit = 1; digits = digits.dropLast(2)
        } else if digits.hasSuffix("s") {
            digits = digits.dropLast()
        } else if digits != "0" {
            return nil
        }
        guard digits.utf8.count <= 6, let number = decimal(digits) else { return nil }
        return number * unit
    }

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
        case keyWait = "KEY_WAIT"
        case listen = "LISTEN"
        case workers = "WORKERS"
        case checkWorkers = "CHECK_WORKERS"
        case workerScheduling = "WORKER_SCHEDULING"
        case signInBatch = "SIGNIN_BATCH"
        case requestTimeout = "REQUEST_TIMEOUT"
        case hostedDomains = "HOSTED_DOMAINS"
        case clockSkew = "CLOCK_SKEW"
        case databaseURL = "DATABASE_URL"
        case databasePooler = "DATABASE_POOLER"
        case sessionTTL = "SESSION_TTL"
        case sessionIdleTTL = "SESSION_IDLE_TTL"
        case cookieName = "COOKIE_NAME"
        case siteOrigins = "SITE_ORIGINS"
        case signInRedirect = "SIGNIN_REDIRECT"
        case webFormOrigins = "WEB_FORM_ORIGINS"
        case maxSessionsPerUser = "MAX_SESSIONS_PER_USER"
        case sqlDirectory = "SQL_DIR"
        case allowRemoteListen = "ALLOW_REMOTE_LISTEN"

        /// The environment variable, e.g. `TOKENSIGNIN_CLIENT_IDS`.
        public var variable: String { "TOKENSIGNIN_" + rawValue }
        /// The flag, the variable in kebab case without the prefix, e.g. `--client-ids`.
        public var flag: String { "--" + rawValue.lowercased().replacing("_", with: "-") }

        /// One line for `usage`: default and meaning.
        public var help: String {
            switch self {
            case .clientIDs: "required; comma-separated OAuth client IDs accepted as audience"
            case .jwksURL: "Google's key set URL (default \(KeySource.googleURL))"
            case .jwksFile: "a local JWKS file used instead of the URL (default: unset)"
            case .keyWait: "longest a sign-in waits for keys not yet loaded, 0...10s (default 1s)"
            case .listen: "unix socket path or host:port (default: the socket inherited as fd 0)"
            case .workers: "sign-ins and the rest running at once, 1...1024 (default: 2 per core)"
            case .checkWorkers: "session checks and health running at once, 1...1024 (default: 2 per core)"
            case .workerScheduling: "adaptive (SCHED_BATCH while reading sign-ins, SCHED_OTHER otherwise), inherit (the policy the process started with), normal, or batch: waking workers do not preempt nginx or PostgreSQL (default adaptive)"
            case .signInBatch: "sign-ins opened together in one database round trip at most, 1...64; 1: each alone, lower latency at moderate load, more CPU per sign-in (default 16)"
            case .requestTimeout: "longest a FastCGI request may take to arrive, 1s...300s (default 10s)"
            case .hostedDomains: "comma-separated Workspace domains allowed (default: any account)"
            case .clockSkew: "seconds of clock tolerance, 0...600 (default 60)"
            case .databaseURL: "postgresql:// URL (default: libpq's PG* variables)"
            case .databasePooler: "none, or transaction behind PgBouncer's pool_mode = transaction (default none)"
            case .sessionTTL: "absolute session lifetime, e.g. 30d, 12h, 90 (default 30d)"
            case .sessionIdleTTL: "idle session lifetime, at most SESSION_TTL (default 7d)"
            case .cookieName: "session cookie name (default \(Configuration.defaultCookieName))"
            case .siteOrigins: "comma-separated origins of the site, e.g. https://example.com (default: none)"
            case .signInRedirect: "303 target of the web form flow: /path or https URL on a site origin (default /)"
            case .webFormOrigins: "comma-separated origins that may post the web form (default \(OriginCheck.google))"
            case .maxSessionsPerUser: "sessions per user; a sign-in beyond revokes the least recently used (default 100)"
            case .sqlDirectory: "migration files for `tokensignin migrate` (default ./sql)"
            case .allowRemoteListen: "true to let LISTEN be a TCP address other than loopback (default false)"
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
    static func parseFlags(_ arguments: [String]) throws(CommandError) -> [(Setting, String)] {
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

    /// `message` with every secret replaced by `***`.
    public func redacted(_ message: String) -> String {
        secrets.reduce(message) { $0.replacing($1, with: "***") }
    }

    /// The password of `scheme://user:password@host...`, as written and percent-decoded.
    static func passwords(inURL url: String) -> [String] {
        guard let start = url.firstRange(of: "://")?.upperBound else { return [] }
        let authority = url[start...].prefix { $0 != "/" && $0 != "?" }
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else { return [] }
        let raw = String(authority[authority.index(after: colon)..<at])
        guard !raw.isEmpty else { return [] }
        let decoded = (try? FormURLEncoded.unescape(ArraySlice(raw.utf8), plusIsSpace: false)) ?? raw
        return decoded == raw ? [raw] : [raw, decoded]
    }

    // MARK: Validation helpers

    /// `<digits>-<lower-case letters and digits>.apps.googleusercontent.com`, the shape of every OAuth client ID
    /// Google issues (web, iOS, Android).
    static func isClientID(_ id: String) -> Bool {
        let suffix = ".apps.googleusercontent.com"
        guard id.hasSuffix(suffix), id.utf8.count <= 255 else { return false }
        let stem = id.utf8.dropLast(suffix.utf8.count)
        guard let dash = stem.firstIndex(of: UInt8(ascii: "-")) else { return false }
        let number = stem[..<dash], name = stem[stem.index(after: dash)...]
        return !number.isEmpty && number.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
            && !name.isEmpty && name.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7a) }
    }

    /// 127.0.0.0/8, ::1 and localhost.
    static func isLoopbackHost(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.") && host.split(separator: ".").count == 4
    }

    /// One of an enumeration's raw values, spelt exactly (`allowed` names them for the error); nil when unset.
    static func choice<Value: RawRepresentable>(_ text: String?, _ setting: Setting, _ allowed: String) throws(CommandError) -> Value?
        where Value.RawValue == String {
        guard let text else { return nil }
        guard let value = Value(rawValue: text) else { throw invalid("\(setting.variable) must be \(allowed), got '\(text)'") }
        return value
    }

    /// `true`/`false` (also `yes`/`no`, `1`/`0`), nil when unset.
    static func boolean(_ text: String?, _ setting: Setting) throws(CommandError) -> Bool? {
        guard let text else { return nil }
        switch text.lowercased() {
        case "true", "yes", "1": return true
        case "false", "no", "0": return false
        default: throw invalid("\(setting.variable) must be true or false, got '\(text)'")
        }
    }

    /// The known setting whose variable is nearest `name` (at most two edits away), for a misspelt variable.
    static func closestSetting(to name: String) -> Setting? {
        let wanted = Array(name.utf8)
        func distance(_ other: [UInt8]) -> Int {
            var previous = Array(0...other.count)
            for (i, a) in wanted.enumerated() {
                var current = [i + 1]
                for (j, b) in other.enumerated() {
                    current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (a == b ? 0 : 1)))
                }
                previous = current
            }
            return previous[other.count]
        }
        guard wanted.count <= 64 else { return nil }
        let (best, edits) = Setting.allCases.map { ($0, distance(Array($0.variable.utf8))) }.min { $0.1 < $1.1 }!
        return edits <= 2 ? best : nil
    }

    static func invalid(_ message: String) -> CommandError { CommandError(.invalidConfiguration, message) }

    /// Only ASCII digits (no sign, no spaces), at most 18 of them so the value fits in Int64.
    /// A count within `range` (decimal digits only), nil when unset; `kind` names it in the message.
    static func count(_ text: String?, _ setting: Setting, in range: ClosedRange<Int64>, _ kind: String) throws(CommandError) -> Int? {
        guard let text else { return nil }
        guard let number = decimal(text), range.contains(number) else {
            throw invalid("\(setting.variable) must be \(kind) (\(range.lowerBound)...\(range.upperBound)), got '\(text)'")
        }
        return Int(number)
    }

    static func decimal(_ text: some StringProtocol) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(text)
    }

    /// A comma-separated list of origins, each `https` or `http` on a loopback host.
    static func origins(_ text: String, _ setting: Setting) throws(CommandError) -> [Origin] {
        var origins: [Origin] = []
        for item in try list(text, setting) {
            guard let origin = Origin(parsing: item) else {
                throw invalid("\(setting.variable) has a malformed origin (want scheme://host[:port], no path): '\(item)'")
            }
            guard origin.scheme == "https" || origin.isLoopback else {
                throw invalid("\(setting.variable) has an http origin that is not loopback (use https): '\(item)'")
            }
            origins.append(origin)
        }
        return origins
    }

    /// A comma-separated list, items trimmed; an empty item is an error naming the setting.
    static func list(_ text: String, _ setting: Setting) throws(CommandError) -> [String] {
        let items = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingASCIIWhitespace() }
        guard !items.contains(where: \.isEmpty) else {
            throw invalid("\(setting.variable) has an empty entry in '\(text)'")
        }
        return items
    }

    static func duration(_ text: String?, _ setting: Setting) throws(CommandError) -> Int64? {
        guard let text else { return nil }
        guard let seconds = parseDuration(text) else {
            throw invalid("\(setting.variable) must be a positive duration like 90, 90s, 15m, 12h or 30d (at most 3650d), got '\(text)'")
        }
        return seconds
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

extension PostgresStore {
    /// The store the service's settings describe; by default it records them in `signin.service_settings`, as the
    /// responder's do (an operator command's must not).
    convenience init(_ configuration: Configuration, log: Log, metrics: Metrics? = nil, recordsSettings: Bool = true) {
        self.init(conninfo: configuration.conninfo, pooler: configuration.databasePooler, policy: configuration.sessionPolicy,
                  log: log, redact: { [configuration] in configuration.redacted($0) },
                  onReconnect: metrics.map { metrics in { @Sendable in metrics.reconnect() } }, recordsSettings: recordsSettings)
    }
}
