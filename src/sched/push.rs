//! Handing work to workers: the pusher's steps of the wake protocol (the
//! start of every task's schedule path), the LIFO slot's push
//! ([`push_lifo`]), the shutdown check ([`admit`]) and the owner's clear of
//! its `queued` bit ([`clear_queued`]), written once over a small view of
//! the runtime ([`Workers`]) so that the runtime (`worker/`) and the loom
//! models (`conserve.rs`, `queued.rs`, `lifo.rs`) run the same code. The
//! callers keep what is theirs: placement, counters, and what a worker's
//! core holds. The steps: src/sched/README.md, "The pusher's steps" and
//! "The LIFO slot".

use std::ops::Range;

use crate::sched::sleepers::{Sleepers, WakeSpecific};
use crate::sched::park::{Mailbox, Notified};
use crate::sched::queue::{Local, OnePtr, Slot};
use crate::sync::{AtomicBool, Ordering};

/// What the pusher's steps need of a runtime: its idle state, each
/// worker's mailbox, where to look for a parked worker to wake, and its
/// shutdown flag with the burial of tasks found after it.
pub trait Workers<T> {
    /// The wake protocol's shared state.
    fn sleepers(&self) -> &Sleepers;
    /// Worker `w`'s mailbox.
    fn mailbox(&self, w: usize) -> &Mailbox<T>;
    /// The spans in which a wake for work at worker `near` looks for a
    /// parked worker, nearest first, the last covering every worker
    /// ([`Sleepers::wake_one`]).
    fn wake_spans(&self, near: usize) -> impl Iterator<Item = &Range<usize>> + Clone;
    /// The shutdown flag.
    fn shutdown(&self) -> &AtomicBool;
    /// Disposes of a task found after shutdown, possibly inside a waker
    /// call (the runtime's `Shared::bury`: not dropped there).
    fn bury(&self, t: T);
}

/// What a delivery to an inbox did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The worker was parked, and the delivery's notify woke it: it takes
    /// the task itself.
    Unparked,
    /// The worker is awake: the task is marked in `queued`, and the pusher's
    /// check ran ([`notify_parked`]'s result).
    Queued(Option<(usize, Notified)>),
}

/// What [`wake_placed`] did with a task whose placement chose a parked
/// worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// The worker was claimed as the one wake in flight and the task
    /// delivered to it ([`deliver_to_woken`]'s result).
    Woken(Notified),
    /// Another wake was in flight: the task went to `defer` (the waker's
    /// own deque).
    Deferred,
    /// The worker had woken by itself: a plain [`deliver`].
    Delivered(Delivery),
}

/// The start of every task's schedule path: after shutdown the task is
/// buried (not dropped: this may run inside a waker call); otherwise it is
/// returned to be placed. `Relaxed`, as the runtime's `is_shutdown`: the
/// flag is published by the parker RMW that follows its store, and a
/// delivery re-checks it after its own RMW (README, "Parking and the inbox hand-off";
/// [`Mailbox::deliver_or_drain`]).
#[inline]
pub fn admit<T>(rt: &impl Workers<T>, t: T) -> Option<T> {
    if rt.shutdown().load(Ordering::Relaxed) {
        rt.bury(t);
        return None;
    }
    Some(t)
}

/// The pusher's steps 2-3 (src/sched/README.md): after work became
/// stealable at worker `near`, wakes the parked worker nearest to it to
/// search, unless a worker already searches (or nobody is parked), with a
/// note to look at `near` first ([`Mailbox::kick`]). Returns the worker
/// woken and what its notify did.
#[inline]
pub fn notify_parked<T>(rt: &impl Workers<T>, near: usize) -> Option<(usize, Notified)> {
    let idle = rt.sleepers();
    if !idle.needs_wake() {
        return None;
    }
    let (w, _) = idle.wake_one(near, rt.wake_spans(near));
    let w = w?;
    Some((w, rt.mailbox(w).kick(near)))
}

/// The pusher's steps 1-3 after the owner `me` pushed onto its own deque:
/// marks `me` in the `queued` set once per busy period (`queued_bit` is
/// the owner's record of its bit), then the pusher's check.
#[inline]
pub fn after_push<T>(
    rt: &impl Workers<T>,
    me: usize,
    queued_bit: &mut bool,
) -> Option<(usize, Notified)> {
    if !*queued_bit {
        *queued_bit = true;
        // Relaxed: ordered before the check's load by its fence, and only
        // this worker pushes onto its deque.
        rt.sleepers().queued.insert(me, Ordering::Relaxed);
    }
    notify_parked(rt, me)
}

/// The owner `me`'s push onto its own deque `local`, where other workers
/// may steal it: the push, then [`after_push`] (the `queued` bit and the
/// pusher's check; in this order: a check before the push could miss a
/// worker that re-checks between the two and parks). `Core::push_local`
/// and the loom models call this.
#[inline]
pub fn push_local<T>(
    rt: &impl Workers<T>,
    me: usize,
    local: &Local<T>,
    queued_bit: &mut bool,
    t: T,
) -> Option<(usize, Notified)> {
    local.push(t);
    after_push(rt, me, queued_bit)
}

/// The owner `me`'s put into its LIFO slot `lifo` (a wake it keeps: it
/// runs the task next): an occupant it replaces goes to its deque `local`
/// with [`after_push`] (stealable work, the pusher's check); otherwise the
/// owner's `queued` bit is set (once per busy period, as [`after_push`]),
/// and nobody is woken: the owner runs the task as soon as its current poll
/// returns, and a wake would cost a futex round trip for a task that waits
/// microseconds. Should the poll run long, the slot is where a worker that
/// goes idle meanwhile finds the task: its re-check reads the `queued` set
/// and [`Queues::has_work`](crate::sched::idle_steps::Queues::has_work) counts
/// the slot, and its pending steal takes it (src/sched/README.md, "The LIFO slot").
/// `Core::push_lifo`, `Core::push_batch` and the loom model `lifo.rs` call
/// this.
#[inline]
pub fn push_lifo<T: OnePtr>(
    rt: &impl Workers<T>,
    me: usize,
    lifo: &Slot<T>,
    local: &Local<T>,
    queued_bit: &mut bool,
    t: T,
) -> Option<(usize, Notified)> {
    if let Some(prev) = lifo.put(t) {
        return replaced(rt, me, local, queued_bit, prev);
    }
    if !*queued_bit {
        *queued_bit = true;
        // Relaxed: a re-check that reads this bit after its fence looks at
        // the slot; the slot's Release store and the taker's Acquire swap
        // hand the task over (sched/queue.rs, `Slot`).
        rt.sleepers().queued.insert(me, Ordering::Relaxed);
    }
    None
}

/// [`push_lifo`]'s occupant moved to the deque, out of line: a wake that
/// finds the slot full is the rarer case (tokio's `schedule_local` pays the
/// same push).
#[cold]
#[inline(never)]
fn replaced<T>(
    rt: &impl Workers<T>,
    me: usize,
    local: &Local<T>,
    queued_bit: &mut bool,
    prev: T,
) -> Option<(usize, Notified)> {
    push_local(rt, me, local, queued_bit, prev)
}

/// Work was found by idle worker `me` (Go's `resetspinning` -> `wakep`):
/// stops searching (`searching` is the worker's record), and makes sure the
/// work left behind gets a worker. When the worker holds more than it runs
/// (`holds_more`, asked after it left searching: a stolen or pulled batch,
/// or a delivery into its inbox that counted on it as a searcher),
/// the pusher's steps run for it ([`after_push`]); otherwise the last
/// searcher re-checks (`recheck`, called after `leave_searching`'s fence:
/// a worker whose queue holds work), because pushers that saw it searching
/// counted on it, and wakes a parked worker for what it finds.
#[inline]
pub fn found_work<T>(
    rt: &impl Workers<T>,
    me: usize,
    searching: &mut bool,
    holds_more: impl FnOnce() -> bool,
    queued_bit: &mut bool,
    recheck: impl FnOnce() -> Option<usize>,
) -> Option<(usize, Notified)> {
    let last = std::mem::take(searching) && rt.sleepers().leave_searching();
    if holds_more() {
        after_push(rt, me, queued_bit)
    } else if last {
        recheck().and_then(|v| notify_parked(rt, v))
    } else {
        None
    }
}

/// The owner `me`'s clear of its `queued` bit when it goes idle with its
/// deque empty (only the owner pushes onto it; `queued_bit` is the owner's
/// record of its bit, which [`after_push`] reads): returns a task if the
/// inbox got one meanwhile.
/// The idle sequence ([`idle_steps`](crate::sched::idle_steps)) and the loom
/// model `queued.rs` call this.
///
/// ORDERING: AcqRel; its acquire is needed (loom: `queued.rs`, mutation
/// `worker-take-queued`). A deliverer pushes into the inbox, then sets the
/// bit with a release RMW ([`deliver`], [`deliver_to_woken`]). When this
/// clear reads that RMW (it comes later in the word's modification order),
/// its acquire makes the push visible to the inbox check below, which
/// takes the task; without it the check may read the inbox as it was
/// before the push (the bit and the inbox slots are different locations:
/// coherence does not help), and the bit, just cleared, no longer shows the
/// task to anyone who reads the `queued` set. When this clear comes first,
/// the deliverer's RMW sets the bit again after it, and the re-checks find
/// it. The release half publishes nothing (the owner's deque is empty and
/// readers of a clear bit look at nothing behind it), and a deliverer's
/// acquire half acquires nothing it needs (its pusher's check has its own
/// fence): with `Release` on the deliverers' RMWs and `Acquire` here the
/// models pass. Kept `AcqRel`: the same `lock and`/`lock or` on x86.
#[inline]
pub fn clear_queued<T>(rt: &impl Workers<T>, me: usize, queued_bit: &mut bool) -> Option<T> {
    // The owner's record goes with the bit: kept set, the next push would
    // skip setting the bit, and a re-check would not see that push.
    *queued_bit = false;
    if rt.sleepers().queued.remove(me, Ordering::AcqRel) {
        return rt.mailbox(me).take();
    }
    None
}

/// Delivers `t` to worker `to`'s inbox from anywhere.
///
/// If `to` was parked the delivery's notify woke it (an unpark), and it
/// takes the task itself. Otherwise `to` is awake: running (perhaps stuck
/// in a long poll) or idle. Either way the task is stealable work behind a
/// worker that may not get to it soon, so `to`'s `queued` bit is set (an
/// RMW: see sched/sleepers.rs on why the owner's clear cannot lose it) and the
/// pusher's check runs: work conservation. After shutdown the inbox is
/// drained into [`Workers::bury`] ([`Mailbox::deliver_or_drain`]).
#[inline]
pub fn deliver<T>(rt: &impl Workers<T>, to: usize, t: T) -> Delivery {
    let m = rt.mailbox(to);
    if m.deliver_or_drain(t, rt.shutdown(), |t| rt.bury(t)) == Notified::Unparked {
        return Delivery::Unparked;
    }
    // AcqRel; the release is needed: it publishes the inbox push to the
    // owner's clear of the bit ([`clear_queued`]: an RMW that reads this
    // one, then re-checks the inbox; loom: `queued.rs`). The acquire half
    // is not (see there).
    rt.sleepers().queued.insert_rmw(to, Ordering::AcqRel);
    Delivery::Queued(notify_parked(rt, to))
}

/// Delivers `t` to worker `w`, just claimed from the parked set as the one
/// wake in flight (it searches), and notifies it. The task is stealable
/// work behind a worker that may find other work first: marked in the
/// `queued` set, as in [`deliver`], then the pusher's check. The claim
/// does not cover that check: `w` may have been woken already by another
/// delivery (its bit still set when the claim took it), found that work,
/// and left searching before this push, and its check of what it holds
/// (`found_work`) then misses the task; its re-check looks at the others,
/// not at itself. The check (fence, then the count) and its
/// `leave_searching` (RMW, fence, then its inbox) are store-buffering: one
/// of them sees the other (loom: `queued.rs`,
/// `a_placement_on_a_worker_that_woke_by_itself_makes_the_pushers_check`).
/// The check's wake is not counted.
#[inline]
pub fn deliver_to_woken<T>(rt: &impl Workers<T>, w: usize, t: T) -> Notified {
    let n = rt
        .mailbox(w)
        .deliver_or_drain(t, rt.shutdown(), |t| rt.bury(t));
    // AcqRel, as in `deliver`: the release is needed (loom: `queued.rs`,
    // `a_placement_races_the_owner_clearing_its_bit`), by the woken
    // worker's next clear of its bit, when the worker found other work
    // first.
    rt.sleepers().queued.insert_rmw(w, Ordering::AcqRel);
    let _ = notify_parked(rt, w);
    n
}

/// A task whose wake placement chose idle worker `c`, which is parked:
/// wakes `c` only as the one wake in flight ([`Sleepers::wake_specific`])
/// and delivers the task to it; while another wake is in flight, marks `c`
/// idle again (the placement claimed its idle bit) and hands the task to
/// `defer` (the waker's own deque, where the searcher finds it); if `c`
/// woke by itself, delivers to it as to any awake worker.
#[inline]
pub fn wake_placed<T>(rt: &impl Workers<T>, c: usize, t: T, defer: impl FnOnce(T)) -> Placed {
    match rt.sleepers().wake_specific(c) {
        WakeSpecific::Woken => Placed::Woken(deliver_to_woken(rt, c, t)),
        WakeSpecific::InFlight => {
            // Relaxed: a placement hint (sched/sleepers.rs).
            rt.sleepers().idle.insert(c, Ordering::Relaxed);
            defer(t);
            Placed::Deferred
        }
        WakeSpecific::Awake => Placed::Delivered(deliver(rt, c, t)),
    }
}
