//! How a worker sleeps in the I/O driver and looks at it while busy.

use crate::stats::WorkerCounters;
use crate::worker::shared::Shared;
use crate::worker::{count_wake, WakeMode, WorkerCtx};

/// How a worker sleeps and looks at the I/O driver (io/mod.rs): in a
/// poller it holds, or on its thread (the steps of
/// [`poller_sleep`](crate::io::poller_sleep), which the loom models of
/// `loom-tests/tests/driver.rs` drive); and, busy, every
/// [`EVENT_INTERVAL`](crate::io::EVENT_INTERVAL) tasks without blocking.
#[cfg(feature = "io")]
pub(super) struct Driven<'a> {
    shared: &'a Shared,
    /// The driver's handles (`shared.driver`, and its I/O handle).
    timers: &'a crate::time::TimerHandle,
    io: &'a crate::io::IoHandle,
    index: usize,
    /// The poller this worker holds while it sleeps in it, and the sleep of
    /// its thread when every poller is taken.
    sleep: crate::io::poller_sleep::PollerSleep<
        'a,
        crate::io::Poller,
        crate::io::poller_sleep::ThreadPark,
    >,
    tasks: u32,
}

#[cfg(feature = "io")]
impl<'a> Driven<'a> {
    pub(super) fn new(ctx: &'a WorkerCtx) -> Self {
        Driven {
            shared: &ctx.shared,
            timers: &ctx.shared.driver,
            io: &ctx.shared.driver.io,
            index: ctx.index,
            sleep: crate::io::poller_sleep::PollerSleep::new(
                crate::io::poller_sleep::ThreadPark::current(),
            ),
            tasks: 0,
        }
    }

    /// Idle step 5, the sleep (src/sched/README.md, "The idle worker's
    /// steps"): on the condvar while no driver exists;
    /// else `PARKED` with the waker of a poller this worker takes (its own
    /// first), or of its thread when every poller is taken. `Pending`
    /// suspends the idle period; [`wait`](Self::wait) then sleeps.
    pub(super) fn sleep(&mut self, p: &crate::sched::park::Parker) -> std::task::Poll<bool> {
        let Some(d) = self.io.get() else {
            let trace = &self.shared.trace;
            trace.park(self.index, crate::trace::ParkReason::Condvar);
            let slept = p.park();
            trace.unpark(self.index);
            return std::task::Poll::Ready(slept);
        };
        // Steps 1 and 2 of the poller hand-off (src/sched/README.md, "The
        // poller hand-off"), and 6 when called again: a free
        // poller (its own first) or the thread, `poll_park` with its waker;
        // the poller is released when the park ends.
        let held = self.sleep.held().is_some();
        if !held {
            crate::sched::watch::before_poller();
        }
        let r = self.sleep.sleep(&d.pollers, d.poller_of(self.index), p);
        if held && r.is_ready() {
            // Left the poller for work: somebody must be able to take it
            // if this worker's next poll runs long (src/sched/README.md,
            // "Long polls").
            let shared = self.shared;
            let woke = crate::sched::watch::left_poller(shared, &shared.watch, self.index);
            if woke.is_some() {
                WorkerCounters::bump(&shared.workers[self.index].stats.watch_wakes, 1);
            }
            count_wake(shared, Some(self.index), woke);
        }
        r
    }

    /// Sleeps after the idle period suspended: in the poller held (until an
    /// event, a wake through its eventfd, or the next timer), or on the
    /// thread; then fires due timers and ends the batch.
    pub(super) fn wait(&mut self, ctx: &WorkerCtx) {
        let shared = self.shared;
        let d = self.io.get().expect("a park suspends only with a driver");
        let parker = &shared.workers[self.index].mailbox.parker;
        let ext = self.sleep.held() == Some(0);
        let deadline = crate::time::sleep_deadline(self.timers, self.index, ext);
        let mut timeout = deadline.map(|t| t.saturating_duration_since(std::time::Instant::now()));
        // The watch over private batches (src/sched/README.md, "The watch
        // over private batches"): the watcher sleeps at
        // most a tick.
        let cost = shared.tunables.migration_cost.as_nanos() as u64;
        let watching = {
            let mut core = ctx.core.borrow_mut();
            crate::sched::watch::before_sleep(
                &shared.watch,
                self.index,
                shared.now_ns(),
                &mut core.watching,
            )
        };
        if watching {
            WorkerCounters::bump(&shared.workers[self.index].stats.watch_sleeps, 1);
            let tick_ns = shared.watch.tick_ns(cost);
            shared
                .watch
                .sleeps_until(shared.now_ns().saturating_add(tick_ns));
            let tick = std::time::Duration::from_nanos(tick_ns);
            timeout = Some(timeout.map_or(tick, |t| t.min(tick)));
        }
        ctx.core.borrow_mut().wake_mode = WakeMode::Batch;
        if self.sleep.held().is_some() {
            let turns = &shared.workers[self.index].stats.driver_turns;
            WorkerCounters::bump(turns, 1);
        }
        // Steps 3 and 4 of the poller hand-off: the turn (or the thread's park),
        // the waker taken back when it returns, before the dispatch.
        shared
            .trace
            .park(self.index, crate::trace::ParkReason::Driver);
        let events = self.sleep.wait(&d.pollers, parker, timeout);
        shared.trace.unpark(self.index);
        if ext {
            crate::time::wake_sleeper_done(self.timers);
        }
        self.fire_timers(ext);
        let mut core = ctx.core.borrow_mut();
        if shared.trace.is_on() {
            // No events when it slept on its thread, holding no poller.
            let events = events.unwrap_or(0);
            shared
                .trace
                .poller_turn(self.index, events, core.batch as usize);
        }
        core.wake_mode = WakeMode::Place;
        if watching {
            let took = core.take_stale(shared);
            shared.watch.ticked(took, cost);
        }
        core.end_batch(shared);
    }

    /// Fires this worker's due timers (and the outside threads' ones, when
    /// `ext`), in batch mode.
    fn fire_timers(&self, ext: bool) {
        let n = crate::time::fire_worker(self.timers, self.index, ext);
        if n > 0 {
            WorkerCounters::bump(
                &self.shared.workers[self.index].stats.timers_fired,
                n as u64,
            );
            self.shared.trace.timers_fired(self.index, n);
        }
    }

    /// After each task: every `EVENT_INTERVAL` tasks (or when a task ran out
    /// of budget) a look at the poller without blocking, the due timers,
    /// then the deferred wakes.
    pub(super) fn after_task(&mut self, ctx: &WorkerCtx) {
        self.tasks = self.tasks.wrapping_add(1);
        let deferred = crate::io::coop::has_deferred();
        if self.tasks % crate::io::EVENT_INTERVAL != 0 && !deferred {
            return;
        }
        let shared = self.shared;
        if let Some(d) = self.io.get() {
            ctx.core.borrow_mut().wake_mode = WakeMode::Batch;
            let p = &d.pollers[d.poller_of(self.index)];
            if let Some(mut g) = p.try_hold() {
                WorkerCounters::bump(&shared.workers[self.index].stats.driver_turns, 1);
                let events = p.turn(&mut g, Some(std::time::Duration::ZERO), || {});
                if events > 0 && shared.trace.is_on() {
                    let batch = ctx.core.borrow().batch as usize;
                    shared.trace.poller_turn(self.index, events, batch);
                }
            }
            self.fire_timers(true);
            let mut core = ctx.core.borrow_mut();
            core.wake_mode = WakeMode::Place;
            core.end_batch(shared);
        }
        if deferred {
            ctx.core.borrow_mut().wake_mode = WakeMode::Yield;
            for w in crate::io::coop::take_deferred() {
                w.wake();
            }
            ctx.core.borrow_mut().wake_mode = WakeMode::Place;
        }
    }
}
