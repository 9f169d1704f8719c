-- 008_session_indexes.sql — a user's sessions by an index every statement can use, and a COMMENT on every index
-- (docs/database.md "Indexes" shows the plans at 1M sessions, before and after).
--
-- sessions_user_id_idx (user_id, revoked_at) replaces sessions_user_id_live_idx, which was partial (WHERE
-- revoked_at IS NULL): deleting a user cascades through `DELETE FROM signin.sessions WHERE user_id = $1`, which a
-- partial index cannot serve, so every user deleted cost a sequential scan of the whole table. With revoked_at as
-- its second column the live-session look-ups (`user_id = $1 AND revoked_at IS NULL`: the sign-in's session limit,
-- sign out everywhere, the devices list, Cross-Account Protection) still skip a user's revoked sessions.
-- Deliberately no index on last_seen_at (prune's idle sessions): it would turn every last_seen_at refresh of the
-- session check into a non-HOT update; prune walks the table by primary key for them instead.
--
-- Locks. CREATE INDEX holds a SHARE lock on signin.sessions until this file commits: reads go on, but sign-ins,
-- revocations and last_seen_at refreshes wait (about 1.5 s per million sessions, measured). On a big table, build
-- it beforehand without blocking, outside a transaction (psql), and drop the old one the same way:
--     CREATE INDEX CONCURRENTLY IF NOT EXISTS sessions_user_id_idx ON signin.sessions (user_id, revoked_at);
--     DROP INDEX CONCURRENTLY IF EXISTS signin.sessions_user_id_live_idx;
-- and this file only checks it. A CONCURRENTLY build that failed leaves an INVALID index of that name, which
-- CREATE INDEX IF NOT EXISTS would silently keep: this file refuses it instead (drop it and build it again).
-- DROP INDEX takes an ACCESS EXCLUSIVE lock for a moment; lock_timeout makes this file fail rather than queue every
-- request behind a long-running transaction (run migrate again later). Forward-only; no BEGIN/COMMIT in here.

SET LOCAL lock_timeout = '10s';

DO $$
DECLARE
    existing record;
BEGIN
    SELECT i.indisvalid,
           (SELECT string_agg(a.attname, ',' ORDER BY k.position)
              FROM unnest(i.indkey) WITH ORDINALITY AS k (attnum, position)
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum) AS columns,
           i.indpred IS NULL AS whole, i.indisunique AS is_unique
      INTO existing
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     WHERE c.relname = 'sessions_user_id_idx' AND c.relnamespace = 'signin'::regnamespace;
    IF FOUND AND NOT (existing.indisvalid AND existing.columns = 'user_id,revoked_at' AND existing.whole
                      AND NOT existing.is_unique) THEN
        RAISE EXCEPTION 'index signin.sessions_user_id_idx is invalid or not the one 008_session_indexes.sql builds'
            USING HINT = 'A CREATE INDEX CONCURRENTLY that failed leaves an invalid index: DROP INDEX it and build it again.';
    END IF;
END
$$;

CREATE INDEX IF NOT EXISTS sessions_user_id_idx ON signin.sessions (user_id, revoked_at);
DROP INDEX IF EXISTS signin.sessions_user_id_live_idx;

COMMENT ON INDEX signin.sessions_user_id_idx IS
    'A user''s sessions: the cascade of a user delete, the operator''s sessions list, and (with revoked_at IS NULL) '
    'the live ones for the session limit, sign out everywhere, the devices list and Cross-Account Protection.';
COMMENT ON INDEX signin.sessions_expires_at_idx IS 'tokensignin prune: sessions past their absolute expiry, oldest first.';
COMMENT ON INDEX signin.sessions_revoked_at_idx IS
    'tokensignin prune: sessions revoked longer ago than the retention, oldest first.';
COMMENT ON INDEX signin.sessions_token_hash_key IS 'The session check and every session route: the presented token''s hash.';
-- The other tables' indexes, so \di+ signin.* says what each is for.
COMMENT ON INDEX signin.users_google_sub_key IS 'The identity: every sign-in''s upsert and Cross-Account Protection match on google_sub.';
COMMENT ON INDEX signin.users_lower_email_idx IS
    'Support look-ups by address (lower(email) = lower($1)). The application never uses it: email is not an identity.';
COMMENT ON INDEX signin.sign_ins_at_idx IS 'Audit pruning by age (signin.prune_sign_ins) and "what happened lately".';
COMMENT ON INDEX signin.sign_ins_user_id_at_idx IS 'A user''s sign-in history; the ON DELETE SET NULL of a user delete.';
COMMENT ON INDEX signin.security_events_jti_event_type_key IS 'Each event of a SET applied once: a redelivery finds it here.';
COMMENT ON INDEX signin.security_events_user_id_idx IS
    'A user''s security events, newest first (signin.flagged_users); the ON DELETE SET NULL of a user delete.';
COMMENT ON INDEX signin.security_events_received_at_idx IS '"What Google sent lately", and pruning by age.';
