-- 015_sign_in_function.sql — a sign-in at about half of PostgreSQL's former CPU cost, the same rules
-- (docs/database.md, "Sign-in" and "What a sign-in costs", shows where the time went and what each change saved).
--
-- 1. Single-column CHECK constraints become domains. PostgreSQL 15 re-reads every CHECK constraint of a table from
--    its stored text (stringToNode) for each INSERT or UPDATE statement, once per statement and table: the 25
--    CHECKs of users, sessions and sign_ins were a quarter of a sign-in's CPU. A domain's constraint is parsed once
--    per connection (the type cache) and checked wherever a value is stored in a column of that type: the same
--    rules, the same SQLSTATE (23514 check_violation), named after the domain. The multi-column rules stay table
--    CHECKs (six of them). The domain constraints are added NOT VALID: every row already obeys them (the table
--    CHECKs they replace were valid), and validating would scan sessions and sign_ins while holding the lock of
--    the type change. They are enforced for every value written from now on; to have the catalog say "valid"
--    too, run at a quiet time (each scans its columns and blocks their writes meanwhile):
--        ALTER DOMAIN signin.client_id VALIDATE CONSTRAINT client_id_check;   -- and so on, \dD signin.*
-- 2. The audit row has no foreign key to signin.users: an RI check per sign-in, for a row that must outlive the
--    user anyway. sign_ins.user_id now keeps the id of a user deleted later (google_sub says who it was).
-- 3. The sign-in is the function signin.sign_in: a returning account whose profile and refusal state are as the
--    token and the row say is one INSERT of the session and its audit row; the user row is written only when a
--    claim changed or last_sign_in_at is an hour old (so users.last_sign_in_at is exact to the hour; sign_ins
--    has every sign-in to the microsecond) and users.updated_at moves only when the profile changed.
--
-- Locks. Changing a column's type to a domain without constraints rewrites nothing (the domain's constraints come
-- after), but holds an ACCESS EXCLUSIVE lock on users, sessions and sign_ins until this file commits, about a
-- second at a million rows: requests wait meanwhile (checks answered from the session cache do not). The views and
-- triggers that name those columns are dropped and created again as they were (definition, comments, grants):
-- PostgreSQL cannot change the type of a column a view or a trigger uses. lock_timeout makes this file fail
-- rather than queue every request behind a long-running transaction (run migrate again later).
-- Forward-only; no BEGIN/COMMIT in here.

SET LOCAL lock_timeout = '10s';

-- The views and triggers over the columns below, as they are now.
CREATE TEMPORARY TABLE rebuilt ON COMMIT DROP AS
    SELECT 'view' AS kind, c.oid::regclass::text AS name, c.oid AS oid,
           format('CREATE VIEW %s AS %s', c.oid::regclass, pg_get_viewdef(c.oid)) AS definition
      FROM pg_class c
     WHERE c.relkind = 'v' AND c.relnamespace = 'signin'::regnamespace
    UNION ALL
    SELECT 'trigger', format('%I ON %s', t.tgname, t.tgrelid::regclass), t.oid, pg_get_triggerdef(t.oid)
      FROM pg_trigger t
     WHERE NOT t.tgisinternal AND t.tgrelid IN ('signin.users'::regclass, 'signin.sessions'::regclass, 'signin.sign_ins'::regclass)
       AND (t.tgattr <> '' OR t.tgqual IS NOT NULL);

CREATE TEMPORARY TABLE rebuilt_comments ON COMMIT DROP AS
    SELECT r.kind, r.name, a.attname AS column_name, d.description
      FROM rebuilt r
      JOIN pg_description d ON d.objoid = r.oid
                           AND d.classoid = CASE r.kind WHEN 'view' THEN 'pg_class'::regclass ELSE 'pg_trigger'::regclass END
      LEFT JOIN pg_attribute a ON r.kind = 'view' AND a.attrelid = r.oid AND a.attnum = d.objsubid
     WHERE d.objsubid = 0 OR a.attname IS NOT NULL;

CREATE TEMPORARY TABLE rebuilt_grants ON COMMIT DROP AS
    SELECT r.name, x.privilege_type, x.grantee
      FROM rebuilt r JOIN pg_class c ON c.oid = r.oid, aclexplode(c.relacl) x
     WHERE r.kind = 'view' AND x.grantee <> c.relowner;

DO $$
DECLARE
    item record;
BEGIN
    FOR item IN SELECT name, kind FROM rebuilt ORDER BY kind, oid DESC LOOP
        EXECUTE format('DROP %s IF EXISTS %s', item.kind, item.name);
    END LOOP;
END
$$;

CREATE DOMAIN signin.google_sub AS text;
CREATE DOMAIN signin.email AS text;
CREATE DOMAIN signin.person_name AS text;
CREATE DOMAIN signin.picture_url AS text;
CREATE DOMAIN signin.locale AS text;
CREATE DOMAIN signin.hosted_domain AS text;
CREATE DOMAIN signin.operator_note AS text;
CREATE DOMAIN signin.flag_reason AS text;
CREATE DOMAIN signin.sha256 AS bytea;
CREATE DOMAIN signin.revoked_reason AS text;
CREATE DOMAIN signin.client_id AS text;
CREATE DOMAIN signin.user_agent AS text;
CREATE DOMAIN signin.sign_in_outcome AS text;
CREATE DOMAIN signin.reason_code AS text;

ALTER TABLE signin.users
    ALTER COLUMN google_sub TYPE signin.google_sub,
    ALTER COLUMN email TYPE signin.email,
    ALTER COLUMN name TYPE signin.person_name,
    ALTER COLUMN given_name TYPE signin.person_name,
    ALTER COLUMN family_name TYPE signin.person_name,
    ALTER COLUMN picture TYPE signin.picture_url,
    ALTER COLUMN locale TYPE signin.locale,
    ALTER COLUMN hosted_domain TYPE signin.hosted_domain,
    ALTER COLUMN disabled_reason TYPE signin.operator_note,
    ALTER COLUMN flagged_reason TYPE signin.flag_reason,
    DROP CONSTRAINT users_google_sub_check,
    DROP CONSTRAINT users_email_check,
    DROP CONSTRAINT users_name_check,
    DROP CONSTRAINT users_given_name_check,
    DROP CONSTRAINT users_family_name_check,
    DROP CONSTRAINT users_picture_check,
    DROP CONSTRAINT users_locale_check,
    DROP CONSTRAINT users_hosted_domain_check,
    DROP CONSTRAINT users_disabled_reason_check,
    DROP CONSTRAINT users_flagged_reason_check;

ALTER TABLE signin.sessions
    ALTER COLUMN token_hash TYPE signin.sha256,
    ALTER COLUMN revoked_reason TYPE signin.revoked_reason,
    ALTER COLUMN client_id TYPE signin.client_id,
    ALTER COLUMN user_agent TYPE signin.user_agent,
    DROP CONSTRAINT sessions_token_hash_check,
    DROP CONSTRAINT sessions_revoked_reason_check,
    DROP CONSTRAINT sessions_client_id_check,
    DROP CONSTRAINT sessions_user_agent_check;

ALTER TABLE signin.sign_ins
    ALTER COLUMN google_sub TYPE signin.google_sub,
    ALTER COLUMN outcome TYPE signin.sign_in_outcome,
    ALTER COLUMN reason TYPE signin.reason_code,
    ALTER COLUMN client_id TYPE signin.client_id,
    ALTER COLUMN user_agent TYPE signin.user_agent,
    DROP CONSTRAINT sign_ins_google_sub_check,
    DROP CONSTRAINT sign_ins_outcome_check,
    DROP CONSTRAINT sign_ins_reason_check,
    DROP CONSTRAINT sign_ins_client_id_check,
    DROP CONSTRAINT sign_ins_user_agent_check,
    DROP CONSTRAINT sign_ins_user_id_fkey;

ALTER DOMAIN signin.google_sub ADD CONSTRAINT google_sub_check CHECK (VALUE <> '' AND length(VALUE) <= 255) NOT VALID;
ALTER DOMAIN signin.email ADD CONSTRAINT email_check CHECK (length(VALUE) <= 320) NOT VALID;
ALTER DOMAIN signin.person_name ADD CONSTRAINT person_name_check CHECK (length(VALUE) <= 1024) NOT VALID;
ALTER DOMAIN signin.picture_url ADD CONSTRAINT picture_url_check CHECK (length(VALUE) <= 4096) NOT VALID;
ALTER DOMAIN signin.locale ADD CONSTRAINT locale_check CHECK (length(VALUE) <= 64) NOT VALID;
ALTER DOMAIN signin.hosted_domain ADD CONSTRAINT hosted_domain_check CHECK (length(VALUE) <= 253) NOT VALID;
ALTER DOMAIN signin.operator_note ADD CONSTRAINT operator_note_check CHECK (length(VALUE) <= 1024) NOT VALID;
ALTER DOMAIN signin.flag_reason ADD CONSTRAINT flag_reason_check CHECK (length(VALUE) <= 64) NOT VALID;
ALTER DOMAIN signin.sha256 ADD CONSTRAINT sha256_check CHECK (octet_length(VALUE) = 32) NOT VALID;
ALTER DOMAIN signin.revoked_reason ADD CONSTRAINT revoked_reason_check CHECK (VALUE IN
    ('sign_out', 'sign_out_all', 'user_revoked', 'operator', 'operator_all', 'security_event', 'user_disabled',
     'session_limit')) NOT VALID;
ALTER DOMAIN signin.client_id ADD CONSTRAINT client_id_check CHECK (length(VALUE) <= 255) NOT VALID;
ALTER DOMAIN signin.user_agent ADD CONSTRAINT user_agent_check CHECK (length(VALUE) <= 1024) NOT VALID;
ALTER DOMAIN signin.sign_in_outcome ADD CONSTRAINT sign_in_outcome_check CHECK (VALUE IN ('success', 'failure')) NOT VALID;
ALTER DOMAIN signin.reason_code ADD CONSTRAINT reason_code_check CHECK (VALUE ~ '^[a-z0-9_]{1,64}$') NOT VALID;

COMMENT ON DOMAIN signin.google_sub IS 'Google''s subject identifier (the token''s sub): non-empty, at most 255 characters.';
COMMENT ON DOMAIN signin.email IS 'An email address as the token gave it: at most 320 characters.';
COMMENT ON DOMAIN signin.person_name IS 'A name claim: at most 1024 characters.';
COMMENT ON DOMAIN signin.picture_url IS 'The picture claim''s URL: at most 4096 characters.';
COMMENT ON DOMAIN signin.locale IS 'The locale claim: at most 64 characters.';
COMMENT ON DOMAIN signin.hosted_domain IS 'The hd claim (a Google Workspace domain): at most 253 characters.';
COMMENT ON DOMAIN signin.operator_note IS 'A reason an operator wrote down: at most 1024 characters.';
COMMENT ON DOMAIN signin.flag_reason IS 'Why Cross-Account Protection flagged an account: at most 64 characters.';
COMMENT ON DOMAIN signin.sha256 IS 'A SHA-256 digest: exactly 32 bytes.';
COMMENT ON DOMAIN signin.revoked_reason IS 'Why a session was revoked (docs/database.md lists the values).';
COMMENT ON DOMAIN signin.client_id IS 'An OAuth client ID: at most 255 characters.';
COMMENT ON DOMAIN signin.user_agent IS 'A User-Agent header, cut to 1024 characters by the service.';
COMMENT ON DOMAIN signin.sign_in_outcome IS 'success or failure.';
COMMENT ON DOMAIN signin.reason_code IS 'A machine-readable reason code: [a-z0-9_], 1 to 64 characters.';

-- The views and triggers again, as they were.
DO $$
DECLARE
    item record;
BEGIN
    FOR item IN SELECT definition FROM rebuilt ORDER BY kind DESC, oid LOOP
        EXECUTE item.definition;
    END LOOP;
    FOR item IN SELECT * FROM rebuilt_comments LOOP
        IF item.column_name IS NOT NULL THEN
            EXECUTE format('COMMENT ON COLUMN %s.%I IS %L', item.name, item.column_name, item.description);
        ELSE
            EXECUTE format('COMMENT ON %s %s IS %L', item.kind, item.name, item.description);
        END IF;
    END LOOP;
    FOR item IN SELECT * FROM rebuilt_grants LOOP
        EXECUTE format('GRANT %s ON %s TO %s', item.privilege_type, item.name,
                       CASE WHEN item.grantee = 0 THEN 'PUBLIC' ELSE item.grantee::regrole::text END);
    END LOOP;
END
$$;

COMMENT ON COLUMN signin.users.updated_at IS 'Last time a profile column changed (a sign-in whose claims differ, or an operator).';
COMMENT ON COLUMN signin.users.last_sign_in_at IS
    'Last successful sign-in with an ID token, exact to the hour (written again once it is an hour old); '
    'signin.sign_ins has each one.';
COMMENT ON COLUMN signin.sign_ins.user_id IS
    'The user the token named, when it verified (NULL: it failed before). No foreign key: the audit outlives '
    'the user, and keeps the id of a user deleted since (google_sub says who it was).';
COMMENT ON INDEX signin.sign_ins_user_id_at_idx IS 'A user''s sign-in history.';

CREATE TYPE signin.sign_in_result AS (user_id bigint, created boolean, refusal text, session_id bigint, expires_at bigint);

COMMENT ON TYPE signin.sign_in_result IS
    'What signin.sign_in answers: the user, whether this sign-in created it, the refusal (NULL: signed in), the '
    'new session''s id and expiry (Unix seconds).';

-- The sign-in: one call, one transaction with the caller's. Parameters: the verified token's claims (sub, email,
-- email_verified, name, given_name, family_name, picture, locale, hd, iat), then the new session (SHA-256 of its
-- token, lifetime, client, User-Agent, address) and the limit of live sessions per user.
CREATE FUNCTION signin.sign_in(
    sub text, email text, email_verified boolean, name text, given_name text, family_name text, picture text,
    locale text, hosted_domain text, issued_at bigint, token_hash bytea, lifetime interval, client_id text,
    user_agent text, ip inet, max_sessions integer)
RETURNS signin.sign_in_result
LANGUAGE plpgsql
AS $$
DECLARE
    issued CONSTANT timestamptz := to_timestamp(issued_at);
    agent CONSTANT text := left(user_agent, 1024);
    account signin.users;
    result signin.sign_in_result;
    opened timestamptz;
    live bigint;
BEGIN
    -- The common case, one statement: a returning account that may sign in, whose claims are what the row holds
    -- and whose last_sign_in_at is less than an hour old. The row is read, not written (nor locked beyond the
    -- session's foreign key check). The audit row is written, never read back (the service may only insert it).
    WITH s AS (
        INSERT INTO signin.sessions AS s (user_id, token_hash, expires_at, client_id, user_agent, ip)
        SELECT u.id, sign_in.token_hash, date_trunc('second', now() + sign_in.lifetime), sign_in.client_id, agent, sign_in.ip
          FROM signin.users u
         WHERE u.google_sub = sign_in.sub
           AND u.disabled_at IS NULL AND u.google_sign_in_blocked_at IS NULL
           AND (u.id_tokens_invalid_before IS NULL OR u.id_tokens_invalid_before <= issued)
           AND u.last_sign_in_at >= now() - interval '1 hour'
           AND (u.email, u.email_verified, u.name, u.given_name, u.family_name, u.picture, u.locale, u.hosted_domain)
               IS NOT DISTINCT FROM (sign_in.email, coalesce(sign_in.email_verified, false), sign_in.name, sign_in.given_name,
                                     sign_in.family_name, sign_in.picture, sign_in.locale, sign_in.hosted_domain)
        RETURNING s.id, s.user_id, s.expires_at
    ), audit AS (
        INSERT INTO signin.sign_ins (user_id, google_sub, outcome, client_id, ip, user_agent, session_id)
        SELECT s.user_id, sign_in.sub, 'success', sign_in.client_id, sign_in.ip, agent, s.id FROM s
    )
    SELECT s.user_id, s.id, s.expires_at,
           (SELECT count(*) FROM signin.sessions o WHERE o.user_id = s.user_id AND o.revoked_at IS NULL)
      INTO result.user_id, result.session_id, opened, live
      FROM s;
    IF FOUND THEN
        result.created := false;
    ELSE
        -- Everything else: a first sign-in, a changed profile, an hour-old last_sign_in_at, or a refusal.
        SELECT * INTO account FROM signin.users u WHERE u.google_sub = sign_in.sub;
        result.created := NOT FOUND;
        IF result.created THEN
            -- Google's security events recorded about this sub before it was a user here apply now.
            INSERT INTO signin.users AS u
                   (google_sub, email, email_verified, name, given_name, family_name, picture, locale, hosted_domain,
                    last_sign_in_at, id_tokens_invalid_before, google_sign_in_blocked_at, google_account_enabled_at,
                    flagged_at, flagged_reason)
            SELECT sign_in.sub, sign_in.email, coalesce(sign_in.email_verified, false), sign_in.name, sign_in.given_name,
                   sign_in.family_name, sign_in.picture, sign_in.locale, sign_in.hosted_domain,
                   CASE WHEN f.blocked IS NULL AND (f.revoked IS NULL OR f.revoked <= issued) THEN now() END,
                   f.revoked, f.blocked, f.enabled, CASE WHEN f.flag IS NOT NULL THEN now() END, f.flag
              FROM (SELECT p.revoked, p.enabled, p.flag,
                           CASE WHEN p.disabled > coalesce(p.enabled, '-infinity') THEN p.disabled END AS blocked
                      FROM (SELECT max(e.issued_at) FILTER (
                                       WHERE e.event_type IN ('https://schemas.openid.net/secevent/risc/event-type/sessions-revoked',
                                                              'https://schemas.openid.net/secevent/oauth/event-type/tokens-revoked')
                                          OR (e.event_type = 'https://schemas.openid.net/secevent/risc/event-type/account-disabled'
                                              AND e.reason = 'hijacking')) AS revoked,
                                   max(e.issued_at) FILTER (
                                       WHERE e.event_type = 'https://schemas.openid.net/secevent/risc/event-type/account-disabled'
                                         AND e.reason IS DISTINCT FROM 'bulk-account') AS disabled,
                                   max(e.issued_at) FILTER (
                                       WHERE e.event_type = 'https://schemas.openid.net/secevent/risc/event-type/account-enabled') AS enabled,
                                   (array_agg(CASE WHEN e.event_type = 'https://schemas.openid.net/secevent/risc/event-type/account-credential-change-required'
                                                   THEN 'credential-change-required' ELSE 'bulk-account' END
                                              ORDER BY e.issued_at DESC)
                                      FILTER (WHERE e.event_type = 'https://schemas.openid.net/secevent/risc/event-type/account-credential-change-required'
                                                 OR (e.event_type = 'https://schemas.openid.net/secevent/risc/event-type/account-disabled'
                                                     AND e.reason = 'bulk-account')))[1] AS flag
                              FROM signin.security_events e
                             WHERE e.subject_sub = sign_in.sub AND e.user_id IS NULL) p) f
            ON CONFLICT (google_sub) DO NOTHING
            RETURNING * INTO account;
            IF NOT FOUND THEN
                -- A concurrent first sign-in of the same account committed first: this one is a returning one.
                SELECT * INTO STRICT account FROM signin.users u WHERE u.google_sub = sign_in.sub;
                result.created := false;
            END IF;
        END IF;
        result.user_id := account.id;
        result.refusal := CASE WHEN account.disabled_at IS NOT NULL THEN 'account_disabled'
                               WHEN account.google_sign_in_blocked_at IS NOT NULL THEN 'google_sign_in_blocked'
                               WHEN account.id_tokens_invalid_before > issued THEN 'id_token_revoked' END;
        IF NOT result.created
           AND ((account.email, account.email_verified, account.name, account.given_name, account.family_name,
                 account.picture, account.locale, account.hosted_domain)
                IS DISTINCT FROM (sign_in.email, coalesce(sign_in.email_verified, false), sign_in.name, sign_in.given_name,
                                  sign_in.family_name, sign_in.picture, sign_in.locale, sign_in.hosted_domain)
                OR (result.refusal IS NULL
                    AND (account.last_sign_in_at IS NULL OR account.last_sign_in_at < now() - interval '1 hour'))) THEN
            -- The latest committed row decides the refusal (an operator's disable that committed meanwhile).
            UPDATE signin.users u
               SET email = sign_in.email, email_verified = coalesce(sign_in.email_verified, false), name = sign_in.name,
                   given_name = sign_in.given_name, family_name = sign_in.family_name, picture = sign_in.picture,
                   locale = sign_in.locale, hosted_domain = sign_in.hosted_domain,
                   updated_at = CASE WHEN (u.email, u.email_verified, u.name, u.given_name, u.family_name, u.picture,
                                           u.locale, u.hosted_domain)
                                          IS DISTINCT FROM (sign_in.email, coalesce(sign_in.email_verified, false),
                                                            sign_in.name, sign_in.given_name, sign_in.family_name,
                                                            sign_in.picture, sign_in.locale, sign_in.hosted_domain)
                                     THEN now() ELSE u.updated_at END,
                   last_sign_in_at = CASE WHEN u.disabled_at IS NULL AND u.google_sign_in_blocked_at IS NULL
                                               AND (u.id_tokens_invalid_before IS NULL OR u.id_tokens_invalid_before <= issued)
                                          THEN now() ELSE u.last_sign_in_at END
             WHERE u.id = account.id
            RETURNING CASE WHEN u.disabled_at IS NOT NULL THEN 'account_disabled'
                           WHEN u.google_sign_in_blocked_at IS NOT NULL THEN 'google_sign_in_blocked'
                           WHEN u.id_tokens_invalid_before > issued THEN 'id_token_revoked' END
                 INTO result.refusal;
        END IF;
        IF result.refusal IS NOT NULL THEN
            INSERT INTO signin.sign_ins (user_id, google_sub, outcome, reason, client_id, ip, user_agent)
            VALUES (account.id, sign_in.sub, 'failure', result.refusal, sign_in.client_id, sign_in.ip, agent);
            RETURN result;
        END IF;
        WITH s AS (
            INSERT INTO signin.sessions AS s (user_id, token_hash, expires_at, client_id, user_agent, ip)
            VALUES (account.id, sign_in.token_hash, date_trunc('second', now() + sign_in.lifetime), sign_in.client_id,
                    agent, sign_in.ip)
            RETURNING s.id, s.user_id, s.expires_at
        ), audit AS (
            INSERT INTO signin.sign_ins (user_id, google_sub, outcome, client_id, ip, user_agent, session_id)
            SELECT s.user_id, sign_in.sub, 'success', sign_in.client_id, sign_in.ip, agent, s.id FROM s
        )
        SELECT s.id, s.expires_at,
               (SELECT count(*) FROM signin.sessions o WHERE o.user_id = s.user_id AND o.revoked_at IS NULL)
          INTO result.session_id, opened, live
          FROM s;
    END IF;
    result.expires_at := extract(epoch FROM opened)::bigint;
    -- The session limit: `live` counted the user's unrevoked sessions before this one (expired ones too, so the
    -- look-up below runs only when it may find some). The (limit - 1) most recently used unexpired ones stay,
    -- besides the new one.
    IF live >= sign_in.max_sessions THEN
        UPDATE signin.sessions t SET revoked_at = now(), revoked_reason = 'session_limit'
         WHERE t.id IN (SELECT o.id FROM signin.sessions o
                         WHERE o.user_id = result.user_id AND o.id <> result.session_id
                           AND o.revoked_at IS NULL AND o.expires_at > now()
                         ORDER BY o.last_seen_at DESC, o.id DESC OFFSET greatest(sign_in.max_sessions - 1, 0));
    END IF;
    RETURN result;
END
$$;

-- Functions are executable by PUBLIC unless revoked; sql/roles.sql grants this one to the service's role only.
REVOKE ALL ON FUNCTION signin.sign_in(text, text, boolean, text, text, text, text, text, text, bigint, bytea, interval,
                                      text, text, inet, integer) FROM PUBLIC;

COMMENT ON FUNCTION signin.sign_in(text, text, boolean, text, text, text, text, text, text, bigint, bytea, interval,
                                   text, text, inet, integer) IS
    'The sign-in: creates or updates the user named by sub, opens a session (unless the account is disabled, its '
    'Google sign-in blocked, or the token issued before its sessions were revoked), revokes the least recently used '
    'beyond max_sessions, writes the audit row. Runs with the caller''s rights (the service''s role).';
