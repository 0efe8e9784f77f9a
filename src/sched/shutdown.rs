//! The shutdown sequence, written once over small views so that the
//! runtime (`Runtime::shutdown` in `runtime/mod.rs`, the worker's loop and
//! exit in `worker/mod.rs`) and the loom models (`loom-tests/tests/shutdown.rs`)
//! run the same steps: the flag and the notifies ([`announce_shutdown`]),
//! the burial and the final drain ([`Graveyard`], [`final_drain`]), the
//! runtime's side ([`shutdown`]) and a worker's ([`next`], [`exit`]). The
//! wait that sees the flag
//! ([`Mailbox::wait_with`](crate::sched::park::Mailbox::wait_with)) and the
//! schedule path's check ([`push::admit`](crate::sched::push::admit)) are
//! in their protocols. The steps, numbered 1-7: src/sched/README.md,
//! "Shutdown".

use crate::sched::idle_steps::Idle;
use crate::sched::park::Parker;
use crate::sched::park::Mailbox;
use crate::sched::queue::{Inbox, Steal};
use crate::sync::{fence, AtomicBool, Ordering};

/// The runtime as the shutdown sequence sees it.
pub trait Stopping<T> {
    /// The shutdown flag.
    fn flag(&self) -> &AtomicBool;
    /// Every worker's parker.
    fn parkers(&self) -> impl Iterator<Item = &Parker>;
    /// Step 2: the blocking pool refuses new closures and cancels those
    /// not yet started.
    fn close_blocking(&self);
    /// Step 5: joins the workers; whether every one was joined.
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

/// The runtime's shutdown sequence (src/sched/README.md, steps 1, 2, 5-7);
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
    /// The idle sequence ([`idle_steps::idle`](crate::sched::idle_steps::idle)).
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

/// Tasks found after shutdown started, queued to be dropped by the shutdown
/// sequence rather than where they were found.
///
/// A task found after shutdown is not dropped there: that may be inside a
/// waker call, and the waker's caller may hold a lock that the task's
/// destructor needs (dropping an `async_channel::Sender` wakes receivers
/// from inside event-listener's lock; dropping a receiver's future there
/// would take that lock again). The shutdown sequence ([`final_drain`])
/// drops buried tasks outside any wake. Once it has finished
/// ([`Graveyard::close`]), nobody else will: a burial then drops at once.
///
/// Burial and the last reap race store-buffering style:
///
/// | `bury` | `close` |
/// | --- | --- |
/// | push onto the graveyard | `reaper_done = true` |
/// | `fence(SeqCst)` | `fence(SeqCst)` |
/// | read `reaper_done`; if set, reap | reap |
///
/// Whichever fence comes second, its side sees the other's store: the
/// push is reaped by `close`, or the burier reaps it itself (possibly both
/// reap; each task is taken once). Model-checked in
/// `loom-tests/tests/shutdown.rs`.
pub struct Graveyard<T> {
    queue: Inbox<T>,
    /// Set when the shutdown sequence has reaped for the last time.
    reaper_done: AtomicBool,
}

impl<T> Default for Graveyard<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Graveyard<T> {
    /// An empty graveyard, still reaped by the shutdown sequence.
    pub fn new() -> Self {
        Graveyard {
            queue: Inbox::new(),
            reaper_done: AtomicBool::new(false),
        }
    }

    /// Buries `t`; drops it (with `drop`) at once, and whatever else is
    /// buried, if the shutdown sequence has already finished reaping.
    pub fn bury(&self, t: T, drop: impl FnMut(T)) {
        self.queue.push(t);
        // SeqCst fence: pairs with the one in `close` (store-buffering):
        // either `close`'s reap (after its fence) sees this push, or this
        // load sees `reaper_done` and we reap (type docs).
        fence(Ordering::SeqCst);
        if self.reaper_done.load(Ordering::Relaxed) {
            self.reap(drop);
        }
    }

    /// Drops every buried task with `drop`; returns how many.
    pub fn reap(&self, drop: impl FnMut(T)) -> usize {
        drain_queue(&self.queue, drop)
    }

    /// The shutdown sequence's last reap: from now on a burial drops its
    /// task itself. Returns how many tasks it dropped.
    pub fn close(&self, drop: impl FnMut(T)) -> usize {
        debug_assert!(
            !self.reaper_done.load(Ordering::Relaxed),
            "the graveyard is closed once"
        );
        self.reaper_done.store(true, Ordering::Relaxed);
        // SeqCst fence: pairs with the one in `bury` (see there).
        fence(Ordering::SeqCst);
        self.reap(drop)
    }

    /// Whether nothing is buried (a snapshot).
    // Used by the loom models.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// Takes everything out of `q`, handing each item to `f`; returns how many.
pub fn drain_queue<T>(q: &Inbox<T>, mut f: impl FnMut(T)) -> usize {
    let mut n = 0;
    loop {
        match q.steal() {
            Steal::Success(t) => {
                f(t);
                n += 1;
            }
            Steal::Empty => return n,
            Steal::Retry => continue,
        }
    }
}

/// Drops everything in the inboxes `mailboxes` with `drop` (never call
/// this inside a wake: see [`Shared::bury`](crate::worker::shared::Shared::bury)); returns how many tasks it
/// dropped.
pub fn drain_inboxes<'a, T: 'a>(
    mailboxes: impl IntoIterator<Item = &'a Mailbox<T>>,
    mut drop: impl FnMut(T),
) -> usize {
    mailboxes
        .into_iter()
        .map(|m| drain_queue(&m.inbox, &mut drop) + m.drain_pinned(&mut drop))
        .sum()
}

/// The start of the shutdown sequence (step 1 of
/// [`shutdown::shutdown`](crate::sched::shutdown::shutdown)): sets the shutdown
/// flag, then notifies every worker's parker so that each wakes, sees the
/// flag and leaves its loop.
pub fn announce_shutdown<'a>(shutdown: &AtomicBool, parkers: impl IntoIterator<Item = &'a Parker>) {
    // Relaxed: published to each worker (and to any deliverer) by the
    // parker RMW that follows (README, "Parking and the inbox hand-off").
    shutdown.store(true, Ordering::Relaxed);
    for p in parkers {
        let _ = p.notify();
    }
}

/// The end of the shutdown sequence (steps 5-7 of
/// [`shutdown::shutdown`](crate::sched::shutdown::shutdown)), once the workers
/// have left their loops. In this order:
///
/// 5. **Cancel what is pending**: drop what is still queued in the inboxes
///    (`drain_inboxes`, which returns how many it dropped), wake every task
///    that is pending on a waker (`wake_waiting`: its schedule sees the
///    shutdown and buries it), then reap the graveyard and drain the
///    inboxes until both are empty (dropping a task may wake others: a
///    dropped channel sender wakes its receivers, which are buried in
///    turn).
/// 6. **Wait for what runs outside the workers** (`wait_running`: the
///    blocking pool's closures, up to the shutdown's deadline). A closure
///    that waits on a task (a channel whose sender a task holds, a
///    `JoinHandle`) has seen it cancelled in step 5 and returns; waiting
///    first would wait on it forever, since the task it waits on would
///    only be dropped after the wait.
/// 7. Reap and drain again until both are empty (tasks that the closures'
///    wakes buried during step 6), and close the graveyard
///    ([`Graveyard::close`]): from then on a burial drops its task itself.
///
/// Never call it inside a wake. Model-checked, with a blocking closure
/// waiting on a pending task, in `loom-tests/tests/shutdown.rs`.
pub fn final_drain<T>(
    graveyard: &Graveyard<T>,
    mut drain_inboxes: impl FnMut() -> usize,
    wake_waiting: impl FnOnce(),
    wait_running: impl FnOnce(),
    mut drop: impl FnMut(T),
) {
    // What was queued when the workers left. Not needed for the count
    // (each pass of the loop below drains the inboxes too, and these tasks
    // are not pending on a waker, so the wake-up does not touch them): it
    // drops them before the wake-up's burials.
    drain_inboxes();
    wake_waiting();
    reap_until_empty(graveyard, &mut drain_inboxes, &mut drop);
    wait_running();
    reap_until_empty(graveyard, &mut drain_inboxes, &mut drop);
    graveyard.close(drop);
}

/// Reaps `graveyard` and drains the inboxes until a pass finds nothing in
/// either.
///
/// One pass does for a cascade of drops in the graveyard: a reap steals
/// until the graveyard is empty, so what its drops bury meanwhile is taken
/// by the same call. The passes after it are for what a pass's inbox
/// drain buries (a drop there that wakes another task) and for a burial
/// that lands after the reap saw the graveyard empty (a deliverer racing
/// the flag, whose re-check buries): with one pass those would wait for
/// the reap after the wait for the blocking pool, and a closure waiting on
/// one of them would hold the shutdown until its deadline. The models do
/// not make that case (it needs a racing deliverer, a cascade from an
/// inbox and a closure in one model); the logic row
/// `final-drain-reap-loop-one-pass` says so.
fn reap_until_empty<T>(
    graveyard: &Graveyard<T>,
    drain_inboxes: &mut impl FnMut() -> usize,
    drop: &mut impl FnMut(T),
) {
    loop {
        let n = graveyard.reap(&mut *drop) + drain_inboxes();
        if n == 0 {
            break;
        }
    }
}
