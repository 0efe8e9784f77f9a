#!/usr/bin/env bash
# User-space instructions per HTTP request of each server of benches/io.rs,
# counted by callgrind (deterministic, unlike wall time; valgrind runs one
# thread at a time and ~50x slower, so only the count is meaningful): the
# server starts with instrumentation off, wrk warms it up, instrumentation
# is switched on for a fixed wrk run, then off; Ir / requests.
#
#   [KINDS="hwsched tokio"] scripts/io-instructions.sh [WORKERS] [SECS] [CONNS]
#
# Needs valgrind and wrk. Builds the bench first.
set -euo pipefail
workers=${1:-1}
secs=${2:-5}
conns=${3:-16}
cd "$(dirname "$0")/.."
cargo bench --features hyper --bench io --no-run 2>/dev/null
bin=$(ls -t target/release/deps/io-* | grep -v '\.d$' | head -1)
dir=$(mktemp -d)
printf '%-16s %10s %14s %12s\n' server requests Ir Ir/request
for kind in ${KINDS:-hwsched tokio async-executor}; do
    out="$dir/$kind.out"
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/$kind.cg" \
        "$bin" --serve "$kind" --only http --workers "$workers" >"$out" 2>"$dir/$kind.err" &
    pid=$!
    for _ in $(seq 600); do [ -s "$out" ] && break; sleep 0.1; done
    addr=$(head -1 "$out")
    wrk -t1 -c"$conns" -d2s "http://$addr/" >/dev/null
    callgrind_control -i on "$pid" >/dev/null
    reqs=$(wrk -t1 -c"$conns" -d"${secs}s" "http://$addr/" | awk '/requests in/ {print $1}')
    callgrind_control -i off "$pid" >/dev/null
    callgrind_control -d "$pid" >/dev/null
    kill "$pid"; wait "$pid" 2>/dev/null || true
    ir=$(cat "$dir/$kind".cg* | awk '/^totals:/ {s += $2} END {print s}')
    printf '%-16s %10s %14s %12.0f\n' "$kind" "$reqs" "$ir" "$(echo "$ir / $reqs" | bc -l)"
done
echo "callgrind files: $dir"
