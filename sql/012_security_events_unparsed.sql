-- 012_security_events_unparsed.sql — security events recorded as they came when the receiver cannot read them.
--
-- Google does not redeliver a SET answered 400, so a SET whose signature, issuer and audience are good but whose
-- other claims POST /risc cannot read (a claim of another type, a missing jti, an event in a shape it does not
-- know) is answered 202 and kept here with the outcome 'unparsed' and its payload (claims), for a person to read.
-- Nothing about such a row is applied to a user (docs/risc.md).
--
-- Every existing row passes the new checks (none is 'unparsed', every one has an issued_at); the table holds a few
-- rows per user at most, so they are validated here, in the migration's transaction, under a short lock.
-- Forward-only; no BEGIN/COMMIT in here.

SET LOCAL lock_timeout = '10s';

ALTER TABLE signin.security_events
    ADD COLUMN claims          text CHECK (length(claims) <= 131072),
    ADD COLUMN unparsed_reason text CHECK (length(unparsed_reason) <= 256),
    ALTER COLUMN issued_at DROP NOT NULL,
    DROP CONSTRAINT security_events_outcome_check,
    ADD CONSTRAINT security_events_outcome_check CHECK (outcome IN (
        'sessions_revoked', 'sessions_revoked_and_blocked', 'sessions_revoked_block_stale',
        'blocked', 'block_stale', 'unblocked', 'enable_stale', 'flagged', 'recorded',
        'unknown_user', 'unparsed')),
    -- An event the receiver read has its iat (blocks are ordered by it); only an unparsed one may lack it.
    ADD CONSTRAINT security_events_issued_at_unless_unparsed CHECK (issued_at IS NOT NULL OR outcome = 'unparsed'),
    -- An unparsed event keeps its payload and why it was not read; an event that was read keeps neither.
    ADD CONSTRAINT security_events_unparsed_keeps_claims
        CHECK ((outcome = 'unparsed') = (claims IS NOT NULL AND unparsed_reason IS NOT NULL)),
    ADD CONSTRAINT security_events_unparsed_changes_nothing
        CHECK (outcome <> 'unparsed' OR (subject_sub IS NULL AND user_id IS NULL AND applied_at IS NULL AND sessions_revoked = 0));

COMMENT ON COLUMN signin.security_events.claims IS
    'For an unparsed event only: the SET''s payload as received (JSON text, at most a token''s size; a raw NUL, '
    'which text cannot hold, written as \u0000), for a person to read (claims::jsonb works unless it holds '
    '\u0000). NULL for an event that was read.';
COMMENT ON COLUMN signin.security_events.unparsed_reason IS
    'For an unparsed event only: why the receiver could not read it (the refusal code and its detail, e.g. '
    '"bad_events: event member reason is not a string"). NULL for an event that was read.';
COMMENT ON COLUMN signin.security_events.issued_at IS
    'The SET''s iat: when Google issued the event (events arrive late and out of order; blocks are ordered by it). '
    'NULL only for an unparsed event whose iat is not a number.';
COMMENT ON COLUMN signin.security_events.jti IS
    'The SET''s jti (Google''s id of the delivery). With event_type unique: a redelivered SET changes nothing; '
    'a SET with several events has one row per event, all with its jti. An unparsed SET whose jti is unusable '
    '(missing, not a string, empty, over 256 characters, with a control character) is recorded under sha256:<hex '
    'of its payload>, so a redelivery is still recorded once.';
COMMENT ON COLUMN signin.security_events.event_type IS
    'The event type URI, e.g. https://schemas.openid.net/secevent/risc/event-type/account-disabled. An unparsed '
    'SET: the type of its one event when events is an object with one usable member name, otherwise unparsed.';
COMMENT ON COLUMN signin.security_events.outcome IS
    'What was done: sessions_revoked; sessions_revoked_and_blocked (hijacking); blocked; unblocked; flagged; '
    'recorded (verification, token-revoked, unknown event types); unknown_user; *_stale when a newer event had '
    'already decided the block (sessions_revoked_block_stale, block_stale, enable_stale); unparsed (signed by '
    'Google and addressed to us, but not readable: recorded with its claims, nothing applied).';
