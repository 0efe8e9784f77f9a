//! Placed and local tasks (spawned by worker/spawn.rs): their schedule
//! functions, the queues they go back to (a worker's pinned queue:
//! src/sched/README.md, "Pinned tasks"; a domain's place queue:
//! src/sched/README.md, "Place queues"), the count of their polls by place ([`OnPlace`]), and the local tasks' drop on their own
//! thread at shutdown.

use std::cell::RefCell;
use std::future::Future;

use crate::sched::park::Notified;
use crate::sched::push;
use crate::stats::WorkerCounters;
use crate::task::{drop_task, Runnable};
use crate::worker::shared::Shared;
use crate::worker::{bump_for, count_wake, with_core};

/// A placed task's future: at each poll, counts the poll on the polling
/// worker's counters, by place kind, and as off its place if that worker
/// is not one of its place's (`placed_polls_off`, which the queues keep at
/// zero). Only placed tasks carry it: unplaced ones pay nothing.
pub(crate) struct OnPlace<F> {
    inner: F,
    span: std::ops::Range<usize>,
    kind: crate::place::PlaceKind,
}

impl<F> OnPlace<F> {
    pub(super) fn new(
        inner: F,
        span: std::ops::Range<usize>,
        kind: crate::place::PlaceKind,
    ) -> Self {
        OnPlace { inner, span, kind }
    }
}

impl<F: Future> Future for OnPlace<F> {
    type Output = F::Output;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        crate::context::with_here(|h| {
            let Some(h) = h else { return };
            // SAFETY: the counters live in the runtime that the worker's
            // context holds alive while `h` is valid (context.rs).
            let c = unsafe { &*h.counters };
            use crate::place::PlaceKind;
            let kc = match self.kind {
                PlaceKind::Worker => &c.placed_polls_worker,
                PlaceKind::Core => &c.placed_polls_core,
                PlaceKind::Llc => &c.placed_polls_llc,
                PlaceKind::Numa => &c.placed_polls_numa,
                PlaceKind::Package => &c.placed_polls_package,
            };
            WorkerCounters::bump(kc, 1);
            if !self.span.contains(&h.index) {
                WorkerCounters::bump(&c.placed_polls_off, 1);
            }
        });
        // SAFETY: `inner` is structurally pinned: never moved out of
        // `self`, dropped in place.
        unsafe { self.map_unchecked_mut(|s| &mut s.inner) }.poll(cx)
    }
}

/// The schedule function of a task placed in a domain: after shutdown it
/// is buried ([`push::admit`]); else back to its place queue.
pub(super) fn schedule_domain(shared: &Shared, queue: usize, r: Runnable) {
    let Some(r) = push::admit(shared, r) else {
        return;
    };
    if shared.trace.is_on() {
        let to = shared.domains.span(queue).start;
        let d = crate::trace::Decision::PlaceQueue;
        shared
            .trace
            .wake(shared.current_worker(), r.metadata(), to, d);
    }
    push_domain(shared, queue, r);
}

/// The pusher's steps of a place queue ([`place_queue::push`](crate::sched::place_queue::push)),
/// counted for the calling worker (if any): the wake looks first at the
/// caller's worker when it is one of the domain's, else at the domain's
/// first.
pub(super) fn push_domain(shared: &Shared, queue: usize, r: Runnable) {
    let from = shared.current_worker();
    let span = shared.domains.span(queue);
    let near = match from {
        Some(w) if span.contains(&w) => w,
        _ => span.start,
    };
    let woke = crate::sched::place_queue::push(shared, &shared.domains, queue, near, r);
    count_wake(shared, from, woke);
}

/// The schedule function of a task pinned to worker `w`: after shutdown it
/// is buried, as every task is ([`push::admit`]); else it goes back to
/// `w`'s pinned queue.
pub(super) fn schedule_pinned(shared: &Shared, w: usize, r: Runnable) {
    let Some(r) = push::admit(shared, r) else {
        return;
    };
    if shared.trace.is_on() {
        let d = crate::trace::Decision::Pinned;
        shared
            .trace
            .wake(shared.current_worker(), r.metadata(), w, d);
    }
    push_pinned(shared, w, r, false);
}

/// Puts `r` in worker `w`'s pinned queue (`locals`, with `local`): from
/// `w` itself while it runs (its core free and not asleep in the driver),
/// a push alone, since `w` looks at the queue before it waits; from
/// anywhere else a delivery with the notify that `w`'s wait cannot sleep
/// through (src/sched/README.md, "Pinned tasks").
pub(super) fn push_pinned(shared: &Shared, w: usize, r: Runnable, local: bool) {
    let m = &shared.workers[w].mailbox;
    let (own, from) = with_core(shared, |c| match c {
        Some((i, Some(core))) => (i == w && core.suspended.is_none(), Some(i)),
        Some((i, None)) => (false, Some(i)),
        None => (false, None),
    });
    if own {
        m.push_pinned(r, local);
        return;
    }
    let n = if local {
        m.deliver_local(r)
    } else {
        m.deliver_pinned_or_drain(r, &shared.shutdown, |t| shared.bury(t))
    };
    if n == Notified::Unparked {
        bump_for(shared, from, |s| &s.unparks);
    }
}

thread_local! {
    /// This worker thread's live local tasks (`spawn_local`): a waker of
    /// each, by key, removed when the task's future is dropped (always on
    /// this thread). The worker wakes them at shutdown so that their
    /// futures come back here to be dropped ([`drop_local_tasks`]).
    static LOCAL_TASKS: RefCell<LocalTasks> = RefCell::new(LocalTasks::default());
}

#[derive(Default)]
pub(super) struct LocalTasks {
    next: u64,
    live: std::collections::HashMap<u64, std::task::Waker>,
}

/// A local task's future: takes its entry out of [`LOCAL_TASKS`] when
/// dropped.
pub(super) struct LocalFuture<F> {
    inner: F,
    key: u64,
}

impl<F: Future> Future for LocalFuture<F> {
    type Output = F::Output;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        // SAFETY: `inner` is structurally pinned: never moved out of
        // `self`, dropped in place.
        unsafe { self.map_unchecked_mut(|s| &mut s.inner) }.poll(cx)
    }
}

impl<F> Drop for LocalFuture<F> {
    fn drop(&mut self) {
        let key = self.key;
        // The waker is dropped after the borrow ends (its drop runs no
        // user code, but keep the borrow short all the same).
        let w = LOCAL_TASKS
            .try_with(|l| l.borrow_mut().live.remove(&key))
            .ok()
            .flatten();
        drop(w);
    }
}

/// A local task's future around `inner`, and its key in [`LOCAL_TASKS`].
pub(super) fn local_future<F>(inner: F) -> (LocalFuture<F>, u64) {
    let key = LOCAL_TASKS.with(|l| {
        let mut l = l.borrow_mut();
        l.next += 1;
        l.next
    });
    (LocalFuture { inner, key }, key)
}

/// Records the live local task `key` of this thread, by a waker of it.
pub(super) fn track_local(key: u64, waker: std::task::Waker) {
    LOCAL_TASKS.with(|l| l.borrow_mut().live.insert(key, waker));
}

/// The schedule function of a local task of worker `w`: back to `w`'s
/// `locals` queue, from any thread.
pub(super) fn schedule_local(shared: &Shared, w: usize, r: Runnable) {
    if shared.trace.is_on() {
        let d = crate::trace::Decision::Pinned;
        shared
            .trace
            .wake(shared.current_worker(), r.metadata(), w, d);
    }
    push_pinned(shared, w, r, true)
}

/// The worker's last duty at shutdown: every live local task of this
/// thread is woken, and each comes to this worker's `locals` queue, where
/// it is dropped, here; until none is left (a wake made by another thread
/// just before may still be on its way: its notify ends the park).
pub(super) fn drop_local_tasks(shared: &Shared, index: usize) {
    let m = &shared.workers[index].mailbox;
    loop {
        m.parker.prepare();
        while let Some(r) = m.take_local() {
            drop_task(r);
        }
        let wakers: Vec<std::task::Waker> =
            LOCAL_TASKS.with(|l| l.borrow().live.values().cloned().collect());
        if wakers.is_empty() {
            return;
        }
        for wk in wakers {
            wk.wake();
        }
        while let Some(r) = m.take_local() {
            drop_task(r);
        }
        if LOCAL_TASKS.with(|l| l.borrow().live.is_empty()) {
            return;
        }
        m.parker.park();
    }
}
