//! Where a woken task goes: the mechanism around the wakeup placement
//! policy (`policy/wake.rs`'s `select_idle_sibling`) and the external spawn
//! placement (`policy/spawn_place.rs`'s `find_idlest_group`). The policies are pure
//! functions over views; the views over the runtime's shared state, the
//! wake path of every task (`schedule`) and its hand-off to the wake
//! protocol live here.
//!
//! A wake first asks whether a search could find anything: when no worker
//! of the waker's LLC is idle and the task's previous worker is not idle
//! either (one load of the idle mask per 64 workers, [`idle_near`]), the
//! task goes to the waker's LIFO slot (tokio's `schedule_local`), or from
//! outside to the previous worker's inbox, with no search and no look at
//! other workers' queues: the placement a search would fall back to, at
//! the cost of a load, when every worker is busy (message passing under
//! load). The search runs only when an idle worker may exist.

use std::ops::Range;

use crate::policy::load::Load;
use crate::policy::spawn_place::PlacementView;
use crate::policy::spawn_place::{External, ExternalView};
use crate::policy::wake::{
    prop_depth, select_idle_sibling, IdleView, Outcome, SisConfig, SCAN_COST_SAMPLE,
};
use crate::sched::park::{Notified, NO_WORKER};
use crate::sched::push::{self, Placed};
use crate::stats::WorkerCounters;
use crate::sync::Ordering;
use crate::task::Runnable;
use crate::trace::Decision;
use crate::tunables::SisMode;
use crate::worker;
use crate::worker::shared::Shared;
use crate::worker::{deliver, deliver_to_woken, wake_spans, with_core};

/// The runtime's idle view.
struct RuntimeIdle<'a>(&'a Shared);

impl IdleView for RuntimeIdle<'_> {
    fn is_idle(&self, w: usize) -> bool {
        self.0.sleepers.idle.contains(w)
    }
    fn claim(&self, w: usize) -> bool {
        // Relaxed: a placement hint (sched/sleepers.rs).
        self.0.sleepers.idle.remove(w, Ordering::Relaxed)
    }
    fn has_idle_cores(&self, w: usize) -> bool {
        self.0.llc_idle_cores[self.0.workers[w].llc_hint].load(Ordering::Relaxed)
    }
    fn clear_idle_cores(&self, w: usize) {
        let h = &self.0.llc_idle_cores[self.0.workers[w].llc_hint];
        if h.load(Ordering::Relaxed) {
            h.store(false, Ordering::Relaxed);
        }
    }
    fn find_idle(&self, span: &Range<usize>, from: usize, max: usize) -> (Option<usize>, usize) {
        self.0
            .sleepers
            .idle
            .find(span, from, max, Ordering::Relaxed, None)
    }
}

fn queue_loaded(shared: &Shared, w: usize) -> bool {
    let ws = &shared.workers[w];
    !ws.stealer.is_empty() || !ws.mailbox.inbox.is_empty()
}

/// The schedule function of every task: runs when a task is woken.
pub(crate) fn schedule(shared: &Shared, r: Runnable, info: async_task::ScheduleInfo) {
    if shared.poll_timing {
        stamp_runnable(shared, &r);
    }
    // After shutdown: buried, not dropped here (we are inside a waker
    // call, see Shared::bury).
    let Some(r) = push::admit(shared, r) else {
        return;
    };
    worker::with_core(shared, |cur| match cur {
        Some((me, Some(core))) => schedule_on_core(shared, me, core, r, info),
        Some((me, None)) => {
            // The worker's core is borrowed by its own code: use its inbox.
            let stats = &shared.workers[me].stats;
            WorkerCounters::bump(&stats.wakes_by_task, 1);
            shared
                .trace
                .wake(Some(me), r.metadata(), me, Decision::Inbox);
            worker::deliver(shared, Some(me), me, r);
        }
        None => {
            // On the tokio bridge's thread, with every worker asleep: the
            // bridge runs it (tokio_compat.rs).
            #[cfg(feature = "tokio-compat")]
            let Some(r) = run_here(shared, r) else {
                return;
            };
            schedule_foreign(shared, r)
        }
    })
}

/// A wake on the tokio bridge's thread, made by tokio's code (a tokio
/// task, such as reqwest's connection task, completing what an hwsched
/// task waits on), while every worker of `shared` sleeps: delivering it
/// would cost a worker's wake-up, and the task's next call into tokio a
/// wake of the bridge back. So the bridge polls the task itself, as a CPU
/// runs a wakee whose waker is about to sleep (the kernel's sync wake-up):
/// into the bridge's one-task slot, and its runner woken (src/tokio_compat.rs,
/// "Running a woken task on the bridge"). Returns the task when it is not
/// taken: another thread, another runtime, a wake made by what the bridge
/// polls, a task kept off the bridge, a worker awake, no runner, the slot
/// full, or the runtime shutting down.
#[cfg(feature = "tokio-compat")]
fn run_here(shared: &Shared, r: Runnable) -> Option<Runnable> {
    use crate::worker::bridge;
    let Some(inline) = shared.bridge_slot.as_deref() else {
        return Some(r);
    };
    let meta = r.metadata();
    if !bridge::is_bridge_of(inline)
        || bridge::polling()
        || meta.off_bridge.load(Ordering::Relaxed)
        || shared.sleepers.counts().awake != 0
        || bridge::site_off(meta.spawned_at, || shared.now_ns())
    {
        return Some(r);
    }
    let Some(runner) = inline.runner.lock().clone() else {
        return Some(r);
    };
    let mut slot = inline.slot.lock();
    // The flag under the slot's lock: the shutdown's drain locks it after
    // setting the flag, so either this sees the flag (and the wake goes
    // the way every wake goes after shutdown) or the drain sees the task.
    if slot.is_some() || shared.is_shutdown() {
        return Some(r);
    }
    *slot = Some(r);
    drop(slot);
    WorkerCounters::bump_shared(&shared.external.wakes_foreign, 1);
    runner.wake();
    None
}

/// With poll timing on, when `r` became runnable (timing.rs, run-queue
/// delay).
#[cold]
pub(crate) fn stamp_runnable(shared: &Shared, r: &Runnable) {
    // Relaxed: statistics; the push that follows orders it before the poll.
    r.metadata()
        .runnable_at
        .store(shared.now_ns().max(1), std::sync::atomic::Ordering::Relaxed);
}

/// A wake on worker `me` whose core is free: the wake with nobody idle is
/// inlined here, the rest out of line. The rare paths (a foreign thread, a
/// borrowed core) are separate functions, so that this one, the path of
/// every message passed between tasks, inlines into [`schedule`].
#[inline(always)]
fn schedule_on_core(
    shared: &Shared,
    me: usize,
    core: &mut worker::Core,
    r: Runnable,
    info: async_task::ScheduleInfo,
) {
    let stats = &shared.workers[me].stats;
    match core.wake_mode {
        worker::WakeMode::Place => {
            WorkerCounters::bump(&stats.wakes_by_task, 1);
            place_from_worker(shared, me, core, r, info);
        }
        worker::WakeMode::Batch => {
            // A wake made by the poller or a timer on this worker: the
            // batch stays here, one decision after it (io/mod.rs).
            WorkerCounters::bump(&stats.wakes_by_driver, 1);
            shared
                .trace
                .wake(Some(me), r.metadata(), me, Decision::Batch);
            core.push_batch(shared, r);
        }
        worker::WakeMode::Yield => {
            // A task whose cooperative budget ran out (io/coop.rs): to
            // the back of the deque, behind its neighbours.
            WorkerCounters::bump(&stats.coop_yields, 1);
            shared
                .trace
                .wake(Some(me), r.metadata(), me, Decision::CoopYield);
            core.push_yield(shared, r);
        }
    }
    if core.suspended.is_some() {
        // Woken by the poller while this worker sleeps in it: if the
        // task landed on this worker, it wakes itself (io/mod.rs).
        core.wake_self_in_driver(shared);
    }
}

/// A wake from outside the runtime (another thread, or a worker of
/// another runtime): the target is the task's previous worker.
#[inline(never)]
fn schedule_foreign(shared: &Shared, r: Runnable) {
    WorkerCounters::bump_shared(&shared.external.wakes_foreign, 1);
    let meta = r.metadata();
    let last = meta.last_worker.load(Ordering::Relaxed);
    let target = if last == NO_WORKER { 0 } else { last };
    if !idle_near(shared, &shared.topology.llc_span(target), last) {
        // Nobody to find: to the previous worker, as the search's
        // fallback would.
        WorkerCounters::bump_shared(&shared.external.wake_none_idle, 1);
        shared.trace.wake(None, meta, target, Decision::NoneIdle);
        worker::deliver(shared, None, target, r);
        return;
    }
    let t = &shared.tunables;
    let scan_nr = match t.sis {
        SisMode::Prop => prop_depth(
            shared.topology.llc_span(target).len(),
            2 * t.migration_cost.as_nanos() as u64,
            0,
        ),
        _ => scan_depth(shared, target, 0, 0),
    };
    let (c, _, d) = place(shared, &shared.external, true, meta, last, target, scan_nr);
    shared.trace.wake(None, meta, c, d);
    worker::deliver(shared, None, c, r);
}

/// Places a task woken by code on worker `me` (a task's poll or drop):
/// the yield and the wake with nobody idle here, inlined into the schedule
/// path; the search in [`place_searching`].
#[inline]
fn place_from_worker(
    shared: &Shared,
    me: usize,
    core: &mut worker::Core,
    r: Runnable,
    info: async_task::ScheduleInfo,
) {
    let last = r.metadata().last_worker.load(Ordering::Relaxed);
    if info.woken_while_running && last == me {
        // A self-wake: to the back of the local deque; yield_now's behind
        // the inbox too (Core::push_yield).
        if crate::context::take_yield() {
            shared
                .trace
                .wake(Some(me), r.metadata(), me, Decision::Yield);
            core.push_yield(shared, r);
        } else {
            shared
                .trace
                .wake(Some(me), r.metadata(), me, Decision::SelfWake);
            core.push_local(shared, r);
        }
        return;
    }
    let llc_idle = match core.llc_word {
        Some(wm) => shared.sleepers.idle.any_of(wm),
        None => shared.sleepers.idle.any_in(&core.llc),
    };
    if !llc_idle && !prev_idle_elsewhere(shared, &core.llc, last) {
        // Every worker the placement could choose is busy: the wakee waits
        // here, in the LIFO slot (tokio's `schedule_local`), with no search
        // and no look at another worker's queues. A worker that goes idle
        // while this one is still in its poll takes it from the slot
        // (src/sched/README.md, "The LIFO slot").
        WorkerCounters::bump(&shared.workers[me].stats.wake_none_idle, 1);
        shared
            .trace
            .wake(Some(me), r.metadata(), me, Decision::NoneIdle);
        core.push_lifo(shared, r);
        return;
    }
    place_searching(shared, me, core, r, last);
}

/// Places a task woken on worker `me` when an idle worker may exist
/// (`last`: the task's previous worker): `wake_affine`, then
/// `select_idle_sibling`.
#[inline(never)]
fn place_searching(shared: &Shared, me: usize, core: &mut worker::Core, r: Runnable, last: usize) {
    let meta = r.metadata();
    let stats = &shared.workers[me].stats;
    // wake_affine: the waker's worker, unless prev is idle and shares
    // the waker's LLC, or the waker is loaded and prev is not (the policy's
    // `wake_affine`).
    let target = crate::policy::wake::wake_affine(
        &shared.topology,
        me,
        (last != NO_WORKER).then_some(last),
        || !core.local.is_empty(),
        |p| shared.sleepers.idle.contains(p),
        |p| queue_loaded(shared, p),
    );
    if target == me && shared.workers[me].lifo.is_empty() && core.local.is_empty() {
        // The waker's worker has nothing else queued: the wakee runs as
        // soon as the waker yields, with a warm cache and no cross-worker
        // hand-off. This is the kernel's sync wakeup in wake_affine_idle
        // (`sync && cpu_rq(this_cpu)->nr_running == 1` -> this_cpu), and
        // what tokio's LIFO slot does for a message reply. A second wake
        // while this one waits in the LIFO slot goes through
        // select_idle_sibling and spreads.
        WorkerCounters::bump(&stats.wake_local, 1);
        shared.trace.wake(Some(me), meta, me, Decision::Lifo);
        core.push_lifo(shared, r);
        return;
    }
    let prev = if last == NO_WORKER { target } else { last };
    // SIS_PROP's scan cost is sampled, one wake in SCAN_COST_SAMPLE: a
    // clock read on every wake cost more than the scan it measured.
    core.wakes = core.wakes.wrapping_add(1);
    let t0 = (shared.tunables.sis == SisMode::Prop && core.wakes % SCAN_COST_SAMPLE == 0)
        .then(|| shared.now_ns());
    let scan_nr = scan_depth(
        shared,
        target,
        core.balance.avg_idle_ns,
        core.avg_scan_cost_ns,
    );
    let (c, claimed, decision) = place(shared, stats, false, meta, prev, target, scan_nr);
    if let Some(t0) = t0 {
        let cost = shared.now_ns().saturating_sub(t0) as i64;
        let avg = core.avg_scan_cost_ns as i64;
        core.avg_scan_cost_ns = (avg + (cost - avg) / 8).max(0) as u64;
    }
    if c == me {
        WorkerCounters::bump(&stats.wake_local, 1);
        shared.trace.wake(Some(me), meta, me, decision);
        core.push_lifo(shared, r);
        return;
    }
    // Recorded before the hand-off (after it the task may be gone); a
    // deferred wake records where the task went instead, after this.
    shared.trace.wake(Some(me), meta, c, decision);
    if claimed && shared.sleepers.parked.contains(c) {
        // The idle worker chosen is parked: the deepest idle state, a
        // futex round trip to leave (where the kernel's idle CPU costs
        // an IPI). Wake it only as the one wake in flight (sched/sleepers.rs);
        // while another wake is in flight, queue the task here, where
        // the searcher finds it.
        let placed = push::wake_placed(shared, c, r, |r| {
            WorkerCounters::bump(&stats.wake_deferred, 1);
            shared
                .trace
                .wake(Some(me), r.metadata(), me, Decision::Deferred);
            core.push_local(shared, r);
        });
        match placed {
            Placed::Woken(n) => {
                shared.trace.notify(Some(me), c);
                WorkerCounters::bump(&stats.searcher_wakes, 1);
                if n == Notified::Unparked {
                    WorkerCounters::bump(&stats.unparks, 1);
                }
            }
            Placed::Deferred => {}
            Placed::Delivered(d) => worker::count_delivery(shared, Some(me), d),
        }
        return;
    }
    worker::deliver(shared, Some(me), c, r);
}

/// Whether wake placement could find an idle worker: one in `llc` (the
/// waker's LLC, or from outside the task's previous worker's), or the
/// task's previous worker `last`. One load of the idle
/// mask per 64 workers of the LLC (and one for `last` when it is in
/// another LLC), where the search it saves reads the other workers'
/// queues and scans. `Relaxed`: a placement hint, as every read of the
/// idle mask (sched/sleepers.rs); a worker that becomes idle just after finds the
/// task by stealing, or is woken by the pusher's check.
#[inline]
fn idle_near(shared: &Shared, llc: &Range<usize>, last: usize) -> bool {
    shared.sleepers.idle.any_in(llc) || prev_idle_elsewhere(shared, llc, last)
}

/// Whether the task's previous worker `last` is idle outside `llc`.
#[inline]
fn prev_idle_elsewhere(shared: &Shared, llc: &Range<usize>, last: usize) -> bool {
    last != NO_WORKER && !llc.contains(&last) && shared.sleepers.idle.contains(last)
}

/// The policy's `scan_depth` over `target`'s LLC and its load counter.
#[inline]
fn scan_depth(shared: &Shared, target: usize, avg_idle_ns: u64, avg_scan_cost_ns: u64) -> usize {
    let llc = shared.topology.llc_span(target);
    crate::policy::wake::scan_depth(
        shared.tunables.sis,
        llc.len(),
        avg_idle_ns,
        avg_scan_cost_ns,
        || shared.load.load(&llc.clone().into()).running,
    )
}

fn place(
    shared: &Shared,
    stats: &WorkerCounters,
    external: bool,
    meta: &crate::task::TaskMeta,
    prev: usize,
    target: usize,
    scan_nr: usize,
) -> (usize, bool, Decision) {
    let t = &shared.tunables;
    let cfg = SisConfig {
        recent_used: t.sis_recent_used,
        idle_core: t.sis_idle_core,
        scan_nr,
    };
    let c = select_idle_sibling(
        &shared.topology,
        &RuntimeIdle(shared),
        cfg,
        &meta.recent_used,
        prev,
        target,
    );
    let bump = |c: &crate::sync::AtomicU64, n: u64| {
        if external {
            WorkerCounters::bump_shared(c, n)
        } else {
            WorkerCounters::bump(c, n)
        }
    };
    let counter = match c.outcome {
        Outcome::Target => &stats.sis_target,
        Outcome::Prev => &stats.sis_prev,
        Outcome::RecentHit => &stats.sis_recent_hit,
        Outcome::IdleCore => &stats.sis_idle_core,
        Outcome::IdleCandidate => &stats.sis_idle_candidate,
        Outcome::ScanFound => &stats.sis_scan_found,
        Outcome::Fallback => &stats.sis_fallback,
    };
    bump(counter, 1);
    if c.recent_miss {
        bump(&stats.sis_recent_miss, 1);
    }
    if c.scanned > 0 {
        bump(&stats.sis_scanned, c.scanned as u64);
    }
    if c.words > 0 {
        bump(&stats.sis_words, c.words as u64);
    }
    let decision = match c.outcome {
        Outcome::Target => Decision::Target,
        Outcome::Prev => Decision::Prev,
        Outcome::RecentHit => Decision::RecentHit,
        Outcome::IdleCore => Decision::IdleCore,
        Outcome::IdleCandidate => Decision::IdleCandidate,
        Outcome::ScanFound => Decision::ScanFound,
        Outcome::Fallback => Decision::Fallback,
    };
    (c.worker, c.outcome != Outcome::Fallback, decision)
}

/// The runtime's view for the placement policies: its load counters and
/// idle flags ([`PlacementView`]), and for a spawn from outside the wake
/// protocol's atomics and the burst target ([`ExternalView`]).
pub(crate) struct RuntimeView<'a>(pub(crate) &'a Shared);

impl PlacementView for RuntimeView<'_> {
    #[inline]
    fn load(&self, span: &crate::topology::Span) -> Load {
        self.0.load.load(span)
    }
    #[inline]
    fn claim_idle(&self, w: usize) -> bool {
        self.0
            .sleepers
            .idle
            .remove(w, crate::sync::Ordering::Relaxed)
    }
    #[inline]
    fn is_parked(&self, w: usize) -> bool {
        self.0.sleepers.parked.contains(w)
    }
    #[inline]
    fn backlog(&self, w: usize) -> usize {
        let ws = &self.0.workers[w];
        ws.mailbox.inbox.len() + ws.stealer.len()
    }
}

thread_local! {
    /// Round-robin ticket of this thread's external spawns (see policy/spawn_place.rs).
    static SPAWN_RR: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Places a newly spawned task: on the spawning worker's own deque, or (from
/// outside) see [`deliver_from_outside`].
pub(crate) fn place_spawn(shared: &Shared, here: Option<usize>, r: Runnable) {
    if here.is_some() {
        let pushed = with_core(shared, |c| match c {
            Some((_, Some(core))) => {
                WorkerCounters::bump(&shared.workers[core.index].stats.local_spawns, 1);
                core.push_local(shared, r);
                None
            }
            _ => Some(r),
        });
        match pushed {
            None => return,
            // The core is borrowed (we are inside the worker's own code):
            // its inbox is just as good.
            Some(r) => return deliver(shared, here, here.unwrap_or(0), r),
        }
    }
    deliver_from_outside(shared, r);
}

/// Placement of a task spawned from outside the runtime: the policy's
/// [`place_external`](crate::policy::spawn_place::place_external) decides (an awake idle
/// worker, else a parked one woken to search, else the burst's target
/// while that wake is in flight, else `find_idlest_group`) over
/// [`RuntimeView`], this delivers: without a futex wake to an
/// awake worker, with the woken worker's notify to a woken one.
fn deliver_from_outside(shared: &Shared, r: Runnable) {
    let c = &shared.external;
    let rr = SPAWN_RR.with(|x| {
        let v = x.get().wrapping_add(1);
        x.set(v);
        v
    });
    match crate::policy::spawn_place::place_external(&shared.topology, &RuntimeView(shared), rr) {
        External::AwakeIdle(w) => {
            WorkerCounters::bump_shared(&c.spawn_placed_idle, 1);
            deliver(shared, None, w, r)
        }
        External::Woken(w) => {
            WorkerCounters::bump_shared(&c.spawn_placed_idle, 1);
            WorkerCounters::bump_shared(&c.searcher_wakes, 1);
            deliver_to_woken(shared, None, w, r)
        }
        External::BurstTarget(to) | External::Idlest(to) => {
            WorkerCounters::bump_shared(&c.spawn_placed_loaded, 1);
            deliver(shared, None, to, r)
        }
    }
}

/// The spawn placement policy's view of the runtime beyond the load
/// counters: the wake protocol's atomics (sched/sleepers.rs) and the burst
/// target.
impl ExternalView for RuntimeView<'_> {
    #[inline]
    fn claim_awake_idle(&self, from: usize) -> Option<usize> {
        self.0.sleepers.claim_awake_idle(from)
    }
    #[inline]
    fn needs_wake(&self) -> bool {
        self.0.sleepers.needs_wake()
    }
    #[inline]
    fn wake_one(&self, near: usize) -> Option<usize> {
        self.0.sleepers.wake_one(near, wake_spans(self.0, near)).0
    }
    #[inline]
    fn someone_asleep(&self) -> bool {
        self.0.sleepers.counts().awake < self.0.workers.len()
    }
    #[inline]
    fn burst_target(&self) -> usize {
        self.0.burst_target.load(Ordering::Relaxed)
    }
    #[inline]
    fn set_burst_target(&self, w: usize) {
        self.0.burst_target.store(w, Ordering::Relaxed);
    }
}
