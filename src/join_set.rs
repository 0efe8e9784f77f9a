//! [`JoinSet`]: a set of tasks awaited in completion order.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::handle::Handle;
use crate::task::{JoinError, JoinHandle};

/// A set of spawned tasks whose outputs are taken in the order the tasks
/// finish, as tokio's `JoinSet`. Dropping the set aborts every task still
/// in it.
///
/// Each [`join_next`](JoinSet::join_next) poll looks at every task in the
/// set (O(tasks) per poll): keep sets to hundreds of tasks, not millions.
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
    tasks: Vec<JoinHandle<T>>,
}

impl<T> std::fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinSet")
            .field("len", &self.tasks.len())
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
        JoinSet { tasks: Vec::new() }
    }

    /// Tasks in the set: spawned and not yet taken out by `join_next`.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether the set holds no task.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Aborts every task in the set. They stay in the set: `join_next`
    /// yields each one's result (`Cancelled`, or its output if it finished
    /// first).
    pub fn abort_all(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }

    /// Polls for the next finished task: its result, or `None` when the set
    /// is empty.
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        if self.tasks.is_empty() {
            return Poll::Ready(None);
        }
        for i in 0..self.tasks.len() {
            if let Poll::Ready(r) = Pin::new(&mut self.tasks[i]).poll(cx) {
                drop(self.tasks.swap_remove(i));
                return Poll::Ready(Some(r));
            }
        }
        Poll::Pending
    }

    /// Waits for the next task to finish and returns its result, or `None`
    /// when the set is empty.
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        std::future::poll_fn(|cx| self.poll_join_next(cx)).await
    }
}

impl<T: Send + 'static> JoinSet<T> {
    /// Spawns `future` onto the current runtime ([`Handle::current`]) and
    /// adds it to the set.
    ///
    /// # Panics
    ///
    /// Outside any hwsched context; use [`spawn_on`](JoinSet::spawn_on).
    pub fn spawn<F>(&mut self, future: F) -> crate::AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
    {
        self.spawn_on(future, &Handle::current())
    }

    /// Spawns `future` onto the runtime of `handle` and adds it to the set.
    pub fn spawn_on<F>(&mut self, future: F, handle: &Handle) -> crate::AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
    {
        let h = handle.spawn(future);
        let abort = h.abort_handle();
        self.tasks.push(h);
        abort
    }
}

impl<T> Drop for JoinSet<T> {
    fn drop(&mut self) {
        self.abort_all();
    }
}
