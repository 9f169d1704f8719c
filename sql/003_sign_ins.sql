-- 003_sign_ins.sql — the sign-in audit: one row per sign-in attempt that reached token verification.
--
-- Successes and failures with a reason code. Never an ID token, session token or their hashes.
-- Retention: rows are pruned by age (index on "at"); user_id becomes NULL when a user is deleted, google_sub
-- stays so the trail survives. Forward-only; no BEGIN/COMMIT in here.

CREATE TABLE signin.sign_ins (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    user_id    bigint      REFERENCES signin.users (id) ON DELETE SET NULL,
    google_sub text        CHECK (google_sub <> '' AND length(google_sub) <= 255),
    outcome    text        NOT NULL CHECK (outcome IN ('success', 'failure')),
    reason     text        CHECK (reason ~ '^[a-z0-9_]{1,64}$'),
    client_id  text        CHECK (length(client_id) <= 255),
    ip         inet,
    user_agent text        CHECK (length(user_agent) <= 1024),
    session_id bigint,
    CONSTRAINT sign_ins_failure_has_reason CHECK (outcome = 'success' OR reason IS NOT NULL),
    CONSTRAINT sign_ins_success_has_session CHECK (outcome = 'failure' OR session_id IS NOT NULL)
);

-- Pruning by age, and "what happened lately".
CREATE INDEX sign_ins_at_idx ON signin.sign_ins (at);
-- A user's history; also serves ON DELETE SET NULL from users.
CREATE INDEX sign_ins_user_id_at_idx ON signin.sign_ins (user_id, at);

COMMENT ON TABLE signin.sign_ins IS
    'Audit of sign-in attempts: successes and failures with a reason code. Never holds tokens or token hashes. '
    'Pruned by age.';
COMMENT ON COLUMN signin.sign_ins.id IS 'Row id.';
COMMENT ON COLUMN signin.sign_ins.at IS 'When the attempt was made.';
COMMENT ON COLUMN signin.sign_ins.user_id IS
    'The user, when the token verified and the user exists; NULL for failures before that, or after the user '
    'was deleted.';
COMMENT ON COLUMN signin.sign_ins.google_sub IS
    'The token''s sub, only when the token verified (an unverified token''s claims are not recorded).';
COMMENT ON COLUMN signin.sign_ins.outcome IS 'success (a session was opened) or failure.';
COMMENT ON COLUMN signin.sign_ins.reason IS
    'Failure code (expired, bad_audience, bad_signature, unknown_kid, hosted_domain_not_allowed, '
    'account_disabled, google_sign_in_blocked, ...); NULL on success.';
COMMENT ON COLUMN signin.sign_ins.client_id IS 'The OAuth client id (aud) that matched, when known.';
COMMENT ON COLUMN signin.sign_ins.ip IS 'Client address as nginx reported it.';
COMMENT ON COLUMN signin.sign_ins.user_agent IS 'User-Agent of the request (truncated by the service).';
COMMENT ON COLUMN signin.sign_ins.session_id IS
    'The session opened by a success. Deliberately no foreign key: sessions are pruned sooner than the audit.';
