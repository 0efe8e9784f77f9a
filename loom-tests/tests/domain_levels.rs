//! The place queues' hand-off (`src/sched/place_queue.rs`) with a worker in several
//! domains at once: its core's, its LLC's and its NUMA node's queues,
//! nearest first. The other place-queue models (but `domain_handover.rs`,
//! whose worker 1 has a core and an LLC queue) give each worker exactly
//! one queue, so none of them sees a take or a re-check that looks only at
//! the nearest queue. The worker runs the production idle sequence
//! (`hwsched::sched::idle_steps::idle`, over the models' `Worker`); the pusher
//! runs `hwsched::sched::place_queue::push`. A worker woken for its LLC's queue that
//! hands the wake on past its (empty) core queue is `domain_handover.rs`'s
//! model.
//!
//! The model ends by checking the `Sleepers` counts: a claim of
//! `Sleepers::wake_in` that found no bit to take (the worker cleared its
//! own, leaving a wait its re-check ended) must be undone, or a searcher
//! that does not exist stays counted and every later pusher's check skips
//! its wake.
//!
//! # Mutations
//!
//! Logic mutations of the steps each model catches are listed in
//! `loom-tests/README.md` ("Logic mutations").

#![cfg(loom)]

use loom::thread;
use loom_tests::{model, Cases, Ledger, Rt, Worker};

/// The cases every model here must reach: the task taken by a worker that
/// never slept (its re-check, or its pass's look), and by one that slept
/// and was woken for it.
const CASES: &[&str] = &[
    "took the placed task without sleeping",
    "slept, then took the placed task",
];

/// Three workers; domains: core {1}, LLC {1, 2}, NUMA {0, 1, 2}, so
/// worker 1 has three queues (core, LLC, NUMA: nearest first). Worker 0
/// (this thread) and worker 2 are busy for good (worker 2 has no thread:
/// counted awake, never idle). Worker 0 pushes one task into the NUMA
/// queue, the farthest of worker 1's, while worker 1 runs its idle period:
/// the pusher's domain check racing the sleeper's re-check
/// (store-buffering), where the re-check and the take must look past the
/// nearer, empty queues. Worker 0 counts as searching (it cannot take the
/// task), so worker 1 goes to sleep with a searcher left and its re-check
/// makes its own fence. The claim of a worker whose re-check saw the task
/// (it leaves its wait with its own bit) finds no bit and is undone.
#[test]
fn a_push_into_the_farthest_domain_races_its_worker_going_to_sleep() {
    let cases = Cases::new(CASES);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let (rt, mut locals) = Rt::with_domains(3, &[1..2, 1..3, 0..3]);
            let _local2 = locals.pop().expect("worker 2's deque");
            let local1 = locals.pop().expect("worker 1's deque");
            let dq = rt.domains.as_ref().unwrap();
            assert_eq!(dq.of(1).count(), 3, "worker 1 is in three domains");
            let numa = dq.of(1).last().unwrap();
            assert!(rt.s.to_searching(), "worker 0 searches");
            let w1 = {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || Worker::new(rt, 1, local1, cases).idle_until_work().run())
            };
            let _ = hwsched::sched::place_queue::push(&*rt, dq, numa, 0, ledger.task(0));
            w1.join().unwrap();
            let _ = rt.s.leave_searching();
            ledger.assert_each_once();
            let c = rt.s.counts();
            assert_eq!(
                (c.awake, c.searching),
                (3, 0),
                "the counts end as they began (a claim not undone?)"
            );
        }
    });
    cases.assert_all_reached();
}
