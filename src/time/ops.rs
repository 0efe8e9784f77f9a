//! The timers' operations on a runtime's driver ([`Handle`]): insert,
//! cancel, fire, and the sleeper's deadline, over the entries and wheels of
//! [`entry`](super::entry). The life of an entry and why no expiry is
//! lost: `entry.rs`.
//!
//! Below the scheduler: a worker installs its wheel here
//! ([`enter_worker`]) and calls [`sleep_deadline`] and [`fire_worker`] from
//! its park path; the wakes the firing makes go through the tasks' wakers,
//! which the worker's batch mode keeps on it (io/mod.rs, "A batch stays
//! local"). Nothing here names the worker or the runtime's shared state.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::entry::{pack, unpack, Entry, ExternalTimers, Fire, Home};
use super::wheel::Wheel;

/// The driver's handle as the timers see it: the I/O driver's handle (a
/// timer inserted from outside the workers wakes the worker in poller 0;
/// timers need the driver created), the runtime's clock origin, and the
/// outside threads' wheel. The runtime's shared state holds it
/// (`shared.rs`); a registered timer keeps it alive (`Sleep`).
pub(crate) struct Handle {
    /// The I/O driver's handle.
    pub(crate) io: Arc<crate::io::Handle>,
    /// The runtime's start: tick 0 of every wheel.
    pub(crate) start: Instant,
    /// The timers of threads that are not this runtime's workers
    /// (`block_on`'s thread, the blocking pool): one wheel behind a lock,
    /// looked at by the worker holding poller 0 and by busy workers.
    ext: ExternalTimers,
}

impl Handle {
    /// The runtime shuts down: no timer of it fires any more. Sets the
    /// driver's flag (new timers and sockets are refused from now on) and
    /// ends its sockets' waits (`io::Handle::shutdown`), then shuts every
    /// timer of the outside wheel and wakes its task: a blocking closure
    /// or another runtime waiting on one sees its `Sleep` panic instead of
    /// waiting forever. The workers' wheels are shut as each worker exits
    /// ([`exit_worker`]).
    pub(crate) fn shutdown(&self) {
        // The flag first, then the lock: an insert that takes the lock
        // after this drain sees the flag (`insert`).
        self.io.shutdown();
        let mut left = Vec::new();
        if let Some(w) = self.ext.wheel.lock().as_mut() {
            w.drain(|e| left.push(e));
        }
        self.ext.next.store(u64::MAX, Ordering::Relaxed);
        for e in left {
            e.shut();
        }
    }

    /// The timers of a runtime of `workers` workers started at `start`,
    /// over the I/O handle `io`.
    pub(crate) fn new(io: Arc<crate::io::Handle>, start: Instant, workers: usize) -> Handle {
        Handle {
            io,
            start,
            ext: ExternalTimers::new(workers),
        }
    }
}

/// The milliseconds since `start` now, rounded down (the clock).
fn tick_now(start: Instant) -> u64 {
    Instant::now().saturating_duration_since(start).as_millis() as u64
}

/// This worker thread's wheel.
struct Local {
    /// The driver the wheel belongs to (an identity).
    rt: *const Handle,
    index: usize,
    wheel: Wheel<Arc<Entry>>,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

/// Registers a timer for `tick` of driver `rt`, on this worker's wheel if
/// this thread is one of `rt`'s workers, else on the outside wheel.
pub(crate) fn insert(rt: &Arc<Handle>, tick: u64) -> (Arc<Entry>, Home) {
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
    let ext = &rt.ext;
    let wake = {
        let mut g = ext.wheel.lock();
        // Under the lock: the shutdown sets the flag before it takes this
        // lock to drain the wheel ([`Handle::shutdown`]), so an insert
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
        // Under the lock: ordered against the sleeper's store (module docs
        // of `sleep_deadline`).
        tick < ext.sleeping_until.load(Ordering::Relaxed)
    };
    if wake {
        if let Some(d) = rt.io.get() {
            d.pollers[0].waker().wake_by_ref();
        }
    }
    (e, Home::Outside)
}

/// Cancels a timer that has not fired (its `Sleep` is dropped or reset).
pub(crate) fn cancel(rt: &Handle, e: &Arc<Entry>, home: &Home) {
    if e.done() {
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
                let ext = &rt.ext;
                ext.cancels[w].lock().push(key);
                ext.has_cancels[w].store(true, Ordering::Release);
            }
        }
        Home::Outside => {
            e.cancel();
            if let Some(w) = rt.ext.wheel.lock().as_mut() {
                w.remove(unpack(key));
            }
        }
    }
}

/// Installs the wheel of worker `index` of `rt` on this thread.
pub(crate) fn enter_worker(rt: &Handle, index: usize) {
    LOCAL.with(|l| {
        *l.borrow_mut() = Some(Local {
            rt,
            index,
            wheel: Wheel::new(tick_now(rt.start)),
        })
    });
}

/// Drops this worker's wheel (the runtime shuts down): its entries can
/// never fire now, so each is shut and its task woken. A task of this
/// runtime is dropped by the shutdown anyway; a `Sleep` that moved
/// elsewhere (another runtime, a plain thread, a blocking closure) panics
/// at its next poll instead of waiting forever.
pub(crate) fn exit_worker() {
    let local = LOCAL.with(|l| l.borrow_mut().take());
    if let Some(mut local) = local {
        let mut left = Vec::new();
        local.wheel.drain(|e| left.push(e));
        for e in left {
            e.shut();
        }
    }
}

/// The deadline of this worker's next timer, and with `ext` (the worker
/// sleeps in poller 0) of the outside threads' next one; `ext` also records
/// it as the tick the worker sleeps until, so an earlier insert wakes it.
pub(crate) fn sleep_deadline(rt: &Handle, ext: bool) -> Option<Instant> {
    let mut next = LOCAL.with(|l| {
        l.borrow()
            .as_ref()
            .and_then(|local| local.wheel.next_expiration())
    });
    if ext {
        let t = &rt.ext;
        let g = t.wheel.lock();
        let theirs = g.as_ref().and_then(|w| w.next_expiration());
        next = match (next, theirs) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        t.sleeping_until
            .store(next.unwrap_or(u64::MAX), Ordering::Relaxed);
    }
    // At most ~2.2 years past the wheel's clock (wheel.rs clamps its
    // placement), but checked: a deadline no `Instant` holds is none.
    next.and_then(|t| rt.start.checked_add(Duration::from_millis(t)))
}

/// The worker in poller 0 woke: outside inserts need not wake it now.
pub(crate) fn wake_sleeper_done(rt: &Handle) {
    rt.ext.sleeping_until.store(0, Ordering::Relaxed);
}

/// Fires this worker's due timers (after its cancellations), and with
/// `ext` the outside wheel's due ones if its lock is free. Wakes are made
/// outside the wheels' borrows. Returns the number fired.
pub(crate) fn fire_worker(rt: &Handle, ext: bool) -> usize {
    let now = tick_now(rt.start);
    let mut due: Vec<Arc<Entry>> = Vec::new();
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let Some(local) = l.as_mut() else { return };
        let t = &rt.ext;
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
    let t = &rt.ext;
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
