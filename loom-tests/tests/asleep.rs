//! The pusher's checks around found work, where a lost wake leaves a worker
//! asleep for good beside a queued task. In these models a worker that
//! decides to sleep *suspends* instead of blocking (its `sleep` returns
//! `Pending`, as a worker that sleeps in the I/O driver does: the protocol
//! counts it parked with its bit set), so loom does not read a worker left
//! asleep with nothing to do as a deadlock. After the threads end, a
//! suspended worker whose bit a waker took (a claim: its wait would return)
//! walks once for what it was woken for; one whose bit is still set sleeps
//! on, and whatever is still queued then is stranded.
//!
//! - `a_worker_leaving_its_search_with_a_batch_marks_its_queue`: workers 0
//!   and 1 search, worker 2 is parked. Worker 0's steal ends: a batch lands
//!   in its deque (the thief copies the batch into its own deque, so no
//!   other worker can see those tasks between the victim's take and that
//!   push), it leaves searching with one task and runs it for good. Worker
//!   1 finds nothing and goes to sleep as the last searcher: its re-check
//!   reads the `queued` set. `idle_steps::found_work` must run the pusher's
//!   steps for the batch (`push::found_work` -> `after_push`: the `queued`
//!   bit, then the check), or the re-check misses it and worker 0's check,
//!   which saw worker 1 searching, woke nobody.
//! - `a_claim_that_lost_its_worker_looks_again`: worker 0 pushes a task
//!   and runs for good; worker 2, parked, wakes by itself with a delivery
//!   of its own and runs it for good; worker 1 looks for work and goes to
//!   sleep. The pusher's claim (`Sleepers::wake_one`) may count a searcher
//!   while worker 1 announces its sleep (its announce then skips the
//!   re-check) and find worker 2's bit gone and worker 1's not yet set:
//!   after the undo the check must be made again, and it finds worker 1.
//!
//! Checked in every interleaving: each task ran exactly once. Mutations
//! (`scripts/mutate.sh`): `logic-found-work-batch-unmarked` (the batch's
//! check without its `queued` bit) fails the first;
//! `logic-wake-one-undo-no-recheck` (the undo without the second look)
//! fails the second.

#![cfg(loom)]

use std::task::Poll;

use hwsched::sched::idle_steps::{self, Idle};
use hwsched::sched::push;
use hwsched::sched::queue::{Local, Steal};
use loom::thread;
use loom_tests::{model, model_bound_at_least, Cases, Ledger, Rt, Task, Worker};

/// How a model worker's idle period ended.
enum Ended {
    /// It found this task (run by the caller, for good).
    Ran(Task),
    /// It went to sleep (suspended), with its deque back for the end.
    Asleep(Local<Task>),
}

/// Worker `me`'s idle period through the production sequence, its sleep
/// suspended.
fn idle_or_sleep(w: &mut Worker) -> Option<Task> {
    let rt = w.rt.clone();
    match idle_steps::idle(&*rt, w, |_| Poll::Pending) {
        Idle::Run(t) => Some(t),
        Idle::Suspended => None,
        Idle::Shutdown => panic!("no shutdown in this model"),
    }
}

/// After every thread ended: worker `me`, asleep with `local`, walks once
/// if a waker claimed it (took its bit), as its woken wait would.
fn wake_if_claimed(rt: &Rt, me: usize, local: &Local<Task>, cases: &Cases) {
    if rt.s.parked.contains(me) {
        return;
    }
    cases.hit("a claimed worker walked");
    if let Some(t) = (0..rt.all.len())
        .filter(|&v| v != me)
        .find_map(|v| rt.steal_from(v, local))
    {
        t.run();
    }
}

#[test]
fn a_worker_leaving_its_search_with_a_batch_marks_its_queue() {
    let cases = Cases::new(&[
        "the walk found the item",
        "the last searcher's re-check found the item",
        "worker 1 slept and the batch's check woke it",
        "the batch's check woke worker 2",
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
            assert!(rt.s.to_searching() && rt.s.to_searching());
            let w1 = {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || {
                    let mut w = Worker::new(rt, 1, local1, cases.clone());
                    w.searching = true;
                    match idle_or_sleep(&mut w) {
                        Some(t) => Ended::Ran(t),
                        None => Ended::Asleep(std::mem::replace(&mut w.local, Local::new())),
                    }
                })
            };
            // Worker 0: its steal's batch lands, then `found_work`.
            let mut w0 = Worker::new(rt.clone(), 0, local0, cases.clone());
            w0.searching = true;
            w0.local.push(ledger.task(1));
            idle_steps::found_work(&*rt, &mut w0);
            // It runs task 0 for good: it looks at nothing again.
            ledger.task(0).run();
            match w1.join().unwrap() {
                Ended::Ran(t) => t.run(),
                Ended::Asleep(local) => {
                    if !rt.s.parked.contains(1) {
                        cases.hit("worker 1 slept and the batch's check woke it");
                    }
                    wake_if_claimed(&rt, 1, &local, &cases);
                }
            }
            if !rt.s.parked.contains(2) {
                cases.hit("the batch's check woke worker 2");
            }
            wake_if_claimed(&rt, 2, &local2, &cases);
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

#[test]
fn a_claim_that_lost_its_worker_looks_again() {
    let cases = Cases::new(&[
        "worker 1 found the task",
        "worker 1 slept and the pusher's check woke it",
        "worker 2 ran its own task",
        "worker 2 ran the pusher's task",
    ]);
    // Four preemptions: worker 1 stops after its refused search, worker 2
    // after its announce, worker 0 after its claim and after its take.
    model_bound_at_least(4, {
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let (rt, mut locals) = Rt::with_locals(3);
            let local2 = locals.pop().expect("worker 2's deque");
            let local1 = locals.pop().expect("worker 1's deque");
            let local0 = locals.pop().expect("worker 0's deque");
            // Workers 0 and 2 search: worker 1 may be refused (the cap).
            assert!(rt.s.to_searching() && rt.s.to_searching());
            let w1 = {
                let (rt, cases) = (rt.clone(), cases.clone());
                thread::spawn(move || {
                    let mut w = Worker::new(rt, 1, local1, cases);
                    match idle_or_sleep(&mut w) {
                        Some(t) => Ended::Ran(t),
                        None => Ended::Asleep(std::mem::replace(&mut w.local, Local::new())),
                    }
                })
            };
            // Worker 2 finds nothing, sleeps, and wakes by itself with work
            // of its own (task 1, delivered into its inbox while it slept:
            // the deliverer's check is left out, which only wakes fewer),
            // which it runs for good.
            let w2 = {
                let (rt, cases, t) = (rt.clone(), cases.clone(), ledger.task(1));
                thread::spawn(move || {
                    let mut w = Worker::new(rt.clone(), 2, local2, cases.clone());
                    w.searching = true;
                    let mut t = Some(t);
                    let ended = idle_steps::idle(&*rt, &mut w, |_| match t.take() {
                        Some(t) => {
                            rt.mailboxes[2].inbox.push(t);
                            Poll::Ready(true)
                        }
                        // A second sleep (its task was stolen): for good.
                        None => Poll::Pending,
                    });
                    // Its own task, if it never slept: it runs it too.
                    if let Some(t) = t {
                        t.run();
                    }
                    match ended {
                        Idle::Run(found) => {
                            cases.hit(if found.id() == 1 {
                                "worker 2 ran its own task"
                            } else {
                                "worker 2 ran the pusher's task"
                            });
                            found.run();
                            None
                        }
                        Idle::Suspended => Some(std::mem::replace(&mut w.local, Local::new())),
                        Idle::Shutdown => panic!("no shutdown in this model"),
                    }
                })
            };
            // Worker 0's search ends with work of its own; it pushes task
            // 0 and runs for good.
            let w0 = {
                let (rt, cases, t) = (rt.clone(), cases.clone(), ledger.task(0));
                thread::spawn(move || {
                    let mut w = Worker::new(rt.clone(), 0, local0, cases);
                    w.searching = true;
                    idle_steps::found_work(&*rt, &mut w);
                    let _ = push::push_local(&*rt, 0, &w.local, &mut w.queued_bit, t);
                })
            };
            w0.join().unwrap();
            let w2_asleep = w2.join().unwrap();
            match w1.join().unwrap() {
                Ended::Ran(t) => {
                    cases.hit("worker 1 found the task");
                    t.run();
                }
                Ended::Asleep(local) => {
                    if !rt.s.parked.contains(1) {
                        cases.hit("worker 1 slept and the pusher's check woke it");
                    }
                    wake_if_claimed(&rt, 1, &local, &cases);
                }
            }
            if let Some(local) = w2_asleep {
                wake_if_claimed(&rt, 2, &local, &cases);
            }
            // What is left in worker 2's inbox (task 1, when it ran the
            // pusher's task) it runs next.
            while let Steal::Success(t) = rt.mailboxes[2].inbox.steal() {
                t.run();
            }
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}
