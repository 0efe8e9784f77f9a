#!/usr/bin/env bash
# hackbench with more workers than CPUs: hwsched on synthetic topologies of
# 2 (this machine), 32, 128 and 512 workers, tokio and async-executor with
# the same thread count. Shows whether the cost of a wake grows with the
# worker count (it should not: a wake costs O(1) at any worker count).
#   scripts/oversubscribed.sh [RUNS]      (median of RUNS, default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
cargo build -q --release --example hackbench
hb=target/release/examples/hackbench
declare -A topo=(
  [32]="pack:2 l3:2 core:4 pu:2"
  [128]="pack:2 l3:2 core:16 pu:2"
  [512]="pack:4 l3:4 core:16 pu:2"
)
med() { grep -E "^Time:" | tail -1 | awk '{print $2}'; }
echo "| workers | hwsched s | tokio s | async-executor s | hwsched / tokio | hwsched / async-executor |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in 2 32 128 512; do
  if [ "$n" = 2 ]; then
    h=$($hb -g 10 -l 100 --runs "$runs" --workers 2 | med)
  else
    h=$($hb -g 10 -l 100 --runs "$runs" --topology "${topo[$n]}" | med)
  fi
  t=$($hb -g 10 -l 100 --runs "$runs" --runtime tokio --workers "$n" | med)
  a=$($hb -g 10 -l 100 --runs "$runs" --runtime async-executor --workers "$n" | med)
  echo "| $n | $h | $t | $a | $(python3 -c "print(f'{$h/$t:.2f} | {$h/$a:.2f}')") |"
done
