//! The load counters every worker publishes to and every placement reads
//! (policy/load.rs says what they count and when a worker publishes): one
//! cache-padded counter per group of every level ([`GroupLoad`]) and the map
//! from a span, or a worker's ancestors, to them ([`LoadMap`]).

use crossbeam_utils::CachePadded;

use crate::policy::load::Load;
use crate::sync::{AtomicU64, Ordering};
use crate::topology::{Span, Topology};

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
    use crate::policy::load::{Contribution, Publish, Publisher};
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
}
