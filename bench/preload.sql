-- preload.sql — a site at steady state for the benchmarks: :users users with 10 live sessions each and one audit row
-- per session, generated in the database (run by bench/lib.sh's preload_users with psql -v users=N -v client_id=ID).
--
-- The subs are those the load generators sign in, so both sides sign *returning* users in: odd rows are wrk's
-- bench-user-1, -2, ... (tokensignin dev token --sub bench-user --count N), even rows pgbench's pgbench-user-1, -2, ...
-- (signin_pgbench_script). Only columns that every schema since bf3c0d2 has (001-003), so the previous version's
-- database takes the same rows. Deterministic (no random()): both databases get the same data.

INSERT INTO signin.users (google_sub, email, email_verified, created_at, updated_at, last_sign_in_at)
SELECT CASE WHEN i % 2 = 1 THEN 'bench-user-' || (i + 1) / 2 ELSE 'pgbench-user-' || i / 2 END,
       'bench@example.com', true, now() - interval '60 days' + (i % 1000) * interval '1 minute', now(),
       -- Signed in within the hour: the new sign-in statement refreshes last_sign_in_at at most hourly, so the
       -- steady state of a bench run is a returning user signed in within the hour (wrk's users come back within
       -- seconds; a user with an older last_sign_in_at would make the first sign-in of each a write of it).
       now()
  FROM generate_series(1, :users) i;

-- Ten sessions per user, 30-day lifetime: expiries spread over the next 30 days (so creations over the last 30), last
-- use within the last 6 days (inside the default 7-day idle timeout: all live, all counted by the session limit).
-- Inserted in creation order, as a site's table grows: a user's sessions lie on different pages.
INSERT INTO signin.sessions (user_id, token_hash, created_at, last_seen_at, expires_at, client_id, ip)
SELECT user_id, sha256(convert_to('preload-' || user_id || '-' || k, 'UTF8')), expires_at - interval '30 days',
       greatest(expires_at - interval '30 days', now() - ((user_id * 7919 + k * 104729) % 8640) * interval '1 minute'),
       expires_at, :'client_id', '127.0.0.1'
  FROM (SELECT u.id AS user_id, k, now() + (1 + (u.id * 104729 + k * 7919) % 43199) * interval '1 minute' AS expires_at
          FROM signin.users u, generate_series(1, 10) k) s
 ORDER BY expires_at;

-- The audit row of each session's sign-in.
INSERT INTO signin.sign_ins (at, user_id, google_sub, outcome, client_id, ip, session_id)
SELECT s.created_at, s.user_id, u.google_sub, 'success', s.client_id, s.ip, s.id
  FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id
 ORDER BY s.id;
