//! Placement of a task spawned from outside the runtime:
//! [`place_external`], the sequence (an awake idle worker, else one parked
//! worker woken to search, else the burst's target while that wake is in
//! flight, else the idlest group), and its last step `find_idlest_group`,
//! after the kernel's `find_idlest_group()` / `find_idlest_cpu()` used by
//! `sched_balance_find_dst_cpu` for fork and exec.
//!
//! Descend from the machine: at each level choose the child group with the
//! most spare workers by its rate-limited load counter (ties: the lowest
//! load per worker, then round-robin); in the last group take an idle
//! worker (one that is not parked first), else the least loaded one.
//!
//! The counters may be up to one interval stale, so a burst of spawns would
//! otherwise pile onto the group that looked idlest a millisecond ago. Two
//! things prevent it: the chosen idle worker is claimed (marked not idle)
//! at once, so the next spawn sees it busy; and ties, which is what stale
//! counters of an idle machine look like, are broken by a round-robin
//! counter read digit by digit down the tree (mixed radix), so consecutive
//! spawns go to different packages, then different caches, then cores.

use crate::policy::load::Load;
use crate::topology::{Span, Topology};

/// What placement reads: group loads and idle flags.
pub trait PlacementView {
    /// The (possibly stale) load of a span.
    fn load(&self, span: &Span) -> Load;
    /// Claims worker `w` if it is idle (marks it not idle). Returns whether
    /// it was idle and is now claimed.
    fn claim_idle(&self, w: usize) -> bool;
    /// Whether idle worker `w` is asleep (the deeper idle state, costly to
    /// leave) rather than walking or spinning.
    fn is_parked(&self, _w: usize) -> bool {
        false
    }
    /// Tasks waiting on `w` now, in its inbox and deque (the load counters
    /// lag them, and a worker stuck in a long poll does not publish at all).
    fn backlog(&self, _w: usize) -> usize {
        0
    }
}

/// What [`place_external`] reads and claims besides the load counters: the
/// wake protocol's state (sched/sleepers.rs). The runtime implements it over its
/// atomics (worker/mod.rs), a simulator over its own state.
pub trait ExternalView: PlacementView {
    /// Claims an idle worker that is awake (walking or spinning, not
    /// parked), scanning the idle set from worker `from`'s word: sched/sleepers.rs
    /// `Sleepers::claim_awake_idle`.
    fn claim_awake_idle(&self, from: usize) -> Option<usize>;
    /// The pusher's check: nobody searches and someone is parked
    /// (sched/sleepers.rs `Sleepers::needs_wake`).
    fn needs_wake(&self) -> bool;
    /// Claims the parked worker nearest to `near` (in [`wake_spans`]
    /// order) as the one searcher in flight, counting it awake
    /// (sched/sleepers.rs `Sleepers::wake_one`); `None` if nobody needs waking.
    ///
    /// [`wake_spans`]: crate::policy::wake_spans
    fn wake_one(&self, near: usize) -> Option<usize>;
    /// Whether some worker is asleep or committed to sleeping (the wake
    /// protocol's `awake` count is below the workers): after steps 1 and 2
    /// failed, that means a wake is in flight.
    fn someone_asleep(&self) -> bool;
    /// The burst's target: the worker the last claim or wake chose.
    fn burst_target(&self) -> usize;
    /// Makes `w` the burst's target.
    fn set_burst_target(&self, w: usize);
}

/// Where [`place_external`] puts a task, and how the caller delivers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum External {
    /// An awake idle worker, claimed (and made the burst's target): a
    /// plain delivery, no futex wake.
    AwakeIdle(usize),
    /// A parked worker, claimed to search as the one wake in flight (and
    /// made the burst's target): delivered to it, then notified.
    Woken(usize),
    /// The burst's target, while the wake is in flight: no second wake.
    BurstTarget(usize),
    /// Every worker awake and busy: `find_idlest_group`'s choice.
    Idlest(usize),
}

impl External {
    /// The chosen worker.
    pub fn worker(self) -> usize {
        match self {
            External::AwakeIdle(w)
            | External::Woken(w)
            | External::BurstTarget(w)
            | External::Idlest(w) => w,
        }
    }
}

/// Placement of a task spawned from outside the runtime, cheapest first;
/// `rr` is the spawning thread's round-robin ticket:
///
/// 1. an idle worker that is awake (walking or spinning): claimed, and the
///    task delivered without a futex wake (the kernel's
///    `find_idlest_group_cpu()` prefers the shallowest idle state);
/// 2. else, if nobody searches and someone is parked: one parked worker
///    near `rr` is woken to search and gets the task;
/// 3. else, while a wake is in flight (someone is still asleep): the
///    burst's target, the worker of the last claim or wake (no second
///    wake: it fans out by waking the next worker once it holds more than
///    it can run);
/// 4. else (every worker awake and busy): [`find_idlest_group`] over the
///    load counters.
///
/// The worker of 1 or 2 becomes the burst's target. So a burst of spawns
/// costs O(workers) futex wakes, not one per spawn.
#[inline]
pub fn place_external(topo: &Topology, view: &impl ExternalView, rr: usize) -> External {
    let n = topo.workers();
    if let Some(w) = view.claim_awake_idle(rr % n) {
        view.set_burst_target(w);
        return External::AwakeIdle(w);
    }
    if view.needs_wake() {
        if let Some(w) = view.wake_one(rr % n) {
            view.set_burst_target(w);
            return External::Woken(w);
        }
    }
    if view.someone_asleep() {
        External::BurstTarget(view.burst_target().min(n - 1))
    } else {
        External::Idlest(find_idlest_group(topo, view, rr).0)
    }
}

/// The children of a span: a level's groups, or single workers.
#[derive(Clone, Copy)]
enum Kids<'a> {
    Groups(&'a [Span]),
    /// Single workers from this one (a span no level covers).
    Leaves(usize),
}

/// Chooses a worker for an external spawn; `rr` is a round-robin ticket.
/// Returns the worker and whether it was an idle one.
pub fn find_idlest_group(topo: &Topology, view: &impl PlacementView, rr: usize) -> (usize, bool) {
    let mut span = Span::range(topo.root_span());
    let mut rr = rr;
    loop {
        let children = match topo.children(&span) {
            Some(c) => Kids::Groups(c),
            None if span.len() <= 1 => return (span.first(), false),
            None => Kids::Leaves(span.first()),
        };
        let k = match children {
            Kids::Groups(c) => c.len(),
            Kids::Leaves(_) => span.len(),
        };
        // No allocation: the i-th child is read in place (a range is
        // copied; a bitmap span, only on the kernel's overlapping NUMA
        // levels, shares its words).
        let children = |i: usize| -> Span {
            match children {
                Kids::Groups(c) => c[i].clone(),
                Kids::Leaves(s) => Span::single(s + i),
            }
        };
        let rot = rr % k;
        rr /= k;
        let order = (0..k).map(|i| (rot + i) % k);
        if (0..k).all(|i| children(i).len() == 1) {
            // The last group: an idle worker, the shallowest idle state first
            // (the kernel's find_idlest_group_cpu() prefers the idle CPU with
            // the smallest exit latency: here one not parked, which a push
            // reaches without a futex wake), else the least loaded.
            for parked in [false, true] {
                for i in order.clone() {
                    let w = children(i).first();
                    if view.is_parked(w) == parked && view.claim_idle(w) {
                        return (w, true);
                    }
                }
            }
            // Least loaded: the counter plus the inbox backlog, which a
            // worker stuck in a long poll cannot publish.
            let best = order
                .min_by_key(|&i| {
                    view.load(&children(i)).total() + view.backlog(children(i).first()) as u64
                })
                .unwrap_or(0);
            return (children(best).first(), false);
        }
        // Most spare workers first; then lowest load per worker; then the
        // round-robin order (min_by_key keeps the first of equals).
        let best = order
            .min_by(|&a, &b| {
                let (ca, cb) = (children(a), children(b));
                let (la, lb) = (view.load(&ca), view.load(&cb));
                let (wa, wb) = (ca.len() as u64, cb.len() as u64);
                let spare_a = wa as i64 - la.total() as i64;
                let spare_b = wb as i64 - lb.total() as i64;
                spare_b
                    .cmp(&spare_a)
                    .then((la.total() * wb).cmp(&(lb.total() * wa)))
            })
            .unwrap_or(0);
        span = children(best);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologySource;
    use std::cell::RefCell;
    use std::collections::HashSet;

    struct Scripted {
        load: Vec<Load>,
        idle: RefCell<Vec<bool>>,
        parked: Vec<bool>,
    }

    impl PlacementView for Scripted {
        fn load(&self, span: &Span) -> Load {
            span.iter().fold(Load::default(), |a, w| Load {
                running: a.running + self.load[w].running,
                queued: a.queued + self.load[w].queued,
            })
        }
        fn claim_idle(&self, w: usize) -> bool {
            std::mem::replace(&mut self.idle.borrow_mut()[w], false)
        }
        fn is_parked(&self, w: usize) -> bool {
            self.parked[w]
        }
    }

    fn big() -> Topology {
        Topology::new(
            &TopologySource::Synthetic("pack:2 l3:2 core:4 pu:2".into()),
            None,
        )
        .unwrap()
    }

    fn busy() -> Load {
        Load {
            running: 1,
            queued: 0,
        }
    }

    #[test]
    fn lands_in_the_package_llc_and_core_with_spare_capacity() {
        let topo = big();
        // Everything busy except worker 21 (package 1, LLC 16..24, core 20..22).
        let mut load = vec![busy(); 32];
        load[21] = Load::default();
        let mut idle = vec![false; 32];
        idle[21] = true;
        for rr in 0..8 {
            let v = Scripted {
                load: load.clone(),
                idle: RefCell::new(idle.clone()),
                parked: vec![false; 32],
            };
            assert_eq!(find_idlest_group(&topo, &v, rr), (21, true), "rr {rr}");
        }
        // Package 0 overloaded, package 1 has one spare worker in LLC 24..32
        // but nobody is marked idle: the least loaded worker there.
        let mut load = vec![
            Load {
                running: 1,
                queued: 3
            };
            32
        ];
        for l in &mut load[16..32] {
            *l = busy();
        }
        load[27] = Load::default();
        let v = Scripted {
            load,
            idle: RefCell::new(vec![false; 32]),
            parked: vec![false; 32],
        };
        assert_eq!(find_idlest_group(&topo, &v, 0), (27, false));
    }

    #[test]
    fn a_burst_into_an_idle_machine_spreads_over_all_workers() {
        let topo = big();
        // Stale counters (all zero) and every worker idle: claims and
        // round-robin must spread the burst.
        let v = Scripted {
            load: vec![Load::default(); 32],
            idle: RefCell::new(vec![true; 32]),
            parked: vec![false; 32],
        };
        let mut seen = HashSet::new();
        for rr in 0..1000 {
            seen.insert(find_idlest_group(&topo, &v, rr).0);
        }
        assert_eq!(seen.len(), 32);
        // The first two choices are in different packages.
        let v = Scripted {
            load: vec![Load::default(); 32],
            idle: RefCell::new(vec![true; 32]),
            parked: vec![false; 32],
        };
        let a = find_idlest_group(&topo, &v, 0).0;
        let b = find_idlest_group(&topo, &v, 1).0;
        assert_ne!(a / 16, b / 16);
    }

    #[test]
    fn an_idle_worker_that_is_not_parked_is_preferred() {
        let topo = big();
        // Core 0..2: both idle, worker 0 parked, worker 1 spinning.
        let mut idle = vec![false; 32];
        idle[0] = true;
        idle[1] = true;
        let mut parked = vec![false; 32];
        parked[0] = true;
        let mut load = vec![busy(); 32];
        load[0] = Load::default();
        load[1] = Load::default();
        let v = Scripted {
            load,
            idle: RefCell::new(idle),
            parked,
        };
        assert_eq!(find_idlest_group(&topo, &v, 0), (1, true));
        assert_eq!(
            find_idlest_group(&topo, &v, 0),
            (0, true),
            "then the parked one"
        );
    }

    /// A scripted wake protocol: awake idle workers, parked ones, a
    /// searcher, the burst target; every claim and wake recorded.
    struct Protocol {
        base: Scripted,
        searching: RefCell<bool>,
        target: RefCell<usize>,
    }

    impl PlacementView for Protocol {
        fn load(&self, span: &Span) -> Load {
            self.base.load(span)
        }
        fn claim_idle(&self, w: usize) -> bool {
            self.base.claim_idle(w)
        }
        fn is_parked(&self, w: usize) -> bool {
            self.base.parked[w]
        }
    }

    impl ExternalView for Protocol {
        fn claim_awake_idle(&self, from: usize) -> Option<usize> {
            let n = self.base.parked.len();
            let w = (0..n)
                .map(|i| (from + i) % n)
                .find(|&w| self.base.idle.borrow()[w] && !self.base.parked[w])?;
            self.base.idle.borrow_mut()[w] = false;
            Some(w)
        }
        fn needs_wake(&self) -> bool {
            !*self.searching.borrow() && self.someone_asleep()
        }
        fn wake_one(&self, near: usize) -> Option<usize> {
            let n = self.base.parked.len();
            let w = (0..n)
                .map(|i| (near + i) % n)
                .find(|&w| self.base.parked[w] && self.base.idle.borrow()[w])?;
            self.base.idle.borrow_mut()[w] = false;
            *self.searching.borrow_mut() = true;
            Some(w)
        }
        fn someone_asleep(&self) -> bool {
            // Still idle and parked (a woken one left the idle set).
            (0..self.base.parked.len()).any(|w| self.base.parked[w] && self.base.idle.borrow()[w])
                || *self.searching.borrow()
        }
        fn burst_target(&self) -> usize {
            *self.target.borrow()
        }
        fn set_burst_target(&self, w: usize) {
            *self.target.borrow_mut() = w;
        }
    }

    #[test]
    fn an_external_spawn_takes_the_cheapest_worker_then_follows_the_burst() {
        let topo = big();
        // Worker 5 awake and idle, workers 9 and 10 parked, the rest busy.
        let mut idle = vec![false; 32];
        let mut parked = vec![false; 32];
        idle[5] = true;
        for w in [9, 10] {
            idle[w] = true;
            parked[w] = true;
        }
        let v = Protocol {
            base: Scripted {
                load: vec![busy(); 32],
                idle: RefCell::new(idle),
                parked,
            },
            searching: RefCell::new(false),
            target: RefCell::new(0),
        };
        // 1. The awake idle worker, without a wake, even far from `rr`.
        assert_eq!(place_external(&topo, &v, 20), External::AwakeIdle(5));
        assert_eq!(v.burst_target(), 5);
        // 2. Then one parked worker, woken to search, nearest to `rr`.
        assert_eq!(place_external(&topo, &v, 10), External::Woken(10));
        assert_eq!(v.burst_target(), 10);
        // 3. While that wake is in flight: the burst's target, no second
        //    wake (worker 9 stays parked).
        for rr in 0..4 {
            assert_eq!(place_external(&topo, &v, rr), External::BurstTarget(10));
        }
        assert!(v.base.idle.borrow()[9], "no second wake");
        // 4. Every worker awake and busy: find_idlest_group's choice.
        let v = Protocol {
            base: Scripted {
                load: vec![busy(); 32],
                idle: RefCell::new(vec![false; 32]),
                parked: vec![false; 32],
            },
            searching: RefCell::new(false),
            target: RefCell::new(3),
        };
        for rr in 0..8 {
            let want = find_idlest_group(&topo, &v, rr).0;
            assert_eq!(place_external(&topo, &v, rr), External::Idlest(want));
        }
        assert_eq!(v.burst_target(), 3, "steps 3 and 4 leave the target");
    }
}
