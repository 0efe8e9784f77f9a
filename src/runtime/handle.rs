//! [`Handle`]: a cheap, cloneable reference to a runtime, for libraries and
//! for code that runs on threads the runtime does not own.

use std::future::Future;
use std::sync::Arc;

use crate::stats::Stats;
use crate::task::JoinHandle;
use crate::worker::shared::Shared;

/// A reference to a [`Runtime`](crate::Runtime): spawn onto it, block on it,
/// read its stats, from anywhere.
///
/// `Clone + Send + Sync`, and cheap to clone. It does not keep the workers
/// alive: once the [`Runtime`](crate::Runtime) is dropped, the workers stop,
/// and a task spawned through a `Handle` afterwards is dropped at once (its
/// [`JoinHandle`] resolves to [`JoinError::Cancelled`](crate::JoinError)),
/// never a panic.
///
/// ```
/// // A library function that runs on whichever hwsched runtime calls it,
/// // and says so when there is none.
/// fn start_background_work() -> Option<hwsched::JoinHandle<u32>> {
///     let handle = hwsched::Handle::try_current()?;
///     Some(handle.spawn(async { 7 }))
/// }
///
/// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
/// assert!(start_background_work().is_none(), "no runtime on this thread");
/// let v = rt.block_on(async { start_background_work().unwrap().await.unwrap() });
/// assert_eq!(v, 7);
/// # Ok::<(), hwsched::BuildError>(())
/// ```
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("workers", &self.shared.workers.len())
            .field("shut_down", &self.shared.is_shutdown())
            .finish()
    }
}

impl Handle {
    /// The runtime of the current context: the worker this code runs on, or
    /// the runtime whose `block_on` is running on this thread, or whose
    /// blocking pool or thread hook this is.
    ///
    /// # Panics
    ///
    /// Outside any hwsched context, with a message that says what to do; use
    /// [`Handle::try_current`] to ask instead.
    pub fn current() -> Handle {
        Handle::try_current().unwrap_or_else(|| {
            panic!(
                "no hwsched runtime on this thread: call this from a task, from inside \
                 Runtime::block_on, from a spawn_blocking closure or a thread hook; or keep a \
                 Handle (Runtime::handle) and use it; Handle::try_current asks without panicking"
            )
        })
    }

    /// The runtime of the current context, or `None` on a thread with none
    /// (see [`Handle::current`]).
    ///
    /// ```
    /// assert!(hwsched::Handle::try_current().is_none());
    /// ```
    pub fn try_current() -> Option<Handle> {
        current().map(|shared| Handle { shared })
    }

    /// Spawns a task onto this runtime; it starts running on some worker at
    /// once. After the runtime is dropped, the task is dropped at once and
    /// its handle resolves to `Cancelled`.
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        crate::worker::spawn::spawn(&self.shared, crate::worker::spawn::Home::Free, future)
    }

    /// Spawns a task that runs only at `place`; see
    /// [`Runtime::spawn_on`](crate::Runtime::spawn_on). `Place::Here` is
    /// the calling worker, if it is one of this runtime's.
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

    /// Where the caller runs, if it is a worker of this runtime; see
    /// [`current_place`](crate::current_place).
    ///
    /// ```
    /// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
    /// let h = rt.handle();
    /// assert_eq!(h.current_place(), None); // not a worker
    /// let p = rt.block_on(rt.spawn(async { hwsched::Handle::current().current_place() }));
    /// assert!(p.unwrap().unwrap().worker < 2);
    /// # Ok::<(), hwsched::BuildError>(())
    /// ```
    pub fn current_place(&self) -> Option<crate::CurrentPlace> {
        self.shared
            .current_worker()
            .map(|w| self.shared.places.current(w))
    }

    /// Runs the blocking function `f` on this runtime's blocking pool; see
    /// [`spawn_blocking`](crate::spawn_blocking).
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        crate::worker::spawn::spawn_blocking(&self.shared, f)
    }

    /// Runs `future` to completion on the calling thread, with this runtime
    /// as its context; see [`Runtime::block_on`](crate::Runtime::block_on).
    ///
    /// # Panics
    ///
    /// If called from a worker thread of any hwsched runtime.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        #[cfg(feature = "tokio-compat")]
        let _tokio = self.shared.tokio.as_ref().map(|h| h.enter());
        crate::runtime::block_on::block_on(&self.shared, future)
    }

    /// A snapshot of the runtime's counters.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }
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
    from_worker.or_else(|| crate::runtime::block_on::BLOCK_ON.with(|b| b.borrow().clone()))
}
