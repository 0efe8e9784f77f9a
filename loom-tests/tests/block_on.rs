//! `Runtime::block_on`'s wake flag (`src/runtime/block_on.rs`, `WakeFlag`): a
//! waker on another thread publishes something, then wakes the blocked
//! thread (`WakeFlag::wake`: sets the flag, then unparks it, the order
//! `CallWaker` uses); the blocked thread, whose first poll returned
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
//! does not depend on loom's `thread::park`. A second model starts with
//! the token already set, as code inside the future that consumed or left
//! the thread's token would (a `recv_timeout`, another parker): the wait
//! must not end on that token alone.
//!
//! Logic mutations these catch (`scripts/mutate.sh`, `LOGIC`): `wake`
//! unparking before it sets the flag (a park that returns on the unpark's
//! token, finds the flag clear and parks again, for good: a deadlock), or
//! not setting it; `wait` parking once instead of until the flag is set
//! (the stale token ends the wait: the next poll reads the waker's write
//! unordered). With `WakeFlag::set` written
//! as a store (enough in C11), this model deadlocked: loom 0.7.2 keeps a
//! partial modification order, and the loop's second swap read the value
//! its first swap wrote, past the waker's store that happened before it;
//! `set` is a swap for that reason (its comment says so).

#![cfg(loom)]

use hwsched::runtime::block_on::{wait_any, LocalQueue, WakeFlag};
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
    fn new(set: bool) -> Self {
        Token {
            set: Mutex::new(set),
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

/// One `block_on` wait against one wake; `stale`: the thread's park token
/// is set before the wait (left by code inside the future).
fn wake_against_wait(stale: bool) {
    let cases = Cases::new(&[
        "the flag was set before the wait: no park",
        "the thread parked until the wake",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let flag = Arc::new(WakeFlag::new());
            let data = Arc::new(UnsafeCell::new(0u32));
            let blocked = Arc::new(Token::new(stale));
            let waker = {
                let (flag, data, blocked) = (flag.clone(), data.clone(), blocked.clone());
                thread::spawn(move || {
                    // What the future's wake source publishes.
                    // SAFETY: the only write; loom checks that the read
                    // below happens after it.
                    data.with_mut(|p| unsafe { *p = 1 });
                    // `CallWaker::wake_by_ref`.
                    flag.wake(|| blocked.unpark());
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

#[test]
fn a_wake_is_seen_by_the_next_poll() {
    wake_against_wait(false);
}

#[test]
fn a_stale_park_token_does_not_end_the_wait() {
    wake_against_wait(true);
}

/// A local task of `block_on`'s thread (`spawn_local` there) pushed by its
/// schedule function on another thread (`LocalQueue::push`: queue, flag,
/// unpark) against the loop, which runs what is queued and then waits on
/// the main future's flag and the queue's (`wait_any`). The loop must run
/// the task, and see what the waking thread wrote before the wake;
/// `stale`: the park token is set before the wait.
fn local_push_against_wait(stale: bool) {
    let cases = Cases::new(&[
        "the task was queued before the loop looked",
        "the loop waited for the task",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let call = Arc::new(WakeFlag::new());
            let queue = Arc::new(LocalQueue::<u32>::new());
            let data = Arc::new(UnsafeCell::new(0u32));
            let blocked = Arc::new(Token::new(stale));
            let waker = {
                let (queue, data, blocked) = (queue.clone(), data.clone(), blocked.clone());
                thread::spawn(move || {
                    // SAFETY: the only write; loom checks the read below.
                    data.with_mut(|p| unsafe { *p = 1 });
                    // The local task's schedule function.
                    queue.push(7, || blocked.unpark());
                })
            };
            // The loop: the main future returned `Pending`; run what is
            // queued, then wait on both flags.
            let mut waited = false;
            let task = loop {
                if let Some(t) = queue.pop() {
                    break t;
                }
                waited = true;
                let main = wait_any(&call, queue.ready(), || blocked.park());
                assert!(!main, "nobody woke the main future");
            };
            assert_eq!(task, 7);
            cases.hit(if waited {
                "the loop waited for the task"
            } else {
                "the task was queued before the loop looked"
            });
            // The task's poll.
            // SAFETY: loom reports a read not ordered after the write.
            let seen = data.with(|p| unsafe { *p });
            assert_eq!(seen, 1, "the task's poll missed the wake's write");
            waker.join().unwrap();
        }
    });
    cases.assert_all_reached();
}

#[test]
fn a_local_task_woken_from_another_thread_runs() {
    local_push_against_wait(false);
}

#[test]
fn a_stale_park_token_does_not_end_the_local_wait() {
    local_push_against_wait(true);
}

/// A wake of the main future and a local task's push, from two other
/// threads at once, against the loop's turns: it sees both (neither wake
/// consumes the other's flag), and the main future's poll sees what its
/// waker wrote before the wake (`wait_any`'s take of the call's flag is
/// what orders it).
#[test]
fn a_main_wake_and_a_local_push_are_both_seen() {
    model(|| {
        let call = Arc::new(WakeFlag::new());
        let queue = Arc::new(LocalQueue::<u32>::new());
        let blocked = Arc::new(Token::new(false));
        let data = Arc::new(UnsafeCell::new(0u32));
        let main_waker = {
            let (call, blocked, data) = (call.clone(), blocked.clone(), data.clone());
            thread::spawn(move || {
                // SAFETY: the only write; loom checks the read below.
                data.with_mut(|p| unsafe { *p = 1 });
                call.wake(|| blocked.unpark())
            })
        };
        let local_waker = {
            let (queue, blocked) = (queue.clone(), blocked.clone());
            thread::spawn(move || queue.push(1, || blocked.unpark()))
        };
        let (mut main_seen, mut local_seen) = (false, false);
        loop {
            while queue.pop().is_some() {
                local_seen = true;
            }
            if main_seen && local_seen {
                break;
            }
            if wait_any(&call, queue.ready(), || blocked.park()) {
                // The main future's poll.
                // SAFETY: loom reports a read not ordered after the write.
                let seen = data.with(|p| unsafe { *p });
                assert_eq!(seen, 1, "the main poll missed its waker's write");
                main_seen = true;
            }
        }
        main_waker.join().unwrap();
        local_waker.join().unwrap();
    });
}
