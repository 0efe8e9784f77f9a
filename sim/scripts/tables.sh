#!/bin/sh
# Prints the policy results behind SIMULATION.md's tables (markdown), one
# table per topology and workload (the document merges each workload's
# machines into one table). Usage: sim/scripts/tables.sh [path/to/hwsched-sim]
# Build first: cargo build -p hwsched-sim --release; run from the repository
# root (the topology files are read from tests/topologies/).
set -eu
B=${1:-${CARGO_TARGET_DIR:-target}/release/hwsched-sim}
variants() {
  # label | extra arguments
  cat <<'V'
SIS Prop (default)|--sis prop
SIS Util|--sis util
SIS Off|--sis off
unbounded walk|--walk unbounded
governor (spin or park)|--idle governed
tokio-like baseline|--policy tokio
V
}
# topology file (tests/topologies/) and the cost preset nearest to it.
for tc in epyc-zen3-2p:epyc cascadelake-snc2:xeon kunpeng920:epyc raptorlake-hybrid:xeon; do
  topo=${tc%%:*}; costs=${tc#*:}
  for wl in "hackbench|--workload hackbench --groups 10 --fds 20 --loops 10" \
            "spawn bursts|--workload burst" \
            "light load 25%|--workload light --load 0.25" \
            "light load 50%|--workload light --load 0.5" \
            "light load 100%|--workload light --load 1.0"; do
    name=${wl%%|*}; args=${wl#*|}
    echo
    echo "**$topo, $name** (\`--xml tests/topologies/$topo.xml --costs $costs $args\`)"
    echo
    echo "| policy | makespan ms | ops/s | wake p50 us | wake p99 us | sched CPU / work | idle while queued | migrations off the LLC |"
    echo "|---|---|---|---|---|---|---|---|"
    variants | while IFS='|' read -r label extra; do
      # shellcheck disable=SC2086
      "$B" --xml "tests/topologies/$topo.xml" --costs "$costs" $args $extra --row --label "$label"
    done
  done
done
