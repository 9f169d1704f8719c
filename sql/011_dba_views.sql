-- 011_dba_views.sql — views for DBAs, support and analysts (tokensignin_reader may read them; the service never
-- does): live sessions as the service judges them, per user; sign-ins and failures per day; users who cannot
-- sign in or need a review. Forward-only; no BEGIN/COMMIT in here.

-- active_sessions (002) now applies what the session check applies: the idle timeout the service recorded in
-- signin.service_settings (none recorded: not applied) and the user's disabled_at. Same columns, one more.
CREATE OR REPLACE VIEW signin.active_sessions AS
    SELECT s.id AS session_id, s.user_id, u.google_sub, u.email, s.client_id,
           s.created_at, s.last_seen_at, s.expires_at, s.ip, s.user_agent,
           least(s.expires_at, s.last_seen_at + st.session_idle_timeout) AS dies_at
      FROM signin.sessions s
      JOIN signin.users u ON u.id = s.user_id
      LEFT JOIN signin.service_settings st ON true
     WHERE s.revoked_at IS NULL AND s.expires_at > now() AND u.disabled_at IS NULL
       AND (st.session_idle_timeout IS NULL OR s.last_seen_at > now() - st.session_idle_timeout);

COMMENT ON VIEW signin.active_sessions IS
    'For DBAs and support: the sessions the session check accepts now (not revoked, before expires_at, used within '
    'the idle timeout in signin.service_settings, user not disabled), with the user''s sub and email.';
COMMENT ON COLUMN signin.active_sessions.session_id IS 'signin.sessions.id (what tokensignin sessions revoke --session takes).';
COMMENT ON COLUMN signin.active_sessions.user_id IS 'signin.users.id of the session''s user.';
COMMENT ON COLUMN signin.active_sessions.google_sub IS 'The user''s identity (signin.users.google_sub).';
COMMENT ON COLUMN signin.active_sessions.email IS 'The user''s latest email: for people to read, never an identity.';
COMMENT ON COLUMN signin.active_sessions.client_id IS 'The OAuth client the session was opened for.';
COMMENT ON COLUMN signin.active_sessions.created_at IS 'When the sign-in opened it.';
COMMENT ON COLUMN signin.active_sessions.last_seen_at IS 'Its last use (refreshed at most once a minute).';
COMMENT ON COLUMN signin.active_sessions.expires_at IS 'Its absolute expiry.';
COMMENT ON COLUMN signin.active_sessions.ip IS 'Client address of the sign-in.';
COMMENT ON COLUMN signin.active_sessions.user_agent IS 'User-Agent of the sign-in.';
COMMENT ON COLUMN signin.active_sessions.dies_at IS
    'When the session ends if it is not used again: its absolute expiry, or the idle timeout after last_seen_at.';

CREATE VIEW signin.active_sessions_per_user AS
    SELECT a.user_id, a.google_sub, a.email, count(*) AS active_sessions,
           min(a.created_at) AS oldest_created_at, max(a.last_seen_at) AS last_seen_at
      FROM signin.active_sessions a
     GROUP BY a.user_id, a.google_sub, a.email;

COMMENT ON VIEW signin.active_sessions_per_user IS
    'For DBAs and support: each user with at least one active session (signin.active_sessions), how many, since when. '
    'Filter on user_id or google_sub: the look-up then uses the indexes; unfiltered it reads every session.';
COMMENT ON COLUMN signin.active_sessions_per_user.user_id IS 'signin.users.id.';
COMMENT ON COLUMN signin.active_sessions_per_user.google_sub IS 'The user''s identity.';
COMMENT ON COLUMN signin.active_sessions_per_user.email IS 'The user''s latest email: for people to read, never an identity.';
COMMENT ON COLUMN signin.active_sessions_per_user.active_sessions IS
    'Sessions the check accepts now (TOKENSIGNIN_MAX_SESSIONS_PER_USER caps them at sign-in).';
COMMENT ON COLUMN signin.active_sessions_per_user.oldest_created_at IS 'Creation of the oldest of them.';
COMMENT ON COLUMN signin.active_sessions_per_user.last_seen_at IS 'The latest use of any of them.';

CREATE VIEW signin.sign_ins_per_day AS
    SELECT (i.at AT TIME ZONE 'UTC')::date AS day, i.outcome, i.reason, count(*) AS attempts,
           count(i.user_id) AS known_user_attempts
      FROM signin.sign_ins i
     GROUP BY 1, 2, 3;

COMMENT ON VIEW signin.sign_ins_per_day IS
    'For analysts: sign-in attempts per UTC day, outcome and failure reason, over the audit kept (90 days by '
    'default). Aggregates the whole audit: for a recent window, query signin.sign_ins with at >= ... instead.';
COMMENT ON COLUMN signin.sign_ins_per_day.day IS 'The UTC calendar day of the attempts.';
COMMENT ON COLUMN signin.sign_ins_per_day.outcome IS 'success or failure.';
COMMENT ON COLUMN signin.sign_ins_per_day.reason IS
    'The failure code (signin.sign_ins.reason: expired, bad_audience, account_disabled, ...); NULL for successes.';
COMMENT ON COLUMN signin.sign_ins_per_day.attempts IS 'How many attempts.';
COMMENT ON COLUMN signin.sign_ins_per_day.known_user_attempts IS
    'How many of them named an existing user (the token verified): the rest failed before that.';

-- flagged_users (005) also lists accounts an operator disabled, so it answers "who cannot sign in, or needs a
-- review, and why". Same columns, three more.
CREATE OR REPLACE VIEW signin.flagged_users AS
    SELECT u.id AS user_id, u.google_sub, u.email, u.google_sign_in_blocked_at, u.flagged_at, u.flagged_reason,
           u.id_tokens_invalid_before,
           (SELECT e.event_type FROM signin.security_events e WHERE e.user_id = u.id ORDER BY e.issued_at DESC, e.id DESC LIMIT 1)
               AS last_event_type,
           (SELECT max(e.issued_at) FROM signin.security_events e WHERE e.user_id = u.id) AS last_event_at,
           u.disabled_at, u.disabled_reason,
           (SELECT count(*) FROM signin.sessions s WHERE s.user_id = u.id AND s.revoked_at IS NULL AND s.expires_at > now())
               AS unrevoked_sessions
      FROM signin.users u
     WHERE u.google_sign_in_blocked_at IS NOT NULL OR u.flagged_at IS NOT NULL OR u.disabled_at IS NOT NULL;

COMMENT ON VIEW signin.flagged_users IS
    'For DBAs and support: users who cannot sign in or need a review: disabled by an operator (disabled_at), Google '
    'sign-in blocked by Cross-Account Protection (google_sign_in_blocked_at), or flagged for review (flagged_at), '
    'with their latest security event. Email is shown for people, never used to link accounts.';
COMMENT ON COLUMN signin.flagged_users.user_id IS 'signin.users.id.';
COMMENT ON COLUMN signin.flagged_users.google_sub IS 'The user''s identity (what tokensignin sessions ... --user takes).';
COMMENT ON COLUMN signin.flagged_users.email IS 'The user''s latest email: for people to read, never an identity.';
COMMENT ON COLUMN signin.flagged_users.google_sign_in_blocked_at IS
    'signin.users.google_sign_in_blocked_at: Google said the account was disabled; Google sign-in refused (403).';
COMMENT ON COLUMN signin.flagged_users.flagged_at IS 'signin.users.flagged_at: a security event asked for a review.';
COMMENT ON COLUMN signin.flagged_users.flagged_reason IS 'signin.users.flagged_reason (bulk-account, credential-change-required).';
COMMENT ON COLUMN signin.flagged_users.id_tokens_invalid_before IS
    'signin.users.id_tokens_invalid_before: ID tokens issued before it open no session.';
COMMENT ON COLUMN signin.flagged_users.last_event_type IS 'The type of the user''s latest security event (by issued_at).';
COMMENT ON COLUMN signin.flagged_users.last_event_at IS 'When Google issued that event.';
COMMENT ON COLUMN signin.flagged_users.disabled_at IS 'signin.users.disabled_at: an operator disabled the account.';
COMMENT ON COLUMN signin.flagged_users.disabled_reason IS 'signin.users.disabled_reason.';
COMMENT ON COLUMN signin.flagged_users.unrevoked_sessions IS
    'Sessions neither revoked nor expired. The check refuses a disabled user''s already; revoking them '
    '(tokensignin sessions revoke --user SUB) makes that visible in signin.sessions.';
