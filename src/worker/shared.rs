//! The state every worker shares ([`Shared`], built by [`Shared::new`]
//! from the builder's options): in the worker's layer, below the API
//! (`runtime/`), which asks for it and never fills its fields, so the
//! dependency arrows run one way (DESIGN section 12). Below it, and never naming it: the task
//! layer, the blocking pool, and the driver (`io/`, `time/`, `signal.rs`),
//! whose handle it holds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::error::BuildError;
use crate::sched::load_map::LoadMap;
use crate::sched::park::Mailbox;
use crate::sched::queue::{Local, Stealer};
use crate::sched::shutdown::Graveyard;
use crate::sched::sleepers::Sleepers;
use crate::stats::WorkerCounters;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::task::{drop_task, Registry, Runnable};
use crate::topology::Topology;
use crate::tunables::Tunables;

/// What other threads see of one worker.
pub(crate) struct WorkerShared {
    pub(crate) mailbox: CachePadded<Mailbox<Runnable>>,
    pub(crate) stealer: Stealer<Runnable>,
    /// The worker's LIFO slot: its next task, which another worker takes
    /// when the owner does not get to it (src/sched/README.md, "The LIFO
    /// slot").
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
    /// poll ran long (src/sched/README.md, "Long polls"); the worker marks
    /// the task it was polling a hog when the poll returns.
    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    pub(crate) long_poll_taken: AtomicBool,
    /// The worker thread's CPU-time clock (`pthread_getcpuclockid`; -1
    /// until the thread set it, or if it has none), read by watchers
    /// (src/sched/README.md, "Long polls").
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
    pub(crate) sleepers: Sleepers,
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
    /// The runtime's clock, from its start (`timing::Clock`).
    pub(crate) clock: crate::timing::Clock,
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
    pub(crate) driver: std::sync::Arc<crate::time::TimerHandle>,
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
    /// The tokio bridge thread's slot for a task it polls itself
    /// (src/tokio_compat.rs, "Running a woken task on the bridge").
    #[cfg(feature = "tokio-compat")]
    pub(crate) bridge_slot: Option<Arc<crate::worker::bridge::Inline>>,
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
    /// Nanoseconds since the runtime started (one clock read).
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        self.clock.ns()
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
        // Relaxed: the flag is published by the notify that follows its
        // store (src/sched/README.md, "Shutdown", Orderings).
        self.shutdown.load(Ordering::Relaxed)
    }
}

/// What [`Shared::new`] builds the shared state from: the builder's
/// options, checked, and its topology.
pub(crate) struct SharedOptions {
    pub(crate) topology: Topology,
    pub(crate) tunables: Tunables,
    /// The worker threads' name, which the blocking threads take too.
    pub(crate) thread_name: String,
    pub(crate) stack_size: Option<usize>,
    pub(crate) max_blocking_threads: usize,
    pub(crate) keep_alive: Duration,
    pub(crate) blocking_affinity: bool,
    pub(crate) on_start: Option<crate::config::Hook>,
    pub(crate) on_stop: Option<crate::config::Hook>,
    pub(crate) poll_timing: bool,
    pub(crate) long_poll_ns: u64,
    #[cfg(feature = "io")]
    pub(crate) io: bool,
    #[cfg(feature = "io")]
    pub(crate) io_pollers: crate::io::IoPollers,
    #[cfg(feature = "trace")]
    pub(crate) trace: Option<usize>,
    #[cfg(feature = "tokio-compat")]
    pub(crate) tokio: Option<tokio::runtime::Handle>,
    #[cfg(feature = "tokio-compat")]
    pub(crate) bridge_slot: Option<Arc<crate::worker::bridge::Inline>>,
    /// Enters the runtime's context on a blocking thread (a guard that
    /// leaves it when dropped): `block_on`'s, from the API above.
    pub(crate) enter: fn(Arc<Shared>) -> Box<dyn std::any::Any>,
}

/// A worker's deque and batch queue, the owner's ends (for its thread).
pub(crate) type OwnQueues = (Local<Runnable>, Local<Runnable>);

impl Shared {
    /// The state every worker shares, and each worker's deque and batch
    /// queue (the owner's ends, for its thread); the workers are not
    /// started.
    pub(crate) fn new(o: SharedOptions) -> Result<(Arc<Shared>, Vec<OwnQueues>), BuildError> {
        let SharedOptions {
            topology,
            tunables,
            thread_name,
            stack_size,
            max_blocking_threads,
            keep_alive,
            blocking_affinity,
            on_start,
            on_stop,
            poll_timing,
            long_poll_ns,
            #[cfg(feature = "io")]
            io,
            #[cfg(feature = "io")]
            io_pollers,
            #[cfg(feature = "trace")]
                trace: trace_capacity,
            #[cfg(feature = "tokio-compat")]
            tokio,
            #[cfg(feature = "tokio-compat")]
            bridge_slot,
            enter,
        } = o;
        let n = topology.workers();

        let locals: Vec<Local<Runnable>> = (0..n).map(|_| Local::new()).collect();
        let batches: Vec<Local<Runnable>> = (0..n).map(|_| Local::new()).collect();
        let mut llc_spans: Vec<std::ops::Range<usize>> = Vec::new();
        let llc_hint: Vec<usize> = (0..n)
            .map(|w| {
                let s = topology.llc_span(w);
                match llc_spans.iter().position(|x| *x == s) {
                    Some(i) => i,
                    None => {
                        llc_spans.push(s);
                        llc_spans.len() - 1
                    }
                }
            })
            .collect();
        // Per worker, the index of its poller (Builder::io_pollers).
        #[cfg(feature = "io")]
        let poller_domain: Box<[usize]> = {
            let span_of = |w: usize| match io_pollers {
                crate::io::IoPollers::One => 0..n,
                crate::io::IoPollers::PerLlc => topology.llc_span(w),
                crate::io::IoPollers::PerNuma => topology.numa_span(w),
            };
            let mut seen: Vec<std::ops::Range<usize>> = Vec::new();
            (0..n)
                .map(|w| {
                    let s = span_of(w);
                    seen.iter().position(|x| *x == s).unwrap_or_else(|| {
                        seen.push(s);
                        seen.len() - 1
                    })
                })
                .collect()
        };
        // On a hybrid machine, the runs of each LLC's most capable workers.
        let capable: Box<[Box<[std::ops::Range<usize>]>]> = llc_spans
            .iter()
            .map(|span| crate::policy::search_order::capable_runs(&topology, span.clone()))
            .collect();
        let workers = (0..n)
            .map(|w| WorkerShared {
                mailbox: CachePadded::new(Mailbox::new()),
                stealer: locals[w].stealer(),
                batch: batches[w].stealer(),
                lifo: CachePadded::new(crate::sched::queue::Slot::new()),
                stats: CachePadded::new(WorkerCounters::default()),
                timing: CachePadded::new(crate::timing::WorkerTiming::default()),
                llc_hint: llc_hint[w],
                pinned: AtomicBool::new(false),
                long_poll_taken: AtomicBool::new(false),
                cpu_clock: std::sync::atomic::AtomicI64::new(-1),
            })
            .collect();
        let park_cost = match (tunables.park_cost, tunables.idle) {
            (Some(c), _) => c,
            (None, crate::IdleMode::Governed) => crate::sched::park::measure_park_cost(),
            (None, _) => Duration::ZERO,
        };
        let (masks, blocking_mask_of) = if blocking_affinity && topology.is_system() {
            crate::blocking::affinity_masks(&topology)
        } else {
            (Vec::new(), Vec::new())
        };
        let blocking_config = crate::blocking::BlockingConfig {
            max_threads: max_blocking_threads,
            keep_alive,
            stack_size,
            thread_name,
            on_start: on_start.clone(),
            on_stop: on_stop.clone(),
            masks,
        };
        let mut places = crate::place::Places::new(&topology);
        let (domains, queue_ids) =
            crate::sched::place_queue::DomainQueues::new(n, &places.all_spans());
        places.set_queues(&queue_ids);
        // Per worker, the OS index of its CPU (the I/O driver maps an
        // accepted socket's `SO_INCOMING_CPU` to a poller with it).
        #[cfg(feature = "io")]
        let cpus: Box<[usize]> = (0..n).map(|w| topology.place(w).os_index).collect();
        // The driver's descriptors, now: the first socket or timer must not
        // fail for want of one (io/mod.rs, "Opened by `build`").
        #[cfg(feature = "io")]
        let io_driver = if io {
            Some(crate::io::open_driver(&poller_domain).map_err(BuildError::IoDriver)?)
        } else {
            None
        };
        let start = Instant::now();
        #[cfg(feature = "trace")]
        let trace = {
            let at = (0..n).map(|w| places.current(w)).collect();
            let cap = trace_capacity.unwrap_or(crate::trace::DEFAULT_CAPACITY);
            let r = Arc::new(crate::trace::Recorder::new(at, start, cap));
            if trace_capacity.is_some() {
                r.start();
            }
            r
        };
        let shared = Arc::new_cyclic(|weak: &std::sync::Weak<Shared>| Shared {
            // Each blocking thread runs with this runtime as its context. A
            // Weak: the pool lives in `Shared`, so an Arc here would be a
            // cycle.
            blocking: crate::blocking::BlockingPool::new(blocking_config, {
                let weak = weak.clone();
                Arc::new(move || match weak.upgrade() {
                    Some(s) => enter(s),
                    None => Box::new(()),
                })
            }),
            blocking_mask_of,
            load: LoadMap::new(&topology),
            llc_idle_cores: llc_spans
                .iter()
                .map(|_| CachePadded::new(AtomicBool::new(false)))
                .collect(),
            topology,
            tunables,
            workers,
            shutdown: CachePadded::new(AtomicBool::new(false)),
            sleepers: Sleepers::new(n, &llc_spans),
            watch: crate::sched::watch::Watch::new(n, &llc_spans),
            capable,
            all: 0..n,
            burst_target: AtomicUsize::new(0),
            places,
            domains,
            registry: Registry::new(n),
            external: CachePadded::new(WorkerCounters::default()),
            park_cost_ns: AtomicU64::new(park_cost.as_nanos() as u64),
            clock: crate::timing::Clock::new(start),
            graveyard: crate::sched::shutdown::Graveyard::new(),
            starting: Latch::new(n),
            #[cfg(feature = "io")]
            driver: {
                // Workers asleep on their condvars move into the driver at
                // their next park: once it exists, notify them, so that one
                // sleeps in each poller now. A Weak, as for the pool.
                let owner = weak.as_ptr() as *const ();
                let weak = weak.clone();
                let on_create = Box::new(move || {
                    if let Some(s) = weak.upgrade() {
                        for w in s.workers.iter() {
                            let _ = w.mailbox.parker.notify();
                        }
                    }
                });
                let io = crate::io::IoHandle::new(io_driver, cpus, owner, on_create);
                Arc::new(crate::time::TimerHandle::new(Arc::new(io), start, n))
            },
            on_start,
            on_stop,
            poll_timing,
            long_poll_ns,
            #[cfg(feature = "trace")]
            trace,
            #[cfg(not(feature = "trace"))]
            trace: crate::trace::Recorder,
            #[cfg(feature = "tokio-compat")]
            tokio,
            #[cfg(feature = "tokio-compat")]
            bridge_slot,
        });
        Ok((shared, locals.into_iter().zip(batches).collect()))
    }
}
