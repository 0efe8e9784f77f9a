//! The Linux kernel's scheduling domains of a machine, computed from an
//! hwloc XML export the way the kernel builds them, written apart from
//! hwsched's own topology code so that the two can be checked against each
//! other.
//!
//! The model, level by level (kernel/sched/topology.c, `default_topology`,
//! `sched_init_numa`, `build_sched_domains`, `cpu_attach_domain`):
//!
//! 1. `SMT`: the PUs of the core.
//! 2. `CLS`: the PUs sharing the core's L2 when it holds more than the core
//!    (x86's `cpu_l2c_shared_mask`), else the innermost hwloc `Group` above
//!    the core with no NUMA node attached (arm64's PPTT cluster); nothing
//!    once it would reach the `MC` span (`cpu_clustergroup_mask`).
//! 3. `MC`: the PUs sharing the last-level CPU cache, cut at the NUMA node
//!    (`cpu_coregroup_mask`: x86's `match_llc` refuses a cache shared across
//!    nodes); a memory-side cache does not count; without any cache, the
//!    package cut at the node (arm64's `core_sibling` within the node), and
//!    without a package either, the core (`core_sibling` is the CPU
//!    alone).
//! 4. `PKG`: the node (`cpu_cpu_mask`), cut at the package. The cut adds
//!    no span where hwloc reports a node per package or smaller nodes; on
//!    exports without NUMA information (x86 CPUID dumps: one node for the
//!    whole machine) the package stands for the node the firmware would
//!    give each socket.
//! 5. `NODE` and the `NUMA` levels (`sched_init_numa`): the distinct
//!    distances between the nodes that have CPUs (`for_each_cpu_node_but`:
//!    CPU-less nodes do not count; a CPU's node is the nearest node whose
//!    locality holds it, as hwloc attaches memory-only nodes above the
//!    CPU nodes they serve), smallest first; for a CPU on node `n`,
//!    the level of distance `d` spans the CPUs of every node `k` with
//!    `distance(n, k) <= d`. Only the NUMANode latency matrix counts. Without
//!    one, hwloc `Group`s and packages above the node stand for the
//!    firmware's distances, and the whole machine is the last level (the kernel's default
//!    `REMOTE_DISTANCE` between every pair of nodes).
//!
//! Each level's span is its mask intersected with the chosen CPUs
//! (`sd_init`), widened to hold its child's (`build_sched_domain`'s fix-up),
//! and the build stops at the first level that spans every chosen CPU
//! (`build_sched_domains`). Then a level of one CPU, or equal to the level
//! below it, is degenerate and removed (`sd_degenerate`,
//! `sd_parent_degenerate`: of two equal spans the lower one is kept).
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::Path;

use hwlocality::object::distance::DistancesKind;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::Topology;

/// A set of workers, sorted.
pub type Set = Vec<usize>;

/// The kernel's `sched_numa_topology_type` (`init_numa_topology_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumaType {
    /// Every node is one hop from every other (or one node).
    Direct,
    /// The two farthest nodes have a node nearer to both: traffic between
    /// them goes through other nodes.
    GluelessMesh,
    /// The two farthest nodes have no node nearer to both: a backplane.
    Backplane,
}

/// What the kernel builds for one set of CPUs.
#[derive(Debug)]
pub struct Domains {
    /// Per worker: its domains' spans, smallest first, degenerate ones
    /// removed.
    pub chains: Vec<Vec<Set>>,
    /// Per worker: its `sd_llc` span (the highest domain sharing the LLC:
    /// `MC`, or `SMT` where `MC` is no larger; the worker alone without).
    pub llc: Vec<Set>,
    /// The distinct node distances, smallest first (empty without a
    /// latency matrix).
    pub distances: Vec<u64>,
    /// `sched_numa_topology_type`.
    pub numa_type: NumaType,
}

fn pus_of(obj: &TopologyObject) -> BTreeSet<usize> {
    obj.cpuset()
        .map(|c| c.iter_set().map(usize::from).collect())
        .unwrap_or_default()
}

fn is_cpu_cache(obj: &TopologyObject) -> bool {
    obj.object_type().is_cpu_data_cache()
        && obj
            .subtype()
            .is_none_or(|s| s.to_bytes() != b"MemorySideCache")
}

/// The kernel's domains of the machine exported to `xml`, for the workers
/// whose PUs have the OS indices `workers` (in worker order).
pub fn domains(xml: &Path, workers: &[usize]) -> Domains {
    let text = std::fs::read_to_string(xml).expect("read the export");
    let topo = Topology::builder()
        .from_xml(&text)
        .expect("hwloc reads the export")
        .build()
        .expect("hwloc builds the export");
    let worker_of = |os: usize| workers.iter().position(|&w| w == os);
    let to_workers = |pus: &BTreeSet<usize>| -> BTreeSet<usize> {
        pus.iter().filter_map(|&os| worker_of(os)).collect()
    };
    let all: BTreeSet<usize> = (0..workers.len()).collect();

    // Each PU's node: the nearest node whose locality holds it (hwloc gives
    // a CPU-less memory node attached above several CPU nodes their
    // CPUs); the nodes with CPUs are those that are some PU's, with the
    // PUs whose node they are.
    let all_nodes: Vec<(&TopologyObject, BTreeSet<usize>)> = topo
        .objects_with_type(ObjectType::NUMANode)
        .map(|n| (n, pus_of(n)))
        .collect();
    let node_of_pu = |os: usize| {
        all_nodes
            .iter()
            .enumerate()
            .filter(|(_, (_, p))| p.contains(&os))
            .min_by_key(|(_, (_, p))| p.len())
            .map(|(i, _)| i)
    };
    let mut nodes: Vec<(&TopologyObject, BTreeSet<usize>)> = Vec::new();
    let mut index_of_node: Vec<Option<usize>> = vec![None; all_nodes.len()];
    for (i, (n, _)) in all_nodes.iter().enumerate() {
        let mine: BTreeSet<usize> = topo
            .objects_with_type(ObjectType::PU)
            .filter_map(TopologyObject::os_index)
            .filter(|&os| node_of_pu(os) == Some(i))
            .collect();
        if !mine.is_empty() {
            index_of_node[i] = Some(nodes.len());
            nodes.push((n, mine));
        }
    }
    // The NUMANode latency matrix, restricted to those nodes.
    let matrix: Option<Vec<Vec<u64>>> = topo
        .distances_with_type(Some(DistancesKind::MEANS_LATENCY), ObjectType::NUMANode)
        .ok()
        .and_then(|ds| {
            ds.into_iter().find_map(|d| {
                let objs: Vec<Option<&TopologyObject>> = d.objects().collect();
                let index: Vec<usize> = nodes
                    .iter()
                    .map(|(n, _)| {
                        objs.iter().position(|o| {
                            o.is_some_and(|o| {
                                o.global_persistent_index() == n.global_persistent_index()
                            })
                        })
                    })
                    .collect::<Option<Vec<usize>>>()?;
                let values = d.distances();
                let k = objs.len();
                Some(
                    index
                        .iter()
                        .map(|&i| index.iter().map(|&j| values[i * k + j]).collect())
                        .collect(),
                )
            })
        });
    let mut distances: Vec<u64> = matrix
        .iter()
        .flatten()
        .flatten()
        .copied()
        .collect::<BTreeSet<u64>>()
        .into_iter()
        .collect();
    if matrix.is_none() {
        distances.clear();
    }
    let numa_type = numa_type(matrix.as_deref(), &distances);

    let mut chains = Vec::with_capacity(workers.len());
    let mut llcs = Vec::with_capacity(workers.len());
    for &os in workers {
        let pu = topo
            .objects_with_type(ObjectType::PU)
            .find(|p| p.os_index() == Some(os))
            .expect("each worker is a PU of the export");
        let ancestor = |ty: ObjectType| pu.ancestors().find(|a| a.object_type() == ty);
        let node_at = node_of_pu(os).and_then(|i| index_of_node[i]);
        let node: BTreeSet<usize> =
            node_at.map_or_else(|| pus_of(topo.root_object()), |i| nodes[i].1.clone());
        let core = ancestor(ObjectType::Core).unwrap_or(pu);
        let smt = pus_of(core);
        let llc_obj = pu.ancestors().filter(|a| is_cpu_cache(a)).last();
        let package = ancestor(ObjectType::Package).map(pus_of);
        let mc: BTreeSet<usize> = match (llc_obj, &package) {
            (Some(c), _) => pus_of(c).intersection(&node).copied().collect(),
            (None, Some(p)) => p.intersection(&node).copied().collect(),
            // arm64's `cpu_coregroup_mask` without cache or package
            // information: the CPU alone (its `core_sibling`).
            (None, None) => smt.clone(),
        };
        let l2 = core
            .ancestors()
            .find(|a| is_cpu_cache(a) && a.object_type() == ObjectType::L2Cache)
            .map(pus_of)
            .filter(|p| p.len() > smt.len());
        let group = core
            .ancestors()
            .take_while(|a| {
                llc_obj.is_none_or(|c| c.global_persistent_index() != a.global_persistent_index())
                    && !matches!(a.object_type(), ObjectType::Package | ObjectType::Machine)
                    && a.memory_arity() == 0
            })
            .find(|a| a.object_type() == ObjectType::Group)
            .map(pus_of);
        let cls = l2
            .or(group)
            .filter(|c| !mc.is_subset(c))
            .unwrap_or_else(|| smt.clone());

        // The NODE and NUMA levels.
        let mut numa_levels: Vec<BTreeSet<usize>> = Vec::new();
        match (&matrix, node_at) {
            (Some(m), Some(n)) => {
                for &d in &distances {
                    let mut span = BTreeSet::new();
                    for (k, (_, pus)) in nodes.iter().enumerate() {
                        if m[n][k] <= d {
                            span.extend(pus.iter().copied());
                        }
                    }
                    numa_levels.push(span);
                }
            }
            _ => {
                numa_levels.push(node.clone());
                let mut groups: Vec<BTreeSet<usize>> = pu
                    .ancestors()
                    .filter(|a| matches!(a.object_type(), ObjectType::Group | ObjectType::Package))
                    .map(pus_of)
                    .filter(|g| node.is_subset(g) && g.len() > node.len())
                    .collect();
                groups.sort_by_key(BTreeSet::len);
                numa_levels.extend(groups);
                numa_levels.push(pus_of(topo.root_object()));
            }
        }

        let pkg: BTreeSet<usize> = match &package {
            Some(p) => p.intersection(&node).copied().collect(),
            None => node.clone(),
        };
        let masks = [smt, cls, mc, pkg].into_iter().chain(numa_levels);
        let mut built: Vec<BTreeSet<usize>> = Vec::new();
        for mask in masks {
            let mut span = to_workers(&mask);
            if let Some(child) = built.last() {
                span.extend(child.iter().copied());
            }
            let done = span == all;
            built.push(span);
            if done {
                break;
            }
        }
        if built.last() != Some(&all) {
            built.push(all.clone());
        }
        // sd_llc: the MC domain (index 2) or the SMT one where it is larger.
        let llc = built.get(2).or(built.last()).cloned().unwrap_or_default();
        llcs.push(llc.into_iter().collect());
        let me = worker_of(os).expect("the worker's own PU");
        let mut chain: Vec<Set> = Vec::new();
        let mut prev: BTreeSet<usize> = [me].into();
        for span in built {
            if span.len() <= 1 || span == prev {
                continue;
            }
            prev = span.clone();
            chain.push(span.into_iter().collect());
        }
        chains.push(chain);
    }
    Domains {
        chains,
        llc: llcs,
        distances,
        numa_type,
    }
}

/// `init_numa_topology_type`: one remote distance at most is `Direct`;
/// else two nodes at the largest distance with a node nearer to both is a
/// glueless mesh, without one a backplane.
fn numa_type(matrix: Option<&[Vec<u64>]>, distances: &[u64]) -> NumaType {
    let Some(m) = matrix else {
        return NumaType::Direct;
    };
    if distances.len() <= 2 {
        return NumaType::Direct;
    }
    let max = distances[distances.len() - 1];
    let n = m.len();
    for a in 0..n {
        for b in 0..n {
            if m[a][b] < max {
                continue;
            }
            if (0..n).any(|c| m[a][c] < max && m[b][c] < max) {
                return NumaType::GluelessMesh;
            }
            return NumaType::Backplane;
        }
    }
    NumaType::Direct
}
