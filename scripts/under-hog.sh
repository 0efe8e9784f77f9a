#!/usr/bin/env bash
# Runs a cargo test N times in a row while a CPU hog (two busy threads outside
# the runtime) runs, and stops at the first failure. The project's guarantees
# (no stranded work, no lost wakeup, prompt shutdown) must hold on a busy
# machine: a test of one must pass 30 runs in a row this way.
#
#   scripts/under-hog.sh 30 --test conservation
#   scripts/under-hog.sh 30 --test reliability blocked_worker
#   scripts/under-hog.sh 30 --features io --test io
#   scripts/under-hog.sh 30 --lib blocking::tests
#
# The test binary is built first (release), then run directly, so the hog
# competes with the test, not with the compiler.
set -euo pipefail
runs=${1:?usage: under-hog.sh RUNS cargo-test-args...}
shift
cd "$(dirname "$0")/.."
cargo test --release --no-run "$@" 2>/dev/null
bin=$(cargo test --release --no-run --message-format=json "$@" 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])' | tail -1)
# Test-name filters after the --test NAME pair go to the binary.
filters=()
while [ $# -gt 0 ]; do
    case "$1" in
        --test | --features) shift 2 ;;
        --lib | --release) shift ;;
        *) filters+=("$1"); shift ;;
    esac
done
hog() { while :; do :; done; }
hog & h1=$!
hog & h2=$!
trap 'kill $h1 $h2 2>/dev/null' EXIT
pass=0
for i in $(seq 1 "$runs"); do
    if "$bin" "${filters[@]}" >"/tmp/under-hog.$$.log" 2>&1; then
        pass=$((pass + 1))
        echo "run $i: ok"
    else
        echo "run $i: FAILED (log: /tmp/under-hog.$$.log)"
        tail -40 "/tmp/under-hog.$$.log"
        echo "$pass of $runs passed before the first failure"
        exit 1
    fi
done
echo "$pass of $runs passed under the hog"
