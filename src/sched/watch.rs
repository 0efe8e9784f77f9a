//! The watch over private batches: work conservation for the I/O driver's
//! private batch queues ([`Watch`]). Parked workers sleep at most a tick
//! and take the batches of an owner that is stuck or behind; here are the
//! owner's and the leavers' checks ([`before_sleep`], [`leave`],
//! [`left_poller`]), the long-poll look, and the call made for a timer
//! ([`cover_timer`]). The protocol, the alternatives it was measured
//! against, and its store buffering 1-4: src/sched/README.md, "The watch
//! over private batches".

// The watch works for the I/O driver's batches: without the driver only
// its owner-side steps are called (with nothing private, they return).
#![cfg_attr(not(feature = "io"), allow(dead_code))]

use std::ops::Range;

use crossbeam_utils::CachePadded;

use crate::sched::push::Workers;
use crate::sched::sleepers::WorkerSet;
use crate::sched::park::Notified;
use crate::sync::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// At most this many workers watch at once (src/sched/README.md, watch step 2).
pub const MAX_WATCHERS: usize = 2;

/// A poll that has run this long holds up the private work behind it: a
/// watcher that sees the owner's poll count unchanged since a look this long
/// ago takes that work (src/sched/README.md, "Long polls"). A quarter of the
/// kernel's `migration_cost`: a hello-world request costs a few
/// microseconds, so a poll of this length is a hundred requests' wait.
pub const LONG_POLL_NS: u64 = 250_000;

/// How long a worker keeps watching after private work was last made or
/// seen.
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
    /// How many workers watch (sleep at most a tick while private work
    /// may exist).
    watchers: CachePadded<AtomicUsize>,
    /// Per worker: claimed by an owner's check (or a leaving watcher) to
    /// watch ([`wake_watcher`]); cleared at its next `before_sleep`
    /// (whether it then watches or finds the count full) or when it leaves.
    called: Box<[CachePadded<AtomicBool>]>,
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
    /// The watchers' tick (ns; 0 until the first watcher): shared by them
    /// and kept across their sleeps, so that a quiet runtime keeps the long
    /// tick however its watchers come and go ([`next_tick_ns`]).
    tick_ns: AtomicU64,
    /// Per worker: its poll count when a watcher last saw it change, and
    /// when (the long-poll look, README "Long polls").
    looked: Box<[CachePadded<Look>]>,
    /// When the tick of the last watcher to go to sleep ends (ns on the
    /// runtime's clock): whether a timer would wait for it
    /// ([`cover_timer`]).
    until: CachePadded<AtomicU64>,
    all: Range<usize>,
}

/// What watchers last saw of one worker's poll count ([`Watch::for_each_stale`]).
#[derive(Debug)]
struct Look {
    polls: AtomicU64,
    at: AtomicU64,
    /// The owner's CPU time (ns) at `at`.
    cpu: AtomicU64,
}

/// Why [`Watch::for_each_stale`] found a worker's private work stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stale {
    /// Its oldest private task came more than `migration_cost` ago.
    Aged,
    /// The worker has been in one poll since a look at least a tick ago:
    /// its private work waits behind a long poll.
    LongPoll,
}

impl Watch {
    /// The watch of `n` workers; `groups` start words of the `private` set
    /// (the LLCs, as for the other sets).
    pub fn new(n: usize, groups: &[Range<usize>]) -> Self {
        Watch {
            watchers: CachePadded::new(AtomicUsize::new(0)),
            called: (0..n)
                .map(|_| CachePadded::new(AtomicBool::new(false)))
                .collect(),
            private: WorkerSet::new(n, groups),
            since: (0..n)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            seen: CachePadded::new(AtomicU64::new(0)),
            tick_ns: AtomicU64::new(0),
            looked: (0..n)
                .map(|_| {
                    CachePadded::new(Look {
                        // No count yet: the first look records one.
                        polls: AtomicU64::new(u64::MAX),
                        at: AtomicU64::new(0),
                        cpu: AtomicU64::new(0),
                    })
                })
                .collect(),
            until: CachePadded::new(AtomicU64::new(0)),
            all: 0..n,
        }
    }

    /// A watcher goes to sleep until `ns` (its tick's end).
    pub fn sleeps_until(&self, ns: u64) {
        // Relaxed: a heuristic's input (`cover_timer`); of two watchers
        // sleeping, the last one's tick is kept.
        self.until.store(ns, Ordering::Relaxed);
    }

    /// The watcher's current tick, in ns (at least [`min_tick_ns`]).
    pub fn tick_ns(&self, migration_cost_ns: u64) -> u64 {
        // Relaxed: a heuristic. Every watcher writes it after its tick
        // (`ticked`): an update lost to another's only shifts when the
        // next tick ends, and N watchers taking nothing back it off N
        // times as fast.
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

    /// How many workers watch (a snapshot).
    // Used by the loom models (loom-tests/).
    #[cfg_attr(not(loom), allow(dead_code))]
    pub fn watchers(&self) -> usize {
        self.watchers.load(Ordering::Relaxed)
    }

    /// Whether worker `me` was called to watch and has not yet watched or
    /// left (its own flag: `Relaxed`, set before the notify that woke it).
    #[inline]
    pub fn called(&self, me: usize) -> bool {
        self.called[me].load(Ordering::Relaxed)
    }

    /// Clears worker `me`'s call; returns whether it was called.
    fn take_call(&self, me: usize) -> bool {
        // Relaxed: the flag is set before the notify that wakes `me`
        // (whose release/acquire orders it); cleared by `me` only.
        let called = self.called(me);
        if called {
            self.called[me].store(false, Ordering::Relaxed);
        }
        called
    }

    /// Whether a worker other than `skip` may hold private work.
    /// `Relaxed`: callers that need more fence first.
    pub fn any_private(&self, skip: Option<usize>) -> bool {
        self.private.any(&self.all, Ordering::Relaxed, skip).0
    }

    /// Calls `f` on each worker other than `me` that may hold private work
    /// that is stale at `now`: older than `migration_cost_ns` ([`Stale::Aged`]),
    /// or behind a poll that has run since a look at least `long_poll_ns`
    /// ago, on the CPU for at least half of it ([`Stale::LongPoll`];
    /// `polls(v)` is worker `v`'s poll count, `cpu(v)` its thread's CPU
    /// time in ns).
    /// Returns whether it saw any worker's private work.
    // Each input is a separate fact of the look (clippy counts 8); a struct
    // would only name them twice.
    #[allow(clippy::too_many_arguments)]
    pub fn for_each_stale(
        &self,
        me: usize,
        now: u64,
        migration_cost_ns: u64,
        long_poll_ns: u64,
        polls: impl Fn(usize) -> u64,
        cpu: impl Fn(usize) -> u64,
        mut f: impl FnMut(usize, Stale),
    ) -> bool {
        let stale_before = now.saturating_sub(migration_cost_ns);
        let mut seen = false;
        self.private
            .scan(self.all.clone(), Ordering::Relaxed, Some(me), |v| {
                seen = true;
                // The long poll first: it marks the task a hog (the owner's
                // `run_task`), however old the batch.
                if self.looked[v].same_poll(polls(v), now, long_poll_ns, || cpu(v)) {
                    f(v, Stale::LongPoll);
                } else if self.since[v].load(Ordering::Relaxed) < stale_before {
                    f(v, Stale::Aged);
                }
                false
            });
        seen
    }
}

impl Look {
    /// Whether the count `polls` is the one a look saw at least
    /// `long_poll_ns` before `now`; a changed count is recorded with `now`.
    /// Relaxed: a heuristic's input, written by whichever watcher looks (two
    /// watchers racing record one of their looks; a stale record only moves
    /// the take by a tick).
    ///
    /// `cpu()` is the owner thread's CPU time: a count unchanged for
    /// `long_poll_ns` is a long poll only if the owner was on the CPU for
    /// three quarters of that time. An owner the OS preempted (on a small machine, beside a load
    /// generator) has not moved its count either, but taking its private
    /// work spreads batches that it resumes a moment later (2-worker
    /// hello-world HTTP fell to 0.82 of tokio: BENCHMARKS.md); its work is
    /// taken once aged, as before.
    fn same_poll(&self, polls: u64, now: u64, long_poll_ns: u64, cpu: impl Fn() -> u64) -> bool {
        if self.polls.load(Ordering::Relaxed) == polls {
            let ran = now.saturating_sub(self.at.load(Ordering::Relaxed));
            let on_cpu = cpu().saturating_sub(self.cpu.load(Ordering::Relaxed));
            return ran >= long_poll_ns && on_cpu.saturating_mul(4) >= ran.saturating_mul(3);
        }
        self.polls.store(polls, Ordering::Relaxed);
        self.at.store(now, Ordering::Relaxed);
        self.cpu.store(cpu(), Ordering::Relaxed);
        false
    }
}

/// A watcher's take from a worker whose private work is stale: its LIFO
/// slot's task, then everything its private batch queue holds, pushed onto
/// the watcher's deque `into` (whose pusher's check the caller runs).
/// Every take is a swap or a steal, so the owner, leaving its poll
/// meanwhile, and the watcher never both get a task (loom:
/// `loom-tests/tests/long_poll.rs`). Returns how many tasks it moved.
pub fn take_private<T: crate::sched::queue::OnePtr>(
    lifo: &crate::sched::queue::Slot<T>,
    batch: &crate::sched::queue::Stealer<T>,
    into: &crate::sched::queue::Local<T>,
) -> usize {
    let mut n = 0;
    if let Some(t) = lifo.take() {
        into.push(t);
        n += 1;
    }
    loop {
        match batch.steal() {
            crate::sched::queue::Steal::Success(t) => {
                into.push(t);
                n += 1;
            }
            crate::sched::queue::Steal::Retry => continue,
            crate::sched::queue::Steal::Empty => return n,
        }
    }
}

/// The owner `me`'s batch left tasks private (its LIFO slot, its private
/// queue) at `now`, where it held none: the owner's check. Its stamp and
/// bit, then, if nobody watches, a parked worker claimed, called and
/// notified, to watch. Returns that worker and what its notify did.
pub fn kept_private<T>(
    rt: &impl Workers<T>,
    w: &Watch,
    me: usize,
    now: u64,
) -> Option<(usize, Notified)> {
    // Relaxed: a heuristic's input (a stale stamp only makes a watcher
    // take a batch a tick early or late).
    w.since[me].store(now, Ordering::Relaxed);
    if w.all.len() == 1 {
        // Alone, nobody can watch (`before_sleep`): no bit, no fence.
        return None;
    }
    // Relaxed: a heuristic (how long watchers linger). An owner's check
    // renews it, so that workers keep watching while batches keep leaving
    // private work, however briefly each does (one task a request, at
    // light load).
    w.seen.store(now, Ordering::Relaxed);
    // ORDERING: the bit, then the fence, then the count and the `parked`
    // set: store buffering 1 and 2 (README) against the fences of a
    // sleeper (`before_sleep`'s) and of `leave`/`give_up`.
    w.private.insert_rmw(me, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    look_soon(rt, w, me)
}

/// After the caller's fence: with no watcher counted, a parked worker is
/// claimed, called and notified, to watch. (Calling one also when the
/// counted watchers sleep on a backed-off tick made every batch after a
/// quiet moment a wake: 2-worker hello-world HTTP fell to 0.75-0.82 of
/// tokio's throughput at 1.4-1.5 of its CPU per request: src/sched/README.md,
/// "Long polls".)
fn look_soon<T>(rt: &impl Workers<T>, w: &Watch, me: usize) -> Option<(usize, Notified)> {
    if w.watchers.load(Ordering::Relaxed) > 0 {
        return None;
    }
    wake_watcher(rt, w, me)
}

/// Worker `me` left the poller it slept in, to run work (the poller is
/// released): if a worker sleeps on its thread meanwhile, nobody may be
/// in the poller while `me` is in a long poll, and readiness, the outside
/// threads' timers and the other workers' I/O would wait for it ("Long
/// polls"). So, unless a watcher is counted (it takes the free poller at
/// its next sleep), a parked worker is called to watch: it sleeps in the
/// poller if it is still free. Returns that worker and what
/// its notify did.
pub fn left_poller<T>(rt: &impl Workers<T>, w: &Watch, me: usize) -> Option<(usize, Notified)> {
    if w.all.len() == 1 {
        return None;
    }
    // ORDERING: the poller's release (the unlock of its lock, before this
    // call), the fence, then the count and the `parked` set: store
    // buffering 4 (README), against a worker going to sleep (its
    // `parked` bit, the fence of `before_poller`, its try-lock of the
    // poller).
    fence(Ordering::SeqCst);
    look_soon(rt, w, me)
}

/// Worker `me`, awake and not counted as a watcher, is about to poll a
/// task having put a timer due at `at` (ns on the runtime's clock) on its
/// wheel while nobody slept in poller 0, where it would be covered
/// (time/ops.rs, `take_uncovered`): if that poll runs long, nobody fires
/// the timer until a worker sleeps there again. Unless a watcher is
/// counted whose tick ends by `at` (it takes the poller then), a parked
/// worker is called to watch: it sleeps in poller 0, until `at`. Costs a
/// wake only for a worker that sets a timer and then polls another task
/// while poller 0 is empty (a worker that sleeps next covers its timers
/// itself). Returns that worker and what its notify did.
pub fn cover_timer<T>(
    rt: &impl Workers<T>,
    w: &Watch,
    me: usize,
    at: u64,
) -> Option<(usize, Notified)> {
    // Relaxed: heuristics; a stale read moves the timer's fire by a tick
    // at most, or makes a needless wake.
    if w.all.len() == 1
        || (w.watchers.load(Ordering::Relaxed) > 0 && w.until.load(Ordering::Relaxed) <= at)
    {
        return None;
    }
    wake_watcher(rt, w, me)
}

/// A worker whose `parked` bit is set is about to try the pollers' locks
/// (`PollerSleep::sleep`): the fence of store buffering 4 (README).
#[inline]
pub fn before_poller() {
    // ORDERING: pairs with `left_poller`'s fence (store buffering 4): the
    // `parked` bit, this fence, then the try-lock; either this worker takes
    // the poller its holder released, or the holder sees the bit and calls
    // a parked worker.
    fence(Ordering::SeqCst);
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

/// Claims a parked worker (after the caller's fence), calls it and notifies
/// it: it searches, finds nothing it may take, and watches when it parks
/// again (or, finding work, passes the call on: [`leave`]).
fn wake_watcher<T>(rt: &impl Workers<T>, w: &Watch, near: usize) -> Option<(usize, Notified)> {
    let all = rt.wake_spans(near).last()?.clone();
    let v = rt.sleepers().wake_in(&all, near, || {
        // The claim was undone: pushers may have skipped their wake while
        // it counted a searcher, so their check runs again.
        crate::sched::push::notify_parked(rt, near);
    })?;
    // Relaxed: the notify's release publishes it to `v`'s wake-up.
    w.called[v].store(true, Ordering::Relaxed);
    Some((v, rt.mailbox(v).parker.notify()))
}

/// Worker `me`, parked (its `parked` bit set and its re-check fence made),
/// is about to sleep at `now`: returns whether it watches (sleeps at most a
/// tick, then looks for stale private queues). `watching` is its record
/// of being counted a watcher.
pub fn before_sleep(w: &Watch, me: usize, now: u64, watching: &mut bool) -> bool {
    if w.all.len() == 1 {
        // Alone, a worker has nobody's private work to watch.
        return false;
    }
    let called = w.take_call(me);
    // ORDERING: the `parked` bit (set before this call), the fence, then
    // `private`: store buffering 1 (README), with `kept_private`'s
    // fence. (The idle sequence's re-check fences only when no searcher is
    // left.)
    fence(Ordering::SeqCst);
    let private = w.any_private(Some(me));
    if private {
        // Relaxed: heuristics (how long watchers linger; the tick, which
        // goes back to its first while private work is seen: "Long polls").
        w.seen.store(now, Ordering::Relaxed);
    }
    let recent = private || now.saturating_sub(w.seen.load(Ordering::Relaxed)) < LINGER_NS;
    if *watching {
        if recent || called {
            return true;
        }
        *watching = give_up(w, me);
        return *watching;
    }
    if !recent && !called {
        return false;
    }
    // After the fence above: a full count read in `claim` is store
    // buffering 3 (README), against the last watcher's leave.
    *watching = claim(w);
    *watching
}

/// Counts the caller a watcher unless [`MAX_WATCHERS`] already are;
/// returns whether it did. Called after a `fence(SeqCst)`.
fn claim(w: &Watch) -> bool {
    let mut c = w.watchers.load(Ordering::Relaxed);
    loop {
        if c >= MAX_WATCHERS {
            return false;
        }
        // ORDERING: SeqCst, but the count needs no fence after it: an
        // owner that reads it before it lands wakes a parked worker
        // (README).
        match w
            .watchers
            .compare_exchange_weak(c, c + 1, Ordering::SeqCst, Ordering::Relaxed)
        {
            Ok(_) => return true,
            Err(now) => c = now,
        }
    }
}

/// The watcher `me` stops watching after [`LINGER_NS`] without private
/// work: unless, after the fence, it finds the count at zero and a bit set
/// (it watches again). Returns whether it still watches.
fn give_up(w: &Watch, me: usize) -> bool {
    // ORDERING: decrement, fence, loads: store buffering 2 (README),
    // with `kept_private`'s fence.
    w.watchers.fetch_sub(1, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    if w.watchers.load(Ordering::Relaxed) > 0 || !w.any_private(Some(me)) {
        return false;
    }
    // Capped: a sleeper may have claimed since the load.
    claim(w)
}

/// Worker `me`, a watcher, called to watch, or claimed by a waker in this
/// idle period (`claimed`), leaves its idle period for work: it is no
/// longer counted, and if then nobody watches while private work is about,
/// a parked worker is claimed and called to watch in its place. Private
/// work is another worker's, or its own batch (`holds_queue`: the batch it
/// woke up with, beyond the task it runs first, which would otherwise wait
/// behind that task with nobody watching). A batch of one task run first
/// (a request at light load) wakes nobody here. Returns that worker and
/// what its notify did.
///
/// A claimed worker cannot tell an owner's call from a pusher's wake: the
/// owner marks the call after its claim, and a worker that left its sleep
/// on its own (an event in its poller, a re-check's find) may leave for
/// work before the mark lands. So a claimed worker that sees private work
/// checks as a called one does. The claim orders the owner's bit before
/// this look: the owner set it before its claim, whose clear this
/// worker's `Sleepers::leave_parked` read with acquire.
pub fn leave<T>(
    rt: &impl Workers<T>,
    w: &Watch,
    me: usize,
    holds_queue: bool,
    claimed: bool,
    watching: &mut bool,
) -> Option<(usize, Notified)> {
    let called = w.take_call(me);
    let counted = std::mem::take(watching);
    let owes_check = counted || called || (claimed && w.any_private(Some(me)));
    if !owes_check {
        return None;
    }
    // ORDERING: decrement, fence, loads: store buffering 2 (README),
    // with `kept_private`'s fence; the fence also orders the load of the
    // `parked` set in `wake_watcher`.
    if counted {
        w.watchers.fetch_sub(1, Ordering::SeqCst);
    }
    fence(Ordering::SeqCst);
    if w.watchers.load(Ordering::Relaxed) > 0 {
        return None;
    }
    if !holds_queue && !w.any_private(Some(me)) {
        return None;
    }
    wake_watcher(rt, w, me)
}

#[cfg(all(test, not(loom)))]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    const COST: u64 = 500_000;

    /// Worker 0 with private work that came at `since`, seen by worker 1.
    fn watch_with_private(since: u64) -> Watch {
        let w = Watch::new(2, &[0..2]);
        w.private.insert_rmw(0, Ordering::Relaxed);
        stamp(&w, 0, since);
        w
    }

    fn look(w: &Watch, now: u64, polls: u64) -> (Vec<(usize, Stale)>, bool) {
        let mut found = Vec::new();
        let seen = w.for_each_stale(
            1,
            now,
            COST,
            LONG_POLL_NS,
            |_| polls,
            // The owner on the CPU all along: its CPU time is the clock.
            |_| now,
            |v, why| found.push((v, why)),
        );
        (found, seen)
    }

    #[test]
    fn a_fresh_batch_behind_a_poll_that_does_not_end_is_taken_after_a_long_poll() {
        let t0 = 10 * COST;
        let w = watch_with_private(t0);
        // The first look records the count: fresh and moving, nothing taken.
        assert_eq!(look(&w, t0 + 1_000, 7), (vec![], true));
        // The same count less than LONG_POLL_NS later: not yet.
        assert_eq!(look(&w, t0 + LONG_POLL_NS, 7), (vec![], true));
        // The same count LONG_POLL_NS after the first look: taken, though
        // the batch is younger than migration_cost.
        let now = t0 + 1_000 + LONG_POLL_NS;
        assert!(now - t0 < COST);
        assert_eq!(look(&w, now, 7), (vec![(0, Stale::LongPoll)], true));
    }

    #[test]
    fn a_preempted_owner_keeps_its_fresh_batch() {
        let t0 = 10 * COST;
        let w = watch_with_private(t0);
        let mut found = Vec::new();
        // The count does not move, and neither does the owner's CPU time
        // (all looks within `migration_cost` of the batch: it is not aged).
        for now in [
            t0 + 1_000,
            t0 + 1_000 + LONG_POLL_NS,
            t0 + 1_000 + LONG_POLL_NS * 3 / 2,
        ] {
            w.for_each_stale(
                1,
                now,
                COST,
                LONG_POLL_NS,
                |_| 7,
                |_| 5_000,
                |v, why| found.push((v, why)),
            );
        }
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn an_owner_that_keeps_polling_keeps_its_fresh_batch() {
        let t0 = 10 * COST;
        let w = watch_with_private(t0);
        for i in 0..4 {
            let now = t0 + i * LONG_POLL_NS / 2;
            assert_eq!(look(&w, now, 100 + i), (vec![], true), "look {i}");
        }
    }

    #[test]
    fn an_aged_batch_is_taken_and_no_private_work_is_reported() {
        let w = watch_with_private(0);
        assert_eq!(look(&w, 2 * COST, 1), (vec![(0, Stale::Aged)], true));
        let empty = Watch::new(2, &[0..2]);
        assert_eq!(look(&empty, 2 * COST, 1), (vec![], false));
    }
}
