//! The idle sequence (`src/sched/idle_steps.rs`), run by the production code in
//! the shapes the conservation models (`conserve.rs`) do not reach: an
//! owner that clears its `queued` bit and then pushes again, two idle
//! workers, one of them refused by the searcher cap, around one push, and
//! a last searcher whose re-check finds two owners queued.
//!
//! Each worker is the models' `Worker` (loom-tests/src/lib.rs): the
//! production `hwsched::sched::idle_steps::idle` over the model's queues, with a
//! walk that tries every other worker and a condvar park.
//!
//! # Mutations
//!
//! Logic mutations of the sequence each model catches are listed in
//! `loom-tests/README.md` ("Logic mutations").

#![cfg(loom)]

use hwsched::sched::push;
use hwsched::sched::queue::Local;
use loom::sync::atomic::Ordering;
use loom::thread;
use loom_tests::{model, Cases, Ledger, Rt, Task, Worker};

/// Worker 0 pushed and ran its own task in a busy period, went idle (the
/// owner's clear of its `queued` bit, `push::clear_queued`), and is busy
/// again: it pushes one more task while worker 1 goes to sleep. The clear
/// must forget the owner's record of its bit, or the second push skips
/// setting the bit, the last searcher's re-check does not see it, and the
/// pusher (which saw a searcher) sends no wake: worker 1 sleeps with the
/// task queued.
#[test]
fn the_owner_pushes_again_after_clearing_its_bit() {
    let cases = Cases::new(&[
        "the walk found the item",
        "the last searcher's re-check found the item",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let (rt, mut locals) = Rt::with_locals(2);
            let local1 = locals.pop().expect("worker 1's deque");
            let local0 = locals.pop().expect("worker 0's deque");
            let mut queued_bit = false;
            // The busy period before the race: a push, run by the owner.
            let _ = push::push_local(&*rt, 0, &local0, &mut queued_bit, ledger.task(0));
            local0.pop().expect("the owner's own task").run();
            // Idle with an empty deque: the clear (nothing in the inbox).
            assert!(push::clear_queued(&*rt, 0, &mut queued_bit).is_none());
            let w1 = {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || Worker::new(rt, 1, local1, cases).idle_until_work().run())
            };
            // Busy again: the second push.
            let _ = push::push_local(&*rt, 0, &local0, &mut queued_bit, ledger.task(1));
            w1.join().unwrap();
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

/// Three workers: 0 busy, pushing one task; 1 and 2 idle, both running the
/// production sequence, one of them refused by the searcher cap (half of
/// three). The task must run; then the worker that ran it shuts the model
/// down (the flag, then every parker notified, as `Runtime::shutdown`
/// does), and both idle workers leave their idle period (a worker leaves
/// at shutdown with its counts as they stand: nothing reads them after).
#[test]
fn two_idle_workers_one_push() {
    let cases = Cases::new(&[
        "the walk found the item",
        "the worker found the task, the other one slept or searched",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let (rt, mut locals) = Rt::with_locals(3);
            let local2 = locals.pop().expect("worker 2's deque");
            let local1 = locals.pop().expect("worker 1's deque");
            let local0 = locals.pop().expect("worker 0's deque");
            let idle = |me: usize, local: Local<Task>| {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || {
                    let mut w = Worker::new(rt.clone(), me, local, cases.clone());
                    let mut ran = 0;
                    while let Some(t) = w.idle() {
                        t.run();
                        ran += 1;
                        cases.hit("the worker found the task, the other one slept or searched");
                        // Shut down: the flag, then every parker.
                        rt.shutdown.store(true, Ordering::Relaxed);
                        for m in &rt.mailboxes {
                            let _ = m.parker.notify();
                        }
                    }
                    ran
                })
            };
            let w1 = idle(1, local1);
            let w2 = idle(2, local2);
            let mut queued_bit = false;
            let _ = push::push_local(&*rt, 0, &local0, &mut queued_bit, ledger.task(0));
            let ran = w1.join().unwrap() + w2.join().unwrap();
            // The task may still sit in worker 0's deque if shutdown came
            // first: it cannot here (only a worker that ran it shuts down).
            assert_eq!(ran, 1, "the task ran exactly once");
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

/// Three workers: 0 busy, with two tasks pushed onto its deque; 1 and 2
/// idle. Each idle worker runs one period of the production sequence, runs
/// the task it got and then stays in that task's poll (a long poll: it
/// never looks at the queues again). So the worker that takes the first
/// task must leave the second to the other one: a worker that found work
/// while others slept makes sure what it left behind gets a worker (the
/// last searcher's re-check in `found_work`, and after a pending steal the
/// wake for what is left). Without that wake the other worker sleeps
/// beside the second task: loom reports the deadlock.
#[test]
fn a_worker_that_takes_one_of_two_tasks_leaves_the_other_to_a_sleeper() {
    let cases = Cases::new(&[
        "the walk found the item",
        "the last searcher's re-check found the item",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let (rt, mut locals) = Rt::with_locals(3);
            let local2 = locals.pop().expect("worker 2's deque");
            let local1 = locals.pop().expect("worker 1's deque");
            let local0 = locals.pop().expect("worker 0's deque");
            let idle = |me: usize, local: Local<Task>| {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || {
                    let t = Worker::new(rt, me, local, cases).idle_until_work();
                    // The long poll: this worker looks at nothing again.
                    t.run();
                })
            };
            let w1 = idle(1, local1);
            let w2 = idle(2, local2);
            let mut queued_bit = false;
            for id in 0..2 {
                let _ = push::push_local(&*rt, 0, &local0, &mut queued_bit, ledger.task(id));
            }
            w1.join().unwrap();
            w2.join().unwrap();
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

/// Four workers: 0 and 1 busy, each pushing one task onto its own deque
/// (then never looking at it again); 2 idle, searching, and going to sleep
/// as the last searcher; 3 parked before the model starts (its re-check
/// found nothing) and with no thread. Both pushers may see worker 2
/// searching and wake nobody; worker 2's re-check then finds both owners
/// in the `queued` set, and its pending steal takes from one of them. It
/// runs that task for good, so the other owner's task needs a wake: not
/// only what is left behind its victim, but any worker the `queued` set
/// still shows (the re-check after the steal). When the threads are done,
/// worker 3, if a waker claimed it, steals what is left; a task left while
/// it sleeps unclaimed is stranded.
#[test]
fn a_pending_steal_with_two_owners_queued_wakes_for_the_other() {
    let cases = Cases::new(&["the last searcher's re-check found the item"]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let (rt, mut locals) = Rt::with_locals(4);
            let local3 = locals.pop().expect("worker 3's deque");
            let local2 = locals.pop().expect("worker 2's deque");
            let local1 = locals.pop().expect("worker 1's deque");
            let local0 = locals.pop().expect("worker 0's deque");
            let _ = rt.s.to_parked(3, false);
            let w2 = {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || Worker::new(rt, 2, local2, cases).idle_until_work().run())
            };
            let owner1 = {
                let (rt, t) = (rt.clone(), ledger.task(1));
                thread::spawn(move || {
                    let mut queued_bit = false;
                    let _ = push::push_local(&*rt, 1, &local1, &mut queued_bit, t);
                    // Busy for good: the deque stays, for thieves only.
                    local1
                })
            };
            let mut queued_bit = false;
            let _ = push::push_local(&*rt, 0, &local0, &mut queued_bit, ledger.task(0));
            let _local1 = owner1.join().unwrap();
            w2.join().unwrap();
            if !rt.s.parked.contains(3) {
                // Claimed: worker 3's walk.
                if let Some(t) = (0..3).find_map(|v| rt.steal_from(v, &local3)) {
                    t.run();
                }
            }
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}
