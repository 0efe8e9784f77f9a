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
//! 3. When all three are empty the worker is idle: it marks itself idle,
//!    walks its levels ([`balance`](crate::balance)), then asks the
//!    [`governor`](crate::governor) whether to spin or park, and waits
//!    through its [`Mailbox`] ([`park`](crate::park): no lost wakeups). Work
//!    arriving ends the idle period, whose length feeds `avg_idle`.
//! 4. Its load contribution is published to the shared group counters at
//!    most once per `load_update_interval` ([`load`](crate::load)), and
//!    always before it sleeps.
//!
//! # Shutdown
//!
//! 1. The runtime sets the shutdown flag and notifies every parker.
//! 2. A worker sees the flag at the top of its loop or when its wait
//!    returns, and leaves the loop (a task running at that moment finishes
//!    its poll first).
//! 3. On the way out it drops every task in its LIFO slot and local deque,
//!    each drop inside `catch_unwind` so a panicking destructor cannot abort
//!    the exit.
//! 4. The runtime joins the workers, drops what remains in the inboxes, and
//!    wakes every task registered as waiting (task.rs). A task found after
//!    the flag is set (woken, or delivered concurrently with the shutdown:
//!    see [`Mailbox::deliver_or_drain`]) is *buried*, not dropped where it
//!    was found: that may be inside a waker call whose caller holds a lock
//!    the task's destructor needs. The runtime then reaps the buried tasks,
//!    outside any wake, until no drop buries another; later burials (a
//!    worker that outlived `shutdown_timeout`, a user's waker) drop at once.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use crate::balance::{BalanceState, KICK_CHECK_EVERY};
use crate::governor::{Choice, Governor};
use crate::load::{Contribution, Publish};
use crate::park::{Mailbox, Notified, Wait};
use crate::queue::{Local, Steal};
use crate::runtime::Shared;
use crate::stats::{WorkerCounters, MAX_LEVELS};
use crate::sync::{fence, Ordering};
use crate::task::Runnable;
use crate::topology::pin_current_thread;
use crate::tunables::StealWalk;
use std::sync::Arc;

/// Most polls in a row from the LIFO slot before the deque gets a turn
/// (tokio's `MAX_LIFO_POLLS_PER_TICK`): a pair of tasks waking each other
/// cannot starve the rest of the queue.
pub const MAX_LIFO_POLLS: u32 = 3;

/// Every this many polls the inbox is checked first (tokio and Go use 61: a
/// prime, so it does not fall in step with periodic workloads).
pub const INBOX_CHECK_INTERVAL: u32 = 61;

/// How long a worker parks, at most, while the runtime's overload flag is
/// set: its stand-in for the kernel's periodic (tick) balance, which pulls
/// work that a busy CPU's queue holds even when nobody kicks. One load
/// interval's worth; the flag is cleared by the first walk that finds
/// nothing, so an idle runtime parks without a timeout.
const OVERLOAD_PARK_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1);

/// Polls or pushes between two (rate-limited) load publishes.
const PUBLISH_CHECK_EVERY: u32 = 32;

/// A worker's own state, touched only by its thread.
pub(crate) struct Core {
    pub(crate) index: usize,
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
    pushes_since_kick_check: u32,
    last_kick_ns: u64,
    /// The worker this one last stole from: tried first on the next idle
    /// walk, before the load-counter gate (see `walk`).
    last_victim: Option<usize>,
    /// Whether the last walk was cut short by the cost bound.
    last_walk_cut: bool,
}

/// What the thread-local context points at.
pub(crate) struct WorkerCtx {
    pub(crate) shared: Arc<Shared>,
    pub(crate) index: usize,
    pub(crate) core: RefCell<Core>,
}

thread_local! {
    static CURRENT: Cell<*const WorkerCtx> = const { Cell::new(ptr::null()) };
    /// Round-robin ticket of this thread's external spawns (see place.rs).
    static SPAWN_RR: Cell<usize> = const { Cell::new(0) };
    /// The runtime whose `block_on` runs on this thread, if any.
    pub(crate) static BLOCK_ON: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's worker context, if it is a worker.
fn with_ctx<R>(f: impl FnOnce(Option<&WorkerCtx>) -> R) -> R {
    let p = CURRENT.with(|c| c.get());
    // SAFETY: CURRENT is non-null only while `run` is on this thread's stack
    // with the WorkerCtx it points to alive (it is reset by a guard before
    // the ctx is dropped), and it is only ever dereferenced on this thread.
    let ctx = unsafe { p.as_ref() };
    f(ctx)
}

/// Whether this thread is a worker of any hwsched runtime.
pub(crate) fn on_worker_thread() -> bool {
    CURRENT.with(|c| !c.get().is_null())
}

/// The index of this thread's worker, if it is a worker of `shared`.
pub(crate) fn current_worker(shared: &Shared) -> Option<usize> {
    with_ctx(|c| c.filter(|c| ptr::eq(&*c.shared, shared)).map(|c| c.index))
}

/// The index of this thread's worker, in whichever runtime.
pub(crate) fn current_index() -> Option<usize> {
    with_ctx(|c| c.map(|c| c.index))
}

/// Counts a panic caught in a task's poll or drop on this worker's counters
/// (nothing when the task runs elsewhere, e.g. dropped by shutdown).
pub(crate) fn count_panic() {
    with_ctx(|c| {
        if let Some(c) = c {
            WorkerCounters::bump(&c.shared.workers[c.index].stats.panics, 1);
        }
    })
}

/// Counts a retired task (finished or dropped) on this worker's counters if
/// this thread is a worker of the runtime owning `registry`; returns whether
/// it did.
pub(crate) fn count_retired(registry: &crate::task::Registry) -> bool {
    with_ctx(|c| match c {
        Some(c) if ptr::eq(&c.shared.registry, registry) => {
            WorkerCounters::bump(&c.shared.workers[c.index].stats.retired, 1);
            true
        }
        _ => false,
    })
}

/// The runtime of this thread's context: its worker's, or its `block_on`'s.
pub(crate) fn current_shared() -> Option<Arc<Shared>> {
    with_ctx(|c| c.map(|c| c.shared.clone())).or_else(|| BLOCK_ON.with(|b| b.borrow().clone()))
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

/// Drops a task (cancelling it) without letting a panic in its destructor
/// escape.
pub(crate) fn drop_task(r: Runnable) {
    let _ = catch_unwind(AssertUnwindSafe(move || drop(r)));
}

/// Drops everything in an inbox (never call this inside a wake: see
/// [`Shared::bury`]); returns how many tasks it dropped.
pub(crate) fn drain_inbox(m: &Mailbox<Runnable>) -> usize {
    let mut n = 0;
    loop {
        match m.inbox.steal() {
            Steal::Success(r) => {
                drop_task(r);
                n += 1;
            }
            Steal::Empty => return n,
            Steal::Retry => continue,
        }
    }
}

/// Delivers `r` to worker `to`'s inbox from anywhere; counts an unpark on
/// the caller's counters (`from`: the caller's worker, if any).
pub(crate) fn deliver(shared: &Shared, from: Option<usize>, to: usize, r: Runnable) {
    let m = &shared.workers[to].mailbox;
    let bump = |c: fn(&WorkerCounters) -> &crate::sync::AtomicU64| match from {
        Some(w) => WorkerCounters::bump(c(&shared.workers[w].stats), 1),
        None => WorkerCounters::bump_shared(c(&shared.external), 1),
    };
    if m.deliver_or_drain(r, &shared.shutdown, |r| shared.bury(r)) == Notified::Unparked {
        bump(|s| &s.unparks);
        return;
    }
    // Delivered to a busy worker: if its inbox is backing up, it may be
    // stuck in a long poll that publishes no load and kicks nobody. Kick the
    // nearest parked worker on its behalf (the kernel's nohz kick from a
    // busy CPU), at the first backlog and every 32 items after; the kicked
    // worker steals from `to`.
    if m.is_idle() {
        return;
    }
    shared.set_overload();
    let len = m.inbox.len();
    if len == 2 || (len > 0 && len % 32 == 0) {
        if let Some(v) = nearest_parked(shared, to) {
            bump(|s| &s.kicks_sent);
            if shared.workers[v].mailbox.kick(to) == Notified::Unparked {
                bump(|s| &s.unparks);
            }
        }
    }
}

/// Places a newly spawned task: on the spawning worker's own deque, or (from
/// outside) on the worker `find_idlest_group` chooses.
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
    let c = &shared.external;
    let rr = SPAWN_RR.with(|x| {
        let v = x.get().wrapping_add(1);
        x.set(v);
        v
    });
    let (to, idle) =
        crate::place::find_idlest_group(&shared.topology, &crate::place::RuntimeView(shared), rr);
    if idle {
        WorkerCounters::bump_shared(&c.spawn_placed_idle, 1);
    } else {
        WorkerCounters::bump_shared(&c.spawn_placed_loaded, 1);
    }
    deliver(shared, None, to, r);
}

impl Core {
    fn new(shared: &Shared, index: usize, local: Local<Runnable>) -> Self {
        let t = &shared.tunables;
        let levels = shared.topology.levels(index).len();
        Core {
            index,
            local,
            lifo: None,
            lifo_streak: 0,
            tick: 0,
            running: true,
            publisher: crate::load::Publisher::new(),
            ops_since_publish: 0,
            balance: BalanceState::new(levels, t.migration_cost.as_nanos() as u64),
            avg_scan_cost_ns: 0,
            governor: Governor::new(
                t.idle,
                std::time::Duration::from_nanos(shared.park_cost_ns.load(Ordering::Relaxed)),
                t.spin_cap_percent,
            ),
            rng: 0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
            pushes_since_kick_check: 0,
            last_kick_ns: 0,
            last_victim: None,
            last_walk_cut: false,
        }
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

    fn stats<'a>(&self, shared: &'a Shared) -> &'a WorkerCounters {
        &shared.workers[self.index].stats
    }

    /// The next task from this worker's own sources.
    fn next_local(&mut self, shared: &Shared) -> Option<Runnable> {
        self.tick = self.tick.wrapping_add(1);
        let me = &shared.workers[self.index];
        if self.tick % INBOX_CHECK_INTERVAL == 0 {
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
            // Out of LIFO turns: to the back of the deque.
            self.local.push(r);
        }
        self.lifo_streak = 0;
        if let Some(r) = self.local.pop() {
            return Some(r);
        }
        let r = me.mailbox.take(&self.local)?;
        WorkerCounters::bump(&me.stats.inbox_pulls, 1);
        Some(r)
    }

    /// This worker's load contribution now.
    fn contribution(&self, shared: &Shared) -> Contribution {
        let queued = self.local.len()
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

    /// Pushes onto the local deque; an overloaded worker may kick a parked
    /// one (see [`balance`](crate::balance), "Overload kicks").
    pub(crate) fn push_local(&mut self, shared: &Shared, r: Runnable) {
        let had_work = !self.local.is_empty();
        self.local.push(r);
        self.maybe_publish(shared);
        if had_work {
            shared.set_overload();
            self.pushes_since_kick_check += 1;
            if self.pushes_since_kick_check >= KICK_CHECK_EVERY {
                self.pushes_since_kick_check = 0;
                self.maybe_kick(shared);
            }
        }
    }

    /// Puts a woken task in the LIFO slot; the previous occupant moves to
    /// the deque.
    pub(crate) fn push_lifo(&mut self, shared: &Shared, r: Runnable) {
        if let Some(prev) = self.lifo.replace(r) {
            self.push_local(shared, prev);
        }
    }

    /// Kicks the nearest parked worker if the rate limit allows and some
    /// worker looks idle.
    pub(crate) fn maybe_kick(&mut self, shared: &Shared) {
        let now = shared.now_ns();
        let interval = shared.tunables.kick_interval.as_nanos() as u64;
        if self.last_kick_ns != 0 && now.saturating_sub(self.last_kick_ns) < interval {
            return;
        }
        let Some(victim) = nearest_parked(shared, self.index) else {
            return;
        };
        self.last_kick_ns = now.max(1);
        let st = self.stats(shared);
        WorkerCounters::bump(&st.kicks_sent, 1);
        if shared.workers[victim].mailbox.kick(self.index) == Notified::Unparked {
            WorkerCounters::bump(&st.unparks, 1);
        }
    }
}

/// The nearest parked worker to `me`: SMT siblings, then LLC, then further.
fn nearest_parked(shared: &Shared, me: usize) -> Option<usize> {
    let mut inner = me..me + 1;
    let levels = shared.topology.levels(me);
    for level in levels {
        let span = &level.span;
        let n = span.len();
        let off = me - span.start;
        for i in 1..n {
            let w = span.start + (off + i) % n;
            if inner.contains(&w) {
                continue;
            }
            if shared.workers[w].mailbox.parker.is_parked() {
                return Some(w);
            }
        }
        inner = span.clone();
    }
    None
}

/// Tries to steal from worker `victim`: its deque, then its inbox.
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
    searched: &std::ops::Range<usize>,
) -> Option<(Runnable, usize)> {
    let lvl = &shared.topology.levels(core.index)[level];
    let mut best: Option<(i64, &std::ops::Range<usize>)> = None;
    let start = core.rand(lvl.groups.len());
    for i in 0..lvl.groups.len() {
        let g = &lvl.groups[(start + i) % lvl.groups.len()];
        if g.start <= searched.start && searched.end <= g.end {
            continue;
        }
        let load = shared.load.load(g);
        if load.queued == 0 {
            continue;
        }
        let b = crate::load::GroupClass::of(load, g.len()).busyness();
        if best.is_none_or(|(bb, _)| b > bb) {
            best = Some((b, g));
        }
    }
    if best.is_none() && shared.overload.load(Ordering::Relaxed) {
        // The counters show nothing queued here, but something was queued
        // behind a task since the last walk that found nothing: the counters
        // lag (a worker in a long poll never publishes). Look at the
        // members' queues directly, nearest group first.
        best = lvl
            .groups
            .iter()
            .filter(|g| !(g.start <= searched.start && searched.end <= g.end))
            .find(|g| {
                (*g).clone().any(|w| {
                    let ws = &shared.workers[w];
                    !ws.stealer.is_empty() || !ws.mailbox.inbox.is_empty()
                })
            })
            .map(|g| (0, g));
    }
    let (_, group) = best?;
    let group = group.clone();
    let n = group.len();
    let off = core.rand(n);
    for i in 0..n {
        let victim = group.start + (off + i) % n;
        if victim == core.index {
            continue;
        }
        if let Some(found) = steal_from(shared, core, victim) {
            return Some(found);
        }
    }
    None
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
    core.last_walk_cut = false;
    if let Some(k) = kicked_by {
        WorkerCounters::bump(&st.kicks_received, 1);
        if k != core.index {
            if let Some((r, _)) = steal_from(shared, core, k) {
                return Some(r);
            }
        }
    }
    // The counters are up to one interval stale, and a worker stuck in a
    // long poll cannot publish at all: retry the last victim first, which
    // is cheap (two reads when it is empty) and the likeliest to have more
    // (a steal takes at most a batch of 32).
    if let Some(v) = core.last_victim.take() {
        let vs = &shared.workers[v];
        if v != core.index && (!vs.stealer.is_empty() || !vs.mailbox.inbox.is_empty()) {
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
                if let Some((r, _)) = steal_from(shared, core, v) {
                    return Some(r);
                }
            }
        }
        return None;
    }
    if !shared.load.overloaded() && !shared.overload.load(Ordering::Relaxed) {
        WorkerCounters::bump(&st.walks_skipped, 1);
        return None;
    }
    let me = core.index;
    let mut searched = me..me + 1;
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
        WorkerCounters::bump(&st.walk_tried[i], 1);
    }
    if let Some(i) = out.cut_at {
        WorkerCounters::bump(&st.walk_cut[i], 1);
        core.last_walk_cut = true;
    }
    for (i, l) in core.balance.levels.iter().enumerate().take(MAX_LEVELS) {
        WorkerCounters::set(&st.max_cost_ns[i], l.max_ns);
    }
    let Some((level, (r, moved))) = out.found else {
        if out.cut_at.is_none() {
            // A full walk found nothing: the overload episode is over (the
            // kernel clears rd->overload in load balancing the same way).
            if shared.overload.load(Ordering::Relaxed) {
                shared.overload.store(false, Ordering::Relaxed);
                // A push may have come between our look at a queue and the
                // clear, finding the flag still set (so not setting it): look
                // once more after the clear. The fence orders the clear
                // before these loads; this is a hint, so the pusher side has
                // none (kicks and counters cover a miss).
                fence(Ordering::SeqCst);
                let queued = shared
                    .workers
                    .iter()
                    .any(|w| !w.stealer.is_empty() || !w.mailbox.inbox.is_empty());
                if queued {
                    shared.set_overload();
                }
            }
        }
        return None;
    };
    WorkerCounters::bump(&st.walk_success[level], 1);
    WorkerCounters::bump(&st.walk_moved[level], moved as u64);
    Some(r)
}

/// Marks the worker idle and sets its LLC's idle-core hint when its whole
/// core is idle (read before write).
fn enter_idle(shared: &Shared, core: &mut Core) {
    core.running = false;
    let me = &shared.workers[core.index];
    me.mailbox.set_idle(true);
    if shared.tunables.sis_idle_core {
        let cs = shared.topology.core_span(core.index);
        if cs.clone().all(|w| shared.workers[w].mailbox.is_idle()) {
            let hint = &shared.llc_idle_cores[me.llc_hint];
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
    shared.workers[core.index].mailbox.set_idle(false);
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

/// The idle path: walk, then spin or park until work arrives. `None` means
/// shutdown.
fn idle(shared: &Shared, core: &mut Core) -> Option<Runnable> {
    enter_idle(shared, core);
    let me = &shared.workers[core.index];
    let mut kicked_by = None;
    let mut idle_since: Option<u64> = None;
    let mut slept_any = false;
    loop {
        // A kick may have come with other work (the wait then returned
        // that work, not the kick): take the note here so it is not lost.
        let kick = kicked_by.take().or_else(|| me.mailbox.take_kick());
        if let Some(r) = walk(shared, core, kick, true) {
            // A stolen batch: let the next parked worker help (kick fan-out).
            if !core.local.is_empty() {
                core.maybe_kick(shared);
            }
            exit_idle(shared, core, idle_since, slept_any);
            return Some(r);
        }
        let now = shared.now_ns();
        let t0 = *idle_since.get_or_insert(now);
        // A placement may have claimed this worker (marked it not idle) for
        // a delivery that another worker's steal then took: still idle, say
        // so again, or wakeups would stop choosing a parked worker.
        me.mailbox.set_idle(true);
        let choice = core.governor.choose(now, core.balance.avg_idle_ns);
        if choice == Choice::Park && core.last_walk_cut && shared.overload.load(Ordering::Relaxed) {
            // About to sleep with work queued somewhere: finish the walk the
            // cost bound cut short (see balance.rs).
            if let Some(r) = walk(shared, core, None, false) {
                exit_idle(shared, core, idle_since, slept_any);
                return Some(r);
            }
        }
        let st = &me.stats;
        let mut spin_end = None;
        if let Choice::Spin { until_ns } = choice {
            WorkerCounters::bump(&st.spins, 1);
            spin_end = Some(until_ns);
        }
        let spin_start = now;
        let mut spun_ns = 0u64;
        let mut spin_expired = false;
        let index = core.index;
        let Core {
            local, publisher, ..
        } = &mut *core;
        // Parking while something is queued behind a task somewhere: wake
        // by itself after one load interval to look again (see balance.rs,
        // "the periodic balance").
        let timeout = shared
            .overload
            .load(Ordering::Relaxed)
            .then_some(OVERLOAD_PARK_TIMEOUT);
        let res = me.mailbox.wait_for(
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
            },
            timeout,
        );
        if matches!(choice, Choice::Spin { .. }) {
            core.governor.record_spin(spun_ns);
            WorkerCounters::bump(&st.spin_ns, spun_ns);
            if spin_expired {
                WorkerCounters::bump(&st.spin_gave_up, 1);
            } else {
                WorkerCounters::bump(&st.spin_hits, 1);
                WorkerCounters::bump(&st.spin_hit_ns, spun_ns);
            }
        }
        match res {
            Wait::Work { item: r, slept } => {
                if slept {
                    WorkerCounters::bump(&st.parks, 1);
                }
                WorkerCounters::bump(&st.inbox_pulls, 1);
                exit_idle(shared, core, Some(t0), slept_any || slept);
                return Some(r);
            }
            Wait::Shutdown => return None,
            Wait::Woken {
                slept,
                kicked_by: k,
            } => {
                if slept {
                    slept_any = true;
                    WorkerCounters::bump(&st.parks, 1);
                }
                kicked_by = k;
                if shared.is_shutdown() {
                    return None;
                }
            }
        }
    }
}

/// Polls one task.
fn run_task(ctx: &WorkerCtx, r: Runnable) {
    let shared = &*ctx.shared;
    let meta = r.metadata();
    // Acquire: pairs with JoinHandle::abort's Release store.
    if meta.aborted.load(Ordering::Acquire) {
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
    if catch_unwind(AssertUnwindSafe(|| r.run())).is_err() {
        WorkerCounters::bump(&st.panics, 1);
    }
}

/// Resets the thread-local context when the worker leaves `run`.
struct CtxGuard;

impl Drop for CtxGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(ptr::null()));
    }
}

/// A worker thread's body.
pub(crate) fn run(shared: Arc<Shared>, index: usize, local: Local<Runnable>, pin: bool) {
    if pin {
        let os = shared.topology.place(index).os_index;
        if pin_current_thread(os) {
            shared.workers[index].pinned.store(true, Ordering::Relaxed);
        }
    }
    let core = Core::new(&shared, index, local);
    let ctx = WorkerCtx {
        shared: shared.clone(),
        index,
        core: RefCell::new(core),
    };
    CURRENT.with(|c| c.set(&ctx as *const WorkerCtx));
    let guard = CtxGuard;
    loop {
        if shared.is_shutdown() {
            break;
        }
        let next = {
            let mut core = ctx.core.borrow_mut();
            match core.next_local(&shared) {
                Some(r) => {
                    core.maybe_publish(&shared);
                    Some(r)
                }
                None => idle(&shared, &mut core),
            }
        };
        match next {
            Some(r) => run_task(&ctx, r),
            None => break,
        }
    }
    // Shutdown: drop what this worker still holds (see the module docs).
    let mut core = ctx.core.borrow_mut();
    if let Some(r) = core.lifo.take() {
        drop_task(r);
    }
    while let Some(r) = core.local.pop() {
        drop_task(r);
    }
    drop(core);
    drop(guard);
}
