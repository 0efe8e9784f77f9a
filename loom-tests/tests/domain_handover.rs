//! The place queues' hand-off (`src/sched/place_queue.rs`) when a worker woken for a
//! domain's task finds other work first: the wake is handed on
//! (`place_queue::left_behind`, and the worker's own inbox counted as work left
//! behind by `idle_steps::found_work`). The workers run the production
//! idle sequence over the models' `Worker`; see `domain.rs` beside this
//! file for the first race. Kept apart from it: at
//! `LOOM_MAX_PREEMPTIONS=3` this model runs for minutes, and the logic
//! mutations that only it catches name it alone.
//!
//! # Mutations
//!
//! Logic mutations of the steps each model catches are listed in
//! `loom-tests/README.md` ("Logic mutations").

#![cfg(loom)]

use hwsched::sched::push;
use loom::thread;
use loom_tests::{model, Cases, Ledger, Rt, Task, Worker};

/// The cases every model here must reach: the task taken by a worker that
/// never slept (its re-check, or its pass's look), and by one that slept
/// and was woken for it.
const CASES: &[&str] = &[
    "took the placed task without sleeping",
    "slept, then took the placed task",
];

/// Three workers, domain {1, 2} (an LLC), and domain {1} (worker 1's core,
/// whose queue stays empty: worker 1's nearest queue): worker 0 pushes a
/// task into the LLC's queue and delivers another to worker 1's inbox (a
/// plain task, which any worker may take). Workers 1 and 2 each run one idle period, run
/// the task it found, and then stay in that task's poll (a long poll: they
/// never look at a queue again). So the worker that takes the plain task
/// (perhaps woken for the placed one) must leave the placed task to the
/// other: the domain check of a take that leaves work, or of a worker
/// leaving its idle period with other work (`place_queue::left_behind`, which
/// must look at each of the worker's queues, not only its nearest).
#[test]
fn a_worker_woken_for_the_domain_hands_the_wake_on() {
    let cases = Cases::new(CASES);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let (rt, mut locals) = Rt::with_domains(3, &[1..2, 1..3]);
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
            let llc = dq.of(1).last().unwrap();
            assert_eq!(dq.of(1).count(), 2, "worker 1 is in two domains");
            let _ = hwsched::sched::place_queue::push(&*rt, dq, llc, 1, ledger.task(0));
            let _ = push::deliver(&*rt, 1, ledger.task(1));
            w1.join().unwrap();
            w2.join().unwrap();
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}
