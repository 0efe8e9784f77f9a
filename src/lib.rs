//! hwsched: a lock-free, topology-aware, work-stealing async task runtime
//! that schedules the way the Linux fair scheduler does, in userspace.
//!
//! - one worker thread per CPU, pinned, grouped into levels by the hwloc
//!   topology (SMT core, last-level cache, NUMA node, package, machine):
//!   [`topology`];
//! - an idle worker looks for work level by level, nearest first, and stops
//!   when the measured cost of looking exceeds how long it expects to stay
//!   idle: [`balance`];
//! - a woken task goes to an idle worker near where it ran or was woken:
//!   [`wake`];
//! - shared load counters that guide these choices are updated at most once
//!   per millisecond: [`load`];
//! - an idle worker spins or parks by predicted idle time against the
//!   measured cost of parking: [`governor`].
//!
//! ```
//! let rt = hwsched::Runtime::builder()
//!     .topology(hwsched::TopologySource::Synthetic("pack:2 l3:2 core:4 pu:2".into()))
//!     .build()?;
//! let answer = rt.block_on(async {
//!     let h = hwsched::spawn(async { 40 + 2 });
//!     h.await.unwrap()
//! });
//! assert_eq!(answer, 42);
//! println!("{}", rt.topology());
//! println!("{}", rt.stats());
//! # Ok::<(), hwsched::BuildError>(())
//! ```
#![warn(missing_docs)]

pub mod balance;
mod block_on;
mod error;
pub mod governor;
pub mod idle;
pub mod load;
pub mod park;
pub mod place;
pub mod queue;
mod runtime;
mod shared;
pub mod stats;
mod sync;
mod task;
pub mod topology;
mod tunables;
pub mod wake;
mod worker;

pub use error::BuildError;
pub use runtime::{spawn, worker_index, Builder, Runtime};
pub use stats::{Stats, WorkerStats};
pub use task::{yield_now, JoinError, JoinHandle, Panic, TaskMeta, YieldNow};
pub use topology::{Level, LevelKind, Topology, TopologySource};
pub use tunables::{IdleMode, SisMode, StealWalk, Tunables};
