//! The blocking pool behind `spawn_blocking`: threads separate from the
//! workers, for closures that block (file I/O, a synchronous library call),
//! so that they never stall a worker (tokio's blocking pool).
//!
//! - A task's schedule function hands its runnable to
//!   [`BlockingPool::push`]. If a pool thread is idle, one is woken;
//!   otherwise, below [`BlockingConfig::max_threads`], a new thread is
//!   started; otherwise the runnable waits in a FIFO queue until a thread
//!   finishes its current task.
//! - A thread that has found no work for [`BlockingConfig::keep_alive`]
//!   exits; the pool starts threads again on demand.
//! - Each thread runs its tasks with the runtime as its context (the
//!   `context` closure given to [`BlockingPool::new`]), so that
//!   `hwsched::spawn` works inside a blocking closure.
//! - A task may carry a CPU set ([`affinity_masks`]): the thread running it
//!   first restricts itself to that set (best effort).
//! - [`BlockingPool::close`] refuses new work and cancels what has not
//!   started; [`BlockingPool::wait`] then waits, up to a deadline, for what
//!   is running ([`BlockingPool::shutdown`] is both). The runtime's shutdown
//!   calls them apart, with the cancelling of its pending tasks in between,
//!   so that a running closure waiting on a task sees it cancelled
//!   (`Runtime::shutdown`).
//!
//! This is not one of the runtime's lock-free scheduling protocols: one
//! `std` mutex and two condition variables, outside the loom shim.
//!
//! No panic escapes into a pool thread's loop: a task's panic is caught by
//! its [`TaskFuture`](crate::task::TaskFuture) (and again around
//! `Runnable::run`), the hooks and the context closure run inside
//! `catch_unwind`, and mutex poisoning is ignored (every critical section
//! leaves the state consistent before anything in it can panic).

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::Hook;
use crate::task::drop_task;
use crate::task::Runnable;
use crate::topology::{LevelKind, Topology};

/// Makes the runtime the calling thread's context; what it returns is a
/// guard that a pool thread keeps alive for its whole life and drops when it
/// exits (for the runtime: `Box::new(crate::runtime::block_on::enter(shared))`).
pub(crate) type ContextFn = Arc<dyn Fn() -> Box<dyn Any> + Send + Sync>;

/// How a [`BlockingPool`] runs its threads.
pub(crate) struct BlockingConfig {
    /// The most threads the pool runs at once (at least 1: `0` counts as 1).
    pub(crate) max_threads: usize,
    /// How long an idle thread waits for work before it exits.
    pub(crate) keep_alive: Duration,
    /// Each thread's stack size in bytes (`None`: the `std` default).
    pub(crate) stack_size: Option<usize>,
    /// The threads are named `{thread_name}-blocking-{n}`, `n` counting
    /// from 0 over the pool's life.
    pub(crate) thread_name: String,
    /// Run on each new thread before its first task.
    pub(crate) on_start: Option<Hook>,
    /// Run on each thread after its last task, when it exits.
    pub(crate) on_stop: Option<Hook>,
    /// CPU sets (OS indices of CPUs) that [`BlockingPool::push`]'s `mask`
    /// indexes, from [`affinity_masks`]; empty: no affinity.
    pub(crate) masks: Vec<Vec<usize>>,
}

/// A queued runnable and the index of the CPU set it should run on.
type Job = (Runnable, Option<usize>);

/// The pool's state, behind [`Inner::state`].
struct State {
    /// Runnables not yet taken by a thread, oldest first.
    queue: VecDeque<Job>,
    /// Threads that take work: started and not yet decided to exit. A
    /// thread leaves this count the moment it decides to exit (before its
    /// `on_stop` hook), since from then on it takes no more work.
    threads: usize,
    /// Threads waiting for work that no `push` has yet chosen to wake.
    idle: usize,
    /// Wake-ups that `push` has issued and no waiting thread has consumed
    /// yet (each one was taken off `idle` by the pusher; tokio's
    /// `num_notify`).
    notified: usize,
    /// Set by `shutdown` (and by dropping the pool): refuse new work.
    shutdown: bool,
    /// The number of the next thread (its name's suffix and its key in
    /// `handles`).
    next_id: usize,
    /// The handle of every thread that `shutdown` may have to join: those
    /// alive, and those that exited during a shutdown and are not joined
    /// yet. A thread that exits outside a shutdown (its keep-alive ran out)
    /// detaches itself, dropping its own handle.
    handles: HashMap<usize, JoinHandle<()>>,
    /// Threads that exited (after their `on_stop` and context guard),
    /// during a shutdown, whose handles `shutdown` has not joined yet.
    exited: Vec<usize>,
}

/// What the pool and its threads share.
struct Inner {
    state: Mutex<State>,
    /// Signalled by `push` (one thread) and by `shutdown` (all): work or
    /// shutdown.
    work: Condvar,
    /// Signalled when a thread exits during a shutdown.
    exits: Condvar,
    config: BlockingConfig,
    context: ContextFn,
}

impl Inner {
    /// Locks the state, ignoring poisoning: no critical section can leave
    /// the state half-updated (see the module docs).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A pool of threads that run blocking tasks; see the module docs.
pub(crate) struct BlockingPool {
    inner: Arc<Inner>,
}

#[cfg(test)]
thread_local! {
    /// Test hook: makes thread spawns from this thread fail.
    static FAIL_SPAWN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl BlockingPool {
    /// A pool with no threads yet; threads start on demand.
    ///
    /// `context` is called once on each new thread, before `on_start`; the
    /// thread keeps what it returns until it exits. The pool keeps
    /// `context` as long as it or any of its threads lives, so a closure
    /// that owns the runtime's shared state (an `Arc<Shared>`) while the
    /// shared state owns the pool is a reference cycle: capture a `Weak`
    /// and upgrade it in the closure.
    pub(crate) fn new(config: BlockingConfig, context: ContextFn) -> BlockingPool {
        BlockingPool {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    threads: 0,
                    idle: 0,
                    notified: 0,
                    shutdown: false,
                    next_id: 0,
                    handles: HashMap::new(),
                    exited: Vec::new(),
                }),
                work: Condvar::new(),
                exits: Condvar::new(),
                config,
                context,
            }),
        }
    }

    /// Queues `r` to run on a pool thread, on CPU set `mask` (an index into
    /// [`BlockingConfig::masks`]; `None`, or an index out of range: wherever
    /// the thread runs now).
    ///
    /// Wakes an idle thread, else starts one if fewer than `max_threads`
    /// exist, else leaves `r` queued (FIFO) for the next thread that
    /// finishes a task. After shutdown, `r` is dropped at once (its handle
    /// yields `Cancelled`). If a thread cannot be started, `r` stays queued
    /// when another thread exists to run it, and is otherwise dropped,
    /// together with anything else queued, so that no handle waits forever.
    /// Never panics (but a dropped task's destructor runs here, inside
    /// `catch_unwind`).
    pub(crate) fn push(&self, r: Runnable, mask: Option<usize>) {
        let inner = &self.inner;
        let mut st = inner.lock();
        if st.shutdown {
            drop(st);
            drop_task(r);
            return;
        }
        st.queue.push_back((r, mask));
        if st.idle > 0 {
            st.idle -= 1;
            st.notified += 1;
            drop(st);
            inner.work.notify_one();
            return;
        }
        if st.threads >= inner.config.max_threads.max(1) {
            // Every thread is busy: the first to finish takes it.
            return;
        }
        let id = st.next_id;
        // Spawned under the lock, so its handle is in `handles` before the
        // thread can take the lock to exit.
        // `std` panics rather than erring on a thread name with a NUL byte:
        // that counts as a failed spawn, too (the poisoning is ignored; the
        // state is consistent here).
        let spawned =
            catch_unwind(AssertUnwindSafe(|| spawn_thread(inner, id))).unwrap_or_else(|p| {
                crate::task::discard(p);
                Err(std::io::Error::other("thread spawn panicked"))
            });
        match spawned {
            Ok(handle) => {
                st.next_id += 1;
                st.threads += 1;
                st.handles.insert(id, handle);
            }
            Err(_) if st.threads > 0 => {
                // A running thread takes it when it finishes its task.
            }
            Err(_) => {
                // No thread will ever look at the queue (threads exit only
                // when it is empty, so everything in it was pushed since the
                // last one decided to exit): drop it all, so the handles
                // resolve; a later push tries to start a thread again.
                let orphans = std::mem::take(&mut st.queue);
                drop(st);
                orphans.into_iter().for_each(|(r, _)| drop_task(r));
            }
        }
    }

    /// Shuts the pool down: [`close`](Self::close), then
    /// [`wait`](Self::wait) until `deadline`; returns what `wait` returns.
    pub(crate) fn shutdown(&self, deadline: Option<Instant>) -> bool {
        self.close();
        self.wait(deadline)
    }

    /// The first half of a shutdown, which waits for nothing: later pushes
    /// drop their task at once (its handle yields `Cancelled`), every
    /// queued task that has not started is dropped, and idle threads are
    /// woken to exit; threads running a task exit when it returns. May be
    /// called more than once.
    pub(crate) fn close(&self) {
        let inner = &self.inner;
        let queued = {
            let mut st = inner.lock();
            st.shutdown = true;
            std::mem::take(&mut st.queue)
        };
        inner.work.notify_all();
        // Outside the lock: a task's destructor may push (and so lock).
        queued.into_iter().for_each(|(r, _)| drop_task(r));
    }

    /// The second half of a shutdown, after [`close`](Self::close): waits
    /// for the pool threads to exit until `deadline` (`None`: as long as it
    /// takes) and returns whether every pool thread exited (ran its
    /// `on_stop` and dropped its context), joining those that did.
    ///
    /// Called from a pool thread (a blocking closure shutting the runtime
    /// down), it does not wait for that thread, which exits when its
    /// closure returns; the result then tells about the others. It may be
    /// called again, e.g. to wait longer after a deadline passed.
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> bool {
        let inner = &self.inner;
        debug_assert!(inner.lock().shutdown, "BlockingPool::wait before close");
        let me = std::thread::current().id();
        let mut st = inner.lock();
        loop {
            let joinable: Vec<JoinHandle<()>> = {
                let State {
                    exited, handles, ..
                } = &mut *st;
                exited
                    .drain(..)
                    .filter_map(|id| handles.remove(&id))
                    .collect()
            };
            if !joinable.is_empty() {
                drop(st);
                // These threads have run everything of theirs but their
                // return (and thread-local destructors): a short wait.
                for h in joinable {
                    if let Err(p) = h.join() {
                        crate::task::discard(p);
                    }
                }
                st = inner.lock();
                continue;
            }
            if st.handles.values().all(|h| h.thread().id() == me) {
                return true;
            }
            st = match deadline {
                None => inner.exits.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    inner
                        .exits
                        .wait_timeout(st, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    /// Threads that take work (started, and not deciding to exit).
    pub(crate) fn threads(&self) -> usize {
        self.inner.lock().threads
    }

    /// Threads waiting for work that no push has chosen to wake.
    pub(crate) fn idle_threads(&self) -> usize {
        self.inner.lock().idle
    }
}

impl Drop for BlockingPool {
    /// Shuts down without waiting: queued tasks are dropped, idle threads
    /// exit, busy ones exit after their task (they keep what they need).
    fn drop(&mut self) {
        self.shutdown(Some(Instant::now()));
    }
}

/// Starts pool thread number `id`.
fn spawn_thread(inner: &Arc<Inner>, id: usize) -> std::io::Result<JoinHandle<()>> {
    #[cfg(test)]
    if FAIL_SPAWN.with(|f| f.get()) {
        return Err(std::io::Error::other("thread spawn failure (test)"));
    }
    let mut b =
        std::thread::Builder::new().name(format!("{}-blocking-{id}", inner.config.thread_name));
    if let Some(size) = inner.config.stack_size {
        b = b.stack_size(size);
    }
    let inner = inner.clone();
    b.spawn(move || run(inner, id))
}

/// Runs `f`, discarding a panic (and its payload, which may panic too).
fn call_catching(f: impl FnOnce()) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        crate::task::discard(p);
    }
}

/// A pool thread's life: context, `on_start`, tasks until idle for
/// `keep_alive` or shut down, `on_stop`.
fn run(inner: Arc<Inner>, id: usize) {
    let context = catch_unwind(AssertUnwindSafe(|| (inner.context)()))
        .map_err(crate::task::discard)
        .ok();
    if let Some(hook) = &inner.config.on_start {
        hook.run();
    }
    // The index of the CPU set this thread is restricted to, if any.
    let mut current: Option<usize> = None;
    let mut st = inner.lock();
    loop {
        if let Some((r, mask)) = st.queue.pop_front() {
            drop(st);
            if let Some(i) = mask {
                if current != Some(i) {
                    if let Some(cpus) = inner.config.masks.get(i) {
                        if set_affinity(cpus) {
                            current = Some(i);
                        }
                    }
                }
            }
            run_task(r);
            st = inner.lock();
            continue;
        }
        if st.shutdown {
            break;
        }
        let (guard, again) = wait_for_work(&inner, st);
        st = guard;
        if !again {
            break;
        }
    }
    // Decided to exit: take no more work, let a push start a replacement.
    st.threads -= 1;
    drop(st);
    if let Some(hook) = &inner.config.on_stop {
        hook.run();
    }
    call_catching(move || drop(context));
    let mut st = inner.lock();
    if st.shutdown {
        st.exited.push(id);
        drop(st);
        inner.exits.notify_all();
    } else {
        // Nobody will join it: detach (dropping the handle does).
        let own = st.handles.remove(&id);
        drop(st);
        drop(own);
    }
}

/// Waits, idle, up to `keep_alive` for a push's wake-up or shutdown. The
/// caller found the queue empty and the pool not shut down. Returns the
/// guard and whether to look for work again (`false`: time to exit).
fn wait_for_work<'a>(
    inner: &'a Inner,
    mut st: MutexGuard<'a, State>,
) -> (MutexGuard<'a, State>, bool) {
    // `None` (keep-alive too long to add to now): wait without a timeout.
    let deadline = Instant::now().checked_add(inner.config.keep_alive);
    st.idle += 1;
    loop {
        st = match deadline {
            None => inner.work.wait(st).unwrap_or_else(|e| e.into_inner()),
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                inner
                    .work
                    .wait_timeout(st, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
        };
        if st.notified > 0 {
            // A push took a thread off `idle` for this wake-up: whichever
            // waiting thread sees it first answers it.
            st.notified -= 1;
            return (st, true);
        }
        if st.shutdown {
            st.idle -= 1;
            return (st, true);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            st.idle -= 1;
            // Work left queued for busy threads: take it rather than exit.
            let again = !st.queue.is_empty();
            return (st, again);
        }
        // A spurious wake-up: wait again.
    }
}

/// Runs one task, unless it was aborted while queued (then it is dropped,
/// as a worker does).
fn run_task(r: Runnable) {
    // Relaxed (TaskMeta::is_aborted): the flag publishes no data; a stale
    // `false` runs a closure that was queued to run anyway.
    if r.metadata().is_aborted() {
        drop_task(r);
        return;
    }
    // The task wrapper catches panics in poll and drop; this catches what
    // async-task itself might raise, so nothing unwinds into the loop.
    call_catching(|| {
        r.run();
    });
}

/// Restricts the calling thread to the CPUs `cpus` (OS indices; those at
/// or above `CPU_SETSIZE` are left out). Returns whether it did; failure
/// (no such CPU, not allowed by the process's cpuset) leaves the thread's
/// affinity as it was.
#[cfg(target_os = "linux")]
fn set_affinity(cpus: &[usize]) -> bool {
    // SAFETY: `cpu_set_t` is a plain array of integers, for which all zero
    // bits is a valid value (the empty set).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let mut any = false;
    for &cpu in cpus {
        if cpu < libc::CPU_SETSIZE as usize {
            // SAFETY: `cpu` is below CPU_SETSIZE, the number of bits of
            // `set`, so the bit it sets is inside `set`.
            unsafe { libc::CPU_SET(cpu, &mut set) };
            any = true;
        }
    }
    if !any {
        return false;
    }
    // SAFETY: pid 0 is the calling thread; `set` is a valid, initialized
    // `cpu_set_t` of the size passed, which the kernel only reads.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    rc == 0
}

/// Affinity is not supported here: threads run wherever the OS puts them.
#[cfg(not(target_os = "linux"))]
fn set_affinity(_cpus: &[usize]) -> bool {
    false
}

/// The CPU sets for blocking threads, one per group of nearby workers.
///
/// For each worker: the OS indices of the workers in the span of its NUMA
/// level, else of its package level, else of every worker (the topology
/// has neither level, or they span all workers). The sets are deduplicated
/// (sorted, equal sets once); returns the sets and, per worker, the index
/// of its set. So a set covers the CPUs of the worker's node that run
/// workers, not every CPU of the node: a blocking task pushed with its
/// spawner's set runs near that worker's memory, on the runtime's CPUs.
///
/// Meaningful only for a topology of this machine
/// ([`Topology::is_system`]); for a synthetic or XML one the indices are
/// not real CPUs.
pub(crate) fn affinity_masks(topo: &Topology) -> (Vec<Vec<usize>>, Vec<usize>) {
    let mut masks: Vec<Vec<usize>> = Vec::new();
    let mut index: HashMap<Vec<usize>, usize> = HashMap::new();
    let mut of_worker = Vec::with_capacity(topo.workers());
    for w in 0..topo.workers() {
        // The smaller of the worker's NUMA node and its package: the node's
        // span also when it is no level of its own (under sub-NUMA
        // clustering it is the LLC level's), the package when one node
        // holds several packages (or hwloc reports a single node).
        let numa = topo.numa_span(w);
        let package = topo
            .level(w, LevelKind::Package)
            .map(|l| l.span.hull().clone());
        let span = match package {
            Some(p) if numa.len() <= 1 || p.len() < numa.len() => p,
            _ if numa.len() > 1 => numa,
            _ => topo.root_span(),
        };
        let mut cpus: Vec<usize> = span.map(|x| topo.place(x).os_index).collect();
        cpus.sort_unstable();
        cpus.dedup();
        let i = *index.entry(cpus).or_insert_with_key(|cpus| {
            masks.push(cpus.clone());
            masks.len() - 1
        });
        of_worker.push(i);
    }
    (masks, of_worker)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::task::{JoinError, Registry, TaskFuture, TaskMeta};
    use crate::topology::TopologySource;
    use std::future::Future;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::task::{Context, Poll, Wake, Waker};

    type Handle<T> = crate::task::JoinHandle<T>;

    const LONG: Duration = Duration::from_secs(10);

    /// A pool and a registry to create tasks on it.
    struct Env {
        pool: Arc<BlockingPool>,
        registry: Arc<Registry>,
    }

    /// A configuration without hooks, affinity or custom stack.
    fn config(max_threads: usize, keep_alive: Duration) -> BlockingConfig {
        BlockingConfig {
            max_threads,
            keep_alive,
            stack_size: None,
            thread_name: "test".into(),
            on_start: None,
            on_stop: None,
            masks: Vec::new(),
        }
    }

    /// A context closure that sets no context.
    fn no_context() -> ContextFn {
        Arc::new(|| Box::new(()))
    }

    impl Env {
        /// A pool without a context.
        fn new(config: BlockingConfig) -> Env {
            Env::with_context(config, no_context())
        }

        /// A pool whose threads call `context`.
        fn with_context(config: BlockingConfig, context: ContextFn) -> Env {
            Env {
                pool: Arc::new(BlockingPool::new(config, context)),
                registry: Arc::new(Registry::new(1)),
            }
        }

        /// Spawns `f` on the pool as `spawn_blocking` will: a task whose
        /// schedule function pushes it (and keeps the registry alive).
        fn spawn<T: Send + 'static>(
            &self,
            mask: Option<usize>,
            f: impl FnOnce() -> T + Send + 'static,
        ) -> Handle<T> {
            let pool = self.pool.clone();
            let registry = self.registry.clone();
            let (runnable, task) = async_task::Builder::new().metadata(TaskMeta::new()).spawn(
                |meta: &TaskMeta| TaskFuture::new(async move { f() }, meta, &self.registry),
                move |r: Runnable| {
                    let _alive = &registry;
                    pool.push(r, mask)
                },
            );
            let handle = Handle::new(task, &self.registry, runnable.waker());
            runnable.schedule();
            handle
        }
    }

    /// Wakes the thread that runs `block_on`.
    struct ThreadWaker {
        thread: std::thread::Thread,
        woken: AtomicBool,
    }

    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.woken.store(true, Ordering::Release);
            self.thread.unpark();
        }
    }

    /// Polls `f` on this thread until it is ready (at most `LONG`).
    fn block_on<F: Future>(f: F) -> F::Output {
        let w = Arc::new(ThreadWaker {
            thread: std::thread::current(),
            woken: AtomicBool::new(false),
        });
        let waker = Waker::from(w.clone());
        let mut cx = Context::from_waker(&waker);
        let mut f = std::pin::pin!(f);
        let deadline = Instant::now() + LONG;
        loop {
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
            while !w.woken.swap(false, Ordering::Acquire) {
                let now = Instant::now();
                assert!(now < deadline, "block_on: not ready after {LONG:?}");
                std::thread::park_timeout(deadline - now);
            }
        }
    }

    /// Waits until `cond` holds (at most `LONG`).
    fn wait_until(mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + LONG;
        while !cond() {
            assert!(
                Instant::now() < deadline,
                "condition not met after {LONG:?}"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn many_closures_run_on_at_most_max_threads() {
        let env = Env::new(config(8, Duration::from_secs(1)));
        let running = Arc::new(AtomicUsize::new(0));
        let peak_running = Arc::new(AtomicUsize::new(0));
        let peak_threads = Arc::new(AtomicUsize::new(0));
        // Every closure waits at the gate until all 64 are pushed: none can
        // finish (and free its thread for the next) during the pushes, so the
        // pool must start all 8 threads, and no more.
        let gate = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..64)
            .map(|i| {
                let (running, peak_running) = (running.clone(), peak_running.clone());
                let (pool, peak_t) = (env.pool.clone(), peak_threads.clone());
                let gate = gate.clone();
                let h = env.spawn(None, move || {
                    let n = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak_running.fetch_max(n, Ordering::SeqCst);
                    peak_t.fetch_max(pool.threads(), Ordering::SeqCst);
                    while !gate.load(Ordering::Acquire) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    running.fetch_sub(1, Ordering::SeqCst);
                    i
                });
                peak_threads.fetch_max(env.pool.threads(), Ordering::SeqCst);
                h
            })
            .collect();
        assert_eq!(env.pool.threads(), 8);
        // All 8 threads take a closure and hold it at the gate together.
        wait_until(|| running.load(Ordering::SeqCst) == 8);
        // Release pairs with the closures' Acquire load of the gate.
        gate.store(true, Ordering::Release);
        for (i, h) in handles.into_iter().enumerate() {
            assert_eq!(block_on(h).unwrap(), i);
            peak_threads.fetch_max(env.pool.threads(), Ordering::SeqCst);
        }
        assert_eq!(peak_threads.load(Ordering::SeqCst), 8);
        assert_eq!(peak_running.load(Ordering::SeqCst), 8, "peak concurrency");
        assert!(env.pool.shutdown(None));
        assert_eq!(env.pool.threads(), 0);
    }

    #[test]
    fn idle_threads_exit_after_keep_alive() {
        let keep_alive = Duration::from_millis(50);
        let stops = Arc::new(AtomicUsize::new(0));
        let mut cfg = config(4, keep_alive);
        let s = stops.clone();
        cfg.on_stop = Some(Hook(Arc::new(move || {
            s.fetch_add(1, Ordering::SeqCst);
        })));
        let env = Env::new(cfg);
        // A barrier of 4 makes the pool start 4 threads.
        let barrier = Arc::new(std::sync::Barrier::new(4));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let b = barrier.clone();
                env.spawn(None, move || {
                    b.wait();
                })
            })
            .collect();
        let t = Instant::now();
        for h in handles {
            block_on(h).unwrap();
        }
        let done = Instant::now();
        let (threads, idle) = (env.pool.threads(), env.pool.idle_threads());
        if done.elapsed() < keep_alive / 2 {
            // Too soon for any to have given up (unless this machine
            // stalled this thread).
            assert_eq!(threads, 4);
            assert!(idle <= 4);
        }
        wait_until(|| env.pool.threads() == 0);
        assert!(t.elapsed() >= keep_alive, "exited after {:?}", t.elapsed());
        assert_eq!(env.pool.idle_threads(), 0);
        wait_until(|| stops.load(Ordering::SeqCst) == 4);
        // The pool starts a thread again on demand.
        assert_eq!(block_on(env.spawn(None, || 7)).unwrap(), 7);
        assert_eq!(env.pool.threads(), 1);
        assert!(env.pool.shutdown(None));
        assert_eq!(stops.load(Ordering::SeqCst), 5);
    }

    #[test]
    fn panicking_closure_yields_panicked_and_thread_survives() {
        let env = Env::new(config(1, LONG));
        let h = env.spawn(None, || -> u32 { panic!("boom in a blocking closure") });
        match block_on(h) {
            Err(JoinError::Panicked(p)) => {
                assert_eq!(p.message(), Some("boom in a blocking closure"))
            }
            other => panic!("expected a panic, got {other:?}"),
        }
        let name = block_on(env.spawn(None, || std::thread::current().name().map(str::to_owned)));
        assert_eq!(name.unwrap().as_deref(), Some("test-blocking-0"));
        assert_eq!(env.pool.threads(), 1);
        assert!(env.pool.shutdown(None));
    }

    #[test]
    fn shutdown_cancels_queued_and_waits_for_running() {
        let env = Env::new(config(1, LONG));
        let (started_tx, started_rx) = mpsc::channel();
        let ran = Arc::new(AtomicUsize::new(0));
        // The running closure holds its thread until released: the shutdown
        // must cancel the queued ones and then wait for it.
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let a = env.spawn(None, move || {
            started_tx.send(()).unwrap();
            release_rx.recv_timeout(LONG).unwrap();
            1
        });
        let queued: Vec<_> = (0..3)
            .map(|i| {
                let ran = ran.clone();
                env.spawn(None, move || {
                    ran.fetch_add(1, Ordering::SeqCst);
                    i
                })
            })
            .collect();
        started_rx.recv_timeout(LONG).unwrap();
        let pool = env.pool.clone();
        let shutdown = std::thread::spawn(move || pool.shutdown(None));
        for h in queued {
            assert!(block_on(h).unwrap_err().is_cancelled());
        }
        // The queued ones are cancelled and the running one is not done:
        // the shutdown is still waiting for it.
        assert!(!shutdown.is_finished());
        release_tx.send(()).unwrap();
        assert!(shutdown.join().unwrap());
        assert_eq!(env.pool.threads(), 0);
        assert_eq!(block_on(a).unwrap(), 1);
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        // Later pushes are dropped at once.
        assert!(block_on(env.spawn(None, || 4)).unwrap_err().is_cancelled());
        assert_eq!(env.pool.threads(), 0);
    }

    #[test]
    fn shutdown_gives_up_at_its_deadline() {
        let env = Env::new(config(2, LONG));
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let a = env.spawn(None, move || {
            started_tx.send(()).unwrap();
            release_rx.recv_timeout(LONG).is_ok()
        });
        started_rx.recv_timeout(LONG).unwrap();
        let t = Instant::now();
        assert!(!env.pool.shutdown(Some(t + Duration::from_millis(30))));
        assert!(t.elapsed() >= Duration::from_millis(30));
        release_tx.send(()).unwrap();
        assert!(env.pool.shutdown(None));
        assert!(block_on(a).unwrap());
    }

    #[test]
    fn shutdown_from_a_pool_thread_does_not_wait_for_itself() {
        let env = Env::new(config(2, LONG));
        let pool = env.pool.clone();
        let h = env.spawn(None, move || pool.shutdown(None));
        assert!(block_on(h).unwrap());
        assert!(env.pool.shutdown(None));
        assert_eq!(env.pool.threads(), 0);
    }

    #[test]
    fn aborted_while_queued_is_dropped_not_run() {
        let env = Env::new(config(1, LONG));
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let a = env.spawn(None, move || {
            started_tx.send(()).unwrap();
            release_rx.recv_timeout(LONG).is_ok()
        });
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let b = env.spawn(None, move || r.store(true, Ordering::SeqCst));
        started_rx.recv_timeout(LONG).unwrap();
        b.abort();
        release_tx.send(()).unwrap();
        assert!(block_on(a).unwrap());
        assert!(block_on(b).unwrap_err().is_cancelled());
        assert!(!ran.load(Ordering::SeqCst));
        assert!(env.pool.shutdown(None));
    }

    #[test]
    fn hooks_run_once_per_thread_around_its_tasks() {
        let events: Arc<Mutex<Vec<(String, &'static str)>>> = Arc::default();
        let log = |what: &'static str| {
            let events = events.clone();
            Arc::new(move || {
                let name = std::thread::current().name().unwrap_or("?").to_owned();
                events.lock().unwrap().push((name, what));
            })
        };
        let mut cfg = config(3, LONG);
        cfg.thread_name = "hooks".into();
        cfg.on_start = Some(Hook(log("start")));
        cfg.on_stop = Some(Hook(log("stop")));
        let env = Env::new(cfg);
        let handles: Vec<_> = (0..12)
            .map(|_| {
                let task = log("task");
                env.spawn(None, move || {
                    task();
                    std::thread::sleep(Duration::from_millis(5));
                })
            })
            .collect();
        for h in handles {
            block_on(h).unwrap();
        }
        assert!(env.pool.shutdown(None));
        let events = events.lock().unwrap().clone();
        let mut names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert!((1..=3).contains(&names.len()), "{names:?}");
        let mut tasks = 0;
        for name in names {
            assert!(name.starts_with("hooks-blocking-"), "{name}");
            let mine: Vec<&str> = events
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, w)| *w)
                .collect();
            assert_eq!(mine.first(), Some(&"start"), "{name}: {mine:?}");
            assert_eq!(mine.last(), Some(&"stop"), "{name}: {mine:?}");
            assert_eq!(mine.iter().filter(|w| **w == "start").count(), 1);
            assert_eq!(mine.iter().filter(|w| **w == "stop").count(), 1);
            tasks += mine.iter().filter(|w| **w == "task").count();
        }
        assert_eq!(tasks, 12);
    }

    #[test]
    fn panicking_hooks_and_context_lose_nothing() {
        let mut cfg = config(2, Duration::from_millis(20));
        cfg.on_start = Some(Hook(Arc::new(|| panic!("on_start panics"))));
        cfg.on_stop = Some(Hook(Arc::new(|| panic!("on_stop panics"))));
        let env = Env::with_context(cfg, Arc::new(|| panic!("context panics")));
        let handles: Vec<_> = (0..8).map(|i| env.spawn(None, move || i * 2)).collect();
        for (i, h) in handles.into_iter().enumerate() {
            assert_eq!(block_on(h).unwrap(), i * 2);
        }
        // Threads exiting by keep-alive run the panicking on_stop, too.
        wait_until(|| env.pool.threads() == 0);
        assert_eq!(block_on(env.spawn(None, || 3)).unwrap(), 3);
        assert!(env.pool.shutdown(None));
    }

    thread_local! {
        /// Set on a thread while the test's context guard lives.
        static IN_CONTEXT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// A context guard: leaves the context and counts itself out.
    struct Guard(Arc<AtomicUsize>);

    impl Drop for Guard {
        fn drop(&mut self) {
            IN_CONTEXT.with(|c| c.set(false));
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn tasks_run_inside_the_context_for_the_threads_life() {
        let live = Arc::new(AtomicUsize::new(0));
        let calls = Arc::new(AtomicUsize::new(0));
        let (l, c) = (live.clone(), calls.clone());
        let context: ContextFn = Arc::new(move || {
            IN_CONTEXT.with(|x| x.set(true));
            l.fetch_add(1, Ordering::SeqCst);
            c.fetch_add(1, Ordering::SeqCst);
            Box::new(Guard(l.clone()))
        });
        let env = Env::with_context(config(1, LONG), context);
        for _ in 0..3 {
            assert!(block_on(env.spawn(None, || IN_CONTEXT.with(|x| x.get()))).unwrap());
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(live.load(Ordering::SeqCst), 1);
        assert!(env.pool.shutdown(None));
        assert_eq!(live.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn failed_thread_spawn_never_loses_a_task() {
        // No thread at all: the task is dropped, its handle resolves.
        let env = Env::new(config(4, LONG));
        FAIL_SPAWN.with(|f| f.set(true));
        let h = env.spawn(None, || 1);
        FAIL_SPAWN.with(|f| f.set(false));
        assert!(block_on(h).unwrap_err().is_cancelled());
        assert_eq!(env.pool.threads(), 0);
        // A later push tries again.
        assert_eq!(block_on(env.spawn(None, || 2)).unwrap(), 2);
        assert!(env.pool.shutdown(None));

        // Another thread exists: the task waits for it.
        let env = Env::new(config(4, LONG));
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let a = env.spawn(None, move || {
            started_tx.send(()).unwrap();
            release_rx.recv_timeout(LONG).is_ok()
        });
        started_rx.recv_timeout(LONG).unwrap();
        FAIL_SPAWN.with(|f| f.set(true));
        let b = env.spawn(None, || 3);
        let c = env.spawn(None, || 4);
        FAIL_SPAWN.with(|f| f.set(false));
        assert_eq!(env.pool.threads(), 1);
        release_tx.send(()).unwrap();
        assert!(block_on(a).unwrap());
        assert_eq!(block_on(b).unwrap(), 3);
        assert_eq!(block_on(c).unwrap(), 4);
        assert!(env.pool.shutdown(None));
    }

    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_real_spawn_failure_cancels_the_task() {
        // A stack larger than any address space: the spawn fails.
        let mut cfg = config(2, LONG);
        cfg.stack_size = Some(1 << 50);
        let env = Env::new(cfg);
        assert!(block_on(env.spawn(None, || 1)).unwrap_err().is_cancelled());
        assert_eq!(env.pool.threads(), 0);
        assert!(env.pool.shutdown(None));
    }

    #[test]
    fn a_panicking_spawn_cancels_the_task() {
        // `std` panics on a thread name with a NUL byte.
        let mut cfg = config(2, LONG);
        cfg.thread_name = "bad\0name".into();
        let env = Env::new(cfg);
        assert!(block_on(env.spawn(None, || 1)).unwrap_err().is_cancelled());
        assert_eq!(env.pool.threads(), 0);
        assert!(env.pool.shutdown(None));
    }

    /// The CPUs the calling thread may run on.
    #[cfg(target_os = "linux")]
    fn current_affinity() -> Vec<usize> {
        // SAFETY: all zero bits is a valid (empty) `cpu_set_t`.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: pid 0 is this thread; `set` is a writable `cpu_set_t` of
        // the size passed.
        let rc =
            unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        assert_eq!(
            rc,
            0,
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        );
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `cpu` is below CPU_SETSIZE, inside `set`.
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
            .collect()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_takes_its_tasks_cpu_set() {
        let allowed = current_affinity();
        assert!(!allowed.is_empty());
        let first = allowed[0];
        let last = allowed[allowed.len() - 1];
        let mut cfg = config(1, LONG);
        cfg.masks = vec![allowed.clone(), vec![first], vec![last]];
        let masks = cfg.masks.clone();
        let env = Env::new(cfg);
        // One thread, so it moves from set to set.
        for i in [1, 0, 2, 1, 1, 0] {
            let got = block_on(env.spawn(Some(i), current_affinity)).unwrap();
            assert_eq!(got, masks[i], "mask {i}");
        }
        // No mask: the thread stays where it is.
        let _ = block_on(env.spawn(Some(1), current_affinity)).unwrap();
        let got = block_on(env.spawn(None, current_affinity)).unwrap();
        assert_eq!(got, masks[1]);
        // An index out of range is ignored.
        let got = block_on(env.spawn(Some(9), current_affinity)).unwrap();
        assert_eq!(got, masks[1]);
        assert!(env.pool.shutdown(None));
    }

    /// A synthetic topology with a worker per PU.
    fn synthetic(desc: &str) -> Topology {
        Topology::new(&TopologySource::Synthetic(desc.into()), None)
            .unwrap_or_else(|e| panic!("{desc}: {e}"))
    }

    /// The OS indices of the workers in `span`.
    fn os(topo: &Topology, span: std::ops::Range<usize>) -> Vec<usize> {
        span.map(|w| topo.place(w).os_index).collect()
    }

    #[test]
    fn masks_follow_numa_nodes() {
        let topo = synthetic("pack:2 numa:1 core:2 pu:1");
        assert_eq!(topo.workers(), 4);
        let (masks, of) = affinity_masks(&topo);
        assert_eq!(masks, vec![os(&topo, 0..2), os(&topo, 2..4)]);
        assert_eq!(masks, vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(of, vec![0, 0, 1, 1]);

        let topo = synthetic("numa:2 core:2 pu:1");
        let (masks, of) = affinity_masks(&topo);
        assert_eq!(masks, vec![os(&topo, 0..2), os(&topo, 2..4)]);
        assert_eq!(of, vec![0, 0, 1, 1]);

        // Two nodes per package: the node, not the package.
        let topo = synthetic("pack:2 numa:2 core:2 pu:2");
        let (masks, of) = affinity_masks(&topo);
        assert_eq!(masks.len(), 4);
        for (n, mask) in masks.iter().enumerate() {
            assert_eq!(*mask, os(&topo, 4 * n..4 * n + 4));
        }
        assert_eq!(of, (0..16).map(|w| w / 4).collect::<Vec<_>>());
    }

    #[test]
    fn masks_fall_back_to_packages_then_everything() {
        let topo = synthetic("pack:2 core:3 pu:1");
        let (masks, of) = affinity_masks(&topo);
        assert_eq!(masks, vec![os(&topo, 0..3), os(&topo, 3..6)]);
        assert_eq!(of, vec![0, 0, 0, 1, 1, 1]);

        let topo = synthetic("core:4 pu:2");
        let (masks, of) = affinity_masks(&topo);
        assert_eq!(masks, vec![os(&topo, 0..8)]);
        assert_eq!(masks[0], (0..8).collect::<Vec<_>>());
        assert_eq!(of, vec![0; 8]);

        // Fewer workers than PUs: only the workers' CPUs.
        let topo = Topology::new(
            &TopologySource::Synthetic("pack:2 core:4 pu:1".into()),
            Some(3),
        )
        .unwrap();
        let (masks, of) = affinity_masks(&topo);
        assert_eq!(of.len(), 3);
        for (w, &i) in of.iter().enumerate() {
            let span = topo
                .level(w, LevelKind::Package)
                .map_or(0..3, |l| l.span.hull().clone());
            assert_eq!(masks[i], os(&topo, span), "worker {w}");
        }
        // A worker alone in its package has no package level: it gets
        // every worker's CPUs.
        assert!(masks.contains(&os(&topo, 0..3)), "{masks:?}");
    }
}
