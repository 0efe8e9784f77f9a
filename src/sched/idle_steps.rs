//! An idle worker's steps of the wake protocol: the idle period of a worker
//! whose own queues are empty ([`idle`]), written once over two small views
//! so that the runtime (`worker/idle.rs`) and the loom models
//! (`conserve.rs`, `idle_loop.rs`) run the same sequence. The steps
//! (search, wait, announce, re-check, sleep, wake) are numbered in
//! src/sched/README.md, "The idle worker's steps"; the pusher's steps are
//! [`push`]'s.
//!
//! [`Queues`] is what the steps need of the runtime beyond the pusher's
//! view: whether a worker holds stealable work, and the re-check's look at
//! the `queued` set. [`IdleWorker`] is the worker running them: its deque,
//! its protocol record (searching, its `queued` bit), its walk and steal
//! (the policy: `policy/balance.rs` in the runtime), its wait on its mailbox
//! (where the runtime spins or parks as its governor says), and hooks for
//! what is not protocol (the idle mask, load publishing, counters), which
//! a model leaves empty.
//!
//! A wait may be *suspended* (the worker sleeps in the I/O driver, outside
//! this call): [`idle`] then returns [`Idle::Suspended`], the period is
//! kept in the worker ([`IdleWorker::suspended`]), and the next call goes
//! on with idle step 6.

use std::task::Poll;

use crate::sched::place_queue::{self, DomainQueues};
use crate::sched::push::{self, Workers};
use crate::sched::park::{Notified, Parker, Wait};
use crate::sched::queue::Local;
use crate::sync::Ordering;

/// What the idle steps need of the runtime, beyond the pusher's view.
pub trait Queues<T>: Workers<T> {
    /// Whether worker `v` holds stealable work now (its deque or inbox).
    fn has_work(&self, v: usize) -> bool;
    /// The re-check of a worker going to sleep with no searcher left, or of
    /// the last searcher leaving (src/sched/README.md, idle steps 4 and 1): a worker other
    /// than `me` whose queue holds work, found through the `queued` set,
    /// nearest first. Called after the fence of `to_parked` /
    /// `leave_searching`.
    fn find_queued_work(&self, me: usize) -> Option<usize>;
    /// Counts a wake made by worker `me`'s pusher's check (what
    /// [`push::notify_parked`] returned). Not protocol.
    fn count_wake(&self, me: usize, woke: Option<(usize, Notified)>) {
        let _ = (me, woke);
    }
    /// The place queues of the domains (sched/place_queue.rs), if the runtime has
    /// them: the sequence takes from its worker's, and re-checks them
    /// before it sleeps.
    fn places(&self) -> Option<&DomainQueues<T>> {
        None
    }
}

/// An event of the idle period, for the runtime's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The wait slept (parked or slept in the driver).
    Slept,
    /// A task was taken from the inbox.
    InboxPull,
    /// The worker announced its sleep with no searcher left after it, and
    /// re-checked the `queued` set.
    ParkRecheck,
    /// The re-check's find was looked at (the pending steal).
    PendingSteal,
    /// A task was taken from one of the worker's place queues.
    PlacedPull,
}

/// The worker running the idle steps.
pub trait IdleWorker<T> {
    /// Its index.
    fn index(&self) -> usize;
    /// Its deque, its `searching` record and
    /// the record of its `queued` bit.
    fn parts(&mut self) -> (&Local<T>, &mut bool, &mut bool);
    /// The walk: work stolen from another worker, from `kicked_by` first
    /// when given (the policy; `policy/balance.rs` in the runtime).
    fn walk(&mut self, kicked_by: Option<usize>) -> Option<T>;
    /// A steal from worker `v` (its deque, then its inbox) into this
    /// worker's deque: the one task to run.
    fn steal_from(&mut self, v: usize) -> Option<T>;
    /// Work on this worker's own queues (its LIFO slot, its deque, its
    /// private batch), put there while it slept.
    fn take_own(&mut self) -> Option<T>;
    /// One wait on its mailbox ([`Mailbox::wait_with`](crate::sched::park::Mailbox::wait_with)
    /// with its deque): spinning while its governor says so, then
    /// `before_sleep` (after whatever the worker does first, such as
    /// publishing its load), then `sleep`.
    fn wait(
        &mut self,
        before_sleep: impl FnOnce() -> bool,
        sleep: impl FnOnce(&Parker) -> Poll<bool>,
    ) -> Wait<T>;
    /// Goes on with a suspended wait ([`Mailbox::resume`](crate::sched::park::Mailbox::resume)).
    fn resume(&mut self, sleep: impl FnOnce(&Parker) -> Poll<bool>) -> Wait<T>;
    /// Where a suspended period is kept.
    fn suspended(&mut self) -> &mut Option<Suspended>;
    /// The period starts: the worker marks itself idle (the idle mask).
    fn enter_idle(&mut self) {}
    /// A pass starts, after a walk that found nothing: the worker marks
    /// itself idle again (a placement may have claimed its bit).
    fn begin_pass(&mut self) {}
    /// A waker claimed this worker while it was parked (its
    /// `Sleepers::leave_parked` said so).
    fn claimed(&mut self) {}
    /// The period ends with work: `idle_since` is when the first walk
    /// failed, `slept` whether the worker slept in the period.
    fn exit_idle(&mut self, idle_since: Option<u64>, slept: bool) {
        let _ = (idle_since, slept);
    }
    /// A clock, in nanoseconds (for the period's length).
    fn now(&self) -> u64 {
        0
    }
    /// Counts an event.
    fn count(&mut self, e: Event) {
        let _ = e;
    }
}

/// How an idle period ended (or paused).
#[derive(Debug)]
pub enum Idle<T> {
    /// Work found.
    Run(T),
    /// The runtime shuts down.
    Shutdown,
    /// The worker sleeps in the I/O driver (a poller, or its thread): the
    /// runtime waits there, and the next call goes on with the period.
    Suspended,
}

/// What an idle period carries from one pass of its loop to the next (and
/// across a suspension).
#[derive(Debug, Default)]
struct Period {
    kicked_by: Option<usize>,
    idle_since: Option<u64>,
    slept_any: bool,
}

/// One pass of the idle loop, as it stood when the wait returned.
#[derive(Debug)]
struct Pass {
    t0: u64,
    announced: bool,
    /// The re-check's find, when it kept the worker from sleeping.
    pending: Option<usize>,
}

/// An idle period suspended while its worker sleeps in the I/O driver.
#[derive(Debug)]
pub struct Suspended {
    period: Period,
    pass: Pass,
    /// Set when a wake made in the driver put work on this worker: it has
    /// left the `parked` set then (`Some(searching)`, what
    /// [`Sleepers::leave_parked`](crate::sched::sleepers::Sleepers::leave_parked)
    /// returned), so the wakes after it spread to other workers.
    pub left_parked: Option<bool>,
}

/// The owner `me`'s clear of its `queued` bit at the start of an idle
/// period ([`push::clear_queued`]), counted.
fn clear_queued<T>(rt: &impl Queues<T>, w: &mut impl IdleWorker<T>) -> Option<T> {
    let me = w.index();
    let (_, _, queued_bit) = w.parts();
    let t = push::clear_queued(rt, me, queued_bit)?;
    w.count(Event::InboxPull);
    Some(t)
}

/// Work was found by idle worker `w` ([`push::found_work`]): it stops
/// searching, and the work left behind gets a worker.
pub fn found_work<T>(rt: &impl Queues<T>, w: &mut impl IdleWorker<T>) {
    let me = w.index();
    let (local, searching, queued_bit) = w.parts();
    // What it holds beyond the task it runs: its deque (a stolen or pulled
    // batch), and its inbox, where a delivery may have come while it
    // searched (the deliverer's check then counted on it as a searcher;
    // it may be about to run a long poll elsewhere, a task of a place
    // queue or a steal, so the pusher's steps run for what waits there).
    let inbox = &rt.mailbox(me).inbox;
    let woke = push::found_work(
        rt,
        me,
        searching,
        || !local.is_empty() || !inbox.is_empty(),
        queued_bit,
        || rt.find_queued_work(me),
    );
    rt.count_wake(me, woke);
    if let Some(dq) = rt.places() {
        // A wake for a place queue may have brought this worker here, and
        // it runs other work: the wake is handed on (sched/place_queue.rs).
        place_queue::left_behind(rt, dq, me, |x| rt.count_wake(me, Some(x)));
    }
}

/// A task of one of `w`'s place queues (sched/place_queue.rs), nearest first (the
/// caller's `found_work` checks for what it leaves behind).
fn take_placed<T>(rt: &impl Queues<T>, w: &mut impl IdleWorker<T>) -> Option<T> {
    let t = place_queue::take(rt.places()?, w.index())?;
    w.count(Event::PlacedPull);
    Some(t)
}

/// The idle path of worker `w`, whose own queues are empty: the sequence
/// of src/sched/README.md, "The idle worker's steps", until work is found, the runtime shuts down,
/// or the wait is suspended. `sleep` parks the worker (see
/// [`Mailbox::wait_with`](crate::sched::park::Mailbox::wait_with)).
pub fn idle<T>(
    rt: &impl Queues<T>,
    w: &mut impl IdleWorker<T>,
    mut sleep: impl FnMut(&Parker) -> Poll<bool>,
) -> Idle<T> {
    let mut period = match w.suspended().take() {
        Some(mut s) => {
            let res = w.resume(&mut sleep);
            if matches!(res, Wait::Suspended) {
                *w.suspended() = Some(s);
                return Idle::Suspended;
            }
            if let Some(searching) = s.left_parked {
                // A wake in the driver took this worker out of the parked
                // set already (`Core::wake_self_in_driver`).
                s.pass.announced = false;
                *w.parts().1 = searching;
                if searching {
                    // It left the parked set claimed by a waker.
                    w.claimed();
                }
            }
            let mut period = s.period;
            if let Some(out) = after_wait(rt, w, &mut period, s.pass, res) {
                return out;
            }
            period
        }
        None => {
            if let Some(t) = clear_queued(rt, w) {
                return Idle::Run(t);
            }
            w.enter_idle();
            let searching = w.parts().1;
            if !*searching {
                *searching = rt.sleepers().to_searching();
            }
            Period::default()
        }
    };
    let me = w.index();
    loop {
        // A kick may have come with other work (the wait then returned
        // that work, not the kick): take the note here so it is not lost.
        let kick = period
            .kicked_by
            .take()
            .or_else(|| rt.mailbox(me).take_kick());
        // The place queues first: only this worker's domains may run
        // their tasks.
        if let Some(t) = take_placed(rt, w) {
            found_work(rt, w);
            w.exit_idle(period.idle_since, period.slept_any);
            return Idle::Run(t);
        }
        if *w.parts().1 || kick.is_some() {
            if let Some(t) = w.walk(kick) {
                found_work(rt, w);
                w.exit_idle(period.idle_since, period.slept_any);
                return Idle::Run(t);
            }
        }
        let now = w.now();
        let t0 = *period.idle_since.get_or_insert(now);
        w.begin_pass();
        let searching = *w.parts().1;
        let mut announced = false;
        let mut pending = None;
        let mut rechecked = false;
        let res = w.wait(
            || {
                // Announce the sleep (src/sched/README.md, idle steps 3 and 4). With no searcher
                // left, re-check the `queued` set and steal instead of
                // sleeping when it finds work.
                announced = true;
                let none_left = rt.sleepers().to_parked(me, searching);
                if none_left {
                    rechecked = true;
                    pending = rt.find_queued_work(me);
                    if pending.is_some() {
                        return false;
                    }
                }
                // The place queues of its domains, whatever the searchers
                // (a searcher elsewhere cannot take their tasks): after a
                // fence, store-buffering with the pushers' (README, "Place queues").
                match rt.places() {
                    Some(dq) => !place_queue::recheck(dq, me, none_left),
                    None => true,
                }
            },
            &mut sleep,
        );
        if rechecked {
            w.count(Event::ParkRecheck);
        }
        let pass = Pass {
            t0,
            announced,
            pending,
        };
        if matches!(res, Wait::Suspended) {
            *w.suspended() = Some(Suspended {
                period,
                pass,
                left_parked: None,
            });
            return Idle::Suspended;
        }
        if let Some(out) = after_wait(rt, w, &mut period, pass, res) {
            return out;
        }
    }
}

/// The end of one idle pass, after its wait (idle step 6): `Some` ends the idle
/// period.
fn after_wait<T>(
    rt: &impl Queues<T>,
    w: &mut impl IdleWorker<T>,
    period: &mut Period,
    pass: Pass,
    res: Wait<T>,
) -> Option<Idle<T>> {
    let me = w.index();
    if pass.announced {
        // Awake again; searching if a waker claimed us.
        let claimed = rt.sleepers().leave_parked(me);
        *w.parts().1 = claimed;
        if claimed {
            w.claimed();
        }
    }
    match res {
        Wait::Work { item, slept } => {
            if slept {
                w.count(Event::Slept);
            }
            w.count(Event::InboxPull);
            found_work(rt, w);
            w.exit_idle(Some(pass.t0), period.slept_any || slept);
            Some(Idle::Run(item))
        }
        Wait::Shutdown => Some(Idle::Shutdown),
        Wait::Suspended => unreachable!("a suspended wait is resumed, not ended"),
        Wait::Woken { slept, kicked_by } => {
            if slept {
                period.slept_any = true;
                w.count(Event::Slept);
            }
            period.kicked_by = kicked_by;
            // Relaxed: as `Shared::is_shutdown` (README, "Parking and the inbox hand-off").
            if rt.shutdown().load(Ordering::Relaxed) {
                return Some(Idle::Shutdown);
            }
            if let Some(v) = pass.pending {
                // The re-check found work at `v`: take it now rather than
                // sleep next to it.
                w.count(Event::PendingSteal);
                if let Some(t) = w.steal_from(v) {
                    // This worker re-checked because no searcher was left:
                    // pushers that saw the last searcher counted on it for
                    // their work, at `v` or elsewhere. It runs what it took
                    // without searching, so if work is left (behind `v`, or
                    // in another queue), a parked worker is woken for it.
                    // (Without this, work waits in another queue while
                    // workers sleep: hwsched-sim shows it.)
                    let left = if rt.has_work(v) {
                        Some(v)
                    } else {
                        rt.find_queued_work(me)
                    };
                    if let Some(u) = left {
                        rt.count_wake(me, push::notify_parked(rt, u));
                    }
                    found_work(rt, w);
                    w.exit_idle(Some(pass.t0), period.slept_any);
                    return Some(Idle::Run(t));
                }
            }
            let searching = w.parts().1;
            if !*searching {
                *searching = rt.sleepers().to_searching();
            }
            // Anything that lands in the LIFO slot or the deque while the
            // worker slept in the driver (wakes it made there) is its own
            // work: the next pass's walk does not look there. Then its
            // place queues (what the re-check found, or a wake brought).
            if let Some(t) = w.take_own().or_else(|| take_placed(rt, w)) {
                found_work(rt, w);
                w.exit_idle(Some(pass.t0), period.slept_any);
                return Some(Idle::Run(t));
            }
            None
        }
    }
}
