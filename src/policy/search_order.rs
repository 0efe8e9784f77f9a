//! Search orders: which spans of workers a search near worker `w` tries,
//! nearest first. The wake protocol's choice of the parked worker to wake
//! (sched/sleepers.rs `Sleepers::wake_one`) and the re-check for queued work
//! (worker/steal.rs `find_queued_work`) take the first span of the order that
//! holds a candidate, so the order is the policy: which worker is woken,
//! whose queue is looked at first.
//!
//! - [`near_spans`]: `w`'s levels, smallest first, then every worker (the
//!   kernel's walk up the sched domains of a CPU);
//! - [`wake_spans`]: on a hybrid machine, the runs of the most capable
//!   workers of `w`'s LLC ([`capable_runs`]) first, then [`near_spans`]:
//!   among the parked workers of one cache, a big core searches and runs
//!   what it finds (the kernel's asymmetric-capacity preference,
//!   `select_idle_capacity()`, simplified: tasks carry no utilization to
//!   fit).
//!
//! Pure functions over a topology; the runtime precomputes the capable runs
//! once per LLC at start-up, and the iterators allocate nothing.

use std::ops::Range;

use crate::topology::{Level, Topology};

/// The spans around a worker, nearest first: the spans of its `levels`
/// (smallest first, as [`Topology::levels`] gives them), each as its runs
/// of contiguous workers (one range, except on the kernel's overlapping
/// NUMA levels: see [`Span`](crate::Span)), then `all` (every worker).
/// Where a search for a worker or a queue near it looks.
///
/// ```
/// use hwsched::{Topology, TopologySource};
/// use hwsched::policy::near_spans;
/// let t = Topology::new(&TopologySource::Synthetic("pack:2 l3:2 core:2 pu:1".into()), None)?;
/// let all = 0..t.workers();
/// let order: Vec<_> = near_spans(t.levels(5), &all).cloned().collect();
/// assert_eq!(order, [4..6, 4..8, 0..8, 0..8]);
/// # Ok::<(), hwsched::BuildError>(())
/// ```
#[inline]
pub fn near_spans<'a>(
    levels: &'a [Level],
    all: &'a Range<usize>,
) -> impl Iterator<Item = &'a Range<usize>> + Clone {
    levels
        .iter()
        .flat_map(|l| l.span.runs())
        .chain(std::iter::once(all))
}

/// Where a parked worker is woken to search near a worker: `capable` (the
/// runs of the most capable workers of its LLC, [`capable_runs`]; empty on
/// a symmetric machine) first, then [`near_spans`] of its `levels`.
#[inline]
pub fn wake_spans<'a>(
    capable: &'a [Range<usize>],
    levels: &'a [Level],
    all: &'a Range<usize>,
) -> impl Iterator<Item = &'a Range<usize>> + Clone {
    capable.iter().chain(near_spans(levels, all))
}

/// The runs (maximal contiguous ranges) of the most capable workers of the
/// LLC span `llc`, in worker order; empty on a machine whose workers all
/// have the same capacity ([`Topology::is_asymmetric`]), where
/// [`wake_spans`] is [`near_spans`].
///
/// ```
/// use hwsched::{Topology, TopologySource};
/// use hwsched::policy::capable_runs;
/// let t = Topology::new(&TopologySource::Synthetic("pack:1 l3:1 core:4 pu:1".into()), None)?;
/// assert!(capable_runs(&t, t.llc_span(0)).is_empty());
/// # Ok::<(), hwsched::BuildError>(())
/// ```
pub fn capable_runs(topology: &Topology, llc: Range<usize>) -> Box<[Range<usize>]> {
    if !topology.is_asymmetric() {
        return Box::default();
    }
    let top = llc.clone().map(|w| topology.capacity(w)).max().unwrap_or(0);
    let mut runs: Vec<Range<usize>> = Vec::new();
    for w in llc.filter(|&w| topology.capacity(w) == top) {
        match runs.last_mut() {
            Some(r) if r.end == w => r.end = w + 1,
            _ => runs.push(w..w + 1),
        }
    }
    runs.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologySource;

    fn topo(s: &str) -> Topology {
        Topology::new(&TopologySource::Synthetic(s.into()), None).unwrap()
    }

    #[test]
    fn near_spans_go_from_the_smallest_level_to_every_worker() {
        let t = topo("pack:2 l3:1 core:2 pu:2");
        let all = 0..t.workers();
        let order: Vec<_> = near_spans(t.levels(3), &all).cloned().collect();
        let mut expect: Vec<_> = t
            .levels(3)
            .iter()
            .map(|l| l.span.as_range().expect("a range").clone())
            .collect();
        expect.push(all.clone());
        assert_eq!(order, expect);
        assert!(order.windows(2).all(|p| p[0].len() <= p[1].len()));
        assert!(order.iter().all(|s| s.contains(&3)));
    }

    #[test]
    fn a_symmetric_machine_wakes_in_the_near_order() {
        let t = topo("pack:2 l3:2 core:4 pu:1");
        let all = 0..t.workers();
        for w in 0..t.workers() {
            let cap = capable_runs(&t, t.llc_span(w));
            assert!(cap.is_empty());
            assert!(wake_spans(&cap, t.levels(w), &all).eq(near_spans(t.levels(w), &all)));
        }
    }

    #[test]
    fn a_hybrid_machine_wakes_its_big_cores_first() {
        let xml = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/topologies/raptorlake-hybrid.xml"
        );
        let t = Topology::new(&TopologySource::Xml(xml.into()), None).unwrap();
        assert!(t.is_asymmetric());
        let all = 0..t.workers();
        let llc = t.llc_span(0);
        let top = llc.clone().map(|w| t.capacity(w)).max().unwrap();
        let cap = capable_runs(&t, llc.clone());
        // Exactly the most capable workers of the LLC, in order, in runs.
        let members: Vec<usize> = cap.iter().flat_map(|r| r.clone()).collect();
        let expect: Vec<usize> = llc.filter(|&w| t.capacity(w) == top).collect();
        assert_eq!(members, expect);
        assert!(
            cap.windows(2).all(|p| p[0].end < p[1].start),
            "maximal runs"
        );
        // They come first, then the near order.
        let w = t.workers() - 1;
        let order: Vec<_> = wake_spans(&cap, t.levels(w), &all).collect();
        assert_eq!(order.len(), cap.len() + t.levels(w).len() + 1);
        assert!(order[..cap.len()].iter().copied().eq(cap.iter()));
        assert!(order[cap.len()..]
            .iter()
            .copied()
            .eq(near_spans(t.levels(w), &all)));
    }
}
