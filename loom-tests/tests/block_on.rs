//! `Runtime::block_on`'s wake flag (`src/block_on.rs`, `WakeFlag`): a
//! waker on another thread publishes something, sets the flag and unparks
//! the blocked thread; the blocked thread, whose first poll returned
//! `Pending`, waits on the flag (parking while it is clear) and polls
//! again. Checked in every interleaving: the second poll sees what the
//! waker published before the wake (a loom `UnsafeCell`, so a read without
//! a happens-before edge from the write is a causality failure), and the
//! blocked thread does not sleep forever (a loom deadlock). The cases: the
//! flag was found set without parking (then only the flag's
//! release/acquire orders the two), and the thread parked first.
//!
//! The thread's park token is the model's own (`Token`: a loom mutex and
//! condvar with `std::thread::park`'s semantics), so that the park path
//! does not depend on loom's `thread::park`. With `WakeFlag::set` written
//! as a store (enough in C11), this model deadlocked: loom 0.7.2 keeps a
//! partial modification order, and the loop's second swap read the value
//! its first swap wrote, past the waker's store that happened before it;
//! `set` is a swap for that reason (its comment says so).

#![cfg(loom)]

use hwsched::block_on::WakeFlag;
use loom::cell::UnsafeCell;
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use loom_tests::{model, Cases};

/// A thread's park token (`std::thread::park` / `Thread::unpark`).
struct Token {
    set: Mutex<bool>,
    cv: Condvar,
}

impl Token {
    fn new() -> Self {
        Token {
            set: Mutex::new(false),
            cv: Condvar::new(),
        }
    }

    fn unpark(&self) {
        *self.set.lock().unwrap() = true;
        self.cv.notify_one();
    }

    fn park(&self) {
        let mut set = self.set.lock().unwrap();
        while !*set {
            set = self.cv.wait(set).unwrap();
        }
        *set = false;
    }
}

#[test]
fn a_wake_is_seen_by_the_next_poll() {
    let cases = Cases::new(&[
        "the flag was set before the wait: no park",
        "the thread parked until the wake",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let flag = Arc::new(WakeFlag::new());
            let data = Arc::new(UnsafeCell::new(0u32));
            let blocked = Arc::new(Token::new());
            let waker = {
                let (flag, data, blocked) = (flag.clone(), data.clone(), blocked.clone());
                thread::spawn(move || {
                    // What the future's wake source publishes.
                    // SAFETY: the only write; loom checks that the read
                    // below happens after it.
                    data.with_mut(|p| unsafe { *p = 1 });
                    // `CallWaker::wake_by_ref`.
                    flag.set();
                    blocked.unpark();
                })
            };
            // The first poll returned `Pending`; `block_on` waits.
            let mut parked = false;
            flag.wait(|| {
                parked = true;
                blocked.park();
            });
            cases.hit(if parked {
                "the thread parked until the wake"
            } else {
                "the flag was set before the wait: no park"
            });
            // The next poll.
            // SAFETY: loom reports a read not ordered after the write.
            let seen = data.with(|p| unsafe { *p });
            assert_eq!(seen, 1, "the poll missed the wake's write");
            waker.join().unwrap();
        }
    });
    cases.assert_all_reached();
}
