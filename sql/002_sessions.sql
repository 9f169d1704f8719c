-- 002_sessions.sql — sessions opened by a successful sign-in.
--
-- The session token handed to the client is never stored: token_hash is SHA-256 of the exact token string,
-- so a copy of this table cannot be used to impersonate anyone. Forward-only; no BEGIN/COMMIT in here.
--
-- Idle timeout: deliberately NOT stored per row. It is a setting of the service (passed to the lookup
-- statement), compared with last_seen_at, so changing it applies to every session at once. last_seen_at is
-- refreshed at most once a minute, so idle expiry is accurate to about a minute.

CREATE TABLE signin.sessions (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id        bigint      NOT NULL REFERENCES signin.users (id) ON DELETE CASCADE,
    token_hash     bytea       NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_seen_at   timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    revoked_at     timestamptz,
    revoked_reason text        CHECK (revoked_reason IN
                                   ('sign_out', 'sign_out_all', 'user_revoked', 'operator', 'security_event', 'user_disabled')),
    client_id      text        CHECK (length(client_id) <= 255),
    user_agent     text        CHECK (length(user_agent) <= 1024),
    ip             inet,
    CONSTRAINT sessions_expires_after_creation CHECK (expires_at > created_at),
    CONSTRAINT sessions_revoked_reason_with_revoked_at CHECK ((revoked_at IS NULL) = (revoked_reason IS NULL))
);

-- A user's live sessions (sign out everywhere, Cross-Account Protection, the DBA view below).
CREATE INDEX sessions_user_id_live_idx ON signin.sessions (user_id) WHERE revoked_at IS NULL;
-- Pruning: delete sessions long past their absolute expiry, or long revoked.
CREATE INDEX sessions_expires_at_idx ON signin.sessions (expires_at);
CREATE INDEX sessions_revoked_at_idx ON signin.sessions (revoked_at) WHERE revoked_at IS NOT NULL;

COMMENT ON TABLE signin.sessions IS
    'Sessions opened by successful sign-ins. A session is valid while revoked_at IS NULL, now() < expires_at '
    'and last_seen_at is within the service''s idle timeout. The token itself is never stored.';
COMMENT ON COLUMN signin.sessions.id IS 'Internal session id (logs, sign_ins.session_id). Not a secret, not a token.';
COMMENT ON COLUMN signin.sessions.user_id IS 'The session''s user; deleting the user deletes the sessions.';
COMMENT ON COLUMN signin.sessions.token_hash IS
    'SHA-256 (32 bytes) of the exact session token string given to the client. The token is never stored.';
COMMENT ON COLUMN signin.sessions.created_at IS 'When the sign-in opened the session.';
COMMENT ON COLUMN signin.sessions.last_seen_at IS
    'Last time the session was used (refreshed at most once a minute); the idle timeout counts from here.';
COMMENT ON COLUMN signin.sessions.expires_at IS 'Absolute expiry: the session is dead after this, used or not.';
COMMENT ON COLUMN signin.sessions.revoked_at IS 'When the session was ended early; NULL while not revoked.';
COMMENT ON COLUMN signin.sessions.revoked_reason IS
    'Why it was ended: sign_out (that session), sign_out_all (all of the user''s sessions), operator, '
    'security_event (Google Cross-Account Protection), user_disabled.';
COMMENT ON COLUMN signin.sessions.client_id IS 'The OAuth client id (ID token aud) the session was opened for.';
COMMENT ON COLUMN signin.sessions.user_agent IS 'User-Agent of the sign-in request (truncated by the service).';
COMMENT ON COLUMN signin.sessions.ip IS 'Client address of the sign-in request, as nginx reported it.';

CREATE VIEW signin.active_sessions AS
    SELECT s.id AS session_id, s.user_id, u.google_sub, u.email, s.client_id,
           s.created_at, s.last_seen_at, s.expires_at, s.ip, s.user_agent
      FROM signin.sessions s
      JOIN signin.users u ON u.id = s.user_id
     WHERE s.revoked_at IS NULL AND s.expires_at > now();

COMMENT ON VIEW signin.active_sessions IS
    'For DBAs and support: sessions not revoked and not past their absolute expiry, with the user''s sub and '
    'email. The idle timeout is a service setting and is not applied here: check last_seen_at.';
