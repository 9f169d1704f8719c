-- 001_users.sql — the people who signed in with Google.
--
-- Applied by `tokensignin migrate`, which runs each numbered file once, in its own transaction, and records
-- it with its SHA-256 in signin.schema_migrations (created by the migrator itself). Files are forward-only:
-- never edit one that has been applied anywhere; add the next number instead. No BEGIN/COMMIT in here.

CREATE SCHEMA IF NOT EXISTS signin;
COMMENT ON SCHEMA signin IS 'tokensignin: users signed in with Google, their sessions and the sign-in audit.';

CREATE TABLE signin.users (
    id                        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    google_sub                text        NOT NULL UNIQUE
                                          CHECK (google_sub <> '' AND length(google_sub) <= 255),
    email                     text        CHECK (length(email) <= 320),
    email_verified            boolean     NOT NULL DEFAULT false,
    name                      text        CHECK (length(name) <= 1024),
    given_name                text        CHECK (length(given_name) <= 1024),
    family_name               text        CHECK (length(family_name) <= 1024),
    picture                   text        CHECK (length(picture) <= 4096),
    locale                    text        CHECK (length(locale) <= 64),
    hosted_domain             text        CHECK (length(hosted_domain) <= 253),
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now(),
    last_sign_in_at           timestamptz,
    disabled_at               timestamptz,
    disabled_reason           text        CHECK (length(disabled_reason) <= 1024),
    google_sign_in_blocked_at timestamptz,
    CONSTRAINT users_disabled_reason_needs_disabled_at
        CHECK (disabled_reason IS NULL OR disabled_at IS NOT NULL)
);

-- For people looking a user up by address (support, DBAs). The application never does: see the comment.
CREATE INDEX users_lower_email_idx ON signin.users (lower(email));

COMMENT ON TABLE signin.users IS
    'One row per Google account that has signed in, keyed by google_sub. Profile columns are copied from the '
    'latest verified ID token at each sign-in. Email is NOT an identity: never link or look up accounts by it.';
COMMENT ON COLUMN signin.users.id IS 'Internal user id, referenced by sessions and sign_ins.';
COMMENT ON COLUMN signin.users.google_sub IS
    'The ID token''s sub claim: Google''s stable, never reused account id (at most 255 ASCII characters). '
    'The only identity of a user.';
COMMENT ON COLUMN signin.users.email IS
    'Email from the latest ID token; may change or be reassigned by Google. Informational only, never an identity.';
COMMENT ON COLUMN signin.users.email_verified IS 'The token''s email_verified claim at the latest sign-in.';
COMMENT ON COLUMN signin.users.name IS 'The token''s name claim (display name) at the latest sign-in.';
COMMENT ON COLUMN signin.users.given_name IS 'The token''s given_name claim at the latest sign-in.';
COMMENT ON COLUMN signin.users.family_name IS 'The token''s family_name claim at the latest sign-in.';
COMMENT ON COLUMN signin.users.picture IS 'The token''s picture claim (profile photo URL) at the latest sign-in.';
COMMENT ON COLUMN signin.users.locale IS 'The token''s locale claim (BCP 47 tag) at the latest sign-in.';
COMMENT ON COLUMN signin.users.hosted_domain IS
    'The token''s hd claim: the Google Workspace domain of the account, NULL for consumer accounts.';
COMMENT ON COLUMN signin.users.created_at IS 'First sign-in (row creation).';
COMMENT ON COLUMN signin.users.updated_at IS 'Last time the profile columns were written (every sign-in).';
COMMENT ON COLUMN signin.users.last_sign_in_at IS 'Last successful sign-in with an ID token.';
COMMENT ON COLUMN signin.users.disabled_at IS
    'Set by an operator to disable the account: sign-in answers 403 and existing sessions stop working. '
    'NULL = enabled.';
COMMENT ON COLUMN signin.users.disabled_reason IS 'Why the account was disabled (free text for operators).';
COMMENT ON COLUMN signin.users.google_sign_in_blocked_at IS
    'Set when Google''s Cross-Account Protection reports the Google account compromised or disabled: signing in '
    'with Google is refused until Google reports it re-enabled (then NULL again).';
