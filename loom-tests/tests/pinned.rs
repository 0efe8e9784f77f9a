//! The pinned hand-off racing its owner going to sleep (`src/sched/park.rs`,
//! "Pinned tasks"): a task placed on a worker (`Mailbox::pinned`) or a
//! worker's local task (`Mailbox::locals`) is pushed and counted, then the
//! owner is notified; the owner, idle, looks at the count after its
//! parker's `prepare` and again after its park. Checked in every
//! interleaving:
//!
//! - the owner, running the production idle sequence
//!   (`hwsched::sched::idle_steps::idle`) with no other work anywhere, takes the
//!   item and never sleeps forever (loom reports the deadlock);
//! - a pinned push racing shutdown (the production sequence,
//!   `hwsched::sched::shutdown`, on both sides): the item is run by the owner or
//!   cancelled exactly once (by the pusher's re-check,
//!   `deliver_pinned_or_drain`, by the owner's exit, or by the shutdown's
//!   `drain_inboxes`), never stranded.
//!
//! Mutations (applied by hand to `src/sched/park.rs`, these models run at
//! `LOOM_MAX_PREEMPTIONS=3`, reverted):
//!
//! | mutation | result |
//! | --- | --- |
//! | `wait_with` skips `take_pinned` after `prepare` | caught by `pinned_push_races_idle_owner` and `local_push_races_idle_owner`: deadlock (the token consumed by `prepare`, then a park with the item queued) |

#![cfg(loom)]

use loom::thread;
use loom_tests::{model, Cases, Ledger, Rt, Stop, Worker};

/// A pinned push (or a local one, with `local`) racing its owner's idle
/// period: the owner runs the production idle sequence until it has the
/// item.
fn push_races_idle_owner(local: bool) {
    let cases = Cases::new(&["the worker took the item from its inbox"]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let (rt, mut locals) = Rt::with_locals(1);
            let owner = {
                let (rt, cases) = (rt.clone(), cases.clone());
                let l = locals.pop().unwrap();
                thread::spawn(move || {
                    let mut w = Worker::new(rt, 0, l, cases);
                    w.idle_until_work().run();
                })
            };
            let m = &rt.mailboxes[0];
            if local {
                let _ = m.deliver_local(ledger.task(0));
            } else {
                let _ = m.deliver_pinned_or_drain(ledger.task(0), &rt.shutdown, |t| t.cancel());
            }
            owner.join().unwrap();
            assert!(m.take_pinned().is_none());
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

#[test]
fn pinned_push_races_idle_owner() {
    push_races_idle_owner(false);
}

#[test]
fn local_push_races_idle_owner() {
    push_races_idle_owner(true);
}

/// A pinned push racing shutdown and the owner's exit: run by the owner,
/// or cancelled by the pusher's re-check, by the owner's exit or by the
/// shutdown's drain, exactly once. The owner runs the production loop and
/// exit (`hwsched::sched::shutdown::{next, exit}`), the shutdown is the
/// production sequence (`hwsched::sched::shutdown::shutdown`).
#[test]
fn pinned_push_races_shutdown() {
    let cases = Cases::new(&["ran", "cancelled"]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let (rt, mut locals) = Rt::with_locals(1);
            let mut stop = Stop::new(&rt, &cases);
            let owner = {
                let (rt, cases) = (rt.clone(), cases.clone());
                let l = locals.pop().unwrap();
                thread::spawn(move || {
                    Worker::new(rt, 0, l, cases).run_until_shutdown(|_, t| t.run())
                })
            };
            stop.workers.push(owner);
            let pusher = {
                let (rt, ledger) = (rt.clone(), ledger.clone());
                thread::spawn(move || {
                    let _ = rt.mailboxes[0].deliver_pinned_or_drain(
                        ledger.task(0),
                        &rt.shutdown,
                        |t| t.cancel(),
                    );
                })
            };
            stop.shutdown();
            pusher.join().unwrap();
            rt.assert_empty();
            ledger.assert_each_once();
            if ledger.ran(0) == 1 {
                cases.hit("ran");
            } else {
                cases.hit("cancelled");
            }
        }
    });
    cases.assert_all_reached();
}
