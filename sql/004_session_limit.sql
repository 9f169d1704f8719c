-- 004_session_limit.sql — a limit on live sessions per user (TOKENSIGNIN_MAX_SESSIONS_PER_USER).
--
-- A sign-in beyond the limit revokes the user's oldest live sessions with the new reason session_limit, so one
-- replayed ID token or a misbehaving client cannot pile up sessions (and make the devices list huge).
-- Forward-only; no BEGIN/COMMIT in here. The new check is a superset of the old one: existing rows pass it.

ALTER TABLE signin.sessions DROP CONSTRAINT sessions_revoked_reason_check;
ALTER TABLE signin.sessions ADD CONSTRAINT sessions_revoked_reason_check CHECK (revoked_reason IN
    ('sign_out', 'sign_out_all', 'user_revoked', 'operator', 'security_event', 'user_disabled', 'session_limit'));

COMMENT ON COLUMN signin.sessions.revoked_reason IS
    'Why it was ended: sign_out (that session), sign_out_all (all of the user''s sessions), user_revoked (from '
    'the devices list), operator, security_event (Google Cross-Account Protection), user_disabled, '
    'session_limit (a newer sign-in went over the per-user limit).';
