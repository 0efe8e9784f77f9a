//! The worker: its loop, its local state, and the thread-local context.
//!
//! # A worker's life
//!
//! 1. It is spawned by [`Builder::build`](crate::Builder::build) with its
//!    own FIFO deque, pins itself to its PU when asked, and installs its
//!    context (a thread-local pointer to its [`WorkerCtx`]) so that spawns
//!    and wakes on this thread reach its queues.
//! 2. Loop: take the next task, LIFO slot first (at most
//!    [`MAX_LIFO_POLLS`] in a row, as tokio does), then the local deque,
//!    then the tasks placed on it (src/sched/README.md, "Pinned tasks"), then
//!    those placed in its domains (their place queues, nearest first:
//!    src/sched/README.md, "Place queues"), then
//!    the inbox (one task: the worker runs what its own work wakes before it
//!    admits more external work; [`Mailbox::take`](crate::sched::park::Mailbox::take));
//!    every [`INBOX_CHECK_INTERVAL`] polls these go first, so work pushed
//!    from outside is never starved by a busy local queue, and a task that
//!    yields ([`yield_now`](crate::yield_now)) lets up to
//!    [`ADMIT_BATCH`](crate::sched::park::ADMIT_BATCH) inbox tasks into the deque
//!    ahead of itself. Run it, with the task's `last_worker` updated.
//! 3. When all three are empty the worker is idle: it leaves the `queued`
//!    set, marks itself idle and, if fewer than half the workers search,
//!    becomes a searcher and walks its levels ([`balance`](crate::policy::balance)).
//!    Then it asks the [`governor`](crate::policy::governor) whether to spin or
//!    park, and waits through its [`Mailbox`] ([`park`](crate::sched::park): no
//!    lost wakeups); before it sleeps it announces it to the wake protocol
//!    ([`sleepers`](crate::sched::sleepers)), and a worker that sleeps with no searcher
//!    left re-checks the `queued` set and steals instead of sleeping when
//!    work is left (the sequence is [`idle_steps`](crate::sched::idle_steps)'s). Work
//!    arriving ends the idle period, whose length feeds `avg_idle`.
//! 4. Every push that makes a task stealable (onto its deque, or into a
//!    busy worker's inbox) runs the wake protocol's pusher check: if nobody
//!    searches and a worker is parked, the parked worker nearest to the
//!    work is woken to search ([`push::notify_parked`]). The one exception is the
//!    LIFO slot, the worker's next task: its push wakes nobody, and a worker
//!    that goes idle while this one is still in its poll takes it from
//!    there (src/sched/README.md, "The LIFO slot").
//! 5. Once the I/O driver exists (`crate::io`), a worker going to sleep
//!    suspends its idle period ([`Idle::Suspended`]) and sleeps in a poller
//!    it takes (or on its thread), with its next timer as the timeout
//!    ([`Driven`](driven::Driven)); the I/O and timer wakes it makes there stay on it (a
//!    batch), and the idle period goes on when it wakes.
//! 6. Its load contribution is published to the shared group counters at
//!    most once per `load_update_interval` ([`load`](crate::policy::load)), and
//!    always before it sleeps.
//!
//! # Shutdown
//!
//! Pending work is cancelled before anything running is waited for. The
//! steps (the flag, the blocking pool's close, a worker leaving its loop
//! and its exit, the join and final drain, the wait for running closures)
//! are numbered in src/sched/README.md, "Shutdown", and written once in
//! [`shutdown`](crate::sched::shutdown), which `Runtime::shutdown` and
//! this loop (`shutdown::next`, `shutdown::exit`) call.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use crate::policy::balance::BalanceState;
use crate::policy::governor::Governor;
use crate::policy::load::{Contribution, Publish};
use crate::sched::idle_steps::{Idle, Suspended as SuspendedIdle};
use crate::sched::park::{Mailbox, Notified};
use crate::sched::push::{self, Delivery, Workers};
use crate::sched::queue::Local;
use crate::stats::WorkerCounters;
use crate::sync::Ordering;
use crate::task::{drop_task, Runnable};
use crate::topology::pin_current_thread;
use crate::worker::shared::Shared;
use std::sync::Arc;

#[cfg(feature = "tokio-compat")]
pub(crate) mod bridge;
#[cfg(feature = "io")]
mod driven;
mod idle;
mod placed;
pub(crate) mod schedule;
pub(crate) mod spawn;
// The shared state, whose drains the loom models drive: public under
// `cfg(loom)`.
#[cfg(loom)]
pub mod shared;
#[cfg(not(loom))]
pub(crate) mod shared;
mod snapshot;
mod steal;

/// Most polls in a row from the LIFO slot before the deque gets a turn
/// (tokio's `MAX_LIFO_POLLS_PER_TICK`): a pair of tasks waking each other
/// cannot starve the rest of the queue.
pub const MAX_LIFO_POLLS: u32 = 3;

/// Every this many polls the inbox is checked first (tokio and Go use 61: a
/// prime, so it does not fall in step with periodic workloads).
pub const INBOX_CHECK_INTERVAL: u32 = 61;

/// Most tasks of the I/O driver's batches kept private to the worker that
/// polled them ([`Core::push_batch`]); the rest go to its stealable deque.
/// One poller turn returns at most as many events: a batch is private as a
/// whole, and what spreads it is its age (`migration_cost`), not its size
/// (with 16, two workers served 0.66 of one worker's HTTP requests on the
/// 2-core machine: BENCHMARKS.md).
pub const BATCH_LOCAL: usize = 1024;

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
    lifo_streak: u32,
    tick: u32,
    pub(crate) running: bool,
    publisher: crate::policy::load::Publisher,
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
    /// Whether this worker counts as searching (sched/sleepers.rs).
    pub(crate) searching: bool,
    /// Whether this worker set its own bit in the `queued` set since it
    /// last cleared it.
    queued_bit: bool,
    /// How a wake made on this thread (with this core free) is placed.
    pub(crate) wake_mode: WakeMode,
    /// Tasks the current batch (a poller turn, timers) put here.
    batch: u32,
    /// The I/O driver's batches beyond the LIFO slot, private to this
    /// worker while they stay cache-hot ([`Core::push_batch`]): only a
    /// watcher takes from it, once stale (sched/watch.rs).
    batch_q: Local<Runnable>,
    /// The batches in `batch_q`, oldest first: how many tasks had been
    /// pushed into it when each ended, and when.
    batch_marks: std::collections::VecDeque<(u64, u64)>,
    /// Tasks pushed into `batch_q`, and how many of them the last mark
    /// covers (the tasks taken from it, by this worker or a watcher, are
    /// `batch_pushed - batch_q.len()`).
    batch_pushed: u64,
    batch_marked: u64,
    /// Whether the LIFO slot holds a task a batch put there.
    lifo_batch: bool,
    /// Whether this worker set its bit in the watch's `private` set since
    /// it last cleared it.
    private_bit: bool,
    /// Whether this worker is counted a watcher (sched/watch.rs).
    pub(crate) watching: bool,
    /// Whether a waker claimed this worker in its current idle period
    /// (sched/watch.rs, `leave`).
    pub(crate) claimed: bool,
    /// The idle period suspended while this worker sleeps in its poller
    /// (or parks its thread, with the I/O driver on).
    pub(crate) suspended: Option<SuspendedIdle>,
}

/// How a wake made on a worker's thread is placed (worker/schedule.rs).
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
    // One call of `f`, so that it inlines here (the wake path's closure
    // in `schedule` is not inlined into three call sites).
    with_ctx(|c| {
        let mut guard;
        let cur = match c.filter(|c| ptr::eq(&*c.shared, shared)) {
            None => None,
            Some(c) => match c.core.try_borrow_mut() {
                Ok(core) => {
                    guard = core;
                    Some((c.index, Some(&mut *guard)))
                }
                Err(_) => Some((c.index, None)),
            },
        };
        f(cur)
    })
}

/// The spans around worker `w`, nearest first (its levels), ending with
/// every worker: the policy's [`near_spans`](crate::policy::search_order::near_spans).
#[inline]
pub(crate) fn near_spans(
    shared: &Shared,
    w: usize,
) -> impl Iterator<Item = &std::ops::Range<usize>> + Clone {
    crate::policy::search_order::near_spans(shared.topology.levels(w), &shared.all)
}

/// Where a parked worker is woken to search near worker `w`: on a hybrid
/// machine, the most capable workers of `w`'s LLC first, then
/// [`near_spans`]; the policy's [`wake_spans`](crate::policy::search_order::wake_spans).
#[inline]
pub(crate) fn wake_spans(
    shared: &Shared,
    w: usize,
) -> impl Iterator<Item = &std::ops::Range<usize>> + Clone {
    crate::policy::search_order::wake_spans(
        &shared.capable[shared.workers[w].llc_hint],
        shared.topology.levels(w),
        &shared.all,
    )
}

/// The runtime as the pusher's steps see it ([`push`]).
impl Workers<Runnable> for Shared {
    #[inline]
    fn sleepers(&self) -> &crate::sched::sleepers::Sleepers {
        &self.sleepers
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

/// Counts a wake made by the pusher's check ([`push::notify_parked`]'s
/// result) for the caller's worker `from`.
#[inline]
pub(crate) fn count_wake(shared: &Shared, from: Option<usize>, woke: Option<(usize, Notified)>) {
    let Some((w, n)) = woke else { return };
    shared.trace.notify(from, w);
    bump_for(shared, from, |s| &s.searcher_wakes);
    if n == Notified::Unparked {
        bump_for(shared, from, |s| &s.unparks);
    }
}

/// Worker `me` is about to poll a task having set a timer due at `tick`
/// (ms) while nobody slept in poller 0 (`time::take_uncovered`): a watcher
/// is called if none would look before the timer is due
/// (`watch::cover_timer`).
#[cfg(feature = "io")]
#[cold]
fn cover_timer(shared: &Shared, me: usize, tick: u64) {
    let at = tick.saturating_mul(1_000_000);
    let woke = crate::sched::watch::cover_timer(shared, &shared.watch, me, at);
    if woke.is_some() {
        WorkerCounters::bump(&shared.workers[me].stats.watch_wakes, 1);
        count_wake(shared, Some(me), woke);
    }
}

/// Delivers `r` to worker `to`'s inbox from anywhere (`from`: the caller's
/// worker, if any): [`push::deliver`], counted.
#[inline]
pub(crate) fn deliver(shared: &Shared, from: Option<usize>, to: usize, r: Runnable) {
    let d = push::deliver(shared, to, r);
    if matches!(d, Delivery::Unparked) {
        shared.trace.notify(from, to);
    }
    count_delivery(shared, from, d);
}

/// Counts what a [`push::deliver`] did, for the caller's worker `from`.
#[inline]
pub(crate) fn count_delivery(shared: &Shared, from: Option<usize>, d: Delivery) {
    match d {
        Delivery::Unparked => bump_for(shared, from, |s| &s.unparks),
        Delivery::Queued(woke) => count_wake(shared, from, woke),
    }
}

/// Delivers `r` to worker `w`, just claimed from the parked set as the one
/// wake in flight: [`push::deliver_to_woken`], counted.
pub(crate) fn deliver_to_woken(shared: &Shared, from: Option<usize>, w: usize, r: Runnable) {
    if push::deliver_to_woken(shared, w, r) == Notified::Unparked {
        shared.trace.notify(from, w);
        bump_for(shared, from, |s| &s.unparks);
    }
}

impl Core {
    fn new(
        shared: &Shared,
        index: usize,
        local: Local<Runnable>,
        batch_q: Local<Runnable>,
    ) -> Self {
        let t = &shared.tunables;
        let levels = shared.topology.levels(index).len();
        Core {
            index,
            llc: shared.topology.llc_span(index),
            llc_word: shared
                .sleepers
                .idle
                .word_of(&shared.topology.llc_span(index)),
            local,
            lifo_streak: 0,
            tick: 0,
            running: true,
            publisher: crate::policy::load::Publisher::new(),
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
            batch_q,
            batch_marks: std::collections::VecDeque::new(),
            batch_pushed: 0,
            batch_marked: 0,
            lifo_batch: false,
            private_bit: false,
            watching: false,
            claimed: false,
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
            || (shared.workers[self.index].lifo.is_empty()
                && self.local.is_empty()
                && self.batch_q.is_empty())
        {
            return;
        }
        s.left_parked = Some(shared.sleepers.leave_parked(self.index));
        shared.sleepers.idle.remove(self.index, Ordering::Relaxed);
        // Step 5 of the poller hand-off (src/sched/README.md, "The poller
        // hand-off"; loom: driver.rs). Only a
        // worker sleeping in the driver gets here (`suspended`), so only
        // with the `io` feature.
        #[cfg(feature = "io")]
        let _ = crate::io::poller_sleep::wake_self(&shared.workers[self.index].mailbox.parker);
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
    #[inline]
    fn next_local(&mut self, shared: &Shared) -> Option<Runnable> {
        self.tick = self.tick.wrapping_add(1);
        let me = &shared.workers[self.index];
        if self.private_bit && self.batch_q.is_empty() && (!self.lifo_batch || me.lifo.is_empty()) {
            self.private_emptied(shared);
        }
        if self.tick % INBOX_CHECK_INTERVAL == 0 {
            // Tasks placed on this worker first: nobody else can run them;
            // then those placed in its domains (sched/place_queue.rs).
            if let Some(r) = me.mailbox.take_pinned() {
                return Some(r);
            }
            if let Some(r) = self.take_placed(shared) {
                return Some(r);
            }
            if let Some(r) = me.mailbox.take() {
                WorkerCounters::bump(&me.stats.inbox_pulls, 1);
                return Some(r);
            }
        }
        if let Some(r) = me.lifo.take() {
            self.lifo_batch = false;
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
        if let Some(r) = self.pop_batch(shared) {
            return Some(r);
        }
        if let Some(r) = me.mailbox.take_pinned() {
            return Some(r);
        }
        if let Some(r) = self.take_placed(shared) {
            return Some(r);
        }
        let r = me.mailbox.take()?;
        WorkerCounters::bump(&me.stats.inbox_pulls, 1);
        Some(r)
    }

    /// A task of this worker's place queues, nearest first
    /// ([`place_queue::take`](crate::sched::place_queue::take)), counted. One load when no
    /// domain place was ever used.
    #[inline]
    fn take_placed(&mut self, shared: &Shared) -> Option<Runnable> {
        if !shared.domains.used() {
            return None;
        }
        self.take_placed_slow(shared)
    }

    #[cold]
    fn take_placed_slow(&mut self, shared: &Shared) -> Option<Runnable> {
        let r = crate::sched::place_queue::take(&shared.domains, self.index)?;
        WorkerCounters::bump(&shared.workers[self.index].stats.placed_pulls, 1);
        Some(r)
    }
    /// This worker's load contribution now.
    fn contribution(&self, shared: &Shared) -> Contribution {
        let queued = self.local.len()
            + self.batch_q.len()
            + usize::from(!shared.workers[self.index].lifo.is_empty())
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

    /// A yielding task to the back of the deque, behind the worker's inbox:
    /// up to [`ADMIT_BATCH`](crate::sched::park::ADMIT_BATCH) inbox tasks move into
    /// the deque first ([`Mailbox::admit`](crate::sched::park::Mailbox::admit)),
    /// and the push's check covers them.
    /// The private batch queue goes ahead of it too ([`Core::release_batch`]):
    /// a task that yields over and over would otherwise refill the deque,
    /// which this worker takes before its private batch, and the batch
    /// would wait for the loop to end.
    #[inline]
    pub(crate) fn push_yield(&mut self, shared: &Shared, r: Runnable) {
        shared.workers[self.index].mailbox.admit(&self.local);
        if !self.batch_q.is_empty() {
            self.release_batch(shared);
        }
        self.push_local(shared, r);
    }

    /// Moves the private batch queue, oldest first, onto the stealable
    /// deque (the caller's push runs the pusher's check for them).
    #[cold]
    fn release_batch(&mut self, shared: &Shared) {
        while let Some(t) = self.batch_q.pop() {
            self.local.push(t);
        }
        self.prune_marks(shared);
    }

    /// Makes this worker's private work stealable before a hog's poll
    /// (`run_with_private_behind`): the LIFO slot's batch task and the
    /// private batch queue onto the deque, and the pusher's check.
    #[cfg(feature = "io")]
    #[cold]
    fn release_private(&mut self, shared: &Shared) {
        if self.lifo_batch {
            if let Some(t) = shared.workers[self.index].lifo.take() {
                self.local.push(t);
            }
            self.lifo_batch = false;
        }
        self.release_batch(shared);
        if !self.local.is_empty() {
            let st = &shared.workers[self.index].stats;
            WorkerCounters::bump(&st.hog_releases, 1);
            let woke = push::after_push(shared, self.index, &mut self.queued_bit);
            count_wake(shared, Some(self.index), woke);
        }
    }

    /// Pushes onto the local deque, where other workers may steal it: marks
    /// this worker in the `queued` set (once per busy period) and runs the
    /// pusher's check of the wake protocol ([`sleepers`](crate::sched::sleepers)): a parked
    /// worker is woken to search if nobody searches.
    pub(crate) fn push_local(&mut self, shared: &Shared, r: Runnable) {
        let woke = push::push_local(shared, self.index, &self.local, &mut self.queued_bit, r);
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
    /// 0.63-0.70 of tokio's requests: BENCHMARKS.md.) The private part
    /// stays private only while it is cache-hot: once its oldest task has
    /// waited the runtime's `migration_cost`, the watcher takes it
    /// (sched/watch.rs).
    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    pub(crate) fn push_batch(&mut self, shared: &Shared, r: Runnable) {
        self.batch += 1;
        self.lifo_batch = true;
        if let Some(prev) = shared.workers[self.index].lifo.put(r) {
            if self.batch_q.len() < BATCH_LOCAL {
                self.batch_q.push(prev);
                self.batch_pushed += 1;
            } else {
                self.local.push(prev);
            }
        }
    }

    /// The next task of the private batch queue; when it is empty (the
    /// caller took the LIFO slot first), this worker's bit in the watch's
    /// `private` set goes.
    pub(crate) fn pop_batch(&mut self, shared: &Shared) -> Option<Runnable> {
        let Some(r) = self.batch_q.pop() else {
            // Empty (a watcher may have taken the rest).
            self.private_emptied(shared);
            return None;
        };
        self.prune_marks(shared);
        Some(r)
    }

    /// Drops the marks of batches whose tasks have all left `batch_q`
    /// (run here, or taken by a watcher); the next batch's time becomes
    /// the age of the private work (sched/watch.rs, `stamp`).
    fn prune_marks(&mut self, shared: &Shared) {
        let done = self.batch_pushed - self.batch_q.len() as u64;
        let mut moved = false;
        while self
            .batch_marks
            .front()
            .is_some_and(|&(end, _)| end <= done)
        {
            self.batch_marks.pop_front();
            moved = true;
        }
        if moved {
            if let Some(&(_, t)) = self.batch_marks.front() {
                crate::sched::watch::stamp(&shared.watch, self.index, t);
            }
        }
    }

    /// The private batch queue was found empty, and the LIFO slot holds no
    /// task of a batch (sched/watch.rs, `emptied`).
    pub(crate) fn private_emptied(&mut self, shared: &Shared) {
        self.batch_marks.clear();
        self.batch_marked = self.batch_pushed;
        if std::mem::take(&mut self.private_bit) {
            crate::sched::watch::emptied(&shared.watch, self.index);
        }
    }

    /// The watcher's look when its tick ends (sched/watch.rs): the LIFO slots
    /// and private queues of other workers whose last batch came more than
    /// `migration_cost` ago, or whose owner has been in one poll since a
    /// look [`LONG_POLL_NS`](crate::sched::watch::LONG_POLL_NS) ago, move to this
    /// worker's deque, with the pusher's check, and the worker leaves its
    /// sleep to run them. Returns how many tasks it took.
    #[cfg(feature = "io")]
    pub(crate) fn take_stale(&mut self, shared: &Shared) -> usize {
        let now = shared.now_ns();
        let cost = shared.tunables.migration_cost.as_nanos() as u64;
        let mut n = 0;
        let mut long = 0;
        let local = &self.local;
        let polls = |v: usize| shared.workers[v].stats.polls.load(Ordering::Relaxed);
        let cpu = |v: usize| thread_cpu_ns(shared, v).unwrap_or(now);
        shared.watch.for_each_stale(
            self.index,
            now,
            cost,
            crate::sched::watch::LONG_POLL_NS,
            polls,
            cpu,
            |v, why| {
                let took = crate::sched::watch::take_private(
                    &shared.workers[v].lifo,
                    &shared.workers[v].batch,
                    local,
                );
                n += took;
                if why == crate::sched::watch::Stale::LongPoll {
                    long += took;
                    // Relaxed: a hint for the owner (`run_task`), also when
                    // an earlier look took the work as aged.
                    shared.workers[v]
                        .long_poll_taken
                        .store(true, Ordering::Relaxed);
                }
            },
        );
        if n > 0 {
            let st = &shared.workers[self.index].stats;
            WorkerCounters::bump(&st.batch_rescued, n as u64);
            WorkerCounters::bump(&st.long_poll_rescued, long as u64);
            shared.trace.watcher_take(self.index, n, long);
            self.wake_self_in_driver(shared);
            let woke = push::after_push(shared, self.index, &mut self.queued_bit);
            count_wake(shared, Some(self.index), woke);
        }
        n
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
        let st = &shared.workers[self.index].stats;
        let fresh = self.batch_pushed > self.batch_marked;
        if fresh {
            self.prune_marks(shared);
        }
        let private = fresh || (self.lifo_batch && !shared.workers[self.index].lifo.is_empty());
        if private {
            let now = shared.now_ns();
            let first = self.batch_marks.is_empty();
            if fresh {
                self.batch_marks.push_back((self.batch_pushed, now));
                self.batch_marked = self.batch_pushed;
            }
            if self.private_bit {
                if first && fresh {
                    crate::sched::watch::stamp(&shared.watch, self.index, now);
                }
            } else {
                // Private work where there was none: the owner's check of the
                // watch (sched/watch.rs).
                self.private_bit = true;
                let woke =
                    crate::sched::watch::kept_private(shared, &shared.watch, self.index, now);
                if woke.is_some() {
                    WorkerCounters::bump(&st.watch_wakes, 1);
                }
                count_wake(shared, Some(self.index), woke);
            }
        }
        WorkerCounters::bump(&st.driver_batches, 1);
        if !self.local.is_empty() {
            let woke = push::after_push(shared, self.index, &mut self.queued_bit);
            if woke.is_some() {
                WorkerCounters::bump(&st.batch_wakes, 1);
            }
            count_wake(shared, Some(self.index), woke);
        }
    }

    /// Puts a woken task in the LIFO slot; the previous occupant moves to
    /// the deque ([`push::push_lifo`]).
    #[inline(always)]
    pub(crate) fn push_lifo(&mut self, shared: &Shared, r: Runnable) {
        let woke = push::push_lifo(
            shared,
            self.index,
            &shared.workers[self.index].lifo,
            &self.local,
            &mut self.queued_bit,
            r,
        );
        if woke.is_some() {
            count_wake(shared, Some(self.index), woke);
        }
    }
}

/// Worker `v`'s thread's CPU time in ns, if its clock can be read.
#[cfg(feature = "io")]
fn thread_cpu_ns(shared: &Shared, v: usize) -> Option<u64> {
    // Relaxed: set once by the worker's thread at its start.
    let clock = shared.workers[v].cpu_clock.load(Ordering::Relaxed);
    if clock < 0 {
        return None;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; a clock of a thread that has
    // exited makes the call fail (checked), not misbehave.
    let r = unsafe { libc::clock_gettime(clock as libc::clockid_t, &mut ts) };
    (r == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
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
    #[cfg(feature = "io")]
    if let Some(tick) = crate::time::take_uncovered(&shared.driver) {
        cover_timer(shared, ctx.index, tick);
    }
    #[cfg(feature = "io")]
    if ctx.core.borrow().private_bit {
        return run_with_private_behind(ctx, r);
    }
    if shared.poll_timing {
        run_timed(ctx, r);
    } else {
        poll(shared, ctx.index, r);
    }
}

/// Polls `r` while this worker holds private work (src/sched/README.md,
/// "Long polls"): a task marked a hog (a watcher took the private work from
/// behind one of its polls) first makes that work stealable, with the
/// pusher's check, so that another worker takes it at once instead of at
/// the watcher's next tick; any other task is polled holding a waker, so
/// that its metadata outlives the poll, and marked a hog if a watcher took
/// the private work meanwhile. A request handler that computes for
/// milliseconds thus costs its connection's neighbours one watcher tick
/// once, not at every request.
#[cfg(feature = "io")]
#[inline(never)]
fn run_with_private_behind(ctx: &WorkerCtx, r: Runnable) {
    let shared = &*ctx.shared;
    let me = &shared.workers[ctx.index];
    let meta = r.metadata();
    // Relaxed: hints.
    if meta.hog.load(Ordering::Relaxed) {
        ctx.core.borrow_mut().release_private(shared);
        me.long_poll_taken.store(false, Ordering::Relaxed);
        return poll_maybe_timed(ctx, r);
    }
    // The waker holds a reference: the task's header (its metadata) stays
    // allocated until it is dropped, whatever the poll does.
    let keep = r.waker();
    let meta: *const crate::task::TaskMeta = meta;
    me.long_poll_taken.store(false, Ordering::Relaxed);
    poll_maybe_timed(ctx, r);
    if me.long_poll_taken.load(Ordering::Relaxed) {
        // SAFETY: `keep` holds a reference to the task, so its header and
        // the metadata in it are alive until `keep` is dropped below.
        unsafe { (*meta).hog.store(true, Ordering::Relaxed) };
    }
    drop(keep);
}

/// Polls `r` once, timed when poll timing is on.
#[cfg(feature = "io")]
#[inline(always)]
fn poll_maybe_timed(ctx: &WorkerCtx, r: Runnable) {
    let shared = &*ctx.shared;
    if shared.poll_timing {
        run_timed(ctx, r);
    } else {
        poll(shared, ctx.index, r);
    }
}

/// Polls `r` once, on worker `w`.
#[inline(always)]
fn poll(shared: &Shared, w: usize, r: Runnable) {
    let st = &shared.workers[w].stats;
    let traced = shared.trace.poll_start(Some(w), r.metadata());
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
    shared.trace.poll_end(Some(w), traced);
}

/// Polls `r`, taken from the bridge's slot, on the tokio bridge's thread
/// (src/tokio_compat.rs, "Running a woken task on the bridge"), counted on
/// `external`: two polls of the same task in a row that each run for
/// [`LONG_POLL_NS`](crate::sched::watch::LONG_POLL_NS) or more keep the
/// task off the bridge (it held tokio's driver meanwhile), and two in a
/// row of tasks of one spawn location keep that location's tasks off it
/// for a second ([`bridge::SITE_OFF_NS`]: a server spawns a task per
/// request, each new). Two, not one: a poll the OS preempted is long by
/// the wall clock too (one in a few hundred on 2 shared cores), and one
/// such poll must not send a task that is quick back to the hand-offs.
#[cfg(feature = "tokio-compat")]
pub(crate) fn poll_on_bridge(shared: &Shared, r: Runnable) {
    WorkerCounters::bump_shared(&shared.external.bridge_polls, 1);
    WorkerCounters::bump_shared(&shared.external.polls, 1);
    let meta: *const crate::task::TaskMeta = r.metadata();
    // The waker holds a reference: the metadata outlives the poll.
    let keep = r.waker();
    let traced = shared.trace.poll_start(None, r.metadata());
    let t0 = shared.now_ns();
    bridge::set_polling(true);
    let res = catch_unwind(AssertUnwindSafe(|| crate::io::coop::budget(|| r.run())));
    bridge::set_polling(false);
    if let Err(p) = res {
        crate::task::discard(p);
    }
    let now = shared.now_ns();
    let long = now.saturating_sub(t0) >= crate::sched::watch::LONG_POLL_NS;
    shared.trace.poll_end(None, traced);
    // SAFETY: `keep` holds a reference to the task: its metadata is alive.
    let site = unsafe { (*meta).spawned_at };
    if bridge::long_again(meta, site, long, now) {
        // SAFETY: `keep` holds a reference to the task, so its header and
        // the metadata in it are alive until `keep` is dropped below.
        unsafe { (*meta).off_bridge.store(true, Ordering::Relaxed) };
    }
    drop(keep);
}

/// Polls `r` once, timed (timing.rs): its run-queue delay from the stamp
/// its wake left, its poll's length, and a long poll's spawn location.
#[inline(never)]
fn run_timed(ctx: &WorkerCtx, r: Runnable) {
    let shared = &*ctx.shared;
    let timing = &shared.workers[ctx.index].timing;
    let meta = r.metadata();
    let at = meta.spawned_at;
    // Relaxed: statistics (the stamp's wake ordered it before this run).
    let queued = meta.runnable_at.load(std::sync::atomic::Ordering::Relaxed);
    let start = shared.now_ns();
    if queued != 0 {
        meta.runnable_at
            .store(0, std::sync::atomic::Ordering::Relaxed);
        timing.run_delay.record(start.saturating_sub(queued));
    }
    poll(shared, ctx.index, r);
    let end = shared.now_ns();
    timing.poll(ctx.index, end - start, end, shared.long_poll_ns, at);
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
/// ends with one), run. `sleep` is how the worker parks: see [`idle`]. The
/// choice of the next task, shutdown's check first, is
/// [`shutdown::next`](crate::sched::shutdown::next)'s.
pub(crate) fn step(
    ctx: &WorkerCtx,
    sleep: impl FnMut(&crate::sched::park::Parker) -> std::task::Poll<bool>,
) -> Step {
    let shared = &*ctx.shared;
    let next = {
        let mut core = ctx.core.borrow_mut();
        crate::sched::shutdown::next(&mut LoopCore {
            shared,
            core: &mut core,
            sleep,
        })
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

/// A worker's loop as [`shutdown::next`](crate::sched::shutdown::next) sees it.
struct LoopCore<'a, S> {
    shared: &'a Shared,
    core: &'a mut Core,
    sleep: S,
}

impl<S> crate::sched::shutdown::Running<Runnable> for LoopCore<'_, S>
where
    S: FnMut(&crate::sched::park::Parker) -> std::task::Poll<bool>,
{
    fn is_shutdown(&self) -> bool {
        self.shared.is_shutdown()
    }

    fn resuming(&self) -> bool {
        // Called again after sleeping in the driver: the idle period goes
        // on (and sees shutdown there).
        self.core.suspended.is_some()
    }

    fn next_own(&mut self) -> Option<Runnable> {
        let r = self.core.next_local(self.shared)?;
        self.core.maybe_publish(self.shared);
        Some(r)
    }

    fn idle(&mut self) -> Idle<Runnable> {
        idle::idle(self.shared, self.core, &mut self.sleep)
    }
}

/// A worker leaving its loop, as [`shutdown::exit`](crate::sched::shutdown::exit)
/// sees it. The core is borrowed for each take only: a destructor the
/// drops run may reach this worker's context.
struct ExitCore<'a> {
    ctx: &'a WorkerCtx,
}

impl crate::sched::shutdown::Exiting<Runnable> for ExitCore<'_> {
    fn take_held(&mut self) -> Option<Runnable> {
        let mut core = self.ctx.core.borrow_mut();
        let c = &mut *core;
        self.ctx.shared.workers[c.index]
            .lifo
            .take()
            .or_else(|| c.local.pop())
            .or_else(|| c.pop_batch(&self.ctx.shared))
    }

    fn drop_pinned(&mut self) {
        // Tasks placed on this worker, and its local tasks, which must be
        // dropped on this thread (see `drop_local_tasks`).
        let (shared, index) = (&*self.ctx.shared, self.ctx.index);
        shared.workers[index].mailbox.drain_pinned(drop_task);
        placed::drop_local_tasks(shared, index);
    }

    fn drop_task(&mut self, r: Runnable) {
        drop_task(r);
    }
}

/// The loop of a worker, until shutdown. Without an I/O driver it parks
/// on its condvar; once the driver exists it sleeps through [`Driven`](driven::Driven).
fn run_loop(ctx: &WorkerCtx) {
    #[cfg(feature = "io")]
    let mut driven = driven::Driven::new(ctx);
    loop {
        #[cfg(feature = "io")]
        let s = step(ctx, |p| driven.sleep(p));
        #[cfg(not(feature = "io"))]
        let s = step(ctx, |p| {
            let trace = &ctx.shared.trace;
            trace.park(ctx.index, crate::trace::ParkReason::Condvar);
            let slept = p.park();
            trace.unpark(ctx.index);
            std::task::Poll::Ready(slept)
        });
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

/// A worker thread's body.
pub(crate) fn run(
    shared: Arc<Shared>,
    index: usize,
    local: Local<Runnable>,
    batch_q: Local<Runnable>,
    pin: bool,
) {
    if pin {
        let os = shared.topology.place(index).os_index;
        if pin_current_thread(os) {
            // Relaxed: `build` reads it after the latch, whose mutex orders it.
            shared.workers[index].pinned.store(true, Ordering::Relaxed);
        }
    }
    // This thread's CPU-time clock, for watchers telling a long poll from
    // a preempted one (src/sched/README.md, "Long polls").
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `pthread_self` is this thread; `clock` is a valid out-pointer.
    if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0 {
        // Relaxed: read by watchers only as a hint (-1: none yet).
        shared.workers[index]
            .cpu_clock
            .store(i64::from(clock), Ordering::Relaxed);
    }
    let core = Core::new(&shared, index, local, batch_q);
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
    // The driver this worker's timers and sockets use, for its whole life.
    #[cfg(feature = "io")]
    let driver_guard = crate::context::enter_driver(shared.driver.clone());
    // The start hook runs with the worker's context (Handle::current works)
    // and before `build` returns (the latch below) and before any task.
    if let Some(h) = &shared.on_start {
        h.run();
    }
    shared.starting.count_down();
    #[cfg(feature = "io")]
    crate::time::enter_worker(&shared.driver, index);
    run_loop(&ctx);
    #[cfg(feature = "io")]
    crate::time::exit_worker(&shared.driver);
    // Shutdown: drop what this worker still holds (see the module docs).
    crate::sched::shutdown::exit(&mut ExitCore { ctx: &ctx });
    // After the last task this worker runs or drops.
    if let Some(h) = &shared.on_stop {
        h.run();
    }
    #[cfg(feature = "io")]
    drop(driver_guard);
    drop(guard);
}
