//! hwsched's I/O driver: edge-triggered readiness on mio, in the park path.
//!
//! # Readiness
//!
//! A socket registers once, for read and write, edge-triggered
//! (`Registration`); its readiness is cached in a `ScheduledIo` (bits
//! and a tick), so a task pays neither an `epoll_ctl` per wait nor a read
//! before it waits: a read runs only when the cache says readable, and a
//! `WouldBlock` (or a short read) clears exactly the readiness it saw
//! (`scheduled_io.rs`).
//!
//! # The hand-off: who sleeps in the poller
//!
//! The driver has one or more pollers ([`IoPollers`]); each is an epoll
//! instance behind a try-lock, with an eventfd as its waker. A worker that
//! goes to sleep (idle step 5) takes a free poller, its own domain's first,
//! and waits in `epoll_wait` with its next timer deadline as the timeout,
//! the poller's waker in its parker's slot; every poller being taken, it
//! parks its thread instead. It dispatches the events on its own thread,
//! its waker first taken back, so that a wake it makes on itself costs no
//! eventfd write. The steps and why no wake is lost: src/sched/README.md,
//! "The poller hand-off"; written once in `poller_sleep.rs`
//! (`PollerSleep`), generic over the poller, so that the loom models
//! (`loom-tests/tests/driver.rs`) drive them with a mock poller and the
//! runtime with mio's.
//!
//! # A batch stays local
//!
//! The wakes of one poller turn (and of the timers that fire after it) stay
//! on the worker that polled, without wake placement per task: the last
//! in its LIFO slot, up to `BATCH_LOCAL` (16) more in a batch queue private
//! to it, the rest in its stealable deque (`Core`'s batch mode in
//! worker/schedule.rs, `Core::push_batch`). If the worker was asleep, the first
//! such wake takes it out of the parked set (it runs the batch). After the
//! batch the worker makes one decision: if its deque holds work, the
//! pusher's check of the wake protocol runs once: a parked worker is woken
//! to search only if nobody searches (tokio's `should_notify_others`). The
//! private queue is work conservation's one other exception beside the LIFO
//! slot, and a bounded one: the watch over private batches (`src/sched/watch.rs`,
//! the kernel's tick-driven idle balance in userspace) lets up to two
//! workers that sleep while I/O is active watch: sleep at most a tick (from 2 x
//! `migration_cost`, backing off to 16 ms) and then take the batches, LIFO
//! slot and private queue, of other workers whose oldest private task
//! waited longer than `migration_cost` (the kernel's cache-hot window,
//! 500 us). The watchers are counted: a batch that leaves tasks while
//! nobody watches wakes a parked worker to watch, and the last watcher to
//! leave for work calls another when private work is about. Going back to
//! sleep, a watcher also takes a poller nobody holds, so readiness that
//! came after the owner's turn is polled too. `Stats` counts batches,
//! their tasks, the wakes after them, the tasks a watcher took, and the
//! workers woken to watch.

//! # Busy workers
//!
//! A worker that keeps running looks at its poller without blocking every
//! [`EVENT_INTERVAL`] tasks (if no other worker holds it), fires its due
//! timers, and wakes the tasks whose cooperative budget ran out
//! (`coop.rs`). So readiness is seen while every worker is busy.
//!
//! # Opened by `build`, used from first use
//!
//! `Builder::build` opens the driver's descriptors (per poller: the epoll
//! instance, its registry's duplicate and the eventfd, 3 in all; one poller
//! by default) or returns `BuildError::IoDriver`: so the first socket or
//! timer of a runtime never fails, nor panics, for want of a descriptor
//! (the process may be out of them by then; tokio opens its driver with
//! the runtime too). That is the whole cost of the feature for a program
//! that does no I/O: until the program first registers a socket or a timer
//! with this runtime, nobody sleeps in the poller: the workers park on
//! their condvars, as without the feature. The first use notifies the
//! workers, which sleep in the poller from their next park on.
//!
//! # Shutdown
//!
//! The runtime's shutdown, once its workers are joined (before it waits
//! for the running blocking closures), shuts the driver
//! (`time::TimerHandle::shutdown`): new sockets and timers of the runtime are
//! refused, every registration's waiters are woken and see an error
//! (`ScheduledIo::shutdown`), and every timer left is shut and its task
//! woken, whose poll panics. So a blocking closure, another runtime or a
//! plain thread waiting on this runtime's sockets or timers returns; none
//! waits on a poller that nobody will turn again.
//!
//! # Below the scheduler
//!
//! The driver is three layers, each over the one below: signals
//! (`signal.rs`), timers (`time/`, whose `time::TimerHandle` holds this
//! layer's), and this one, whose `IoHandle` (`handle.rs`) holds the pollers.
//! The runtime's shared state holds the handles; a socket's registration
//! and a registered timer keep theirs. None of them names the shared state
//! or the worker: the worker calls the driver (its sleep, `poller_sleep.rs`; its
//! looks while busy), never the other way. What the driver needs of the
//! scheduler comes through the thread-local context (`context.rs`: the
//! current worker's index, this thread's driver), through the callback the
//! runtime gives `IoHandle` (notify the workers once the driver exists),
//! and through the tasks' wakers, which the worker's batch mode keeps on
//! it. The signal pipe's events reach the signal layer through a function
//! it installs (`on_signal_token`).

pub(crate) mod coop;
mod driver;
mod handle;
// The worker's side of the hand-off, generic over the poller (mio's here,
// a mock in the loom model `loom-tests/tests/driver.rs`), and the readiness
// cache: public under `cfg(loom)` so the models drive the production code.
#[cfg(loom)]
pub mod poller_sleep;
#[cfg(not(loom))]
pub(crate) mod poller_sleep;
mod registration;
#[cfg(loom)]
pub mod scheduled_io;
#[cfg(not(loom))]
mod scheduled_io;

pub use driver::IoPollers;
pub(crate) use driver::{on_signal_token, PollState, Poller, TOKEN_SIGNAL};
pub(crate) use handle::{open_driver, IoHandle};
pub(crate) use registration::{no_runtime, PollEvented, Registration};
pub(crate) use scheduled_io::Direction;
pub use scheduled_io::Ready;

/// Tasks between two non-blocking looks at the poller by a busy worker
/// (tokio's `event_interval`, 61: a prime).
pub const EVENT_INTERVAL: u32 = 61;
