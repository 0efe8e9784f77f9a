//! Wakeup placement: which worker runs a woken task.
//!
//! This is the hot path of every message-passing program, and it is the
//! kernel's `select_task_rq_fair()` for a wakeup: `wake_affine()` picks a
//! target, then `select_idle_sibling()` looks for an idle worker near it,
//! cheap checks first, inside the target's LLC (seed 001, Mel Gorman's
//! series):
//!
//! 1. `target` idle -> target;
//! 2. `prev` (the task's last worker) idle and in target's LLC -> prev;
//! 3. the task's `recent_used` worker: read it and always replace it with
//!    `prev` (patch 3); if it is neither, shares the LLC and is idle -> it
//!    (a "recent hit"; otherwise a "miss");
//! 4. if the LLC's `has_idle_cores` hint is set: a core whose workers are all
//!    idle, scanning cores from target's; the first idle worker seen on the
//!    way is remembered and returned when no whole core is idle (patch 4);
//!    the hint is cleared when no whole core was found. This search already
//!    looked at every worker of the LLC, so step 5 is skipped after it.
//!    On a hybrid machine ([`Topology::is_asymmetric`]) the search goes on
//!    past the first whole idle core and takes the most capable one, and
//!    the remembered worker is the most capable idle one seen (first seen
//!    among equals): the kernel's `select_idle_capacity()`, simplified, as
//!    tasks carry no utilization to fit against a capacity. Steps 1-3
//!    (cache-hot workers) and the bounded scan of step 5 are unchanged;
//! 5. scan the LLC from `target + 1`, wrapping, for an idle worker, at most
//!    `nr` workers ([`SisMode`]);
//! 6. -> target.
//!
//! Before step 1, a wakeup whose target is the waker's own worker, when that
//! worker has nothing else queued, goes straight to its LIFO slot: the
//! kernel's sync wakeup (`wake_affine_idle`: the waker's CPU runs only the
//! waker, which is about to sleep), the common case of a message reply.
//!
//! Every "is idle" test that picks a worker claims it (marks it not idle)
//! before the task is pushed, so a burst of wakes spreads over the idle
//! workers instead of stacking on the first. The policy is plain code over
//! a topology and an [`IdleView`], tested without threads.

use std::ops::Range;
use std::sync::atomic::AtomicUsize;

use crate::topology::Topology;
use crate::tunables::SisMode;

/// Sentinel for "no worker" (a task that never ran, no recent worker).
pub const NO_WORKER: usize = usize::MAX;

/// Idle state as placement sees it.
pub trait IdleView {
    /// Whether `w` is idle (the kernel's `available_idle_cpu()`).
    fn is_idle(&self, w: usize) -> bool;
    /// Claims `w` if idle: marks it not idle; returns whether it was.
    fn claim(&self, w: usize) -> bool;
    /// The `has_idle_cores` hint of `w`'s LLC.
    fn has_idle_cores(&self, w: usize) -> bool;
    /// Clears `w`'s LLC's hint.
    fn clear_idle_cores(&self, w: usize);
    /// The first idle worker of `span` at or after `from` (wrapping inside
    /// the span), at most `max` workers away, and the idle-mask words read
    /// to find it (0 for a view without a mask).
    fn find_idle(&self, span: &Range<usize>, from: usize, max: usize) -> (Option<usize>, usize) {
        let n = span.len();
        if n == 0 {
            return (None, 0);
        }
        let off = from.saturating_sub(span.start) % n;
        let w = (0..max.min(n))
            .map(|i| span.start + (off + i) % n)
            .find(|&w| self.is_idle(w));
        (w, 0)
    }
}

/// How `select_idle_sibling` chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Step 1.
    Target,
    /// Step 2.
    Prev,
    /// Step 3.
    RecentHit,
    /// Step 4, a whole idle core.
    IdleCore,
    /// Step 4, an idle worker seen while looking for a core.
    IdleCandidate,
    /// Step 5.
    ScanFound,
    /// Step 6.
    Fallback,
}

/// The switches of `select_idle_sibling` for one call.
#[derive(Debug, Clone, Copy)]
pub struct SisConfig {
    /// Check the recently used worker (step 3).
    pub recent_used: bool,
    /// Search for an idle core (step 4).
    pub idle_core: bool,
    /// Workers the LLC scan may examine (step 5).
    pub scan_nr: usize,
}

/// The result of [`select_idle_sibling`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// The chosen worker.
    pub worker: usize,
    /// Which step chose it.
    pub outcome: Outcome,
    /// Whether step 3 ran and missed.
    pub recent_miss: bool,
    /// Workers examined by step 5.
    pub scanned: usize,
    /// Idle-mask words read by step 5.
    pub words: usize,
}

/// The kernel's `wake_affine()`, the target a wake made on worker `waker`
/// starts its placement from: the task's previous worker `prev` when it is
/// idle and shares the waker's LLC (`wake_affine_idle`: an idle prev in the
/// same cache is as warm and needs no queueing), or when the waker is
/// loaded and prev is not (`wake_affine_weight`'s spirit); else the waker.
/// An idle prev in another LLC does not pull the wake away from the
/// waker's cache, where [`select_idle_sibling`] then looks for an idle
/// worker.
///
/// The views are asked lazily, in this order, as the runtime reads them:
/// `prev_idle(prev)`, then `waker_loaded()` (the waker holds other queued
/// work), then `prev_loaded(prev)` (prev's queues hold work).
///
/// ```
/// use hwsched::{Topology, TopologySource};
/// use hwsched::policy::wake_affine;
/// let t = Topology::new(&TopologySource::Synthetic("pack:1 l3:2 core:2 pu:1".into()), None)?;
/// // An idle prev in the waker's LLC, and one in the other LLC.
/// assert_eq!(wake_affine(&t, 0, Some(1), || false, |_| true, |_| false), 1);
/// assert_eq!(wake_affine(&t, 0, Some(2), || false, |_| true, |_| false), 0);
/// // A loaded waker, an unloaded prev anywhere.
/// assert_eq!(wake_affine(&t, 0, Some(2), || true, |_| false, |_| false), 2);
/// assert_eq!(wake_affine(&t, 0, None, || true, |_| true, |_| false), 0);
/// # Ok::<(), hwsched::BuildError>(())
/// ```
#[inline]
pub fn wake_affine(
    topology: &Topology,
    waker: usize,
    prev: Option<usize>,
    waker_loaded: impl FnOnce() -> bool,
    prev_idle: impl FnOnce(usize) -> bool,
    prev_loaded: impl FnOnce(usize) -> bool,
) -> usize {
    if let Some(p) = prev {
        if p != waker
            && ((prev_idle(p) && topology.llc_span(waker).contains(&p))
                || (waker_loaded() && !prev_loaded(p)))
        {
            return p;
        }
    }
    waker
}

/// Step 5's depth (`nr`) for [`SisMode`] `mode` over an LLC of
/// `llc_weight` workers: [`prop_depth`] of `avg_idle_ns` and
/// `avg_scan_cost_ns` (`Prop`), [`util_depth`] of the LLC's busy fraction,
/// `llc_running() / llc_weight` from the load counters (`Util`, the only
/// mode that reads them), the whole LLC (`Full`), or none (`Off`).
///
/// ```
/// use hwsched::policy::scan_depth;
/// use hwsched::SisMode;
/// assert_eq!(scan_depth(SisMode::Full, 8, 0, 0, || 8), 8);
/// assert_eq!(scan_depth(SisMode::Off, 8, 0, 0, || 0), 0);
/// assert_eq!(scan_depth(SisMode::Util, 16, 0, 0, || 0), 16);
/// assert_eq!(scan_depth(SisMode::Prop, 8, 0, 0, || unreachable!()), 4);
/// ```
#[inline]
pub fn scan_depth(
    mode: SisMode,
    llc_weight: usize,
    avg_idle_ns: u64,
    avg_scan_cost_ns: u64,
    llc_running: impl FnOnce() -> u32,
) -> usize {
    match mode {
        SisMode::Prop => prop_depth(llc_weight, avg_idle_ns, avg_scan_cost_ns),
        SisMode::Util => util_depth(llc_weight, f64::from(llc_running()) / llc_weight as f64),
        SisMode::Full => llc_weight,
        SisMode::Off => 0,
    }
}

/// One wake in this many measures its placement's cost for `SIS_PROP`'s
/// `avg_scan_cost` (two clock reads); the others read no clock.
pub const SCAN_COST_SAMPLE: u32 = 32;

/// Step 5's depth under `SIS_PROP` (seed 001): `span_avg = llc_weight *
/// avg_idle / 512`; `span_avg / (avg_scan_cost + 1)` if `span_avg >
/// 4 * avg_scan_cost`, else 4.
///
/// ```
/// assert_eq!(hwsched::policy::prop_depth(8, 0, 0), 4);
/// assert_eq!(hwsched::policy::prop_depth(8, 512_000, 999), 8); // 8000 / 1000
/// ```
pub fn prop_depth(llc_weight: usize, avg_idle_ns: u64, avg_scan_cost_ns: u64) -> usize {
    let span_avg = llc_weight as u64 * avg_idle_ns / 512;
    if span_avg > 4 * avg_scan_cost_ns {
        (span_avg / (avg_scan_cost_ns + 1)) as usize
    } else {
        4
    }
}

/// Step 5's depth under `SIS_UTIL` (upstream since v6.0):
/// `llc_weight * (1 - (1.17 u)^2)`, clamped at 0, `u` the LLC's busy
/// fraction. Nothing is scanned above ~85% busy.
///
/// ```
/// assert_eq!(hwsched::policy::util_depth(16, 0.0), 16);
/// assert_eq!(hwsched::policy::util_depth(16, 0.9), 0);
/// ```
pub fn util_depth(llc_weight: usize, busy: f64) -> usize {
    let x = 1.17 * busy.clamp(0.0, 1.0);
    let f = (1.0 - x * x).max(0.0);
    (llc_weight as f64 * f) as usize
}

/// `select_idle_sibling(prev, target)` within `target`'s LLC. See the
/// module docs for the steps. `recent_used` is the task's field: it is read
/// and always set to `prev`.
pub fn select_idle_sibling(
    topo: &Topology,
    view: &impl IdleView,
    cfg: SisConfig,
    recent_used: &AtomicUsize,
    prev: usize,
    target: usize,
) -> Choice {
    let mut choice = Choice {
        worker: target,
        outcome: Outcome::Fallback,
        recent_miss: false,
        scanned: 0,
        words: 0,
    };
    let recent = recent_used.load(std::sync::atomic::Ordering::Relaxed);
    if recent != prev {
        recent_used.store(prev, std::sync::atomic::Ordering::Relaxed);
    }
    let llc: Range<usize> = topo.llc_span(target);
    let pick = |c: &mut Choice, w: usize, o: Outcome| {
        c.worker = w;
        c.outcome = o;
    };
    // 1.
    if view.claim(target) {
        pick(&mut choice, target, Outcome::Target);
        return choice;
    }
    // 2.
    if prev != target && prev != NO_WORKER && llc.contains(&prev) && view.claim(prev) {
        pick(&mut choice, prev, Outcome::Prev);
        return choice;
    }
    // 3.
    if cfg.recent_used {
        if recent != NO_WORKER
            && recent != prev
            && recent != target
            && llc.contains(&recent)
            && view.claim(recent)
        {
            pick(&mut choice, recent, Outcome::RecentHit);
            return choice;
        }
        choice.recent_miss = true;
    }
    // 4.
    if cfg.idle_core && view.has_idle_cores(target) {
        // On a hybrid machine: the most capable whole idle core and idle
        // worker (the first seen among equals). With one capacity `more`
        // is never true, and the first whole idle core is taken at once.
        let asym = topo.is_asymmetric();
        let more = |than: Option<usize>, x: usize| {
            than.is_none_or(|than| topo.capacity(x) > topo.capacity(than))
        };
        let mut best_core: Option<usize> = None;
        let mut candidate = None;
        // Cores of the LLC from target's, wrapping (no allocation: cores
        // are contiguous spans, stepped through in place).
        let first = topo.core_span(target).start;
        let mut w = first;
        loop {
            let core = topo.core_span(w);
            let mut all_idle = true;
            for x in core.clone() {
                if view.is_idle(x) {
                    if more(candidate, x) {
                        candidate = Some(x);
                    }
                } else {
                    all_idle = false;
                }
            }
            if all_idle && asym {
                if more(best_core, core.start) {
                    best_core = Some(core.start);
                }
            } else if all_idle && view.claim(core.start) {
                pick(&mut choice, core.start, Outcome::IdleCore);
                return choice;
            }
            w = if core.end >= llc.end {
                llc.start
            } else {
                core.end
            };
            if w == first {
                break;
            }
        }
        if let Some(core) = best_core {
            if view.claim(core) {
                pick(&mut choice, core, Outcome::IdleCore);
                return choice;
            }
        }
        view.clear_idle_cores(target);
        if let Some(c) = candidate {
            if view.claim(c) {
                pick(&mut choice, c, Outcome::IdleCandidate);
                return choice;
            }
        }
        return choice;
    }
    // 5. The idle mask is read a word at a time; a worker found idle but
    // claimed by someone else first is skipped and the scan goes on.
    let n = llc.len();
    let nr = cfg.scan_nr.min(n.saturating_sub(1));
    let rel = target - llc.start;
    let mut off = 1;
    while off <= nr {
        let from = llc.start + (rel + off) % n;
        let (found, words) = view.find_idle(&llc, from, nr - off + 1);
        choice.words += words;
        let Some(w) = found else {
            choice.scanned = nr;
            break;
        };
        let dist = (w - llc.start + n - rel) % n;
        choice.scanned = dist;
        if view.claim(w) {
            pick(&mut choice, w, Outcome::ScanFound);
            return choice;
        }
        off = dist + 1;
    }
    // 6.
    choice
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologySource;
    use std::cell::{Cell, RefCell};

    struct Scripted {
        idle: RefCell<Vec<bool>>,
        hint: Cell<bool>,
    }

    impl Scripted {
        fn new(n: usize, idle: &[usize]) -> Self {
            let mut v = vec![false; n];
            for &w in idle {
                v[w] = true;
            }
            Scripted {
                idle: RefCell::new(v),
                hint: Cell::new(false),
            }
        }
    }

    impl IdleView for Scripted {
        fn is_idle(&self, w: usize) -> bool {
            self.idle.borrow()[w]
        }
        fn claim(&self, w: usize) -> bool {
            std::mem::replace(&mut self.idle.borrow_mut()[w], false)
        }
        fn has_idle_cores(&self, _: usize) -> bool {
            self.hint.get()
        }
        fn clear_idle_cores(&self, _: usize) {
            self.hint.set(false)
        }
    }

    fn big() -> Topology {
        Topology::new(
            &TopologySource::Synthetic("pack:2 l3:2 core:4 pu:2".into()),
            None,
        )
        .unwrap()
    }

    const ALL: SisConfig = SisConfig {
        recent_used: true,
        idle_core: true,
        scan_nr: 8,
    };

    fn sis(topo: &Topology, v: &Scripted, recent: usize, prev: usize, target: usize) -> Choice {
        select_idle_sibling(topo, v, ALL, &AtomicUsize::new(recent), prev, target)
    }

    #[test]
    fn branches_are_taken_in_order() {
        let t = big();
        // Worker 0's LLC is 0..8. target 2, prev 5, recent 6.
        let c = sis(&t, &Scripted::new(32, &[2, 5, 6, 7]), 6, 5, 2);
        assert_eq!(
            (c.worker, c.outcome),
            (2, Outcome::Target),
            "target idle wins over prev"
        );
        let c = sis(&t, &Scripted::new(32, &[5, 6, 7]), 6, 5, 2);
        assert_eq!(
            (c.worker, c.outcome),
            (5, Outcome::Prev),
            "prev idle wins over recent"
        );
        let c = sis(&t, &Scripted::new(32, &[6, 7]), 6, 5, 2);
        assert_eq!((c.worker, c.outcome), (6, Outcome::RecentHit));
        // prev outside the LLC is not taken.
        let c = sis(&t, &Scripted::new(32, &[20, 7]), 6, 20, 2);
        assert_eq!(
            (c.worker, c.outcome, c.recent_miss),
            (7, Outcome::ScanFound, true)
        );
        // Scan from target + 1, wrapping: 3,4,..,7,0,1.
        let c = sis(&t, &Scripted::new(32, &[1, 4]), NO_WORKER, 2, 2);
        assert_eq!((c.worker, c.outcome, c.scanned), (4, Outcome::ScanFound, 2));
        let c = sis(&t, &Scripted::new(32, &[1]), NO_WORKER, 2, 2);
        assert_eq!((c.worker, c.scanned), (1, 7));
        // Nothing idle in the LLC (idle workers elsewhere do not count).
        let c = sis(&t, &Scripted::new(32, &[9, 30]), NO_WORKER, 2, 2);
        assert_eq!((c.worker, c.outcome), (2, Outcome::Fallback));
    }

    #[test]
    fn recent_used_becomes_prev_after_every_placement() {
        let t = big();
        let recent = AtomicUsize::new(6);
        for (idle, prev) in [
            (vec![2usize], 5usize),
            (vec![5], 3),
            (vec![], 4),
            (vec![1], 7),
        ] {
            let v = Scripted::new(32, &idle);
            select_idle_sibling(&t, &v, ALL, &recent, prev, 2);
            assert_eq!(recent.load(std::sync::atomic::Ordering::Relaxed), prev);
        }
    }

    #[test]
    fn idle_core_search_prefers_a_whole_core_then_the_candidate_and_clears_the_hint() {
        let t = big();
        // Core 2..4 half idle (3), core 6..8 wholly idle.
        let v = Scripted::new(32, &[3, 6, 7]);
        v.hint.set(true);
        let c = sis(&t, &v, NO_WORKER, 0, 0);
        assert_eq!((c.worker, c.outcome), (6, Outcome::IdleCore));
        assert!(v.hint.get(), "success keeps the hint");
        // Only half-idle cores: the first idle worker seen, and the hint goes.
        let v = Scripted::new(32, &[3, 5]);
        v.hint.set(true);
        let c = sis(&t, &v, NO_WORKER, 0, 0);
        assert_eq!((c.worker, c.outcome), (3, Outcome::IdleCandidate));
        assert!(!v.hint.get(), "a failed core search clears the hint");
        // Without the hint the plain scan runs instead.
        let v = Scripted::new(32, &[3, 6, 7]);
        let c = sis(&t, &v, NO_WORKER, 0, 0);
        assert_eq!((c.worker, c.outcome), (3, Outcome::ScanFound));
        // Switched off: no core search even with the hint.
        let v = Scripted::new(32, &[3, 6, 7]);
        v.hint.set(true);
        let cfg = SisConfig {
            idle_core: false,
            ..ALL
        };
        let c = select_idle_sibling(&t, &v, cfg, &AtomicUsize::new(NO_WORKER), 0, 0);
        assert_eq!(c.outcome, Outcome::ScanFound);
    }

    #[test]
    fn idle_core_search_prefers_capacity_on_a_hybrid() {
        // Raptor Lake: P-cores 0..12 (2 threads, capacity 1024), E-cores
        // 12..20 (capacity 798), one LLC.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/topologies/raptorlake-hybrid.xml");
        let t = Topology::new(&TopologySource::Xml(path), None).unwrap();
        assert!(t.is_asymmetric());
        // Target on an E-core: whole idle E-cores come first in the scan,
        // but the whole idle P-core wins.
        let v = Scripted::new(20, &[4, 5, 13, 14, 15]);
        v.hint.set(true);
        let c = sis(&t, &v, NO_WORKER, 12, 12);
        assert_eq!((c.worker, c.outcome), (4, Outcome::IdleCore));
        // A whole idle E-core before a P-core thread whose sibling is busy
        // (whole cores first, as on a symmetric machine).
        let v = Scripted::new(20, &[13, 7]);
        v.hint.set(true);
        let c = sis(&t, &v, NO_WORKER, 12, 12);
        assert_eq!((c.worker, c.outcome), (13, Outcome::IdleCore));
        // No whole idle core: the idle P-core threads, first seen.
        let v = Scripted::new(20, &[9, 7]);
        v.hint.set(true);
        let c = sis(&t, &v, NO_WORKER, 12, 12);
        assert_eq!((c.worker, c.outcome), (7, Outcome::IdleCandidate));
        // Among equals, the first seen from the target.
        let v = Scripted::new(20, &[13, 15]);
        v.hint.set(true);
        let c = sis(&t, &v, NO_WORKER, 12, 12);
        assert_eq!((c.worker, c.outcome), (13, Outcome::IdleCore));
        // The cache-hot steps are unchanged: an idle target wins.
        let v = Scripted::new(20, &[12, 4, 5]);
        v.hint.set(true);
        assert_eq!(sis(&t, &v, NO_WORKER, 12, 12).outcome, Outcome::Target);
        // GB10, no SMT: workers 0..5 have capacity 718, 5..10 have 997, one
        // LLC. The idle big core wins over the little one seen first.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/topologies/gb10-hybrid.xml");
        let t = Topology::new(&TopologySource::Xml(path), None).unwrap();
        let v = Scripted::new(20, &[2, 7]);
        v.hint.set(true);
        let c = sis(&t, &v, NO_WORKER, 1, 1);
        assert_eq!((c.worker, c.outcome), (7, Outcome::IdleCore));
    }

    #[test]
    fn recent_used_switch_skips_step_3() {
        let t = big();
        let cfg = SisConfig {
            recent_used: false,
            ..ALL
        };
        let v = Scripted::new(32, &[6]);
        let c = select_idle_sibling(&t, &v, cfg, &AtomicUsize::new(6), 5, 2);
        assert_eq!(
            (c.worker, c.outcome, c.recent_miss),
            (6, Outcome::ScanFound, false)
        );
    }

    #[test]
    fn scan_depth_bounds_the_scan() {
        let t = big();
        let cfg = SisConfig { scan_nr: 2, ..ALL };
        let v = Scripted::new(32, &[6]);
        let c = select_idle_sibling(&t, &v, cfg, &AtomicUsize::new(NO_WORKER), 2, 2);
        assert_eq!((c.worker, c.outcome, c.scanned), (2, Outcome::Fallback, 2));
    }

    #[test]
    fn prop_depth_follows_the_formula() {
        // span_avg = 8 * avg_idle / 512.
        assert_eq!(prop_depth(8, 1_000_000, 1_000), 15); // 15625 / 1001
        assert_eq!(prop_depth(8, 64_000, 100), 9); // 1000 / 101
        assert_eq!(
            prop_depth(8, 64_000, 300),
            4,
            "span_avg 1000 <= 4 * 300: the floor of 4"
        );
        assert_eq!(prop_depth(8, 0, 0), 4);
        assert_eq!(
            prop_depth(64, 512_000, 0),
            64_000,
            "free scans: depth capped by the LLC later"
        );
    }

    #[test]
    fn util_depth_scans_less_as_the_llc_fills_and_nothing_above_85_percent() {
        assert_eq!(util_depth(16, 0.0), 16);
        assert_eq!(util_depth(16, 0.5), 10); // 16 * (1 - 0.342225)
        assert!(util_depth(16, 0.8) < util_depth(16, 0.5));
        assert_eq!(util_depth(16, 0.86), 0);
        assert_eq!(util_depth(64, 0.9), 0);
        assert_eq!(util_depth(8, 1.0), 0);
    }
}
