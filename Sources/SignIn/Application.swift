// The responder: routes each FastCGI request to sign-in, the session check, sign-out or the devices list.
import FastCGI
import GoogleKeys
import IDToken
import Store

/// What every worker shares: settings, the verifier, the key cache and the log. Immutable.
public final class Service: Sendable {
    let configuration: Configuration
    let verifier: Verifier
    let keys: KeyCache
    let log: Log
    let clock: @Sendable () -> Int64

    public init(configuration: Configuration, keys: KeyCache, log: Log, clock: @escaping @Sendable () -> Int64) {
        self.configuration = configuration
        self.verifier = Verifier(policy: configuration.policy)
        self.keys = keys
        self.log = log
        self.clock = clock
    }

    /// One handler per worker thread, each with its own database connection.
    public func makeHandler(worker: Int) -> any Handler { Application(service: self, worker: worker) }
}

/// One worker's request handler. Not shared: it owns the worker's PostgreSQL connection.
final class Application: Handler {
    private let service: Service
    private let worker: Int
    private var connection: Connection?
    private var configuration: Configuration { service.configuration }

    /// Seconds a client should wait before retrying when the database or the keys are unavailable.
    static let retryAfterDatabase = 2
    static let retryAfterKeys = 5

    init(service: Service, worker: Int) {
        self.service = service
        self.worker = worker
    }

    func handle(_ request: Request) -> Response {
        let reply = route(request)
        return Response(status: reply.status, headers: reply.headers.map { (name: $0.0, value: $0.1) }, body: reply.body)
    }

    func route(_ request: Request) -> HTTPReply {
        let path = request.path
        switch path {
        case "/tokensignin":
            guard request.method == "POST" else { return .methodNotAllowed(allow: ["POST"]) }
            return signIn(request)
        case "/auth/session":
            // Any method: nginx's auth_request subrequest keeps the method of the request it guards.
            return checkSession(request)
        case "/tokensignout":
            guard request.method == "POST" else { return .methodNotAllowed(allow: ["POST"]) }
            return signOut(request)
        case "/sessions":
            guard request.method == "GET" || request.method == "HEAD" else { return .methodNotAllowed(allow: ["GET", "HEAD"]) }
            return listSessions(request)
        default:
            if path.hasPrefix("/sessions/"), let id = Self.sessionID(path.dropFirst("/sessions/".count)) {
                guard request.method == "DELETE" else { return .methodNotAllowed(allow: ["DELETE"]) }
                return revokeSession(request, id: id)
            }
            return .error(.notFound, "no such resource")
        }
    }

    // MARK: POST /tokensignin

    private func signIn(_ request: Request) -> HTTPReply {
        guard !request.bodyTooLarge else { return .error(.requestTooLarge, "the request body is over 64 KB") }
        let parsed: SignInRequest
        do {
            parsed = try SignInRequest.parse(contentType: request.contentType, body: request.body,
                                             cookieHeader: request.header("Cookie"))
        } catch {
            service.log.info("sign_in_refused", ["reason": error.code.name, "ip": request.remoteAddress])
            return .error(for: error)
        }
        // Login CSRF: another site's page must not sign this browser into an attacker's account. The web
        // form is posted by Google's page (Origin https://accounts.google.com) and carries its CSRF pair.
        if case .refused(let reason) = configuration.originCheck.decideTokenPost(origin: request.header("Origin"),
                                                                                  webForm: parsed.isWebForm) {
            service.log.info("sign_in_refused", ["reason": "origin", "detail": reason, "ip": request.remoteAddress])
            return .error(.csrfCheckFailed, "the request does not come from this site")
        }

        let verified: VerifiedToken
        switch service.keys.verify(parsed.idToken, with: service.verifier, now: service.clock()) {
        case .success(let token):
            verified = token
        case .failure(let error):
            return refusedSignIn(error, request)
        }

        let session = SessionToken.generate()
        let ip = request.remoteIP
        let userAgent = Self.userAgent(request)
        guard let rows = query(Queries.signIn, [
            verified.subject, verified.email, verified.emailVerified ? "true" : "false", verified.name,
            verified.givenName, verified.familyName, verified.picture, verified.locale, verified.hostedDomain,
            session.hashHex, Queries.interval(configuration.sessionTTL), verified.audience, userAgent, ip,
        ]) else { return Self.databaseUnavailable }
        guard rows.count == 1, let userID = rows[row: 0, column: "user_id"].flatMap({ Int64($0) }) else {
            service.log.error("sign_in_no_row", ["worker": String(worker)])
            return Self.databaseUnavailable
        }
        if let refusal = rows[row: 0, column: "refusal"] {
            service.log.info("sign_in_refused", ["reason": refusal, "user_id": String(userID)])
            return .error(.accessDenied, "this account may not sign in")
        }
        let created = rows[row: 0, column: "created"] == "t"
        let expiresAt = rows[row: 0, column: "expires_at"] ?? ""
        service.log.info("sign_in", ["user_id": String(userID), "session_id": rows[row: 0, column: "session_id"],
                                     "created": String(created), "client_id": verified.audience, "ip": ip])

        let cookie = ("Set-Cookie", Cookies.sessionCookie(name: configuration.cookieName, token: session.value,
                                                          maxAge: configuration.sessionTTL))
        if parsed.isWebForm {
            return .seeOther(configuration.signInRedirect, headers: [cookie])
        }
        let user: JSONValue = .object([
            ("id", .int(userID)), ("sub", .string(verified.subject)), ("email", .string(verified.email)),
            ("email_verified", .bool(verified.emailVerified)), ("name", .string(verified.name)),
            ("picture", .string(verified.picture)), ("created", .bool(created)),
        ])
        return .json(.object([
            ("user", user),
            ("session", .object([("token", .string(session.value)), ("expires_at", .string(expiresAt))])),
        ]), headers: [cookie])
    }

    /// 401 for a bad token, 403 for a domain not allowed, 503 when keys are unavailable; audited.
    private func refusedSignIn(_ error: IDTokenError, _ request: Request) -> HTTPReply {
        service.log.info("sign_in_refused", ["reason": error.code.name, "detail": error.detail, "ip": request.remoteAddress])
        if error.isRetryable {
            return .temporarilyUnavailable(retryAfter: Self.retryAfterKeys, "Google's signing keys are unavailable")
        }
        // Best effort: the audit row must not turn a 401 into a 503.
        _ = try? execute(Queries.signInFailure, [
            error.code.name, nil, request.remoteIP, Self.userAgent(request),
        ])
        if error.code == .hostedDomainNotAllowed {
            return .error(.accessDenied, "this account's domain may not sign in")
        }
        return .error(.invalidToken, "the ID token is not valid")
    }

    // MARK: sessions

    /// The presented session token and whether it came in a cookie (which needs the Origin check for changes).
    private func presentedSession(_ request: Request) -> (token: SessionToken?, byCookie: Bool)? {
        // A Bearer header decides; another scheme (Basic auth in front of a staging site) is not ours.
        if let authorization = request.header("Authorization") {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            if parts.first?.lowercased() == "bearer" {
                return (parts.count == 2 ? SessionToken(presented: parts[1]) : nil, false)
            }
        }
        guard let value = Cookies.value(named: configuration.cookieName, in: request.header("Cookie")) else { return nil }
        return (SessionToken(presented: value), true)
    }

    private static let unauthorized = HTTPReply.error(.invalidToken, "no live session", headers: [("WWW-Authenticate", "Bearer")])

    private func checkSession(_ request: Request) -> HTTPReply {
        guard let presented = presentedSession(request), let token = presented.token else { return Self.unauthorized }
        guard let rows = query(Queries.checkSession, [token.hashHex, idleTimeout]) else { return Self.databaseUnavailable }
        guard rows.count == 1, let userID = rows[row: 0, column: "user_id"], let sub = rows[row: 0, column: "google_sub"] else {
            return Self.unauthorized
        }
        // An unverified address is anyone's to type in: it never reaches the application as an identity.
        let emailVerified = rows[row: 0, column: "email_verified"] == "t"
        let email = emailVerified ? rows[row: 0, column: "email"] : nil
        var headers = [("X-User-Id", userID), ("X-User-Sub", sub), ("X-User-Email-Verified", emailVerified ? "true" : "false")]
        if let email { headers.append(("X-User-Email", email)) }
        return .json(.object([
            ("user_id", .int(Int64(userID) ?? 0)), ("sub", .string(sub)), ("email", .string(email)),
            ("email_verified", .bool(emailVerified)),
            ("session_id", .int(Int64(rows[row: 0, column: "session_id"] ?? "") ?? 0)),
        ]), headers: headers)
    }

    /// Cookie-authenticated changes must come from the site itself (Origin or Sec-Fetch-Site).
    private func crossSiteRefusal(_ request: Request, byCookie: Bool) -> HTTPReply? {
        guard byCookie else { return nil }
        let decision = configuration.originCheck.decide(origin: request.header("Origin"), secFetchSite: request.header("Sec-Fetch-Site"))
        guard case .refused(let reason) = decision else { return nil }
        service.log.info("cross_site_refused", ["path": request.path, "detail": reason, "ip": request.remoteAddress])
        return .error(.csrfCheckFailed, "the request does not come from this site")
    }

    private func signOut(_ request: Request) -> HTTPReply {
        guard let presented = presentedSession(request) else { return Self.unauthorized }
        if let refusal = crossSiteRefusal(request, byCookie: presented.byCookie) { return refusal }
        guard let token = presented.token else { return Self.unauthorized }
        let all = Self.queryFlag(request.query, "all")
        guard let rows = query(Queries.signOut, [token.hashHex, idleTimeout, all ? "true" : "false"]) else { return Self.databaseUnavailable }
        guard rows.count == 1 else { return Self.unauthorized }
        service.log.info("sign_out", ["session_id": rows[0, 0], "revoked": rows[0, 1], "all": String(all)])
        return HTTPReply(status: 204, headers: [("Cache-Control", "no-store"),
                                                ("Set-Cookie", Cookies.clearingCookie(name: configuration.cookieName))])
    }

    private func listSessions(_ request: Request) -> HTTPReply {
        guard let presented = presentedSession(request), let token = presented.token else { return Self.unauthorized }
        guard let rows = query(Queries.listSessions, [token.hashHex, idleTimeout]) else { return Self.databaseUnavailable }
        guard rows.count > 0 else { return Self.unauthorized }
        let sessions: [JSONValue] = (0..<rows.count).map { row in
            .object([
                ("id", .int(Int64(rows[row, 0] ?? "") ?? 0)), ("created_at", .string(rows[row, 1])),
                ("last_seen_at", .string(rows[row, 2])), ("expires_at", .string(rows[row, 3])),
                ("user_agent", .string(rows[row, 4])), ("ip", .string(rows[row, 5])),
                ("current", .bool(rows[row, 6] == "t")), ("client_id", .string(rows[row, 7])),
            ])
        }
        return .json(.object([("sessions", .array(sessions))]))
    }

    private func revokeSession(_ request: Request, id: Int64) -> HTTPReply {
        guard let presented = presentedSession(request) else { return Self.unauthorized }
        if let refusal = crossSiteRefusal(request, byCookie: presented.byCookie) { return refusal }
        guard let token = presented.token else { return Self.unauthorized }
        guard let rows = query(Queries.revokeOwnSession, [token.hashHex, idleTimeout, String(id)]) else { return Self.databaseUnavailable }
        guard rows.count == 1 else { return Self.unauthorized }
        guard rows[0, 1] != "0" else { return .error(.notFound, "no such session") }
        service.log.info("session_revoked", ["session_id": String(id), "by_session": rows[0, 0]])
        return HTTPReply(status: 204, headers: [("Cache-Control", "no-store")])
    }

    // MARK: database

    /// This worker's connection, opened on first use.
    private func database() throws(StoreError) -> Connection {
        if let connection { return connection }
        let opened = try Connection(conninfo: configuration.conninfo)
        connection = opened
        return opened
    }

    /// Runs `statement`; when the connection turns out to have been lost (PostgreSQL restarted since this
    /// worker last used it), re-establishes it and tries once more, so the client sees no error for it.
    /// A sign-in retried after a lost commit fails on the unique token hash instead of opening two sessions.
    private func execute(_ statement: Statement, _ params: [String?]) throws(StoreError) -> Rows {
        do {
            return try database().execute(statement, params)
        } catch where error.code == .connectionLost {
            service.log.warning("database_reconnect", ["operation": statement.name, "worker": String(worker)])
            return try database().execute(statement, params)
        }
    }

    /// Runs `statement` for a request; nil (logged) when the database is unavailable, which the caller
    /// answers with `databaseUnavailable`.
    private func query(_ statement: Statement, _ params: [String?]) -> Rows? {
        do {
            return try execute(statement, params)
        } catch {
            service.log.error("database_unavailable", ["operation": statement.name, "code": error.code.name,
                                                       "sqlstate": error.sqlState, "worker": String(worker)])
            return nil
        }
    }

    private static let databaseUnavailable = HTTPReply.temporarilyUnavailable(retryAfter: retryAfterDatabase)

    private var idleTimeout: String { Queries.interval(configuration.sessionIdleTTL) }

    // MARK: request details

    /// A session id from the path: 1 to 18 digits (anything else is not a resource here).
    static func sessionID(_ text: Substring) -> Int64? {
        guard (1...18).contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(text)
    }

    /// The User-Agent, capped at 512 bytes.
    static func userAgent(_ request: Request) -> String? {
        guard let agent = request.header("User-Agent"), !agent.isEmpty else { return nil }
        guard agent.utf8.count > 512 else { return agent }
        var capped = ""
        for character in agent {
            guard capped.utf8.count + character.utf8.count <= 512 else { break }
            capped.append(character)
        }
        return capped
    }

    /// True when the query string has `name=1` or `name=true`.
    static func queryFlag(_ query: String, _ name: String) -> Bool {
        query.split(separator: "&").contains { $0 == "\(name)=1" || $0 == "\(name)=true" }
    }
}
