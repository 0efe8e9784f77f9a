//! Timer entries and the wheels that hold them: one per worker, and one
//! for the threads that are not workers (`block_on`'s, the blocking
//! pool's), each behind a lock (ops.rs).
//!
//! # An entry's life
//!
//! - **Insert** on the thread that first polls the timer: into its worker's
//!   own wheel (O(1), under a lock only its owner takes but for the rare
//!   cases below), or, off the workers, into the outside wheel. An insert
//!   that makes a wheel's next expiration earlier wakes the worker sleeping
//!   in poller 0 only if the new deadline is earlier than the one it sleeps
//!   until ("Whose wheel", below).
//! - **Fire** after a park or at a busy worker's periodic look (every
//!   `EVENT_INTERVAL` tasks): by the owner, or by the worker that sleeps in
//!   poller 0 or looks while busy, for a worker that does not fire its own
//!   (a worker in a long poll). The state becomes `FIRED` (a CAS), then the
//!   waker is taken and woken, in the driver's batch mode (the task stays
//!   on the worker that fired it).
//! - **Push later** (an interval's next tick, a reset to a later deadline):
//!   only the entry's deadline changes (a CAS); the wheel keeps the old
//!   slot, and when it comes due the firing worker re-inserts the entry at
//!   its new deadline (tokio's `extend_expiration`). Earlier: removed and
//!   inserted.
//! - **Cancel** (the timer dropped before it fired), on any thread: the
//!   entry is marked `CANCELLED` (so it never wakes), then removed by key
//!   under its wheel's lock (O(1)); keys carry a generation, so a stale one
//!   removes nothing. The wheel's copy of its next expiration (`next`, a
//!   lower bound, ops.rs) is left as it is: if the entry was the earliest,
//!   its owner looks once at that tick for nothing and makes it exact.
//!   Neither an insert nor a cancel scans the wheel's levels.
//!
//! # Whose wheel
//!
//! A timer is only as punctual as the worker that fires it. Each worker
//! keeps its own wheel, but only one sleeper keeps time for all of them,
//! as tokio's driver and Go's netpoller do: the worker sleeping in poller
//! 0 sleeps until the earliest deadline of every wheel (a lower bound kept
//! in one word, `earliest`, lowered by the inserts that lower a wheel's
//! next expiration, raised by a scan), and when it wakes it fires every
//! wheel's due timers. The other parked workers sleep with no timer
//! timeout of their own while a worker sleeps in poller 0 (one wake per
//! expiry, not two), and with their own wheel's otherwise. So a timer of a
//! worker that is in a long poll fires on time: the sleeper fires it, and
//! its task runs on the sleeper. A busy worker looks at every wheel, at
//! its periodic look, when `earliest` says one is due.
//!
//! Nobody sleeps in poller 0 while its last sleeper runs work. A worker
//! that sets a timer then is the one that covers it (it sleeps next, in
//! the free poller); if it polls another task first (which may run long),
//! it makes sure that somebody sleeps there by the deadline
//! (`watch::cover_timer`: a watcher whose tick ends in time, or a parked
//! worker called to watch). What remains uncovered is a timer set in a
//! poll that itself runs long, while every other worker sleeps with no
//! timeout and no watcher is counted: tokio has the same window.
//!
//! What it costs: at idle nothing (no timer, no timeout; timers that are
//! far away, as HTTP header timeouts are, wake the sleeper only at their
//! deadlines and at the wheel's cascades); with timers firing at light
//! load, one wake per expiry, as tokio (`benches/timers.rs`, `sleepers-1`:
//! 1.09 voluntary context switches per expiry, tokio 1.03); at saturation
//! nobody sleeps, and busy workers fire due timers at their looks, every
//! wheel's when `earliest` says one is due (a scan: a load per worker).
//! An insert or a cancel takes its wheel's uncontended lock; an insert that
//! lowers its wheel's next expiration adds an RMW on `earliest` and a
//! fence. A program without timers pays a thread-local read per poll
//! (`take_uncovered`): hello-world HTTP at 7,405 instructions per request
//! against 7,400 before (`scripts/io-instructions.sh 2`, callgrind).
//!
//! # Why no expiry is lost, and none is early
//!
//! The first poll's waker is in the entry before the entry is in a wheel
//! (`Entry::new`): a firing worker finds the entry under the wheel's lock,
//! after the insert's unlock, so it sees the waker. A later poll's waker is
//! stored under the entry's lock and `FIRED` re-read after; the firing
//! worker sets `FIRED` before it takes the lock to take the waker (the
//! same argument as a socket's readiness, io/scheduled_io.rs).
//! A deadline is rounded up to the next millisecond tick, and a wheel
//! fires an entry at tick `t` only when the clock, rounded down, has
//! reached `t`.
//!
//! The sleeper in poller 0 does not sleep past a lowered deadline: it
//! stores the tick it sleeps until, then reads `earliest`; an insert
//! lowers `earliest` (an RMW), then reads that tick, each with a SeqCst
//! fence between, so
//! one of the two sees the other (cover.rs). A scan swaps
//! `earliest` to "none" before it reads the wheels and lowers it to what
//! they hold after, and wakes the sleeper when that is earlier than the
//! tick it sleeps until, since the sleeper may have read "none" meanwhile.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

use parking_lot::Mutex;

use super::wheel::{Key, Wheel};

/// The entry fired.
const FIRED: u64 = u64::MAX;
/// The entry was dropped before it fired.
const CANCELLED: u64 = u64::MAX - 1;
/// The entry's runtime shut down before it fired: it never fires, and its
/// `Sleep` panics when polled (time/mod.rs).
const SHUT: u64 = u64::MAX - 2;
/// The largest deadline tick (about 584 million years after the runtime's
/// start): a later deadline is this one, which the runtime never reaches,
/// so it waits forever; every value above it is a state.
pub(crate) const NEVER: u64 = u64::MAX - 3;
/// No key (the entry is not in a wheel).
const NO_KEY: u64 = u64::MAX;

/// What a timer and its wheel share.
pub(crate) struct Entry {
    /// The deadline tick, or `FIRED` / `CANCELLED`.
    pub(super) state: AtomicU64,
    /// The entry's current key in its wheel (written by the owner only).
    pub(super) key: AtomicU64,
    pub(super) waker: Mutex<Option<Waker>>,
}

pub(super) fn pack(k: Key) -> u64 {
    ((k.index as u64) << 32) | k.gen as u64
}

pub(super) fn unpack(v: u64) -> Key {
    Key {
        index: (v >> 32) as u32,
        gen: v as u32,
    }
}

/// How many cancelled entries a thread keeps for its next timers.
const SPARES: usize = 64;

thread_local! {
    /// Entries of timers cancelled on this thread, each held by nobody
    /// else, for the next timers set here: a timer set and cancelled per
    /// request (a server's timeouts, hyper's header timer) then allocates
    /// nothing ([`Entry::new`], [`Entry::recycle`]).
    static SPARE: RefCell<Vec<Arc<Entry>>> = const { RefCell::new(Vec::new()) };
}

impl Entry {
    /// A pending entry for `tick` that wakes `waker`: one of this thread's
    /// spares, or a new one. The waker is stored before the entry is
    /// shared (in no wheel yet): no lock.
    pub(super) fn new(tick: u64, waker: &Waker) -> Arc<Entry> {
        let spare = SPARE.try_with(|s| s.borrow_mut().pop()).ok().flatten();
        if let Some(mut e) = spare {
            // Unique since `recycle` kept it (nobody else can clone it):
            // `get_mut`'s acquire orders the last other holder's accesses
            // before these writes.
            if let Some(m) = Arc::get_mut(&mut e) {
                *m.state.get_mut() = tick;
                *m.key.get_mut() = NO_KEY;
                *m.waker.get_mut() = Some(waker.clone());
                return e;
            }
        }
        Arc::new(Entry {
            state: AtomicU64::new(tick),
            key: AtomicU64::new(NO_KEY),
            waker: Mutex::new(Some(waker.clone())),
        })
    }

    /// Keeps a cancelled entry as one of this thread's spares if nobody
    /// else holds it (not a firing worker that took it out of its wheel)
    /// and the thread keeps fewer than [`SPARES`]; else drops it.
    pub(super) fn recycle(mut e: Arc<Entry>) {
        if Arc::get_mut(&mut e).is_none() {
            return;
        }
        let _ = SPARE.try_with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < SPARES {
                s.push(e);
            }
        });
    }

    /// Whether the entry fired.
    pub(crate) fn fired(&self) -> bool {
        // Acquire: pairs with the fire's CAS (module docs).
        self.state.load(Ordering::Acquire) == FIRED
    }

    /// Whether the entry's runtime shut down before it fired.
    pub(crate) fn is_shut(&self) -> bool {
        // Acquire: pairs with `shut`'s CAS.
        self.state.load(Ordering::Acquire) == SHUT
    }

    /// Whether the entry is out of the race: fired, cancelled or shut.
    pub(crate) fn done(&self) -> bool {
        self.state.load(Ordering::Acquire) > NEVER
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
                (s <= NEVER && tick >= s).then_some(tick)
            })
            .is_ok()
    }

    /// Fires at `now` (the owner).
    pub(super) fn fire(&self, now: u64) -> Fire {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            if s > NEVER {
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

    /// Marks the entry as its runtime's shutdown left it, unless it fired
    /// (or was cancelled) first, and wakes its task, whose poll then panics
    /// (time/mod.rs): its timer can never fire.
    pub(super) fn shut(&self) {
        // AcqRel: release publishes SHUT to `is_shut`'s acquire; acquire
        // pairs with `extend`'s and the fire's CAS on the same word.
        let shut = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s <= NEVER).then_some(SHUT)
            })
            .is_ok();
        if shut {
            let w = self.waker.lock().take();
            if let Some(w) = w {
                w.wake();
            }
        }
    }

    /// Marks the entry dropped: it never wakes; the waker goes now.
    pub(super) fn cancel(&self) {
        self.state.store(CANCELLED, Ordering::Release);
        drop(self.waker.lock().take());
    }
}

/// What [`Entry::fire`] did.
pub(super) enum Fire {
    Fired,
    /// Cancelled (or fired) already: nothing to do.
    Gone,
    /// The deadline moved to this later tick: re-insert it there.
    Later(u64),
}

/// The milliseconds since `start` at `t`, rounded up (a deadline), at
/// most [`NEVER`]: a deadline past what a tick holds saturates there and
/// waits forever, never wraps to an earlier one.
pub(crate) fn tick_up(start: Instant, t: Instant) -> u64 {
    let d = t.saturating_duration_since(start);
    // In u128 nanoseconds: no overflow for any `Duration` (at most about
    // 1.8e28 ns).
    let ms = d.as_nanos().div_ceil(1_000_000);
    ms.min(NEVER as u128) as u64
}

/// The outside threads' wheel.
pub(crate) struct ExternalTimers {
    pub(super) wheel: Mutex<Option<Wheel<Arc<Entry>>>>,
    /// The wheel's next expiration (`u64::MAX`: none): when a look must
    /// advance it (busy workers, the sleeper in poller 0).
    pub(super) next: AtomicU64,
}

impl ExternalTimers {
    pub(crate) fn new() -> Self {
        ExternalTimers {
            wheel: Mutex::new(None),
            next: AtomicU64::new(u64::MAX),
        }
    }
}

/// Where a registered timer lives.
pub(crate) enum Home {
    Worker(usize),
    Outside,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn tick_up_rounds_up_and_saturates_for_any_duration() {
        let start = Instant::now();
        assert_eq!(tick_up(start, start), 0);
        assert_eq!(tick_up(start, start + Duration::from_nanos(1)), 1);
        assert_eq!(tick_up(start, start + Duration::from_millis(7)), 7);
        assert_eq!(tick_up(start, start + Duration::from_micros(7001)), 8);
        assert_eq!(tick_up(start + Duration::from_secs(1), start), 0);
        // Past what a tick holds: saturated, never wrapped (the count of
        // `u64::MAX` ms and more once truncated to a small tick).
        for d in [
            Duration::from_millis(u64::MAX),
            Duration::from_millis(u64::MAX) + Duration::from_nanos(1),
            Duration::from_millis(u64::MAX) + Duration::from_secs(2),
            Duration::from_secs(u64::MAX / 1000),
            Duration::from_millis(NEVER),
        ] {
            let Some(t) = start.checked_add(d) else {
                continue;
            };
            let tick = tick_up(start, t);
            let want = d.as_nanos().div_ceil(1_000_000).min(NEVER as u128) as u64;
            assert_eq!(tick, want, "{d:?}");
            assert!(tick <= NEVER, "{d:?}: {tick} is a state, not a tick");
        }
    }

    #[test]
    fn a_cancelled_entry_is_reused_fresh_only_when_nobody_else_holds_it() {
        let e = Entry::new(5, Waker::noop());
        e.key.store(7, Ordering::Relaxed);
        assert!(!e.register(Waker::noop()));
        e.cancel();
        let p = Arc::as_ptr(&e);
        Entry::recycle(e);
        let f = Entry::new(9, Waker::noop());
        assert_eq!(Arc::as_ptr(&f), p, "this thread's spare");
        assert_eq!(f.state.load(Ordering::Relaxed), 9);
        assert_eq!(f.key.load(Ordering::Relaxed), NO_KEY);
        assert!(f.waker.lock().is_some() && !f.done());
        // Held by another (a firing worker): not kept.
        let g = Entry::new(1, Waker::noop());
        let other = g.clone();
        Entry::recycle(g);
        let h = Entry::new(2, Waker::noop());
        assert_ne!(Arc::as_ptr(&h), Arc::as_ptr(&other));
        assert_eq!(other.state.load(Ordering::Relaxed), 1, "left as it was");
    }

    #[test]
    fn an_entry_at_the_last_tick_is_pending_and_may_be_shut_once() {
        let e = Entry::new(NEVER, Waker::noop());
        assert!(!e.done());
        assert!(matches!(e.fire(NEVER - 1), Fire::Later(NEVER)));
        assert!(e.extend(NEVER));
        e.shut();
        assert!(e.is_shut() && e.done() && !e.fired());
        assert!(!e.extend(NEVER));
        assert!(matches!(e.fire(NEVER), Fire::Gone));
        let f = Entry::new(3, Waker::noop());
        assert!(matches!(f.fire(3), Fire::Fired));
        f.shut();
        assert!(f.fired(), "a fired entry stays fired");
    }
}
