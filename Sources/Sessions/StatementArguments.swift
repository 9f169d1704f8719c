// The arguments of the typed statements (`Queries`): each field binds the parameter its name interpolates.
import IDToken
import Store

struct SignInArguments {
    var googleSub: String
    var email: String?
    var emailVerified: Bool
    var name: String?
    var givenName: String?
    var familyName: String?
    var picture: String?
    var locale: String?
    var hostedDomain: String?
    /// SHA-256 of the new session's token.
    var tokenHash: SessionToken.Hash
    /// The session's absolute lifetime.
    var lifetime: SQLInterval
    /// The token's `aud`.
    var clientID: String
    var userAgent: String?
    /// The client address, NULL when it is not one.
    var ip: String?
    /// Live sessions a user may hold.
    var maxSessions: Int
    /// The ID token's `iat` (Unix seconds).
    var issuedAt: Int64

    init(_ token: VerifiedToken, _ session: NewSession, _ policy: SessionPolicy) {
        googleSub = token.subject
        email = token.email
        emailVerified = token.emailVerified
        name = token.name
        givenName = token.givenName
        familyName = token.familyName
        picture = token.picture
        locale = token.locale
        hostedDomain = token.hostedDomain
        tokenHash = session.tokenHash
        lifetime = SQLInterval(seconds: policy.lifetime)
        clientID = session.clientID
        userAgent = session.userAgent
        ip = session.ip
        maxSessions = policy.maxSessionsPerUser
        issuedAt = token.issuedAt
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

struct SecurityEventArguments {
    var jti: String
    var issuer: String
    /// The event type URI.
    var type: String
    /// The subject's sub; nil: none we read.
    var subject: String?
    var reason: String?
    var state: String?
    /// The SET's `iat` (Unix seconds).
    var issuedAt: Int64
    /// `SecurityAction`'s raw value.
    var action: String
    var flagReason: String?

    init(_ event: SecurityEventRecord) {
        jti = event.jti
        issuer = event.issuer
        type = event.type
        subject = event.subject
        reason = event.reason
        state = event.state
        issuedAt = event.issuedAt
        action = event.action.rawValue
        flagReason = SecurityAction.flagReason(type: event.type, reason: event.reason)
    }
}
