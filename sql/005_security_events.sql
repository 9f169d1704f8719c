-- 005_security_events.sql — Google's Cross-Account Protection (RISC): the security events Google pushes to
-- POST /risc, and what they changed about the users they name.
--
-- Each event of a Security Event Token (SET) is one row, applied once: a redelivered SET (Google retries until
-- it gets 202) finds its (jti, event_type) already here and changes nothing. Users are matched on google_sub
-- only, never by email. Forward-only; no BEGIN/COMMIT in here.

ALTER TABLE signin.users
    ADD COLUMN id_tokens_invalid_before  timestamptz,
    ADD COLUMN google_account_enabled_at timestamptz,
    ADD COLUMN flagged_at                timestamptz,
    ADD COLUMN flagged_reason            text CHECK (length(flagged_reason) <= 64),
    ADD CONSTRAINT users_flagged_reason_needs_flagged_at CHECK (flagged_reason IS NULL OR flagged_at IS NOT NULL);

COMMENT ON COLUMN signin.users.google_sign_in_blocked_at IS
    'When Google said the account was disabled (the issued-at time of the account-disabled security event that '
    'blocked it): signing in with Google is refused (403) while set. Cleared by a later account-enabled event '
    'issued after it. NULL = not blocked.';
COMMENT ON COLUMN signin.users.id_tokens_invalid_before IS
    'Google revoked the account''s sessions or tokens at this instant (a sessions-revoked, tokens-revoked or '
    'hijacking event''s issued-at time): an ID token issued before it cannot open a session (401). NULL = none.';
COMMENT ON COLUMN signin.users.google_account_enabled_at IS
    'Issued-at time of the latest account-enabled event: an account-disabled event issued before it (delivered '
    'late, out of order) does not block the account again. NULL = never re-enabled.';
COMMENT ON COLUMN signin.users.flagged_at IS
    'When a security event asked for a person to review this account (no block, sessions kept). NULL = not flagged; '
    'clear it by hand after the review.';
COMMENT ON COLUMN signin.users.flagged_reason IS
    'Why it was flagged: bulk-account (Google disabled it for bulk-account creation) or credential-change-required.';

CREATE TABLE signin.security_events (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    jti              text        NOT NULL CHECK (jti <> '' AND length(jti) <= 256),
    issuer           text        NOT NULL CHECK (length(issuer) <= 256),
    event_type       text        NOT NULL CHECK (length(event_type) <= 256),
    subject_sub      text        CHECK (length(subject_sub) <= 255),
    user_id          bigint      REFERENCES signin.users (id) ON DELETE SET NULL,
    reason           text        CHECK (length(reason) <= 256),
    state            text        CHECK (length(state) <= 1024),
    issued_at        timestamptz NOT NULL,
    received_at      timestamptz NOT NULL DEFAULT now(),
    applied_at       timestamptz,
    outcome          text        NOT NULL CHECK (outcome IN (
                         'sessions_revoked', 'sessions_revoked_and_blocked', 'sessions_revoked_block_stale',
                         'blocked', 'block_stale', 'unblocked', 'enable_stale', 'flagged', 'recorded',
                         'unknown_user')),
    sessions_revoked integer     NOT NULL DEFAULT 0 CHECK (sessions_revoked >= 0),
    CONSTRAINT security_events_jti_event_type_key UNIQUE (jti, event_type),
    CONSTRAINT security_events_applied_with_user CHECK (applied_at IS NULL OR user_id IS NOT NULL)
);

-- A user's events, newest first (support, the view below); also serves ON DELETE SET NULL from users.
CREATE INDEX security_events_user_id_idx ON signin.security_events (user_id, issued_at);
-- "What arrived lately", and pruning by age.
CREATE INDEX security_events_received_at_idx ON signin.security_events (received_at);

COMMENT ON TABLE signin.security_events IS
    'Security events Google pushed to POST /risc (Cross-Account Protection, RFC 8417 SETs), one row per event, '
    'each applied once. Never holds the token itself.';
COMMENT ON COLUMN signin.security_events.id IS 'Row id.';
COMMENT ON COLUMN signin.security_events.jti IS
    'The SET''s jti (Google''s id of the delivery). With event_type unique: a redelivered SET changes nothing; '
    'a SET with several events has one row per event, all with its jti.';
COMMENT ON COLUMN signin.security_events.issuer IS 'The SET''s iss (https://accounts.google.com/).';
COMMENT ON COLUMN signin.security_events.event_type IS
    'The event type URI, e.g. https://schemas.openid.net/secevent/risc/event-type/account-disabled.';
COMMENT ON COLUMN signin.security_events.subject_sub IS
    'The Google account the event is about (its sub), as the event named it; NULL when it named none we read.';
COMMENT ON COLUMN signin.security_events.user_id IS
    'The user matched on google_sub = subject_sub; NULL for an account that never signed in here (or deleted since).';
COMMENT ON COLUMN signin.security_events.reason IS 'The event''s reason, e.g. hijacking or bulk-account (account-disabled).';
COMMENT ON COLUMN signin.security_events.state IS 'The state of a verification event (what tokensignin risc verify sent).';
COMMENT ON COLUMN signin.security_events.issued_at IS 'The SET''s iat: when Google issued the event (events arrive late and out of order).';
COMMENT ON COLUMN signin.security_events.received_at IS 'When POST /risc received it.';
COMMENT ON COLUMN signin.security_events.applied_at IS 'When its action was applied to the user; NULL when there was nothing to apply.';
COMMENT ON COLUMN signin.security_events.outcome IS
    'What was done: sessions_revoked; sessions_revoked_and_blocked (hijacking); blocked; unblocked; flagged; '
    'recorded (verification, unknown event types); unknown_user; and *_stale when a newer event had already '
    'decided the block (sessions_revoked_block_stale, block_stale, enable_stale).';
COMMENT ON COLUMN signin.security_events.sessions_revoked IS 'How many live sessions this event ended (revoked_reason security_event).';

CREATE VIEW signin.flagged_users AS
    SELECT u.id AS user_id, u.google_sub, u.email, u.google_sign_in_blocked_at, u.flagged_at, u.flagged_reason,
           u.id_tokens_invalid_before,
           (SELECT e.event_type FROM signin.security_events e WHERE e.user_id = u.id ORDER BY e.issued_at DESC, e.id DESC LIMIT 1)
               AS last_event_type,
           (SELECT max(e.issued_at) FROM signin.security_events e WHERE e.user_id = u.id) AS last_event_at
      FROM signin.users u
     WHERE u.google_sign_in_blocked_at IS NOT NULL OR u.flagged_at IS NOT NULL;

COMMENT ON VIEW signin.flagged_users IS
    'For DBAs and support: users whose Google sign-in is blocked or who are flagged for review by Cross-Account '
    'Protection, with their latest security event. Email is shown for people, never used to link accounts.';
