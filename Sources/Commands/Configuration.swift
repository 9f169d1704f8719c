// The service's configuration: the settings table read from TOKENSIGNIN_* variables and flags, into typed values.
import FastCGI
import GoogleKeys
import IDToken
import Logging
import Sessions
import SignIn
import enum Store.Pooler

/// Everything `tokensignin serve` and the commands need to know, validated once at start-up and stored typed.
///
/// Built from the environment plus command-line flags (`Setting`, one row each); a flag overrides its variable. An
/// empty value (`TOKENSIGNIN_LISTEN=` in a systemd `EnvironmentFile`, or `--listen=`) counts as unset, so a flag can
/// also reset a variable to its default. Every missing or malformed setting throws a `CommandError`
/// (`.invalidConfiguration`) whose message names the variable.
public struct Configuration: Sendable, Equatable {
    /// OAuth client IDs accepted as the token's audience (web, iOS, Android). Never empty when required.
    public var clientIDs: [String] = []
    /// Where Google's key set is fetched from (https, or http on a loopback host for tests).
    public var jwksURL = KeySource.googleURL
    /// A local key set file used instead of `jwksURL` when set.
    public var jwksFile: String?
    /// OAuth client IDs whose security event tokens `POST /risc` accepts as their audience: every one of `clientIDs`,
    /// and clients of the same Google Cloud project that do not sign in here. Default: `clientIDs`.
    public var riscAudiences: [String] = []
    /// Where Google's RISC configuration is read (its issuer and jwks_uri, compared with what the receiver uses).
    public var riscConfiguration: RiscConfigurationSource = .google
    /// The longest a sign-in waits for Google's keys when none are loaded yet (0...10 s); never waited on while
    /// usable keys exist.
    public var keyWait: Duration = .zero
    /// Where to accept FastCGI connections (`.inherited`: the socket systemd or spawn-fcgi passed).
    public var listen: Listen = .inherited
    /// Default-lane requests (sign-ins and everything that is not a check) running at once (1...1024).
    public var workers = 0
    /// Checks-lane requests (`/auth/session`, `/healthz`, `/readyz`, `/metrics`) running at once (1...1024).
    public var checkWorkers = 0
    /// How the worker threads are scheduled (docs/fastcgi.md, "Worker scheduling").
    public var workerScheduling: WorkerScheduling = .adaptive
    /// Sign-ins one worker may verify and open together, in one database round trip (1...64).
    public var signInBatch = 0
    /// The longest a FastCGI request may take to arrive, first byte to last (1...300 s).
    public var requestTimeout: Duration = .zero
    /// Google Workspace domains (`hd` claim) allowed to sign in, lower-cased; empty means any account.
    public var hostedDomains: [String] = []
    /// Tolerance for `iat`/`exp` checks (0...600 s).
    public var clockSkew: Duration = .zero
    /// A libpq connection URL or nil to use libpq's `PG*` environment variables.
    public var databaseURL: String?
    /// What the database settings point at: PostgreSQL (`none`) or a transaction pooler such as PgBouncer.
    public var databasePooler: Pooler = .none
    /// Absolute session lifetime.
    public var sessionTTL: Duration = .zero
    /// Idle session lifetime; never more than `sessionTTL`.
    public var sessionIdleTTL: Duration = .zero
    /// Name of the session cookie (an RFC 9110 token).
    public var cookieName = ""
    /// Origins of the site's own pages, for the Origin check on cookie-authenticated state changes.
    public var siteOrigins: [Origin] = []
    /// Where the web form flow answers `303 See Other`: a local path or an https URL on a site origin.
    public var signInRedirect = ""
    /// Pages that may post the Sign in with Google web form cross-site (Google's; a stand-in in development).
    public var webFormOrigins: [Origin] = []
    /// Live sessions one user may hold; the least recently used beyond it are revoked at sign-in (1...10000).
    public var maxSessionsPerUser = 0
    /// The folder of migration files `tokensignin migrate` applies.
    public var sqlDirectory = ""
    /// Whether `listen` may be a TCP address other than loopback (off: FastCGI has no authentication).
    public var allowRemoteListen = false
    /// Whether a key set that is not Google's may be trusted (`keySource`); development and tests only.
    public var allowNonGoogleKeys = false
    /// Whether `cookieName` may lack the `__Host-` prefix.
    public var allowInsecureCookieName = false
    /// Whether session checks are answered from memory (`SessionCache`).
    public var sessionCache = true
    /// The most sessions the cache holds.
    public var sessionCacheSize = 0
    /// A direct connection for the cache's LISTEN; nil: `databaseURL` (or libpq's PG* variables).
    public var sessionCacheDatabaseURL: String?
    /// Database passwords (from `TOKENSIGNIN_DATABASE_URL` and `PGPASSWORD`) that no message may repeat: libpq echoes
    /// a malformed URL whole.
    public var secrets: [String] = []

    public static let defaultCookieName = "__Host-tokensignin"
    /// The idle lifetime when none is set (never beyond the absolute one).
    static let defaultSessionIdleTTL: Duration = .seconds(7 * 86_400)
    /// The body cap handed to the FastCGI server (fixed; nginx should cap lower with `client_max_body_size`).
    public static let maxBodyBytes = 64 * 1024

    /// Two workers per core (they mostly wait on PostgreSQL), within 1...1024.
    public static func defaultWorkers(processorCount: Int) -> Int {
        min(max(processorCount, 1), 512) * 2
    }

    /// Reads and validates every setting of the table.
    /// - Parameters:
    ///   - environment: the process environment (`TOKENSIGNIN_*` keys, and `PGPASSWORD` to keep it out of messages).
    ///   - arguments: flags after the subcommand, `--name value` or `--name=value` (see `Setting.flag`).
    ///   - processorCount: the machine's cores, for the default worker counts.
    ///   - requireClientIDs: false for the commands that never verify a token (migrate, sessions, prune).
    public init(environment: [String: String], arguments: [String] = [], processorCount: Int,
                requireClientIDs: Bool = true) throws(CommandError) {
        // A misspelt setting would silently take its default: every TOKENSIGNIN_ variable must be one we know.
        let known = Setting.allCases.map(\.variable)
        if let unknown = environment.keys.filter({ $0.hasPrefix("TOKENSIGNIN_") && !known.contains($0) }).sorted().first {
            let hint = SettingText.closest(to: unknown, among: known).map { " (did you mean \($0)?)" } ?? ""
            throw CommandError(.invalidConfiguration, "\(unknown) is not a setting\(hint); `tokensignin serve --help` lists them")
        }
        let flags = try Arguments(arguments, options: Dictionary(uniqueKeysWithValues: Setting.allCases.map { ($0.flag, .value) }))
        if let stray = flags.positionals.first { throw CommandError(.invalidConfiguration, "unknown option '\(stray)'") }
        secrets = Self.secrets(in: environment.filter { $0.key == "PGPASSWORD" })

        var unset: Set<Setting> = []
        for setting in Setting.allCases {
            // The flag wins; empty means unset, whatever its source.
            let given = (flags.value(setting.flag) ?? environment[setting.variable])?.trimmingASCIIWhitespace()
            if let text = given.flatMap({ $0.isEmpty ? nil : $0 }) ?? setting.entry.defaultText {
                try setting.entry.parse(text, &self)
            } else {
                unset.insert(setting)
            }
        }

        // The defaults that depend on something else, and the rules that tie settings together.
        if unset.contains(.clientIDs), requireClientIDs { throw CommandError(.invalidConfiguration, "\(Setting.clientIDs.variable) is required") }
        if unset.contains(.riscAudiences) {
            riscAudiences = clientIDs
        } else if let missing = clientIDs.first(where: { !riscAudiences.contains($0) }) {
            // A SET for a user who signs in here is addressed to that client: refusing it would lose it for good.
            throw CommandError(.invalidConfiguration, "\(Setting.riscAudiences.variable) must include every one of \(Setting.clientIDs.variable) (security events for their users would be refused and lost); it lacks \(missing)")
        }
        if unset.contains(.workers) { workers = Self.defaultWorkers(processorCount: processorCount) }
        if unset.contains(.checkWorkers) { checkWorkers = Self.defaultWorkers(processorCount: processorCount) }
        if unset.contains(.sessionIdleTTL) {
            // The default never exceeds a shorter explicit absolute lifetime.
            sessionIdleTTL = min(Self.defaultSessionIdleTTL, sessionTTL)
        } else if sessionIdleTTL > sessionTTL {
            throw CommandError(.invalidConfiguration,
                               "\(Setting.sessionIdleTTL.variable) (\(sessionIdleTTL.components.seconds)s) must not exceed \(Setting.sessionTTL.variable) (\(sessionTTL.components.seconds)s)")
        }
        // FastCGI has no authentication: whoever reaches the socket can claim any client address or header.
        if case .tcp(let host, _) = listen, !SettingText.isLoopbackHost(host), !allowRemoteListen {
            throw CommandError(.invalidConfiguration, "\(Setting.listen.variable) is \(listen), which is not a loopback address: anyone who can reach it bypasses nginx (FastCGI has no authentication); use a unix socket or 127.0.0.1, or set \(Setting.allowRemoteListen.variable)=true if a firewall keeps it private")
        }
        // `__Host-`: the browser then keeps the cookie to this host (no Domain), Secure, Path=/, so a sibling subdomain
        // can neither set it nor shadow it with one of its own.
        guard cookieName.hasPrefix("__Host-") || allowInsecureCookieName else {
            throw CommandError(.invalidConfiguration, "\(Setting.cookieName.variable) is '\(cookieName)', without the __Host- prefix: a sibling subdomain could set or shadow the session cookie. Name it __Host-..., or set \(Setting.allowInsecureCookieName.variable)=1")
        }
        guard SettingText.isAcceptableRedirect(signInRedirect, siteOrigins: siteOrigins) else {
            throw CommandError(.invalidConfiguration, "\(Setting.signInRedirect.variable) must be a path starting with a single '/' or an https URL on one of \(Setting.siteOrigins.variable), got '\(signInRedirect)'")
        }
    }

    /// Where the keys that tokens are verified with come from.
    package var keySource: KeySource { jwksFile.map { .file($0) } ?? .url(jwksURL) }

    /// Refuses a key source that is not Google's unless `TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS` says so: whoever holds
    /// the private key of a trusted key set can sign anyone in. `serve` and `verify` (its keys from the settings)
    /// call it before they trust any key.
    /// A RISC configuration other than Google's counts too: `/risc` trusts the key set its `jwks_uri` names.
    package func requireTrustedKeys() throws(CommandError) {
        guard !allowNonGoogleKeys else { return }
        if keySource != .google {
            let which = jwksFile.map { "\(Setting.jwksFile.variable) (\($0))" } ?? "\(Setting.jwksURL.variable) \(jwksURL)"
            throw CommandError(.invalidConfiguration, "\(which) is not Google's key set: tokens signed by its keys would sign anyone in. Unset it to use Google's keys, or set \(Setting.allowNonGoogleKeys.variable)=1 for development and tests")
        }
        if case .url(let url) = riscConfiguration, !riscConfiguration.isGoogle {
            throw CommandError(.invalidConfiguration, "\(Setting.riscConfigurationURL.variable) \(url) is not Google's: the security events signed by the keys it names would be trusted. Unset it, or set \(Setting.allowNonGoogleKeys.variable)=1 for development and tests")
        }
    }

    /// Refuses a key file that others than its owner may write (`fileMode`: its permission bits, nil when they cannot
    /// be read): whoever can write it can sign anyone in. `serve` and `verify` call it; `named` is what the operator
    /// gave the file as.
    package func requireUnwritableKeyFile(fileMode: (String) -> UInt32?,
                                          named name: String = Setting.jwksFile.variable) throws(CommandError) {
        guard let file = jwksFile, let mode = fileMode(file), mode & 0o022 != 0 else { return }
        throw CommandError(.invalidConfiguration, "\(name): \(file) is writable by other users (mode \(String(mode & 0o777, radix: 8))): whoever can write it can sign anyone in; chmod go-w it")
    }

    /// Every variable and flag, one per line, for `tokensignin serve --help`.
    public static var usage: String {
        (["Settings (environment variable, or the flag after it, which wins):"] + Setting.allCases.map(\.usageLine)
            + ["Durations: seconds (90) or a number with s, m, h or d (15m, 12h, 30d)."]).joined(separator: "\n")
    }

    // MARK: what the modules read of it

    /// The libpq conninfo string: the database URL, or "" to let libpq read `PG*` variables.
    public var conninfo: String { databaseURL ?? "" }

    /// The verification policy these settings describe.
    public var policy: Policy {
        Policy(clientIDs: clientIDs, hostedDomains: hostedDomains, clockSkew: clockSkew.components.seconds)
    }

    /// Session lifetimes and the per-user limit, as the store applies them.
    public var sessionPolicy: SessionPolicy {
        SessionPolicy(lifetime: sessionTTL.components.seconds, idleTimeout: sessionIdleTTL.components.seconds,
                      maxSessionsPerUser: maxSessionsPerUser)
    }

    /// What the HTTP application reads of these settings.
    package var site: Site {
        Site(policy: policy, cookieName: cookieName, sessionTTL: sessionTTL.components.seconds, signInRedirect: signInRedirect,
             originCheck: OriginCheck(siteOrigins: siteOrigins, webFormOrigins: webFormOrigins), riscAudiences: riscAudiences)
    }

    /// The database passwords of an environment: those of `TOKENSIGNIN_DATABASE_URL` and
    /// `TOKENSIGNIN_SESSION_CACHE_DATABASE_URL` (as written and percent-decoded), then `PGPASSWORD`. For a message
    /// written before the settings are read, or when they cannot be (`Commands.exit`).
    static func secrets(in environment: [String: String]) -> [String] {
        [Setting.databaseURL, .sessionCacheDatabaseURL].flatMap { environment[$0.variable].map(SettingText.passwords(inURL:)) ?? [] }
            + [environment["PGPASSWORD"]].compactMap { $0 }.filter { !$0.isEmpty }
    }

    /// Where the session cache listens, or nil when it cannot (a transaction pooler in front, no direct URL given):
    /// LISTEN belongs to one server session, which a transaction pooler hands to another client after each statement.
    package var sessionCacheConninfo: String? {
        if let url = sessionCacheDatabaseURL { return url }
        return databasePooler == .none ? conninfo : nil
    }

    /// `message` with every secret replaced by `***`: the one redaction of what libpq or a command may echo.
    public func redacted(_ message: String) -> String { Self.redacted(message, secrets: secrets) }

    static func redacted(_ message: String, secrets: [String]) -> String {
        secrets.reduce(message) { $0.replacing($1, with: "***") }
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
