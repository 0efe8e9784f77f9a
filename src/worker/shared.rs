//! The state every worker shares: below the API (`runtime/mod.rs`,
//! `runtime/handle.rs`) and the mechanism (`worker/`, `worker/schedule.rs`) that use it,
//! so the dependency arrows run one way (DESIGN section 12). Below it, and
//! never naming it: the task layer, the blocking pool, and the driver
//! (`io/`, `time/`, `signal.rs`), whose handle it holds.

use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::policy::load::LoadMap;
use crate::sched::park::Mailbox;
use crate::sched::park::Parker;
use crate::sched::queue::{Inbox, Steal, Stealer};
use crate::sched::sleepers::Sleepers;
use crate::stats::{Stats, WorkerCounters};
use crate::sync::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
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

/// Tasks found after shutdown started, queued to be dropped by the shutdown
/// sequence rather than where they were found.
///
/// A task found after shutdown is not dropped there: that may be inside a
/// waker call, and the waker's caller may hold a lock that the task's
/// destructor needs (dropping an `async_channel::Sender` wakes receivers
/// from inside event-listener's lock; dropping a receiver's future there
/// would take that lock again). The shutdown sequence ([`final_drain`])
/// drops buried tasks outside any wake. Once it has finished
/// ([`Graveyard::close`]), nobody else will: a burial then drops at once.
///
/// Burial and the last reap race store-buffering style:
///
/// | `bury` | `close` |
/// | --- | --- |
/// | push onto the graveyard | `reaper_done = true` |
/// | `fence(SeqCst)` | `fence(SeqCst)` |
/// | read `reaper_done`; if set, reap | reap |
///
/// Whichever fence comes second, its side sees the other's store: the
/// push is reaped by `close`, or the burier reaps it itself (possibly both
/// reap; each task is taken once). Model-checked in
/// `loom-tests/tests/shutdown.rs`.
pub struct Graveyard<T> {
    queue: Inbox<T>,
    /// Set when the shutdown sequence has reaped for the last time.
    reaper_done: AtomicBool,
}

impl<T> Default for Graveyard<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Graveyard<T> {
    /// An empty graveyard, still reaped by the shutdown sequence.
    pub fn new() -> Self {
        Graveyard {
            queue: Inbox::new(),
            reaper_done: AtomicBool::new(false),
        }
    }

    /// Buries `t`; drops it (with `drop`) at once, and whatever else is
    /// buried, if the shutdown sequence has already finished reaping.
    pub fn bury(&self, t: T, drop: impl FnMut(T)) {
        self.queue.push(t);
        // SeqCst fence: pairs with the one in `close` (store-buffering):
        // either `close`'s reap (after its fence) sees this push, or this
        // load sees `reaper_done` and we reap (type docs).
        fence(Ordering::SeqCst);
        if self.reaper_done.load(Ordering::Relaxed) {
            self.reap(drop);
        }
    }

    /// Drops every buried task with `drop`; returns how many.
    pub fn reap(&self, drop: impl FnMut(T)) -> usize {
        drain_queue(&self.queue, drop)
    }

    /// The shutdown sequence's last reap: from now on a burial drops its
    /// task itself. Returns how many tasks it dropped.
    pub fn close(&self, drop: impl FnMut(T)) -> usize {
        debug_assert!(
            !self.reaper_done.load(Ordering::Relaxed),
            "the graveyard is closed once"
        );
        self.reaper_done.store(true, Ordering::Relaxed);
        // SeqCst fence: pairs with the one in `bury` (see there).
        fence(Ordering::SeqCst);
        self.reap(drop)
    }

    /// Whether nothing is buried (a snapshot).
    // Used by the loom models.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// Takes everything out of `q`, handing each item to `f`; returns how many.
pub fn drain_queue<T>(q: &Inbox<T>, mut f: impl FnMut(T)) -> usize {
    let mut n = 0;
    loop {
        match q.steal() {
            Steal::Success(t) => {
                f(t);
                n += 1;
            }
            Steal::Empty => return n,
            Steal::Retry => continue,
        }
    }
}

/// Drops everything in the inboxes `mailboxes` with `drop` (never call
/// this inside a wake: see [`Shared::bury`]); returns how many tasks it
/// dropped.
pub fn drain_inboxes<'a, T: 'a>(
    mailboxes: impl IntoIterator<Item = &'a Mailbox<T>>,
    mut drop: impl FnMut(T),
) -> usize {
    mailboxes
        .into_iter()
        .map(|m| drain_queue(&m.inbox, &mut drop) + m.drain_pinned(&mut drop))
        .sum()
}

/// The start of the shutdown sequence (step 1 of
/// [`shutdown::shutdown`](crate::sched::shutdown::shutdown)): sets the shutdown
/// flag, then notifies every worker's parker so that each wakes, sees the
/// flag and leaves its loop.
pub fn announce_shutdown<'a>(shutdown: &AtomicBool, parkers: impl IntoIterator<Item = &'a Parker>) {
    // Relaxed: published to each worker (and to any deliverer) by the
    // parker RMW that follows; see sched/park.rs, "shutdown".
    shutdown.store(true, Ordering::Relaxed);
    for p in parkers {
        let _ = p.notify();
    }
}

/// The end of the shutdown sequence (step 4 of
/// [`shutdown::shutdown`](crate::sched::shutdown::shutdown)), once the workers
/// have left their loops. In this order:
///
/// 1. **Cancel what is pending**: drop what is still queued in the inboxes
///    (`drain_inboxes`, which returns how many it dropped), wake every task
///    that is pending on a waker (`wake_waiting`: its schedule sees the
///    shutdown and buries it), then reap the graveyard and drain the
///    inboxes until both are empty (dropping a task may wake others: a
///    dropped channel sender wakes its receivers, which are buried in
///    turn).
/// 2. **Wait for what runs outside the workers** (`wait_running`: the
///    blocking pool's closures, up to the shutdown's deadline). A closure
///    that waits on a task (a channel whose sender a task holds, a
///    `JoinHandle`) has seen it cancelled in step 1 and returns; waiting
///    first would wait on it forever, since the task it waits on would
///    only be dropped after the wait.
/// 3. Reap and drain again until both are empty (tasks that the closures'
///    wakes buried during step 2), and close the graveyard
///    ([`Graveyard::close`]): from then on a burial drops its task itself.
///
/// Never call it inside a wake. Model-checked, with a blocking closure
/// waiting on a pending task, in `loom-tests/tests/shutdown.rs`.
pub fn final_drain<T>(
    graveyard: &Graveyard<T>,
    mut drain_inboxes: impl FnMut() -> usize,
    wake_waiting: impl FnOnce(),
    wait_running: impl FnOnce(),
    mut drop: impl FnMut(T),
) {
    // What was queued when the workers left. Not needed for the count
    // (each pass of the loop below drains the inboxes too, and these tasks
    // are not pending on a waker, so the wake-up does not touch them): it
    // drops them before the wake-up's burials.
    drain_inboxes();
    wake_waiting();
    reap_until_empty(graveyard, &mut drain_inboxes, &mut drop);
    wait_running();
    reap_until_empty(graveyard, &mut drain_inboxes, &mut drop);
    graveyard.close(drop);
}

/// Reaps `graveyard` and drains the inboxes until a pass finds nothing in
/// either.
///
/// One pass does for a cascade of drops in the graveyard: a reap steals
/// until the graveyard is empty, so what its drops bury meanwhile is taken
/// by the same call. The passes after it are for what a pass's inbox
/// drain buries (a drop there that wakes another task) and for a burial
/// that lands after the reap saw the graveyard empty (a deliverer racing
/// the flag, whose re-check buries): with one pass those would wait for
/// the reap after the wait for the blocking pool, and a closure waiting on
/// one of them would hold the shutdown until its deadline. The models do
/// not make that case (it needs a racing deliverer, a cascade from an
/// inbox and a closure in one model); the logic row
/// `final-drain-reap-loop-one-pass` says so.
fn reap_until_empty<T>(
    graveyard: &Graveyard<T>,
    drain_inboxes: &mut impl FnMut() -> usize,
    drop: &mut impl FnMut(T),
) {
    loop {
        let n = graveyard.reap(&mut *drop) + drain_inboxes();
        if n == 0 {
            break;
        }
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
