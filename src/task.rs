//! Tasks: metadata, the panic-catching wrapper, the registry of live tasks,
//! and `JoinHandle`.
//!
//! A task is an `async-task` task whose metadata is a [`TaskMeta`]. Its
//! future is wrapped in a [`TaskFuture`] that
//! - catches a panic in `poll` (the handle yields [`JoinError::Panicked`])
//!   and in the inner future's `Drop` (so no panic ever crosses into a
//!   worker's loop), and
//! - registers the task in the runtime's [`Registry`] the first time it
//!   returns `Pending`: the registry keeps a waker of every task that is
//!   waiting on something, so that shutdown and `abort` can reach a task no
//!   queue holds (one pending on a waker that will never fire). A task that
//!   completes in its first poll (most of them) never touches the registry;
//!   one that is queued is reached through its queue. Dropping the wrapper
//!   frees the slot.
//!
//! A task's output (its value, or the payload of its panic) travels inside
//! an [`Output`], which drops what it holds inside `catch_unwind`:
//! async-task drops a detached task's output under its abort-on-panic
//! guard, and a `JoinHandle` dropped unawaited drops it wherever the handle
//! goes (a worker, a destructor running during unwinding, after the runtime
//! is gone). A panic there is counted like one in a task's poll or drop and
//! discarded. What the handle hands to an awaiter is the user's to drop.
//!
//! # Abort
//!
//! `abort` ([`TaskMeta::abort`]) sets the task's `aborted` flag; a worker
//! that is about to run an aborted task drops it instead
//! ([`TaskMeta::is_aborted`]). A task that waits on a waker that never
//! fires is never run again, so the abort must also wake it, and it finds
//! its waker through the registry slot that the task publishes at its
//! first `Pending` ([`TaskFuture`]'s `register`: [`Registry::register`],
//! then [`TaskMeta::publish_slot`]). The two sides race, store-buffering
//! style:
//!
//! | abort | register |
//! | --- | --- |
//! | `aborted = true` | `slot = key` (Release) |
//! | `fence(SeqCst)` | `fence(SeqCst)` |
//! | read `slot` (Acquire); if set, wake it through the registry | read `aborted`; if set, wake itself |
//!
//! Whichever fence comes second, its side sees the other's store, so at
//! least one wake happens (two are harmless: async-task queues a task once).
//!
//! An abort can also come while the task is queued by another wake, after
//! the worker read the flag: the abort's wake then queues nothing (the task
//! is queued already), and the poll may return `Pending` again. So every
//! later `Pending` re-checks the flag ([`TaskMeta::recheck_aborted`], a
//! plain load) and wakes the task if it is set. No fence is needed: the
//! re-check relies on the poll that a wake leads to seeing what the waker
//! wrote before it woke (how a channel's receiver sees the message).
//! std's `Waker` docs promise only that a poll follows; the ordering is
//! async-task's (4.7.1, vendored in `vendor/async-task` with a change to
//! its poll's epilogue that keeps these edges: re-check this on any
//! upgrade), with
//! its state word: a wake of a queued task still writes it (an `AcqRel`
//! compare-exchange of the state with itself, "publishing our current view
//! of the memory"), and the run that starts the poll swaps `SCHEDULED` for
//! `RUNNING` with an `AcqRel` compare-exchange. Both are read-modify-writes
//! of one word, so one comes first: if the abort's wake does, the run
//! acquires it and the re-check sees the flag; if the run does, the wake
//! finds the task running (async-task queues it again after the poll),
//! idle again (the wake queues it) or completed (nothing to abort), and a
//! queued task's flag reaches the worker's check through the queue. A task
//! aborted while queued may thus be polled once more, never left waiting.
//! (The re-check had a `fence(SeqCst)` of its own, pairing with the
//! abort's, before: a full barrier per `Pending` that the state word's
//! order makes redundant.)
//! The pair of fences that remains (abort and `publish_slot`) was `SeqCst`
//! stores and loads before; fences say the same in C11, and they are what
//! loom checks exactly (loom 0.7 treats `SeqCst` accesses as `AcqRel` and
//! reported a false lost abort with them).
//! Shutdown closes the registry under each shard's lock
//! ([`Registry::close_and_wake_all`]): a registration either comes first,
//! and is woken by the close, or finds the shard closed and wakes itself.
//! Both races are model-checked on this code (`loom-tests/tests/abort.rs`).
//!
//! What the user is promised on top (a task is not polled again once its
//! abort is observed; each output and each future is dropped exactly once,
//! on every path; the completion wakes the waker a `JoinHandle` registered)
//! is checked by `loom-tests/tests/task_layer.rs` and `tests/task_layer.rs`,
//! which fail, not hang, when a step above is skipped or misordered (the
//! logic mutations of `scripts/mutate.sh`).
//!
//! Raw pointers, not `Arc`s, lead from a task to the registry: the registry
//! lives in the runtime's shared state, which the task's schedule function
//! keeps alive (`Arc<Shared>`) until async-task destroys the task, after its
//! future and every handle are gone. So a spawn clones exactly one `Arc`.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll, Waker};

use crossbeam_utils::CachePadded;

use crate::sched::park::NO_WORKER;
use crate::sync::{fence, AtomicBool, AtomicU64, Mutex, Ordering};

/// Per-task scheduling metadata, read and written by placement.
#[derive(Debug)]
pub struct TaskMeta {
    /// The worker that last polled the task (the kernel's `task_cpu(p)`,
    /// "prev" in `select_idle_sibling`); `usize::MAX` before its first poll.
    ///
    /// This and `recent_used` are `std` atomics, outside the loom shim:
    /// placement hints, only ever accessed `Relaxed` and part of no
    /// protocol, passed to the public policy function
    /// `policy::select_idle_sibling`, whose signature takes `std`'s type.
    pub last_worker: std::sync::atomic::AtomicUsize,
    /// The worker this task was last placed near (the kernel's
    /// `p->recent_used_cpu`, seed 001 patch 3).
    pub recent_used: std::sync::atomic::AtomicUsize,
    /// Set by `JoinHandle::abort`: the next time the task is scheduled it is
    /// dropped instead of polled.
    pub(crate) aborted: AtomicBool,
    /// The task's registry slot, packed ([`SlotKey::pack`]); `NO_SLOT` until
    /// its first `Pending`.
    pub(crate) slot: AtomicU64,
    /// Where the task was spawned (`#[track_caller]` on every spawn
    /// function): named by the long-poll report (timing.rs).
    pub(crate) spawned_at: &'static std::panic::Location<'static>,
    /// When the task last became runnable (ns on the runtime's clock; 0:
    /// not stamped), with poll timing on (timing.rs). A `std` atomic,
    /// outside the loom shim: statistics, `Relaxed`, part of no protocol.
    pub(crate) runnable_at: std::sync::atomic::AtomicU64,
    /// A watcher took private work from behind one of this task's polls
    /// (src/sched/README.md, "Long polls"): before its next poll with private work
    /// behind it, its worker makes that work stealable. A `std` atomic,
    /// outside the loom shim: a hint, `Relaxed`, part of no protocol.
    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    pub(crate) hog: std::sync::atomic::AtomicBool,
    /// Two polls of the task on the tokio bridge's thread in a row ran long
    /// (tokio_compat.rs): the bridge does not poll it again. A hint,
    /// `Relaxed`, as `hog`.
    #[cfg(feature = "tokio-compat")]
    pub(crate) off_bridge: std::sync::atomic::AtomicBool,
    /// The task's id in a trace (trace/mod.rs).
    #[cfg(feature = "trace")]
    id: u64,
    /// loom only: async-task's state word as loom sees it. Its
    /// read-modify-writes are `std` atomics, invisible to loom, so the
    /// order they give an abort's wake and the next poll (module docs,
    /// "Abort") is modelled here: an `AcqRel` RMW just before the abort's
    /// wake, and one at the start of every poll, just after async-task's
    /// run. It may order a wake that came after the run's RMW before the
    /// poll (an edge async-task does not give); that wake finds the task
    /// running or idle and queues it again either way.
    #[cfg(loom)]
    state_order: crate::sync::AtomicUsize,
}

const NO_SLOT: u64 = u64::MAX;

/// Trace ids handed to a thread at a time: a spawn takes the next of its
/// thread's block, and one shared read-modify-write per block.
#[cfg(feature = "trace")]
const TRACE_ID_BLOCK: u64 = 1024;

#[cfg(feature = "trace")]
static TRACE_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

#[cfg(feature = "trace")]
thread_local! {
    /// This thread's block of trace ids: the next one and the block's end.
    static TRACE_BLOCK: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
    /// Whether the last poll on this thread finished its task (read by
    /// the trace's poll end).
    static POLL_READY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A new task's trace id: unique in the process, never 0.
#[cfg(feature = "trace")]
fn next_trace_id() -> u64 {
    TRACE_BLOCK.with(|b| {
        let (mut next, mut end) = b.get();
        if next == end {
            // Relaxed: unique numbers are all that is asked.
            next = TRACE_IDS.fetch_add(TRACE_ID_BLOCK, std::sync::atomic::Ordering::Relaxed);
            end = next + TRACE_ID_BLOCK;
        }
        b.set((next + 1, end));
        next
    })
}

/// Whether the last poll on this thread finished its task; clears it.
#[cfg(feature = "trace")]
pub(crate) fn take_poll_ready() -> bool {
    POLL_READY.with(|c| c.replace(false))
}

impl TaskMeta {
    /// The metadata of a task spawned at the caller's location.
    #[track_caller]
    pub(crate) fn new() -> Self {
        TaskMeta {
            last_worker: std::sync::atomic::AtomicUsize::new(NO_WORKER),
            recent_used: std::sync::atomic::AtomicUsize::new(NO_WORKER),
            aborted: AtomicBool::new(false),
            slot: AtomicU64::new(NO_SLOT),
            spawned_at: std::panic::Location::caller(),
            runnable_at: std::sync::atomic::AtomicU64::new(0),
            hog: std::sync::atomic::AtomicBool::new(false),
            #[cfg(feature = "tokio-compat")]
            off_bridge: std::sync::atomic::AtomicBool::new(false),
            #[cfg(feature = "trace")]
            id: next_trace_id(),
            #[cfg(loom)]
            state_order: crate::sync::AtomicUsize::new(0),
        }
    }

    /// The abort side of the abort/register protocol (module docs,
    /// "Abort"): sets the flag, then wakes the task if it is registered as
    /// waiting, so that it is scheduled and dropped instead of polled.
    pub(crate) fn abort(&self, registry: &Registry) {
        self.aborted.store(true, Ordering::Relaxed);
        // SeqCst fence: pairs with the one in `publish_slot`
        // (store-buffering): either our slot load below sees its slot and
        // we wake the task, or its flag load sees our store and the task
        // wakes itself. Without both fences each side can miss the other's
        // store and the abort is lost (loom: `abort.rs`).
        fence(Ordering::SeqCst);
        // Acquire: pairs with `publish_slot`'s Release store, so that the
        // registry entry the key names (written under the shard's lock
        // before the store) is there when `Registry::wake` locks the
        // shard: our lock then comes after `register`'s unlock. (loom
        // cannot check this pair: it takes locks in execution order, so a
        // key read from the slot always finds its entry there; see
        // loom-tests/README.md.)
        let slot = self.slot.load(Ordering::Acquire);
        if slot != NO_SLOT {
            // The wake is a read-modify-write of async-task's state word
            // (`AcqRel`): if it comes before the run of the task's next
            // poll, that poll's re-check sees the flag (module docs).
            #[cfg(loom)]
            self.state_order.fetch_add(1, Ordering::AcqRel);
            registry.wake(SlotKey::unpack(slot));
        }
    }

    /// The register side of the abort/register protocol: records the
    /// task's registry slot, at its first `Pending`, after
    /// [`Registry::register`]; returns whether the task was aborted and so
    /// must wake itself (the abort may have missed the slot).
    fn publish_slot(&self, key: SlotKey) -> bool {
        debug_assert_eq!(
            self.slot.load(Ordering::Relaxed),
            NO_SLOT,
            "a task publishes its registry slot once"
        );
        // Release: pairs with `abort`'s Acquire load (see there).
        self.slot.store(key.pack(), Ordering::Release);
        // SeqCst fence: pairs with the one in `abort` (see there).
        fence(Ordering::SeqCst);
        self.aborted.load(Ordering::Relaxed)
    }

    /// After a poll that returned `Pending` (not the first: that one
    /// registers, [`publish_slot`](Self::publish_slot)): whether the task
    /// was aborted and so must wake itself. The worker read the flag before
    /// it polled, and an abort since then may have found the task still
    /// queued, where its wake queues nothing (async-task queues a task
    /// once): without this check the task would wait on, aborted.
    fn recheck_aborted(&self) -> bool {
        // Relaxed: the abort's wake is ordered before this poll by
        // async-task's state word when it found the task queued (its
        // `AcqRel` compare-exchange, then the run's), so this load sees
        // the flag; a wake that came after the run requeues the task
        // (module docs, "Abort").
        self.aborted.load(Ordering::Relaxed)
    }

    /// loom only: the run's read-modify-write of async-task's state word
    /// that starts a poll (`state_order`).
    #[cfg(loom)]
    fn model_run(&self) {
        self.state_order.fetch_add(1, Ordering::AcqRel);
    }

    /// The task's id in a trace.
    #[cfg(feature = "trace")]
    #[inline(always)]
    pub(crate) fn trace_id(&self) -> u64 {
        self.id
    }

    /// Whether the task was aborted: a worker drops an aborted task instead
    /// of polling it.
    // Called by worker/mod.rs's `run_task` and by the loom models.
    pub fn is_aborted(&self) -> bool {
        // Relaxed: the flag publishes no data, and a stale `false` costs
        // one more poll, not the abort: the poll completes the task, or
        // returns `Pending` and `recheck_aborted` sees the flag (or the
        // abort's wake, after it, reschedules the task).
        self.aborted.load(Ordering::Relaxed)
    }
}

/// Builds a task around `future`: its [`Runnable`] (not yet scheduled) and
/// its [`JoinHandle`]. `schedule` runs each time the task is woken.
///
/// # Safety
///
/// `registry` must stay alive, at the same address, for as long as the
/// task exists (until async-task destroys it, after its future and every
/// handle are gone): the runtime's spawns have `schedule` own the
/// `Arc<Shared>` that holds it (module docs).
// Called by worker/spawn.rs's `spawn` and by the loom models (blocking.rs builds
// its tasks with the same calls and its own schedule function).
#[track_caller]
pub unsafe fn build<F, S>(
    future: F,
    registry: *const Registry,
    schedule: S,
) -> (Runnable, JoinHandle<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: async_task::Schedule<TaskMeta> + Send + Sync + 'static,
{
    let (runnable, task) = async_task::Builder::new().metadata(TaskMeta::new()).spawn(
        // SAFETY: the caller keeps the registry alive as long as the task.
        move |meta: &TaskMeta| TaskFuture::new(future, meta, unsafe { &*registry }),
        schedule,
    );
    // SAFETY: as above.
    let handle = JoinHandle::new(task, unsafe { &*registry }, runnable.waker());
    (runnable, handle)
}

/// [`build`] for a `!Send` future: async-task checks, at every poll and
/// drop of the future, that it runs on the thread that built it.
///
/// # Safety
///
/// As for [`build`]: `registry` must stay alive, at the same address, for
/// as long as the task exists.
// Called by worker/spawn.rs's `spawn_local` and runtime/block_on.rs's.
#[track_caller]
pub(crate) unsafe fn build_local<F, S>(
    future: F,
    registry: *const Registry,
    schedule: S,
) -> (Runnable, JoinHandle<F::Output>)
where
    F: Future + 'static,
    F::Output: 'static,
    S: async_task::Schedule<TaskMeta> + Send + Sync + 'static,
{
    let (runnable, task) = async_task::Builder::new()
        .metadata(TaskMeta::new())
        .spawn_local(
            // SAFETY: the caller keeps the registry alive as long as the task.
            move |meta: &TaskMeta| TaskFuture::new(future, meta, unsafe { &*registry }),
            schedule,
        );
    // SAFETY: as above.
    let handle = JoinHandle::new(task, unsafe { &*registry }, runnable.waker());
    (runnable, handle)
}

/// A runnable task of this runtime.
pub type Runnable = async_task::Runnable<TaskMeta>;

/// A panic payload.
pub type Panic = Box<dyn Any + Send + 'static>;

/// Drops a panic payload nobody will see, inside `catch_unwind`: dropping a
/// payload can itself panic. The payload of that panic is leaked, not
/// dropped (its drop could panic again, without end), rather than let it
/// unwind into async-task's abort guard or out of a destructor that runs
/// during unwinding, either of which aborts the process.
pub(crate) fn discard(p: Panic) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(p))) {
        std::mem::forget(again);
    }
}

/// Drops `v` inside `catch_unwind`; a panic in its `Drop` is counted on
/// this worker (if the caller is one) and its payload discarded.
fn drop_catching<T>(v: T) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(move || drop(v))) {
        crate::context::count_panic();
        discard(p);
    }
}

/// A task's output as async-task stores it: the user's value or the panic
/// payload, dropped inside `catch_unwind` if nobody takes it (see the module
/// docs). [`into_inner`](Output::into_inner) hands it out unguarded.
pub(crate) struct Output<T>(ManuallyDrop<Result<T, Panic>>);

impl<T> Output<T> {
    fn new(v: Result<T, Panic>) -> Self {
        Output(ManuallyDrop::new(v))
    }

    /// The output, for the awaiter: from here on it is the user's to drop.
    fn into_inner(self) -> Result<T, Panic> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used again and its `Drop` does not run
        // (it is in a ManuallyDrop), so the value is taken exactly once and
        // never dropped in place.
        unsafe { ManuallyDrop::take(&mut this.0) }
    }
}

impl<T> Drop for Output<T> {
    fn drop(&mut self) {
        let dropped = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: this is the only place the value is dropped, once, in
            // the output's own Drop; `into_inner` skips this Drop. A value
            // whose drop panics midway is not touched again.
            unsafe { ManuallyDrop::drop(&mut self.0) }
        }));
        if let Err(p) = dropped {
            crate::context::count_panic();
            discard(p);
        }
    }
}

/// Why a [`JoinHandle`] has no value.
///
/// `Send` and `Sync`, as tokio's `JoinError` is: `handle.await?` converts
/// it into a `Box<dyn Error + Send + Sync>`.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let rt = hwsched::Runtime::builder().worker_threads(1).build()?;
/// let r: Result<u32, Box<dyn std::error::Error + Send + Sync>> =
///     rt.block_on(async { Ok(hwsched::spawn(async { 7 }).await?) });
/// assert_eq!(r?, 7);
/// # Ok(())
/// # }
/// ```
pub enum JoinError {
    /// The task was aborted, or dropped by shutdown before it finished.
    Cancelled,
    /// The task panicked; the payload is what `panic!` was given.
    Panicked(PanicPayload),
}

/// The payload of a task's panic, what `panic!` was given. Its text, if it
/// has one, is [`message`](Self::message); the payload itself,
/// [`into_inner`](Self::into_inner).
pub struct PanicPayload(Panic);

impl PanicPayload {
    /// The panic's text: the payload of `panic!("...")` with or without
    /// format arguments (a `&'static str` or a `String`); `None` for any
    /// other payload (`std::panic::panic_any`).
    pub fn message(&self) -> Option<&str> {
        // Only `Sync` types are looked at through `&self`: see the `Sync`
        // impl below.
        if let Some(s) = self.0.downcast_ref::<&'static str>() {
            Some(s)
        } else {
            self.0.downcast_ref::<String>().map(String::as_str)
        }
    }

    /// The payload, to resume the panic with
    /// (`std::panic::resume_unwind`) or to downcast.
    pub fn into_inner(self) -> Panic {
        self.0
    }
}

// SAFETY: `Sync` lets two threads hold `&PanicPayload` at once. Through a
// shared reference the payload is only downcast to `&'static str` and
// `String` ([`PanicPayload::message`]), both `Sync`; no `&dyn Any` of the
// payload (which may be a `!Sync` type) is ever handed out. Owning access
// (`into_inner`) needs the value itself, and the payload is `Send`. tokio's
// `JoinError` is `Sync` by the same argument (its `SyncWrapper`).
unsafe impl Sync for PanicPayload {}

impl fmt::Debug for PanicPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.message() {
            Some(m) => write!(f, "PanicPayload({m:?})"),
            None => f.write_str("PanicPayload(<non-string payload>)"),
        }
    }
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
            JoinError::Panicked(p) => p.into_inner(),
            JoinError::Cancelled => panic!("JoinError::into_panic on a cancelled task"),
        }
    }

    fn panic_message(p: &PanicPayload) -> &str {
        p.message().unwrap_or("<non-string panic payload>")
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
    task: Option<async_task::FallibleTask<Output<T>, TaskMeta>>,
    /// The task's metadata, inside the task's allocation (FallibleTask does
    /// not expose it). Valid while `task` is `Some`: the handle holds a
    /// reference on the allocation, which never moves.
    meta: NonNull<TaskMeta>,
    /// The runtime's registry: valid while `task` is `Some` (the task's
    /// schedule function keeps the runtime alive; see the module docs).
    registry: NonNull<Registry>,
    /// A waker of the task: a reference on its allocation that an
    /// [`AbortHandle`] can clone to outlive this handle.
    keep: Waker,
}

// SAFETY: the handle is a FallibleTask (Send/Sync when T: Send) plus
// pointers to TaskMeta and Registry, both Sync (atomics and mutexes), kept
// alive by the task allocation the handle references; async-task's own Task
// is Send + Sync for T: Send.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: as above; &JoinHandle only reads TaskMeta's atomics.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    pub(crate) fn new(
        task: async_task::Task<Output<T>, TaskMeta>,
        registry: &Registry,
        keep: Waker,
    ) -> Self {
        let meta = NonNull::from(task.metadata());
        let registry = NonNull::from(registry);
        JoinHandle {
            task: Some(task.fallible()),
            meta,
            registry,
            keep,
        }
    }

    /// A handle that can abort this task without owning its output, and
    /// outlives this `JoinHandle` (tokio's `JoinHandle::abort_handle`).
    ///
    /// ```
    /// let rt = hwsched::Runtime::builder().worker_threads(1).build()?;
    /// let h = rt.spawn(std::future::pending::<()>());
    /// let abort = h.abort_handle();
    /// abort.abort();
    /// assert!(matches!(rt.block_on(h), Err(hwsched::JoinError::Cancelled)));
    /// # Ok::<(), hwsched::BuildError>(())
    /// ```
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle {
            keep: self.keep.clone(),
            meta: self.meta,
            registry: self.registry,
        }
    }

    /// Cancels the task. If it has not finished, its future is dropped the
    /// next time a worker would run it (promptly: it is woken for that) and
    /// awaiting the handle yields `Err(JoinError::Cancelled)`. A task that
    /// already finished keeps its output.
    pub fn abort(&self) {
        if self.task.is_some() {
            // SAFETY: `task` is Some, so the allocation holding the metadata
            // and the runtime holding the registry are alive (see the
            // fields' comments).
            unsafe { abort_task(self.meta, self.registry) }
        }
    }

    /// Whether the task has finished (completed, panicked or cancelled).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }
}

/// Marks a task aborted and wakes it if it is registered as waiting
/// ([`TaskMeta::abort`]).
///
/// # Safety
///
/// `meta` must point into a live task allocation, and `registry` to the
/// registry of the live runtime that task belongs to.
unsafe fn abort_task(meta: NonNull<TaskMeta>, registry: NonNull<Registry>) {
    // SAFETY: the caller guarantees the allocation and the runtime are
    // alive.
    unsafe { meta.as_ref().abort(registry.as_ref()) }
}

/// Aborts a task without owning its output: from
/// [`JoinHandle::abort_handle`]. Cloneable and `Send + Sync`; it keeps the
/// task's allocation (not its output) alive.
#[derive(Clone)]
pub struct AbortHandle {
    /// A reference on the task's allocation (and so on the runtime, which
    /// the task's schedule function holds): held, never woken.
    #[allow(dead_code)]
    keep: Waker,
    meta: NonNull<TaskMeta>,
    registry: NonNull<Registry>,
}

// SAFETY: the pointers lead to TaskMeta and Registry, which are Sync (atomics
// and mutexes) and kept alive by the allocation `keep` references; Waker is
// Send + Sync.
unsafe impl Send for AbortHandle {}
// SAFETY: as above; `abort` only touches atomics and the registry's mutexes.
unsafe impl Sync for AbortHandle {}

impl std::fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbortHandle").finish_non_exhaustive()
    }
}

impl AbortHandle {
    /// Cancels the task, as [`JoinHandle::abort`] does: if it has not
    /// finished, its future is dropped and its `JoinHandle` yields
    /// `Err(JoinError::Cancelled)`.
    pub fn abort(&self) {
        // SAFETY: `keep` holds a reference on the task's allocation, and the
        // task's schedule function (in that allocation) holds the runtime.
        unsafe { abort_task(self.meta, self.registry) }
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
                Poll::Ready(match out.map(Output::into_inner) {
                    None => Err(JoinError::Cancelled),
                    Some(Ok(v)) => Ok(v),
                    Some(Err(p)) => Err(JoinError::Panicked(PanicPayload(p))),
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
    /// This task's metadata (in the same allocation as this future).
    meta: NonNull<TaskMeta>,
    /// The runtime's registry (kept alive by the task's schedule function).
    registry: NonNull<Registry>,
    /// Set at the first `Pending`.
    slot: Option<SlotKey>,
}

// SAFETY: the pointers lead to TaskMeta and Registry, which are Sync and
// outlive this future (module docs); the future itself moves only if F does.
unsafe impl<F: Send> Send for TaskFuture<F> {}

impl<F> TaskFuture<F> {
    pub(crate) fn new(inner: F, meta: &TaskMeta, registry: &Registry) -> Self {
        TaskFuture {
            inner: ManuallyDrop::new(inner),
            done: false,
            meta: NonNull::from(meta),
            registry: NonNull::from(registry),
            slot: None,
        }
    }

    /// Registers the task at its first `Pending` (see the module docs).
    #[cold]
    fn register(&mut self, waker: &Waker) {
        // SAFETY: the registry outlives this future (module docs).
        let registry = unsafe { self.registry.as_ref() };
        // SAFETY: the metadata lives in this task's allocation.
        let meta = unsafe { self.meta.as_ref() };
        let shard = crate::context::current_index().unwrap_or(0);
        match registry.register(shard, waker.clone()) {
            Some(key) => {
                self.slot = Some(key);
                if meta.publish_slot(key) {
                    // Aborted before the abort could see the slot.
                    waker.wake_by_ref();
                }
            }
            // Shutting down: be scheduled once more, to be dropped.
            None => waker.wake_by_ref(),
        }
    }
}

impl<F: Future> Future for TaskFuture<F> {
    type Output = Output<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `inner` is structurally pinned: it is never moved out of
        // `self` (it is polled in place, and dropped in place below or in
        // `Drop`); the other fields are not pinned and are only read or set.
        let this = unsafe { self.get_unchecked_mut() };
        assert!(!this.done, "TaskFuture polled after completion");
        // SAFETY: the metadata lives in this task's allocation.
        #[cfg(loom)]
        unsafe { this.meta.as_ref() }.model_run();
        let res = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: see above; `inner` is pinned in place and not dropped
            // (done is false).
            unsafe { Pin::new_unchecked(&mut *this.inner) }.poll(cx)
        }));
        let out = match res {
            Ok(Poll::Pending) => {
                if this.slot.is_none() {
                    this.register(cx.waker());
                } else {
                    // SAFETY: the metadata lives in this task's allocation.
                    if unsafe { this.meta.as_ref() }.recheck_aborted() {
                        // Aborted while queued: be scheduled once more, to
                        // be dropped (module docs, "Abort").
                        cx.waker().wake_by_ref();
                    }
                }
                return Poll::Pending;
            }
            Ok(Poll::Ready(v)) => Ok(v),
            Err(p) => {
                crate::context::count_panic();
                Err(p)
            }
        };
        this.done = true;
        #[cfg(feature = "trace")]
        POLL_READY.with(|c| c.set(true));
        // Drop the finished future here, where a panic in its Drop can be
        // caught and reported, rather than inside async-task.
        let dropped = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: `done` was set, so `inner` is never touched again.
            unsafe { ManuallyDrop::drop(&mut this.inner) }
        }));
        // Whatever is not handed on (a value superseded by a panic, a second
        // payload) is dropped here inside catch_unwind: its Drop may panic.
        Poll::Ready(Output::new(match (out, dropped) {
            (Ok(v), Ok(())) => Ok(v),
            (Ok(v), Err(p)) => {
                crate::context::count_panic();
                drop_catching(v);
                Err(p)
            }
            (Err(p), Ok(())) => Err(p),
            (Err(p), Err(q)) => {
                crate::context::count_panic();
                discard(q);
                Err(p)
            }
        }))
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
            if let Err(p) = dropped {
                crate::context::count_panic();
                // Dropped here, outside catch_unwind, the payload's own
                // panic would reach async-task's abort guard.
                discard(p);
            }
        }
        // SAFETY: the registry outlives this future (module docs).
        let registry = unsafe { self.registry.as_ref() };
        if let Some(key) = self.slot {
            registry.remove(key);
        }
        if !crate::context::count_retired(registry as *const Registry as *const ()) {
            registry.retired_elsewhere.fetch_add(1, Ordering::Relaxed);
        }
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
    /// Packs into a u64 (16 bits of shard, 32 of index, 16 of generation);
    /// never `NO_SLOT`, as the generation wraps below 0xFFFF.
    fn pack(self) -> u64 {
        (u64::from(self.shard) << 48) | (u64::from(self.index) << 16) | u64::from(self.generation)
    }

    fn unpack(v: u64) -> SlotKey {
        SlotKey {
            shard: (v >> 48) as u32,
            index: (v >> 16) as u32,
            generation: (v & 0xFFFF) as u32,
        }
    }
}

#[derive(Default)]
struct Shard {
    slots: Vec<(u32, Option<Waker>)>,
    free: Vec<u32>,
    closed: bool,
}

/// A waker for every task that is waiting on something (has returned
/// `Pending`), sharded by the worker that polled it when it first waited, so
/// that registering and removing lock a shard that is rarely contended
/// (async-executor keeps one such slab; tokio shards its `OwnedTasks` the
/// same way).
pub struct Registry {
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    /// Tasks retired on threads that are not workers (a drop during
    /// shutdown, or by a user's waker): workers count theirs in their stats.
    pub(crate) retired_elsewhere: CachePadded<AtomicU64>,
}

impl Registry {
    /// A registry of `shards` shards (at least one, at most `0xFFFF`).
    pub fn new(shards: usize) -> Self {
        Registry {
            shards: (0..shards.clamp(1, 0xFFFF))
                .map(|_| CachePadded::new(Mutex::new(Shard::default())))
                .collect(),
            retired_elsewhere: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Registers `waker` in `shard`; `None` once the registry is closed
    /// (shutdown).
    fn register(&self, shard: usize, waker: Waker) -> Option<SlotKey> {
        let shard_idx = shard % self.shards.len();
        let mut s = self.shards[shard_idx].lock();
        if s.closed {
            return None;
        }
        let index = match s.free.pop() {
            Some(i) => i,
            None => {
                s.slots.push((0, None));
                (s.slots.len() - 1) as u32
            }
        };
        let slot = &mut s.slots[index as usize];
        debug_assert!(slot.1.is_none(), "registry slot {index} reused while taken");
        slot.1 = Some(waker);
        Some(SlotKey {
            shard: shard_idx as u32,
            index,
            generation: slot.0,
        })
    }

    fn remove(&self, key: SlotKey) {
        let waker = {
            let mut s = self.shards[key.shard as usize].lock();
            match s.slots.get_mut(key.index as usize) {
                Some(slot) if slot.0 == key.generation => {
                    slot.0 = (slot.0 + 1) & 0x7FFF;
                    let w = slot.1.take();
                    s.free.push(key.index);
                    w
                }
                _ => None,
            }
        };
        // Dropped outside the lock: dropping a waker may drop a task.
        drop(waker);
    }

    /// Wakes the task owning `key`, if it is still registered.
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

    /// Closes every shard to new registrations and wakes every registered
    /// task, so that a scheduler that is shutting down drops each one.
    pub fn close_and_wake_all(&self) {
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
}

/// Yields to the scheduler once: the task is put at the back of its worker's
/// local queue and other queued tasks run first, including those waiting
/// in the worker's inbox (spawned or woken from outside the runtime), which
/// move into the local queue ahead of the task (as tokio's `yield_now`
/// defers its task behind the global queue). A self-wake by other means
/// (`futures_lite::future::yield_now`, or a waker woken in its own poll)
/// also goes to the back of the local queue, but admits no inbox work.
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
        crate::context::mark_yield();
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Drops a task (cancelling it) without letting a panic in its destructor
/// escape.
pub(crate) fn drop_task(r: Runnable) {
    if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(r))) {
        // The payload may panic when dropped, too.
        discard(p);
    }
}
