//! The tokio bridge ([`Builder::tokio_compat`](crate::Builder::tokio_compat),
//! the `tokio-compat` feature): a tokio current-thread runtime whose I/O and
//! time drivers run on one thread that the hwsched runtime owns, and whose
//! context every thread of the hwsched runtime has entered.
//!
//! So code that asks tokio for its context finds one: `tokio::time`,
//! `tokio::net`, `tokio::spawn`, and the crates built on them (reqwest,
//! tonic's client, tower's timeouts, `axum::serve`). Their resources
//! register with tokio's drivers, which the bridge thread drives (it sleeps
//! in tokio's `epoll_wait`); a readiness or a timer wakes the hwsched task
//! through its waker, a wake from outside the runtime (a futex wake placed
//! near the task's last worker, as async-io's are). `tokio::spawn` runs
//! the future on the bridge thread, among the other tokio tasks: that is
//! tokio's current-thread runtime, and what it spawns does not run on
//! hwsched's workers (spawn with `hwsched::spawn` for that).
//!
//! ## Running a woken task on the bridge
//!
//! A tokio resource's completion (a readiness, a timer, a tokio task such
//! as hyper-util's connection task answering a request) wakes its hwsched
//! task on the bridge thread. When every worker sleeps, delivering that
//! wake costs a worker's wake-up, and the task's next call into tokio a
//! wake of the bridge back: a sequential client (one reqwest call at a
//! time) paid four context switches per call where tokio pays one, and ran
//! at 0.61-0.72 of tokio's rate at 1.7 times its CPU per call. So, like a
//! CPU that runs a wakee whose waker is about to sleep (the kernel's sync
//! wake-up), the bridge polls such a task itself (`worker/schedule.rs`,
//! `run_here`; the slot is `worker/bridge.rs`'s): the wake
//! goes into a one-task slot, and a runner, a tokio task on the bridge
//! thread, polls it next, with the runtime's context entered. Only when
//! (a) the wake is made on the bridge thread by tokio's code (not by a
//! task the bridge polls: its wakes and spawns go to the workers, so the
//! bridge runs completions, not task graphs), (b) every worker of the
//! runtime is parked (`awake` is 0: the wake would have cost a futex wake
//! and a context switch), (c) the slot is empty, and (d) the task's poll
//! never ran long there: a poll on the bridge holds tokio's driver, so two
//! in a row of [`LONG_POLL_NS`](crate::sched::watch::LONG_POLL_NS) or more
//! keep the task off the bridge for good (two: one the OS preempted is
//! long by the wall clock too), and two in a row of tasks of one spawn
//! location keep that location's tasks off it for a second (a server
//! spawns a new task per request: without it each would hold tokio's
//! driver once or twice; 20 tasks with one 2 ms poll each held it 20
//! times, now at most twice).
//!
//! What a task sees there: [`worker_index`](crate::worker_index) is `None`
//! (it is polled off the workers, as `block_on`'s future is);
//! `hwsched::spawn` and its wakes go to the workers; `spawn_local` spawns
//! on the bridge thread, whose runner runs those tasks as `block_on` runs
//! its thread's (they stay there, their wakes and spawns go to the
//! workers too, and they are dropped when the bridge stops, with the
//! runtime as the thread's context); `Runtime::block_on` panics as it does
//! on a worker. Its next wake from a worker places it on the workers
//! again. It is polled inside a tokio task's poll, on tokio's only
//! thread: a call that blocks until tokio's driver makes progress (a
//! `futures::executor::block_on` of a tokio socket, a `std` channel
//! receive of what a tokio task sends) hangs there, where on a worker it
//! only blocks the worker; and tokio's `Handle::block_on`,
//! `block_in_place` and a tokio runtime's drop panic there, as in any
//! tokio task. None of these belongs in an async task.
//!
//! The slot is outside the wake protocol's queues (src/sched/README.md,
//! "The wake protocol"): no worker is woken for it because the bridge
//! thread, which is running, polls it after the tokio task whose poll made
//! the wake (tokio's current-thread queue is FIFO, so after the other tasks
//! the same driver turn woke first). Nothing is put there unless the
//! runner lives (its waker is stored). Its hand-offs are mutexes: the
//! slot's (the runner's take against the shutdown's drain, which drops a
//! task left there; a wake checks the shutdown flag under it, so none is
//! put there after the drain), and `busy`, which the runner holds around
//! its look at the flag and its polls and the drain takes once, so that no
//! poll on the bridge overlaps the shutdown's drops. The runner's wake is
//! a tokio waker on its own thread. No new atomics, so no loom model of
//! its own.
//!
//! ## The context
//!
//! The context: each worker and blocking thread enters it before its
//! start hook and leaves it after its stop hook (a guard kept in a
//! thread-local); `Runtime::block_on`, `Handle::block_on` and the shutdown
//! enter it for their call. The shutdown stops the bridge after hwsched's
//! tasks are dropped (their tokio resources deregister from a running
//! driver); the bridge then drops the tokio tasks left, without waiting for
//! tokio's blocking threads.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::thread;

use parking_lot::Mutex;

use crate::worker::bridge::Inline;

/// The bridge: tokio's handle and the thread that drives it.
pub(crate) struct Bridge {
    pub(crate) handle: tokio::runtime::Handle,
    /// The bridge thread's slot for a woken hwsched task it polls itself
    /// (its runner is spawned once the runtime is built:
    /// `runtime::block_on::bridge_runner`).
    pub(crate) inline: Arc<Inline>,
    stop: Arc<Stop>,
    thread: Option<thread::JoinHandle<()>>,
}

/// The bridge thread's stop signal.
#[derive(Default)]
struct Stop {
    stopped: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Future for &Stop {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.stopped.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        *self.waker.lock() = Some(cx.waker().clone());
        // After the store: a `stop` after this load takes the lock after
        // it and wakes this waker.
        if self.stopped.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Bridge {
    /// Builds tokio's runtime and starts its thread, named `name`.
    pub(crate) fn start(name: String) -> io::Result<Bridge> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name(format!("{name}-tokio-blocking"))
            .build()?;
        let handle = rt.handle().clone();
        let stop = Arc::new(Stop::default());
        let inline = Arc::new(Inline::default());
        let s = stop.clone();
        let i = inline.clone();
        let thread = thread::Builder::new().name(name).spawn(move || {
            crate::worker::bridge::enter_thread(i);
            rt.block_on(&*s);
            crate::worker::bridge::leave_thread();
            // The tokio tasks left are dropped here; tokio's blocking
            // threads are not waited for.
            rt.shutdown_background();
        })?;
        Ok(Bridge {
            handle,
            inline,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the bridge thread and joins it.
    pub(crate) fn stop(&mut self) {
        self.stop.stopped.store(true, Ordering::Release);
        if let Some(w) = self.stop.waker.lock().take() {
            w.wake();
        }
        if let Some(t) = self.thread.take() {
            if t.thread().id() != thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A guard of tokio's context, with the handle it borrows.
struct Entered {
    // Field order: the guard is dropped before the handle it borrows.
    _guard: tokio::runtime::EnterGuard<'static>,
    _handle: Box<tokio::runtime::Handle>,
}

thread_local! {
    /// The contexts this thread entered for its whole life (a stack: a
    /// thread of one runtime is never a thread of another, but a stack
    /// keeps tokio's rule that guards drop in reverse order).
    static ENTERED: RefCell<Vec<Entered>> = const { RefCell::new(Vec::new()) };
}

/// Enters `handle`'s context on this thread until [`exit_thread`].
pub(crate) fn enter_thread(handle: &tokio::runtime::Handle) {
    let handle = Box::new(handle.clone());
    let guard = handle.enter();
    // SAFETY: the guard borrows the handle in its box, whose heap place
    // does not move when the box does; `Entered` drops the guard before
    // the box (field order), and nothing else reaches the handle.
    let guard = unsafe {
        std::mem::transmute::<tokio::runtime::EnterGuard<'_>, tokio::runtime::EnterGuard<'static>>(
            guard,
        )
    };
    ENTERED.with(|e| {
        e.borrow_mut().push(Entered {
            _guard: guard,
            _handle: handle,
        })
    });
}

/// Leaves the context [`enter_thread`] entered last on this thread.
pub(crate) fn exit_thread() {
    let last = ENTERED.with(|e| e.borrow_mut().pop());
    drop(last);
}

/// The thread hooks with the bridge's enter and exit around the user's.
pub(crate) fn hooks(
    handle: &tokio::runtime::Handle,
    start: Option<crate::config::Hook>,
    stop: Option<crate::config::Hook>,
) -> (crate::config::Hook, crate::config::Hook) {
    let h = handle.clone();
    let on_start = crate::config::Hook(Arc::new(move || {
        enter_thread(&h);
        if let Some(u) = &start {
            (u.0)();
        }
    }));
    let on_stop = crate::config::Hook(Arc::new(move || {
        let r = match &stop {
            Some(u) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (u.0)())),
            None => Ok(()),
        };
        exit_thread();
        if let Err(p) = r {
            // The caller's catch counts it, as for any hook.
            std::panic::resume_unwind(p);
        }
    }));
    (on_start, on_stop)
}
