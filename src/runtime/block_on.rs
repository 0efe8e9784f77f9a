//! `Runtime::block_on`: run a future on the calling thread.
//!
//! Each call has its own wake flag: the waker sets it, then unparks the
//! thread (in that order: [`WakeFlag::wake`]); the loop polls again only
//! when its own flag is set, and parks until then. So a wake is never lost to code that consumes the thread's
//! park token (a `std::sync::mpsc::Receiver::recv_timeout` inside the
//! future, or another parker on the same thread), and calls nest: an inner
//! `block_on` on the same thread runs its own loop, and the outer one polls
//! again when the inner returns if its flag was set meanwhile (as
//! futures-lite's `block_on` does; tokio refuses to nest instead).
//!
//! # Local tasks
//!
//! [`spawn_local`](crate::spawn_local) called on a `block_on` thread (in
//! the future, or in a local task) spawns a local task of that thread, as
//! tokio's `LocalSet` inside `block_on` does: it is polled only there, by
//! the `block_on` loop, between polls of the main future, and never moves.
//!
//! - **The queue.** A thread's local tasks share one [`LocalQueue`],
//!   created at the first `spawn_local`: their schedule functions push
//!   onto it from any thread (a wake from another thread, from
//!   `spawn_blocking`, an abort), then set its ready flag, then unpark the
//!   thread ([`LocalQueue::push`]: the order of [`WakeFlag::wake`]).
//! - **The loop.** Each turn polls the main future if its own flag was
//!   set, then runs up to [`LOCAL_BUDGET`] queued local tasks, then waits
//!   on both flags at once ([`wait_any`]: each is consumed before what it
//!   announces is looked at, so a push made during the turn ends the wait).
//!   A nested `block_on` runs the same thread's local tasks too, so a task
//!   the inner future waits for is not stranded behind the outer loop.
//! - **Their end.** The local tasks live as long as the outermost
//!   `block_on` running on their thread: when it returns (or unwinds), every
//!   local task still alive is cancelled and dropped there, on its thread
//!   (woken so that it comes to the queue, then dropped instead of run, until
//!   none is left: [`Locals::close`]); its `JoinHandle` resolves to
//!   `JoinError::Cancelled`. A task scheduled after its runtime shut down is
//!   dropped instead of run, as the workers drop theirs. So no local task
//!   outlives the loop that can run it, and none is dropped on another
//!   thread (async-task checks both at every poll and drop).
//!
//! With the `trace` feature, the thread records into a lane of its own
//! while a `block_on` runs on it (`trace::Recorder::enter_lane`): the
//! spawns, polls and ends of its local tasks, and what its code spawns and
//! wakes; a wake of a local task, from any thread, names the lane
//! (`Decision::Local`). The main future is not a task (no spawn location,
//! no trace id, a waker that is not the runtime's): its polls are not
//! recorded.
//!
//! The loom model `loom-tests/tests/block_on.rs` checks the hand-off (a
//! local task pushed from another thread against the loop's wait, alone and
//! together with a wake of the main future).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::context::on_worker_thread;
use crate::stats::WorkerCounters;
use crate::sync::{AtomicBool, Mutex, Ordering};
use crate::task::{drop_task, JoinHandle, Runnable};
use crate::worker::shared::Shared;

thread_local! {
    /// The runtime whose `block_on` runs on this thread, if any.
    pub(crate) static BLOCK_ON: std::cell::RefCell<Option<std::sync::Arc<Shared>>> =
        const { std::cell::RefCell::new(None) };
}

/// The wake flag of one `block_on` call: the waker sets it, then unparks
/// the thread; the loop consumes it, parking until it is set. The loom
/// model `loom-tests/tests/block_on.rs` drives it.
#[derive(Debug, Default)]
pub struct WakeFlag(AtomicBool);

impl WakeFlag {
    /// A flag not set.
    pub fn new() -> Self {
        WakeFlag(AtomicBool::new(false))
    }

    /// The waker's side: sets the flag, *then* unparks the polling thread
    /// (`unpark`). The other order loses the wake: the loop could take the
    /// unpark's token in a park that returns at once, find the flag still
    /// clear, and park again, and the flag set afterwards has no unpark
    /// left to end that park (the loom model `runtime/block_on.rs` finds it).
    #[inline]
    pub fn wake(&self, unpark: impl FnOnce()) {
        self.set();
        unpark();
    }

    /// Sets the flag (the first half of [`wake`](Self::wake)).
    #[inline]
    fn set(&self) {
        // ORDERING: Release, paired with `wait`'s Acquire swap: whatever
        // the waker did before the wake happens before the next poll (the
        // waker contract). The unpark does not carry it when the loop finds
        // the flag set without parking.
        //
        // A swap, where a store would do in C11: loom 0.7.2 keeps a partial
        // modification order, in which a plain store not ordered with the
        // loop's earlier swap may be read past by the loop's next swap (the
        // model `loom-tests/tests/block_on.rs` deadlocked on it), and two
        // RMWs are always ordered. Its cost is lost in the unpark that
        // follows (an atomic RMW at least, a futex wake when parked).
        let _ = self.0.swap(true, Ordering::Release);
    }

    /// The loop's side: consumes the flag, calling `park` until it is set.
    #[inline]
    pub fn wait(&self, mut park: impl FnMut()) {
        // ORDERING: Acquire, paired with `set`'s Release store.
        while !self.0.swap(false, Ordering::Acquire) {
            park();
        }
    }

    /// Consumes the flag: whether it was set ([`wait_any`]'s step).
    #[inline]
    pub fn take(&self) -> bool {
        // ORDERING: Acquire, paired with `set`'s Release swap, as in
        // `wait`: what the waker did before the wake happens before what
        // the caller does next (the main future's poll; a local task's
        // run is ordered by the queue's mutex besides).
        self.0.swap(false, Ordering::Acquire)
    }
}

/// The loop's wait when the thread has local tasks: consumes both flags,
/// calling `park` until one of them was set, and returns whether `call`'s
/// was (the main future was woken); the caller then polls the main future
/// if so, and runs what the local queue holds either way. Both flags are
/// consumed before the caller looks at what they announce, so a wake made
/// after the consumption sets its flag again and ends the next wait.
#[inline]
pub fn wait_any(call: &WakeFlag, locals: &WakeFlag, mut park: impl FnMut()) -> bool {
    loop {
        let main = call.take();
        let local = locals.take();
        if main || local {
            return main;
        }
        park();
    }
}

/// The run queue of a thread's local tasks (module docs, "Local tasks"):
/// pushed from any thread by their schedule functions, taken by the
/// thread's `block_on` loop.
#[derive(Debug)]
pub struct LocalQueue<T> {
    queue: Mutex<VecDeque<T>>,
    ready: WakeFlag,
}

impl<T> Default for LocalQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> LocalQueue<T> {
    /// An empty queue, its flag clear.
    pub fn new() -> Self {
        LocalQueue {
            queue: Mutex::new(VecDeque::new()),
            ready: WakeFlag::new(),
        }
    }

    /// A schedule function's side: queues `t`, then sets the ready flag and
    /// unparks the loop's thread ([`WakeFlag::wake`]'s order). The queue's
    /// mutex orders `t` itself; the flag is what ends the loop's wait.
    pub fn push(&self, t: T, unpark: impl FnOnce()) {
        self.queue.lock().push_back(t);
        self.ready.wake(unpark);
    }

    /// The loop's side: the oldest queued item.
    pub fn pop(&self) -> Option<T> {
        self.queue.lock().pop_front()
    }

    /// The flag a push sets ([`wait_any`]'s second).
    pub fn ready(&self) -> &WakeFlag {
        &self.ready
    }
}

/// Local tasks run per turn of the `block_on` loop before the main future
/// is looked at again: tokio's `LocalSet` runs 61 per tick
/// (`MAX_TASKS_PER_TICK`), for the same reason (a task that keeps waking
/// itself must not starve the main future).
pub const LOCAL_BUDGET: usize = 61;

/// What the local queue carries: a task, and whether its runtime had shut
/// down when it was scheduled (then it is dropped, not run).
type Queued = (Runnable, bool);

/// A thread's local tasks, while a `block_on` runs on it (module docs,
/// "Local tasks").
struct Locals {
    /// Their run queue, which their schedule functions hold.
    queue: Arc<LocalQueue<Queued>>,
    /// A waker of every local task whose future is not dropped yet, by key
    /// (its [`LocalFuture`] removes it when dropped), so that
    /// [`close`](Self::close) can bring each back to be dropped.
    live: RefCell<HashMap<u64, Waker>>,
    next: Cell<u64>,
    /// The thread's number in a trace (`trace::Thread::Outside`): where a
    /// wake of one of its tasks says the task went.
    thread: u32,
}

thread_local! {
    /// How many `block_on` loops run on this thread (nested calls).
    static DRIVING: Cell<usize> = const { Cell::new(0) };
    /// This thread's local tasks, from the first `spawn_local` of the
    /// outermost `block_on` to its end.
    static LOCALS: RefCell<Option<Rc<Locals>>> = const { RefCell::new(None) };
}

/// This thread's local tasks, if any.
fn locals() -> Option<Rc<Locals>> {
    LOCALS.with(|l| l.borrow().clone())
}

impl Locals {
    /// Runs up to [`LOCAL_BUDGET`] queued tasks, each poll recorded by
    /// `shared`'s trace in this thread's lane; returns whether more are
    /// queued.
    fn run(&self, shared: &Shared) -> bool {
        for _ in 0..LOCAL_BUDGET {
            let Some((r, shut_down)) = self.queue.pop() else {
                return false;
            };
            // Relaxed (TaskMeta::is_aborted): a stale `false` costs one
            // more poll, whose `Pending` re-checks the flag.
            if shut_down || r.metadata().is_aborted() {
                drop_task(r);
                continue;
            }
            let traced = shared.trace.poll_start(None, r.metadata());
            // The task wrapper catches panics in poll and drop; this
            // catches what async-task itself might raise.
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r.run())) {
                crate::task::discard(p);
            }
            shared.trace.poll_end(None, traced);
        }
        true
    }

    /// Cancels every local task still alive, on this thread: each is woken
    /// (its schedule function queues it, here or, for a wake racing on
    /// another thread, there) and every queued task is dropped instead of
    /// run, until none is alive. A wake pushed from another thread ends the
    /// park through the ready flag.
    fn close(&self) {
        loop {
            while let Some((r, _)) = self.queue.pop() {
                drop_task(r);
            }
            let wakers: Vec<Waker> = self.live.borrow().values().cloned().collect();
            if wakers.is_empty() {
                return;
            }
            for w in wakers {
                w.wake();
            }
            while let Some((r, _)) = self.queue.pop() {
                drop_task(r);
            }
            if self.live.borrow().is_empty() {
                return;
            }
            // A task scheduled by another thread just before our wake: it
            // is on its way to the queue.
            self.queue.ready().wait(std::thread::park);
        }
    }
}

/// The runner's life on the tokio bridge's thread: it owns the thread's
/// local tasks (`spawn_local` from what the bridge polls), and when it
/// ends (the bridge stops) it takes its waker back, so that nothing is put
/// in the slot for it, and drops those tasks and a task left in the slot
/// with the runtime as the thread's context, as `block_on` drops its
/// thread's.
#[cfg(feature = "tokio-compat")]
struct Runner {
    inline: Arc<crate::worker::bridge::Inline>,
    shared: std::sync::Weak<Shared>,
    driving: Option<Driving>,
}

#[cfg(feature = "tokio-compat")]
impl Drop for Runner {
    fn drop(&mut self) {
        *self.inline.runner.lock() = None;
        let _cx = self.shared.upgrade().map(enter);
        drop(self.driving.take());
        if let Some(r) = self.inline.slot.lock().take() {
            drop_task(r);
        }
    }
}

/// The tokio bridge's runner (src/tokio_compat.rs, "Running a woken task
/// on the bridge"), a tokio task on the bridge's thread: polls the task in
/// the slot, and the thread's local tasks, with the runtime's context
/// entered, until both are empty (at most 32 rounds per turn, then it
/// yields to tokio's other tasks and its driver).
#[cfg(feature = "tokio-compat")]
pub(crate) async fn bridge_runner(
    inline: Arc<crate::worker::bridge::Inline>,
    shared: std::sync::Weak<Shared>,
) {
    use crate::worker::bridge;
    let _runner = Runner {
        inline: inline.clone(),
        shared: shared.clone(),
        driving: Some(Driving::enter()),
    };
    std::future::poll_fn(|cx| {
        inline.set_runner(cx.waker());
        let Some(shared) = shared.upgrade() else {
            return Poll::Pending;
        };
        let _cx = enter(shared.clone());
        for _ in 0..32 {
            let _busy = inline.busy.lock();
            if shared.is_shutdown() {
                // The shutdown's drain takes the slot; the local tasks are
                // dropped with the runner.
                return Poll::Pending;
            }
            // Their wakes and spawns go to the workers, as the polled
            // task's do.
            bridge::set_polling(true);
            let more = locals().is_some_and(|l| l.run(&shared));
            bridge::set_polling(false);
            let Some(r) = inline.slot.lock().take() else {
                if more {
                    continue;
                }
                return Poll::Pending;
            };
            crate::worker::poll_on_bridge(&shared, r);
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// A local task's future: takes its waker out of [`Locals::live`] when
/// dropped (always on its thread).
struct LocalFuture<F> {
    inner: F,
    key: u64,
}

impl<F: Future> Future for LocalFuture<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `inner` is structurally pinned: never moved out of
        // `self`, dropped in place.
        unsafe { self.map_unchecked_mut(|s| &mut s.inner) }.poll(cx)
    }
}

impl<F> Drop for LocalFuture<F> {
    fn drop(&mut self) {
        let key = self.key;
        // Dropped outside the borrow: a waker's drop may drop a task.
        let w = LOCALS
            .try_with(|l| {
                l.borrow()
                    .as_ref()
                    .and_then(|l| l.live.borrow_mut().remove(&key))
            })
            .ok()
            .flatten();
        drop(w);
    }
}

/// Spawns the `!Send` `future` as a local task of this thread, run by its
/// `block_on` loop (module docs, "Local tasks"); `None` when no `block_on`
/// runs on this thread (nothing is spawned then).
#[track_caller]
pub(crate) fn spawn_local<F>(future: F) -> Option<JoinHandle<F::Output>>
where
    F: Future + 'static,
    F::Output: 'static,
{
    if DRIVING.with(Cell::get) == 0 {
        return None;
    }
    let shared = BLOCK_ON.with(|b| b.borrow().clone())?;
    let locals = LOCALS.with(|l| {
        l.borrow_mut()
            .get_or_insert_with(|| {
                Rc::new(Locals {
                    queue: Arc::new(LocalQueue::new()),
                    live: RefCell::new(HashMap::new()),
                    next: Cell::new(0),
                    thread: crate::trace::thread_number(),
                })
            })
            .clone()
    });
    let key = locals.next.get() + 1;
    locals.next.set(key);
    let registry: *const crate::task::Registry = &shared.registry;
    let queue = locals.queue.clone();
    let thread = std::thread::current();
    // On the tokio bridge's thread its runner runs the local tasks: their
    // wakes wake it (the thread sleeps in tokio's driver, not in a park).
    #[cfg(feature = "tokio-compat")]
    let bridge = crate::worker::bridge::runner_waker();
    #[cfg(feature = "tokio-compat")]
    let again = bridge.clone();
    let lane = locals.thread as usize;
    let keep = shared.clone();
    // SAFETY: the registry lives in `Shared`, which the schedule function
    // of this task keeps alive (`keep`), as in `spawn`.
    let (runnable, handle) = unsafe {
        crate::task::build_local(
            LocalFuture { inner: future, key },
            registry,
            move |r: Runnable| {
                let shut_down = keep.is_shutdown();
                if keep.trace.is_on() {
                    let (from, d) = (keep.current_worker(), crate::trace::Decision::Local);
                    keep.trace.wake(from, r.metadata(), lane, d);
                }
                queue.push((r, shut_down), || {
                    // The thread too: a `close` (the runner dropped)
                    // waits for a racing wake in a park.
                    #[cfg(feature = "tokio-compat")]
                    if let Some(w) = &bridge {
                        w.wake_by_ref();
                    }
                    thread.unpark()
                });
            },
        )
    };
    locals.live.borrow_mut().insert(key, runnable.waker());
    WorkerCounters::bump_shared(&shared.external.spawned, 1);
    shared.trace.spawn(None, runnable.metadata());
    // Queued as its schedule function would, without recording the spawn
    // as a wake too.
    locals.queue.push((runnable, shared.is_shutdown()), || {
        #[cfg(feature = "tokio-compat")]
        if let Some(w) = again {
            w.wake();
        }
        std::thread::current().unpark()
    });
    Some(handle)
}

/// Counts this thread's `block_on` loops while it lives; the outermost's
/// closes the thread's local tasks when dropped (also on unwind).
struct Driving(());

impl Driving {
    fn enter() -> Self {
        DRIVING.with(|d| d.set(d.get() + 1));
        Driving(())
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        if DRIVING.with(Cell::get) == 1 {
            // Still counted while the tasks are dropped: a destructor that
            // calls `spawn_local` spawns a task that this loop drops too.
            if let Some(l) = locals() {
                l.close();
                LOCALS.with(|s| *s.borrow_mut() = None);
            }
        }
        DRIVING.with(|d| d.set(d.get() - 1));
    }
}

/// The waker of one `block_on` call: its flag and its thread.
struct CallWaker {
    woken: WakeFlag,
    thread: std::thread::Thread,
}

impl Wake for CallWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.wake(|| self.thread.unpark());
    }
}

/// Restores the previous runtime context of this thread on exit (also on
/// panic).
pub(crate) struct Restore {
    prev: Option<Arc<Shared>>,
    /// The driver context it replaced (dropped after `prev` is back).
    #[cfg(feature = "io")]
    _driver: Option<crate::context::DriverGuard>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        let prev = self.prev.take();
        BLOCK_ON.with(|b| *b.borrow_mut() = prev);
    }
}

/// Makes `shared` this thread's runtime context (what `hwsched::spawn`
/// spawns onto, and whose driver keeps the timers and sockets made here)
/// until the returned guard is dropped. On a worker thread the worker's
/// runtime stays the context (`handle::current`): its driver stays too.
pub(crate) fn enter(shared: Arc<Shared>) -> Restore {
    #[cfg(feature = "io")]
    let _driver =
        (!on_worker_thread()).then(|| crate::context::enter_driver(shared.driver.clone()));
    Restore {
        prev: BLOCK_ON.with(|b| b.borrow_mut().replace(shared)),
        #[cfg(feature = "io")]
        _driver,
    }
}

pub(crate) fn block_on<F: Future>(shared: &Arc<Shared>, future: F) -> F::Output {
    #[cfg(feature = "tokio-compat")]
    let on_worker = on_worker_thread() || crate::worker::bridge::polling_here();
    #[cfg(not(feature = "tokio-compat"))]
    let on_worker = on_worker_thread();
    if on_worker {
        panic!(
            "Runtime::block_on called from a hwsched worker thread: this would block the \
             worker; .await the future instead, or spawn it"
        );
    }
    let _restore = enter(shared.clone());
    // This thread's events go to a lane of its own in the trace (the polls
    // of its local tasks among them), until its local tasks are dropped.
    let _lane = shared.trace.enter_lane();
    // Declared after `_restore`, so dropped before it: the local tasks
    // are dropped with this runtime still the thread's context.
    let _driving = Driving::enter();
    let call = Arc::new(CallWaker {
        woken: WakeFlag::new(),
        thread: std::thread::current(),
    });
    let waker = Waker::from(call.clone());
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    let mut poll_main = true;
    loop {
        if poll_main {
            if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
                return v;
            }
        }
        // The future may have spawned the first local task.
        match locals() {
            None => {
                call.woken.wait(std::thread::park);
                poll_main = true;
            }
            Some(l) => {
                if l.run(shared) {
                    // More queued: no wait, but the main future's turn if
                    // it was woken.
                    poll_main = call.woken.take();
                } else {
                    poll_main = wait_any(&call.woken, l.queue.ready(), std::thread::park);
                }
            }
        }
    }
}
