-- 013_pending_security_events.sql — Google's security events about an account that has not signed in here yet take
-- effect at its first sign-in.
--
-- The sign-in statement reads, for the sub it signs in, the events recorded before the user existed (user_id IS
-- NULL: outcome unknown_user) and sets the new row's id_tokens_invalid_before, google_sign_in_blocked_at,
-- google_account_enabled_at and flag from them, in the same statement (docs/database.md, "Sign-in"). This index
-- finds them: it holds only the events whose subject is no user here, so it stays small and the probe every
-- sign-in makes is cheap. Forward-only; no BEGIN/COMMIT in here.

CREATE INDEX security_events_pending_idx ON signin.security_events (subject_sub) WHERE user_id IS NULL;

COMMENT ON INDEX signin.security_events_pending_idx IS
    'The sign-in statement: events about a sub that is no user here yet, applied at its first sign-in.';
