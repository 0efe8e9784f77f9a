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
//! wake-up), the bridge polls such a task itself (`run_here`): the wake
//! goes into a one-task slot, and a runner, a tokio task on the bridge
//! thread, polls it next, with the runtime's context entered. Only when
//! (a) the wake is made on the bridge thread by tokio's code (not by a
//! task the bridge polls: its wakes and spawns go to the workers, so the
//! bridge runs completions, not task graphs), (b) every worker of the
//! runtime is parked (`awake` is 0: the wake would have cost a futex wake
//! and a context switch), (c) the slot is empty, and (d) the task's poll
//! never ran long there: a poll on the bridge holds tokio's driver, so two
//! in a row of [`LONG_POLL_NS`](crate::sched::watch::LONG_POLL_NS) or more
//! mark the task a hog, which the bridge does not poll again (two: one
//! the OS preempted is long by the wall clock too).
//!
//! What a task sees there: [`worker_index`](crate::worker_index) is `None`
//! (it is polled off the workers, as `block_on`'s future is);
//! `hwsched::spawn` and its wakes go to the workers; `spawn_local` spawns
//! on the bridge thread, whose runner runs those tasks as `block_on` runs
//! its thread's (they stay there, and are dropped when the bridge stops);
//! `Runtime::block_on` panics as it does on a worker. Its next wake from a
//! worker places it on the workers again.
//!
//! The slot is outside the wake protocol's queues (src/sched/README.md,
//! "The wake protocol"): no worker is woken for it because the bridge
//! thread, which is running, polls it after the tokio task whose poll made
//! the wake (tokio's current-thread queue is FIFO, so after the other tasks
//! the same driver turn woke first). Its hand-off is a mutex (the runner's
//! take against the shutdown's drain, which drops a task left there), and
//! the runner's wake a tokio waker on its own thread: no new atomics, so no
//! loom model of its own.
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

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::thread;

use parking_lot::Mutex;

use crate::task::Runnable;
use crate::worker::shared::Shared;

/// The bridge: tokio's handle and the thread that drives it.
pub(crate) struct Bridge {
    pub(crate) handle: tokio::runtime::Handle,
    /// The bridge thread's slot for a woken hwsched task it runs itself.
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
            BRIDGE.with(|b| *b.borrow_mut() = Some(i.clone()));
            rt.spawn(run_inline(i));
            rt.block_on(&*s);
            BRIDGE.with(|b| b.borrow_mut().take());
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

/// A woken hwsched task that the bridge thread runs itself, and the
/// tokio task that runs it (`run_inline`).
#[derive(Default)]
pub(crate) struct Inline {
    /// The runtime whose tasks these are (set once it is built).
    shared: std::sync::OnceLock<std::sync::Weak<Shared>>,
    /// The task to run; taken by the runner, or by the shutdown's drain.
    slot: Mutex<Option<Runnable>>,
    /// The runner's waker.
    runner: Mutex<Option<Waker>>,
}

impl Inline {
    /// Names the runtime whose wakes this bridge may run.
    pub(crate) fn set_runtime(&self, shared: &Arc<Shared>) {
        let _ = self.shared.set(Arc::downgrade(shared));
    }

    /// The task in the slot, if any.
    pub(crate) fn take(&self) -> Option<Runnable> {
        self.slot.lock().take()
    }
}

thread_local! {
    /// On the bridge thread: its `Inline`.
    static BRIDGE: RefCell<Option<Arc<Inline>>> = const { RefCell::new(None) };
    /// On the bridge thread, while it polls an hwsched task.
    static POLLING: Cell<bool> = const { Cell::new(false) };
    /// On the bridge thread: the task whose last poll there was long.
    static LAST_LONG: Cell<*const crate::task::TaskMeta> = const { Cell::new(std::ptr::null()) };
}

/// On the bridge thread: a waker of its runner, for the wakes of the
/// local tasks spawned there (`hwsched::spawn_local` from a task the
/// bridge polls), which the runner runs as `block_on` runs its thread's.
pub(crate) fn runner_waker() -> Option<Waker> {
    BRIDGE
        .try_with(|b| b.borrow().as_ref().and_then(|i| i.runner.lock().clone()))
        .ok()
        .flatten()
}

/// Whether this thread is the bridge's, polling an hwsched task:
/// `block_on` refuses to block it, as it refuses on a worker.
pub(crate) fn polling_here() -> bool {
    POLLING.try_with(Cell::get).unwrap_or(false)
}

/// Polls `r` on the bridge (`run_inline`): two polls of the same task in
/// a row that each run for
/// [`LONG_POLL_NS`](crate::sched::watch::LONG_POLL_NS) or more mark the
/// task a hog, which the bridge does not poll again (it held tokio's
/// driver meanwhile). Two, not one: a poll the OS preempted is long by
/// the wall clock too (one in a few hundred on 2 shared cores), and one
/// such poll must not send a task that is quick back to the hand-offs.
fn poll_here(shared: &Shared, r: Runnable) {
    let meta: *const crate::task::TaskMeta = r.metadata();
    // The waker holds a reference: the metadata outlives the poll.
    let keep = r.waker();
    let t0 = shared.now_ns();
    POLLING.with(|p| p.set(true));
    crate::worker::run_on_bridge(shared, r);
    POLLING.with(|p| p.set(false));
    let long = shared.now_ns().saturating_sub(t0) >= crate::sched::watch::LONG_POLL_NS;
    // The task whose last poll here was long (its address: a new task at
    // the same address after it is freed is at worst marked one poll early).
    let again = LAST_LONG.with(|l| {
        let again = long && l.get() == meta;
        l.set(if long { meta } else { std::ptr::null() });
        again
    });
    if again {
        // SAFETY: `keep` holds a reference to the task, so its header and
        // the metadata in it are alive until `keep` is dropped below.
        unsafe { (*meta).hog.store(true, Ordering::Relaxed) };
    }
    drop(keep);
}

/// Running a woken task on the bridge: a wake made on the bridge thread
/// (a tokio task, such as reqwest's connection task, completing what an
/// hwsched task waits on) while every worker of `shared` sleeps would
/// cost a worker's wake-up, and the task's next request a wake of the
/// bridge back: two thread switches per round trip where tokio has none.
/// Then the bridge runs the task itself, as a CPU runs a wakee whose
/// waker is about to sleep (the kernel's sync wake-up): the slot holds
/// one task, and the runner, a tokio task on this thread, polls it next.
/// Returns the task when it is not taken (another thread, another
/// runtime, a worker awake, or the slot full).
pub(crate) fn run_here(shared: &Shared, r: Runnable) -> Option<Runnable> {
    BRIDGE.with(|b| {
        let b = b.borrow();
        let Some(inline) = b.as_ref() else {
            return Some(r);
        };
        let ours = inline
            .shared
            .get()
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), shared));
        // Not a wake made by a task this bridge polls (its wakes and
        // spawns go to the workers: the bridge runs completions, not
        // whole task graphs), nor of a task whose poll here once ran long.
        if !ours
            || POLLING.with(Cell::get)
            || r.metadata().hog.load(Ordering::Relaxed)
            || shared.sleepers.counts().awake != 0
        {
            return Some(r);
        }
        let mut slot = inline.slot.lock();
        if slot.is_some() {
            return Some(r);
        }
        *slot = Some(r);
        drop(slot);
        if let Some(w) = inline.runner.lock().as_ref() {
            w.wake_by_ref();
        }
        None
    })
}

/// The bridge's runner: polls the task in the slot, with the runtime's
/// context entered, until the slot stays empty (at most 32 polls per
/// turn, then it yields to tokio's other tasks and its driver).
async fn run_inline(inline: Arc<Inline>) {
    // This thread runs its local tasks, as a `block_on` loop does: they
    // are dropped with the runner.
    let _driving = crate::runtime::block_on::driving();
    std::future::poll_fn(|cx| {
        {
            let mut w = inline.runner.lock();
            if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *w = Some(cx.waker().clone());
            }
        }
        let Some(shared) = inline.shared.get().and_then(std::sync::Weak::upgrade) else {
            return Poll::Pending;
        };
        let _cx = crate::runtime::block_on::enter(shared.clone());
        for _ in 0..32 {
            let more = crate::runtime::block_on::run_locals(&shared);
            let Some(r) = inline.take() else {
                if more {
                    continue;
                }
                return Poll::Pending;
            };
            if shared.is_shutdown() {
                crate::task::drop_task(r);
                continue;
            }
            poll_here(&shared, r);
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
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
