//! The timers' operations on a runtime's driver ([`TimerHandle`]): insert,
//! cancel, fire, and the sleeper's deadline, over the entries and wheels of
//! [`entry`](super::entry). The life of an entry and why no expiry is
//! lost: `entry.rs`.
//!
//! Below the scheduler: a worker installs its wheel here
//! ([`enter_worker`]) and calls [`sleep_deadline`] and [`fire_worker`] from
//! its park path; the wakes the firing makes go through the tasks' wakers,
//! which the worker's batch mode keeps on it (io/mod.rs, "A batch stays
//! local"). Nothing here names the worker or the runtime's shared state.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

use super::cover::{Cover, NONE};
use super::entry::{pack, unpack, Entry, ExternalTimers, Fire, Home};
use super::wheel::Wheel;

/// The driver's handle as the timers see it: the I/O driver's handle (a
/// timer that comes due earlier than the sleeper in poller 0 sleeps wakes
/// it; timers need the driver created), the runtime's clock origin, every
/// worker's wheel, and the outside threads' wheel. The runtime's shared
/// state holds it (`worker/shared.rs`); a registered timer keeps it alive
/// (`Sleep`).
pub(crate) struct TimerHandle {
    /// The I/O driver's handle.
    pub(crate) io: Arc<crate::io::IoHandle>,
    /// The runtime's start: tick 0 of every wheel.
    pub(crate) start: Instant,
    /// The timers of threads that are not this runtime's workers
    /// (`block_on`'s thread, the blocking pool): one wheel behind a lock,
    /// looked at by the worker holding poller 0 and by busy workers.
    ext: ExternalTimers,
    /// Per worker, its wheel (module docs of `entry.rs`, "Whose wheel").
    shards: Box<[CachePadded<Shard>]>,
    /// The earliest deadline of the shards and what the worker in poller 0
    /// sleeps until (cover.rs). `earliest` is lowered by the insert that
    /// lowers a shard's `next` and raised only by a scan, so a shard whose
    /// owner fired its own timers leaves it early, and the next scan (one
    /// spurious look) raises it.
    cover: CachePadded<Cover>,
}

/// One worker's wheel: locked by its owner to insert, cancel and fire (an
/// uncontended lock), by another thread to cancel one of its timers, and by
/// a worker that fires the due timers of a worker that does not (a scan).
struct Shard {
    /// `None` before the worker starts and after it exits.
    wheel: Mutex<Option<Wheel<Arc<Entry>>>>,
    /// A lower bound of the wheel's next expiration (`u64::MAX`: none),
    /// written under the lock: exact after a look at the wheel
    /// ([`fire_shard`]), lowered by an insert to its entry's slot (the
    /// wheel's `insert_at`, no scan of its levels), left as it is by a
    /// cancel. So a cancelled timer may leave it early: the worker then
    /// looks once at that tick (or sleeps until it), finds nothing due, and
    /// makes it exact.
    next: AtomicU64,
}

impl TimerHandle {
    /// The runtime shuts down: no timer of it fires any more. Sets the
    /// driver's flag (new timers and sockets are refused from now on) and
    /// ends its sockets' waits (`io::IoHandle::shutdown`), then shuts every
    /// timer of the outside wheel and of every worker's wheel and wakes its
    /// task: a blocking closure or another runtime waiting on one sees its
    /// `Sleep` panic instead of waiting forever, and a worker still in a
    /// long poll holds none of them back.
    pub(crate) fn shutdown(&self) {
        // The flag first, then the locks: an insert that takes a lock
        // after its drain sees the flag (`insert`).
        self.io.shutdown();
        let mut left = Vec::new();
        if let Some(w) = self.ext.wheel.lock().as_mut() {
            w.drain(|e| left.push(e));
        }
        self.ext.next.store(u64::MAX, Ordering::Relaxed);
        for s in self.shards.iter() {
            if let Some(w) = s.wheel.lock().as_mut() {
                w.drain(|e| left.push(e));
            }
            s.next.store(u64::MAX, Ordering::Relaxed);
        }
        for e in left {
            e.shut();
        }
    }

    /// The timers of a runtime of `workers` workers started at `start`,
    /// over the I/O handle `io`.
    pub(crate) fn new(io: Arc<crate::io::IoHandle>, start: Instant, workers: usize) -> TimerHandle {
        TimerHandle {
            io,
            start,
            ext: ExternalTimers::new(),
            shards: (0..workers)
                .map(|_| {
                    CachePadded::new(Shard {
                        wheel: Mutex::new(None),
                        next: AtomicU64::new(u64::MAX),
                    })
                })
                .collect(),
            cover: CachePadded::new(Cover::new()),
        }
    }

    /// A shard's `next` went down to `tick` (an insert, a scan's
    /// re-file): `earliest` follows, and the sleeper in poller 0 is woken
    /// if it sleeps past `tick` (cover.rs). Returns whether a worker sleeps
    /// there.
    fn lowered(&self, tick: u64) -> bool {
        let l = self.cover.lowered(tick);
        if l.wake {
            self.wake_sleeper();
        }
        l.sleeper
    }

    /// Wakes the worker sleeping in poller 0.
    fn wake_sleeper(&self) {
        if let Some(d) = self.io.get() {
            d.pollers[0].waker().wake_by_ref();
        }
    }
}

/// The milliseconds since `start` now, rounded down (the clock).
fn tick_now(start: Instant) -> u64 {
    Instant::now().saturating_duration_since(start).as_millis() as u64
}

thread_local! {
    /// This worker thread's runtime (the driver's address, an identity)
    /// and index: its timers go to that worker's wheel.
    static LOCAL: Cell<Option<(*const TimerHandle, usize)>> = const { Cell::new(None) };
}

thread_local! {
    /// The earliest tick of a timer this worker put on its wheel while
    /// nobody slept in poller 0 (`u64::MAX`: none): [`take_uncovered`].
    static UNCOVERED: Cell<u64> = const { Cell::new(u64::MAX) };
}

/// Before each poll on a worker: the earliest timer it set since its last
/// poll while nobody slept in poller 0, if somebody must be asked to cover
/// it (the poll about to begin may run long, and this worker's own sleep
/// would cover it too late). `None` when none was set, or when a worker
/// sleeps in poller 0 now. One thread-local read when there is none.
#[inline]
pub(crate) fn take_uncovered(rt: &TimerHandle) -> Option<u64> {
    let t = UNCOVERED.with(|u| u.replace(u64::MAX));
    if t == u64::MAX || rt.cover.sleeping_until() != 0 {
        return None;
    }
    Some(t)
}

/// The index of this thread's worker if it is one of `rt`'s.
fn worker_of(rt: &TimerHandle) -> Option<usize> {
    match LOCAL.with(Cell::get) {
        Some((h, w)) if std::ptr::eq(h, rt) => Some(w),
        _ => None,
    }
}

/// Registers a timer for `tick` of driver `rt`, to wake `waker`, on this
/// worker's wheel if this thread is one of `rt`'s workers, else on the
/// outside wheel.
pub(crate) fn insert(rt: &Arc<TimerHandle>, tick: u64, waker: &Waker) -> (Arc<Entry>, Home) {
    let e = Entry::new(tick, waker);
    if let Some(w) = worker_of(rt) {
        let s = &rt.shards[w];
        let lowered = {
            let mut g = s.wheel.lock();
            // Under the lock: the shutdown sets the flag before it takes
            // this lock to drain the wheel ([`TimerHandle::shutdown`]).
            if rt.io.is_shut() {
                e.shut();
                return (e, Home::Worker(w));
            }
            g.as_mut().map(|wheel| {
                let (k, at) = wheel.insert_at(tick, e.clone());
                e.key.store(pack(k), Ordering::Relaxed);
                // The wheel's next expiration is now the earlier of `at`
                // and what it was, of which `next` is a lower bound.
                let old = s.next.load(Ordering::Relaxed);
                (at < old).then(|| {
                    s.next.store(at, Ordering::Relaxed);
                    at
                })
            })
        };
        match lowered {
            Some(Some(next)) => {
                if !rt.lowered(next) {
                    // Nobody sleeps in poller 0: the worker covers the
                    // timer itself when it sleeps next, or, if it polls
                    // another task first, makes sure that somebody will
                    // ([`take_uncovered`]).
                    UNCOVERED.with(|u| u.set(u.get().min(next)));
                }
            }
            Some(None) => {}
            // The worker's wheel is gone (it exits): the outside wheel.
            None => return insert_outside(rt, e, tick),
        }
        return (e, Home::Worker(w));
    }
    insert_outside(rt, e, tick)
}

fn insert_outside(rt: &Arc<TimerHandle>, e: Arc<Entry>, tick: u64) -> (Arc<Entry>, Home) {
    let ext = &rt.ext;
    let wake = {
        let mut g = ext.wheel.lock();
        // Under the lock: the shutdown sets the flag before it takes this
        // lock to drain the wheel ([`TimerHandle::shutdown`]), so an insert
        // either sees the flag here or is drained.
        if rt.io.is_shut() {
            e.shut();
            return (e, Home::Outside);
        }
        let wheel = g.get_or_insert_with(|| Wheel::new(tick_now(rt.start)));
        let k = wheel.insert(tick, e.clone());
        e.key.store(pack(k), Ordering::Relaxed);
        // The wheel's next expiration, not `tick`: an entry in a higher
        // level's slot must be cascaded at the slot's start, which may be
        // earlier (time/wheel.rs); a look keyed on `tick` would skip it
        // while the sleeper's timeout, keyed on the wheel's, came due.
        ext.next.store(
            wheel.next_expiration().unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        // Under the lock: the sleeper stores what it sleeps until under it
        // too (`sleep_deadline`).
        tick < rt.cover.sleeping_until()
    };
    if wake {
        rt.wake_sleeper();
    }
    (e, Home::Outside)
}

/// Cancels a timer that has not fired (its `Sleep` is dropped or reset),
/// on any thread: a removal under its wheel's lock. The entry is then kept
/// for this thread's next timer if nobody else holds it ([`Entry::recycle`]).
pub(crate) fn cancel(rt: &TimerHandle, e: Arc<Entry>, home: &Home) {
    if e.done() {
        Entry::recycle(e);
        return;
    }
    e.cancel();
    match *home {
        Home::Worker(w) => {
            let s = &rt.shards[w];
            let mut g = s.wheel.lock();
            if let Some(wheel) = g.as_mut() {
                // The key is written under this lock (insert, re-file).
                wheel.remove(unpack(e.key.load(Ordering::Relaxed)));
                // `next` stays: a lower bound still (`Shard::next`), and
                // `earliest` needs no update either.
            }
        }
        Home::Outside => {
            if let Some(w) = rt.ext.wheel.lock().as_mut() {
                w.remove(unpack(e.key.load(Ordering::Relaxed)));
            }
        }
    }
    Entry::recycle(e);
}

/// Installs the wheel of worker `index` of `rt` and marks this thread as
/// that worker.
pub(crate) fn enter_worker(rt: &TimerHandle, index: usize) {
    *rt.shards[index].wheel.lock() = Some(Wheel::new(tick_now(rt.start)));
    LOCAL.with(|l| l.set(Some((rt as *const TimerHandle, index))));
}

/// Drops this worker's wheel (the runtime shuts down): its entries can
/// never fire now, so each is shut and its task woken. A task of this
/// runtime is dropped by the shutdown anyway; a `Sleep` that moved
/// elsewhere (another runtime, a plain thread, a blocking closure) panics
/// at its next poll instead of waiting forever.
pub(crate) fn exit_worker(rt: &TimerHandle) {
    let Some(index) = worker_of(rt) else {
        return;
    };
    LOCAL.with(|l| l.set(None));
    let s = &rt.shards[index];
    let wheel = s.wheel.lock().take();
    s.next.store(u64::MAX, Ordering::Relaxed);
    if let Some(mut wheel) = wheel {
        let mut left = Vec::new();
        wheel.drain(|e| left.push(e));
        for e in left {
            e.shut();
        }
    }
}

/// The deadline of the sleep of worker `me`. In poller 0 (`cover`) it
/// covers every timer: the earliest of every worker's wheel and of the
/// outside wheel, recorded as the tick it sleeps until, so that an insert
/// or a scan that lowers it wakes it. Elsewhere, none while a worker
/// sleeps in poller 0 (that one fires this worker's timers when they come
/// due, and their tasks run on it: one wake per expiry, not two), else
/// this worker's own next timer.
pub(crate) fn sleep_deadline(rt: &TimerHandle, me: usize, cover: bool) -> Option<Instant> {
    // This sleep covers this worker's own timers (below): none is left
    // for `take_uncovered`.
    UNCOVERED.with(|u| u.set(u64::MAX));
    let t = &rt.ext;
    let next = if cover {
        let g = t.wheel.lock();
        let theirs = g.as_ref().and_then(|w| w.next_expiration());
        // Under the outside wheel's lock, against the outside inserts;
        // against the workers' inserts, cover.rs.
        let next = rt.cover.sleep_until(theirs.unwrap_or(NONE));
        drop(g);
        next
    } else if rt.cover.sleeping_until() != 0 {
        // A worker sleeps in poller 0: it covers this wheel. If it leaves
        // the poller for work, it fires due timers at its looks, and a
        // worker that sets a timer meanwhile makes sure somebody sleeps
        // there by its deadline (`take_uncovered`). Relaxed: a stale read
        // is one of those cases.
        u64::MAX
    } else {
        rt.shards[me].next.load(Ordering::Relaxed)
    };
    if next == u64::MAX {
        return None;
    }
    // At most ~2.2 years past the wheel's clock (wheel.rs clamps its
    // placement), but checked: a deadline no `Instant` holds is none.
    rt.start.checked_add(Duration::from_millis(next))
}

/// The worker in poller 0 woke: inserts need not wake it now.
pub(crate) fn wake_sleeper_done(rt: &TimerHandle) {
    rt.cover.woke();
}

/// Fires worker `me`'s due timers, and with `ext` (it slept in poller 0,
/// or it is busy and looks every `EVENT_INTERVAL` tasks) the outside
/// wheel's due ones if its lock is free, and every other worker's due ones
/// when one may be due ([`scan`]): a worker in a long poll cannot fire its
/// own. Wakes are made outside the wheels' locks. Returns the number
/// fired.
pub(crate) fn fire_worker(rt: &TimerHandle, me: usize, ext: bool) -> usize {
    let now = tick_now(rt.start);
    let own = &rt.shards[me];
    // Relaxed: written by this worker, or lowered by a scan's re-file,
    // which lowers `earliest` too (the scan below, or the sleeper in
    // poller 0, fires it).
    let mut n = if own.next.load(Ordering::Relaxed) <= now {
        fire_shard(rt, own, now).0
    } else {
        0
    };
    if !ext {
        return n;
    }
    let t = &rt.ext;
    if t.next.load(Ordering::Relaxed) <= now {
        let mut due = Vec::new();
        if let Some(mut g) = t.wheel.try_lock() {
            if let Some(w) = g.as_mut() {
                w.advance(now, |e| due.push(e));
                t.next
                    .store(w.next_expiration().unwrap_or(u64::MAX), Ordering::Relaxed);
            }
        }
        n += fire_due(due, now, |tick, e| {
            let mut g = t.wheel.lock();
            if let Some(w) = g.as_mut() {
                let k = w.insert(tick, e.clone());
                e.key.store(pack(k), Ordering::Relaxed);
                t.next
                    .store(w.next_expiration().unwrap_or(u64::MAX), Ordering::Relaxed);
            }
        });
    }
    if rt.cover.due(now) {
        n += scan(rt, now);
    }
    n
}

/// Fires the due timers of every worker's wheel and raises `earliest` to
/// what the wheels then hold (cover.rs: the scan's swap, then the wheels,
/// then the end as an insert of what it found). Returns the number fired.
fn scan(rt: &TimerHandle, now: u64) -> usize {
    rt.cover.scan_begin();
    let mut n = 0;
    let mut m = NONE;
    for s in rt.shards.iter() {
        let (fired, next) = if s.next.load(Ordering::Relaxed) <= now {
            fire_shard(rt, s, now)
        } else {
            (0, s.next.load(Ordering::Relaxed))
        };
        n += fired;
        m = m.min(next);
    }
    // The scanner is awake: it covers `m` itself at its next sleep; the
    // sleeper in poller 0 is woken if it read "none" meanwhile.
    if rt.cover.scan_end(m).wake {
        rt.wake_sleeper();
    }
    n
}

/// Fires the due timers of shard `s`; returns how many, and the shard's
/// next expiration after it.
fn fire_shard(rt: &TimerHandle, s: &Shard, now: u64) -> (usize, u64) {
    let mut due: Vec<Arc<Entry>> = Vec::new();
    {
        let mut g = s.wheel.lock();
        let Some(wheel) = g.as_mut() else {
            return (0, u64::MAX);
        };
        let mut next = wheel.next_expiration().unwrap_or(u64::MAX);
        if next <= now {
            wheel.advance(now, |e| due.push(e));
            next = wheel.next_expiration().unwrap_or(u64::MAX);
        }
        // Exact again, also when nothing was due (a cancel left it early).
        s.next.store(next, Ordering::Relaxed);
    }
    let mut later = Vec::new();
    let n = fire_due(due, now, |tick, e| later.push((tick, e.clone())));
    if !later.is_empty() {
        let mut g = s.wheel.lock();
        if let Some(wheel) = g.as_mut() {
            for (tick, e) in later {
                let k = wheel.insert(tick, e.clone());
                e.key.store(pack(k), Ordering::Relaxed);
            }
            let next = wheel.next_expiration().unwrap_or(u64::MAX);
            s.next.store(next, Ordering::Relaxed);
            drop(g);
            // A re-filed entry is later than `now`, but may be earlier than
            // what `earliest` holds after a scan's swap. (The firing worker
            // is awake: it covers the entry itself at its next sleep.)
            rt.lowered(next);
        }
    }
    (n, s.next.load(Ordering::Relaxed))
}

fn fire_due(due: Vec<Arc<Entry>>, now: u64, mut reinsert: impl FnMut(u64, &Arc<Entry>)) -> usize {
    let mut n = 0;
    for e in due {
        match e.fire(now) {
            Fire::Later(t) => reinsert(t, &e),
            Fire::Fired => n += 1,
            Fire::Gone => {}
        }
    }
    n
}
