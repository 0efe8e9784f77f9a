//! Shared load counters, rate-limited to one publish per interval.
//!
//! Balancing and placement need to know how busy each part of the machine
//! is, but a counter every worker updates on every enqueue becomes the
//! hottest cache line in the process. The kernel hit exactly this with
//! `tg->load_avg` (seed 004: 13-25% of cycles in `update_cfs_group` and
//! `update_load_avg` on a 224-CPU machine) and fixed it in
//! `update_tg_load_avg()` by publishing at most once per millisecond, and only
//! when the change is more than 1/64 of the last published contribution.
//! hwsched does the same:
//!
//! - every group of every level (and every single worker) has one
//!   cache-padded counter (`GroupLoad`, in sched/load_map.rs with the
//!   `LoadMap` that holds them): the tasks running in it and the tasks queued
//!   in it (deques, inboxes, LIFO slots), packed in one word so that one
//!   `fetch_add` carries both deltas and one load reads both;
//! - each worker keeps a [`Publisher`]: what it last added to its ancestor
//!   groups and when; it adds `current - last` to each ancestor only when
//!   [`Tunables::load_update_interval`](crate::Tunables::load_update_interval)
//!   has passed and the change is not negligible (a change of the running
//!   count, or from or to nothing queued, always counts);
//! - a worker about to sleep publishes whatever it holds back (forced), so a
//!   parked worker's contribution is exact.
//!
//! Readers read one counter per group, never all its members; staleness is
//! bounded by the interval, and is what the design buys.
//!
//! Group classification ([`GroupClass`]) is the kernel's `group_classify()`
//! reduced to what a runtime sees (seed 003): `has_spare` when load is below
//! the group's weight, `fully_busy` at exactly the weight, `overloaded` above.

/// Running and queued counts of a group, as read from its counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// Workers of the group running a task.
    pub running: u32,
    /// Tasks queued in the group's deques, inboxes and LIFO slots.
    pub queued: u32,
}

impl Load {
    /// running + queued: the kernel's `sum_nr_running`.
    pub fn total(self) -> u64 {
        u64::from(self.running) + u64::from(self.queued)
    }
}

/// How busy a group is, from a snapshot of its counter (the kernel's
/// `group_type`, the three states a runtime can see).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupClass {
    /// Fewer tasks than workers: this many workers are spare.
    HasSpare(usize),
    /// Exactly as many tasks as workers.
    FullyBusy,
    /// More tasks than workers, by this many.
    Overloaded(usize),
}

impl GroupClass {
    /// Classifies `load` for a group of `weight` workers.
    ///
    /// ```
    /// use hwsched::policy::{GroupClass, Load};
    /// assert_eq!(GroupClass::of(Load { running: 1, queued: 0 }, 2), GroupClass::HasSpare(1));
    /// assert_eq!(GroupClass::of(Load { running: 2, queued: 0 }, 2), GroupClass::FullyBusy);
    /// assert_eq!(GroupClass::of(Load { running: 2, queued: 3 }, 2), GroupClass::Overloaded(3));
    /// ```
    pub fn of(load: Load, weight: usize) -> GroupClass {
        let total = load.total() as usize;
        match total.cmp(&weight) {
            std::cmp::Ordering::Less => GroupClass::HasSpare(weight - total),
            std::cmp::Ordering::Equal => GroupClass::FullyBusy,
            std::cmp::Ordering::Greater => GroupClass::Overloaded(total - weight),
        }
    }

    /// Busiest first: overloaded (by more) > fully busy > has spare (by less).
    pub fn busyness(self) -> i64 {
        match self {
            GroupClass::Overloaded(n) => 1 + n as i64,
            GroupClass::FullyBusy => 0,
            GroupClass::HasSpare(n) => -(n as i64),
        }
    }
}

/// What one worker contributes to each of its ancestor groups.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Contribution {
    /// 1 while running a task, 0 while idle.
    pub running: u32,
    /// Tasks queued on this worker.
    pub queued: u32,
}

/// What [`Publisher::decide`] chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Publish {
    /// Nothing changed since the last publish.
    Unchanged,
    /// Held back: the interval has not passed.
    HeldByInterval,
    /// Held back: the change is under 1/64 of the last contribution.
    HeldByDelta,
    /// Add these deltas to every ancestor group now.
    Now {
        /// Delta of the running count.
        running: i64,
        /// Delta of the queued count.
        queued: i64,
    },
}

/// A worker's record of what it last published and when (the kernel's
/// `cfs_rq->tg_load_avg_contrib` and `last_update_tg_load_avg`). The same
/// contribution goes to every ancestor at once, so one record serves them
/// all.
#[derive(Debug, Clone, Default)]
pub struct Publisher {
    last: Contribution,
    /// When the last publish happened; `None` before the first.
    stamp_ns: Option<u64>,
}

impl Publisher {
    /// A publisher that has published nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// What has been published so far.
    pub fn published(&self) -> Contribution {
        self.last
    }

    /// Decides whether to publish `current` at time `now_ns`; on
    /// [`Publish::Now`] the caller must add the deltas to every ancestor
    /// group, and this record already counts them as published.
    ///
    /// `force` (a worker about to sleep) ignores both the interval and the
    /// delta rule.
    pub fn decide(
        &mut self,
        now_ns: u64,
        current: Contribution,
        interval_ns: u64,
        force: bool,
    ) -> Publish {
        if current == self.last {
            return Publish::Unchanged;
        }
        if !force {
            if self
                .stamp_ns
                .is_some_and(|t| now_ns.saturating_sub(t) < interval_ns)
            {
                return Publish::HeldByInterval;
            }
            let last_total = u64::from(self.last.running) + u64::from(self.last.queued);
            let zero_change = (self.last.running == 0) != (current.running == 0)
                || (self.last.queued == 0) != (current.queued == 0);
            let delta = (i64::from(current.running) + i64::from(current.queued)
                - last_total as i64)
                .unsigned_abs();
            if !zero_change && delta <= last_total / 64 {
                return Publish::HeldByDelta;
            }
        }
        let d = Publish::Now {
            running: i64::from(current.running) - i64::from(self.last.running),
            queued: i64::from(current.queued) - i64::from(self.last.queued),
        };
        self.last = current;
        self.stamp_ns = Some(now_ns);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn c(running: u32, queued: u32) -> Contribution {
        Contribution { running, queued }
    }

    #[test]
    fn updates_inside_the_interval_are_held_back_then_published_whole() {
        let mut p = Publisher::new();
        assert_eq!(
            p.decide(0, c(1, 0), MS, false),
            Publish::Now {
                running: 1,
                queued: 0
            }
        );
        // Within the interval: held, however many changes.
        for q in 1..10 {
            assert_eq!(
                p.decide(q * 1000, c(1, q as u32), MS, false),
                Publish::HeldByInterval
            );
        }
        // After it: one publish carries the whole accumulated delta.
        assert_eq!(
            p.decide(MS, c(1, 9), MS, false),
            Publish::Now {
                running: 0,
                queued: 9
            }
        );
        assert_eq!(p.published(), c(1, 9));
        assert_eq!(p.decide(MS + 1, c(1, 9), MS, false), Publish::Unchanged);
    }

    #[test]
    fn small_changes_are_held_by_the_delta_rule_but_zero_transitions_are_not() {
        let mut p = Publisher::new();
        let _ = p.decide(0, c(1, 199), MS, false); // total 200: 1/64 is 3
        assert_eq!(p.decide(2 * MS, c(1, 202), MS, false), Publish::HeldByDelta);
        assert_eq!(
            p.decide(3 * MS, c(1, 203), MS, false),
            Publish::Now {
                running: 0,
                queued: 4
            }
        );
        // A change of the running count always counts once the interval passed.
        assert_eq!(
            p.decide(5 * MS, c(0, 203), MS, false),
            Publish::Now {
                running: -1,
                queued: 0
            }
        );
        // To zero queued always counts.
        let mut p = Publisher::new();
        let _ = p.decide(0, c(0, 1000), MS, false);
        assert_eq!(
            p.decide(2 * MS, c(0, 0), MS, false),
            Publish::Now {
                running: 0,
                queued: -1000
            }
        );
    }

    #[test]
    fn forced_publish_ignores_interval_and_delta() {
        let mut p = Publisher::new();
        let _ = p.decide(0, c(1, 100), MS, false);
        assert_eq!(
            p.decide(10, c(0, 101), MS, true),
            Publish::Now {
                running: -1,
                queued: 1
            }
        );
    }

    #[test]
    fn zero_interval_publishes_every_change() {
        let mut p = Publisher::new();
        let _ = p.decide(0, c(1, 0), 0, false);
        assert_eq!(
            p.decide(0, c(1, 1), 0, false),
            Publish::Now {
                running: 0,
                queued: 1
            }
        );
    }

    #[test]
    fn classification_edge_cases() {
        let l = |running, queued| Load { running, queued };
        assert_eq!(GroupClass::of(l(0, 0), 4), GroupClass::HasSpare(4), "empty");
        assert_eq!(
            GroupClass::of(l(4, 0), 4),
            GroupClass::FullyBusy,
            "exactly full"
        );
        assert_eq!(
            GroupClass::of(l(3, 1), 4),
            GroupClass::FullyBusy,
            "full counting queued"
        );
        assert_eq!(
            GroupClass::of(l(4, 1), 4),
            GroupClass::Overloaded(1),
            "one over"
        );
        assert_eq!(
            GroupClass::of(l(0, 0), 1),
            GroupClass::HasSpare(1),
            "weight 1 idle"
        );
        assert_eq!(
            GroupClass::of(l(1, 0), 1),
            GroupClass::FullyBusy,
            "weight 1 busy"
        );
        assert_eq!(
            GroupClass::of(l(1, 1), 1),
            GroupClass::Overloaded(1),
            "weight 1 over"
        );
        assert!(GroupClass::Overloaded(1).busyness() > GroupClass::FullyBusy.busyness());
        assert!(GroupClass::FullyBusy.busyness() > GroupClass::HasSpare(1).busyness());
        assert!(GroupClass::HasSpare(1).busyness() > GroupClass::HasSpare(2).busyness());
    }
}
