//! The task layer's promises to the user (`src/task.rs`), under the shim:
//! a task is not polled again once its abort is observed, each output and
//! each payload (the future and what it captured) is dropped exactly once
//! on every path, and the wake that completion sends a `JoinHandle`
//! awaited on another thread is never lost.
//!
//! As in `abort.rs`, the tasks are real hwsched tasks (`task::build`: the
//! production `TaskFuture`, `JoinHandle`, `AbortHandle`, registry and
//! abort protocol); the schedule function and the worker's `run_task` are
//! the model's (`worker::run_task`'s check: an aborted task is dropped,
//! not polled). async-task's state machine uses `std` atomics, so each of
//! its steps is one indivisible step here.
//!
//! The future of every model carries a [`Probe`]: it counts its polls,
//! the polls that began after an abort had returned, and the drops of its
//! payload and of its output. The counts are `std` atomics, outside
//! loom's view, like `loom_tests::Ledger`: read after joining the threads
//! that write them (or, for "an abort has returned", in the real order of
//! the execution, which is what a poll that begins after it means).
//!
//! - `a_join_handle_awaited_on_another_thread_is_woken`: the user awaits
//!   the handle (with a waker that sets a flag and unparks, as
//!   `block_on`'s) while a worker completes the task: a first poll that
//!   returns `Pending` must have registered its waker, and completion must
//!   wake it. Mutation: `JoinHandle::poll` polling async-task with a no-op
//!   waker (the user's waker never registered) deadlocks the awaiter.
//! - `abort_from_inside_the_poll_races_a_wake`: the task aborts itself in
//!   its first poll and returns `Pending` while another thread wakes it:
//!   it is never polled again, its handle says `Cancelled`, its payload is
//!   dropped once.
//! - `abort_racing_a_wake_polls_at_most_once_more`: a waiting task woken by
//!   one thread and aborted by another while the worker runs what is
//!   queued: at most one poll begins after the abort returned (the one the
//!   worker had committed to, having read the flag before it was set), and
//!   the payload is dropped once.
//! - `a_detached_task_drops_its_output_once`: the handle is dropped while
//!   the worker completes the task: the output is dropped exactly once,
//!   wherever (`Output`'s `Drop`, in `detach` or in the completion).
//! - `shutdown_drops_a_waiting_task_once`: the gate opens while the
//!   shutdown closes the registry and wakes what waits, and the worker
//!   runs what is queued meanwhile: the task completes or is cancelled,
//!   and either way its payload and (if any) its output are dropped once.

#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool as StdBool, AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};

use hwsched::runtime::block_on::WakeFlag;
use hwsched::sched::queue::{Inbox, Steal};
use hwsched::task::{build, AbortHandle, JoinError, JoinHandle, Registry, Runnable};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use loom_tests::{model, Cases};

/// The model's runtime: a registry, one worker's inbox, the shutdown flag
/// and the graveyard (abort.rs's, without its case counting).
struct Rt {
    registry: Registry,
    inbox: Inbox<Runnable>,
    shutdown: AtomicBool,
    graveyard: Inbox<Runnable>,
}

impl Rt {
    fn new() -> Arc<Rt> {
        Arc::new(Rt {
            registry: Registry::new(1),
            inbox: Inbox::new(),
            shutdown: AtomicBool::new(false),
            graveyard: Inbox::new(),
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

    /// `schedule::schedule` without placement: the inbox, or the graveyard
    /// once shut down.
    fn schedule(&self, r: Runnable) {
        if self.shutdown.load(Ordering::Relaxed) {
            self.graveyard.push(r);
        } else {
            self.inbox.push(r);
        }
    }

    /// `worker::run_task`: drops an aborted task, polls any other.
    fn run_task(&self, r: Runnable) {
        if r.metadata().is_aborted() {
            drop(r);
        } else {
            r.run();
        }
    }

    /// Runs everything queued.
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

/// What happened to one task of one execution (`std` atomics: see the
/// module docs).
#[derive(Default)]
struct Probe {
    polls: AtomicUsize,
    /// Polls that began after [`Probe::abort_returned`] was set.
    polls_after_abort: AtomicUsize,
    abort_returned: StdBool,
    payload_drops: AtomicUsize,
    output_drops: AtomicUsize,
}

impl Probe {
    fn new() -> std::sync::Arc<Probe> {
        std::sync::Arc::default()
    }

    /// Checks the end of an execution: payload dropped once, the output
    /// `outputs` times (0 or 1), and at most `after_abort` polls after the
    /// abort returned.
    fn check(&self, outputs: usize, after_abort: usize) {
        assert_eq!(
            self.payload_drops.load(SeqCst),
            1,
            "the task's payload (its future) was not dropped exactly once"
        );
        assert_eq!(
            self.output_drops.load(SeqCst),
            outputs,
            "the task's output was dropped {} times, expected {outputs}",
            self.output_drops.load(SeqCst)
        );
        let late = self.polls_after_abort.load(SeqCst);
        assert!(
            late <= after_abort,
            "polled {late} times after its abort returned (at most {after_abort})"
        );
    }
}

/// Part of a task's future: counts its drop.
struct Payload(std::sync::Arc<Probe>);

impl Drop for Payload {
    fn drop(&mut self) {
        self.0.payload_drops.fetch_add(1, SeqCst);
    }
}

/// A task's output: counts its drop.
struct Out(std::sync::Arc<Probe>, u32);

impl Drop for Out {
    fn drop(&mut self) {
        self.0.output_drops.fetch_add(1, SeqCst);
    }
}

/// Where the task waits: a flag and its waker (a one-shot channel). A gate
/// that is never opened makes every wake one that brings nothing.
#[derive(Default)]
struct Gate {
    open: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Gate {
    /// Opens the gate and wakes the waiting task.
    fn open(&self) {
        self.open.store(true, Ordering::Release);
        self.wake();
    }

    /// Wakes the waiting task, if it stored a waker (the gate stays as it
    /// is: a wake that brings nothing unless it is open).
    fn wake(&self) {
        let w = self.waker.lock().unwrap().take();
        if let Some(w) = w {
            w.wake();
        }
    }
}

/// Waits on a [`Gate`], then yields an [`Out`] of 42. With `abort_self`
/// set, its first poll aborts its own task (the handle is put there after
/// the spawn) and records that the abort returned.
struct Waits {
    gate: Arc<Gate>,
    payload: Payload,
    abort_self: Option<Arc<Mutex<Option<AbortHandle>>>>,
}

impl Future for Waits {
    type Output = Out;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Out> {
        let probe = self.payload.0.clone();
        probe.polls.fetch_add(1, SeqCst);
        if probe.abort_returned.load(SeqCst) {
            probe.polls_after_abort.fetch_add(1, SeqCst);
        }
        if let Some(cell) = self.abort_self.take() {
            let h = cell
                .lock()
                .unwrap()
                .take()
                .expect("the task's own abort handle");
            h.abort();
            probe.abort_returned.store(true, SeqCst);
        }
        let mut w = self.gate.waker.lock().unwrap();
        if self.gate.open.load(Ordering::Acquire) {
            return Poll::Ready(Out(probe, 42));
        }
        *w = Some(cx.waker().clone());
        Poll::Pending
    }
}

fn waits(gate: &Arc<Gate>, probe: &std::sync::Arc<Probe>) -> Waits {
    Waits {
        gate: gate.clone(),
        payload: Payload(probe.clone()),
        abort_self: None,
    }
}

/// A thread's park token (`std::thread::park` / `Thread::unpark`), as in
/// `block_on.rs`.
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

/// The waker of a thread that awaits a handle: `block_on`'s (its wake
/// flag, then an unpark).
struct Awaiter {
    flag: WakeFlag,
    token: Token,
}

impl Wake for Awaiter {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.flag.wake(|| self.token.unpark());
    }
}

/// Polls `h` once with a waker that does nothing.
fn poll_handle<T>(h: &mut JoinHandle<T>) -> Poll<Result<T, JoinError>> {
    Pin::new(h).poll(&mut Context::from_waker(Waker::noop()))
}

fn spawn_named<F: FnOnce() + Send + 'static>(name: &str, f: F) -> thread::JoinHandle<()> {
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(f)
        .unwrap()
}

#[test]
fn a_join_handle_awaited_on_another_thread_is_woken() {
    // The task waits on a gate (registered). The gate opens on one thread;
    // a worker thread runs the task to completion once it is queued; this
    // thread awaits the handle as `block_on` does: poll, and while
    // `Pending` wait on the wake flag. async-task notifies the waker the
    // handle registered, so the wait ends and the next poll is `Ready`.
    let cases = Cases::new(&[
        "the first poll of the handle was Pending",
        "the task had completed before the first poll",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new();
            let probe = Probe::new();
            let gate = Arc::new(Gate::default());
            let (r, mut h) = Rt::spawn(&rt, waits(&gate, &probe));
            rt.run_task(r); // first poll: Pending, registered
                            // Made before the threads start: the worker reaches it through
                            // async-task's `std` atomics, which give loom no order.
            let aw = std::sync::Arc::new(Awaiter {
                flag: WakeFlag::new(),
                token: Token::new(),
            });
            let waker = Waker::from(aw.clone());
            let opener = spawn_named("opener", move || gate.open());
            let ran = Arc::new(AtomicBool::new(false));
            let worker = {
                let (rt, ran) = (rt.clone(), ran.clone());
                spawn_named("worker", move || {
                    opener.join().unwrap(); // the task is queued
                    rt.run_queued();
                    ran.store(true, Ordering::Relaxed);
                })
            };
            // A loom access, so that the worker may complete the task
            // before the first poll; async-task's state is `std`.
            let _ = ran.load(Ordering::Relaxed);
            let mut first = true;
            let out = loop {
                match Pin::new(&mut h).poll(&mut Context::from_waker(&waker)) {
                    Poll::Ready(r) => break r,
                    Poll::Pending => {
                        if first {
                            cases.hit("the first poll of the handle was Pending");
                        }
                        first = false;
                        aw.flag.wait(|| aw.token.park());
                    }
                }
            };
            if first {
                cases.hit("the task had completed before the first poll");
            }
            let out = out.unwrap_or_else(|e| panic!("the task did not complete: {e}"));
            assert_eq!(out.1, 42);
            drop(out);
            worker.join().unwrap();
            probe.check(1, 0);
            assert!(rt.inbox.is_empty(), "a task is left queued");
        }
    });
    cases.assert_all_reached();
}

#[test]
fn abort_from_inside_the_poll_races_a_wake() {
    // The task's first poll aborts the task itself, stores its waker and
    // returns `Pending`; another thread wakes it meanwhile or after. The
    // abort's own wake (the registration sees the flag) or the other
    // thread's requeues it, and the worker drops it unpolled.
    let cases = Cases::new(&[
        "woken by the other thread",
        "the other thread found no waker",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new();
            let probe = Probe::new();
            let gate = Arc::new(Gate::default());
            let cell = Arc::new(Mutex::new(None));
            let (r, mut h) = Rt::spawn(
                &rt,
                Waits {
                    abort_self: Some(cell.clone()),
                    ..waits(&gate, &probe)
                },
            );
            *cell.lock().unwrap() = Some(h.abort_handle());
            let worker = {
                let rt = rt.clone();
                spawn_named("worker", move || rt.run_task(r))
            };
            let waker = {
                let cases = cases.clone();
                spawn_named("waker", move || {
                    let w = gate.waker.lock().unwrap().take();
                    cases.hit(if w.is_some() {
                        "woken by the other thread"
                    } else {
                        "the other thread found no waker"
                    });
                    if let Some(w) = w {
                        w.wake();
                    }
                })
            };
            worker.join().unwrap();
            waker.join().unwrap();
            rt.run_queued();
            match poll_handle(&mut h) {
                Poll::Ready(Err(e)) => assert!(e.is_cancelled()),
                Poll::Ready(Ok(_)) => unreachable!("the gate never opens"),
                Poll::Pending => panic!("lost abort: the task that aborted itself still waits"),
            }
            assert_eq!(
                probe.polls.load(SeqCst),
                1,
                "polled again after aborting itself"
            );
            probe.check(0, 0);
            assert!(rt.inbox.is_empty(), "a task is left queued");
        }
    });
    cases.assert_all_reached();
}

#[test]
fn abort_racing_a_wake_polls_at_most_once_more() {
    // The task waits (registered). One thread wakes it (a wake that brings
    // nothing: the gate stays shut), another aborts it, and the worker
    // runs what is queued meanwhile. If the worker read the flag before
    // the abort set it, one poll may begin after the abort returned; its
    // `Pending` re-checks the flag, and the task is then dropped unpolled.
    let cases = Cases::new(&[
        "a poll began after the abort returned",
        "no poll after the abort",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new();
            let probe = Probe::new();
            let gate = Arc::new(Gate::default());
            let (r, mut h) = Rt::spawn(&rt, waits(&gate, &probe));
            rt.run_task(r); // first poll: Pending, registered
            let abort = h.abort_handle();
            let waker = spawn_named("waker", move || gate.wake());
            let aborter = {
                let probe = probe.clone();
                spawn_named("aborter", move || {
                    abort.abort();
                    probe.abort_returned.store(true, SeqCst);
                })
            };
            rt.run_queued();
            waker.join().unwrap();
            aborter.join().unwrap();
            rt.run_queued();
            match poll_handle(&mut h) {
                Poll::Ready(Err(e)) => assert!(e.is_cancelled()),
                Poll::Ready(Ok(_)) => unreachable!("the gate never opens"),
                Poll::Pending => panic!("lost abort: the aborted task is still waiting"),
            }
            cases.hit(if probe.polls_after_abort.load(SeqCst) > 0 {
                "a poll began after the abort returned"
            } else {
                "no poll after the abort"
            });
            probe.check(0, 1);
            assert!(rt.inbox.is_empty(), "a task is left queued");
        }
    });
    cases.assert_all_reached();
}

#[test]
fn a_detached_task_drops_its_output_once() {
    // The task waits (registered); the gate opens, and a worker runs the
    // task to completion while this thread drops the handle: the output
    // is dropped by `detach` (the task had completed) or by async-task when
    // the detached task completes; exactly once either way.
    let cases = Cases::new(&["detached before completion", "detached after completion"]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new();
            let probe = Probe::new();
            let gate = Arc::new(Gate::default());
            let (r, h) = Rt::spawn(&rt, waits(&gate, &probe));
            rt.run_task(r); // first poll: Pending, registered
            gate.open(); // queued
            let ran = Arc::new(AtomicBool::new(false));
            let worker = {
                let (rt, ran) = (rt.clone(), ran.clone());
                spawn_named("worker", move || {
                    rt.run_queued();
                    ran.store(true, Ordering::Relaxed);
                })
            };
            // A loom access, so that the worker may run (and complete the
            // task) before the drop below; async-task's state is `std`.
            let _ = ran.load(Ordering::Relaxed);
            cases.hit(if h.is_finished() {
                "detached after completion"
            } else {
                "detached before completion"
            });
            drop(h);
            worker.join().unwrap();
            rt.run_queued();
            probe.check(1, 0);
            assert!(rt.inbox.is_empty(), "a task is left queued");
        }
    });
    cases.assert_all_reached();
}

#[test]
fn shutdown_drops_a_waiting_task_once() {
    // The task waits (registered). The gate opens on one thread while the
    // shutdown sets its flag and wakes every registered task on another;
    // this thread runs what is queued meanwhile (a worker before it sees
    // the flag), then drains what is left as the shutdown does. The task
    // completed (the output is the handle's, dropped with it) or was
    // dropped unfinished: its payload once, its output at most once.
    let cases = Cases::new(&["completed", "cancelled"]);
    model({
        let cases = cases.clone();
        move || {
            let rt = Rt::new();
            let probe = Probe::new();
            let gate = Arc::new(Gate::default());
            let (r, mut h) = Rt::spawn(&rt, waits(&gate, &probe));
            rt.run_task(r); // first poll: Pending, registered
            let opener = spawn_named("opener", move || gate.open());
            let shutdown = {
                let rt = rt.clone();
                spawn_named("shutdown", move || {
                    rt.shutdown.store(true, Ordering::Relaxed);
                    rt.registry.close_and_wake_all();
                })
            };
            rt.run_queued();
            opener.join().unwrap();
            shutdown.join().unwrap();
            rt.drop_queued();
            let outputs = match poll_handle(&mut h) {
                Poll::Ready(Ok(out)) => {
                    assert_eq!(out.1, 42);
                    cases.hit("completed");
                    1
                }
                Poll::Ready(Err(e)) => {
                    assert!(e.is_cancelled());
                    cases.hit("cancelled");
                    0
                }
                Poll::Pending => panic!("the task is neither finished nor dropped"),
            };
            drop(h);
            probe.check(outputs, 0);
        }
    });
    cases.assert_all_reached();
}
