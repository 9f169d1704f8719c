// Sessions protecting the rest of the site: /auth/session (auth_request), sign-out, the devices list,
// revocation by every route, expiry by both rules, and the operator commands.
import Foundation
import Testing

@Suite(.serialized) final class SessionEndToEndTests {
    let stack: Stack
    init() throws { stack = try SharedStacks.stack("sessions") }

    /// Signs `sub` in and returns (session token, user id).
    private func signedIn(_ sub: String, email: String? = nil, userAgent: String = "e2e-test") throws -> (token: String, userID: String) {
        let answer = try stack.signIn(try stack.token(sub: sub, email: email), userAgent: userAgent)
        try #require(answer.status == 200, "\(answer)")
        let session = try #require(answer.json["session"] as? [String: Any])
        let user = try #require(answer.json["user"] as? [String: Any])
        return (try #require(session["token"] as? String), "\(user["id"]!)")
    }

    private func check(cookie token: String) throws -> Answer {
        try stack.request("GET", "/auth/session", headers: ["Cookie": "__Host-tokensignin=\(token)"])
    }
    private func check(bearer token: String) throws -> Answer {
        try stack.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"])
    }

    @Test func liveSessionPassesWithUserHeadersByCookieAndByBearer() throws {
        let (token, userID) = try signedIn("210000000000000000001", email: "grace@example.com")
        for answer in [try check(cookie: token), try check(bearer: token)] {
            #expect(answer.status == 200, "\(answer)")
            #expect(answer.header("X-User-Id") == userID)
            #expect(answer.header("X-User-Sub") == "210000000000000000001")
            #expect(answer.header("X-User-Email") == "grace@example.com")
            #expect(answer.header("X-User-Email-Verified") == "true")
            #expect(answer.headers("Set-Cookie").isEmpty, "the check never sets cookies")
            #expect(answer.json["sub"] as? String == "210000000000000000001")
        }
    }

    /// The checks lane answers checks that arrive together in one batch (one database round trip): under
    /// concurrent checks of different users through nginx, every answer still carries its own user, and the
    /// responder's metrics show that batches were made (the session cache off) or that the cache answered (on).
    @Test(arguments: ["off", "on"])
    func concurrentChecksOfDifferentUsersEachGetTheirOwnIdentity(cache: String) throws {
        let stack = try Stack("batchchecks_\(cache)", environment: ["TOKENSIGNIN_SESSION_CACHE": cache])
        let users = try (0..<8).map { index in
            let answer = try stack.signIn(try stack.token(sub: "2100000000000000009\(index)"))
            try #require(answer.status == 200, "\(answer)")
            return (token: try #require((answer.json["session"] as? [String: Any])?["token"] as? String),
                    userID: "\(try #require((answer.json["user"] as? [String: Any])?["id"]))")
        }
        let work = stack.directory.appendingPathComponent("batch-checks").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }  // session tokens
        var batches = 0.0
        for round in 0..<10 where batches == 0 {
            var loads: [pid_t] = []
            for (index, user) in users.enumerated() {
                let entry = curlEntry(url: "https://127.0.0.1:\(stack.port)/auth/session", headers: ["Authorization: Bearer \(user.token)"],
                                      data: nil, output: "/dev/null", writeOut: "%{http_code} %header{x-user-id}\\n")
                try Array(repeating: entry, count: 150).joined(separator: "next\n").write(toFile: "\(work)/check-\(index).curl",
                                                                                    atomically: true, encoding: .utf8)
                loads.append(try spawnCurl(config: "\(work)/check-\(index).curl", codes: "\(work)/codes-\(index)"))
            }
            for pid in loads { _ = waitForExit(pid) }
            for (index, user) in users.enumerated() {
                let lines = try String(contentsOfFile: "\(work)/codes-\(index)", encoding: .utf8).split(separator: "\n")
                #expect(lines.count == 150, "round \(round), user \(index)")
                let wrong = lines.filter { $0 != "200 \(user.userID)" }
                #expect(wrong.isEmpty, "round \(round), user \(index): \(wrong.count) answers not its own, e.g. \(wrong.first ?? "")")
            }
            let metrics = try stack.operatorsRequest("GET", "/metrics")
            let counter = cache == "on" ? #"tokensignin_session_cache_lookups_total{result="hit"}"#
                : #"tokensignin_database_batches_total{operation="check_session"}"#
            let line = metrics.body.split(separator: "\n").first { $0.hasPrefix(counter) }
            batches = line.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
        }
        #expect(batches > 0, "no check was answered in a batch (or from the cache) in 10 rounds of 8 x 150 concurrent checks")
    }

    @Test func anUnverifiedEmailNeverReachesTheApplication() throws {
        let answer = try stack.signIn(try stack.token(sub: "210000000000000000020", email: "victim@example.com", emailVerified: false))
        let token = try #require((answer.json["session"] as? [String: Any])?["token"] as? String)
        let check = try check(bearer: token)
        #expect(check.status == 200)
        #expect(check.header("X-User-Email") == nil)
        #expect(check.header("X-User-Email-Verified") == "false")
        let app = try stack.request("GET", "/app/x", headers: ["Authorization": "Bearer \(token)"])
        #expect(app.body.contains("sub=210000000000000000020 email= verified=false"), "\(app.body)")
        let spoofed = try stack.request("GET", "/app/x", headers: ["Authorization": "Bearer \(token)", "X-User-Email": "victim@example.com"])
        #expect(spoofed.body.contains("email= verified=false"), "a client cannot add the header itself: \(spoofed.body)")
    }

    @Test func nonBearerAuthorizationFallsBackToTheCookie() throws {
        let (token, _) = try signedIn("210000000000000000021")
        let answer = try stack.request("GET", "/auth/session",
                                       headers: ["Authorization": "Basic c3RhZ2luZzpzZWNyZXQ=", "Cookie": "__Host-tokensignin=\(token)"])
        #expect(answer.status == 200, "\(answer)")
    }

    @Test func missingUnknownForgedOrTruncatedSessionsAreUnauthorized() throws {
        let (token, _) = try signedIn("210000000000000000002")
        let forged = String(token.dropLast()) + (token.last == "A" ? "B" : "A")
        for answer in [
            try stack.request("GET", "/auth/session"),
            try check(cookie: "not-a-session"),
            try check(bearer: forged),
            try check(bearer: String(token.prefix(20))),
            try stack.request("GET", "/auth/session", headers: ["Authorization": "Basic \(token)"]),
        ] {
            #expect(answer.status == 401, "\(answer)")
            #expect(answer.headers("Set-Cookie").isEmpty)
        }
    }

    @Test func signOutRevokesClearsTheCookieAndNeedsTheSiteOrigin() throws {
        let (token, _) = try signedIn("210000000000000000003")
        let cookie = "__Host-tokensignin=\(token)"

        let crossSite = try stack.request("POST", "/tokensignout", headers: ["Cookie": cookie, "Origin": "https://evil.example"])
        #expect(crossSite.status == 403, "\(crossSite)")
        let noOrigin = try stack.request("POST", "/tokensignout", headers: ["Cookie": cookie])
        #expect(noOrigin.status == 403, "\(noOrigin)")
        #expect(try check(cookie: token).status == 200, "a refused sign-out changes nothing")

        let signOut = try stack.request("POST", "/tokensignout", headers: ["Cookie": cookie, "Origin": stack.siteOrigin])
        #expect(signOut.status == 204, "\(signOut)")
        #expect(signOut.headers("Set-Cookie").contains { $0.hasPrefix("__Host-tokensignin=;") && $0.contains("Max-Age=0") })
        #expect(try check(cookie: token).status == 401, "revocation takes effect on the very next check")
        #expect(try stack.psql("SELECT revoked_reason FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id WHERE u.google_sub = '210000000000000000003'")[0][0] == "sign_out")
    }

    @Test func sameOriginFetchMetadataIsEnoughWithoutOrigin() throws {
        let (token, _) = try signedIn("210000000000000000004")
        let answer = try stack.request("POST", "/tokensignout",
                                       headers: ["Cookie": "__Host-tokensignin=\(token)", "Sec-Fetch-Site": "same-origin"])
        #expect(answer.status == 204, "\(answer)")
        #expect(try check(cookie: token).status == 401)
    }

    /// A browser's cross-site request carries no Origin here, only Sec-Fetch-Site: refused like a wrong Origin,
    /// whether the session is the cookie or a Bearer header, and nothing is revoked.
    @Test(arguments: ["cross-site", "same-site"])
    func changesWithoutOriginFromAnotherSiteAreRefused(fetchSite: String) throws {
        let sub = fetchSite == "cross-site" ? "210000000000000000030" : "210000000000000000031"
        let (token, _) = try signedIn(sub)
        let (phone, _) = try signedIn(sub)
        let list = try stack.request("GET", "/sessions", headers: ["Authorization": "Bearer \(phone)"])
        let phoneID = "\((try #require((list.json["sessions"] as? [[String: Any]])?.first))["id"]!)"
        for presented in [["Cookie": "__Host-tokensignin=\(token)"], ["Authorization": "Bearer \(token)"]] {
            let headers = presented.merging(["Sec-Fetch-Site": fetchSite]) { $1 }
            for (method, path) in [("POST", "/tokensignout"), ("POST", "/tokensignout?all=1"), ("DELETE", "/sessions/\(phoneID)")] {
                let answer = try stack.request(method, path, headers: headers)
                #expect(answer.status == 403 && answer.errorCode == "csrf_check_failed", "\(presented) \(method) \(path): \(answer)")
            }
        }
        #expect(try check(bearer: token).status == 200)
        #expect(try check(bearer: phone).status == 200)
    }

    @Test func bearerSignOutNeedsNoOriginAndAllRevokesEverySession() throws {
        let (first, _) = try signedIn("210000000000000000005")
        let (second, _) = try signedIn("210000000000000000005")
        let (other, _) = try signedIn("210000000000000000006")
        let answer = try stack.request("POST", "/tokensignout?all=1", headers: ["Authorization": "Bearer \(first)"])
        #expect(answer.status == 204, "\(answer)")
        #expect(try check(bearer: first).status == 401)
        #expect(try check(bearer: second).status == 401)
        #expect(try check(bearer: other).status == 200, "another user's session is untouched")
    }

    @Test func signOutWithoutASessionIsUnauthorized() throws {
        let answer = try stack.request("POST", "/tokensignout", headers: ["Authorization": "Bearer nope"])
        #expect(answer.status == 401, "\(answer)")
    }

    @Test func devicesListShowsActiveSessionsAndDeleteRevokesOwnOnly() throws {
        let (phone, _) = try signedIn("210000000000000000007", userAgent: "phone/1")
        let (laptop, _) = try signedIn("210000000000000000007", userAgent: "laptop/1")
        let (stranger, _) = try signedIn("210000000000000000008")

        let list = try stack.request("GET", "/sessions", headers: ["Authorization": "Bearer \(laptop)"])
        #expect(list.status == 200, "\(list)")
        let sessions = try #require(list.json["sessions"] as? [[String: Any]])
        #expect(sessions.count == 2)
        #expect(sessions.filter { $0["current"] as? Bool == true }.count == 1)
        let current = try #require(sessions.first { $0["current"] as? Bool == true })
        #expect(current["user_agent"] as? String == "laptop/1")
        let phoneSession = try #require(sessions.first { $0["user_agent"] as? String == "phone/1" })
        for field in ["id", "created_at", "last_seen_at", "expires_at", "ip"] {
            #expect(phoneSession[field] != nil, "missing \(field)")
        }
        let phoneID = "\(phoneSession["id"]!)"

        let strangerList = try stack.request("GET", "/sessions", headers: ["Authorization": "Bearer \(stranger)"])
        let strangerID = "\((try #require((strangerList.json["sessions"] as? [[String: Any]])?.first))["id"]!)"
        let notMine = try stack.request("DELETE", "/sessions/\(strangerID)", headers: ["Authorization": "Bearer \(laptop)"])
        #expect(notMine.status == 404, "\(notMine)")
        #expect(try check(bearer: stranger).status == 200)

        let crossSite = try stack.request("DELETE", "/sessions/\(phoneID)",
                                          headers: ["Cookie": "__Host-tokensignin=\(laptop)", "Origin": "https://evil.example"])
        #expect(crossSite.status == 403)
        let delete = try stack.request("DELETE", "/sessions/\(phoneID)",
                                       headers: ["Cookie": "__Host-tokensignin=\(laptop)", "Origin": stack.siteOrigin])
        #expect(delete.status == 204, "\(delete)")
        #expect(try check(bearer: phone).status == 401)
        #expect(try check(bearer: laptop).status == 200)

        #expect(try stack.request("GET", "/sessions").status == 401)
        #expect(try stack.request("PUT", "/sessions", headers: ["Authorization": "Bearer \(laptop)"]).status == 405)
        #expect(try stack.request("DELETE", "/sessions/not-a-number", headers: ["Authorization": "Bearer \(laptop)"]).status == 404)
    }

    @Test func absoluteExpiryIsEnforced() throws {
        let (token, _) = try signedIn("210000000000000000009")
        try stack.psql("UPDATE signin.sessions s SET created_at = now() - interval '2 days', expires_at = now() - interval '1 second' FROM signin.users u WHERE u.id = s.user_id AND u.google_sub = '210000000000000000009'")
        #expect(try check(bearer: token).status == 401)
    }

    @Test func idleTimeoutIsEnforced() throws {
        let (token, _) = try signedIn("210000000000000000010")
        try stack.psql("UPDATE signin.sessions s SET last_seen_at = now() - interval '7 days 1 minute' FROM signin.users u WHERE u.id = s.user_id AND u.google_sub = '210000000000000000010'")
        #expect(try check(bearer: token).status == 401)
    }

    @Test func lastSeenIsWrittenAtMostOncePerMinute() throws {
        let (token, _) = try signedIn("210000000000000000011")
        let query = "SELECT last_seen_at FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id WHERE u.google_sub = '210000000000000000011'"
        try stack.psql("UPDATE signin.sessions s SET last_seen_at = now() - interval '5 minutes' FROM signin.users u WHERE u.id = s.user_id AND u.google_sub = '210000000000000000011'")
        #expect(try check(bearer: token).status == 200)
        let touched = try stack.psql(query)[0][0]
        #expect(try check(bearer: token).status == 200)
        #expect(try stack.psql(query)[0][0] == touched, "a second check within the minute writes nothing")
        #expect(try stack.count("signin.sessions s JOIN signin.users u ON u.id = s.user_id WHERE u.google_sub = '210000000000000000011' AND last_seen_at > now() - interval '1 minute'") == 1)
    }

    @Test func protectedLocationIsReachedOnlyWithALiveSession() throws {
        let (token, userID) = try signedIn("210000000000000000012", email: "app@example.com")
        let anonymous = try stack.request("GET", "/app/page")
        #expect(anonymous.status == 302)
        #expect(anonymous.header("Location")?.hasSuffix("/signin.html") == true)
        let app = try stack.request("GET", "/app/page", headers: ["Cookie": "__Host-tokensignin=\(token)"])
        #expect(app.status == 200, "\(app)")
        #expect(app.body.contains("user_id=\(userID) sub=210000000000000000012 email=app@example.com"), "\(app.body)")
        let spoofed = try stack.request("GET", "/app/page", headers: ["X-User-Id": "1", "X-User-Sub": "attacker"])
        #expect(spoofed.status == 302)
    }

    @Test func operatorCommandsListRevokeAndPrune() throws {
        let (a, _) = try signedIn("210000000000000000013")
        let (b, _) = try signedIn("210000000000000000013")
        let env = stack.databaseEnvironment

        let list = try run(Paths.binary, ["sessions", "list", "--user", "210000000000000000013"], environment: env)
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.split(separator: "\n").count >= 2)
        #expect(!list.stdout.contains(a) && !list.stdout.contains(b))

        let id = try stack.psql("SELECT s.id FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id WHERE u.google_sub = '210000000000000000013' ORDER BY s.id LIMIT 1")[0][0]
        let one = try run(Paths.binary, ["sessions", "revoke", "--session", id], environment: env)
        #expect(one.status == 0, "\(one.stderr)")
        #expect(try check(bearer: a).status == 401)
        #expect(try check(bearer: b).status == 200)

        let all = try run(Paths.binary, ["sessions", "revoke", "--user", "210000000000000000013"], environment: env)
        #expect(all.status == 0, "\(all.stderr)")
        #expect(try check(bearer: b).status == 401)
        #expect(try stack.psql("SELECT DISTINCT revoked_reason FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id WHERE u.google_sub = '210000000000000000013'").count >= 1)

        for bad in [["sessions"], ["sessions", "list"], ["sessions", "revoke"], ["sessions", "revoke", "--session", "x"], ["sessions", "frobnicate"], ["prune", "--nonsense"]] {
            let result = try run(Paths.binary, bad, environment: env)
            #expect(result.status == 2, "\(bad) should be a usage error: \(result.stderr)")
            #expect(result.stderr.lowercased().contains("usage"), "\(bad)")
        }

        try stack.psql("UPDATE signin.sessions s SET created_at = now() - interval '3 days', expires_at = now() - interval '1 day' FROM signin.users u WHERE u.id = s.user_id AND u.google_sub = '210000000000000000013'")
        let prune = try run(Paths.binary, ["prune"], environment: env)
        #expect(prune.status == 0, "\(prune.stderr)")
        #expect(try stack.count("signin.sessions s JOIN signin.users u ON u.id = s.user_id WHERE u.google_sub = '210000000000000000013'") == 0)
        #expect(!prune.stdout.isEmpty, "prune says what it did")
    }
}
