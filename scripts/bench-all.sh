#!/usr/bin/env bash
# Runs every benchmark behind BENCHMARKS.md and leaves the raw outputs in
# target/bench-results/. Takes ~20 minutes on a 2-core machine; run it on a
# quiet machine (nothing else compiling). Usage: scripts/bench-all.sh [quick]
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/bench-results
mkdir -p "$out"
quick=${1:-}
crit=(--warm-up-time 1 --measurement-time 3)
runs=7
if [ "$quick" = quick ]; then crit=(--warm-up-time 0.3 --measurement-time 1); runs=3; fi
cargo build --release --benches --examples
nproc > "$out/nproc"

# 1. tokio's rt_multi_threaded set and hackbench messaging, default tunables
#    and the idle-governor ablation.
#    Peers run once; the ablations rerun only the hwsched rows.
: > "$out/runtime.txt"; : > "$out/messaging.txt"
for tune in "" "idle=governed" "idle=spin:50"; do
  label=${tune:-default}
  filter=(); [ -n "$tune" ] && filter=(hwsched)
  for b in runtime messaging; do
    echo "### HWSCHED_TUNE=$label" >> "$out/$b.txt"
    HWSCHED_TUNE=$tune cargo bench -q --bench $b -- "${crit[@]}" "${filter[@]}" 2>&1 \
      | grep -E "^[a-z_0-9]+/|time:" >> "$out/$b.txt"
  done
done

# 2. Light load: CPU per message, sleeps per message, wake latency.
cargo bench -q --bench light_load -- --runs "$runs" > "$out/light_load.md"

# 3. Load-counter writes per second, 1 ms vs 0.
cargo bench -q --bench load_counters -- --runs "$runs" > "$out/load_counters.md"

# 4. hackbench (defaults: 10 groups x 20 fds x 100 loops) under the ablations.
hb=target/release/examples/hackbench
{
  for rt in tokio async-executor; do
    echo "== --runtime $rt"; $hb --runtime "$rt" --runs "$runs" | grep -E "^Time|median"
  done
  for topo in "" "pack:2 l3:2 core:4 pu:2"; do
    targs=(); [ -n "$topo" ] && targs=(--topology "$topo")
    for v in "" "--sis prop" "--sis util" "--sis full" "--sis off" "--no-recent" "--no-idle-core" \
             "--walk unbounded" "--idle governed" "--idle park" "--idle spin:50" "--load-interval-us 0"; do
      # shellcheck disable=SC2086
      echo "== hwsched ${topo:+[$topo] }$v"; $hb "${targs[@]}" $v --runs "$runs" | grep -E "^Time|median"
    done
  done
} > "$out/hackbench.txt" 2>&1
echo "results in $out"
