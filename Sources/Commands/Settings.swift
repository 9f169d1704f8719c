// The settings table: every TOKENSIGNIN_* setting once, with its flag, default, help line and parser
// (docs/configuration.md).
import FastCGI
import GoogleKeys
import Sessions
import SignIn
import enum Store.Pooler
import struct Store.StoreError

/// One configurable setting. The cases are the contract's names, in the order `--help` lists them; `entry` is the
/// row of the table that says everything else about one.
public enum Setting: String, CaseIterable, Sendable {
    case clientIDs = "CLIENT_IDS"
    case jwksURL = "JWKS_URL"
    case jwksFile = "JWKS_FILE"
    case keyWait = "KEY_WAIT"
    case riscAudiences = "RISC_AUDIENCES"
    case riscConfigurationURL = "RISC_CONFIGURATION_URL"
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
    case allowNonGoogleKeys = "ALLOW_NON_GOOGLE_KEYS"
    case allowInsecureCookieName = "ALLOW_INSECURE_COOKIE_NAME"
    case sessionCache = "SESSION_CACHE"
    case sessionCacheSize = "SESSION_CACHE_SIZE"
    case sessionCacheDatabaseURL = "SESSION_CACHE_DATABASE_URL"

    /// The environment variable, e.g. `TOKENSIGNIN_CLIENT_IDS`.
    public var variable: String { "TOKENSIGNIN_" + rawValue }
    /// The flag, the variable in kebab case without the prefix, e.g. `--client-ids`.
    public var flag: String { "--" + rawValue.lowercased().replacing("_", with: "-") }

    /// One row of the table: the default as the text the parser reads (nil: none, or one that depends on other
    /// settings, which `Configuration.init` derives), the help line, and the parser that stores the typed value.
    struct Entry {
        let defaultText: String?
        let help: String
        let parse: (_ text: String, _ into: inout Configuration) throws(CommandError) -> Void
    }

    /// The table.
    var entry: Entry {
        switch self {
        case .clientIDs:
            Entry(defaultText: nil, help: "required; comma-separated OAuth client IDs accepted as audience") { text, c throws(CommandError) in
                c.clientIDs = try clientIDs(text)
            }
        case .jwksURL:
            Entry(defaultText: KeySource.googleURL, help: "Google's key set URL") { text, c throws(CommandError) in
                guard KeySource.urlProblem(text) == nil else {
                    throw invalid("\(variable) must be an https:// URL (or http:// on 127.0.0.1, [::1] or localhost), got '\(text)'")
                }
                c.jwksURL = text
            }
        case .jwksFile:
            Entry(defaultText: nil, help: "a local JWKS file used instead of the URL (default: unset)") { text, c in c.jwksFile = text }
        case .riscAudiences:
            // Its default, the client IDs, and the rule that it holds them all: `Configuration.init`.
            Entry(defaultText: nil, help: "comma-separated OAuth client IDs whose security events POST /risc accepts: every client ID, and clients of the project that do not sign in here (default: CLIENT_IDS)") { text, c throws(CommandError) in
                c.riscAudiences = try clientIDs(text)
            }
        case .riscConfigurationURL:
            Entry(defaultText: RiscConfigurationSource.googleURL, help: "Google's RISC configuration, read at start and daily for its issuer and jwks_uri; off: not read") { text, c throws(CommandError) in
                if text == "off" {
                    c.riscConfiguration = .off
                    return
                }
                guard KeySource.urlProblem(text) == nil else {
                    throw invalid("\(variable) must be an https:// URL (or http:// on 127.0.0.1, [::1] or localhost) or off, got '\(text)'")
                }
                c.riscConfiguration = .url(text)
            }
        case .keyWait:
            Entry(defaultText: "1s", help: "longest a sign-in waits for keys not yet loaded, 0...10s") { text, c throws(CommandError) in
                c.keyWait = .milliseconds(try duration(text, SettingText.milliseconds, atMost: 10_000, "a duration from 0 to 10s (e.g. 1s, 250ms)"))
            }
        case .listen:
            Entry(defaultText: nil, help: "unix socket path or host:port (default: the socket inherited as fd 0, or fd 3 from systemd)") { text, c throws(CommandError) in
                guard text.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else {
                    throw invalid("\(variable) must be a unix socket path or host:port without spaces, got '\(text)'")
                }
                do throws(FastCGIError) {
                    c.listen = try Listen.parse(text)
                } catch {
                    throw invalid("\(variable): \(error.detail)")
                }
            }
        case .workers:
            Entry(defaultText: nil, help: "sign-ins and the rest running at once, 1...1024 (default: 2 per core)") { text, c throws(CommandError) in
                c.workers = try count(text, in: 1...1024, "a positive integer")
            }
        case .checkWorkers:
            Entry(defaultText: nil, help: "session checks and health running at once, 1...1024 (default: 2 per core)") { text, c throws(CommandError) in
                c.checkWorkers = try count(text, in: 1...1024, "a positive integer")
            }
        case .workerScheduling:
            Entry(defaultText: "adaptive", help: "adaptive (SCHED_BATCH while reading sign-ins, SCHED_OTHER otherwise), inherit (the policy the process started with), normal, or batch: waking workers do not preempt nginx or PostgreSQL") { text, c throws(CommandError) in
                c.workerScheduling = try choice(text, "adaptive, inherit, normal or batch")
            }
        case .signInBatch:
            Entry(defaultText: "16", help: "sign-ins opened together in one database round trip at most, 1...64; 1: each alone, lower latency at moderate load, more CPU per sign-in") { text, c throws(CommandError) in
                c.signInBatch = try count(text, in: 1...64, "a whole number")
            }
        case .requestTimeout:
            Entry(defaultText: "10s", help: "longest a FastCGI request may take to arrive, 1s...300s") { text, c throws(CommandError) in
                c.requestTimeout = .seconds(try duration(text, SettingText.seconds, atMost: 300, "a duration from 1s to 300s (e.g. 10s)"))
            }
        case .hostedDomains:
            Entry(defaultText: nil, help: "comma-separated Workspace domains allowed (default: any account)") { text, c throws(CommandError) in
                c.hostedDomains = try list(text).map { $0.lowercased() }
                for domain in c.hostedDomains where !SettingText.isDomainName(domain) {
                    throw invalid("\(variable) has a malformed domain: '\(domain)'")
                }
            }
        case .clockSkew:
            Entry(defaultText: "60", help: "seconds of clock tolerance, 0...600") { text, c throws(CommandError) in
                guard let seconds = SettingText.decimal(text), (0...600).contains(seconds) else {
                    throw invalid("\(variable) must be a whole number of seconds (0...600), got '\(text)'")
                }
                c.clockSkew = .seconds(seconds)
            }
        case .databaseURL:
            // Never echoed: it may carry a password.
            Entry(defaultText: nil, help: "postgresql:// URL (default: libpq's PG* variables)") { text, c throws(CommandError) in
                c.databaseURL = try databaseURL(text, &c)
            }
        case .databasePooler:
            Entry(defaultText: "none", help: "none, or transaction behind PgBouncer's pool_mode = transaction") { text, c throws(CommandError) in
                c.databasePooler = try choice(text, "none or transaction")
            }
        case .sessionTTL:
            Entry(defaultText: "30d", help: "absolute session lifetime, e.g. 30d, 12h, 90") { text, c throws(CommandError) in
                c.sessionTTL = try duration(text)
            }
        case .sessionIdleTTL:
            Entry(defaultText: nil, help: "idle session lifetime, at most SESSION_TTL (default 7d)") { text, c throws(CommandError) in
                c.sessionIdleTTL = try duration(text)
            }
        case .cookieName:
            Entry(defaultText: Configuration.defaultCookieName, help: "session cookie name") { text, c throws(CommandError) in
                guard Cookies.isCookieName(text) else {
                    throw invalid("\(variable) must be a token (letters, digits and !#$%&'*+-.^_`|~), got '\(text)'")
                }
                c.cookieName = text
            }
        case .siteOrigins:
            Entry(defaultText: nil, help: "comma-separated origins of the site, e.g. https://example.com (default: none)") { text, c throws(CommandError) in
                c.siteOrigins = try origins(text)
            }
        case .signInRedirect:
            // Checked against the site origins once both are read (`Configuration.init`).
            Entry(defaultText: "/", help: "303 target of the web form flow: /path or https URL on a site origin") { text, c in
                c.signInRedirect = text
            }
        case .webFormOrigins:
            // Replaces Google's origin: a development stand-in (scripts/local-run) is the only other page to allow.
            Entry(defaultText: OriginCheck.google.description, help: "comma-separated origins that may post the web form") { text, c throws(CommandError) in
                c.webFormOrigins = try origins(text)
            }
        case .maxSessionsPerUser:
            Entry(defaultText: "100", help: "sessions per user; a sign-in beyond revokes the least recently used") { text, c throws(CommandError) in
                c.maxSessionsPerUser = try count(text, in: 1...10_000, "a whole number")
            }
        case .sqlDirectory:
            Entry(defaultText: "sql", help: "migration files for `tokensignin migrate`") { text, c in c.sqlDirectory = text }
        case .allowRemoteListen:
            Entry(defaultText: "false", help: "true to let LISTEN be a TCP address other than loopback") { text, c throws(CommandError) in
                c.allowRemoteListen = try boolean(text)
            }
        case .allowNonGoogleKeys:
            Entry(defaultText: "false", help: "1 to trust a key set that is not Google's (JWKS_FILE, another JWKS_URL): development and tests only") { text, c throws(CommandError) in
                c.allowNonGoogleKeys = try boolean(text)
            }
        case .allowInsecureCookieName:
            Entry(defaultText: "false", help: "1 to let COOKIE_NAME go without the __Host- prefix (a sibling subdomain could then set or shadow the cookie)") { text, c throws(CommandError) in
                c.allowInsecureCookieName = try boolean(text)
            }
        case .sessionCache:
            Entry(defaultText: "on", help: "on: session checks answered from memory, kept true by PostgreSQL's notifications (docs/database.md); off: every check asks PostgreSQL") { text, c throws(CommandError) in
                guard text == "on" || text == "off" else { throw invalid("\(variable) must be on or off, got '\(text)'") }
                c.sessionCache = text == "on"
            }
        case .sessionCacheSize:
            Entry(defaultText: "100000", help: "sessions the cache holds at most, least recently used out, 1...10000000") { text, c throws(CommandError) in
                c.sessionCacheSize = try count(text, in: 1...10_000_000, "a whole number")
            }
        case .sessionCacheDatabaseURL:
            Entry(defaultText: nil, help: "postgresql:// URL of a direct connection for the cache's LISTEN, never a transaction pooler's (default: DATABASE_URL; needed with DATABASE_POOLER=transaction)") { text, c throws(CommandError) in
                c.sessionCacheDatabaseURL = try databaseURL(text, &c)
            }
        }
    }

    /// One line for `--help`: the names, the meaning and the default.
    var usageLine: String {
        let names = "\(variable), \(flag)"
        let padded = names.count >= 52 ? names + " " : names + String(repeating: " ", count: 52 - names.count)
        return "  " + padded + entry.help + (entry.defaultText.map { " (default \($0))" } ?? "")
    }

    // MARK: the parsers the rows share, each naming this setting in its message

    func invalid(_ message: String) -> CommandError { CommandError(.invalidConfiguration, message) }

    /// A count within `range` (decimal digits only); `kind` names it in the message.
    private func count(_ text: String, in range: ClosedRange<Int64>, _ kind: String) throws(CommandError) -> Int {
        guard let number = SettingText.decimal(text), range.contains(number) else {
            throw invalid("\(variable) must be \(kind) (\(range.lowerBound)...\(range.upperBound)), got '\(text)'")
        }
        return Int(number)
    }

    /// One of an enumeration's raw values, spelt exactly (`allowed` names them for the error).
    private func choice<Value: RawRepresentable>(_ text: String, _ allowed: String) throws(CommandError) -> Value
        where Value.RawValue == String {
        guard let value = Value(rawValue: text) else { throw invalid("\(variable) must be \(allowed), got '\(text)'") }
        return value
    }

    private func boolean(_ text: String) throws(CommandError) -> Bool {
        guard let value = SettingText.boolean(text) else { throw invalid("\(variable) must be true or false, got '\(text)'") }
        return value
    }

    /// A session duration: 90, 90s, 15m, 12h or 30d, up to `SettingText.maxDurationSeconds`.
    private func duration(_ text: String) throws(CommandError) -> Duration {
        .seconds(try duration(text, SettingText.seconds, atMost: SettingText.maxDurationSeconds,
                              "a positive duration like 90, 90s, 15m, 12h or 30d (at most 3650d)"))
    }

    /// A duration as `read` gives it (in its unit), at most `limit` of that unit; `form` says what is accepted.
    private func duration(_ text: String, _ read: (String) -> Int64?, atMost limit: Int64, _ form: String)
        throws(CommandError) -> Int64 {
        guard let value = read(text), value <= limit else { throw invalid("\(variable) must be \(form), got '\(text)'") }
        return value
    }

    /// A `postgresql://` URL libpq accepts. Its passwords join `c.secrets` before libpq sees it (libpq echoes a
    /// malformed URL whole), so no message repeats them.
    private func databaseURL(_ text: String, _ c: inout Configuration) throws(CommandError) -> String {
        guard text.hasPrefix("postgresql://") || text.hasPrefix("postgres://") else {
            throw invalid("\(variable) must start with postgresql:// or postgres://")
        }
        c.secrets = SettingText.passwords(inURL: text) + c.secrets
        do throws(StoreError) {
            try Database.validate(conninfo: text)
        } catch {
            throw invalid("\(variable) is not a URL libpq accepts: \(c.redacted(error.detail))")
        }
        return text
    }

    /// A comma-separated list of OAuth client IDs.
    private func clientIDs(_ text: String) throws(CommandError) -> [String] {
        let ids = try list(text)
        for id in ids {
            // A client secret pasted here must not be printed back (into a terminal, a journal, a ticket).
            if id.hasPrefix("GOCSPX-") {
                throw invalid("\(variable) holds a client secret (GOCSPX-...), not a client ID: remove it, and treat the secret as leaked")
            }
            guard SettingText.isClientID(id) else {
                let shown = id.utf8.count <= 120 && id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) ? "'\(id)'" : "a value of \(id.utf8.count) bytes"
                throw invalid("\(variable) has \(shown), which is not an OAuth client ID (<digits>-<letters and digits>.apps.googleusercontent.com)")
            }
        }
        return ids
    }

    private func list(_ text: String) throws(CommandError) -> [String] {
        guard let items = SettingText.list(text) else { throw invalid("\(variable) has an empty entry in '\(text)'") }
        return items
    }

    /// A comma-separated list of origins, each `https` or `http` on a loopback host.
    private func origins(_ text: String) throws(CommandError) -> [Origin] {
        var origins: [Origin] = []
        for item in try list(text) {
            guard let origin = Origin(parsing: item) else {
                throw invalid("\(variable) has a malformed origin (want scheme://host[:port], no path): '\(item)'")
            }
            guard origin.scheme == "https" || origin.isLoopback else {
                throw invalid("\(variable) has an http origin that is not loopback (use https): '\(item)'")
            }
            origins.append(origin)
        }
        return origins
    }
}
