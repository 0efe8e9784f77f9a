//! The shutdown sequence (the [worker](crate::worker)'s module docs,
//! "Shutdown", steps 1-7), written once over small views so that the
//! runtime (`Runtime::shutdown` in `runtime/mod.rs`, the worker's loop and exit
//! in `worker/mod.rs`) and the loom models (`loom-tests/tests/shutdown.rs`)
//! run the same steps. The protocols it calls are elsewhere: the flag and
//! the notifies ([`announce_shutdown`]), the burial and the final drain
//! ([`Graveyard`], [`final_drain`]) in `worker/shared.rs`; the wait that sees the
//! flag ([`Mailbox::wait_with`](crate::sched::park::Mailbox::wait_with), sched/park.rs
//! "shutdown"); the schedule path's check ([`handoff::admit`](crate::sched::push::admit)).
//!
//! # The steps
//!
//! The runtime's side, [`shutdown`] over a [`Stopping`] view (steps 1, 2
//! and 5-7 of the worker's docs):
//!
//! 1. **Announce**: set the flag, then notify every worker's parker
//!    ([`announce_shutdown`]). A worker asleep wakes and sees the flag; a
//!    delivery racing the announce sees it or is seen (sched/park.rs,
//!    "shutdown").
//! 2. **Close the blocking pool** ([`Stopping::close_blocking`]): it
//!    refuses new closures and cancels those not yet started; it waits for
//!    nothing yet.
//! 3. **Join** the workers ([`Stopping::join_workers`]); a worker that
//!    outlives the deadline (or is the calling thread) is left to exit on
//!    its own, and the answer says so.
//! 4. **Final drain** ([`final_drain`]): drop what is left in the inboxes,
//!    wake every task pending on a waker (its schedule buries it), reap
//!    the graveyard and drain the inboxes until both are empty; only then
//!    wait for the running blocking closures ([`Stopping::wait_running`]),
//!    reap again, and close the graveyard.
//!
//! A worker's side, over a [`Running`] view and an [`Exiting`] one (steps
//! 3 and 4 there):
//!
//! - Each step of its loop takes its next task with [`next`]: the flag is
//!   looked at first (before its own queues), so a worker that saw it
//!   polls nothing more; an idle period that sees it (its wait returns
//!   [`Wait::Shutdown`](crate::sched::park::Wait::Shutdown)) ends the loop too.
//! - On the way out, [`exit`] drops every task it still holds (its LIFO
//!   slot, its deque, its private batch), then what must be dropped on its
//!   own thread (tasks placed on it, its local tasks). The inboxes are the
//!   final drain's.
//!
//! Every task is thus run or dropped exactly once: a task held by a worker
//! is dropped by its exit, a task in an inbox by the final drain, a task
//! found after the flag (woken, or delivered concurrently) is buried and
//! reaped by the final drain or, after [`Graveyard::close`], by its burier.
//! Model-checked in `loom-tests/tests/shutdown.rs`, which drives these
//! functions with the models' runtime (`loom_tests::Rt`) and workers.

use crate::sched::idle_steps::Idle;
use crate::sched::park::Parker;
use crate::worker::shared::{announce_shutdown, final_drain, Graveyard};
use crate::sync::AtomicBool;

/// The runtime as the shutdown sequence sees it.
pub trait Stopping<T> {
    /// The shutdown flag.
    fn flag(&self) -> &AtomicBool;
    /// Every worker's parker.
    fn parkers(&self) -> impl Iterator<Item = &Parker>;
    /// Step 2: the blocking pool refuses new closures and cancels those
    /// not yet started.
    fn close_blocking(&self);
    /// Step 3: joins the workers; whether every one was joined.
    fn join_workers(&mut self) -> bool;
    /// Where tasks found after the flag are buried.
    fn graveyard(&self) -> &Graveyard<T>;
    /// Drops what is queued in every worker's inbox (and its placed
    /// tasks); how many.
    fn drain_inboxes(&self) -> usize;
    /// Wakes every task pending on a waker (the registry's
    /// `close_and_wake_all`): each one's schedule buries it.
    fn wake_waiting(&self);
    /// Waits for the running blocking closures (up to the deadline);
    /// whether every one returned.
    fn wait_running(&self) -> bool;
    /// Drops a task without running it (`drop_task`).
    fn drop_task(&self, t: T);
}

/// The runtime's shutdown sequence (the [module docs](self), steps 1-4);
/// returns whether every worker and blocking closure was joined. Never
/// call it inside a wake, nor twice.
pub fn shutdown<T>(rt: &mut impl Stopping<T>) -> bool {
    announce_shutdown(rt.flag(), rt.parkers());
    rt.close_blocking();
    let joined = rt.join_workers();
    let rt = &*rt;
    let waited = std::cell::Cell::new(true);
    final_drain(
        rt.graveyard(),
        || rt.drain_inboxes(),
        || rt.wake_waiting(),
        || waited.set(rt.wait_running()),
        |t| rt.drop_task(t),
    );
    joined && waited.get()
}

/// A worker's loop as [`next`] sees it.
pub trait Running<T> {
    /// Whether the shutdown flag is set (a relaxed load: sched/park.rs,
    /// "shutdown").
    fn is_shutdown(&self) -> bool;
    /// Whether an idle period is suspended (the worker slept in the I/O
    /// driver): it goes on first, and sees the flag there.
    fn resuming(&self) -> bool;
    /// The next task on the worker's own queues (its LIFO slot, deque,
    /// inbox).
    fn next_own(&mut self) -> Option<T>;
    /// The idle sequence ([`idle_worker::idle`](crate::sched::idle_steps::idle)).
    fn idle(&mut self) -> Idle<T>;
}

/// The next task of a worker's loop: a suspended idle period goes on; else
/// shutdown ends the loop before the worker's own queues are looked at;
/// else its own queues, then the idle sequence. Inlined: it runs once
/// per task, and the call's register saves cost more than its body.
#[inline(always)]
pub fn next<T>(w: &mut impl Running<T>) -> Idle<T> {
    if w.resuming() {
        return w.idle();
    }
    if w.is_shutdown() {
        return Idle::Shutdown;
    }
    match w.next_own() {
        Some(t) => Idle::Run(t),
        None => w.idle(),
    }
}

/// A worker leaving its loop at shutdown, as [`exit`] sees it.
pub trait Exiting<T> {
    /// A task the worker still holds (its LIFO slot, then its deque, then
    /// its private batch).
    fn take_held(&mut self) -> Option<T>;
    /// Drops what must be dropped on the worker's own thread: the tasks
    /// placed on it (in its mailbox) and its local tasks.
    fn drop_pinned(&mut self);
    /// Drops a task without running it (`drop_task`).
    fn drop_task(&mut self, t: T);
}

/// A worker's exit at shutdown: every task it still holds is dropped, then
/// those it must drop on its own thread. Returns how many it held.
pub fn exit<T>(w: &mut impl Exiting<T>) -> usize {
    let mut n = 0;
    while let Some(t) = w.take_held() {
        w.drop_task(t);
        n += 1;
    }
    w.drop_pinned();
    n
}
