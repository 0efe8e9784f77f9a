//! The place queues' hand-off (`src/sched/place_queue.rs`) with two workers in the
//! domain: one push racing both going to sleep, and two pushes (the second
//! may find the queue non-empty and make no check). The workers run the
//! production idle sequence over the models' `Worker`; see `domain.rs`
//! beside this file for the first race. Kept apart from it: at
//! `LOOM_MAX_PREEMPTIONS=3` these models run for minutes.
//!
//! # Mutations
//!
//! Logic mutations of the steps each model catches are listed in
//! `loom-tests/README.md` ("Logic mutations").

#![cfg(loom)]
// One-domain spans are the models' topology, not a mistaken range.
#![allow(clippy::single_range_in_vec_init)]

use loom::sync::atomic::Ordering;
use loom::thread;
use loom_tests::{model, Cases, Ledger, Rt, Task, Worker};

/// The cases every model here must reach: the task taken by a worker that
/// never slept (its re-check, or its pass's look), and by one that slept
/// and was woken for it.
const CASES: &[&str] = &[
    "took the placed task without sleeping",
    "slept, then took the placed task",
];

/// Shuts the model down as `Runtime::shutdown` does: the flag, then every
/// parker.
fn shut_down(rt: &Rt) {
    rt.shutdown.store(true, Ordering::Relaxed);
    for m in &rt.mailboxes {
        let _ = m.parker.notify();
    }
}

/// Three workers, domain {1, 2}: worker 0 pushes one task into the
/// domain's queue while workers 1 and 2 run their idle periods. The one
/// that gets the task runs it and shuts the model down; the other leaves
/// at shutdown. The task must run, on worker 1 or 2.
#[test]
fn a_placed_push_races_its_domain_going_to_sleep() {
    let cases = Cases::new(CASES);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let (rt, mut locals) = Rt::with_domains(3, &[1..3]);
            let local2 = locals.pop().expect("worker 2's deque");
            let local1 = locals.pop().expect("worker 1's deque");
            let idle = |me: usize, local| {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || {
                    let mut w = Worker::new(rt.clone(), me, local, cases);
                    let mut ran = 0;
                    while let Some(t) = w.idle() {
                        t.run();
                        ran += 1;
                        shut_down(&rt);
                    }
                    ran
                })
            };
            let w1 = idle(1, local1);
            let w2 = idle(2, local2);
            let dq = rt.domains.as_ref().unwrap();
            let _ = hwsched::sched::place_queue::push(&*rt, dq, 0, 1, ledger.task(0));
            let ran = w1.join().unwrap() + w2.join().unwrap();
            assert_eq!(ran, 1, "the placed task ran exactly once");
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

/// Two workers, both in domain {0, 1}; two tasks pushed into the queue by
/// an outside thread. Each worker takes one task and then stays in its
/// poll: the second push finds the queue non-empty and makes no check, so
/// the take that leaves it behind must (`place_queue::take`).
#[test]
fn two_placed_pushes_two_sleepers() {
    let cases = Cases::new(CASES);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let (rt, mut locals) = Rt::with_domains(2, &[0..2]);
            let local1 = locals.pop().expect("worker 1's deque");
            let local0 = locals.pop().expect("worker 0's deque");
            let idle = |me: usize, local| {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || {
                    let t: Task = Worker::new(rt, me, local, cases).idle_until_work();
                    t.run();
                })
            };
            let w0 = idle(0, local0);
            let w1 = idle(1, local1);
            let dq = rt.domains.as_ref().unwrap();
            for id in 0..2 {
                let _ = hwsched::sched::place_queue::push(&*rt, dq, 0, 0, ledger.task(id));
            }
            w0.join().unwrap();
            w1.join().unwrap();
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}
