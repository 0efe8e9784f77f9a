//! Place queues: the queues of tasks placed in a domain of the topology
//! (`spawn_on(Place::Core | Llc | Numa | Package)`), which only the
//! domain's workers take from, and their hand-off.
//!
//! # The queues
//!
//! One multi-producer queue per distinct domain span (a core, an LLC, a
//! NUMA node, a package; domains of different kinds with the same workers
//! share one queue), built with the runtime. Each worker knows its own
//! queues, nearest first (its core's, its LLC's, ...). A placed task goes,
//! at its spawn and at every wake, to its domain's queue: never to a deque,
//! an inbox or a LIFO slot, so no steal, inbox pull or wake placement ever
//! sees it, and only a worker of the domain runs it. Each queue has a count
//! (`len`: counted after the push, uncounted before the pop, which reserves
//! the task), so a look at a queue is one load; and the runtime has one flag, `used`, set before the
//! first push into any of them, so a runtime without domain places pays
//! one load per look (its workers' find-work paths and idle passes).
//!
//! A worker looks at its queues (nearest first): in its find-work path
//! every `INBOX_CHECK_INTERVAL` polls and whenever its own queues are empty
//! (`worker/mod.rs`); at each pass of its idle sequence, after its wait
//! ends, and in the re-check before it sleeps (`sched/idle_steps.rs`).
//!
//! # Work conservation inside a domain
//!
//! **Whenever a domain's queue holds a task and a worker of the domain is
//! parked, a worker of the domain has been woken for it (and will take it,
//! or hand the wake on when it finds other work first), or no worker of the
//! domain was parked when the task was pushed, and none has gone to sleep
//! since without re-checking the queue (a re-check that sees the task does
//! not sleep).** The global wake
//! protocol ([`idle`](crate::sched::sleepers)) cannot give this: its searchers may all
//! be outside the domain.
//!
//! The steps:
//!
//! - **Pusher** ([`push`]): pushes, counts (`fetch_add`), `fence(SeqCst)`,
//!   re-checks shutdown (a set flag drains the queue into
//!   [`Workers::bury`], as a pinned push does); then runs the **domain
//!   check** ([`wake_member`]): the `parked` bits of the domain's workers;
//!   if one is set, that worker is claimed
//!   ([`Sleepers::wake_in`](crate::sched::sleepers::Sleepers::wake_in): counted awake
//!   and searching, then its bit taken) and notified. Every push checks,
//!   not only the one that makes the queue non-empty: a burst of `k`
//!   pushes wakes up to `k` parked workers of the domain at once, where a
//!   chain (each woken worker waking the next) would add one thread wake-up
//!   latency per task to the last one's start, which on a loaded machine
//!   is milliseconds each.
//! - **A worker leaving its idle period with work** ([`left_behind`],
//!   called by `idle_steps::found_work`, whether the work came from a
//!   place queue ([`take`]) or elsewhere): `fence(SeqCst)`, then the
//!   domain check for each of its queues that still holds work: a worker
//!   woken for a domain that finds other work first (its inbox, a steal)
//!   hands the wake on here.
//! - **A worker going to sleep** ([`recheck`], in the idle sequence's
//!   announcement, after [`Sleepers::to_parked`](crate::sched::sleepers::Sleepers::to_parked)
//!   has set its `parked` bit): `fence(SeqCst)` (unless `to_parked` made
//!   one), then the counts of its queues; work there and it does not sleep
//!   (it takes the task after the wait returns).
//!
//! # Why no wake is lost
//!
//! The pusher's (or a leaving worker's) check and the sleeper's re-check are
//! store-buffering with `SeqCst` fences on both sides, as in the global
//! protocol: the sleeper sets its `parked` bit, then fences, then reads the
//! counts; the pusher counts, then fences, then reads the `parked` bits.
//! Either the pusher sees the bit (and wakes that worker, or another parked
//! one of the domain), or the sleeper sees the count (and does not sleep).
//!
//! A check's outcome covers its task for as long as the queue holds it:
//! either it claimed a worker, which leaves its idle period only through
//! `left_behind` (the claim and the push happened before its wake, so it
//! sees the count, and checks again for what it does not take), or it
//! found no worker of the domain parked, and each of them re-checks before
//! it sleeps (and, not sleeping, takes a task and leaves through
//! `left_behind` too). A take by a busy worker (its find-work path)
//! changes neither, so it makes no check.
//!
//! What it costs: the domain check ignores whether a worker of the domain
//! is spinning or walking (the `idle` mask is a hint, and a spinning worker
//! may leave with other work), so a push may wake a parked worker while
//! another one of the domain was about to take the task. At most one wake
//! per push and one per worker leaving its idle period while the queue
//! holds work, each to a parked worker: a burst into a domain costs at
//! most one wake per worker of the domain that was asleep.
//!
//! # Shutdown
//!
//! A push re-checks the shutdown flag after its fence, and the runtime's
//! final drain makes a `fence(SeqCst)` before it drains the queues
//! ([`DomainQueues::drain`]): store-buffering between the flag and the
//! push, so a push the drain does not see sees the flag and drains the
//! queue itself (the graveyard's argument, `sched/shutdown.rs`). Nothing else
//! drains them: the workers leave them to the final drain.
//!
//! Model-checked: `loom-tests/tests/domain.rs` (a push while the
//! domain's worker goes to sleep), `domain_handover.rs` (a worker woken
//! for the domain that finds other work first, and hands the wake on past
//! its nearest, empty queue), `domain_burst.rs` (a push while two workers
//! of the domain go to sleep; two pushes) and `domain_levels.rs` (a push
//! into the farthest of a worker's three queues while it goes to sleep;
//! the counts after a claim that found no bit and was undone).

use std::ops::Range;

use crossbeam_utils::CachePadded;

use crate::sched::push::Workers;
use crate::sched::park::Notified;
use crate::sched::queue::{Inbox, Steal};
use crate::sync::{fence, spin_loop, AtomicBool, AtomicUsize, Ordering};

/// One domain's queue: its tasks, their count, and the domain's workers.
#[derive(Debug)]
pub struct DomainQueue<T> {
    queue: Inbox<T>,
    /// Tasks in `queue` (counted after the push, uncounted after the pop).
    len: AtomicUsize,
    span: Range<usize>,
}

/// The queues of a runtime's domains, and each worker's (see the
/// [module docs](self)).
#[derive(Debug)]
pub struct DomainQueues<T> {
    queues: Box<[CachePadded<DomainQueue<T>>]>,
    /// Per worker, its queues, nearest (smallest) first.
    of: Box<[Box<[u32]>]>,
    /// Set before the first push into any queue: until then a look costs
    /// this one load.
    used: AtomicBool,
}

impl<T> DomainQueues<T> {
    /// Queues for the domain `spans` (each a contiguous span of
    /// `workers`; equal spans share one queue). Returns them and, for each
    /// span given, the index of its queue.
    pub fn new(workers: usize, spans: &[Range<usize>]) -> (Self, Vec<usize>) {
        let mut distinct: Vec<Range<usize>> = Vec::new();
        let ids = spans
            .iter()
            .map(|s| match distinct.iter().position(|d| d == s) {
                Some(i) => i,
                None => {
                    distinct.push(s.clone());
                    distinct.len() - 1
                }
            })
            .collect();
        let of = (0..workers)
            .map(|w| {
                let mut mine: Vec<u32> = (0..distinct.len() as u32)
                    .filter(|&q| distinct[q as usize].contains(&w))
                    .collect();
                mine.sort_by_key(|&q| distinct[q as usize].len());
                mine.into_boxed_slice()
            })
            .collect();
        let queues = distinct
            .into_iter()
            .map(|span| {
                CachePadded::new(DomainQueue {
                    queue: Inbox::new(),
                    len: AtomicUsize::new(0),
                    span,
                })
            })
            .collect();
        (
            DomainQueues {
                queues,
                of,
                used: AtomicBool::new(false),
            },
            ids,
        )
    }

    /// The workers of queue `q`.
    pub fn span(&self, q: usize) -> &Range<usize> {
        &self.queues[q].span
    }

    /// Worker `w`'s queues, nearest first.
    pub fn of(&self, w: usize) -> impl Iterator<Item = usize> + '_ {
        self.of[w].iter().map(|&q| q as usize)
    }

    /// Whether any push was ever made (`Relaxed`: a hint for the looks of
    /// the find-work path; the re-check reads it after its fence).
    #[inline]
    pub fn used(&self) -> bool {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether one of worker `w`'s queues holds a task. `Acquire`: pairs
    /// with the pushers' `Release` count, so a take after it finds the
    /// task.
    #[inline]
    pub fn has_work(&self, w: usize) -> bool {
        self.used()
            && self
                .of(w)
                .any(|q| self.queues[q].len.load(Ordering::Acquire) > 0)
    }

    /// The final drain of shutdown: `fence(SeqCst)` (pairs with the fence
    /// of every [`push`], see the module docs), then every queue into
    /// `drop`. Returns how many tasks it dropped.
    pub fn drain(&self, mut drop: impl FnMut(T)) -> usize {
        fence(Ordering::SeqCst);
        if !self.used.load(Ordering::Relaxed) {
            return 0;
        }
        let mut n = 0;
        for q in self.queues.iter() {
            while let Some(t) = pop(q) {
                drop(t);
                n += 1;
            }
        }
        n
    }
}

/// Pops one task of `q`: first uncounts it (a CAS that never takes the
/// count below zero: the task is then reserved), then steals it, which
/// cannot miss: every counted task was pushed before it was counted, and
/// every taker reserves before it steals. Uncounting first means a look at
/// the count never shows a task that a taker has already got, so a worker
/// that sees a count above zero and does not sleep never waits on another
/// thread's progress.
fn pop<T>(q: &DomainQueue<T>) -> Option<T> {
    let mut n = q.len.load(Ordering::Relaxed);
    loop {
        if n == 0 {
            return None;
        }
        // Acquire: the count's modifications are all RMWs, so this reads
        // the release sequence of every push counted before, whose task
        // the steal below then sees. Release is not needed (nobody
        // acquires through an uncount). Failure: Relaxed (a retry).
        match q
            .len
            .compare_exchange_weak(n, n - 1, Ordering::AcqRel, Ordering::Relaxed)
        {
            Ok(_) => break,
            Err(v) => n = v,
        }
    }
    loop {
        match q.queue.steal() {
            Steal::Success(t) => return Some(t),
            // Contention (crossbeam), or the slot of a push still being
            // written before ours in the queue's order: the reserved task
            // is there.
            Steal::Retry | Steal::Empty => spin_loop(),
        }
    }
}

/// The pusher's steps (module docs): pushes `t` into queue `q`, counts it,
/// fences, re-checks shutdown, and runs the domain check
/// ([`wake_member`]). `near` is where the wake should look
/// first (the waker's worker, or the domain's first). Returns the worker
/// woken and what its notify did.
pub fn push<T>(
    rt: &impl Workers<T>,
    dq: &DomainQueues<T>,
    q: usize,
    near: usize,
    t: T,
) -> Option<(usize, Notified)> {
    if !dq.used.load(Ordering::Relaxed) {
        // Relaxed: ordered before the re-checks' reads by the fence below
        // (store-buffering with theirs); never cleared.
        dq.used.store(true, Ordering::Relaxed);
    }
    let dom = &dq.queues[q];
    dom.queue.push(t);
    // Release: publishes the push to a taker's Acquire reservation (and
    // look) of the count. The acquire half orders nothing needed.
    dom.len.fetch_add(1, Ordering::AcqRel);
    // Pairs with the re-check's fence (`recheck`) and with the final
    // drain's (`DomainQueues::drain`): store-buffering (module docs).
    fence(Ordering::SeqCst);
    // Relaxed: after the fence (see "Shutdown" in the module docs).
    if rt.shutdown().load(Ordering::Relaxed) {
        while let Some(t) = pop(dom) {
            rt.bury(t);
        }
        return None;
    }
    wake_member(rt, dq, q, near)
}

/// The domain check, after the caller's `fence(SeqCst)`: a parked worker
/// of queue `q`'s domain, nearest to `near`, is claimed and notified.
/// Returns it and what its notify did; `None` when no worker of the
/// domain is parked (every one is awake and re-checks before it sleeps).
pub fn wake_member<T>(
    rt: &impl Workers<T>,
    dq: &DomainQueues<T>,
    q: usize,
    near: usize,
) -> Option<(usize, Notified)> {
    let span = dq.span(q);
    let w = rt.sleepers().wake_in(span, near, || {
        // The claim was undone: pushers may have skipped their wake
        // while it stood (it counted a searcher), so the global pusher's
        // check runs again.
        crate::sched::push::notify_parked(rt, near);
    })?;
    Some((w, rt.mailbox(w).parker.notify()))
}

/// A worker `me` takes a task from its queues, nearest first. (What it
/// leaves behind is the domain check's of [`left_behind`] when the worker
/// takes it in its idle period; a busy worker's take needs none: see the
/// module docs.)
#[inline]
pub fn take<T>(dq: &DomainQueues<T>, me: usize) -> Option<T> {
    if !dq.used() {
        return None;
    }
    take_slow(dq, me)
}

#[cold]
fn take_slow<T>(dq: &DomainQueues<T>, me: usize) -> Option<T> {
    dq.of(me).find_map(|q| pop(&dq.queues[q]))
}

/// The re-check of worker `me` going to sleep, after its `parked` bit is
/// set: `fence(SeqCst)` unless the caller's `to_parked` made one
/// (`fenced`), then whether one of its queues holds work.
#[inline]
pub fn recheck<T>(dq: &DomainQueues<T>, me: usize, fenced: bool) -> bool {
    if !fenced {
        // Pairs with the pushers' fences (store-buffering: module docs).
        fence(Ordering::SeqCst);
    }
    dq.has_work(me)
}

/// Worker `me` leaves its idle period with work (it may have been woken
/// for a domain's queue and found other work first): `fence(SeqCst)`,
/// then the domain check for each of its queues that holds work; `woke`
/// is called with each wake made.
#[inline]
pub fn left_behind<T>(
    rt: &impl Workers<T>,
    dq: &DomainQueues<T>,
    me: usize,
    woke: impl FnMut((usize, Notified)),
) {
    if dq.used() {
        left_behind_slow(rt, dq, me, woke);
    }
}

#[cold]
fn left_behind_slow<T>(
    rt: &impl Workers<T>,
    dq: &DomainQueues<T>,
    me: usize,
    mut woke: impl FnMut((usize, Notified)),
) {
    // Pairs with the re-checks' fences (store-buffering). The count needs
    // no fence (a push that claimed this worker happened before its wake),
    // but the look at the `parked` bits does: a worker of the domain that
    // announced its sleep before the pusher's fence may have missed the
    // count in its re-check, and its bit is ordered before this look only
    // through the fences' order (the pusher's comes before this one).
    fence(Ordering::SeqCst);
    for q in dq.of(me) {
        if dq.queues[q].len.load(Ordering::Relaxed) > 0 {
            if let Some(x) = wake_member(rt, dq, q, me) {
                woke(x);
            }
        }
    }
}
