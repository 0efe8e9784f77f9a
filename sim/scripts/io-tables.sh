#!/bin/sh
# Prints the I/O tables of SIMULATION.md ("I/O: one poller or one per
# LLC"), markdown: the `io` workload at a few loads, one poller against one
# per LLC. Usage:
#   sim/scripts/io-tables.sh [path/to/hwsched-sim] [extra arguments...]
# The extra arguments go to every run (the sensitivity runs, quoted in the document, pass
# `--work-ns 50000` or `--cost epoll_callback_ns=0 --cost epoll_lines=0`).
# Build first: cargo build -p hwsched-sim --release; run from the
# repository root (the topology files are read from tests/topologies/).
# Environment: MACHINES and LOADS (space separated) choose a subset;
# COMPACT=1 prints one table, a row per machine and load with both options
# side by side, instead of one full table per machine.
set -eu
B=${1:-${CARGO_TARGET_DIR:-target}/release/hwsched-sim}
[ $# -gt 0 ] && shift
EXTRA="$*"
MACHINES=${MACHINES:-"small ryzen-16 epyc-32 numa cascadelake-snc2 epyc-zen3-2p kunpeng920 genoa-192 genoa-384 bergamo-512"}
LOADS=${LOADS:-"0.05 0.1 0.25 0.5"}
COMPACT=${COMPACT:-0}
# Work per request (ns), for the offered rate: the last --work-ns given.
W=10000
prev=
for a in $EXTRA; do
  [ "$prev" = "--work-ns" ] && W=$a
  prev=$a
done
if [ "$COMPACT" = 1 ]; then
  echo
  echo "| machine | workers | load | offered M/s | one: requests/s | p50 us | p99 us | busiest poller | per LLC: requests/s | p50 us | p99 us | busiest poller |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
fi
for m in $MACHINES; do
  case $m in
    small) n=2; set -- --preset small ;;
    ryzen-16) n=16; set -- --synthetic "pack:1 l3:2 core:8 pu:1" ;;
    epyc-32) n=32; set -- --synthetic "pack:1 l3:4 core:8 pu:1" ;;
    numa) n=64; set -- --preset numa ;;
    cascadelake-snc2) n=80; set -- --xml tests/topologies/cascadelake-snc2.xml --costs xeon ;;
    epyc-zen3-2p) n=128; set -- --xml tests/topologies/epyc-zen3-2p.xml --costs epyc ;;
    kunpeng920) n=128; set -- --xml tests/topologies/kunpeng920.xml --costs epyc ;;
    genoa-192) n=192; set -- --synthetic "pack:2 l3:12 core:8 pu:1" ;;
    genoa-384) n=384; set -- --synthetic "pack:2 l3:12 core:8 pu:2" ;;
    bergamo-512) n=512; set -- --synthetic "pack:2 l3:16 core:8 pu:2" ;;
    *) echo "unknown machine $m" >&2; exit 1 ;;
  esac
  if [ "$COMPACT" = 1 ]; then
    for l in $LOADS; do
      # shellcheck disable=SC2086
      one=$("$B" "$@" --workload io --load "$l" --pollers one $EXTRA --row --label x)
      # shellcheck disable=SC2086
      llc=$("$B" "$@" --workload io --load "$l" --pollers llc $EXTRA --row --label x)
      offered=$(awk "BEGIN { printf \"%.2f\", $l * $n * 1000 / $W }")
      printf '| %s | %s | %s | %s |' "$m" "$n" "$l" "$offered"
      echo "$one" | awk -F'|' '{ printf "%s|%s|%s|%s|", $4, $5, $6, $7 }'
      echo "$llc" | awk -F'|' '{ printf "%s|%s|%s|%s|\n", $4, $5, $6, $7 }'
    done
    continue
  fi
  shown=$(for a in "$@"; do case $a in *" "*) printf ' "%s"' "$a" ;; *) printf ' %s' "$a" ;; esac; done)
  echo
  echo "**$m** ($n workers; \`hwsched-sim$shown --workload io --load L --pollers P${EXTRA:+ $EXTRA}\`)"
  echo
  echo "| load, pollers | pollers | requests/s | p50 us | p99 us | busiest poller | mean poller | events per epoll_wait | events to another LLC | searcher wakes across LLCs | migrations off the LLC |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for l in $LOADS; do
    for p in one llc; do
      # shellcheck disable=SC2086
      "$B" "$@" --workload io --load "$l" --pollers "$p" $EXTRA --row --label "$l, $p"
    done
  done
done
