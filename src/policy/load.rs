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
//!   cache-padded [`GroupLoad`]: the tasks running in it and the tasks queued
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

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Ordering};
use crate::topology::{Span, Topology};

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

/// One group's counter: `queued << 32 | running` in one cache line.
///
/// The sum of every worker's published contribution is never negative in
/// either half, so the wrapping addition of a packed delta (a negative
/// running delta borrows from the upper half and the borrow is repaid by the
/// same addition) leaves both halves exact.
#[derive(Debug, Default)]
pub struct GroupLoad(CachePadded<AtomicU64>);

impl GroupLoad {
    /// A zero counter.
    pub fn new() -> Self {
        GroupLoad(CachePadded::new(AtomicU64::new(0)))
    }

    /// Adds a delta to both counts with one `fetch_add`. Relaxed: readers
    /// use counters as hints, and every delta is an independent commutative
    /// addition (the sum is exact in any order).
    pub fn add(&self, running: i64, queued: i64) {
        let packed = (queued << 32).wrapping_add(running) as u64;
        self.0.fetch_add(packed, Ordering::Relaxed);
    }

    /// Reads both counts with one load.
    pub fn read(&self) -> Load {
        let v = self.0.load(Ordering::Relaxed);
        Load {
            running: v as u32,
            queued: (v >> 32) as u32,
        }
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

/// `(span, counter index)` of the spans that start at one worker.
type SpansFrom = Box<[(Span, usize)]>;

/// Every group counter of a runtime, and each worker's ancestors.
#[derive(Debug)]
pub struct LoadMap {
    groups: Box<[GroupLoad]>,
    /// Per first worker of a span: `(span, counter index)` of each span
    /// that starts there (about one per level, plus the worker itself), so
    /// a lookup is a short scan of one array entry, comparing ranges: no
    /// hashing.
    by_start: Box<[SpansFrom]>,
    /// Per worker: the counters of every span holding it, smallest first:
    /// its own, its levels', and, where the kernel's NUMA spans overlap,
    /// the other nodes' spans and groups that hold it (a span's counter is
    /// the sum over all its members, whose chain it is or not).
    ancestors: Vec<Vec<usize>>,
    machine: usize,
}

impl LoadMap {
    /// One counter per distinct span of `topology`.
    pub fn new(topology: &Topology) -> Self {
        let spans = topology.all_spans();
        let n = topology.workers();
        let mut by_start: Vec<Vec<(Span, usize)>> = vec![Vec::new(); n.max(1)];
        for (i, s) in spans.iter().enumerate() {
            if !by_start[s.first()].iter().any(|(e, _)| e == s) {
                by_start[s.first()].push((s.clone(), i));
            }
        }
        let by_start: Box<[SpansFrom]> = by_start.into_iter().map(Vec::into_boxed_slice).collect();
        let find = |span: &Span| -> usize {
            by_start[span.first()]
                .iter()
                .find(|(e, _)| e == span)
                .map(|&(_, i)| i)
                .expect("every level span of the topology has a counter")
        };
        // Every span of a worker's chain holds it; on a tree those are all
        // (`all_spans` lists larger spans first: reversed, smallest first).
        let mut ancestors: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, s) in spans.iter().enumerate().rev() {
            if find(s) == i {
                for w in s.iter() {
                    ancestors[w].push(i);
                }
            }
        }
        debug_assert!((0..n).all(|w| ancestors[w].first() == Some(&find(&Span::single(w)))));
        let machine = find(&Span::range(0..n));
        LoadMap {
            groups: spans.iter().map(|_| GroupLoad::new()).collect(),
            by_start,
            ancestors,
            machine,
        }
    }

    /// The counter of a span of the tree (a level's span, a group, or one
    /// worker). Panics on a span that is not in the tree.
    pub fn group(&self, span: &Span) -> &GroupLoad {
        let i = self.by_start[span.first()]
            .iter()
            .find(|(e, _)| e == span)
            .map(|&(_, i)| i)
            .unwrap_or_else(|| panic!("no load counter for span {span:?}"));
        &self.groups[i]
    }

    /// Reads a span's load.
    pub fn load(&self, span: &Span) -> Load {
        self.group(span).read()
    }

    /// Adds a worker's delta to each of its ancestors; returns how many
    /// counters were written.
    pub fn publish(&self, worker: usize, running: i64, queued: i64) -> usize {
        let a = &self.ancestors[worker];
        for &g in a {
            self.groups[g].add(running, queued);
        }
        a.len()
    }

    /// The machine's load.
    pub fn machine(&self) -> Load {
        self.groups[self.machine].read()
    }

    /// The kernel's `rd->overload`: is anything queued anywhere?
    pub fn overloaded(&self) -> bool {
        self.machine().queued > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologySource;

    const MS: u64 = 1_000_000;

    fn c(running: u32, queued: u32) -> Contribution {
        Contribution { running, queued }
    }

    #[test]
    fn packed_counter_is_exact_with_negative_deltas() {
        let g = GroupLoad::new();
        g.add(1, 5);
        g.add(1, 0);
        g.add(-1, -3);
        assert_eq!(
            g.read(),
            Load {
                running: 1,
                queued: 2
            }
        );
        g.add(-1, -2);
        assert_eq!(g.read(), Load::default());
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
    fn group_counters_equal_the_sum_of_contributions_once_all_have_published() {
        let xml = |name: &str| {
            TopologySource::Xml(
                std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/topologies")
                    .join(name),
            )
        };
        // A tree, and two machines whose NUMA spans overlap (one of them
        // with bitmap spans): every span's counter is the sum over all its
        // members, also those whose chain it is not.
        for source in [
            TopologySource::Synthetic("pack:2 l3:2 core:4 pu:2".into()),
            xml("kunpeng920.xml"),
            xml("magnycours-8numa.xml"),
        ] {
            let topo = Topology::new(&source, None).unwrap();
            let n = topo.workers();
            let map = LoadMap::new(&topo);
            let mut pubs: Vec<Publisher> = (0..n).map(|_| Publisher::new()).collect();
            let mut rng = 12345u64;
            let mut now = 0;
            let mut current = vec![c(0, 0); n];
            for step in 0..20_000u64 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let w = (rng % n as u64) as usize;
                current[w] = c((rng >> 8) as u32 % 2, (rng >> 16) as u32 % 300);
                // 50 us per step: most updates are held back. Every 97th
                // step the worker "parks": a forced publish.
                now += 50_000;
                let force = step % 97 == 0;
                if let Publish::Now { running, queued } = pubs[w].decide(now, current[w], MS, force)
                {
                    map.publish(w, running, queued);
                }
            }
            // Every worker publishes what it holds (as before parking).
            for w in 0..n {
                if let Publish::Now { running, queued } = pubs[w].decide(now, current[w], MS, true)
                {
                    map.publish(w, running, queued);
                }
            }
            for span in topo.all_spans() {
                let r: u32 = span.iter().map(|w| current[w].running).sum();
                let q: u32 = span.iter().map(|w| current[w].queued).sum();
                assert_eq!(
                    map.load(&span),
                    Load {
                        running: r,
                        queued: q
                    },
                    "{}: span {span}",
                    topo.description()
                );
            }
        }
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
