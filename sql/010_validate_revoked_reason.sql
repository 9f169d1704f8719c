-- 010_validate_revoked_reason.sql — validates the check 009 added NOT VALID.
--
-- A file of its own so the scan of signin.sessions runs in its own transaction under SHARE UPDATE EXCLUSIVE,
-- which blocks neither reads nor writes (in 009's transaction it would have held ACCESS EXCLUSIVE throughout).
-- Forward-only; no BEGIN/COMMIT in here.

ALTER TABLE signin.sessions VALIDATE CONSTRAINT sessions_revoked_reason_check;
