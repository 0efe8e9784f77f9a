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

/// The bridge: tokio's handle and the thread that drives it.
pub(crate) struct Bridge {
    pub(crate) handle: tokio::runtime::Handle,
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
        let s = stop.clone();
        let thread = thread::Builder::new().name(name).spawn(move || {
            rt.block_on(&*s);
            // The tokio tasks left are dropped here; tokio's blocking
            // threads are not waited for.
            rt.shutdown_background();
        })?;
        Ok(Bridge {
            handle,
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
