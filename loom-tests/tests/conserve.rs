//! Work conservation (`src/sched/README.md`, "The wake protocol"): a task queued where
//! another worker could take it is never left behind a busy worker while a
//! worker sleeps with no wake pending.
//!
//! Two workers. Worker 0 is busy and stays busy (a long poll): it never
//! looks at its own queues again in the model, so only worker 1 can run the
//! item. Worker 1 is idle and runs the production idle sequence,
//! `hwsched::sched::idle_steps::idle` (what `worker::idle` runs over the
//! runtime's core): it leaves the `queued` set, becomes a searcher
//! (`Sleepers::to_searching`), walks (the model's walk: a steal from every
//! other worker's deque and inbox), and otherwise waits through its
//! `Mailbox`, announcing the sleep (`Sleepers::to_parked`) and, with no
//! searcher left, re-checking the `queued` set and stealing instead of
//! sleeping when it finds work; after every wait it leaves the parked set
//! (`Sleepers::leave_parked`) and takes what the wait brought. The item is
//! pushed by:
//!
//! - `push_races_the_last_searcher_going_to_sleep`: worker 0 itself, onto
//!   its deque (`push::push_local`, what `Core::push_local` runs: the
//!   push, then `push::after_push`: the `queued` bit and the pusher's
//!   check `push::notify_parked`, that is `Sleepers::needs_wake`,
//!   `wake_one` and `Mailbox::kick`);
//! - `delivery_to_a_busy_worker_while_another_parks`: a thread outside the
//!   runtime, into worker 0's inbox (`push::deliver`, what
//!   `worker::deliver` counts: `Mailbox::deliver_or_drain`, the `queued`
//!   bit's `insert_rmw`, the pusher's check);
//! - `wake_placed_on_a_parked_worker_races_its_sleep`: worker 0 wakes a
//!   task whose placement chose worker 1, as `worker/schedule.rs` does when the
//!   chosen idle worker may be parked: `push::wake_placed`
//!   (`Sleepers::wake_specific`, then `push::deliver_to_woken`, or,
//!   another wake in flight, a push onto worker 0's deque, or, worker 1
//!   awake, `push::deliver`).
//!
//! Both sides are production code (`sched/push.rs` and `sched/idle_steps.rs`, over
//! the model's views: its sleepers, mailboxes and deques, one span of every
//! worker); what the model supplies is the policy (the walk), the
//! parking (a condvar park, no spin) and worker 0's part.
//!
//! Checked in every interleaving: worker 1 runs the item (if the protocol
//! lost the wake, worker 1 sleeps forever and loom reports a deadlock), the
//! item runs exactly once, and the counts end consistent (nobody searching,
//! both workers awake). The cases each model must reach: the walk found the
//! item; the pusher woke a parked worker; the last searcher's re-check
//! found it; the pusher saw a searcher and sent no wake.
//!
//! # Mutations
//!
//! Each applied once to `src/sched/sleepers.rs` (on a copy of the working tree), both
//! models run at `LOOM_MAX_PREEMPTIONS=3`, reverted:
//!
//! | mutation | result |
//! | --- | --- |
//! | `needs_wake` without its `fence(SeqCst)` | caught by both: "deadlock" (store-buffering: the pusher reads the stale searching count, the searcher's re-check misses the push) |
//! | `to_parked` without its fence after the last searcher's decrement | caught by both: "deadlock" |
//! | the last searcher parks without the re-check | caught by both: "deadlock" |
//! | `to_parked` re-checks only when the parker was the last *searcher* (the first version) | caught by `a_non_searcher_parks_as_the_last_searcher_leaves`: "deadlock" (a worker refused by the searcher cap parks after the searchers left; the push saw it awake and sent no wake) |
//! | `wake_one` claims while a worker searches (no `searching == 0` test) | not a safety bug, and not caught: an extra wake; the unit test `one_wake_in_flight_and_the_woken_worker_searches` catches it |
//! | `wake_specific` does not undo its claim when the worker was awake | caught by `wake_placed_on_a_parked_worker_races_its_sleep`: "counts after both workers are done" (a searcher that never stops: every later push skips its wake) |
//! | `wake_specific` claims while another wake is in flight | not a safety bug (two wakes in flight); caught only by the case check, "no execution reached [\"a wake was in flight: queued on the waker\"]" |
//!
//! An earlier `wake_one` counted the woken worker awake in the same CAS
//! that claimed it, before taking its bit, while a worker waking by itself
//! cleared its bit and then counted itself awake too, with nothing taken
//! back; against such a worker this model found the waker spinning forever
//! on a bit that was gone ("Model exceeded maximum number of branches"),
//! and `awake` could exceed the workers, which made pushers skip their
//! wake: the one failure `tests/conservation.rs` had shown under the CPU
//! hog (a task woken onto a blocked worker started 992 ms late). The next
//! version had whoever cleared a bit count its worker awake, after the
//! clear; at `LOOM_MAX_PREEMPTIONS=4` `a_non_searcher_parks_as_the_last_searcher_leaves`
//! then showed pushers spinning while a worker sat between its clear and
//! its count. Now the claim counts the worker awake and undoes the count
//! when it finds no bit, and `leave_parked` counts itself awake before it
//! clears its bit and takes the count back when a claim cleared it first
//! (`src/sched/README.md`, "Why no wake is lost").

#![cfg(loom)]

use hwsched::sched::idle_steps::Queues;
use hwsched::sched::park::Notified;
use hwsched::sched::push::{self, Delivery, Placed};
use hwsched::sched::queue::Local;
use loom::sync::Arc;
use loom::thread;
use loom_tests::{model, Cases, Ledger, Rt, Task, Worker};

/// Records what the pusher's check (`push::notify_parked`) did.
fn note_wake(woke: Option<(usize, Notified)>, cases: &Cases) {
    match woke {
        None => cases.hit("the pusher's check sent no wake (a searcher, or nobody parked)"),
        Some((w, n)) => {
            assert_ne!(w, 0, "worker 0 is busy, never parked");
            if n == Notified::Unparked {
                cases.hit("the pusher woke a parked worker");
            }
        }
    }
}

/// Records what `push::found_work` did.
fn note_found(woke: Option<(usize, Notified)>, cases: &Cases) {
    if let Some((w, _)) = woke {
        assert_ne!(w, 0, "worker 0 is busy, never parked");
        cases.hit("the worker that found work woke a parked one for what is left");
    }
}

/// Records what `push::deliver` did.
fn note_delivery(d: Delivery, cases: &Cases) {
    match d {
        Delivery::Unparked => cases.hit("the delivery unparked its worker"),
        Delivery::Queued(woke) => note_wake(woke, cases),
    }
}

/// Worker `me`'s idle period (`hwsched::sched::idle_steps::idle`) until it has
/// run one item: the model's `Worker`, over `rt`'s queues.
fn idle_worker(rt: Arc<Rt>, me: usize, local: Local<Task>, cases: &std::sync::Arc<Cases>) {
    let mut w = Worker::new(rt, me, local, cases.clone());
    w.idle_until_work().run();
}

/// How the item reaches the runtime.
#[derive(Clone, Copy)]
enum Push {
    /// Worker 0 pushes onto its own deque.
    Local,
    /// A foreign thread delivers into busy worker 0's inbox.
    Outside,
    /// Worker 0 wakes a task whose placement chose worker 1 (idle, maybe
    /// parked): `wake::schedule`'s parked branch.
    PlacedOnParked,
}

fn conserve(how: Push, cases: &std::sync::Arc<Cases>) {
    let ledger = Ledger::new(1);
    let (rt, mut locals) = Rt::with_locals(2);
    let local1 = locals.pop().expect("worker 1's deque");
    let local0 = locals.pop().expect("worker 0's deque");
    let w1 = {
        let (rt, cases) = (rt.clone(), cases.clone());
        thread::spawn(move || idle_worker(rt, 1, local1, &cases))
    };
    let item = ledger.task(0);
    // Worker 0's record of its `queued` bit (`Core::queued_bit`).
    let mut queued_bit = false;
    if let Push::PlacedOnParked = how {
        // `worker/schedule.rs` after select_idle_sibling chose worker 1; another
        // wake in flight defers the task to worker 0's deque
        // (`Core::push_local`).
        let mut deferred_wake = None;
        let placed = push::wake_placed(&*rt, 1, item, |t| {
            deferred_wake = Some(push::push_local(&*rt, 0, &local0, &mut queued_bit, t));
        });
        match placed {
            Placed::Woken(_) => cases.hit("placement woke the parked worker"),
            Placed::Deferred => {
                cases.hit("a wake was in flight: queued on the waker");
                note_wake(deferred_wake.expect("deferred"), cases);
            }
            Placed::Delivered(d) => {
                cases.hit("worker 1 was awake: plain delivery");
                note_delivery(d, cases);
            }
        }
    } else if let Push::Outside = how {
        // `worker::deliver` into busy worker 0's inbox, from a foreign thread.
        let p = {
            let (rt, cases) = (rt.clone(), cases.clone());
            thread::spawn(move || {
                let d = push::deliver(&*rt, 0, item);
                assert_ne!(d, Delivery::Unparked, "worker 0 is busy");
                note_delivery(d, &cases);
            })
        };
        p.join().unwrap();
    } else {
        // `Core::push_local` on busy worker 0.
        note_wake(
            push::push_local(&*rt, 0, &local0, &mut queued_bit, item),
            cases,
        );
    }
    w1.join().unwrap();
    ledger.assert_each_once();
    let c = rt.s.counts();
    assert_eq!(
        (c.searching, c.awake),
        (0, 2),
        "counts after both workers are done"
    );
}

#[test]
fn push_races_the_last_searcher_going_to_sleep() {
    let cases = Cases::new(&[
        "the walk found the item",
        "the pusher woke a parked worker",
        "the last searcher's re-check found the item",
        "the pusher's check sent no wake (a searcher, or nobody parked)",
    ]);
    model({
        let cases = cases.clone();
        move || conserve(Push::Local, &cases)
    });
    cases.assert_all_reached();
}

#[test]
fn delivery_to_a_busy_worker_while_another_parks() {
    let cases = Cases::new(&[
        "the walk found the item",
        "the pusher woke a parked worker",
        "the last searcher's re-check found the item",
        "the pusher's check sent no wake (a searcher, or nobody parked)",
    ]);
    model({
        let cases = cases.clone();
        move || conserve(Push::Outside, &cases)
    });
    cases.assert_all_reached();
}

#[test]
fn wake_placed_on_a_parked_worker_races_its_sleep() {
    let cases = Cases::new(&[
        "placement woke the parked worker",
        "a wake was in flight: queued on the waker",
        "worker 1 was awake: plain delivery",
        "the worker took the item from its inbox",
        "the last searcher's re-check found the item",
    ]);
    model({
        let cases = cases.clone();
        move || conserve(Push::PlacedOnParked, &cases)
    });
    cases.assert_all_reached();
}

/// A worker that cannot search (the searcher cap) goes to sleep while the
/// searchers leave and a busy worker pushes: the worker parking after the
/// last searcher left must re-check, searcher or not (`to_parked`).
///
/// Four workers, three threads: 0 is busy and pushes one item onto its
/// deque (then never looks at it again); 1 and 3, both searching at the
/// start (the cap for four), find other work and leave searching
/// (`found_work`), one after the other on one thread; 2 goes idle and
/// cannot search.
#[test]
fn a_non_searcher_parks_as_the_last_searcher_leaves() {
    let cases = Cases::new(&[
        "worker 2 could not search",
        "the walk found the item",
        "the last searcher's re-check found the item",
        "the worker that found work woke a parked one for what is left",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let (rt, mut locals) = Rt::with_locals(4);
            let s = &rt.s;
            let local2 = locals.swap_remove(2);
            let local0 = locals.swap_remove(0);
            // Workers 1 and 3 search before the race (the cap: half of 4).
            assert!(s.to_searching() && s.to_searching());
            let w13 = {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || {
                    for me in [1, 3] {
                        // `found_work` for work of its own (none left
                        // behind): the last searcher leaving looks at the
                        // queued set.
                        let (mut searching, mut queued_bit) = (true, false);
                        let woke = push::found_work(
                            &*rt,
                            me,
                            &mut searching,
                            || false,
                            &mut queued_bit,
                            || rt.find_queued_work(me),
                        );
                        note_found(woke, &cases);
                    }
                })
            };
            let w2 = {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || {
                    if rt.s.counts().searching >= 2 {
                        cases.hit("worker 2 could not search");
                    }
                    idle_worker(rt, 2, local2, &cases)
                })
            };
            // Worker 0: `Core::push_local`.
            let mut queued_bit = false;
            note_wake(
                push::push_local(&*rt, 0, &local0, &mut queued_bit, ledger.task(0)),
                &cases,
            );
            w13.join().unwrap();
            w2.join().unwrap();
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}
