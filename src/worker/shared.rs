//! The state every worker shares: below the API (`runtime/mod.rs`,
//! `runtime/handle.rs`) and the mechanism (`worker/`, `worker/schedule.rs`) that use it,
//! so the dependency arrows run one way (DESIGN section 12). Below it, and
//! never naming it: the task layer, the blocking pool, and the driver
//! (`io/`, `time/`, `signal.rs`), whose handle it holds.

use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::policy::load::LoadMap;
use crate::sched::park::Mailbox;
use crate::sched::queue::Stealer;
use crate::sched::shutdown::Graveyard;
use crate::sched::sleepers::Sleepers;
use crate::stats::{Stats, WorkerCounters};
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::task::{drop_task, Registry, Runnable};
use crate::topology::Topology;
use crate::tunables::Tunables;

/// What other threads see of one worker.
pub(crate) struct WorkerShared {
    pub(crate) mailbox: CachePadded<Mailbox<Runnable>>,
    pub(crate) stealer: Stealer<Runnable>,
    /// The worker's LIFO slot: its next task, which another worker takes
    /// when the owner does not get to it (sched/sleepers.rs, "The LIFO slot").
    pub(crate) lifo: CachePadded<crate::sched::queue::Slot<Runnable>>,
    /// The worker's private batch queue, which only a watcher takes from,
    /// and only once stale (sched/watch.rs).
    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    pub(crate) batch: Stealer<Runnable>,
    pub(crate) stats: CachePadded<WorkerCounters>,
    /// Poll timing, when on (timing.rs).
    pub(crate) timing: CachePadded<crate::timing::WorkerTiming>,
    /// Index into `Shared::llc_idle_cores` of this worker's LLC.
    pub(crate) llc_hint: usize,
    pub(crate) pinned: AtomicBool,
    /// Set by a watcher that took this worker's private work because its
    /// poll ran long (sched/watch.rs, "Long polls"); the worker marks the task it
    /// was polling a hog when the poll returns.
    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    pub(crate) long_poll_taken: AtomicBool,
    /// The worker thread's CPU-time clock (`pthread_getcpuclockid`; -1
    /// until the thread set it, or if it has none), read by watchers
    /// (sched/watch.rs, "Long polls").
    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    pub(crate) cpu_clock: std::sync::atomic::AtomicI64,
}

/// State shared by the runtime handle, its workers and every task's
/// schedule function.
pub(crate) struct Shared {
    pub(crate) topology: Topology,
    pub(crate) tunables: Tunables,
    pub(crate) workers: Box<[WorkerShared]>,
    pub(crate) load: LoadMap,
    /// Per LLC: the kernel's `sd_llc_shared->has_idle_cores` hint.
    pub(crate) llc_idle_cores: Box<[CachePadded<AtomicBool>]>,
    pub(crate) shutdown: CachePadded<AtomicBool>,
    /// The wake protocol's shared state: searching count, parked, idle
    /// and queued sets (see sched/sleepers.rs).
    pub(crate) idle: Sleepers,
    /// The watch over private batch queues (sched/watch.rs).
    pub(crate) watch: crate::sched::watch::Watch,
    /// Every worker: `0..workers`.
    pub(crate) all: std::ops::Range<usize>,
    /// Per LLC (indexed by `WorkerShared::llc_hint`), on a machine whose
    /// workers differ in capacity: the runs of that LLC's workers with its
    /// highest capacity, searched first when a parked worker is woken to
    /// search (worker/mod.rs, `wake_spans`); empty on symmetric machines.
    pub(crate) capable: Box<[Box<[std::ops::Range<usize>]>]>,
    /// The worker the last external spawn woke or chose: where a burst of
    /// external spawns goes while that wake is in flight (worker/mod.rs,
    /// `place_external`).
    pub(crate) burst_target: AtomicUsize,
    pub(crate) registry: Registry,
    /// The domains users name in a `Place`, and each worker's.
    pub(crate) places: crate::place::Places,
    /// The place queues of the domains (sched/place_queue.rs).
    pub(crate) domains: crate::sched::place_queue::DomainQueues<Runnable>,
    pub(crate) external: CachePadded<WorkerCounters>,
    pub(crate) park_cost_ns: AtomicU64,
    pub(crate) start: Instant,
    /// Tasks to drop after shutdown, queued instead of dropped where they
    /// were found (see [`Shared::bury`]).
    pub(crate) graveyard: Graveyard<Runnable>,
    /// Workers that have not yet started (and tried to pin): `build` waits
    /// for zero, so `pinned_workers()` is exact from its first call.
    pub(crate) starting: Latch,
    /// The driver's handle: the timers' state over the I/O driver's handle
    /// (`driver.io`, whose pollers are created on first use). Below this
    /// state: the driver never names it (io/handle.rs).
    #[cfg(feature = "io")]
    pub(crate) driver: std::sync::Arc<crate::time::Handle>,
    /// The pool behind `spawn_blocking`.
    pub(crate) blocking: crate::blocking::BlockingPool,
    /// Per worker, its blocking CPU set (an index into the pool's masks);
    /// empty when blocking affinity is off.
    pub(crate) blocking_mask_of: Vec<usize>,
    /// Thread hooks (`Builder::on_thread_start` / `on_thread_stop`).
    pub(crate) on_start: Option<crate::config::Hook>,
    pub(crate) on_stop: Option<crate::config::Hook>,
    /// Whether polls and wakes are timed (timing.rs;
    /// `Builder::poll_timing`).
    pub(crate) poll_timing: bool,
    /// Polls longer than this many ns are long polls (timing.rs).
    pub(crate) long_poll_ns: u64,
    /// The scheduler's trace (trace/mod.rs): with the `trace` feature, the
    /// recorder (shared with every `Tracer`); without, zero-sized.
    #[cfg(feature = "trace")]
    pub(crate) trace: std::sync::Arc<crate::trace::Recorder>,
    #[cfg(not(feature = "trace"))]
    pub(crate) trace: crate::trace::Recorder,
    /// The tokio bridge's handle (`Builder::tokio_compat`), which
    /// `block_on` and the shutdown enter.
    #[cfg(feature = "tokio-compat")]
    pub(crate) tokio: Option<tokio::runtime::Handle>,
}

/// A count-down latch (start-up only: not a scheduling protocol, so plain
/// `std` primitives, outside the loom shim).
pub(crate) struct Latch {
    left: std::sync::Mutex<usize>,
    cv: std::sync::Condvar,
}

impl Latch {
    pub(crate) fn new(n: usize) -> Self {
        Latch {
            left: std::sync::Mutex::new(n),
            cv: std::sync::Condvar::new(),
        }
    }

    /// One fewer to wait for.
    pub(crate) fn count_down(&self) {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        *left = left.saturating_sub(1);
        if *left == 0 {
            self.cv.notify_all();
        }
    }

    /// Waits until the count reaches `0`.
    pub(crate) fn wait(&self) {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        while *left > 0 {
            left = self.cv.wait(left).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Shared {
    /// Nanoseconds since the runtime started (one `Instant::now()`).
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Disposes of a task found after shutdown started
    /// ([`Graveyard::bury`]).
    pub(crate) fn bury(&self, r: Runnable) {
        self.graveyard.bury(r, drop_task);
    }

    /// The index of this thread's worker, if it is one of this runtime's
    /// workers (the thread-local context, `context.rs`).
    #[inline]
    pub(crate) fn current_worker(&self) -> Option<usize> {
        crate::context::with_here(|h| {
            h.filter(|h| std::ptr::eq(h.rt, self as *const Shared as *const ()))
                .map(|h| h.index)
        })
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        // Relaxed: see sched/park.rs, "shutdown": the flag is published by the
        // notify that follows its store.
        self.shutdown.load(Ordering::Relaxed)
    }

    /// Every worker's logged long polls, oldest first (timing.rs).
    pub(crate) fn long_polls(&self) -> Vec<crate::timing::LongPoll> {
        let mut all: Vec<_> = self
            .workers
            .iter()
            .flat_map(|w| w.timing.log.lock().iter().cloned().collect::<Vec<_>>())
            .collect();
        all.sort_by_key(|p| p.at);
        all
    }

    pub(crate) fn stats(&self) -> Stats {
        let workers: Vec<_> = self.workers.iter().map(|w| w.stats.snapshot()).collect();
        let external = self.external.snapshot();
        let spawned = workers.iter().map(|w| w.spawned).sum::<u64>() + external.spawned;
        let retired = workers.iter().map(|w| w.retired).sum::<u64>()
            + self.registry.retired_elsewhere.load(Ordering::Relaxed);
        #[allow(unused_mut)]
        let mut stats = Stats {
            workers,
            external,
            level_names: self
                .topology
                .levels(0)
                .iter()
                .map(|l| l.kind.name())
                .collect(),
            worker_level_names: {
                let names: Vec<Vec<&'static str>> = (0..self.topology.workers())
                    .map(|w| {
                        self.topology
                            .levels(w)
                            .iter()
                            .map(|l| l.kind.name())
                            .collect()
                    })
                    .collect();
                if names.windows(2).all(|p| p[0] == p[1]) {
                    Vec::new()
                } else {
                    names
                }
            },
            park_cost: Duration::from_nanos(self.park_cost_ns.load(Ordering::Relaxed)),
            spawned,
            retired,
            asleep: self.workers.len().saturating_sub(self.idle.counts().awake),
            searching: self.idle.counts().searching,
            blocking_threads: self.blocking.threads(),
            blocking_idle: self.blocking.idle_threads(),
            io_driven: false,
            io_pollers: 0,
            io_events: 0,
            io_waker_writes: 0,
            io_registered: 0,
            io_rehomed: 0,
            timing: if self.poll_timing {
                self.workers.iter().map(|w| w.timing.snapshot()).collect()
            } else {
                Vec::new()
            },
        };
        #[cfg(feature = "io")]
        if let Some(d) = self.driver.io.get() {
            stats.io_driven = true;
            stats.io_pollers = d.pollers.len();
            for p in d.pollers.iter() {
                let c = &p.counters;
                // Relaxed: statistics.
                stats.io_events += c.events.load(std::sync::atomic::Ordering::Relaxed);
                stats.io_waker_writes += c.waker_writes.load(std::sync::atomic::Ordering::Relaxed);
                stats.io_registered += c.registered.load(std::sync::atomic::Ordering::Relaxed);
                stats.io_rehomed += c.rehomed.load(std::sync::atomic::Ordering::Relaxed);
            }
        }
        stats
    }
}

thread_local! {
    /// The runtime whose `block_on` runs on this thread, if any.
    pub(crate) static BLOCK_ON: std::cell::RefCell<Option<std::sync::Arc<Shared>>> =
        const { std::cell::RefCell::new(None) };
}

/// The runtime of this thread's context: its worker's, or its `block_on`'s.
pub(crate) fn current() -> Option<std::sync::Arc<Shared>> {
    let from_worker = crate::context::with_here(|h| {
        h.map(|h| {
            let p = h.rt as *const Shared;
            // SAFETY: `rt` is `Arc::as_ptr` of the runtime whose worker runs
            // on this thread, and that worker's context holds an `Arc` of it
            // while `h` is valid: the count is at least one, so taking one
            // more and building an `Arc` from the pointer is sound.
            unsafe {
                std::sync::Arc::increment_strong_count(p);
                std::sync::Arc::from_raw(p)
            }
        })
    });
    from_worker.or_else(|| BLOCK_ON.with(|b| b.borrow().clone()))
}
