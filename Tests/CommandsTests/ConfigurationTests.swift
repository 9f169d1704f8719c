// Configuration: defaults, flags over environment, and a message naming the setting for every bad value.

@testable import Commands
@testable import SignIn
import FastCGI
import GoogleKeys
import Testing

private let base = ["TOKENSIGNIN_CLIENT_IDS": "1234567890-web.apps.googleusercontent.com"]

private func configuration(_ environment: [String: String] = [:], _ arguments: [String] = []) throws(CommandError) -> Configuration {
    try Configuration(environment: base.merging(environment) { _, new in new }, arguments: arguments, processorCount: 4)
}

/// One setting's value rendered as text, so tables can compare any field.
private func rendered(_ config: Configuration, _ setting: Setting) -> String {
    switch setting {
    case .clientIDs: config.clientIDs.joined(separator: "|")
    case .jwksURL: config.jwksURL
    case .jwksFile: config.jwksFile ?? "nil"
    case .riscAudiences: config.riscAudiences.joined(separator: "|")
    case .riscConfigurationURL: config.riscConfiguration.description
    case .keyWait: String(config.keyWait.components.seconds * 1_000 + config.keyWait.components.attoseconds / 1_000_000_000_000_000)
    case .listen: listenText(config.listen)
    case .workers: String(config.workers)
    case .checkWorkers: String(config.checkWorkers)
    case .workerScheduling: config.workerScheduling.rawValue
    case .signInBatch: String(config.signInBatch)
    case .requestTimeout: String(config.requestTimeout.components.seconds)
    case .hostedDomains: config.hostedDomains.joined(separator: "|")
    case .clockSkew: String(config.clockSkew.components.seconds)
    case .databaseURL: config.databaseURL ?? "nil"
    case .databasePooler: config.databasePooler.rawValue
    case .sessionTTL: String(config.sessionTTL.components.seconds)
    case .sessionIdleTTL: String(config.sessionIdleTTL.components.seconds)
    case .cookieName: config.cookieName
    case .siteOrigins: config.siteOrigins.map(\.description).joined(separator: "|")
    case .signInRedirect: config.signInRedirect
    case .webFormOrigins: config.webFormOrigins.map(\.description).joined(separator: "|")
    case .maxSessionsPerUser: String(config.maxSessionsPerUser)
    case .sqlDirectory: config.sqlDirectory
    case .allowRemoteListen: String(config.allowRemoteListen)
    case .allowNonGoogleKeys: String(config.allowNonGoogleKeys)
    case .allowInsecureCookieName: String(config.allowInsecureCookieName)
    case .sessionCache: config.sessionCache ? "on" : "off"
    case .sessionCacheSize: String(config.sessionCacheSize)
    case .sessionCacheDatabaseURL: config.sessionCacheDatabaseURL ?? "nil"
    }
}

/// The listen address as the setting wrote it ("nil": the inherited socket).
private func listenText(_ listen: Listen) -> String {
    switch listen {
    case .inherited: "nil"
    case .unix(let path): path
    case .tcp: listen.description
    }
}

@Suite struct ConfigurationTests {
    @Test(arguments: [
        (Setting.jwksURL, "https://www.googleapis.com/oauth2/v3/certs"),
        (.jwksFile, "nil"),
        (.keyWait, "1000"),
        (.riscAudiences, "1234567890-web.apps.googleusercontent.com"),
        (.riscConfigurationURL, "https://accounts.google.com/.well-known/risc-configuration"),
        (.listen, "nil"),
        (.workers, "8"),
        (.checkWorkers, "8"),
        (.workerScheduling, "adaptive"),
        (.signInBatch, "16"),
        (.requestTimeout, "10"),
        (.hostedDomains, ""),
        (.clockSkew, "60"),
        (.databaseURL, "nil"),
        (.databasePooler, "none"),
        (.sessionTTL, "2592000"),
        (.sessionIdleTTL, "604800"),
        (.cookieName, "__Host-tokensignin"),
        (.siteOrigins, ""),
        (.signInRedirect, "/"),
        (.webFormOrigins, "https://accounts.google.com"),
        (.maxSessionsPerUser, "100"),
        (.sqlDirectory, "sql"),
        (.allowRemoteListen, "false"),
        (.allowNonGoogleKeys, "false"),
        (.allowInsecureCookieName, "false"),
        (.sessionCache, "on"),
        (.sessionCacheSize, "100000"),
        (.sessionCacheDatabaseURL, "nil"),
    ])
    func unsetSettingTakesItsDefault(setting: Setting, expected: String) throws {
        #expect(rendered(try configuration(), setting) == expected)
    }

    @Test(arguments: ["https://www.googleapis.com/oauth2/v3/certs", "HTTPS://keys.example:8443/jwks?x=1", "http://localhost/certs",
                      "http://127.0.0.1:8080", "http://[::1]:9/certs"])
    func keySetURLOverHTTPSOrLoopbackHTTPIsAccepted(url: String) throws {
        #expect(try configuration(["TOKENSIGNIN_JWKS_URL": url]).jwksURL == url)
    }

    @Test func conninfoIsEmptyWithoutDatabaseURLSoLibpqReadsPGVariables() throws {
        #expect(try configuration().conninfo == "")
        #expect(try configuration(["TOKENSIGNIN_DATABASE_URL": "postgresql:///signin"]).conninfo == "postgresql:///signin")
    }

    @Test(arguments: [(1, 2), (4, 8), (0, 2), (100_000, 1024)])
    func defaultWorkersAreTwoPerCoreWithinBounds(cores: Int, workers: Int) {
        #expect(Configuration.defaultWorkers(processorCount: cores) == workers)
    }

    /// (setting, environment value, flag value, expected rendering of the flag value)
    @Test(arguments: [
        (Setting.clientIDs, "1-env.apps.googleusercontent.com", " 1-a.apps.googleusercontent.com , 2-b.apps.googleusercontent.com ",
         "1-a.apps.googleusercontent.com|2-b.apps.googleusercontent.com"),
        (.jwksURL, "https://env.example/certs", "http://127.0.0.1:8080/certs", "http://127.0.0.1:8080/certs"),
        (.jwksFile, "/env.json", "/flag.json", "/flag.json"),
        (.keyWait, "2s", "250ms", "250"),
        (.riscAudiences, "1234567890-web.apps.googleusercontent.com", "1234567890-web.apps.googleusercontent.com, 1234567890-android.apps.googleusercontent.com",
         "1234567890-web.apps.googleusercontent.com|1234567890-android.apps.googleusercontent.com"),
        (.riscConfigurationURL, "https://env.example/risc", "http://127.0.0.1:8080/.well-known/risc-configuration",
         "http://127.0.0.1:8080/.well-known/risc-configuration"),
        (.riscConfigurationURL, "https://env.example/risc", "off", "off"),
        (.listen, "/run/env.sock", "127.0.0.1:9000", "127.0.0.1:9000"),
        (.workers, "3", "5", "5"),
        (.checkWorkers, "3", "6", "6"),
        (.workerScheduling, "normal", "batch", "batch"),
        (.workerScheduling, "batch", "normal", "normal"),
        (.workerScheduling, "batch", "inherit", "inherit"),
        (.workerScheduling, "inherit", "adaptive", "adaptive"),
        (.signInBatch, "4", "1", "1"),
        (.signInBatch, "1", "64", "64"),
        (.requestTimeout, "5s", "1m", "60"),
        (.hostedDomains, "env.example", "Example.COM,b.example", "example.com|b.example"),
        (.clockSkew, "10", "0", "0"),
        (.databaseURL, "postgresql://env/db", "postgres://flag/db", "postgres://flag/db"),
        (.databasePooler, "transaction", "none", "none"),
        (.databasePooler, "none", "transaction", "transaction"),
        (.sessionTTL, "1d", "12h", "43200"),
        (.sessionIdleTTL, "1h", "15m", "900"),
        (.cookieName, "__Host-env", "__Host-sid", "__Host-sid"),
        (.siteOrigins, "https://env.example", "HTTPS://Example.com:443,http://localhost:8080", "https://example.com|http://localhost:8080"),
        (.signInRedirect, "/env", "/welcome?x=1", "/welcome?x=1"),
        (.webFormOrigins, "https://env.example", "https://localhost:8444, https://accounts.google.com", "https://localhost:8444|https://accounts.google.com"),
        (.maxSessionsPerUser, "5", "7", "7"),
        (.sqlDirectory, "/env/sql", "/usr/share/tokensignin/sql", "/usr/share/tokensignin/sql"),
        (.allowRemoteListen, "true", "no", "false"),
        (.allowNonGoogleKeys, "0", "1", "true"),
        (.allowInsecureCookieName, "1", "0", "false"),
        (.sessionCache, "on", "off", "off"),
        (.sessionCacheSize, "5", "1000", "1000"),
        (.sessionCacheDatabaseURL, "postgresql://env/db", "postgres://direct/db", "postgres://direct/db"),
    ])
    func flagOverridesEnvironment(setting: Setting, environment: String, flag: String, expected: String) throws {
        let env = [setting.variable: environment]
        #expect(rendered(try configuration(env, [setting.flag, flag]), setting) == expected)
        #expect(rendered(try configuration(env, ["\(setting.flag)=\(flag)"]), setting) == expected)
    }

    @Test(arguments: Setting.allCases)
    func flagIsTheVariableInKebabCaseWithoutPrefix(setting: Setting) {
        let expected = "--" + setting.variable.dropFirst("TOKENSIGNIN_".count).lowercased().replacing("_", with: "-")
        #expect(setting.flag == expected)
        #expect(Configuration.usage.contains(setting.variable))
        #expect(Configuration.usage.contains(setting.flag))
    }

    @Test func flagNamesAreTheContractNames() {
        #expect(Setting.allCases.map(\.variable) == [
            "TOKENSIGNIN_CLIENT_IDS", "TOKENSIGNIN_JWKS_URL", "TOKENSIGNIN_JWKS_FILE", "TOKENSIGNIN_KEY_WAIT", "TOKENSIGNIN_RISC_AUDIENCES",
            "TOKENSIGNIN_RISC_CONFIGURATION_URL", "TOKENSIGNIN_LISTEN",
            "TOKENSIGNIN_WORKERS", "TOKENSIGNIN_CHECK_WORKERS", "TOKENSIGNIN_WORKER_SCHEDULING", "TOKENSIGNIN_SIGNIN_BATCH", "TOKENSIGNIN_REQUEST_TIMEOUT", "TOKENSIGNIN_HOSTED_DOMAINS", "TOKENSIGNIN_CLOCK_SKEW", "TOKENSIGNIN_DATABASE_URL",
            "TOKENSIGNIN_DATABASE_POOLER",
            "TOKENSIGNIN_SESSION_TTL", "TOKENSIGNIN_SESSION_IDLE_TTL", "TOKENSIGNIN_COOKIE_NAME",
            "TOKENSIGNIN_SITE_ORIGINS", "TOKENSIGNIN_SIGNIN_REDIRECT", "TOKENSIGNIN_WEB_FORM_ORIGINS", "TOKENSIGNIN_MAX_SESSIONS_PER_USER",
            "TOKENSIGNIN_SQL_DIR", "TOKENSIGNIN_ALLOW_REMOTE_LISTEN", "TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS",
            "TOKENSIGNIN_ALLOW_INSECURE_COOKIE_NAME", "TOKENSIGNIN_SESSION_CACHE", "TOKENSIGNIN_SESSION_CACHE_SIZE",
            "TOKENSIGNIN_SESSION_CACHE_DATABASE_URL",
        ])
        #expect(Setting.clientIDs.flag == "--client-ids")
        #expect(Setting.signInRedirect.flag == "--signin-redirect")
    }

    @Test func missingClientIDsIsRequired() {
        #expect(throws: CommandError.self) { try Configuration(environment: [:], processorCount: 1) }
        do {
            _ = try Configuration(environment: ["TOKENSIGNIN_CLIENT_IDS": "  "], processorCount: 1)
            Issue.record("accepted")
        } catch {
            #expect(error.description == "TOKENSIGNIN_CLIENT_IDS is required")
        }
    }

    @Test func databasePasswordsAreNeverRepeated() throws {
        let config = try configuration(["TOKENSIGNIN_DATABASE_URL": "postgresql://app:p%40ss@db/signin", "PGPASSWORD": "other"])
        #expect(config.secrets == ["p%40ss", "p@ss", "other"])
        #expect(config.redacted("auth failed for app:p%40ss and p@ss, then other") == "auth failed for app:*** and ***, then ***")
        #expect(try configuration(["TOKENSIGNIN_DATABASE_URL": "postgresql://app@db/signin"]).secrets.isEmpty)
        // What a command's failure is redacted with before (or without) the settings: the same passwords.
        let environment = ["TOKENSIGNIN_DATABASE_URL": "postgresql://app:p%40ss@db/signin", "PGPASSWORD": "other",
                           "TOKENSIGNIN_SESSION_CACHE_DATABASE_URL": "postgresql://listener:hunter2@db/signin"]
        #expect(Set(Configuration.secrets(in: environment)) == Set(try configuration(environment).secrets))
        #expect(Configuration.secrets(in: environment).contains("hunter2"))
    }

    @Test func commandsThatVerifyNothingNeedNoClientIDs() throws {
        let config = try Configuration(environment: [:], processorCount: 1, requireClientIDs: false)
        #expect(config.clientIDs.isEmpty)
        // Every other setting is still checked the same way as for serve.
        #expect(throws: CommandError(.invalidConfiguration)) {
            try Configuration(environment: ["TOKENSIGNIN_SESSION_IDLE_TTL": "forever"], processorCount: 1, requireClientIDs: false)
        }
    }

    @Test(arguments: ["1234567890-abc.apps.googleusercontent.com", "407408718192-0a1b2c3d4e5f.apps.googleusercontent.com"])
    func googleClientIDsAreAccepted(id: String) throws {
        #expect(try configuration(["TOKENSIGNIN_CLIENT_IDS": id]).clientIDs == [id])
    }

    @Test(arguments: ["abc.apps.googleusercontent.com", "12-ABC.apps.googleusercontent.com", "12-a_b.apps.googleusercontent.com",
                      "-abc.apps.googleusercontent.com", "12-.apps.googleusercontent.com", "12-abc.apps.googleusercontent.com.evil",
                      "12-abc.googleusercontent.com"])
    func otherValuesAreNotClientIDs(id: String) {
        #expect(throws: CommandError(.invalidConfiguration)) { try configuration(["TOKENSIGNIN_CLIENT_IDS": id]) }
    }

    @Test func aClientSecretIsNeverPrintedBack() {
        do {
            _ = try configuration(["TOKENSIGNIN_CLIENT_IDS": "GOCSPX-AbCdEf1234567890"])
            Issue.record("accepted a client secret")
        } catch {
            #expect(!error.description.contains("AbCdEf1234567890"))
        }
    }

    @Test(arguments: ["127.0.0.1:9000", "127.1.2.3:9000", "[::1]:9000", "localhost:9000", "/run/tokensignin/tokensignin.sock"])
    func loopbackAndUnixListenAddressesNeedNoPermission(listen: String) throws {
        #expect(listenText(try configuration(["TOKENSIGNIN_LISTEN": listen]).listen) == listen)
    }

    @Test func aRemoteListenAddressNeedsTheExplicitPermission() throws {
        #expect(throws: CommandError(.invalidConfiguration)) { try configuration(["TOKENSIGNIN_LISTEN": "10.0.0.5:9000"]) }
        let allowed = try configuration(["TOKENSIGNIN_LISTEN": "10.0.0.5:9000", "TOKENSIGNIN_ALLOW_REMOTE_LISTEN": "true"])
        #expect(listenText(allowed.listen) == "10.0.0.5:9000" && allowed.allowRemoteListen)
    }

    @Test func emptyValueCountsAsUnsetAndAFlagCanResetToDefault() throws {
        #expect(try configuration(["TOKENSIGNIN_LISTEN": ""]).listen == .inherited)
        #expect(try configuration(["TOKENSIGNIN_LISTEN": "/run/a.sock"], ["--listen="]).listen == .inherited)
        #expect(try configuration(["TOKENSIGNIN_WORKERS": "3"], ["--workers", ""]).workers == 8)
    }

    /// (variable, bad value, the exact message)
    @Test(arguments: [
        ("TOKENSIGNIN_CLIENT_IDS", "a,,b", "TOKENSIGNIN_CLIENT_IDS has an empty entry in 'a,,b'"),
        ("TOKENSIGNIN_CLIENT_IDS", "a,", "TOKENSIGNIN_CLIENT_IDS has an empty entry in 'a,'"),
        ("TOKENSIGNIN_CLIENT_IDS", "a b", "TOKENSIGNIN_CLIENT_IDS has a value of 3 bytes, which is not an OAuth client ID (<digits>-<letters and digits>.apps.googleusercontent.com)"),
        ("TOKENSIGNIN_CLIENT_IDS", "web.apps.googleusercontent.com", "TOKENSIGNIN_CLIENT_IDS has 'web.apps.googleusercontent.com', which is not an OAuth client ID (<digits>-<letters and digits>.apps.googleusercontent.com)"),
        ("TOKENSIGNIN_CLIENT_IDS", "1234-web.apps.googleusercontent.com,GOCSPX-abcdefSECRET", "TOKENSIGNIN_CLIENT_IDS holds a client secret (GOCSPX-...), not a client ID: remove it, and treat the secret as leaked"),
        ("TOKENSIGNIN_LISTEN", "0.0.0.0:9000", "TOKENSIGNIN_LISTEN is 0.0.0.0:9000, which is not a loopback address: anyone who can reach it bypasses nginx (FastCGI has no authentication); use a unix socket or 127.0.0.1, or set TOKENSIGNIN_ALLOW_REMOTE_LISTEN=true if a firewall keeps it private"),
        ("TOKENSIGNIN_LISTEN", "db.example:9000", "TOKENSIGNIN_LISTEN: host must be a numeric address or localhost, got db.example"),
        ("TOKENSIGNIN_ALLOW_REMOTE_LISTEN", "maybe", "TOKENSIGNIN_ALLOW_REMOTE_LISTEN must be true or false, got 'maybe'"),
        ("TOKENSIGNIN_SESION_TTL", "30d", "TOKENSIGNIN_SESION_TTL is not a setting (did you mean TOKENSIGNIN_SESSION_TTL?); `tokensignin serve --help` lists them"),
        ("TOKENSIGNIN_SOMETHING", "1", "TOKENSIGNIN_SOMETHING is not a setting; `tokensignin serve --help` lists them"),
        ("TOKENSIGNIN_JWKS_URL", "http://example.com/certs", "TOKENSIGNIN_JWKS_URL must be an https:// URL (or http:// on 127.0.0.1, [::1] or localhost), got 'http://example.com/certs'"),
        ("TOKENSIGNIN_RISC_AUDIENCES", "1234567890-web.apps.googleusercontent.com,,", "TOKENSIGNIN_RISC_AUDIENCES has an empty entry in '1234567890-web.apps.googleusercontent.com,,'"),
        ("TOKENSIGNIN_RISC_AUDIENCES", "1234567890-web.apps.googleusercontent.com,android", "TOKENSIGNIN_RISC_AUDIENCES has 'android', which is not an OAuth client ID (<digits>-<letters and digits>.apps.googleusercontent.com)"),
        ("TOKENSIGNIN_RISC_AUDIENCES", "GOCSPX-abcdefSECRET", "TOKENSIGNIN_RISC_AUDIENCES holds a client secret (GOCSPX-...), not a client ID: remove it, and treat the secret as leaked"),
        ("TOKENSIGNIN_RISC_AUDIENCES", "1234567890-android.apps.googleusercontent.com", "TOKENSIGNIN_RISC_AUDIENCES must include every one of TOKENSIGNIN_CLIENT_IDS (security events for their users would be refused and lost); it lacks 1234567890-web.apps.googleusercontent.com"),
        ("TOKENSIGNIN_RISC_CONFIGURATION_URL", "http://accounts.google.com/.well-known/risc-configuration", "TOKENSIGNIN_RISC_CONFIGURATION_URL must be an https:// URL (or http:// on 127.0.0.1, [::1] or localhost) or off, got 'http://accounts.google.com/.well-known/risc-configuration'"),
        ("TOKENSIGNIN_RISC_CONFIGURATION_URL", "OFF", "TOKENSIGNIN_RISC_CONFIGURATION_URL must be an https:// URL (or http:// on 127.0.0.1, [::1] or localhost) or off, got 'OFF'"),
        ("TOKENSIGNIN_WORKERS", "x", "TOKENSIGNIN_WORKERS must be a positive integer (1...1024), got 'x'"),
        ("TOKENSIGNIN_CHECK_WORKERS", "0", "TOKENSIGNIN_CHECK_WORKERS must be a positive integer (1...1024), got '0'"),
        ("TOKENSIGNIN_KEY_WAIT", "11s", "TOKENSIGNIN_KEY_WAIT must be a duration from 0 to 10s (e.g. 1s, 250ms), got '11s'"),
        ("TOKENSIGNIN_REQUEST_TIMEOUT", "6m", "TOKENSIGNIN_REQUEST_TIMEOUT must be a duration from 1s to 300s (e.g. 10s), got '6m'"),
        ("TOKENSIGNIN_CLOCK_SKEW", "601", "TOKENSIGNIN_CLOCK_SKEW must be a whole number of seconds (0...600), got '601'"),
        ("TOKENSIGNIN_SESSION_TTL", "1w", "TOKENSIGNIN_SESSION_TTL must be a positive duration like 90, 90s, 15m, 12h or 30d (at most 3650d), got '1w'"),
        ("TOKENSIGNIN_DATABASE_URL", "host=db password=secret", "TOKENSIGNIN_DATABASE_URL must start with postgresql:// or postgres://"),
        ("TOKENSIGNIN_DATABASE_URL", "postgresql://app:s3cret@db/signin?bogus=1", "TOKENSIGNIN_DATABASE_URL is not a URL libpq accepts: invalid URI query parameter: \"bogus\""),
        ("TOKENSIGNIN_DATABASE_URL", "postgresql://app:s3cret@[::1/signin", "TOKENSIGNIN_DATABASE_URL is not a URL libpq accepts: end of string reached when looking for matching \"]\" in IPv6 host address in URI: \"postgresql://app:***@[::1/signin\""),
        ("TOKENSIGNIN_DATABASE_POOLER", "pgbouncer", "TOKENSIGNIN_DATABASE_POOLER must be none or transaction, got 'pgbouncer'"),
        ("TOKENSIGNIN_WORKER_SCHEDULING", "fifo", "TOKENSIGNIN_WORKER_SCHEDULING must be adaptive, inherit, normal or batch, got 'fifo'"),
        ("TOKENSIGNIN_WORKER_SCHEDULING", "Batch", "TOKENSIGNIN_WORKER_SCHEDULING must be adaptive, inherit, normal or batch, got 'Batch'"),
        ("TOKENSIGNIN_DATABASE_POOLER", "Transaction", "TOKENSIGNIN_DATABASE_POOLER must be none or transaction, got 'Transaction'"),
        ("TOKENSIGNIN_DATABASE_POOLER", "session", "TOKENSIGNIN_DATABASE_POOLER must be none or transaction, got 'session'"),
        ("TOKENSIGNIN_COOKIE_NAME", "a;b", "TOKENSIGNIN_COOKIE_NAME must be a token (letters, digits and !#$%&'*+-.^_`|~), got 'a;b'"),
        ("TOKENSIGNIN_SITE_ORIGINS", "https://example.com/", "TOKENSIGNIN_SITE_ORIGINS has a malformed origin (want scheme://host[:port], no path): 'https://example.com/'"),
        ("TOKENSIGNIN_WEB_FORM_ORIGINS", "accounts.google.com", "TOKENSIGNIN_WEB_FORM_ORIGINS has a malformed origin (want scheme://host[:port], no path): 'accounts.google.com'"),
        ("TOKENSIGNIN_WEB_FORM_ORIGINS", "http://standin.example", "TOKENSIGNIN_WEB_FORM_ORIGINS has an http origin that is not loopback (use https): 'http://standin.example'"),
        ("TOKENSIGNIN_MAX_SESSIONS_PER_USER", "0", "TOKENSIGNIN_MAX_SESSIONS_PER_USER must be a whole number (1...10000), got '0'"),
        ("TOKENSIGNIN_SIGNIN_BATCH", "0", "TOKENSIGNIN_SIGNIN_BATCH must be a whole number (1...64), got '0'"),
        ("TOKENSIGNIN_SIGNIN_BATCH", "65", "TOKENSIGNIN_SIGNIN_BATCH must be a whole number (1...64), got '65'"),
        ("TOKENSIGNIN_SIGNIN_BATCH", "8x", "TOKENSIGNIN_SIGNIN_BATCH must be a whole number (1...64), got '8x'"),
        ("TOKENSIGNIN_SIGNIN_REDIRECT", "//evil.example", "TOKENSIGNIN_SIGNIN_REDIRECT must be a path starting with a single '/' or an https URL on one of TOKENSIGNIN_SITE_ORIGINS, got '//evil.example'"),
    ])
    func malformedValueMessageIsExact(variable: String, value: String, message: String) {
        do {
            _ = try configuration([variable: value])
            Issue.record("accepted \(variable)=\(value)")
        } catch {
            #expect(error.code == .invalidConfiguration)
            #expect(error.description == message)
        }
    }

    /// Every refused value, one table: the message must name the setting.
    @Test(arguments: [
        ("TOKENSIGNIN_JWKS_URL", "ftp://example.com/certs"),
        ("TOKENSIGNIN_JWKS_URL", "https://"),
        ("TOKENSIGNIN_JWKS_URL", "https://user@example.com/certs"),
        ("TOKENSIGNIN_JWKS_URL", "http://localhost.evil.example/certs"),
        ("TOKENSIGNIN_JWKS_URL", "https://exa mple.com/"),
        ("TOKENSIGNIN_JWKS_URL", "https://:443/certs"),
        ("TOKENSIGNIN_JWKS_URL", "www.googleapis.com/oauth2/v3/certs"),
        ("TOKENSIGNIN_LISTEN", "/run/a b.sock"),
        ("TOKENSIGNIN_WORKERS", "0"),
        ("TOKENSIGNIN_WORKERS", "1025"),
        ("TOKENSIGNIN_WORKERS", "-1"),
        ("TOKENSIGNIN_WORKERS", "+2"),
        ("TOKENSIGNIN_WORKERS", "2.5"),
        ("TOKENSIGNIN_WORKERS", "99999999999999999999999"),
        ("TOKENSIGNIN_CHECK_WORKERS", "1025"),
        ("TOKENSIGNIN_CHECK_WORKERS", "-1"),
        ("TOKENSIGNIN_KEY_WAIT", "1"),
        ("TOKENSIGNIN_KEY_WAIT", "1m"),
        ("TOKENSIGNIN_KEY_WAIT", "10001ms"),
        ("TOKENSIGNIN_KEY_WAIT", "-1s"),
        ("TOKENSIGNIN_KEY_WAIT", "ms"),
        ("TOKENSIGNIN_REQUEST_TIMEOUT", "0"),
        ("TOKENSIGNIN_REQUEST_TIMEOUT", "301"),
        ("TOKENSIGNIN_REQUEST_TIMEOUT", "1.5s"),
        ("TOKENSIGNIN_HOSTED_DOMAINS", "example.com,"),
        ("TOKENSIGNIN_HOSTED_DOMAINS", "exa mple.com"),
        ("TOKENSIGNIN_HOSTED_DOMAINS", "-example.com"),
        ("TOKENSIGNIN_HOSTED_DOMAINS", "example..com"),
        ("TOKENSIGNIN_CLOCK_SKEW", "-1"),
        ("TOKENSIGNIN_CLOCK_SKEW", "1m"),
        ("TOKENSIGNIN_SESSION_TTL", "0"),
        ("TOKENSIGNIN_SESSION_TTL", "10x"),
        ("TOKENSIGNIN_SESSION_IDLE_TTL", "-1"),
        ("TOKENSIGNIN_SESSION_IDLE_TTL", "31d"),
        ("TOKENSIGNIN_DATABASE_POOLER", "yes"),
        ("TOKENSIGNIN_DATABASE_POOLER", "transaction,none"),
        ("TOKENSIGNIN_DATABASE_POOLER", "statement"),
        ("TOKENSIGNIN_COOKIE_NAME", "a=b"),
        ("TOKENSIGNIN_COOKIE_NAME", "sessión"),
        ("TOKENSIGNIN_SITE_ORIGINS", "example.com"),
        ("TOKENSIGNIN_SITE_ORIGINS", "https://example.com,,https://b.example"),
        ("TOKENSIGNIN_SITE_ORIGINS", "http://example.com"),
        ("TOKENSIGNIN_SITE_ORIGINS", "https://example.com:0"),
        ("TOKENSIGNIN_SITE_ORIGINS", "https://example.com:99999"),
        ("TOKENSIGNIN_SITE_ORIGINS", "https://example.com?x"),
        ("TOKENSIGNIN_SITE_ORIGINS", "ftp://example.com"),
        ("TOKENSIGNIN_WEB_FORM_ORIGINS", "https://accounts.google.com/"),
        ("TOKENSIGNIN_WEB_FORM_ORIGINS", "https://accounts.google.com,"),
        ("TOKENSIGNIN_WEB_FORM_ORIGINS", "null"),
        ("TOKENSIGNIN_SIGNIN_REDIRECT", "/\\evil.example"),
        ("TOKENSIGNIN_SIGNIN_REDIRECT", "welcome"),
        ("TOKENSIGNIN_SIGNIN_REDIRECT", "https://evil.example/"),
        ("TOKENSIGNIN_SIGNIN_REDIRECT", "javascript:alert(1)"),
        ("TOKENSIGNIN_SIGNIN_REDIRECT", "/a b"),
    ])
    func malformedValueIsRefusedNamingTheSetting(variable: String, value: String) {
        do {
            _ = try configuration([variable: value])
            Issue.record("accepted \(variable)=\(value)")
        } catch {
            #expect(error.code == .invalidConfiguration)
            #expect(error.description.contains(variable))
        }
    }

    @Test func databaseURLIsNeverEchoedInItsMessage() {
        do {
            _ = try configuration(["TOKENSIGNIN_DATABASE_URL": "host=db password=hunter2"])
            Issue.record("accepted")
        } catch {
            #expect(!error.description.contains("hunter2"))
        }
    }

    @Test func idleTTLDefaultsToTheShorterOfSevenDaysAndTheAbsoluteTTL() throws {
        #expect(try configuration(["TOKENSIGNIN_SESSION_TTL": "1d"]).sessionIdleTTL == .seconds(86_400))
        #expect(try configuration(["TOKENSIGNIN_SESSION_TTL": "1d", "TOKENSIGNIN_SESSION_IDLE_TTL": "1d"]).sessionIdleTTL == .seconds(86_400))
    }

    @Test func idleTTLAboveAbsoluteTTLIsRefusedNamingBoth() {
        do {
            _ = try configuration(["TOKENSIGNIN_SESSION_TTL": "1h", "TOKENSIGNIN_SESSION_IDLE_TTL": "2h"])
            Issue.record("accepted")
        } catch {
            #expect(error.description == "TOKENSIGNIN_SESSION_IDLE_TTL (7200s) must not exceed TOKENSIGNIN_SESSION_TTL (3600s)")
        }
    }

    @Test(arguments: ["/", "/welcome", "/a?b=c#d", "https://example.com/done", "https://EXAMPLE.com:443/done", "https://example.com"])
    func redirectOnASiteOriginOrLocalPathIsAccepted(target: String) throws {
        let config = try configuration(["TOKENSIGNIN_SITE_ORIGINS": "https://example.com", "TOKENSIGNIN_SIGNIN_REDIRECT": target])
        #expect(config.signInRedirect == target)
    }

    @Test(arguments: ["https://example.com.evil.example/", "http://example.com/", "https://example.com@evil.example/", "https://example.com:8443/"])
    func redirectOffTheSiteOriginsIsRefused(target: String) {
        #expect(throws: CommandError(.invalidConfiguration)) {
            try configuration(["TOKENSIGNIN_SITE_ORIGINS": "https://example.com", "TOKENSIGNIN_SIGNIN_REDIRECT": target])
        }
    }

    @Test(arguments: [
        (["--nope", "1"], "unknown option '--nope'"),
        (["--workers"], "--workers needs a value"),
        (["--workers", "2", "--workers=3"], "--workers is given more than once"),
        (["serve"], "unknown option 'serve'"),
    ])
    func badFlagsAreRefused(arguments: [String], message: String) {
        do {
            _ = try configuration([:], arguments)
            Issue.record("accepted \(arguments)")
        } catch {
            #expect(error.description == message)
        }
    }

    /// Only Google's key set is trusted unless TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS says otherwise: a JWKS file or another
    /// URL is refused, naming the setting that allows it.
    @Test(arguments: [
        ([:], true),
        (["TOKENSIGNIN_JWKS_URL": "https://www.googleapis.com/oauth2/v3/certs"], true),
        (["TOKENSIGNIN_JWKS_FILE": "/etc/keys.json"], false),
        (["TOKENSIGNIN_JWKS_URL": "https://keys.example/certs"], false),
        (["TOKENSIGNIN_JWKS_URL": "https://www.googleapis.com/oauth2/v1/certs"], false),
        (["TOKENSIGNIN_JWKS_URL": "http://127.0.0.1:9/certs"], false),
        (["TOKENSIGNIN_RISC_CONFIGURATION_URL": "off"], true),
        (["TOKENSIGNIN_RISC_CONFIGURATION_URL": "https://accounts.google.com/.well-known/risc-configuration"], true),
        (["TOKENSIGNIN_RISC_CONFIGURATION_URL": "http://127.0.0.1:9/.well-known/risc-configuration"], false),
    ] as [([String: String], Bool)])
    func onlyGooglesKeysAreTrustedUnlessAllowed(environment: [String: String], trusted: Bool) throws {
        do {
            try configuration(environment).requireTrustedKeys()
            #expect(trusted)
        } catch {
            #expect(!trusted)
            #expect(error.code == .invalidConfiguration && error.description.contains("TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS=1"))
        }
        try configuration(environment.merging(["TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS": "1"]) { $1 }).requireTrustedKeys()
    }

    /// A session cookie without the __Host- prefix could be set or shadowed by a sibling subdomain: refused, naming
    /// the setting that allows it.
    @Test(arguments: [("__Host-tokensignin", true), ("__Host-sid", true), ("sid", false), ("__Secure-sid", false), ("__host-sid", false)])
    func aCookieNameWithoutTheHostPrefixNeedsThePermission(name: String, accepted: Bool) throws {
        do {
            #expect(try configuration(["TOKENSIGNIN_COOKIE_NAME": name]).cookieName == name && accepted)
        } catch {
            #expect(!accepted)
            #expect(error.description == "TOKENSIGNIN_COOKIE_NAME is '\(name)', without the __Host- prefix: a sibling subdomain could set or shadow the session cookie. Name it __Host-..., or set TOKENSIGNIN_ALLOW_INSECURE_COOKIE_NAME=1")
        }
        #expect(try configuration(["TOKENSIGNIN_COOKIE_NAME": name, "TOKENSIGNIN_ALLOW_INSECURE_COOKIE_NAME": "1"]).cookieName == name)
    }

    @Test func policyCarriesClientIDsDomainsAndSkew() throws {
        let policy = try configuration(["TOKENSIGNIN_HOSTED_DOMAINS": "example.com", "TOKENSIGNIN_CLOCK_SKEW": "5"]).policy
        #expect(policy.clientIDs == ["1234567890-web.apps.googleusercontent.com"])
        #expect(policy.hostedDomains == ["example.com"])
        #expect(policy.clockSkew == 5)
    }

    /// Item 12: security events are verified against the RISC audiences (the client IDs and other clients of the
    /// project), ID tokens against the client IDs alone.
    @Test func securityEventsAreVerifiedAgainstTheRiscAudiences() throws {
        let web = "1234567890-web.apps.googleusercontent.com", android = "1234567890-android.apps.googleusercontent.com"
        let site = try configuration(["TOKENSIGNIN_RISC_AUDIENCES": "\(android),\(web)", "TOKENSIGNIN_CLOCK_SKEW": "7"]).site
        #expect(site.policy.clientIDs == [web])
        #expect(site.securityEventPolicy.clientIDs == [android, web] && site.securityEventPolicy.clockSkew == 7)
        #expect(try configuration().site.securityEventPolicy.clientIDs == [web])
    }

    /// Item 13: the RISC configuration URL is typed, so a rule can ask whether it is Google's.
    @Test func theRiscConfigurationSourceKnowsGooglesURL() throws {
        #expect(try configuration().riscConfiguration.isGoogle)
        #expect(try !configuration(["TOKENSIGNIN_RISC_CONFIGURATION_URL": "https://risc.example/config"]).riscConfiguration.isGoogle)
        #expect(try configuration(["TOKENSIGNIN_RISC_CONFIGURATION_URL": "off"]).riscConfiguration == .off)
    }
}

@Suite struct DurationTests {
    @Test(arguments: [
        ("90", 90), ("90s", 90), ("15m", 900), ("12h", 43_200), ("30d", 2_592_000), ("1", 1), ("007", 7),
        ("3650d", 315_360_000), ("315360000", 315_360_000),
    ] as [(String, Int64)])
    func validDurationParses(text: String, seconds: Int64) {
        #expect(SettingText.seconds(text) == seconds)
    }

    @Test(arguments: [
        "", "0", "0s", "-1", "+1", "1w", "10x", "s", "d", "1.5h", " 1h", "1h ", "1 h", "1H", "3651d", "315360001",
        "999999999999999999d", "9223372036854775807", "99999999999999999999999999",
    ])
    func invalidDurationIsRefused(text: String) {
        #expect(SettingText.seconds(text) == nil)
    }

    @Test(arguments: [("0", 0), ("0s", 0), ("0ms", 0), ("250ms", 250), ("1s", 1_000), ("10s", 10_000), ("10000ms", 10_000)] as [(String, Int64)])
    func validMillisecondsParse(text: String, milliseconds: Int64) {
        #expect(SettingText.milliseconds(text) == milliseconds)
    }

    @Test(arguments: ["", "1", "250", "s", "ms", "1m", "1.5s", "-1s", " 1s", "1 s", "1MS", "9999999s"])
    func invalidMillisecondsAreRefused(text: String) {
        #expect(SettingText.milliseconds(text) == nil)
    }
}
