//! Machine topology: which workers exist, and how they group into levels.
//!
//! A [`Topology`] is built once from a [`TopologySource`] (hwloc discovery of
//! this machine, an hwloc synthetic description, or an lstopo XML export).
//! Workers are numbered in hwloc logical order over the chosen PUs, so every
//! topology object (core, cache, NUMA node, package) is a contiguous range of
//! worker ids. A level's [`Span`] is such a range where the machine allows,
//! and a bitmap where the kernel's NUMA spans overlap: the NUMA levels are
//! built as the kernel's `sched_init_numa` builds them, one per distinct
//! distance of the NUMA latency matrix, and the nodes within a distance of
//! one node need not be neighbours in worker order.
//!
//! Each worker sees its [`Level`]s smallest first: SMT, cluster, LLC, NUMA,
//! package, NUMA groups, machine (see [`LevelKind`] for when a NUMA node
//! holds packages), with degenerate levels (whose span equals the child's)
//! removed, as the kernel's `sd_degenerate()` does for scheduling domains.
//! Each worker also has a capacity ([`CAPACITY_SCALE`] on a machine with one
//! kind of core; less on the little cores of a hybrid machine).
//!
//! Synthetic descriptions and XML files are checked before hwloc sees them
//! (hwloc trusts its input: some inputs make it crash, abort or never
//! return), against the limits [`MAX_PUS`], [`MAX_SYNTHETIC_OBJECTS`],
//! [`MAX_XML_BYTES`], [`MAX_XML_OBJECTS`] and [`MAX_XML_OS_INDEX`]; see
//! [`TopologySource`].

mod discover;
mod domain;
mod pin;
mod span;
mod xml;

pub use discover::{
    export_xml, TopologySource, MAX_PUS, MAX_SYNTHETIC_OBJECTS, MAX_XML_BYTES, MAX_XML_OBJECTS,
    MAX_XML_OS_INDEX,
};
pub use domain::{
    Level, LevelKind, NumaTopology, Topology, WorkerPlace, CAPACITY_SCALE, MAX_NUMA_GROUP_LEVELS,
};
pub use pin::{pin_current_thread, MAX_PIN_CPU};
pub use span::Span;
