// Which endpoint a request is for: path and method, checked before anything else is read.
import FastCGI
import Sessions

/// The endpoints the responder answers (docs/http.md). Matching throws `.notFound` or `.methodNotAllowed`.
package enum Route: Equatable, Sendable {
    case signIn
    case checkSession
    case signOut
    case listSessions
    case revokeSession(id: Int64)
    /// `POST /risc`: Google's security event tokens (Cross-Account Protection).
    case securityEvent
    /// `GET /healthz`: the process answers.
    case health
    /// `GET /readyz`: the database answers and a usable key set is loaded.
    case ready
    /// `GET /metrics`: Prometheus text format.
    case metrics

    /// A stable name for logs and metrics.
    var name: String {
        switch self {
        case .signIn: "sign_in"
        case .checkSession: "check_session"
        case .signOut: "sign_out"
        case .listSessions: "list_sessions"
        case .revokeSession: "revoke_session"
        case .securityEvent: "risc"
        case .health: "healthz"
        case .ready: "readyz"
        case .metrics: "metrics"
        }
    }

    /// Requests that must never queue behind sign-ins: nginx's auth_request guards every page with the session
    /// check, and monitoring must see the process even when sign-ins are stuck.
    package var isCheck: Bool {
        switch self {
        case .checkSession, .health, .ready, .metrics: true
        default: false
        }
    }

    package static func match(_ request: Request) throws(SignInError) -> Route {
        let path = request.path
        let method = request.method
        func only(_ allowed: [String], _ route: Route) throws(SignInError) -> Route {
            guard allowed.contains(method) else { throw SignInError(.methodNotAllowed, method, allow: allowed) }
            return route
        }
        switch path {
        case "/tokensignin": return try only(Self.post, .signIn)
        // Any method: nginx's auth_request subrequest keeps the method of the request it guards.
        case "/auth/session": return .checkSession
        case "/tokensignout": return try only(Self.post, .signOut)
        case "/risc": return try only(Self.post, .securityEvent)
        case "/sessions": return try only(Self.read, .listSessions)
        case "/healthz": return try only(Self.read, .health)
        case "/readyz": return try only(Self.read, .ready)
        case "/metrics": return try only(Self.read, .metrics)
        default:
            if path.hasPrefix("/sessions/"), let id = SessionID.parse(path.dropFirst("/sessions/".count)) {
                return try only(Self.delete, .revokeSession(id: id))
            }
            throw SignInError(.notFound, path.count > 200 ? String(path.prefix(200)) + "..." : path)
        }
    }

    /// `match` as a value, for answering a request with the route it was matched to once.
    static func matching(_ request: Request) -> Result<Route, SignInError> {
        Result { () throws(SignInError) in try match(request) }
    }

    // The methods each route allows (built once: every request is matched).
    private static let post = ["POST"], read = ["GET", "HEAD"], delete = ["DELETE"]

}
