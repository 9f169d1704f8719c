-- 009_revoke_everyone.sql — the revocation reason operator_all, for `tokensignin sessions revoke --all`
-- (incident response, and after restoring a backup: docs/database.md "Backups").
--
-- The new check is a superset of the old one, so every existing row passes it; it is added NOT VALID (no scan,
-- only a brief ACCESS EXCLUSIVE lock) and 010 validates it under a lock that lets reads and writes go on.
-- Forward-only; no BEGIN/COMMIT in here.

SET LOCAL lock_timeout = '10s';

ALTER TABLE signin.sessions
    DROP CONSTRAINT sessions_revoked_reason_check,
    ADD CONSTRAINT sessions_revoked_reason_check CHECK (revoked_reason IN
        ('sign_out', 'sign_out_all', 'user_revoked', 'operator', 'operator_all', 'security_event', 'user_disabled',
         'session_limit')) NOT VALID;

COMMENT ON COLUMN signin.sessions.revoked_reason IS
    'Why it was ended: sign_out (that session), sign_out_all (all of the user''s sessions), user_revoked (from '
    'the devices list), operator (tokensignin sessions revoke --user/--session), operator_all (tokensignin sessions '
    'revoke --all: everyone signed out, e.g. after restoring a backup), security_event (Google Cross-Account '
    'Protection), user_disabled, session_limit (a newer sign-in went over the per-user limit).';
