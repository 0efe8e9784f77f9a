//! Tasks: metadata, the panic-catching wrapper, the registry of live tasks,
//! and `JoinHandle`.
//!
//! A task is an `async-task` task whose metadata is a [`TaskMeta`]. Its
//! future is wrapped in a [`TaskFuture`] that
//! - catches a panic in `poll` (the handle yields [`JoinError::Panicked`])
//!   and in the inner future's `Drop` (so no panic ever crosses into a
//!   worker's loop), and
//! - owns a slot in the runtime's [`Registry`], which keeps a waker of every
//!   live task so that shutdown and `abort` can reach a task that no queue
//!   holds (one pending on a waker that will never fire). Dropping the
//!   wrapper frees the slot.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crossbeam_utils::CachePadded;

use crate::park::NO_WORKER;
use crate::sync::Mutex;

/// Per-task scheduling metadata, read and written by placement.
#[derive(Debug)]
pub struct TaskMeta {
    /// The worker that last polled the task (the kernel's `task_cpu(p)`,
    /// "prev" in `select_idle_sibling`); `usize::MAX` before its first poll.
    pub last_worker: AtomicUsize,
    /// The worker this task was last placed near (the kernel's
    /// `p->recent_used_cpu`, seed 001 patch 3).
    pub recent_used: AtomicUsize,
    /// Set by `JoinHandle::abort`: the next time the task is scheduled it is
    /// dropped instead of polled.
    pub(crate) aborted: AtomicBool,
    /// The task's registry slot (shard, index, generation).
    pub(crate) slot: SlotKey,
}

impl TaskMeta {
    pub(crate) fn new(slot: SlotKey) -> Self {
        TaskMeta {
            last_worker: AtomicUsize::new(NO_WORKER),
            recent_used: AtomicUsize::new(NO_WORKER),
            aborted: AtomicBool::new(false),
            slot,
        }
    }
}

/// A runnable task of this runtime.
pub(crate) type Runnable = async_task::Runnable<TaskMeta>;

/// A panic payload.
pub type Panic = Box<dyn Any + Send + 'static>;

/// Why a [`JoinHandle`] has no value.
pub enum JoinError {
    /// The task was aborted, or dropped by shutdown before it finished.
    Cancelled,
    /// The task panicked; the payload is what `panic!` was given.
    Panicked(Panic),
}

impl JoinError {
    /// Whether the task was cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled)
    }

    /// Whether the task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panicked(_))
    }

    /// The panic payload. Panics if the task did not panic.
    pub fn into_panic(self) -> Panic {
        match self {
            JoinError::Panicked(p) => p,
            JoinError::Cancelled => panic!("JoinError::into_panic on a cancelled task"),
        }
    }

    fn panic_message(p: &Panic) -> &str {
        if let Some(s) = p.downcast_ref::<&str>() {
            s
        } else if let Some(s) = p.downcast_ref::<String>() {
            s
        } else {
            "<non-string panic payload>"
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Cancelled => f.write_str("Cancelled"),
            JoinError::Panicked(p) => write!(f, "Panicked({:?})", Self::panic_message(p)),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Cancelled => f.write_str("task was cancelled"),
            JoinError::Panicked(p) => write!(f, "task panicked: {}", Self::panic_message(p)),
        }
    }
}

impl std::error::Error for JoinError {}

/// An owned permission to await a spawned task's output.
///
/// Awaiting it yields `Ok(output)`, or `Err(JoinError::Cancelled)` if the
/// task was aborted or dropped by shutdown, or `Err(JoinError::Panicked(_))`
/// if it panicked. Dropping the handle detaches the task: it keeps running.
///
/// ```
/// let rt = hwsched::Runtime::builder().worker_threads(1).build()?;
/// let h = rt.spawn(async { 6 * 7 });
/// assert_eq!(rt.block_on(h).unwrap(), 42);
/// # Ok::<(), hwsched::BuildError>(())
/// ```
pub struct JoinHandle<T> {
    task: Option<async_task::FallibleTask<Result<T, Panic>, TaskMeta>>,
    /// The task's metadata, inside the task's allocation (FallibleTask does
    /// not expose it). Valid while `task` is `Some`: the handle holds a
    /// reference on the allocation, which never moves.
    meta: std::ptr::NonNull<TaskMeta>,
    registry: Arc<Registry>,
}

// SAFETY: the handle is a FallibleTask (Send/Sync when T: Send) plus a
// pointer to TaskMeta, which is Sync (atomics only) and lives in the task's
// shared allocation; async-task's own Task is Send + Sync for T: Send.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: as above; &JoinHandle only reads TaskMeta's atomics.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    pub(crate) fn new(
        task: async_task::Task<Result<T, Panic>, TaskMeta>,
        registry: Arc<Registry>,
    ) -> Self {
        let meta = std::ptr::NonNull::from(task.metadata());
        JoinHandle {
            task: Some(task.fallible()),
            meta,
            registry,
        }
    }

    /// Cancels the task. If it has not finished, its future is dropped the
    /// next time a worker would run it (promptly: it is woken for that) and
    /// awaiting the handle yields `Err(JoinError::Cancelled)`. A task that
    /// already finished keeps its output.
    pub fn abort(&self) {
        if self.task.is_some() {
            // SAFETY: `task` is Some, so the allocation holding the metadata
            // is alive (see the field's comment).
            let meta = unsafe { self.meta.as_ref() };
            // Release: pairs with the Acquire load in the worker before it
            // runs the task (worker.rs, run_task).
            meta.aborted.store(true, Ordering::Release);
            self.registry.wake(meta.slot);
        }
    }

    /// Whether the task has finished (completed, panicked or cancelled).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.detach();
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(task) = self.task.as_mut() else {
            panic!("JoinHandle polled after it returned Ready");
        };
        match Pin::new(task).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(out) => {
                self.task = None;
                Poll::Ready(match out {
                    None => Err(JoinError::Cancelled),
                    Some(Ok(v)) => Ok(v),
                    Some(Err(p)) => Err(JoinError::Panicked(p)),
                })
            }
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// The wrapper around every spawned future. See the module docs.
pub(crate) struct TaskFuture<F> {
    inner: ManuallyDrop<F>,
    done: bool,
    slot: SlotKey,
    registry: Arc<Registry>,
}

impl<F> TaskFuture<F> {
    pub(crate) fn new(inner: F, slot: SlotKey, registry: Arc<Registry>) -> Self {
        TaskFuture {
            inner: ManuallyDrop::new(inner),
            done: false,
            slot,
            registry,
        }
    }
}

impl<F: Future> Future for TaskFuture<F> {
    type Output = Result<F::Output, Panic>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `inner` is structurally pinned: it is never moved out of
        // `self` (it is polled in place, and dropped in place below or in
        // `Drop`); the other fields are not pinned and are only read or set.
        let this = unsafe { self.get_unchecked_mut() };
        assert!(!this.done, "TaskFuture polled after completion");
        let res = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: see above; `inner` is pinned in place and not dropped
            // (done is false).
            unsafe { Pin::new_unchecked(&mut *this.inner) }.poll(cx)
        }));
        let out = match res {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(v)) => Ok(v),
            Err(p) => {
                crate::worker::count_panic();
                Err(p)
            }
        };
        this.done = true;
        // Drop the finished future here, where a panic in its Drop can be
        // caught and reported, rather than inside async-task.
        let dropped = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: `done` was set, so `inner` is never touched again.
            unsafe { ManuallyDrop::drop(&mut this.inner) }
        }));
        Poll::Ready(match (out, dropped) {
            (Ok(v), Ok(())) => Ok(v),
            (Ok(_), Err(p)) => {
                crate::worker::count_panic();
                Err(p)
            }
            (Err(p), _) => Err(p),
        })
    }
}

impl<F> Drop for TaskFuture<F> {
    fn drop(&mut self) {
        if !self.done {
            // A cancelled task (abort, shutdown): a panic in the future's
            // Drop is swallowed here; there is nobody to report it to.
            let dropped = catch_unwind(AssertUnwindSafe(|| {
                // SAFETY: not done, so `inner` was not dropped yet; it is
                // dropped in place, which the pinning contract allows.
                unsafe { ManuallyDrop::drop(&mut self.inner) }
            }));
            if dropped.is_err() {
                crate::worker::count_panic();
            }
        }
        self.registry.remove(self.slot);
    }
}

/// Where a task's waker lives in the [`Registry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotKey {
    shard: u32,
    index: u32,
    generation: u32,
}

impl SlotKey {
    /// The key of a task spawned after shutdown: it names no slot.
    pub(crate) const DEAD: SlotKey = SlotKey {
        shard: 0,
        index: u32::MAX,
        generation: u32::MAX,
    };
}

#[derive(Default)]
struct Shard {
    slots: Vec<(u32, Option<Waker>)>,
    free: Vec<u32>,
    closed: bool,
}

/// A waker for every live task, sharded by the spawning worker so that spawn
/// and completion lock a shard that is rarely contended (async-executor keeps
/// one such slab; tokio shards its `OwnedTasks` the same way).
pub(crate) struct Registry {
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    spawned: CachePadded<std::sync::atomic::AtomicU64>,
    retired: CachePadded<std::sync::atomic::AtomicU64>,
}

impl Registry {
    pub(crate) fn new(shards: usize) -> Self {
        Registry {
            shards: (0..shards.max(1))
                .map(|_| CachePadded::new(Mutex::new(Shard::default())))
                .collect(),
            spawned: CachePadded::new(Default::default()),
            retired: CachePadded::new(Default::default()),
        }
    }

    /// Registers a new task under one lock of `shard`: `make` gets the
    /// task's key and returns the task and its waker, which the slot keeps.
    /// Once the registry is closed (shutdown) `make` gets
    /// [`SlotKey::DEAD`] and the second value is `false`: the caller drops
    /// the task at once.
    pub(crate) fn register<R>(
        &self,
        shard: usize,
        make: impl FnOnce(SlotKey) -> (R, Waker),
    ) -> (R, bool) {
        let shard_idx = shard % self.shards.len();
        let mut s = self.shards[shard_idx].lock();
        if s.closed {
            drop(s);
            return (make(SlotKey::DEAD).0, false);
        }
        let index = match s.free.pop() {
            Some(i) => i,
            None => {
                s.slots.push((0, None));
                (s.slots.len() - 1) as u32
            }
        };
        let generation = s.slots[index as usize].0;
        let key = SlotKey {
            shard: shard_idx as u32,
            index,
            generation,
        };
        // `make` only builds the task (an allocation); it never touches the
        // registry, so holding the shard lock here cannot deadlock.
        let (r, waker) = make(key);
        s.slots[index as usize].1 = Some(waker);
        drop(s);
        self.spawned.fetch_add(1, Ordering::Relaxed);
        (r, true)
    }

    fn remove(&self, key: SlotKey) {
        let waker = {
            let mut s = self.shards[key.shard as usize].lock();
            match s.slots.get_mut(key.index as usize) {
                Some(slot) if slot.0 == key.generation => {
                    slot.0 = slot.0.wrapping_add(1);
                    let w = slot.1.take();
                    s.free.push(key.index);
                    w
                }
                _ => None,
            }
        };
        if key != SlotKey::DEAD {
            self.retired.fetch_add(1, Ordering::Relaxed);
        }
        // Dropped outside the lock: dropping a waker may drop a task.
        drop(waker);
    }

    /// Wakes the task owning `key`, if it is still live.
    fn wake(&self, key: SlotKey) {
        let waker = {
            let s = self.shards[key.shard as usize].lock();
            match s.slots.get(key.index as usize) {
                Some((g, Some(w))) if *g == key.generation => Some(w.clone()),
                _ => None,
            }
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Closes every shard to new tasks and wakes every live task, so that a
    /// scheduler that is shutting down drops each one.
    pub(crate) fn close_and_wake_all(&self) {
        for shard in self.shards.iter() {
            let wakers: Vec<Waker> = {
                let mut s = shard.lock();
                s.closed = true;
                s.slots.iter().filter_map(|(_, w)| w.clone()).collect()
            };
            for w in wakers {
                w.wake();
            }
        }
    }

    pub(crate) fn spawned(&self) -> u64 {
        self.spawned.load(Ordering::Relaxed)
    }

    pub(crate) fn retired(&self) -> u64 {
        self.retired.load(Ordering::Relaxed)
    }

    pub(crate) fn live(&self) -> u64 {
        self.spawned().saturating_sub(self.retired())
    }
}

/// Yields to the scheduler once: the task is put at the back of its worker's
/// local queue and other queued tasks run first.
///
/// ```
/// let rt = hwsched::Runtime::builder().worker_threads(1).build()?;
/// rt.block_on(async {
///     hwsched::spawn(async { hwsched::yield_now().await; 1 }).await.unwrap()
/// });
/// # Ok::<(), hwsched::BuildError>(())
/// ```
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future of [`yield_now`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
