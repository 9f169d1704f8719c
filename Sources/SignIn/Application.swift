// The routes: each takes a Request and gives a Response, over a SessionStore and a TokenVerifying.
import FastCGI
import GoogleKeys
import IDToken
import Logging
import Sessions
import Store

/// What verifies an ID token for the routes: the key cache in production, a fixed table in route tests.
package protocol TokenVerifying: Sendable {
    func verify(_ token: String, with verifier: Verifier, now: Int64) -> Result<VerifiedToken, IDTokenError>
    /// The same keys and JOSE rules for Google's security event tokens.
    func verify(_ token: String, with verifier: SecurityEventVerifier, now: Int64) -> Result<VerifiedSecurityEvent, IDTokenError>
    /// Whether a usable key set is loaded, for `/readyz` and `/metrics`.
    var keyReadiness: KeyReadiness { get }
}

/// The key set's state as the operators' endpoints report it.
package struct KeyReadiness: Sendable, Equatable {
    /// A key set is loaded (fresh, or stale within grace).
    var loaded: Bool
    /// Served past its expiry because refreshes fail.
    var stale: Bool
    /// Seconds since the keys were fetched; nil when none were.
    var ageSeconds: Double?
    var fetches: Int
    var failures: Int
}

extension KeyCache: TokenVerifying {
    package var keyReadiness: KeyReadiness {
        let status = self.status
        let age = status.lastSuccessAt.map { status.takenAt - $0 }
        return KeyReadiness(loaded: status.keyCount > 0, stale: status.isStale,
                            ageSeconds: age.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 },
                            fetches: status.fetches, failures: status.failures)
    }
}

/// What every worker shares: settings, the verifier, the log, the clock, the metrics. Immutable.
package struct Service: Sendable {
    package var site: Site
    package var tokens: any TokenVerifying
    package var log: Log
    package var clock: @Sendable () -> Int64
    package var metrics: Metrics
    /// Gauges read when `/metrics` is scraped (the FastCGI server's workers).
    package var samples: @Sendable () -> [Metrics.Sample]

    package init(site: Site, tokens: any TokenVerifying, log: Log, clock: @escaping @Sendable () -> Int64, metrics: Metrics,
                 samples: @escaping @Sendable () -> [Metrics.Sample] = { [] }) {
        self.site = site
        self.tokens = tokens
        self.log = log
        self.clock = clock
        self.metrics = metrics
        self.samples = samples
    }
}

/// One worker's application: the routes of docs/http.md over this worker's store. Not shared between threads.
package final class Application: Handler {
    let site: Site
    private let service: Service
    private let tokens: any TokenVerifying
    private let verifier: Verifier
    private let eventVerifier: SecurityEventVerifier
    private let store: any SessionStore & SecurityEventStore
    private let log: Log
    private let clock: @Sendable () -> Int64
    private let metrics: Metrics
    private let originCheck: OriginCheck

    package init(service: Service, store: any SessionStore & SecurityEventStore) {
        self.service = service
        self.site = service.site
        self.tokens = service.tokens
        self.verifier = Verifier(policy: service.site.policy)
        self.eventVerifier = SecurityEventVerifier(policy: service.site.policy)
        self.store = store
        self.log = service.log
        self.clock = service.clock
        self.metrics = service.metrics
        self.originCheck = service.site.originCheck
    }

    /// Answers one request; every failure goes through `Failure` and every request through `LogLine`.
    package func handle(_ request: Request) -> Response {
        let (response, line) = answer(request, Route.matching(request), prior: nil, since: ContinuousClock.now)
        if let line { log.write(lines: [line]) }
        return response
    }

    /// What `handle(batch:)` settled for a request before answering it.
    private enum Prior {
        /// Its session check, looked up with the batch's others.
        case session(Result<LiveSession?, any Error>)
        /// Its sign-in: the token verified, the session opened with the batch's others.
        case signIn(AdmittedSignIn, Result<SignInOutcome, any Error>)
        /// Its sign-in, refused before the database (the body, the origin, the token).
        case refused(any Error)
    }

    /// Answers requests that arrived together (a batching lane's): their session checks are looked up in one
    /// store call, and their sign-ins, each token verified on its own, opened in one (a round trip each for the
    /// database); every request is then answered, logged and counted as `handle` does, the log lines written
    /// together.
    package func handle(batch requests: [Request]) -> [Response] {
        let started = ContinuousClock.now
        let matches = requests.map(Route.matching)
        let routes = matches.map { try? $0.get() }
        var priors = [Prior?](repeating: nil, count: requests.count)
        lookUpSessions(requests, routes, into: &priors)
        openSessions(requests, routes, into: &priors)
        var lines: [String] = []
        let responses = requests.indices.map { index in
            let (response, line) = answer(requests[index], matches[index], prior: priors[index], since: started)
            if let line { lines.append(line) }
            return response
        }
        log.write(lines: lines)
        return responses
    }

    /// The batch's session checks, two or more of them, in one store call; one lookup per session (a page's
    /// many subrequests with one cookie arrive together).
    private func lookUpSessions(_ requests: [Request], _ routes: [Route?], into priors: inout [Prior?]) {
        var hashes: [SessionToken.Hash] = []
        var seen: [SessionToken.Hash: Int] = [:]
        let slots = zip(requests, routes).map { request, route -> Int? in
            guard case .checkSession? = route, let token = presented(request)?.token else { return nil }
            let hash = token.hash
            if let slot = seen[hash] { return slot }
            seen[hash] = hashes.count
            hashes.append(hash)
            return hashes.count - 1
        }
        // Two or more checks: one store call, even when they all present one session.
        guard slots.lazy.compactMap({ $0 }).count > 1 else { return }
        let started = ContinuousClock.now
        let lookups: [Result<LiveSession?, any Error>]
        do {
            lookups = try store.liveSessions(hashes)
        } catch {
            lookups = Array(repeating: .failure(error), count: hashes.count)
        }
        metrics.databaseBatch(operation: "check_session", statements: hashes.count, seconds: Self.seconds(since: started))
        for (index, slot) in slots.enumerated() { if let slot { priors[index] = .session(lookups[slot]) } }
    }

    /// The batch's sign-ins, two or more of them: each verified as `signIn` does, then those admitted opened in
    /// one store call.
    private func openSessions(_ requests: [Request], _ routes: [Route?], into priors: inout [Prior?]) {
        let indices = routes.indices.filter { if case .signIn? = routes[$0] { true } else { false } }
        guard indices.count > 1 else { return }
        var admitted: [(index: Int, signIn: AdmittedSignIn)] = []
        let sessions = SessionToken.generate(count: indices.count)
        for (index, session) in zip(indices, sessions) {
            do {
                admitted.append((index, try admitSignIn(requests[index], session: session)))
            } catch {
                priors[index] = .refused(error)
            }
        }
        guard !admitted.isEmpty else { return }
        let started = ContinuousClock.now
        let outcomes: [Result<SignInOutcome, any Error>]
        do {
            outcomes = try store.signIns(admitted.map { ($0.signIn.token, $0.signIn.newSession) })
        } catch {
            outcomes = Array(repeating: .failure(error), count: admitted.count)
        }
        if admitted.count == 1 {
            metrics.database(operation: "sign_in", seconds: Self.seconds(since: started))
        } else {
            metrics.databaseBatch(operation: "sign_in", statements: admitted.count, seconds: Self.seconds(since: started))
        }
        for (item, outcome) in zip(admitted, outcomes) { priors[item.index] = .signIn(item.signIn, outcome) }
    }

    /// The response and the log line (nil: not logged) of one request. `match`: its route (`Route.match`);
    /// `prior`: what `handle(batch:)` already did for it; `started`: when its handling began.
    private func answer(_ request: Request, _ match: Result<Route, SignInError>, prior: Prior?,
                        since started: ContinuousClock.Instant) -> (Response, String?) {
        var line = LogLine()
        var route: Route?
        let response: Response
        do {
            let matched = try match.get()
            route = matched
            response = try respond(matched, request, &line, prior: prior)
        } catch {
            let failure = route == .securityEvent ? Failure(securityEvent: error) : Failure(error)
            line.failure = failure
            response = failure.response
        }
        let id = Self.requestID(request)
        let logged = line.text(route: route, request: request, requestID: id, status: response.status, since: started)
        metrics.request(route: route?.name ?? "none", status: response.status, reason: line.failure?.reason)
        guard let id else { return (response, logged) }
        var answered = response
        answered.headers.append(("X-Request-Id", id))
        return (answered, logged)
    }

    /// nginx's `$request_id` (the `REQUEST_ID` parameter the shipped snippets pass): 32 hex digits; anything
    /// that is not 1...64 letters, digits, `-`, `_` or `.` is ignored.
    static func requestID(_ request: Request) -> String? {
        guard let id = request.params["REQUEST_ID"], (1...64).contains(id.utf8.count),
              id.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7a) || $0 == 0x2d || $0 == 0x5f || $0 == 0x2e })
        else { return nil }
        return id
    }

    /// Runs a store call and records its duration under `operation`.
    private func timed<T>(_ operation: String, _ body: () throws -> T) rethrows -> T {
        let started = ContinuousClock.now
        defer { metrics.database(operation: operation, seconds: Self.seconds(since: started)) }
        return try body()
    }

    static func seconds(since started: ContinuousClock.Instant) -> Double {
        let elapsed = (ContinuousClock.now - started).components
        return Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    }

    private func respond(_ route: Route, _ request: Request, _ line: inout LogLine, prior: Prior?) throws -> Response {
        switch route {
        case .signIn: return try signIn(request, &line, prior: prior)
        case .checkSession:
            guard case .session(let lookup)? = prior else { return try checkSession(request, &line, lookup: nil) }
            return try checkSession(request, &line, lookup: lookup)
        case .signOut: return try signOut(request, &line)
        case .listSessions: return try listSessions(request)
        case .revokeSession(let id): return try revokeSession(id, request, &line)
        case .securityEvent: return try securityEvent(request, &line)
        case .health: return .json(.object([("status", .string("ok"))]))
        case .ready: return try ready()
        case .metrics: return metricsPage()
        }
    }

    // MARK: POST /risc

    /// The media types a SET may come as (RFC 8417's, and plain JWT).
    static let securityEventMediaTypes: Set<String> = ["application/secevent+jwt", "application/jwt"]

    /// Cross-Account Protection (docs/risc.md): verifies the SET, records and applies each of its events once,
    /// and answers `202` (also for a SET received before: Google redelivers until it gets one).
    private func securityEvent(_ request: Request, _ line: inout LogLine) throws -> Response {
        guard !request.bodyTooLarge else { throw SignInError(.malformedSecurityEvent, "the security event token is over 64 KiB") }
        guard let mediaType = request.contentType.map(MediaType.essence(of:)), Self.securityEventMediaTypes.contains(mediaType) else {
            throw SignInError(.malformedSecurityEvent, "send the token as application/secevent+jwt")
        }
        guard let text = String(validating: request.body, as: UTF8.self) else {
            throw SignInError(.malformedSecurityEvent, "the body is not a compact JWS")
        }
        let token = text.trimmingASCIIWhitespace()
        let set: VerifiedSecurityEvent
        switch tokens.verify(token, with: eventVerifier, now: clock()) {
        case .success(let verified): set = verified
        case .failure(let error): throw error
        }
        line["jti"] = Self.loggable(set.jti)
        let records = set.events.map { event in
            // Only a subject Google issued names one of our users (google_sub is Google's sub).
            let sub = event.subject.flatMap { SecurityEventVerifier.issuers.contains($0.issuer) ? $0.sub : nil }
            return SecurityEventRecord(jti: set.jti, issuer: set.issuer, type: event.type, subject: sub, reason: event.reason,
                                       state: event.state, issuedAt: set.issuedAt)
        }
        let applied = try timed("apply_security_event") { try store.applySecurityEvents(records) }
        for event in applied { metrics.securityEvent(type: event.type, outcome: event.outcome) }
        line["events"] = applied.map { "\(Self.shortType($0.type)):\($0.outcome)" }.joined(separator: ",")
        if let user = applied.compactMap(\.userID).first { line["user_id"] = String(user) }
        return Response(status: 202, headers: [("Cache-Control", "no-store")])
    }

    /// The last path segment of an event type URI, for log lines (`account-disabled`).
    static func shortType(_ type: String) -> String {
        String(type.split(separator: "/").last ?? Substring(type)).filter { $0.isASCII && !$0.isWhitespace && $0 != "," }
    }

    /// A value from a token made safe for one log field: printable ASCII, at most 64 characters.
    static func loggable(_ value: String) -> String {
        String(value.unicodeScalars.filter { $0.value > 0x20 && $0.value < 0x7f }.prefix(64).map(Character.init))
    }

    // MARK: operators' endpoints

    /// `200` when this worker's database connection answers and a key set is loaded and not stale; `503` with
    /// the reasons otherwise (never a 200 that a load balancer would trust wrongly).
    private func ready() throws -> Response {
        var reasons: [JSONValue] = []
        do {
            try timed("ping") { try store.ping() }
        } catch let error as StoreError {
            reasons.append(.string(error.isRetryable ? "database_unavailable" : "database_fault"))
        }
        let keys = tokens.keyReadiness
        if !keys.loaded { reasons.append(.string("keys_not_loaded")) } else if keys.stale { reasons.append(.string("keys_stale")) }
        guard reasons.isEmpty else {
            return .json(status: 503, .object([("status", .string("unavailable")), ("reasons", .array(reasons))]),
                         headers: [("Retry-After", String(Failure.retryAfterDatabase))])
        }
        return .json(.object([("status", .string("ready"))]))
    }

    private func metricsPage() -> Response {
        let keys = tokens.keyReadiness
        var samples = [
            Metrics.Sample(name: "tokensignin_keys_loaded", help: "1 when a usable key set is loaded.", value: keys.loaded ? 1 : 0),
            Metrics.Sample(name: "tokensignin_keys_stale", help: "1 when the key set is served past its expiry.", value: keys.stale ? 1 : 0),
            Metrics.Sample(name: "tokensignin_key_refreshes_total", help: "Key set fetches started.", type: "counter", value: Double(keys.fetches)),
            Metrics.Sample(name: "tokensignin_key_refresh_failures_total", help: "Key set fetches that failed.", type: "counter",
                           value: Double(keys.failures)),
        ]
        if let age = keys.ageSeconds {
            samples.append(Metrics.Sample(name: "tokensignin_key_set_age_seconds", help: "Seconds since the key set was fetched.", value: age))
        }
        let text = metrics.exposition(samples + service.samples())
        return Response(status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8"),
                                               ("Cache-Control", "no-store")], body: Array(text.utf8))
    }

    // MARK: POST /tokensignin

    /// A sign-in whose token is verified, with the session it is to open. A class, so a batch's `Prior`s stay
    /// small (a token's claims are many strings).
    private final class AdmittedSignIn {
        let isWebForm: Bool
        let token: VerifiedToken
        let session: SessionToken
        let newSession: NewSession

        init(isWebForm: Bool, token: VerifiedToken, session: SessionToken, newSession: NewSession) {
            self.isWebForm = isWebForm
            self.token = token
            self.session = session
            self.newSession = newSession
        }
    }

    private func signIn(_ request: Request, _ line: inout LogLine, prior: Prior?) throws -> Response {
        let admitted: AdmittedSignIn
        let outcome: SignInOutcome
        switch prior {
        case .signIn(let verified, let opened)?:
            admitted = verified
            outcome = try opened.get()
        case .refused(let error)?:
            throw error
        default:
            admitted = try admitSignIn(request)
            outcome = try timed("sign_in") { try store.signIn(admitted.token, admitted.newSession) }
        }
        return try signedIn(admitted, outcome, &line)
    }

    /// Everything of a sign-in before the database: the body, login CSRF, the token's verification. `session`:
    /// the new session's token when the caller drew it already (a batch's, in one draw); else one is drawn once
    /// the token is verified.
    private func admitSignIn(_ request: Request, session: SessionToken? = nil) throws -> AdmittedSignIn {
        guard !request.bodyTooLarge else { throw SignInError(.bodyTooLarge) }
        let parsed = try SignInRequest.parse(contentType: request.contentType, body: request.body,
                                             cookieHeader: request.header("Cookie"))
        // Login CSRF: another site's page must not sign this browser into an attacker's account. The web
        // form is posted by Google's page (Origin https://accounts.google.com) and carries its CSRF pair.
        if case .refused(let reason) = originCheck.decideTokenPost(origin: request.header("Origin"), webForm: parsed.isWebForm) {
            throw SignInError(.crossSite, reason)
        }

        let token: VerifiedToken
        let verifyStarted = ContinuousClock.now
        let verification = tokens.verify(parsed.idToken, with: verifier, now: clock())
        metrics.verification(seconds: Self.seconds(since: verifyStarted))
        switch verification {
        case .success(let verified):
            token = verified
        case .failure(let error):
            if !error.isRetryable {
                // Best effort: the audit row must not turn a 401 into a 503.
                try? store.recordRefusedSignIn(reason: error.code.name, clientID: nil, ip: request.remoteIP,
                                               userAgent: Self.userAgent(request))
            }
            throw error
        }
        let session = session ?? SessionToken.generate()
        return AdmittedSignIn(isWebForm: parsed.isWebForm, token: token, session: session,
                              newSession: NewSession(tokenHash: session.hash, clientID: token.audience,
                                                     userAgent: Self.userAgent(request), ip: request.remoteIP))
    }

    /// The answer to a sign-in the database has decided.
    private func signedIn(_ admitted: AdmittedSignIn, _ outcome: SignInOutcome, _ line: inout LogLine) throws -> Response {
        let token = admitted.token
        let session = admitted.session
        switch outcome {
        case .refused(let userID, .idTokenRevoked):
            line["user_id"] = String(userID)
            throw SignInError(.idTokenRevoked, "issued before the account's sessions were revoked")
        case .refused(let userID, let refusal):
            line["user_id"] = String(userID)
            throw SignInError(.accountRefused, refusal.rawValue)
        case .signedIn(let signedIn):
            line["user_id"] = String(signedIn.userID)
            line["session_id"] = String(signedIn.sessionID)
            line["created"] = String(signedIn.created)
            line["client_id"] = token.audience
            let cookie = ("Set-Cookie", Cookies.sessionCookie(name: site.cookieName, token: session.value,
                                                              maxAge: site.sessionTTL))
            if admitted.isWebForm {
                return .seeOther(site.signInRedirect, headers: [cookie])
            }
            var body = JSONObjectWriter(capacity: 512)
            body.object("user") { user in
                user.int("id", signedIn.userID)
                user.string("sub", token.subject)
                user.string("email", token.email)
                user.bool("email_verified", token.emailVerified)
                user.string("name", token.name)
                user.string("picture", token.picture)
                user.bool("created", signedIn.created)
            }
            body.object("session") { session in
                session.string("token", admitted.session.value)
                session.string("expires_at", signedIn.expiresAt.rfc3339)
            }
            return .json(encoded: body.finished(), headers: [cookie])
        }
    }

    // MARK: sessions

    /// How a request presents its session: a Bearer header decides; another scheme (Basic auth in front of a
    /// staging site) is not ours, and then the session cookie counts. A value that cannot be a token is nil.
    private enum Presented {
        case bearer(SessionToken?)
        case cookie(SessionToken?)

        var token: SessionToken? {
            switch self {
            case .bearer(let token), .cookie(let token): token
            }
        }
    }

    private func presented(_ request: Request) -> Presented? {
        if let authorization = request.header("Authorization") {
            let utf8 = authorization.utf8
            let space = utf8.firstIndex(of: UInt8(ascii: " ")) ?? utf8.endIndex
            // The scheme is case-insensitive (RFC 9110); compared as ASCII, without making strings.
            if utf8[..<space].elementsEqual("bearer".utf8, by: { $0 | 0x20 == $1 }) {
                guard space < utf8.endIndex else { return .bearer(nil) }
                return .bearer(SessionToken(presented: authorization[authorization.utf8.index(after: space)...]))
            }
        }
        guard let value = Cookies.value(named: site.cookieName, in: request.header("Cookie")) else { return nil }
        return .cookie(SessionToken(presented: value))
    }

    /// The presented session for a read (any way of presenting it).
    private func sessionToken(_ request: Request) throws(SignInError) -> SessionToken {
        guard let token = presented(request)?.token else { throw SignInError(.notSignedIn, "no session token presented") }
        return token
    }

    /// The presented session for a change. Cookie-authenticated changes must come from the site itself (Origin
    /// or Sec-Fetch-Site); that is checked before the token itself, so a forged request learns nothing of it.
    private func sessionForChange(_ request: Request) throws(SignInError) -> SessionToken {
        guard let presented = presented(request) else { throw SignInError(.notSignedIn, "no session token presented") }
        if case .cookie = presented {
            let decision = originCheck.decide(origin: request.header("Origin"),
                                                            secFetchSite: request.header("Sec-Fetch-Site"))
            if case .refused(let reason) = decision { throw SignInError(.crossSite, reason) }
        }
        guard let token = presented.token else { throw SignInError(.notSignedIn, "malformed session token") }
        return token
    }

    private func checkSession(_ request: Request, _ line: inout LogLine,
                              lookup: Result<LiveSession?, any Error>?) throws -> Response {
        let found: LiveSession?
        if let lookup {
            found = try lookup.get()  // looked up with its batch, from the token it presented
        } else {
            let token = try sessionToken(request)
            found = try timed("check_session", { try store.liveSession(token.hash) })
        }
        guard let session = found else {
            throw SignInError(.notSignedIn, "no live session")
        }
        // An unverified address is anyone's to type in: it never reaches the application as an identity.
        let email = session.emailVerified ? session.email : nil
        var headers: [(name: String, value: String)] = [
            ("X-User-Id", String(session.userID)), ("X-User-Sub", session.sub),
            ("X-User-Email-Verified", session.emailVerified ? "true" : "false"),
        ]
        if let email { headers.append(("X-User-Email", email)) }
        // Fail closed: the application behind auth_request must never see a 200 with a missing identity.
        guard headers.allSatisfy({ Self.isHeaderValue($0.value) }) else {
            line["user_id"] = String(session.userID)
            throw SignInError(.identityNotRepresentable, "user \(session.userID): sub or email holds a control character")
        }
        var body = JSONObjectWriter(capacity: 128 + session.sub.utf8.count + (email?.utf8.count ?? 0))
        body.int("user_id", session.userID)
        body.string("sub", session.sub)
        body.string("email", email)
        body.bool("email_verified", session.emailVerified)
        body.int("session_id", session.sessionID)
        return .json(encoded: body.finished(), headers: headers)
    }

    private func signOut(_ request: Request, _ line: inout LogLine) throws -> Response {
        let token = try sessionForChange(request)
        let everywhere = Self.queryFlag(request.query, "all")
        guard let done = try timed("sign_out", { try store.signOut(token.hash, everywhere: everywhere) }) else {
            throw SignInError(.notSignedIn, "no live session")
        }
        line["session_id"] = String(done.sessionID)
        line["revoked"] = String(done.revoked)
        line["all"] = String(everywhere)
        return .noContent(headers: [("Set-Cookie", Cookies.clearingCookie(name: site.cookieName))])
    }

    /// Page size of `GET /sessions` when `limit` is not given, and the largest one allowed.
    static let defaultPageSize = 100
    static let maxPageSize = 100

    private func listSessions(_ request: Request) throws -> Response {
        let token = try sessionToken(request)
        let query = try QueryParameters(request.query)
        let limit = try query.integer("limit", in: 1...Int64(Self.maxPageSize)).map(Int.init) ?? Self.defaultPageSize
        let after = try query.integer("after", in: 1...Int64.max)
        guard let page = try timed("list_sessions", { try store.listSessions(token.hash, limit: limit, after: after) }) else {
            throw SignInError(.notSignedIn, "no live session")
        }
        let sessions: [JSONValue] = page.sessions.map { session in
            .object([
                ("id", .int(session.id)), ("created_at", .string(session.createdAt.rfc3339)),
                ("last_seen_at", .string(session.lastSeenAt.rfc3339)), ("expires_at", .string(session.expiresAt.rfc3339)),
                ("user_agent", .string(session.userAgent)), ("ip", .string(session.ip)),
                ("current", .bool(session.current)), ("client_id", .string(session.clientID)),
            ])
        }
        return .json(.object([("sessions", .array(sessions)), ("next", page.next.map { .int($0) } ?? .null)]))
    }

    private func revokeSession(_ id: Int64, _ request: Request, _ line: inout LogLine) throws -> Response {
        let token = try sessionForChange(request)
        switch try timed("revoke_session", { try store.revokeSession(id, presentedBy: token.hash) }) {
        case nil: throw SignInError(.notSignedIn, "no live session")
        case .notFound?: throw SignInError(.sessionNotFound, "session \(id)")
        case .revoked(let by)?:
            line["session_id"] = String(id)
            line["by_session"] = String(by)
            return .noContent()
        }
    }

    // MARK: request details

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

    /// RFC 9110 field-value bytes: visible characters, space, tab and non-ASCII; no CR, LF, NUL or other controls.
    static func isHeaderValue(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }
}

/// The query string as `name=value` pairs (values percent-decoded); a name given twice is refused.
struct QueryParameters {
    private var values: [String: String] = [:]

    init(_ query: String) throws(SignInError) {
        guard query.utf8.count <= 2048 else { throw SignInError(.invalidQuery, "query string over 2 KB") }
        for (name, value) in try FormURLEncoded.decode(Array(query.utf8)) {
            guard values.updateValue(value, forKey: name) == nil else {
                throw SignInError(.invalidQuery, "\(name) given twice")
            }
        }
    }

    /// The decimal value of `name` within `range`; nil when absent.
    func integer(_ name: String, in range: ClosedRange<Int64>) throws(SignInError) -> Int64? {
        guard let text = values[name] else { return nil }
        guard (1...18).contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let value = Int64(text), range.contains(value) else {
            throw SignInError(.invalidQuery, "\(name) must be a whole number in \(range)")
        }
        return value
    }
}

/// One request's log line: route, status, duration, request id, the failure's reason, and the fields a route adds.
struct LogLine {
    var failure: Failure?
    private var fields: [(String, String)] = []

    subscript(name: String) -> String? {
        get { fields.first { $0.0 == name }?.1 }
        set {
            guard let newValue else { return }
            if fields.isEmpty { fields.reserveCapacity(4) }  // a sign-in adds four
            fields.append((name, newValue))
        }
    }

    /// The request's line for `Log.write(lines:)`; nil for successful session checks and operators' probes,
    /// which are not logged (nginx's access log has them; every page view makes a check, and monitoring
    /// scrapes every few seconds).
    func text(route: Route?, request: Request, requestID: String?, status: Int, since started: ContinuousClock.Instant) -> String? {
        if route?.isCheck == true && failure == nil { return nil }
        let elapsed = ContinuousClock.now - started
        let micros = elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000
        var line = Log.LineBuilder(level: failure?.isServerFault == true ? "error" : "info", event: "request")
        line.field("route", route?.name ?? "none")
        line.field("method", request.method)
        line.field("status", String(status))
        line.field("duration_us", String(micros))
        line.field("request_id", requestID)
        line.field("reason", failure?.reason)
        line.field("sqlstate", failure?.sqlState)
        line.field("ip", request.remoteAddress)
        for (name, value) in fields { line.field(name, value) }
        return line.text()
    }
}
