//! Machine topology: which workers exist, and how they group into levels.
//!
//! A [`Topology`] is built once from a [`TopologySource`] (hwloc discovery of
//! this machine, an hwloc synthetic description, or an lstopo XML export).
//! Workers are numbered in hwloc logical order over the chosen PUs, so every
//! topology object (core, cache, NUMA node, package) is a contiguous range of
//! worker ids: a span is a [`Range`](std::ops::Range), never a set.
//!
//! Each worker sees its [`Level`]s smallest first: SMT, LLC, NUMA, package,
//! machine, with degenerate levels (whose span equals the child's) removed,
//! as the kernel's `sd_degenerate()` does for scheduling domains.

mod discover;
mod domain;
mod pin;

pub use discover::{export_xml, TopologySource};
pub use domain::{Level, LevelKind, Topology, WorkerPlace};
pub use pin::pin_current_thread;
