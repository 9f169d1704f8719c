// The application's view of its database: what the routes ask of sessions and users, in Swift types only.
import IDToken
import Store

/// A point in time as the store returns it: whole Unix seconds, written as RFC 3339 in answers.
public struct Timestamp: Hashable, Comparable, Sendable, SQLDecodable {
    public let unixSeconds: Int64

    public init(unixSeconds: Int64) { self.unixSeconds = unixSeconds }

    /// Decodes `extract(epoch FROM ...)::bigint`.
    public init(sqlText: String?) throws(StoreError) { unixSeconds = try Int64(sqlText: sqlText) }

    /// `YYYY-MM-DDTHH:MM:SSZ` in UTC.
    public var rfc3339: String { RFC3339.format(unixSeconds: unixSeconds) }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.unixSeconds < rhs.unixSeconds }
}

/// How long sessions live and how many a user may hold; fixed for a store's lifetime (the service's settings).
public struct SessionPolicy: Sendable, Hashable {
    /// Absolute lifetime, from the sign-in.
    public var lifetime: Int64
    /// Longest gap between two uses.
    public var idleTimeout: Int64
    /// Unexpired sessions one user may hold; a sign-in beyond it revokes the least recently used (`session_limit`).
    public var maxSessionsPerUser: Int

    public init(lifetime: Int64, idleTimeout: Int64, maxSessionsPerUser: Int) {
        self.lifetime = lifetime
        self.idleTimeout = idleTimeout
        self.maxSessionsPerUser = maxSessionsPerUser
    }
}

/// The session a sign-in opens: the hash of its token and where it comes from.
struct NewSession: Sendable {
    var tokenHash: SessionToken.Hash
    var clientID: String
    var userAgent: String?
    /// The client address, only when it parses as one (an `inet` column).
    var ip: String?
}

/// Why a verified sign-in was refused by what the database knows of the account.
enum AccountRefusal: String, Sendable, CaseIterable {
    /// An operator disabled the account (`users.disabled_at`).
    case accountDisabled = "account_disabled"
    /// Google's Cross-Account Protection blocked Google sign-in for it (`users.google_sign_in_blocked_at`).
    case googleSignInBlocked = "google_sign_in_blocked"
    /// The ID token was issued before Google revoked the account's sessions (`users.id_tokens_invalid_before`):
    /// the token is no longer good (401), the account may sign in again with a new one.
    case idTokenRevoked = "id_token_revoked"
}

/// What a sign-in did.
enum SignInOutcome: Sendable, Equatable {
    case signedIn(SignedIn)
    /// The user row exists (and was updated) but no session was opened; the audit row says why.
    case refused(userID: Int64, AccountRefusal)
}

struct SignedIn: Sendable, Equatable {
    var userID: Int64
    /// True when this sign-in created the user.
    var created: Bool
    var sessionID: Int64
    var expiresAt: Timestamp
}

/// A live session and its user, as the session check answers it.
struct LiveSession: Sendable, Equatable {
    var sessionID: Int64
    var userID: Int64
    var sub: String
    var email: String?
    var emailVerified: Bool
    var expiresAt: Timestamp
}

/// One of the user's live sessions, for the devices list.
struct SessionSummary: Sendable, Equatable {
    var id: Int64
    var createdAt: Timestamp
    var lastSeenAt: Timestamp
    var expiresAt: Timestamp
    var userAgent: String?
    var ip: String?
    var clientID: String?
    /// The session making the request.
    var current: Bool
}

/// A page of the devices list, newest first; `next` is the cursor for the following page, if any.
struct SessionPage: Sendable, Equatable {
    var sessions: [SessionSummary]
    var next: Int64?
}

/// What sign-out did: the presenting session and how many sessions it ended (itself included).
struct SignedOut: Sendable, Equatable {
    var sessionID: Int64
    var revoked: Int
}

/// What revoking one of the user's own sessions did.
enum RevokeOutcome: Sendable, Equatable {
    case revoked(by: Int64)
    /// Not one of the presenting user's live sessions (unknown, another user's, expired, idle or revoked).
    case notFound
}

/// The session and user statements one worker runs, each a single round trip. Every method that takes a
/// `SessionToken.Hash` first authenticates it as a live session (not revoked, not expired, not idle, user not
/// disabled) and returns nil when it is not one. Errors are `StoreError`s: `isRetryable` ones mean the
/// database is unavailable right now; the others are faults of the deployment or the code.
///
/// Not shared between threads: each worker owns one (and, for PostgreSQL, its connection).
protocol SessionStore: AnyObject {
    /// Upserts the user on `google_sub`, opens the session unless the account is refused, writes the audit row.
    func signIn(_ token: VerifiedToken, _ session: NewSession) throws -> SignInOutcome
    /// Several verified sign-ins at once (one round trip for the database), each with its own outcome; throws
    /// only what fails them all.
    func signIns(_ batch: [(token: VerifiedToken, session: NewSession)]) throws -> [Result<SignInOutcome, any Error>]
    /// Audits a sign-in refused before the database was involved (`reason` is an IDTokenError code name).
    func recordRefusedSignIn(reason: String, clientID: String?, ip: String?, userAgent: String?) throws
    /// The session check; also records the use (`last_seen_at`, at most once a minute).
    func liveSession(_ hash: SessionToken.Hash) throws -> LiveSession?
    /// The checks of several requests at once (one round trip for the database), each with its own outcome.
    func liveSessions(_ hashes: [SessionToken.Hash]) throws -> [Result<LiveSession?, any Error>]
    func signOut(_ hash: SessionToken.Hash, everywhere: Bool) throws -> SignedOut?
    /// At most `limit` sessions with an id below `after`, newest first.
    func listSessions(_ hash: SessionToken.Hash, limit: Int, after: Int64?) throws -> SessionPage?
    func revokeSession(_ id: Int64, presentedBy hash: SessionToken.Hash) throws -> RevokeOutcome?
    /// A round trip that touches no table (`/readyz`).
    func ping() throws
}
