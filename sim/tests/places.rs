//! The `shards` workload and `Config::places` (SIMULATION.md, "Places: NUMA
//! shards"): with places no task runs off its home node and work is
//! conserved inside each node; without them tasks run anywhere, pay for it,
//! and work is conserved across the machine.

use hwsched::{Topology, TopologySource};
use hwsched_sim::workload::Shards;
use hwsched_sim::{simulate, Config, CostModel, Report};

/// 32 workers in 4 NUMA nodes (2 packages of 2 nodes of 2 LLCs).
const NUMA: &str = "pack:2 numa:2 l3:2 core:4 pu:1";

fn synthetic(s: &str) -> Topology {
    Topology::new(&TopologySource::Synthetic(s.into()), None).expect("synthetic topology")
}

fn xml(name: &str) -> Topology {
    let p = format!(
        "{}/../tests/topologies/{name}.xml",
        env!("CARGO_MANIFEST_DIR")
    );
    Topology::new(&TopologySource::Xml(p.into()), None).expect("topology XML")
}

fn nodes(t: &Topology) -> usize {
    t.domains(hwsched::LevelKind::Numa)
        .expect("NUMA domains")
        .len()
}

/// The machines: the synthetic one, and the two real ones with several
/// nodes, each with its cost model.
fn machines() -> Vec<(&'static str, Topology, CostModel)> {
    vec![
        ("numa", synthetic(NUMA), CostModel::default()),
        (
            "cascadelake-snc2",
            xml("cascadelake-snc2"),
            CostModel::preset("xeon").expect("xeon costs"),
        ),
        (
            "kunpeng920",
            xml("kunpeng920"),
            CostModel::preset("epyc").expect("epyc costs"),
        ),
    ]
}

fn run(
    topo: &Topology,
    cost: CostModel,
    places: bool,
    per_task: bool,
    f: impl Fn(&mut Shards),
) -> Report {
    run_seed(topo, cost, places, per_task, 1, f)
}

fn run_seed(
    topo: &Topology,
    cost: CostModel,
    places: bool,
    per_task: bool,
    seed: u64,
    f: impl Fn(&mut Shards),
) -> Report {
    let mut w = Shards::new(nodes(topo));
    w.bursts = 4;
    w.requests = 2 * topo.workers() as u64;
    f(&mut w);
    let mut cfg = Config::new(topo.clone());
    cfg.seed = seed;
    cfg.cost = cost;
    cfg.places = places;
    cfg.place_wake_per_task = per_task;
    simulate(cfg, Box::new(w))
}

/// Every request and subtask of `bursts` bursts finished: `requests x
/// bursts x (fanout + 1)` tasks, `fanout + 2` runs per request.
fn assert_complete(r: &Report, label: &str, bursts: u64, requests: u64) {
    let fanout = 4;
    assert_eq!(r.unfinished, 0, "{label}: unfinished tasks");
    assert_eq!(
        r.ops,
        bursts * requests * (fanout + 1),
        "{label}: tasks finished"
    );
    assert_eq!(
        r.homed_runs,
        bursts * requests * (fanout + 2),
        "{label}: every run is of a task with a home"
    );
}

#[test]
fn with_places_no_task_runs_off_its_home_node() {
    for (name, topo, cost) in machines() {
        let requests = 2 * topo.workers() as u64;
        for (hot, per_task, seed) in [None, Some(70)]
            .into_iter()
            .flat_map(|h| [false, true].map(|p| (h, p)))
            .flat_map(|(h, p)| [1, 2, 3].map(|s| (h, p, s)))
        {
            {
                let r = run_seed(&topo, cost.clone(), true, per_task, seed, |w| {
                    w.bursts = 10;
                    w.hot_pct = hot
                });
                let label = format!("{name}, hot {hot:?}, per-task wakes {per_task}, seed {seed}");
                assert_complete(&r, &label, 10, requests);
                assert_eq!(r.remote_runs, 0, "{label}: runs off the home node");
                assert_eq!(r.remote_ns, 0, "{label}: remote time");
                assert_eq!(r.cross_node_migrations, 0, "{label}: cross-node migrations");
            }
        }
    }
}

#[test]
fn without_places_tasks_run_off_their_node_and_pay_for_it() {
    for (name, topo, cost) in machines() {
        let requests = 2 * topo.workers() as u64;
        let r = run(&topo, cost, false, false, |_| {});
        assert_complete(&r, name, 4, requests);
        assert!(r.remote_runs > 0, "{name}: no run off its home node");
        assert!(
            r.cross_node_migrations > 0,
            "{name}: no cross-node migration"
        );
        assert!(r.remote_ns > 0, "{name}: remote runs cost nothing");
        // +50% of a run's work, and no more.
        assert!(
            r.remote_ns <= r.work_ns / 2,
            "{name}: remote {} ns for {} ns of work",
            r.remote_ns,
            r.work_ns
        );
    }
}

#[test]
fn with_free_scheduling_work_is_conserved_across_the_machine_without_places_and_inside_each_node_with_them(
) {
    for (name, topo, _) in machines() {
        for hot in [None, Some(70)] {
            let off = run(&topo, CostModel::zero(), false, false, |w| w.hot_pct = hot);
            assert_eq!(
                off.idle_while_queued_ns, 0,
                "{name}, hot {hot:?}, places off: a worker idled while a task waited"
            );
            for per_task in [false, true] {
                let on = run(&topo, CostModel::zero(), true, per_task, |w| {
                    w.hot_pct = hot
                });
                assert_eq!(
                    on.idle_while_place_queued_ns, 0,
                    "{name}, hot {hot:?}, per-task wakes {per_task}: a worker idled while a \
                     task of its own node waited"
                );
            }
        }
    }
}

#[test]
fn places_win_on_even_shards_and_lose_on_a_hot_one() {
    // Free scheduling, only the remote memory cost: both runs conserve
    // work in their scope, so what places change is where tasks may run.
    let topo = xml("kunpeng920");
    let even = |places| {
        run(&topo, CostModel::zero(), places, false, |w| {
            w.bursts = 1;
            w.requests = 4096;
        })
    };
    let (off, on) = (even(false), even(true));
    assert!(
        on.makespan_ns < off.makespan_ns,
        "even shards, one burst: places {} ns, none {} ns",
        on.makespan_ns,
        off.makespan_ns
    );
    // 90% of the requests on node 0: its 32 workers carry 3.6 times their
    // share; without places the other 96 take the excess, at +50%.
    let hot = |places| {
        run(&topo, CostModel::zero(), places, false, |w| {
            w.bursts = 1;
            w.requests = 4096;
            w.hot_pct = Some(90);
        })
    };
    let (off, on) = (hot(false), hot(true));
    assert!(
        on.makespan_ns > off.makespan_ns,
        "one hot shard: places {} ns, none {} ns",
        on.makespan_ns,
        off.makespan_ns
    );
}
