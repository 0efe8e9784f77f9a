//! The long-poll hand-off (`src/sched/README.md`, "Long polls"): a watcher that
//! sees an owner's poll count unchanged since a look `LONG_POLL_NS` ago
//! takes the owner's private work (its LIFO slot's task and its private
//! batch queue: `hwsched::sched::watch::take_private`) while the owner may leave
//! its poll at any moment and take the same tasks itself. Every task runs
//! exactly once, and a task of an owner that never leaves its poll is
//! taken.
//!
//! Time is a parameter of the watch's functions: the watcher's two looks
//! pass `t0` and `t0 + LONG_POLL_NS`. The poll count is a loom atomic, as
//! the runtime's `polls` counter is (relaxed, written by its owner only).
//!
//! # Mutations
//!
//! Logic mutations each model catches are listed in `loom-tests/README.md`
//! ("Logic mutations").

#![cfg(loom)]
// One-span ranges are the models' topology, not a mistaken range.
#![allow(clippy::single_range_in_vec_init)]

use hwsched::sched::queue::{Local, Steal};
use hwsched::sched::watch::{self, Stale, Watch};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;
use loom_tests::{model, Cases, Ledger, Rt, Task};

/// A time long after start (the owner's batch came at `T0`, fresh).
const T0: u64 = 10 * watch::LINGER_NS;
/// The runtime's default `migration_cost` (500 us), in ns: the batch never
/// ages in these models (the looks are `LONG_POLL_NS` apart, less).
const COST: u64 = 500_000;

/// Runs what a deque holds.
fn drain(local: &Local<Task>) {
    while let Some(t) = local.pop() {
        t.run();
    }
}

/// Worker 0 holds task 0 in its LIFO slot and task 1 in its private batch
/// queue, fresh, and is in a poll; if `leaves`, it leaves the poll (its
/// count moves) and runs its own work. Worker 1, a watcher, looks twice,
/// `LONG_POLL_NS` apart, and takes worker 0's private work when it finds
/// the count unchanged.
fn owner_and_watcher(leaves: bool, cases: &std::sync::Arc<Cases>) {
    let ledger = Ledger::new(2);
    let (rt, mut locals) = Rt::with_locals(2);
    let watcher_deque = locals.pop().expect("worker 1's deque");
    let batch_q: Local<Task> = Local::new();
    let batch = batch_q.stealer();
    let w = loom::sync::Arc::new(Watch::new(2, &[0..2]));
    let polls = loom::sync::Arc::new(AtomicU64::new(7));
    let _ = rt.lifos[0].put(ledger.task(0));
    batch_q.push(ledger.task(1));
    // The owner's check: its bit and stamp (nobody parked to call).
    assert!(watch::kept_private(&*rt, &w, 0, T0).is_none());

    let watcher = {
        let (rt, w, polls, cases) = (rt.clone(), w.clone(), polls.clone(), cases.clone());
        thread::spawn(move || {
            let mut took = 0;
            for now in [T0, T0 + watch::LONG_POLL_NS] {
                let count = |_: usize| polls.load(Ordering::Relaxed);
                // The owner is on the CPU all along: its CPU time is the clock.
                w.for_each_stale(
                    1,
                    now,
                    COST,
                    watch::LONG_POLL_NS,
                    count,
                    |_| now,
                    |v, why| {
                        assert_eq!(
                            (v, why),
                            (0, Stale::LongPoll),
                            "a fresh batch: only a long poll"
                        );
                        took += watch::take_private(&rt.lifos[0], &batch, &watcher_deque);
                    },
                );
            }
            cases.hit(match took {
                0 => "the owner left its poll first: nothing taken",
                2 => "took both tasks behind the long poll",
                _ => "took part, the owner the rest",
            });
            drain(&watcher_deque);
            took
        })
    };
    if leaves {
        // The poll ends: the count moves, then the owner's next tasks.
        polls.store(8, Ordering::Relaxed);
        if let Some(t) = rt.lifos[0].take() {
            t.run();
        }
        drain(&batch_q);
    }
    let took = watcher.join().unwrap();
    if !leaves {
        assert_eq!(
            took, 2,
            "an owner that never leaves its poll: all its work is taken"
        );
    }
    // Nothing left in either queue; each task ran once.
    assert!(rt.lifos[0].take().is_none());
    assert!(matches!(batch_q.stealer().steal(), Steal::Empty));
    ledger.assert_each_once();
}

/// The owner never leaves its poll: the watcher's second look finds the
/// count unchanged and takes both tasks.
#[test]
fn a_watcher_takes_the_private_work_of_an_owner_stuck_in_a_poll() {
    let cases = Cases::new(&["took both tasks behind the long poll"]);
    model({
        let cases = cases.clone();
        move || owner_and_watcher(false, &cases)
    });
    cases.assert_all_reached();
}

/// The owner leaves its poll while the watcher looks and takes: the owner's
/// swap and pops against the watcher's swap and steals, each task once.
#[test]
fn an_owner_leaving_its_poll_and_a_watcher_never_both_run_a_task() {
    let cases = Cases::new(&[
        "the owner left its poll first: nothing taken",
        "took both tasks behind the long poll",
    ]);
    model({
        let cases = cases.clone();
        move || owner_and_watcher(true, &cases)
    });
    cases.assert_all_reached();
}

/// Store buffering 4 of `src/sched/watch.rs`: worker 0 leaves the poller it
/// slept in for work (the poller's lock released, then `left_poller`)
/// while worker 1 goes to sleep (its `parked` bit, `before_poller`'s
/// fence, a try-lock of the poller). Either worker 1 takes the poller, or
/// worker 0 sees its `parked` bit and calls it; a worker 1 that parks on
/// its thread with nobody calling it is a loom deadlock.
#[test]
fn a_worker_leaving_the_poller_and_a_sleeper_that_found_it_taken() {
    let cases = Cases::new(&[
        "the sleeper took the free poller",
        "the leaver called the sleeper",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let (rt, _locals) = Rt::with_locals(2);
            let w = loom::sync::Arc::new(Watch::new(2, &[0..2]));
            // The poller's lock (a parking_lot mutex in the runtime: a
            // try-lock is an acquire CAS, the unlock a release store), held
            // by worker 0, which slept in the poller.
            let poller = loom::sync::Arc::new(loom::sync::atomic::AtomicBool::new(true));
            let sleeper = {
                let (rt, w, poller, cases) = (rt.clone(), w.clone(), poller.clone(), cases.clone());
                thread::spawn(move || {
                    rt.s.to_parked(1, false);
                    watch::before_poller();
                    let try_lock =
                        poller.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed);
                    if try_lock.is_ok() {
                        cases.hit("the sleeper took the free poller");
                        return;
                    }
                    // Asleep on its thread until called.
                    rt.mailboxes[1].parker.park();
                    assert!(w.called(1), "woken only by the leaver's call");
                    cases.hit("the leaver called the sleeper");
                })
            };
            poller.store(false, Ordering::Release);
            let _ = watch::left_poller(&*rt, &w, 0);
            sleeper.join().unwrap();
        }
    });
    cases.assert_all_reached();
}
