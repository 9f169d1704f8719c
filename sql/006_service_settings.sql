-- 006_service_settings.sql — the service's session settings, recorded by the service itself, so every process
-- (the responder on every host, `tokensignin prune`, `tokensignin sessions list`, the views) judges idleness by
-- the one idle timeout the service applies, not by whatever environment it happened to be started with.
--
-- One row. Every connection the responder opens writes its TOKENSIGNIN_SESSION_IDLE_TTL and
-- TOKENSIGNIN_SESSION_TTL here (a no-op when they are unchanged; a change is logged as session_settings_changed).
-- Without a row (no responder has connected since this migration), prune deletes no session for idleness: it
-- still deletes expired and long-revoked ones, and an idle session is dead at its absolute expiry anyway.
-- Forward-only; no BEGIN/COMMIT in here.

CREATE TABLE signin.service_settings (
    singleton            boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    session_idle_timeout interval    NOT NULL CHECK (session_idle_timeout > interval '0'),
    session_lifetime     interval    NOT NULL CHECK (session_lifetime >= session_idle_timeout),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    updated_by           text        NOT NULL CHECK (length(updated_by) <= 256),
    updated_from         inet        DEFAULT inet_client_addr()
);

COMMENT ON TABLE signin.service_settings IS
    'The session settings the responder applies, written by the responder on every connection it opens (one row). '
    'tokensignin prune and sessions list read the idle timeout from here instead of their own environment; '
    'the views apply it. Change the settings in the service''s environment file, not here: the next connection '
    'writes them back.';
COMMENT ON COLUMN signin.service_settings.singleton IS 'Always true: the table holds at most one row.';
COMMENT ON COLUMN signin.service_settings.session_idle_timeout IS
    'TOKENSIGNIN_SESSION_IDLE_TTL: a session unused for longer is dead (prune deletes it, the check refuses it).';
COMMENT ON COLUMN signin.service_settings.session_lifetime IS
    'TOKENSIGNIN_SESSION_TTL: the absolute lifetime new sessions get (each session''s expires_at is the authority).';
COMMENT ON COLUMN signin.service_settings.updated_at IS 'When a responder last changed the row.';
COMMENT ON COLUMN signin.service_settings.updated_by IS
    'The responder that last changed the row: its version line (tokensignin --version).';
COMMENT ON COLUMN signin.service_settings.updated_from IS
    'Its address as PostgreSQL saw it (NULL over a unix socket): which host to look at when two disagree.';
