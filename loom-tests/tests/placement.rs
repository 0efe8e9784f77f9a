//! Wakeup placement claiming an idle worker (`src/policy/wake.rs`,
//! `select_idle_sibling`; `src/policy/spawn_place.rs`, `find_idlest_group`; the `idle`
//! set of `Sleepers` in `src/sched/sleepers.rs`, a `WorkerSet`).
//!
//! A placement that chooses an idle worker marks it not-idle first
//! (`WorkerSet::remove`: a load, then a `fetch_and`, both `Relaxed`), so that
//! a burst of wakes spreads out; then it delivers (`worker::deliver`, i.e.
//! `Mailbox::deliver_or_drain`). The idle flag is a hint: correctness must
//! not depend on it.
//!
//! Three threads: the worker starts idle (its flag set, as `enter_idle`
//! leaves it), leaves idle on its own (its walk found work:
//! `idle.remove`, then it runs that item), and then waits for
//! deliveries without re-entering idle; two placers each claim the
//! worker and deliver an item to it, whether or not the claim succeeded
//! (where the runtime would deliver to the placement's target instead; here
//! it is the same worker). Checked in every interleaving:
//!
//! - at most one claim succeeds in the one idle period (the flag is set
//!   once, before the race, and only the worker sets it);
//! - every item is run exactly once and no inbox holds one once everybody
//!   is done (the worker never sleeps on a stranded item; loom reports a
//!   deadlock if it does).
//!
//! The worker does not go idle again in this model on purpose: with a
//! second idle period, two claims could legitimately succeed, and a broken
//! claim that let two placements take the same period could no longer be
//! told apart from that without adding synchronization the production code
//! does not have.
//!
//! # Mutations
//!
//! Each applied once to `src/sched/park.rs` (on a copy of the working tree), the
//! model run at `LOOM_MAX_PREEMPTIONS=3`, reverted:
//!
//! | mutation | result |
//! | --- | --- |
//! | `WorkerSet::remove` as `load` then `store` (no RMW), on the earlier `AtomicBool` flag | caught: "two placements claimed the same idle period" |
//! | `notify` signals without taking the parker's mutex | caught: "deadlock" (the lost wakeup strands a placed item) |
//!
//! The idle flag's orderings are all `Relaxed` already (it is a hint), so
//! there is nothing weaker to try; the model shows that nothing depends on
//! them: whatever the flag says, every placed item is run.

#![cfg(loom)]

use hwsched::sched::park::{Mailbox, Wait};
use hwsched::sched::sleepers::WorkerSet;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{model, Cases, Ledger, Task};

/// `wake::place` then `worker::deliver`: claims the worker if it is idle,
/// and delivers either way. Returns whether the claim succeeded.
fn place(idle: &WorkerSet, mb: &Mailbox<Task>, shutdown: &AtomicBool, t: Task) -> bool {
    let claimed = idle.remove(0, Ordering::Relaxed);
    let _ = mb.deliver_or_drain(t, shutdown, Task::cancel);
    claimed
}

/// The worker: leaves idle to run what its walk found, then waits for the
/// `n` placed items.
fn worker(
    idle: &WorkerSet,
    mb: &Mailbox<Task>,
    shutdown: &AtomicBool,
    found: Task,
    n: usize,
    cases: &Cases,
) {
    // exit_idle: the walk stole `found`.
    idle.remove(0, Ordering::Relaxed);
    found.run();
    let mut ran = 0;
    while ran < n {
        match mb.wait(shutdown, || false, || true) {
            Wait::Work { item, slept } => {
                if slept {
                    cases.hit("worker slept until a placement");
                }
                item.run();
                ran += 1;
            }
            Wait::Woken { kicked_by, .. } => assert_eq!(kicked_by, None),
            Wait::Shutdown => panic!("no shutdown in this model"),
            Wait::Suspended => unreachable!("a condvar park does not suspend"),
        }
    }
}

#[test]
fn two_placements_claim_a_worker_leaving_idle() {
    let cases = Cases::new(&[
        "no claim: the worker left idle first",
        "the first placer claimed",
        "the second placer claimed",
        "worker slept until a placement",
    ]);
    model({
        let cases = cases.clone();
        move || {
            // Item 0: what the worker's walk found; 1 and 2: placed.
            let ledger = Ledger::new(3);
            let mb = Arc::new(Mailbox::new());
            let shutdown = Arc::new(AtomicBool::new(false));
            // enter_idle, before the race.
            let idle = Arc::new(WorkerSet::new(1, &[]));
            idle.insert(0, Ordering::Relaxed);
            let w = {
                let (idle, mb, shutdown, cases) =
                    (idle.clone(), mb.clone(), shutdown.clone(), cases.clone());
                let found = ledger.task(0);
                thread::spawn(move || worker(&idle, &mb, &shutdown, found, 2, &cases))
            };
            let p1 = {
                let (idle, mb, shutdown, t) =
                    (idle.clone(), mb.clone(), shutdown.clone(), ledger.task(1));
                thread::spawn(move || place(&idle, &mb, &shutdown, t))
            };
            let c2 = place(&idle, &mb, &shutdown, ledger.task(2));
            let c1 = p1.join().unwrap();
            w.join().unwrap();
            assert!(mb.inbox.is_empty(), "an item is stranded in the inbox");
            ledger.assert_each_once();
            assert!(!(c1 && c2), "two placements claimed the same idle period");
            assert!(!idle.contains(0), "the worker left idle and was claimed");
            cases.hit(match (c1, c2) {
                (false, false) => "no claim: the worker left idle first",
                (true, _) => "the first placer claimed",
                (_, true) => "the second placer claimed",
            });
        }
    });
    cases.assert_all_reached();
}
