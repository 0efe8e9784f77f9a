//! The inbox take under contention (`Mailbox::take`, through
//! `push::clear_queued`): the loom inbox reports a contended steal
//! (`Steal::Retry`, when another taker's CAS won the item it saw), as
//! crossbeam's `Injector` does, while other slots may still hold items. A
//! take that gives up on `Retry` would leave a delivery in the inbox of a
//! worker that has just cleared its `queued` bit, where no re-check looks.
//!
//! # Mutations
//!
//! Logic mutations each model catches are listed in `loom-tests/README.md`
//! ("Logic mutations").

#![cfg(loom)]

use hwsched::sched::push;
use loom::thread;
use loom_tests::{model, Cases, Ledger, Rt};

/// Two tasks delivered into worker 0's inbox while it was busy (its
/// `queued` bit set, as `push::deliver` leaves it). Worker 0 goes idle
/// and clears its bit, which takes one task from the inbox
/// (`push::clear_queued`), while worker 1 steals from that inbox (the
/// runtime's `worker::steal_from`, which retries a contended steal). The
/// thief takes at most one task, so the owner's take must get the other,
/// even when its first steal loses a slot to the thief.
#[test]
fn the_owners_take_is_contended_by_a_thief() {
    let cases = Cases::new(&[
        "the owner took the first task",
        "the thief took the first task",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let (rt, mut locals) = Rt::with_locals(2);
            let local1 = locals.pop().expect("worker 1's deque");
            for id in 0..2 {
                rt.mailboxes[0].inbox.push(ledger.task(id));
            }
            rt.s.queued
                .insert_rmw(0, loom::sync::atomic::Ordering::Relaxed);
            let thief = {
                let rt = rt.clone();
                thread::spawn(move || {
                    let t = rt.steal_from(0, &local1);
                    assert!(local1.is_empty(), "the loom inbox's batch is one task");
                    t.map(|t| t.run()).is_some()
                })
            };
            let mut queued_bit = true;
            let mine = push::clear_queued(&*rt, 0, &mut queued_bit);
            let thief_took = thief.join().unwrap();
            let mine = mine.expect(
                "the owner cleared its bit and took nothing, with a task left in its inbox",
            );
            assert!(thief_took, "the thief found the inbox empty");
            cases.hit(if mine.id() == 0 {
                "the owner took the first task"
            } else {
                "the thief took the first task"
            });
            mine.run();
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}
