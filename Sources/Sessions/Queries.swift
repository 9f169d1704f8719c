// The application's SQL: every statement a request or an operator command runs, with parameters only (typed ones
// name theirs: `TypedStatement`).
import Store

/// Statements are prepared once per connection (named) and reused by that worker. Times come back as
/// whole Unix seconds (`extract(epoch ...)::bigint`), decoded into `Timestamp`.
package enum Queries {
    /// Session authentication shared by the session routes: the live session whose hash the arguments present,
    /// under their idle timeout. Revoked, expired, idle or disabled-user sessions do not match.
    private static func liveSession<Arguments>(_ hash: KeyPath<Arguments, SessionToken.Hash> & Sendable,
                                               _ idleTimeout: KeyPath<Arguments, SQLInterval> & Sendable) -> SQLTemplate<Arguments> {
        """
        SELECT s.id, s.user_id, s.last_seen_at
        FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id
        WHERE s.token_hash = decode(\(hash), 'hex')
          AND s.revoked_at IS NULL
          AND s.expires_at > now()
          AND s.last_seen_at > now() - \(idleTimeout)::interval
          AND u.disabled_at IS NULL
        """
    }

    /// One sign-in in one round trip: `signin.sign_in` (sql/015) creates or updates the user keyed by google_sub,
    /// opens a session unless the account is disabled, its Google sign-in blocked or the token issued before
    /// Google revoked its sessions, revokes the least recently used sessions beyond the limit, and writes the
    /// audit row, all in the caller's transaction. A returning account whose claims are unchanged is one INSERT
    /// there; a user's first sign-in applies what `signin.security_events` holds for that sub from before.
    /// Concurrent first sign-ins of one account make one user. One row: user_id, created, refusal (NULL on
    /// success), session_id, expires_at (epoch).
    static let signIn = TypedStatement<SignInArguments>(name: "sign_in", """
        SELECT user_id, created, refusal, session_id, expires_at
          FROM signin.sign_in(\(\.token.subject), \(\.token.email), \(\.token.emailVerified)::boolean, \(\.token.name),
                              \(\.token.givenName), \(\.token.familyName), \(\.token.picture), \(\.token.locale),
                              \(\.token.hostedDomain), \(\.token.issuedAt)::bigint, decode(\(\.session.tokenHash), 'hex'),
                              \(\.lifetime)::interval, \(\.session.clientID), \(\.session.userAgent), \(\.session.ip)::inet,
                              \(\.maxSessions)::int)
        """)

    /// The readiness probe's round trip, and whether this server session may write: a standby answers
    /// `pg_is_in_recovery()` true, a database or role set `default_transaction_read_only` (or a standby) answers
    /// `transaction_read_only` on. Columns: in_recovery, read_only.
    package static let readiness = Statement(name: "readiness", sql: """
        SELECT pg_is_in_recovery(), current_setting('transaction_read_only')::boolean
        """)

    /// A sign-in refused before the database was involved (bad token, wrong audience, ...), for the audit.
    static let signInFailure = TypedStatement<RefusedSignInArguments>(name: "sign_in_failure", """
        INSERT INTO signin.sign_ins (outcome, reason, client_id, ip, user_agent)
        VALUES ('failure', \(\.reason), \(\.clientID), \(\.ip)::inet, left(\(\.userAgent), 1024))
        """)

    /// The auth_request check: the session's user if the presented session is live under the idle timeout.
    /// Refreshes last_seen_at at most once a minute, and never waits for it: a row another transaction has locked
    /// (a sign-out, a DBA) is answered from what is committed and refreshed at a later check, so a check never
    /// waits on a lock (and a batch of them, one transaction, never deadlocks). No row: no valid session (unknown,
    /// revoked, expired, idle too long, or user disabled). Columns: session_id, user_id, google_sub, email,
    /// email_verified, expires_at, last_seen_at as it was before the check (epoch).
    static let checkSession = TypedStatement<CheckSessionArguments>(name: "check_session", """
        WITH s AS (
            SELECT s.id, s.user_id, s.last_seen_at, s.expires_at, u.google_sub, u.email, u.email_verified
              FROM signin.sessions s
              JOIN signin.users u ON u.id = s.user_id
             WHERE s.token_hash = decode(\(\.hash), 'hex')
               AND s.revoked_at IS NULL
               AND s.expires_at > now()
               AND s.last_seen_at > now() - \(\.idleTimeout)::interval
               AND u.disabled_at IS NULL
        ), due AS (
            SELECT l.id FROM signin.sessions l JOIN s ON s.id = l.id
             WHERE s.last_seen_at < now() - interval '60 seconds' AND l.last_seen_at < now() - interval '60 seconds'
               FOR NO KEY UPDATE OF l SKIP LOCKED
        ), seen AS (
            UPDATE signin.sessions t SET last_seen_at = now() FROM due WHERE t.id = due.id
        )
        SELECT s.id, s.user_id, s.google_sub, s.email, s.email_verified, extract(epoch FROM s.expires_at)::bigint,
               extract(epoch FROM s.last_seen_at)::bigint
          FROM s
        """)

    /// The session cache's heartbeat: a notification on the shared heartbeat channel (`$1`) whose payload is the
    /// sending transaction's id, the sender's own number for it (`$2`) and when the sending server process started
    /// (`$3`, microseconds since the epoch). Prepared once per connection, as are the three below: the listener runs
    /// this one or the next every 25 ms.
    package static let heartbeat = Statement(name: "cache_heartbeat", sql: """
        SELECT pg_notify($1, pg_current_xact_id()::text || ' ' || $2 || ' ' || $3)
        """)

    /// The session cache's snapshot: `pg_current_snapshot()`'s `xmax`; no transaction whose id is at or above it had
    /// completed when it was taken, so a heartbeat of any responder whose id is at least this committed after it.
    package static let heartbeatSnapshot = Statement(name: "cache_heartbeat_snapshot", sql: """
        SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint
        """)

    /// Whether the server process `$1` that sent a heartbeat, started at `$2` (as its payload says), runs as this
    /// connection's role: only those heartbeats vouch for the cache (any role that can connect may NOTIFY any
    /// channel). The start tells that process from a later one given the same process ID, and other roles cannot
    /// read it (pg_stat_activity shows them NULL).
    package static let heartbeatSender = Statement(name: "cache_heartbeat_sender", sql: """
        SELECT EXISTS (SELECT FROM pg_stat_activity
                        WHERE pid = $1::int AND usename = session_user
                          AND (extract(epoch FROM backend_start) * 1000000)::bigint = $2::bigint)
        """)

    /// The listener connection's own server process: its ID and when it started (microseconds since the epoch).
    package static let heartbeatSelf = Statement(name: "cache_heartbeat_self", sql: """
        SELECT pid, (extract(epoch FROM backend_start) * 1000000)::bigint
          FROM pg_stat_activity WHERE pid = pg_backend_pid()
        """)

    /// The session cache's `last_seen_at` refresh: the checks it answered from memory that are due, written in one
    /// statement per interval (`$1`, an array of session ids), each at most once a minute as the check itself does,
    /// never waiting on a row another transaction holds.
    package static let recordSeen = Statement(name: "record_seen", sql: """
        UPDATE signin.sessions t SET last_seen_at = now()
          FROM (SELECT id FROM signin.sessions
                 WHERE id = ANY ($1::bigint[]) AND last_seen_at < now() - interval '60 seconds'
                   FOR NO KEY UPDATE SKIP LOCKED) due
         WHERE t.id = due.id
        """)

    /// Sign-out: the presented session, or every session of its user when `everywhere`. Returns the authenticated
    /// session (no row: not signed in) and how many sessions were revoked.
    static let signOut = TypedStatement<SignOutArguments>(name: "sign_out", """
        WITH me AS (\(liveSession(\.hash, \.idleTimeout))),
        revoked AS (
            UPDATE signin.sessions s
               SET revoked_at = now(),
                   revoked_reason = CASE WHEN \(\.everywhere)::boolean THEN 'sign_out_all' ELSE 'sign_out' END
            FROM me
            WHERE s.revoked_at IS NULL AND (s.id = me.id OR (\(\.everywhere)::boolean AND s.user_id = me.user_id))
            RETURNING s.id
        )
        SELECT me.id, (SELECT count(*) FROM revoked), me.user_id FROM me
        """)

    /// One page of the signed-in user's live sessions, newest first: at most `limit` sessions with an id below
    /// `after` (none: the first page). One row per session (at most `limit` + 1, the extra one tells that a next
    /// page exists), or a single row of NULL session columns when the page is empty; no row: not signed in.
    /// Columns: the presenting session's id, then the session's id, created_at, last_seen_at, expires_at (epoch),
    /// user_agent, ip, client_id.
    static let listSessions = TypedStatement<ListSessionsArguments>(name: "list_sessions", """
        WITH me AS (\(liveSession(\.hash, \.idleTimeout)))
        SELECT me.id, p.id, p.created_at, p.last_seen_at, p.expires_at, p.user_agent, p.ip, p.client_id
          FROM me LEFT JOIN LATERAL (
               SELECT s.id, extract(epoch FROM s.created_at)::bigint AS created_at,
                      extract(epoch FROM s.last_seen_at)::bigint AS last_seen_at,
                      extract(epoch FROM s.expires_at)::bigint AS expires_at,
                      s.user_agent, host(s.ip) AS ip, s.client_id
                 FROM signin.sessions s
                WHERE s.user_id = me.user_id AND s.revoked_at IS NULL AND s.expires_at > now()
                  AND s.last_seen_at > now() - \(\.idleTimeout)::interval
                  AND (\(\.after)::bigint IS NULL OR s.id < \(\.after)::bigint)
                ORDER BY s.id DESC
                LIMIT \(\.limit)::int + 1) p ON true
         ORDER BY p.id DESC
        """)

    /// Revoke one of the signed-in user's own live sessions, `sessionID`. No row: not signed in; a count of 0: no
    /// such live session of this user.
    static let revokeOwnSession = TypedStatement<RevokeOwnSessionArguments>(name: "revoke_own_session", """
        WITH me AS (\(liveSession(\.hash, \.idleTimeout))),
        revoked AS (
            UPDATE signin.sessions s SET revoked_at = now(), revoked_reason = 'user_revoked'
            FROM me
            WHERE s.id = \(\.sessionID)::bigint AND s.user_id = me.user_id AND s.revoked_at IS NULL
              AND s.expires_at > now() AND s.last_seen_at > now() - \(\.idleTimeout)::interval
            RETURNING s.id
        )
        SELECT me.id, (SELECT count(*) FROM revoked) FROM me
        """)
}

/// Cross-Account Protection: one security event recorded and applied, each (jti, event type) once.
package enum SecurityEventQueries {
    /// One event (the action a `SecurityAction`: revoke, revoke_block, block, unblock,
    /// flag, record). Does nothing when the event was recorded before (no row); otherwise
    /// applies the action to the user matched on google_sub (revoking live sessions with reason
    /// security_event, setting id_tokens_invalid_before, the block, the flag) and records the event with what
    /// was done. Blocks and unblocks are ordered by the events' iat, not by arrival: a block never undoes a
    /// later enable, an enable never lifts a later block. One row: user_id, outcome, sessions_revoked.
    static let apply = TypedStatement<SecurityEventRecord>(name: "apply_security_event", """
        WITH u AS (
            SELECT id FROM signin.users WHERE google_sub = \(\.subject)
        ), fresh AS (
            SELECT NOT EXISTS (SELECT 1 FROM signin.security_events WHERE jti = \(\.jti) AND event_type = \(\.type)) AS yes
        ), revoked AS (
            UPDATE signin.sessions s SET revoked_at = now(), revoked_reason = 'security_event'
              FROM u, fresh
             WHERE fresh.yes AND \(\.actionName) IN ('revoke', 'revoke_block') AND s.user_id = u.id AND s.revoked_at IS NULL
            RETURNING s.id
        ), changed AS (
            UPDATE signin.users t
               SET id_tokens_invalid_before = CASE WHEN \(\.actionName) IN ('revoke', 'revoke_block')
                       THEN greatest(t.id_tokens_invalid_before, to_timestamp(\(\.issuedAt)::bigint))
                       ELSE t.id_tokens_invalid_before END,
                   google_sign_in_blocked_at = CASE
                       WHEN \(\.actionName) IN ('block', 'revoke_block')
                            AND (t.google_account_enabled_at IS NULL OR t.google_account_enabled_at < to_timestamp(\(\.issuedAt)::bigint))
                       THEN greatest(t.google_sign_in_blocked_at, to_timestamp(\(\.issuedAt)::bigint))
                       WHEN \(\.actionName) = 'unblock' AND t.google_sign_in_blocked_at < to_timestamp(\(\.issuedAt)::bigint) THEN NULL
                       ELSE t.google_sign_in_blocked_at END,
                   google_account_enabled_at = CASE WHEN \(\.actionName) = 'unblock'
                       THEN greatest(t.google_account_enabled_at, to_timestamp(\(\.issuedAt)::bigint))
                       ELSE t.google_account_enabled_at END,
                   flagged_at = CASE WHEN \(\.actionName) = 'flag' THEN coalesce(t.flagged_at, now()) ELSE t.flagged_at END,
                   flagged_reason = CASE WHEN \(\.actionName) = 'flag' THEN \(\.flagReason) ELSE t.flagged_reason END
              FROM u, fresh
             WHERE fresh.yes AND t.id = u.id AND \(\.actionName) <> 'record'
            RETURNING t.google_sign_in_blocked_at IS NOT NULL AS blocked
        )
        INSERT INTO signin.security_events (jti, issuer, event_type, subject_sub, user_id, reason, state, issued_at,
                                            applied_at, outcome, sessions_revoked)
        SELECT \(\.jti), \(\.issuer), \(\.type), \(\.subject), u.id, \(\.reason), \(\.state), to_timestamp(\(\.issuedAt)::bigint),
               CASE WHEN u.id IS NOT NULL AND \(\.actionName) <> 'record' THEN now() END,
               CASE WHEN \(\.actionName) = 'record' THEN 'recorded'
                    WHEN u.id IS NULL THEN 'unknown_user'
                    WHEN \(\.actionName) = 'revoke' THEN 'sessions_revoked'
                    WHEN \(\.actionName) = 'revoke_block' THEN CASE WHEN (SELECT blocked FROM changed)
                         THEN 'sessions_revoked_and_blocked' ELSE 'sessions_revoked_block_stale' END
                    WHEN \(\.actionName) = 'block' THEN CASE WHEN (SELECT blocked FROM changed) THEN 'blocked' ELSE 'block_stale' END
                    WHEN \(\.actionName) = 'unblock' THEN CASE WHEN (SELECT blocked FROM changed) THEN 'enable_stale' ELSE 'unblocked' END
                    ELSE 'flagged' END,
               (SELECT count(*) FROM revoked)
          FROM fresh LEFT JOIN u ON true
         WHERE fresh.yes
        ON CONFLICT (jti, event_type) DO NOTHING
        RETURNING user_id, outcome, sessions_revoked
        """)
    /// An unparsed SET (signed by Google and addressed to us, its other claims unreadable): recorded with its
    /// payload, outcome unparsed, applied to nobody. No row: recorded before (the same jti and event type).
    static let recordUnparsed = TypedStatement<UnparsedSecurityEventRecord>(name: "record_unparsed_security_event", """
        INSERT INTO signin.security_events (jti, issuer, event_type, issued_at, outcome, claims, unparsed_reason)
        VALUES (\(\.jti), \(\.issuer), \(\.type), to_timestamp(\(\.issuedAt)::bigint), 'unparsed', \(\.claims), \(\.reason))
        ON CONFLICT (jti, event_type) DO NOTHING
        RETURNING outcome
        """)
}

/// The responder's session settings in `signin.service_settings`, so every other process judges idleness by them.
package enum ServiceSettingsQueries {
    /// Written by each connection the responder opens: $1 idle timeout, $2 lifetime (intervals), $3 the binary's
    /// version line. Unchanged settings make it a read that locks nothing (a DBA holding the row cannot stall a
    /// worker). A row comes back only when the settings changed (or were first recorded): the idle timeout and
    /// lifetime they had before, in seconds (NULL: none recorded).
    package static let record = Statement(name: "record_service_settings", sql: """
        WITH before AS (SELECT session_idle_timeout, session_lifetime FROM signin.service_settings)
        INSERT INTO signin.service_settings AS t (session_idle_timeout, session_lifetime, updated_by)
        SELECT justify_hours($1::interval), justify_hours($2::interval), $3
         WHERE NOT EXISTS (SELECT FROM before
                            WHERE session_idle_timeout = $1::interval AND session_lifetime = $2::interval)
        ON CONFLICT (singleton) DO UPDATE
           SET session_idle_timeout = EXCLUDED.session_idle_timeout, session_lifetime = EXCLUDED.session_lifetime,
               updated_at = now(), updated_by = EXCLUDED.updated_by, updated_from = inet_client_addr()
         WHERE (t.session_idle_timeout, t.session_lifetime)
               IS DISTINCT FROM (EXCLUDED.session_idle_timeout, EXCLUDED.session_lifetime)
        RETURNING (SELECT extract(epoch FROM session_idle_timeout)::bigint FROM before),
                  (SELECT extract(epoch FROM session_lifetime)::bigint FROM before)
        """)

    /// What the responder recorded: idle timeout and lifetime (seconds), when and by which binary. No row: none.
    package static let read = Statement(name: "service_settings", sql: """
        SELECT extract(epoch FROM session_idle_timeout)::bigint, extract(epoch FROM session_lifetime)::bigint,
               extract(epoch FROM updated_at)::bigint, updated_by
          FROM signin.service_settings
        """)
}

/// Statements of the operator commands (`tokensignin sessions ...`, `tokensignin prune`). Idleness is judged by the
/// idle timeout the responder recorded (`signin.service_settings`), never by the command's own environment.
package enum OperatorQueries {
    /// Every session of the user whose sub is $1, newest first, live or not, with its state under the idle
    /// timeout the responder recorded ($2, the command's own setting, only when none is recorded).
    package static let listUserSessions = Statement(name: "list_user_sessions", sql: """
        SELECT s.id, extract(epoch FROM s.created_at)::bigint, extract(epoch FROM s.last_seen_at)::bigint,
               extract(epoch FROM s.expires_at)::bigint,
               CASE WHEN s.revoked_at IS NOT NULL THEN 'revoked:' || coalesce(s.revoked_reason, '')
                    WHEN s.expires_at <= now() THEN 'expired'
                    WHEN s.last_seen_at <= now() - coalesce((SELECT session_idle_timeout FROM signin.service_settings),
                                                            $2::interval) THEN 'idle'
                    ELSE 'active' END,
               host(s.ip), s.client_id, s.user_agent
        FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id
        WHERE u.google_sub = $1
        ORDER BY s.id DESC
        """)

    /// Revokes every live session of the user whose sub is $1; returns the revoked ids.
    package static let revokeUserSessions = Statement(name: "revoke_user_sessions", sql: """
        UPDATE signin.sessions s SET revoked_at = now(), revoked_reason = 'operator'
        FROM signin.users u
        WHERE u.id = s.user_id AND u.google_sub = $1 AND s.revoked_at IS NULL
        RETURNING s.id
        """)

    /// Revokes the session whose id is $1 (if not already revoked); returns its id.
    package static let revokeSession = Statement(name: "revoke_session", sql: """
        UPDATE signin.sessions SET revoked_at = now(), revoked_reason = 'operator'
        WHERE id = $1::bigint AND revoked_at IS NULL
        RETURNING id
        """)

    /// The instant `sessions revoke --all` revokes before: $1 (RFC 3339 text, NULL: none given), never later than
    /// now, so sessions opened while it runs are kept and the command ends. Columns: the instant as text for the
    /// next statement, and as RFC 3339 with microseconds for the operator.
    package static let revokeAllCutoff = Statement(name: "revoke_all_cutoff", sql: """
        SELECT c::text, to_char(c AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
          FROM (SELECT least(coalesce($1::timestamptz, now()), now()) AS c) cutoff
        """)

    /// One batch of `sessions revoke --all`: sessions neither revoked nor past expires_at, created before $1, with
    /// an id above $2, at most $3 of them in id order (the primary key; the next batch starts after the last id),
    /// revoked with reason operator_all. Idle ones too: idleness is a setting, and a longer one would revive them.
    /// Rows a session check is refreshing are waited for (FOR UPDATE, not SKIP LOCKED): none may be missed.
    /// Columns: how many the batch held, its last id, how many it revoked.
    package static let revokeAllSessions = Statement(name: "revoke_all_sessions", sql: """
        WITH batch AS (
            SELECT id FROM signin.sessions
             WHERE id > $2::bigint AND revoked_at IS NULL AND expires_at > now() AND created_at < $1::timestamptz
             ORDER BY id
             LIMIT $3::int
               FOR UPDATE
        ), revoked AS (
            UPDATE signin.sessions s SET revoked_at = now(), revoked_reason = 'operator_all'
             WHERE s.id = ANY (ARRAY(SELECT id FROM batch))
            RETURNING s.id
        )
        SELECT (SELECT count(*) FROM batch), (SELECT max(id) FROM batch), (SELECT count(*) FROM revoked)
        """)

    package static let userExists = Statement(name: "user_exists", sql: "SELECT count(*) FROM signin.users WHERE google_sub = $1")
    package static let sessionExists = Statement(name: "session_exists", sql: "SELECT count(*) FROM signin.sessions WHERE id = $1::bigint")

    /// Pruning, one small batch per statement and one statement per reason (a condition OR-ed over three columns
    /// was a sequential scan per batch). Expired and long-revoked sessions walk their own index oldest first: the
    /// ORDER BY keeps that index scan whatever the planner guesses of how many rows match, and `= ANY (ARRAY(...))`
    /// the primary key for the delete itself, even in a generic plan. Sign-ins never wait on a long lock.
    /// Sessions past their absolute expiry (sessions_expires_at_idx); $1 is the batch size.
    package static let pruneExpiredSessions = Statement(name: "prune_expired_sessions", sql: """
        DELETE FROM signin.sessions WHERE id = ANY (ARRAY(
            SELECT id FROM signin.sessions WHERE expires_at <= now()
            ORDER BY expires_at LIMIT $1::int FOR UPDATE SKIP LOCKED))
        """)

    /// Unrevoked sessions idle beyond the idle timeout the responder recorded (none recorded: none; they die at
    /// their absolute expiry), among the ids above $1 up to $1 + $2: idle pruning walks the table once per run in
    /// primary-key chunks, each a short statement. No index serves it on purpose: one on last_seen_at would make
    /// every last_seen_at refresh of the session check a non-HOT update (docs/database.md, "Indexes").
    package static let pruneIdleSessions = Statement(name: "prune_idle_sessions", sql: """
        DELETE FROM signin.sessions WHERE id = ANY (ARRAY(
            SELECT id FROM signin.sessions
            WHERE id > $1::bigint AND id <= $1::bigint + $2::int
              AND revoked_at IS NULL
              AND last_seen_at <= now() - (SELECT session_idle_timeout FROM signin.service_settings)
            FOR UPDATE SKIP LOCKED))
        """)

    /// The ids idle pruning walks: one below the smallest, and the largest (NULLs: no session).
    package static let sessionIDRange = Statement(name: "session_id_range", sql: "SELECT min(id) - 1, max(id) FROM signin.sessions")

    /// Sessions revoked longer ago than the interval $1, kept that long to answer "why was I signed out"
    /// (sessions_revoked_at_idx); $2 is the batch size.
    package static let pruneRevokedSessions = Statement(name: "prune_revoked_sessions", sql: """
        DELETE FROM signin.sessions WHERE id = ANY (ARRAY(
            SELECT id FROM signin.sessions WHERE revoked_at <= now() - $1::interval
            ORDER BY revoked_at LIMIT $2::int FOR UPDATE SKIP LOCKED))
        """)

    /// Audit rows older than the interval $1 (at least 7 days), $2 at a time, through the owner's function: the
    /// service's role may not delete from the audit itself (sql/007_audit_prune.sql).
    package static let pruneSignIns = Statement(name: "prune_sign_ins", sql: "SELECT signin.prune_sign_ins($1::interval, $2::int)")

    /// Every operator statement, for `tokensignin dev sql` and the docs.
    package static let statements = [listUserSessions, revokeUserSessions, revokeSession, revokeAllCutoff, revokeAllSessions,
                             userExists, sessionExists, pruneExpiredSessions, sessionIDRange, pruneIdleSessions, pruneRevokedSessions,
                             pruneSignIns]
}

/// The application's statements by name, for `tokensignin dev sql` (benchmarks run the same SQL in pgbench) and the
/// test that keeps docs/database.md word for word in step.
package enum StatementCatalog {
    /// A statement and the names of its parameters, `$1` first (none known for a positional one).
    package struct Entry: Sendable {
        package let statement: Statement
        package let parameters: [String]
    }

    private static func typed<Arguments>(_ statement: TypedStatement<Arguments>) -> Entry {
        Entry(statement: statement.statement, parameters: statement.parameterNames)
    }

    package static let entries = [typed(Queries.signIn), typed(Queries.checkSession), typed(Queries.signInFailure),
                                  typed(Queries.signOut), typed(Queries.listSessions), typed(Queries.revokeOwnSession),
                                  typed(SecurityEventQueries.apply), typed(SecurityEventQueries.recordUnparsed)]
        + ([Queries.heartbeat, Queries.heartbeatSnapshot, Queries.heartbeatSender, Queries.heartbeatSelf,
            Queries.recordSeen, ServiceSettingsQueries.record, ServiceSettingsQueries.read] + OperatorQueries.statements)
            .map { Entry(statement: $0, parameters: []) }
    package static var statements: [Statement] { entries.map(\.statement) }
    package static var names: [String] { statements.map(\.name) }
    package static func entry(named name: String) -> Entry? { entries.first { $0.statement.name == name } }
}
