//! Every worker's chain of levels equals the scheduling domains the Linux
//! kernel builds on the same machine (`tests/oracle`, a model of the
//! kernel's algorithm written apart from hwsched's), on every real-machine
//! export in `tests/topologies/`, at full size and for subsets of workers.
//!
//! `HWSCHED_EXTRA_TOPOLOGIES=dir` checks every `*.xml` of `dir` as well
//! (hwloc's whole test data, exported as `tests/topologies/README.md`
//! says).

use std::path::{Path, PathBuf};

use hwsched::{Topology, TopologySource};

mod oracle;

/// The exports to check: `tests/topologies/*.xml`, and those of
/// `HWSCHED_EXTRA_TOPOLOGIES`.
fn exports() -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/topologies")];
    if let Some(extra) = std::env::var_os("HWSCHED_EXTRA_TOPOLOGIES") {
        dirs.push(PathBuf::from(extra));
    }
    let mut out = Vec::new();
    for dir in dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "xml"))
            .collect();
        files.sort();
        out.extend(files);
    }
    out
}

/// Worker `w`'s level spans, as sorted sets of workers.
fn chain(topo: &Topology, w: usize) -> Vec<Vec<usize>> {
    topo.levels(w)
        .iter()
        .map(|l| l.span.iter().collect())
        .collect()
}

/// The differences between hwsched's levels and the kernel's domains for
/// `workers` workers of `path` (`None`: all), one line each.
fn compare(path: &Path, workers: Option<usize>) -> Vec<String> {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let topo = match Topology::new(&TopologySource::Xml(path.to_owned()), workers) {
        Ok(t) => t,
        Err(e) => return vec![format!("{name} ({workers:?} workers): not loaded: {e}")],
    };
    let os: Vec<usize> = (0..topo.workers())
        .map(|w| topo.place(w).os_index)
        .collect();
    let kernel = oracle::domains(path, &os);
    let mut out = Vec::new();
    let numa_type = match kernel.numa_type {
        oracle::NumaType::Direct => hwsched::NumaTopology::Direct,
        oracle::NumaType::GluelessMesh => hwsched::NumaTopology::GluelessMesh,
        oracle::NumaType::Backplane => hwsched::NumaTopology::Backplane,
    };
    if topo.numa_topology() != numa_type {
        out.push(format!(
            "{name}: NUMA topology {:?}, kernel's {numa_type:?} (distances {:?})",
            topo.numa_topology(),
            kernel.distances
        ));
    }
    for w in 0..topo.workers() {
        let ours = chain(&topo, w);
        if ours != kernel.chains[w] {
            out.push(format!(
                "{name} ({} workers) worker {w}: hwsched {:?}, kernel {:?}",
                topo.workers(),
                ours.iter().map(Vec::len).collect::<Vec<_>>(),
                kernel.chains[w].iter().map(Vec::len).collect::<Vec<_>>()
            ));
            break;
        }
        let llc: Vec<usize> = topo.llc_span(w).collect();
        if llc != kernel.llc[w] {
            out.push(format!(
                "{name} ({} workers) worker {w}: LLC {:?}, kernel's {:?}",
                topo.workers(),
                llc,
                kernel.llc[w]
            ));
            break;
        }
    }
    out
}

#[test]
fn every_export_gives_the_kernels_domains() {
    let mut diffs = Vec::new();
    let files = exports();
    assert!(files.len() >= 10, "{files:?}");
    for path in &files {
        let full = match Topology::new(&TopologySource::Xml(path.clone()), None) {
            Ok(t) => t.workers(),
            Err(e) => {
                diffs.push(format!("{}: not loaded: {e}", path.display()));
                continue;
            }
        };
        let mut sizes = vec![
            None,
            Some(1),
            Some(2),
            Some(full / 2),
            Some(full / 3 + 1),
            Some(full - 1),
        ];
        sizes.retain(|s| s.is_none_or(|s| s >= 1 && s <= full));
        sizes.dedup();
        for size in sizes {
            diffs.extend(compare(path, size));
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
