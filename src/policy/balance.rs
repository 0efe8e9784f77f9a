//! Idle balance: the domain walk, bounded by its measured cost.
//!
//! When a worker runs out of work it looks for more, level by level, nearest
//! first (SMT siblings, then its LLC, NUMA node, package, machine), and it
//! stops as soon as looking further would cost more than it expects to stay
//! idle. This is the kernel's `newidle_balance()` (now `sched_balance_newidle`)
//! as Peter Zijlstra framed it at the end of seed 000: never spend longer
//! looking for work than you expect to be idle.
//!
//! ```text
//! if nothing is queued anywhere (rd->overload, or the queued set):  skip
//! curr_cost = 0
//! for level in levels (smallest first):
//!     if avg_idle < curr_cost + level.max_cost:  stop (a "cut", counted)
//!     t0 = now; found = steal from the level's busiest other group; t1 = now
//!     level.update_cost(t1 - t0); curr_cost += t1 - t0
//!     if found: stop
//! max_idle_balance_cost = max(max_idle_balance_cost, curr_cost)
//! ```
//!
//! - [`LevelCost`] is the kernel's `sd->max_newidle_lb_cost` with its
//!   `last_decay_max_lb_cost`: a new maximum replaces it and resets the decay
//!   clock; otherwise at most once per second it decays by 253/256 (about 1%
//!   a second), so one slow steal does not disable a level forever. It is per
//!   worker per level: no shared cache line.
//! - `avg_idle` ([`BalanceState::record_idle`]) is the kernel's
//!   `rq->avg_idle`: when work reaches a worker that was idle, the idle
//!   duration is folded in with `avg += (sample - avg) / 8`, capped at
//!   `2 * max_idle_balance_cost`; `max_idle_balance_cost` starts at
//!   [`Tunables::migration_cost`](crate::Tunables::migration_cost)
//!   (`sysctl_sched_migration_cost`) and is floored there, and `avg_idle`
//!   starts at twice it.
//! - Which group to steal from comes from the rate-limited load counters
//!   ([`load`](crate::policy::load)): the busiest other group of the level,
//!   overloaded before fully busy; a group with nothing queued is skipped
//!   without touching its members. Within it, members are tried from a
//!   random start with `steal_batch_and_pop` (half the victim's deque) and
//!   then their inboxes.
//!
//! # Who walks, and what the walk may miss
//!
//! Only a *searching* worker walks (the wake protocol of
//! [`sleepers`](crate::sched::sleepers): at most half the workers search at once, and a
//! worker woken to search carries a note naming the worker whose queue
//! needs help, which it tries first). The bound may cut a walk short, and
//! the counters lag (a worker stuck in a long poll never publishes), so a
//! walk can miss queued work; that is allowed, because it is not the
//! walk's job to keep work conservation. The protocol does: the last
//! searcher to leave, or any worker that sleeps with no searcher left,
//! re-checks the `queued` set (one bit per worker whose queue may hold
//! stealable work, a word per 64 workers) and steals instead of sleeping
//! when it finds work.
//!
//! The walk reads summaries before members:
//! - the gate (the kernel's `rd->overload`): the machine counter shows
//!   queued work, or the `queued` set has a member other than the walker;
//! - a level whose counters show nothing queued while the gate is open
//!   reads the `queued` words of its groups and tries the first group that
//!   has a member;
//! - before the gate, the worker it last stole from is retried (two reads
//!   when it is empty), the likeliest to have more.
//!
//! - [`StealWalk::Unbounded`](crate::StealWalk::Unbounded) is the classic
//!   pass over every other worker, with no gate and no bound, for ablation.
//!
//! Workers whose queues a walk or a re-check looked at, and the bitmap
//! words read, are counted in [`Stats`](crate::Stats) (`walk_touched`,
//! `recheck_words`).

use crate::policy::load::{GroupClass, Load};
use crate::topology::Span;

/// Nanoseconds in the decay period of [`LevelCost`] (the kernel's `HZ`).
pub const DECAY_PERIOD_NS: u64 = 1_000_000_000;

/// The group of a level that a walk steals from: the busiest, by
/// [`GroupClass::busyness`] of its [`Load`] (overloaded before fully busy),
/// among `groups` other than those holding `searched` (the span already
/// searched), skipping groups whose load shows nothing queued; groups are
/// read from `start` (wrapping), and the first of equals wins. `None` when
/// no other group shows queued work. The kernel's `find_busiest_group()`
/// over `sg_lb_stats`, without averages or imbalance amounts: a walk steals
/// one batch, it does not move a computed load.
///
/// ```
/// use hwsched::policy::{busiest_group, Load};
/// use hwsched::Span;
/// let groups = [Span::from(0..4), Span::from(4..8), Span::from(8..12)];
/// let load = |g: &Span| match g.first() {
///     4 => Load { running: 4, queued: 1 },
///     8 => Load { running: 4, queued: 6 },
///     _ => Load { running: 4, queued: 9 },
/// };
/// // Worker 1 searched its own group (0..4, the busiest): the busiest other.
/// let searched = Span::from(0..4);
/// assert_eq!(busiest_group(&groups, &searched, 0, load), Some(&groups[2]));
/// // Nothing queued elsewhere by the counters: none.
/// let idle = |_: &Span| Load { running: 1, queued: 0 };
/// assert_eq!(busiest_group(&groups, &searched, 0, idle), None);
/// ```
#[inline]
pub fn busiest_group<'a>(
    groups: &'a [Span],
    searched: &Span,
    start: usize,
    mut load: impl FnMut(&Span) -> Load,
) -> Option<&'a Span> {
    let mut best: Option<(i64, &Span)> = None;
    for i in 0..groups.len() {
        let g = &groups[(start + i) % groups.len()];
        if searched.is_subset(g) {
            continue;
        }
        let l = load(g);
        if l.queued == 0 {
            continue;
        }
        let b = GroupClass::of(l, g.len()).busyness();
        if best.is_none_or(|(bb, _)| b > bb) {
            best = Some((b, g));
        }
    }
    best.map(|(_, g)| g)
}

/// One level's balance cost: the kernel's `max_newidle_lb_cost`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LevelCost {
    /// The current maximum, in nanoseconds.
    pub max_ns: u64,
    last_decay_ns: u64,
}

impl LevelCost {
    /// Folds in one measured cost at time `now_ns` (the kernel's
    /// `update_newidle_cost()`). Returns whether the maximum decayed.
    pub fn update(&mut self, cost_ns: u64, now_ns: u64) -> bool {
        if cost_ns > self.max_ns {
            self.max_ns = cost_ns;
            self.last_decay_ns = now_ns;
            false
        } else if now_ns.saturating_sub(self.last_decay_ns) > DECAY_PERIOD_NS {
            self.max_ns = self.max_ns * 253 / 256;
            self.last_decay_ns = now_ns;
            true
        } else {
            false
        }
    }
}

/// A worker's idle-balance state. Pure: time is passed in.
#[derive(Debug, Clone)]
pub struct BalanceState {
    /// Per level, smallest first.
    pub levels: Vec<LevelCost>,
    /// Expected idle time, in nanoseconds.
    pub avg_idle_ns: u64,
    /// The kernel's `rq->max_idle_balance_cost`.
    pub max_idle_balance_cost_ns: u64,
    migration_cost_ns: u64,
}

/// What one walk did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkOutcome<T> {
    /// What the walk found, and at which level.
    pub found: Option<(usize, T)>,
    /// Levels whose steal was attempted.
    pub tried: Vec<usize>,
    /// The level at which the cost bound stopped the walk.
    pub cut_at: Option<usize>,
    /// Total time spent, in nanoseconds.
    pub cost_ns: u64,
}

impl BalanceState {
    /// State for `levels` levels and the given migration cost.
    pub fn new(levels: usize, migration_cost_ns: u64) -> Self {
        BalanceState {
            levels: vec![LevelCost::default(); levels],
            avg_idle_ns: 2 * migration_cost_ns,
            max_idle_balance_cost_ns: migration_cost_ns,
            migration_cost_ns,
        }
    }

    /// Folds an idle period of `sample_ns` into `avg_idle` (the kernel's
    /// `update_avg()` in `ttwu_do_activate`), capped at twice
    /// `max_idle_balance_cost`.
    pub fn record_idle(&mut self, sample_ns: u64) {
        let avg = self.avg_idle_ns as i64;
        let new = avg + (sample_ns as i64 - avg) / 8;
        self.avg_idle_ns = (new.max(0) as u64).min(2 * self.max_idle_balance_cost_ns);
    }

    /// Runs the bounded walk. `now()` reads the clock (once before and once
    /// after each level); `try_level(i)` attempts a steal at level `i`.
    pub fn walk<T>(
        &mut self,
        now: impl FnMut() -> u64,
        try_level: impl FnMut(usize) -> Option<T>,
    ) -> WalkOutcome<T> {
        self.walk_with(true, now, try_level)
    }

    /// [`walk`](Self::walk), with the cost bound on (`bounded`) or off (a
    /// worker about to sleep: the futex round trip of a park costs more than
    /// any level's search, so a walk cut short is finished first).
    pub fn walk_with<T>(
        &mut self,
        bounded: bool,
        mut now: impl FnMut() -> u64,
        mut try_level: impl FnMut(usize) -> Option<T>,
    ) -> WalkOutcome<T> {
        let mut out = WalkOutcome {
            found: None,
            tried: Vec::new(),
            cut_at: None,
            cost_ns: 0,
        };
        let mut decayed = false;
        for i in 0..self.levels.len() {
            if bounded && self.avg_idle_ns < out.cost_ns + self.levels[i].max_ns {
                out.cut_at = Some(i);
                break;
            }
            let t0 = now();
            let found = try_level(i);
            let t1 = now();
            let cost = t1.saturating_sub(t0);
            decayed |= self.levels[i].update(cost, t1);
            out.cost_ns += cost;
            out.tried.push(i);
            if let Some(t) = found {
                out.found = Some((i, t));
                break;
            }
        }
        if decayed {
            // The kernel recomputes max_idle_balance_cost from the decayed
            // per-domain maxima (floored at the migration cost).
            let sum: u64 = self.levels.iter().map(|l| l.max_ns).sum();
            self.max_idle_balance_cost_ns = sum.max(self.migration_cost_ns);
        }
        self.max_idle_balance_cost_ns = self.max_idle_balance_cost_ns.max(out.cost_ns);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    const US: u64 = 1_000;

    #[test]
    fn walk_stops_when_the_next_level_costs_more_than_the_idle_time() {
        let mut b = BalanceState::new(3, 500 * US);
        let clock = Cell::new(0u64);
        let costs = [US, 3 * US, 20 * US];
        // Learn the costs with a long expected idle (nothing found).
        let first = b.walk(
            || clock.get(),
            |i| {
                clock.set(clock.get() + costs[i]);
                None::<()>
            },
        );
        assert_eq!(first.tried, vec![0, 1, 2]);
        assert_eq!(b.levels.iter().map(|l| l.max_ns).collect::<Vec<_>>(), costs);
        b.avg_idle_ns = 10 * US;
        let w = b.walk(
            || clock.get(),
            |i| {
                clock.set(clock.get() + costs[i]);
                None::<()>
            },
        );
        assert_eq!(
            w.tried,
            vec![0, 1],
            "10us of idle pays for levels costing 1 and 3 us"
        );
        assert_eq!(w.cut_at, Some(2), "the 20us level is cut");
        assert_eq!(w.cost_ns, 4 * US);
    }

    #[test]
    fn walk_stops_at_the_first_success() {
        let mut b = BalanceState::new(3, 500 * US);
        let w = b.walk(|| 0, |i| (i == 1).then_some(7));
        assert_eq!(w.found, Some((1, 7)));
        assert_eq!(w.tried, vec![0, 1]);
    }

    #[test]
    fn max_cost_jumps_at_once_and_decays_by_253_256_per_second() {
        let mut c = LevelCost::default();
        c.update(10 * US, 0);
        c.update(100 * US, 5); // spike
        assert_eq!(c.max_ns, 100 * US);
        let mut expect = 100 * US;
        let mut t = 5;
        for _ in 0..5 {
            // Within the second: no decay however often it is updated.
            c.update(US, t + DECAY_PERIOD_NS / 2);
            assert_eq!(c.max_ns, expect);
            t += DECAY_PERIOD_NS + 1;
            assert!(c.update(US, t));
            expect = expect * 253 / 256;
            assert_eq!(c.max_ns, expect);
        }
        // A new maximum replaces the decayed value and resets the clock.
        c.update(200 * US, t + 10);
        assert_eq!(c.max_ns, 200 * US);
        assert!(!c.update(1, t + 10 + DECAY_PERIOD_NS / 2));
    }

    #[test]
    fn avg_idle_follows_the_ewma_and_its_cap() {
        let mut b = BalanceState::new(1, 500 * US);
        assert_eq!(b.avg_idle_ns, 1000 * US);
        b.record_idle(200 * US);
        assert_eq!(b.avg_idle_ns, 1000 * US - 100 * US);
        b.record_idle(900 * US);
        assert_eq!(b.avg_idle_ns, 900 * US);
        for _ in 0..100 {
            b.record_idle(10_000 * US);
        }
        assert_eq!(
            b.avg_idle_ns,
            2 * b.max_idle_balance_cost_ns,
            "capped at 2 * max_idle_balance_cost"
        );
        for _ in 0..200 {
            b.record_idle(8 * US);
        }
        assert!(b.avg_idle_ns < 9 * US && b.avg_idle_ns >= 8 * US);
    }

    #[test]
    fn max_idle_balance_cost_is_floored_by_migration_cost() {
        let mut b = BalanceState::new(1, 50 * US);
        let clock = Cell::new(0);
        b.walk(
            || clock.get(),
            |_| {
                clock.set(clock.get() + 80 * US);
                None::<()>
            },
        );
        assert_eq!(b.max_idle_balance_cost_ns, 80 * US);
        // Decay far below the floor: max_idle_balance_cost stops at it.
        for s in 1..400u64 {
            clock.set(s * (DECAY_PERIOD_NS + 1));
            b.levels[0].update(0, clock.get());
        }
        b.walk(|| clock.get() + DECAY_PERIOD_NS * 1000, |_| None::<()>);
        assert_eq!(b.max_idle_balance_cost_ns, 50 * US);
    }
}
