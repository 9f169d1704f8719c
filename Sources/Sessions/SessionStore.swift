// The application's view of its database: what the routes ask of sessions and users, in Swift types only.
import IDToken
import Logging
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

/// A session's id as a path (`DELETE /sessions/<id>`) or an operator's command gives it.
package enum SessionID {
    /// 1 to 18 digits, not zero; anything else names no session.
    package static func parse(_ text: some StringProtocol) -> Int64? {
        guard (1...18).contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let id = Int64(text), id > 0 else { return nil }
        return id
    }
}

/// The session a sign-in opens: the hash of its token and where it comes from.
package struct NewSession: Sendable {
    package var tokenHash: SessionToken.Hash
    package var clientID: String
    package var userAgent: String?
    /// The client address, only when it parses as one (an `inet` column).
    package var ip: String?

    package init(tokenHash: SessionToken.Hash, clientID: String, userAgent: String? = nil, ip: String? = nil) {
        self.tokenHash = tokenHash
        self.clientID = clientID
        self.userAgent = userAgent
        self.ip = ip
    }
}

/// Why a verified sign-in was refused by what the database knows of the account.
package enum AccountRefusal: String, Sendable, CaseIterable {
    /// An operator disabled the account (`users.disabled_at`).
    case accountDisabled = "account_disabled"
    /// Google's Cross-Account Protection blocked Google sign-in for it (`users.google_sign_in_blocked_at`).
    case googleSignInBlocked = "google_sign_in_blocked"
    /// The ID token was issued before Google revoked the account's sessions (`users.id_tokens_invalid_before`):
    /// the token is no longer good (401), the account may sign in again with a new one.
    case idTokenRevoked = "id_token_revoked"
}

/// What a sign-in did.
package enum SignInOutcome: Sendable, Equatable {
    case signedIn(SignedIn)
    /// The user row exists (and was updated) but no session was opened; the audit row says why.
    case refused(userID: Int64, AccountRefusal)
}

package struct SignedIn: Sendable, Equatable {
    package var userID: Int64
    /// True when this sign-in created the user.
    package var created: Bool
    package var sessionID: Int64
    package var expiresAt: Timestamp
}

/// A live session and its user, as the session check answers it.
package struct LiveSession: Sendable, Equatable {
    package var sessionID: Int64
    package var userID: Int64
    package var sub: String
    package var email: String?
    package var emailVerified: Bool
    package var expiresAt: Timestamp
    /// `last_seen_at` as the check read it (the session cache counts the idle timeout from it). Not part of what a
    /// session is: two checks of one session are equal whenever the second refreshed it.
    package var lastSeenAt: Timestamp

    package static func == (lhs: Self, rhs: Self) -> Bool {
        (lhs.sessionID, lhs.userID, lhs.sub, lhs.email, lhs.emailVerified, lhs.expiresAt)
            == (rhs.sessionID, rhs.userID, rhs.sub, rhs.email, rhs.emailVerified, rhs.expiresAt)
    }
}

/// One of the user's live sessions, for the devices list.
package struct SessionSummary: Sendable, Equatable {
    package var id: Int64
    package var createdAt: Timestamp
    package var lastSeenAt: Timestamp
    package var expiresAt: Timestamp
    package var userAgent: String?
    package var ip: String?
    package var clientID: String?
    /// The session making the request.
    package var current: Bool
}

/// A page of the devices list, newest first; `next` is the cursor for the following page, if any.
package struct SessionPage: Sendable, Equatable {
    package var sessions: [SessionSummary]
    package var next: Int64?
}

extension SessionPage {
    /// The first `limit` of `sessions` (newest first, read one beyond the page to tell whether another follows),
    /// with the cursor of the next page when there is one.
    init(newestFirst sessions: [SessionSummary], limit: Int) {
        guard sessions.count > limit else {
            self.init(sessions: sessions, next: nil)
            return
        }
        let page = Array(sessions.prefix(limit))
        self.init(sessions: page, next: page.last?.id)
    }
}

/// What sign-out did: the presenting session, how many sessions it ended (itself included) and whose they were.
package struct SignedOut: Sendable, Equatable {
    package var sessionID: Int64
    package var revoked: Int
    package var userID: Int64
}

/// What revoking one of the user's own sessions did.
package enum RevokeOutcome: Sendable, Equatable {
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
package protocol SessionStore: AnyObject {
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
