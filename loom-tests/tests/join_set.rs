//! `JoinSet`'s ready list (`src/runtime/join_set.rs`): a member's completion (its
//! handle's wake of the member's entry) racing `join_next` (the pop of an
//! entry, the clear of its `queued` flag, the poll of its handle, and the
//! store of the set's waiter when the list is empty). The set is the
//! production `ReadySet`, the one `JoinSet` is made of; its members are a
//! stand-in for a `JoinHandle` (a loom mutex over the output and the
//! awaiter's waker, as async-task's registration: the completion stores
//! the output, then wakes the waker it finds). A completion that
//! `join_next` misses leaves it waiting for good: loom reports the
//! deadlock.
//!
//! # Mutations
//!
//! Logic mutations each model catches are listed in `loom-tests/README.md`
//! ("Logic mutations").

#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

use hwsched::runtime::join_set::{Member, ReadySet};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use loom_tests::{model, Cases};

/// A task's output and its awaiter's waker (the stand-in for async-task's
/// state and registration).
#[derive(Default)]
struct Cell {
    state: Mutex<(Option<usize>, Option<Waker>)>,
}

impl Cell {
    /// The task completes with `v`: the output, then the stored waker
    /// woken (outside the lock).
    fn complete(&self, v: usize) {
        let w = {
            let mut s = self.state.lock().unwrap();
            s.0 = Some(v);
            s.1.take()
        };
        if let Some(w) = w {
            w.wake();
        }
    }
}

/// The member: a handle polled with its entry's waker.
struct Handle(Arc<Cell>);

impl Future for Handle {
    type Output = usize;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        let mut s = self.0.state.lock().unwrap();
        match s.0.take() {
            Some(v) => Poll::Ready(v),
            None => {
                s.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Member for Handle {
    fn abort(&self) {}
}

/// A thread's park token (`std::thread::park` semantics, as in
/// `driver.rs`: loom's own `thread::park` is avoided, README).
struct Token {
    set: Mutex<bool>,
    cv: Condvar,
}

impl Wake for Token {
    fn wake(self: std::sync::Arc<Self>) {
        *self.set.lock().unwrap() = true;
        self.cv.notify_one();
    }
}

/// `join_next` to its end: each output in the order the set yields them,
/// and whether it ever waited.
fn join_all(set: &mut ReadySet<Handle>) -> (Vec<usize>, bool) {
    let token = std::sync::Arc::new(Token {
        set: Mutex::new(false),
        cv: Condvar::new(),
    });
    let waker = Waker::from(token.clone());
    let mut cx = Context::from_waker(&waker);
    let (mut out, mut waited) = (Vec::new(), false);
    loop {
        match set.poll_next(&mut cx) {
            Poll::Ready(Some(v)) => out.push(v),
            Poll::Ready(None) => return (out, waited),
            Poll::Pending => {
                waited = true;
                let mut s = token.set.lock().unwrap();
                while !*s {
                    s = token.cv.wait(s).unwrap();
                }
                *s = false;
            }
        }
    }
}

/// One member, completed by another thread while `join_next` runs: its
/// wake may come before `join_next` looks, between the pop of its entry
/// (and the clear of its flag) and the poll of its handle, or after the
/// set stored its waiter. `join_next` yields the output once, then
/// `None`.
#[test]
fn a_completion_races_join_next() {
    let cases = Cases::new(&[
        "join_next waited and the completion woke it",
        "join_next found the output without waiting",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let cell = Arc::new(Cell::default());
            let mut set = ReadySet::new();
            set.insert(Handle(cell.clone()));
            let t = thread::spawn(move || cell.complete(7));
            let (out, waited) = join_all(&mut set);
            t.join().unwrap();
            assert_eq!(out, vec![7], "the output, once");
            assert!(set.is_empty());
            cases.hit(if waited {
                "join_next waited and the completion woke it"
            } else {
                "join_next found the output without waiting"
            });
        }
    });
    cases.assert_all_reached();
}

/// Two members completed by two threads while `join_next` runs to the end
/// of the set: each completion wakes its own entry (the list may hold
/// both, one, or none when `join_next` looks). Both outputs are yielded,
/// each once.
#[test]
fn two_completions_race_join_next() {
    let cases = Cases::new(&[
        "join_next waited and a completion woke it",
        "join_next found both outputs without waiting",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let mut set = ReadySet::new();
            let threads: Vec<_> = (0..2)
                .map(|v| {
                    let cell = Arc::new(Cell::default());
                    set.insert(Handle(cell.clone()));
                    thread::spawn(move || cell.complete(v))
                })
                .collect();
            let (mut out, waited) = join_all(&mut set);
            for t in threads {
                t.join().unwrap();
            }
            out.sort_unstable();
            assert_eq!(out, vec![0, 1], "each output once");
            cases.hit(if waited {
                "join_next waited and a completion woke it"
            } else {
                "join_next found both outputs without waiting"
            });
        }
    });
    cases.assert_all_reached();
}
