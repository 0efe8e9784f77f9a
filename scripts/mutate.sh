#!/usr/bin/env bash
# Mutation runner for the loom models: proves that each ordering stronger
# than Relaxed, and each fence, in src/ is either needed by a model (the
# mutation is caught) or documented as not checkable / not needed.
#
#   scripts/mutate.sh [NAME_REGEX]     # default: every mutation below
#   scripts/mutate.sh --table          # only rewrite the README table
#
# Each mutation (below: name, file, occurrence, exact pattern, replacement,
# note) is applied alone to a scratch copy of the working tree
# ($MUTATE_DIR, default /tmp/hwsched-mutate), the loom suite is run there by
# scripts/loom.sh (each model in its own process, LOOM_MODEL_TIMEOUT
# seconds each, default 120), and the file is restored. A mutation is
# "caught" when at least one model fails or times out. Results are appended
# to $MUTATE_OUT (default loom-tests/mutations.tsv, one line per mutation)
# and the table between the markers in loom-tests/README.md is regenerated
# from it. Not run by CI: it rebuilds hwsched once per mutation (about a
# minute each). Run it after changing a protocol, and commit the README.
#
# Pattern and replacement are exact strings; `\n` stands for a newline.
# The occurrence column picks the Nth match when the pattern is not unique
# (empty: the pattern must occur exactly once). The note says why an
# uncaught mutation is acceptable, or what would catch it.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SCRATCH=${MUTATE_DIR:-/tmp/hwsched-mutate}
OUT=${MUTATE_OUT:-$ROOT/loom-tests/mutations.tsv}
export LOOM_TARGET_DIR=${LOOM_TARGET_DIR:-$SCRATCH-target}
export LOOM_MODEL_TIMEOUT=${LOOM_MODEL_TIMEOUT:-120}
export LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-3}
FILTER=${1:-.}

# name @@ file @@ occurrence @@ pattern @@ replacement @@ note
MUTATIONS=$(
    cat <<'EOF'
task-abort-fence @@ src/task.rs @@ 1 @@ fence(Ordering::SeqCst); @@  @@
task-abort-slot-acquire @@ src/task.rs @@ @@ self.slot.load(Ordering::Acquire) @@ self.slot.load(Ordering::Relaxed) @@ Needed in C11 (the abort's lock of the shard must come after register's unlock, which the Release/Acquire on the slot orders); loom cannot show it: its mutex order is the execution order, so a key read from the slot always finds its entry.
task-publish-slot-release @@ src/task.rs @@ @@ self.slot.store(key.pack(), Ordering::Release) @@ self.slot.store(key.pack(), Ordering::Relaxed) @@ The other half of task-abort-slot-acquire: not checkable in loom for the same reason.
task-publish-fence @@ src/task.rs @@ 2 @@ fence(Ordering::SeqCst); @@  @@
task-recheck-fence @@ src/task.rs @@ 3 @@ fence(Ordering::SeqCst); @@  @@
task-no-recheck @@ src/task.rs @@ @@ if unsafe { this.meta.as_ref() }.recheck_aborted() { @@ if false { @@
shared-bury-fence @@ src/shared.rs @@ 1 @@ fence(Ordering::SeqCst); @@  @@
shared-close-fence @@ src/shared.rs @@ 2 @@ fence(Ordering::SeqCst); @@  @@
shared-bury-no-reap @@ src/shared.rs @@ @@ if self.reaper_done.load(Ordering::Relaxed) { @@ if false && self.reaper_done.load(Ordering::Relaxed) { @@
shared-wait-before-cancel @@ src/shared.rs @@ @@     drain_inboxes();\n    wake_waiting(); @@     wait_running();\n    let wait_running = || {};\n    drain_inboxes();\n    wake_waiting(); @@
idle-to-searching-seqcst @@ src/idle.rs @@ @@ fetch_add(SEARCHING_ONE, Ordering::SeqCst) @@ fetch_add(SEARCHING_ONE, Ordering::Relaxed) @@ Not needed (proof at the site): the increment publishes and acquires nothing; the fence of the last searcher leaving carries the store-buffering (idle.rs, "Orderings"). Kept: one `lock xadd` on x86 either way.
idle-leave-searching-seqcst @@ src/idle.rs @@ @@ fetch_sub(SEARCHING_ONE, Ordering::SeqCst) @@ fetch_sub(SEARCHING_ONE, Ordering::Relaxed) @@ Not needed (proof at the site): the fence after it carries the store-buffering, and coherence keeps the count from going below zero.
idle-leave-searching-fence @@ src/idle.rs @@ 1 @@ fence(Ordering::SeqCst); @@  @@
idle-needs-wake-fence @@ src/idle.rs @@ 2 @@ fence(Ordering::SeqCst); @@  @@
idle-needs-wake-load @@ src/idle.rs @@ 1 @@ self.state.load(Ordering::SeqCst) @@ self.state.load(Ordering::Relaxed) @@ Not needed: a relaxed load after the SeqCst fence carries the store-buffering argument (comment at the site). A plain load on x86 either way.
idle-wake-one-load @@ src/idle.rs @@ 2 @@ self.state.load(Ordering::SeqCst) @@ self.state.load(Ordering::Relaxed) @@ Not needed: callers have just made needs_wake's fenced load on this thread (read-read coherence), and a stale value only fails the CAS (comment at the site).
idle-wake-one-cas @@ src/idle.rs @@ 1 @@ Ordering::SeqCst,\n                Ordering::SeqCst, @@ Ordering::Relaxed,\n                Ordering::Relaxed, @@ Not needed for correctness (proof at the site): its acquire lets the first take find the bit (chain 1); without it the fence after the undo acquires the decrement the CAS read, and the next lap finds the bit. Kept: one `lock cmpxchg` on x86 either way.
idle-wake-one-take @@ src/idle.rs @@ @@ self.parked.take(span, near, Ordering::SeqCst) @@ self.parked.take(span, near, Ordering::Relaxed) @@ Needed in C11 for its release (chain 2: the woken worker's `leave_parked` acquires the claim through this clear, so the worker's decrements of `state` follow the claim's increments). Loom cannot show it: every write to `state` and to the bitmaps is an RMW, and loom orders the RMWs on one word in the order they run, so the worker's decrements already follow the claim.
idle-wake-one-undo @@ src/idle.rs @@ 1 @@ fetch_sub(SEARCHING_ONE + 1, Ordering::SeqCst) @@ fetch_sub(SEARCHING_ONE + 1, Ordering::Relaxed) @@ Not needed (proof at the site): the load after it reads it or a later value by coherence, and it publishes nothing.
idle-wake-one-undo-fence @@ src/idle.rs @@ 3 @@ fence(Ordering::SeqCst); @@  @@ Needed in C11 for its acquire (chain 3), for progress only: without it the load after the undo may not yet show a worker that cleared its own bit as awake, and the waker claims again until it does; no wake is lost (the store-buffering is not this fence's). Loom cannot show it: it orders the RMWs on `state` in the order they run, so the undo already follows that worker's count.
idle-wake-one-reload @@ src/idle.rs @@ 3 @@ self.state.load(Ordering::SeqCst) @@ self.state.load(Ordering::Relaxed) @@ Not needed: a load after the undo's fence, which reads the undo or later (comment at the site).
idle-wake-specific-load @@ src/idle.rs @@ 4 @@ self.state.load(Ordering::SeqCst) @@ self.state.load(Ordering::Relaxed) @@ Not needed: a stale searcher sends the caller to the pusher's check, a stale no-searcher fails the CAS (comment at the site).
idle-wake-specific-cas @@ src/idle.rs @@ 2 @@ Ordering::SeqCst,\n                Ordering::SeqCst, @@ Ordering::Relaxed,\n                Ordering::Relaxed, @@ Not needed (proof at the site): the bit is then taken by an RMW, which reads the latest value of the word whatever the orderings, and that clear releases the claim (chain 2).
idle-wake-specific-take @@ src/idle.rs @@ 1 @@ self.parked.remove_rmw(w, Ordering::SeqCst) @@ self.parked.remove_rmw(w, Ordering::Relaxed) @@ As idle-wake-one-take (chain 2).
idle-wake-specific-undo @@ src/idle.rs @@ 2 @@ fetch_sub(SEARCHING_ONE + 1, Ordering::SeqCst) @@ fetch_sub(SEARCHING_ONE + 1, Ordering::Relaxed) @@ Not needed (proof at the site): the caller's pusher check (its fence, then a load that reads this undo or later) orders it.
idle-to-parked-bit @@ src/idle.rs @@ @@ self.parked.insert_rmw(w, Ordering::SeqCst) @@ self.parked.insert_rmw(w, Ordering::Relaxed) @@ Not needed (proof at the site): the decrement after it releases the bit (chain 1), and there is nothing to acquire.
idle-to-parked-count @@ src/idle.rs @@ @@ self.state.fetch_sub(d, Ordering::SeqCst) @@ self.state.fetch_sub(d, Ordering::Relaxed) @@ Needed in C11 for its release (chain 1), for progress: a claim that does not see the bit undoes and claims again until it does. Loom cannot show it in these models: the waker acquires the bit through the worker's fence (a last searcher) or its own earlier acquire of `state`.
idle-to-parked-fence @@ src/idle.rs @@ 4 @@ fence(Ordering::SeqCst); @@  @@
idle-leave-parked-count @@ src/idle.rs @@ @@ self.state.fetch_add(1, Ordering::SeqCst) @@ self.state.fetch_add(1, Ordering::Relaxed) @@ Not needed (proof at the site): the clear after it releases it (chain 3).
idle-leave-parked-bit @@ src/idle.rs @@ 2 @@ self.parked.remove_rmw(w, Ordering::SeqCst) @@ self.parked.remove_rmw(w, Ordering::Relaxed) @@ Needed in C11 both ways (chains 2 and 3, proof at the site). Loom cannot show either: it orders the RMWs on one word in the order they run, so the worker's decrements already follow the claim, and a waker's undo already follows the worker's count.
idle-leave-parked-undo @@ src/idle.rs @@ @@ self.state.fetch_sub(1, Ordering::SeqCst) @@ self.state.fetch_sub(1, Ordering::Relaxed) @@ Not needed (proof at the site): it follows the claim by chain 2, and publishes nothing.
idle-find-queued-scan @@ src/idle.rs @@ @@ .scan(span.clone(), Ordering::SeqCst, Some(skip), f) @@ .scan(span.clone(), Ordering::Relaxed, Some(skip), f) @@ Not needed (proof at the site): loads after the re-checker's SeqCst fence see every store made before a pusher's fence that precedes it in the fences' order, relaxed or not. A plain load on x86 either way.
park-notify-acqrel-release @@ src/park.rs @@ @@ fetch_or(NOTIFIED, Ordering::AcqRel) @@ fetch_or(NOTIFIED, Ordering::Release) @@
park-notify-acqrel-acquire @@ src/park.rs @@ @@ fetch_or(NOTIFIED, Ordering::AcqRel) @@ fetch_or(NOTIFIED, Ordering::Acquire) @@
park-prepare-fetch-and @@ src/park.rs @@ @@ fetch_and(!NOTIFIED, Ordering::AcqRel) @@ fetch_and(!NOTIFIED, Ordering::Relaxed) @@
park-is-notified @@ src/park.rs @@ @@ self.state.load(Ordering::Acquire) & NOTIFIED != 0\n @@ self.state.load(Ordering::Relaxed) & NOTIFIED != 0\n @@ Not needed: a spin that sees the bit returns `Woken`, and the next wait's `prepare` consumes the token with an AcqRel RMW before it checks the inbox (comment at the site). Kept: a plain load on x86 either way.
park-parked-fetch-or @@ src/park.rs @@ 1 @@ fetch_or(PARKED, Ordering::AcqRel) @@ fetch_or(PARKED, Ordering::Relaxed) @@ Not needed alone: the final `swap(0, AcqRel)` reads every notify so far and acquires before the caller's inbox check, and a notifier that reads PARKED takes the mutex the worker holds (comment at the site); the swap carries it (`park-final-swap` is caught). Kept: an RMW costs the same on x86.
park-poll-park-fetch-or @@ src/park.rs @@ 2 @@ fetch_or(PARKED, Ordering::AcqRel) @@ fetch_or(PARKED, Ordering::Relaxed) @@ As park-parked-fetch-or: the swaps after it carry the acquire (`park-poll-park-early-swap` and `park-poll-park-final-swap` are caught).
park-poll-park-resume-load @@ src/park.rs @@ @@         if self.state.load(Ordering::Acquire) & NOTIFIED == 0 { @@         if self.state.load(Ordering::Relaxed) & NOTIFIED == 0 { @@ Not needed: the final swap acquires before the inbox check (comment at the site).
park-poll-park-waker-after-unlock @@ src/park.rs @@ @@             *slot = Some(waker.clone());\n            return Poll::Pending; @@             drop(slot);\n            *self.lock.lock() = Some(waker.clone());\n            return Poll::Pending; @@
park-poll-park-sleeps-on-token @@ src/park.rs @@ @@             if prev & NOTIFIED != 0 {\n                drop(slot); @@             if false && prev & NOTIFIED != 0 {\n                drop(slot); @@
park-wait-loop-load @@ src/park.rs @@ @@ while self.state.load(Ordering::Acquire) & NOTIFIED == 0 @@ while self.state.load(Ordering::Relaxed) & NOTIFIED == 0 @@ Not needed: the final swap acquires before the caller's inbox check (comment at the site).
park-final-swap @@ src/park.rs @@ 1 @@ self.state.swap(0, Ordering::AcqRel) @@ self.state.swap(0, Ordering::Relaxed) @@
park-poll-park-early-swap @@ src/park.rs @@ 2 @@ self.state.swap(0, Ordering::AcqRel) @@ self.state.swap(0, Ordering::Relaxed) @@
park-poll-park-final-swap @@ src/park.rs @@ 3 @@ self.state.swap(0, Ordering::AcqRel) @@ self.state.swap(0, Ordering::Relaxed) @@
handoff-deliver-queued @@ src/handoff.rs @@ @@ rt.sleepers().queued.insert_rmw(to, Ordering::AcqRel) @@ rt.sleepers().queued.insert_rmw(to, Ordering::Relaxed) @@
handoff-deliver-to-woken-queued @@ src/handoff.rs @@ @@ rt.sleepers().queued.insert_rmw(w, Ordering::AcqRel) @@ rt.sleepers().queued.insert_rmw(w, Ordering::Relaxed) @@
worker-take-queued @@ src/handoff.rs @@ @@ rt.sleepers().queued.remove(me, Ordering::AcqRel) @@ rt.sleepers().queued.remove(me, Ordering::Relaxed) @@
blocking-woken-release @@ src/blocking.rs @@ @@ self.woken.store(true, Ordering::Release) @@ self.woken.store(true, Ordering::Relaxed) @@ Test code: the waker of blocking.rs's test helper `tests::block_on`, not the pool (the pool hands tasks to its threads under a `std` mutex and condvar, with no atomic ordering to check). Needed there as in block-on-woken-release; not modelled.
blocking-woken-acquire @@ src/blocking.rs @@ @@ w.woken.swap(false, Ordering::Acquire) @@ w.woken.swap(false, Ordering::Relaxed) @@ Test code, as blocking-woken-release.
block-on-woken-release @@ src/block_on.rs @@ @@ let _ = self.0.swap(true, Ordering::Release); @@ let _ = self.0.swap(true, Ordering::Relaxed); @@
block-on-woken-acquire @@ src/block_on.rs @@ @@ while !self.0.swap(false, Ordering::Acquire) @@ while !self.0.swap(false, Ordering::Relaxed) @@
logic-idle-no-recheck @@ src/idle_worker.rs @@ @@ pending = rt.find_queued_work(me); @@ pending = None; @@
logic-idle-no-leave-parked @@ src/idle_worker.rs @@ @@ if pass.announced { @@ if false && pass.announced { @@
logic-idle-leave-parked-answer-ignored @@ src/idle_worker.rs @@ @@ *w.parts().1 = rt.sleepers().leave_parked(me); @@ let _ = rt.sleepers().leave_parked(me); @@
logic-idle-no-pending-steal @@ src/idle_worker.rs @@ @@ if let Some(v) = pass.pending { @@ if let Some(v) = pass.pending.filter(|_| false) { @@
logic-idle-pending-no-wake-for-the-rest @@ src/idle_worker.rs @@ @@ if let Some(u) = left { @@ if let Some(u) = left.filter(|_| false) { @@
logic-idle-walk-skips-found-work @@ src/idle_worker.rs @@ 1 @@ found_work(rt, w);\n                w.exit_idle(period.idle_since @@ w.exit_idle(period.idle_since @@
logic-idle-inbox-skips-found-work @@ src/idle_worker.rs @@ @@ w.count(Event::InboxPull);\n            found_work(rt, w); @@ w.count(Event::InboxPull); @@
logic-idle-never-searches-at-start @@ src/idle_worker.rs @@ 1 @@ *searching = rt.sleepers().to_searching(); @@ let _ = &searching; @@ Benign for conservation (argued): a worker that does not search still announces its sleep with no searcher left after it and re-checks the `queued` set (step 3), so work is found; it only finds it later. The searcher cap makes the same worker in the models (`a_non_searcher_parks_as_the_last_searcher_leaves`).
logic-idle-never-searches-after-a-wait @@ src/idle_worker.rs @@ 2 @@ *searching = rt.sleepers().to_searching(); @@ let _ = &searching; @@ Benign for conservation, as logic-idle-never-searches-at-start.
logic-idle-kick-note-dropped @@ src/idle_worker.rs @@ @@ .or_else(|| rt.mailbox(me).take_kick()); @@ ; @@ Benign for conservation (argued): a worker is kicked by a pusher's `wake_one`, whose claim counts it searching (`leave_parked` returns true), so it walks anyway; the note only says where to look first.
logic-idle-take-own-skipped @@ src/idle_worker.rs @@ @@ if let Some(t) = w.take_own() { @@ if let Some(t) = w.take_own().filter(|_| false) { @@ Not reached by these models (their workers make no wakes while they sleep: only a worker sleeping in the I/O driver does). Caught by `tests/io.rs` (the driver's wakes stay in the LIFO slot of a worker that goes back to sleep: the tests' watchdogs fail).
logic-push-check-before-push @@ src/handoff.rs @@ @@ local.push(t);\n    after_push(rt, me, queued_bit) @@ let woke = after_push(rt, me, queued_bit);\n    local.push(t);\n    woke @@
logic-clear-keeps-the-owner-record @@ src/handoff.rs @@ @@ *queued_bit = false; @@  @@
logic-found-work-no-recheck @@ src/handoff.rs @@ @@ recheck().and_then(|v| notify_parked(rt, v)) @@ None @@
logic-leave-parked-keeps-its-count @@ src/idle.rs @@ @@ let prev = Counts::of(self.state.fetch_sub(1, Ordering::SeqCst)); @@ let prev = Counts::of(self.state.load(Ordering::SeqCst)); @@
EOF
)

# Applies one mutation to $SCRATCH/$file; prints an error and fails when
# the pattern is missing or ambiguous.
apply() {
    python3 - "$SCRATCH/$1" "$2" "$3" "$4" <<'PY'
import sys
path, occ, pat, rep = sys.argv[1:5]
pat = pat.replace("\\n", "\n")
rep = rep.replace("\\n", "\n")
s = open(path).read()
idx, i = [], s.find(pat)
while i >= 0:
    idx.append(i)
    i = s.find(pat, i + 1)
if not idx:
    sys.exit(f"pattern not found: {pat!r}")
if occ == "":
    if len(idx) != 1:
        sys.exit(f"pattern occurs {len(idx)} times, give an occurrence: {pat!r}")
    at = idx[0]
else:
    n = int(occ)
    if n > len(idx):
        sys.exit(f"occurrence {n} of {len(idx)}: {pat!r}")
    at = idx[n - 1]
open(path, "w").write(s[:at] + rep + s[at + len(pat):])
PY
}

# The scratch copy: tracked and untracked-not-ignored files of the working
# tree, with new mtimes (`tar -m`): a file kept with its old mtime looks
# older than the scratch's last build to cargo, which would then test a
# stale build of it.
sync_scratch() {
    mkdir -p "$SCRATCH"
    (cd "$ROOT" && git ls-files -co --exclude-standard -z) |
        (cd "$ROOT" && tar --null -cf - -T -) | tar -xmf - -C "$SCRATCH"
}

trim() { sed 's/^ *//; s/ *$//'; }

# Regenerates the README table from $OUT.
write_table() {
    echo "$MUTATIONS" | awk -F'@@' '{gsub(/ /, "", $1); print $1}' >"$SCRATCH.order"
    # The notes as the list has them now (a note added after a run counts).
    echo "$MUTATIONS" | awk -F'@@' '{gsub(/ /, "", $1); n = $6; sub(/^ +/, "", n); sub(/ +$/, "", n); print $1 "\t" n}' >"$SCRATCH.notes"
    python3 - "$OUT" "$ROOT/loom-tests/README.md" "$SCRATCH.order" "$SCRATCH.notes" <<'PY'
import sys
out, readme, order, notes_file = sys.argv[1:5]
notes = {}
for line in open(notes_file):
    name, _, note = line.rstrip("\n").partition("\t")
    if note:
        notes[name] = note
rows = {}
for line in open(out):
    f = line.rstrip("\n").split("\t")
    if len(f) >= 5:
        rows[f[0]] = f   # the last run of a mutation wins
# In the order of the list; rows of mutations no longer listed are dropped.
names = [n for n in open(order).read().split() if n]
rows = {n: rows[n] for n in names if n in rows}
begin, end = "<!-- mutate.sh: begin -->", "<!-- mutate.sh: end -->"
t = ["| mutation | file | change | result | caught by / note |", "| --- | --- | --- | --- | --- |"]
for name, f in rows.items():
    _, file, change, result, detail = f[:5]
    if result == "NOT caught" and name in notes:
        detail = notes[name]
    if result == "NOT caught" and not detail:
        detail = "**open**: no model catches it, and the site has no proof that the weaker form is enough"
    t.append(f"| `{name}` | `{file}` | {change} | {result} | {detail} |")
s = open(readme).read()
a, b = s.index(begin) + len(begin), s.index(end)
open(readme, "w").write(s[:a] + "\n" + "\n".join(t) + "\n" + s[b:])
PY
}

# `scripts/mutate.sh --table`: only regenerate the README table.
if [ "$FILTER" = "--table" ]; then
    mkdir -p "$(dirname "$SCRATCH")"
    write_table
    exit 0
fi

sync_scratch
echo "mutate.sh: baseline (no mutation) in $SCRATCH" >&2
if ! (cd "$SCRATCH" && scripts/loom.sh >/dev/null 2>&1); then
    echo "mutate.sh: the unmutated suite fails or does not build; fix that first" >&2
    exit 1
fi

echo "$MUTATIONS" | while IFS= read -r line; do
    [ -z "$line" ] && continue
    name=$(echo "$line" | awk -F'@@' '{print $1}' | trim)
    echo "$name" | grep -Eq -- "$FILTER" || continue
    file=$(echo "$line" | awk -F'@@' '{print $2}' | trim)
    occ=$(echo "$line" | awk -F'@@' '{print $3}' | trim)
    pat=$(echo "$line" | awk -F'@@' '{print $4}' | trim)
    rep=$(echo "$line" | awk -F'@@' '{print $5}' | trim)
    note=$(echo "$line" | awk -F'@@' '{print $6}' | trim)
    if [ -z "$rep" ]; then change="\`${pat//\\n/ }\` removed"; else change="\`${pat//\\n/ }\` → \`${rep//\\n/ }\`"; fi
    [ -n "$occ" ] && change="$change (occurrence $occ)"
    cp "$SCRATCH/$file" "$SCRATCH/$file.orig"
    if ! err=$(apply "$file" "$occ" "$pat" "$rep" 2>&1); then
        echo "mutate.sh: $name: $err" >&2
        printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$file" "$change" "ERROR" "$err" >>"$OUT"
        continue
    fi
    t0=$(date +%s)
    res=$(cd "$SCRATCH" && scripts/loom.sh 2>&1)
    rc=$?
    # Restored by a copy (a new mtime, so cargo rebuilds), from the copy
    # taken before the mutation, not from the working tree (which may have
    # moved on while this runs).
    cp "$SCRATCH/$file.orig" "$SCRATCH/$file" && rm "$SCRATCH/$file.orig"
    failing=$(echo "$res" | grep -E '^(FAILED|TIMEOUT) ' | awk '{print $1" "$2}' | sed 's/^FAILED //; s/^TIMEOUT \(.*\)/\1 (timeout)/' | paste -sd, - | sed 's/,/, /g')
    why=$(echo "$res" | grep -A1 -E '^(FAILED|TIMEOUT) ' | grep '^           ' | head -1 | trim | cut -c1-140)
    case $rc in
        0) result="NOT caught"; detail="$note" ;;
        1) result="caught"; detail="$failing: \"$why\"" ;;
        *) result="does not build"; detail="" ;;
    esac
    echo "mutate.sh: $name: $result ($(($(date +%s) - t0))s) $detail" >&2
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$file" "$change" "$result" "$detail" >>"$OUT"
done
write_table
echo "mutate.sh: results in $OUT; table written to loom-tests/README.md" >&2
