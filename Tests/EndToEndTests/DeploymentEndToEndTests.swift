// How the responder is deployed: start-up refusals, the inherited FastCGI socket, nginx's rate limit, and
// nginx keeping its FastCGI connections to the responder.
import Foundation
import Testing
import TestSupport

@Suite struct DeploymentEndToEndTests {
    @Test(arguments: [
        ([String: String](), "TOKENSIGNIN_CLIENT_IDS"),
        (["TOKENSIGNIN_CLIENT_IDS": "1234567890-a.apps.googleusercontent.com", "TOKENSIGNIN_WORKERS": "many"], "TOKENSIGNIN_WORKERS"),
        (["TOKENSIGNIN_CLIENT_IDS": "1234567890-a.apps.googleusercontent.com", "TOKENSIGNIN_SESSION_TTL": "1w"], "TOKENSIGNIN_SESSION_TTL"),
        (["TOKENSIGNIN_CLIENT_IDS": "1234567890-a.apps.googleusercontent.com", "TOKENSIGNIN_JWKS_FILE": "/nonexistent/jwks.json",
          "TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS": "1", "TOKENSIGNIN_LISTEN": "SOCKET"], "TOKENSIGNIN_JWKS_FILE"),
        (["TOKENSIGNIN_CLIENT_IDS": "1234567890-a.apps.googleusercontent.com", "TOKENSIGNIN_COOKIE_NAME": "sid"],
         "TOKENSIGNIN_ALLOW_INSECURE_COOKIE_NAME"),
        // A key set that is not Google's, without the setting that allows it.
        (["TOKENSIGNIN_CLIENT_IDS": "1234567890-a.apps.googleusercontent.com", "TOKENSIGNIN_JWKS_FILE": "/etc/hostname",
          "TOKENSIGNIN_LISTEN": "SOCKET"], "TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS"),
        (["TOKENSIGNIN_CLIENT_IDS": "1234567890-a.apps.googleusercontent.com", "TOKENSIGNIN_JWKS_URL": "https://keys.example/certs",
          "TOKENSIGNIN_LISTEN": "SOCKET"], "TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS"),
        (["TOKENSIGNIN_CLIENT_IDS": "1234567890-a.apps.googleusercontent.com",
          "TOKENSIGNIN_DATABASE_URL": "postgresql://app:hunter2@localhost/db?sslmod=require"], "TOKENSIGNIN_DATABASE_URL"),
        (["TOKENSIGNIN_CLIENT_IDS": "1234567890-a.apps.googleusercontent.com",
          "TOKENSIGNIN_SESSION_CACHE_DATABASE_URL": "postgresql://app:hunter2@localhost/db?sslmod=require"],
         "TOKENSIGNIN_SESSION_CACHE_DATABASE_URL"),
    ])
    func startUpStopsNamingAMissingOrMalformedSetting(environment: [String: String], setting: String) throws {
        let socket = NSTemporaryDirectory() + "tokensignin-startup-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        defer { try? FileManager.default.removeItem(atPath: socket) }
        var clean = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("TOKENSIGNIN_") }
        clean.merge(environment.mapValues { $0 == "SOCKET" ? socket : $0 }) { $1 }
        let result = try runProgram(Paths.binary, ["serve"], environment: clean)
        #expect(result.status == 2, "a refused setting is a usage error: \(result.stderrText)")
        #expect(result.stderrText.contains(setting), "\(result.stderrText)")
        #expect(!result.stderrText.contains("hunter2"), "a password is never repeated: \(result.stderrText)")
    }

    /// A key file others may write is refused even when non-Google keys are allowed: whoever writes it signs anyone in.
    @Test(arguments: [0o664, 0o646, 0o666] as [Int])
    func aKeyFileOthersCanWriteIsRefused(mode: Int) throws {
        let dir = NSTemporaryDirectory() + "tokensignin-keyfile-\(getpid())-\(mode)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let keys = try runProgram(Paths.binary, ["dev", "keygen", "--out", dir + "/keys"], environment: ProcessInfo.processInfo.environment)
        #expect(keys.status == 0, "\(keys.stderrText)")
        let jwks = dir + "/keys/dev-jwks.json"
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: jwks)
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("TOKENSIGNIN_") }
        environment.merge(["TOKENSIGNIN_CLIENT_IDS": "1234567890-a.apps.googleusercontent.com", "TOKENSIGNIN_JWKS_FILE": jwks,
                           "TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS": "1", "TOKENSIGNIN_LISTEN": dir + "/s.sock"]) { $1 }
        let result = try runProgram(Paths.binary, ["serve"], environment: environment)
        #expect(result.status == 2, "\(result.stderrText)")
        #expect(result.stderrText.contains("TOKENSIGNIN_JWKS_FILE") && result.stderrText.contains("writable by other users"), "\(result.stderrText)")
        // verify too, with the file from the settings or named by --jwks (a usage error, before the token is read).
        let fromSettings = try runProgram(Paths.binary, ["verify", "-"], environment: environment)
        #expect(fromSettings.status == 2 && fromSettings.stderrText.contains("TOKENSIGNIN_JWKS_FILE: \(jwks) is writable by other users"),
                "\(fromSettings.stderrText)")
        environment["TOKENSIGNIN_JWKS_FILE"] = nil
        let named = try runProgram(Paths.binary, ["verify", "--jwks", jwks, "-"], environment: environment)
        #expect(named.status == 2 && named.stderrText.contains("--jwks: \(jwks) is writable by other users"), "\(named.stderrText)")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: jwks)
        let kept = try runProgram(Paths.binary, ["verify", "--jwks", jwks, "not-a-token"], environment: environment)
        #expect(kept.status == 1 && kept.stderrText.contains("invalid token"), "the same file, 0644: the token is judged (\(kept.stderrText))")
    }

    /// A responder that trusts a key set other than Google's (allowed) says so at every start, at warn level.
    @Test func trustingNonGoogleKeysIsWarnedAtEveryStart() throws {
        let stack = try Stack("devkeys")
        #expect(stack.serverLog.contains("level=warn event=non_google_keys_trusted source=file location=\(stack.jwksPath)"), "\(stack.serverLog)")
        #expect(stack.serverLog.contains("tokens signed by this key set are trusted"))
        _ = stack.stopServer()
        try stack.startServer()
        // The socket listens before the keys are loaded: the line follows within moments.
        let deadline = Date().addingTimeInterval(10)
        while stack.serverLog.components(separatedBy: "event=started").count < 3, Date() < deadline { usleep(20_000) }
        #expect(stack.serverLog.components(separatedBy: "event=non_google_keys_trusted").count == 3, "\(stack.serverLog)")
    }

    /// A database setting that is well formed but wrong (a misspelt database) cannot be refused at start-up:
    /// the responder runs, answers 503, and says what libpq said, at start and when a request cannot connect.
    @Test func aWrongDatabaseIsLoggedInLibpqsWordsNotJustAs503() throws {
        let stack = try Stack("baddb", environment: ["PGDATABASE": "no_such_database"])
        let answer = try stack.signIn(try stack.token(sub: "182000000000000000001"))
        #expect(answer.status == 503, "\(answer)")
        let log = stack.serverLog
        #expect(log.contains("level=warn event=database_unavailable_at_start code=connection_failed"), "\(log)")
        #expect(log.contains(#"database \"no_such_database\" does not exist"#), "libpq's message, quoted: \(log)")
        #expect(log.contains("level=warn event=database_connect_failed code=connection_failed"), "\(log)")
    }

    @Test func servesOnTheSocketInheritedFromSpawnFcgi() throws {
        let stack = try Stack("spawnfcgi", launch: .spawnFCGI)
        let answer = try stack.signIn(try stack.token(sub: "180000000000000000001"))
        #expect(answer.status == 200, "\(answer)")
        #expect(stack.serverLog.contains(#"listen="fd 0""#), "\(stack.serverLog)")
        #expect(stack.stopServer() == 0, "SIGTERM is a graceful stop with exit status 0")
        #expect(stack.serverLog.contains("event=stopped"), "\(stack.serverLog)")
    }

    /// `tokensignin --version` is the one line operators and packages read, and `started` repeats it, so a log
    /// says which build was running.
    @Test func versionIsOneLineAndTheStartedLineRepeatsIt() throws {
        let printed = try runProgram(Paths.binary, ["--version"], environment: ProcessInfo.processInfo.environment)
        #expect(printed.status == 0)
        #expect(printed.stderrText.isEmpty, "\(printed.stderrText)")
        let match = try #require(printed.stdoutText.wholeMatch(of: /tokensignin (\d+\.\d+\.\d+) \(([A-Za-z0-9._+-]+)\)\n/),
                                 "\(printed.stdoutText)")
        let stack = try SharedStacks.stack("signin")
        // An answer means the responder is serving, which it logs `started` before it does.
        #expect(try stack.request("GET", "/auth/session").status == 401)
        #expect(stack.serverLog.contains("event=started version=\(match.output.1) build=\(match.output.2) "), "\(stack.serverLog)")
        // Every line leads with its UTC time, to the second.
        let started = try #require(stack.serverLog.split(separator: "\n").first { $0.contains("event=started") })
        let stamp = try #require(started.prefixMatch(of: #/ts=(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})Z level=info event=started /#),
                                 "\(started)")
        var parts = tm()
        parts.tm_year = Int32(stamp.output.1)! - 1900
        parts.tm_mon = Int32(stamp.output.2)! - 1
        parts.tm_mday = Int32(stamp.output.3)!
        parts.tm_hour = Int32(stamp.output.4)!
        parts.tm_min = Int32(stamp.output.5)!
        parts.tm_sec = Int32(stamp.output.6)!
        #expect(parts.tm_mon < 12 && parts.tm_mday <= 31 && parts.tm_hour < 24 && parts.tm_min < 60 && parts.tm_sec < 61)
        #expect(abs(Date().timeIntervalSince1970 - Double(timegm(&parts))) < 3_600, "\(started)")
    }

    @Test func versionTakesNoArguments() throws {
        let result = try runProgram(Paths.binary, ["--version", "extra"], environment: ProcessInfo.processInfo.environment)
        #expect(result.status == 2)
        #expect(result.stdoutText.isEmpty)
        #expect(result.stderrText.hasPrefix("usage: tokensignin --version\n"), "\(result.stderrText)")
    }

    @Test func nginxLimitsSignInsPerClientAddress() throws {
        let stack = try Stack("ratelimit", rateLimit: true)
        var answers: [Answer] = []
        for _ in 0..<40 {
            answers.append(try stack.request("POST", "/tokensignin", headers: ["Content-Type": "text/plain"], body: "x"))
        }
        let statuses = answers.map(\.status)
        #expect(statuses.contains(415), "requests within the burst reach the responder")
        #expect(statuses.contains(429), "a burst beyond the limit is refused by nginx: \(statuses)")
        for refused in answers where refused.status == 429 {
            #expect(refused.errorCode == "too_many_requests", "JSON, not nginx's HTML: \(refused)")
            #expect(refused.header("Retry-After") == "1")
            #expect(refused.header("Content-Type") == "application/json" && refused.header("Cache-Control") == "no-store",
                    "\(refused)")
        }
    }

    @Test func aResponderThatIsDownIs503InJSON() throws {
        let stack = try Stack("down")
        stack.stopServer()
        let answer = try stack.request("POST", "/tokensignin", headers: ["Content-Type": "application/json"], body: "{}")
        #expect(answer.status == 503 && answer.errorCode == "temporarily_unavailable", "\(answer)")
        #expect(answer.header("Retry-After") == "2")
    }

    /// The shipped nginx files keep FastCGI connections (`keepalive` + `fastcgi_keep_conn on`): a run of
    /// sign-ins and session checks reaches the responder over a few connections nginx reuses, not one
    /// connection per request (the responder's own count of accepted connections says so). (Whether the kept
    /// connection is still open afterwards depends on nginx's 60 s idle timeout on a slow machine: not asserted.)
    @Test func nginxReusesItsFastCGIConnectionsToTheResponder() throws {
        let stack = try Stack("keepconn")
        let requests = 20
        for index in 0..<(requests / 2) {
            let answer = try stack.signIn(try stack.token(sub: "18100000000000000000\(index)"))
            #expect(answer.status == 200, "\(answer)")
            #expect(try stack.request("GET", "/auth/session").status == 401)
        }
        let metrics = try stack.operatorsRequest("GET", "/metrics")
        let line = metrics.body.split(separator: "\n").first { $0.hasPrefix("tokensignin_fastcgi_connections_accepted_total ") }
        let accepted = try #require(line.flatMap { Double($0.split(separator: " ").last ?? "") }, "\(metrics)")
        // One per nginx worker in use, plus any nginx replaced after its upstream keepalive_timeout (60 s) on a
        // very slow machine; a connection per request would be 21.
        #expect(accepted >= 1 && accepted <= 4, "\(Int(accepted)) connections for \(requests + 1) requests")
    }
}
