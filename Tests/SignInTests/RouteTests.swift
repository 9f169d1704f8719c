// docs/http.md, in process: every route's statuses, headers, cookies, CSRF/Origin rules and error bodies, against
// the in-memory store and a fixed verifier (the end-to-end suites prove the nginx -> FastCGI -> PostgreSQL path).
@testable import Commands
@testable import FastCGI
import GoogleKeys
import Foundation
import GoogleKeys
@testable import IDToken
import Logging
@testable import Sessions
@testable import SignIn
import Store
import TestSupport
import Testing

/// A verifier that answers from a table: token text -> result; anything else is `malformed`.
final class FixedVerifier: TokenVerifying, @unchecked Sendable {
    // SAFETY: tests set `keyReadiness` before the requests that read it, on the same thread.
    let answers: [String: Result<VerifiedToken, IDTokenError>]
    /// Security event tokens: token text -> result.
    var events: [String: Result<AcceptedSecurityEvent, IDTokenError>] = [:]
    var keyReadiness = KeyReadiness(loaded: true, stale: false, ageSeconds: 42, fetches: 1, failures: 0)
    /// How often a refresh of due keys was asked for.
    var refreshesAsked = 0
    func refreshIfDue() { refreshesAsked += 1 }
    init(answers: [String: Result<VerifiedToken, IDTokenError>]) { self.answers = answers }
    func verify(_ token: String, with verifier: Verifier, now: Int64) -> Result<VerifiedToken, IDTokenError> {
        answers[token] ?? .failure(IDTokenError(.malformed))
    }
    func verify(_ token: String, with verifier: SecurityEventVerifier, now: Int64) -> Result<AcceptedSecurityEvent, IDTokenError> {
        events[token] ?? .failure(IDTokenError(.malformed))
    }
}

/// One application over an in-memory store, and the log lines it wrote.
final class RouteHarness: @unchecked Sendable {
    // SAFETY: used by one test on one thread.
    static let site = "https://app.example"
    let store: InMemoryStore
    let app: Application
    let verifier = FixedVerifier(answers: RouteHarness.tokens)
    let metrics = Metrics()
    private let lines = LockedLines()

    /// Tokens the fixed verifier knows: `good-<sub>` verifies for that sub; the others fail as named.
    static let tokens: [String: Result<VerifiedToken, IDTokenError>] = {
        var answers: [String: Result<VerifiedToken, IDTokenError>] = [:]
        for sub in ["ada", "bob", "eve"] { answers["good-\(sub)"] = .success(verifiedToken(sub: sub, email: "\(sub)@example.com")) }
        answers["good-unverified"] = .success(verifiedToken(sub: "unverified", email: "who@example.com", emailVerified: false))
        answers["good-newline"] = .success(verifiedToken(sub: "newline", email: "a@example.com\r\nX-User-Id: 1"))
        answers["expired"] = .failure(IDTokenError(.expired, "exp"))
        answers["other-domain"] = .failure(IDTokenError(.hostedDomainNotAllowed))
        answers["no-keys"] = .failure(IDTokenError(.keysUnavailable, "fetch failed"))
        return answers
    }()

    init(environment: [String: String] = [:], keySource: KeySource = .google, sessionCache: SessionCache? = nil,
         readiness: Readiness = Readiness()) throws {
        let configuration = try Configuration(environment: [
            "TOKENSIGNIN_CLIENT_IDS": "1234567890-web.apps.googleusercontent.com",
            "TOKENSIGNIN_SITE_ORIGINS": Self.site,
            "TOKENSIGNIN_SIGNIN_REDIRECT": "/welcome",
        ].merging(environment) { $1 }, processorCount: 2)
        store = InMemoryStore(policy: configuration.sessionPolicy)
        let lines = self.lines
        var service = Service(site: configuration.site, tokens: verifier, keySource: keySource, log: Log { lines.append($0) },
                              clock: { 1_800_000_000 }, metrics: metrics,
                              samples: { [Metrics.Sample(name: "tokensignin_busy_workers", help: "Workers serving a request.",
                                                         labels: [("lane", "default")], value: 1)] },
                              sessionCache: sessionCache)
        service.readiness = readiness
        app = Application(service: service, store: store)
    }

    var log: [String] { lines.all }

    func request(_ method: String, _ uri: String, headers: [String: String] = [:], contentType: String? = nil,
                 body: String = "", bodyTooLarge: Bool = false) -> Response {
        app.handle(Self.make(method, uri, headers: headers, contentType: contentType, body: body, bodyTooLarge: bodyTooLarge))
    }

    /// The request nginx's parameters make of this (`request` handles it).
    static func make(_ method: String, _ uri: String, headers: [String: String] = [:], contentType: String? = nil,
                     body: String = "", bodyTooLarge: Bool = false) -> Request {
        let parts = uri.split(separator: "?", maxSplits: 1)
        var params = ["REQUEST_METHOD": method, "DOCUMENT_URI": String(parts[0]), "REQUEST_URI": uri,
                      "QUERY_STRING": parts.count > 1 ? String(parts[1]) : "", "REMOTE_ADDR": "192.0.2.9",
                      "REQUEST_ID": "req-1"]
        if let contentType { params["CONTENT_TYPE"] = contentType }
        for (name, value) in headers { params[Request.parameterName(forHeader: name)] = value }
        return Request(params: params, body: Array(body.utf8), bodyTooLarge: bodyTooLarge)
    }

    /// POST /tokensignin with a JSON body.
    func signIn(_ token: String, headers: [String: String] = [:]) -> Response {
        request("POST", "/tokensignin", headers: headers, contentType: "application/json", body: #"{"idToken":"\#(token)"}"#)
    }

    /// Signs `sub` in and returns its session token.
    func session(_ sub: String = "ada") throws -> String {
        let answer = signIn("good-\(sub)")
        guard answer.status == 200, let token = (answer.json["session"] as? [String: Any])?["token"] as? String else {
            throw StoreError(.unexpectedResult, "sign-in failed: \(answer.text)")
        }
        return token
    }
}

extension Response {
    var text: String { String(decoding: body, as: UTF8.self) }
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }
    var errorCode: String? { json["error"] as? String }
    func headers(_ name: String) -> [String] { headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value) }
}

@Suite struct RoutingTests {
    /// The lanes `tokensignin serve` runs, and what may go in a batch: every check-lane request, and of the
    /// default lane's only sign-ins.
    @Test(arguments: [
        ("POST", "/tokensignin", 0, true), ("GET", "/auth/session", 1, true), ("GET", "/healthz", 1, true),
        ("GET", "/metrics", 1, true), ("POST", "/tokensignout", 0, false), ("GET", "/sessions", 0, false),
        ("DELETE", "/sessions/7", 0, false), ("POST", "/risc", 0, false), ("GET", "/nowhere", 0, false),
        ("GET", "/tokensignin", 0, false),
    ] as [(String, String, Int, Bool)])
    func lanesAndBatches(method: String, path: String, lane: Int, batches: Bool) {
        let request = RouteHarness.make(method, path)
        let placement = Routes.placement(of: request)
        #expect(placement.lane == lane && placement.batches == batches)
    }

    /// The server hands the placement's route back on the request, and the application answers by it without
    /// matching the path again: a request placed as `/healthz` is answered as `/healthz`, whatever its path says.
    @Test func aPlacedRequestIsAnsweredByTheRouteItWasPlacedOn() throws {
        let harness = try RouteHarness()
        let health = RouteHarness.make("GET", "/healthz")
        let placement = Routes.placement(of: health)
        #expect(Routes.table[placement.route].name == "healthz")
        var request = RouteHarness.make("GET", "/nowhere")
        #expect(harness.app.handle(request).status == 404)
        request.route = placement.route
        #expect(harness.app.handle(request).status == 200)
        #expect(Routes.placement(of: RouteHarness.make("GET", "/nowhere")).route == -1)
        #expect(Routes.placement(of: RouteHarness.make("DELETE", "/sessions/7")).route
                == Routes.table.firstIndex { $0.name == "revoke_session" })
    }

    /// `TOKENSIGNIN_SIGNIN_BATCH` sizes the default lane's batches (1: every sign-in alone); the checks lane's
    /// stay at 16.
    @Test(arguments: [(nil, 16), ("1", 1), ("5", 5), ("64", 64)] as [(String?, Int)])
    func theSignInBatchSettingSizesTheDefaultLanesBatches(setting: String?, batch: Int) throws {
        var environment = ["TOKENSIGNIN_CLIENT_IDS": "1234567890-web.apps.googleusercontent.com"]
        environment["TOKENSIGNIN_SIGNIN_BATCH"] = setting
        let lanes = Serve.lanes(try Configuration(environment: environment, processorCount: 2))
        #expect(lanes.map(\.name) == ["default", "checks"])
        #expect(lanes.map(\.batch) == [batch, 16])
        #expect(lanes.map(\.quick) == [false, true])
    }

    /// (method, path, status, Allow)
    @Test(arguments: [
        ("GET", "/tokensignin", 405, "POST"), ("PUT", "/tokensignin", 405, "POST"),
        ("GET", "/tokensignout", 405, "POST"), ("POST", "/sessions", 405, "GET, HEAD"),
        ("PUT", "/sessions/12", 405, "DELETE"), ("GET", "/sessions/12", 405, "DELETE"),
        ("GET", "/", 404, nil), ("GET", "/tokensignin/", 404, nil), ("DELETE", "/sessions/abc", 404, nil),
        ("DELETE", "/sessions/0", 404, nil), ("DELETE", "/sessions/1234567890123456789", 404, nil),
        ("GET", "/auth/sessions", 404, nil), ("POST", "/healthz", 405, "GET, HEAD"), ("DELETE", "/readyz", 405, "GET, HEAD"),
        ("PUT", "/metrics", 405, "GET, HEAD"),
    ] as [(String, String, Int, String?)])
    func unknownPathIs404AndWrongMethodIs405WithAllow(method: String, path: String, status: Int, allow: String?) throws {
        let h = try RouteHarness()
        let answer = h.request(method, path)
        #expect(answer.status == status)
        #expect(answer.header("Allow") == allow)
        #expect(answer.errorCode == (status == 404 ? "not_found" : "method_not_allowed"))
        #expect(answer.header("Content-Type") == "application/json" && answer.header("Cache-Control") == "no-store")
    }

    @Test(arguments: ["GET", "POST", "DELETE", "HEAD", "OPTIONS"])
    func sessionCheckAnswersAnyMethod(method: String) throws {
        let h = try RouteHarness()
        let token = try h.session()
        #expect(h.request(method, "/auth/session", headers: ["Authorization": "Bearer \(token)"]).status == 200)
        #expect(h.request(method, "/auth/session").status == 401)
    }

    @Test func nginxsRequestIDIsAnsweredAsXRequestIdWhenItIsOne() throws {
        let h = try RouteHarness()
        #expect(h.request("GET", "/nowhere").header("X-Request-Id") == "req-1")
        #expect(h.request("GET", "/healthz").header("X-Request-Id") == "req-1")
        let forged = h.app.handle(Request(params: ["REQUEST_METHOD": "GET", "DOCUMENT_URI": "/healthz",
                                                   "REQUEST_ID": "a\r\nSet-Cookie: x=1"]))
        #expect(forged.header("X-Request-Id") == nil && forged.status == 200)
        #expect(h.app.handle(Request(params: ["REQUEST_METHOD": "GET", "DOCUMENT_URI": "/healthz"])).header("X-Request-Id") == nil)
    }

    @Test func everyRequestIsLoggedWithRouteStatusDurationAndRequestIDButNeverATokenOrSecret() throws {
        let h = try RouteHarness()
        let token = try h.session()
        _ = h.request("GET", "/nowhere")
        _ = h.signIn("expired")
        _ = h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"])
        let log = h.log
        #expect(log.count == 3, "a successful session check is not logged: \(log)")
        #expect(log[0].contains("route=sign_in") && log[0].contains("status=200") && log[0].contains("request_id=req-1"))
        #expect(log[0].contains("duration_us="))
        #expect(log[1].contains("route=none") && log[1].contains("status=404"))
        #expect(log[2].contains("status=401") && log[2].contains("reason=expired"))
        #expect(!log.joined().contains(token) && !log.joined().contains("good-ada"))
    }
}

@Suite struct SignInRouteTests {
    @Test func jsonSignInAnswersUserSessionAndTheSessionCookie() throws {
        let h = try RouteHarness()
        let answer = h.signIn("good-ada")
        #expect(answer.status == 200)
        #expect(answer.header("Content-Type") == "application/json" && answer.header("Cache-Control") == "no-store")
        #expect(answer.header("X-Content-Type-Options") == "nosniff")
        let user = try #require(answer.json["user"] as? [String: Any])
        #expect(user["sub"] as? String == "ada" && user["email"] as? String == "ada@example.com")
        #expect(user["email_verified"] as? Bool == true && user["created"] as? Bool == true && user["name"] as? String == "Ada")
        #expect(user["id"] as? Int == 1)
        let session = try #require(answer.json["session"] as? [String: Any])
        let token = try #require(session["token"] as? String)
        #expect(token.utf8.count == 43)
        #expect(session["expires_at"] as? String == "2027-02-14T08:00:00Z")  // 1_800_000_000 + 30 days
        #expect(answer.headers("Set-Cookie") == ["__Host-tokensignin=\(token); Path=/; Max-Age=2592000; Secure; HttpOnly; SameSite=Lax"])
        // Only the hash of the token is kept.
        #expect(h.store.sessions.map(\.hash) == [SessionToken(presented: token)!.hash])
        #expect(h.store.sessions[0].clientID == "1234567890-web.apps.googleusercontent.com" && h.store.sessions[0].ip == "192.0.2.9")
        #expect(h.signIn("good-ada").json["user"].flatMap { ($0 as? [String: Any])?["created"] as? Bool } == false)
    }

    @Test func formAndWebFormBodiesSignIn() throws {
        let h = try RouteHarness()
        let form = h.request("POST", "/tokensignin", contentType: "application/x-www-form-urlencoded", body: "idtoken=good-ada")
        #expect(form.status == 200 && form.json["session"] != nil)
        let web = h.request("POST", "/tokensignin", headers: ["Cookie": "g_csrf_token=abc", "Origin": "https://accounts.google.com"],
                            contentType: "application/x-www-form-urlencoded", body: "credential=good-bob&g_csrf_token=abc&select_by=btn")
        #expect(web.status == 303)
        #expect(web.header("Location") == "/welcome" && web.header("Cache-Control") == "no-store")
        #expect(web.headers("Set-Cookie").first?.hasPrefix("__Host-tokensignin=") == true)
        #expect(web.body.isEmpty)
        #expect(h.store.sessions.count == 2)
    }

    /// (content type, body, status, error) — every refusal of a body; nothing is written for any of them.
    @Test(arguments: [
        (nil, #"{"idToken":"good-ada"}"#, 415, "unsupported_media_type"),
        ("text/plain", "good-ada", 415, "unsupported_media_type"),
        ("application/json; charset=latin1", #"{"idToken":"good-ada"}"#, 415, "unsupported_media_type"),
        ("application/json", #"{"idToken":"good-ada""#, 400, "invalid_request"),
        ("application/json", #"["good-ada"]"#, 400, "invalid_request"),
        ("application/json", #"{"idToken":"good-ada","idToken":"good-bob"}"#, 400, "invalid_request"),
        ("application/json", #"{"idToken":42}"#, 400, "invalid_request"),
        ("application/json", #"{"other":"x"}"#, 400, "invalid_request"),
        ("application/json", #"{"idToken":""}"#, 400, "invalid_request"),
        ("application/json", #"{"idToken":"\#(String(repeating: "a", count: 16 * 1024 + 1))"}"#, 400, "invalid_request"),
        ("application/x-www-form-urlencoded", "idtoken=%zz", 400, "invalid_request"),
        ("application/x-www-form-urlencoded", "idtoken=a&credential=b&g_csrf_token=c", 400, "invalid_request"),
        ("application/x-www-form-urlencoded", "idtoken=good-ada&idtoken=good-bob", 400, "invalid_request"),
        ("application/x-www-form-urlencoded", "credential=good-ada&g_csrf_token=abc", 403, "csrf_check_failed"),
    ] as [(String?, String, Int, String)])
    func malformedBodiesAreRefusedAndChangeNothing(contentType: String?, body: String, status: Int, error: String) throws {
        let h = try RouteHarness()
        let answer = h.request("POST", "/tokensignin", contentType: contentType, body: body)
        #expect(answer.status == status)
        #expect(answer.errorCode == error)
        #expect(h.store.users.isEmpty && h.store.sessions.isEmpty)
        #expect(!answer.text.contains("good-ada"))
    }

    @Test func webFormCSRFCookieMustMatchTheField() throws {
        let h = try RouteHarness()
        for cookie in [nil, "g_csrf_token=other", "g_csrf_token="] as [String?] {
            let answer = h.request("POST", "/tokensignin", headers: cookie.map { ["Cookie": $0] } ?? [:],
                                   contentType: "application/x-www-form-urlencoded", body: "credential=good-ada&g_csrf_token=abc")
            #expect(answer.status == 403 && answer.errorCode == "csrf_check_failed")
        }
        #expect(h.store.sessions.isEmpty)
    }

    /// (TOKENSIGNIN_WEB_FORM_ORIGINS, Origin of the web form post, status): Google's page by default; a configured
    /// stand-in (development) instead; never another site. A refusal writes nothing.
    @Test(arguments: [
        (nil, "https://accounts.google.com", 303),
        (nil, "https://localhost:8444", 403),
        ("https://localhost:8444", "https://localhost:8444", 303),
        ("https://localhost:8444", "https://accounts.google.com", 403),
        ("https://localhost:8444", "https://localhost:8445", 403),
        ("https://localhost:8444", "https://app.example", 303),
    ] as [(String?, String, Int)])
    func webFormIsAcceptedFromTheConfiguredWebFormOrigins(configured: String?, origin: String, status: Int) throws {
        let h = try RouteHarness(environment: configured.map { ["TOKENSIGNIN_WEB_FORM_ORIGINS": $0] } ?? [:])
        let answer = h.request("POST", "/tokensignin", headers: ["Cookie": "g_csrf_token=abc", "Origin": origin],
                               contentType: "application/x-www-form-urlencoded", body: "credential=good-ada&g_csrf_token=abc")
        #expect(answer.status == status, "\(answer.text)")
        if status == 403 {
            #expect(answer.errorCode == "csrf_check_failed")
            #expect(h.store.sessions.isEmpty)
        }
    }

    @Test func webFormOriginDoesNotAllowAJSONTokenPost() throws {
        let h = try RouteHarness(environment: ["TOKENSIGNIN_WEB_FORM_ORIGINS": "https://localhost:8444"])
        let answer = h.signIn("good-ada", headers: ["Origin": "https://localhost:8444"])
        #expect(answer.status == 403 && answer.errorCode == "csrf_check_failed")
        #expect(h.store.sessions.isEmpty)
    }

    @Test func bodyOverTheCapIs413() throws {
        let h = try RouteHarness()
        let answer = h.request("POST", "/tokensignin", contentType: "application/json", bodyTooLarge: true)
        #expect(answer.status == 413 && answer.errorCode == "request_too_large")
    }

    /// A JSON sign-in from one of the site's pages (its Origin) gets the session in the HttpOnly cookie only: no
    /// page script can read the token from the body. A native client (no Origin) gets it in the body, as before,
    /// the same token as the cookie's.
    @Test(arguments: [nil, "https://app.example"] as [String?])
    func theSessionTokenIsInTheBodyOnlyForClientsWithoutOrigin(origin: String?) throws {
        let h = try RouteHarness()
        let answer = h.signIn("good-ada", headers: origin.map { ["Origin": $0] } ?? [:])
        #expect(answer.status == 200)
        let session = try #require(answer.json["session"] as? [String: Any])
        #expect(session["expires_at"] as? String != nil)
        let cookie = try #require(answer.headers("Set-Cookie").first)
        let cookieToken = String(cookie.dropFirst("__Host-tokensignin=".count).prefix { $0 != ";" })
        #expect(SessionToken(presented: cookieToken)?.hash == h.store.sessions.first?.hash)
        if origin == nil {
            #expect(session["token"] as? String == cookieToken)
        } else {
            #expect(session["token"] == nil && session.keys.sorted() == ["expires_at"])
            #expect(!answer.text.contains(cookieToken))
        }
    }

    /// (Origin, allowed) for JSON token posts: native apps send none; a browser sends the site's own.
    @Test(arguments: [(nil, true), ("https://app.example", true), ("https://APP.example:443", true),
                      ("https://evil.example", false), ("null", false), ("https://accounts.google.com", false)] as [(String?, Bool)])
    func tokenPostFromAnotherSiteIsLoginCSRF(origin: String?, allowed: Bool) throws {
        let h = try RouteHarness()
        let answer = h.signIn("good-ada", headers: origin.map { ["Origin": $0] } ?? [:])
        #expect(answer.status == (allowed ? 200 : 403))
        if !allowed {
            #expect(answer.errorCode == "csrf_check_failed")
            #expect(h.store.sessions.isEmpty)
        }
    }

    /// (Sec-Fetch-Site, status) of token posts without Origin, JSON, form and the web form: a browser that says the
    /// post comes from another site is refused like a wrong Origin (no session, nothing audited as a sign-in).
    @Test(arguments: [(nil, 200), ("same-origin", 200), ("none", 200), ("cross-site", 403), ("same-site", 403)] as [(String?, Int)])
    func tokenPostWithoutOriginFromAnotherSiteIsRefused(fetchSite: String?, status: Int) throws {
        for body in ["json", "form", "webForm"] {
            let h = try RouteHarness()
            var headers: [String: String] = [:]
            if let fetchSite { headers["Sec-Fetch-Site"] = fetchSite }
            let answer: Response
            switch body {
            case "json": answer = h.signIn("good-ada", headers: headers)
            case "form": answer = h.request("POST", "/tokensignin", headers: headers, contentType: "application/x-www-form-urlencoded",
                                            body: "idtoken=good-ada")
            default:
                headers["Cookie"] = "g_csrf_token=abc"
                answer = h.request("POST", "/tokensignin", headers: headers, contentType: "application/x-www-form-urlencoded",
                                   body: "credential=good-ada&g_csrf_token=abc")
            }
            #expect(answer.status == (status == 200 && body == "webForm" ? 303 : status), "\(body): \(answer.text)")
            if status == 403 {
                #expect(answer.errorCode == "csrf_check_failed")
                #expect(h.store.sessions.isEmpty && h.store.audit.isEmpty)
            }
        }
    }

    /// (token, status, error, Retry-After, audited reason)
    @Test(arguments: [
        ("expired", 401, "invalid_token", nil, "expired"),
        ("forged", 401, "invalid_token", nil, "malformed"),
        ("other-domain", 403, "access_denied", nil, "hosted_domain_not_allowed"),
        ("no-keys", 503, "temporarily_unavailable", "5", nil),
    ] as [(String, Int, String, String?, String?)])
    func refusedTokenAnswersItsStatusAndIsAudited(token: String, status: Int, error: String, retryAfter: String?, audited: String?) throws {
        let h = try RouteHarness()
        let answer = h.signIn(token)
        #expect(answer.status == status && answer.errorCode == error)
        #expect(answer.header("Retry-After") == retryAfter)
        #expect(answer.headers("Set-Cookie").isEmpty)
        #expect(h.store.audit == (audited.map { [InMemoryStore.AuditRow(outcome: "failure", reason: $0, sub: nil, sessionID: nil)] } ?? []))
        #expect(h.store.sessions.isEmpty)
    }

    @Test func disabledOrBlockedAccountIs403AndOpensNoSession() throws {
        let h = try RouteHarness()
        _ = try h.session("ada")
        _ = try h.session("bob")
        h.store.users[0].disabled = true
        h.store.users[1].blockedAt = h.store.now
        for token in ["good-ada", "good-bob"] {
            let answer = h.signIn(token)
            #expect(answer.status == 403 && answer.errorCode == "access_denied")
            #expect(answer.headers("Set-Cookie").isEmpty)
        }
        #expect(h.store.sessions.count == 2)
    }

    /// A database outage is 503 with Retry-After (the client retries); a fault of the deployment is 500.
    @Test(arguments: [
        (StoreError(.connectionFailed, "down"), 503, "temporarily_unavailable"),
        (StoreError(.timedOut, sqlState: "55P03", "lock timeout"), 503, "temporarily_unavailable"),
        (StoreError(.permissionDenied, sqlState: "42501", "permission denied"), 500, "server_error"),
        (StoreError(.queryFailed, sqlState: "42P01", "no table"), 500, "server_error"),
    ])
    func databaseFailureOfASignIn(error: StoreError, status: Int, code: String) throws {
        let h = try RouteHarness()
        h.store.nextError = error
        let answer = h.signIn("good-ada")
        #expect(answer.status == status && answer.errorCode == code)
        #expect(answer.header("Retry-After") == (status == 503 ? "2" : nil))
        #expect(answer.headers("Set-Cookie").isEmpty)
        #expect(h.log.last?.hasPrefix("level=error event=request route=sign_in") == true)
        if let state = error.sqlState { #expect(h.log.last?.contains("sqlstate=\(state)") == true) }
    }
}

@Suite struct SessionRouteTests {
    @Test func checkAnswersTheIdentityHeadersForABearerOrTheCookie() throws {
        let h = try RouteHarness()
        let token = try h.session()
        for headers in [["Authorization": "Bearer \(token)"], ["Cookie": "other=1; __Host-tokensignin=\(token)"],
                        ["Authorization": "Basic dXNlcjpwdw==", "Cookie": "__Host-tokensignin=\(token)"]] {
            let answer = h.request("GET", "/auth/session", headers: headers)
            #expect(answer.status == 200)
            #expect(answer.header("X-User-Id") == "1" && answer.header("X-User-Sub") == "ada")
            #expect(answer.header("X-User-Email") == "ada@example.com" && answer.header("X-User-Email-Verified") == "true")
            #expect(answer.headers("Set-Cookie").isEmpty)
            #expect(answer.json["user_id"] as? Int == 1 && answer.json["session_id"] as? Int == 1)
            #expect(answer.json["sub"] as? String == "ada" && answer.json["email"] as? String == "ada@example.com")
            #expect(answer.body == Array(#"{"user_id":1,"sub":"ada","email":"ada@example.com","email_verified":true,"session_id":1}"#.utf8)
                        + [0x0a], "the members in this order")
        }
    }

    /// The Authorization scheme is case-insensitive (RFC 9110); one space separates it from the token.
    @Test(arguments: [("bearer", 200), ("BEARER", 200), ("BeArEr", 200), ("Bearer ", 401), ("Bearers", 401), ("Bearer\t", 401)])
    func theBearerSchemeIsCaseInsensitive(scheme: String, status: Int) throws {
        let h = try RouteHarness()
        let token = try h.session()
        let answer = h.request("GET", "/auth/session", headers: ["Authorization": "\(scheme) \(token)"])
        #expect(answer.status == status, "\(scheme)")
    }

    @Test func unverifiedEmailNeverReachesTheApplication() throws {
        let h = try RouteHarness()
        let token = try h.session("unverified")
        let answer = h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"])
        #expect(answer.status == 200)
        #expect(answer.header("X-User-Email") == nil && answer.header("X-User-Email-Verified") == "false")
        #expect(answer.json["email"] is NSNull)
    }

    @Test func identityThatCannotBeAHeaderIsAServerFaultNeverABlank200() throws {
        let h = try RouteHarness()
        let token = try h.session("newline")
        let answer = h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"])
        #expect(answer.status == 500 && answer.errorCode == "server_error")
        #expect(answer.header("X-User-Id") == nil && answer.header("X-User-Sub") == nil)
        #expect(h.log.last?.contains("reason=identity_not_representable") == true)
    }

    /// Presented sessions that are not live sessions: all 401 with WWW-Authenticate.
    @Test(arguments: [
        [:], ["Authorization": "Bearer"], ["Authorization": "Bearer short"], ["Cookie": "__Host-tokensignin=short"],
        ["Authorization": "Bearer \(String(repeating: "A", count: 43))"], ["Cookie": "tokensignin=x"],
    ])
    func noLiveSessionIs401(headers: [String: String]) throws {
        let h = try RouteHarness()
        _ = try h.session()
        let answer = h.request("GET", "/auth/session", headers: headers)
        #expect(answer.status == 401 && answer.errorCode == "invalid_token")
        #expect(answer.header("WWW-Authenticate") == "Bearer")
    }

    @Test func aMalformedBearerHeaderDecidesEvenWithAGoodCookie() throws {
        let h = try RouteHarness()
        let token = try h.session()
        let answer = h.request("GET", "/auth/session", headers: ["Authorization": "Bearer nope", "Cookie": "__Host-tokensignin=\(token)"])
        #expect(answer.status == 401)
    }

    @Test func revokedExpiredIdleOrDisabledSessionIs401() throws {
        let h = try RouteHarness()
        let tokens = try ["ada", "bob", "eve", "unverified"].map { try h.session($0) }
        h.store.sessions[0].revokedReason = "operator"
        h.store.sessions[1].expiresAt = h.store.now - 1
        h.store.sessions[2].lastSeenAt = h.store.now - 7 * 86_400 - 1
        h.store.users[3].disabled = true
        for token in tokens {
            #expect(h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"]).status == 401)
        }
    }

    @Test func databaseDownIs503NeverA200OrA401() throws {
        let h = try RouteHarness()
        let token = try h.session()
        h.store.nextError = StoreError(.connectionLost, sqlState: "57P01", "terminating connection")
        let answer = h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"])
        #expect(answer.status == 503 && answer.header("Retry-After") == "2")
        #expect(answer.header("X-User-Id") == nil)
    }

    @Test func signOutEndsTheSessionAndClearsTheCookie() throws {
        let h = try RouteHarness()
        let token = try h.session()
        let other = try h.session()
        let answer = h.request("POST", "/tokensignout", headers: ["Authorization": "Bearer \(token)"])
        #expect(answer.status == 204 && answer.body.isEmpty && answer.header("Cache-Control") == "no-store")
        #expect(answer.headers("Set-Cookie") == ["__Host-tokensignin=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Lax"])
        #expect(h.store.sessions.map(\.revokedReason) == ["sign_out", nil])
        #expect(h.request("POST", "/tokensignout", headers: ["Authorization": "Bearer \(token)"]).status == 401)
        #expect(h.request("POST", "/tokensignout?all=1", headers: ["Authorization": "Bearer \(other)"]).status == 204)
        #expect(h.store.sessions.map(\.revokedReason) == ["sign_out", "sign_out_all"])
    }

    @Test func signOutAllEndsEverySessionOfTheUserOnly() throws {
        let h = try RouteHarness()
        let a = try h.session("ada")
        _ = try h.session("ada")
        _ = try h.session("bob")
        #expect(h.request("POST", "/tokensignout?all=true", headers: ["Authorization": "Bearer \(a)"]).status == 204)
        #expect(h.store.sessions.map(\.revokedReason) == ["sign_out_all", "sign_out_all", nil])
    }

    /// With the session cache on, a sign-out everywhere evicts every session of the user this responder holds before
    /// answering, also when the presented session was never cached here. (The in-memory store sends no notifications:
    /// whatever is gone from the cache here, the route evicted itself.)
    @Test func signOutAllEvictsTheUsersCachedSessionsEvenWhenThePresentedOneWasNotCached() throws {
        let cache = SessionCache(capacity: 16, idleTimeout: 3600, bound: .seconds(600))
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)  // the cache's clock (Threads.bootNanoseconds)
        cache.confirm(sentAt: UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec))
        let h = try RouteHarness(sessionCache: cache)
        let presented = try h.session("ada"), cached = try h.session("ada"), bob = try h.session("bob")
        for token in [cached, bob] {
            #expect(h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"]).status == 200)
        }
        #expect(cache.figures.entries == 2 && cache.figures.misses == 2)
        #expect(h.request("POST", "/tokensignout?all=1", headers: ["Authorization": "Bearer \(presented)"]).status == 204)
        #expect(cache.figures.entries == 1 && cache.figures.evictions == 1)
        #expect(h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(cached)"]).status == 401)
        #expect(h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(bob)"]).status == 200)
        #expect(cache.figures.hits == 1, "bob's, from memory")
    }

    /// (Origin, Sec-Fetch-Site, allowed) for changes authenticated by the cookie.
    @Test(arguments: [
        (nil, nil, false), (nil, "same-origin", true), (nil, "same-site", false), (nil, "cross-site", false),
        ("https://app.example", nil, true), ("https://app.example", "cross-site", true),
        ("https://evil.example", "same-origin", false), ("null", "same-origin", false), ("not an origin", nil, false),
    ] as [(String?, String?, Bool)])
    func cookieAuthenticatedChangesMustComeFromTheSite(origin: String?, fetchSite: String?, allowed: Bool) throws {
        let h = try RouteHarness()
        let token = try h.session()
        _ = try h.session()
        var headers = ["Cookie": "__Host-tokensignin=\(token)"]
        if let origin { headers["Origin"] = origin }
        if let fetchSite { headers["Sec-Fetch-Site"] = fetchSite }
        Self.expectRevokeAndSignOut(h, headers: headers, allowed: allowed)
    }

    /// `DELETE /sessions/2` then `POST /tokensignout` with `headers`: both done (204), or both refused as a forgery
    /// (403 `csrf_check_failed`) with no session revoked.
    private static func expectRevokeAndSignOut(_ h: RouteHarness, headers: [String: String], allowed: Bool) {
        let revoke = h.request("DELETE", "/sessions/2", headers: headers)
        let signOut = h.request("POST", "/tokensignout", headers: headers)
        for answer in [revoke, signOut] {
            #expect(answer.status == (allowed ? 204 : 403))
            if !allowed { #expect(answer.errorCode == "csrf_check_failed") }
        }
        #expect(h.store.sessions.map(\.revokedReason) == (allowed ? ["sign_out", "user_revoked"] : [nil, nil]))
    }

    @Test func forgedChangeIsRefusedBeforeTheTokenIsLookedAt() throws {
        let h = try RouteHarness()
        let answer = h.request("POST", "/tokensignout", headers: ["Cookie": "__Host-tokensignin=garbage", "Origin": "https://evil.example"])
        #expect(answer.status == 403)
        #expect(h.request("POST", "/tokensignout", headers: ["Origin": "https://evil.example"]).status == 401)
    }

    @Test func bearerChangesNeedNoOrigin() throws {
        let h = try RouteHarness()
        let token = try h.session()
        _ = try h.session()
        #expect(h.request("DELETE", "/sessions/2", headers: ["Authorization": "Bearer \(token)", "Origin": "https://evil.example"]).status == 204)
    }

    /// (Sec-Fetch-Site, allowed) of Bearer-authenticated changes without Origin: native apps send neither header; a
    /// browser's cross-site request is refused like a wrong Origin.
    @Test(arguments: [(nil, true), ("same-origin", true), ("cross-site", false), ("same-site", false)] as [(String?, Bool)])
    func bearerChangesWithoutOriginFromAnotherSiteAreRefused(fetchSite: String?, allowed: Bool) throws {
        let h = try RouteHarness()
        let token = try h.session()
        _ = try h.session()
        var headers = ["Authorization": "Bearer \(token)"]
        if let fetchSite { headers["Sec-Fetch-Site"] = fetchSite }
        Self.expectRevokeAndSignOut(h, headers: headers, allowed: allowed)
    }

    @Test func devicesListShowsTheUsersLiveSessionsNewestFirst() throws {
        let h = try RouteHarness()
        let first = try h.session()
        _ = try h.session()
        _ = try h.session("bob")
        _ = try h.session()
        h.store.sessions[1].expiresAt = h.store.now - 1
        for method in ["GET", "HEAD"] {
            let answer = h.request(method, "/sessions", headers: ["Cookie": "__Host-tokensignin=\(first)"])
            #expect(answer.status == 200)
            let sessions = try #require(answer.json["sessions"] as? [[String: Any]])
            #expect(sessions.map { $0["id"] as? Int } == [4, 1])
            #expect(sessions.map { $0["current"] as? Bool } == [false, true])
            #expect(sessions[1]["created_at"] as? String == "2027-01-15T08:00:00Z")
            #expect(sessions[1]["ip"] as? String == "192.0.2.9" && sessions[1]["client_id"] as? String == "1234567890-web.apps.googleusercontent.com")
            #expect(answer.json["next"] is NSNull)
        }
    }

    @Test func devicesListIsPaged() throws {
        let h = try RouteHarness()
        let token = try h.session()
        for _ in 0..<4 { _ = try h.session() }
        let auth = ["Authorization": "Bearer \(token)"]
        let first = h.request("GET", "/sessions?limit=2", headers: auth)
        #expect((first.json["sessions"] as? [[String: Any]])?.map { $0["id"] as? Int } == [5, 4])
        #expect(first.json["next"] as? Int == 4)
        let second = h.request("GET", "/sessions?limit=2&after=4", headers: auth)
        #expect((second.json["sessions"] as? [[String: Any]])?.map { $0["id"] as? Int } == [3, 2])
        let last = h.request("GET", "/sessions?after=2&limit=2", headers: auth)
        #expect((last.json["sessions"] as? [[String: Any]])?.map { $0["id"] as? Int } == [1])
        #expect(last.json["next"] is NSNull)
    }

    @Test(arguments: ["limit=0", "limit=101", "limit=x", "limit=-1", "limit=2&limit=3", "after=0", "after=abc", "limit=%zz"])
    func badPagingIs400(query: String) throws {
        let h = try RouteHarness()
        let token = try h.session()
        let answer = h.request("GET", "/sessions?\(query)", headers: ["Authorization": "Bearer \(token)"])
        #expect(answer.status == 400 && answer.errorCode == "invalid_request")
    }

    @Test func onlyOwnLiveSessionsCanBeRevoked() throws {
        let h = try RouteHarness()
        let mine = try h.session("ada")
        _ = try h.session("ada")
        _ = try h.session("bob")
        _ = try h.session("ada")
        h.store.sessions[3].lastSeenAt = h.store.now - 8 * 86_400  // idle: not live
        let auth = ["Authorization": "Bearer \(mine)"]
        #expect(h.request("DELETE", "/sessions/3", headers: auth).errorCode == "not_found")
        #expect(h.request("DELETE", "/sessions/4", headers: auth).status == 404)
        #expect(h.request("DELETE", "/sessions/99", headers: auth).status == 404)
        let revoked = h.request("DELETE", "/sessions/2", headers: auth)
        #expect(revoked.status == 204 && revoked.headers("Set-Cookie").isEmpty)
        #expect(h.request("DELETE", "/sessions/2", headers: auth).status == 404)
        #expect(h.store.sessions.map(\.revokedReason) == [nil, "user_revoked", nil, nil])
        #expect(h.request("DELETE", "/sessions/1", headers: [:]).status == 401)
    }
}

@Suite struct OperatorEndpointTests {
    @Test func healthzAnswersWhateverTheDatabaseAndKeysSay() throws {
        let h = try RouteHarness()
        h.store.nextError = StoreError(.connectionFailed, "down")
        h.verifier.keyReadiness.loaded = false
        let answer = h.request("GET", "/healthz")
        #expect(answer.status == 200 && answer.json["status"] as? String == "ok")
        #expect(h.log.isEmpty, "probes are not logged")
    }

    /// (database error, keys loaded, keys stale, reasons) — ready only with both.
    @Test(arguments: [
        (nil, true, false, []),
        (StoreError(.connectionFailed, "down"), true, false, ["database_unavailable"]),
        (StoreError(.permissionDenied, sqlState: "42501", "no"), true, false, ["database_fault"]),
        (StoreError(.connectionLost, sqlState: "25006", "the server is a standby (in recovery)"), true, false, ["database_read_only"]),
        (nil, false, false, ["keys_not_loaded"]),
        (nil, true, true, ["keys_stale"]),
        (StoreError(.timedOut, sqlState: "57014", "slow"), false, false, ["database_unavailable", "keys_not_loaded"]),
    ] as [(StoreError?, Bool, Bool, [String])])
    func readyzIs200OnlyWithTheDatabaseAndAUsableKeySet(error: StoreError?, loaded: Bool, stale: Bool, reasons: [String]) throws {
        let h = try RouteHarness()
        h.store.nextError = error
        h.verifier.keyReadiness.loaded = loaded
        h.verifier.keyReadiness.stale = stale
        let answer = h.request("GET", "/readyz")
        #expect(answer.status == (reasons.isEmpty ? 200 : 503))
        #expect(answer.json["status"] as? String == (reasons.isEmpty ? "ready" : "unavailable"))
        #expect((answer.json["reasons"] as? [String] ?? []) == reasons)
        #expect(answer.header("Cache-Control") == "no-store")
        #expect(h.verifier.refreshesAsked == 1, "every probe asks for due keys to be refreshed")
    }

    /// The session cache counts against readiness once it has been unusable for `Readiness.cacheGrace`: since the
    /// responder started while no heartbeat came back yet, since the last one that came back was sent otherwise.
    /// (heartbeat that came back: seconds ago, or nil for none; seconds since the start; listener lost since; ready)
    @Test(arguments: [
        (nil, 0.0, false, true),        // just started: the first heartbeat takes a moment
        (nil, 5.0, false, false),       // started long ago and never usable (a listener on a standby)
        (0.0, 5.0, false, true),        // usable
        (0.5, 5.0, false, true),        // a few heartbeats late (past the cache's own 100 ms): still ready
        (2.0, 5.0, false, false),       // late for longer than the grace
        (0.0, 5.0, true, false),        // the listener lost its connection: nothing comes back until it reconnects
    ] as [(Double?, Double, Bool, Bool)])
    func readyzCountsAnUnusableSessionCacheOnlyPastItsGrace(heartbeat: Double?, uptime: Double, lost: Bool, ready: Bool) throws {
        let cache = SessionCache(capacity: 16, idleTimeout: 3600)
        if let heartbeat {
            var now = timespec()
            clock_gettime(CLOCK_BOOTTIME, &now)  // the cache's clock (Threads.bootNanoseconds)
            cache.confirm(sentAt: UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec) - UInt64(heartbeat * 1e9))
        }
        if lost { cache.disable() }
        let h = try RouteHarness(sessionCache: cache, readiness: Readiness(started: .now - .milliseconds(Int(uptime * 1000))))
        let answer = h.request("GET", "/readyz")
        #expect(answer.status == (ready ? 200 : 503), "\(answer.text)")
        #expect((answer.json["reasons"] as? [String] ?? []) == (ready ? [] : ["session_cache_unusable"]))
    }

    /// Every 503 of /readyz is counted under each of its reasons; every reason is on /metrics from the start.
    @Test func notReadyAnswersAreCountedByReason() throws {
        let h = try RouteHarness()
        let before = h.request("GET", "/metrics").text
        for reason in NotReadyReason.allCases {
            #expect(before.contains("tokensignin_not_ready_total{reason=\"\(reason.rawValue)\"} 0\n"), "\(reason)")
        }
        #expect(before.contains("# TYPE tokensignin_not_ready_total counter\n"))
        h.store.nextError = StoreError(.connectionLost, sqlState: "25006", "standby")
        #expect(h.request("GET", "/readyz").status == 503)
        h.store.nextError = StoreError(.connectionLost, sqlState: "25006", "standby")
        h.verifier.keyReadiness.stale = true
        #expect(h.request("GET", "/readyz").status == 503)
        h.verifier.keyReadiness.stale = false
        #expect(h.request("GET", "/readyz").status == 200)
        let after = h.request("GET", "/metrics").text
        #expect(after.contains("tokensignin_not_ready_total{reason=\"database_read_only\"} 2\n"))
        #expect(after.contains("tokensignin_not_ready_total{reason=\"keys_stale\"} 1\n"))
        #expect(after.contains("tokensignin_not_ready_total{reason=\"database_unavailable\"} 0\n"))
    }

    /// Where the keys come from is on /readyz (with the location when it is not Google's) and in /metrics.
    @Test(arguments: [(KeySource.google, "google", nil), (.file("/run/dev-jwks.json"), "file", "/run/dev-jwks.json"),
                      (.url("http://127.0.0.1:9/certs"), "url", "http://127.0.0.1:9/certs")] as [(KeySource, String, String?)])
    func theKeySourceIsShownOnReadyzAndInMetrics(source: KeySource, kind: String, location: String?) throws {
        let h = try RouteHarness(keySource: source)
        let ready = h.request("GET", "/readyz")
        #expect(ready.status == 200)
        let shown = try #require(ready.json["key_source"] as? [String: String])
        #expect(shown == ["kind": kind].merging(location.map { ["location": $0] } ?? [:]) { $1 })
        #expect(h.request("GET", "/metrics").text.contains("tokensignin_key_source{kind=\"\(kind)\"} 1\n"))
    }

    /// Item 13: a drifted RISC configuration is a warning on /readyz, never a 503 (it must not take sign-ins out of
    /// the load balancer), and gauges and counters on /metrics.
    @Test(arguments: [true, false])
    func aDriftedRiscConfigurationIsAWarningOnReadyzAndAGaugeOnMetrics(databaseUp: Bool) throws {
        let h = try RouteHarness()
        if !databaseUp { h.store.nextError = StoreError(.connectionFailed, "down") }
        var risc = RiscConfigurationMonitor.Status()
        (risc.checks, risc.failures, risc.jwksMismatch, risc.securityEventKeysURL) = (3, 1, true, "https://keys.example/certs")
        h.verifier.keyReadiness.riscConfiguration = risc
        let answer = h.request("GET", "/readyz")
        #expect(answer.status == (databaseUp ? 200 : 503))
        #expect(answer.json["warnings"] as? [String] == ["risc_configuration_mismatch"])
        let text = h.request("GET", "/metrics").text
        for line in ["tokensignin_risc_configuration_mismatch 1", "tokensignin_risc_configuration_separate_keys 1",
                     "tokensignin_risc_configuration_checks_total 3", "tokensignin_risc_configuration_check_failures_total 1",
                     "# TYPE tokensignin_risc_configuration_checks_total counter"] {
            #expect(text.contains(line + "\n"), "\(line)")
        }
        h.verifier.keyReadiness.riscConfiguration = RiscConfigurationMonitor.Status()
        #expect(h.request("GET", "/readyz").json["warnings"] == nil)
        #expect(h.request("GET", "/metrics").text.contains("tokensignin_risc_configuration_mismatch 0\n"))
        h.verifier.keyReadiness.riscConfiguration = nil
        #expect(!h.request("GET", "/metrics").text.contains("tokensignin_risc_configuration"))
    }

    @Test func metricsCountRequestsRefusalsAndTimesAndReadTheGauges() throws {
        let h = try RouteHarness()
        let token = try h.session()
        _ = h.signIn("expired")
        _ = h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"])
        _ = h.request("GET", "/nowhere")
        let page = h.request("GET", "/metrics")
        #expect(page.status == 200 && page.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
        let text = page.text
        for line in [
            #"tokensignin_requests_total{route="sign_in",status="200"} 1"#,
            #"tokensignin_requests_total{route="sign_in",status="401"} 1"#,
            #"tokensignin_requests_total{route="check_session",status="200"} 1"#,
            #"tokensignin_requests_total{route="none",status="404"} 1"#,
            #"tokensignin_refusals_total{reason="expired"} 1"#,
            #"tokensignin_refusals_total{reason="not_found"} 1"#,
            #"tokensignin_verification_seconds_count 2"#,
            #"tokensignin_request_duration_seconds_count{route="sign_in"} 2"#,
            #"tokensignin_request_duration_seconds_bucket{route="sign_in",le="+Inf"} 2"#,
            #"tokensignin_request_duration_seconds_count{route="check_session"} 1"#,
            #"tokensignin_request_duration_seconds_count{route="none"} 1"#,
            "# TYPE tokensignin_request_duration_seconds histogram",
            #"tokensignin_database_seconds_count{operation="sign_in"} 1"#,
            #"tokensignin_database_seconds_count{operation="check_session"} 1"#,
            #"tokensignin_database_seconds_bucket{operation="sign_in",le="+Inf"} 1"#,
            "tokensignin_keys_loaded 1", "tokensignin_keys_stale 0", "tokensignin_key_set_age_seconds 42",
            "tokensignin_key_refreshes_total 1", "tokensignin_key_refresh_failures_total 0",
            #"tokensignin_busy_workers{lane="default"} 1"#, "# TYPE tokensignin_verification_seconds histogram",
        ] {
            #expect(text.contains(line + "\n"), "missing \(line) in:\n\(text)")
        }
        #expect(!text.contains(token))
    }

    @Test func aTokenIssuedBeforeGoogleRevokedTheSessionsIs401() throws {
        let h = try RouteHarness()
        _ = try h.session("ada")
        h.store.users[0].tokensInvalidBefore = 1_800_000_001  // the verifier's tokens are issued at 1_800_000_000
        let answer = h.signIn("good-ada")
        #expect(answer.status == 401 && answer.errorCode == "invalid_token")
        #expect(h.store.audit.last?.reason == "id_token_revoked")
        #expect(h.log.last?.contains("reason=id_token_revoked") == true)
    }
}

/// POST /risc (RFC 8935 answers) over the in-memory store.
@Suite struct SecurityEventRouteTests {
    static let google = "https://accounts.google.com/"

    static func set(_ events: [SecurityEvent], jti: String = "jti-1", iat: Int64 = 1_800_000_500, ahead: Int64? = nil) -> AcceptedSecurityEvent {
        .verified(VerifiedSecurityEvent(jti: jti, issuer: google, audience: "1234567890-web.apps.googleusercontent.com", issuedAt: iat,
                                        expiresAt: nil, keyID: "kid", events: events, issuedAheadBy: ahead))
    }

    static func unparsed(jti: String = "jti-u", type: String = SecurityEvent.accountDisabled, iat: Int64? = 1_800_000_500,
                         claims: String = #"{"events":{"x":{"reason":1}}}"#) -> AcceptedSecurityEvent {
        .unparsed(UnparsedSecurityEvent(jti: jti, issuer: google, audience: "1234567890-web.apps.googleusercontent.com", type: type,
                                        issuedAt: iat, keyID: "kid", claimsJSON: claims,
                                        reason: IDTokenError(.badEvents, "event member reason is not a string")))
    }

    static func revoked(_ sub: String, issuer: String = google) -> SecurityEvent {
        SecurityEvent(type: SecurityEvent.sessionsRevoked, subject: .init(issuer: issuer, sub: sub), reason: nil, state: nil)
    }

    static func post(_ h: RouteHarness, _ token: String, contentType: String? = "application/secevent+jwt") -> Response {
        h.request("POST", "/risc", contentType: contentType, body: token)
    }

    @Test(arguments: ["application/secevent+jwt", "application/jwt", "Application/SecEvent+JWT; charset=utf-8"])
    func aValidSETIsAcceptedWith202AndApplied(contentType: String) throws {
        let h = try RouteHarness()
        let session = try h.session("ada")
        h.verifier.events["set"] = .success(Self.set([Self.revoked("ada")]))
        let answer = Self.post(h, "set\n", contentType: contentType)
        #expect(answer.status == 202 && answer.body.isEmpty)
        #expect(h.store.events.map(\.outcome) == ["sessions_revoked"])
        let line = try #require(h.log.last)
        #expect(h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(session)"]).status == 401)
        #expect(line.contains("route=risc") && line.contains("status=202") && line.contains("jti=jti-1"))
        #expect(line.contains("events=sessions-revoked:sessions_revoked") && line.contains("user_id=1"))
        #expect(h.request("GET", "/metrics").text.contains(
            #"tokensignin_security_events_total{type="\#(SecurityEvent.sessionsRevoked)",outcome="sessions_revoked"} 1"#))
    }

    @Test func aRedeliveredSETIs202AndAppliedOnce() throws {
        let h = try RouteHarness()
        _ = try h.session("ada")
        // Issued before the verifier's ID tokens (1_800_000_000), so the account can sign in again afterwards.
        h.verifier.events["set"] = .success(Self.set([Self.revoked("ada")], iat: 1_799_999_000))
        #expect(Self.post(h, "set").status == 202)
        let later = try h.session("ada")
        #expect(Self.post(h, "set").status == 202)
        #expect(h.store.events.count == 1)
        #expect(h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(later)"]).status == 200)
        #expect(h.log.last?.contains("events=sessions-revoked:duplicate") == true)
    }

    /// Item 9: an `iat` ahead of our clock beyond the skew is applied as sent, with a warning that says how far ahead.
    @Test func aSETIssuedAheadOfOurClockIs202AndAppliedWithAWarning() throws {
        let h = try RouteHarness()
        let session = try h.session("ada")
        h.verifier.events["set"] = .success(Self.set([Self.revoked("ada")], iat: 1_800_000_600, ahead: 600))
        let answer = Self.post(h, "set")
        #expect(answer.status == 202)
        #expect(h.store.events.map(\.outcome) == ["sessions_revoked"] && h.store.events.first?.issuedAt == 1_800_000_600)
        #expect(h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(session)"]).status == 401)
        let warning = try #require(h.log.first { $0.contains("event=security_event_issued_in_future") })
        #expect(warning == "level=warn event=security_event_issued_in_future jti=jti-1 iat=1800000600 now=1800000000 skew_seconds=600")
    }

    /// Item 10: a SET signed for us whose claims cannot be read is recorded as it came, applied to nobody, counted and
    /// answered 202 (Google would not redeliver it after a 400); a redelivery is recorded once.
    @Test func anUnparsedSETIsRecordedWith202AndChangesNoUser() throws {
        let h = try RouteHarness()
        let session = try h.session("ada")
        h.verifier.events["set"] = .success(Self.unparsed())
        let answer = Self.post(h, "set")
        #expect(answer.status == 202 && answer.body.isEmpty)
        #expect(h.store.events.count == 1)
        let row = try #require(h.store.events.first)
        #expect(row.jti == "jti-u" && row.type == SecurityEvent.accountDisabled && row.outcome == "unparsed" && row.userID == nil)
        #expect(row.claims == #"{"events":{"x":{"reason":1}}}"# && row.unparsedReason == "bad_events: event member reason is not a string")
        #expect(h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(session)"]).status == 200)
        #expect(h.log.contains("level=warn event=security_event_unparsed jti=jti-u type=account-disabled reason=bad_events detail=\"event member reason is not a string\" outcome=unparsed"), "\(h.log)")
        let line = try #require(h.log.last)
        #expect(line.contains("route=risc") && line.contains("status=202") && line.contains("events=account-disabled:unparsed")
                && line.contains("unparsed=bad_events"))
        #expect(h.request("GET", "/metrics").text.contains(
            #"tokensignin_security_events_total{type="\#(SecurityEvent.accountDisabled)",outcome="unparsed"} 1"#))
        #expect(Self.post(h, "set").status == 202)
        #expect(h.store.events.count == 1 && h.log.last?.contains("events=account-disabled:duplicate") == true)
    }

    /// An unparsed SET meets our outages as a verified one does: 503, so that Google redelivers it.
    @Test func anUnparsedSETDuringAnOutageIs503() throws {
        let h = try RouteHarness()
        h.verifier.events["set"] = .success(Self.unparsed())
        h.store.nextError = StoreError(.connectionFailed, "down")
        let answer = Self.post(h, "set")
        #expect(answer.status == 503 && answer.header("Retry-After") == "2" && h.store.events.isEmpty)
    }

    @Test func aSubjectIssuedByAnotherIssuerNamesNoUserHere() throws {
        let h = try RouteHarness()
        let session = try h.session("ada")
        h.verifier.events["set"] = .success(Self.set([Self.revoked("ada", issuer: "https://evil.example")]))
        #expect(Self.post(h, "set").status == 202)
        #expect(h.store.events.map(\.outcome) == ["unknown_user"])
        #expect(h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(session)"]).status == 200)
    }

    /// (refusal, RFC 8935 err) — the verifier's reasons as Google must read them; nothing is recorded.
    @Test(arguments: [
        (IDTokenError.Code.malformed, "invalid_request"), (.badBase64, "invalid_request"), (.badHeader, "invalid_request"),
        (.unsupportedAlgorithm, "invalid_request"), (.embeddedKey, "invalid_request"), (.badPayload, "invalid_request"),
        (.missingClaim, "invalid_request"), (.badClaimType, "invalid_request"), (.notASecurityEvent, "invalid_request"),
        (.badEvents, "invalid_request"), (.issuedInFuture, "invalid_request"), (.expired, "invalid_request"),
        (.claimTooLong, "invalid_request"), (.missingKid, "invalid_key"), (.unknownKid, "invalid_key"),
        (.algorithmMismatch, "invalid_key"), (.weakKey, "invalid_key"), (.unusableKey, "invalid_key"),
        (.badSignature, "authentication_failed"), (.badIssuer, "invalid_issuer"), (.badAudience, "invalid_audience"),
    ])
    func aRefusedSETIs400WithTheRFCsCode(code: IDTokenError.Code, err: String) throws {
        let h = try RouteHarness()
        h.verifier.events["set"] = .failure(IDTokenError(code, "detail"))
        let answer = Self.post(h, "set")
        #expect(answer.status == 400 && answer.header("Content-Type") == "application/json")
        #expect(answer.json["err"] as? String == err)
        #expect((answer.json["description"] as? String)?.isEmpty == false)
        #expect(answer.json["error"] == nil)
        #expect(h.store.events.isEmpty)
        #expect(h.log.last?.contains("reason=\(code.name)") == true)
    }

    /// (content type) — anything but a SET's media types is invalid_request, not 415; a value with no media type
    /// before its first `;` (which once trapped: the whole process) is one of them.
    @Test(arguments: [nil, "text/plain", "application/json", "application/x-www-form-urlencoded", "application/secevent",
                      "", ";", ";;", " ; ", ";application/secevent+jwt", ";application/jwt"] as [String?])
    func anotherMediaTypeIs400InvalidRequest(contentType: String?) throws {
        let h = try RouteHarness()
        h.verifier.events["set"] = .success(Self.set([Self.revoked("ada")]))
        let answer = Self.post(h, "set", contentType: contentType)
        #expect(answer.status == 400 && answer.json["err"] as? String == "invalid_request")
        #expect(h.store.events.isEmpty)
    }

    @Test func anOverlongBodyOrOneThatIsNotTextIs400() throws {
        let h = try RouteHarness()
        let big = h.request("POST", "/risc", contentType: "application/secevent+jwt", bodyTooLarge: true)
        #expect(big.status == 400 && big.json["err"] as? String == "invalid_request")
        let binary = h.app.handle(Request(params: ["REQUEST_METHOD": "POST", "DOCUMENT_URI": "/risc",
                                                   "CONTENT_TYPE": "application/secevent+jwt"], body: [0xff, 0xfe, 0x2e]))
        #expect(binary.status == 400 && binary.json["err"] as? String == "invalid_request")
    }

    /// Our own outages are 503 (Google retries), never a 400; a fault of ours is a 500.
    @Test(arguments: [
        (nil, IDTokenError.Code.keysUnavailable, 503, "5"),
        (StoreError(.connectionFailed, "down"), nil, 503, "2"),
        (StoreError(.permissionDenied, sqlState: "42501", "no"), nil, 500, nil),
    ] as [(StoreError?, IDTokenError.Code?, Int, String?)])
    func outagesAre503AndFaults500(storeError: StoreError?, tokenError: IDTokenError.Code?, status: Int, retryAfter: String?) throws {
        let h = try RouteHarness()
        h.verifier.events["set"] = tokenError.map { .failure(IDTokenError($0)) } ?? .success(Self.set([Self.revoked("ada")]))
        h.store.nextError = storeError
        let answer = Self.post(h, "set")
        #expect(answer.status == status && answer.header("Retry-After") == retryAfter)
        #expect(answer.json["err"] == nil)
    }

    @Test func onlyPOST() throws {
        let h = try RouteHarness()
        let answer = h.request("GET", "/risc")
        #expect(answer.status == 405 && answer.header("Allow") == "POST")
    }
}

/// The checks lane hands the requests that arrived together to `handle(batch:)`: their session checks are one
/// store call, and every answer is the one the request gets alone.
@Suite struct CheckBatchRouteTests {
    private static func same(_ a: Response, _ b: Response) -> Bool {
        a.status == b.status && a.body == b.body && a.headers.map { "\($0.name): \($0.value)" } == b.headers.map { "\($0.name): \($0.value)" }
    }

    @Test func checksThatArriveTogetherAreLookedUpAtOnceAndAnsweredAsAlone() throws {
        let h = try RouteHarness()
        let tokens = try ["ada", "bob", "eve", "unverified", "newline"].map { try h.session($0) }
        h.store.sessions[2].revokedReason = "operator"
        let requests = [
            RouteHarness.make("GET", "/auth/session", headers: ["Authorization": "Bearer \(tokens[0])"]),
            RouteHarness.make("GET", "/auth/session", headers: ["Cookie": "__Host-tokensignin=\(tokens[1])"]),
            RouteHarness.make("GET", "/healthz"),
            RouteHarness.make("GET", "/auth/session"),
            RouteHarness.make("GET", "/auth/session", headers: ["Authorization": "Bearer \(tokens[2])"]),
            RouteHarness.make("GET", "/auth/session", headers: ["Authorization": "Bearer \(tokens[3])"]),
            RouteHarness.make("GET", "/auth/session", headers: ["Authorization": "Bearer \(tokens[4])"]),
            RouteHarness.make("GET", "/auth/session", headers: ["Authorization": "Bearer nope"]),
            RouteHarness.make("POST", "/healthz"),
            RouteHarness.make("GET", "/auth/session", headers: ["Authorization": "Bearer \(tokens[0])"]),
            RouteHarness.make("POST", "/auth/session", headers: ["Authorization": "Bearer \(tokens[1])"]),
        ]
        let logged = h.log.count
        let together = h.app.handle(batch: requests)
        // Seven well-formed tokens presented to the check route (any method), five sessions: one lookup for them
        // all, one call per session.
        #expect(h.store.liveSessionBatches == [5])
        let batchLog = h.log.count - logged
        let alone = requests.map { h.app.handle($0) }
        #expect(together.count == requests.count)
        for (index, (a, b)) in zip(together, alone).enumerated() {
            #expect(Self.same(a, b), "request \(index): \(a.status) \(a.text) vs \(b.status) \(b.text)")
        }
        #expect(together.map(\.status) == [200, 200, 200, 401, 401, 200, 500, 401, 405, 200, 200])
        #expect(together[0].header("X-User-Sub") == "ada" && together[1].header("X-User-Sub") == "bob")
        #expect(together[5].header("X-User-Sub") == "unverified" && together[9].header("X-User-Sub") == "ada")
        #expect(together[10].header("X-User-Sub") == "bob")
        // The same lines are logged either way (failures only, as for checks alone).
        #expect(batchLog == h.log.count - logged - batchLog && batchLog == 5)
    }

    /// A page's subrequests with one cookie: one store call for all of them, each answered.
    @Test func checksOfOneSessionArrivingTogetherAreOneLookup() throws {
        let h = try RouteHarness()
        let token = try h.session()
        let requests = (0..<6).map { _ in RouteHarness.make("GET", "/auth/session", headers: ["Cookie": "__Host-tokensignin=\(token)"]) }
        let answers = h.app.handle(batch: requests)
        #expect(answers.map(\.status) == Array(repeating: 200, count: 6))
        #expect(answers.allSatisfy { $0.header("X-User-Sub") == "ada" })
        #expect(h.store.liveSessionBatches == [1])
    }

    @Test func aBatchWithOneCheckLooksItUpAlone() throws {
        let h = try RouteHarness()
        let token = try h.session()
        let answers = h.app.handle(batch: [RouteHarness.make("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"]),
                                           RouteHarness.make("GET", "/healthz")])
        #expect(answers.map(\.status) == [200, 200])
        #expect(h.store.liveSessionBatches.isEmpty)
    }

    @Test func theDatabaseDownFailsEveryCheckOfTheBatchWith503() throws {
        let h = try RouteHarness()
        let tokens = try ["ada", "bob"].map { try h.session($0) }
        h.store.nextError = StoreError(.connectionLost, sqlState: "57P01", "terminating connection")
        let answers = h.app.handle(batch: tokens.map { RouteHarness.make("GET", "/auth/session", headers: ["Authorization": "Bearer \($0)"]) }
                                   + [RouteHarness.make("GET", "/healthz")])
        #expect(answers.map(\.status) == [503, 503, 200])
        #expect(answers[0].header("Retry-After") == "2" && answers[1].header("Retry-After") == "2")
        #expect(answers.allSatisfy { $0.header("X-User-Id") == nil })
        let page = h.metrics.exposition([])
        #expect(page.contains(#"tokensignin_database_batches_total{operation="check_session"} 1"#))
        #expect(page.contains(#"tokensignin_database_batched_calls_total{operation="check_session"} 2"#))
    }
}

/// The default lane hands the requests that arrived together to `handle(batch:)` too: their sign-ins, each
/// token verified on its own, are opened in one store call, and every answer is the one the request gets alone.
@Suite struct SignInBatchRouteTests {
    /// A response with its session token (random on every sign-in) replaced by `T`.
    private static func masked(_ response: Response) -> String {
        var text = "\(response.status) " + response.headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n") + "\n" + response.text
        let cookie = response.headers.first { $0.name == "Set-Cookie" }?.value ?? ""
        if let start = cookie.range(of: "__Host-tokensignin="), let end = cookie[start.upperBound...].firstIndex(of: ";"),
           start.upperBound < end {
            text = text.replacingOccurrences(of: String(cookie[start.upperBound..<end]), with: "T")
        }
        return text
    }

    /// Two harnesses with the same users: one answers the requests together, the other one by one.
    private static func pair() throws -> (RouteHarness, RouteHarness) {
        let (together, alone) = (try RouteHarness(), try RouteHarness())
        for h in [together, alone] {
            _ = try h.session("eve")
            h.store.users[0].disabled = true
        }
        return (together, alone)
    }

    private static func signIn(_ token: String, headers: [String: String] = [:]) -> Request {
        RouteHarness.make("POST", "/tokensignin", headers: headers, contentType: "application/json", body: #"{"idToken":"\#(token)"}"#)
    }

    @Test func signInsThatArriveTogetherAreOpenedAtOnceAndAnsweredAsAlone() throws {
        let (h, alone) = try Self.pair()
        let requests = [
            Self.signIn("good-ada"),
            RouteHarness.make("POST", "/tokensignin", contentType: "application/x-www-form-urlencoded", body: "idtoken=good-bob"),
            Self.signIn("expired"),
            Self.signIn("good-ada"),
            Self.signIn("good-bob", headers: ["Origin": "https://evil.example"]),
            Self.signIn("good-eve"),
            RouteHarness.make("GET", "/healthz"),
            RouteHarness.make("POST", "/tokensignin", contentType: "text/plain", body: "good-ada"),
            Self.signIn("no-keys"),
            RouteHarness.make("POST", "/tokensignin", headers: ["Cookie": "g_csrf_token=abc", "Origin": "https://accounts.google.com"],
                              contentType: "application/x-www-form-urlencoded", body: "credential=good-unverified&g_csrf_token=abc"),
        ]
        let together = h.app.handle(batch: requests)
        // Five tokens verified (ada twice, bob, eve, unverified) in one store call; the others refused before it.
        #expect(h.store.signInBatches == [5])
        let one = requests.map { alone.app.handle($0) }
        #expect(alone.store.signInBatches.isEmpty)
        #expect(together.count == requests.count)
        for (index, (a, b)) in zip(together, one).enumerated() {
            #expect(Self.masked(a) == Self.masked(b), "request \(index)")
        }
        #expect(together.map(\.status) == [200, 200, 401, 200, 403, 403, 200, 415, 503, 303])
        #expect(h.store.sessions.count == alone.store.sessions.count && h.store.sessions.count == 1 + 4)
        // The refusals are audited as they are verified, before the batch's sign-ins: the same rows, in another order.
        #expect(h.store.audit.map(\.outcome).sorted() == alone.store.audit.map(\.outcome).sorted())
        // Each answer's session is its own user's.
        for (index, sub) in [(0, "ada"), (1, "bob"), (3, "ada")] {
            let token = try #require(together[index].json["session"].flatMap { ($0 as? [String: Any])?["token"] as? String })
            #expect(h.request("GET", "/auth/session", headers: ["Authorization": "Bearer \(token)"]).header("X-User-Sub") == sub)
        }
        #expect(h.log.count == alone.log.count)
    }

    @Test func aBatchWithOneSignInOpensItAlone() throws {
        let h = try RouteHarness()
        let answers = h.app.handle(batch: [Self.signIn("good-ada"), RouteHarness.make("GET", "/healthz")])
        #expect(answers.map(\.status) == [200, 200])
        #expect(h.store.signInBatches.isEmpty && h.store.sessions.count == 1)
        // Two sign-ins of which one is refused before the database: the other is one call of one.
        let again = h.app.handle(batch: [Self.signIn("expired"), Self.signIn("good-bob")])
        #expect(again.map(\.status) == [401, 200])
        #expect(h.store.signInBatches == [1] && h.store.sessions.count == 2)
    }

    /// One sign-in of the batch failing on its own (its user's row locked): that one is 503, the others are
    /// answered as alone, each at its own position.
    @Test func oneSignInFailingOnItsOwnLeavesTheOthersAnswered() throws {
        let h = try RouteHarness()
        h.store.lockedSubs = ["bob"]
        let answers = h.app.handle(batch: [Self.signIn("good-ada"), Self.signIn("good-bob"), Self.signIn("good-eve")])
        #expect(answers.map(\.status) == [200, 503, 200])
        #expect(answers[1].header("Retry-After") != nil && answers[1].headers("Set-Cookie").isEmpty)
        let subs = answers.map { ($0.json["user"] as? [String: Any])?["sub"] as? String }
        #expect(subs == ["ada", nil, "eve"])
        #expect(h.store.sessions.count == 2 && h.store.signInBatches == [3])
    }

    /// A batch's session tokens come from one draw of the CSPRNG: each answer still carries a token of its own,
    /// of the shape handed out alone, whose hash is the session stored for it (a refusal in between, which
    /// leaves its part of the draw unused, shifts nothing).
    @Test func aBatchsSignInsGetTokensOfTheirOwnFromOneDraw() throws {
        let h = try RouteHarness()
        let answers = h.app.handle(batch: [Self.signIn("good-ada"), Self.signIn("expired"), Self.signIn("good-bob"), Self.signIn("good-eve")])
        #expect(answers.map(\.status) == [200, 401, 200, 200])
        let tokens = answers.compactMap { ($0.json["session"] as? [String: Any])?["token"] as? String }
        #expect(tokens.count == 3 && Set(tokens).count == 3)
        #expect(tokens.allSatisfy { SessionToken(presented: $0) != nil })
        #expect(h.store.sessions.map(\.hash) == tokens.map { SessionToken(presented: $0)!.hash })
        let cookies = [answers[0], answers[2], answers[3]].map { $0.headers("Set-Cookie").first ?? "" }
        #expect(zip(cookies, tokens).allSatisfy { $0.hasPrefix("__Host-tokensignin=\($1);") })
        let drawn = SessionToken.generate(count: 64).map(\.value)
        #expect(Set(drawn).count == 64 && drawn.allSatisfy { SessionToken(presented: $0) != nil })
    }

    @Test func theDatabaseDownFailsEverySignInOfTheBatchWith503AndOpensNothing() throws {
        let h = try RouteHarness()
        h.store.nextError = StoreError(.connectionLost, sqlState: "57P01", "terminating connection")
        let answers = h.app.handle(batch: [Self.signIn("good-ada"), Self.signIn("good-bob"), RouteHarness.make("GET", "/healthz")])
        #expect(answers.map(\.status) == [503, 503, 200])
        #expect(answers[0].header("Retry-After") == "2" && answers[1].header("Retry-After") == "2")
        #expect(answers.allSatisfy { $0.headers("Set-Cookie").isEmpty })
        #expect(h.store.sessions.isEmpty)
        let page = h.metrics.exposition([])
        #expect(page.contains(#"tokensignin_database_batches_total{operation="sign_in"} 1"#))
        #expect(page.contains(#"tokensignin_database_batched_calls_total{operation="sign_in"} 2"#))
    }
}
