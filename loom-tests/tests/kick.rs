//! The overload kick (`src/balance.rs`, "Overload kicks"; `Core::maybe_kick`
//! in `src/worker.rs`; `Mailbox::kick`).
//!
//! Worker 0 is overloaded: its local deque holds two items. Like
//! `maybe_kick` / `nearest_parked`, it kicks worker 1 only if it sees it
//! parked (`Parker::is_parked`, a `Relaxed` load), with
//! `Mailbox::kick(0)`, then runs its own deque. Worker 1 waits
//! (`Mailbox::wait` in a loop); when a wait returns
//! `Wait::Woken { kicked_by: Some(0) }` it steals from worker 0's `Stealer`
//! (`steal_batch_and_pop`) and runs what it got, as `walk` does first for a
//! kicked worker. When worker 0 sends no kick (worker 1 did not look parked)
//! it ends the model by delivering a "stop" item instead (scaffolding: in
//! the runtime worker 1 would simply stay idle).
//!
//! Checked in every interleaving:
//! - every queued item is run exactly once, by one of the two workers;
//! - a kick sent to a parked worker wakes it (no deadlock) and the wait that
//!   slept returns `Woken { slept: true, kicked_by: Some(0) }`: the kick note
//!   (a `Relaxed` store) is published by `notify`'s release and acquired by
//!   the parker's wake-up.
//!
//! # Mutations
//!
//! Each applied once to `src/park.rs` (on a copy of the working tree),
//! `kick_wakes_a_parked_worker_which_steals_from_the_kicker` run at
//! `LOOM_MAX_PREEMPTIONS=3`, reverted:
//!
//! | mutation | result |
//! | --- | --- |
//! | `kick` stores the note after `notify` | caught: "deadlock" (the woken worker finds no note, reports `Woken { kicked_by: None }`, parks again, and nothing wakes it) |
//! | no `yield_now` before `is_parked` (model side) | caught by the case check: "no execution reached [\"kicked a parked worker\"]" (tokio-rs/loom#392) |
//! | `park`'s final `swap(0, AcqRel)` becomes `store(0, Release)` | not caught, and not needed here: the wait loop's `load(Acquire)` already synchronized with the kick (the store only loses a token that arrives after the loop; see `shutdown.rs`) |
//! | `notify`'s `fetch_or` `AcqRel` becomes `Release` | not caught, and not needed here: the kicker reads nothing the kicked worker published |
//! | `notify`'s `fetch_or` becomes `Relaxed`; or the worker side (`prepare`, `park`) `Relaxed`; or every `Parker` ordering `Relaxed` | NOT caught. When the kicked worker sleeps, the parker's mutex (taken by the notifier after the note, re-taken by the waking condvar wait) orders the note anyway; the failing interleaving is the kick landing between the worker's `fetch_or(PARKED)` and its re-check, which loom's reduction never schedules because the kicker's `kick` follows its own `is_parked` load of the same word (tokio-rs/loom#392). With loom's reduction fixed for that (a patch tracking each thread's last load), or with an inbox stand-in made of atomics, it is caught: "deadlock" |
//!
//! # A kick absorbed by the next wait (fixed)
//!
//! `kick_is_not_absorbed_by_a_concurrent_delivery` mirrors `worker::idle`,
//! which takes the kick note at the top of each idle round. Before
//! `Mailbox::wait_for` took the kick note right after `prepare()`, loom
//! found this execution (bound 2):
//!
//! 1. worker 1 parks; a waker delivers an item: `Unparked`;
//! 2. worker 1 wakes (`swap(0)`), `wait` returns `Work(slept: true)`, it
//!    runs the item, and at the top of the next idle round `take_kick()`
//!    finds no note (none sent yet);
//! 3. worker 0 reads `is_parked() == true` (a stale `Relaxed` read of the
//!    `PARKED` bit worker 1 has just cleared, which `nearest_parked` can do
//!    in the runtime too), and kicks: `NoUnparkNeeded`;
//! 4. worker 1's `wait`: `prepare()` consumes the kick's token, the inbox is
//!    empty, it parks for good with `kicked_by` still set.
//!
//! No item is lost (worker 0 still owns its queue), but the kicked worker
//! does not help, and the note goes stale. A fix that makes this model pass
//! (checked at bounds 2 and 3, with every other model still passing): in
//! `Mailbox::wait`, after the shutdown check and before spinning, return
//! `Wait::Woken { slept: false, kicked_by: Some(k) }` if `take_kick()` finds
//! a note. If `prepare` consumed the kick's token its acquire makes the
//! note visible; if it did not see the token, `park`'s `fetch_or(PARKED)`
//! will, and the check after the park reads the note.

#![cfg(loom)]

use hwsched::park::{Mailbox, Notified, Wait};
use hwsched::queue::{Local, Steal, Stealer};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{model, Cases, Ledger, Task};

const KICKER: usize = 0;
/// Id of the stop item (ids 0 and 1 are worker 0's queued items).
const STOP: usize = 2;

/// `steal_batch_and_pop` from the kicker into `local`, then run all of it.
fn steal_from_kicker(victim: &Stealer<Task>, local: &Local<Task>, cases: &Cases) {
    loop {
        match victim.steal_batch_and_pop(local) {
            Steal::Success(t) => {
                cases.hit("kicked worker stole an item");
                t.run();
                break;
            }
            Steal::Empty => {
                cases.hit("kicked worker found the deque empty");
                break;
            }
            Steal::Retry => continue,
        }
    }
    while let Some(t) = local.pop() {
        t.run();
    }
}

/// How the first wait of worker 1 that slept ended.
#[derive(Debug, PartialEq, Eq)]
enum FirstSleep {
    /// `Wait::Woken` with this `kicked_by`.
    Woken(Option<usize>),
    /// `Wait::Work`: the stop item.
    Work,
}

/// Worker 1: waits until it has handled a kick or received the stop item.
fn kicked_worker(
    mb: &Mailbox<Task>,
    shutdown: &AtomicBool,
    victim: &Stealer<Task>,
    cases: &Cases,
) -> Option<FirstSleep> {
    let local = Local::new();
    let mut first_sleep = None;
    loop {
        match mb.wait(&local, shutdown, || false, || {}) {
            Wait::Woken { slept, kicked_by } => {
                if slept && first_sleep.is_none() {
                    first_sleep = Some(FirstSleep::Woken(kicked_by));
                }
                if let Some(k) = kicked_by {
                    assert_eq!(k, KICKER);
                    steal_from_kicker(victim, &local, cases);
                    return first_sleep;
                }
            }
            Wait::Work { item, slept } => {
                if slept && first_sleep.is_none() {
                    first_sleep = Some(FirstSleep::Work);
                }
                assert_eq!(item.id(), STOP, "only the stop item is delivered");
                item.run();
                assert!(local.is_empty());
                return first_sleep;
            }
            Wait::Shutdown => panic!("no shutdown in this model"),
        }
    }
}

#[test]
fn kick_wakes_a_parked_worker_which_steals_from_the_kicker() {
    let cases = Cases::new(&[
        "kicked a parked worker",
        "saw no parked worker",
        "kicked worker stole an item",
        "kicked worker found the deque empty",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(3);
            let mb1 = Arc::new(Mailbox::new());
            let shutdown = Arc::new(AtomicBool::new(false));
            // Worker 0's deque, filled before the race starts.
            let local0 = Local::new();
            local0.push(ledger.task(0));
            local0.push(ledger.task(1));
            let w1 = {
                let (mb1, shutdown, victim) = (mb1.clone(), shutdown.clone(), local0.stealer());
                let cases = cases.clone();
                thread::spawn(move || kicked_worker(&mb1, &shutdown, &victim, &cases))
            };
            // Worker 0 (this thread): maybe_kick, then run its own deque.
            // The yield lets worker 1 run first in loom's default schedule.
            // Without it no execution ever sees `is_parked() == true`: worker
            // 1's `fetch_or(PARKED)` follows its own `prepare` load of the same
            // word, and loom's partial-order reduction then never reorders it
            // before this thread's earlier load (tokio-rs/loom#392). A yield
            // adds no happens-before edge; the branch where the load comes
            // first (and reads 0) is still explored.
            thread::yield_now();
            let kick = if mb1.parker.is_parked() {
                cases.hit("kicked a parked worker");
                ledger.task(STOP).cancel(); // not needed: the kick ends the model
                Some(mb1.kick(KICKER))
            } else {
                cases.hit("saw no parked worker");
                None
            };
            while let Some(t) = local0.pop() {
                t.run();
            }
            if kick.is_none() {
                let _ = mb1.deliver(ledger.task(STOP));
            }
            let first_sleep = w1.join().unwrap();
            assert!(mb1.inbox.is_empty() && local0.is_empty());
            ledger.assert_each_once();
            if let Some(n) = kick {
                // Nobody else notifies worker 1, and it was parked: the kick
                // must be what woke it, and it must say so.
                assert_eq!(n, Notified::Unparked, "a kick to a parked worker");
                assert_eq!(
                    first_sleep,
                    Some(FirstSleep::Woken(Some(KICKER))),
                    "kicked worker woke with {first_sleep:?}"
                );
            }
        }
    });
    cases.assert_all_reached();
}

/// The gap described in the module docs. Worker 1 parks; a waker delivers
/// an item to it; worker 0, seeing it parked, kicks it (announcing it in
/// `kick_sent` first, so that worker 1 knows to expect it). Expected: worker
/// 1 runs the item and reports the kick; a kick it never reports leaves it
/// parked for good (loom: deadlock).
#[test]
fn kick_is_not_absorbed_by_a_concurrent_delivery() {
    model(|| {
        let ledger = Ledger::new(1);
        let mb1 = Arc::new(Mailbox::<Task>::new());
        let shutdown = Arc::new(AtomicBool::new(false));
        let kick_sent = Arc::new(AtomicBool::new(false));
        let w1 = {
            let (mb1, shutdown, kick_sent) = (mb1.clone(), shutdown.clone(), kick_sent.clone());
            thread::spawn(move || {
                let local = Local::new();
                let (mut ran, mut kicked) = (false, false);
                let mut kicked_by = None;
                loop {
                    // worker::idle, top of its loop: the note a wait
                    // returned, else `take_kick` (a kick that came with
                    // other work).
                    if kicked_by.take().or_else(|| mb1.take_kick()).is_some() {
                        kicked = true;
                    }
                    if ran && (kicked || !kick_sent.load(Ordering::SeqCst)) {
                        break;
                    }
                    match mb1.wait(&local, &shutdown, || false, || {}) {
                        Wait::Work { item, .. } => {
                            item.run();
                            ran = true;
                        }
                        Wait::Woken { kicked_by: k, .. } => kicked_by = k,
                        Wait::Shutdown => panic!("no shutdown in this model"),
                    }
                }
            })
        };
        let waker = {
            let (mb1, ledger) = (mb1.clone(), ledger.clone());
            thread::spawn(move || {
                let _ = mb1.deliver(ledger.task(0));
            })
        };
        thread::yield_now(); // as above (tokio-rs/loom#392)
        if mb1.parker.is_parked() {
            kick_sent.store(true, Ordering::SeqCst);
            let _ = mb1.kick(KICKER);
        }
        waker.join().unwrap();
        w1.join().unwrap();
        ledger.assert_each_once();
    });
}
