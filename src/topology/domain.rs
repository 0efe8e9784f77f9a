//! The domain tree: levels, spans and groups, and its `Display`.

use std::fmt;
use std::ops::Range;

/// The most NUMA group levels (from hwloc's distance matrix or `Group`
/// objects above the NUMA nodes) a worker gets: the kernel's
/// `sched_init_numa` builds one level per distinct distance; past the third
/// one the levels are mostly the whole machine again.
pub const MAX_NUMA_GROUP_LEVELS: u8 = 3;

/// What a [`Level`] groups together.
///
/// These are the kernel's scheduling-domain levels (`SMT`, `CLS`, `MC`/LLC,
/// the NUMA levels, `PKG`, and the whole machine) as hwloc reports them.
/// Spans grow in this order on most machines; a NUMA node may also hold
/// several packages (its level then comes above the package's), and a NUMA
/// group may lie inside a package or span several.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LevelKind {
    /// Hardware threads of one core.
    Smt,
    /// Cores sharing a cache that is not the last level (an L2 shared by a
    /// module, an E-core cluster or a Kunpeng cluster) or an hwloc `Group`
    /// below the LLC: the kernel's `CLS`.
    Cluster,
    /// PUs sharing the last-level CPU cache, cut at NUMA node boundaries
    /// (the kernel's `MC`: the LLC intersected with the node). Memory-side
    /// caches (KNL's MCDRAM in cache mode) do not count; without any cache
    /// information the package stands for the LLC, as in the kernel.
    Llc,
    /// PUs of one NUMA node.
    Numa,
    /// PUs of one package (socket).
    Package,
    /// NUMA nodes close to each other: the `n`-th (from 1, at most
    /// [`MAX_NUMA_GROUP_LEVELS`]) grouping of the nodes by hwloc's distance
    /// matrix (nodes joined by distances up to a threshold, one level per
    /// distinct distance as in the kernel's `sched_init_numa`) or by hwloc
    /// `Group` objects above the nodes.
    NumaGroup(u8),
    /// Every worker of the runtime.
    Machine,
}

impl LevelKind {
    /// All kinds, smallest first.
    pub const ALL: [LevelKind; 9] = [
        LevelKind::Smt,
        LevelKind::Cluster,
        LevelKind::Llc,
        LevelKind::Numa,
        LevelKind::Package,
        LevelKind::NumaGroup(1),
        LevelKind::NumaGroup(2),
        LevelKind::NumaGroup(3),
        LevelKind::Machine,
    ];

    /// A short name for tables: `SMT`, `cluster`, `LLC`, `NUMA`, `package`,
    /// `NUMA group 1` .. `NUMA group 3`, `machine`.
    pub fn name(self) -> &'static str {
        match self {
            LevelKind::Smt => "SMT",
            LevelKind::Cluster => "cluster",
            LevelKind::Llc => "LLC",
            LevelKind::Numa => "NUMA",
            LevelKind::Package => "package",
            LevelKind::NumaGroup(1) => "NUMA group 1",
            LevelKind::NumaGroup(2) => "NUMA group 2",
            LevelKind::NumaGroup(3) => "NUMA group 3",
            LevelKind::NumaGroup(_) => "NUMA group",
            LevelKind::Machine => "machine",
        }
    }

    /// Which of two equal spans keeps its level (the other is degenerate):
    /// the smaller kind, as the kernel keeps the child of a degenerate
    /// pair, except that the LLC is kept over a cluster (wake placement
    /// looks for the LLC).
    fn keep_rank(self) -> (u8, LevelKind) {
        match self {
            LevelKind::Smt => (0, self),
            LevelKind::Llc => (1, self),
            _ => (2, self),
        }
    }
}

impl fmt::Display for LevelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One scheduling level of one worker: the span of workers it covers and the
/// child groups that partition it (the kernel's `sched_domain` and its
/// `sched_group`s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Level {
    /// What this level groups.
    pub kind: LevelKind,
    /// The workers of this level, a contiguous range of worker ids.
    pub span: Range<usize>,
    /// The child spans partitioning `span`, in worker order; always at least 2
    /// (a level with one group would be degenerate and is removed).
    pub groups: Vec<Range<usize>>,
    /// Whether the PUs of this level share a CPU cache.
    pub shares_cache: bool,
    /// Size in bytes of the smallest cache shared by the whole span, if known.
    pub cache_size: Option<u64>,
}

impl Level {
    /// Number of workers in the span (the kernel's `sd->span_weight`).
    pub fn weight(&self) -> usize {
        self.span.len()
    }

    /// The group of this level that contains `worker`.
    pub fn group_of(&self, worker: usize) -> Option<&Range<usize>> {
        self.groups.iter().find(|g| g.contains(&worker))
    }
}

/// The capacity of the most capable CPUs (the kernel's
/// `SCHED_CAPACITY_SCALE`).
pub const CAPACITY_SCALE: u32 = 1024;

/// Where a worker runs: its PU, its capacity and its levels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerPlace {
    /// The PU's OS index (what `taskset` and `core_affinity` call a CPU).
    pub os_index: usize,
    /// The PU's hwloc logical index.
    pub logical_index: usize,
    /// How much work the PU does per unit of time, on the kernel's scale
    /// ([`CAPACITY_SCALE`] for the most capable CPUs; the kernel's
    /// `arch_scale_cpu_capacity`). From hwloc's CPU kinds: the kernel's
    /// `cpu_capacity` where hwloc reports it (`LinuxCapacity`), else the
    /// kind's highest frequency relative to the fastest kind's; every PU
    /// has [`CAPACITY_SCALE`] on a machine with one kind of core.
    pub capacity: u32,
    /// Levels, smallest first, degenerate ones removed.
    pub levels: Vec<Level>,
    /// The span of the PU's LLC (cut at its NUMA node), whether or not it
    /// is a level of its own: see [`Topology::llc_span`].
    pub(crate) llc: Range<usize>,
    /// The span of the PU's NUMA node, whether or not it is a level of its
    /// own: see [`Topology::numa_span`].
    pub(crate) numa: Range<usize>,
}

/// The workers of a runtime and their domain tree.
///
/// ```
/// use hwsched::{Topology, TopologySource};
/// let topo = Topology::new(&TopologySource::Synthetic("pack:2 l3:2 core:4 pu:2".into()), None)?;
/// assert_eq!(topo.workers(), 32);
/// assert_eq!(topo.levels(13)[1].span, 8..16); // worker 13's LLC
/// println!("{topo}");
/// # Ok::<(), hwsched::BuildError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub(crate) description: String,
    pub(crate) is_system: bool,
    pub(crate) total_pus: usize,
    pub(crate) places: Vec<WorkerPlace>,
    /// Whether the workers differ in capacity (computed once: placement
    /// asks on every wake).
    pub(crate) asymmetric: bool,
}

impl Topology {
    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.places.len()
    }

    /// Where `worker` runs. Panics if `worker >= self.workers()`.
    pub fn place(&self, worker: usize) -> &WorkerPlace {
        &self.places[worker]
    }

    /// The levels of `worker`, smallest first.
    pub fn levels(&self, worker: usize) -> &[Level] {
        &self.places[worker].levels
    }

    /// The level of `worker` of the given kind, if it is not degenerate.
    pub fn level(&self, worker: usize, kind: LevelKind) -> Option<&Level> {
        self.places[worker].levels.iter().find(|l| l.kind == kind)
    }

    /// The span of `worker`'s last-level-cache domain: the workers sharing
    /// its last-level CPU cache and its NUMA node (the package's without
    /// cache information), or its SMT core if that is larger, or the worker
    /// alone. It is one of the worker's level spans (the [`LevelKind::Llc`]
    /// level, or the level that made it degenerate: SMT, cluster, NUMA,
    /// package, machine) or the worker alone, except where a package and a
    /// NUMA node overlap without nesting (an odd XML file) on a machine
    /// without cache information. Wakeup placement searches inside this
    /// span (the kernel's `sd_llc`, the highest domain with
    /// `SD_SHARE_LLC`).
    pub fn llc_span(&self, worker: usize) -> Range<usize> {
        let llc = &self.places[worker].llc;
        let core = self.core_span(worker);
        if core.len() > llc.len() {
            core
        } else {
            llc.clone()
        }
    }

    /// The span of `worker`'s NUMA node: the workers whose PUs are in it,
    /// also when it is no level of its own (on a sub-NUMA-clustered Xeon the
    /// node is the LLC level, on a machine with one node the machine);
    /// the worker alone when hwloc reports no node for it.
    pub fn numa_span(&self, worker: usize) -> Range<usize> {
        self.places[worker].numa.clone()
    }

    /// The capacity of `worker` (see [`WorkerPlace::capacity`]).
    pub fn capacity(&self, worker: usize) -> u32 {
        self.places[worker].capacity
    }

    /// Whether the workers differ in capacity (a hybrid machine: the
    /// kernel's `SD_ASYM_CPUCAPACITY`).
    pub fn is_asymmetric(&self) -> bool {
        self.asymmetric
    }

    /// The span of `worker`'s SMT core (the worker alone without SMT).
    pub fn core_span(&self, worker: usize) -> Range<usize> {
        self.level(worker, LevelKind::Smt)
            .map(|l| l.span.clone())
            .unwrap_or(worker..worker + 1)
    }

    /// Whether this topology was discovered from this machine (its workers can
    /// be pinned to real CPUs) rather than synthetic or loaded from XML.
    pub fn is_system(&self) -> bool {
        self.is_system
    }

    /// How many PUs the source had before choosing workers.
    pub fn total_pus(&self) -> usize {
        self.total_pus
    }

    /// Where the topology came from, e.g. `synthetic "core:2 pu:1"`.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The top of the tree: the largest span of worker 0 (the machine).
    pub fn root_span(&self) -> Range<usize> {
        0..self.workers()
    }

    /// The child groups of `span` in the domain tree, or `None` when `span`
    /// is a single worker (a leaf).
    pub fn children(&self, span: &Range<usize>) -> Option<&[Range<usize>]> {
        if span.len() <= 1 {
            return None;
        }
        self.levels(span.start)
            .iter()
            .find(|l| l.span == *span)
            .map(|l| l.groups.as_slice())
    }

    /// Every distinct span of the tree (levels' spans and single workers),
    /// parents before children.
    pub fn all_spans(&self) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut stack = vec![self.root_span()];
        while let Some(span) = stack.pop() {
            if let Some(children) = self.children(&span) {
                stack.extend(children.iter().rev().cloned());
            } else if span.len() > 1 {
                // No level covers this span (a topology without levels):
                // its members are its leaves.
                stack.extend(span.clone().rev().map(|w| w..w + 1));
            }
            out.push(span);
        }
        out
    }

    fn fmt_span(
        &self,
        f: &mut fmt::Formatter<'_>,
        span: &Range<usize>,
        depth: usize,
    ) -> fmt::Result {
        let indent = "  ".repeat(depth);
        if span.len() == 1 {
            let p = &self.places[span.start];
            write!(
                f,
                "{indent}worker {} (PU L#{} P#{}",
                span.start, p.logical_index, p.os_index
            )?;
            if self.is_asymmetric() {
                write!(f, ", capacity {}", p.capacity)?;
            }
            return writeln!(f, ")");
        }
        let level = self.levels(span.start).iter().find(|l| l.span == *span);
        match level {
            Some(l) => {
                write!(
                    f,
                    "{indent}{} {}..{}, {} groups",
                    l.kind,
                    l.span.start,
                    l.span.end,
                    l.groups.len()
                )?;
                if l.shares_cache {
                    match l.cache_size {
                        Some(sz) => write!(f, ", shared cache {}", fmt_bytes(sz))?,
                        None => write!(f, ", shared cache")?,
                    }
                }
                writeln!(f)?;
                for g in &l.groups {
                    self.fmt_span(f, g, depth + 1)?;
                }
            }
            None => {
                writeln!(
                    f,
                    "{indent}workers {}..{} (no levels)",
                    span.start, span.end
                )?;
                for w in span.clone() {
                    self.fmt_span(f, &(w..w + 1), depth + 1)?;
                }
            }
        }
        Ok(())
    }
}

fn fmt_bytes(b: u64) -> String {
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

impl fmt::Display for Topology {
    /// A header line (source, workers, levels, capacities), then the tree.
    /// The level count is the depth of the tree: the most levels any worker
    /// has; an uneven tree (a hybrid, offline CPUs) says its range.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let depths = self.places.iter().map(|p| p.levels.len());
        let (least, most) = (depths.clone().min(), depths.max());
        write!(
            f,
            "{}: {} workers of {} PUs, ",
            self.description,
            self.workers(),
            self.total_pus,
        )?;
        match (least, most) {
            (Some(a), Some(b)) if a != b => write!(f, "{a} to {b} levels")?,
            (_, Some(1)) => write!(f, "1 level")?,
            (_, b) => write!(f, "{} levels", b.unwrap_or(0))?,
        }
        let mut caps: Vec<u32> = self.places.iter().map(|p| p.capacity).collect();
        caps.sort_unstable();
        caps.dedup();
        match caps.as_slice() {
            [one] => write!(f, ", capacity {one}")?,
            many => {
                let list: Vec<String> = many.iter().rev().map(u32::to_string).collect();
                write!(f, ", capacities {}", list.join("/"))?;
            }
        }
        writeln!(f)?;
        self.fmt_span(f, &self.root_span(), 0)
    }
}

/// Tells, for a span, whether its PUs share a cache and the cache's size.
pub(crate) type CacheOf<'a> = dyn Fn(&Range<usize>) -> (bool, Option<u64>) + 'a;

/// Builds every worker's levels from per-worker keys: `keys[worker][slot]`
/// is the identity of the object of kind `kinds[slot]` containing the
/// worker (`None`: this topology has no such object).
///
/// Workers with equal keys for a slot that are adjacent in worker order form
/// one span; a slot whose objects are not contiguous (possible only in odd
/// XML files) or that does not nest around the previous kept level is dropped
/// for that worker, and a slot whose span equals a smaller one's is
/// degenerate (see `LevelKind::keep_rank` for which of the two is kept).
/// `cache` tells, for a span, whether its PUs share a cache and its size.
pub(crate) fn build_levels(
    kinds: &[LevelKind],
    keys: &[Vec<Option<u64>>],
    cache: &CacheOf<'_>,
) -> Vec<Vec<Level>> {
    let n = keys.len();
    // spans[slot][worker]
    let mut spans: Vec<Vec<Option<Range<usize>>>> = vec![vec![None; n]; kinds.len()];
    for (k, spans_k) in spans.iter_mut().enumerate() {
        let mut start = 0;
        let mut contiguous = true;
        let mut seen = std::collections::HashSet::new();
        while start < n {
            let key = keys[start].get(k).copied().flatten();
            let mut end = start + 1;
            while end < n && keys[end].get(k).copied().flatten() == key {
                end += 1;
            }
            if let Some(key) = key {
                if !seen.insert(key) {
                    contiguous = false;
                }
                for s in spans_k.iter_mut().take(end).skip(start) {
                    *s = Some(start..end);
                }
            }
            start = end;
        }
        if !contiguous {
            spans_k.iter_mut().for_each(|s| *s = None);
        }
    }
    // Per worker: its chain of spans, smallest first. Of equal spans one
    // kind is kept (`keep_rank`), but the span of every worker is the
    // machine level whatever else covers it; a span that does not nest
    // around the previous one is dropped, and so is one equal to the
    // worker alone.
    let chains: Vec<Vec<(LevelKind, Range<usize>)>> = (0..n)
        .map(|w| {
            let mut cands: Vec<(LevelKind, Range<usize>)> = kinds
                .iter()
                .enumerate()
                .filter_map(|(k, kind)| spans[k][w].clone().map(|s| (*kind, s)))
                .map(|(kind, s)| {
                    if s == (0..n) {
                        (LevelKind::Machine, s)
                    } else {
                        (kind, s)
                    }
                })
                .collect();
            cands.sort_by(|a, b| {
                a.1.len()
                    .cmp(&b.1.len())
                    .then(a.0.keep_rank().cmp(&b.0.keep_rank()))
            });
            let mut chain: Vec<(LevelKind, Range<usize>)> = Vec::new();
            let mut prev = w..w + 1;
            for (kind, span) in cands {
                let nests = span.start <= prev.start && prev.end <= span.end;
                if !nests || span == prev {
                    continue;
                }
                prev = span.clone();
                chain.push((kind, span));
            }
            chain
        })
        .collect();
    let mut levels: Vec<Vec<Level>> = vec![Vec::new(); n];
    for (w, chain) in chains.iter().enumerate() {
        for (kind, span) in chain {
            // The groups: for each member, its largest span strictly inside
            // this one (or the member alone).
            let mut groups: Vec<Range<usize>> = Vec::new();
            for x in span.clone() {
                let g = chains[x]
                    .iter()
                    .map(|(_, s)| s)
                    .filter(|s| s.start >= span.start && s.end <= span.end && s.len() < span.len())
                    .max_by_key(|s| s.len())
                    .cloned()
                    .unwrap_or(x..x + 1);
                if groups.last() != Some(&g) {
                    groups.push(g);
                }
            }
            let (shares_cache, cache_size) = cache(span);
            levels[w].push(Level {
                kind: *kind,
                span: span.clone(),
                groups,
                shares_cache,
                cache_size,
            });
        }
    }
    levels
}
