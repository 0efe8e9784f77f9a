//! hwsched: a lock-free, topology-aware, work-stealing async task runtime
//! that schedules the way the Linux fair scheduler does, in userspace.
//!
//! - one worker thread per CPU, pinned, grouped into levels by the hwloc
//!   topology (SMT core, last-level cache, NUMA node, package, machine):
//!   [`topology`];
//! - an idle worker looks for work level by level, nearest first, and stops
//!   when the measured cost of looking exceeds how long it expects to stay
//!   idle;
//! - a woken task goes to an idle worker near where it ran or was woken;
//! - shared load counters that guide these choices are updated at most once
//!   per millisecond;
//! - an idle worker spins or parks by predicted idle time against the
//!   measured cost of parking;
//! - and no worker sleeps while a runnable task waits in a queue it could
//!   take (work conservation).
//!
//! The runtime is [`Runtime`] (built by [`Builder`]), [`Handle`],
//! [`spawn`], [`spawn_blocking`], [`JoinHandle`] and [`JoinSet`]; the
//! heuristics are also a public API of pure functions in [`policy`].
//!
//! A program or test whose runtime needs only a worker count or a
//! topology can let an attribute build it (the `macros` cargo feature, on
//! by default): [`macro@main`] turns `async fn main` into a `main` that
//! builds a runtime and runs the body with [`Runtime::block_on`];
//! [`macro@test`] does the same for a `#[test]`, with a fresh runtime per
//! test. Options: `worker_threads = N`, `topology = "..."` (an hwloc
//! synthetic description, or a path ending in `.xml`) and `crate = "path"`.
//! A runtime that cannot be built is a panic with the [`BuildError`]'s
//! message; the options themselves are checked when the code is compiled.
//!
//! ```
//! #[hwsched::main(worker_threads = 2)]
//! async fn main() -> Result<(), hwsched::JoinError> {
//!     let answer = hwsched::spawn(async { 40 + 2 }).await?;
//!     assert_eq!(answer, 42);
//!     Ok(())
//! }
//! ```
//!
//! Tasks can be placed: [`spawn_on`] with a [`Place`] pins a task to a
//! worker (polled only there, before and after every wake; a place the
//! runtime cannot honour is a [`PlaceError`] and nothing is spawned),
//! [`spawn_local`] runs a `!Send` future on the calling worker (or on
//! `block_on`'s thread, which then runs it), and
//! [`current_place`] says which worker, core, LLC, NUMA node and package
//! the caller runs on. The README's "Placing tasks" says more.
//!
//! ```
//! use hwsched::{Place, PlaceError};
//! use std::rc::Rc;
//!
//! #[hwsched::main(topology = "pack:2 l3:2 core:4 pu:2")]
//! async fn main() {
//!     let h = hwsched::spawn_on(Place::Worker(5), async {
//!         let here = hwsched::current_place().unwrap();
//!         (here.worker, here.core, here.llc, here.numa, here.package)
//!     })
//!     .unwrap();
//!     assert_eq!(h.await.unwrap(), (5, 2, 0, 0, 0));
//!     let err = hwsched::spawn_on(Place::Worker(64), async {}).unwrap_err();
//!     assert!(matches!(err, PlaceError::WorkerOutOfRange { worker: 64, workers: 32 }));
//!     let n = hwsched::spawn(async {
//!         hwsched::spawn_local(async {
//!             let rc = Rc::new(41); // held across an await: not Send
//!             hwsched::yield_now().await;
//!             *rc + 1
//!         })
//!         .await
//!         .unwrap()
//!     });
//!     assert_eq!(n.await.unwrap(), 42);
//! }
//! ```
//!
//! With the `io` cargo feature, hwsched has its own I/O driver ([`io`]):
//! sockets in [`net`] (futures-io's traits, and hyper's with the `hyper`
//! feature), timers in [`time`], signals in [`signal`]; idle workers sleep
//! in the poller, and the tasks a poller turn wakes stay on the worker that
//! polled. A program that never uses them creates no poller. The README's
//! "I/O, timers and signals" says more.
//!
//! Coming from tokio (the README's "Coming from tokio"): with the `hyper`
//! feature, `hwsched::hyper` has hyper's `Executor` and `Timer` on
//! hwsched, and with `server` its `serve` runs an axum `Router` or any
//! tower or hyper service over HTTP/1 and HTTP/2 on hwsched's sockets; the
//! `tokio` feature puts tokio's `AsyncRead` / `AsyncWrite` on them; and
//! `tokio-compat` adds `Builder::tokio_compat`, which drives a tokio
//! reactor on one thread of the runtime so that `tokio::time`,
//! `tokio::net` and `tokio::spawn` work in hwsched tasks.
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

mod blocking;
mod config;
mod context;
mod error;
#[cfg(feature = "hyper")]
pub mod hyper;
#[cfg(feature = "io")]
pub mod io;
pub mod metrics;
#[cfg(feature = "io")]
pub mod net;
mod place;
pub mod policy;
#[cfg(feature = "io")]
pub mod signal;
mod stats;
mod sync;
#[cfg(feature = "io")]
pub mod time;
pub mod timing;
#[cfg(feature = "tokio-compat")]
mod tokio_compat;
pub mod topology;
#[cfg(feature = "trace")]
pub mod trace;
#[cfg(not(feature = "trace"))]
mod trace;
mod tunables;

// The folders whose protocol types the loom models in `loom-tests/` drive:
// private, but public under `cfg(loom)` so the models check the production
// code.
#[cfg(loom)]
pub mod runtime;
#[cfg(not(loom))]
mod runtime;
#[cfg(loom)]
pub mod sched;
#[cfg(not(loom))]
mod sched;
#[cfg(loom)]
pub mod task;
#[cfg(not(loom))]
mod task;
#[cfg(loom)]
pub mod worker;
#[cfg(not(loom))]
mod worker;

pub use error::BuildError;
pub use place::{CurrentPlace, Place, PlaceError};
pub use runtime::handle::Handle;
pub use runtime::join_set::JoinSet;
pub use runtime::{
    current_place, spawn, spawn_blocking, spawn_local, spawn_on, worker_index, Builder, Runtime,
};
pub use stats::{Stats, WorkerStats};
pub use task::{yield_now, AbortHandle, JoinError, JoinHandle, Panic, PanicPayload, YieldNow};
pub use topology::{Level, LevelKind, NumaTopology, Span, Topology, TopologySource};
pub use tunables::{IdleMode, SisMode, StealWalk, Tunables};

// The attributes; their docs are in macros/src/lib.rs.
#[cfg(feature = "macros")]
pub use hwsched_macros::{main, test};
