//! hwloc discovery: from a [`TopologySource`] to a [`Topology`].

use std::ops::Range;
use std::path::PathBuf;

use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::topology::export::xml::XMLExportFlags;
use hwlocality::Topology as HwTopology;

use super::domain::{build_levels, LevelKind, Topology, WorkerPlace};
use crate::error::BuildError;

/// Where a [`Topology`] comes from.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum TopologySource {
    /// hwloc discovery of this machine, restricted to the CPUs this process is
    /// allowed to run on (its affinity mask and hwloc's allowed cpuset).
    #[default]
    System,
    /// An hwloc synthetic description such as `"pack:2 l3:2 core:4 pu:2"`
    /// (see hwloc's documentation of synthetic topologies). Its workers are
    /// not real CPUs and are not pinned by default.
    Synthetic(String),
    /// An XML file exported by `lstopo file.xml` or [`export_xml`].
    Xml(PathBuf),
}

fn load(source: &TopologySource) -> Result<HwTopology, BuildError> {
    let builder = HwTopology::builder();
    let builder = match source {
        TopologySource::System => builder,
        TopologySource::Synthetic(desc) => {
            if desc.trim().is_empty() {
                return Err(BuildError::InvalidSynthetic {
                    description: desc.clone(),
                    reason: "the description is empty".into(),
                });
            }
            builder
                .from_synthetic(desc)
                .map_err(|e| BuildError::InvalidSynthetic {
                    description: desc.clone(),
                    reason: format!("hwloc rejected it ({e})"),
                })?
        }
        TopologySource::Xml(path) => {
            if !path.exists() {
                return Err(BuildError::InvalidXml {
                    path: path.clone(),
                    reason: "no such file".into(),
                });
            }
            builder
                .from_xml_file(path)
                .map_err(|e| BuildError::InvalidXml {
                    path: path.clone(),
                    reason: format!("hwloc rejected it ({e})"),
                })?
        }
    };
    builder.build().map_err(|e| match source {
        TopologySource::Synthetic(desc) => BuildError::InvalidSynthetic {
            description: desc.clone(),
            reason: format!("hwloc could not build it ({e})"),
        },
        TopologySource::Xml(path) => BuildError::InvalidXml {
            path: path.clone(),
            reason: format!("hwloc could not build it ({e})"),
        },
        TopologySource::System => BuildError::Hwloc(e.to_string()),
    })
}

/// Exports the hwloc topology of `source` as an XML string, the format
/// `TopologySource::Xml` loads (`lstopo file.xml` writes the same format).
///
/// ```
/// let xml = hwsched::topology::export_xml(
///     &hwsched::TopologySource::Synthetic("core:2 pu:2".into()),
/// )?;
/// assert!(xml.contains("<topology"));
/// # Ok::<(), hwsched::BuildError>(())
/// ```
pub fn export_xml(source: &TopologySource) -> Result<String, BuildError> {
    let topo = load(source)?;
    let xml = topo
        .export_xml(XMLExportFlags::empty())
        .map_err(|e| BuildError::Hwloc(e.to_string()))?;
    Ok(xml.as_str().to_owned())
}

/// One PU before workers are chosen.
struct Pu<'t> {
    obj: &'t TopologyObject,
    /// Identity of the object of each [`LevelKind`] containing this PU.
    keys: [Option<u64>; 5],
    /// Sibling ranks from the PU up to the root: sorting by this spreads a
    /// subset over cores first, then over every level above (round-robin).
    spread: Vec<usize>,
}

fn ancestor_key(pu: &TopologyObject, ty: ObjectType) -> Option<u64> {
    pu.ancestors()
        .find(|a| a.object_type() == ty)
        .map(|a| a.global_persistent_index())
}

/// The topmost CPU data (or unified) cache above `pu`: the last-level cache.
fn llc_of(pu: &TopologyObject) -> Option<&TopologyObject> {
    pu.ancestors()
        .filter(|a| a.object_type().is_cpu_data_cache())
        .last()
}

impl Topology {
    /// Discovers `source` and chooses `workers` PUs (all allowed PUs if
    /// `None`).
    ///
    /// With fewer workers than PUs, one PU per core is taken before any SMT
    /// sibling, spread round-robin over packages, caches and cores, and the
    /// chosen PUs keep hwloc's logical order so spans stay contiguous.
    pub fn new(source: &TopologySource, workers: Option<usize>) -> Result<Topology, BuildError> {
        Topology::with_cpus(source, workers, None)
    }

    /// Like [`Topology::new`], restricted to the PUs whose OS indices are in
    /// `cpus` (when given).
    pub fn with_cpus(
        source: &TopologySource,
        workers: Option<usize>,
        cpus: Option<&[usize]>,
    ) -> Result<Topology, BuildError> {
        if workers == Some(0) {
            return Err(BuildError::ZeroWorkers);
        }
        let hw = load(source)?;
        let is_system = matches!(source, TopologySource::System);
        let allowed = hw.allowed_cpuset();
        // The process's affinity mask: hwloc's allowed set may be wider than
        // what sched_getaffinity lets this process use.
        let affinity: Option<Vec<usize>> = if is_system {
            core_affinity::get_core_ids().map(|ids| ids.into_iter().map(|c| c.id).collect())
        } else {
            None
        };
        let numa: Vec<(u64, hwlocality::cpu::cpuset::CpuSet)> = hw
            .objects_with_type(ObjectType::NUMANode)
            .filter_map(|n| {
                n.cpuset()
                    .map(|c| (n.global_persistent_index(), c.clone_target()))
            })
            .collect();

        let mut pus: Vec<Pu<'_>> = Vec::new();
        for obj in hw.objects_with_type(ObjectType::PU) {
            let Some(os) = obj.os_index() else { continue };
            if is_system && !allowed.is_set(os) {
                continue;
            }
            if let Some(aff) = &affinity {
                if !aff.contains(&os) {
                    continue;
                }
            }
            let keys = [
                Some(ancestor_key(obj, ObjectType::Core).unwrap_or(obj.global_persistent_index())),
                llc_of(obj).map(|c| c.global_persistent_index()),
                numa.iter().find(|(_, set)| set.is_set(os)).map(|(k, _)| *k),
                ancestor_key(obj, ObjectType::Package),
                Some(0),
            ];
            let spread = std::iter::once(obj)
                .chain(obj.ancestors())
                .map(|o| o.sibling_rank())
                .collect();
            pus.push(Pu { obj, keys, spread });
        }
        let total_pus = pus.len();
        if let Some(cpus) = cpus {
            if cpus.is_empty() {
                return Err(BuildError::EmptyCpuset {
                    context: "cpus([]) was given an empty list".into(),
                });
            }
            let available: Vec<usize> = pus.iter().filter_map(|p| p.obj.os_index()).collect();
            for &c in cpus {
                if !available.contains(&c) {
                    return Err(BuildError::CpuOutsideTopology { cpu: c, available });
                }
            }
            pus.retain(|p| p.obj.os_index().is_some_and(|os| cpus.contains(&os)));
        }
        if pus.is_empty() {
            return Err(BuildError::EmptyCpuset {
                context: format!("{} has no allowed PU for this process", describe(source)),
            });
        }
        let available = pus.len();
        let n = workers.unwrap_or(available);
        if n > available {
            return Err(BuildError::TooManyWorkers {
                requested: n,
                available,
            });
        }
        if n < available {
            // Choose: SMT rank first, then core rank, then every level above,
            // so the first picks are one PU per core spread over packages.
            let mut order: Vec<usize> = (0..pus.len()).collect();
            order.sort_by(|&a, &b| pus[a].spread.cmp(&pus[b].spread).then(a.cmp(&b)));
            let mut keep = vec![false; pus.len()];
            for &i in order.iter().take(n) {
                keep[i] = true;
            }
            let mut i = 0;
            pus.retain(|_| {
                let k = keep[i];
                i += 1;
                k
            });
        }

        let keys: Vec<[Option<u64>; 5]> = pus.iter().map(|p| p.keys).collect();
        let cache = |span: &Range<usize>| -> (bool, Option<u64>) {
            let first = pus[span.start].obj;
            let last = pus[span.end - 1].obj;
            let Some(common) = first.first_common_ancestor(last) else {
                return (false, None);
            };
            let found = std::iter::once(common)
                .chain(common.ancestors())
                .find(|o| o.object_type().is_cpu_data_cache());
            match found {
                Some(c) => {
                    let size = match c.attributes() {
                        Some(hwlocality::object::attributes::ObjectAttributes::Cache(a)) => {
                            a.size().map(|s| s.get())
                        }
                        _ => None,
                    };
                    (true, size)
                }
                None => (false, None),
            }
        };
        let levels = build_levels(&keys, &cache);
        let places = pus
            .iter()
            .zip(levels)
            .map(|(p, levels)| WorkerPlace {
                os_index: p.obj.os_index().unwrap_or(0),
                logical_index: p.obj.logical_index(),
                levels,
            })
            .collect();
        Ok(Topology {
            description: describe(source),
            is_system,
            total_pus,
            places,
        })
    }
}

fn describe(source: &TopologySource) -> String {
    match source {
        TopologySource::System => "system".to_owned(),
        TopologySource::Synthetic(d) => format!("synthetic {d:?}"),
        TopologySource::Xml(p) => format!("xml {}", p.display()),
    }
}

// Compile-time check that the public types can cross threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Topology>();
    assert_send_sync::<LevelKind>();
};
