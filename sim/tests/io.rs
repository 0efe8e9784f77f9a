//! The I/O workload and the simulated I/O driver (SIMULATION.md, "I/O: one
//! poller or one per LLC"): every request is served, the run is
//! deterministic, a poller is a serialized resource whose capacity caps
//! one poller and not one per LLC.

use hwsched::{Topology, TopologySource};
use hwsched_sim::workload::Io;
use hwsched_sim::{simulate, Config, CostModel, Pollers, Report};

fn topo(s: &str, workers: Option<usize>) -> Topology {
    Topology::new(&TopologySource::Synthetic(s.into()), workers).expect("synthetic topology")
}

/// 32 workers: 2 packages x 2 NUMA nodes x 2 LLCs x 4 cores (8 LLCs).
const NUMA: &str = "pack:2 numa:2 l3:2 core:4 pu:1";
/// 16 workers: 1 package x 4 LLCs x 4 cores.
const FOUR_LLCS: &str = "pack:1 l3:4 core:4 pu:1";

fn run(s: &str, pollers: Pollers, cost: CostModel, io: Io, seed: u64) -> Report {
    let mut cfg = Config::new(topo(s, None));
    cfg.pollers = pollers;
    cfg.cost = cost;
    cfg.seed = seed;
    simulate(cfg, Box::new(io))
}

#[test]
fn every_request_is_served_once_through_its_poller_and_the_run_is_deterministic() {
    for (s, llcs, nodes) in [
        (NUMA, 8, 4),
        (FOUR_LLCS, 4, 1),
        ("pack:1 l3:1 core:2 pu:1", 1, 1),
    ] {
        let n = topo(s, None).workers();
        for (pollers, expect) in [
            (Pollers::One, 1),
            (Pollers::PerLlc, llcs),
            (Pollers::PerNuma, nodes),
        ] {
            for load in [0.05, 0.5, 0.9] {
                let io = || Io::new(8 * n, Io::rate_for(10_000, n, load), 10_000, 2_000);
                let r = run(s, pollers, CostModel::epyc(), io(), 3);
                let c = r.io.expect("the workload made sockets: the driver exists");
                let what = format!("{s} {pollers:?} load {load}");
                assert_eq!(c.pollers, expect, "{what}");
                assert_eq!(r.ops, 2_000, "{what}: every request served:\n{r}");
                assert_eq!(r.unfinished, 0, "{what}");
                assert_eq!(
                    c.callbacks, 2_000,
                    "{what}: one readiness callback per request"
                );
                assert!(
                    c.events <= c.callbacks,
                    "{what}: an event per socket on the list"
                );
                assert!(c.events > 0 && c.turns_woken + c.turns_busy > 0, "{what}");
                assert!(
                    r.op_p50_ns <= r.op_p99_ns && r.op_p99_ns <= r.op_max_ns,
                    "{what}"
                );
                assert!(c.busy_max_ns <= r.makespan_ns + 1_000_000, "{what}");
                assert_eq!(
                    r.work_ns,
                    2_000 * 10_000,
                    "{what}: each request's work once"
                );
                if expect == 1 {
                    assert_eq!(c.rehomed, 0, "{what}: one poller, nowhere to move");
                }
                let again = run(s, pollers, CostModel::epyc(), io(), 3);
                assert_eq!(
                    r.to_string(),
                    again.to_string(),
                    "{what}: same seed, same bytes"
                );
            }
        }
    }
}

#[test]
fn with_free_costs_a_lone_request_runs_when_it_arrives() {
    // One worker asleep in the one poller, nothing costs anything, requests
    // far apart: each is taken by the poller's turn at its arrival and runs
    // at once.
    let mut cfg = Config::new(topo(FOUR_LLCS, Some(1)));
    cfg.cost = CostModel::zero();
    let r = simulate(cfg, Box::new(Io::new(4, 1_000.0, 1_000, 200)));
    assert_eq!(r.ops, 200);
    assert_eq!(
        r.op_max_ns, 0,
        "no cost, no queueing: arrival == running\n{r}"
    );
    let c = r.io.expect("driver");
    assert_eq!(
        c.sleeps_on_thread, 0,
        "the only worker always finds the poller free"
    );
    assert_eq!(c.events, 200);
    assert_eq!(
        c.poller_wakes, 200,
        "each request woke the worker in epoll_wait"
    );
}

#[test]
fn one_poller_is_capped_by_its_service_rate_and_one_per_llc_is_not() {
    // Only the poller costs anything: 1 us of `ep_poll_callback` per
    // request, serialized on its instance. One poller serves at most
    // 1 M requests/s; four (one per LLC) serve 3 M/s offered.
    let mut cost = CostModel::zero();
    cost.epoll_callback_ns = 1_000;
    let io = || Io::new(256, 3_000_000.0, 1_000, 30_000);
    let one = run(FOUR_LLCS, Pollers::One, cost.clone(), io(), 1);
    let llc = run(FOUR_LLCS, Pollers::PerLlc, cost, io(), 1);
    assert_eq!(one.ops, 30_000);
    assert_eq!(llc.ops, 30_000);
    assert!(
        one.throughput() < 1.02e6,
        "one poller above its capacity: {}",
        one.throughput()
    );
    let c = one.io.expect("driver");
    assert!(
        c.busy_max_ns * 100 >= one.makespan_ns * 95,
        "the one poller is saturated\n{one}"
    );
    assert!(
        llc.throughput() > 2.7e6,
        "four pollers should keep up with 3 M/s: {}",
        llc.throughput()
    );
    assert!(llc.op_p99_ns * 10 < one.op_p99_ns, "{}\n{}", llc, one);
}
