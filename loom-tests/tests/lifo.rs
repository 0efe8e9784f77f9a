//! The LIFO slot (`src/sched/README.md`, "The LIFO slot"): a wake kept on the
//! waker's worker (`hwsched::sched::push::push_lifo`) wakes nobody; a worker
//! that goes idle while the owner is still in its poll finds the task
//! through its re-check and takes it from the slot, and the owner and a
//! thief never both get it (every take is a swap: `hwsched::sched::queue::Slot`).
//!
//! Each idle worker is the models' `Worker` (loom-tests/src/lib.rs): the
//! production `hwsched::sched::idle_steps::idle` over the model's queues, whose
//! `has_work` counts the slot and whose pending steal takes from it, as
//! the runtime's do.
//!
//! A put that finds the slot full replaces its occupant, which goes to the
//! owner's deque with the pusher's check (`push::push_lifo`'s
//! `replaced`): the third model puts twice while the only other worker
//! may already sleep.
//!
//! # Mutations
//!
//! Logic mutations each model catches are listed in `loom-tests/README.md`
//! ("Logic mutations").

#![cfg(loom)]

use hwsched::sched::push;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use loom_tests::{model, Cases, Ledger, Rt, Worker};

/// Worker 0 puts a task in its LIFO slot (nobody idle to take it) and then
/// stays in its poll for good (a task that sends, then computes). Worker 1
/// finishes its own task after the put and goes idle: its re-check must
/// find the task in the slot and take it. If the put does not set the
/// owner's `queued` bit, or the re-check does not count the slot, worker 1
/// parks for good next to the task (loom reports the deadlock).
#[test]
fn a_worker_that_goes_idle_takes_the_task_of_a_long_poll() {
    let cases = Cases::new(&["the re-check took the task from the LIFO slot"]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let (rt, mut locals) = Rt::with_locals(2);
            let local1 = locals.pop().expect("worker 1's deque");
            let local0 = locals.pop().expect("worker 0's deque");
            let put = std::sync::Arc::new(AtomicBool::new(false));
            let w1 = {
                let (rt, cases, put) = (rt.clone(), cases.clone(), put.clone());
                thread::spawn(move || {
                    // Busy until after the put (its task ends then).
                    while !put.load(Ordering::Acquire) {
                        thread::yield_now();
                    }
                    Worker::new(rt, 1, local1, cases).idle_until_work().run()
                })
            };
            let mut queued_bit = false;
            let woke = push::push_lifo(
                &*rt,
                0,
                &rt.lifos[0],
                &local0,
                &mut queued_bit,
                ledger.task(0),
            );
            assert!(woke.is_none(), "a put into an empty slot wakes nobody");
            put.store(true, Ordering::Release);
            // Worker 0 never returns from its poll.
            w1.join().unwrap();
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

/// Worker 0 puts a task in its LIFO slot, and takes it back when its poll
/// returns, while worker 1 goes idle at the same time and may take it in
/// its pending steal. The task runs exactly once, whichever gets it; then
/// worker 0 shuts the model down (the flag, then every parker notified, as
/// `Runtime::shutdown` does) and worker 1 leaves its idle period.
#[test]
fn the_owner_and_an_idle_worker_race_for_the_slot() {
    let cases = Cases::new(&[
        "the owner ran the task",
        "the re-check took the task from the LIFO slot",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let (rt, mut locals) = Rt::with_locals(2);
            let local1 = locals.pop().expect("worker 1's deque");
            let local0 = locals.pop().expect("worker 0's deque");
            let w1 = {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || {
                    let mut w = Worker::new(rt, 1, local1, cases);
                    let mut ran = 0;
                    while let Some(t) = w.idle() {
                        t.run();
                        ran += 1;
                    }
                    ran
                })
            };
            let mut queued_bit = false;
            let _ = push::push_lifo(
                &*rt,
                0,
                &rt.lifos[0],
                &local0,
                &mut queued_bit,
                ledger.task(0),
            );
            // The poll returns: the owner takes its next task.
            let mut ran = 0;
            if let Some(t) = rt.lifos[0].take() {
                t.run();
                ran += 1;
                cases.hit("the owner ran the task");
            }
            if ran == 0 {
                // Taken by worker 1: wait until it ran, so that shutdown
                // cannot come first.
                while ledger.ran(0) == 0 {
                    thread::yield_now();
                }
            }
            rt.shutdown.store(true, Ordering::Relaxed);
            for m in &rt.mailboxes {
                let _ = m.parker.notify();
            }
            let ran = ran + w1.join().unwrap();
            assert_eq!(ran, 1, "the task ran exactly once");
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

/// Worker 0, in a poll (a task that wakes two others), puts task 0 in its
/// LIFO slot and then task 1: the second put replaces the first, which
/// goes to worker 0's deque. When the poll returns, worker 0 takes its
/// slot and runs that task for good (a long poll: it never looks at its
/// deque again). Worker 1 is idle from the start and may have parked
/// before either put (a put into an empty slot wakes nobody: the owner
/// runs the task next). The displaced task is stealable work behind a
/// worker that will not get to it: it needs the pusher's check, which
/// wakes worker 1. Without the check worker 1 sleeps for good next to it
/// (loom reports the deadlock, or the spin below exhausts its branches).
#[test]
fn a_displaced_occupant_gets_the_pushers_check() {
    let cases = Cases::new(&[
        "the owner ran the task",
        "the walk found the item",
        "the re-check took the task from the LIFO slot",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let (rt, mut locals) = Rt::with_locals(2);
            let local1 = locals.pop().expect("worker 1's deque");
            let local0 = locals.pop().expect("worker 0's deque");
            let w1 = {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || {
                    let mut w = Worker::new(rt, 1, local1, cases);
                    let mut ran = 0;
                    while let Some(t) = w.idle() {
                        t.run();
                        ran += 1;
                    }
                    ran
                })
            };
            let mut queued_bit = false;
            for id in 0..2 {
                let _ = push::push_lifo(
                    &*rt,
                    0,
                    &rt.lifos[0],
                    &local0,
                    &mut queued_bit,
                    ledger.task(id),
                );
            }
            // The poll returns: the owner takes its slot, and that task's
            // poll never returns.
            let mut ran = 0;
            if let Some(t) = rt.lifos[0].take() {
                t.run();
                ran += 1;
                cases.hit("the owner ran the task");
            }
            // The model's end: once worker 1 ran the rest, shut down (the
            // flag, then every parker notified, as `Runtime::shutdown`).
            while ledger.ran(0) + ledger.ran(1) < 2 {
                thread::yield_now();
            }
            rt.shutdown.store(true, Ordering::Relaxed);
            for m in &rt.mailboxes {
                let _ = m.parker.notify();
            }
            let ran = ran + w1.join().unwrap();
            assert_eq!(ran, 2, "each task ran exactly once");
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}
