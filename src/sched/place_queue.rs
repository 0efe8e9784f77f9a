//! Place queues: the queues of tasks placed in a domain of the topology
//! (`spawn_on(Place::Core | Llc | Numa | Package)`, [`DomainQueues`]),
//! which only the domain's workers take from, and their hand-off ([`push`],
//! [`left_behind`], [`recheck`]): work conservation inside a domain. The
//! protocol: src/sched/README.md, "Place queues".

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
/// src/sched/README.md, "Place queues").
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
    /// of every [`push`], see src/sched/README.md), then every queue into
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

/// The pusher's step (README, "Place queues", step 1): pushes `t` into queue `q`, counts it,
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
    // drain's (`DomainQueues::drain`): store-buffering (README, "Place queues").
    fence(Ordering::SeqCst);
    // Relaxed: after the fence (README, "Place queues", shutdown).
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
/// src/sched/README.md, "Place queues".)
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
        // Pairs with the pushers' fences (store-buffering: README, "Place queues").
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
