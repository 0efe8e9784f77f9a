//! The simulator's inputs: XML topologies and traces.

use hwsched::topology::export_xml;
use hwsched::{Topology, TopologySource};
use hwsched_sim::workload::{Burst, Hackbench, Trace};
use hwsched_sim::{simulate, Config};

#[test]
fn an_xml_topology_simulates_like_the_synthetic_one_it_was_exported_from() {
    let synth = TopologySource::Synthetic("pack:2 numa:2 l3:2 core:2 pu:2".into());
    let xml = export_xml(&synth).expect("export");
    let path = std::env::temp_dir().join(format!("hwsched-sim-{}.xml", std::process::id()));
    std::fs::write(&path, xml).expect("write xml");
    let from_xml = Topology::new(&TopologySource::Xml(path.clone()), None).expect("xml");
    let _ = std::fs::remove_file(&path);
    let from_synth = Topology::new(&synth, None).expect("synthetic");
    assert_eq!(from_xml.workers(), 32);
    let run = |t: Topology| {
        let mut r = simulate(Config::new(t), Box::new(Hackbench::new(2, 8, 10, 500, 500)));
        r.topology.clear(); // the description names the source
        r
    };
    assert_eq!(run(from_xml), run(from_synth));
}

const TRACE: &str = "\
# dispatcher 0 forks 1 and 2, which reply
tasks 3
spawn 0 at 0
run 0 2000 spawn 1 spawn 2
run 1 50000 wake 0 done
run 2 30000 wake 0 done
run 0 500
run 0 500 done
";

#[test]
fn a_trace_replays_its_runs_and_edges() {
    let topo = Topology::new(
        &TopologySource::Synthetic("pack:1 l3:1 core:4 pu:1".into()),
        None,
    )
    .expect("topology");
    let r = simulate(
        Config::new(topo),
        Box::new(Trace::parse(TRACE).expect("parse")),
    );
    assert_eq!(r.ops, 5, "every run line replayed\n{r}");
    assert_eq!(r.unfinished, 0);
    assert_eq!(r.work_ns, 2000 + 50000 + 30000 + 500 + 500);
    // The two workers run in parallel: the makespan is the dispatcher's
    // runs plus the longer worker, not the sum.
    assert!(r.makespan_ns < 2000 + 50000 + 30000, "{r}");
    assert!(r.makespan_ns >= 2000 + 50000 + 500);
}

#[test]
fn bad_traces_are_refused_with_the_line() {
    for (bad, want) in [
        ("run 0 5", "`tasks N` must come first"),
        ("tasks 1\nrun 3 5", "no such task"),
        ("tasks 1\nrun 0 x", "not a number"),
        ("tasks 1\nspawn 0 when 5", "expected"),
        ("tasks 1\nrun 0 5 jump", "unknown word"),
        ("", "no `tasks N`"),
    ] {
        let e = Trace::parse(bad).expect_err(bad);
        assert!(e.contains(want), "{bad:?}: {e}");
    }
}

fn real(name: &str) -> Topology {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/topologies")
        .join(format!("{name}.xml"));
    Topology::new(&TopologySource::Xml(path), None).expect("real-machine XML")
}

#[test]
fn the_real_machine_topologies_of_the_tables_simulate() {
    for (name, workers) in [
        ("epyc-zen3-2p", 128),
        ("cascadelake-snc2", 80),
        ("kunpeng920", 128),
        ("raptorlake-hybrid", 20),
    ] {
        let t = real(name);
        assert_eq!(t.workers(), workers, "{name}");
        let r = simulate(Config::new(t), Box::new(Hackbench::new(2, 8, 5, 500, 500)));
        assert_eq!((r.ops, r.unfinished), (2 * 8 * 8 * 5, 0), "{name}\n{r}");
    }
}

#[test]
fn work_on_a_less_capable_worker_takes_longer() {
    // raptorlake-hybrid: 12 P-core threads (capacity 1024), 8 E-cores (798).
    let t = real("raptorlake-hybrid");
    assert!(t.is_asymmetric());
    let mut cfg = Config::new(t);
    cfg.cost = hwsched_sim::CostModel::zero();
    // 200 independent 100 us tasks: every worker runs some.
    let r = simulate(
        cfg,
        Box::new(hwsched_sim::workload::Burst::new(1, 200, 100_000, 0, 0)),
    );
    assert_eq!(r.ops, 200);
    let p_only = 200 * 100_000;
    let e_only = 200 * 100_000 * 1024 / 798;
    assert!(
        r.work_ns > p_only && r.work_ns < e_only,
        "work {} between {p_only} and {e_only}",
        r.work_ns
    );
}

#[test]
fn a_spawn_into_a_sleeping_hybrid_machine_wakes_a_big_core() {
    // The production `wake_spans` (src/worker/mod.rs): the parked worker
    // woken to search is taken from the most capable workers of the LLC
    // first. One task at a time spawned from outside, every worker asleep
    // in between: each is placed on a woken worker, so every poll is on a
    // most capable one, wherever the round-robin start falls.
    let t = real("raptorlake-hybrid");
    let top = (0..t.workers()).map(|w| t.capacity(w)).max().unwrap();
    assert!((0..t.workers()).any(|w| t.capacity(w) < top));
    let r = simulate(
        Config::new(t.clone()),
        Box::new(Burst::new(40, 1, 20_000, 0, 1_000_000)),
    );
    assert_eq!((r.ops, r.unfinished), (40, 0));
    // Each task but the first (placed on a worker still awake at the
    // start) woke a parked worker.
    assert!(r.counters.searcher_wakes + 1 >= r.ops, "{r}");
    for (w, s) in r.stats.workers.iter().enumerate() {
        if t.capacity(w) < top {
            assert_eq!(s.polls, 0, "worker {w} (less capable) ran a task:\n{r}");
        }
    }
}
