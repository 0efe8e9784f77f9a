//! Abort and shutdown racing a task's registration (`src/task.rs`, "Abort").
//!
//! The tasks are real hwsched tasks: `task::build` wraps the future in the
//! production `TaskFuture` and hands back the production `JoinHandle`; a
//! poll's first `Pending` runs `TaskFuture::register`
//! (`Registry::register`, then `TaskMeta::publish_slot`), `abort` is
//! `JoinHandle::abort` / `AbortHandle::abort` (`TaskMeta::abort`, then
//! `Registry::wake`), and shutdown's wake-up of waiting tasks is
//! `Registry::close_and_wake_all`; a later `Pending` re-checks the flag
//! (`TaskMeta::recheck_aborted`). Only the schedule function is the
//! model's own (the runtime's needs a whole `Shared`): it queues the task on
//! one inbox (`queue::Inbox`), or, once the model's shutdown flag is set,
//! on a graveyard, as `schedule::schedule` buries it. The "worker" runs a
//! queued task as `worker::run_task` does: dropped if
//! `TaskMeta::is_aborted`, else polled.
//!
//! async-task's own state machine uses `std` atomics, which loom does not
//! see: each of its steps is one indivisible step here. The protocol under
//! test (the flag, the slot, the registry's shard locks) is loom's. The one
//! order the protocol takes from async-task, that of an abort's wake and
//! the run starting the task's next poll on its state word (`src/task.rs`,
//! "Abort"), is loom's too: `TaskMeta::state_order`, updated under
//! `cfg(loom)` by the abort just before its wake and by every poll.
//!
//! Checked in every interleaving: once the threads are done and the
//! worker has run everything queued, the `JoinHandle` resolves
//! (`Err(Cancelled)` for an aborted task that did not finish, `Ok` for one
//! that finished first), nothing is left queued, and loom sees no leaked
//! `Arc` (a task left waiting forever keeps the model's runtime alive). A
//! lost abort or a lost shutdown wake-up leaves the task waiting on a waker
//! nobody fires: the handle does not resolve.
//!
//! Each model is its own `#[test]`; `scripts/loom.sh` runs each in its own
//! process, so that one failing model (loom may abort the process) does not
//! hide the others.

#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use hwsched::sched::queue::{Inbox, Steal};
use hwsched::task::{build, JoinError, JoinHandle, Registry, Runnable};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use loom_tests::{model, Cases};

/// The model's runtime: a registry, one worker's inbox, the shutdown flag
/// and the graveyard.
struct Rt {
    registry: Registry,
    inbox: Inbox<Runnable>,
    shutdown: AtomicBool,
    graveyard: Inbox<Runnable>,
    cases: std::sync::Arc<Cases>,
}

impl Rt {
    fn new(cases: &std::sync::Arc<Cases>) -> Arc<Rt> {
        Arc::new(Rt {
            registry: Registry::new(1),
            inbox: Inbox::new(),
            shutdown: AtomicBool::new(false),
            graveyard: Inbox::new(),
            cases: cases.clone(),
        })
    }

    /// Spawns `f` (not yet scheduled).
    fn spawn<F>(this: &Arc<Self>, f: F) -> (Runnable, JoinHandle<F::Output>)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let rt = this.clone();
        let registry: *const Registry = &this.registry;
        // SAFETY: the registry lives in `Rt`, which the schedule function
        // (owned by the task) keeps alive as long as the task exists.
        unsafe { build(f, registry, move |r: Runnable| rt.schedule(r)) }
    }

    /// The schedule function: `schedule::schedule` without placement.
    fn schedule(&self, r: Runnable) {
        let who = thread::current().name().unwrap_or("main").to_owned();
        self.cases.hit(&format!("scheduled by {who}"));
        if self.shutdown.load(Ordering::Relaxed) {
            self.graveyard.push(r);
        } else {
            self.inbox.push(r);
        }
    }

    /// `worker::run_task`: drops an aborted task, polls any other; returns
    /// whether it polled.
    fn run_task(&self, r: Runnable) -> bool {
        if r.metadata().is_aborted() {
            self.cases.hit("an aborted task was dropped unpolled");
            drop(r);
            false
        } else {
            r.run();
            true
        }
    }

    /// Runs everything queued (the worker's loop, until its inbox is empty).
    fn run_queued(&self) {
        while let Some(r) = take(&self.inbox) {
            self.run_task(r);
        }
    }

    /// Shutdown's drain: drops everything queued or buried.
    fn drop_queued(&self) {
        while let Some(r) = take(&self.inbox).or_else(|| take(&self.graveyard)) {
            drop(r);
        }
    }
}

fn take(q: &Inbox<Runnable>) -> Option<Runnable> {
    loop {
        match q.steal() {
            Steal::Success(r) => return Some(r),
            Steal::Empty => return None,
            Steal::Retry => continue,
        }
    }
}

/// Spawns a named model thread (the name says who scheduled a task).
fn spawn_named<F: FnOnce() + Send + 'static>(name: &str, f: F) -> thread::JoinHandle<()> {
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(f)
        .unwrap()
}

/// Polls `h` once (the user awaiting it).
fn poll_handle<T>(h: &mut JoinHandle<T>) -> Poll<Result<T, JoinError>> {
    Pin::new(h).poll(&mut Context::from_waker(Waker::noop()))
}

/// A future pending until [`Gate::open`]: a one-shot channel.
#[derive(Default)]
struct Gate {
    open: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Gate {
    /// Opens the gate and wakes the task waiting on it (from the opener's
    /// thread: a wake from outside the runtime).
    fn open(&self) {
        self.open.store(true, Ordering::Release);
        let w = self.waker.lock().unwrap().take();
        if let Some(w) = w {
            w.wake();
        }
    }
}

/// Waits on a [`Gate`], then yields 42.
struct WaitGate(Arc<Gate>);

impl Future for WaitGate {
    type Output = u32;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        let mut w = self.0.waker.lock().unwrap();
        if self.0.open.load(Ordering::Acquire) {
            return Poll::Ready(42);
        }
        *w = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[test]
fn abort_races_the_first_pending() {
    // The worker's first poll returns Pending and registers the task,
    // while another thread aborts it: either the abort sees the slot and
    // wakes the task through the registry, or the registration sees the
    // flag and the task wakes itself.
    let cases = Cases::new(&[
        "aborted before its first poll",
        "scheduled by worker",
        "scheduled by aborter",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new(&cases);
            let (r, mut h) = Rt::spawn(&rt, std::future::pending::<()>());
            let abort = h.abort_handle();
            let worker = {
                let rt = rt.clone();
                spawn_named("worker", move || {
                    if !rt.run_task(r) {
                        rt.cases.hit("aborted before its first poll");
                    }
                })
            };
            let aborter = spawn_named("aborter", move || abort.abort());
            worker.join().unwrap();
            aborter.join().unwrap();
            rt.run_queued();
            match poll_handle(&mut h) {
                Poll::Ready(Err(e)) => assert!(e.is_cancelled()),
                Poll::Ready(Ok(())) => unreachable!("a pending() task finished"),
                Poll::Pending => panic!("lost abort: the aborted task is still waiting"),
            }
            assert!(rt.inbox.is_empty(), "a task is left queued");
        }
    });
    cases.assert_all_reached();
}

#[test]
fn abort_races_completion() {
    // The task waits on a gate; the gate opens (the task is queued) and the
    // worker runs it to completion while another thread aborts it. The
    // handle yields the value if the poll won, `Cancelled` if the abort did.
    let cases = Cases::new(&["completed", "cancelled"]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new(&cases);
            let gate = Arc::new(Gate::default());
            let (r, mut h) = Rt::spawn(&rt, WaitGate(gate.clone()));
            assert!(rt.run_task(r)); // first poll: Pending, registered
            gate.open(); // queued
            let abort = h.abort_handle();
            let worker = {
                let rt = rt.clone();
                spawn_named("worker", move || rt.run_queued())
            };
            let aborter = spawn_named("aborter", move || abort.abort());
            worker.join().unwrap();
            aborter.join().unwrap();
            rt.run_queued();
            resolves_completed_or_cancelled(&mut h, &cases);
            assert!(rt.inbox.is_empty(), "a task is left queued");
        }
    });
    cases.assert_all_reached();
}

/// The handle resolves: the task's output (42, "completed") or cancelled
/// ("cancelled"); still pending fails the model.
fn resolves_completed_or_cancelled(h: &mut JoinHandle<u32>, cases: &Cases) {
    match poll_handle(h) {
        Poll::Ready(Ok(v)) => {
            assert_eq!(v, 42);
            cases.hit("completed");
        }
        Poll::Ready(Err(e)) => {
            assert!(e.is_cancelled());
            cases.hit("cancelled");
        }
        Poll::Pending => panic!("the handle never resolves"),
    }
}

#[test]
fn abort_while_the_task_is_woken() {
    // The task waits on a gate. One thread opens the gate (waking it from
    // outside the runtime) while another aborts it; the worker runs what
    // was queued while both happen. The task is queued at most once
    // (async-task's SCHEDULED bit), run or dropped, and the handle
    // resolves.
    let cases = Cases::new(&[
        "completed",
        "cancelled",
        "scheduled by opener",
        "scheduled by aborter",
        "an aborted task was dropped unpolled",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new(&cases);
            let gate = Arc::new(Gate::default());
            let (r, mut h) = Rt::spawn(&rt, WaitGate(gate.clone()));
            assert!(rt.run_task(r)); // first poll: Pending, registered
            let abort = h.abort_handle();
            let opener = spawn_named("opener", move || gate.open());
            let aborter = spawn_named("aborter", move || abort.abort());
            rt.run_queued();
            opener.join().unwrap();
            aborter.join().unwrap();
            rt.run_queued();
            resolves_completed_or_cancelled(&mut h, &cases);
            assert!(rt.inbox.is_empty(), "a task is left queued");
        }
    });
    cases.assert_all_reached();
}

#[test]
fn shutdown_wakes_a_task_registering_concurrently() {
    // The worker's first poll returns Pending and registers the task while
    // the shutdown sets its flag and runs `close_and_wake_all`: either the
    // registration comes first and the close wakes the task, or the
    // registry is closed and the task wakes itself (`register` returns
    // `None`). Either way it is scheduled once more, buried, and dropped
    // by the shutdown's drain: the handle says `Cancelled`.
    let cases = Cases::new(&["scheduled by worker", "scheduled by shutdown"]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new(&cases);
            let (r, mut h) = Rt::spawn(&rt, std::future::pending::<()>());
            let worker = {
                let rt = rt.clone();
                spawn_named("worker", move || {
                    rt.run_task(r);
                })
            };
            let shutdown = {
                let rt = rt.clone();
                spawn_named("shutdown", move || {
                    rt.shutdown.store(true, Ordering::Relaxed);
                    rt.registry.close_and_wake_all();
                })
            };
            worker.join().unwrap();
            shutdown.join().unwrap();
            rt.drop_queued();
            match poll_handle(&mut h) {
                Poll::Ready(Err(e)) => assert!(e.is_cancelled()),
                Poll::Ready(Ok(())) => unreachable!("a pending() task finished"),
                Poll::Pending => panic!("lost shutdown wake-up: the task is still waiting"),
            }
        }
    });
    cases.assert_all_reached();
}

/// A future that never completes and keeps its latest waker where another
/// thread can fire it: a wake that brings nothing (a spurious wake, or one
/// of two events the task waits on).
struct Spurious(Arc<Mutex<Option<Waker>>>);

impl Future for Spurious {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.0.lock().unwrap() = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[test]
fn abort_races_a_wake_that_brings_nothing() {
    // The task is registered and waiting. Another thread wakes it (the
    // task is queued, but what it waits for has not happened) while a
    // third aborts it; the worker runs what is queued meanwhile. If the
    // worker reads the flag before the abort sets it, and the abort's own
    // wake finds the task already queued (async-task then does nothing),
    // the poll returns `Pending` again: something must still get the task
    // dropped, or the abort is lost.
    let cases = Cases::new(&["scheduled by waker", "an aborted task was dropped unpolled"]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new(&cases);
            let slot = Arc::new(Mutex::new(None));
            let (r, mut h) = Rt::spawn(&rt, Spurious(slot.clone()));
            assert!(rt.run_task(r)); // first poll: Pending, registered
            let abort = h.abort_handle();
            let waker = spawn_named("waker", move || {
                let w = slot.lock().unwrap().take();
                if let Some(w) = w {
                    w.wake();
                }
            });
            let aborter = spawn_named("aborter", move || abort.abort());
            rt.run_queued();
            waker.join().unwrap();
            aborter.join().unwrap();
            rt.run_queued();
            match poll_handle(&mut h) {
                Poll::Ready(Err(e)) => assert!(e.is_cancelled()),
                Poll::Ready(Ok(())) => unreachable!("a Spurious task finished"),
                Poll::Pending => panic!("lost abort: the aborted task is still waiting"),
            }
        }
    });
    cases.assert_all_reached();
}
