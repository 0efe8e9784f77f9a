//! The inbox hand-off racing a worker going to sleep (`src/sched/README.md`,
//! "Parking and the inbox hand-off").
//!
//! A deliverer does `Mailbox::deliver` (inbox push, then `Parker::notify`);
//! the worker, whose own queues are empty, calls `Mailbox::wait` in a loop,
//! as `worker::idle` does, until it has run every item. Checked in every
//! interleaving:
//!
//! - every item is run exactly once and no inbox is left holding one;
//! - the worker never sleeps forever (loom reports a deadlock if the last
//!   thread blocks on the parker's condvar with an item in the inbox);
//! - unparks are exact: the number of `Notified::Unparked` the deliverers
//!   got equals the number of waits that slept (no spurious wake-ups under
//!   loom). So a worker that never set `PARKED` (it found the item before
//!   parking, or while spinning) cost its deliverer no unpark, and every
//!   sleep was ended by exactly one unpark;
//! - a spinning worker sees a delivery that completed before one of its
//!   checks in that very check (no unpark, no further spinning).
//!
//! # Mutations
//!
//! Each applied once to `src/sched/park.rs` (on a copy of the working tree),
//! this file's models run at `LOOM_MAX_PREEMPTIONS=3`, reverted:
//!
//! | mutation | result |
//! | --- | --- |
//! | `notify` signals without taking the parker's mutex | caught by all three: "deadlock" (the worker checked the state, the notify ran, then the worker waited on the condvar: the lost wakeup). At bound 2 the spin model misses it: each spin yields, and keeping the deliverer back costs a preemption |
//! | `notify` always signals (no `PARKED` / `NOTIFIED` test) | caught by all three: "unparks are not exact: 1 Unparked, 0 sleeps" |
//! | the spin checks nothing (`if false`) | caught by `delivery_races_spin_then_park`: "a spin missed a delivery that completed before its check" |
//! | `park` sets `PARKED` before taking the mutex | not caught, and correct: the worker re-reads `NOTIFIED` under the mutex before it waits, and a notifier that saw `PARKED` takes the mutex after setting `NOTIFIED`. The module docs' "holds the mutex from before setting the bit" is stronger than needed |
//! | `wait` skips `prepare()` | not caught, and not a bug: a stale token then makes the first park return at once (`Woken`), and the next `wait` parks for real; correctness rests on `park`'s RMW and the re-checks, `prepare` saves a round |
//! | `wait` skips the inbox check after `park` | not caught as a failure: the next `wait` takes the item (only the `slept` report changes) |
//!
//! The mutations of the parker's orderings, and which model catches each,
//! are in the table that `scripts/mutate.sh` generates in
//! `loom-tests/README.md` (with the atomic inbox stand-in of
//! `src/sched/queue.rs`; the notes that were here described the earlier mutex
//! stand-in, under which the orderings could not be caught).

#![cfg(loom)]

use hwsched::sched::park::{Mailbox, Notified, Wait};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{model, Cases, Ledger, Task};

/// What the worker saw.
#[derive(Debug, Default)]
struct Log {
    /// Waits that slept on the condvar.
    sleeps: usize,
    /// Calls of `before_sleep` (the worker committed to parking).
    parks_begun: usize,
    /// Waits that returned `Woken { slept: false }` from the spin (it saw
    /// the token or the inbox, and did not park).
    spin_hits: usize,
    /// Waits that parked, found the token already there and returned
    /// `Woken { slept: false }`: a stale token, whose item the worker had
    /// already taken.
    stale_tokens: usize,
}

/// The worker's idle loop: `wait` until `n` items have run. `spins` is the
/// total number of times `keep_spinning` says yes over the whole run (the
/// governor's choice, bounded). `delivered` is set by the deliverer once
/// `deliver` has returned (`None`: do not check promptness).
fn worker(
    mb: &Mailbox<Task>,
    shutdown: &AtomicBool,
    n: usize,
    mut spins: usize,
    delivered: Option<&AtomicBool>,
) -> Log {
    let mut log = Log::default();
    let mut ran = 0;
    while ran < n {
        // Set when a spin check is about to run after the delivery finished.
        let mut armed = false;
        let mut parks_begun = 0;
        let res = mb.wait(
            shutdown,
            || {
                assert!(
                    !armed,
                    "a spin missed a delivery that completed before its check"
                );
                if spins == 0 {
                    return false;
                }
                spins -= 1;
                armed = delivered.is_some_and(|d| d.load(Ordering::Acquire));
                true
            },
            || {
                parks_begun += 1;
                true
            },
        );
        log.parks_begun += parks_begun;
        match res {
            Wait::Work { item, slept } => {
                log.sleeps += usize::from(slept);
                item.run();
                ran += 1;
            }
            Wait::Woken { slept, kicked_by } => {
                assert_eq!(kicked_by, None, "nobody kicks in this model");
                log.sleeps += usize::from(slept);
                log.spin_hits += usize::from(!slept && parks_begun == 0);
                log.stale_tokens += usize::from(!slept && parks_begun == 1);
            }
            Wait::Shutdown => panic!("no shutdown in this model"),
            Wait::Suspended => unreachable!("a condvar park does not suspend"),
        }
    }
    log
}

fn assert_exact_unparks(unparks: usize, log: &Log) {
    assert_eq!(
        unparks, log.sleeps,
        "unparks are not exact: {unparks} Unparked, {} sleeps",
        log.sleeps
    );
    if log.parks_begun == 0 {
        assert_eq!(unparks, 0, "a worker that never parked cost an unpark");
    }
}

/// Records how the hand-off went in this execution.
fn classify(cases: &Cases, unparks: usize, log: &Log) {
    if log.spin_hits > 0 {
        cases.hit("seen by the spin");
    }
    if log.stale_tokens > 0 {
        cases.hit("woken by a stale token");
    }
    match (log.parks_begun, unparks) {
        (0, _) => cases.hit("found before parking"),
        (_, 0) => cases.hit("parked, token already there"),
        (_, 1) => cases.hit("slept, one unpark"),
        _ => cases.hit("slept twice, two unparks"),
    }
}

/// One delivery racing a worker that goes straight to park.
#[test]
fn delivery_races_park() {
    let cases = Cases::new(&[
        "found before parking",
        "parked, token already there",
        "slept, one unpark",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let mb = Arc::new(Mailbox::new());
            let shutdown = Arc::new(AtomicBool::new(false));
            let w = {
                let (mb, shutdown) = (mb.clone(), shutdown.clone());
                thread::spawn(move || worker(&mb, &shutdown, 1, 0, None))
            };
            let n = mb.deliver(ledger.task(0));
            let log = w.join().unwrap();
            assert!(mb.inbox.is_empty());
            ledger.assert_each_once();
            let unparks = usize::from(n == Notified::Unparked);
            assert_exact_unparks(unparks, &log);
            classify(&cases, unparks, &log);
        }
    });
    cases.assert_all_reached();
}

/// Two deliverers: the second `notify` can land while the worker is waking
/// from the first (state `PARKED | NOTIFIED`: no second unpark), or after it
/// went back to sleep (a second unpark).
#[test]
fn two_deliveries_race_park() {
    let cases = Cases::new(&[
        "found before parking",
        "parked, token already there",
        "slept, one unpark",
        "slept twice, two unparks",
        "woken by a stale token",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let mb = Arc::new(Mailbox::new());
            let shutdown = Arc::new(AtomicBool::new(false));
            let w = {
                let (mb, shutdown) = (mb.clone(), shutdown.clone());
                thread::spawn(move || worker(&mb, &shutdown, 2, 0, None))
            };
            let d = {
                let (mb, ledger) = (mb.clone(), ledger.clone());
                thread::spawn(move || mb.deliver(ledger.task(1)))
            };
            let n0 = mb.deliver(ledger.task(0));
            let n1 = d.join().unwrap();
            let log = w.join().unwrap();
            assert!(mb.inbox.is_empty());
            ledger.assert_each_once();
            let unparks = [n0, n1]
                .iter()
                .filter(|n| **n == Notified::Unparked)
                .count();
            assert_exact_unparks(unparks, &log);
            classify(&cases, unparks, &log);
        }
    });
    cases.assert_all_reached();
}

/// The worker spins (one spin check) before parking: a push during the
/// spin is seen by the spin and costs no unpark; a push after a spin that
/// ended empty still races the park safely. (One check, not more: under
/// loom each spin iteration yields, and keeping the deliverer from running
/// through a yield costs a preemption, so a longer spin would push the park
/// race past a bound of 2.)
#[test]
fn delivery_races_spin_then_park() {
    let cases = Cases::new(&[
        "found before parking",
        "seen by the spin",
        "parked, token already there",
        "slept, one unpark",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let mb = Arc::new(Mailbox::new());
            let shutdown = Arc::new(AtomicBool::new(false));
            let delivered = Arc::new(AtomicBool::new(false));
            let w = {
                let (mb, shutdown) = (mb.clone(), shutdown.clone());
                let delivered = delivered.clone();
                thread::spawn(move || worker(&mb, &shutdown, 1, 1, Some(&delivered)))
            };
            let n = mb.deliver(ledger.task(0));
            // Release: a spin check that reads `true` (Acquire) happens
            // after the delivery, so it must see it.
            delivered.store(true, Ordering::Release);
            let log = w.join().unwrap();
            assert!(mb.inbox.is_empty());
            ledger.assert_each_once();
            let unparks = usize::from(n == Notified::Unparked);
            assert_exact_unparks(unparks, &log);
            classify(&cases, unparks, &log);
        }
    });
    cases.assert_all_reached();
}
