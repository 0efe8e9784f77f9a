//! The thread-local context: which worker, if any, runs on this thread,
//! and which runtime's driver this thread uses.
//!
//! At the bottom of the mechanism (tokio keeps the same in
//! `runtime/context.rs`): the task layer, the blocking pool, `block_on`,
//! the driver (I/O, timers, signals) and the worker all read it, and it
//! imports nothing above the counters. The worker's own context
//! (`worker::WorkerCtx`, with its core) starts with a [`Here`], which the
//! thread-local points at while the worker runs.
//!
//! The driver's handle is kept here without its type ([`enter_driver`],
//! [`driver`]): the driver sits above this module, and its layers take
//! back the handle they know (`time::current`), so that the arrows still
//! run one way.

use std::cell::Cell;
use std::ptr;

use crate::stats::WorkerCounters;

/// What the bottom of the mechanism knows of the worker on this thread:
/// the first field of the worker's context (`repr(C)`), so that a pointer
/// to it is a pointer to that context too.
#[derive(Debug)]
pub(crate) struct Here {
    /// The worker's index.
    pub(crate) index: usize,
    /// Its runtime (`Arc::as_ptr` of its `Shared`): an identity, and the
    /// runtime itself for `Shared::current`.
    pub(crate) rt: *const (),
    /// Its counters.
    pub(crate) counters: *const WorkerCounters,
    /// Its runtime's task registry (an identity).
    pub(crate) registry: *const (),
}

thread_local! {
    static CURRENT: Cell<*const Here> = const { Cell::new(ptr::null()) };
    /// Set by [`yield_now`](crate::yield_now) before its self-wake, taken
    /// by the schedule of that wake ([`take_yield`]).
    static YIELDING: Cell<bool> = const { Cell::new(false) };
}

/// Marks the self-wake that follows as a yield. async-task runs the
/// schedule of a wake made while its task is being polled after the poll
/// returns, on this thread; the schedule takes the mark there. A mark that
/// nobody takes (the wake went elsewhere: the task was cancelled, or the
/// worker's core was borrowed) makes the next self-wake on this thread
/// count as a yield, which costs that wake one admission of the inbox.
#[inline]
pub(crate) fn mark_yield() {
    YIELDING.with(|y| y.set(true));
}

/// Whether the self-wake being scheduled on this thread comes from
/// [`yield_now`](crate::yield_now); clears the mark.
#[inline]
pub(crate) fn take_yield() -> bool {
    YIELDING.with(|y| y.replace(false))
}

/// The worker's context on this thread, as a pointer (null when this
/// thread is not a worker). Valid while the worker's `run` is on this
/// thread's stack: [`enter`]'s guard resets it before the context is
/// dropped.
#[inline]
pub(crate) fn current() -> *const Here {
    CURRENT.with(|c| c.get())
}

/// Runs `f` with the worker on this thread, if any.
#[inline]
pub(crate) fn with_here<R>(f: impl FnOnce(Option<&Here>) -> R) -> R {
    let p = current();
    // SAFETY: non-null only while the worker's context lives on this
    // thread's stack (see `current`), and only ever read on this thread.
    f(unsafe { p.as_ref() })
}

/// Resets the context when dropped.
pub(crate) struct Guard(());

impl Drop for Guard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(ptr::null()));
    }
}

/// Installs `here` as this thread's worker until the guard drops. The
/// caller keeps `*here` alive and in place until then.
pub(crate) fn enter(here: *const Here) -> Guard {
    CURRENT.with(|c| c.set(here));
    Guard(())
}

/// Whether this thread is a worker of any hwsched runtime.
pub(crate) fn on_worker_thread() -> bool {
    !current().is_null()
}

/// The index of this thread's worker, in whichever runtime.
pub(crate) fn current_index() -> Option<usize> {
    with_here(|h| h.map(|h| h.index))
}

/// Counts a panic caught in a task's poll or drop on this worker's counters
/// (nothing when the task runs elsewhere, e.g. dropped by shutdown).
pub(crate) fn count_panic() {
    with_here(|h| {
        if let Some(h) = h {
            // SAFETY: the counters live in the runtime the worker's context
            // holds alive while `h` is valid.
            WorkerCounters::bump(unsafe { &(*h.counters).panics }, 1);
        }
    })
}

/// Counts a retired task (finished or dropped) on this worker's counters if
/// this thread is a worker of the runtime owning `registry` (its address);
/// returns whether it did.
pub(crate) fn count_retired(registry: *const ()) -> bool {
    with_here(|h| match h {
        Some(h) if ptr::eq(h.registry, registry) => {
            // SAFETY: as in `count_panic`.
            WorkerCounters::bump(unsafe { &(*h.counters).retired }, 1);
            true
        }
        _ => false,
    })
}

#[cfg(feature = "io")]
thread_local! {
    /// The driver of this thread's runtime: set for a worker's whole life,
    /// and by `block_on::enter` on the threads outside the workers.
    static DRIVER: std::cell::RefCell<Option<DriverHandle>> =
        const { std::cell::RefCell::new(None) };
}

/// A runtime's driver handle, its type left to the layer that reads it.
#[cfg(feature = "io")]
pub(crate) type DriverHandle = std::sync::Arc<dyn std::any::Any + Send + Sync>;

/// Puts back the driver that [`enter_driver`] replaced when dropped.
#[cfg(feature = "io")]
pub(crate) struct DriverGuard(Option<DriverHandle>);

#[cfg(feature = "io")]
impl Drop for DriverGuard {
    fn drop(&mut self) {
        let prev = self.0.take();
        DRIVER.with(|d| *d.borrow_mut() = prev);
    }
}

/// Makes `driver` this thread's driver until the guard drops.
#[cfg(feature = "io")]
pub(crate) fn enter_driver(driver: DriverHandle) -> DriverGuard {
    DriverGuard(DRIVER.with(|d| d.borrow_mut().replace(driver)))
}

/// This thread's driver, if it is a `T` (the driver's layers each name the
/// handle type they store).
#[cfg(feature = "io")]
pub(crate) fn driver<T: std::any::Any + Send + Sync>() -> Option<std::sync::Arc<T>> {
    DRIVER
        .with(|d| d.borrow().clone())
        .and_then(|d| d.downcast::<T>().ok())
}
