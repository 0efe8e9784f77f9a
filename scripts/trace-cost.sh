#!/usr/bin/env bash
# What the `trace` feature costs: three builds (no feature; the feature
# with recording off; recording on), on hackbench's wall time and on
# callgrind's instructions per HTTP request. Run it on a quiet machine.
#
#   scripts/trace-cost.sh [RUNS] [SECS]
#
# 1. hackbench, 2 workers, 10 groups x 20 fds x 400 loops (1.6 M
#    messages), RUNS runs of each build interleaved (default 9): the
#    median in ms. The recording build is `examples/trace.rs`, the same
#    hackbench with the recorder on.
# 2. The http_server example, 1 worker, under callgrind with
#    instrumentation off until wrk has warmed it up, then on for a
#    `wrk -t1 -c16` run of SECS seconds (default 5): all threads'
#    instructions over the requests wrk counted (the method of
#    scripts/io-instructions.sh). Recording on is `--trace FILE`.
# Needs wrk and valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-9}
secs=${2:-5}
dir=target/trace-cost
mkdir -p "$dir"
rel=target/release/examples

cargo build -q --release --example hackbench
cp "$rel/hackbench" "$dir/hackbench-default"
cargo build -q --release --features trace --example hackbench --example trace
cp "$rel/hackbench" "$dir/hackbench-off"
cp "$rel/trace" "$dir/hackbench-recording"
cargo build -q --release --features hyper --example http_server
cp "$rel/http_server" "$dir/http-default"
cargo build -q --release --features hyper,trace --example http_server
cp "$rel/http_server" "$dir/http-trace"

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

for _ in $(seq "$runs"); do
  "$dir/hackbench-default" --workers 2 -l 400 | awk '/^Time:/ {print $2 * 1000}' >> "$dir/default.ms"
  "$dir/hackbench-off" --workers 2 -l 400 | awk '/^Time:/ {print $2 * 1000}' >> "$dir/off.ms"
  "$dir/hackbench-recording" --workers 2 -g 10 -f 20 -l 400 --out "$dir/hackbench.json" \
    | sed -n 's/.* in \([0-9.]*\) ms.*/\1/p' >> "$dir/recording.ms"
done
d=$(median < "$dir/default.ms")
echo "hackbench -l 400, 2 workers, median of $runs runs, ms (/ default):"
for b in default off recording; do
  m=$(median < "$dir/$b.ms")
  printf '  %-10s %8.1f  %.2f   runs: %s\n' "$b" "$m" "$(echo "$m / $d" | bc -l)" "$(tr '\n' ' ' < "$dir/$b.ms")"
done
rm -f "$dir"/*.ms

port=18491
ir_per_request() { # BINARY ARGS...
  local out="$dir/http.out" cg="$dir/http.cg"
  rm -f "$cg"*
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$cg" \
    "$@" --workers 1 --addr "127.0.0.1:$port" >"$out" 2>"$dir/http.err" &
  local pid=$!
  for _ in $(seq 600); do grep -q listening "$out" 2>/dev/null && break; sleep 0.1; done
  wrk -t1 -c16 -d2s "http://127.0.0.1:$port/" >/dev/null
  callgrind_control -i on "$pid" >/dev/null 2>&1
  local reqs
  reqs=$(wrk -t1 -c16 -d"${secs}s" "http://127.0.0.1:$port/" | awk '/requests in/ {print $1}')
  callgrind_control -i off "$pid" >/dev/null 2>&1
  callgrind_control -d "$pid" >/dev/null 2>&1
  kill -INT "$pid"; wait "$pid" 2>/dev/null || true
  local ir
  ir=$(cat "$cg"* | awk '/^totals:/ {s += $2} END {print s}')
  echo "$(echo "$ir / $reqs" | bc -l) $reqs"
}
echo "http_server, 1 worker, wrk -t1 -c16 -d${secs}s under callgrind: instructions per request (/ default):"
read -r base n < <(ir_per_request "$dir/http-default")
printf '  %-10s %8.0f  %.2f   (%s requests)\n' default "$base" 1 "$n"
read -r off n < <(ir_per_request "$dir/http-trace")
printf '  %-10s %8.0f  %.2f   (%s requests)\n' off "$off" "$(echo "$off / $base" | bc -l)" "$n"
read -r on n < <(ir_per_request "$dir/http-trace" --trace "$dir/http.json")
printf '  %-10s %8.0f  %.2f   (%s requests)\n' recording "$on" "$(echo "$on / $base" | bc -l)" "$n"
