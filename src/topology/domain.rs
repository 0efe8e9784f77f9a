//! The domain tree: levels, spans and groups, and its `Display`.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;

use super::span::Span;

/// The most NUMA group levels (one per distinct distance of hwloc's NUMA
/// latency matrix above the local one, as the kernel's `sched_init_numa`
/// builds them, or hwloc `Group`s and packages above the NUMA nodes where
/// there is no matrix) a worker gets. Real machines have at most four or
/// five distinct distances; a matrix with more keeps its first ones and the
/// machine.
pub const MAX_NUMA_GROUP_LEVELS: u8 = 6;

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
    /// NUMA nodes close to each other, the kernel's `NUMA` levels
    /// (`sched_init_numa`): with hwloc's NUMA latency matrix, the `n`-th
    /// distinct distance above the local one (from 1, at most
    /// [`MAX_NUMA_GROUP_LEVELS`]) spans, for a worker on node `a`, the
    /// workers of every node within that distance of `a`. These spans differ
    /// from node to node, may overlap and need not be contiguous (the
    /// kernel's `SD_OVERLAP`). Without a matrix, the hwloc `Group`s and
    /// packages above the worker's node, smallest first.
    NumaGroup(u8),
    /// Every worker of the runtime.
    Machine,
}

impl LevelKind {
    /// All kinds, smallest first.
    pub const ALL: [LevelKind; 12] = [
        LevelKind::Smt,
        LevelKind::Cluster,
        LevelKind::Llc,
        LevelKind::Numa,
        LevelKind::Package,
        LevelKind::NumaGroup(1),
        LevelKind::NumaGroup(2),
        LevelKind::NumaGroup(3),
        LevelKind::NumaGroup(4),
        LevelKind::NumaGroup(5),
        LevelKind::NumaGroup(6),
        LevelKind::Machine,
    ];

    /// A short name for tables: `SMT`, `cluster`, `LLC`, `NUMA`, `package`,
    /// `NUMA group 1` .. `NUMA group 6`, `machine`.
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
            LevelKind::NumaGroup(4) => "NUMA group 4",
            LevelKind::NumaGroup(5) => "NUMA group 5",
            LevelKind::NumaGroup(6) => "NUMA group 6",
            LevelKind::NumaGroup(_) => "NUMA group",
            LevelKind::Machine => "machine",
        }
    }

    /// Which of two equal spans keeps its level (the other is degenerate):
    /// the smaller kind, as the kernel keeps the child of a degenerate
    /// pair, except that the LLC is kept over a cluster (wake placement
    /// looks for the LLC). Also the order in which candidates of equal
    /// size are built (`build_levels`).
    pub(crate) fn keep_rank(self) -> (u8, LevelKind) {
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
/// child groups that cover it (the kernel's `sched_domain` and its
/// `sched_group`s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Level {
    /// What this level groups.
    pub kind: LevelKind,
    /// The workers of this level: a range, except for some of the kernel's
    /// NUMA levels (see [`Span`]).
    pub span: Span,
    /// The child spans covering `span`: for each member not yet covered, in
    /// worker order, its largest span strictly inside `span` (or the member
    /// alone); always at least 2 (a level with one group would be
    /// degenerate and is removed). They partition `span` except on the
    /// kernel's overlapping NUMA levels, where other members' spans may
    /// overlap this worker's own child, which is always one of the groups
    /// (the kernel's `build_overlap_sched_groups`).
    pub groups: Vec<Span>,
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

    /// The group of this level that contains `worker` (the first, where
    /// groups overlap).
    pub fn group_of(&self, worker: usize) -> Option<&Span> {
        self.groups.iter().find(|g| g.contains(worker))
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
    /// The span of the PU's core: see [`Topology::core_span`].
    pub(crate) core: Range<usize>,
    /// The span of the PU's package: see [`Topology::package_span`].
    pub(crate) package: Range<usize>,
}

/// The workers of a runtime and their domain tree.
///
/// ```
/// use hwsched::{Topology, TopologySource};
/// let topo = Topology::new(&TopologySource::Synthetic("pack:2 l3:2 core:4 pu:2".into()), None)?;
/// assert_eq!(topo.workers(), 32);
/// assert_eq!(topo.levels(13)[1].span, 8..16); // worker 13's LLC, a range
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
    pub(crate) numa_topology: NumaTopology,
}

/// The kernel's classification of a machine's NUMA distances
/// (`sched_numa_topology_type`, from `init_numa_topology_type`): how
/// memory traffic between the two farthest nodes travels. The kernel's
/// NUMA balancing uses it to choose where a task's memory group lives; the
/// domain levels do not depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum NumaTopology {
    /// One node, or every node one hop (one distance) from every other.
    #[default]
    Direct,
    /// The two farthest nodes have a node nearer to both: traffic between
    /// them passes through nodes that run tasks.
    GluelessMesh,
    /// The two farthest nodes have no node nearer to both: they reach each
    /// other through a backplane.
    Backplane,
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

    /// The span of `worker`'s SMT core (the worker alone without SMT), also
    /// when it is no level of its own (a machine of one core: the machine
    /// level).
    pub fn core_span(&self, worker: usize) -> Range<usize> {
        self.places[worker].core.clone()
    }

    /// The span of `worker`'s package (socket), whether or not it is a
    /// level of its own; the whole machine when hwloc reports no package.
    pub fn package_span(&self, worker: usize) -> Range<usize> {
        self.places[worker].package.clone()
    }

    /// The domains of one kind, numbered in worker order: the span of each
    /// (`[i]` is domain `i`'s). `kind` is one of [`LevelKind::Smt`] (cores),
    /// [`LevelKind::Llc`], [`LevelKind::Numa`] and [`LevelKind::Package`],
    /// whose spans are [`core_span`](Self::core_span),
    /// [`llc_span`](Self::llc_span), [`numa_span`](Self::numa_span) and
    /// [`package_span`](Self::package_span), also where the level itself is
    /// degenerate; `None` for the other kinds. These are the indices that
    /// [`CurrentPlace`](crate::CurrentPlace) reports and that
    /// [`Place`](crate::Place) names.
    ///
    /// ```
    /// use hwsched::{LevelKind, Topology, TopologySource};
    /// let topo = Topology::new(&TopologySource::Synthetic("pack:2 l3:2 core:4 pu:2".into()), None)?;
    /// assert_eq!(topo.domains(LevelKind::Smt).unwrap().len(), 16); // cores
    /// assert_eq!(topo.domains(LevelKind::Llc).unwrap()[3], 24..32);
    /// assert_eq!(topo.domains(LevelKind::Package).unwrap().len(), 2);
    /// assert!(topo.domains(LevelKind::Machine).is_none());
    /// # Ok::<(), hwsched::BuildError>(())
    /// ```
    pub fn domains(&self, kind: LevelKind) -> Option<Vec<Range<usize>>> {
        let span = |w: usize| -> Range<usize> {
            match kind {
                LevelKind::Smt => self.core_span(w),
                LevelKind::Llc => self.llc_span(w),
                LevelKind::Numa => self.numa_span(w),
                _ => self.package_span(w),
            }
        };
        if !matches!(
            kind,
            LevelKind::Smt | LevelKind::Llc | LevelKind::Numa | LevelKind::Package
        ) {
            return None;
        }
        let mut out: Vec<Range<usize>> = Vec::new();
        for w in 0..self.workers() {
            let s = span(w);
            if out.last().is_none_or(|l| l.end <= s.start) {
                out.push(s);
            }
        }
        Some(out)
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

    /// How the kernel would classify the NUMA distances
    /// (`sched_numa_topology_type`, see [`NumaTopology`]).
    pub fn numa_topology(&self) -> NumaTopology {
        self.numa_topology
    }

    /// Where the topology came from, e.g. `synthetic "core:2 pu:1"`.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The top of the tree: the largest span of worker 0 (the machine).
    pub fn root_span(&self) -> Range<usize> {
        0..self.workers()
    }

    /// The child groups of `span` in the domain tree (the groups of a level
    /// of one of its members whose span it is), or `None` when `span` is a
    /// single worker (a leaf) or no level's span.
    pub fn children(&self, span: &Span) -> Option<&[Span]> {
        if span.len() <= 1 {
            return None;
        }
        span.iter().find_map(|x| {
            self.levels(x)
                .iter()
                .find(|l| l.span == *span)
                .map(|l| l.groups.as_slice())
        })
    }

    /// Every distinct span of the tree (levels' spans, their groups and
    /// single workers), larger before smaller (so parents before children).
    pub fn all_spans(&self) -> Vec<Span> {
        let mut seen: std::collections::HashSet<Span> = std::collections::HashSet::new();
        let mut out = Vec::new();
        let mut add = |s: &Span, out: &mut Vec<Span>| {
            if seen.insert(s.clone()) {
                out.push(s.clone());
            }
        };
        add(&Span::range(self.root_span()), &mut out);
        for p in &self.places {
            for l in &p.levels {
                add(&l.span, &mut out);
                for g in &l.groups {
                    add(g, &mut out);
                }
            }
        }
        for w in 0..self.workers() {
            add(&Span::single(w), &mut out);
        }
        out.sort_by(|a, b| {
            b.len().cmp(&a.len()).then_with(|| {
                a.runs()
                    .iter()
                    .map(|r| (r.start, r.end))
                    .cmp(b.runs().iter().map(|r| (r.start, r.end)))
            })
        });
        out
    }

    fn fmt_span(&self, f: &mut fmt::Formatter<'_>, span: &Span, depth: usize) -> fmt::Result {
        let indent = "  ".repeat(depth);
        if span.len() == 1 {
            let p = &self.places[span.first()];
            write!(
                f,
                "{indent}worker {} (PU L#{} P#{}",
                span.first(),
                p.logical_index,
                p.os_index
            )?;
            if self.is_asymmetric() {
                write!(f, ", capacity {}", p.capacity)?;
            }
            return writeln!(f, ")");
        }
        let level = span
            .iter()
            .find_map(|x| self.levels(x).iter().find(|l| l.span == *span));
        match level {
            Some(l) => {
                write!(
                    f,
                    "{indent}{} {}, {} groups",
                    l.kind,
                    l.span,
                    l.groups.len()
                )?;
                if !l.span.is_contiguous()
                    || l.groups.iter().map(Span::len).sum::<usize>() > l.span.len()
                {
                    write!(f, " (overlapping NUMA spans)")?;
                }
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
                writeln!(f, "{indent}workers {span} (no levels)")?;
                for w in span.iter() {
                    self.fmt_span(f, &Span::single(w), depth + 1)?;
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
        self.fmt_span(f, &Span::range(self.root_span()), 0)
    }
}

/// Tells, for a span, whether its PUs share a cache and the cache's size.
pub(crate) type CacheOf<'a> = dyn Fn(&Span) -> (bool, Option<u64>) + 'a;

/// Builds every worker's levels from its candidate spans:
/// `cands[worker]` holds, for each kind this topology has, the span of the
/// object of that kind around the worker (the kernel's topology level
/// masks, already cut to the chosen workers).
///
/// As the kernel's `build_sched_domains` does, candidates are taken from
/// the smallest (equal sizes in [`LevelKind::keep_rank`] order), each
/// level's span is its candidate joined with the level below it
/// (`build_sched_domain`'s fix-up of a span that does not hold its
/// child's), and the build stops at the first span that is every worker;
/// then a span of one worker or equal to the one below is degenerate and
/// dropped (`sd_degenerate`, `sd_parent_degenerate`: the lower level is
/// kept, except that an LLC equal to a cluster takes its place). A span of
/// every worker is the machine level. `cache` tells, for a span, whether
/// its PUs share a cache and its size.
pub(crate) fn build_levels(
    cands: Vec<Vec<(LevelKind, Span)>>,
    cache: &CacheOf<'_>,
) -> Vec<Vec<Level>> {
    let n = cands.len();
    let all = Span::range(0..n);
    let chains: Vec<Vec<(LevelKind, Span)>> = cands
        .into_iter()
        .enumerate()
        .map(|(w, mut cands)| {
            cands.sort_by(|a, b| {
                a.1.len()
                    .cmp(&b.1.len())
                    .then(a.0.keep_rank().cmp(&b.0.keep_rank()))
            });
            let mut chain: Vec<(LevelKind, Span)> = Vec::new();
            let mut prev = Span::single(w);
            for (kind, mask) in cands {
                let span = mask.union(&prev);
                if span == prev {
                    if let Some(last) = chain.last_mut() {
                        if kind == LevelKind::Llc && last.0 == LevelKind::Cluster {
                            last.0 = LevelKind::Llc;
                        }
                    }
                    continue;
                }
                let kind = if span == all {
                    LevelKind::Machine
                } else {
                    kind
                };
                prev = span.clone();
                chain.push((kind, span));
                if prev == all {
                    break;
                }
            }
            chain
        })
        .collect();
    // The groups of each distinct span, computed once.
    let mut groups_of: HashMap<Span, Vec<Span>> = HashMap::new();
    let mut levels: Vec<Vec<Level>> = vec![Vec::new(); n];
    for (w, chain) in chains.iter().enumerate() {
        for (i, (kind, span)) in chain.iter().enumerate() {
            let mut groups = groups_of
                .entry(span.clone())
                .or_insert_with(|| {
                    let mut covered = vec![false; span.hull().end];
                    let mut groups = Vec::new();
                    for x in span.iter() {
                        if covered[x] {
                            continue;
                        }
                        let g = chains[x]
                            .iter()
                            .map(|(_, s)| s)
                            .filter(|s| s.len() < span.len() && s.is_subset(span))
                            .max_by_key(|s| s.len())
                            .cloned()
                            .unwrap_or_else(|| Span::single(x));
                        for y in g.iter() {
                            covered[y] = true;
                        }
                        groups.push(g);
                    }
                    groups
                })
                .clone();
            let child = if i == 0 {
                Span::single(w)
            } else {
                chain[i - 1].1.clone()
            };
            if !groups.contains(&child) {
                groups.insert(0, child);
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
