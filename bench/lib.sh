# Shared set-up of the benchmarks: a release build, a private PostgreSQL cluster, the responder and nginx,
# all under .build/bench (nothing system-wide). Sourced by bench/signin and bench/session.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir="$here/.build/bench"
bin="$here/.build/release/tokensignin"
pgport=${BENCH_PGPORT:-55442}
port=${BENCH_PORT:-18443}
duration=${BENCH_SECONDS:-10}
connections=${BENCH_CONNECTIONS:-16}
client_id="bench.apps.googleusercontent.com"

bench_start() {
    (cd "$here" && make -s deps && swift build -c release --product tokensignin >/dev/null)
    "$here/scripts/nginx-local" stop "$dir/nginx" || true
    [ -f "$dir/tokensignin.pid" ] && kill "$(cat "$dir/tokensignin.pid")" 2>/dev/null || true
    "$here/scripts/pgcluster" stop "$dir/pg" "$pgport" || true
    rm -rf "$dir"; mkdir -p "$dir"
    "$here/scripts/pgcluster" start "$dir/pg" "$pgport"
    eval "$("$here/scripts/pgcluster" env "$dir/pg" "$pgport")"
    (cd "$here" && "$bin" migrate >/dev/null)
    "$bin" dev keygen --out "$dir/keys" >/dev/null
    export TOKENSIGNIN_CLIENT_IDS="$client_id" TOKENSIGNIN_JWKS_FILE="$dir/keys/dev-jwks.json"
    export TOKENSIGNIN_LISTEN="$dir/fcgi.sock" TOKENSIGNIN_WORKERS=${BENCH_WORKERS:-$connections}
    export TOKENSIGNIN_SITE_ORIGINS="https://127.0.0.1:$port"
    "$bin" serve >>"$dir/tokensignin.log" 2>&1 &
    echo $! >"$dir/tokensignin.pid"
    for _ in $(seq 100); do [ -S "$TOKENSIGNIN_LISTEN" ] && break; sleep 0.1; done
    NGINX_RATE_LIMIT=off "$here/scripts/nginx-local" start "$dir/nginx" "$port" "$TOKENSIGNIN_LISTEN"
    trap bench_stop EXIT
}

bench_stop() {
    "$here/scripts/nginx-local" stop "$dir/nginx" || true
    [ -f "$dir/tokensignin.pid" ] && kill "$(cat "$dir/tokensignin.pid")" 2>/dev/null || true
    "$here/scripts/pgcluster" stop "$dir/pg" "$pgport" || true
}

# Mints $1 distinct users' tokens, one per line, into $2.
mint_tokens() {
    "$bin" dev token --key "$dir/keys/dev-signing-key.pem" --kid "$(cat "$dir/keys/kid")" --aud "$client_id" \
        --sub "bench-user" --email "bench@example.com" --ttl 3600 --count "$1" >"$2"
}

# Prints requests/s, p50 and p99 (ms) of a wrk run: wrk_summary FILE
wrk_summary() {
    awk '/Requests\/sec/ {rps=$2}
         /^ +50%/ {p50=$2} /^ +99%/ {p99=$2}
         function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0; if (v ~ /s$/) return v*1000; return v }
         END {printf "%.0f %.2f %.2f\n", rps, ms(p50), ms(p99)}' "$1"
}

# Prints pgbench's transactions per second (excluding connection time): pgbench_tps FILE
pgbench_tps() { awk '/tps = / && /without initial connection time/ {print int($3)} /tps = / && /excluding/ {print int($3)}' "$1" | head -n 1; }
