//! Stealing: the idle walk over the levels (policy/balance.rs), a steal from one
//! victim, and the re-check's look at the `queued` set.

use crate::policy::balance::BalanceState;
use crate::sched::queue::Steal;
use crate::stats::{WorkerCounters, MAX_LEVELS};
use crate::sync::Ordering;
use crate::task::Runnable;
use crate::tunables::StealWalk;
use crate::worker::shared::Shared;
use crate::worker::{near_spans, Core};

/// Whether worker `v` has stealable work now.
pub(super) fn has_work(shared: &Shared, v: usize) -> bool {
    let ws = &shared.workers[v];
    !ws.stealer.is_empty() || !ws.mailbox.inbox.is_empty()
}

/// The re-check of the last searcher leaving, or of a worker parking with
/// no searcher left (src/sched/README.md, idle steps 1 and 4): a worker other
/// than `me` whose queue holds work (its deque, its inbox or its LIFO slot:
/// src/sched/README.md, "The LIFO slot"), found through the `queued` set
/// nearest first.
/// Call after the fence of `leave_searching` / `to_parked`.
pub(super) fn find_queued_work(shared: &Shared, me: usize) -> Option<usize> {
    let st = &shared.workers[me].stats;
    let mut touched = 0u64;
    let mut words = 0u64;
    let mut found = None;
    for span in near_spans(shared, me) {
        let (f, n) = shared.sleepers.find_queued(span, me, |v| {
            touched += 1;
            has_work(shared, v) || !shared.workers[v].lifo.is_empty()
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
            shared.trace.steal(core.index, victim, moved);
            return Some((r, moved));
        }
    }
    None
}

/// Steals from the busiest other group of `level` (see policy/balance.rs).
pub(super) fn steal_from_level(
    shared: &Shared,
    core: &mut Core,
    level: usize,
    searched: &crate::topology::Span,
) -> Option<(Runnable, usize)> {
    let lvl = &shared.topology.levels(core.index)[level];
    let st = &shared.workers[core.index].stats;
    let start = core.rand(lvl.groups.len());
    let mut best = crate::policy::balance::busiest_group(&lvl.groups, searched, start, |g| {
        shared.load.load(g)
    });
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
                    let (any, n) =
                        shared
                            .sleepers
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
        let (_, words) = shared.sleepers.find_queued(&part, me, |v| {
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

/// The idle walk; see policy/balance.rs.
pub(super) fn walk(
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
        let (any, words) =
            shared
                .sleepers
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
pub(super) fn stat_slot(i: usize) -> usize {
    i.min(MAX_LEVELS - 1)
}
