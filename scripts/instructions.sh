#!/usr/bin/env bash
# Instructions per operation of each workload of benches/sidebyside.rs on
# each runtime (hwsched, tokio multi-thread, tokio current-thread,
# async-executor), counted by callgrind: a deterministic figure where wall
# time on a small shared machine moves 10-30% between runs and hardware
# counters are not available.
#
#   scripts/instructions.sh [--top N] [--locked N] [--scale S] [--out DIR | --from DIR] [WORKERS] [FILTER...]
#
#   WORKERS    workers of hwsched, tokio and async-executor (default: one
#              per CPU); tokio-ct always has its one thread
#   FILTER     only workloads whose name contains one of these
#   --top N    also print, for each dump, the N functions with the most
#              instructions: self cost (summed over the inlined source files
#              of each function) and inclusive cost (callgrind_annotate)
#   --locked N also print, for each dump, the locked read-modify-writes
#              (lock-prefixed instructions, xchg with memory) per operation
#              and their N most executed sites
#              (scripts/locked-instructions.py; records every instruction's
#              count, --dump-instr=yes)
#   --scale S  divide the workloads' operation counts by S (see the
#              bench's Sizes::new); the full sizes take about 1.5 minutes
#              under callgrind on the 2-core machine, so 1 is the default
#   --out DIR  keep the dumps in DIR (default: a new temporary folder)
#   --from DIR read the dumps of an earlier run in DIR instead of running
#
# What is measured: `sidebyside --instructions` runs, for each workload and
# runtime, a warm-up round, waits 50 ms (the workers finish spinning and
# park), issues callgrind's ZERO_STATS, runs one round and issues
# DUMP_STATS_AT "<workload>/<runtime>". Each dump's `totals:` line (the
# instructions of all threads, --separate-threads=no) divided by the
# workload's operation count (printed by the bench; defined once, in its
# Sizes and WORKLOADS) is the table's figure. The dump's `summary:` line is
# NOT used: ZERO_STATS does not reset it, so it also holds the warm-up round.
# Setup inside a round counts too (creating channels, spawning the tasks of
# ping_pong and hackbench); it is small against the operations.
#
# What callgrind's serialization changes: valgrind runs one thread at a time
# (--fair-sched=yes hands the CPU round-robin among runnable threads), so
#  - a worker spinning while idle spins for its whole time slice while the
#    thread that would give it work waits: spin loops (hwsched's governed
#    idle spin, whose length is the park cost measured at start - under
#    valgrind too; tokio's and async-executor's searching workers) cost more
#    instructions than on real parallel hardware, and how many depends on
#    where valgrind switches threads;
#  - there is no truly parallel stealing: a steal happens only when the
#    scheduler gives the thief its turn, so stealing counts differ;
#  - wake latencies differ (a woken thread runs when valgrind schedules it,
#    after other threads' slices), which changes how often workers find
#    their queues empty and park.
# So the figure is a deterministic count of the work done per operation,
# idle spinning included, not a simulation of parallel execution; it
# compares instruction paths (the cost of a spawn, a wake, a yield). Where
# the workers stay busy (ping_pong, spawn_many, yield_many, chained_spawn on
# hwsched) two runs agree to 0.5% or better; where how often a thread finds
# no work and parks depends on valgrind's thread switches at syscalls (each
# spawn from outside, hackbench on the multi-thread runtimes) they differ by
# 1-7%, and tokio-ct's spawn_outside is bimodal (about 2,300 or 2,900 per
# task: its thread parks in the time and I/O drivers often or rarely). Run
# it twice to see the spread.
#
# Also callgrind_annotate (3.19) adds the cost of calls still in progress at
# the dump (`calls=0`, the threads' outer frames) to the caller's self cost,
# and those costs, too, run from before ZERO_STATS; --top drops those
# records and sets the summary to the dump's totals before annotating, so
# the shares are of the measured round.
#
# Needs valgrind (callgrind_annotate for --top). Builds the bench first.
set -euo pipefail

usage() { sed -n '/^#   scripts/,/^#   --from/p' "$0" | sed 's/^# \{0,1\}//'; }

top=0
locked=0
scale=1
out=""
from=""
while [ $# -gt 0 ]; do
    case $1 in
        --top) top=${2:?--top N}; shift 2 ;;
        --locked) locked=${2:?--locked N}; shift 2 ;;
        --scale) scale=${2:?--scale S}; shift 2 ;;
        --out) out=${2:?--out DIR}; shift 2 ;;
        --from) from=${2:?--from DIR}; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        -*) echo "instructions.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
        *) break ;;
    esac
done
workers=$(nproc)
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
    workers=$1
    shift
fi
filters=("$@")

cd "$(dirname "$0")/.."
if [ -n "$from" ]; then
    dir=$from
else
    # The executable cargo names (the newest sidebyside-* in the target
    # folder may be a build with other features).
    build=$(cargo bench --bench sidebyside --no-run 2>&1) || {
        echo "$build" >&2
        exit 1
    }
    bin=$(sed -n 's/^ *Executable .*(\(.*\))$/\1/p' <<<"$build" | tail -1)
    [ -x "$bin" ] || { echo "instructions.sh: no sidebyside executable" >&2; exit 1; }
    if [ -n "$out" ]; then
        mkdir -p "$out"
        dir=$out
        rm -f "$dir"/callgrind.out*
    else
        dir=$(mktemp -d)
    fi
    # --fair-sched=yes: threads take turns (a ticket lock), so a spinning
    # worker cannot keep the CPU from the thread it waits for, and the
    # order of turns does not depend on the host's futex wake-ups.
    # --separate-threads=no: one dump per request, all threads summed.
    dump_instr=no
    [ "$locked" -gt 0 ] && dump_instr=yes
    valgrind --tool=callgrind --fair-sched=yes --separate-threads=no \
        --dump-instr=$dump_instr --callgrind-out-file="$dir/callgrind.out" \
        "$bin" --instructions --workers "$workers" --scale "$scale" ${filters[@]+"${filters[@]}"} \
        >"$dir/bench.out" 2>"$dir/valgrind.err" || {
        tail -20 "$dir/valgrind.err" >&2
        exit 1
    }
fi

# Whether workload/runtime label $1 passes the filters.
wanted() {
    [ ${#filters[@]} -eq 0 ] && return 0
    local x
    for x in "${filters[@]}"; do
        [[ ${1%%/*} == *"$x"* ]] && return 0
    done
    return 1
}

# "<label> <totals>" of each client-request dump.
for f in "$dir"/callgrind.out.*; do
    awk '/^desc: Trigger: Client Request: / {sub(/^desc: Trigger: Client Request: /, ""); l = $0}
         /^totals:/ {t = $2}
         END {if (l != "") print l, t}' "$f"
done >"$dir/totals.txt"

read -r _ w _ s < <(grep -m1 '^workers' "$dir/bench.out")
echo "instructions per operation (callgrind), $w workers (tokio-ct: 1 thread), scale $s"
echo
# The filters as one regular expression (they are plain names).
want=$(IFS='|'; echo "${filters[*]+${filters[*]}}")
awk -F'\t' -v want="$want" '
    FNR == NR { split($0, a, " "); ir[a[1]] = a[2]; next }
    $1 == "ops" && (want == "" || $2 ~ want) { name[++n] = $2; op[$2] = $3; ops[$2] = $4 }
    function per(wl, r) { return (wl "/" r) in ir ? ir[wl "/" r] / ops[wl] : -1 }
    function cell(v) { return v < 0 ? "-" : sprintf("%.0f", v) }
    END {
        print "| workload | op | ops | hwsched | tokio | tokio-ct | async-executor | hwsched/tokio |"
        print "|---|---|---:|---:|---:|---:|---:|---:|"
        for (i = 1; i <= n; i++) {
            wl = name[i]
            h = per(wl, "hwsched"); t = per(wl, "tokio")
            printf "| %s | %s | %d | %s | %s | %s | %s | %s |\n", wl, op[wl], ops[wl],
                cell(h), cell(t), cell(per(wl, "tokio-ct")), cell(per(wl, "async-executor")),
                (h < 0 || t <= 0) ? "-" : sprintf("%.2f", h / t)
        }
    }' "$dir/totals.txt" "$dir/bench.out"

if [ "$top" -gt 0 ]; then
    for f in $(ls "$dir"/callgrind.out.* | sort -t. -k3 -n); do
        label=$(awk '/^desc: Trigger: Client Request: / {sub(/^desc: Trigger: Client Request: /, ""); print; exit}' "$f")
        [ -n "$label" ] && wanted "$label" || continue
        total=$(awk '/^totals:/ {print $2}' "$f")
        # Without the in-progress calls, with the round's total as summary.
        fixed=$(mktemp)
        awk -v total="$total" '
            /^calls=0 / { skip = 1; next }
            skip { skip = 0; next }
            /^summary:/ { print "summary: " total; next }
            { print }' "$f" >"$fixed"
        echo
        echo "### $label: top $top functions by self instructions (share of the round's $total)"
        echo
        callgrind_annotate --threshold=100 --auto=no "$fixed" |
            awk -v total="$total" -v n="$top" '
                /file:function/ { on = 1; getline; next }
                on && /^ *[0-9,]+ / {
                    ir = $1; gsub(/,/, "", ir)
                    fn = $0; sub(/^ *[0-9,]+ +\( *[0-9.]+%\) +/, "", fn)
                    sub(/ \[[^]]*\]$/, "", fn)   # the object file
                    sub(/^[^:]*:/, "", fn)        # the (inlined) source file
                    self[fn] += ir
                }
                END {
                    for (f in self) printf "%d\t%s\n", self[f], f
                }' | sort -t$'\t' -k1,1nr | awk -v n="$top" 'NR <= n' |
            awk -F'\t' -v total="$total" '{printf "%14s %6.2f%%  %s\n", $1, 100 * $1 / total, $2}'
        echo
        echo "### $label: top $top by inclusive instructions"
        echo
        callgrind_annotate --threshold=100 --auto=no --inclusive=yes "$fixed" |
            awk -v total="$total" '
                /file:function/ { on = 1; getline; next }
                on && /^ *[0-9,]+ / {
                    ir = $1; gsub(/,/, "", ir)
                    fn = $0; sub(/^ *[0-9,]+ +\( *[0-9.]+%\) +/, "", fn)
                    sub(/ \[[^]]*\]$/, "", fn)
                    sub(/^[^:]*:/, "", fn)
                    # A function inlined from several files appears once per
                    # file, nested: its inclusive cost is the largest.
                    if (ir + 0 > incl[fn] + 0) incl[fn] = ir + 0
                }
                END {
                    for (f in incl) printf "%d\t%s\n", incl[f], f
                }' | sort -t$'\t' -k1,1nr | awk -v n="$top" 'NR <= n' |
            awk -F'\t' -v total="$total" '{printf "%14s %6.2f%%  %s\n", $1, 100 * $1 / total, $2}'
        rm -f "$fixed"
    done
fi
if [ "$locked" -gt 0 ]; then
    for f in $(ls "$dir"/callgrind.out.* | sort -t. -k3 -n); do
        label=$(awk '/^desc: Trigger: Client Request: / {sub(/^desc: Trigger: Client Request: /, ""); print; exit}' "$f")
        [ -n "$label" ] && wanted "$label" || continue
        grep -q '^positions:.*instr' "$f" || {
            echo "instructions.sh: $f has no instruction addresses (made without --locked)" >&2
            continue
        }
        n=$(awk -F'\t' -v wl="${label%%/*}" '$1 == "ops" && $2 == wl {print $4}' "$dir/bench.out")
        echo
        echo "### $label: locked instructions"
        echo
        scripts/locked-instructions.py "$f" "$n" "$locked"
    done
fi
echo
echo "callgrind files: $dir"
