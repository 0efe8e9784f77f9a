//! The watch over private batches: work conservation for the I/O driver's
//! private batch queues.
//!
//! A worker that returns from the poller with a batch of ready tasks keeps
//! them private (`Core::push_batch`): its LIFO slot, then a queue no
//! search steals from while the batch is cache-hot, so that a second
//! worker is not woken for every batch to take a share it would spend on
//! the wake and on cold caches (BENCHMARKS.md, "I/O"). A private task is
//! hot for `migration_cost` (the kernel's `sysctl_sched_migration_cost`,
//! 500 us by default) after its batch came; after that any idle worker
//! may take it. But an idle worker sleeps, and nothing wakes it when the
//! owner gets stuck (the batch's first task runs long) or falls behind.
//! The kernel has the same gap between a busy CPU's runqueue and an idle
//! CPU, and closes it with a periodic balance run on behalf of the idle
//! CPUs (the nohz idle balancer, kicked from the busy CPU's tick). A stuck
//! task gives a userspace worker no tick, so here the idle side keeps it:
//!
//! - **The watcher.** At most one parked worker sleeps with a timeout of
//!   one tick instead of until woken: the watcher. The tick starts at twice
//!   `migration_cost` and doubles while the watcher finds nothing to take,
//!   up to 16 ms ([`next_tick_ns`]). Whenever its
//!   sleep ends it looks at every worker whose bit is in the `private` set
//!   and takes the LIFO slot's batch task and the private queue of each
//!   whose oldest private task came more than `migration_cost` ago (the
//!   owner stamps each batch: [`stamp`]), into its deque, with the
//!   pusher's check, from where other idle workers steal in turn. A task is
//!   therefore never left private for more than about `migration_cost`
//!   plus a tick (at most 16 ms) while a worker sleeps. This is the only way private work
//!   leaves its owner: an owner that pushed it to its deque itself once it
//!   aged (a first design) spread every batch its worker was preempted
//!   during on the 2-core machine (HTTP `-c256`, 2 workers: 0.80 of tokio,
//!   against 1.09-1.13 without: BENCHMARKS.md).
//! - **Claiming.** A worker about to sleep ([`before_sleep`]) claims the
//!   role when nobody holds it and private work exists or was made or seen
//!   within [`LINGER_NS`]; the watcher keeps it across its sleeps while that holds,
//!   and gives it up when it leaves its idle period for work
//!   ([`leave`]) or after [`LINGER_NS`] without private work. The linger keeps
//!   the role with one sleeping worker while a connection's batches come
//!   and go, so that owners almost never need to wake one.
//! - **The owner's check.** An owner whose private work goes from none
//!   to some sets its bit, then (after a fence) looks at the role; if
//!   nobody holds it, it claims a parked worker ([`Sleepers::wake_in`])
//!   and notifies it: that worker finds nothing to steal, parks again and
//!   claims the role. A watcher leaving with private work about does the
//!   same for its successor.
//!
//! # The store buffering
//!
//! Two pairs, each a store, a `fence(SeqCst)`, then a load of the other's
//! location, so that at least one side sees the other:
//!
//! 1. The owner's bit (`private`) against a worker going to sleep: the
//!    sleeper set its `parked` bit (`Sleepers::to_parked`) and fenced
//!    before it reads `private`; the owner sets `private`, fences, and
//!    reads the role, then the `parked` set. Either the sleeper sees the
//!    bit and claims the role, or the owner sees no watcher and the
//!    sleeper's `parked` bit, and wakes it.
//! 2. The owner's bit against the watcher giving up the role: the watcher
//!    stores "nobody", fences, and reads `private` (and wakes a successor,
//!    or claims the role again, when it finds a bit); the owner sets its
//!    bit, fences and reads the role. Either the watcher sees the bit or
//!    the owner sees nobody watching.
//!
//! A claim itself needs no fence before the sleep: an owner that reads the
//! role before the claim lands sees nobody and wakes a parked worker (at
//! worst, the new watcher: a spurious wake).
//!
//! The loom models `loom-tests/tests/watch.rs` drive these functions.

// The watch works for the I/O driver's batches: without the driver only
// its owner-side steps are called (with nothing private, they return).
#![cfg_attr(not(feature = "io"), allow(dead_code))]

use std::ops::Range;

use crossbeam_utils::CachePadded;

use crate::handoff::Workers;
use crate::idle::WorkerSet;
use crate::park::Notified;
use crate::sync::{fence, AtomicU64, AtomicUsize, Ordering};

/// The role is free.
const NOBODY: usize = usize::MAX;

/// How long a watcher keeps its role after it last saw private work.
pub const LINGER_NS: u64 = 20_000_000;

/// The watcher's first tick: twice the migration cost (so that a batch it
/// finds fresh at one tick is stale at the next), at least 100 us.
pub fn min_tick_ns(migration_cost_ns: u64) -> u64 {
    migration_cost_ns.saturating_mul(2).max(100_000)
}

/// The watcher's longest tick: 32 times the first (16 ms by default).
pub fn max_tick_ns(migration_cost_ns: u64) -> u64 {
    min_tick_ns(migration_cost_ns).saturating_mul(32)
}

/// The watcher's next tick after one that took `took` tasks (the kernel's
/// `sd->balance_interval`): back to the first when it took some, else
/// twice as long, up to [`max_tick_ns`]. A watcher over a quiet runtime (a
/// request every few milliseconds, each batch one task) then wakes about
/// 60 times a second instead of 1,000; what it bounds, how long private
/// work can wait behind a stuck owner, becomes `migration_cost` plus up to
/// 16 ms.
pub fn next_tick_ns(cur_ns: u64, took: usize, migration_cost_ns: u64) -> u64 {
    if took > 0 {
        min_tick_ns(migration_cost_ns)
    } else {
        cur_ns.saturating_mul(2).min(max_tick_ns(migration_cost_ns))
    }
}

/// The watch's shared state.
#[derive(Debug)]
pub struct Watch {
    /// The worker that holds the role, or [`NOBODY`].
    watcher: CachePadded<AtomicUsize>,
    /// Workers whose private batch queue may hold tasks (set by the owner
    /// when its queue goes non-empty, cleared by it when it finds the
    /// queue empty).
    private: WorkerSet,
    /// Per worker: when its private work last began (ns on the runtime's
    /// clock): the age of its oldest private task.
    since: Box<[CachePadded<AtomicU64>]>,
    /// When private work was last made (an owner's check) or seen (a
    /// worker going to sleep).
    seen: CachePadded<AtomicU64>,
    /// The watcher's tick (ns; 0 until the first watcher): kept across
    /// watchers, so that a role passed around a quiet runtime keeps its
    /// long tick ([`next_tick_ns`]).
    tick_ns: AtomicU64,
    all: Range<usize>,
}

impl Watch {
    /// The watch of `n` workers; `groups` start words of the `private` set
    /// (the LLCs, as for the other sets).
    pub fn new(n: usize, groups: &[Range<usize>]) -> Self {
        Watch {
            watcher: CachePadded::new(AtomicUsize::new(NOBODY)),
            private: WorkerSet::new(n, groups),
            since: (0..n)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            seen: CachePadded::new(AtomicU64::new(0)),
            tick_ns: AtomicU64::new(0),
            all: 0..n,
        }
    }

    /// The watcher's current tick, in ns (at least [`min_tick_ns`]).
    pub fn tick_ns(&self, migration_cost_ns: u64) -> u64 {
        // Relaxed: a heuristic, written by the watcher only.
        self.tick_ns
            .load(Ordering::Relaxed)
            .max(min_tick_ns(migration_cost_ns))
    }

    /// The watcher's tick ended having taken `took` tasks: the next one
    /// ([`next_tick_ns`]).
    pub fn ticked(&self, took: usize, migration_cost_ns: u64) {
        let next = next_tick_ns(self.tick_ns(migration_cost_ns), took, migration_cost_ns);
        self.tick_ns.store(next, Ordering::Relaxed);
    }

    /// The worker holding the role, if any (a snapshot).
    // Used by the loom models (loom-tests/).
    #[cfg_attr(not(loom), allow(dead_code))]
    pub fn watcher(&self) -> Option<usize> {
        match self.watcher.load(Ordering::Relaxed) {
            NOBODY => None,
            w => Some(w),
        }
    }

    /// Whether a worker other than `skip` may hold private work.
    /// `Relaxed`: callers that need more fence first.
    pub fn any_private(&self, skip: Option<usize>) -> bool {
        self.private.any(&self.all, Ordering::Relaxed, skip).0
    }

    /// Calls `f` on each worker other than `me` that may hold private work
    /// older than `stale_before`.
    pub fn for_each_stale(&self, me: usize, stale_before: u64, mut f: impl FnMut(usize)) {
        self.private
            .scan(self.all.clone(), Ordering::Relaxed, Some(me), |v| {
                if self.since[v].load(Ordering::Relaxed) < stale_before {
                    f(v);
                }
                false
            });
    }
}

/// The owner `me`'s batch left tasks private (its LIFO slot, its private
/// queue) at `now`, where it held none: the owner's check. Its stamp and
/// bit, then, if nobody watches, a parked worker claimed and notified, to
/// become the watcher. Returns that worker and what its notify did.
pub fn kept_private<T>(
    rt: &impl Workers<T>,
    w: &Watch,
    me: usize,
    now: u64,
) -> Option<(usize, Notified)> {
    // Relaxed: a heuristic's input (a stale stamp only makes a watcher
    // take a batch a tick early or late).
    w.since[me].store(now, Ordering::Relaxed);
    // Relaxed: a heuristic (how long the role lingers). An owner's check
    // renews it, so that the role stays with its watcher while batches
    // keep leaving private work, however briefly each does (one task a
    // request, at light load).
    w.seen.store(now, Ordering::Relaxed);
    // ORDERING: the bit, then the fence, then the role and the `parked`
    // set: store buffering 1 and 2 (module docs) against the fences of a
    // sleeper (`before_sleep`'s) and of `leave`/`give_up`.
    w.private.insert_rmw(me, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    if w.watcher.load(Ordering::Relaxed) != NOBODY {
        return None;
    }
    wake_watcher(rt, me)
}

/// The owner `me`'s oldest private task is now one of the batch that came
/// at `t`.
pub fn stamp(w: &Watch, me: usize, t: u64) {
    // Relaxed: as in `kept_private`.
    w.since[me].store(t, Ordering::Relaxed);
}

/// The owner `me` found its private queue empty: its bit goes. Relaxed:
/// only the owner pushes into the queue, and sets the bit again (with the
/// owner's check) before its next batch can be left there.
pub fn emptied(w: &Watch, me: usize) {
    w.private.remove(me, Ordering::Relaxed);
}

/// Claims a parked worker (after the caller's fence) and notifies it: it
/// searches, finds nothing it may take, and claims the role when it parks
/// again.
fn wake_watcher<T>(rt: &impl Workers<T>, near: usize) -> Option<(usize, Notified)> {
    let all = rt.wake_spans(near).last()?.clone();
    let v = rt.sleepers().wake_in(&all, near, || {
        // The claim was undone: pushers may have skipped their wake while
        // it counted a searcher, so their check runs again.
        crate::handoff::notify_parked(rt, near);
    })?;
    Some((v, rt.mailbox(v).parker.notify()))
}

/// Worker `me`, parked (its `parked` bit set and its re-check fence made),
/// is about to sleep at `now`: returns whether it watches (sleeps at most a
/// tick, then looks for stale private queues). `watching` is its record
/// of holding the role.
pub fn before_sleep(w: &Watch, me: usize, now: u64, watching: &mut bool) -> bool {
    // ORDERING: the `parked` bit (set before this call), the fence, then
    // `private`: store buffering 1 (module docs), with `kept_private`'s
    // fence. (The idle sequence's re-check fences only when no searcher is
    // left.)
    fence(Ordering::SeqCst);
    let private = w.any_private(Some(me));
    if private {
        // Relaxed: a heuristic (how long the role lingers).
        w.seen.store(now, Ordering::Relaxed);
    }
    let recent = private || now.saturating_sub(w.seen.load(Ordering::Relaxed)) < LINGER_NS;
    if *watching {
        if recent {
            return true;
        }
        *watching = give_up(w, me);
        return *watching;
    }
    if !recent || w.watcher.load(Ordering::Relaxed) != NOBODY {
        return false;
    }
    // ORDERING: SeqCst, but the role needs no fence after it: an owner
    // that reads it before it lands wakes a parked worker (module docs).
    *watching = w
        .watcher
        .compare_exchange(NOBODY, me, Ordering::SeqCst, Ordering::Relaxed)
        .is_ok();
    *watching
}

/// The watcher `me` gives the role up after [`LINGER_NS`] without private
/// work: unless, after the fence, it finds a bit set (it claims the role
/// again). Returns whether it still watches.
fn give_up(w: &Watch, me: usize) -> bool {
    // ORDERING: store, fence, load: store buffering 2 (module docs), with
    // `kept_private`'s fence.
    w.watcher.store(NOBODY, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    if !w.any_private(Some(me)) {
        return false;
    }
    w.watcher
        .compare_exchange(NOBODY, me, Ordering::SeqCst, Ordering::Relaxed)
        .is_ok()
}

/// The watcher `me` leaves its idle period for work: the role goes, and
/// if private work is about, a parked worker is claimed and notified to
/// take it over. Private work is another worker's, or the watcher's own
/// private queue (`holds_queue`: the batch it woke up with, beyond the
/// task it runs first, which would otherwise wait behind that task with
/// nobody watching). A batch of one task (a request at light load) wakes
/// nobody here. Returns that worker and what its notify did.
pub fn leave<T>(
    rt: &impl Workers<T>,
    w: &Watch,
    me: usize,
    holds_queue: bool,
    watching: &mut bool,
) -> Option<(usize, Notified)> {
    if !std::mem::take(watching) {
        return None;
    }
    // ORDERING: store, fence, load: store buffering 2 (module docs), with
    // `kept_private`'s fence; the fence also orders the load of the
    // `parked` set in `wake_watcher`.
    w.watcher.store(NOBODY, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    if !holds_queue && !w.any_private(Some(me)) {
        return None;
    }
    wake_watcher(rt, me)
}
