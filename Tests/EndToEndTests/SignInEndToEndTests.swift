// POST /tokensignin through nginx -> FastCGI -> PostgreSQL: every status and the rows each leaves behind.
import Foundation
import Testing

/// SHA-256 of a string as hex, computed by PostgreSQL so the test does not trust the code under test.
private func sha256Hex(_ stack: Stack, _ text: String) throws -> String {
    try stack.psql("SELECT encode(sha256(convert_to('\(text)', 'UTF8')), 'hex')")[0][0]
}

@Suite(.serialized) final class SignInEndToEndTests {
    let stack: Stack
    init() throws { stack = try SharedStacks.stack("signin") }

    @Test func jsonSignInCreatesUserSessionAndAuditRow() throws {
        let token = try stack.token(sub: "110000000000000000001", email: "ada@example.com", name: "Ada Lovelace")
        let answer = try stack.signIn(token, userAgent: "e2e-agent/1.0")
        #expect(answer.status == 200, "\(answer)")
        #expect(answer.header("Cache-Control") == "no-store")
        #expect(answer.header("Content-Type")?.hasPrefix("application/json") == true)

        let user = try #require(answer.json["user"] as? [String: Any])
        #expect(user["sub"] as? String == "110000000000000000001")
        #expect(user["email"] as? String == "ada@example.com")
        #expect(user["name"] as? String == "Ada Lovelace")
        #expect(user["created"] as? Bool == true)
        #expect(user["id"] != nil)
        let session = try #require(answer.json["session"] as? [String: Any])
        let sessionToken = try #require(session["token"] as? String)
        #expect(sessionToken.count >= 43, "at least 256 bits of randomness, base64url-encoded")
        #expect((session["expires_at"] as? String)?.hasSuffix("Z") == true)

        let cookie = try #require(answer.headers("Set-Cookie").first)
        #expect(cookie.hasPrefix("__Host-tokensignin=\(sessionToken);"))
        for attribute in ["Secure", "HttpOnly", "SameSite=Lax", "Path=/"] {
            #expect(cookie.contains(attribute), "cookie lacks \(attribute): \(cookie)")
        }

        let rows = try stack.psql("""
            SELECT u.google_sub, u.email, s.client_id, s.user_agent, encode(s.token_hash, 'hex')
            FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id
            """)
        #expect(rows.count == 1)
        #expect(rows[0][0] == "110000000000000000001")
        #expect(rows[0][1] == "ada@example.com")
        #expect(rows[0][2] == stack.clientID)
        #expect(rows[0][3] == "e2e-agent/1.0")
        #expect(rows[0][4] == (try sha256Hex(stack, sessionToken)), "token_hash is SHA-256 of the token handed out")

        // Neither the ID token nor the session token is stored anywhere, in any table.
        let dump = try stack.psql("""
            SELECT string_agg(t::text, ' ') FROM (
              SELECT row_to_json(u)::text AS t FROM signin.users u UNION ALL
              SELECT row_to_json(s)::text FROM signin.sessions s UNION ALL
              SELECT row_to_json(a)::text FROM signin.sign_ins a) x
            """)[0][0]
        #expect(!dump.contains(sessionToken))
        #expect(!dump.contains(token.split(separator: ".")[2]))
        #expect(!stack.serverLog.contains(sessionToken))
        #expect(!stack.serverLog.contains(String(token.split(separator: ".")[2])))

        #expect(try stack.count("signin.sign_ins WHERE outcome = 'success' AND google_sub = '110000000000000000001'") == 1)
    }

    /// Through nginx: a JSON sign-in from the site's own page answers the session in the cookie only; the same
    /// without Origin (a native app) in the body too.
    @Test func aBrowsersJSONSignInKeepsTheSessionTokenOutOfTheBody() throws {
        let token = try stack.token(sub: "110000000000000000031")
        let answer = try stack.request("POST", "/tokensignin", headers: ["Content-Type": "application/json", "Origin": stack.siteOrigin],
                                       body: #"{"idToken":"\#(token)"}"#)
        #expect(answer.status == 200, "\(answer)")
        let session = try #require(answer.json["session"] as? [String: Any])
        #expect(session["token"] == nil && session["expires_at"] is String)
        let cookie = try #require(answer.headers("Set-Cookie").first)
        let cookieToken = String(cookie.dropFirst("__Host-tokensignin=".count).prefix { $0 != ";" })
        #expect(cookieToken.count == 43 && !answer.body.contains(cookieToken))
        let check = try stack.request("GET", "/auth/session", headers: ["Cookie": "__Host-tokensignin=\(cookieToken)"])
        #expect(check.status == 200, "the cookie's session is live")
    }

    @Test func secondSignInUpdatesTheSameUser() throws {
        let first = try stack.signIn(try stack.token(sub: "110000000000000000002", name: "Old Name"))
        #expect(first.status == 200, "\(first)")
        let second = try stack.signIn(try stack.token(sub: "110000000000000000002", name: "New Name"))
        #expect(second.status == 200, "\(second)")
        let user = try #require(second.json["user"] as? [String: Any])
        #expect(user["created"] as? Bool == false)
        #expect(user["name"] as? String == "New Name")
        #expect(try stack.count("signin.users WHERE google_sub = '110000000000000000002'") == 1)
        #expect(try stack.psql("SELECT name FROM signin.users WHERE google_sub = '110000000000000000002'")[0][0] == "New Name")
        #expect(try stack.count("signin.sessions s JOIN signin.users u ON u.id = s.user_id WHERE u.google_sub = '110000000000000000002'") == 2)
    }

    @Test func emailIsNeverUsedToLinkAccounts() throws {
        let a = try stack.signIn(try stack.token(sub: "110000000000000000003", email: "same@example.com"))
        let b = try stack.signIn(try stack.token(sub: "110000000000000000004", email: "same@example.com"))
        #expect(a.status == 200 && b.status == 200)
        #expect(try stack.count("signin.users WHERE email = 'same@example.com'") == 2)
    }

    @Test func formBodySignsIn() throws {
        let token = try stack.token(sub: "110000000000000000005")
        let answer = try stack.request("POST", "/tokensignin",
                                       headers: ["Content-Type": "application/x-www-form-urlencoded"], body: "idtoken=\(token)")
        #expect(answer.status == 200, "\(answer)")
        #expect(try stack.count("signin.users WHERE google_sub = '110000000000000000005'") == 1)
    }

    @Test(arguments: ["https://accounts.google.com", "https://127.0.0.1:PORT"])
    func webFormFromGoogleOrTheSiteIsAccepted(origin: String) throws {
        let answer = try stack.request("POST", "/tokensignin", headers: [
            "Content-Type": "application/x-www-form-urlencoded", "Cookie": "g_csrf_token=c1",
            "Origin": origin.replacingOccurrences(of: "PORT", with: String(stack.port)),
        ], body: "credential=\(try stack.token(sub: "110000000000000000008"))&g_csrf_token=c1")
        #expect(answer.status == 303, "\(answer)")
    }

    @Test func tokenPostsFromAnotherSiteAreRefused() throws {
        // Login CSRF: a page elsewhere posting the attacker's own token, as JSON or as either form.
        let token = try stack.token(sub: "110000000000000000009")
        // The same without Origin, from a browser whose Sec-Fetch-Site says where the post comes from.
        let from: [[String: String]] = [["Origin": "https://evil.example"], ["Sec-Fetch-Site": "cross-site"], ["Sec-Fetch-Site": "same-site"]]
        for site in from {
            for (type, body, cookie) in [("application/json", #"{"idToken":"\#(token)"}"#, ""),
                                         ("application/x-www-form-urlencoded", "idtoken=\(token)", ""),
                                         ("application/x-www-form-urlencoded", "credential=\(token)&g_csrf_token=c1", "g_csrf_token=c1")] {
                var headers = site.merging(["Content-Type": type]) { $1 }
                if !cookie.isEmpty { headers["Cookie"] = cookie }
                let answer = try stack.request("POST", "/tokensignin", headers: headers, body: body)
                #expect(answer.status == 403, "\(site) \(type): \(answer)")
                #expect(answer.errorCode == "csrf_check_failed")
            }
        }
        #expect(try stack.count("signin.users WHERE google_sub = '110000000000000000009'") == 0)
    }

    @Test func otherConfiguredClientIDIsAcceptedAndRecorded() throws {
        let answer = try stack.signIn(try stack.token(sub: "110000000000000000006", aud: stack.otherClientID))
        #expect(answer.status == 200, "\(answer)")
        #expect(try stack.psql("""
            SELECT s.client_id FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id
            WHERE u.google_sub = '110000000000000000006'
            """)[0][0] == stack.otherClientID)
    }

    @Test func webFormWithMatchingCsrfCookieRedirects() throws {
        let token = try stack.token(sub: "110000000000000000007")
        let answer = try stack.request("POST", "/tokensignin",
                                       headers: ["Content-Type": "application/x-www-form-urlencoded", "Cookie": "g_csrf_token=abc123"],
                                       body: "credential=\(token)&g_csrf_token=abc123")
        #expect(answer.status == 303, "\(answer)")
        #expect(answer.header("Location") == "/welcome")
        #expect(answer.headers("Set-Cookie").contains { $0.hasPrefix("__Host-tokensignin=") })
        #expect(try stack.count("signin.users WHERE google_sub = '110000000000000000007'") == 1)
    }

    @Test(arguments: [
        ("g_csrf_token=abc123", "credential=TOKEN&g_csrf_token=zzz"),
        ("", "credential=TOKEN&g_csrf_token=abc123"),
        ("g_csrf_token=abc123", "credential=TOKEN"),
    ])
    func webFormWithoutMatchingCsrfIsForbiddenAndWritesNothing(cookie: String, body: String) throws {
        let sub = "1200000000000000000\(abs(body.hashValue % 90) + 10)"
        let token = try stack.token(sub: sub)
        var headers = ["Content-Type": "application/x-www-form-urlencoded"]
        if !cookie.isEmpty { headers["Cookie"] = cookie }
        let answer = try stack.request("POST", "/tokensignin", headers: headers,
                                       body: body.replacingOccurrences(of: "TOKEN", with: token))
        #expect(answer.status == 403, "\(answer)")
        #expect(answer.errorCode != nil)
        #expect(try stack.count("signin.users WHERE google_sub = '\(sub)'") == 0)
    }

    @Test func rejectedTokensAreUnauthorizedWithoutDetailAndCreateNoUser() throws {
        let now = Int(Date().timeIntervalSince1970)
        let good = try stack.token(sub: "130000000000000000001")
        var parts = good.split(separator: ".").map(String.init)
        parts[2] = String(parts[2].reversed())
        let cases: [(String, String)] = [
            ("expired", try stack.token(sub: "130000000000000000001", iat: now - 7200, ttl: 3600)),
            ("bad_audience", try stack.token(sub: "130000000000000000001", aud: "1000000000009-someoneelse.apps.googleusercontent.com")),
            ("bad_signature", parts.joined(separator: ".")),
            ("unknown_kid", try stack.token(sub: "130000000000000000001", kid: "not-a-known-kid")),
            ("malformed", "not-a-token"),
        ]
        for (reason, token) in cases {
            let answer = try stack.signIn(token)
            #expect(answer.status == 401, "\(reason): \(answer)")
            #expect(answer.errorCode == "invalid_token", "\(reason)")
            #expect(!answer.body.contains(reason), "the precise reason goes to the log, not the client")
            #expect(answer.headers("Set-Cookie").isEmpty)
        }
        #expect(try stack.count("signin.users WHERE google_sub = '130000000000000000001'") == 0)
        #expect(try stack.count("signin.sign_ins WHERE outcome = 'failure' AND reason = 'expired'") >= 1)
        #expect(try stack.count("signin.sign_ins WHERE outcome = 'failure' AND reason = 'bad_audience'") >= 1)
    }

    /// Google-signed tokens for our audience that are not a person signing in through one of the site's clients: a
    /// service account's (its metadata server mints one for any audience) and one issued to another project's
    /// client. 401, no user, no session, and the audit row names the reason.
    @Test(arguments: [
        ("service_account", nil, "robot@my-project.iam.gserviceaccount.com"),
        ("service_account", "104029292853099978293", "123456789012-compute@developer.gserviceaccount.com"),
        ("unauthorized_party", "104029292853099978293", nil),
        ("unauthorized_party", "999999999999-otherproject.apps.googleusercontent.com", "someone@example.com"),
    ] as [(String, String?, String?)])
    func tokensOfServiceAccountsAndOtherProjectsAreRefused(reason: String, azp: String?, email: String?) throws {
        let sub = "1400000000000000000\(reason.count)\(azp?.count ?? 0)"
        let answer = try stack.signIn(try stack.token(sub: sub, azp: azp, email: email))
        #expect(answer.status == 401 && answer.errorCode == "invalid_token", "\(answer)")
        #expect(answer.headers("Set-Cookie").isEmpty)
        #expect(try stack.count("signin.users WHERE google_sub = '\(sub)'") == 0)
        #expect(try stack.count("signin.sign_ins WHERE outcome = 'failure' AND reason = '\(reason)'") >= 1)
    }

    /// A flood of bad tokens through nginx: every one answered 401, but the audit gets at most two rows a second for
    /// one network and reason, so it cannot be grown without bound.
    @Test func aFloodOfBadTokensGrowsTheAuditByABoundedNumberOfRows() throws {
        let started = Date()
        for _ in 0..<40 {
            let answer = try stack.signIn("not-a-token", userAgent: "flood-e2e")
            #expect(answer.status == 401)
        }
        let seconds = Int(Date().timeIntervalSince(started).rounded(.up)) + 1
        let rows = try stack.count("signin.sign_ins WHERE user_agent = 'flood-e2e'")
        #expect(rows >= 1 && rows <= 2 * seconds && rows < 40, "\(rows) rows in \(seconds) s")
    }

    /// The site's Android or iOS client shares the web client's project number: its tokens sign in without being listed.
    @Test func aClientOfTheSameProjectSignsInWithoutBeingListed() throws {
        let project = String(stack.clientID.prefix { $0 != "-" })
        let answer = try stack.signIn(try stack.token(sub: "140000000000000000099", azp: "\(project)-androidapp.apps.googleusercontent.com"))
        #expect(answer.status == 200, "\(answer)")
    }

    @Test(arguments: [
        ("application/json", "{not json", 400, "invalid_request"),
        ("application/json", #"{"idToken": 5}"#, 400, "invalid_request"),
        ("application/json", #"{"other": "x"}"#, 400, "invalid_request"),
        ("application/json", "", 400, "invalid_request"),
        ("application/x-www-form-urlencoded", "idtoken=%zz", 400, "invalid_request"),
        ("application/x-www-form-urlencoded", "nothing=here", 400, "invalid_request"),
        ("text/plain", "idtoken=x", 415, "unsupported_media_type"),
    ])
    func badBodiesGetClearStatusesAndWriteNothing(contentType: String, body: String, status: Int, code: String) throws {
        let before = try stack.count("signin.sign_ins")
        let answer = try stack.request("POST", "/tokensignin", headers: ["Content-Type": contentType], body: body)
        #expect(answer.status == status, "\(answer)")
        #expect(answer.errorCode == code)
        #expect(answer.json["error_description"] is String)
        #expect(try stack.count("signin.sign_ins") == before)
    }

    @Test func wrongMethodIs405WithAllow() throws {
        let answer = try stack.request("GET", "/tokensignin")
        #expect(answer.status == 405)
        #expect(answer.header("Allow") == "POST")
        #expect(answer.errorCode == "method_not_allowed")
    }

    @Test func unknownPathIs404() throws {
        let answer = try stack.request("GET", "/sessions/no/such/thing")
        #expect(answer.status == 404, "\(answer)")
        #expect(answer.errorCode == "not_found")
    }

    @Test func bodyOver64KBIs413ThroughNginx() throws {
        let answer = try stack.request("POST", "/tokensignin", headers: ["Content-Type": "application/json"],
                                       body: #"{"idToken":""# + String(repeating: "a", count: 70_000) + #""}"#)
        #expect(answer.status == 413)
        // nginx's own refusal, in the documented JSON shape rather than an HTML page.
        #expect(answer.errorCode == "request_too_large", "\(answer)")
        #expect(answer.header("Content-Type") == "application/json" && answer.header("Cache-Control") == "no-store")
    }

    @Test func everyAnswerCarriesNginxsRequestID() throws {
        let answer = try stack.request("DELETE", "/sessions/abc")
        let id = try #require(answer.header("X-Request-Id"), "\(answer)")
        #expect(id.count == 32 && id.allSatisfy(\.isHexDigit))
    }

    @Test func bodyOver64KBIs413FromTheResponderItself() throws {
        // Straight to the FastCGI socket, bypassing nginx's client_max_body_size.
        let body = #"{"idToken":""# + String(repeating: "a", count: 70_000) + #""}"#
        let result = try run("/usr/bin/cgi-fcgi", ["-bind", "-connect", stack.socketPath], environment: [
            "REQUEST_METHOD": "POST", "REQUEST_URI": "/tokensignin", "DOCUMENT_URI": "/tokensignin",
            "SCRIPT_NAME": "/tokensignin", "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": String(body.utf8.count),
            "QUERY_STRING": "", "REMOTE_ADDR": "127.0.0.1", "SERVER_PROTOCOL": "HTTP/1.1",
        ], stdin: body)
        #expect(result.stdout.hasPrefix("Status: 413"), "\(result.stdout)")
        #expect(result.stdout.contains("request_too_large"))
    }

    @Test func fortyConcurrentFirstSignInsOfOneUserGiveOneRow() throws {
        let token = try stack.token(sub: "140000000000000000001")
        let statuses = ConcurrentStatuses()
        let stack = self.stack
        DispatchQueue.concurrentPerform(iterations: 40) { _ in
            let status = (try? stack.signIn(token).status) ?? -1
            statuses.append(status)
        }
        #expect(statuses.values.allSatisfy { $0 == 200 }, "\(statuses.values)")
        #expect(try stack.count("signin.users WHERE google_sub = '140000000000000000001'") == 1)
        #expect(try stack.count("signin.sessions s JOIN signin.users u ON u.id = s.user_id WHERE u.google_sub = '140000000000000000001'") == 40)
    }
}

final class ConcurrentStatuses: @unchecked Sendable {
    // SAFETY: every access goes through the lock.
    private let lock = NSLock()
    private var stored: [Int] = []
    func append(_ value: Int) { lock.lock(); stored.append(value); lock.unlock() }
    var values: [Int] { lock.lock(); defer { lock.unlock() }; return stored }
}

/// Sign-ins that arrive together, on a stack of their own (the suite above counts every session row).
@Suite struct SignInBatchEndToEndTests {
    /// The default lane opens sign-ins that arrive together in one batch (one database round trip, one
    /// transaction): under concurrent sign-ins of eight users through nginx, every answer is its own user's,
    /// every session is valid for that user alone, and the responder's metrics show that batches were made.
    /// With `TOKENSIGNIN_SIGNIN_BATCH=1` (a stack of its own) the same load is answered alike, and no sign-in
    /// is ever opened in a batch.
    @Test(arguments: [true, false])
    func concurrentSignInsOfDifferentUsersEachGetTheirOwnSession(batching: Bool) throws {
        let stack = batching ? try SharedStacks.stack("signins")
                             : try SharedStacks.stack("signinsalone", environment: ["TOKENSIGNIN_SIGNIN_BATCH": "1"])
        // Started in the reverse of their order by sub, so a batch's statements (run in sub order) are not in
        // the order its requests came in.
        let subs = (0..<8).map { "11000000000000000009\(7 - $0)" }
        let tokens = try subs.map { try stack.token(sub: $0) }
        let work = stack.directory.appendingPathComponent("batch-signins").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }  // ID and session tokens
        let perUser = 30
        var batches = 0.0
        var opened = 0
        for round in 0..<10 where (batching && batches == 0) || round < 3 {
            var loads: [pid_t] = []
            for (index, token) in tokens.enumerated() {
                let entries = (0..<perUser).map { n in
                    curlEntry(url: "https://127.0.0.1:\(stack.port)/tokensignin", headers: ["Content-Type: application/json"],
                              data: #"{"idToken":"\#(token)"}"#, output: "\(work)/answer-\(index)-\(n)")
                }
                try entries.joined(separator: "next\n").write(toFile: "\(work)/signin-\(index).curl", atomically: true, encoding: .utf8)
                loads.append(try spawnCurl(config: "\(work)/signin-\(index).curl", codes: "\(work)/codes-\(index)"))
            }
            for pid in loads { _ = waitForExit(pid) }
            var sessions: [(token: String, sub: String, userID: String)] = []
            for (index, sub) in subs.enumerated() {
                let codes = try String(contentsOfFile: "\(work)/codes-\(index)", encoding: .utf8).split(separator: "\n")
                #expect(codes == Array(repeating: "200", count: perUser), "round \(round), user \(index): \(codes)")
                for n in 0..<perUser {
                    let body = try Data(contentsOf: URL(fileURLWithPath: "\(work)/answer-\(index)-\(n)"))
                    let json = try JSONSerialization.jsonObject(with: body) as? [String: Any] ?? [:]
                    let user = json["user"] as? [String: Any]
                    #expect(user?["sub"] as? String == sub, "round \(round), user \(index), answer \(n) is not its own")
                    if let token = (json["session"] as? [String: Any])?["token"] as? String, let id = user?["id"] {
                        sessions.append((token, sub, "\(id)"))
                    }
                }
            }
            #expect(Set(sessions.map(\.token)).count == sessions.count, "a session token was given twice")
            // One user id per sub in every answer (the id comes from the database's row for that sign-in).
            let ids = Dictionary(grouping: sessions, by: \.sub).mapValues { Set($0.map(\.userID)) }
            #expect(ids.values.allSatisfy { $0.count == 1 } && Set(ids.values.flatMap { $0 }).count == subs.count, "round \(round): \(ids)")
            for session in sessions.prefix(40) {
                let check = try stack.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(session.token)"])
                #expect(check.status == 200 && check.header("X-User-Sub") == session.sub && check.header("X-User-Id") == session.userID)
            }
            opened += sessions.count
            let metrics = try stack.operatorsRequest("GET", "/metrics")
            let line = metrics.body.split(separator: "\n").first { $0.hasPrefix(#"tokensignin_database_batches_total{operation="sign_in"}"#) }
            batches = line.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
        }
        if batching {
            #expect(batches > 0, "no sign-in was opened in a batch in 10 rounds of 8 x \(perUser) concurrent sign-ins")
        } else {
            #expect(batches == 0, "\(batches) batches of sign-ins with TOKENSIGNIN_SIGNIN_BATCH=1")
        }
        let list = subs.map { "'\($0)'" }.joined(separator: ",")
        let rows = try stack.psql("SELECT count(DISTINCT u.id), count(*) FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id WHERE u.google_sub IN (\(list))")
        #expect(rows == [["8", String(opened)]])
        // A batch's log lines are written together, each a line of its own with its own stamp.
        let log = stack.serverLog.split(separator: "\n")
        #expect(log.allSatisfy { $0.hasPrefix("ts=") }, "\(log.first { !$0.hasPrefix("ts=") } ?? "")")
        #expect(log.filter { $0.contains(" event=request route=sign_in method=POST status=200 ") }.count == opened)
    }
}
