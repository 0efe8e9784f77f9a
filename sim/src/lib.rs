//! hwsched-sim: a deterministic discrete-event simulator that runs
//! hwsched's production scheduling policies on any machine's topology, in
//! virtual time (the LinSched idea, for a userspace runtime).
//!
//! - [`sim`]: the engine, the simulated workers, and the mechanism around
//!   the policies (which production function each part mirrors is named
//!   there);
//! - [`cost`]: the cost model, every parameter named with its source;
//! - [`workload`]: what the tasks do (hackbench, spawn bursts, ping-pong,
//!   light load, fork-join, a server on sockets through the I/O driver, a
//!   service sharded by NUMA node whose tasks have a home node);
//! - [`report`]: what a run reports.
//!
//! ```
//! use hwsched::{Topology, TopologySource};
//! use hwsched_sim::{simulate, Config, workload::Burst};
//! let topo = Topology::new(&TopologySource::Synthetic("pack:1 l3:2 core:2 pu:1".into()), None)?;
//! let report = simulate(Config::new(topo), Box::new(Burst::new(1, 40, 10_000, 0, 0)));
//! assert_eq!(report.ops, 40);
//! assert_eq!(report.unfinished, 0);
//! # Ok::<(), hwsched::BuildError>(())
//! ```
#![warn(missing_docs)]

pub mod cost;
pub mod report;
pub mod rng;
pub mod sim;
pub mod workload;

pub use cost::{CostModel, Tier};
pub use report::Report;
pub use sim::{simulate, Config, IoCounters, Policy, Pollers};
