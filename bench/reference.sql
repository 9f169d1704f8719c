-- reference.sql — bench/signin's light reference: the least a sign-in could cost PostgreSQL (upsert the user, insert
-- the session) on a minimal schema of its own, next to this version's in the same database, with as many rows as
-- signin.users and signin.sessions hold when it runs (bench/preload.sql's, copied). bench/signin runs the statement
-- at the end-to-end sign-in rate with pgbench; the sign-in's PostgreSQL CPU should be no dearer than this one's.

CREATE SCHEMA bench_reference;

CREATE TABLE bench_reference.users (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    google_sub text        NOT NULL UNIQUE,
    email      text,
    name       text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE bench_reference.sessions (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id    bigint      NOT NULL REFERENCES bench_reference.users (id) ON DELETE CASCADE,
    token_hash bytea       NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

CREATE INDEX sessions_user_id_idx ON bench_reference.sessions (user_id);

-- The same sizes and subs as the signin tables (pgbench's pgbench-user-<n> among them: returning users here too).
INSERT INTO bench_reference.users (google_sub, email, name, created_at, updated_at)
SELECT google_sub, email, name, created_at, updated_at FROM signin.users ORDER BY id;

INSERT INTO bench_reference.sessions (user_id, token_hash, created_at, expires_at)
SELECT r.id, s.token_hash, s.created_at, s.expires_at
  FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id JOIN bench_reference.users r USING (google_sub)
 ORDER BY s.id;
