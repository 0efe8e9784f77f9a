//! The owner's clear of its `queued` bit (`src/sched/README.md`, "Shared words": a clear
//! bit is never stale for a queue that holds work) against a delivery into
//! its inbox: the delivered task is never stranded. Either the owner's
//! inbox re-check takes it, or the bit stays set and whoever reads the
//! `queued` set finds it.
//!
//! The owner, worker 0, goes idle with its deque empty and runs
//! `push::clear_queued` (`Core::clear_queued`'s body: the clear with an
//! `AcqRel` RMW, then, if the bit was set, `Mailbox::take`). A task is
//! delivered into its inbox at the same time:
//!
//! - `a_delivery_races_the_owner_clearing_its_bit`: by a thread outside the
//!   runtime, with `push::deliver` (the inbox push, the bit's
//!   `insert_rmw`, the pusher's check). Worker 0's bit is set at the start
//!   (it pushed in its busy period), and worker 1 is parked, so the
//!   pusher's check always wakes worker 1 (`notify_parked`: `wake_one`,
//!   `Mailbox::kick`); woken (`Mailbox::wait`, `leave_parked`), worker 1
//!   reads the `queued` set (`Sleepers::find_queued`) and steals from what
//!   it finds: the third party.
//! - `a_placement_races_the_owner_clearing_its_bit`: worker 1 wakes a task
//!   whose placement chose worker 0, parked at the start, with
//!   `push::wake_placed`, while worker 0 wakes by itself
//!   (`leave_parked`) and, its idle period over, clears its bit. If the
//!   claim comes first, the task goes in with `push::deliver_to_woken`;
//!   if worker 0's own clear of its parked bit does, with `push::deliver`.
//!   After both, worker 1 reads the `queued` set and steals from it (the
//!   delivery's notify would also make worker 0's next wait look at its
//!   inbox; the property here is the bit's).
//!
//! - `a_placement_on_a_worker_that_woke_by_itself_makes_the_pushers_check`:
//!   worker 0 (busy) delivers one task to worker 1, which wakes with it
//!   and runs it for good, then places a second task on worker 1; the
//!   placement finds worker 1 awake (`WakeSpecific::Awake`) and delivers
//!   with the pusher's check, or claims it before its own `leave_parked`
//!   cleared its bit (`deliver_to_woken`: worker 1 may then have left
//!   searching with the first task before the second lands, so the
//!   delivery makes the pusher's check too); either check must wake
//!   worker 2 (parked from the start, with no thread: the model steals for
//!   it at the end if it was claimed).
//!
//! Checked in every interleaving: the task ran exactly once. Mutations
//! (`loom-tests/README.md`, rows `handoff-deliver-queued`,
//! `handoff-deliver-to-woken-queued`, `worker-take-queued`): the deliverer's
//! `insert_rmw` or the owner's clear made `Relaxed` lets the owner's clear
//! read the deliverer's bit while its inbox check reads the inbox from
//! before the push; the bit is then gone and the task stranded.

#![cfg(loom)]

use hwsched::sched::park::Wait;
use hwsched::sched::push::{self, Delivery, Placed};
use hwsched::sched::queue::{Local, Steal};
use loom::sync::atomic::AtomicBool;
use loom::thread;
use loom_tests::{model, Cases, Ledger, Rt, Task, Worker};

/// A worker other than 0 reads the `queued` set (the re-check's
/// `find_queued`, then `worker::steal_from`'s inbox steal). Returns the
/// task if it got it.
fn steal_queued(rt: &Rt, me: usize, local: &Local<Task>) -> Option<Task> {
    let inbox = &rt.mailboxes[0].inbox;
    rt.s.find_queued(&rt.all, me, |v| v == 0 && !inbox.is_empty())
        .0?;
    loop {
        match inbox.steal_batch_and_pop(local) {
            Steal::Success(t) => return Some(t),
            Steal::Empty => return None,
            Steal::Retry => continue,
        }
    }
}

/// Worker 0 goes idle: `Core::clear_queued` (its deque is empty).
fn owner_clears(rt: &Rt, cases: &Cases) {
    // Worker 0's record of its bit: set in its busy period.
    let mut queued_bit = true;
    if let Some(t) = push::clear_queued(rt, 0, &mut queued_bit) {
        cases.hit("the owner's re-check took the task");
        t.run();
    }
}

#[test]
fn a_delivery_races_the_owner_clearing_its_bit() {
    let cases = Cases::new(&[
        "the owner's re-check took the task",
        "the woken worker found the task through the queued set",
        "the woken worker found nothing",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let rt = Rt::new(2);
            // Worker 0 pushed in its busy period (`after_push`), and its
            // deque has been emptied since; worker 1 is parked.
            rt.s.queued.insert(0, loom::sync::atomic::Ordering::Relaxed);
            assert!(rt.s.to_parked(1, false), "worker 1 parks last");
            let w1 = {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || {
                    let local = Local::new();
                    let never = AtomicBool::new(false);
                    // Counted parked already: it sleeps until the kick.
                    match rt.mailboxes[1].wait(&never, || false, || true) {
                        Wait::Woken { kicked_by, .. } => {
                            assert_eq!(kicked_by, Some(0), "kicked for worker 0's inbox")
                        }
                        _ => panic!("worker 1 gets nothing but the kick"),
                    }
                    assert!(rt.s.leave_parked(1), "claimed by the pusher's check");
                    match steal_queued(&rt, 1, &local) {
                        Some(t) => {
                            cases.hit("the woken worker found the task through the queued set");
                            t.run();
                        }
                        None => cases.hit("the woken worker found nothing"),
                    }
                    let _ = rt.s.leave_searching();
                })
            };
            let d = {
                let (rt, ledger) = (rt.clone(), ledger.clone());
                thread::spawn(move || {
                    // `worker::deliver` from a foreign thread.
                    match push::deliver(&*rt, 0, ledger.task(0)) {
                        Delivery::Queued(Some((1, _))) => {}
                        d => panic!("worker 0 is busy, worker 1 parked: {d:?}"),
                    }
                })
            };
            owner_clears(&rt, &cases);
            d.join().unwrap();
            w1.join().unwrap();
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

#[test]
fn a_placement_races_the_owner_clearing_its_bit() {
    let cases = Cases::new(&[
        "placement woke the parked worker: deliver_to_woken",
        "worker 0 was awake: plain delivery",
        "the owner's re-check took the task",
        "the queued set showed the task after both",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let rt = Rt::new(2);
            assert!(rt.s.to_parked(0, false), "worker 0 parks last");
            let w0 = {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || {
                    // Worker 0 wakes by itself (another delivery, a spin,
                    // a timeout); a claim may have taken its bit first, and
                    // then it searches until it finds work.
                    if rt.s.leave_parked(0) {
                        let _ = rt.s.leave_searching();
                    }
                    // It ran what it found; idle again.
                    owner_clears(&rt, &cases);
                })
            };
            // Worker 1: `worker/schedule.rs` after wake placement chose worker 0.
            match push::wake_placed(&*rt, 0, ledger.task(0), |_| {
                panic!("no other wake in flight")
            }) {
                Placed::Woken(_) => cases.hit("placement woke the parked worker: deliver_to_woken"),
                Placed::Delivered(Delivery::Queued(woke)) => {
                    assert_eq!(woke, None, "nobody else is parked");
                    cases.hit("worker 0 was awake: plain delivery");
                }
                p => panic!("unexpected placement {p:?}"),
            }
            w0.join().unwrap();
            let local = Local::new();
            if let Some(t) = steal_queued(&rt, 1, &local) {
                cases.hit("the queued set showed the task after both");
                t.run();
            }
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

#[test]
fn a_placement_on_a_worker_that_woke_by_itself_makes_the_pushers_check() {
    let cases = Cases::new(&[
        "the worker slept, then took the item",
        "worker 1 was awake: plain delivery",
        "worker 1 was claimed: deliver_to_woken",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let (rt, mut locals) = Rt::with_locals(3);
            let local2 = locals.pop().expect("worker 2's deque");
            let local1 = locals.pop().expect("worker 1's deque");
            let local0 = locals.pop().expect("worker 0's deque");
            let _ = rt.s.to_parked(2, false);
            let w1 = {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || {
                    // Runs what it finds for good (a long poll).
                    Worker::new(rt, 1, local1, cases).idle_until_work().run()
                })
            };
            // Worker 0, busy: a wake that lands on worker 1 (its inbox),
            // then a task whose wake placement chose worker 1.
            let _ = push::deliver(&*rt, 1, ledger.task(0));
            let mut queued_bit = false;
            let placed = push::wake_placed(&*rt, 1, ledger.task(1), |t| {
                let _ = push::push_local(&*rt, 0, &local0, &mut queued_bit, t);
            });
            match placed {
                Placed::Delivered(Delivery::Queued(_)) => {
                    cases.hit("worker 1 was awake: plain delivery")
                }
                Placed::Woken(_) => cases.hit("worker 1 was claimed: deliver_to_woken"),
                _ => {}
            }
            w1.join().unwrap();
            if !rt.s.parked.contains(2) {
                // Claimed: worker 2's walk.
                if let Some(t) = (0..2).find_map(|v| rt.steal_from(v, &local2)) {
                    t.run();
                }
            }
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}
