//! hwsched: a topology-aware, work-stealing async task runtime.
#![warn(missing_docs)]

mod error;
pub mod topology;

pub use error::BuildError;
pub use topology::{Level, LevelKind, Topology, TopologySource};
