//! The worker: its loop, its local state, and the thread-local context.
//!
//! # A worker's life
//!
//! 1. It is spawned by [`Builder::build`](crate::Builder::build) with its
//!    own FIFO deque, pins itself to its PU when asked, and installs its
//!    context (a thread-local pointer to its [`WorkerCtx`]) so that spawns
//!    and wakes on this thread reach its queues.
//! 2. Loop: take the next task, LIFO slot first (at most
//!    [`MAX_LIFO_POLLS`] in a row, as tokio does), then the local deque, then
//!    the inbox (a batch); every [`INBOX_CHECK_INTERVAL`] polls the inbox
//!    goes first, so work pushed from outside is never starved by a busy
//!    local queue. Run it, with the task's `last_worker` updated.
//! 3. When all three are empty the worker is idle: it leaves the `queued`
//!    set, marks itself idle and, if fewer than half the workers search,
//!    becomes a searcher and walks its levels ([`balance`](crate::balance)).
//!    Then it asks the [`governor`](crate::governor) whether to spin or
//!    park, and waits through its [`Mailbox`] ([`park`](crate::park): no
//!    lost wakeups); before it sleeps it announces it to the wake protocol
//!    ([`idle`](crate::idle)), and a worker that sleeps with no searcher
//!    left re-checks the `queued` set and steals instead of sleeping when
//!    work is left (the sequence is [`idle_worker`](crate::idle_worker)'s). Work
//!    arriving ends the idle period, whose length feeds `avg_idle`.
//! 4. Every push that makes a task stealable (onto its deque, or into a
//!    busy worker's inbox) runs the wake protocol's pusher check: if nobody
//!    searches and a worker is parked, the parked worker nearest to the
//!    work is woken to search ([`handoff::notify_parked`]). The one exception is the
//!    LIFO slot, which nobody else can take from.
//! 5. Once the I/O driver exists (`crate::io`), a worker going to sleep
//!    suspends its idle period ([`Idle::Suspended`]) and sleeps in a poller
//!    it takes (or on its thread), with its next timer as the timeout
//!    ([`Driven`]); the I/O and timer wakes it makes there stay on it (a
//!    batch), and the idle period goes on when it wakes.
//! 6. Its load contribution is published to the shared group counters at
//!    most once per `load_update_interval` ([`load`](crate::load)), and
//!    always before it sleeps.
//!
//! # Shutdown
//!
//! Pending work is cancelled before anything running is waited for, so
//! that nothing the shutdown waits for can be waiting on what it has yet to
//! cancel:
//!
//! 1. The runtime sets the shutdown flag and notifies every parker. From
//!    here on `spawn` and `spawn_blocking` drop their new task at once (its
//!    handle resolves to `Cancelled`), also when called from a destructor
//!    that the shutdown runs or from a running blocking closure.
//! 2. The blocking pool refuses new closures and drops those not yet
//!    started ([`BlockingPool::close`](crate::blocking::BlockingPool::close));
//!    it waits for nothing yet.
//! 3. A worker sees the flag at the top of its loop or when its wait
//!    returns, and leaves the loop (a task running at that moment finishes
//!    its poll first).
//! 4. On the way out it drops every task in its LIFO slot and local deque,
//!    each drop inside `catch_unwind` so a panicking destructor cannot abort
//!    the exit.
//! 5. The runtime joins the workers, drops what remains in the inboxes, and
//!    wakes every task registered as waiting (task.rs). A task found after
//!    the flag is set (woken, or delivered concurrently with the shutdown:
//!    see [`Mailbox::deliver_or_drain`]) is *buried*, not dropped where it
//!    was found: that may be inside a waker call whose caller holds a lock
//!    the task's destructor needs. The runtime then reaps the buried tasks,
//!    outside any wake, until no drop buries another. Every task is now
//!    cancelled: a blocking closure waiting on one (its `JoinHandle`, a
//!    channel whose sender it held) wakes with `Cancelled`.
//! 6. Only then does it wait for the running blocking closures, up to the
//!    shutdown's deadline ([`BlockingPool::wait`](crate::blocking::BlockingPool::wait)).
//! 7. It reaps once more (tasks buried by the closures' wakes meanwhile)
//!    and closes the graveyard: later burials (a worker that outlived
//!    `shutdown_timeout`, a user's waker) drop at once.
//!
//! Steps 5-7 are `shared::final_drain`; loom checks them
//! (`loom-tests/tests/shutdown.rs`), a blocking closure waiting on a
//! pending task included.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use crate::balance::BalanceState;
use crate::governor::{Choice, Governor};
use crate::handoff::{self, Delivery, Workers};
use crate::load::{Contribution, Publish};
use crate::park::{Mailbox, Notified, Wait};
use crate::queue::{Local, Steal};
use crate::shared::Shared;
use crate::stats::{WorkerCounters, MAX_LEVELS};
use crate::sync::Ordering;
use crate::task::{JoinHandle, Registry, Runnable, TaskFuture, TaskMeta};
use crate::topology::pin_current_thread;
use crate::tunables::StealWalk;
use std::future::Future;
use std::sync::Arc;

/// Most polls in a row from the LIFO slot before the deque gets a turn
/// (tokio's `MAX_LIFO_POLLS_PER_TICK`): a pair of tasks waking each other
/// cannot starve the rest of the queue.
pub const MAX_LIFO_POLLS: u32 = 3;

/// Every this many polls the inbox is checked first (tokio and Go use 61: a
/// prime, so it does not fall in step with periodic workloads).
pub const INBOX_CHECK_INTERVAL: u32 = 61;

/// Most tasks of the I/O driver's batches kept private to the worker that
/// polled them ([`Core::push_batch`]); the rest go to its stealable deque.
pub const BATCH_LOCAL: usize = 16;

/// Polls or pushes between two (rate-limited) load publishes.
const PUBLISH_CHECK_EVERY: u32 = 32;

/// A worker's own state, touched only by its thread.
pub(crate) struct Core {
    pub(crate) index: usize,
    /// This worker's LLC (`Topology::llc_span`), where wake placement
    /// looks for an idle worker.
    pub(crate) llc: std::ops::Range<usize>,
    /// Its LLC's word and mask in the idle mask, when the LLC lies in one
    /// word (up to 64 workers): the one load of a wake with nobody idle.
    pub(crate) llc_word: Option<(usize, u64)>,
    pub(crate) local: Local<Runnable>,
    pub(crate) lifo: Option<Runnable>,
    lifo_streak: u32,
    tick: u32,
    pub(crate) running: bool,
    publisher: crate::load::Publisher,
    ops_since_publish: u32,
    pub(crate) balance: BalanceState,
    pub(crate) avg_scan_cost_ns: u64,
    governor: Governor,
    rng: u64,
    /// Wakes placed by this worker, for sampling the scan cost.
    pub(crate) wakes: u32,
    /// The worker this one last stole from: tried first on the next idle
    /// walk, before the load-counter gate (see `walk`).
    last_victim: Option<usize>,
    /// Whether this worker counts as searching (idle.rs).
    pub(crate) searching: bool,
    /// Whether this worker set its own bit in the `queued` set since it
    /// last cleared it.
    queued_bit: bool,
    /// How a wake made on this thread (with this core free) is placed.
    pub(crate) wake_mode: WakeMode,
    /// Tasks the current batch (a poller turn, timers) put here.
    batch: u32,
    /// The I/O driver's batches beyond the LIFO slot, private to this
    /// worker while they stay cache-hot ([`Core::push_batch`]).
    batch_q: std::collections::VecDeque<Runnable>,
    /// When `batch_q` last received a batch (`Shared::now_ns`).
    batch_since: u64,
    /// The idle period suspended while this worker sleeps in its poller
    /// (or parks its thread, with the I/O driver on).
    pub(crate) suspended: Option<SuspendedIdle>,
}

/// How a wake made on a worker's thread is placed (schedule.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WakeMode {
    /// A task's wake: wake placement (`wake_affine`, `select_idle_sibling`).
    Place,
    /// The I/O driver's batch: kept on this worker (io/mod.rs).
    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    Batch,
    /// A deferred wake of a task out of budget: the back of the deque.
    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    Yield,
}

/// What the thread-local context points at.
#[repr(C)]
pub(crate) struct WorkerCtx {
    /// What `context` knows of this worker: first, so that the
    /// thread-local's pointer to it points at this context too.
    pub(crate) here: crate::context::Here,
    pub(crate) shared: Arc<Shared>,
    pub(crate) index: usize,
    pub(crate) core: RefCell<Core>,
}

/// Runs `f` with this thread's worker context, if it is a worker.
#[inline]
fn with_ctx<R>(f: impl FnOnce(Option<&WorkerCtx>) -> R) -> R {
    let p = crate::context::current() as *const WorkerCtx;
    // SAFETY: the context's pointer is non-null only while `run` is on this
    // thread's stack with the WorkerCtx alive (its guard resets it before
    // the ctx is dropped); it points at the ctx's first field, `here`, and
    // `WorkerCtx` is `repr(C)`, so it points at the ctx. Only ever
    // dereferenced on this thread.
    let ctx = unsafe { p.as_ref() };
    f(ctx)
}

/// The index of this thread's worker, if it is a worker of `shared`.
#[inline]
pub(crate) fn current_worker(shared: &Shared) -> Option<usize> {
    shared.current_worker()
}

/// Where this thread's worker is, in whichever runtime.
pub(crate) fn current_place() -> Option<crate::CurrentPlace> {
    with_ctx(|c| c.map(|c| c.shared.places.current(c.index)))
}

/// This thread's worker: its runtime and index.
pub(crate) fn current_shared_worker() -> Option<(Arc<Shared>, usize)> {
    with_ctx(|c| c.map(|c| (c.shared.clone(), c.index)))
}

/// Runs `f` with this worker's index and, when not already borrowed by the
/// worker itself, its core.
pub(crate) fn with_core<R>(
    shared: &Shared,
    f: impl FnOnce(Option<(usize, Option<&mut Core>)>) -> R,
) -> R {
    with_ctx(|c| match c.filter(|c| ptr::eq(&*c.shared, shared)) {
        None => f(None),
        Some(c) => match c.core.try_borrow_mut() {
            Ok(mut core) => f(Some((c.index, Some(&mut core)))),
            Err(_) => f(Some((c.index, None))),
        },
    })
}

pub(crate) use crate::task::drop_task;

/// Spawns `future` at `place` (see [`Place`](crate::Place)): checked
/// first, so a refused place spawns nothing.
pub(crate) fn spawn_on<F>(
    shared: &Arc<Shared>,
    place: crate::Place,
    future: F,
) -> Result<JoinHandle<F::Output>, crate::PlaceError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match shared.places.check(place, current_worker(shared))? {
        crate::placed::Target::Worker(w) => Ok(spawn_pinned(shared, w, future)),
    }
}

/// Spawns `future` pinned to worker `w` (a checked [`Place`](crate::Place)):
/// its schedule function, [`schedule_pinned`], sends it to `w`'s pinned
/// queue at every wake, which only `w` takes from (park.rs, "Pinned
/// tasks"). A task without a place never runs this code.
pub(crate) fn spawn_pinned<F>(shared: &Arc<Shared>, w: usize, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let this = shared;
    let shared = this.clone();
    // SAFETY: as in `spawn`: the schedule function keeps `Shared`, which
    // holds the registry, alive for as long as the task exists.
    let (runnable, handle) = unsafe {
        crate::task::build(future, &this.registry, move |r: Runnable| {
            schedule_pinned(&shared, w, r)
        })
    };
    bump_for(this, current_worker(this), |s| &s.spawned);
    if this.is_shutdown() {
        drop_task(runnable);
        return handle;
    }
    push_pinned(this, w, runnable, false);
    handle
}

/// The schedule function of a task pinned to worker `w`: after shutdown it
/// is buried, as every task is ([`handoff::admit`]); else it goes back to
/// `w`'s pinned queue.
fn schedule_pinned(shared: &Shared, w: usize, r: Runnable) {
    let Some(r) = handoff::admit(shared, r) else {
        return;
    };
    push_pinned(shared, w, r, false);
}

/// Puts `r` in worker `w`'s pinned queue (`locals`, with `local`): from
/// `w` itself while it runs (its core free and not asleep in the driver),
/// a push alone, since `w` looks at the queue before it waits; from
/// anywhere else a delivery with the notify that `w`'s wait cannot sleep
/// through (park.rs, "Pinned tasks").
fn push_pinned(shared: &Shared, w: usize, r: Runnable, local: bool) {
    let m = &shared.workers[w].mailbox;
    let (own, from) = with_core(shared, |c| match c {
        Some((i, Some(core))) => (i == w && core.suspended.is_none(), Some(i)),
        Some((i, None)) => (false, Some(i)),
        None => (false, None),
    });
    if own {
        m.push_pinned(r, local);
        return;
    }
    let n = if local {
        m.deliver_local(r)
    } else {
        m.deliver_pinned_or_drain(r, &shared.shutdown, |t| shared.bury(t))
    };
    if n == Notified::Unparked {
        bump_for(shared, from, |s| &s.unparks);
    }
}

thread_local! {
    /// This worker thread's live local tasks (`spawn_local`): a waker of
    /// each, by key, removed when the task's future is dropped (always on
    /// this thread). The worker wakes them at shutdown so that their
    /// futures come back here to be dropped ([`drop_local_tasks`]).
    static LOCAL_TASKS: RefCell<LocalTasks> = RefCell::new(LocalTasks::default());
}

#[derive(Default)]
struct LocalTasks {
    next: u64,
    live: std::collections::HashMap<u64, std::task::Waker>,
}

/// A local task's future: takes its entry out of [`LOCAL_TASKS`] when
/// dropped.
struct LocalFuture<F> {
    inner: F,
    key: u64,
}

impl<F: Future> Future for LocalFuture<F> {
    type Output = F::Output;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        // SAFETY: `inner` is structurally pinned: never moved out of
        // `self`, dropped in place.
        unsafe { self.map_unchecked_mut(|s| &mut s.inner) }.poll(cx)
    }
}

impl<F> Drop for LocalFuture<F> {
    fn drop(&mut self) {
        let key = self.key;
        // The waker is dropped after the borrow ends (its drop runs no
        // user code, but keep the borrow short all the same).
        let w = LOCAL_TASKS
            .try_with(|l| l.borrow_mut().live.remove(&key))
            .ok()
            .flatten();
        drop(w);
    }
}

/// Spawns the `!Send` `future` on worker `w`, the calling thread's: its
/// schedule function sends it to `w`'s `locals` queue at every wake (from
/// any thread), which only `w` takes from and drops from, also at
/// shutdown ([`drop_local_tasks`]). Async-task checks the thread at every
/// poll and drop of the future.
pub(crate) fn spawn_local<F>(shared: &Arc<Shared>, w: usize, future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    debug_assert_eq!(current_worker(shared), Some(w));
    let key = LOCAL_TASKS.with(|l| {
        let mut l = l.borrow_mut();
        l.next += 1;
        l.next
    });
    let this = shared;
    let shared = this.clone();
    let registry: *const Registry = &this.registry;
    let (runnable, task) = async_task::Builder::new()
        .metadata(TaskMeta::new())
        .spawn_local(
            move |meta: &TaskMeta| {
                // SAFETY: as in `spawn`: the registry lives in `Shared`,
                // which the schedule function of this task keeps alive.
                TaskFuture::new(LocalFuture { inner: future, key }, meta, unsafe {
                    &*registry
                })
            },
            move |r: Runnable| push_pinned(&shared, w, r, true),
        );
    let handle = JoinHandle::new(task, &this.registry, runnable.waker());
    LOCAL_TASKS.with(|l| l.borrow_mut().live.insert(key, runnable.waker()));
    WorkerCounters::bump(&this.workers[w].stats.spawned, 1);
    if this.is_shutdown() {
        // On its own thread: dropped here (its handle says Cancelled).
        drop_task(runnable);
        return handle;
    }
    push_pinned(this, w, runnable, true);
    handle
}

/// The worker's last duty at shutdown: every live local task of this
/// thread is woken, and each comes to this worker's `locals` queue, where
/// it is dropped, here; until none is left (a wake made by another thread
/// just before may still be on its way: its notify ends the park).
fn drop_local_tasks(shared: &Shared, index: usize) {
    let m = &shared.workers[index].mailbox;
    loop {
        m.parker.prepare();
        while let Some(r) = m.take_local() {
            drop_task(r);
        }
        let wakers: Vec<std::task::Waker> =
            LOCAL_TASKS.with(|l| l.borrow().live.values().cloned().collect());
        if wakers.is_empty() {
            return;
        }
        for wk in wakers {
            wk.wake();
        }
        while let Some(r) = m.take_local() {
            drop_task(r);
        }
        if LOCAL_TASKS.with(|l| l.borrow().live.is_empty()) {
            return;
        }
        m.parker.park();
    }
}

/// Runs `f` on the blocking pool (see [`crate::spawn_blocking`]): a task
/// polled once by a pool thread, so its `JoinHandle` (output, panics,
/// cancellation at shutdown) is a task's like any other.
pub(crate) fn spawn_blocking<F, R>(shared: &Arc<Shared>, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let here = current_worker(shared);
    let mask = match here {
        Some(w) if !shared.blocking_mask_of.is_empty() => Some(shared.blocking_mask_of[w]),
        _ => None,
    };
    let s = shared.clone();
    let registry: *const Registry = &shared.registry;
    let (runnable, task) = async_task::Builder::new().metadata(TaskMeta::new()).spawn(
        move |meta: &TaskMeta| {
            // SAFETY: as in `spawn`: the registry lives in `Shared`, which
            // the schedule function of this task keeps alive.
            TaskFuture::new(async move { f() }, meta, unsafe { &*registry })
        },
        // Runs once, from the `schedule` call below, never inside a waker
        // call: the future never returns `Pending`, so nothing wakes the
        // task (it registers no waker, so `abort` wakes nothing either).
        // So a pool that is shut down may drop the task right here (`push`
        // does), rather than bury it for the shutdown's last reap, which
        // comes after the wait for the running closures: one of them
        // waiting on this task would wait forever.
        move |r: Runnable| s.blocking.push(r, mask),
    );
    let handle = JoinHandle::new(task, &shared.registry, runnable.waker());
    match here {
        Some(w) => WorkerCounters::bump(&shared.workers[w].stats.spawned, 1),
        None => WorkerCounters::bump_shared(&shared.external.spawned, 1),
    }
    if shared.is_shutdown() {
        // Shut down: cancelled at once, as `spawn` does. A call that misses
        // the flag reaches the pool before or after `Runtime::shutdown`
        // closes it: it is queued and then cancelled by the close (or run,
        // if a thread takes it first), or dropped by `push`.
        drop_task(runnable);
        return handle;
    }
    runnable.schedule();
    handle
}

/// The spans around worker `w`, nearest first (its levels), ending with
/// every worker: the policy's [`near_spans`](crate::spans::near_spans).
#[inline]
pub(crate) fn near_spans(
    shared: &Shared,
    w: usize,
) -> impl Iterator<Item = &std::ops::Range<usize>> + Clone {
    crate::spans::near_spans(shared.topology.levels(w), &shared.all)
}

/// Where a parked worker is woken to search near worker `w`: on a hybrid
/// machine, the most capable workers of `w`'s LLC first, then
/// [`near_spans`]; the policy's [`wake_spans`](crate::spans::wake_spans).
#[inline]
pub(crate) fn wake_spans(
    shared: &Shared,
    w: usize,
) -> impl Iterator<Item = &std::ops::Range<usize>> + Clone {
    crate::spans::wake_spans(
        &shared.capable[shared.workers[w].llc_hint],
        shared.topology.levels(w),
        &shared.all,
    )
}

/// The runtime as the pusher's steps see it ([`handoff`]).
impl Workers<Runnable> for Shared {
    #[inline]
    fn sleepers(&self) -> &crate::idle::Sleepers {
        &self.idle
    }
    #[inline]
    fn mailbox(&self, w: usize) -> &Mailbox<Runnable> {
        &self.workers[w].mailbox
    }
    #[inline]
    fn wake_spans(&self, near: usize) -> impl Iterator<Item = &std::ops::Range<usize>> + Clone {
        wake_spans(self, near)
    }
    #[inline]
    fn shutdown(&self) -> &crate::sync::AtomicBool {
        &self.shutdown
    }
    #[inline]
    fn bury(&self, r: Runnable) {
        Shared::bury(self, r);
    }
}

fn bump_for(
    shared: &Shared,
    from: Option<usize>,
    c: fn(&WorkerCounters) -> &crate::sync::AtomicU64,
) {
    match from {
        Some(w) => WorkerCounters::bump(c(&shared.workers[w].stats), 1),
        None => WorkerCounters::bump_shared(c(&shared.external), 1),
    }
}

/// Counts a wake made by the pusher's check ([`handoff::notify_parked`]'s
/// result) for the caller's worker `from`.
#[inline]
pub(crate) fn count_wake(shared: &Shared, from: Option<usize>, woke: Option<(usize, Notified)>) {
    let Some((_, n)) = woke else { return };
    bump_for(shared, from, |s| &s.searcher_wakes);
    if n == Notified::Unparked {
        bump_for(shared, from, |s| &s.unparks);
    }
}

/// Delivers `r` to worker `to`'s inbox from anywhere (`from`: the caller's
/// worker, if any): [`handoff::deliver`], counted.
#[inline]
pub(crate) fn deliver(shared: &Shared, from: Option<usize>, to: usize, r: Runnable) {
    count_delivery(shared, from, handoff::deliver(shared, to, r));
}

/// Counts what a [`handoff::deliver`] did, for the caller's worker `from`.
#[inline]
pub(crate) fn count_delivery(shared: &Shared, from: Option<usize>, d: Delivery) {
    match d {
        Delivery::Unparked => bump_for(shared, from, |s| &s.unparks),
        Delivery::Queued(woke) => count_wake(shared, from, woke),
    }
}

/// Delivers `r` to worker `w`, just claimed from the parked set as the one
/// wake in flight: [`handoff::deliver_to_woken`], counted.
pub(crate) fn deliver_to_woken(shared: &Shared, from: Option<usize>, w: usize, r: Runnable) {
    if handoff::deliver_to_woken(shared, w, r) == Notified::Unparked {
        bump_for(shared, from, |s| &s.unparks);
    }
}

impl Core {
    fn new(shared: &Shared, index: usize, local: Local<Runnable>) -> Self {
        let t = &shared.tunables;
        let levels = shared.topology.levels(index).len();
        Core {
            index,
            llc: shared.topology.llc_span(index),
            llc_word: shared.idle.idle.word_of(&shared.topology.llc_span(index)),
            local,
            lifo: None,
            lifo_streak: 0,
            tick: 0,
            running: true,
            publisher: crate::load::Publisher::new(),
            ops_since_publish: 0,
            balance: BalanceState::new(levels, t.migration_cost.as_nanos() as u64),
            avg_scan_cost_ns: 0,
            wakes: 0,
            governor: Governor::new(
                t.idle,
                std::time::Duration::from_nanos(shared.park_cost_ns.load(Ordering::Relaxed)),
                t.spin_cap_percent,
            ),
            rng: 0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
            last_victim: None,
            searching: false,
            queued_bit: false,
            wake_mode: WakeMode::Place,
            batch: 0,
            batch_q: std::collections::VecDeque::new(),
            batch_since: 0,
            suspended: None,
        }
    }

    /// Called after a wake made by the I/O driver while this worker sleeps
    /// in it: if the task landed on this worker (its LIFO slot or deque), the
    /// worker leaves the `parked` set now, as a waker that claims a parked
    /// worker does (`Sleepers::leave_parked`: counted awake, then its bit), and
    /// notifies its own parker, which ends its sleep when the worker polls
    /// its park again (no eventfd write or futex wake: the worker took its
    /// waker out of the slot when `epoll_wait` returned). Out of the parked
    /// set and the idle mask, it is not chosen by other wakes meanwhile.
    pub(crate) fn wake_self_in_driver(&mut self, shared: &Shared) {
        let Some(s) = self.suspended.as_mut() else {
            return;
        };
        if s.left_parked.is_some()
            || (self.lifo.is_none() && self.local.is_empty() && self.batch_q.is_empty())
        {
            return;
        }
        s.left_parked = Some(shared.idle.leave_parked(self.index));
        shared.idle.idle.remove(self.index, Ordering::Relaxed);
        // Step 5 of the hand-off (io/handoff.rs, loom: driver.rs). Only a
        // worker sleeping in the driver gets here (`suspended`), so only
        // with the `io` feature.
        #[cfg(feature = "io")]
        let _ = crate::io::handoff::wake_self(&shared.workers[self.index].mailbox.parker);
        #[cfg(not(feature = "io"))]
        let _ = shared.workers[self.index].mailbox.parker.notify();
    }

    /// A small xorshift generator for random steal starts.
    pub(crate) fn rand(&mut self, n: usize) -> usize {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        (x % n.max(1) as u64) as usize
    }

    /// The next task from this worker's own sources.
    fn next_local(&mut self, shared: &Shared) -> Option<Runnable> {
        self.tick = self.tick.wrapping_add(1);
        let me = &shared.workers[self.index];
        if !self.batch_q.is_empty()
            && shared.now_ns().saturating_sub(self.batch_since)
                > shared.tunables.migration_cost.as_nanos() as u64
        {
            self.spill_batch(shared);
        }
        if self.tick % INBOX_CHECK_INTERVAL == 0 {
            // Tasks placed on this worker first: nobody else can run them.
            if let Some(r) = me.mailbox.take_pinned() {
                return Some(r);
            }
            if let Some(r) = me.mailbox.take(&self.local) {
                WorkerCounters::bump(&me.stats.inbox_pulls, 1);
                return Some(r);
            }
        }
        if let Some(r) = self.lifo.take() {
            if self.lifo_streak < MAX_LIFO_POLLS {
                self.lifo_streak += 1;
                WorkerCounters::bump(&me.stats.lifo_polls, 1);
                return Some(r);
            }
            // Out of LIFO turns: to the back of the deque, where it is
            // stealable (so the pusher's check runs).
            self.push_local(shared, r);
        }
        self.lifo_streak = 0;
        if let Some(r) = self.local.pop() {
            return Some(r);
        }
        if let Some(r) = self.batch_q.pop_front() {
            return Some(r);
        }
        if let Some(r) = me.mailbox.take_pinned() {
            return Some(r);
        }
        let r = me.mailbox.take(&self.local)?;
        WorkerCounters::bump(&me.stats.inbox_pulls, 1);
        Some(r)
    }
    /// This worker's load contribution now.
    fn contribution(&self, shared: &Shared) -> Contribution {
        let queued = self.local.len()
            + self.batch_q.len()
            + usize::from(self.lifo.is_some())
            + shared.workers[self.index].mailbox.inbox.len();
        Contribution {
            running: u32::from(self.running),
            queued: queued as u32,
        }
    }

    /// Publishes the load contribution if the rate limit allows (or always,
    /// with `force`).
    pub(crate) fn publish_load(&mut self, shared: &Shared, force: bool) {
        self.ops_since_publish = 0;
        let cur = self.contribution(shared);
        let now = shared.now_ns();
        let interval = shared.tunables.load_update_interval.as_nanos() as u64;
        let st = &shared.workers[self.index].stats;
        match self.publisher.decide(now, cur, interval, force) {
            Publish::Unchanged => {}
            Publish::HeldByInterval => WorkerCounters::bump(&st.load_skipped_interval, 1),
            Publish::HeldByDelta => WorkerCounters::bump(&st.load_skipped_delta, 1),
            Publish::Now { running, queued } => {
                let n = shared.load.publish(self.index, running, queued);
                WorkerCounters::bump(&st.load_publishes, n as u64);
            }
        }
    }

    #[inline]
    fn maybe_publish(&mut self, shared: &Shared) {
        self.ops_since_publish += 1;
        if self.ops_since_publish >= PUBLISH_CHECK_EVERY {
            self.publish_load(shared, false);
        }
    }

    /// Pushes onto the local deque, where other workers may steal it: marks
    /// this worker in the `queued` set (once per busy period) and runs the
    /// pusher's check of the wake protocol ([`idle`](crate::idle)): a parked
    /// worker is woken to search if nobody searches.
    pub(crate) fn push_local(&mut self, shared: &Shared, r: Runnable) {
        let woke = handoff::push_local(shared, self.index, &self.local, &mut self.queued_bit, r);
        count_wake(shared, Some(self.index), woke);
        self.maybe_publish(shared);
    }

    /// A wake of the I/O driver's batch (io/mod.rs): the LIFO slot, the
    /// previous occupant to the batch queue, which is private to this
    /// worker (up to [`BATCH_LOCAL`] tasks; beyond, the stealable deque),
    /// without the pusher's check: the batch makes one decision when it
    /// ends ([`Core::end_batch`]). A poller batch is the readiness of
    /// connections this worker served a moment ago: run here, their tasks
    /// find their state in its caches, and no other worker is woken to take
    /// a share it would spend on the wake and on cold caches. (tokio puts
    /// the batch in its stealable queue; on the 2-core machine a second
    /// worker then stole a third of all requests, and two workers served
    /// 0.63-0.70 of tokio's requests; kept private, 0.94-1.05: BENCHMARKS.md.)
    /// The private part stays private only while it is cache-hot:
    /// [`Core::next_local`] moves what is left of it to the deque, with the
    /// pusher's check, once it has waited the runtime's `migration_cost`
    /// (the kernel's `sysctl_sched_migration_cost`, 500 us by default).
    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    pub(crate) fn push_batch(&mut self, r: Runnable) {
        self.batch += 1;
        if let Some(prev) = self.lifo.replace(r) {
            if self.batch_q.len() < BATCH_LOCAL {
                self.batch_q.push_back(prev);
            } else {
                self.local.push(prev);
            }
        }
    }

    /// Moves the private batch to the stealable deque (it waited longer
    /// than `migration_cost`), with the pusher's check: from now on any
    /// worker may take it, and a parked one is woken to if nobody searches.
    fn spill_batch(&mut self, shared: &Shared) {
        let n = self.batch_q.len();
        while let Some(r) = self.batch_q.pop_front() {
            self.local.push(r);
        }
        WorkerCounters::bump(&shared.workers[self.index].stats.batch_spilled, n as u64);
        let woke = handoff::after_push(shared, self.index, &mut self.queued_bit);
        count_wake(shared, Some(self.index), woke);
    }

    /// The end of a batch: if it left work in the stealable deque (the batch
    /// overflowed its private queue, or the deque held work already), the
    /// pusher's check runs once (the queued bit, and
    /// a parked worker woken to search if nobody searches: tokio's
    /// `should_notify_others`).
    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    pub(crate) fn end_batch(&mut self, shared: &Shared) {
        if self.batch == 0 {
            return;
        }
        self.batch = 0;
        if !self.batch_q.is_empty() {
            self.batch_since = shared.now_ns();
        }
        let st = &shared.workers[self.index].stats;
        WorkerCounters::bump(&st.driver_batches, 1);
        if !self.local.is_empty() {
            let woke = handoff::after_push(shared, self.index, &mut self.queued_bit);
            if woke.is_some() {
                WorkerCounters::bump(&st.batch_wakes, 1);
            }
            count_wake(shared, Some(self.index), woke);
        }
    }

    /// Puts a woken task in the LIFO slot; the previous occupant moves to
    /// the deque.
    #[inline]
    pub(crate) fn push_lifo(&mut self, shared: &Shared, r: Runnable) {
        if let Some(prev) = self.lifo.replace(r) {
            self.push_local(shared, prev);
        }
    }
}

/// Whether worker `v` has stealable work now.
fn has_work(shared: &Shared, v: usize) -> bool {
    let ws = &shared.workers[v];
    !ws.stealer.is_empty() || !ws.mailbox.inbox.is_empty()
}

/// The re-check of the last searcher leaving, or of a worker parking with
/// no searcher left (idle.rs, steps 2 and 3): a worker other than `me`
/// whose queue holds work, found through the `queued` set nearest first.
/// Call after the fence of `leave_searching` / `to_parked`.
fn find_queued_work(shared: &Shared, me: usize) -> Option<usize> {
    let st = &shared.workers[me].stats;
    let mut touched = 0u64;
    let mut words = 0u64;
    let mut found = None;
    for span in near_spans(shared, me) {
        let (f, n) = shared.idle.find_queued(span, me, |v| {
            touched += 1;
            has_work(shared, v)
        });
        words += n as u64;
        if f.is_some() {
            found = f;
            break;
        }
    }
    WorkerCounters::bump(&st.recheck_words, words);
    WorkerCounters::bump(&st.walk_touched, touched);
    found
}
/// Returns the task and how many tasks moved.
pub(crate) fn steal_from(
    shared: &Shared,
    core: &mut Core,
    victim: usize,
) -> Option<(Runnable, usize)> {
    let st = &shared.workers[core.index].stats;
    let v = &shared.workers[victim];
    for from_inbox in [false, true] {
        WorkerCounters::bump(&st.steals_attempted, 1);
        let before = core.local.len();
        let res = loop {
            let s = if from_inbox {
                v.mailbox.inbox.steal_batch_and_pop(&core.local)
            } else {
                v.stealer.steal_batch_and_pop(&core.local)
            };
            match s {
                Steal::Retry => continue,
                other => break other,
            }
        };
        if let Steal::Success(r) = res {
            core.last_victim = Some(victim);
            let moved = 1 + core.local.len().saturating_sub(before);
            WorkerCounters::bump(&st.steals_succeeded, 1);
            WorkerCounters::bump(&st.tasks_stolen, moved as u64);
            return Some((r, moved));
        }
    }
    None
}

/// Steals from the busiest other group of `level` (see balance.rs).
fn steal_from_level(
    shared: &Shared,
    core: &mut Core,
    level: usize,
    searched: &crate::topology::Span,
) -> Option<(Runnable, usize)> {
    let lvl = &shared.topology.levels(core.index)[level];
    let st = &shared.workers[core.index].stats;
    let start = core.rand(lvl.groups.len());
    let mut best =
        crate::balance::busiest_group(&lvl.groups, searched, start, |g| shared.load.load(g));
    if best.is_none() {
        // The counters show nothing queued here, but they lag (and a worker
        // stuck in a long poll never publishes): the `queued` set is exact
        // enough to find such a queue. Read its words for the level's other
        // groups, nearest group first.
        let mut words = 0u64;
        best = lvl
            .groups
            .iter()
            .filter(|g| !searched.is_subset(g))
            .find(|g| {
                g.runs().iter().any(|run| {
                    let (any, n) = shared
                        .idle
                        .queued
                        .any(run, Ordering::Relaxed, Some(core.index));
                    words += n as u64;
                    any
                })
            });
        WorkerCounters::bump(&st.recheck_words, words);
    }
    let group = best?;
    // Within the group, only members of the `queued` set (a word per 64
    // workers), from a random member on (wrapping): the summary before the
    // members. A group is one run of workers except on the kernel's
    // overlapping NUMA levels.
    let runs = group.runs();
    let (mut k, mut off) = (0, core.rand(group.len()));
    while off >= runs[k].len() {
        off -= runs[k].len();
        k += 1;
    }
    let off = runs[k].start + off;
    let me = core.index;
    let mut touched = 0u64;
    let mut found = None;
    let parts = std::iter::once(off..runs[k].end)
        .chain(runs[k + 1..].iter().cloned())
        .chain(runs[..k].iter().cloned())
        .chain(std::iter::once(runs[k].start..off));
    for part in parts {
        let (_, words) = shared.idle.find_queued(&part, me, |v| {
            touched += 1;
            found = steal_from(shared, core, v);
            found.is_some()
        });
        WorkerCounters::bump(&st.recheck_words, words as u64);
        if found.is_some() {
            break;
        }
    }
    WorkerCounters::bump(&st.walk_touched, touched);
    found
}

/// The idle walk; see balance.rs.
fn walk(
    shared: &Shared,
    core: &mut Core,
    kicked_by: Option<usize>,
    bounded: bool,
) -> Option<Runnable> {
    let st = &shared.workers[core.index].stats;
    WorkerCounters::bump(&st.walks, 1);
    if let Some(k) = kicked_by {
        WorkerCounters::bump(&st.woken_searching, 1);
        if k != core.index {
            WorkerCounters::bump(&st.walk_touched, 1);
            if let Some((r, _)) = steal_from(shared, core, k) {
                return Some(r);
            }
        }
    }
    // The counters are up to one interval stale: retry the last victim
    // first, which is cheap (two reads when it is empty) and the likeliest
    // to have more (a steal takes at most a batch of 32).
    if let Some(v) = core.last_victim.take() {
        if v != core.index && has_work(shared, v) {
            WorkerCounters::bump(&st.walk_touched, 1);
            if let Some((r, _)) = steal_from(shared, core, v) {
                return Some(r);
            }
        }
    }
    let n = shared.workers.len();
    if shared.tunables.walk == StealWalk::Unbounded {
        let start = core.rand(n);
        for i in 0..n {
            let v = (start + i) % n;
            if v != core.index {
                WorkerCounters::bump(&st.walk_touched, 1);
                if let Some((r, _)) = steal_from(shared, core, v) {
                    return Some(r);
                }
            }
        }
        return None;
    }
    // The gate (the kernel's rd->overload): nothing queued anywhere, by the
    // counters and by the `queued` set.
    if !shared.load.overloaded() {
        let (any, words) = shared
            .idle
            .queued
            .any(&shared.all, Ordering::Relaxed, Some(core.index));
        WorkerCounters::bump(&st.recheck_words, words as u64);
        if !any {
            WorkerCounters::bump(&st.walks_skipped, 1);
            return None;
        }
    }
    let me = core.index;
    let mut searched = crate::topology::Span::single(me);
    let mut balance = std::mem::replace(&mut core.balance, BalanceState::new(0, 1));
    let out = balance.walk_with(
        bounded,
        || shared.now_ns(),
        |i| {
            let found = steal_from_level(shared, core, i, &searched);
            searched = shared.topology.levels(me)[i].span.clone();
            found
        },
    );
    core.balance = balance;
    for &i in &out.tried {
        WorkerCounters::bump(&st.walk_tried[stat_slot(i)], 1);
    }
    if let Some(i) = out.cut_at {
        WorkerCounters::bump(&st.walk_cut[stat_slot(i)], 1);
    }
    for (i, l) in core.balance.levels.iter().enumerate().take(MAX_LEVELS) {
        WorkerCounters::set(&st.max_cost_ns[i], l.max_ns);
    }
    let (level, (r, moved)) = out.found?;
    WorkerCounters::bump(&st.walk_success[stat_slot(level)], 1);
    WorkerCounters::bump(&st.walk_moved[stat_slot(level)], moved as u64);
    Some(r)
}

/// The per-level counter slot of level `i`: levels past [`MAX_LEVELS`]
/// (a machine with more NUMA distances than that) count in the last slot.
#[inline]
fn stat_slot(i: usize) -> usize {
    i.min(MAX_LEVELS - 1)
}

/// Marks the worker idle and sets its LLC's idle-core hint when its whole
/// core is idle (read before write).
fn enter_idle(shared: &Shared, core: &mut Core) {
    core.running = false;
    let idle = &shared.idle.idle;
    // Relaxed: a placement hint (see idle.rs).
    idle.insert(core.index, Ordering::Relaxed);
    if shared.tunables.sis_idle_core {
        let cs = shared.topology.core_span(core.index);
        if cs.clone().all(|w| idle.contains(w)) {
            let hint = &shared.llc_idle_cores[shared.workers[core.index].llc_hint];
            if !hint.load(Ordering::Relaxed) {
                hint.store(true, Ordering::Relaxed);
            }
        }
    }
    core.publish_load(shared, false);
}

/// Leaves the idle state. `idle_since` is when the walk first failed (the
/// kernel's `rq->idle_stamp`); `slept` says whether the worker parked, in
/// which case the park's own wake-up latency is taken out of the sample:
/// it is a cost of the state chosen, not idleness of the workload (the teo
/// governor measures sleep length the same way), and leaving it in would
/// keep the prediction above the park cost forever once parking starts.
fn exit_idle(shared: &Shared, core: &mut Core, idle_since: Option<u64>, slept: bool) {
    core.running = true;
    shared.idle.idle.remove(core.index, Ordering::Relaxed);
    if let Some(t0) = idle_since {
        let now = shared.now_ns();
        let mut sample = now.saturating_sub(t0);
        if slept {
            sample = sample.saturating_sub(shared.park_cost_ns.load(Ordering::Relaxed));
        }
        core.balance.record_idle(sample);
        WorkerCounters::set(
            &shared.workers[core.index].stats.avg_idle_ns,
            core.balance.avg_idle_ns,
        );
    }
    core.publish_load(shared, false);
}

pub(crate) use crate::idle_worker::{Idle, Suspended as SuspendedIdle};

/// The worker as the idle sequence ([`idle_worker`](crate::idle_worker))
/// sees it: its core, with the runtime's policy (the walk, the governor's
/// spin, load publishing) and counters around the protocol's steps.
struct IdleCore<'a> {
    shared: &'a Shared,
    core: &'a mut Core,
}

impl crate::idle_worker::Queues<Runnable> for Shared {
    #[inline]
    fn has_work(&self, v: usize) -> bool {
        has_work(self, v)
    }
    #[inline]
    fn find_queued_work(&self, me: usize) -> Option<usize> {
        find_queued_work(self, me)
    }
    #[inline]
    fn count_wake(&self, me: usize, woke: Option<(usize, Notified)>) {
        count_wake(self, Some(me), woke);
    }
}

impl crate::idle_worker::IdleWorker<Runnable> for IdleCore<'_> {
    fn index(&self) -> usize {
        self.core.index
    }

    fn parts(&mut self) -> (&Local<Runnable>, &mut bool, &mut bool) {
        let c = &mut *self.core;
        (&c.local, &mut c.searching, &mut c.queued_bit)
    }

    fn walk(&mut self, kicked_by: Option<usize>) -> Option<Runnable> {
        walk(self.shared, self.core, kicked_by, true)
    }

    fn steal_from(&mut self, v: usize) -> Option<Runnable> {
        steal_from(self.shared, self.core, v).map(|(r, _)| r)
    }

    fn take_own(&mut self) -> Option<Runnable> {
        let c = &mut *self.core;
        c.lifo
            .take()
            .or_else(|| c.local.pop())
            .or_else(|| c.batch_q.pop_front())
    }

    fn wait(
        &mut self,
        before_sleep: impl FnOnce() -> bool,
        sleep: impl FnOnce(&crate::park::Parker) -> std::task::Poll<bool>,
    ) -> Wait<Runnable> {
        let shared = self.shared;
        let me = &shared.workers[self.core.index];
        let now = shared.now_ns();
        let choice = self
            .core
            .governor
            .choose(now, self.core.balance.avg_idle_ns);
        let st = &me.stats;
        let mut spin_end = None;
        if let Choice::Spin { until_ns } = choice {
            WorkerCounters::bump(&st.spins, 1);
            spin_end = Some(until_ns);
        }
        let spin_start = now;
        let mut spun_ns = 0u64;
        let mut spin_expired = false;
        let index = self.core.index;
        let Core {
            local, publisher, ..
        } = &mut *self.core;
        let res = me.mailbox.wait_with(
            local,
            &shared.shutdown,
            || {
                let Some(end) = spin_end else { return false };
                let t = shared.now_ns();
                spun_ns = t.saturating_sub(spin_start);
                if t >= end {
                    spin_expired = true;
                    spin_end = None;
                    return false;
                }
                true
            },
            || {
                // About to sleep: publish whatever is held back, now, so the
                // counters show this worker idle while it sleeps (a publish
                // after waking up would leave them stale for the whole sleep;
                // the loom model of load publishing caught that).
                let queued = local.len() + me.mailbox.inbox.len();
                let cur = Contribution {
                    running: 0,
                    queued: queued as u32,
                };
                let interval = shared.tunables.load_update_interval.as_nanos() as u64;
                if let Publish::Now { running, queued } =
                    publisher.decide(shared.now_ns(), cur, interval, true)
                {
                    let n = shared.load.publish(index, running, queued);
                    WorkerCounters::bump(&st.load_publishes, n as u64);
                }
                before_sleep()
            },
            sleep,
        );
        if matches!(choice, Choice::Spin { .. }) {
            self.core.governor.record_spin(spun_ns);
            WorkerCounters::bump(&st.spin_ns, spun_ns);
            if spin_expired {
                WorkerCounters::bump(&st.spin_gave_up, 1);
            } else {
                WorkerCounters::bump(&st.spin_hits, 1);
                WorkerCounters::bump(&st.spin_hit_ns, spun_ns);
            }
        }
        res
    }

    fn resume(
        &mut self,
        sleep: impl FnOnce(&crate::park::Parker) -> std::task::Poll<bool>,
    ) -> Wait<Runnable> {
        let me = &self.shared.workers[self.core.index];
        me.mailbox
            .resume(&self.core.local, &self.shared.shutdown, sleep)
    }

    fn suspended(&mut self) -> &mut Option<SuspendedIdle> {
        &mut self.core.suspended
    }

    fn enter_idle(&mut self) {
        enter_idle(self.shared, self.core);
    }

    fn begin_pass(&mut self) {
        // A placement may have claimed this worker (marked it not idle) for
        // a delivery that another worker's steal then took: still idle, say
        // so again, or wakeups would stop choosing it.
        self.shared
            .idle
            .idle
            .insert(self.core.index, Ordering::Relaxed);
    }

    fn exit_idle(&mut self, idle_since: Option<u64>, slept: bool) {
        exit_idle(self.shared, self.core, idle_since, slept);
    }

    fn now(&self) -> u64 {
        self.shared.now_ns()
    }

    fn count(&mut self, e: crate::idle_worker::Event) {
        use crate::idle_worker::Event;
        let st = &self.shared.workers[self.core.index].stats;
        let c = match e {
            Event::Slept => &st.parks,
            Event::InboxPull => &st.inbox_pulls,
            Event::ParkRecheck => &st.park_rechecks,
            Event::PendingSteal => &st.walk_touched,
        };
        WorkerCounters::bump(c, 1);
    }
}

/// The idle path: the idle sequence of [`idle_worker`](crate::idle_worker)
/// over this worker's core. `sleep` parks the worker: on its condvar
/// (`Ready(slept)`), or, for a worker that sleeps in the I/O driver,
/// [`Parker::poll_park`](crate::park::Parker::poll_park) with the poller's
/// or its thread's waker; then this returns [`Idle::Suspended`], and the
/// next call goes on with the period where it stopped.
fn idle(
    shared: &Shared,
    core: &mut Core,
    sleep: impl FnMut(&crate::park::Parker) -> std::task::Poll<bool>,
) -> Idle<Runnable> {
    crate::idle_worker::idle(shared, &mut IdleCore { shared, core }, sleep)
}

/// Polls one task.
fn run_task(ctx: &WorkerCtx, r: Runnable) {
    let shared = &*ctx.shared;
    let meta = r.metadata();
    // Relaxed is enough (TaskMeta::is_aborted says why: a stale `false`
    // costs one more poll, whose `Pending` re-checks the flag).
    if meta.is_aborted() {
        drop_task(r);
        return;
    }
    if meta.last_worker.load(Ordering::Relaxed) != ctx.index {
        meta.last_worker.store(ctx.index, Ordering::Relaxed);
    }
    let st = &shared.workers[ctx.index].stats;
    WorkerCounters::bump(&st.polls, 1);
    // The task wrapper catches panics in poll and drop; this catches what
    // async-task itself might raise, so nothing unwinds into the loop.
    #[cfg(feature = "io")]
    let res = catch_unwind(AssertUnwindSafe(|| crate::io::coop::budget(|| r.run())));
    #[cfg(not(feature = "io"))]
    let res = catch_unwind(AssertUnwindSafe(|| r.run()));
    if let Err(p) = res {
        WorkerCounters::bump(&st.panics, 1);
        // The payload may panic when dropped, too.
        crate::task::discard(p);
    }
}

/// What one [`step`] of a worker's loop did.
pub(crate) enum Step {
    /// Ran a task.
    Ran,
    /// Went to sleep in the I/O driver ([`Idle::Suspended`]).
    Suspended,
    /// The runtime shuts down: leave the loop.
    Shutdown,
}

/// One step of a worker's loop: the next task (or the idle period that
/// ends with one), run. `sleep` is how the worker parks: see [`idle`].
pub(crate) fn step(
    ctx: &WorkerCtx,
    sleep: impl FnMut(&crate::park::Parker) -> std::task::Poll<bool>,
) -> Step {
    let shared = &*ctx.shared;
    let next = {
        let mut core = ctx.core.borrow_mut();
        if core.suspended.is_some() {
            // Called again after sleeping in the driver: the idle period
            // goes on (and sees shutdown there).
            idle(shared, &mut core, sleep)
        } else if shared.is_shutdown() {
            Idle::Shutdown
        } else {
            match core.next_local(shared) {
                Some(r) => {
                    core.maybe_publish(shared);
                    Idle::Run(r)
                }
                None => idle(shared, &mut core, sleep),
            }
        }
    };
    match next {
        Idle::Run(r) => {
            run_task(ctx, r);
            Step::Ran
        }
        Idle::Suspended => Step::Suspended,
        Idle::Shutdown => Step::Shutdown,
    }
}

/// The loop of a worker, until shutdown. Without an I/O driver it parks
/// on its condvar; once the driver exists it sleeps through [`Driven`].
fn run_loop(ctx: &WorkerCtx) {
    #[cfg(feature = "io")]
    let mut driven = Driven::new(ctx);
    loop {
        #[cfg(feature = "io")]
        let s = step(ctx, |p| driven.sleep(p));
        #[cfg(not(feature = "io"))]
        let s = step(ctx, |p| std::task::Poll::Ready(p.park()));
        match s {
            Step::Ran => {
                #[cfg(feature = "io")]
                driven.after_task(ctx);
            }
            Step::Suspended => {
                #[cfg(feature = "io")]
                driven.wait(ctx);
                #[cfg(not(feature = "io"))]
                unreachable!("a condvar park does not suspend");
            }
            Step::Shutdown => return,
        }
    }
}

/// How a worker sleeps and looks at the I/O driver (io/mod.rs): in a
/// poller it holds, or on its thread (the steps of
/// [`io::handoff`](crate::io::handoff), which the loom models of
/// `loom-tests/tests/driver.rs` drive); and, busy, every
/// [`EVENT_INTERVAL`](crate::io::EVENT_INTERVAL) tasks without blocking.
#[cfg(feature = "io")]
struct Driven<'a> {
    shared: &'a Shared,
    index: usize,
    /// The poller this worker holds while it sleeps in it, and the sleep of
    /// its thread when every poller is taken.
    sleep: crate::io::handoff::PollerSleep<'a, crate::io::Poller, crate::io::handoff::ThreadPark>,
    tasks: u32,
}

#[cfg(feature = "io")]
impl<'a> Driven<'a> {
    fn new(ctx: &'a WorkerCtx) -> Self {
        Driven {
            shared: &ctx.shared,
            index: ctx.index,
            sleep: crate::io::handoff::PollerSleep::new(crate::io::handoff::ThreadPark::current()),
            tasks: 0,
        }
    }

    /// Step 4 of the park protocol: on the condvar while no driver exists;
    /// else `PARKED` with the waker of a poller this worker takes (its own
    /// first), or of its thread when every poller is taken. `Pending`
    /// suspends the idle period; [`wait`](Self::wait) then sleeps.
    fn sleep(&mut self, p: &crate::park::Parker) -> std::task::Poll<bool> {
        let Some(d) = self.shared.driver.get() else {
            return std::task::Poll::Ready(p.park());
        };
        // Steps 1 and 2 of the hand-off, and 6 when called again: a free
        // poller (its own first) or the thread, `poll_park` with its waker;
        // the poller is released when the park ends.
        self.sleep.sleep(&d.pollers, d.poller_of(self.index), p)
    }

    /// Sleeps after the idle period suspended: in the poller held (until an
    /// event, a wake through its eventfd, or the next timer), or on the
    /// thread; then fires due timers and ends the batch.
    fn wait(&mut self, ctx: &WorkerCtx) {
        let shared = self.shared;
        let d = shared
            .driver
            .get()
            .expect("a park suspends only with a driver");
        let parker = &shared.workers[self.index].mailbox.parker;
        let ext = self.sleep.held() == Some(0);
        let deadline = crate::time::sleep_deadline(shared, ext);
        let timeout = deadline.map(|t| t.saturating_duration_since(std::time::Instant::now()));
        ctx.core.borrow_mut().wake_mode = WakeMode::Batch;
        if self.sleep.held().is_some() {
            let turns = &shared.workers[self.index].stats.driver_turns;
            WorkerCounters::bump(turns, 1);
        }
        // Steps 3 and 4 of the hand-off: the turn (or the thread's park),
        // the waker taken back when it returns, before the dispatch.
        self.sleep.wait(&d.pollers, parker, timeout);
        if ext {
            crate::time::wake_sleeper_done(shared);
        }
        self.fire_timers(ext);
        let mut core = ctx.core.borrow_mut();
        core.wake_mode = WakeMode::Place;
        core.end_batch(shared);
    }

    /// Fires this worker's due timers (and the outside threads' ones, when
    /// `ext`), in batch mode.
    fn fire_timers(&self, ext: bool) {
        let n = crate::time::fire_worker(self.shared, ext);
        if n > 0 {
            WorkerCounters::bump(
                &self.shared.workers[self.index].stats.timers_fired,
                n as u64,
            );
        }
    }

    /// After each task: every `EVENT_INTERVAL` tasks (or when a task ran out
    /// of budget) a look at the poller without blocking, the due timers,
    /// then the deferred wakes.
    fn after_task(&mut self, ctx: &WorkerCtx) {
        self.tasks = self.tasks.wrapping_add(1);
        let deferred = crate::io::coop::has_deferred();
        if self.tasks % crate::io::EVENT_INTERVAL != 0 && !deferred {
            return;
        }
        let shared = self.shared;
        if let Some(d) = shared.driver.get() {
            ctx.core.borrow_mut().wake_mode = WakeMode::Batch;
            let p = &d.pollers[d.poller_of(self.index)];
            if let Some(mut g) = p.try_hold() {
                WorkerCounters::bump(&shared.workers[self.index].stats.driver_turns, 1);
                p.turn(&mut g, Some(std::time::Duration::ZERO), || {});
            }
            self.fire_timers(true);
            let mut core = ctx.core.borrow_mut();
            core.wake_mode = WakeMode::Place;
            core.end_batch(shared);
        }
        if deferred {
            ctx.core.borrow_mut().wake_mode = WakeMode::Yield;
            for w in crate::io::coop::take_deferred() {
                w.wake();
            }
            ctx.core.borrow_mut().wake_mode = WakeMode::Place;
        }
    }
}

/// A worker thread's body.
pub(crate) fn run(shared: Arc<Shared>, index: usize, local: Local<Runnable>, pin: bool) {
    if pin {
        let os = shared.topology.place(index).os_index;
        if pin_current_thread(os) {
            // Relaxed: `build` reads it after the latch, whose mutex orders it.
            shared.workers[index].pinned.store(true, Ordering::Relaxed);
        }
    }
    let core = Core::new(&shared, index, local);
    let ctx = WorkerCtx {
        here: crate::context::Here {
            index,
            rt: Arc::as_ptr(&shared) as *const (),
            counters: &*shared.workers[index].stats,
            registry: &shared.registry as *const crate::task::Registry as *const (),
        },
        shared: shared.clone(),
        index,
        core: RefCell::new(core),
    };
    let guard = crate::context::enter(&ctx.here);
    // The start hook runs with the worker's context (Handle::current works)
    // and before `build` returns (the latch below) and before any task.
    if let Some(h) = &shared.on_start {
        h.run();
    }
    shared.starting.count_down();
    #[cfg(feature = "io")]
    crate::time::enter_worker(&shared, index);
    run_loop(&ctx);
    #[cfg(feature = "io")]
    crate::time::exit_worker();
    // Shutdown: drop what this worker still holds (see the module docs).
    let mut core = ctx.core.borrow_mut();
    if let Some(r) = core.lifo.take() {
        drop_task(r);
    }
    while let Some(r) = core.local.pop() {
        drop_task(r);
    }
    while let Some(r) = core.batch_q.pop_front() {
        drop_task(r);
    }
    drop(core);
    // Tasks placed on this worker, and its local tasks, which must be
    // dropped on this thread (see `drop_local_tasks`).
    shared.workers[index].mailbox.drain_pinned(drop_task);
    drop_local_tasks(&shared, index);
    // After the last task this worker runs or drops.
    if let Some(h) = &shared.on_stop {
        h.run();
    }
    drop(guard);
}
