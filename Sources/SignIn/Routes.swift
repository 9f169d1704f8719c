// The route table: every endpoint declared once (method, path, handler, lane, batching, metric name), matched once.
import FastCGI
import Sessions

/// One endpoint of docs/http.md and everything the responder needs to know about it.
package struct Route: Sendable {
    /// The server's lanes, in the order `Routes.lanes` builds them.
    package enum Lane: Int, CaseIterable, Sendable {
        /// Sign-ins and everything else.
        case standard
        /// What a protected site or a monitor waits on: never queued behind sign-ins, never waiting on Google.
        case checks
    }

    /// What `Application.handle(batch:)` does for this route's requests when a lane hands several over together.
    package enum Batching: Sendable {
        /// Answered one by one, even inside a batch (a sign-out waiting on a lock must not hold up the others).
        case none
        /// Answered one by one, but may share a batch (cheap requests of the checks lane).
        case alongside
        /// Session checks looked up in one store call.
        case sessionChecks
        /// Sign-ins verified one by one, then opened in one store call.
        case signIns

        /// Whether the lane may hand this route's requests over in a batch.
        var batches: Bool {
            switch self {
            case .none: false
            case .alongside, .sessionChecks, .signIns: true
            }
        }
    }

    /// How the path is matched.
    package enum Path: Sendable {
        case exact(String)
        /// `prefix` followed by a session id (`SessionID.parse`); anything else after it is not found.
        case sessionID(prefix: String)
    }

    /// A stable name for logs and metrics (`route=` and `tokensignin_requests_total{route=...}`).
    package let name: String
    /// The methods it answers; nil: any (nginx's auth_request subrequest keeps the method of the request it guards).
    package let methods: [String]?
    package let path: Path
    package let lane: Lane
    package let batching: Batching
    /// Its failures are RFC 8935's answers (`400 {"err": ...}`), not the JSON error body: the security event receiver.
    package let answersAsReceiver: Bool
    /// Answered successfully, it writes no log line (nginx's access log has it): checks and operators' probes.
    package let quietOnSuccess: Bool
    /// Its row in `Routes.table`.
    package fileprivate(set) var index = -1
    /// Answers the request; `parameter` is the path's session id for `.sessionID` paths.
    let handler: @Sendable (Application, Request, _ parameter: Int64?, inout LogLine, Prior?) throws -> Response

    init(_ methods: [String]?, _ path: Path, name: String, lane: Lane = .standard, batching: Batching = .none,
         answersAsReceiver: Bool = false, quietOnSuccess: Bool = false,
         handler: @escaping @Sendable (Application, Request, Int64?, inout LogLine, Prior?) throws -> Response) {
        self.methods = methods
        self.path = path
        self.name = name
        self.lane = lane
        self.batching = batching
        self.answersAsReceiver = answersAsReceiver
        self.quietOnSuccess = quietOnSuccess
        self.handler = handler
    }
}

extension Route {
    /// The path's parameter (a `.sessionID` path's id), nil for an exact path.
    func parameter(in path: String) -> Int64? {
        guard case .sessionID(let prefix) = self.path else { return nil }
        return SessionID.parse(path.dropFirst(prefix.count))
    }
}

/// A request's route and its path parameter, as `Routes.match` found them.
package struct MatchedRoute: Sendable {
    package let route: Route
    package let parameter: Int64?
}

/// The endpoints the responder answers (docs/http.md). Adding one is adding a row here and its handler.
package enum Routes {
    static let post = ["POST"], read = ["GET", "HEAD"], delete = ["DELETE"]

    package static let table: [Route] = numbered([
        Route(post, .exact("/tokensignin"), name: "sign_in", batching: .signIns) { app, request, _, line, prior in
            try app.signIn(request, &line, prior: prior)
        },
        Route(nil, .exact("/auth/session"), name: "check_session", lane: .checks, batching: .sessionChecks,
              quietOnSuccess: true) { app, request, _, line, prior in
            try app.checkSession(request, &line, prior: prior)
        },
        Route(post, .exact("/tokensignout"), name: "sign_out") { app, request, _, line, _ in try app.signOut(request, &line) },
        Route(read, .exact("/sessions"), name: "list_sessions") { app, request, _, _, _ in try app.listSessions(request) },
        Route(delete, .sessionID(prefix: "/sessions/"), name: "revoke_session") { app, request, id, line, _ in
            try app.revokeSession(id ?? 0, request, &line)
        },
        Route(post, .exact("/risc"), name: "risc", answersAsReceiver: true) { app, request, _, line, _ in
            try app.securityEvent(request, &line)
        },
        Route(read, .exact("/healthz"), name: "healthz", lane: .checks, batching: .alongside, quietOnSuccess: true) { _, _, _, _, _ in
            .json(.object([("status", .string("ok"))]))
        },
        Route(read, .exact("/readyz"), name: "readyz", lane: .checks, batching: .alongside, quietOnSuccess: true) { app, _, _, _, _ in
            try app.ready()
        },
        Route(read, .exact("/metrics"), name: "metrics", lane: .checks, batching: .alongside, quietOnSuccess: true) { app, _, _, _, _ in
            app.metricsPage()
        },
    ])

    /// Each row told its place in the table, which `Request.route` carries from the placement to the handler.
    private static func numbered(_ routes: [Route]) -> [Route] {
        routes.enumerated().map { index, route in
            var numbered = route
            numbered.index = index
            return numbered
        }
    }

    /// The exact paths, each with the routes that answer it (built once: every request is matched).
    private static let exact: [String: [Route]] = Dictionary(grouping: table.filter {
        if case .exact = $0.path { true } else { false }
    }) { route in
        guard case .exact(let path) = route.path else { return "" }
        return path
    }

    /// The route of a request: `.notFound` for no such path, `.methodNotAllowed` (with `Allow`) for a path that
    /// exists without this method. Checked before anything else of the request is read.
    package static func match(_ request: Request) throws(SignInError) -> MatchedRoute {
        let path = request.path
        if let routes = exact[path] { return try choose(routes, request.method, parameter: nil) }
        for route in table {
            guard case .sessionID(let prefix) = route.path, path.hasPrefix(prefix),
                  let id = SessionID.parse(path.dropFirst(prefix.count)) else { continue }
            return try choose([route], request.method, parameter: id)
        }
        throw SignInError(.notFound, path.count > 200 ? String(path.prefix(200)) + "..." : path)
    }

    /// The route of a request as a value: the one `placement(of:)` matched it to, when the server placed it by that
    /// (`Request.route`), else matched now.
    package static func matching(_ request: Request) -> Result<MatchedRoute, SignInError> {
        if table.indices.contains(request.route) {
            let route = table[request.route]
            return .success(MatchedRoute(route: route, parameter: route.parameter(in: request.path)))
        }
        return Result { () throws(SignInError) in try match(request) }
    }

    private static func choose(_ routes: [Route], _ method: String, parameter: Int64?) throws(SignInError) -> MatchedRoute {
        if let route = routes.first(where: { $0.methods?.contains(method) ?? true }) {
            return MatchedRoute(route: route, parameter: parameter)
        }
        throw SignInError(.methodNotAllowed, method, allow: routes.flatMap { $0.methods ?? [] })
    }

    /// Where a request runs, from its route: its lane, and whether it may be answered in a batch. A request that
    /// matches no route is answered (404, 405) on the standard lane, alone.
    @Sendable package static func placement(of request: Request) -> Placement {
        guard let route = try? match(request).route else { return Placement(lane: Route.Lane.standard.rawValue, batches: false) }
        return Placement(lane: route.lane.rawValue, batches: route.batching.batches, route: route.index)
    }

    /// The server's lanes, indexed by `Route.Lane`: the standard lane takes sign-ins and everything else, the checks
    /// lane the requests a protected site or a monitor waits on, so a slow database under sign-ins never delays them.
    /// Both answer what is ready together (`Application.handle(batch:)`); only checks are quick enough for their
    /// worker to keep the reading to itself meanwhile.
    package static func lanes(workers: Int, checkWorkers: Int, signInBatch: Int) -> [Lane] {
        Route.Lane.allCases.map { lane in
            switch lane {
            case .standard:
                Lane(name: "default", workers: workers, queueLimit: 16 * workers, maxWait: .seconds(5), batch: signInBatch)
            case .checks:
                Lane(name: "checks", workers: checkWorkers, queueLimit: 64 * checkWorkers, maxWait: .seconds(2), batch: 16, quick: true)
            }
        }
    }
}
