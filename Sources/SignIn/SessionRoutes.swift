// The session routes: the check nginx's auth_request makes, sign-out, the devices list and revoking one of them.
import FastCGI
import Sessions

extension Application {
    /// How a request presents its session: a Bearer header decides; another scheme (Basic auth in front of a
    /// staging site) is not ours, and then the session cookie counts. A value that cannot be a token is nil.
    enum Presented {
        case bearer(SessionToken?)
        case cookie(SessionToken?)

        var token: SessionToken? {
            switch self {
            case .bearer(let token), .cookie(let token): token
            }
        }
    }

    func presented(_ request: Request) -> Presented? {
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
    func sessionToken(_ request: Request) throws(SignInError) -> SessionToken {
        guard let token = presented(request)?.token else { throw SignInError(.notSignedIn, "no session token presented") }
        return token
    }

    /// The presented session for a change. Cookie-authenticated changes must come from the site itself (Origin
    /// or Sec-Fetch-Site); a Bearer-authenticated one without Origin must not be a browser's cross-site request
    /// (Sec-Fetch-Site). Checked before the token itself, so a forged request learns nothing of it.
    func sessionForChange(_ request: Request) throws(SignInError) -> SessionToken {
        guard let presented = presented(request) else { throw SignInError(.notSignedIn, "no session token presented") }
        let origin = request.header("Origin"), secFetchSite = request.header("Sec-Fetch-Site")
        let decision: OriginCheck.Decision
        switch presented {
        case .cookie: decision = originCheck.decide(origin: origin, secFetchSite: secFetchSite)
        case .bearer: decision = origin == nil ? originCheck.decideWithoutOrigin(secFetchSite: secFetchSite) : .allowed
        }
        if case .refused(let reason) = decision { throw SignInError(.crossSite, reason) }
        guard let token = presented.token else { throw SignInError(.notSignedIn, "malformed session token") }
        return token
    }

    /// `prior`: the session looked up with its batch's others, if it was.
    func checkSession(_ request: Request, _ line: inout LogLine, prior: Prior?) throws -> Response {
        let found: LiveSession?
        if case .session(let lookup)? = prior {
            found = try lookup.get()  // looked up with its batch, from the token it presented
        } else {
            let token = try sessionToken(request)
            found = try store.liveSession(token.hash)
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

    func signOut(_ request: Request, _ line: inout LogLine) throws -> Response {
        let token = try sessionForChange(request)
        let everywhere = Self.queryFlag(request.query, "all")
        guard let done = try store.signOut(token.hash, everywhere: everywhere) else {
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

    func listSessions(_ request: Request) throws -> Response {
        let token = try sessionToken(request)
        let query = try QueryParameters(request.query)
        let limit = try query.integer("limit", in: 1...Int64(Self.maxPageSize)).map(Int.init) ?? Self.defaultPageSize
        let after = try query.integer("after", in: 1...Int64.max)
        guard let page = try store.listSessions(token.hash, limit: limit, after: after) else {
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

    func revokeSession(_ id: Int64, _ request: Request, _ line: inout LogLine) throws -> Response {
        let token = try sessionForChange(request)
        switch try store.revokeSession(id, presentedBy: token.hash) {
        case nil: throw SignInError(.notSignedIn, "no live session")
        case .notFound?: throw SignInError(.sessionNotFound, "session \(id)")
        case .revoked(let by)?:
            line["session_id"] = String(id)
            line["by_session"] = String(by)
            return .noContent()
        }
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
