//! One interface over the runtimes the benches compare: hwsched, tokio
//! (multi-thread), async-executor (N threads running `ex.run(..)`) and
//! tokio's current-thread runtime (one thread in `block_on`).
//!
//! Included with `#[path]` by every bench and by `examples/hackbench.rs`;
//! each of them uses only part of it.
#![allow(dead_code)]

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread;

/// The 32-worker synthetic topology of the benches (`hwsched-32`).
pub const SYNTH_32: &str = "pack:2 l3:2 core:4 pu:2";

/// Which runtime an [`Rt`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Hwsched,
    Tokio,
    AsyncExecutor,
    /// tokio's current-thread runtime, driven by one dedicated thread.
    TokioCurrentThread,
}

/// Workers of a default runtime on this machine: one per allowed CPU.
pub fn default_workers() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get())
}

/// A runtime under test.
pub struct Rt {
    /// Row / bench label: `hwsched`, `tokio`, `async-executor`, `hwsched-32`...
    pub name: String,
    inner: Inner,
    workers: usize,
}

enum Inner {
    Hw(hwsched::Runtime),
    Tokio(tokio::runtime::Runtime),
    Ae(AeRt),
    TokioCt(TokioCtRt),
}

/// A current-thread tokio runtime whose one thread sits in
/// `rt.block_on(<stop signal>)`, running whatever is spawned through the
/// handle from any thread.
struct TokioCtRt {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Drop for TokioCtRt {
    fn drop(&mut self) {
        // Sending (or dropping) the sender ends the thread's `block_on`;
        // the runtime is dropped on that thread.
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct AeRt {
    ex: Arc<async_executor::Executor<'static>>,
    stop: Option<async_channel::Sender<()>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Drop for AeRt {
    fn drop(&mut self) {
        // Closing the channel ends every `ex.run(stop.recv())`.
        drop(self.stop.take());
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A builder with the bench's environment applied: `HWSCHED_TUNE`
/// ([`env_tunables`]), `HWSCHED_PIN=0` (workers not pinned to their CPUs,
/// [`hwsched::Builder::pin_workers`]) and `HWSCHED_TIMING` (poll timing
/// on, [`hwsched::Builder::poll_timing`]: the run-queue delay and poll
/// durations in [`hwsched::Stats`], at its cost). For ablations: a row's
/// figures are the defaults' when none is set.
#[allow(dead_code)]
pub fn env_builder(workers: usize) -> hwsched::Builder {
    hwsched::Runtime::builder()
        .tunables(env_tunables(Default::default()))
        .pin_workers(std::env::var("HWSCHED_PIN").map_or(true, |v| v != "0"))
        .poll_timing(std::env::var_os("HWSCHED_TIMING").is_some())
        .worker_threads(workers)
}

/// Applies the `HWSCHED_TUNE` environment variable to the standard rows'
/// tunables, for ablations without a row per variant: a comma-separated
/// list of `sis=prop|util|full|off`, `recent=on|off`, `idle_core=on|off`,
/// `walk=bounded|unbounded`, `idle=park|governed|spin:<us>`,
/// `interval_us=<n>`. An unknown item aborts the bench with its name.
pub fn env_tunables(mut t: hwsched::Tunables) -> hwsched::Tunables {
    use hwsched::{IdleMode, SisMode, StealWalk};
    let Ok(spec) = std::env::var("HWSCHED_TUNE") else {
        return t;
    };
    for item in spec.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = item.split_once('=').unwrap_or((item, ""));
        match (k, v) {
            ("sis", "prop") => t.sis = SisMode::Prop,
            ("sis", "util") => t.sis = SisMode::Util,
            ("sis", "full") => t.sis = SisMode::Full,
            ("sis", "off") => t.sis = SisMode::Off,
            ("recent", v) => t.sis_recent_used = v == "on",
            ("idle_core", v) => t.sis_idle_core = v == "on",
            ("walk", "bounded") => t.walk = StealWalk::Bounded,
            ("walk", "unbounded") => t.walk = StealWalk::Unbounded,
            ("idle", "park") => t.idle = IdleMode::AlwaysPark,
            ("idle", "governed") => t.idle = IdleMode::Governed,
            ("idle", v) if v.starts_with("spin:") => {
                let us: u64 = v[5..].parse().expect("HWSCHED_TUNE idle=spin:<us>");
                t.idle = IdleMode::AlwaysSpin(std::time::Duration::from_micros(us));
            }
            ("interval_us", v) => {
                let us: u64 = v.parse().expect("HWSCHED_TUNE interval_us=<n>");
                t.load_update_interval = std::time::Duration::from_micros(us);
            }
            _ => panic!("HWSCHED_TUNE: unknown item {item:?}"),
        }
    }
    t
}

/// Builds a hwsched runtime; `topology` is a hwloc synthetic string, the
/// path of an XML export (ending in `.xml`), or `None` for this machine;
/// `workers` `None` for one per PU.
pub fn hwsched(
    name: &str,
    workers: Option<usize>,
    topology: Option<&str>,
    tunables: hwsched::Tunables,
) -> Result<Rt, hwsched::BuildError> {
    hwsched_with(name, workers, topology, tunables, |b| b)
}

/// [`hwsched`], with `configure` applied to the builder last (for options
/// one workload needs, such as `poll_timing`).
pub fn hwsched_with(
    name: &str,
    workers: Option<usize>,
    topology: Option<&str>,
    tunables: hwsched::Tunables,
    configure: impl FnOnce(hwsched::Builder) -> hwsched::Builder,
) -> Result<Rt, hwsched::BuildError> {
    let mut b = hwsched::Runtime::builder().tunables(tunables);
    if let Some(t) = topology {
        b = b.topology(if t.ends_with(".xml") {
            hwsched::TopologySource::Xml(t.into())
        } else {
            hwsched::TopologySource::Synthetic(t.into())
        });
    }
    if let Some(n) = workers {
        b = b.worker_threads(n);
    }
    let rt = configure(b).build()?;
    Ok(Rt {
        name: name.into(),
        workers: rt.workers(),
        inner: Inner::Hw(rt),
    })
}

/// tokio's multi-thread runtime with `workers` workers.
pub fn tokio(workers: usize) -> Rt {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .build()
        .expect("tokio runtime");
    Rt {
        name: "tokio".into(),
        workers,
        inner: Inner::Tokio(rt),
    }
}

/// tokio's current-thread runtime (`enable_all`), driven by one dedicated
/// thread blocked in `rt.block_on(<stop signal>)`: tasks spawned through its
/// handle, from any thread, run on that thread. Its row is `tokio-ct`; it
/// has one worker whatever the other runtimes have.
pub fn tokio_current_thread() -> std::io::Result<Rt> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let handle = rt.handle().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = thread::Builder::new()
        .name("tokio-ct".into())
        .spawn(move || {
            rt.block_on(async move {
                let _ = stopped.await;
            });
        })?;
    Ok(Rt {
        name: "tokio-ct".into(),
        workers: 1,
        inner: Inner::TokioCt(TokioCtRt {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        }),
    })
}

/// async-executor with `workers` threads each running `ex.run(..)`.
pub fn async_executor(workers: usize) -> Rt {
    let ex = Arc::new(async_executor::Executor::new());
    let (stop, stopped) = async_channel::bounded::<()>(1);
    let threads = (0..workers)
        .map(|i| {
            let ex = ex.clone();
            let stopped = stopped.clone();
            thread::Builder::new()
                .name(format!("async-executor-{i}"))
                .spawn(move || {
                    let _ = block_on(ex.run(stopped.recv()));
                })
                .expect("async-executor thread")
        })
        .collect();
    Rt {
        name: "async-executor".into(),
        workers,
        inner: Inner::Ae(AeRt {
            ex,
            stop: Some(stop),
            threads,
        }),
    }
}

/// The standard rows: hwsched (this machine), tokio and async-executor with
/// the same worker count, and hwsched on the 32-worker synthetic topology.
pub fn standard_set() -> Vec<Rt> {
    let n = default_workers();
    vec![
        hwsched("hwsched", None, None, env_tunables(Default::default())).expect("hwsched runtime"),
        tokio(n),
        async_executor(n),
        hwsched(
            "hwsched-32",
            None,
            Some(SYNTH_32),
            env_tunables(Default::default()),
        )
        .expect("hwsched-32 runtime"),
    ]
}

impl Rt {
    pub fn kind(&self) -> Kind {
        match self.inner {
            Inner::Hw(_) => Kind::Hwsched,
            Inner::Tokio(_) => Kind::Tokio,
            Inner::Ae(_) => Kind::AsyncExecutor,
            Inner::TokioCt(_) => Kind::TokioCurrentThread,
        }
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The hwsched runtime, for its stats.
    pub fn hw(&self) -> Option<&hwsched::Runtime> {
        match &self.inner {
            Inner::Hw(rt) => Some(rt),
            _ => None,
        }
    }

    /// hwsched's stats, if this is hwsched.
    pub fn stats(&self) -> Option<hwsched::Stats> {
        self.hw().map(|rt| rt.stats())
    }

    /// Spawns from any thread (outside the runtime too); hwsched records
    /// the caller's location as the task's spawn location.
    #[track_caller]
    pub fn spawn<F>(&self, f: F) -> Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.inner {
            Inner::Hw(rt) => Handle::Hw(rt.spawn(f)),
            Inner::Tokio(rt) => Handle::Tokio(rt.spawn(f)),
            Inner::Ae(ae) => Handle::Ae(Some(ae.ex.spawn(f))),
            Inner::TokioCt(ct) => Handle::Tokio(ct.handle.spawn(f)),
        }
    }

    /// Runs `f` on the calling thread (not a worker); for hwsched and tokio
    /// inside their `block_on` context, so [`Spawner::spawn`] works in it
    /// (tokio-ct: `Handle::block_on`, which polls `f` here while the
    /// runtime's own thread runs the tasks).
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        match &self.inner {
            Inner::Hw(rt) => rt.block_on(f),
            Inner::Tokio(rt) => rt.block_on(f),
            Inner::Ae(_) => block_on(f),
            Inner::TokioCt(ct) => ct.handle.block_on(f),
        }
    }

    /// A spawner that tasks can carry.
    pub fn spawner(&self) -> Spawner {
        match &self.inner {
            Inner::Hw(_) => Spawner::Hw,
            Inner::Tokio(rt) => Spawner::Tokio(rt.handle().clone()),
            Inner::Ae(ae) => Spawner::Ae(ae.ex.clone()),
            Inner::TokioCt(ct) => Spawner::Tokio(ct.handle.clone()),
        }
    }
}

/// Spawns onto the runtime it came from (tokio-ct's is a `Tokio` spawner
/// with its handle). For hwsched it uses the context
/// (`hwsched::spawn`): call it from a task or inside [`Rt::block_on`].
#[derive(Clone)]
pub enum Spawner {
    Hw,
    Tokio(tokio::runtime::Handle),
    Ae(Arc<async_executor::Executor<'static>>),
}

impl Spawner {
    pub fn spawn<F>(&self, f: F) -> Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self {
            Spawner::Hw => Handle::Hw(hwsched::spawn(f)),
            Spawner::Tokio(h) => Handle::Tokio(h.spawn(f)),
            Spawner::Ae(ex) => Handle::Ae(Some(ex.spawn(f))),
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Spawner::Hw => Kind::Hwsched,
            Spawner::Tokio(h) => match h.runtime_flavor() {
                tokio::runtime::RuntimeFlavor::CurrentThread => Kind::TokioCurrentThread,
                _ => Kind::Tokio,
            },
            Spawner::Ae(_) => Kind::AsyncExecutor,
        }
    }
}

/// A join handle: awaiting it gives the output (a panicked or cancelled
/// task panics the awaiter). Dropping it detaches the task, as tokio's and
/// hwsched's do (async-executor's `Task` would cancel it).
pub enum Handle<T> {
    Hw(hwsched::JoinHandle<T>),
    Tokio(tokio::task::JoinHandle<T>),
    Ae(Option<async_executor::Task<T>>),
}

impl<T> Future for Handle<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match self.get_mut() {
            Handle::Hw(h) => Pin::new(h)
                .poll(cx)
                .map(|r| r.expect("hwsched task failed")),
            Handle::Tokio(h) => Pin::new(h).poll(cx).map(|r| r.expect("tokio task failed")),
            Handle::Ae(h) => Pin::new(h.as_mut().expect("polled after completion")).poll(cx),
        }
    }
}

impl<T> Drop for Handle<T> {
    fn drop(&mut self) {
        if let Handle::Ae(t) = self {
            if let Some(t) = t.take() {
                t.detach();
            }
        }
    }
}

/// Each runtime's own `yield_now` (tokio's defers the wake; hwsched's
/// requeues at the back of the local deque; async-executor has none, so a
/// plain wake-and-pending).
pub async fn yield_now(kind: Kind) {
    match kind {
        Kind::Hwsched => hwsched::yield_now().await,
        Kind::Tokio | Kind::TokioCurrentThread => tokio::task::yield_now().await,
        Kind::AsyncExecutor => YieldOnce(false).await,
    }
}

struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

struct ThreadWaker(thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A minimal block_on (thread park/unpark), for async-executor's threads
/// and its `Rt::block_on`.
pub fn block_on<F: Future>(f: F) -> F::Output {
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}
