// The application's SQL: every statement a request or an operator command runs, with $n parameters only.
import Store

/// Statements are prepared once per connection (named) and reused by that worker.
enum Queries {
    /// Session authentication shared by every session route: the live session whose hash is $1, where $2 is
    /// the idle timeout in seconds. Revoked, expired, idle or disabled-user sessions do not match.
    private static let liveSession = """
        SELECT s.id, s.user_id, s.last_seen_at
        FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id
        WHERE s.token_hash = decode($1, 'hex')
          AND s.revoked_at IS NULL
          AND s.expires_at > now()
          AND s.last_seen_at > now() - make_interval(secs => $2::bigint)
          AND u.disabled_at IS NULL
        """

    /// One sign-in in one round trip: upsert the user on google_sub, open a session (unless the account is
    /// disabled), and record the outcome. A single statement is a single transaction.
    /// $1 sub, $2 email, $3 email_verified, $4 name, $5 given_name, $6 family_name, $7 picture, $8 locale,
    /// $9 hosted_domain, $10 token hash (hex), $11 session lifetime (s), $12 client id, $13 user agent, $14 ip.
    static let signIn = Statement(name: "sign_in", sql: """
        WITH u AS (
            INSERT INTO signin.users AS u (google_sub, email, email_verified, name, given_name, family_name,
                                           picture, locale, hosted_domain, last_sign_in_at)
            VALUES ($1, $2, $3::boolean, $4, $5, $6, $7, $8, $9, now())
            ON CONFLICT (google_sub) DO UPDATE
               SET email = EXCLUDED.email, email_verified = EXCLUDED.email_verified, name = EXCLUDED.name,
                   given_name = EXCLUDED.given_name, family_name = EXCLUDED.family_name,
                   picture = EXCLUDED.picture, locale = EXCLUDED.locale, hosted_domain = EXCLUDED.hosted_domain,
                   updated_at = now(), last_sign_in_at = now()
            RETURNING u.id, (u.xmax = 0) AS created, u.disabled_at IS NOT NULL AS disabled
        ), s AS (
            INSERT INTO signin.sessions (user_id, token_hash, expires_at, client_id, user_agent, ip)
            SELECT u.id, decode($10, 'hex'), now() + make_interval(secs => $11::bigint), $12, $13, $14::inet
            FROM u WHERE NOT u.disabled
            RETURNING id, expires_at
        ), audit AS (
            INSERT INTO signin.sign_ins (user_id, google_sub, outcome, reason, client_id, ip, user_agent, session_id)
            SELECT u.id, $1, CASE WHEN u.disabled THEN 'failure' ELSE 'success' END,
                   CASE WHEN u.disabled THEN 'account_disabled' END, $12, $14::inet, $13, s.id
            FROM u LEFT JOIN s ON true
        )
        SELECT u.id, u.created, u.disabled, s.id,
               to_char(s.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
        FROM u LEFT JOIN s ON true
        """)

    /// A refused sign-in, for the audit table: $1 reason code, $2 client id (if known), $3 ip, $4 user agent.
    static let signInFailure = Statement(name: "sign_in_failure", sql: """
        INSERT INTO signin.sign_ins (outcome, reason, client_id, ip, user_agent, google_sub)
        VALUES ('failure', $1, $2, $3::inet, $4, $5)
        """)

    /// The auth_request check: $1 hash, $2 idle seconds. Touches last_seen_at at most once a minute.
    static let checkSession = Statement(name: "check_session", sql: """
        WITH s AS (\(liveSession)),
        touch AS (
            UPDATE signin.sessions t SET last_seen_at = now()
            FROM s WHERE t.id = s.id AND s.last_seen_at < now() - interval '60 seconds'
        )
        SELECT s.id, u.id, u.google_sub, u.email
        FROM s JOIN signin.users u ON u.id = s.user_id
        """)

    /// Sign-out: $1 hash, $2 idle seconds, $3 true to revoke every session of the user. Returns the
    /// authenticated session (no row: not signed in) and how many sessions were revoked.
    static let signOut = Statement(name: "sign_out", sql: """
        WITH me AS (\(liveSession)),
        revoked AS (
            UPDATE signin.sessions s
               SET revoked_at = now(),
                   revoked_reason = CASE WHEN $3::boolean THEN 'sign_out_all' ELSE 'sign_out' END
            FROM me
            WHERE s.revoked_at IS NULL AND (s.id = me.id OR ($3::boolean AND s.user_id = me.user_id))
            RETURNING s.id
        )
        SELECT me.id, (SELECT count(*) FROM revoked) FROM me
        """)

    /// The signed-in user's live sessions, newest first: $1 hash, $2 idle seconds.
    static let listSessions = Statement(name: "list_sessions", sql: """
        WITH me AS (\(liveSession))
        SELECT s.id,
               to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
               to_char(s.last_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
               to_char(s.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
               s.user_agent, host(s.ip), s.id = me.id, s.client_id
        FROM signin.sessions s JOIN me ON s.user_id = me.user_id
        WHERE s.revoked_at IS NULL AND s.expires_at > now()
          AND s.last_seen_at > now() - make_interval(secs => $2::bigint)
        ORDER BY s.created_at DESC, s.id DESC
        """)

    /// Revoke one of the signed-in user's own sessions: $1 hash, $2 idle seconds, $3 session id.
    /// No row: not signed in; a count of 0: no such live session of this user.
    static let revokeOwnSession = Statement(name: "revoke_own_session", sql: """
        WITH me AS (\(liveSession)),
        revoked AS (
            UPDATE signin.sessions s SET revoked_at = now(), revoked_reason = 'user_revoked'
            FROM me
            WHERE s.id = $3::bigint AND s.user_id = me.user_id AND s.revoked_at IS NULL
            RETURNING s.id
        )
        SELECT me.id, (SELECT count(*) FROM revoked) FROM me
        """)
}

/// Statements of the operator commands (`tokensignin sessions ...`, `tokensignin prune`).
enum OperatorQueries {
    /// Every session of the user whose sub is $1, newest first, live or not.
    static let listUserSessions = """
        SELECT s.id,
               to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
               to_char(s.last_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
               to_char(s.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
               CASE WHEN s.revoked_at IS NOT NULL THEN 'revoked:' || coalesce(s.revoked_reason, '')
                    WHEN s.expires_at <= now() THEN 'expired'
                    WHEN s.last_seen_at <= now() - make_interval(secs => $2::bigint) THEN 'idle'
                    ELSE 'active' END,
               coalesce(host(s.ip), '-'), coalesce(s.client_id, '-'), coalesce(s.user_agent, '-')
        FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id
        WHERE u.google_sub = $1
        ORDER BY s.created_at DESC, s.id DESC
        """

    /// Revokes every live session of the user whose sub is $1; returns the revoked ids.
    static let revokeUserSessions = """
        UPDATE signin.sessions s SET revoked_at = now(), revoked_reason = 'operator'
        FROM signin.users u
        WHERE u.id = s.user_id AND u.google_sub = $1 AND s.revoked_at IS NULL
        RETURNING s.id
        """

    /// Revokes the session whose id is $1 (if not already revoked); returns its id.
    static let revokeSession = """
        UPDATE signin.sessions SET revoked_at = now(), revoked_reason = 'operator'
        WHERE id = $1::bigint AND revoked_at IS NULL
        RETURNING id
        """

    static let userExists = "SELECT 1 FROM signin.users WHERE google_sub = $1"
    static let sessionExists = "SELECT 1 FROM signin.sessions WHERE id = $1::bigint"

    /// Pruning, one small batch per statement so sign-ins never wait on a long lock.
    /// Expired sessions (absolute expiry passed, or idle beyond $1 seconds) that are not revoked, and
    /// revoked sessions older than $2 seconds; $3 is the batch size.
    static let pruneSessions = """
        DELETE FROM signin.sessions WHERE id IN (
            SELECT id FROM signin.sessions
            WHERE (revoked_at IS NULL AND (expires_at <= now() OR last_seen_at <= now() - make_interval(secs => $1::bigint)))
               OR revoked_at <= now() - make_interval(secs => $2::bigint)
            LIMIT $3::int FOR UPDATE SKIP LOCKED)
        """

    /// Audit rows older than $1 seconds, $2 at a time.
    static let pruneSignIns = """
        DELETE FROM signin.sign_ins WHERE id IN (
            SELECT id FROM signin.sign_ins WHERE at < now() - make_interval(secs => $1::bigint)
            LIMIT $2::int FOR UPDATE SKIP LOCKED)
        """
}
