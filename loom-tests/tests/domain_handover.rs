//! The place queues' hand-off (`src/sched/place_queue.rs`) when a worker woken for a
//! domain's task finds other work first: the wake is handed on
//! (`place_queue::left_behind`, and the worker's own inbox counted as work left
//! behind by `idle_steps::found_work`), and when a claim finds its worker
//! awake and is undone (`Sleepers::wake_in`'s `on_undo`). Worker 1 runs the
//! production idle sequence over the models' `Worker`; see `domain.rs`
//! beside this file for the first race.
//!
//! The worker that must be handed the wake, worker 2, is parked before the
//! model starts (`Sleepers::to_parked`, with nothing queued: its re-check
//! found nothing) and has no thread: when the others are done, the model
//! looks whether it was claimed (its `parked` bit taken by a waker) and,
//! if so, takes what its idle period would (its place queues, then a
//! steal). A task left in a queue that only a parked, unclaimed worker
//! could take is stranded: the model fails. A worker going to sleep
//! against the push is `domain.rs`'s race; here the peer's state is fixed,
//! which keeps each model to two or three threads and a few seconds at
//! `LOOM_MAX_PREEMPTIONS=4`.
//!
//! # Mutations
//!
//! Logic mutations of the steps each model catches are listed in
//! `loom-tests/README.md` ("Logic mutations").

#![cfg(loom)]
// One-domain spans are the models' topology, not a mistaken range.
#![allow(clippy::single_range_in_vec_init)]

use hwsched::sched::place_queue;
use hwsched::sched::push;
use hwsched::sched::queue::Local;
use loom::thread;
use loom_tests::{model, Cases, Ledger, Rt, Task, Worker};

/// The worker parked before the model starts, with no thread.
const PEER: usize = 2;

/// Worker 1 (the only idle thread) runs one idle period, then the task it
/// found, and then stays in that task's poll (a long poll: it looks at
/// nothing again).
fn worker_1(
    rt: &loom::sync::Arc<Rt>,
    local: Local<Task>,
    cases: &std::sync::Arc<Cases>,
) -> thread::JoinHandle<usize> {
    let (rt, cases) = (rt.clone(), cases.clone());
    thread::spawn(move || {
        let t: Task = Worker::new(rt, 1, local, cases).idle_until_work();
        let id = t.id();
        t.run();
        id
    })
}

/// Parks the peer before any push: its bit set, counted parked, and its
/// re-check (nothing is queued yet) found nothing.
fn park_the_peer(rt: &Rt) {
    let _ = rt.s.to_parked(PEER, false);
}

/// After the other threads are done: the peer, if a waker claimed it,
/// takes what its idle period would (its place queues, then a steal from
/// the others) and runs it. Returns whether it was claimed.
fn the_peer_if_claimed(rt: &Rt, local: &Local<Task>) -> bool {
    if rt.s.parked.contains(PEER) {
        return false;
    }
    let dq = rt.domains.as_ref().unwrap();
    let t = place_queue::take(dq, PEER).or_else(|| (0..PEER).find_map(|v| rt.steal_from(v, local)));
    if let Some(t) = t {
        t.run();
    }
    true
}

/// Three workers: worker 0 busy for good (this thread: the pusher), worker
/// 1 in two domains (its core {1}, whose queue stays empty: its nearest,
/// and the LLC {1, 2}), worker 2 in the LLC, parked. Worker 0 pushes a
/// task into the LLC's queue (its wake looks at worker 1 first) and
/// delivers a plain task to worker 1's inbox. Worker 1, perhaps claimed
/// for the placed task, may take the plain one first (the delivery's
/// unpark): it must hand the wake on to worker 2 (the domain check of a
/// worker leaving its idle period with other work,
/// `place_queue::left_behind`, which must look at each of its queues, not
/// only its nearest).
#[test]
fn a_worker_woken_for_the_domain_hands_the_wake_on() {
    let cases = Cases::new(&[
        "took the placed task without sleeping",
        "slept, then took the placed task",
        "woken for the placed task, ran the plain one",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let (rt, mut locals) = Rt::with_domains(3, &[1..2, 1..3]);
            let local2 = locals.pop().expect("worker 2's deque");
            let local1 = locals.pop().expect("worker 1's deque");
            park_the_peer(&rt);
            let w1 = worker_1(&rt, local1, &cases);
            let dq = rt.domains.as_ref().unwrap();
            let llc = dq.of(1).last().unwrap();
            assert_eq!(dq.of(1).count(), 2, "worker 1 is in two domains");
            let woke = place_queue::push(&*rt, dq, llc, 1, ledger.task(0));
            let _ = push::deliver(&*rt, 1, ledger.task(1));
            let ran = w1.join().unwrap();
            if ran == 1 && matches!(woke, Some((1, _))) {
                cases.hit("woken for the placed task, ran the plain one");
            }
            the_peer_if_claimed(&rt, &local2);
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

/// Three workers: worker 0 busy for good (this thread), worker 1 with a
/// task in its core's queue {1} from the start, worker 2 outside that
/// domain, parked. Worker 0 delivers a plain task to worker 1's inbox
/// while worker 1 searches (its check counts on the searcher and wakes
/// nobody): worker 1 takes the placed task and runs it for good, so it
/// must run the pusher's steps for what its inbox holds
/// (`idle_steps::found_work`), or worker 2 sleeps beside the plain task.
/// (Worker 1 may take the plain task first, from its inbox: the placed
/// task then waits for it, the only worker of its domain.)
#[test]
fn a_searcher_leaving_with_a_placed_task_hands_its_inbox_on() {
    let cases = Cases::new(&[
        "took the placed task without sleeping",
        "left its inbox's task to the peer",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let (rt, mut locals) = Rt::with_domains(3, &[1..2]);
            let local2 = locals.pop().expect("worker 2's deque");
            let local1 = locals.pop().expect("worker 1's deque");
            park_the_peer(&rt);
            let dq = rt.domains.as_ref().unwrap();
            let _ = place_queue::push(&*rt, dq, 0, 1, ledger.task(0));
            let w1 = worker_1(&rt, local1, &cases);
            let _ = push::deliver(&*rt, 1, ledger.task(1));
            let ran = w1.join().unwrap();
            if ran == 0 {
                assert!(
                    the_peer_if_claimed(&rt, &local2),
                    "the plain task is stranded in worker 1's inbox while worker 2 sleeps"
                );
                cases.hit("left its inbox's task to the peer");
            } else {
                // Worker 1 is busy: its domain's task waits for it.
                place_queue::take(dq, 1).expect("the placed task").cancel();
            }
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

/// Three workers: worker 0 busy for good (this thread), worker 1 in a
/// core's domain {1}, worker 2 outside it, parked. A thread outside the
/// runtime pushes into the core's queue while worker 1 goes to sleep, and
/// worker 0 delivers a plain task to its own inbox (it is busy: stealable
/// work). The push's claim may see worker 1's bit and find it gone when it
/// takes it (worker 1's re-check saw the task and it left its wait by
/// itself): while the claim stood it counted a searcher, so the delivery's
/// check skipped its wake, and worker 1 left searching (or was refused)
/// as if another searched. The undo must make the pusher's check again
/// (`Sleepers::wake_in`'s `on_undo`), or worker 2 sleeps beside the plain
/// task.
#[test]
fn an_undone_claim_makes_the_pushers_check_again() {
    let cases = Cases::new(&[
        "took the placed task without sleeping",
        "slept, then took the placed task",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let (rt, mut locals) = Rt::with_domains(3, &[1..2]);
            let local2 = locals.pop().expect("worker 2's deque");
            let local1 = locals.pop().expect("worker 1's deque");
            park_the_peer(&rt);
            let w1 = worker_1(&rt, local1, &cases);
            let pusher = {
                let (rt, t) = (rt.clone(), ledger.task(0));
                thread::spawn(move || {
                    let dq = rt.domains.as_ref().unwrap();
                    let _ = place_queue::push(&*rt, dq, 0, 1, t);
                })
            };
            let _ = push::deliver(&*rt, 0, ledger.task(1));
            pusher.join().unwrap();
            let ran = w1.join().unwrap();
            if ran == 0 {
                assert!(
                    the_peer_if_claimed(&rt, &local2),
                    "the plain task is stranded in worker 0's inbox while worker 2 sleeps"
                );
            } else {
                // Worker 1 stole the plain task and is busy: its domain's
                // task waits for it.
                let dq = rt.domains.as_ref().unwrap();
                place_queue::take(dq, 1).expect("the placed task").cancel();
            }
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}

/// Three workers: worker 0 busy for good (this thread), workers 1 and 2 in
/// an LLC {1, 2}, worker 2 parked. Worker 0 pushes two tasks into the
/// LLC's queue while worker 1 goes to sleep; worker 1 takes one and runs
/// it for good, so the other must have worker 2 claimed: by a push's wake
/// (the second finds the queue non-empty and wakes all the same), or by
/// worker 1 leaving its idle period with a task behind it
/// (`place_queue::left_behind`).
#[test]
fn two_placed_pushes_one_sleeper_and_a_parked_peer() {
    let cases = Cases::new(&[
        "took the placed task without sleeping",
        "slept, then took the placed task",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let (rt, mut locals) = Rt::with_domains(3, &[1..3]);
            let local2 = locals.pop().expect("worker 2's deque");
            let local1 = locals.pop().expect("worker 1's deque");
            park_the_peer(&rt);
            let w1 = worker_1(&rt, local1, &cases);
            let dq = rt.domains.as_ref().unwrap();
            for id in 0..2 {
                let _ = place_queue::push(&*rt, dq, 0, 1, ledger.task(id));
            }
            w1.join().unwrap();
            assert!(
                the_peer_if_claimed(&rt, &local2),
                "a placed task is left while worker 2 sleeps"
            );
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}
