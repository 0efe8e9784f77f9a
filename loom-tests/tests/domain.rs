//! The place queues' hand-off (`src/sched/place_queue.rs`): a task placed in a domain
//! is pushed into the domain's queue by a thread outside the domain while
//! the domain's worker goes to sleep. The worker runs the production idle
//! sequence (`hwsched::sched::idle_steps::idle`, over the models' `Worker`),
//! which takes from its place queues and re-checks them after announcing
//! its sleep; the pusher runs `hwsched::sched::place_queue::push`. Checked in every
//! interleaving: the task runs exactly once, on the domain's worker, and
//! the worker never sleeps beside it (loom reports the deadlock).
//!
//! Worker 0 is outside the domain and never idle (the pusher); the global
//! protocol's searchers could only ever be there, so nothing but the
//! domain's own steps can save the task. Two workers of a domain, a worker
//! woken for it that finds other work, a claim undone, and two pushes:
//! `domain_handover.rs` (the logic mutations name the files that catch
//! them).
//!
//! # Mutations
//!
//! Logic mutations of the steps each model catches are listed in
//! `loom-tests/README.md` ("Logic mutations").

#![cfg(loom)]
// One-domain spans are the models' topology, not a mistaken range.
#![allow(clippy::single_range_in_vec_init)]

use loom::thread;
use loom_tests::{model, Cases, Ledger, Rt, Worker};

/// The cases every model here must reach: the task taken by a worker that
/// never slept (its re-check, or its pass's look), and by one that slept
/// and was woken for it.
const CASES: &[&str] = &[
    "took the placed task without sleeping",
    "slept, then took the placed task",
];

/// Two workers, domain {1}: worker 0 (this thread, never idle) pushes one
/// task into the domain's queue while worker 1 runs its idle period: the
/// pusher's domain check racing the sleeper's re-check (store-buffering).
/// Worker 0 counts as searching (it cannot take the task): so worker 1 is
/// refused by the searcher cap and goes to sleep with a searcher left,
/// when `to_parked` makes no fence and the re-check must make its own.
#[test]
fn a_placed_push_races_its_worker_going_to_sleep() {
    let cases = Cases::new(CASES);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let (rt, mut locals) = Rt::with_domains(2, &[1..2]);
            let local1 = locals.pop().expect("worker 1's deque");
            assert!(rt.s.to_searching(), "worker 0 searches");
            let w1 = {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || Worker::new(rt, 1, local1, cases).idle_until_work().run())
            };
            let dq = rt.domains.as_ref().unwrap();
            let _ = hwsched::sched::place_queue::push(&*rt, dq, 0, 0, ledger.task(0));
            w1.join().unwrap();
            // Worker 0 stops searching (the counts end as they began).
            let _ = rt.s.leave_searching();
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}
