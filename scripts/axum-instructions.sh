#!/usr/bin/env bash
# User-space instructions per request of examples/axum.rs, counted by
# callgrind (deterministic, unlike wall time; only the count is
# meaningful): hwsched with `serve`'s default 30 s header read timeout,
# hwsched with none (`--header-timeout-ms 0`), and tokio with
# `axum::serve` (which sets no header timeout). The server starts with
# instrumentation off, wrk warms it up, instrumentation is switched on for
# a fixed wrk run, then off; Ir / requests.
#
#   scripts/axum-instructions.sh [WORKERS] [SECS] [CONNS] [PATH]   (PATH: / or /json)
#
# Needs valgrind and wrk. Builds the example first.
set -euo pipefail
workers=${1:-1}
secs=${2:-5}
conns=${3:-16}
route=${4:-/}
cd "$(dirname "$0")/.."
cargo build -q --release --features server --example axum
bin=target/release/examples/axum
dir=$(mktemp -d)
printf '%-24s %10s %14s %12s\n' server requests Ir Ir/request
i=0
for run in "hwsched" "hwsched --header-timeout-ms 0" "tokio --tokio"; do
    name=${run%% *}
    args=${run#"$name"}
    [ "$name" = hwsched ] && [ -n "$args" ] && name="hwsched, no timeout"
    i=$((i + 1))
    port=$((20000 + RANDOM % 20000))
    # shellcheck disable=SC2086
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/$i.cg" \
        "$bin" --addr "127.0.0.1:$port" --workers "$workers" --secs 600 $args \
        >"$dir/$i.out" 2>&1 &
    pid=$!
    for _ in $(seq 600); do
        curl -s "http://127.0.0.1:$port/" >/dev/null 2>&1 && break
        sleep 0.1
    done
    wrk -t1 -c"$conns" -d2s "http://127.0.0.1:$port$route" >/dev/null
    callgrind_control -i on "$pid" >/dev/null 2>&1
    reqs=$(wrk -t1 -c"$conns" -d"${secs}s" "http://127.0.0.1:$port$route" | awk '/requests in/ {print $1}')
    callgrind_control -i off "$pid" >/dev/null 2>&1
    callgrind_control -d "$pid" >/dev/null 2>&1
    kill "$pid"; wait "$pid" 2>/dev/null || true
    ir=$(cat "$dir/$i".cg* | awk '/^totals:/ {s += $2} END {print s}')
    printf '%-24s %10s %14s %12.0f\n' "$name" "$reqs" "$ir" "$(echo "$ir / $reqs" | bc -l)"
done
echo "callgrind files: $dir"
