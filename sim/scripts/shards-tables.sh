#!/bin/sh
# Prints the results behind SIMULATION.md "Places: NUMA shards" (markdown;
# the document tabulates two machines and quotes the others): the
# `shards` workload on the four real machines, without and with places
# (tasks confined to their home node), for even shards, one hot shard, and
# one large burst. Usage:
#   sim/scripts/shards-tables.sh [path/to/hwsched-sim] [extra arguments...]
# The extra arguments go to every run. Build first: cargo build -p
# hwsched-sim --release; run from the repository root (the topology files
# are read from tests/topologies/).
set -eu
B=${1:-${CARGO_TARGET_DIR:-target}/release/hwsched-sim}
[ $# -gt 0 ] && shift
EXTRA="$*"
for m in "epyc-zen3-2p epyc" "cascadelake-snc2 xeon" "kunpeng920 epyc" "raptorlake-hybrid xeon"; do
  set -- $m
  echo
  echo "**$1** (\`--xml tests/topologies/$1.xml --costs $2 --workload shards\`)"
  echo
  echo "| run | makespan ms | idle-while-queued | inside the places | runs off home | cross-node migrations | remote ms | sched/work |"
  echo "|---|---|---|---|---|---|---|---|"
  for shape in "even:" "hot 40%:--hot-pct 40" "hot 70%:--hot-pct 70" "one burst of 4096:--bursts 1 --requests 4096"; do
    label=${shape%%:*}
    args=${shape#*:}
    for p in off on; do
      # shellcheck disable=SC2086
      "$B" --xml "tests/topologies/$1.xml" --costs "$2" --workload shards $args \
        --places "$p" --row --label "$label, places $p" $EXTRA
    done
  done
done
