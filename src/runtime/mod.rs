//! `Builder` and `Runtime`, and the free functions (`spawn`, `spawn_on`,
//! `spawn_local`, `spawn_blocking`, `current_place`, `worker_index`): the
//! API. `Builder::build` checks the options, has the state every worker
//! shares built below it (`Shared::new`, worker/shared.rs) and starts the
//! workers.

// `block_on`'s protocol, which the loom models drive: public under
// `cfg(loom)`.
#[cfg(loom)]
pub mod block_on;
#[cfg(not(loom))]
pub(crate) mod block_on;
pub(crate) mod handle;
#[cfg(loom)]
pub mod join_set;
#[cfg(not(loom))]
pub(crate) mod join_set;

use std::future::Future;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::config::Hook;
use crate::error::BuildError;
use crate::stats::Stats;
use crate::sync::{AtomicBool, Ordering};
use crate::task::drop_task;
use crate::task::{JoinHandle, Runnable};
use crate::topology::{Topology, TopologySource};
use crate::tunables::Tunables;
use crate::worker;
use crate::worker::shared::{Shared, SharedOptions};

/// Configures and builds a [`Runtime`].
///
/// ```
/// use hwsched::{Runtime, TopologySource};
/// let rt = Runtime::builder()
///     .topology(TopologySource::Synthetic("pack:2 l3:2 core:4 pu:2".into()))
///     .worker_threads(8)
///     .build()?;
/// assert_eq!(rt.workers(), 8);
/// # Ok::<(), hwsched::BuildError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    workers: Option<usize>,
    source: TopologySource,
    pin: Option<bool>,
    cpus: Option<Vec<usize>>,
    thread_name: Option<String>,
    tunables: Tunables,
    stack_size: Option<usize>,
    on_start: Option<Hook>,
    on_stop: Option<Hook>,
    max_blocking_threads: usize,
    keep_alive: Duration,
    blocking_affinity: bool,
    io: bool,
    #[cfg(feature = "io")]
    io_pollers: crate::io::IoPollers,
    poll_timing: bool,
    long_poll_threshold: Option<Duration>,
    #[cfg(feature = "tokio-compat")]
    tokio_compat: bool,
    /// `Builder::trace`: events per worker, and whether to record from
    /// the start.
    #[cfg(feature = "trace")]
    trace: Option<usize>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            workers: None,
            source: TopologySource::default(),
            pin: None,
            cpus: None,
            thread_name: None,
            tunables: Tunables::default(),
            stack_size: None,
            on_start: None,
            on_stop: None,
            max_blocking_threads: Builder::DEFAULT_MAX_BLOCKING_THREADS,
            keep_alive: Builder::DEFAULT_KEEP_ALIVE,
            blocking_affinity: true,
            io: cfg!(feature = "io"),
            #[cfg(feature = "io")]
            io_pollers: crate::io::IoPollers::One,
            poll_timing: false,
            #[cfg(feature = "trace")]
            trace: None,
            long_poll_threshold: None,
            #[cfg(feature = "tokio-compat")]
            tokio_compat: false,
        }
    }
}

impl Builder {
    /// Default of [`Builder::max_blocking_threads`] (tokio's).
    pub const DEFAULT_MAX_BLOCKING_THREADS: usize = 512;
    /// Default of [`Builder::thread_keep_alive`] (tokio's).
    pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(10);
    /// Smallest [`Builder::thread_stack_size`] accepted: 64 KiB (glibc's
    /// `PTHREAD_STACK_MIN` is 16 KiB; a Rust thread needs more for anything).
    pub const MIN_STACK_SIZE: usize = 64 << 10;
    /// Largest [`Builder::thread_stack_size`] accepted: 1 GiB.
    pub const MAX_STACK_SIZE: usize = 1 << 30;
}

impl Builder {
    /// A builder with the defaults: every allowed PU of this machine, pinned.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of workers (default: one per allowed PU of the topology).
    /// Fewer than the PUs takes one per core first, spread over packages.
    pub fn worker_threads(mut self, n: usize) -> Self {
        self.workers = Some(n);
        self
    }

    /// Where the topology comes from (default: [`TopologySource::System`]).
    pub fn topology(mut self, source: TopologySource) -> Self {
        self.source = source;
        self
    }

    /// Pin each worker to its PU (default: on for `System`, off for
    /// synthetic and XML topologies, whose PUs are not this machine's).
    /// Pinning that the OS refuses is not an error: see
    /// [`Runtime::pinned_workers`].
    ///
    /// Pinning keeps each worker's caches and its place in the topology,
    /// and gave the lowest tails where the runtime's threads are what
    /// keeps the CPUs busy. Where other busy threads share the same CPUs
    /// (another service, a load generator on the same machine), the OS can
    /// no longer move a pinned worker away from them: on 2 shared cores a
    /// co-located client waited for a CPU 36% of the time beside pinned
    /// workers against 21-25% beside unpinned ones, and got fewer requests
    /// out (BENCHMARKS.md, "Mixed HTTP"). `pin_workers(false)` is the
    /// choice for a process that does not have its CPUs to itself.
    pub fn pin_workers(mut self, pin: bool) -> Self {
        self.pin = Some(pin);
        self
    }

    /// Restrict the runtime to these CPUs (OS indices).
    pub fn cpus(mut self, cpus: impl IntoIterator<Item = usize>) -> Self {
        self.cpus = Some(cpus.into_iter().collect());
        self
    }

    /// Prefix of worker thread names (default `hwsched-worker`); workers are
    /// named `<prefix>-<index>`.
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = Some(name.into());
        self
    }

    /// Scheduler tunables.
    pub fn tunables(mut self, tunables: Tunables) -> Self {
        self.tunables = tunables;
        self
    }

    /// Stack size of the worker and blocking threads, in bytes (default: the
    /// platform's, 2 MiB for Rust threads; `RUST_MIN_STACK` is not read).
    /// Must be in [`Builder::MIN_STACK_SIZE`] ..= [`Builder::MAX_STACK_SIZE`].
    ///
    /// ```
    /// let rt = hwsched::Runtime::builder()
    ///     .worker_threads(1)
    ///     .thread_stack_size(8 << 20)
    ///     .build()?;
    /// // A task with a 4 MiB frame.
    /// let n = rt.block_on(rt.spawn(async {
    ///     let big = [1u8; 4 << 20];
    ///     std::hint::black_box(&big).iter().map(|&b| b as usize).sum::<usize>()
    /// }));
    /// assert_eq!(n.unwrap(), 4 << 20);
    /// # Ok::<(), hwsched::BuildError>(())
    /// ```
    pub fn thread_stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Runs `f` on every worker and blocking thread when it starts, before
    /// it runs any task ([`Handle::current`](crate::Handle::current) works
    /// inside). A panic in `f` is caught.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let started = Arc::new(AtomicUsize::new(0));
    /// let s = started.clone();
    /// let rt = hwsched::Runtime::builder()
    ///     .worker_threads(2)
    ///     .on_thread_start(move || {
    ///         s.fetch_add(1, Ordering::SeqCst);
    ///     })
    ///     .build()?;
    /// assert_eq!(started.load(Ordering::SeqCst), 2, "both workers, before build returns");
    /// # Ok::<(), hwsched::BuildError>(())
    /// ```
    pub fn on_thread_start(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_start = Some(Hook(Arc::new(f)));
        self
    }

    /// Runs `f` on every worker and blocking thread when it stops, after the
    /// last task it runs or drops. A panic in `f` is caught.
    pub fn on_thread_stop(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_stop = Some(Hook(Arc::new(f)));
        self
    }

    /// The tokio bridge (the `tokio-compat` feature; default off): the
    /// runtime starts a tokio current-thread runtime on one more thread,
    /// `{thread_name}-tokio`, that drives tokio's I/O and time drivers, and
    /// every worker, blocking thread and `block_on` call enters tokio's
    /// context, so that `tokio::time`, `tokio::net`, `tokio::spawn` and the
    /// crates built on them (reqwest, tonic's client, tower's timeouts)
    /// work in hwsched tasks as they are.
    ///
    /// `tokio::spawn` runs its future on that tokio thread (not on the
    /// workers). The wakes of tokio's resources reach hwsched tasks from
    /// that thread (a wake from outside the runtime each), and the thread's
    /// own sleep is tokio's: hwsched's own sockets and timers stay the fast
    /// path. When every worker sleeps, the tokio thread polls the task such
    /// a wake is for itself, instead of waking a worker for it (a task
    /// whose polls there twice in a row ran 250 us or more is not polled
    /// there again, nor for a second are the tasks of a spawn location
    /// two of whose polls there in a row did):
    /// so a task may be polled off the workers, where
    /// [`worker_index`](crate::worker_index) is `None` and `spawn_local`
    /// spawns on that thread (src/tokio_compat.rs, "Running a woken task on
    /// the bridge"). Dropping the runtime drops hwsched's tasks first, then stops
    /// the bridge (dropping the tokio tasks left, without waiting for
    /// tokio's blocking threads).
    ///
    /// ```
    /// let rt = hwsched::Runtime::builder()
    ///     .worker_threads(2)
    ///     .tokio_compat(true)
    ///     .build()?;
    /// rt.block_on(async {
    ///     let t = hwsched::spawn(async {
    ///         tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    ///         tokio::spawn(async { 40 + 2 }).await.unwrap()
    ///     });
    ///     assert_eq!(t.await.unwrap(), 42);
    /// });
    /// # Ok::<(), hwsched::BuildError>(())
    /// ```
    #[cfg(feature = "tokio-compat")]
    pub fn tokio_compat(mut self, on: bool) -> Self {
        self.tokio_compat = on;
        self
    }

    /// Most threads of the blocking pool behind
    /// [`spawn_blocking`] (default
    /// [`Builder::DEFAULT_MAX_BLOCKING_THREADS`], 512, as tokio). At least 1.
    pub fn max_blocking_threads(mut self, n: usize) -> Self {
        self.max_blocking_threads = n;
        self
    }

    /// How long an idle blocking thread waits for work before it exits
    /// (default [`Builder::DEFAULT_KEEP_ALIVE`], 10 s, as tokio). At most one day.
    pub fn thread_keep_alive(mut self, d: Duration) -> Self {
        self.keep_alive = d;
        self
    }

    /// Whether a blocking thread runs on the CPUs of its caller's NUMA node
    /// (or package, if smaller) only: an affinity mask over those CPUs, not a
    /// pin (default: on for `System` topologies; synthetic and XML ones are
    /// not this machine's CPUs and never set it).
    pub fn blocking_affinity(mut self, on: bool) -> Self {
        self.blocking_affinity = on;
        self
    }

    /// Whether this runtime has an I/O driver (default: on when the `io`
    /// cargo feature is, which it needs): `hwsched::net` sockets,
    /// `hwsched::time` timers and `hwsched::signal`. `build` opens the
    /// driver's descriptors (per poller: an epoll instance, its registry's
    /// duplicate and an eventfd) or returns
    /// [`BuildError::IoDriver`](crate::BuildError::IoDriver), so the first socket or timer never fails
    /// for want of one; the driver is put to use when the program first
    /// registers a socket or a timer: until then (and in a program that
    /// never does I/O) the workers park on their condvars, and those
    /// descriptors are all the feature costs
    /// ([`Stats::io_driven`](crate::Stats::io_driven)). Then an idle worker
    /// sleeps in the poller (one at a time per poller) with its next timer
    /// deadline as the timeout, so readiness and timer expiry wake tasks on
    /// a worker, which keeps them (a batch stays local); busy workers look
    /// at the poller every 61 tasks. Off, creating a socket or polling a
    /// timer of this runtime fails with an error that says so. Turning it
    /// on in a build without the feature is a
    /// [`BuildError::InvalidOption`].
    ///
    /// ```
    /// # #[cfg(feature = "io")] {
    /// use std::time::Duration;
    /// let rt = hwsched::Runtime::builder().worker_threads(2).enable_io(true).build()?;
    /// let ticks = rt.spawn(async {
    ///     let mut n = 0;
    ///     for _ in 0..3 {
    ///         // The timer is on this worker's wheel; its expiry wakes this
    ///         // task on the worker (see `Stats`: wakes by origin).
    ///         hwsched::time::sleep(Duration::from_millis(1)).await;
    ///         n += 1;
    ///     }
    ///     n
    /// });
    /// assert_eq!(rt.block_on(ticks).unwrap(), 3);
    /// # }
    /// # Ok::<(), hwsched::BuildError>(())
    /// ```
    pub fn enable_io(mut self, on: bool) -> Self {
        self.io = on;
        self
    }

    /// How many pollers the I/O driver has (default [`IoPollers::One`], as
    /// tokio and Go). [`IoPollers::PerLlc`] gives each last-level cache its
    /// own epoll instance, lock and waker: its workers sleep in it first, a
    /// socket accepted there registers with it, and an idle worker whose
    /// own poller is taken looks at the others, nearest first.
    ///
    /// [`IoPollers::One`]: crate::io::IoPollers::One
    /// [`IoPollers::PerLlc`]: crate::io::IoPollers::PerLlc
    #[cfg(feature = "io")]
    pub fn io_pollers(mut self, pollers: crate::io::IoPollers) -> Self {
        self.io_pollers = pollers;
        self
    }

    /// The long-poll threshold when [`poll_timing`](Self::poll_timing) is
    /// on and none was set.
    pub const DEFAULT_LONG_POLL_THRESHOLD: Duration = Duration::from_millis(5);

    /// Times every poll and every wake (default off): `Stats::timing` then
    /// holds, per worker, the distribution of poll durations, of run-queue
    /// delays (from a task's wake or spawn to the start of its poll) and
    /// the count of polls longer than the long-poll threshold
    /// ([`long_poll_threshold`](Self::long_poll_threshold), 5 ms unless
    /// set), whose spawn locations [`Runtime::long_polls`] lists. The cost
    /// is two clock reads per poll and one per wake (about 20 ns each).
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = hwsched::Builder::new()
    ///     .worker_threads(1)
    ///     .long_poll_threshold(Duration::from_millis(50))
    ///     .build()?;
    /// rt.block_on(rt.spawn(async {
    ///     std::thread::sleep(Duration::from_millis(60)); // blocks its worker
    /// }))
    /// .unwrap();
    /// // A poll is recorded as it returns: the worker's next task runs after.
    /// rt.block_on(rt.spawn(async {})).unwrap();
    /// let long = rt.long_polls();
    /// assert_eq!(long.len(), 1);
    /// assert!(long[0].location.file().ends_with(".rs")); // the spawn above
    /// assert!(long[0].duration >= Duration::from_millis(60));
    /// println!("{}", rt.stats()); // poll time and run delay: p50, p99, max
    /// # Ok::<(), hwsched::BuildError>(())
    /// ```
    pub fn poll_timing(mut self, on: bool) -> Self {
        self.poll_timing = on;
        self
    }

    /// Polls longer than `threshold` are long polls: counted per worker and
    /// kept, the newest 64 per worker, with their task's spawn location
    /// ([`Runtime::long_polls`]). Turns [`poll_timing`](Self::poll_timing)
    /// on.
    pub fn long_poll_threshold(mut self, threshold: Duration) -> Self {
        self.long_poll_threshold = Some(threshold);
        self
    }

    /// Records a trace of the scheduler from the runtime's start (the
    /// `trace` feature; [`crate::trace`]), keeping the newest
    /// `capacity_per_worker` events of each worker, and of each thread
    /// running `block_on` (a flight recorder; 48 bytes an event). [`Runtime::stop_trace`] or a [`Tracer`]'s
    /// [`snapshot`](crate::trace::Tracer::snapshot) reads it. Without this
    /// option [`Runtime::start_trace`] records with
    /// [`DEFAULT_CAPACITY`](crate::trace::DEFAULT_CAPACITY).
    ///
    /// [`Tracer`]: crate::trace::Tracer
    ///
    /// ```
    /// let rt = hwsched::Runtime::builder().worker_threads(2).trace(4096).build()?;
    /// let tracer = rt.tracer();
    /// rt.block_on(rt.spawn(async {})).unwrap();
    /// // A poll's end is recorded after its output reaches the awaiter:
    /// // the shutdown joins the workers, so every poll is complete.
    /// drop(rt);
    /// let trace = tracer.stop();
    /// assert_eq!(trace.polls().count(), 1);
    /// # Ok::<(), hwsched::BuildError>(())
    /// ```
    #[cfg(feature = "trace")]
    pub fn trace(mut self, capacity_per_worker: usize) -> Self {
        self.trace = Some(capacity_per_worker);
        self
    }

    /// Builds the runtime and starts its workers.
    pub fn build(self) -> Result<Runtime, BuildError> {
        let mut this = self;
        this.tunables.validate()?;
        this.validate_options()?;
        let name = this
            .thread_name
            .take()
            .unwrap_or_else(|| "hwsched-worker".to_owned());
        if name.contains('\0') {
            return Err(BuildError::InvalidThreadName { name });
        }
        // The tokio bridge first: its context goes around the hooks.
        #[cfg(feature = "tokio-compat")]
        let bridge = match this.tokio_compat {
            true => {
                let b = crate::tokio_compat::Bridge::start(format!("{name}-tokio"))
                    .map_err(BuildError::TokioCompat)?;
                let (start, stop) = crate::tokio_compat::hooks(
                    &b.handle,
                    this.on_start.take(),
                    this.on_stop.take(),
                );
                this.on_start = Some(start);
                this.on_stop = Some(stop);
                Some(b)
            }
            false => None,
        };
        this.build_with(
            name,
            #[cfg(feature = "tokio-compat")]
            bridge,
        )
    }

    fn build_with(
        self,
        name: String,
        #[cfg(feature = "tokio-compat")] bridge: Option<crate::tokio_compat::Bridge>,
    ) -> Result<Runtime, BuildError> {
        let stack_size = self.stack_size;
        let topology = Topology::with_cpus(&self.source, self.workers, self.cpus.as_deref())?;
        let pin = self.pin.unwrap_or(topology.is_system());
        let n = topology.workers();
        let (shared, queues) = Shared::new(SharedOptions {
            topology,
            tunables: self.tunables,
            thread_name: name.clone(),
            stack_size,
            max_blocking_threads: self.max_blocking_threads,
            keep_alive: self.keep_alive,
            blocking_affinity: self.blocking_affinity,
            on_start: self.on_start,
            on_stop: self.on_stop,
            poll_timing: self.poll_timing || self.long_poll_threshold.is_some(),
            long_poll_ns: self
                .long_poll_threshold
                .unwrap_or(Builder::DEFAULT_LONG_POLL_THRESHOLD)
                .as_nanos()
                .min(u64::MAX as u128) as u64,
            #[cfg(feature = "io")]
            io: self.io,
            #[cfg(feature = "io")]
            io_pollers: self.io_pollers,
            #[cfg(feature = "trace")]
            trace: self.trace,
            #[cfg(feature = "tokio-compat")]
            tokio: bridge.as_ref().map(|b| b.handle.clone()),
            #[cfg(feature = "tokio-compat")]
            bridge_slot: bridge.as_ref().map(|b| b.inline.clone()),
            enter: |s| Box::new(crate::runtime::block_on::enter(s)),
        })?;
        // The bridge's runner, which polls what the bridge takes for
        // itself (src/tokio_compat.rs): until it runs, nothing is taken.
        #[cfg(feature = "tokio-compat")]
        if let Some(b) = &bridge {
            b.handle.spawn(crate::runtime::block_on::bridge_runner(
                b.inline.clone(),
                Arc::downgrade(&shared),
            ));
        }
        let mut threads = Vec::with_capacity(n);
        for (index, (local, batch)) in queues.into_iter().enumerate() {
            let s = shared.clone();
            let mut tb = thread::Builder::new().name(format!("{name}-{index}"));
            if let Some(sz) = stack_size {
                tb = tb.stack_size(sz);
            }
            let spawned = tb.spawn(move || worker::run(s, index, local, batch, pin));
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    let rt = Runtime {
                        shared,
                        threads,
                        shut: false,
                        #[cfg(feature = "tokio-compat")]
                        bridge,
                    };
                    drop(rt);
                    return Err(BuildError::ThreadSpawn(e));
                }
            }
        }
        // Every worker has started and tried to pin before `build` returns.
        shared.starting.wait();
        Ok(Runtime {
            shared,
            threads,
            shut: false,
            #[cfg(feature = "tokio-compat")]
            bridge,
        })
    }
}

impl Builder {
    /// Checks the thread options; the error names the option and value.
    fn validate_options(&self) -> Result<(), BuildError> {
        let bad = |name: &'static str, value: String, expected: &'static str| {
            Err(BuildError::InvalidOption {
                name,
                value,
                expected,
            })
        };
        if let Some(s) = self.stack_size {
            if !(Builder::MIN_STACK_SIZE..=Builder::MAX_STACK_SIZE).contains(&s) {
                return bad(
                    "thread_stack_size",
                    s.to_string(),
                    "65536 ..= 1073741824 bytes",
                );
            }
        }
        if self.io && !cfg!(feature = "io") {
            return bad(
                "enable_io",
                "true".into(),
                "false: this build of hwsched lacks the `io` cargo feature",
            );
        }
        if self.max_blocking_threads == 0 {
            return bad("max_blocking_threads", "0".into(), "1 or more");
        }
        if self.keep_alive > Duration::from_secs(86_400) {
            return bad(
                "thread_keep_alive",
                format!("{:?}", self.keep_alive),
                "at most 1 day",
            );
        }
        Ok(())
    }
}

/// A topology-aware work-stealing runtime: one worker thread per PU.
///
/// Dropping it shuts it down: workers stop and are joined, and every task
/// not yet finished is dropped exactly once (its handle yields
/// [`JoinError::Cancelled`](crate::JoinError::Cancelled)).
///
/// ```
/// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
/// let sum = rt.block_on(async {
///     let hs: Vec<_> = (0..10u64).map(|i| hwsched::spawn(async move { i * i })).collect();
///     let mut sum = 0;
///     for h in hs {
///         sum += h.await.unwrap();
///     }
///     sum
/// });
/// assert_eq!(sum, 285);
/// # Ok::<(), hwsched::BuildError>(())
/// ```
pub struct Runtime {
    shared: Arc<Shared>,
    threads: Vec<thread::JoinHandle<()>>,
    shut: bool,
    /// The tokio bridge's thread (`Builder::tokio_compat`), stopped after
    /// the shutdown.
    #[cfg(feature = "tokio-compat")]
    bridge: Option<crate::tokio_compat::Bridge>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("workers", &self.workers())
            .finish()
    }
}

impl Runtime {
    /// A [`Builder`].
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A runtime with the defaults (every allowed PU of this machine).
    pub fn new() -> Result<Runtime, BuildError> {
        Builder::new().build()
    }

    /// Spawns a task; it starts running on some worker at once.
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        crate::worker::spawn::spawn(&self.shared, crate::worker::spawn::Home::Free, future)
    }

    /// Spawns a task that runs only at `place`, now and after every wake
    /// (see [`Place`](crate::Place) for the places honoured); a place the
    /// runtime cannot honour is a [`PlaceError`](crate::PlaceError) naming
    /// it, and nothing is spawned.
    ///
    /// ```
    /// use hwsched::Place;
    /// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
    /// let h = rt
    ///     .spawn_on(Place::Worker(1), async {
    ///         hwsched::yield_now().await; // woken: back on worker 1
    ///         hwsched::worker_index()
    ///     })
    ///     .unwrap();
    /// assert_eq!(rt.block_on(h).unwrap(), Some(1));
    /// # Ok::<(), hwsched::BuildError>(())
    /// ```
    #[track_caller]
    pub fn spawn_on<F>(
        &self,
        place: crate::Place,
        future: F,
    ) -> Result<JoinHandle<F::Output>, crate::PlaceError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        crate::worker::spawn::spawn_on(&self.shared, place, future)
    }

    /// Runs the blocking function `f` on the runtime's blocking pool (not on
    /// a worker); see [`spawn_blocking`].
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        crate::worker::spawn::spawn_blocking(&self.shared, f)
    }

    /// Runs `future` to completion on the calling thread; inside it,
    /// [`spawn`] spawns onto this runtime.
    ///
    /// Panics if called from a worker thread of any hwsched runtime (it would
    /// block the worker).
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        #[cfg(feature = "tokio-compat")]
        let _tokio = self.shared.tokio.as_ref().map(|h| h.enter());
        crate::runtime::block_on::block_on(&self.shared, future)
    }

    /// A [`Handle`](crate::Handle) to this runtime: cloneable, `Send + Sync`,
    /// for spawning from anywhere.
    ///
    /// ```
    /// let rt = hwsched::Runtime::builder().worker_threads(1).build()?;
    /// let h = rt.handle();
    /// let v = std::thread::spawn(move || h.block_on(h.spawn(async { 5 })))
    ///     .join()
    ///     .unwrap();
    /// assert_eq!(v.unwrap(), 5);
    /// # Ok::<(), hwsched::BuildError>(())
    /// ```
    pub fn handle(&self) -> crate::Handle {
        crate::Handle {
            shared: self.shared.clone(),
        }
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.shared.workers.len()
    }

    /// The topology the workers run on.
    pub fn topology(&self) -> &Topology {
        &self.shared.topology
    }

    /// The tunables in force.
    pub fn tunables(&self) -> &Tunables {
        &self.shared.tunables
    }

    /// How many workers were pinned to their PU (0 if pinning was off or
    /// refused, e.g. in a restricted container).
    pub fn pinned_workers(&self) -> usize {
        self.shared
            .workers
            .iter()
            .filter(|w| w.pinned.load(Ordering::Relaxed))
            .count()
    }

    /// A snapshot of the scheduler's counters.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// The newest polls longer than the long-poll threshold (up to 64 per
    /// worker), oldest first, each with its task's spawn location; empty
    /// unless [`Builder::poll_timing`] or [`Builder::long_poll_threshold`]
    /// is on. See [`Builder::poll_timing`] for an example.
    pub fn long_polls(&self) -> Vec<crate::timing::LongPoll> {
        self.shared.long_polls()
    }

    /// Starts recording a trace of the scheduler (the `trace` feature;
    /// [`crate::trace`]): a new window, whose events
    /// [`stop_trace`](Self::stop_trace) returns.
    #[cfg(feature = "trace")]
    pub fn start_trace(&self) {
        self.shared.trace.start();
    }

    /// Stops recording and returns the trace of the window since the last
    /// [`start_trace`](Self::start_trace) (or the build, with
    /// [`Builder::trace`]).
    #[cfg(feature = "trace")]
    pub fn stop_trace(&self) -> crate::trace::Trace {
        self.shared.trace.stop();
        self.shared.trace.collect()
    }

    /// A handle to this runtime's trace recorder, which outlives it: a
    /// trace can be started before a shutdown and read after it.
    ///
    /// ```
    /// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
    /// let tracer = rt.tracer();
    /// tracer.start();
    /// rt.spawn(async {});
    /// drop(rt); // shuts down
    /// let trace = tracer.stop();
    /// assert!(trace.events().iter().any(|e| matches!(e.kind, hwsched::trace::EventKind::Spawn { .. })));
    /// # Ok::<(), hwsched::BuildError>(())
    /// ```
    #[cfg(feature = "trace")]
    pub fn tracer(&self) -> crate::trace::Tracer {
        crate::trace::Tracer(self.shared.trace.clone())
    }

    /// Tasks spawned and not yet finished or dropped.
    pub fn live_tasks(&self) -> u64 {
        let s = self.shared.stats();
        s.spawned.saturating_sub(s.retired)
    }

    /// Shuts down, waiting at most `timeout` for workers to finish the task
    /// they are running and for running [`spawn_blocking`] closures; a
    /// worker stuck in a blocking task past it is left to exit on its own
    /// (it stops at its next scheduling point), and so is a blocking
    /// thread (when its closure returns). Returns whether every worker and
    /// blocking thread was joined.
    ///
    /// Pending tasks are cancelled before the blocking closures are waited
    /// for, so a closure that waits on a task (its `JoinHandle`, a channel
    /// whose sender the task holds) sees it cancelled and returns.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> bool {
        self.shutdown(Some(timeout))
    }

    fn shutdown(&mut self, timeout: Option<Duration>) -> bool {
        if self.shut {
            return true;
        }
        self.shut = true;
        let shared = &self.shared;
        // The drops of the sequence run user destructors: with this runtime
        // as the thread's context, a destructor that calls `hwsched::spawn`
        // or `hwsched::spawn_blocking` gets a handle that resolves to
        // `Cancelled` at once (a spawn after shutdown), not a panic about a
        // missing runtime.
        let _context = crate::runtime::block_on::enter(shared.clone());
        // And tokio's, for the destructors of tasks that hold tokio
        // resources (the bridge still runs).
        #[cfg(feature = "tokio-compat")]
        let tokio = shared.tokio.as_ref().map(|h| h.enter());
        // The sequence (announce, close the blocking pool, join, final
        // drain) is `shutdown::shutdown`'s: src/sched/README.md,
        // "Shutdown".
        let joined = crate::sched::shutdown::shutdown(&mut Stop {
            shared,
            threads: &mut self.threads,
            deadline: timeout.map(|t| Instant::now() + t),
        });
        // hwsched's tasks are dropped: stop the bridge.
        #[cfg(feature = "tokio-compat")]
        {
            drop(tokio);
            if let Some(mut b) = self.bridge.take() {
                b.stop();
            }
        }
        joined
    }
}

/// The runtime as the shutdown sequence ([`crate::sched::shutdown::shutdown`])
/// sees it: its workers' threads, with the shutdown's deadline.
struct Stop<'a> {
    shared: &'a Shared,
    threads: &'a mut Vec<thread::JoinHandle<()>>,
    deadline: Option<Instant>,
}

impl Stop<'_> {
    /// The task the tokio bridge thread holds to run, if any, after a
    /// poll it is in has ended (dropped here: the bridge polls nothing
    /// after the shutdown's flag).
    fn drain_bridge(&self) -> usize {
        #[cfg(feature = "tokio-compat")]
        if let Some(r) = (self.shared.bridge_slot.as_ref()).and_then(|i| i.drain(self.deadline)) {
            drop_task(r);
            return 1;
        }
        0
    }
}

impl crate::sched::shutdown::Stopping<Runnable> for Stop<'_> {
    fn flag(&self) -> &AtomicBool {
        &self.shared.shutdown
    }

    fn parkers(&self) -> impl Iterator<Item = &crate::sched::park::Parker> {
        self.shared.workers.iter().map(|w| &w.mailbox.parker)
    }

    fn close_blocking(&self) {
        self.shared.blocking.close();
    }

    fn join_workers(&mut self) -> bool {
        let me = thread::current().id();
        let mut all_joined = true;
        for t in self.threads.drain(..) {
            if t.thread().id() == me {
                // Dropped (or shut down) from one of its own workers, inside
                // a task: that worker cannot join itself. It leaves its loop
                // when this poll returns and drops what it still holds then,
                // as a worker that outlives `shutdown_timeout` does.
                all_joined = false;
                continue;
            }
            match self.deadline {
                None => {
                    let _ = t.join();
                }
                Some(d) => {
                    while !t.is_finished() && Instant::now() < d {
                        thread::sleep(Duration::from_micros(200));
                    }
                    if t.is_finished() {
                        let _ = t.join();
                    } else {
                        all_joined = false;
                    }
                }
            }
        }
        all_joined
    }

    fn graveyard(&self) -> &crate::sched::shutdown::Graveyard<Runnable> {
        &self.shared.graveyard
    }

    fn drain_inboxes(&self) -> usize {
        // The place queues of the domains are drained with the inboxes
        // (`DomainQueues::drain` fences first: sched/place_queue.rs).
        crate::sched::shutdown::drain_inboxes(
            self.shared.workers.iter().map(|w| &*w.mailbox),
            drop_task,
        ) + self.shared.domains.drain(drop_task)
            + self.drain_bridge()
    }

    fn wake_waiting(&self) {
        // The driver first (the workers are joined, so nobody turns its
        // pollers or fires its timers again): its sockets' waiters see an
        // error and its timers are shut, each waiter woken, so a blocking
        // closure (or another runtime, or a thread) waiting on one returns
        // before `wait_running` waits for it (io/mod.rs, "Shutdown").
        #[cfg(feature = "io")]
        self.shared.driver.shutdown();
        self.shared.registry.close_and_wake_all();
    }

    fn wait_running(&self) -> bool {
        // Never the calling thread itself (`BlockingPool::wait`).
        self.shared.blocking.wait(self.deadline)
    }

    fn drop_task(&self, r: Runnable) {
        drop_task(r);
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown(None);
    }
}

/// The index of the worker running the caller, or `None` outside a worker
/// thread (e.g. in [`Runtime::block_on`], or in a task the tokio bridge
/// polls: [`Builder::tokio_compat`]).
///
/// ```
/// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
/// let w = rt.block_on(rt.spawn(async { hwsched::worker_index() })).unwrap();
/// assert!(w.unwrap() < 2);
/// assert_eq!(hwsched::worker_index(), None);
/// # Ok::<(), hwsched::BuildError>(())
/// ```
pub fn worker_index() -> Option<usize> {
    crate::context::current_index()
}

/// Where the caller runs: its worker, and that worker's core, last-level
/// cache, NUMA node and package (indices of the domains of each kind, as
/// [`Topology::domains`] numbers them); `None` off a worker thread (in
/// [`Runtime::block_on`], on a blocking thread, outside any runtime).
///
/// ```
/// use hwsched::{Place, TopologySource};
/// let rt = hwsched::Runtime::builder()
///     .topology(TopologySource::Synthetic("pack:2 l3:2 core:4 pu:2".into()))
///     .build()?;
/// let here = rt.spawn_on(Place::Worker(13), async { hwsched::current_place() }).unwrap();
/// let p = rt.block_on(here).unwrap().unwrap();
/// assert_eq!((p.worker, p.core, p.llc, p.numa, p.package), (13, 6, 1, 0, 0));
/// assert_eq!(hwsched::current_place(), None);
/// # Ok::<(), hwsched::BuildError>(())
/// ```
pub fn current_place() -> Option<crate::CurrentPlace> {
    worker::current_place()
}

/// Runs the blocking function `f` on a thread of the current runtime's
/// blocking pool, so it does not stall a worker, and returns a handle to
/// its result.
///
/// The pool starts threads on demand, up to
/// [`Builder::max_blocking_threads`]; an idle one exits after
/// [`Builder::thread_keep_alive`]. A pool thread has the runtime as its
/// context ([`Handle::current`](crate::Handle::current), `hwsched::spawn`
/// work inside `f`) and, on a `System` topology, runs on the CPUs of the
/// NUMA node (or package, if smaller) of the worker that called `spawn_blocking`
/// (an affinity mask, not a pin; [`Builder::blocking_affinity`]). A panic
/// in `f` reaches the handle as
/// [`JoinError::Panicked`](crate::JoinError::Panicked). At shutdown,
/// closures not yet started are cancelled and running ones are waited for
/// (up to the shutdown timeout).
///
/// # Panics
///
/// Outside any hwsched context, with a message saying so; use
/// [`Handle::spawn_blocking`](crate::Handle::spawn_blocking).
///
/// ```
/// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
/// let text = rt.block_on(async {
///     hwsched::spawn_blocking(|| std::fs::read_to_string("Cargo.toml"))
///         .await
///         .unwrap()
/// });
/// assert!(text.unwrap().contains("hwsched"));
/// # Ok::<(), hwsched::BuildError>(())
/// ```
pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    match crate::Handle::try_current() {
        Some(handle) => handle.spawn_blocking(f),
        None => panic!(
            "hwsched::spawn_blocking called outside a hwsched runtime: call it from a task, \
             from inside Runtime::block_on, or use Runtime::spawn_blocking or a Handle"
        ),
    }
}

/// Spawns a task onto the runtime of the current context that runs only at
/// `place`, now and after every wake: [`Runtime::spawn_on`] (or
/// [`Handle::spawn_on`](crate::Handle::spawn_on)) on that runtime.
/// [`Place::Here`](crate::Place::Here) pins it to the calling worker.
///
/// # Panics
///
/// Outside any hwsched context, as [`spawn`] does.
///
/// ```
/// use hwsched::Place;
/// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
/// let v = rt.block_on(async {
///     // From block_on's thread there is no current worker:
///     assert!(hwsched::spawn_on(Place::Here, async {}).is_err());
///     let h = hwsched::spawn_on(Place::Worker(0), async {
///         // From a worker, `Here` is that worker.
///         let inner = hwsched::spawn_on(Place::Here, async { hwsched::worker_index() });
///         inner.unwrap().await.unwrap()
///     });
///     h.unwrap().await.unwrap()
/// });
/// assert_eq!(v, Some(0));
/// # Ok::<(), hwsched::BuildError>(())
/// ```
#[track_caller]
pub fn spawn_on<F>(
    place: crate::Place,
    future: F,
) -> Result<JoinHandle<F::Output>, crate::PlaceError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match crate::Handle::try_current() {
        Some(handle) => handle.spawn_on(place, future),
        None => panic!(
            "hwsched::spawn_on called outside a hwsched runtime: call it from a task, from \
             inside Runtime::block_on, or use Runtime::spawn_on or a Handle (Runtime::handle)"
        ),
    }
}

/// Spawns the `!Send` `future` on the calling thread, where it stays: it
/// is polled only there, never stolen, and dropped there too (a wake from
/// any thread, or from [`spawn_blocking`], brings it back). Its
/// [`JoinHandle`] is `Send` only if its output is.
///
/// - **On a worker** (from a task): pinned to that worker; at shutdown it
///   is cancelled and dropped there.
/// - **On the thread of [`Runtime::block_on`]** (in its future, or in
///   another local task): run by that `block_on` between polls of its
///   future, as tokio's `LocalSet` inside `block_on` is (a nested
///   `block_on` on the same thread runs it too). It lives as long as the
///   outermost `block_on` on its thread: one still alive when that returns
///   is cancelled and dropped there, before it returns, and its handle
///   yields [`JoinError::Cancelled`](crate::JoinError::Cancelled).
///
/// # Panics
///
/// Anywhere else: on a blocking thread outside `block_on`, or outside any
/// runtime. [`current_place`] says whether the caller is on a worker.
///
/// ```
/// use std::rc::Rc;
/// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
/// let h = rt.spawn(async {
///     let w = hwsched::worker_index();
///     // A local task may hold an `Rc` across its awaits.
///     let local = hwsched::spawn_local(async move {
///         let shared = Rc::new(std::cell::Cell::new(0)); // not Send
///         let s2 = shared.clone();
///         let inner = hwsched::spawn_local(async move {
///             hwsched::yield_now().await;
///             s2.set(s2.get() + 1);
///         });
///         inner.await.unwrap();
///         (shared.get(), hwsched::worker_index())
///     });
///     let (n, ran_on) = local.await.unwrap(); // the output is Send
///     assert_eq!(ran_on, w);
///     n
/// });
/// assert_eq!(rt.block_on(h).unwrap(), 1);
/// # Ok::<(), hwsched::BuildError>(())
/// ```
///
/// On `block_on`'s thread, sharing an `Rc` with the main future, and woken
/// from a worker:
///
/// ```
/// use std::{cell::Cell, rc::Rc};
/// let rt = hwsched::Runtime::builder().worker_threads(1).build()?;
/// let here = std::thread::current().id();
/// let n = rt.block_on(async {
///     let count = Rc::new(Cell::new(0)); // not Send
///     let c = count.clone();
///     let local = hwsched::spawn_local(async move {
///         // A task on a worker completes, and wakes this one from there.
///         let v = hwsched::spawn(async { 41 }).await.unwrap();
///         assert_eq!(std::thread::current().id(), here); // it stayed
///         c.set(v + 1);
///     });
///     local.await.unwrap();
///     count.get()
/// });
/// assert_eq!(n, 42);
/// # Ok::<(), hwsched::BuildError>(())
/// ```
#[track_caller]
pub fn spawn_local<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    match worker::current_shared_worker() {
        Some((shared, w)) => crate::worker::spawn::spawn_local(&shared, w, future),
        None => crate::runtime::block_on::spawn_local(future).unwrap_or_else(|| {
            panic!(
                "hwsched::spawn_local called off a worker thread and outside Runtime::block_on: \
                 a local task stays on the thread that spawns it, so call it from a task running \
                 on an hwsched runtime or inside block_on (not from a spawn_blocking closure or \
                 another thread)"
            )
        }),
    }
}

/// Spawns a task onto the runtime of the current context: the worker this
/// code runs on, or the runtime whose [`Runtime::block_on`] is running.
///
/// # Panics
///
/// Outside any hwsched context, with a message saying so.
///
/// ```
/// let rt = hwsched::Runtime::builder().worker_threads(1).build()?;
/// let v = rt.block_on(async { hwsched::spawn(async { 1 + 1 }).await.unwrap() });
/// assert_eq!(v, 2);
/// # Ok::<(), hwsched::BuildError>(())
/// ```
#[track_caller]
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match crate::Handle::try_current() {
        Some(handle) => handle.spawn(future),
        None => panic!(
            "hwsched::spawn called outside a hwsched runtime: call it from a task, from \
             inside Runtime::block_on, or use Runtime::spawn or a Handle (Runtime::handle)"
        ),
    }
}
