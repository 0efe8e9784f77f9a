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
#
# Logic mutations (LOGIC below: a skipped re-check, a guard dropped, a
# field not cleared, a waker not taken, a drop made twice...) are applied
# the same way, but each names the checks that should catch it (a
# checks column before the note), and only those run:
#
#   loom:FILE            scripts/loom.sh FILE (every model of that file)
#   lib:FILTER           cargo test -p hwsched --lib -- FILTER
#   libio:FILTER         the same with the I/O driver (`--features io`)
#   test:NAME            cargo test -p hwsched --test NAME
#   test:NAME:FILTER     cargo test -p hwsched --test NAME -- FILTER
#
# A test check is built first, then run under `timeout $LOGIC_TIMEOUT`
# (default 180 s; the tests' own watchdogs fail sooner, with a message),
# in $MUTATE_DIR-test-target (debug, so hwsched's debug_assert!s run).
# The logic rows are caught when a check fails or times out; their table
# is the "Logic mutations" section of loom-tests/README.md. Every check of
# the selected rows runs once unmutated first (the baseline).
#
#   MUTATE_KIND=ordering|logic|all   which list to run (default all)
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SCRATCH=${MUTATE_DIR:-/tmp/hwsched-mutate}
OUT=${MUTATE_OUT:-$ROOT/loom-tests/mutations.tsv}
export LOOM_TARGET_DIR=${LOOM_TARGET_DIR:-$SCRATCH-target}
export LOOM_MODEL_TIMEOUT=${LOOM_MODEL_TIMEOUT:-120}
export LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-3}
FILTER=${1:-.}
KIND=${MUTATE_KIND:-all}
LOGIC_TIMEOUT=${LOGIC_TIMEOUT:-180}
TEST_TARGET_DIR=${MUTATE_TEST_TARGET_DIR:-$SCRATCH-test-target}
CARGO=${CARGO:-cargo}
export CARGO

# name @@ file @@ occurrence @@ pattern @@ replacement @@ note
MUTATIONS=$(
    cat <<'EOF'
task-abort-fence @@ src/task.rs @@ 1 @@ fence(Ordering::SeqCst); @@  @@
task-abort-slot-acquire @@ src/task.rs @@ @@ self.slot.load(Ordering::Acquire) @@ self.slot.load(Ordering::Relaxed) @@ Needed in C11 (the abort's lock of the shard must come after register's unlock, which the Release/Acquire on the slot orders); loom cannot show it: its mutex order is the execution order, so a key read from the slot always finds its entry.
task-publish-slot-release @@ src/task.rs @@ @@ self.slot.store(key.pack(), Ordering::Release) @@ self.slot.store(key.pack(), Ordering::Relaxed) @@ The other half of task-abort-slot-acquire: not checkable in loom for the same reason.
task-publish-fence @@ src/task.rs @@ 2 @@ fence(Ordering::SeqCst); @@  @@
task-no-recheck @@ src/task.rs @@ @@ if unsafe { this.meta.as_ref() }.recheck_aborted() { @@ if false { @@
shared-bury-fence @@ src/sched/shutdown.rs @@ 1 @@ fence(Ordering::SeqCst); @@  @@
shared-close-fence @@ src/sched/shutdown.rs @@ 2 @@ fence(Ordering::SeqCst); @@  @@
shared-bury-no-reap @@ src/sched/shutdown.rs @@ @@ if self.reaper_done.load(Ordering::Relaxed) { @@ if false && self.reaper_done.load(Ordering::Relaxed) { @@
shared-wait-before-cancel @@ src/sched/shutdown.rs @@ @@     drain_inboxes();\n    wake_waiting(); @@     wait_running();\n    let wait_running = || {};\n    drain_inboxes();\n    wake_waiting(); @@
idle-to-searching-seqcst @@ src/sched/sleepers.rs @@ @@ fetch_add(SEARCHING_ONE, Ordering::SeqCst) @@ fetch_add(SEARCHING_ONE, Ordering::Relaxed) @@ Not needed (proof at the site): the increment publishes and acquires nothing; the fence of the last searcher leaving carries the store-buffering (src/sched/README.md, "Orderings"). Kept: one `lock xadd` on x86 either way.
idle-leave-searching-seqcst @@ src/sched/sleepers.rs @@ @@ fetch_sub(SEARCHING_ONE, Ordering::SeqCst) @@ fetch_sub(SEARCHING_ONE, Ordering::Relaxed) @@ Not needed (proof at the site): the fence after it carries the store-buffering, and coherence keeps the count from going below zero.
idle-leave-searching-fence @@ src/sched/sleepers.rs @@ 1 @@ fence(Ordering::SeqCst); @@  @@
idle-needs-wake-fence @@ src/sched/sleepers.rs @@ 2 @@ fence(Ordering::SeqCst); @@  @@
idle-needs-wake-load @@ src/sched/sleepers.rs @@ 1 @@ self.state.load(Ordering::SeqCst) @@ self.state.load(Ordering::Relaxed) @@ Not needed: a relaxed load after the SeqCst fence carries the store-buffering argument (comment at the site). A plain load on x86 either way.
idle-wake-one-load @@ src/sched/sleepers.rs @@ 2 @@ self.state.load(Ordering::SeqCst) @@ self.state.load(Ordering::Relaxed) @@ Not needed: callers have just made needs_wake's fenced load on this thread (read-read coherence), and a stale value only fails the CAS (comment at the site).
idle-wake-one-cas @@ src/sched/sleepers.rs @@ 1 @@ Ordering::SeqCst,\n                Ordering::SeqCst, @@ Ordering::Relaxed,\n                Ordering::Relaxed, @@ Not needed for correctness (proof at the site): its acquire lets the first take find the bit (chain 1); without it the fence after the undo acquires the decrement the CAS read, and the next lap finds the bit. Kept: one `lock cmpxchg` on x86 either way.
idle-wake-one-take @@ src/sched/sleepers.rs @@ 1 @@ self.parked.take(span, near, Ordering::SeqCst) @@ self.parked.take(span, near, Ordering::Relaxed) @@ Needed in C11 for its release (chain 2: the woken worker's `leave_parked` acquires the claim through this clear, so the worker's decrements of `state` follow the claim's increments). Loom cannot show it: every write to `state` and to the bitmaps is an RMW, and loom orders the RMWs on one word in the order they run, so the worker's decrements already follow the claim.
idle-wake-one-undo @@ src/sched/sleepers.rs @@ 1 @@ fetch_sub(SEARCHING_ONE + 1, Ordering::SeqCst) @@ fetch_sub(SEARCHING_ONE + 1, Ordering::Relaxed) @@ Not needed (proof at the site): the load after it reads it or a later value by coherence, and it publishes nothing.
idle-wake-one-undo-fence @@ src/sched/sleepers.rs @@ 3 @@ fence(Ordering::SeqCst); @@  @@ Needed in C11 for its acquire (chain 3), for progress only: without it the load after the undo may not yet show a worker that cleared its own bit as awake, and the waker claims again until it does; no wake is lost (the store-buffering is not this fence's). Loom cannot show it: it orders the RMWs on `state` in the order they run, so the undo already follows that worker's count.
idle-wake-one-reload @@ src/sched/sleepers.rs @@ 3 @@ self.state.load(Ordering::SeqCst) @@ self.state.load(Ordering::Relaxed) @@ Not needed: a load after the undo's fence, which reads the undo or later (comment at the site).
idle-wake-specific-load @@ src/sched/sleepers.rs @@ 4 @@ self.state.load(Ordering::SeqCst) @@ self.state.load(Ordering::Relaxed) @@ Not needed: a stale searcher sends the caller to the pusher's check, a stale no-searcher fails the CAS (comment at the site).
idle-wake-specific-cas @@ src/sched/sleepers.rs @@ 2 @@ Ordering::SeqCst,\n                Ordering::SeqCst, @@ Ordering::Relaxed,\n                Ordering::Relaxed, @@ Not needed (proof at the site): the bit is then taken by an RMW, which reads the latest value of the word whatever the orderings, and that clear releases the claim (chain 2).
idle-wake-specific-take @@ src/sched/sleepers.rs @@ 1 @@ self.parked.remove_rmw(w, Ordering::SeqCst) @@ self.parked.remove_rmw(w, Ordering::Relaxed) @@ As idle-wake-one-take (chain 2).
idle-wake-specific-undo @@ src/sched/sleepers.rs @@ 2 @@ fetch_sub(SEARCHING_ONE + 1, Ordering::SeqCst) @@ fetch_sub(SEARCHING_ONE + 1, Ordering::Relaxed) @@ Not needed (proof at the site): the caller's pusher check (its fence, then a load that reads this undo or later) orders it.
idle-to-parked-bit @@ src/sched/sleepers.rs @@ @@ self.parked.insert_rmw(w, Ordering::SeqCst) @@ self.parked.insert_rmw(w, Ordering::Relaxed) @@ Not needed (proof at the site): the decrement after it releases the bit (chain 1), and there is nothing to acquire.
idle-to-parked-count @@ src/sched/sleepers.rs @@ @@ self.state.fetch_sub(d, Ordering::SeqCst) @@ self.state.fetch_sub(d, Ordering::Relaxed) @@ Needed in C11 for its release (chain 1), for progress: a claim that does not see the bit undoes and claims again until it does. Loom cannot show it in these models: the waker acquires the bit through the worker's fence (a last searcher) or its own earlier acquire of `state`.
idle-to-parked-fence @@ src/sched/sleepers.rs @@ 4 @@ fence(Ordering::SeqCst); @@  @@
idle-leave-parked-count @@ src/sched/sleepers.rs @@ @@ self.state.fetch_add(1, Ordering::SeqCst) @@ self.state.fetch_add(1, Ordering::Relaxed) @@ Not needed (proof at the site): the clear after it releases it (chain 3).
idle-leave-parked-bit @@ src/sched/sleepers.rs @@ 2 @@ self.parked.remove_rmw(w, Ordering::SeqCst) @@ self.parked.remove_rmw(w, Ordering::Relaxed) @@ Needed in C11 both ways (chains 2 and 3, proof at the site). Loom cannot show either: it orders the RMWs on one word in the order they run, so the worker's decrements already follow the claim, and a waker's undo already follows the worker's count.
idle-leave-parked-undo @@ src/sched/sleepers.rs @@ @@ self.state.fetch_sub(1, Ordering::SeqCst) @@ self.state.fetch_sub(1, Ordering::Relaxed) @@ Not needed (proof at the site): it follows the claim by chain 2, and publishes nothing.
idle-find-queued-scan @@ src/sched/sleepers.rs @@ @@ .scan(span.clone(), Ordering::SeqCst, Some(skip), f) @@ .scan(span.clone(), Ordering::Relaxed, Some(skip), f) @@ Not needed (proof at the site): loads after the re-checker's SeqCst fence see every store made before a pusher's fence that precedes it in the fences' order, relaxed or not. A plain load on x86 either way.
park-notify-acqrel-release @@ src/sched/park.rs @@ @@ fetch_or(NOTIFIED, Ordering::AcqRel) @@ fetch_or(NOTIFIED, Ordering::Release) @@
park-notify-acqrel-acquire @@ src/sched/park.rs @@ @@ fetch_or(NOTIFIED, Ordering::AcqRel) @@ fetch_or(NOTIFIED, Ordering::Acquire) @@
park-prepare-fetch-and @@ src/sched/park.rs @@ @@ fetch_and(!NOTIFIED, Ordering::AcqRel) @@ fetch_and(!NOTIFIED, Ordering::Relaxed) @@
park-is-notified @@ src/sched/park.rs @@ @@ self.state.load(Ordering::Acquire) & NOTIFIED != 0\n @@ self.state.load(Ordering::Relaxed) & NOTIFIED != 0\n @@ Not needed: a spin that sees the bit returns `Woken`, and the next wait's `prepare` consumes the token with an AcqRel RMW before it checks the inbox (comment at the site). Kept: a plain load on x86 either way.
park-parked-fetch-or @@ src/sched/park.rs @@ 1 @@ fetch_or(PARKED, Ordering::AcqRel) @@ fetch_or(PARKED, Ordering::Relaxed) @@ Not needed alone: the final `swap(0, AcqRel)` reads every notify so far and acquires before the caller's inbox check, and a notifier that reads PARKED takes the mutex the worker holds (comment at the site); the swap carries it (`park-final-swap` is caught). Kept: an RMW costs the same on x86.
park-poll-park-fetch-or @@ src/sched/park.rs @@ 2 @@ fetch_or(PARKED, Ordering::AcqRel) @@ fetch_or(PARKED, Ordering::Relaxed) @@ As park-parked-fetch-or: the swaps after it carry the acquire (`park-poll-park-early-swap` and `park-poll-park-final-swap` are caught).
park-poll-park-resume-load @@ src/sched/park.rs @@ @@         if self.state.load(Ordering::Acquire) & NOTIFIED == 0 { @@         if self.state.load(Ordering::Relaxed) & NOTIFIED == 0 { @@ Not needed: the final swap acquires before the inbox check (comment at the site).
park-poll-park-waker-after-unlock @@ src/sched/park.rs @@ @@             *slot = Some(waker.clone());\n            return Poll::Pending; @@             drop(slot);\n            *self.lock.lock() = Some(waker.clone());\n            return Poll::Pending; @@
park-poll-park-sleeps-on-token @@ src/sched/park.rs @@ @@             if prev & NOTIFIED != 0 {\n                drop(slot); @@             if false && prev & NOTIFIED != 0 {\n                drop(slot); @@
park-wait-loop-load @@ src/sched/park.rs @@ @@ while self.state.load(Ordering::Acquire) & NOTIFIED == 0 @@ while self.state.load(Ordering::Relaxed) & NOTIFIED == 0 @@ Not needed: the final swap acquires before the caller's inbox check (comment at the site).
park-final-swap @@ src/sched/park.rs @@ 1 @@ self.state.swap(0, Ordering::AcqRel) @@ self.state.swap(0, Ordering::Relaxed) @@
park-poll-park-early-swap @@ src/sched/park.rs @@ 2 @@ self.state.swap(0, Ordering::AcqRel) @@ self.state.swap(0, Ordering::Relaxed) @@
park-poll-park-final-swap @@ src/sched/park.rs @@ 3 @@ self.state.swap(0, Ordering::AcqRel) @@ self.state.swap(0, Ordering::Relaxed) @@
handoff-deliver-queued @@ src/sched/push.rs @@ @@ rt.sleepers().queued.insert_rmw(to, Ordering::AcqRel) @@ rt.sleepers().queued.insert_rmw(to, Ordering::Relaxed) @@
handoff-deliver-to-woken-queued @@ src/sched/push.rs @@ @@ rt.sleepers().queued.insert_rmw(w, Ordering::AcqRel) @@ rt.sleepers().queued.insert_rmw(w, Ordering::Relaxed) @@
worker-take-queued @@ src/sched/push.rs @@ @@ rt.sleepers().queued.remove(me, Ordering::AcqRel) @@ rt.sleepers().queued.remove(me, Ordering::Relaxed) @@
blocking-woken-release @@ src/blocking.rs @@ @@ self.woken.store(true, Ordering::Release) @@ self.woken.store(true, Ordering::Relaxed) @@ Test code: the waker of blocking.rs's test helper `tests::block_on`, not the pool (the pool hands tasks to its threads under a `std` mutex and condvar, with no atomic ordering to check). Needed there as in block-on-woken-release; not modelled.
blocking-woken-acquire @@ src/blocking.rs @@ @@ w.woken.swap(false, Ordering::Acquire) @@ w.woken.swap(false, Ordering::Relaxed) @@ Test code, as blocking-woken-release.
block-on-woken-release @@ src/runtime/block_on.rs @@ @@ let _ = self.0.swap(true, Ordering::Release); @@ let _ = self.0.swap(true, Ordering::Relaxed); @@
block-on-woken-acquire @@ src/runtime/block_on.rs @@ @@ while !self.0.swap(false, Ordering::Acquire) @@ while !self.0.swap(false, Ordering::Relaxed) @@
slot-put-release @@ src/sched/queue.rs @@ @@ self.p.store(new, Ordering::Release); @@ self.p.store(new, Ordering::Relaxed); @@ Needed in C11 (a thief that swaps the pointer out then uses the task it stands for); loom does not track the plain memory behind the pointer, so the lifo models cannot show it.
slot-replace-release @@ src/sched/queue.rs @@ @@ self.p.swap(new, Ordering::Release) @@ self.p.swap(new, Ordering::Relaxed) @@ As slot-put-release.
slot-take-acquire @@ src/sched/queue.rs @@ @@ self.p.swap(std::ptr::null_mut(), Ordering::Acquire) @@ self.p.swap(std::ptr::null_mut(), Ordering::Relaxed) @@ The other half of slot-put-release: not checkable in loom for the same reason.
block-on-take-acquire @@ src/runtime/block_on.rs @@ 2 @@ self.0.swap(false, Ordering::Acquire) @@ self.0.swap(false, Ordering::Relaxed) @@
time-lowered-fence @@ src/time/cover.rs @@ @@ fence(Ordering::SeqCst);\n        let until @@ let until @@ loom:timers @@
time-sleeper-fence @@ src/time/cover.rs @@ @@ fence(Ordering::SeqCst);\n        next.min @@ next.min @@ loom:timers @@
time-scan-acquire @@ src/time/cover.rs @@ @@ self.earliest.swap(NONE, Ordering::AcqRel) @@ self.earliest.swap(NONE, Ordering::Relaxed) @@ loom:timers @@
time-lowered-release @@ src/time/cover.rs @@ @@ self.earliest.fetch_min(tick, Ordering::AcqRel) @@ self.earliest.fetch_min(tick, Ordering::Relaxed) @@ loom:timers @@
EOF
)

# Logic mutations: name @@ file @@ occurrence @@ pattern @@ replacement @@
# checks @@ note (the checks: see the header).
LOGIC=$(
    cat <<'EOF'
logic-idle-no-recheck @@ src/sched/idle_steps.rs @@ @@ pending = rt.find_queued_work(me); @@ pending = None; @@ loom:conserve loom:idle_loop loom:queued @@
logic-idle-no-leave-parked @@ src/sched/idle_steps.rs @@ @@ if pass.announced { @@ if false && pass.announced { @@ loom:conserve loom:idle_loop loom:queued @@
logic-idle-leave-parked-answer-ignored @@ src/sched/idle_steps.rs @@ @@ *w.parts().1 = rt.sleepers().leave_parked(me); @@ let _ = rt.sleepers().leave_parked(me); @@ loom:conserve loom:idle_loop loom:queued @@
logic-idle-no-pending-steal @@ src/sched/idle_steps.rs @@ @@ if let Some(v) = pass.pending { @@ if let Some(v) = pass.pending.filter(|_| false) { @@ loom:conserve loom:idle_loop loom:queued @@
logic-idle-pending-no-wake-for-the-rest @@ src/sched/idle_steps.rs @@ @@ if let Some(u) = left { @@ if let Some(u) = left.filter(|_| false) { @@ loom:conserve loom:idle_loop loom:queued @@
logic-idle-walk-skips-found-work @@ src/sched/idle_steps.rs @@ 1 @@ found_work(rt, w);\n                w.exit_idle(period.idle_since @@ w.exit_idle(period.idle_since @@ loom:conserve loom:idle_loop loom:queued @@
logic-idle-inbox-skips-found-work @@ src/sched/idle_steps.rs @@ @@ w.count(Event::InboxPull);\n            found_work(rt, w); @@ w.count(Event::InboxPull); @@ loom:conserve loom:idle_loop loom:queued @@
logic-idle-never-searches-at-start @@ src/sched/idle_steps.rs @@ 1 @@ *searching = rt.sleepers().to_searching(); @@ let _ = &searching; @@ loom:conserve loom:idle_loop loom:queued @@ Benign for conservation (argued): a worker that does not search still announces its sleep with no searcher left after it and re-checks the `queued` set (step 3), so work is found; it only finds it later. The searcher cap makes the same worker in the models (`a_non_searcher_parks_as_the_last_searcher_leaves`).
logic-idle-never-searches-after-a-wait @@ src/sched/idle_steps.rs @@ 2 @@ *searching = rt.sleepers().to_searching(); @@ let _ = &searching; @@ loom:conserve loom:idle_loop loom:queued @@ Benign for conservation, as logic-idle-never-searches-at-start.
logic-idle-kick-note-dropped @@ src/sched/idle_steps.rs @@ @@ .or_else(|| rt.mailbox(me).take_kick()); @@ ; @@ loom:conserve loom:idle_loop loom:queued @@ Benign for conservation (argued): a worker is kicked by a pusher's `wake_one`, whose claim counts it searching (`leave_parked` returns true), so it walks anyway; the note only says where to look first.
logic-idle-take-own-skipped @@ src/sched/idle_steps.rs @@ @@ if let Some(t) = w.take_own() { @@ if let Some(t) = w.take_own().filter(|_| false) { @@ loom:conserve loom:idle_loop loom:queued @@ Not reached by these models (their workers make no wakes while they sleep: only a worker sleeping in the I/O driver does). Caught by `tests/io.rs` (the driver's wakes stay in the LIFO slot of a worker that goes back to sleep: the tests' watchdogs fail).
logic-push-check-before-push @@ src/sched/push.rs @@ @@ local.push(t);\n    after_push(rt, me, queued_bit) @@ let woke = after_push(rt, me, queued_bit);\n    local.push(t);\n    woke @@ loom:conserve loom:idle_loop loom:queued @@
logic-clear-keeps-the-owner-record @@ src/sched/push.rs @@ @@ *queued_bit = false; @@ @@ loom:conserve loom:idle_loop loom:queued @@
logic-found-work-no-recheck @@ src/sched/push.rs @@ @@ recheck().and_then(|v| notify_parked(rt, v)) @@ None @@ loom:conserve loom:idle_loop loom:queued @@
logic-domain-push-no-check @@ src/sched/place_queue.rs @@ @@         return None;\n    }\n    wake_member(rt, dq, q, near) @@         return None;\n    }\n    let _ = near;\n    None @@ loom:domain @@
logic-domain-no-recheck @@ src/sched/idle_steps.rs @@ @@ Some(dq) => !place_queue::recheck(dq, me, none_left), @@ Some(_) => true, @@ loom:domain @@
logic-domain-recheck-no-fence @@ src/sched/place_queue.rs @@ @@     if !fenced { @@     if false && !fenced { @@ loom:domain @@
logic-domain-push-no-fence @@ src/sched/place_queue.rs @@ 2 @@ fence(Ordering::SeqCst); @@  @@ loom:domain @@
logic-domain-no-left-behind @@ src/sched/idle_steps.rs @@ @@ place_queue::left_behind(rt, dq, me, |x| rt.count_wake(me, Some(x))); @@ let _ = dq; @@ loom:domain_handover @@
logic-domain-left-behind-no-fence @@ src/sched/place_queue.rs @@ 4 @@ fence(Ordering::SeqCst); @@  @@ loom:domain_handover @@ Needed in C11, not reached by the model at bound 3: a worker claimed for the queue sees the count without it (the push and the claim happened before its wake), but its look at the `parked` bits must see a worker of the domain that announced its sleep before the pusher's fence and so missed the count in its re-check (the pusher claimed another); that bit is ordered before this look only through the fences' total order (the pusher's fence happens before this one).
logic-found-work-ignores-own-inbox @@ src/sched/idle_steps.rs @@ @@ || !local.is_empty() || !inbox.is_empty(), @@ || !local.is_empty(), @@ loom:domain_handover @@
logic-domain-pass-skips-place-queues @@ src/sched/idle_steps.rs @@ @@ if let Some(t) = take_placed(rt, w) {\n            found_work(rt, w); @@ if let Some(t) = None::<T> {\n            found_work(rt, w); @@ loom:domain @@ Benign (argued): a worker whose re-check finds a place queue's task does not sleep, and takes it after its wait (`after_wait`'s look at its own queues, then its place queues); a worker woken for one takes it there too. The pass's look only finds it a wait earlier.
logic-domain-take-nearest-only @@ src/sched/place_queue.rs @@ @@ dq.of(me).find_map(|q| pop(&dq.queues[q])) @@ dq.of(me).take(1).find_map(|q| pop(&dq.queues[q])) @@ loom:domain_levels @@
logic-domain-recheck-nearest-only @@ src/sched/place_queue.rs @@ @@                 .of(w)\n                .any(|q| @@                 .of(w)\n                .take(1)\n                .any(|q| @@ loom:domain_levels @@
logic-domain-left-behind-nearest-only @@ src/sched/place_queue.rs @@ @@ for q in dq.of(me) { @@ for q in dq.of(me).take(1) { @@ loom:domain_handover @@
logic-domain-claim-not-undone @@ src/sched/sleepers.rs @@ @@         self.state.fetch_sub(SEARCHING_ONE + 1, Ordering::SeqCst);\n        on_undo(); @@         on_undo(); @@ loom:domain_levels loom:domain @@
logic-domain-undo-no-recheck @@ src/sched/sleepers.rs @@ @@         on_undo();\n        None @@         let _ = on_undo;\n        None @@ loom:domain_handover @@
logic-domain-wake-take-other-span @@ src/sched/sleepers.rs @@ @@ if let (Some(w), _) = self.parked.take(span, near, Ordering::SeqCst) { @@ if let (Some(w), _) = self.parked.take(&(span.start..span.start + 1), near, Ordering::SeqCst) { @@ loom:domain_levels loom:domain @@
logic-leave-parked-keeps-its-count @@ src/sched/sleepers.rs @@ @@ let prev = Counts::of(self.state.fetch_sub(1, Ordering::SeqCst)); @@ let prev = Counts::of(self.state.load(Ordering::SeqCst)); @@ loom:conserve loom:idle_loop loom:queued @@
logic-found-work-batch-unmarked @@ src/sched/push.rs @@ @@ if holds_more() {\n        after_push(rt, me, queued_bit) @@ if holds_more() {\n        let _ = &queued_bit;\n        notify_parked(rt, me) @@ loom:asleep @@
logic-placed-awake-no-check @@ src/sched/push.rs @@ @@ WakeSpecific::Awake => Placed::Delivered(deliver(rt, c, t)), @@ WakeSpecific::Awake => Placed::Delivered({\n            let _ = rt.mailbox(c).deliver_or_drain(t, rt.shutdown(), |t| rt.bury(t));\n            rt.sleepers().queued.insert_rmw(c, Ordering::AcqRel);\n            Delivery::Queued(None)\n        }), @@ loom:conserve loom:idle_loop loom:queued @@
logic-deliver-to-woken-no-check @@ src/sched/push.rs @@ @@     let _ = notify_parked(rt, w);\n    n @@     n @@ loom:queued loom:conserve @@
logic-wake-one-undo-no-recheck @@ src/sched/sleepers.rs @@ @@ spin_loop();\n            // SeqCst, but Relaxed would do: after the fence, and it reads @@ return (None, words);\n            // SeqCst, but Relaxed would do: after the fence, and it reads @@ loom:asleep @@
logic-idle-pending-rest-only-at-victim @@ src/sched/idle_steps.rs @@ @@ } else {\n                        rt.find_queued_work(me)\n                    }; @@ } else {\n                        None\n                    }; @@ loom:conserve loom:idle_loop loom:queued @@
idle-scan-first-word-only @@ src/sched/sleepers.rs @@ @@ w += k; @@ break; @@ lib:idle::tests test:wide_llc @@
idle-scan-reads-word-zero @@ src/sched/sleepers.rs @@ @@ let mut v = self.words[wi as usize].load(order) & mask; @@ let mut v = self.words[0].load(order) & mask; @@ lib:idle::tests test:wide_llc @@
idle-find-no-wrap @@ src/sched/sleepers.rs @@ @@ for seg in [first, second] { @@ for seg in [first] { @@ lib:idle::tests test:wide_llc @@
idle-claim-awake-idle-first-word @@ src/sched/sleepers.rs @@ @@ let wi = (first + i) % words; @@ let wi = first; @@ lib:idle::tests test:wide_llc @@ A placement hint (the idle mask, sched/sleepers.rs): a spawn that misses an awake idle worker of another word falls through to the pusher's check and a parked worker's wake, so tests/wide_llc.rs passes; the unit test catches the scan.
task-model-no-abort-order @@ src/task.rs @@ 1 @@ self.state_order.fetch_add(1, Ordering::AcqRel); @@ let _ = (); @@ loom:abort loom:task_layer @@ The loom stand-in (cfg(loom)) for the order async-task's state word gives an abort's wake and the next poll's run: without it the re-check after a Pending has nothing to order it.
task-model-no-run-order @@ src/task.rs @@ @@ unsafe { this.meta.as_ref() }.model_run(); @@ let _ = (); @@ loom:abort loom:task_layer @@ The other half of task-model-no-abort-order (the run's read-modify-write).
task-abort-flag-not-set @@ src/task.rs @@ @@ self.aborted.store(true, Ordering::Relaxed); @@ self.aborted.store(false, Ordering::Relaxed); @@ loom:abort loom:task_layer test:task_layer @@
task-abort-no-registry-wake @@ src/task.rs @@ @@ registry.wake(SlotKey::unpack(slot)); @@ let _ = SlotKey::unpack(slot); @@ loom:abort loom:task_layer test:task_layer @@
task-publish-ignores-abort @@ src/task.rs @@ 1 @@ self.aborted.load(Ordering::Relaxed) @@ false @@ loom:abort loom:task_layer test:task_layer @@
task-register-forgets-its-key @@ src/task.rs @@ @@ self.slot = Some(key); @@  @@ loom:abort loom:task_layer test:task_layer @@
task-register-closed-no-wake @@ src/task.rs @@ @@ None => waker.wake_by_ref(), @@ None => {} @@ loom:abort loom:task_layer test:task_layer @@
task-is-aborted-always-false @@ src/task.rs @@ 3 @@ self.aborted.load(Ordering::Relaxed) @@ false @@ loom:abort loom:task_layer test:task_layer @@
task-done-not-set @@ src/task.rs @@ @@ this.done = true; @@  @@ test:task_layer @@
task-drop-done-inverted @@ src/task.rs @@ @@ if !self.done { @@ if self.done { @@ test:task_layer @@
task-output-into-inner-drops-twice @@ src/task.rs @@ @@ let mut this = ManuallyDrop::new(self); @@ let mut this = self; @@ loom:task_layer test:task_layer @@
task-output-drop-leaks @@ src/task.rs @@ @@ unsafe { ManuallyDrop::drop(&mut self.0) } @@ () @@ loom:task_layer test:task_layer @@
task-completion-leaks-the-future @@ src/task.rs @@ @@ unsafe { ManuallyDrop::drop(&mut this.inner) } @@ () @@ test:task_layer @@
task-superseded-value-leaked @@ src/task.rs @@ @@ drop_catching(v); @@ std::mem::forget(v); @@ test:task_layer @@
task-drop-keeps-registry-slot @@ src/task.rs @@ @@ registry.remove(key); @@ let _ = key; @@ loom:abort loom:task_layer test:task_layer @@
task-join-handle-noop-waker @@ src/task.rs @@ @@ match Pin::new(task).poll(cx) { @@ match Pin::new(task).poll(&mut Context::from_waker(Waker::noop())) { @@ loom:task_layer test:task_layer @@
task-join-handle-keeps-task-after-ready @@ src/task.rs @@ @@ self.task = None; @@  @@ test:task_layer @@
task-join-handle-drop-cancels @@ src/task.rs @@ @@ t.detach(); @@ drop(t); @@ loom:task_layer test:task_layer @@
task-close-leaves-registry-open @@ src/task.rs @@ @@ s.closed = true; @@  @@ loom:abort loom:task_layer test:task_layer @@
task-remove-keeps-generation @@ src/task.rs @@ @@ slot.0 = (slot.0 + 1) & 0x7FFF; @@  @@ loom:abort loom:task_layer test:task_layer @@ Benign: a key kept past its task's end (an abort of a finished task, whose slot was published) then names the slot's next task, and `Registry::wake` wakes that task spuriously; a spurious wake is allowed by the `Future` contract (the task polls, finds nothing, returns `Pending`), and the abort flag it acts on is the first task's, not the second's. The generation keeps such wakes rare, not correct.
worker-polls-aborted-task @@ src/worker/mod.rs @@ @@ if meta.is_aborted() { @@ if false { @@ test:task_layer @@
blocking-runs-aborted-task @@ src/blocking.rs @@ @@ if r.metadata().is_aborted() { @@ if false { @@ lib:blocking::tests test:task_layer @@
block-on-unpark-before-flag @@ src/runtime/block_on.rs @@ @@ self.set();\n        unpark(); @@ unpark();\n        self.set(); @@ loom:block_on loom:task_layer test:task_layer @@
block-on-wake-without-flag @@ src/runtime/block_on.rs @@ @@ self.set();\n        unpark(); @@ unpark(); @@ loom:block_on loom:task_layer test:task_layer @@
block-on-wait-parks-once @@ src/runtime/block_on.rs @@ @@ while !self.0.swap(false, Ordering::Acquire) { @@ if !self.0.swap(false, Ordering::Acquire) { @@ loom:block_on test:task_layer @@
block-on-flag-not-consumed @@ src/runtime/block_on.rs @@ @@ while !self.0.swap(false, Ordering::Acquire) { @@ while !self.0.load(Ordering::Acquire) { @@ loom:block_on test:task_layer @@
block-on-local-unpark-before-flag @@ src/runtime/block_on.rs @@ @@ self.queue.lock().push_back(t);\n        self.ready.wake(unpark); @@ self.queue.lock().push_back(t);\n        unpark();\n        self.ready.set(); @@ loom:block_on test:block_on_local @@
block-on-wait-any-ignores-locals @@ src/runtime/block_on.rs @@ @@ let local = locals.take(); @@ let local = false; @@ loom:block_on test:block_on_local @@
block-on-locals-not-closed @@ src/runtime/block_on.rs @@ @@ l.close();\n @@ \n @@ test:block_on_local @@
block-on-local-runs-after-shutdown @@ src/runtime/block_on.rs @@ @@ let shut_down = keep.is_shutdown(); @@ let shut_down = false; @@ test:block_on_local @@
join-set-entry-queued-twice @@ src/runtime/join_set.rs @@ @@ if st.closed || self.queued.load(Ordering::Relaxed) { @@ if st.closed { @@ loom:join_set lib:join_set test:task_layer test:embedding:join_set @@ Benign: an entry woken while on the list goes on it a second time; `join_next` pops the copy and polls a handle that is already joined (its slot is empty: skipped) or still pending (one extra poll with the same waker). The `queued` flag bounds the list to one entry per task, so that a task woken many times costs one pop: a cost, not a correctness, check.
join-set-flag-not-cleared @@ src/runtime/join_set.rs @@ @@ e.queued.store(false, Ordering::Relaxed); @@  @@ loom:join_set lib:join_set test:task_layer test:embedding:join_set @@
join-set-waiter-not-taken @@ src/runtime/join_set.rs @@ @@ st.waiter.take() @@ None::<Waker> @@ lib:join_set test:task_layer test:embedding:join_set @@
join-set-waiter-not-stored @@ src/runtime/join_set.rs @@ @@ w => *w = Some(cx.waker().clone()), @@ _ => {} @@ lib:join_set test:task_layer test:embedding:join_set @@
join-set-insert-not-queued @@ src/runtime/join_set.rs @@ @@ waker.wake_by_ref();\n        let slot = Some(Slot { @@ let slot = Some(Slot { @@ lib:join_set test:task_layer test:embedding:join_set @@
join-set-drop-does-not-abort @@ src/runtime/join_set.rs @@ @@ self.abort_all(); @@  @@ lib:join_set test:task_layer test:embedding:join_set @@
join-set-drop-not-closed @@ src/runtime/join_set.rs @@ @@ st.closed = true; @@  @@ lib:join_set test:task_layer test:embedding:join_set @@
join-set-len-not-decremented @@ src/runtime/join_set.rs @@ @@ self.len -= 1; @@  @@ lib:join_set test:task_layer test:embedding:join_set @@
join-set-slot-not-freed @@ src/runtime/join_set.rs @@ @@ self.slots[i] = None; @@  @@ lib:join_set test:task_layer test:embedding:join_set @@
join-set-late-entry-not-skipped @@ src/runtime/join_set.rs @@ @@ if !Arc::ptr_eq(&slot.entry, &entry) { @@ if false { @@ lib:join_set test:task_layer @@ Benign: the entry of a joined task whose slot index was reused is popped after a late wake (a waker clone the old task kept), and the new task's handle is polled with the new entry's own waker (`slot.waker`): one extra poll of a handle, which returns `Pending` (registering the same waker again) or its result, which `join_next` hands out as it would have.
logic-join-set-clear-after-poll @@ src/runtime/join_set.rs @@ @@                         e.queued.store(false, Ordering::Relaxed);\n                        e\n                    }\n                    None => {\n                        match &mut st.waiter {\n                            Some(w) if w.will_wake(cx.waker()) => {}\n                            w => *w = Some(cx.waker().clone()),\n                        }\n                        return Poll::Pending;\n                    }\n                }\n            };\n            let i = entry.index;\n            // An entry of a task already taken out (a late wake): skip it.\n            let Some(slot) = self.slots.get_mut(i).and_then(Option::as_mut) else {\n                continue;\n            };\n            if !Arc::ptr_eq(&slot.entry, &entry) {\n                continue;\n            }\n            let mut tcx = Context::from_waker(&slot.waker);\n            if let Poll::Ready(r) = Pin::new(&mut slot.handle).poll(&mut tcx) { @@                         e\n                    }\n                    None => {\n                        match &mut st.waiter {\n                            Some(w) if w.will_wake(cx.waker()) => {}\n                            w => *w = Some(cx.waker().clone()),\n                        }\n                        return Poll::Pending;\n                    }\n                }\n            };\n            let i = entry.index;\n            // An entry of a task already taken out (a late wake): skip it.\n            let Some(slot) = self.slots.get_mut(i).and_then(Option::as_mut) else {\n                continue;\n            };\n            if !Arc::ptr_eq(&slot.entry, &entry) {\n                continue;\n            }\n            let mut tcx = Context::from_waker(&slot.waker);\n            let polled = Pin::new(&mut slot.handle).poll(&mut tcx);\n            entry.queued.store(false, Ordering::Relaxed);\n            if let Poll::Ready(r) = polled { @@ loom:join_set @@
logic-lifo-put-no-queued-bit @@ src/sched/push.rs @@ @@         rt.sleepers().queued.insert(me, Ordering::Relaxed);\n    }\n    None @@     }\n    None @@ loom:lifo test:conservation:a_task_woken_by @@
logic-yield-admits-nothing @@ src/worker/mod.rs @@ @@         shared.workers[self.index].mailbox.admit(&self.local);\n @@ @@ test:inbox_order @@
logic-yield-unmarked @@ src/task.rs @@ @@         crate::context::mark_yield();\n @@ @@ test:inbox_order @@
logic-lifo-recheck-skips-slot @@ src/worker/steal.rs @@ @@ has_work(shared, v) || !shared.workers[v].lifo.is_empty() @@ has_work(shared, v) @@ test:conservation:a_task_woken_by @@ The runtime's re-check (the models' `Rt::has_work` is their own).
logic-lifo-pending-steal-skips-slot @@ src/worker/idle.rs @@ @@ let r = self.shared.workers[v].lifo.take()?; @@ let r: Runnable = None?; @@ test:conservation:a_task_woken_by @@ The runtime's pending steal (the models' `Worker::steal_from` is their own).
logic-slot-take-not-exclusive @@ src/sched/queue.rs @@ @@ let old = self.p.swap(std::ptr::null_mut(), Ordering::Acquire); @@ let old = self.p.load(Ordering::Acquire);\n        self.p.store(std::ptr::null_mut(), Ordering::Relaxed); @@ loom:lifo @@
logic-slot-put-overwrites @@ src/sched/queue.rs @@ @@ if self.p.load(Ordering::Relaxed).is_null() {\n            // Release: pairs @@ if true {\n            // Release: pairs @@ test:reliability test:conservation @@
logic-inbox-take-gives-up-on-retry @@ src/sched/park.rs @@ @@                 Steal::Empty => return None,\n                Steal::Retry => continue, @@                 Steal::Empty => return None,\n                Steal::Retry => return None, @@ loom:inbox @@
logic-lifo-displaced-no-check @@ src/sched/push.rs @@ @@     push_local(rt, me, local, queued_bit, prev)\n} @@     let _ = (rt, me, queued_bit);\n    local.push(prev);\n    None\n} @@ loom:lifo @@
logic-sio-clear-orders-ticks @@ src/io/scheduled_io.rs @@ @@ (tick_of(s) == ev.tick).then_some(s & !clear) @@ (tick_of(s) <= ev.tick).then_some(s & !clear) @@ loom:readiness libio:a_clear_after_the_tick_wrapped @@
logic-sio-interest-no-recheck @@ src/io/scheduled_io.rs @@ @@         w.others[k] = (interest, Some(cx.waker().clone()));\n        let s = self.readiness.load(Ordering::Acquire);\n        if let Some(ev) = event(s, interest) {\n            return Poll::Ready(ev);\n        }\n @@         w.others[k] = (interest, Some(cx.waker().clone()));\n @@ loom:readiness @@
logic-sio-wake-first-interest-only @@ src/io/scheduled_io.rs @@ @@ for (interest, slot) in w.others.iter_mut() { @@ for (interest, slot) in w.others.iter_mut().take(1) { @@ loom:readiness @@
shutdown-no-announce @@ src/sched/shutdown.rs @@ @@ announce_shutdown(rt.flag(), rt.parkers()); @@ let _ = (rt.flag(), rt.parkers()); @@ loom:shutdown loom:pinned @@
shutdown-announce-flag-not-set @@ src/sched/shutdown.rs @@ @@ shutdown.store(true, Ordering::Relaxed); @@ shutdown.store(false, Ordering::Relaxed); @@ loom:shutdown loom:pinned @@
shutdown-announce-no-notify @@ src/sched/shutdown.rs @@ @@ let _ = p.notify(); @@ let _ = p; @@ loom:shutdown loom:pinned @@
shutdown-announce-notifies-one @@ src/sched/shutdown.rs @@ @@ for p in parkers { @@ for p in parkers.into_iter().take(1) { @@ loom:shutdown @@
shutdown-announce-notify-before-flag @@ src/sched/shutdown.rs @@ @@ shutdown.store(true, Ordering::Relaxed);\n    for p in parkers {\n        let _ = p.notify();\n    } @@ for p in parkers {\n        let _ = p.notify();\n    }\n    shutdown.store(true, Ordering::Relaxed); @@ loom:shutdown loom:pinned @@
shutdown-no-close-blocking @@ src/sched/shutdown.rs @@ @@ rt.close_blocking(); @@  @@ loom:shutdown test:embedding:shutdown_cancels_queued_blocking_calls @@
shutdown-no-join @@ src/sched/shutdown.rs @@ @@ let joined = rt.join_workers(); @@ let joined = true; @@ loom:shutdown loom:pinned @@
shutdown-join-answer-ignored @@ src/sched/shutdown.rs @@ @@ joined && waited.get() @@ waited.get() @@ test:edges:shutdown_timeout_from_inside_a_task_returns @@
shutdown-joins-its-own-worker @@ src/runtime/mod.rs @@ @@ if t.thread().id() == me { @@ if false && t.thread().id() == me { @@ test:edges:inside @@
shutdown-no-wait-running @@ src/sched/shutdown.rs @@ @@ || waited.set(rt.wait_running()), @@ || {}, @@ loom:shutdown test:embedding:shutdown_cancels_queued_blocking_calls @@
shutdown-wait-answer-ignored @@ src/sched/shutdown.rs @@ @@ || waited.set(rt.wait_running()), @@ || { let _ = rt.wait_running(); }, @@ test:embedding:shutdown_timeout_reports @@
final-drain-no-first-inbox-drain @@ src/sched/shutdown.rs @@ @@ drain_inboxes();\n    wake_waiting(); @@ wake_waiting(); @@ loom:shutdown loom:pinned @@ Benign (argued at `final_drain`): the reap loop that follows drains the inboxes in each pass, its first included, before the wait for the pool; what the first drain drops (tasks queued when the workers left) is not pending on a waker, so the wake-up between the two does not touch it, and the loop's first pass drops it as well. The first drain only drops queued tasks before the wake-up's burials.
final-drain-no-wake-waiting @@ src/sched/shutdown.rs @@ @@ wake_waiting();\n    reap_until_empty @@ reap_until_empty @@ loom:shutdown test:embedding:shutdown_cancels_the_task @@
final-drain-no-reap-before-the-wait @@ src/sched/shutdown.rs @@ @@ wake_waiting();\n    reap_until_empty(graveyard, &mut drain_inboxes, &mut drop);\n @@ wake_waiting();\n @@ loom:shutdown test:embedding:shutdown_cancels_the_task @@
final-drain-reap-loop-one-pass @@ src/sched/shutdown.rs @@ @@ if n == 0 { @@ if n == 0 || n > 0 { @@ loom:shutdown test:embedding:shutdown_cancels_the_task @@ Not caught; benign for every cascade the models and tests make (argued at `reap_until_empty`): a reap steals until the graveyard is empty, so what its own drops bury is taken by the same pass. The later passes are for a burial made by a pass's inbox drain, or one landing after the reap saw the graveyard empty (a deliverer racing the flag): with one pass it waits for the reap after the wait for the pool, which holds the shutdown to its deadline only if a blocking closure waits on that task. Not modelled: it needs a racing deliverer, a cascade from an inbox and a closure in one model.
final-drain-no-reap-after-the-wait @@ src/sched/shutdown.rs @@ @@ wait_running();\n    reap_until_empty(graveyard, &mut drain_inboxes, &mut drop); @@ wait_running(); @@ loom:shutdown @@
final-drain-no-close @@ src/sched/shutdown.rs @@ @@ graveyard.close(drop); @@ let _ = drop; @@ loom:shutdown @@
worker-loop-ignores-the-flag @@ src/sched/shutdown.rs @@ @@ if w.is_shutdown() {\n        return Idle::Shutdown;\n    } @@  @@ loom:shutdown test:runtime:shutdown test:reliability:shutdown_under_load @@
worker-exit-keeps-what-it-holds @@ src/sched/shutdown.rs @@ @@ while let Some(t) = w.take_held() { @@ while let Some(t) = None::<T> { @@ loom:shutdown test:runtime:shutdown_drops @@
worker-exit-keeps-the-private-batch @@ src/worker/mod.rs @@ @@             .or_else(|| c.local.pop())\n            .or_else(|| c.pop_batch(&self.ctx.shared)) @@             .or_else(|| c.local.pop()) @@ test:long_poll:a_shutdown_while_a_private_batch @@
final-drain-skips-place-queues @@ src/runtime/mod.rs @@ @@             + self.shared.domains.drain(drop_task) @@             + usize::from(self.shared.domains.used()) * 0 @@ test:placement_domains:domain_tasks_are_cancelled_at_shutdown @@
worker-exit-skips-the-placed @@ src/sched/shutdown.rs @@ @@ w.drop_pinned(); @@  @@ loom:pinned test:placement_api:at_shutdown @@
watch-owner-fence @@ src/sched/watch.rs @@ 1 @@ fence(Ordering::SeqCst);\n    look_soon(rt, w, me) @@ look_soon(rt, w, me) @@ loom:watch @@
watch-left-poller-fence @@ src/sched/watch.rs @@ 2 @@ fence(Ordering::SeqCst);\n    look_soon(rt, w, me) @@ look_soon(rt, w, me) @@ loom:long_poll @@
watch-before-poller-fence @@ src/sched/watch.rs @@ @@     // a parked worker.\n    fence(Ordering::SeqCst); @@     // a parked worker. @@ loom:long_poll @@ Needed in C11, as watch-sleeper-fence: the `parked` bit is set by `Sleepers::to_parked`'s SeqCst RMWs, which fence only when no searcher is left, and the poller's try-lock may be ordered before them without a fence. Loom treats the SeqCst RMWs as fencing the try-lock, so the model cannot show it (checked: the model passes without it, and deadlocks without the leaver's fence).
watch-sleeper-fence @@ src/sched/watch.rs @@ @@ fence(Ordering::SeqCst);\n    let private @@ let private @@ loom:watch @@ Needed in C11 (argued in `before_sleep`): the sleeper's `parked` bit is set by `Sleepers::to_parked`'s SeqCst RMWs, and a later Relaxed load of `private` may be ordered before them without a fence; the idle sequence's re-check fences only when no searcher is left. Loom treats those SeqCst RMWs as fencing the load, so the model cannot show it.
watch-leave-fence @@ src/sched/watch.rs @@ @@     }\n    fence(Ordering::SeqCst);\n    if w.watchers.load(Ordering::Relaxed) > 0 {\n        return None;\n    }\n    if !holds_queue @@     }\n    if w.watchers.load(Ordering::Relaxed) > 0 {\n        return None;\n    }\n    if !holds_queue @@ loom:watch @@
logic-watch-owner-never-wakes @@ src/sched/watch.rs @@ @@     if w.watchers.load(Ordering::Relaxed) > 0 {\n        return None;\n    }\n    wake_watcher(rt, w, me) @@     if w.watchers.load(Ordering::Relaxed) > 0 {\n        return None;\n    }\n    None @@ loom:watch test:io:a_batch_whose @@
logic-watch-leave-never-wakes @@ src/sched/watch.rs @@ @@     if !holds_queue && !w.any_private(Some(me)) {\n        return None;\n    }\n    wake_watcher(rt, w, me) @@     None @@ loom:watch @@
logic-watch-leave-ignores-own-queue @@ src/sched/watch.rs @@ @@ if !holds_queue && !w.any_private(Some(me)) { @@ if !w.any_private(Some(me)) { @@ loom:watch @@
logic-watch-call-not-passed @@ src/sched/watch.rs @@ @@ let owes_check = counted || called || (claimed && w.any_private(Some(me))); @@ let owes_check = counted || (claimed && w.any_private(Some(me))); @@ loom:watch @@
logic-watch-claim-ignored @@ src/sched/watch.rs @@ @@ let owes_check = counted || called || (claimed && w.any_private(Some(me))); @@ let owes_check = counted || called; @@ loom:watch @@
logic-watch-never-claims @@ src/sched/watch.rs @@ @@         if c >= MAX_WATCHERS {\n            return false; @@         if c < usize::MAX {\n            return false; @@ loom:watch test:io:a_batch_whose @@
logic-watch-no-take @@ src/worker/driven.rs @@ @@ let took = core.take_stale(shared); @@ let took = 0; @@ test:io:a_batch_whose @@
logic-watch-no-tick @@ src/worker/driven.rs @@ @@ timeout = Some(timeout.map_or(tick, |t| t.min(tick))); @@ let _ = tick; @@ test:io:a_batch_whose @@
logic-watch-stale-ignores-lifo @@ src/sched/watch.rs @@ @@ if let Some(t) = lifo.take() { @@ if let Some(t) = None::<T> { @@ loom:long_poll test:io:a_batch_whose @@ Not reachable by the suite (argued): a batch's task in the LIFO slot is the next task its owner runs (batches are dispatched between polls, and the next poll takes the slot), so a watcher finds it stale only racing that take. The slot counts as private work for the owner's check all the same: a one-task batch wakes a watcher when nobody watches, which then polls the readiness that came after the owner's turn.
logic-watch-long-poll-never @@ src/sched/watch.rs @@ @@ return ran >= long_poll_ns && on_cpu.saturating_mul(4) >= ran.saturating_mul(3); @@ return false && ran >= long_poll_ns && on_cpu >= 1; @@ loom:long_poll test:long_poll:a_private_batch_starts_elsewhere_while @@
logic-watch-long-poll-any-count @@ src/sched/watch.rs @@ @@         if self.polls.load(Ordering::Relaxed) == polls { @@         if true { @@ loom:long_poll lib:an_owner_that_keeps_polling @@ Benign for safety (every take is a swap or a steal: loom:long_poll's exactly-once holds), a policy slip: an owner that keeps polling would lose its fresh batch at every look (the watch unit test catches that).
logic-hog-never-released @@ src/worker/mod.rs @@ @@         ctx.core.borrow_mut().release_private(shared); @@         let _ = Core::release_private; @@ test:long_poll:a_private_batch_starts_elsewhere_while @@
logic-hog-never-marked @@ src/worker/mod.rs @@ @@         unsafe { (*meta).hog.store(true, Ordering::Relaxed) }; @@         let _ = meta; @@ test:long_poll:a_private_batch_starts_elsewhere_while @@
logic-yield-keeps-batch @@ src/worker/mod.rs @@ @@         if !self.batch_q.is_empty() {\n            self.release_batch(shared);\n        } @@         let _ = Self::release_batch; @@ test:long_poll:a_yield_loop_does_not_starve @@
logic-async-task-fold-no-decrement @@ vendor/async-task/src/raw.rs @@ @@ (state & !RUNNING) - REFERENCE\n @@ state & !RUNNING\n @@ test:task_layer:the_runtime_is_freed @@ The vendored poll epilogue's folded reference drop (vendor/async-task/README.hwsched.md) left out: every task that returned `Pending` leaks, and with it the runtime.
logic-async-task-fold-then-drop-ref @@ vendor/async-task/src/raw.rs @@ @@ if new & !(REFERENCE - 1) == 0 && new & TASK == 0 {\n                                    Self::destroy(ptr);\n                                } @@ let _ = new;\n                                Self::drop_ref(ptr); @@ test:reliability @@ The reference dropped twice (folded and by `drop_ref` as before the change): a task freed while still referenced.
logic-time-scan-end-lowers-nothing @@ src/time/cover.rs @@ @@         self.lowered(m)\n    } @@         Lowered {\n            wake: false,\n            sleeper: self.sleeping_until() != 0,\n        }\n    } @@ loom:timers @@
logic-time-sleeper-ignores-late-lowering @@ src/time/cover.rs @@ @@ next.min(self.earliest.load(Ordering::Relaxed))\n    } @@ next\n    } @@ loom:timers @@
logic-time-insert-never-wakes-sleeper @@ src/time/ops.rs @@ @@         if l.wake {\n            self.wake_sleeper(); @@         if false {\n            self.wake_sleeper(); @@ test:long_poll:timer_of @@
logic-time-no-scan @@ src/time/ops.rs @@ @@     if rt.cover.due(now) { @@     if false { @@ test:long_poll:timer_of @@
logic-time-sleeper-covers-own-wheel-only @@ src/time/ops.rs @@ @@         let next = rt.cover.sleep_until(theirs.unwrap_or(NONE)); @@         let next = rt.shards[me].next.load(Ordering::Relaxed).min(theirs.unwrap_or(NONE)); @@ test:long_poll:timer_of @@
logic-time-uncovered-never-asks @@ src/worker/mod.rs @@ @@         cover_timer(shared, ctx.index, tick); @@         let _ = tick; @@ test:long_poll:timer_of @@
logic-time-cancel-on-the-current-wheel @@ src/time/ops.rs @@ 2 @@ let s = &rt.shards[w]; @@ let s = &rt.shards[worker_of(rt).unwrap_or(w)]; @@ test:time_socket_edges:a_timer_dropped_on_another_worker @@
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

# Regenerates a README table from $OUT: the rows of list $1 (MUTATIONS or
# LOGIC), between the markers `<!-- mutate.sh$2: begin -->` and
# `<!-- mutate.sh$2: end -->`.
write_table() {
    local list=$1 tag=$2
    echo "$list" | awk -F'@@' '{gsub(/ /, "", $1); print $1}' >"$SCRATCH.order"
    # The notes (and checks) as the list has them now (a note added after a
    # run counts).
    if [ -n "$tag" ]; then
        echo "$list" | awk -F'@@' '{gsub(/ /, "", $1); n = $7; sub(/^ +/, "", n); sub(/ +$/, "", n); c = $6; sub(/^ +/, "", c); sub(/ +$/, "", c); print $1 "\t" n "\t" c}' >"$SCRATCH.notes"
    else
        echo "$list" | awk -F'@@' '{gsub(/ /, "", $1); n = $6; sub(/^ +/, "", n); sub(/ +$/, "", n); print $1 "\t" n "\t"}' >"$SCRATCH.notes"
    fi
    python3 - "$OUT" "$ROOT/loom-tests/README.md" "$SCRATCH.order" "$SCRATCH.notes" "$tag" <<'PY'
import sys
out, readme, order, notes_file, tag = sys.argv[1:6]
notes, checks = {}, {}
for line in open(notes_file):
    name, note, check = (line.rstrip("\n").split("\t") + ["", ""])[:3]
    if note:
        notes[name] = note
    checks[name] = check
rows = {}
for line in open(out):
    f = line.rstrip("\n").split("\t")
    if len(f) >= 5:
        rows[f[0]] = f   # the last run of a mutation wins
# In the order of the list; rows of mutations no longer listed are dropped.
names = [n for n in open(order).read().split() if n]
rows = {n: rows[n] for n in names if n in rows}
begin, end = f"<!-- mutate.sh{tag}: begin -->", f"<!-- mutate.sh{tag}: end -->"
if tag:
    t = ["| mutation | file | change | checks run | result | caught by / note |",
         "| --- | --- | --- | --- | --- | --- |"]
else:
    t = ["| mutation | file | change | result | caught by / note |", "| --- | --- | --- | --- | --- |"]
for name, f in rows.items():
    _, file, change, result, detail = f[:5]
    if result == "NOT caught" and name in notes:
        detail = notes[name]
    if result == "NOT caught" and not detail:
        detail = "**open**: no model catches it, and the site has no proof that the weaker form is enough"
    if tag:
        run = " ".join(f"`{c}`" for c in checks.get(name, "").split())
        change = change.replace("|", "\\|")
        detail = detail.replace("|", "\\|")
        t.append(f"| `{name}` | `{file}` | {change} | {run} | {result} | {detail} |")
    else:
        t.append(f"| `{name}` | `{file}` | {change} | {result} | {detail} |")
s = open(readme).read()
a, b = s.index(begin) + len(begin), s.index(end)
open(readme, "w").write(s[:a] + "\n" + "\n".join(t) + "\n" + s[b:])
PY
}

write_tables() {
    write_table "$MUTATIONS" ""
    write_table "$LOGIC" " logic"
}

# `scripts/mutate.sh --table`: only regenerate the README tables.
if [ "$FILTER" = "--table" ]; then
    mkdir -p "$(dirname "$SCRATCH")"
    write_tables
    exit 0
fi

field() { echo "$1" | awk -F'@@' -v n="$2" '{print $n}' | trim; }

# Joins the lines of stdin with ", ", naming at most three ("and N more").
first3() { awk '{a[NR] = $0} END {for (i = 1; i <= NR && i <= 3; i++) s = s (i > 1 ? ", " : "") a[i]; if (NR > 3) s = s " and " NR - 3 " more"; print s}'; }

# Runs one check of a logic row in $SCRATCH. Prints "pass", "FAIL: why", or
# "BUILD" when the mutant does not build.
run_check() {
    local c=$1 kind arg name filter out rc failing why
    kind=${c%%:*}
    arg=${c#*:}
    out=$(mktemp)
    case $kind in
        loom)
            (cd "$SCRATCH" && scripts/loom.sh "$arg") >"$out" 2>&1
            rc=$?
            if [ $rc -eq 0 ]; then
                echo pass
            elif [ $rc -eq 2 ]; then
                echo BUILD
            else
                failing=$(grep -E '^(FAILED|TIMEOUT) ' "$out" | awk '{print $1" "$2}' | sed 's/^FAILED //; s/^TIMEOUT \(.*\)/\1 (timeout)/' | first3)
                why=$(grep -A1 -E '^(FAILED|TIMEOUT) ' "$out" | grep '^           ' | head -1 | trim | cut -c1-160)
                echo "FAIL: $failing: \"$why\""
            fi
            ;;
        lib | libio | test)
            local sel=()
            if [ "$kind" = lib ] || [ "$kind" = libio ]; then
                sel=(--lib)
                [ "$kind" = libio ] && sel+=(--features io)
                filter=$arg
            else
                name=${arg%%:*}
                filter=""
                [ "$name" != "$arg" ] && filter=${arg#*:}
                sel=(--test "$name")
                # The I/O driver's test files need its feature.
                case $name in
                    io | io_emfile | signal | net_udp_unix | long_poll | time_socket_edges) sel+=(--features io) ;;
                esac
            fi
            if ! (cd "$SCRATCH" && $CARGO test -p hwsched --target-dir "$TEST_TARGET_DIR" "${sel[@]}" --no-run) >"$out" 2>&1; then
                echo BUILD
                rm -f "$out"
                return
            fi
            # shellcheck disable=SC2086 # an empty filter is no argument
            (cd "$SCRATCH" && timeout "$LOGIC_TIMEOUT" $CARGO test -p hwsched --target-dir "$TEST_TARGET_DIR" "${sel[@]}" -- $filter) >"$out" 2>&1
            rc=$?
            if [ $rc -eq 0 ]; then
                echo pass
            else
                failing=$(grep -E '^test .* \.\.\. FAILED$' "$out" | awk '{print $2}' | sed 's/.*:://' | first3)
                why=$(grep -A1 'panicked at' "$out" | grep -v 'panicked at\|^--' | head -1 | trim | cut -c1-160)
                # No panic message: a `should_panic` test that did not, or
                # the test binary killed by a signal (a double free).
                [ -z "$why" ] && why=$(grep -m1 -oE 'test did not panic as expected|panic did not contain expected string' "$out")
                [ -z "$why" ] && why=$(grep -m1 -oE 'signal: [0-9]+, SIG[A-Z]+' "$out" | sed 's/^/the test binary died (/; s/$/)/')
                if [ $rc -eq 124 ]; then
                    echo "FAIL: $c${failing:+ ($failing)}: timed out after ${LOGIC_TIMEOUT}s"
                else
                    echo "FAIL: $c${failing:+ ($failing)}: \"$why\""
                fi
            fi
            ;;
        *)
            echo "FAIL: unknown check $c"
            ;;
    esac
    rm -f "$out"
}

# Applies row $1 of list kind $2 (ordering or logic), runs the loom suite
# (ordering) or the row's checks (logic), restores the file and records
# the result.
run_row() {
    local line=$1 kind=$2 name file occ pat rep note checks change err t0 result detail
    name=$(field "$line" 1)
    file=$(field "$line" 2)
    occ=$(field "$line" 3)
    pat=$(field "$line" 4)
    rep=$(field "$line" 5)
    if [ "$kind" = logic ]; then
        checks=$(field "$line" 6)
        note=$(field "$line" 7)
    else
        checks=""
        note=$(field "$line" 6)
    fi
    if [ -z "$rep" ]; then change="\`${pat//\\n/ }\` removed"; else change="\`${pat//\\n/ }\` → \`${rep//\\n/ }\`"; fi
    [ -n "$occ" ] && change="$change (occurrence $occ)"
    cp "$SCRATCH/$file" "$SCRATCH/$file.orig"
    if ! err=$(apply "$file" "$occ" "$pat" "$rep" 2>&1); then
        echo "mutate.sh: $name: $err" >&2
        rm -f "$SCRATCH/$file.orig"
        printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$file" "$change" "ERROR" "$err" >>"$OUT"
        return
    fi
    t0=$(date +%s)
    if [ "$kind" = logic ]; then
        local c r caught="" built=1
        for c in $checks; do
            r=$(run_check "$c")
            echo "mutate.sh:   $name: $c: $r" >&2
            case $r in
                BUILD) built=0; break ;;
                FAIL:*) caught="${caught:+$caught; }${r#FAIL: }" ;;
            esac
        done
        if [ $built -eq 0 ]; then
            result="does not build"; detail=""
        elif [ -n "$caught" ]; then
            result="caught"; detail=$caught
        else
            result="NOT caught"; detail=$note
        fi
    else
        local res rc failing why
        res=$(cd "$SCRATCH" && scripts/loom.sh 2>&1)
        rc=$?
        failing=$(echo "$res" | grep -E '^(FAILED|TIMEOUT) ' | awk '{print $1" "$2}' | sed 's/^FAILED //; s/^TIMEOUT \(.*\)/\1 (timeout)/' | paste -sd, - | sed 's/,/, /g')
        why=$(echo "$res" | grep -A1 -E '^(FAILED|TIMEOUT) ' | grep '^           ' | head -1 | trim | cut -c1-140)
        case $rc in
            0) result="NOT caught"; detail="$note" ;;
            1) result="caught"; detail="$failing: \"$why\"" ;;
            *) result="does not build"; detail="" ;;
        esac
    fi
    # Restored by a copy (a new mtime, so cargo rebuilds), from the copy
    # taken before the mutation, not from the working tree (which may have
    # moved on while this runs).
    cp "$SCRATCH/$file.orig" "$SCRATCH/$file" && rm "$SCRATCH/$file.orig"
    echo "mutate.sh: $name: $result ($(($(date +%s) - t0))s) $detail" >&2
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$file" "$change" "$result" "$detail" >>"$OUT"
}

# The rows of list $1 whose name matches the filter.
selected() {
    echo "$1" | while IFS= read -r line; do
        [ -z "$line" ] && continue
        if field "$line" 1 | grep -Eq -- "$FILTER"; then echo "$line"; fi
    done
}

sync_scratch
ORDERING_ROWS=""
LOGIC_ROWS=""
[ "$KIND" != logic ] && ORDERING_ROWS=$(selected "$MUTATIONS")
[ "$KIND" != ordering ] && LOGIC_ROWS=$(selected "$LOGIC")
if [ -n "$ORDERING_ROWS" ]; then
    echo "mutate.sh: baseline (no mutation) in $SCRATCH" >&2
    if ! (cd "$SCRATCH" && scripts/loom.sh >/dev/null 2>&1); then
        echo "mutate.sh: the unmutated suite fails or does not build; fix that first" >&2
        exit 1
    fi
fi
if [ -n "$LOGIC_ROWS" ]; then
    for c in $(echo "$LOGIC_ROWS" | while IFS= read -r line; do field "$line" 6; done | tr ' ' '\n' | sort -u); do
        echo "mutate.sh: baseline of $c (no mutation) in $SCRATCH" >&2
        r=$(run_check "$c")
        if [ "$r" != pass ]; then
            echo "mutate.sh: $c fails unmutated ($r); fix that first" >&2
            exit 1
        fi
    done
fi

if [ -n "$ORDERING_ROWS" ]; then
    echo "$ORDERING_ROWS" | while IFS= read -r line; do run_row "$line" ordering; done
fi
if [ -n "$LOGIC_ROWS" ]; then
    echo "$LOGIC_ROWS" | while IFS= read -r line; do run_row "$line" logic; done
fi
write_tables
echo "mutate.sh: results in $OUT; tables written to loom-tests/README.md" >&2
