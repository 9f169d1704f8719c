# Shared set-up of the benchmarks: a release build, a private PostgreSQL cluster, the responder and nginx,
# all under .build/bench (nothing system-wide). Sourced by bench/signin and bench/session.
#   BENCH_SECONDS (10)      length of each measured run
#   BENCH_ROUNDS (3)        rounds of the side-by-side comparison (each: one wrk run and one pgbench run)
#   BENCH_CONNECTIONS (16)  wrk connections and pgbench clients (the same number on both sides)
#   BENCH_WORKERS           TOKENSIGNIN_WORKERS of the responder (default: the product's, 2 x cores)
#   BENCH_PGBENCH_CLIENTS   pgbench clients (default: BENCH_CONNECTIONS)
#   BENCH_NGINX_WORKERS (1) nginx worker_processes
#   BENCH_PGPORT (55442)  BENCH_PORT (18443)  BENCH_OPERATORS_PORT (19464: nginx's /metrics, /healthz, /readyz)
#   BENCH_BIN               the tokensignin binary to measure (default: this tree's release build)
#   BENCH_BASELINE_BIN      a previous build to measure in the same run: each round then also runs wrk against it
#                           (same cluster, nginx and socket; a database of its own), and the scripts print new / previous
#   BENCH_BASELINE_SQL_DIR  the migrations BENCH_BASELINE_BIN was built with (default: the sql folder of the tree it
#                           was built in, <tree>/.build/release/tokensignin -> <tree>/sql)
#   BENCH_PRELOAD_USERS     users preloaded by preload_users (the scripts that call it say their default; 0: none)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir="$here/.build/bench"
bin=${BENCH_BIN:-$here/.build/release/tokensignin}
pgport=${BENCH_PGPORT:-55442}
port=${BENCH_PORT:-18443}
# nginx's operators' listener (nginx/tokensignin-metrics.conf), for every scripts/nginx-local the benchmarks start.
export NGINX_METRICS_PORT=${BENCH_OPERATORS_PORT:-19464}
duration=${BENCH_SECONDS:-10}
rounds=${BENCH_ROUNDS:-3}
connections=${BENCH_CONNECTIONS:-16}
workers=${BENCH_WORKERS:-$((2 * $(nproc)))}
pgbench_clients=${BENCH_PGBENCH_CLIENTS:-$connections}
nginx_workers=${BENCH_NGINX_WORKERS:-1}
client_id="100000000000-bench.apps.googleusercontent.com"
# The previous version's database, in the same cluster (bench_start).
baseline_database=tokensignin_baseline

# Prints the migrations BENCH_BASELINE_BIN was built with: BENCH_BASELINE_SQL_DIR, or the sql folder of its tree.
baseline_sql_dir() {
    if [ -n "${BENCH_BASELINE_SQL_DIR:-}" ]; then
        [ -d "$BENCH_BASELINE_SQL_DIR" ] || { echo "BENCH_BASELINE_SQL_DIR=$BENCH_BASELINE_SQL_DIR is not a folder" >&2; exit 1; }
        echo "$BENCH_BASELINE_SQL_DIR"; return
    fi
    local binary=$BENCH_BASELINE_BIN candidate
    # Lexically (realpath -s): .build/release is a symbolic link to .build/<triple>/release, whose `..` is not .build.
    # The second form also finds the tree of a binary named by its .build/<triple>/release path.
    for candidate in "$(realpath -sm "$(dirname "$binary")/../../sql")" "${binary%%/.build/*}/sql"; do
        [ -d "$candidate" ] && { echo "$candidate"; return; }
    done
    echo "BENCH_BASELINE_BIN=$binary: no migrations at $(dirname "$binary")/../../sql; set BENCH_BASELINE_SQL_DIR to the sql folder it was built with" >&2
    exit 1
}

bench_start() {
    # (before the build: a missing folder should stop the run at once)
    if [ -n "${BENCH_BASELINE_BIN:-}" ]; then baseline_sql=$(baseline_sql_dir); fi
    (cd "$here" && make -s deps && swift build -c release --product tokensignin >/dev/null)
    bench_stop
    rm -rf "$dir"; mkdir -p "$dir/secret"
    chmod 700 "$dir/secret"   # ID tokens and session tokens live here during the run, never printed
    trap bench_stop EXIT
    "$here/scripts/pgcluster" start "$dir/pg" "$pgport"
    eval "$("$here/scripts/pgcluster" env "$dir/pg" "$pgport")"
    (cd "$here" && "$bin" migrate >/dev/null)
    if [ -n "${BENCH_BASELINE_BIN:-}" ]; then
        # The previous version runs on the schema it was written for, migrated by its own migrations: on this
        # version's schema it would measure statements against tables, indexes and triggers it never ran with.
        psql -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE $baseline_database"
        PGDATABASE=$baseline_database "$BENCH_BASELINE_BIN" migrate --sql-dir "$baseline_sql" >/dev/null
    fi
    "$bin" dev keygen --out "$dir/keys" >/dev/null
    export TOKENSIGNIN_CLIENT_IDS="$client_id" TOKENSIGNIN_JWKS_FILE="$dir/keys/dev-jwks.json" TOKENSIGNIN_ALLOW_NON_GOOGLE_KEYS=1 \
           TOKENSIGNIN_RISC_CONFIGURATION_URL=off
    export TOKENSIGNIN_LISTEN="$dir/fcgi.sock" TOKENSIGNIN_WORKERS=$workers
    export TOKENSIGNIN_SITE_ORIGINS="https://127.0.0.1:$port"
    start_responder "$bin"
    NGINX_RATE_LIMIT=off NGINX_WORKER_PROCESSES=$nginx_workers \
        "$here/scripts/nginx-local" start "$dir/nginx" "$port" "$TOKENSIGNIN_LISTEN"
}

# Starts the responder BIN on the benchmark's socket, stopping the one running, with the settings VAR=VALUE given
# after it on top of the environment's: start_responder BIN [VAR=VALUE...]. BENCH_BASELINE_BIN runs on its own
# database (bench_start), any other build on this version's.
start_responder() {
    local binary=$1; shift
    stop_responder
    rm -f "$TOKENSIGNIN_LISTEN"
    responder_env "$binary"
    env "${responder_args[@]}" "$@" "$binary" serve >>"$dir/tokensignin.log" 2>&1 &
    echo $! >"$dir/tokensignin.pid"
    for _ in $(seq 100); do [ -S "$TOKENSIGNIN_LISTEN" ] && break; sleep 0.1; done
    [ -S "$TOKENSIGNIN_LISTEN" ] || { tail -n 20 "$dir/tokensignin.log" >&2; exit 1; }
}

# Sets responder_args to env's arguments for BIN: an earlier build (BENCH_BASELINE_BIN) refuses settings it does
# not know, so it gets only those its --help lists, and runs on its own database (bench_start).
responder_env() {
    local binary=$1 known var database=$PGDATABASE
    responder_args=()
    known=$("$binary" serve --help 2>/dev/null || true)
    for var in $(compgen -e | grep '^TOKENSIGNIN_'); do grep -q "$var," <<<"$known" || responder_args+=(-u "$var"); done
    if [ -n "${BENCH_BASELINE_BIN:-}" ] && [ "$binary" = "$BENCH_BASELINE_BIN" ]; then database=$baseline_database; fi
    responder_args+=(PGDATABASE="$database")
}

stop_responder() {
    [ -f "$dir/tokensignin.pid" ] || return 0
    local pid; pid=$(cat "$dir/tokensignin.pid")
    kill "$pid" 2>/dev/null || true
    # (under valgrind, bench/instructions, the exit takes longer than the drain)
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$dir/tokensignin.pid"
}

# Stops what bench_start started (only the processes recorded under $dir), and removes the secrets.
bench_stop() {
    [ -d "$dir" ] || return 0
    "$here/scripts/nginx-local" stop "$dir/nginx" || true
    stop_responder
    # (destroy also removes the private folder under /tmp that pgcluster uses as root when needed)
    "$here/scripts/pgcluster" destroy "$dir/pg" "$pgport" || true
    # ID tokens and session tokens are secrets, even the benchmark's: they do not outlive the run.
    rm -rf "$dir/secret"
}

# Signs every user of $dir/secret/tokens.txt in once through the real path and keeps their session tokens in
# $dir/secret/sessions.txt (secrets: in $dir/secret only); stops unless at least $1 sessions came back. With
# BENCH_BASELINE_BIN the new sessions are copied into the previous version's database, so the same tokens are
# live on both sides. Sets: sessions (how many), signed_in_after (the largest session id before them).
sign_in_users() {
    local users=$1
    signed_in_after=$(psql -X -qtA -c "SELECT coalesce(max(id), 0) FROM signin.sessions")
    echo "signing $users users in..."
    rm -f "$dir/secret/sessions.txt".*
    wrk -t2 -c"$connections" -d60s -s "$here/bench/session-signin.lua" "https://127.0.0.1:$port/tokensignin" \
        -- "$dir/secret/tokens.txt" "$dir/secret/sessions.txt" 2 >"$dir/wrk-signin.txt"
    cat "$dir/secret/sessions.txt".* >"$dir/secret/sessions.txt"
    rm -f "$dir/secret/sessions.txt".*
    sessions=$(wc -l <"$dir/secret/sessions.txt")
    [ "$sessions" -ge "$users" ] || { echo "only $sessions of $users sign-ins answered with a session" >&2; exit 1; }
    if [ -n "${BENCH_BASELINE_BIN:-}" ]; then mirror_sessions "$signed_in_after"; fi
}

# Copies the sessions after id $1 (and their users, when missing) from this version's database into the previous
# version's, by google_sub, with the same token hashes: mirror_sessions AFTER_ID. Only columns both schemas have.
mirror_sessions() {
    local rows="$dir/secret/mirrored-sessions.tsv"   # hashes, not tokens; still nothing to leave behind
    # (one line: \copy is a psql meta-command, which ends at the end of its line)
    local query="SELECT u.google_sub, u.email, u.email_verified, s.token_hash, s.created_at, s.last_seen_at, s.expires_at,"
    query+=" s.client_id, s.ip FROM signin.sessions s JOIN signin.users u ON u.id = s.user_id WHERE s.id > $1 ORDER BY s.id"
    psql -X -q -v ON_ERROR_STOP=1 -c "\\copy ($query) TO '$rows'"
    psql -X -q -v ON_ERROR_STOP=1 -d "$baseline_database" <<SQL
CREATE TEMPORARY TABLE mirrored (google_sub text, email text, email_verified boolean, token_hash bytea,
    created_at timestamptz, last_seen_at timestamptz, expires_at timestamptz, client_id text, ip inet);
\copy mirrored FROM '$rows'
INSERT INTO signin.users (google_sub, email, email_verified)
SELECT DISTINCT google_sub, email, email_verified FROM mirrored ON CONFLICT (google_sub) DO NOTHING;
INSERT INTO signin.sessions (user_id, token_hash, created_at, last_seen_at, expires_at, client_id, ip)
SELECT u.id, m.token_hash, m.created_at, m.last_seen_at, m.expires_at, m.client_id, m.ip
  FROM mirrored m JOIN signin.users u USING (google_sub);
SQL
    rm -f "$rows"
}

# A site at steady state in this version's database and, with BENCH_BASELINE_BIN, the previous version's: USERS
# users with 10 live sessions each and their sign-ins' audit rows (bench/preload.sql), half of them wrk's subs
# (bench-user-<i>) and half pgbench's (pgbench-user-<n>), then VACUUM ANALYZE and a checkpoint, so the
# measured runs start from a settled database and not inside the preload's checkpoint. Stops when the users the
# script signs in (NEEDED, of each kind) are not all among them. Usage: preload_users USERS NEEDED
preload_users() {
    local users=$1 needed=$2
    [ "$users" -gt 0 ] || return 0
    [ "$needed" -le $((users / 2)) ] \
        || { echo "BENCH_PRELOAD_USERS=$users preloads $((users / 2)) users of each kind; the run signs $needed in: preload more" >&2; exit 1; }
    echo "preloading $users users, $((users * 10)) sessions..."
    local database pids=() pid
    for database in "$PGDATABASE" ${BENCH_BASELINE_BIN:+"$baseline_database"}; do
        { psql -X -q -v ON_ERROR_STOP=1 -d "$database" -v users="$users" -v client_id="$client_id" -f "$here/bench/preload.sql" \
            && psql -X -q -v ON_ERROR_STOP=1 -d "$database" -c "VACUUM ANALYZE"; } >"$dir/preload-$database.log" 2>&1 &
        pids+=($!)
    done
    # (each pid: a bare `wait` would wait for the responder too, also this shell's child)
    for pid in "${pids[@]}"; do wait "$pid" || { cat "$dir"/preload-*.log >&2; exit 1; }; done
    psql -X -q -c CHECKPOINT
}

# Mints $1 distinct users' tokens (subs bench-user-1 ... bench-user-$1), one per line, into $2.
mint_tokens() {
    "$bin" dev token --key "$dir/keys/dev-signing-key.pem" --kid "$(tr -d '\n' <"$dir/keys/kid")" --aud "$client_id" \
        --sub "bench-user" --email "bench@example.com" --ttl 3600 --count "$1" >"$2"
}

# Writes a pgbench script running the responder's statement $1 (`tokensignin dev sql $1`) with each parameter
# replaced by the SQL given for its name (`tokensignin dev sql $1 --parameters` lists them): pgbench wants one
# statement on one line, and takes its own `:variables` (sent as parameters with -M prepared). Usage:
# pgbench_script NAME OUT PARAMETER=SQL... The first lines of OUT (pgbench meta-commands such as \set) are read
# from stdin.
pgbench_script() {
    local name=$1 out=$2; shift 2
    local -A given=()
    local pair number parameter seds
    for pair in "$@"; do given[${pair%%=*}]=${pair#*=}; done
    seds=$(mktemp)
    while read -r number parameter; do
        [ -n "${given[$parameter]+set}" ] \
            || { echo "pgbench_script $name: no SQL for its parameter $parameter (for sign_in: signin_parameters in bench/lib.sh)" >&2; exit 1; }
        # \x01 delimits: the SQL holds slashes and bars; `&` in it is literal, not sed's match.
        printf 's\x01\\%s\\b\x01%s\x01g\n' "$number" "${given[$parameter]//&/\\&}" >>"$seds"
    done < <("$bin" dev sql "$name" --parameters)
    cat >"$out"
    # pgbench knows no string literals: the ':MI' and ':SS' of to_char's format would be read as variables,
    # so the format is spelled as a concatenation of constants (folded once when the statement is planned).
    "$bin" dev sql "$name" | sed -f "$seds" | sed -e "s/HH24:MI:SS/HH24' || ':' || 'MI' || ':' || 'SS/g" \
        | tr '\n' ' ' | sed -e 's/  */ /g' >>"$out"
    rm -f "$seds"
    echo ';' >>"$out"
    if grep -q '\$[0-9]' "$out"; then echo "pgbench script $out still has \$n parameters" >&2; exit 1; fi
    # Every :variable pgbench will see must be \set above the statement (a stray one would abort the run).
    local var
    for var in $(tail -n 1 "$out" | grep -Eo '(^|[^:]):[A-Za-z_][A-Za-z0-9_]*' | sed 's/.*://' | sort -u); do
        grep -q "^\\\\set $var " "$out" || { echo "pgbench script $out uses :$var without \\set" >&2; exit 1; }
    done
}

# What pgbench binds for each parameter of the responder's sign-in statement, by the name `tokensignin dev sql sign_in
# --parameters` gives it: the one place to add a mapping when the statement takes a new parameter (pgbench_script
# stops on a parameter missing here, naming it). Each is SQL on pgbench's side: a user drawn from a pool (:n,
# google_sub 'pgbench-user-<n>', apart from wrk's 'bench-user-<i>': both among bench/preload.sql's users, so both
# sides sign returning users in), the email claims, NULL for the claims the bench tokens do not carry (wrk sends no
# User-Agent either), a fresh session hash per sign-in (SHA-256 computed by PostgreSQL here, by the responder in
# Swift on the other side), the default 30-day lifetime and the default limit of 100 live sessions per user.
signin_parameters=(
    "token.subject=('pgbench-user-' || :n::text)"
    "token.email='bench@example.com'"
    "token.emailVerified='true'"
    token.name=NULL token.givenName=NULL token.familyName=NULL token.picture=NULL token.locale=NULL
    token.hostedDomain=NULL
    "token.issuedAt=extract(epoch FROM now())::bigint"
    "session.tokenHash=encode(sha256(convert_to(:n::text || '-' || :c::text || '-' || clock_timestamp()::text, 'UTF8')), 'hex')"
    "lifetime='2592000 seconds'"
    "session.clientID='$client_id'"
    session.userAgent=NULL
    "session.ip='127.0.0.1'"
    maxSessions=100
)

# Writes the pgbench script of the responder's sign-in statement into $1, its parameters bound as
# signin_parameters says, :n drawn from 1...$2 and :c a random number for the session hash. The statement is
# whatever `tokensignin dev sql sign_in` prints (one statement or a function call alike). Usage:
# signin_pgbench_script OUT USERS
signin_pgbench_script() {
    pgbench_script sign_in "$1" "${signin_parameters[@]}" <<PGB
\set n random(1, $2)
\set c random(1, 1000000000)
PGB
}

# Runs pgbench with the script $1 into $2 (BENCH_PGBENCH_CLIENTS clients, by default as many as wrk has
# connections; prepared statements like the responder's). Exits with pgbench's output when it fails or any
# transaction failed.
run_pgbench() {
    pgbench -n -M prepared -c "$pgbench_clients" -j 2 -T "$duration" -f "$1" >"$2" 2>&1 \
        || { cat "$2" >&2; exit 1; }
}

# Prints requests/s, p50 and p99 (ms) of a wrk run: wrk_summary FILE
wrk_summary() {
    awk 'function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
         /Requests\/sec/ {rps = $2}
         /^ +50%/ {p50 = ms($2)} /^ +99%/ {p99 = ms($2)}
         END {printf "%.0f %.2f %.2f\n", rps, p50, p99}' "$1"
}

# Prints the count of non-2xx answers and socket errors of a wrk run: wrk_errors FILE
wrk_errors() {
    awk '/Non-2xx/ {n += $NF} /Socket errors/ {gsub(",", ""); n += $4 + $6 + $8 + $10} END {print n + 0}' "$1"
}

# Prints pgbench's transactions per second (excluding connection time): pgbench_tps FILE
pgbench_tps() { awk '/^tps = / {print int($3); exit}' "$1"; }

# Prints pgbench's failed transactions (0 when the line is absent): pgbench_failed FILE
pgbench_failed() { awk '/failed transactions:/ {sub(/.*failed transactions: */, ""); print $1; found = 1} END {if (!found) print 0}' "$1"; }

# ratio A B: A / B with two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }

# CPU time (clock ticks) used so far, one line: client nginx responder postgres busy idle. "client" is what
# this script's finished children used (wrk, pgbench: take the difference around one command); postgres
# counts the postmaster, its live backends and the backends it has reaped (pgbench's); busy and idle are
# the whole machine's, from /proc/stat (other work on the machine shows as busy minus the four).
# A backend that exits while /proc is walked moves its ticks from its own line to the postmaster's reaped
# ones: read before the postmaster, it counts twice; after, not at all (pgbench's backends leaving after a
# run gave absurd per-request figures). So the walk is taken only when the postmaster's reaped ticks are the
# same before and after it, and retried otherwise.
cpu_snapshot() {
    local ng pm ts f line rest pid client nginx responder postgres reaped attempt
    ng=$(cat "$dir/nginx/nginx.pid"); ts=$(cat "$dir/tokensignin.pid")
    pm=$(head -n 1 "$(readlink -f "$dir/pg/data")/postmaster.pid")
    for attempt in $(seq 50); do
        reaped=$(reaped_ticks "$pm")
        client=0 nginx=0 responder=0 postgres=0
        for f in /proc/[0-9]*/stat; do
            { read -r line <"$f"; } 2>/dev/null || continue   # processes come and go
            pid=${line%% *}
            rest=${line##*) }
            # shellcheck disable=SC2086
            set -- $rest   # $2 ppid, $12 utime, $13 stime, $14 cutime, $15 cstime
            if [ "$pid" = "$$" ]; then client=$(( ${14} + ${15} ))
            elif [ "$pid" = "$ts" ]; then responder=$(( ${12} + ${13} ))
            elif [ "$pid" = "$ng" ] || [ "$2" = "$ng" ]; then nginx=$(( nginx + ${12} + ${13} ))
            elif [ "$pid" = "$pm" ]; then postgres=$(( postgres + ${12} + ${13} + ${14} + ${15} ))
            elif [ "$2" = "$pm" ]; then postgres=$(( postgres + ${12} + ${13} ))
            fi
        done
        [ "$(reaped_ticks "$pm")" = "$reaped" ] && break
        [ "$attempt" -lt 50 ] || echo "cpu_snapshot: PostgreSQL's backends kept exiting during 50 walks of /proc; its figure may be off" >&2
    done
    read -r _ u n s i w q sq st _ </proc/stat
    # The responder's context switches (its threads' sleeps and preemptions), summed over its threads.
    local switches=0 key value t
    for t in /proc/"$ts"/task/*/status; do
        while read -r key value; do
            case $key in voluntary_ctxt_switches: | nonvoluntary_ctxt_switches:) switches=$((switches + value)) ;; esac
        done <"$t" 2>/dev/null || true
    done
    echo "$client $nginx $responder $postgres $((u + n + s + q + sq + st)) $((i + w)) $switches"
}

# The ticks of the children process $1 has reaped (cutime + cstime of /proc/$1/stat).
reaped_ticks() {
    local line
    read -r line <"/proc/$1/stat"
    # shellcheck disable=SC2086
    set -- ${line##*) }
    echo $(( ${14} + ${15} ))
}

# CPU per request (µs) between two snapshots for COUNT requests: cpu_report "BEFORE" "AFTER" COUNT
cpu_report() {
    awk -v a="$1" -v b="$2" -v n="$3" -v hz="$(getconf CLK_TCK)" 'BEGIN {
        split(a, x, " "); split(b, y, " ")
        for (k = 1; k <= 6; k++) d[k] = (y[k] - x[k]) * 1e6 / hz
        other = d[5] - d[1] - d[2] - d[3] - d[4]; if (other < 0) other = 0
        printf "CPU per request: client %.0f us, nginx %.0f us, responder %.0f us, PostgreSQL %.0f us, other processes %.0f us; machine idle %.0f%%; responder context switches per request %.2f\n",
            d[1] / n, d[2] / n, d[3] / n, d[4] / n, other / n, 100 * d[6] / (d[5] + d[6]), (y[7] - x[7]) / n
    }'
}

# Requests a wrk run completed: wrk_count FILE;  transactions pgbench processed: pgbench_count FILE
wrk_count() { awk '/requests in/ {print $1}' "$1"; }
pgbench_count() { awk '/actually processed:/ {print $NF}' "$1"; }

# wrk has no constant-rate mode: paced runs pause BENCH_DELAY_MS (the wrk scripts' delay()) between the
# requests of each connection. The pause that gives about half of the peak rate $1 is found by a short
# calibration run: a connection's cycle is pause + latency, so pause = connections / target - latency.
# Usage: half_rate_delay PEAK_RPS WRK_ARGS... ; prints the pause in ms (one decimal).
half_rate_delay() {
    local peak=$1; shift
    local first; first=$(awk -v c="$connections" -v r="$peak" 'BEGIN {d = c * 1000 / (r / 2); printf "%.1f", (d < 1 ? 1 : d)}')
    BENCH_DELAY_MS=$first wrk -t2 -c"$connections" -d3s "$@" >"$dir/wrk-calibrate.txt"
    local got; got=$(awk '/Requests\/sec/ {print $2}' "$dir/wrk-calibrate.txt")
    awk -v c="$connections" -v peak="$peak" -v d="$first" -v got="$got" 'BEGIN {
        latency = c * 1000 / got - d          # ms of each cycle that is not the pause
        pause = c * 1000 / (peak / 2) - latency
        printf "%.1f", (pause < 1 ? 1 : pause)
    }'
}

# Adds the difference of two cpu_snapshot lines to an accumulated one: cpu_add ACC BEFORE AFTER
cpu_add() {
    awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN {
        split(a, x, " "); split(b, y, " "); split(c, z, " ")
        for (k = 1; k <= 7; k++) printf "%d%s", x[k] + z[k] - y[k], (k < 7 ? " " : "\n")
    }'
}

# A variant of this build measured as one more side of side_by_side: its name and the settings it runs with
# (bench/session: variant_name="cache off" variant_env=(TOKENSIGNIN_SESSION_CACHE=off)); none by default.
variant_name=""
variant_env=()

# The comparison itself: BENCH_ROUNDS rounds, each one wrk run (WRK_ARGS, BENCH_SECONDS long) and one pgbench
# run of SCRIPT, in alternating order (wrk first in odd rounds, pgbench first in even ones), so that both sides
# meet the database in the same states (tables growing, autovacuum, checkpoints) instead of one always
# running after the other. Usage: side_by_side SCRIPT WRK_ARGS...
# Sets: rps p50 p99 errors wrk_cpu (means over the rounds; p99 is the worst round's), tps pg_failed
# pg_latency pg_cpu, and rounds_report (one line per round with its own ratio). With BENCH_BASELINE_BIN each
# round also runs wrk against that build, and with variant_env against this build under those settings (the
# order of the sides rotating), and sets baseline_rps, baseline_cpu, baseline_errors, variant_rps, variant_cpu,
# variant_errors. The accumulated cpu_snapshot differences and the requests they cover stay set for cpu_us:
# wrk_acc wrk_n, pg_acc pg_n, base_acc base_n, variant_acc variant_n.
side_by_side() {
    local script=$1; shift
    local round side before after
    local r_rps r_p50 r_p99 r_tps r_base=0 r_variant=0 sum_rps=0 sum_p50=0 sum_tps=0 sum_base=0 sum_variant=0 sum_latency=0
    wrk_acc="0 0 0 0 0 0 0" pg_acc="0 0 0 0 0 0 0" base_acc="0 0 0 0 0 0 0" variant_acc="0 0 0 0 0 0 0"
    wrk_n=0 pg_n=0 base_n=0 variant_n=0
    local sides=(wrk)
    [ -n "${BENCH_BASELINE_BIN:-}" ] && sides+=(baseline)
    [ ${#variant_env[@]} -gt 0 ] && sides+=(variant)
    sides+=(pgbench)
    p99=0; errors=0; pg_failed=0; baseline_errors=0; variant_errors=0; rounds_report=""
    for round in $(seq "$rounds"); do
        local k order="" n=${#sides[@]}
        for ((k = 0; k < n; k++)); do order+="${sides[$(((k + round - 1) % n))]} "; done
        order=${order% }
        for side in $order; do
            if [ "$side" = baseline ] || [ "$side" = variant ]; then
                # Another responder on the same socket (nginx reconnects): warmed up, measured, then this build again.
                if [ "$side" = baseline ]; then start_responder "$BENCH_BASELINE_BIN"; else start_responder "$bin" "${variant_env[@]}"; fi
                wrk -t2 -c"$connections" -d2s "$@" >/dev/null   # warm-up: nginx reconnects, caches fill
                before=$(cpu_snapshot)
                wrk -t2 -c"$connections" -d"${duration}s" --latency "$@" >"$dir/wrk-$side-$round.txt"
                after=$(cpu_snapshot)
                local count; count=$(wrk_count "$dir/wrk-$side-$round.txt")
                if [ "$side" = baseline ]; then
                    base_acc=$(cpu_add "$base_acc" "$before" "$after"); base_n=$((base_n + count))
                    baseline_errors=$((baseline_errors + $(wrk_errors "$dir/wrk-$side-$round.txt")))
                    read -r r_base _ _ < <(wrk_summary "$dir/wrk-$side-$round.txt")
                else
                    variant_acc=$(cpu_add "$variant_acc" "$before" "$after"); variant_n=$((variant_n + count))
                    variant_errors=$((variant_errors + $(wrk_errors "$dir/wrk-$side-$round.txt")))
                    read -r r_variant _ _ < <(wrk_summary "$dir/wrk-$side-$round.txt")
                fi
                start_responder "$bin"
                wrk -t2 -c"$connections" -d2s "$@" >/dev/null
                continue
            fi
            before=$(cpu_snapshot)
            if [ "$side" = wrk ]; then
                wrk -t2 -c"$connections" -d"${duration}s" --latency "$@" >"$dir/wrk-$round.txt"
                after=$(cpu_snapshot)
                wrk_acc=$(cpu_add "$wrk_acc" "$before" "$after")
                wrk_n=$((wrk_n + $(wrk_count "$dir/wrk-$round.txt")))
                errors=$((errors + $(wrk_errors "$dir/wrk-$round.txt")))
                read -r r_rps r_p50 r_p99 < <(wrk_summary "$dir/wrk-$round.txt")
            else
                run_pgbench "$script" "$dir/pgbench-$round.txt"
                after=$(cpu_snapshot)
                pg_acc=$(cpu_add "$pg_acc" "$before" "$after")
                pg_n=$((pg_n + $(pgbench_count "$dir/pgbench-$round.txt")))
                pg_failed=$((pg_failed + $(pgbench_failed "$dir/pgbench-$round.txt")))
                r_tps=$(pgbench_tps "$dir/pgbench-$round.txt")
                sum_latency=$(awk -v a="$sum_latency" -v f="$dir/pgbench-$round.txt" 'BEGIN {
                    while ((getline line < f) > 0) if (line ~ /^latency average/) { split(line, w, " "); print a + w[4]; exit } }')
            fi
        done
        sum_rps=$((sum_rps + r_rps)); sum_tps=$((sum_tps + r_tps)); sum_base=$((sum_base + r_base)); sum_variant=$((sum_variant + r_variant))
        sum_p50=$(awk -v a="$sum_p50" -v b="$r_p50" 'BEGIN {print a + b}')
        p99=$(awk -v a="$p99" -v b="$r_p99" 'BEGIN {print (b > a ? b : a)}')
        local versus=""
        [ -n "${BENCH_BASELINE_BIN:-}" ] && versus+=", previous version $r_base/s, new / previous $(ratio "$r_rps" "$r_base")"
        [ ${#variant_env[@]} -gt 0 ] && versus+=", $variant_name $r_variant/s"
        rounds_report+="  round $round ($order): end to end $r_rps/s (p50 $r_p50 ms, p99 $r_p99 ms), pgbench $r_tps/s, ratio $(ratio "$r_rps" "$r_tps")$versus"$'\n'
    done
    rps=$((sum_rps / rounds)); tps=$((sum_tps / rounds)); baseline_rps=$((sum_base / rounds)); variant_rps=$((sum_variant / rounds))
    if [ -n "${BENCH_BASELINE_BIN:-}" ]; then baseline_cpu=$(cpu_report "0 0 0 0 0 0 0" "$base_acc" "$base_n"); fi
    if [ ${#variant_env[@]} -gt 0 ]; then variant_cpu=$(cpu_report "0 0 0 0 0 0 0" "$variant_acc" "$variant_n"); fi
    p50=$(awk -v a="$sum_p50" -v n="$rounds" 'BEGIN {printf "%.2f", a / n}')
    pg_latency=$(awk -v a="$sum_latency" -v n="$rounds" 'BEGIN {printf "%.3f", a / n}')
    wrk_cpu=$(cpu_report "0 0 0 0 0 0 0" "$wrk_acc" "$wrk_n")
    pg_cpu=$(cpu_report "0 0 0 0 0 0 0" "$pg_acc" "$pg_n")
    rounds_report=${rounds_report%$'\n'}
}

# CPU per request (µs, one decimal) of one kind of process (client, nginx, responder or postgres) in an
# accumulated cpu_snapshot difference over COUNT requests: cpu_us ACC COUNT KIND
cpu_us() {
    awk -v a="$1" -v n="$2" -v kind="$3" -v hz="$(getconf CLK_TCK)" 'BEGIN {
        split(a, x, " "); split("client nginx responder postgres", kinds, " ")
        for (k = 1; k <= 4; k++) if (kinds[k] == kind) column = k
        if (!column) { print "cpu_us: no kind " kind > "/dev/stderr"; exit 1 }
        printf "%.1f", (n > 0 ? x[column] * 1e6 / hz / n : 0)
    }'
}

# How many calls of operation $2 shared a database round trip (the responder's own counters, since its last
# start, read on nginx's operators' listener: the site at $1 does not serve /metrics): batched calls count once
# per batch.
per_round_trip() {
    curl -s "http://127.0.0.1:$NGINX_METRICS_PORT/metrics" | awk -v op="$2" '
        index($0, "tokensignin_database_seconds_count{operation=\"" op "\"}") == 1 { calls = $2 }
        index($0, "tokensignin_database_batches_total{operation=\"" op "\"}") == 1 { batches = $2 }
        index($0, "tokensignin_database_batched_calls_total{operation=\"" op "\"}") == 1 { batched = $2 }
        END { trips = calls - batched + batches; if (trips > 0) printf "%.2f\n", calls / trips; else print "n/a" }'
}
