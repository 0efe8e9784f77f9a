//! [`JoinSet`]: a set of tasks awaited in completion order.
//!
//! # Ready list
//!
//! `join_next` must not look at every task in the set each time it is
//! polled: with tasks that finish one at a time in an order the set does
//! not know (the reverse of spawning, say), that is O(tasks) per
//! completion and O(tasks²) for the set. Instead each task's handle is
//! polled with a waker of its own ([`Entry`]), and waking it moves the
//! entry to the set's *ready list*; `join_next` polls only what is on that
//! list, and waits when it is empty (tokio's `JoinSet` and its
//! `IdleNotifiedSet` do the same). Each completion then costs O(1)
//! amortized: one wake, one push, one pop and one poll.
//!
//! - An entry is on the ready list at most once: its `queued` flag says it
//!   is there, and a wake that finds it set does nothing.
//! - `join_next` pops an entry and clears its flag *before* it polls the
//!   handle. The flag and the list live under one mutex: a wake that comes
//!   after the clear queues the entry again (and the next poll sees what
//!   woke it); one that came before it (it found the flag set and did
//!   nothing) happened before our lock, so the poll after it sees the
//!   completion that woke it. No completion is missed.
//! - The set's own waker (the task awaiting `join_next`) is stored under
//!   the same mutex when the list is found empty, and a wake that queues an
//!   entry takes it and wakes it after unlocking: no lost wake-up.
//! - A new task goes on the list when spawned, so that its handle is
//!   polled once with its entry's waker.
//! - Entries of tasks taken out of the set (joined) leave the slab; a late
//!   wake of one (a waker clone the task kept) may still queue it, and
//!   `join_next` skips what is on the list but no longer in the slab.
//!
//! One mutex (the sync shim's: loom's under `cfg(loom)`) orders everything
//! above. The list's steps are written once in [`ReadySet`], generic over
//! what it polls ([`Member`]): [`JoinSet`] is a `ReadySet` of
//! [`JoinHandle`]s, and the loom model `loom-tests/tests/join_set.rs` runs
//! it over a stand-in handle whose completion races `join_next` (a wake
//! between the pop and the poll, or during the waiter's store). Each step
//! is also checked by a test that fails (with a deadline, not a hang)
//! when it is skipped: `tests/task_layer.rs` (`join_next` woken by each
//! completion, `len`, drops) and this file's unit test (a wake after the
//! set is dropped queues nothing); see the logic mutations of
//! `scripts/mutate.sh`.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::runtime::handle::Handle;
use crate::sync::{AtomicBool, Mutex, MutexGuard, Ordering};
use crate::task::{JoinError, JoinHandle};

/// A set of spawned tasks whose outputs are taken in the order the tasks
/// finish, as tokio's `JoinSet`. Dropping the set aborts every task still
/// in it.
///
/// [`join_next`](JoinSet::join_next) costs O(1) amortized per finished
/// task, in whatever order the tasks finish: a finished task's wake puts it
/// on a ready list, and only that list is looked at.
///
/// ```
/// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
/// let sum = rt.block_on(async {
///     let mut set = hwsched::JoinSet::new();
///     for i in 0..10u64 {
///         set.spawn(async move { i * i });
///     }
///     let mut sum = 0;
///     while let Some(r) = set.join_next().await {
///         sum += r.unwrap();
///     }
///     sum
/// });
/// assert_eq!(sum, 285);
/// # Ok::<(), hwsched::BuildError>(())
/// ```
pub struct JoinSet<T> {
    set: ReadySet<JoinHandle<T>>,
}

/// What a [`ReadySet`] polls: a task's handle, which it can abort.
pub trait Member: Future + Unpin {
    /// Aborts the task (its poll then yields its cancellation).
    fn abort(&self);
}

impl<T> Member for JoinHandle<T> {
    fn abort(&self) {
        JoinHandle::abort(self);
    }
}

/// The ready list of the [module docs](self) over members `H`: what
/// [`JoinSet`] is made of (public under `cfg(loom)` for the model).
pub struct ReadySet<H> {
    /// The members, indexed by their entry's `index`; `None`: a free slot.
    slots: Vec<Option<Slot<H>>>,
    /// Free indices of `slots`.
    free: Vec<usize>,
    /// Members in the set.
    len: usize,
    ready: Arc<ReadyList>,
}

/// One task of the set.
struct Slot<H> {
    handle: H,
    entry: Arc<Entry>,
    /// `entry` as a waker: the handle is always polled with it.
    waker: Waker,
}

/// What the tasks' wakers and the set share.
struct ReadyList {
    state: Mutex<ReadyState>,
}

struct ReadyState {
    /// Entries woken since `join_next` last looked, oldest first.
    list: VecDeque<Arc<Entry>>,
    /// The waker of the task awaiting `join_next`, stored when it found the
    /// list empty.
    waiter: Option<Waker>,
    /// Set when the set is dropped: wakes queue nothing any more.
    closed: bool,
}

impl ReadyList {
    /// Locks the state (the shim's mutex does not poison).
    fn lock(&self) -> MutexGuard<'_, ReadyState> {
        self.state.lock()
    }
}

/// A task's place in the set, and its waker: waking it queues it on the
/// ready list.
struct Entry {
    /// The task's slot in `JoinSet::slots`.
    index: usize,
    /// Whether the entry is on the ready list. Read and written only under
    /// the ready list's mutex (a plain `bool` would need an `UnsafeCell`;
    /// the mutex gives every ordering).
    queued: AtomicBool,
    ready: Arc<ReadyList>,
}

impl Wake for Entry {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Runs wherever the task is woken (a worker finishing it, an abort,
        // a shutdown): it only pushes under the lock and wakes the waiter,
        // and panics nowhere.
        let waiter = {
            let mut st = self.ready.lock();
            // Relaxed: under the mutex, which orders it (module docs).
            if st.closed || self.queued.load(Ordering::Relaxed) {
                return;
            }
            self.queued.store(true, Ordering::Relaxed);
            st.list.push_back(self.clone());
            st.waiter.take()
        };
        // Woken outside the lock: the waiter may poll the set at once.
        if let Some(w) = waiter {
            w.wake();
        }
    }
}

impl<T> std::fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinSet")
            .field("len", &self.set.len)
            .finish()
    }
}

impl<T> Default for JoinSet<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> JoinSet<T> {
    /// An empty set.
    pub fn new() -> Self {
        JoinSet {
            set: ReadySet::new(),
        }
    }

    /// Tasks in the set: spawned and not yet taken out by `join_next`.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether the set holds no task.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Aborts every task in the set. They stay in the set: `join_next`
    /// yields each one's result (`Cancelled`, or its output if it finished
    /// first).
    pub fn abort_all(&mut self) {
        self.set.abort_all();
    }

    /// Polls for the next finished task: its result, or `None` when the set
    /// is empty.
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        self.set.poll_next(cx)
    }

    /// Waits for the next task to finish and returns its result, or `None`
    /// when the set is empty.
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        std::future::poll_fn(|cx| self.poll_join_next(cx)).await
    }
}

impl<H> Default for ReadySet<H> {
    fn default() -> Self {
        Self::new()
    }
}

impl<H> ReadySet<H> {
    /// An empty set.
    pub fn new() -> Self {
        ReadySet {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
            ready: Arc::new(ReadyList {
                state: Mutex::new(ReadyState {
                    list: VecDeque::new(),
                    waiter: None,
                    closed: false,
                }),
            }),
        }
    }

    /// Members in the set: inserted and not yet taken out by `poll_next`.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set holds no member.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `handle` to the set, on the ready list so that its first poll
    /// gives it its entry's waker.
    pub fn insert(&mut self, handle: H) {
        let index = self.free.pop().unwrap_or(self.slots.len());
        let entry = Arc::new(Entry {
            index,
            queued: AtomicBool::new(false),
            ready: self.ready.clone(),
        });
        let waker = Waker::from(entry.clone());
        waker.wake_by_ref();
        let slot = Some(Slot {
            handle,
            entry,
            waker,
        });
        if index == self.slots.len() {
            self.slots.push(slot);
        } else {
            debug_assert!(
                self.slots[index].is_none(),
                "slot {index} reused while taken"
            );
            self.slots[index] = slot;
        }
        self.len += 1;
    }
}

impl<H: Member> ReadySet<H> {
    /// Aborts every member. They stay in the set.
    pub fn abort_all(&mut self) {
        for s in self.slots.iter().flatten() {
            s.handle.abort();
        }
    }

    /// Polls for the next finished member: its output, or `None` when the
    /// set is empty.
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<H::Output>> {
        if self.len == 0 {
            return Poll::Ready(None);
        }
        loop {
            let entry = {
                let mut st = self.ready.lock();
                match st.list.pop_front() {
                    Some(e) => {
                        // Cleared before the poll below (module docs).
                        e.queued.store(false, Ordering::Relaxed);
                        e
                    }
                    None => {
                        match &mut st.waiter {
                            Some(w) if w.will_wake(cx.waker()) => {}
                            w => *w = Some(cx.waker().clone()),
                        }
                        return Poll::Pending;
                    }
                }
            };
            let i = entry.index;
            // An entry of a task already taken out (a late wake): skip it.
            let Some(slot) = self.slots.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            if !Arc::ptr_eq(&slot.entry, &entry) {
                continue;
            }
            let mut tcx = Context::from_waker(&slot.waker);
            if let Poll::Ready(r) = Pin::new(&mut slot.handle).poll(&mut tcx) {
                self.slots[i] = None;
                self.free.push(i);
                self.len -= 1;
                return Poll::Ready(Some(r));
            }
        }
    }
}

impl<T: Send + 'static> JoinSet<T> {
    /// Spawns `future` onto the current runtime ([`Handle::current`]) and
    /// adds it to the set.
    ///
    /// # Panics
    ///
    /// Outside any hwsched context; use [`spawn_on`](JoinSet::spawn_on).
    #[track_caller]
    pub fn spawn<F>(&mut self, future: F) -> crate::AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
    {
        self.spawn_on(future, &Handle::current())
    }

    /// Spawns `future` onto the runtime of `handle` and adds it to the set.
    #[track_caller]
    pub fn spawn_on<F>(&mut self, future: F, handle: &Handle) -> crate::AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
    {
        let h = handle.spawn(future);
        let abort = h.abort_handle();
        self.set.insert(h);
        abort
    }
}

impl<H> Drop for ReadySet<H> {
    fn drop(&mut self) {
        // (A `JoinSet` aborts its tasks in its own drop, before this one.)
        // Later wakes queue nothing; what is queued is dropped here, which
        // breaks the cycle list -> entry -> list.
        let queued = {
            let mut st = self.ready.lock();
            st.closed = true;
            st.waiter = None;
            std::mem::take(&mut st.list)
        };
        drop(queued);
    }
}

impl<T> Drop for JoinSet<T> {
    fn drop(&mut self) {
        self.abort_all();
        // Then `ReadySet`'s drop closes the list.
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }

    /// A set dropped while one of its tasks runs: the task is aborted, and
    /// its cancellation, which comes after the drop, wakes the entry (the
    /// handle registered the entry's waker when `join_next` polled it).
    /// That late wake must queue nothing: an entry put on the dropped
    /// set's list would hold the list (entry -> list -> entry), and
    /// neither would ever be freed.
    #[test]
    fn a_wake_after_the_set_is_dropped_queues_nothing() {
        let rt = crate::Runtime::builder()
            .worker_threads(1)
            .build()
            .expect("build");
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let mut set = JoinSet::new();
        set.spawn_on(
            async move {
                started_tx.send(()).expect("report");
                // Holds the worker inside this poll until released.
                let _ = release_rx.recv();
                std::future::pending::<()>().await;
            },
            &rt.handle(),
        );
        started_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the task never started");
        let waker = Waker::from(Arc::new(Noop));
        assert!(set
            .poll_join_next(&mut Context::from_waker(&waker))
            .is_pending());
        let ready = Arc::downgrade(&set.set.ready);
        drop(set);
        release_tx.send(()).expect("release");
        let t0 = Instant::now();
        while ready.upgrade().is_some() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the dropped set's ready list is still alive 10 s after the drop: its \
                 task was not aborted, or the task's late wake queued its entry on the \
                 list (a cycle, never freed)"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
