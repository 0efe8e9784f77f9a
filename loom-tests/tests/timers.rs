//! Who keeps time for the workers' wheels (`src/time/cover.rs`; the
//! protocol in `src/time/entry.rs`, "Whose wheel"): the worker sleeping in
//! poller 0 sleeps until the earliest deadline of every worker's wheel,
//! and an insert that lowers a wheel's next expiration wakes it when it
//! sleeps past the new deadline. A timer whose owner is in a long poll is
//! fired by that sleeper, so the sleeper must never sleep past it without
//! being woken.
//!
//! The steps are production code (`Cover::lowered`, `sleep_until`,
//! `scan_begin`, `scan_end`); the model supplies each wheel's next
//! expiration as one atomic (in the runtime it is written under the
//! wheel's lock, by one thread at a time, as here). In the runtime that
//! word is a lower bound of the wheel's next expiration (a cancel leaves
//! it; `src/time/ops.rs`, `Shard::next`): a lower value than the model's
//! only makes the sleeper wake earlier, which the property allows.
//!
//! Checked in every interleaving (bound 3): the sleeper sleeps until at
//! most the pending timer's tick, or somebody (the inserter, or a scan that
//! left `earliest` at "none" while the sleeper read it) wakes it; and after
//! every thread is done, `earliest` is at most every pending timer's tick
//! (no lowering is lost to a scan).
//!
//! | model | what races |
//! | --- | --- |
//! | `an_insert_races_the_sleeper_in_poller_0` | a worker's insert (its wheel's next goes from none to tick 5) against the worker going to sleep in poller 0 |
//! | `a_scan_races_an_insert_and_the_sleeper` | a busy worker's scan (it fires wheel 0's due timer and raises `earliest` to what the wheels hold) against an insert on wheel 1 and the sleeper |

#![cfg(loom)]

use hwsched::time::cover::{Cover, NONE};
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_tests::model;

/// The new timer's tick.
const TICK: u64 = 5;

#[test]
fn an_insert_races_the_sleeper_in_poller_0() {
    model(|| {
        let cover = Arc::new(Cover::new());
        let next = Arc::new(AtomicU64::new(NONE));
        let woken = Arc::new(AtomicBool::new(false));
        let ins = {
            let (cover, next, woken) = (cover.clone(), next.clone(), woken.clone());
            thread::spawn(move || {
                next.store(TICK, Ordering::Relaxed);
                if cover.lowered(TICK).wake {
                    woken.store(true, Ordering::Relaxed);
                }
            })
        };
        let until = cover.sleep_until(NONE);
        ins.join().unwrap();
        assert!(
            until <= TICK || woken.load(Ordering::Relaxed),
            "the sleeper sleeps until {until} past the timer at {TICK}, and nobody wakes it"
        );
    });
}

#[test]
fn a_scan_races_an_insert_and_the_sleeper() {
    model(|| {
        let cover = Arc::new(Cover::new());
        // Wheel 0 holds a timer due at tick 3 (`earliest` says so); wheel 1
        // is empty until the insert.
        let next = Arc::new([AtomicU64::new(3), AtomicU64::new(NONE)]);
        assert!(!cover.lowered(3).wake);
        let woken = Arc::new(AtomicBool::new(false));
        let ins = {
            let (cover, next, woken) = (cover.clone(), next.clone(), woken.clone());
            thread::spawn(move || {
                next[1].store(TICK, Ordering::Relaxed);
                if cover.lowered(TICK).wake {
                    woken.store(true, Ordering::Relaxed);
                }
            })
        };
        let scan = {
            let (cover, next, woken) = (cover.clone(), next.clone(), woken.clone());
            thread::spawn(move || {
                // A busy worker's look at tick 4: wheel 0's timer is due.
                assert!(cover.due(4));
                cover.scan_begin();
                let mut m = NONE;
                for (i, n) in next.iter().enumerate() {
                    let mut v = n.load(Ordering::Relaxed);
                    if v <= 4 {
                        // Fired (in the runtime, under the wheel's lock).
                        assert_eq!(i, 0);
                        n.store(NONE, Ordering::Relaxed);
                        v = NONE;
                    }
                    m = m.min(v);
                }
                if cover.scan_end(m).wake {
                    woken.store(true, Ordering::Relaxed);
                }
            })
        };
        let until = cover.sleep_until(NONE);
        ins.join().unwrap();
        scan.join().unwrap();
        assert!(
            until <= TICK || woken.load(Ordering::Relaxed),
            "the sleeper sleeps until {until} past the timer at {TICK}, and nobody wakes it"
        );
        // A sleeper that comes later sleeps until the pending timer at the
        // latest: no lowering was lost to the scan.
        cover.woke();
        let later = cover.sleep_until(NONE);
        assert!(
            later <= TICK,
            "earliest is {later} with a timer pending at {TICK}"
        );
    });
}
