#!/usr/bin/env bash
# Instructions per timer registered and cancelled (`timeout(30 s, f)`, `f`
# pending once, then ready: the timer never fires), hwsched beside tokio,
# counted by callgrind:
# `benches/timers.rs --instructions` (its module docs) under valgrind,
# each dump's `totals:` divided by the operations.
#
#   scripts/timer-instructions.sh [WORKERS]
#
# Needs valgrind. Builds the bench first.
set -euo pipefail
workers=${1:-1}
cd "$(dirname "$0")/.."
cargo bench -q --features io --bench timers --no-run 2>/dev/null
bin=$(ls -t target/release/deps/timers-* | grep -v '\.d$' | head -1)
dir=$(mktemp -d)
valgrind --tool=callgrind --callgrind-out-file="$dir/cg" "$bin" --instructions --workers "$workers" \
    >"$dir/out" 2>"$dir/err"
ops=$(awk -F'\t' '$1 == "ops" {print $3}' "$dir/out")
printf '%-24s %12s\n' dump Ir/op
for f in "$dir"/cg.*; do
    label=$(sed -n 's/^desc: Trigger: Client Request: //p' "$f")
    [ -n "$label" ] || continue
    ir=$(awk '/^totals:/ {print $2}' "$f")
    printf '%-24s %12.0f\n' "$label" "$(echo "$ir / $ops" | bc -l)"
done
echo "callgrind files: $dir"
