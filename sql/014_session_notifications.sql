-- 014_session_notifications.sql — every change that can end a session, notified to the responders' session caches.
--
-- Each responder keeps the sessions it has validated in memory (docs/database.md, "The session cache") and LISTENs on
-- the channel tokensignin_sessions. These triggers NOTIFY it whenever a session may have stopped being live or its
-- user's identity changed, whoever made the change: the service's routes, POST /risc, tokensignin sessions revoke,
-- tokensignin prune, or a DBA's UPDATE or DELETE by hand. PostgreSQL delivers a notification only when the
-- transaction that sent it commits, in commit order.
--
-- Payloads: 's <session id> ...' (those sessions), 'u <user id>' (every session of that user), 'flush' (everything).
-- The triggers fire only on the columns that can end a session or change what a check answers: the once-a-minute
-- last_seen_at refresh and a sign-in that changes nothing cost no notification. Forward-only; no BEGIN/COMMIT.

CREATE FUNCTION signin.notify_session_changed() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM pg_notify('tokensignin_sessions', 's ' || OLD.id);
    RETURN NULL;
END
$$;

CREATE FUNCTION signin.notify_sessions_deleted() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- One notification per 400 deleted sessions (a payload holds under 8000 bytes): prune deletes in batches.
    PERFORM pg_notify('tokensignin_sessions', 's ' || string_agg(id::text, ' '))
       FROM (SELECT id, (row_number() OVER ()) / 400 AS chunk FROM gone) deleted
      GROUP BY chunk;
    RETURN NULL;
END
$$;

CREATE FUNCTION signin.notify_user_changed() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM pg_notify('tokensignin_sessions', 'u ' || OLD.id);
    RETURN NULL;
END
$$;

CREATE FUNCTION signin.notify_everything_changed() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM pg_notify('tokensignin_sessions', 'flush');
    RETURN NULL;
END
$$;

CREATE TRIGGER sessions_notify_ended
    AFTER UPDATE OF revoked_at, expires_at, user_id, token_hash ON signin.sessions
    FOR EACH ROW
    WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
          OR OLD.user_id <> NEW.user_id OR OLD.token_hash <> NEW.token_hash)
    EXECUTE FUNCTION signin.notify_session_changed();

CREATE TRIGGER sessions_notify_deleted
    AFTER DELETE ON signin.sessions
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT
    EXECUTE FUNCTION signin.notify_sessions_deleted();

CREATE TRIGGER sessions_notify_truncated
    AFTER TRUNCATE ON signin.sessions
    FOR EACH STATEMENT
    EXECUTE FUNCTION signin.notify_everything_changed();

CREATE TRIGGER users_notify_changed
    AFTER UPDATE OF disabled_at, google_sign_in_blocked_at, email, email_verified, google_sub ON signin.users
    FOR EACH ROW
    WHEN (OLD.disabled_at IS DISTINCT FROM NEW.disabled_at
          OR OLD.google_sign_in_blocked_at IS DISTINCT FROM NEW.google_sign_in_blocked_at
          OR OLD.email IS DISTINCT FROM NEW.email OR OLD.email_verified <> NEW.email_verified
          OR OLD.google_sub <> NEW.google_sub)
    EXECUTE FUNCTION signin.notify_user_changed();

CREATE TRIGGER users_notify_deleted
    AFTER DELETE ON signin.users
    FOR EACH ROW
    EXECUTE FUNCTION signin.notify_user_changed();

CREATE TRIGGER users_notify_truncated
    AFTER TRUNCATE ON signin.users
    FOR EACH STATEMENT
    EXECUTE FUNCTION signin.notify_everything_changed();

COMMENT ON FUNCTION signin.notify_session_changed() IS
    'Trigger: NOTIFY tokensignin_sessions ''s <id>'' when a session is revoked, its expiry or token changes (session caches).';
COMMENT ON FUNCTION signin.notify_sessions_deleted() IS
    'Trigger: NOTIFY tokensignin_sessions ''s <id> ...'' for the sessions a statement deleted, 400 a notification.';
COMMENT ON FUNCTION signin.notify_user_changed() IS
    'Trigger: NOTIFY tokensignin_sessions ''u <id>'' when a user is disabled, blocked, deleted or its identity changes.';
COMMENT ON FUNCTION signin.notify_everything_changed() IS
    'Trigger: NOTIFY tokensignin_sessions ''flush'' after a TRUNCATE: every session cache forgets everything.';
