// The arguments of the typed statements (`Queries`): each field binds the parameter its name interpolates.
import IDToken
import Store

/// A sign-in: the verified token's claims and the new session, read where they lie.
struct SignInArguments {
    let token: VerifiedToken
    let session: NewSession
    /// The session's absolute lifetime.
    let lifetime: SQLInterval
    /// Live sessions a user may hold.
    let maxSessions: Int

    init(_ token: VerifiedToken, _ session: NewSession, _ policy: SessionPolicy) {
        self.token = token
        self.session = session
        lifetime = SQLInterval(seconds: policy.lifetime)
        maxSessions = policy.maxSessionsPerUser
    }
}

struct RefusedSignInArguments {
    /// The IDTokenError code.
    var reason: String
    var clientID: String?
    var ip: String?
    var userAgent: String?
}

struct CheckSessionArguments {
    var hash: SessionToken.Hash
    var idleTimeout: SQLInterval
}

struct SignOutArguments {
    var hash: SessionToken.Hash
    var idleTimeout: SQLInterval
    /// Every session of the user, not only the presented one.
    var everywhere: Bool
}

struct ListSessionsArguments {
    var hash: SessionToken.Hash
    var idleTimeout: SQLInterval
    /// The page size.
    var limit: Int
    /// The id the page starts below; nil: the first page.
    var after: Int64?
}

struct RevokeOwnSessionArguments {
    var hash: SessionToken.Hash
    var idleTimeout: SQLInterval
    var sessionID: Int64
}
