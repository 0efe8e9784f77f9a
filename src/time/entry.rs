//! Timer entries and the wheels that hold them: one per worker (a
//! thread-local wheel, no lock), and one behind a lock for the threads that
//! are not workers (`block_on`'s, the blocking pool's).
//!
//! # An entry's life
//!
//! - **Insert** on the thread that first polls the timer: into its worker's
//!   own wheel (O(1), no lock, no wake: the worker folds the wheel's next
//!   deadline into its park timeout), or, off the workers, into the
//!   outside wheel, whose insert wakes the worker sleeping in poller 0 only
//!   if the new deadline is earlier than the one it sleeps until.
//! - **Fire** on the owning worker, after its park or at its periodic look
//!   (every `EVENT_INTERVAL` tasks): the state becomes `FIRED` (a CAS), then
//!   the waker is taken and woken, in the driver's batch mode (the task
//!   stays on this worker).
//! - **Push later** (an interval's next tick, a reset to a later deadline):
//!   only the entry's deadline changes (a CAS); the wheel keeps the old
//!   slot, and when it comes due the owner re-inserts the entry at its new
//!   deadline (tokio's `extend_expiration`). Earlier: removed and inserted.
//! - **Cancel** (the timer dropped before it fired): on the owning worker a
//!   wheel removal by key (O(1)); elsewhere the entry is marked `CANCELLED`
//!   (so it never wakes) and its key queued to the owner, which removes it
//!   at its next look; keys carry a generation, so a stale one removes
//!   nothing.
//!
//! # Why no expiry is lost, and none is early
//!
//! The waker is stored under the entry's lock and `FIRED` re-read after;
//! the owner sets `FIRED` before it takes the lock to take the waker (the
//! same argument as a socket's readiness, io/scheduled_io.rs). A deadline is
//! rounded up to the next millisecond tick, and the wheel fires an entry at
//! tick `t` only when the clock, rounded down, has reached `t`.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::wheel::{Key, Wheel};
use crate::shared::Shared;

/// The entry fired.
const FIRED: u64 = u64::MAX;
/// The entry was dropped before it fired.
const CANCELLED: u64 = u64::MAX - 1;
/// No key (the entry is not in a wheel).
const NO_KEY: u64 = u64::MAX;

/// What a timer and its wheel share.
pub(crate) struct Entry {
    /// The deadline tick, or `FIRED` / `CANCELLED`.
    state: AtomicU64,
    /// The entry's current key in its wheel (written by the owner only).
    key: AtomicU64,
    waker: Mutex<Option<Waker>>,
}

fn pack(k: Key) -> u64 {
    ((k.index as u64) << 32) | k.gen as u64
}

fn unpack(v: u64) -> Key {
    Key {
        index: (v >> 32) as u32,
        gen: v as u32,
    }
}

impl Entry {
    fn new(tick: u64) -> Arc<Entry> {
        Arc::new(Entry {
            state: AtomicU64::new(tick),
            key: AtomicU64::new(NO_KEY),
            waker: Mutex::new(None),
        })
    }

    /// Whether the entry fired.
    pub(crate) fn fired(&self) -> bool {
        // Acquire: pairs with the fire's CAS (module docs).
        self.state.load(Ordering::Acquire) == FIRED
    }

    /// Stores `waker` (unless it would wake the same task), then says
    /// whether the entry fired meanwhile.
    pub(crate) fn register(&self, waker: &Waker) -> bool {
        {
            let mut w = self.waker.lock();
            match &*w {
                Some(old) if old.will_wake(waker) => {}
                _ => *w = Some(waker.clone()),
            }
        }
        self.fired()
    }

    /// Moves the deadline to the later `tick` without touching the wheel;
    /// `false` if the entry fired (or the new tick is earlier).
    pub(crate) fn extend(&self, tick: u64) -> bool {
        // AcqRel: orders against the owner's fire CAS on the same word.
        self.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s < CANCELLED && tick >= s).then_some(tick)
            })
            .is_ok()
    }

    /// Fires at `now` (the owner).
    fn fire(&self, now: u64) -> Fire {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            if s >= CANCELLED {
                return Fire::Gone;
            }
            if s > now {
                return Fire::Later(s);
            }
            // AcqRel: release publishes FIRED to `fired`'s acquire; acquire
            // pairs with `extend`'s CAS.
            match self
                .state
                .compare_exchange(s, FIRED, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(v) => s = v,
            }
        }
        let w = self.waker.lock().take();
        if let Some(w) = w {
            w.wake();
        }
        Fire::Fired
    }

    /// Marks the entry dropped: it never wakes; the waker goes now.
    fn cancel(&self) {
        self.state.store(CANCELLED, Ordering::Release);
        drop(self.waker.lock().take());
    }
}

/// What [`Entry::fire`] did.
enum Fire {
    Fired,
    /// Cancelled (or fired) already: nothing to do.
    Gone,
    /// The deadline moved to this later tick: re-insert it there.
    Later(u64),
}

/// The milliseconds since `start` at `t`, rounded up (a deadline).
pub(crate) fn tick_up(start: Instant, t: Instant) -> u64 {
    let d = t.saturating_duration_since(start);
    let ms = d.as_millis() as u64;
    if d > Duration::from_millis(ms) {
        ms + 1
    } else {
        ms
    }
}

/// The milliseconds since `start` now, rounded down (the clock).
fn tick_now(start: Instant) -> u64 {
    Instant::now().saturating_duration_since(start).as_millis() as u64
}

/// This worker thread's wheel.
struct Local {
    rt: *const Shared,
    index: usize,
    wheel: Wheel<Arc<Entry>>,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

/// The outside threads' wheel, and the queues of cancellations for the
/// workers' wheels.
pub(crate) struct ExternalTimers {
    wheel: Mutex<Option<Wheel<Arc<Entry>>>>,
    /// The wheel's next expiration (`u64::MAX`: none): when a look must
    /// advance it (busy workers, the sleeper in poller 0).
    next: AtomicU64,
    /// The tick until which the worker in poller 0 sleeps (0: nobody sleeps
    /// on a timeout there): an insert before it wakes that worker.
    sleeping_until: AtomicU64,
    /// Per worker, keys of its wheel's entries dropped on other threads.
    cancels: Box<[Mutex<Vec<u64>>]>,
    has_cancels: Box<[AtomicBool]>,
}

impl ExternalTimers {
    pub(crate) fn new(workers: usize) -> Self {
        ExternalTimers {
            wheel: Mutex::new(None),
            next: AtomicU64::new(u64::MAX),
            sleeping_until: AtomicU64::new(0),
            cancels: (0..workers).map(|_| Mutex::new(Vec::new())).collect(),
            has_cancels: (0..workers).map(|_| AtomicBool::new(false)).collect(),
        }
    }
}

/// Where a registered timer lives.
pub(crate) enum Home {
    Worker(usize),
    Outside,
}

/// Registers a timer for `tick` of runtime `rt`, on this worker's wheel if
/// this thread is one of `rt`'s workers, else on the outside wheel.
pub(crate) fn insert(rt: &Arc<Shared>, tick: u64) -> (Arc<Entry>, Home) {
    let e = Entry::new(tick);
    let here = LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        match l.as_mut() {
            Some(local) if std::ptr::eq(local.rt, &**rt) => {
                let k = local.wheel.insert(tick, e.clone());
                e.key.store(pack(k), Ordering::Relaxed);
                Some(local.index)
            }
            _ => None,
        }
    });
    if let Some(w) = here {
        return (e, Home::Worker(w));
    }
    let ext = &rt.ext_timers;
    let wake = {
        let mut g = ext.wheel.lock();
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
        // Under the lock: ordered against the sleeper's store (module docs
        // of `sleep_deadline`).
        tick < ext.sleeping_until.load(Ordering::Relaxed)
    };
    if wake {
        if let Some(d) = rt.driver.get() {
            d.pollers[0].waker().wake_by_ref();
        }
    }
    (e, Home::Outside)
}

/// Cancels a timer that has not fired (its `Sleep` is dropped or reset).
pub(crate) fn cancel(rt: &Shared, e: &Arc<Entry>, home: &Home) {
    if e.fired() {
        return;
    }
    let key = e.key.load(Ordering::Relaxed);
    match *home {
        Home::Worker(w) => {
            let removed = LOCAL.with(|l| {
                let mut l = l.borrow_mut();
                match l.as_mut() {
                    Some(local) if std::ptr::eq(local.rt, rt) && local.index == w => {
                        local.wheel.remove(unpack(key));
                        true
                    }
                    _ => false,
                }
            });
            e.cancel();
            if !removed {
                let ext = &rt.ext_timers;
                ext.cancels[w].lock().push(key);
                ext.has_cancels[w].store(true, Ordering::Release);
            }
        }
        Home::Outside => {
            e.cancel();
            if let Some(w) = rt.ext_timers.wheel.lock().as_mut() {
                w.remove(unpack(key));
            }
        }
    }
}

/// Installs the wheel of worker `index` of `rt` on this thread.
pub(crate) fn enter_worker(rt: &Shared, index: usize) {
    LOCAL.with(|l| {
        *l.borrow_mut() = Some(Local {
            rt,
            index,
            wheel: Wheel::new(tick_now(rt.start)),
        })
    });
}

/// Drops this worker's wheel (its entries are never fired: the runtime
/// shuts down, and their tasks are dropped with it).
pub(crate) fn exit_worker() {
    let local = LOCAL.with(|l| l.borrow_mut().take());
    drop(local);
}

/// The deadline of this worker's next timer, and with `ext` (the worker
/// sleeps in poller 0) of the outside threads' next one; `ext` also records
/// it as the tick the worker sleeps until, so an earlier insert wakes it.
pub(crate) fn sleep_deadline(rt: &Shared, ext: bool) -> Option<Instant> {
    let mut next = LOCAL.with(|l| {
        l.borrow()
            .as_ref()
            .and_then(|local| local.wheel.next_expiration())
    });
    if ext {
        let t = &rt.ext_timers;
        let g = t.wheel.lock();
        let theirs = g.as_ref().and_then(|w| w.next_expiration());
        next = match (next, theirs) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        t.sleeping_until
            .store(next.unwrap_or(u64::MAX), Ordering::Relaxed);
    }
    next.map(|t| rt.start + Duration::from_millis(t))
}

/// The worker in poller 0 woke: outside inserts need not wake it now.
pub(crate) fn wake_sleeper_done(rt: &Shared) {
    rt.ext_timers.sleeping_until.store(0, Ordering::Relaxed);
}

/// Fires this worker's due timers (after its cancellations), and with
/// `ext` the outside wheel's due ones if its lock is free. Wakes are made
/// outside the wheels' borrows. Returns the number fired.
pub(crate) fn fire_worker(rt: &Shared, ext: bool) -> usize {
    let now = tick_now(rt.start);
    let mut due: Vec<Arc<Entry>> = Vec::new();
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let Some(local) = l.as_mut() else { return };
        let t = &rt.ext_timers;
        let w = local.index;
        // Acquire: pairs with `cancel`'s release store.
        if t.has_cancels[w].load(Ordering::Acquire) {
            t.has_cancels[w].store(false, Ordering::Relaxed);
            let keys = std::mem::take(&mut *t.cancels[w].lock());
            for k in keys {
                local.wheel.remove(unpack(k));
            }
        }
        if local.wheel.next_expiration().is_some_and(|t| t <= now) {
            local.wheel.advance(now, |e| due.push(e));
        }
    });
    let mut n = fire_due(due, now, |tick, e| {
        LOCAL.with(|l| {
            if let Some(local) = l.borrow_mut().as_mut() {
                let k = local.wheel.insert(tick, e.clone());
                e.key.store(pack(k), Ordering::Relaxed);
            }
        })
    });
    let t = &rt.ext_timers;
    if ext && t.next.load(Ordering::Relaxed) <= now {
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
    n
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
