//! The idle period: entering and leaving the idle state, and the worker's
//! view for the idle sequence of [`idle_steps`](crate::sched::idle_steps) (its
//! walk, the governor's spin, load publishing and counters around the
//! protocol's steps).

use crate::policy::governor::Choice;
use crate::policy::load::{Contribution, Publish};
use crate::sched::idle_steps::{Idle, Suspended as SuspendedIdle};
use crate::sched::park::{Notified, Wait};
use crate::sched::queue::Local;
use crate::stats::WorkerCounters;
use crate::sync::Ordering;
use crate::task::Runnable;
use crate::worker::shared::Shared;
use crate::worker::steal::{find_queued_work, has_work, steal_from, walk};
use crate::worker::{count_wake, Core};

/// Marks the worker idle and sets its LLC's idle-core hint when its whole
/// core is idle (read before write).
pub(super) fn enter_idle(shared: &Shared, core: &mut Core) {
    core.running = false;
    // Idle, it holds no batch: its bit in the watch's `private` set goes.
    core.private_emptied(shared);
    let idle = &shared.sleepers.idle;
    // Relaxed: a placement hint, which correctness never depends on (the
    // `idle` set: src/sched/README.md, "The wake protocol").
    idle.insert(core.index, Ordering::Relaxed);
    if shared.tunables.sis_idle_core {
        let cs = shared.topology.core_span(core.index);
        if cs.clone().all(|w| idle.contains(w)) {
            let hint = &shared.llc_idle_cores[shared.workers[core.index].llc_hint];
            if !hint.load(Ordering::Relaxed) {
                hint.store(true, Ordering::Relaxed);
            }
        }
    }
    core.publish_load(shared, false);
}

/// Leaves the idle state. `idle_since` is when the walk first failed (the
/// kernel's `rq->idle_stamp`); `slept` says whether the worker parked, in
/// which case the park's own wake-up latency is taken out of the sample:
/// it is a cost of the state chosen, not idleness of the workload (the teo
/// governor measures sleep length the same way), and leaving it in would
/// keep the prediction above the park cost forever once parking starts.
pub(super) fn exit_idle(shared: &Shared, core: &mut Core, idle_since: Option<u64>, slept: bool) {
    core.running = true;
    // A claimed worker looks at `private` (a Relaxed scan; empty in a
    // program without I/O) before the out-of-line check (sched/watch.rs, `leave`).
    let claimed = std::mem::take(&mut core.claimed);
    if core.watching
        || shared.watch.called(core.index)
        || (claimed && shared.watch.any_private(Some(core.index)))
    {
        leave_watch(shared, core, claimed);
    }
    shared.sleepers.idle.remove(core.index, Ordering::Relaxed);
    if let Some(t0) = idle_since {
        let now = shared.now_ns();
        let mut sample = now.saturating_sub(t0);
        if slept {
            sample = sample.saturating_sub(shared.park_cost_ns.load(Ordering::Relaxed));
        }
        core.balance.record_idle(sample);
        WorkerCounters::set(
            &shared.workers[core.index].stats.avg_idle_ns,
            core.balance.avg_idle_ns,
        );
    }
    core.publish_load(shared, false);
}

/// A watcher (or a worker called to watch, or claimed by a waker) leaves
/// its idle period for work: it is no longer counted, and a parked worker
/// is called in its place when nobody watches while private work is about
/// (sched/watch.rs). Its own batch counts: the private queue, or a batch task in
/// its LIFO slot (the work it leaves for may be an inbox task, run first).
#[cold]
fn leave_watch(shared: &Shared, core: &mut Core, claimed: bool) {
    let holds_queue = !core.batch_q.is_empty()
        || (core.lifo_batch && !shared.workers[core.index].lifo.is_empty());
    let woke = crate::sched::watch::leave(
        shared,
        &shared.watch,
        core.index,
        holds_queue,
        claimed,
        &mut core.watching,
    );
    if woke.is_some() {
        WorkerCounters::bump(&shared.workers[core.index].stats.watch_wakes, 1);
    }
    count_wake(shared, Some(core.index), woke);
}

/// The worker as the idle sequence ([`idle_steps`](crate::sched::idle_steps))
/// sees it: its core, with the runtime's policy (the walk, the governor's
/// spin, load publishing) and counters around the protocol's steps.
pub(super) struct IdleCore<'a> {
    shared: &'a Shared,
    core: &'a mut Core,
}

impl crate::sched::idle_steps::Queues<Runnable> for Shared {
    #[inline]
    fn has_work(&self, v: usize) -> bool {
        // The re-checks also count the LIFO slot (push::push_lifo); the
        // walk does not take from it.
        has_work(self, v) || !self.workers[v].lifo.is_empty()
    }
    #[inline]
    fn find_queued_work(&self, me: usize) -> Option<usize> {
        find_queued_work(self, me)
    }
    #[inline]
    fn count_wake(&self, me: usize, woke: Option<(usize, Notified)>) {
        count_wake(self, Some(me), woke);
    }
    #[inline]
    fn places(&self) -> Option<&crate::sched::place_queue::DomainQueues<Runnable>> {
        Some(&self.domains)
    }
}

impl crate::sched::idle_steps::IdleWorker<Runnable> for IdleCore<'_> {
    fn index(&self) -> usize {
        self.core.index
    }

    fn parts(&mut self) -> (&Local<Runnable>, &mut bool, &mut bool) {
        let c = &mut *self.core;
        (&c.local, &mut c.searching, &mut c.queued_bit)
    }

    fn walk(&mut self, kicked_by: Option<usize>) -> Option<Runnable> {
        walk(self.shared, self.core, kicked_by, true)
    }

    fn steal_from(&mut self, v: usize) -> Option<Runnable> {
        steal_from(self.shared, self.core, v)
            .map(|(r, _)| r)
            .or_else(|| {
                // The pending steal of a re-check that counted `v`'s LIFO
                // slot: its owner has not got to it since (a long poll).
                let r = self.shared.workers[v].lifo.take()?;
                let st = &self.shared.workers[self.core.index].stats;
                WorkerCounters::bump(&st.lifo_steals, 1);
                Some(r)
            })
    }

    fn take_own(&mut self) -> Option<Runnable> {
        let c = &mut *self.core;
        self.shared.workers[c.index]
            .lifo
            .take()
            .or_else(|| c.local.pop())
            .or_else(|| c.pop_batch(self.shared))
    }

    fn wait(
        &mut self,
        before_sleep: impl FnOnce() -> bool,
        sleep: impl FnOnce(&crate::sched::park::Parker) -> std::task::Poll<bool>,
    ) -> Wait<Runnable> {
        let shared = self.shared;
        let me = &shared.workers[self.core.index];
        let now = shared.now_ns();
        let choice = self
            .core
            .governor
            .choose(now, self.core.balance.avg_idle_ns);
        let st = &me.stats;
        let mut spin_end = None;
        if let Choice::Spin { until_ns } = choice {
            WorkerCounters::bump(&st.spins, 1);
            spin_end = Some(until_ns);
        }
        let spin_start = now;
        let mut spun_ns = 0u64;
        let mut spin_expired = false;
        let index = self.core.index;
        let Core {
            local, publisher, ..
        } = &mut *self.core;
        let res = me.mailbox.wait_with(
            &shared.shutdown,
            || {
                let Some(end) = spin_end else { return false };
                if shared.domains.has_work(index) {
                    // A task of one of its place queues: stop spinning;
                    // the re-check before the sleep finds it (sched/place_queue.rs).
                    return false;
                }
                let t = shared.now_ns();
                spun_ns = t.saturating_sub(spin_start);
                if t >= end {
                    spin_expired = true;
                    spin_end = None;
                    return false;
                }
                true
            },
            || {
                // About to sleep: publish whatever is held back, now, so the
                // counters show this worker idle while it sleeps (a publish
                // after waking up would leave them stale for the whole sleep;
                // the loom model of load publishing caught that).
                let queued = local.len() + me.mailbox.inbox.len();
                let cur = Contribution {
                    running: 0,
                    queued: queued as u32,
                };
                let interval = shared.tunables.load_update_interval.as_nanos() as u64;
                if let Publish::Now { running, queued } =
                    publisher.decide(shared.now_ns(), cur, interval, true)
                {
                    let n = shared.load.publish(index, running, queued);
                    WorkerCounters::bump(&st.load_publishes, n as u64);
                }
                before_sleep()
            },
            sleep,
        );
        if matches!(choice, Choice::Spin { .. }) {
            self.core.governor.record_spin(spun_ns);
            WorkerCounters::bump(&st.spin_ns, spun_ns);
            if spin_expired {
                WorkerCounters::bump(&st.spin_gave_up, 1);
            } else {
                WorkerCounters::bump(&st.spin_hits, 1);
                WorkerCounters::bump(&st.spin_hit_ns, spun_ns);
            }
        }
        res
    }

    fn resume(
        &mut self,
        sleep: impl FnOnce(&crate::sched::park::Parker) -> std::task::Poll<bool>,
    ) -> Wait<Runnable> {
        let me = &self.shared.workers[self.core.index];
        me.mailbox.resume(&self.shared.shutdown, sleep)
    }

    fn suspended(&mut self) -> &mut Option<SuspendedIdle> {
        &mut self.core.suspended
    }

    fn enter_idle(&mut self) {
        enter_idle(self.shared, self.core);
    }

    fn begin_pass(&mut self) {
        // A placement may have claimed this worker (marked it not idle) for
        // a delivery that another worker's steal then took: still idle, say
        // so again, or wakeups would stop choosing it.
        self.shared
            .sleepers
            .idle
            .insert(self.core.index, Ordering::Relaxed);
    }

    fn claimed(&mut self) {
        self.core.claimed = true;
    }

    fn exit_idle(&mut self, idle_since: Option<u64>, slept: bool) {
        exit_idle(self.shared, self.core, idle_since, slept);
    }

    fn now(&self) -> u64 {
        self.shared.now_ns()
    }

    fn count(&mut self, e: crate::sched::idle_steps::Event) {
        use crate::sched::idle_steps::Event;
        let st = &self.shared.workers[self.core.index].stats;
        let c = match e {
            Event::Slept => &st.parks,
            Event::InboxPull => &st.inbox_pulls,
            Event::ParkRecheck => &st.park_rechecks,
            Event::PendingSteal => &st.walk_touched,
            Event::PlacedPull => &st.placed_pulls,
        };
        WorkerCounters::bump(c, 1);
    }
}

/// The idle path: the idle sequence of [`idle_steps`](crate::sched::idle_steps)
/// over this worker's core. `sleep` parks the worker: on its condvar
/// (`Ready(slept)`), or, for a worker that sleeps in the I/O driver,
/// [`Parker::poll_park`](crate::sched::park::Parker::poll_park) with the poller's
/// or its thread's waker; then this returns [`Idle::Suspended`], and the
/// next call goes on with the period where it stopped.
pub(super) fn idle(
    shared: &Shared,
    core: &mut Core,
    sleep: impl FnMut(&crate::sched::park::Parker) -> std::task::Poll<bool>,
) -> Idle<Runnable> {
    crate::sched::idle_steps::idle(shared, &mut IdleCore { shared, core }, sleep)
}
