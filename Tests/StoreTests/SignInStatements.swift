// The application's statements for sign-in, session lookup and revocation (kept in sync with docs/database.md).
// They belong to the SignIn module; they live here until it takes them over, so the schema is tested with them.
import Store

enum SignInStatements {
    /// One round trip per sign-in: upsert the user on google_sub, open a session unless the account is disabled
    /// or its Google sign-in is blocked, and write the audit row. Parameters:
    /// $1 google_sub, $2 email, $3 email_verified ('true'/'false'/NULL = false), $4 name, $5 given_name, $6 family_name,
    /// $7 picture, $8 locale, $9 hosted_domain, $10 token_hash (hex of SHA-256 of the session token),
    /// $11 session lifetime (interval, e.g. '30 days'), $12 client_id (aud), $13 user_agent (cut to 1024 characters), $14 ip (NULL if not an address).
    /// Returns one row; `refusal` is NULL and `session_id` set on success, else `refusal` names the reason.
    static let signIn = Statement(name: "signin_sign_in", sql: """
        WITH u AS (
            INSERT INTO signin.users AS u
                   (google_sub, email, email_verified, name, given_name, family_name, picture, locale,
                    hosted_domain, last_sign_in_at)
            VALUES ($1, $2, coalesce($3::boolean, false), $4, $5, $6, $7, $8, $9, now())
            ON CONFLICT (google_sub) DO UPDATE
               SET email = EXCLUDED.email, email_verified = EXCLUDED.email_verified, name = EXCLUDED.name,
                   given_name = EXCLUDED.given_name, family_name = EXCLUDED.family_name,
                   picture = EXCLUDED.picture, locale = EXCLUDED.locale, hosted_domain = EXCLUDED.hosted_domain,
                   updated_at = now(),
                   last_sign_in_at = CASE WHEN u.disabled_at IS NULL AND u.google_sign_in_blocked_at IS NULL
                                          THEN now() ELSE u.last_sign_in_at END
            RETURNING u.id, u.google_sub, u.email, u.email_verified, u.name, u.given_name, u.family_name,
                      u.picture, u.locale, u.hosted_domain, (u.xmax = 0) AS created,
                      CASE WHEN u.disabled_at IS NOT NULL THEN 'account_disabled'
                           WHEN u.google_sign_in_blocked_at IS NOT NULL THEN 'google_sign_in_blocked'
                      END AS refusal
        ), s AS (
            INSERT INTO signin.sessions (user_id, token_hash, expires_at, client_id, user_agent, ip)
            SELECT u.id, decode($10, 'hex'), date_trunc('second', now() + $11::interval), $12,
                   left($13, 1024), $14::inet
              FROM u
             WHERE u.refusal IS NULL
            RETURNING id, expires_at
        ), audit AS (
            INSERT INTO signin.sign_ins (user_id, google_sub, outcome, reason, client_id, ip, user_agent, session_id)
            SELECT u.id, u.google_sub, CASE WHEN u.refusal IS NULL THEN 'success' ELSE 'failure' END, u.refusal,
                   $12, $14::inet, left($13, 1024), s.id
              FROM u LEFT JOIN s ON true
        )
        SELECT u.id AS user_id, u.google_sub, u.email, u.email_verified, u.name, u.given_name, u.family_name,
               u.picture, u.locale, u.hosted_domain, u.created, u.refusal, s.id AS session_id,
               to_char(s.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS expires_at,
               extract(epoch FROM s.expires_at)::bigint AS expires_at_unix
          FROM u LEFT JOIN s ON true
        """)

    /// For nginx auth_request and API calls: the session's user if the session is live. Parameters:
    /// $1 token_hash (hex), $2 idle timeout (interval). Refreshes last_seen_at at most once a minute.
    /// No row = no valid session (unknown, revoked, expired, idle too long, or user disabled).
    static let lookUpSession = Statement(name: "signin_look_up_session", sql: """
        WITH s AS (
            SELECT s.id, s.user_id, s.last_seen_at, s.expires_at, u.google_sub, u.email, u.email_verified,
                   u.name, u.picture
              FROM signin.sessions s
              JOIN signin.users u ON u.id = s.user_id
             WHERE s.token_hash = decode($1, 'hex')
               AND s.revoked_at IS NULL
               AND s.expires_at > now()
               AND s.last_seen_at > now() - $2::interval
               AND u.disabled_at IS NULL
        ), seen AS (
            UPDATE signin.sessions t SET last_seen_at = now()
              FROM s
             WHERE t.id = s.id AND s.last_seen_at < now() - interval '60 seconds'
        )
        SELECT s.id AS session_id, s.user_id, s.google_sub, s.email, s.email_verified, s.name, s.picture,
               to_char(s.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS expires_at
          FROM s
        """)

    /// Sign out one session. $1 token_hash (hex), $2 reason (sign_out, operator, ...). Returns the row revoked,
    /// none when it was unknown or already revoked.
    static let revokeSession = Statement(name: "signin_revoke_session", sql: """
        UPDATE signin.sessions SET revoked_at = now(), revoked_reason = $2
         WHERE token_hash = decode($1, 'hex') AND revoked_at IS NULL
        RETURNING id, user_id
        """)

    /// Sign out everywhere: every live session of a user. $1 user id, $2 reason (sign_out_all, operator,
    /// security_event, user_disabled). Affected rows = sessions revoked.
    static let revokeAllSessions = Statement(name: "signin_revoke_all_sessions", sql: """
        UPDATE signin.sessions SET revoked_at = now(), revoked_reason = $2
         WHERE user_id = $1::bigint AND revoked_at IS NULL
        """)

    /// A failure before the database was involved (bad token, wrong audience, ...). $1 reason code,
    /// $2 client_id, $3 ip, $4 user_agent.
    static let auditFailure = Statement(name: "signin_audit_failure", sql: """
        INSERT INTO signin.sign_ins (outcome, reason, client_id, ip, user_agent)
        VALUES ('failure', $1, $2, $3::inet, left($4, 1024))
        """)
}
