//! Workers that drive async-io's reactor (`Builder::enable_io`, the `io`
//! cargo feature).
//!
//! hwsched has no I/O driver of its own: async-io's reactor (epoll or
//! kqueue, and its timers) is process-wide, and whoever calls
//! `async_io::block_on` and waits drives it; while nobody does, async-io's
//! own thread does. Driven by that thread, every I/O and timer wake is a
//! wake from outside the runtime: a futex wake, and no wake placement.
//!
//! With I/O on, each worker's loop runs inside one long-lived
//! `async_io::block_on` (the way smol's executor threads sit in
//! `block_on(ex.run(..))`): the loop is a future that runs tasks and
//! returns `Pending` when the worker goes to sleep. `block_on` then waits in
//! the reactor if its lock is free (one thread at a time holds it: async-io's
//! reactor lock is the hand-off), else on its own parker until woken. The
//! I/O and timer wakes the reactor delivers are made on the worker's thread:
//! wake placement sees a waker on a worker, keeps the first task on it (LIFO
//! slot) and spreads the rest to idle workers nearby (schedule.rs,
//! `Core::wake_self_in_reactor`).
//!
//! The sleep itself is the park protocol of [`park`](crate::park) with the
//! block_on's waker in place of the condvar ([`Parker::poll_park`]): a
//! notify takes the waker and wakes it; async-io's waker then interrupts
//! the reactor (from another thread: its `notify`) or only sets its token
//! (from the reactor's own thread, a wake made in the reactor, or for a
//! worker sleeping on async-io's parker: a futex wake, as a condvar's). The
//! loom model `delivery_reaches_a_worker_sleeping_in_the_reactor` checks
//! that no delivery is lost.
//!
//! # The hand-off
//!
//! - Whichever sleeping worker's `block_on` takes the reactor lock first
//!   waits in the reactor; the others wait on async-io's parker.
//! - The worker in the reactor leaves it when woken (work for it, a search,
//!   shutdown), or after 500 us of delivering wakes only to others
//!   (async-io's rule: it then hands the reactor to async-io's thread).
//!   The next worker to go to sleep takes the reactor if it is free.
//! - A worker that keeps running looks at the reactor without waiting:
//!   every [`EVENT_INTERVAL`] polls its future returns `Pending` after
//!   waking itself, and `block_on` polls the reactor without blocking when
//!   its lock is free (tokio's `event_interval`), so readiness is seen by a
//!   worker while all are busy.
//! - async-io's thread drives the reactor when no worker waits in it: it
//!   backs off (50 us to 10 ms) while any `block_on` runs and takes the
//!   lock when it sees no reactor activity through a back-off interval.
//!
//! # Started on first use
//!
//! A program that never touches async-io pays nothing for `enable_io`: the
//! workers start in the condvar loop, and async-io's reactor (its epoll
//! instance and its thread) is not created, because nothing of hwsched
//! calls into async-io until then. The first `Async<T>` or `Timer` a task
//! creates starts async-io's thread, which drives the reactor alone and
//! makes the first I/O or timer wake from outside the runtime; that wake
//! ([`note_foreign_wake`]; or one from a worker of another runtime that
//! sleeps in `block_on`) sets `Shared::io_live`, and each worker, after
//! the task it is running, leaves the condvar loop for the loop above
//! (workers asleep on their condvars switch when next woken; async-io's
//! thread drives the reactor meanwhile). The switch is one way. The flag
//! is a hint: a worker that sees it late only parks on its condvar once
//! more, which is the `enable_io(false)` behaviour, so nothing orders it.
//! `Stats::io_driven` says whether the switch happened.

use std::cell::Cell;
use std::future::poll_fn;
use std::task::Poll;

use crate::park::Parker;
use crate::shared::Shared;
use crate::sync::Ordering;
use crate::worker::{step, Step, WorkerCtx};

/// Polls between two non-blocking looks at the reactor by a busy worker
/// (tokio's `event_interval`, 61: a prime, as the inbox check's).
pub const EVENT_INTERVAL: u32 = 61;

thread_local! {
    /// Whether this thread is async-io's driver thread (`None`: not asked yet).
    static IS_ASYNC_IO: Cell<Option<bool>> = const { Cell::new(None) };
    /// Whether this thread is a worker (of any runtime) whose loop is
    /// pending in `async_io::block_on`: a wake it makes comes from the
    /// reactor, or from another runtime's task run there.
    static IN_BLOCK_ON: Cell<bool> = const { Cell::new(false) };
}

/// A wake made outside the runtime, while the workers are still in the
/// condvar loop: if a thread that drives the reactor made it (async-io's
/// own, or a worker of another runtime sleeping in `block_on`), the
/// program uses the reactor, and the workers should drive it from now on.
#[cold]
pub(crate) fn note_foreign_wake(shared: &Shared) {
    let is_driver = IN_BLOCK_ON.with(Cell::get)
        || IS_ASYNC_IO.with(|c| match c.get() {
            Some(b) => b,
            None => {
                // async-io names its driver thread "async-io" (driver.rs).
                let b = std::thread::current().name() == Some("async-io");
                c.set(Some(b));
                b
            }
        });
    if is_driver {
        // Relaxed: a hint read by the workers between tasks (module docs).
        shared.io_live.store(true, Ordering::Relaxed);
    }
}

/// Whether the workers should drive the reactor now.
#[inline]
pub(crate) fn live(shared: &Shared) -> bool {
    // Relaxed: a one-way hint (module docs, "Started on first use").
    shared.io_live.load(Ordering::Relaxed)
}

/// A worker's loop inside `async_io::block_on`; returns at shutdown.
pub(crate) fn run(ctx: &WorkerCtx) {
    let mut polls = 0u32;
    async_io::block_on(poll_fn(|cx| {
        ctx.core.borrow_mut().in_block_on = false;
        IN_BLOCK_ON.with(|c| c.set(false));
        loop {
            match step(ctx, |p: &Parker| p.poll_park(cx.waker())) {
                Step::Ran => {
                    polls = polls.wrapping_add(1);
                    if polls % EVENT_INTERVAL == 0 {
                        // Let block_on look at the reactor (it does when
                        // its future is pending and its token set).
                        cx.waker().wake_by_ref();
                        break;
                    }
                }
                Step::Suspended => break,
                Step::Shutdown => return Poll::Ready(()),
            }
        }
        ctx.core.borrow_mut().in_block_on = true;
        IN_BLOCK_ON.with(|c| c.set(true));
        Poll::Pending
    }));
    ctx.core.borrow_mut().in_block_on = false;
    IN_BLOCK_ON.with(|c| c.set(false));
}
