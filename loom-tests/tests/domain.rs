//! The place queues' hand-off (`src/domain.rs`): a task placed in a domain
//! is pushed into the domain's queue by a thread outside the domain while
//! the domain's workers go to sleep. The workers run the production idle
//! sequence (`hwsched::idle_worker::idle`, over the models' `Worker`),
//! which takes from their place queues, re-checks them after announcing
//! the sleep, and hands a wake on when it leaves with other work; the
//! pusher runs `hwsched::domain::push`. Checked in every interleaving: the
//! task runs exactly once, on a worker of its domain, and no worker sleeps
//! beside it (loom reports the deadlock).
//!
//! Worker 0 is outside the domain and never idle (the pusher); the global
//! protocol's searchers could only ever be there, so nothing but the
//! domain's own steps can save the task.
//!
//! # Mutations
//!
//! Logic mutations of the steps each model catches are listed in
//! `loom-tests/README.md` ("Logic mutations").

#![cfg(loom)]

use hwsched::handoff;
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
            let _ = hwsched::domain::push(&*rt, dq, 0, 1, ledger.task(0));
            let ran = w1.join().unwrap() + w2.join().unwrap();
            assert_eq!(ran, 1, "the placed task ran exactly once");
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

/// Three workers, domain {1, 2}: worker 0 pushes a task into the domain's
/// queue and delivers another to worker 1's inbox (a plain task, which
/// any worker may take). Workers 1 and 2 each run one idle period, run
/// the task it found, and then stay in that task's poll (a long poll: they
/// never look at a queue again). So the worker that takes the plain task
/// (perhaps woken for the placed one) must leave the placed task to the
/// other: the domain check of a take that leaves work, or of a worker
/// leaving its idle period with other work (`domain::left_behind`).
#[test]
fn a_worker_woken_for_the_domain_hands_the_wake_on() {
    let cases = Cases::new(CASES);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let (rt, mut locals) = Rt::with_domains(3, &[1..3]);
            let local2 = locals.pop().expect("worker 2's deque");
            let local1 = locals.pop().expect("worker 1's deque");
            let idle = |me: usize, local| {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || {
                    let t: Task = Worker::new(rt, me, local, cases).idle_until_work();
                    // The long poll: this worker looks at nothing again.
                    t.run();
                })
            };
            let w1 = idle(1, local1);
            let w2 = idle(2, local2);
            let dq = rt.domains.as_ref().unwrap();
            let _ = hwsched::domain::push(&*rt, dq, 0, 1, ledger.task(0));
            let _ = handoff::deliver(&*rt, 1, ledger.task(1));
            w1.join().unwrap();
            w2.join().unwrap();
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

/// Two workers, both in domain {0, 1}; two tasks pushed into the queue by
/// an outside thread. Each worker takes one task and then stays in its
/// poll: the second push finds the queue non-empty and makes no check, so
/// the take that leaves it behind must (`domain::take`).
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
                let _ = hwsched::domain::push(&*rt, dq, 0, 0, ledger.task(id));
            }
            w0.join().unwrap();
            w1.join().unwrap();
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}
