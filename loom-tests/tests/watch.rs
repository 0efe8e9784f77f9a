//! The watch over private batches (`src/sched/watch.rs`): an owner whose batch
//! left tasks in its private queue, and which then never comes back from
//! its poll, must leave a worker watching (sleeping at most a tick, then
//! taking the stale queue) whenever a worker sleeps. The owner's check
//! (`hwsched::sched::watch::kept_private`) races a worker going to sleep
//! (`before_sleep`, after its `parked` bit: `Sleepers::to_parked`), and a
//! watcher leaving for work (`leave`). A sleeper that neither claims the
//! role nor is woken parks for good, which loom reports as a deadlock.
//!
//! # Mutations
//!
//! Logic mutations each model catches are listed in `loom-tests/README.md`
//! ("Logic mutations").

#![cfg(loom)]

use hwsched::sched::watch::{self, Watch};
use loom::thread;
use loom_tests::{model, Cases, Rt};

/// A time long after the last private work any sleeper saw (the role's
/// linger does not apply).
const NOW: u64 = 10 * watch::LINGER_NS;

/// Worker `me` goes to sleep until it holds the role: it announces its
/// sleep, runs `before_sleep`, and parks unless it watches; woken (a claim
/// counted it awake and searching), it finds nothing it may take and goes
/// to sleep again.
fn sleep_until_watching(rt: &Rt, w: &Watch, me: usize, cases: &Cases) {
    let mut searching = false;
    let mut watching = false;
    let mut woken = false;
    loop {
        rt.s.to_parked(me, searching);
        if watch::before_sleep(w, me, NOW, &mut watching) {
            cases.hit(if woken {
                "woken, then watching"
            } else {
                "saw the private bit and watched"
            });
            assert!(w.watchers() >= 1, "the watcher is counted");
            return;
        }
        if w.watchers() >= watch::MAX_WATCHERS {
            // (A snapshot after the fact: the count was full when it
            // looked, or filled since.)
            cases.hit("found the watchers full and slept");
        }
        rt.mailboxes[me].parker.park();
        woken = true;
        searching = true;
    }
}

/// Worker 0's batch leaves tasks in its private queue while worker 1 (the
/// only other one) goes to sleep; worker 0 then stays in its poll for
/// good. Store buffering 1 of `src/sched/watch.rs`: either the sleeper sees the
/// owner's bit and claims the role, or the owner sees nobody watching and
/// the sleeper's `parked` bit, and wakes it.
#[test]
#[allow(clippy::single_range_in_vec_init)]
fn an_owner_keeps_a_batch_while_the_other_worker_goes_to_sleep() {
    let cases = Cases::new(&["saw the private bit and watched", "woken, then watching"]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new(2);
            let w = loom::sync::Arc::new(Watch::new(2, &[0..2]));
            let w1 = {
                let (rt, w, cases) = (rt.clone(), w.clone(), cases.clone());
                thread::spawn(move || sleep_until_watching(&rt, &w, 1, &cases))
            };
            let _ = watch::kept_private(&*rt, &w, 0, NOW);
            // Worker 0 never returns from its poll.
            w1.join().unwrap();
        }
    });
    cases.assert_all_reached();
}

/// Worker 1 holds the role (asleep) and leaves it for work of its own
/// (an event woke it), while worker 0's batch leaves tasks in its private
/// queue and worker 2 goes to sleep. Store buffering 2: either the leaving
/// watcher sees the owner's bit and wakes a successor, or the owner sees
/// nobody watching and wakes one, or worker 2 sees the bit itself; worker
/// 2 must end up watching.
#[test]
#[allow(clippy::single_range_in_vec_init)]
fn a_watcher_leaves_while_an_owner_keeps_a_batch() {
    let cases = Cases::new(&[
        "saw the private bit and watched",
        "woken, then watching",
        "the leaving watcher woke a successor",
        "the owner woke a watcher",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new(3);
            let w = loom::sync::Arc::new(Watch::new(3, &[0..3]));
            // Worker 1 asleep and watching (within the linger of earlier
            // private work: its time is 0, when the last was seen).
            rt.s.to_parked(1, false);
            let mut watching1 = false;
            assert!(watch::before_sleep(&w, 1, 0, &mut watching1));
            let w1 = {
                let (rt, w, cases) = (rt.clone(), w.clone(), cases.clone());
                thread::spawn(move || {
                    // An event wakes it: it leaves the parked set by itself,
                    // leaves the role, and runs work for good.
                    let _ = rt.s.leave_parked(1);
                    if watch::leave(&*rt, &w, 1, false, false, &mut watching1).is_some() {
                        cases.hit("the leaving watcher woke a successor");
                    }
                })
            };
            let w2 = {
                let (rt, w, cases) = (rt.clone(), w.clone(), cases.clone());
                thread::spawn(move || sleep_until_watching(&rt, &w, 2, &cases))
            };
            if watch::kept_private(&*rt, &w, 0, NOW).is_some() {
                cases.hit("the owner woke a watcher");
            }
            w1.join().unwrap();
            w2.join().unwrap();
        }
    });
    cases.assert_all_reached();
}

/// Worker 1 holds the role, asleep in its poller, and wakes with a batch
/// of its own: its owner's check finds itself watching (no wake), then it
/// leaves the role to run the batch's first task, its private queue
/// holding the rest, while worker 2 goes to sleep. If the first task runs
/// long, nobody but a new watcher can take the rest: worker 2 must end up
/// watching (the leaving watcher counts its own queue).
#[test]
#[allow(clippy::single_range_in_vec_init)]
fn a_watcher_leaves_with_a_batch_of_its_own() {
    let cases = Cases::new(&["saw the private bit and watched", "woken, then watching"]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new(3);
            let w = loom::sync::Arc::new(Watch::new(3, &[0..3]));
            rt.s.to_parked(1, false);
            let mut watching1 = false;
            assert!(watch::before_sleep(&w, 1, 0, &mut watching1));
            let w2 = {
                let (rt, w, cases) = (rt.clone(), w.clone(), cases.clone());
                thread::spawn(move || sleep_until_watching(&rt, &w, 2, &cases))
            };
            // Worker 1's batch: its check (it watches: no wake), then it
            // leaves its sleep and the role, its queue not empty.
            assert!(watch::kept_private(&*rt, &w, 1, NOW).is_none());
            let _ = rt.s.leave_parked(1);
            let _ = watch::leave(&*rt, &w, 1, true, false, &mut watching1);
            w2.join().unwrap();
        }
    });
    cases.assert_all_reached();
}

/// Worker 1 is asleep, not watching (no private work was about), when
/// worker 0's batch leaves tasks in its private queue and worker 2 goes to
/// sleep. Worker 0's check, finding nobody watching, may call worker 1,
/// which then finds other work instead of watching (it stands for a worker
/// that steals what another pushed): it must pass the call on, so that
/// worker 2 ends up watching. (With a named watcher, a claimed worker that
/// found work never took the role, and worker 2 slept for good.)
#[test]
#[allow(clippy::single_range_in_vec_init)]
fn a_called_worker_that_finds_work_passes_the_call_on() {
    let cases = Cases::new(&[
        "saw the private bit and watched",
        "woken, then watching",
        "the called worker passed the call on",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new(3);
            let w = loom::sync::Arc::new(Watch::new(3, &[0..3]));
            rt.s.to_parked(1, false);
            let mut watching1 = false;
            assert!(!watch::before_sleep(&w, 1, NOW, &mut watching1));
            let w1 = {
                let (rt, w, cases) = (rt.clone(), w.clone(), cases.clone());
                thread::spawn(move || {
                    rt.mailboxes[1].parker.park();
                    // Called, or the model's closing wake: it finds work
                    // and leaves its idle period.
                    if watch::leave(&*rt, &w, 1, false, false, &mut watching1).is_some() {
                        cases.hit("the called worker passed the call on");
                    }
                })
            };
            let w2 = {
                let (rt, w, cases) = (rt.clone(), w.clone(), cases.clone());
                thread::spawn(move || sleep_until_watching(&rt, &w, 2, &cases))
            };
            let _ = watch::kept_private(&*rt, &w, 0, NOW);
            w2.join().unwrap();
            // Worker 2 watches: the model ends (worker 1, if still asleep,
            // is woken to finish).
            let _ = rt.mailboxes[1].parker.notify();
            w1.join().unwrap();
        }
    });
    cases.assert_all_reached();
}

/// As `a_called_worker_that_finds_work_passes_the_call_on`, but worker 1
/// leaves its sleep on its own (an event in its poller) instead of waiting
/// for a notify: the owner's claim may come before it leaves the parked set
/// and its call mark after it has left for work. Claimed (its
/// `leave_parked` says so), it must check as a called worker does, so that
/// worker 2 ends up watching.
#[test]
#[allow(clippy::single_range_in_vec_init)]
fn a_claimed_worker_that_woke_on_its_own_passes_the_call_on() {
    let cases = Cases::new(&[
        "saw the private bit and watched",
        "woken, then watching",
        "the claimed worker passed the call on",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new(3);
            let w = loom::sync::Arc::new(Watch::new(3, &[0..3]));
            rt.s.to_parked(1, false);
            let mut watching1 = false;
            assert!(!watch::before_sleep(&w, 1, NOW, &mut watching1));
            let w1 = {
                let (rt, w, cases) = (rt.clone(), w.clone(), cases.clone());
                thread::spawn(move || {
                    // An event wakes it: it leaves the parked set by itself
                    // (or finds it was claimed), finds work and leaves.
                    let claimed = rt.s.leave_parked(1);
                    if watch::leave(&*rt, &w, 1, false, claimed, &mut watching1).is_some() {
                        cases.hit("the claimed worker passed the call on");
                    }
                })
            };
            let w2 = {
                let (rt, w, cases) = (rt.clone(), w.clone(), cases.clone());
                thread::spawn(move || sleep_until_watching(&rt, &w, 2, &cases))
            };
            let _ = watch::kept_private(&*rt, &w, 0, NOW);
            w1.join().unwrap();
            w2.join().unwrap();
        }
    });
    cases.assert_all_reached();
}

/// Workers 1 and 2 watch ([`watch::MAX_WATCHERS`] of them) while worker 3
/// goes to sleep (it finds the count full and does not watch) and worker
/// 0's batch leaves tasks in its private queue (it sees watchers and wakes
/// nobody); then both watchers leave for work. Store buffering 3 of
/// `src/sched/watch.rs`: either worker 3 reads the count after a decrement and
/// watches, or the last watcher to leave sees its `parked` bit and calls
/// it; worker 3 must end up watching.
#[test]
#[allow(clippy::single_range_in_vec_init)]
fn a_sleeper_that_finds_the_watchers_full_is_called_when_they_leave() {
    assert_eq!(watch::MAX_WATCHERS, 2, "the model sets up two watchers");
    let cases = Cases::new(&[
        "saw the private bit and watched",
        "woken, then watching",
        "the last watcher called a successor",
        "found the watchers full and slept",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new(4);
            let w = loom::sync::Arc::new(Watch::new(4, &[0..4]));
            // Workers 1 and 2 asleep and watching (within the linger of
            // earlier private work: their time is 0, when it was seen).
            let mut leavers = Vec::new();
            for v in [1, 2] {
                rt.s.to_parked(v, false);
                let mut watching = false;
                assert!(watch::before_sleep(&w, v, 0, &mut watching));
                let (rt, w, cases) = (rt.clone(), w.clone(), cases.clone());
                leavers.push(thread::spawn(move || {
                    // An event wakes it: it leaves the parked set, the
                    // count, and runs work for good.
                    let claimed = rt.s.leave_parked(v);
                    if watch::leave(&*rt, &w, v, false, claimed, &mut watching).is_some() {
                        cases.hit("the last watcher called a successor");
                    }
                }));
            }
            let w3 = {
                let (rt, w, cases) = (rt.clone(), w.clone(), cases.clone());
                thread::spawn(move || sleep_until_watching(&rt, &w, 3, &cases))
            };
            let _ = watch::kept_private(&*rt, &w, 0, NOW);
            for t in leavers {
                t.join().unwrap();
            }
            w3.join().unwrap();
        }
    });
    cases.assert_all_reached();
}
