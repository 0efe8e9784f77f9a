//! Every spawn of the runtime, through one path: [`spawn`] (a `Send`
//! future at a [`Home`]), [`spawn_on`] (a checked
//! [`Place`](crate::Place), which names the home), [`spawn_local`] (a
//! `!Send` future on the calling worker) and [`spawn_blocking`] (a closure
//! for the blocking pool) build the task with its schedule function
//! ([`build`], [`build_local`]), then [`start`] it: counted, traced,
//! dropped at once after shutdown, else put in its first queue.

use std::future::Future;
use std::sync::Arc;

use crate::place::{PlaceError, Target};
use crate::sync::Ordering;
use crate::task::{build, build_local, drop_task, JoinHandle, Runnable, TaskMeta};
use crate::trace::Recorder;
use crate::worker::placed::{
    local_future, push_domain, push_pinned, schedule_domain, schedule_local, schedule_pinned,
    track_local, OnPlace,
};
use crate::worker::schedule::{place_spawn, schedule, stamp_runnable};
use crate::worker::shared::Shared;
use crate::worker::{bump_for, deliver};

/// Where a new task goes, and where each of its wakes brings it back.
#[derive(Clone, Copy)]
pub(crate) enum Home {
    /// Anywhere: the spawning worker's own deque, or from outside the
    /// spawn placement policy ([`place_spawn`]); its wakes are placed by
    /// [`schedule`].
    Free,
    /// An ordinary task started at worker `w`
    /// ([`Place::NearWorker`](crate::Place::NearWorker)): on `w`'s own
    /// deque when `w` spawns it, else into `w`'s inbox (stealable, with the
    /// pusher's check), its previous worker recorded as `w` so that its
    /// first wake is placed near `w` too. Nothing confines it afterwards.
    Near(usize),
    /// Pinned to worker `w`: `w`'s pinned queue at every wake, which only
    /// `w` takes from (src/sched/README.md, "Pinned tasks").
    Pinned(usize),
    /// In place queue `q` (a domain): back to it at every wake, which only
    /// the domain's workers take from (sched/place_queue.rs).
    Domain(usize),
}

/// Spawns `future` on this runtime at `home`.
#[track_caller]
pub(crate) fn spawn<F>(shared: &Arc<Shared>, home: Home, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let here = shared.current_worker();
    let rt = shared.clone();
    // SAFETY: the registry lives in `Shared`, which the schedule function
    // (owned by this same task) keeps alive, at the same address, for as
    // long as the task exists; see task.rs's module docs.
    let (runnable, handle) = unsafe {
        match home {
            Home::Free | Home::Near(_) => build(
                future,
                &shared.registry,
                async_task::WithInfo(move |r: Runnable, info: async_task::ScheduleInfo| {
                    schedule(&rt, r, info)
                }),
            ),
            Home::Pinned(w) => build(future, &shared.registry, move |r: Runnable| {
                schedule_pinned(&rt, w, r)
            }),
            Home::Domain(q) => build(future, &shared.registry, move |r: Runnable| {
                schedule_domain(&rt, q, r)
            }),
        }
    };
    start(shared, here, runnable, Recorder::spawn, |r| match home {
        Home::Free => {
            if shared.poll_timing {
                stamp_runnable(shared, &r);
            }
            place_spawn(shared, here, r)
        }
        Home::Near(w) => {
            // Relaxed: a placement hint, read by the task's first wake.
            r.metadata().last_worker.store(w, Ordering::Relaxed);
            if here == Some(w) {
                place_spawn(shared, here, r)
            } else {
                deliver(shared, here, w, r)
            }
        }
        Home::Pinned(w) => push_pinned(shared, w, r, false),
        Home::Domain(q) => push_domain(shared, q, r),
    });
    handle
}

/// Spawns `future` at `place` ([`Place`](crate::Place)), checked first, so
/// that a refused place spawns nothing: near a worker, an ordinary task
/// ([`Home::Near`]); pinned or in a domain, a placed task whose polls are
/// counted by place ([`OnPlace`]).
#[track_caller]
pub(crate) fn spawn_on<F>(
    shared: &Arc<Shared>,
    place: crate::Place,
    future: F,
) -> Result<JoinHandle<F::Output>, PlaceError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(match shared.places.check(place, shared.current_worker())? {
        Target::Near(w) => spawn(shared, Home::Near(w), future),
        Target::Worker(w) => {
            let future = OnPlace::new(future, w..w + 1, crate::place::PlaceKind::Worker);
            spawn(shared, Home::Pinned(w), future)
        }
        Target::Domain { queue, kind } => {
            let span = shared.domains.span(queue).clone();
            spawn(
                shared,
                Home::Domain(queue),
                OnPlace::new(future, span, kind),
            )
        }
    })
}

/// Spawns the `!Send` `future` on worker `w`, the calling thread's: its
/// schedule function sends it to `w`'s `locals` queue at every wake (from
/// any thread), which only `w` takes from and drops from, also at shutdown
/// (worker/placed.rs, `drop_local_tasks`). Async-task checks the thread at
/// every poll and drop of the future.
#[track_caller]
pub(crate) fn spawn_local<F>(shared: &Arc<Shared>, w: usize, future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    debug_assert_eq!(shared.current_worker(), Some(w));
    let (future, key) = local_future(future);
    let rt = shared.clone();
    // SAFETY: as in `spawn`: the registry lives in `Shared`, which the
    // schedule function of this task keeps alive.
    let (runnable, handle) = unsafe {
        build_local(future, &shared.registry, move |r: Runnable| {
            schedule_local(&rt, w, r)
        })
    };
    track_local(key, runnable.waker());
    start(shared, Some(w), runnable, Recorder::spawn, |r| {
        push_pinned(shared, w, r, true)
    });
    handle
}

/// Runs `f` on the blocking pool (see [`crate::spawn_blocking`]): a task
/// polled once by a pool thread, so its `JoinHandle` (output, panics,
/// cancellation at shutdown) is a task's like any other.
pub(crate) fn spawn_blocking<F, R>(shared: &Arc<Shared>, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let here = shared.current_worker();
    let mask = match here {
        Some(w) if !shared.blocking_mask_of.is_empty() => Some(shared.blocking_mask_of[w]),
        _ => None,
    };
    let rt = shared.clone();
    // SAFETY: as in `spawn`: the registry lives in `Shared`, which the
    // schedule function of this task keeps alive.
    let (runnable, handle) = unsafe {
        build(
            async move { f() },
            &shared.registry,
            // Runs once, from the `schedule` call below, never inside a
            // waker call: the future never returns `Pending`, so nothing
            // wakes the task (it registers no waker, so `abort` wakes
            // nothing either). So a pool that is shut down may drop the
            // task right here (`push` does), rather than bury it for the
            // shutdown's last reap, which comes after the wait for the
            // running closures: one of them waiting on this task would
            // wait forever.
            move |r: Runnable| rt.blocking.push(r, mask),
        )
    };
    // Shut down: cancelled at once, as `spawn` does (`start`). A call that
    // misses the flag reaches the pool before or after `Runtime::shutdown`
    // closes it: it is queued and then cancelled by the close (or run, if a
    // thread takes it first), or dropped by `push`.
    start(
        shared,
        here,
        runnable,
        Recorder::blocking,
        Runnable::schedule,
    );
    handle
}

/// What every spawn does once its task is built: counts it for the
/// spawning worker `here` (or for the outside), records it in the trace
/// (`event`: a spawn, or a closure for the blocking pool), and, the
/// runtime being shut down, drops it at once (its handle says Cancelled; a
/// local task on its own thread); else hands it to `push`.
#[inline]
fn start(
    shared: &Shared,
    here: Option<usize>,
    runnable: Runnable,
    event: impl FnOnce(&Recorder, Option<usize>, &TaskMeta),
    push: impl FnOnce(Runnable),
) {
    bump_for(shared, here, |s| &s.spawned);
    event(&shared.trace, here, runnable.metadata());
    if shared.is_shutdown() {
        drop_task(runnable);
        return;
    }
    push(runnable);
}
