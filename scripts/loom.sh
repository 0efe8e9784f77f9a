#!/usr/bin/env bash
# Runs the loom models of loom-tests/, each model (#[test]) in its own
# process, so that one failing model (loom may abort the whole process when
# a model panics) does not hide the others. `make test-loom` runs this.
#
#   scripts/loom.sh [MODEL_FILE...]      e.g. scripts/loom.sh abort shutdown
#
# Environment:
#   LOOM_MAX_PREEMPTIONS  preemption bound (default 3, the Makefile's)
#   LOOM_TARGET_DIR       cargo target dir for the loom build (default target/loom)
#   LOOM_MODEL_TIMEOUT    seconds one model may run (default 600)
#   LOOM_LOG_DIR          if set, each failing model's output goes to
#                         $LOOM_LOG_DIR/FILE.MODEL.log
#   CARGO                 cargo command (default cargo)
#
# Prints one line per model (ok / FAILED / TIMEOUT, seconds) and a summary;
# exits 0 when every model passed, 1 when one failed, 2 when the build
# failed.
set -u
cd "$(dirname "$0")/.."

CARGO=${CARGO:-cargo}
TARGET_DIR=${LOOM_TARGET_DIR:-target/loom}
export LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-3}
TIMEOUT=${LOOM_MODEL_TIMEOUT:-600}
export RUSTFLAGS="--cfg loom -C debug-assertions"

sel=()
for f in "$@"; do sel+=(--test "$f"); done
[ ${#sel[@]} -eq 0 ] && sel=(--tests)

build_log=$(mktemp)
trap 'rm -f "$build_log"' EXIT
if ! $CARGO test -p loom-tests --release --target-dir "$TARGET_DIR" "${sel[@]}" \
    --no-run --message-format=json-render-diagnostics >"$build_log"; then
    echo "loom.sh: the loom build failed" >&2
    exit 2
fi
exes=$(grep -o '"executable":"[^"]*"' "$build_log" | cut -d'"' -f4 | sort)

failed=0
total=0
start=$(date +%s)
for exe in $exes; do
    file=$(basename "$exe" | sed 's/-[0-9a-f]*$//')
    for model in $("$exe" --list --format=terse 2>/dev/null | sed -n 's/: test$//p'); do
        total=$((total + 1))
        out=$(mktemp)
        t0=$(date +%s.%N)
        timeout "$TIMEOUT" "$exe" --exact "$model" --test-threads=1 --nocapture >"$out" 2>&1
        rc=$?
        secs=$(echo "$(date +%s.%N) - $t0" | bc)
        if [ $rc -eq 0 ]; then
            status=ok
        elif [ $rc -eq 124 ]; then
            status=TIMEOUT
        else
            status=FAILED
        fi
        printf '%-10s %-60s %7.1fs\n' "$status" "$file::$model" "$secs"
        if [ $rc -ne 0 ]; then
            failed=$((failed + 1))
            # The panic message: the line after "panicked at".
            grep -A1 'panicked at' "$out" | grep -v 'panicked at\|^--' | head -2 | sed 's/^/           /'
            if [ -n "${LOOM_LOG_DIR:-}" ]; then
                mkdir -p "$LOOM_LOG_DIR"
                cp "$out" "$LOOM_LOG_DIR/$file.$model.log"
            fi
        fi
        rm -f "$out"
    done
done
echo "loom.sh: $((total - failed))/$total models passed at LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS in $(($(date +%s) - start))s"
[ $failed -eq 0 ] || exit 1
