//! Integration tests of topology discovery, the domain tree, pinning, XML
//! round trips and every topology `BuildError`.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::PathBuf;

use hwsched::topology::{export_xml, pin_current_thread};
use hwsched::{BuildError, LevelKind, Span, Topology, TopologySource};

mod common;

const BIG: &str = "pack:2 l3:2 core:4 pu:2";

fn synthetic(desc: &str) -> TopologySource {
    TopologySource::Synthetic(desc.to_owned())
}

fn build(desc: &str, workers: Option<usize>) -> Topology {
    Topology::new(&synthetic(desc), workers)
        .unwrap_or_else(|e| panic!("building {desc:?} with {workers:?} workers failed: {e}"))
}

/// A unique `.xml` path in the temp directory.
fn temp_path(tag: &str) -> PathBuf {
    common::temp_path(tag).with_extension("xml")
}

/// Removes the file when dropped, even if the test panics.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A span that must be a range.
fn range(s: &Span) -> Range<usize> {
    s.as_range()
        .cloned()
        .unwrap_or_else(|| panic!("{s} is not a range"))
}

/// Spans that must be ranges.
fn ranges(g: &[Span]) -> Vec<Range<usize>> {
    g.iter().map(range).collect()
}

fn kinds(topo: &Topology, w: usize) -> Vec<LevelKind> {
    topo.levels(w).iter().map(|l| l.kind).collect()
}

/// Checks every structural invariant of the domain tree of `topo`.
fn check_invariants(topo: &Topology, what: &str) {
    let n = topo.workers();
    assert!(n >= 1, "{what}: no workers");
    assert_eq!(topo.root_span(), 0..n, "{what}: root span");
    for w in 0..n {
        let levels = topo.levels(w);
        let mut prev = Span::single(w);
        let mut seen_kinds: Vec<LevelKind> = Vec::new();
        for (i, l) in levels.iter().enumerate() {
            let ctx = format!("{what}: worker {w} level {i} ({} {})", l.kind, l.span);
            // Strictly increasing spans, each containing the previous one.
            assert!(
                prev.is_subset(&l.span),
                "{ctx}: does not contain the previous span {prev}"
            );
            assert!(
                l.span.len() > prev.len(),
                "{ctx}: not strictly larger than {prev}"
            );
            assert!(l.span.hull().end <= n, "{ctx}: past the last worker");
            assert!(l.span.contains(w), "{ctx}: does not contain the worker");
            assert_eq!(l.weight(), l.span.len(), "{ctx}: weight");
            assert_eq!(l.span.len(), l.span.iter().count(), "{ctx}: members");
            // Only the kernel's NUMA levels (by distance) may be bitmaps.
            assert!(
                l.span.is_contiguous() || matches!(l.kind, LevelKind::NumaGroup(_)),
                "{ctx}: not contiguous"
            );
            // One level per kind (a NUMA node may hold several packages, so
            // kinds need not follow `LevelKind`'s order).
            assert!(!seen_kinds.contains(&l.kind), "{ctx}: kind repeated");
            seen_kinds.push(l.kind);
            // Groups cover the span: at least 2, inside it, the worker's own
            // group its previous level (or itself).
            assert!(
                l.groups.len() >= 2,
                "{ctx}: fewer than 2 groups: {:?}",
                l.groups
            );
            let mut covered = Vec::new();
            for g in &l.groups {
                assert!(!g.is_empty(), "{ctx}: empty group in {:?}", l.groups);
                assert!(g.is_subset(&l.span), "{ctx}: group {g} outside it");
                assert!(g.len() < l.span.len(), "{ctx}: group {g} is the span");
                covered.extend(g.iter());
            }
            covered.sort_unstable();
            covered.dedup();
            assert_eq!(
                covered,
                l.span.iter().collect::<Vec<_>>(),
                "{ctx}: groups {:?} do not cover it",
                l.groups
            );
            assert!(
                l.groups.contains(&prev),
                "{ctx}: the worker's previous span {prev} is not a group"
            );
            let overlapping = l.groups.iter().map(Span::len).sum::<usize>() > l.span.len();
            if !overlapping {
                // A partition, in worker order.
                assert!(
                    l.groups.windows(2).all(|p| p[0].hull().end <= p[1].first()),
                    "{ctx}: groups {:?} out of order",
                    l.groups
                );
                assert_eq!(l.group_of(w), Some(&prev), "{ctx}: own group");
            }
            // Every member sees the same level (the tree is coherent), except
            // on the kernel's NUMA levels, whose spans differ by node; above
            // them, the groups are the members' own overlapping spans.
            if !matches!(l.kind, LevelKind::NumaGroup(_)) {
                for x in l.span.iter() {
                    let same = topo.levels(x).iter().find(|m| m.span == l.span);
                    assert!(
                        same.is_some_and(
                            |m| m.kind == l.kind && (overlapping || m.groups == l.groups)
                        ),
                        "{ctx}: worker {x} disagrees"
                    );
                }
            }
            // Every group of more than one worker is a level of a member.
            for g in &l.groups {
                if g.len() > 1 {
                    assert!(
                        topo.children(g).map_or(0, <[Span]>::len) >= 2,
                        "{ctx}: group {g} is not a node of the tree"
                    );
                }
            }
            prev = l.span.clone();
        }
        // The largest level, if any, is the whole machine.
        if let Some(top) = levels.last() {
            assert_eq!(top.span, 0..n, "{what}: worker {w}'s top level");
        }
        let core = topo.core_span(w);
        let llc = topo.llc_span(w);
        assert!(core.contains(&w) && llc.contains(&w), "{what}: worker {w}");
        assert!(
            llc.start <= core.start && core.end <= llc.end,
            "{what}: worker {w}: core {core:?} not inside LLC {llc:?}"
        );
        // The LLC span is a node of the tree (a level of the worker, or the
        // worker alone) and never crosses the worker's NUMA node.
        assert!(
            llc.len() == 1 || levels.iter().any(|l| l.span == llc),
            "{what}: worker {w}: LLC {llc:?} is none of its levels"
        );
        let node = topo.numa_span(w);
        assert!(node.contains(&w), "{what}: worker {w}: node {node:?}");
        assert!(
            node.start <= llc.start && llc.end <= node.end,
            "{what}: worker {w}: LLC {llc:?} crosses its NUMA node {node:?}"
        );
        if let Some(numa) = topo.level(w, LevelKind::Numa) {
            assert!(
                Span::from(node.clone()).is_subset(&numa.span),
                "{what}: worker {w}: NUMA level {} without its node {node:?}",
                numa.span
            );
        }
        // Cache and cluster levels come below NUMA and package levels.
        let position = |k: LevelKind| levels.iter().position(|l| l.kind == k);
        for small in [LevelKind::Smt, LevelKind::Cluster, LevelKind::Llc] {
            for big in [LevelKind::Numa, LevelKind::Package] {
                if let (Some(a), Some(b)) = (position(small), position(big)) {
                    assert!(a < b, "{what}: worker {w}: {small} above {big}");
                }
            }
        }
        let cap = topo.capacity(w);
        assert!(
            (1..=hwsched::topology::CAPACITY_SCALE).contains(&cap),
            "{what}: worker {w}: capacity {cap}"
        );
    }
    // all_spans: larger before smaller, every worker once as a leaf, every
    // level's span and group among them.
    let spans = topo.all_spans();
    assert_eq!(
        spans.first(),
        Some(&Span::range(0..n)),
        "{what}: all_spans root"
    );
    assert!(
        spans.windows(2).all(|p| p[0].len() >= p[1].len()),
        "{what}: order"
    );
    let leaves: Vec<usize> = spans
        .iter()
        .filter(|s| s.len() == 1)
        .map(Span::first)
        .collect();
    assert_eq!(leaves, (0..n).collect::<Vec<_>>(), "{what}: leaves");
    for w in 0..n {
        for l in topo.levels(w) {
            assert!(spans.contains(&l.span), "{what}: {} missing", l.span);
            assert!(
                l.groups.iter().all(|g| spans.contains(g)),
                "{what}: a group missing"
            );
        }
    }
    // Distinct PUs, in hwloc logical order.
    let logical: Vec<usize> = (0..n).map(|w| topo.place(w).logical_index).collect();
    assert!(
        logical.windows(2).all(|p| p[0] < p[1]),
        "{what}: logical indices not increasing: {logical:?}"
    );
    let os: BTreeSet<usize> = (0..n).map(|w| topo.place(w).os_index).collect();
    assert_eq!(os.len(), n, "{what}: duplicate OS indices");
}

#[test]
fn big_shape_has_32_workers_and_exact_levels() {
    let topo = build(BIG, None);
    assert_eq!(topo.workers(), 32);
    assert_eq!(topo.total_pus(), 32);
    assert!(!topo.is_system());
    assert!(topo.description().contains(BIG), "{}", topo.description());

    let all = [
        LevelKind::Smt,
        LevelKind::Llc,
        LevelKind::Package,
        LevelKind::Machine,
    ];
    for w in 0..32 {
        assert_eq!(kinds(&topo, w), all, "worker {w}");
    }

    let l0 = topo.levels(0);
    assert_eq!(l0[0].kind, LevelKind::Smt);
    assert_eq!(l0[0].span, 0..2);
    assert_eq!(ranges(&l0[0].groups), vec![0..1, 1..2]);
    assert_eq!(l0[1].kind, LevelKind::Llc);
    assert_eq!(l0[1].span, 0..8);
    assert_eq!(ranges(&l0[1].groups), vec![0..2, 2..4, 4..6, 6..8]);
    assert!(l0[1].shares_cache, "the L3 level shares a cache");
    assert_eq!(l0[2].kind, LevelKind::Package);
    assert_eq!(l0[2].span, 0..16);
    assert_eq!(ranges(&l0[2].groups), vec![0..8, 8..16]);
    assert_eq!(l0[3].kind, LevelKind::Machine);
    assert_eq!(l0[3].span, 0..32);
    assert_eq!(ranges(&l0[3].groups), vec![0..16, 16..32]);

    let l13 = topo.levels(13);
    assert_eq!(l13[0].kind, LevelKind::Smt);
    assert_eq!(l13[0].span, 12..14);
    assert_eq!(ranges(&l13[0].groups), vec![12..13, 13..14]);
    assert_eq!(l13[1].kind, LevelKind::Llc);
    assert_eq!(l13[1].span, 8..16);
    assert_eq!(ranges(&l13[1].groups), vec![8..10, 10..12, 12..14, 14..16]);
    assert_eq!(l13[2].kind, LevelKind::Package);
    assert_eq!(l13[2].span, 0..16);
    assert_eq!(ranges(&l13[2].groups), vec![0..8, 8..16]);
    assert_eq!(l13[3].kind, LevelKind::Machine);
    assert_eq!(l13[3].span, 0..32);
    assert_eq!(ranges(&l13[3].groups), vec![0..16, 16..32]);

    // The accessors agree with the levels.
    assert_eq!(
        topo.level(13, LevelKind::Llc).map(|l| range(&l.span)),
        Some(8..16)
    );
    assert_eq!(topo.level(13, LevelKind::Numa), None);
    assert_eq!(topo.core_span(13), 12..14);
    assert_eq!(topo.llc_span(13), 8..16);
    assert_eq!(
        topo.children(&(0..32).into()).map(ranges),
        Some(vec![0..16, 16..32])
    );
    assert_eq!(topo.children(&(13..14).into()), None);

    // A synthetic topology numbers PUs 0..32 in order.
    for w in 0..32 {
        assert_eq!(topo.place(w).logical_index, w);
        assert_eq!(topo.place(w).os_index, w);
    }
    check_invariants(&topo, BIG);
}

#[test]
fn numa_shape_gains_a_numa_level() {
    let desc = "pack:2 numa:2 core:2 pu:2";
    let topo = build(desc, None);
    assert_eq!(topo.workers(), 16);
    let numa = topo
        .level(0, LevelKind::Numa)
        .unwrap_or_else(|| panic!("{desc}: no NUMA level: {:?}", topo.levels(0)));
    assert_eq!(numa.span, 0..4);
    assert_eq!(ranges(&numa.groups), vec![0..2, 2..4]);
    assert_eq!(
        kinds(&topo, 0),
        [
            LevelKind::Smt,
            LevelKind::Numa,
            LevelKind::Package,
            LevelKind::Machine
        ]
    );
    let numa5 = topo.level(5, LevelKind::Numa).map(|l| range(&l.span));
    assert_eq!(numa5, Some(4..8));
    assert_eq!(
        topo.level(5, LevelKind::Package).map(|l| range(&l.span)),
        Some(0..8)
    );
    check_invariants(&topo, desc);
}

#[test]
fn shape_without_smt_has_no_smt_level() {
    let desc = "pack:1 core:2 pu:1";
    let topo = build(desc, None);
    assert_eq!(topo.workers(), 2);
    for w in 0..2 {
        assert_eq!(topo.level(w, LevelKind::Smt), None, "worker {w}");
        assert_eq!(topo.core_span(w), w..w + 1);
        assert!(!topo.levels(w).is_empty(), "two cores still form a level");
        assert_eq!(topo.levels(w).last().map(|l| range(&l.span)), Some(0..2));
        assert_eq!(
            topo.levels(w).last().map(|l| ranges(&l.groups)),
            Some(vec![0..1, 1..2])
        );
    }
    check_invariants(&topo, desc);
}

#[test]
fn single_pu_has_no_levels() {
    let desc = "core:1 pu:1";
    let topo = build(desc, None);
    assert_eq!(topo.workers(), 1);
    assert!(topo.levels(0).is_empty(), "{:?}", topo.levels(0));
    assert_eq!(topo.core_span(0), 0..1);
    assert_eq!(topo.llc_span(0), 0..1);
    assert_eq!(topo.all_spans(), vec![0..1]);
    check_invariants(&topo, desc);
}

/// Logical indices of the chosen PUs, by core (2 PUs per core in `BIG`).
fn per_core(topo: &Topology) -> BTreeMap<usize, usize> {
    let mut m = BTreeMap::new();
    for w in 0..topo.workers() {
        *m.entry(topo.place(w).logical_index / 2).or_insert(0) += 1;
    }
    m
}

#[test]
fn four_of_32_take_one_pu_per_core_over_both_packages() {
    let topo = build(BIG, Some(4));
    assert_eq!(topo.workers(), 4);
    assert_eq!(topo.total_pus(), 32);
    let logical: Vec<usize> = (0..4).map(|w| topo.place(w).logical_index).collect();
    let cores = per_core(&topo);
    assert_eq!(cores.len(), 4, "two workers share a core: {logical:?}");
    assert!(
        logical.iter().any(|&l| l < 16),
        "none in package 0: {logical:?}"
    );
    assert!(
        logical.iter().any(|&l| l >= 16),
        "none in package 1: {logical:?}"
    );
    // Spread evenly: two per package, and one per LLC (4 LLCs of 8 PUs).
    assert_eq!(
        logical.iter().filter(|&&l| l < 16).count(),
        2,
        "{logical:?}"
    );
    let llcs: BTreeSet<usize> = logical.iter().map(|l| l / 8).collect();
    assert_eq!(llcs.len(), 4, "not one per LLC: {logical:?}");
    // No SMT level (no two workers share a core), and a package level.
    for w in 0..4 {
        assert_eq!(topo.level(w, LevelKind::Smt), None, "worker {w}");
    }
    assert_eq!(
        topo.level(0, LevelKind::Package).map(|l| range(&l.span)),
        Some(0..2)
    );
    assert_eq!(
        topo.level(3, LevelKind::Package).map(|l| range(&l.span)),
        Some(2..4)
    );
    assert_eq!(
        topo.level(0, LevelKind::Machine).map(|l| ranges(&l.groups)),
        Some(vec![0..2, 2..4])
    );
    check_invariants(&topo, "4 of 32");
}

#[test]
fn sixteen_of_32_take_exactly_one_pu_per_core() {
    let topo = build(BIG, Some(16));
    assert_eq!(topo.workers(), 16);
    let cores = per_core(&topo);
    assert_eq!(cores.len(), 16, "{cores:?}");
    assert!(cores.values().all(|&c| c == 1), "{cores:?}");
    for w in 0..16 {
        assert_eq!(topo.level(w, LevelKind::Smt), None, "worker {w}");
    }
    // The cache and package structure survives: LLC 0..4, package 0..8.
    assert_eq!(
        topo.level(0, LevelKind::Llc).map(|l| range(&l.span)),
        Some(0..4)
    );
    assert_eq!(
        topo.level(0, LevelKind::Package).map(|l| range(&l.span)),
        Some(0..8)
    );
    check_invariants(&topo, "16 of 32");
}

#[test]
fn twenty_of_32_use_smt_siblings_only_after_every_core() {
    let topo = build(BIG, Some(20));
    assert_eq!(topo.workers(), 20);
    let cores = per_core(&topo);
    assert_eq!(cores.len(), 16, "a core has no worker: {cores:?}");
    assert_eq!(cores.values().filter(|&&c| c == 2).count(), 4, "{cores:?}");
    assert!(cores.values().all(|&c| c == 1 || c == 2), "{cores:?}");
    // The 4 doubled cores are spread over both packages.
    let doubled: Vec<usize> = cores
        .iter()
        .filter(|(_, &c)| c == 2)
        .map(|(&k, _)| k)
        .collect();
    assert!(
        doubled.iter().any(|&c| c < 8) && doubled.iter().any(|&c| c >= 8),
        "{doubled:?}"
    );
    check_invariants(&topo, "20 of 32");
}

#[test]
fn every_subset_of_the_big_shape_is_one_per_core_first() {
    for n in 1..=32 {
        let topo = build(BIG, Some(n));
        assert_eq!(topo.workers(), n);
        let cores = per_core(&topo);
        if n <= 16 {
            assert_eq!(cores.len(), n, "{n} of 32: {cores:?}");
        } else {
            assert_eq!(cores.len(), 16, "{n} of 32: {cores:?}");
        }
        // Packages differ by at most one worker.
        let pack0 = (0..n).filter(|&w| topo.place(w).logical_index < 16).count();
        assert!(
            pack0.abs_diff(n - pack0) <= 1,
            "{n} of 32: {pack0} in package 0"
        );
        check_invariants(&topo, &format!("{n} of 32"));
    }
}

#[test]
fn generic_invariants_hold_for_several_shapes() {
    let shapes = [
        BIG,
        "pack:2 numa:2 core:2 pu:2",
        "pack:1 core:2 pu:1",
        "core:1 pu:1",
        "core:2 pu:2",
        "core:3 pu:1",
        "pack:3 core:3 pu:2",
        "pack:2 l3:2 l2:2 core:2 pu:2",
        "pack:2 l3:1 core:4 pu:1",
        "numa:2 pack:2 core:2 pu:1",
        "pack:4 core:1 pu:4",
    ];
    for desc in shapes {
        let topo = build(desc, None);
        check_invariants(&topo, desc);
        let pus = topo.workers();
        for n in [1, 2, 3, pus / 2, pus.saturating_sub(1)] {
            if n == 0 || n > pus {
                continue;
            }
            let sub = build(desc, Some(n));
            assert_eq!(sub.workers(), n);
            check_invariants(&sub, &format!("{desc} with {n} workers"));
        }
    }
}

#[test]
fn system_topology_matches_the_allowed_cpus() {
    let topo = Topology::new(&TopologySource::System, None).expect("system topology");
    assert!(topo.is_system());
    let ids = core_affinity::get_core_ids().expect("core_affinity::get_core_ids");
    assert_eq!(topo.workers(), ids.len(), "workers vs allowed CPUs");
    let mut os: Vec<usize> = (0..topo.workers())
        .map(|w| topo.place(w).os_index)
        .collect();
    os.sort_unstable();
    let mut allowed: Vec<usize> = ids.iter().map(|c| c.id).collect();
    allowed.sort_unstable();
    assert_eq!(os, allowed, "the workers' PUs are the allowed CPUs");
    check_invariants(&topo, "system");
    println!("{topo}");
}

#[test]
fn pinning_to_worker_0_is_observable() {
    let topo = Topology::new(&TopologySource::System, None).expect("system topology");
    let cpu = topo.place(0).os_index;
    let seen = std::thread::spawn(move || {
        let pinned = pin_current_thread(cpu);
        (pinned, core_affinity::get_core_ids())
    })
    .join()
    .expect("pinning thread panicked");
    match seen {
        (true, ids) => {
            let ids: Vec<usize> = ids
                .expect("get_core_ids after pinning")
                .iter()
                .map(|c| c.id)
                .collect();
            assert_eq!(ids, vec![cpu], "after pinning to CPU {cpu}");
        }
        (false, _) => {
            println!("note: pinning to CPU {cpu} was refused (restricted container); not checked");
        }
    }
}

#[test]
fn xml_round_trip_gives_the_same_tree() {
    for desc in [BIG, "pack:2 numa:2 core:2 pu:2", "core:2 pu:1"] {
        let src = synthetic(desc);
        let xml = export_xml(&src).expect("export_xml");
        assert!(xml.contains("<topology"), "{desc}: not hwloc XML");
        let file = TempFile(temp_path("roundtrip"));
        std::fs::write(&file.0, &xml).expect("write the XML file");
        let original = Topology::new(&src, None).expect("synthetic");
        let loaded = Topology::new(&TopologySource::Xml(file.0.clone()), None).expect("xml");
        assert!(!loaded.is_system());
        assert_eq!(loaded.workers(), original.workers(), "{desc}");
        assert_eq!(loaded.total_pus(), original.total_pus(), "{desc}");
        for w in 0..original.workers() {
            assert_eq!(loaded.levels(w), original.levels(w), "{desc}: worker {w}");
            assert_eq!(loaded.place(w), original.place(w), "{desc}: worker {w}");
        }
        let a = original.to_string();
        let b = loaded.to_string();
        let (a_first, a_rest) = a.split_once('\n').expect("multi-line display");
        let (b_first, b_rest) = b.split_once('\n').expect("multi-line display");
        assert!(a_first.contains(desc), "{a_first}");
        assert!(b_first.contains(&file.0.display().to_string()), "{b_first}");
        assert_eq!(
            a_rest, b_rest,
            "{desc}: display differs after the first line"
        );
        // A subset chosen from the XML is the same subset.
        let k = original.workers().min(3);
        let sub_a = Topology::new(&src, Some(k)).expect("subset");
        let sub_b = Topology::new(&TopologySource::Xml(file.0.clone()), Some(k)).expect("subset");
        for w in 0..k {
            assert_eq!(sub_a.place(w), sub_b.place(w), "{desc}: subset worker {w}");
        }
    }
}

#[test]
fn invalid_synthetic_names_the_description() {
    let bad = "pack:2 bogus:3";
    let err = Topology::new(&synthetic(bad), None).unwrap_err();
    assert!(
        matches!(err, BuildError::InvalidSynthetic { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains(bad), "{err}");
    let err = export_xml(&synthetic(bad)).unwrap_err();
    assert!(
        matches!(err, BuildError::InvalidSynthetic { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains(bad), "{err}");
}

#[test]
fn empty_synthetic_is_refused() {
    for empty in ["", "   "] {
        let err = Topology::new(&synthetic(empty), None).unwrap_err();
        match &err {
            BuildError::InvalidSynthetic { description, .. } => assert_eq!(description, empty),
            other => panic!("{empty:?}: expected InvalidSynthetic, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains(&format!("{empty:?}")), "{msg}");
        assert!(msg.contains("empty"), "{msg}");
    }
}

#[test]
fn missing_xml_file_names_the_path() {
    let path = temp_path("missing");
    assert!(!path.exists());
    let err = Topology::new(&TopologySource::Xml(path.clone()), None).unwrap_err();
    assert!(matches!(err, BuildError::InvalidXml { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
}

#[test]
fn garbage_xml_file_names_the_path() {
    let file = TempFile(temp_path("garbage"));
    std::fs::write(&file.0, "this is not hwloc XML at all\n<<<>>>\n").expect("write garbage");
    let err = Topology::new(&TopologySource::Xml(file.0.clone()), None).unwrap_err();
    assert!(matches!(err, BuildError::InvalidXml { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&file.0.display().to_string()), "{msg}");
}

#[test]
fn zero_workers_is_refused() {
    let err = Topology::new(&synthetic(BIG), Some(0)).unwrap_err();
    assert!(matches!(err, BuildError::ZeroWorkers), "{err:?}");
    assert!(err.to_string().contains('0'), "{err}");
}

#[test]
fn too_many_workers_names_both_counts() {
    let err = Topology::new(&synthetic(BIG), Some(33)).unwrap_err();
    assert!(
        matches!(
            err,
            BuildError::TooManyWorkers {
                requested: 33,
                available: 32
            }
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("33") && msg.contains("32"), "{msg}");
    // Exactly the PU count is fine.
    assert_eq!(build(BIG, Some(32)).workers(), 32);
}

#[test]
fn empty_cpu_list_is_refused() {
    let err = Topology::with_cpus(&synthetic(BIG), None, Some(&[])).unwrap_err();
    assert!(matches!(err, BuildError::EmptyCpuset { .. }), "{err:?}");
    assert!(err.to_string().contains("empty"), "{err}");
}

#[test]
fn cpu_outside_the_topology_is_named() {
    let err = Topology::with_cpus(&synthetic(BIG), None, Some(&[999])).unwrap_err();
    assert!(
        matches!(err, BuildError::CpuOutsideTopology { cpu: 999, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("999"), "{err}");
    // One good CPU and one bad: the bad one is named.
    let err = Topology::with_cpus(&synthetic(BIG), None, Some(&[3, 999])).unwrap_err();
    assert!(
        matches!(err, BuildError::CpuOutsideTopology { cpu: 999, .. }),
        "{err:?}"
    );
}

#[test]
fn cpu_list_restricts_the_workers() {
    let cpus = [0, 1, 16, 17];
    let topo = Topology::with_cpus(&synthetic(BIG), None, Some(&cpus)).expect("cpus");
    assert_eq!(topo.workers(), 4);
    let os: Vec<usize> = (0..4).map(|w| topo.place(w).os_index).collect();
    assert_eq!(os, cpus);
    // CPUs 0 and 1 are SMT siblings; as they are also the whole package
    // here, the equal spans merge into one level (its kind is not checked).
    assert_eq!(topo.levels(0)[0].span, 0..2);
    assert_eq!(ranges(&topo.levels(0)[0].groups), vec![0..1, 1..2]);
    assert_eq!(topo.levels(3)[0].span, 2..4);
    assert_eq!(
        topo.level(0, LevelKind::Machine).map(|l| ranges(&l.groups)),
        Some(vec![0..2, 2..4])
    );
    check_invariants(&topo, "cpus 0,1,16,17");
    let err = Topology::with_cpus(&synthetic(BIG), Some(5), Some(&cpus)).unwrap_err();
    assert!(
        matches!(
            err,
            BuildError::TooManyWorkers {
                requested: 5,
                available: 4
            }
        ),
        "{err:?}"
    );
}

#[test]
fn display_nests_the_levels() {
    let topo = build(BIG, None);
    let text = topo.to_string();
    let first = text.lines().next().expect("a first line");
    assert!(
        first.contains(BIG) && first.contains("32 workers"),
        "{first}"
    );
    let wanted = ["machine 0..32", "package 0..16", "LLC 0..8", "SMT 0..2"];
    let mut last_line = 0;
    let mut last_indent = None;
    for want in wanted {
        let (i, line) = text
            .lines()
            .enumerate()
            .find(|(_, l)| {
                let t = l.trim_start();
                t.starts_with(want) && !t[want.len()..].starts_with(|c: char| c.is_ascii_digit())
            })
            .unwrap_or_else(|| panic!("no line for {want:?} in:\n{text}"));
        let indent = line.len() - line.trim_start().len();
        assert!(
            i > last_line || last_indent.is_none(),
            "{want:?} out of order in:\n{text}"
        );
        if let Some(prev) = last_indent {
            assert!(
                indent > prev,
                "{want:?} not indented deeper than its parent:\n{text}"
            );
        }
        last_line = i;
        last_indent = Some(indent);
    }
    // Every worker appears once as a leaf, under the SMT line.
    for w in 0..32 {
        let leaf = format!("worker {w} (");
        assert_eq!(
            text.lines()
                .filter(|l| l.trim_start().starts_with(&leaf))
                .count(),
            1,
            "worker {w} in:\n{text}"
        );
    }
    let smt_indent = text
        .lines()
        .find(|l| l.trim_start().starts_with("SMT 0..2"))
        .map(|l| l.len() - l.trim_start().len())
        .unwrap_or(0);
    let w0 = text
        .lines()
        .find(|l| l.trim_start().starts_with("worker 0 ("))
        .expect("worker 0 line");
    assert!(w0.len() - w0.trim_start().len() > smt_indent, "{text}");
    // A topology without levels still displays its workers.
    let single = build("core:1 pu:1", None).to_string();
    assert!(single.contains("worker 0 ("), "{single}");
}

// --- Real machines -------------------------------------------------------
//
// hwloc exports of real machines (tests/topologies/README.md says how each
// was made), and the domain tree the Linux kernel builds on each, checked
// level by level.

/// Loads `tests/topologies/<name>.xml` with `workers` workers and checks
/// the tree's invariants.
fn real(name: &str, workers: Option<usize>) -> Topology {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/topologies")
        .join(format!("{name}.xml"));
    let topo = Topology::new(&TopologySource::Xml(path), workers)
        .unwrap_or_else(|e| panic!("loading {name} with {workers:?} workers failed: {e}"));
    check_invariants(&topo, name);
    topo
}

/// Worker `w`'s levels as (kind, span), every span a range.
fn tree(topo: &Topology, w: usize) -> Vec<(LevelKind, Range<usize>)> {
    topo.levels(w)
        .iter()
        .map(|l| (l.kind, range(&l.span)))
        .collect()
}

/// Every worker's LLC span is its block of `size` workers.
fn llc_blocks(topo: &Topology, size: usize, what: &str) {
    for w in 0..topo.workers() {
        let start = w / size * size;
        assert_eq!(topo.llc_span(w), start..start + size, "{what}: worker {w}");
    }
}

#[test]
fn knl_cache_mode_ignores_the_mcdram_cache() {
    // 16 cores x 4 threads, 2-core tiles sharing a 1 MiB L2 (4 MiB here),
    // MCDRAM as a 16 GiB memory-side L3 over the whole chip. The kernel's
    // MC is the tile: SMT (4) -> MC (8) -> machine (64).
    let topo = real("knl-cache", None);
    assert_eq!(topo.workers(), 64);
    for w in [0, 13, 63] {
        let tile = w / 8 * 8;
        let core = w / 4 * 4;
        assert_eq!(
            tree(&topo, w),
            vec![
                (LevelKind::Smt, core..core + 4),
                (LevelKind::Llc, tile..tile + 8),
                (LevelKind::Machine, 0..64),
            ],
            "worker {w}"
        );
    }
    llc_blocks(&topo, 8, "knl-cache");
    let llc = topo.level(0, LevelKind::Llc).expect("an LLC level");
    assert_eq!(llc.cache_size, Some(4 << 20));
    for w in 0..64 {
        for l in topo.levels(w) {
            assert!(
                l.cache_size.is_none_or(|s| s <= 4 << 20),
                "worker {w}: {} {:?} shares {:?} bytes (the MCDRAM cache?)",
                l.kind,
                l.span,
                l.cache_size
            );
        }
    }
}

#[test]
fn knl_snc4_hybrid_has_tiles_inside_quadrants() {
    // SNC-4, hybrid MCDRAM: each quadrant is a NUMA node (with a CPU-less
    // MCDRAM node) behind a 2 GiB memory-side cache.
    let topo = real("knl-snc4-hybrid", None);
    for w in [0, 20, 63] {
        let (core, tile, quad) = (w / 4 * 4, w / 8 * 8, w / 16 * 16);
        assert_eq!(
            tree(&topo, w),
            vec![
                (LevelKind::Smt, core..core + 4),
                (LevelKind::Llc, tile..tile + 8),
                (LevelKind::Numa, quad..quad + 16),
                (LevelKind::Machine, 0..64),
            ],
            "worker {w}"
        );
    }
    llc_blocks(&topo, 8, "knl-snc4-hybrid");
}

#[test]
fn cascade_lake_snc2_llc_stops_at_the_node() {
    // 2 x Xeon Gold 6230 (20 cores x 2 threads) in SNC2: one 27.5 MiB L3
    // per package over two NUMA nodes of 10 cores. The kernel's MC is the
    // node (LLC intersected with the node), not the 40-CPU L3.
    // The package is the first NUMA level (the other node of the package is
    // one distance away), as in the kernel.
    let topo = real("cascadelake-snc2", None);
    assert_eq!(topo.workers(), 80);
    for w in [0, 25, 79] {
        let (core, node, pack) = (w / 2 * 2, w / 20 * 20, w / 40 * 40);
        assert_eq!(
            tree(&topo, w),
            vec![
                (LevelKind::Smt, core..core + 2),
                (LevelKind::Llc, node..node + 20),
                (LevelKind::NumaGroup(1), pack..pack + 40),
                (LevelKind::Machine, 0..80),
            ],
            "worker {w}"
        );
    }
    llc_blocks(&topo, 20, "cascadelake-snc2");
    assert_eq!(topo.numa_span(25), 20..40, "the node is the LLC level");
    let llc = topo.level(25, LevelKind::Llc).expect("an LLC level");
    assert_eq!(llc.cache_size, Some(28160 << 10));
    assert!(llc.shares_cache);
}

#[test]
fn raptor_lake_has_capacities_and_e_core_clusters() {
    // Core i7-1370P: 6 P-cores x 2 threads (max 5.0 GHz), then 2 clusters
    // of 4 E-cores sharing a 2 MiB L2 (max 3.9 GHz), one 24 MiB L3. The
    // kernel: SMT on P-cores, CLS on E-core clusters, MC = the package.
    let topo = real("raptorlake-hybrid", None);
    assert_eq!(topo.workers(), 20);
    assert!(topo.is_asymmetric());
    for w in 0..20 {
        let want = if w < 12 { 1024 } else { 1024 * 3900 / 5000 };
        assert_eq!(topo.capacity(w), want, "worker {w}");
        assert_eq!(topo.llc_span(w), 0..20, "worker {w}");
    }
    assert_eq!(
        tree(&topo, 3),
        vec![(LevelKind::Smt, 2..4), (LevelKind::Machine, 0..20)]
    );
    assert_eq!(
        tree(&topo, 17),
        vec![(LevelKind::Cluster, 16..20), (LevelKind::Machine, 0..20)]
    );
    let machine = topo.level(0, LevelKind::Machine).expect("machine level");
    assert_eq!(machine.cache_size, Some(24 << 20));
    let text = topo.to_string();
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.contains("capacities 1024/798")),
        "{text}"
    );
    assert!(text.contains("capacity 798)"), "{text}");
    assert!(text.contains("cluster 12..16"), "{text}");
}

/// How many workers of `sub` run on each core of `full` (by the core's
/// first worker in `full`).
fn per_full_core(full: &Topology, sub: &Topology) -> BTreeMap<usize, usize> {
    let mut m = BTreeMap::new();
    for w in 0..sub.workers() {
        let os = sub.place(w).os_index;
        let f = (0..full.workers())
            .find(|&f| full.place(f).os_index == os)
            .expect("a PU of the full topology");
        *m.entry(full.core_span(f).start).or_insert(0) += 1;
    }
    m
}

#[test]
fn hybrid_subsets_take_big_cores_first_then_little_then_siblings() {
    let full = real("raptorlake-hybrid", None);
    // 6 workers: one thread of each P-core.
    let six = real("raptorlake-hybrid", Some(6));
    assert!((0..6).all(|w| six.capacity(w) == 1024), "{six}");
    assert_eq!(per_full_core(&full, &six).len(), 6, "{six}");
    // 14: every core once, P and E, no SMT sibling yet.
    let fourteen = real("raptorlake-hybrid", Some(14));
    assert_eq!(per_full_core(&full, &fourteen).len(), 14, "{fourteen}");
    assert_eq!(
        (0..14).filter(|&w| fourteen.capacity(w) == 1024).count(),
        6,
        "{fourteen}"
    );
    // 8: the six P-cores and two E-cores (one per cluster).
    let eight = real("raptorlake-hybrid", Some(8));
    assert_eq!((0..8).filter(|&w| eight.capacity(w) == 1024).count(), 6);
    assert_eq!(per_full_core(&full, &eight).len(), 8, "{eight}");
    let e_cores: Vec<usize> = (6..8).map(|w| eight.place(w).os_index).collect();
    assert!(e_cores[0] < 16 && e_cores[1] >= 16, "{eight}");
    // 16: every core, then the first two SMT siblings.
    let sixteen = real("raptorlake-hybrid", Some(16));
    assert_eq!(per_full_core(&full, &sixteen).len(), 14, "{sixteen}");
    // GB10: 10 of 20 are the 10 big cores (capacity ~1000), not the little
    // ones (~720).
    let gb10 = real("gb10-hybrid", Some(10));
    for w in 0..10 {
        assert!(gb10.capacity(w) >= 997, "worker {w}:\n{gb10}");
    }
    let all = real("gb10-hybrid", None);
    let mut caps: Vec<u32> = (0..20).map(|w| all.capacity(w)).collect();
    caps.sort_unstable();
    caps.dedup();
    assert_eq!(caps, vec![718, 731, 997, 1017, 1024]);
    // Two LLCs of 10 cores (8 MiB and 16 MiB L3).
    llc_blocks(&all, 10, "gb10");
    // A whole-machine runtime uses every core.
    assert_eq!(all.workers(), 20);
}

#[test]
fn kunpeng_920_has_4_core_clusters_and_llc_per_node() {
    // 2 x Kunpeng 920 (64 cores each, no SMT): 4-core clusters (hwloc
    // Groups), one 32 MiB L3 per 32-core die, which is a NUMA node. Node
    // distances: 0-1 and 2-3 16, 1-2 25, 0-2 and 1-3 32, 0-3 33. The
    // kernel builds one NUMA level per distance: node 0 has NUMA 64 (16),
    // 96 (32: nodes 0-2) and 128 (33); node 1 has 64, 96 (25) and 128 (32);
    // node 3 has 64 (16), 96 (32: nodes 1-3) and 128. The spans overlap
    // (node 0's 96 is not node 3's).
    use LevelKind::{Cluster, Llc, Machine, NumaGroup};
    let topo = real("kunpeng920", None);
    let expect = |w: usize, numa: Vec<(LevelKind, Range<usize>)>| {
        let (cl, die) = (w / 4 * 4, w / 32 * 32);
        let mut t = vec![(Cluster, cl..cl + 4), (Llc, die..die + 32)];
        t.extend(numa);
        t.push((Machine, 0..128));
        assert_eq!(tree(&topo, w), t, "worker {w}");
    };
    expect(0, vec![(NumaGroup(1), 0..64), (NumaGroup(3), 0..96)]);
    expect(37, vec![(NumaGroup(1), 0..64), (NumaGroup(2), 0..96)]);
    expect(64, vec![(NumaGroup(1), 64..128), (NumaGroup(2), 32..128)]);
    expect(127, vec![(NumaGroup(1), 64..128), (NumaGroup(3), 32..128)]);
    llc_blocks(&topo, 32, "kunpeng920");
    // Node 0's 96 has two groups: its own 64, and node 2 (node 2's 64 is
    // 64..128, not inside it).
    let l = topo.level(0, NumaGroup(3)).expect("the 96 level");
    assert_eq!(ranges(&l.groups), vec![0..64, 64..96]);
    // Node 1's 96: its own 64, then node 2's span inside it (its node).
    let l = topo.level(37, NumaGroup(2)).expect("the 96 level");
    assert_eq!(ranges(&l.groups), vec![0..64, 64..96]);
    assert_eq!(topo.numa_topology(), hwsched::NumaTopology::GluelessMesh);
    let text = topo.to_string();
    assert!(text.contains("NUMA group 3 0..96"), "{text}");
}

#[test]
fn bulldozer_modules_are_clusters() {
    // 4 x Opteron 6272: 2-core modules share a 2 MiB L2, 4 modules share a
    // 6 MiB L3 (one die), 2 dies per package (CPUID dump: no NUMA info).
    let topo = real("bulldozer-4p", None);
    for w in [0, 9, 63] {
        let (m, die, pack) = (w / 2 * 2, w / 8 * 8, w / 16 * 16);
        assert_eq!(
            tree(&topo, w),
            vec![
                (LevelKind::Cluster, m..m + 2),
                (LevelKind::Llc, die..die + 8),
                (LevelKind::Package, pack..pack + 16),
                (LevelKind::Machine, 0..64),
            ],
            "worker {w}"
        );
    }
    assert_eq!(
        topo.level(0, LevelKind::Cluster).and_then(|l| l.cache_size),
        Some(2 << 20)
    );
}

#[test]
fn epyc_zen3_has_8_core_llcs_in_2_packages() {
    // 2 x EPYC 7763 (CPUID dump, SMT off): 8 CCDs of 8 cores per package,
    // each CCD one 32 MiB L3.
    let topo = real("epyc-zen3-2p", None);
    assert_eq!(topo.workers(), 128);
    for w in [0, 9, 127] {
        let (ccd, pack) = (w / 8 * 8, w / 64 * 64);
        assert_eq!(
            tree(&topo, w),
            vec![
                (LevelKind::Llc, ccd..ccd + 8),
                (LevelKind::Package, pack..pack + 64),
                (LevelKind::Machine, 0..128),
            ],
            "worker {w}"
        );
    }
    llc_blocks(&topo, 8, "epyc-zen3-2p");
    assert_eq!(
        topo.level(0, LevelKind::Llc).and_then(|l| l.cache_size),
        Some(32 << 20)
    );
}

#[test]
fn numa_distances_make_numa_group_levels() {
    // HP Superdome sx2000 (IA64): 16 nodes of 4 dual-core packages, plus a
    // CPU-less node; no cache information, so the package stands for the
    // LLC. Distances: 10 local, 14 to the CPU-less node, 17 within a
    // group of 4 nodes, 20 otherwise: the kernel's levels are the node,
    // the 4 nodes within 17 and the machine (the 14 level is the node
    // again: the CPU-less node adds no CPU).
    let topo = real("ia64-17numa", None);
    for w in [0, 45, 127] {
        let (pack, node, group) = (w / 2 * 2, w / 8 * 8, w / 32 * 32);
        assert_eq!(
            tree(&topo, w),
            vec![
                (LevelKind::Package, pack..pack + 2),
                (LevelKind::Numa, node..node + 8),
                (LevelKind::NumaGroup(1), group..group + 32),
                (LevelKind::Machine, 0..128),
            ],
            "worker {w}"
        );
        assert_eq!(topo.llc_span(w), pack..pack + 2, "worker {w}");
    }
    // A 64-node IA64 machine: nodes of 2 packages, distances 10, 22 (4
    // nodes), 26 (12 nodes, not contiguous for every node), 30 (40 nodes)
    // and 34: the kernel's spans 16, 48 and 160 workers below the machine.
    let big = real("ia64-64numa", None);
    assert_eq!(big.workers(), 256);
    for w in [0, 100, 255] {
        let sizes: Vec<usize> = big.levels(w).iter().map(|l| l.span.len()).collect();
        assert_eq!(sizes, [2, 4, 16, 48, 160, 256], "worker {w}");
        let (pack, node, g1) = (w / 2 * 2, w / 4 * 4, w / 16 * 16);
        let l = big.levels(w);
        assert_eq!(l[0].span, pack..pack + 2);
        assert_eq!(l[1].span, node..node + 4);
        assert_eq!(l[2].span, g1..g1 + 16);
        assert!(
            !l[3].span.is_contiguous() || !l[4].span.is_contiguous(),
            "worker {w}"
        );
    }
}

#[test]
fn overlapping_numa_levels_are_bitmaps() {
    use LevelKind::{Llc, Machine, NumaGroup};
    // AMD Magny-Cours, 4 packages of 2 nodes of 6 cores (48 workers),
    // distances 10, 16 and 22: the kernel's MC 6, NUMA 30 or 42 (the
    // nodes within 16 of the worker's: 5 or 7 of the 8), NUMA 48. Node 0's
    // 30 is nodes 0, 1, 2, 4 and 6: not contiguous.
    let topo = real("magnycours-8numa", None);
    assert_eq!(topo.workers(), 48);
    for w in 0..48 {
        let l = topo.levels(w);
        assert_eq!(l.len(), 3, "worker {w}");
        assert_eq!((l[0].kind, l[0].span.len()), (Llc, 6), "worker {w}");
        assert_eq!(l[1].kind, NumaGroup(1), "worker {w}");
        assert!(
            [30, 42].contains(&l[1].span.len()),
            "worker {w}: {}",
            l[1].span
        );
        assert_eq!(l[2].kind, Machine);
        // The groups: its own node (one LLC) among them, each member's
        // largest span inside (a node, or a 30 inside a 42).
        assert!(l[1].groups.contains(&l[0].span), "worker {w}");
    }
    let near = &topo.levels(0)[1].span;
    assert_eq!(near.runs(), [0..18, 24..30, 36..42]);
    assert!(!near.is_contiguous() && near.contains(37) && !near.contains(20));
    let text = topo.to_string();
    assert!(text.contains("(overlapping NUMA spans)"), "{text}");
    // 384 PUs in 24 nodes (2 threads, 8 cores per node): SMT 2, MC 16,
    // NUMA 32 (node pairs), then the nodes one more hop away (node 0's:
    // 224 workers, not contiguous), machine.
    let big = real("em64t-24numa", None);
    assert_eq!(big.workers(), 384);
    let sizes = |w: usize| -> Vec<usize> { big.levels(w).iter().map(|l| l.span.len()).collect() };
    assert_eq!(sizes(0), [2, 16, 32, 224, 384]);
    assert!(!big.levels(0)[3].span.is_contiguous());
    for w in [17, 200, 383] {
        assert_eq!(sizes(w)[..3], [2, 16, 32], "worker {w}");
        assert_eq!(sizes(w).last(), Some(&384), "worker {w}");
    }
    // Subsets keep the kernel's spans cut to the chosen workers.
    let half = real("em64t-24numa", Some(192));
    for w in 0..192 {
        assert!(half.levels(w).len() >= 3, "worker {w}");
    }
}

#[test]
fn only_the_node_latency_matrix_makes_numa_levels() {
    // 8 nodes of 2 cores, all 20 apart, with a package distance matrix of
    // 10/20/40/80 and hwloc Groups made from it: the kernel has the node
    // (2) and the machine (16), no level in between.
    let topo = real("amd64-4distances", None);
    for w in 0..topo.workers() {
        let sizes: Vec<usize> = topo.levels(w).iter().map(|l| l.span.len()).collect();
        assert_eq!(sizes, [2, topo.workers()], "worker {w}");
    }
    assert_eq!(topo.numa_topology(), hwsched::NumaTopology::Direct);
}

#[test]
fn bulldozer_with_l1_caches_loads() {
    // The whole export (L1 caches kept): each module's L1i, shared by its
    // two cores, sits above their own L1d (hwloc's order for this
    // machine). It loads, with the tree of the export without L1 caches.
    let full = real("bulldozer-4p-l1", None);
    let small = real("bulldozer-4p", None);
    assert_eq!(full.workers(), small.workers());
    for w in 0..full.workers() {
        assert_eq!(tree(&full, w), tree(&small, w), "worker {w}");
    }
}

#[test]
fn uneven_trees_count_their_levels() {
    // P-core 0 (both threads) and one thread of P-core 1: workers 0 and 1
    // have SMT and machine, worker 2 only the machine.
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/topologies/raptorlake-hybrid.xml");
    let full = real("raptorlake-hybrid", None);
    let cpus = [
        full.place(0).os_index,
        full.place(1).os_index,
        full.place(2).os_index,
    ];
    let topo = Topology::with_cpus(&TopologySource::Xml(path), None, Some(&cpus)).expect("subset");
    check_invariants(&topo, "raptorlake subset");
    assert_eq!(topo.levels(0).len(), 2);
    assert_eq!(topo.levels(2).len(), 1);
    let text = topo.to_string();
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.contains("1 to 2 levels")),
        "{text}"
    );
}

#[test]
fn xml_errors_say_why_in_words() {
    let dir = TempFile(temp_path("dir-as-xml"));
    std::fs::create_dir_all(&dir.0).expect("mkdir");
    let not_file = Topology::new(&TopologySource::Xml(dir.0.clone()), None).unwrap_err();
    let text = not_file.to_string();
    assert!(
        text.contains("not a regular file") && text.contains("directory"),
        "{text}"
    );
    let _ = std::fs::remove_dir(&dir.0);

    let v3 = TempFile(temp_path("v3"));
    let xml = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/topologies/knl-cache.xml"),
    )
    .expect("read");
    std::fs::write(&v3.0, xml.replace("version=\"2.0\"", "version=\"3.0\"")).expect("write");
    let err = Topology::new(&TopologySource::Xml(v3.0.clone()), None).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("hwloc 3.0 XML") && text.contains("versions 1 and 2"),
        "{text}"
    );
    assert!(!text.contains("Errno") && !text.contains("{"), "{text}");

    let no_pu = TempFile(temp_path("no-pu"));
    std::fs::write(
        &no_pu.0,
        "<topology version=\"2.0\"><object type=\"Machine\" os_index=\"0\"/></topology>",
    )
    .expect("write");
    let err = Topology::new(&TopologySource::Xml(no_pu.0.clone()), None).unwrap_err();
    assert!(err.to_string().contains("no PU"), "{err}");
}

#[test]
fn hwloc_groups_above_nodes_make_numa_group_levels() {
    // Groups of 2 NUMA nodes inside each package: a NUMA group level
    // between the node and the package.
    let topo = build("pack:2 group:2 numa:2 core:2 pu:1", None);
    check_invariants(&topo, "groups");
    assert_eq!(
        tree(&topo, 5),
        vec![
            (LevelKind::Numa, 4..6),
            (LevelKind::NumaGroup(1), 4..8),
            (LevelKind::Package, 0..8),
            (LevelKind::Machine, 0..16),
        ]
    );
    // Without cache information the LLC span is the package cut at the node.
    assert_eq!(topo.llc_span(5), 4..6);
}

/// On a hybrid machine, a spawn from outside into a sleeping runtime wakes
/// one of the most capable workers of the LLC to search and run it
/// (src/worker/mod.rs, `wake_spans`): on the Raptor Lake export, a P-core (capacity
/// 1024), not one of the E-cores (798), whichever worker the spawn's
/// round-robin ticket starts from (24 spawns from this thread: the ticket
/// walks past the 12 P-core workers into the E-cores' clusters).
#[test]
fn a_hybrid_runtime_wakes_a_big_core_for_an_outside_spawn() {
    common::with_timeout(60, "hybrid_wake", || {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/topologies/raptorlake-hybrid.xml");
        let rt = hwsched::Runtime::builder()
            .topology(TopologySource::Xml(path))
            .build()
            .expect("raptorlake runtime");
        let topo = rt.topology().clone();
        assert!(topo.is_asymmetric());
        for round in 0..24 {
            // Every worker asleep, so no idle worker is awake to take it.
            let t0 = std::time::Instant::now();
            while rt.stats().asleep < rt.workers() {
                assert!(
                    t0.elapsed() < std::time::Duration::from_secs(20),
                    "the workers did not all go to sleep"
                );
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            let w = rt
                .block_on(rt.spawn(async { hwsched::worker_index() }))
                .unwrap()
                .expect("runs on a worker");
            assert_eq!(
                topo.capacity(w),
                1024,
                "round {round}: the spawn ran on worker {w} of capacity {}",
                topo.capacity(w)
            );
        }
    });
}

/// A runtime on a machine whose NUMA levels are bitmaps (the Magny-Cours
/// export: node 0's level of distance 16 is nodes 0, 1, 2, 4 and 6) runs
/// every task, spread over workers by the walk and the wake searches over
/// those spans, and its stats name each row by every worker's level.
#[test]
fn a_runtime_on_overlapping_numa_levels_runs_every_task() {
    common::with_timeout(120, "overlapping_numa_runtime", || {
        let path =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/topologies/magnycours-8numa.xml");
        let rt = hwsched::Runtime::builder()
            .topology(TopologySource::Xml(path))
            .build()
            .expect("magny-cours runtime");
        assert_eq!(rt.workers(), 48);
        let ran: Vec<usize> = rt.block_on(async {
            let handles: Vec<_> = (0..2000)
                .map(|i| {
                    hwsched::spawn(async move {
                        // Some work, so that idle workers steal.
                        let mut x = i as u64;
                        for _ in 0..2000 {
                            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                        }
                        let _ = x;
                        hwsched::worker_index().expect("on a worker")
                    })
                })
                .collect();
            let mut out = Vec::with_capacity(handles.len());
            for h in handles {
                out.push(h.await.expect("task"));
            }
            out
        });
        assert_eq!(ran.len(), 2000);
        let distinct: BTreeSet<usize> = ran.iter().copied().collect();
        assert!(distinct.len() > 1, "every task ran on {distinct:?}");
        let stats = rt.stats();
        assert!(
            stats.row_names().iter().any(|r| r.contains("NUMA group 1")),
            "{:?}",
            stats.row_names()
        );
    });
}
