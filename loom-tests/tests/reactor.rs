//! A worker that sleeps inside an executor's `block_on` (the worker of an
//! I/O runtime, which waits in async-io's reactor: `src/reactor.rs`) and
//! the inbox hand-off racing it (`src/park.rs`, `Parker::poll_park`).
//!
//! The worker's loop is a future driven by a `block_on` over loom's thread
//! park, as the runtime's is by async-io's: it calls `Mailbox::wait_with` with
//! `Parker::poll_park` as its sleep, returns `Pending` on
//! `Wait::Suspended`, and goes on with `Mailbox::resume` when polled again,
//! as `worker::idle` does. Deliverers call `Mailbox::deliver`. Checked in
//! every interleaving:
//!
//! - every item is run exactly once (a notify that found the worker asleep
//!   but no waker in the slot, or a waker set after the notify looked,
//!   would leave `block_on` parked forever: loom reports the deadlock);
//! - unparks are exact: each `Notified::Unparked` ended exactly one
//!   suspension (the notifier took the waker and woke it), and a worker
//!   that never suspended cost no unpark.
//!
//! # Mutations
//!
//! Checked by hand on `src/park.rs` at `LOOM_MAX_PREEMPTIONS=3`:
//!
//! | mutation | result |
//! | --- | --- |
//! | `poll_park` stores the waker after releasing the mutex | caught by both: deadlock (the notifier saw `PARKED`, found the slot empty and signalled the condvar nobody waits on; the waker came after) |
//! | `poll_park`'s first call sleeps even when `fetch_or(PARKED)` finds a token (`if false && ..`) | caught by both: deadlock (the notify came before `PARKED`, so it woke nobody) |

#![cfg(loom)]

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::{Context, Poll, Wake, Waker};

use hwsched::park::{Mailbox, Notified, Wait};
use hwsched::queue::Local;
use loom::sync::atomic::AtomicBool;
use loom::sync::Arc;
use loom::thread;
use loom_tests::{model, Cases, Ledger, Task};

/// A minimal `block_on` over loom's thread park: what async-io's does
/// without the reactor (poll; on `Pending`, park until the waker unparks).
/// A lost wake parks the thread forever, which loom reports.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(loom::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(std::sync::Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

/// What the worker saw.
#[derive(Debug, Default)]
struct Log {
    /// Waits that ended a suspension (the worker slept in `block_on`).
    sleeps: usize,
    /// Times the worker's future returned `Pending`.
    suspensions: usize,
}

/// The worker: its loop as a future in `block_on`, until `n` items ran.
fn worker(mb: &Mailbox<Task>, shutdown: &AtomicBool, n: usize) -> Log {
    let local = Local::new();
    let mut log = Log::default();
    let mut ran = 0;
    let mut suspended = false;
    block_on(poll_fn(|cx| loop {
        if ran == n {
            return Poll::Ready(());
        }
        let sleep = |p: &hwsched::park::Parker| p.poll_park(cx.waker());
        let res = if suspended {
            mb.resume(&local, shutdown, sleep)
        } else {
            mb.wait_with(&local, shutdown, || false, || true, sleep)
        };
        suspended = false;
        match res {
            Wait::Suspended => {
                suspended = true;
                log.suspensions += 1;
                return Poll::Pending;
            }
            Wait::Work { item, slept } => {
                log.sleeps += usize::from(slept);
                item.run();
                ran += 1;
                while let Some(t) = local.pop() {
                    t.run();
                    ran += 1;
                }
            }
            Wait::Woken { slept, kicked_by } => {
                assert_eq!(kicked_by, None, "nobody kicks in this model");
                log.sleeps += usize::from(slept);
            }
            Wait::Shutdown => panic!("no shutdown in this model"),
        }
    }));
    assert!(local.is_empty());
    log
}

fn check(cases: &Cases, unparks: usize, log: &Log) {
    assert_eq!(
        unparks, log.sleeps,
        "unparks are not exact: {unparks} Unparked, {} sleeps",
        log.sleeps
    );
    assert_eq!(
        log.suspensions, log.sleeps,
        "every suspension ended by a notify (no spurious poll under loom)"
    );
    match unparks {
        0 => cases.hit("never slept"),
        1 => cases.hit("slept in block_on, one unpark"),
        _ => cases.hit("slept twice, two unparks"),
    }
}

/// One delivery racing a worker that goes to sleep in `block_on`.
#[test]
fn delivery_reaches_a_worker_sleeping_in_the_reactor() {
    let cases = Cases::new(&["never slept", "slept in block_on, one unpark"]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let mb = Arc::new(Mailbox::new());
            let shutdown = Arc::new(AtomicBool::new(false));
            let w = {
                let (mb, shutdown) = (mb.clone(), shutdown.clone());
                thread::spawn(move || worker(&mb, &shutdown, 1))
            };
            let n = mb.deliver(ledger.task(0));
            let log = w.join().unwrap();
            assert!(mb.inbox.is_empty());
            ledger.assert_each_once();
            check(&cases, usize::from(n == Notified::Unparked), &log);
        }
    });
    cases.assert_all_reached();
}

/// Two deliveries: the second can land while the worker wakes from the
/// first (no second unpark), or after it went back to sleep in `block_on`
/// (a second unpark, which must find the new waker).
#[test]
fn two_deliveries_reach_a_worker_sleeping_in_the_reactor() {
    let cases = Cases::new(&[
        "never slept",
        "slept in block_on, one unpark",
        "slept twice, two unparks",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let mb = Arc::new(Mailbox::new());
            let shutdown = Arc::new(AtomicBool::new(false));
            let w = {
                let (mb, shutdown) = (mb.clone(), shutdown.clone());
                thread::spawn(move || worker(&mb, &shutdown, 2))
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
            check(&cases, unparks, &log);
        }
    });
    cases.assert_all_reached();
}
