#!/usr/bin/env bash
# Runs the benchmark behind each table of BENCHMARKS.md, in the file's
# order, and leaves each one's output in target/bench-results/NAME.txt
# (the commit and the date first). About 50 minutes on the 2-core machine;
# run it on a quiet machine (nothing compiling beside it). Needs wrk and
# valgrind (apt packages `wrk`, `valgrind`).
#
#   scripts/bench-all.sh [NAME...]     only these sections
#   scripts/bench-all.sh ablations     the tunables' ablations behind the
#                                      report's findings (not run by default)
#
# Sections: messaging2 messaging1 instructions2 instructions1 locked
# light_load oversubscribed io io_costs mixed mixed_msg timers join_set trace
# axum reqwest.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/bench-results
mkdir -p "$out"
all=(messaging2 messaging1 instructions2 instructions1 locked light_load oversubscribed
     io io_costs mixed mixed_msg timers join_set trace axum reqwest)
sections=("$@")
[ ${#sections[@]} -eq 0 ] && sections=("${all[@]}")

# The build first, so that no bench runs beside a compile.
cargo bench -q --no-run --bench sidebyside --bench light_load --bench join_set
cargo bench -q --no-run --features hyper --bench io
cargo bench -q --no-run --features server,tokio-compat --bench io
cargo bench -q --no-run --features io --bench timers
cargo build -q --release --example hackbench

io() { cargo bench -q --features hyper --bench io -- "$@"; }
compat() { cargo bench -q --features server,tokio-compat --bench io -- "$@"; }

section() {
  local name=$1
  case $name in
    messaging2) cargo bench -q --bench sidebyside -- --runs 7 --workers 2 ;;
    messaging1) cargo bench -q --bench sidebyside -- --runs 5 --workers 1 ;;
    instructions2) scripts/instructions.sh 2 ;;
    instructions1) scripts/instructions.sh 1 ;;
    locked) scripts/instructions.sh --locked 25 2 ;;
    light_load) cargo bench -q --bench light_load -- --runs 5 ;;
    oversubscribed) scripts/oversubscribed.sh 5 ;;
    io)
      for w in 2 1; do
        for c in 64 256; do
          echo "### http --workers $w --conns $c"
          io --only http --kinds hwsched,tokio --runs 5 --secs 3 --workers "$w" --conns "$c"
        done
        echo "### echo --workers $w"
        io --only echo --kinds hwsched,tokio --runs 5 --workers "$w"
      done ;;
    io_costs)
      echo "### syscalls per request"
      scripts/io-syscalls.sh 2 3 64
      echo "### instructions per request"
      KINDS="hwsched tokio" scripts/io-instructions.sh 1 5 16 ;;
    mixed)
      for us in 100 1000 5000; do
        echo "### mixed --workers 2 --slow-us $us"
        io --only mixed --runs 5 --secs 3 --workers 2 --slow-us "$us"
      done
      echo "### mixed --workers 1 --slow-us 1000"
      io --only mixed --runs 5 --secs 3 --workers 1 --slow-us 1000
      for us in 100 1000 5000; do
        echo "### mixed --workers 2 --slow-us $us --slow-load 0.125"
        io --only mixed --runs 5 --secs 3 --workers 2 --slow-us "$us" --slow-load 0.125
      done ;;
    mixed_msg)
      for us in 100 1000 5000; do
        echo "### mixed --mixed-cost-us $us"
        cargo bench -q --bench sidebyside -- mixed --runs 5 --workers 2 --mixed-cost-us "$us" --mixed-spinners 1
      done ;;
    timers)
      cargo bench -q --bench timers --features io
      echo "### instructions per timer set and cancelled"
      scripts/timer-instructions.sh 1 ;;
    join_set) cargo bench -q --bench join_set ;;
    trace) scripts/trace-cost.sh 9 ;;
    axum)
      echo "### instructions per request"
      scripts/axum-instructions.sh 1 5 16
      for w in 2 1; do
        for c in 64 256; do
          echo "### axum --workers $w --conns $c"
          # 9 rounds: single rounds spread by 20% and more here.
          compat --only axum --runs 9 --secs 3 --workers "$w" --conns "$c"
        done
      done ;;
    reqwest)
      for w in 2 1; do
        echo "### reqwest --workers $w"
        compat --only reqwest --runs 5 --secs 3 --workers "$w" --conns 64
      done ;;
    ablations) ablations ;;
    *) echo "unknown section $name (one of: ${all[*]} ablations)" >&2; exit 2 ;;
  esac
}

# tokio's rt_multi_threaded set and criterion's hackbench under the idle
# modes, light load and the load counters, and hackbench under every
# ablation switch on 2 workers and the 32-worker tree; criterion's output
# is made into tables by scripts/criterion_table.py.
ablations() {
  local crit=(--warm-up-time 1 --measurement-time 3) hb=target/release/examples/hackbench
  for tune in "" "idle=governed" "idle=spin:50"; do
    local filter=(); [ -n "$tune" ] && filter=(hwsched)
    for b in runtime messaging; do
      echo "### --bench $b HWSCHED_TUNE=${tune:-default}"
      HWSCHED_TUNE=$tune cargo bench -q --bench $b -- "${crit[@]}" "${filter[@]}" 2>&1 \
        | grep -E "^[a-z_0-9]+/|time:"
    done
  done
  cargo bench -q --bench load_counters -- --runs 7
  for rt in tokio async-executor; do
    echo "### hackbench --runtime $rt"; $hb --runtime "$rt" --runs 7 | grep -E "^Time|median"
  done
  for topo in "" "pack:2 l3:2 core:4 pu:2"; do
    local targs=(); [ -n "$topo" ] && targs=(--topology "$topo")
    for v in "" "--sis prop" "--sis util" "--sis full" "--sis off" "--no-recent" "--no-idle-core" \
             "--walk unbounded" "--idle governed" "--idle park" "--idle spin:50" "--load-interval-us 0"; do
      echo "### hackbench ${topo:+[$topo] }$v"
      # shellcheck disable=SC2086
      $hb "${targs[@]}" $v --runs 7 | grep -E "^Time|median"
    done
  done
}

for name in "${sections[@]}"; do
  echo "== $name"
  {
    echo "# $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src benches examples || echo '+changes'), $(date -u '+%F %T UTC'), $(nproc) CPUs"
    section "$name"
  } > "$out/$name.txt" 2>&1 || echo "$name failed: see $out/$name.txt"
done
echo "results in $out"
