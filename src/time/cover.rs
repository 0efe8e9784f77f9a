//! Who keeps time for the workers' wheels (entry.rs, "Whose wheel"): the
//! words the worker sleeping in poller 0 and the timers' inserts and scans
//! share ([`Cover`]: `earliest` and `sleeping_until`), and the steps each
//! takes on them. The protocol and its store buffering:
//! src/sched/README.md, "The timer cover"; under `cfg(loom)` the model
//! `loom-tests/tests/timers.rs` drives these steps.

use crate::sync::{fence, AtomicU64, Ordering};

/// No timer: the largest tick.
pub const NONE: u64 = u64::MAX;

/// The shared words (src/sched/README.md, "The timer cover").
#[derive(Debug)]
pub struct Cover {
    earliest: AtomicU64,
    sleeping_until: AtomicU64,
}

impl Default for Cover {
    fn default() -> Self {
        Cover::new()
    }
}

impl Cover {
    /// No timer anywhere, nobody asleep in poller 0.
    pub fn new() -> Self {
        Cover {
            earliest: AtomicU64::new(NONE),
            sleeping_until: AtomicU64::new(0),
        }
    }

    /// A worker wheel's next expiration went down to `tick` (its owner's
    /// insert, a re-filed entry, a scan's end): `earliest` follows. Returns
    /// whether the sleeper in poller 0 must be woken (it sleeps past
    /// `tick`) and whether a worker sleeps there at all.
    #[must_use]
    pub fn lowered(&self, tick: u64) -> Lowered {
        // Release: pairs with a scan's acquire swap (`scan_begin`).
        self.earliest.fetch_min(tick, Ordering::AcqRel);
        // ORDERING: the RMW, the fence, then the load: store buffering
        // against `sleep_until` (src/sched/README.md, "The timer cover").
        fence(Ordering::SeqCst);
        let until = self.sleeping_until.load(Ordering::Relaxed);
        Lowered {
            wake: tick < until,
            sleeper: until != 0,
        }
    }

    /// The worker in poller 0 is about to sleep, its other timers (the
    /// outside wheel's) next at `theirs`: records the tick it sleeps until
    /// and returns it, at most `earliest`. (Called under the outside
    /// wheel's lock, against whose inserts `sleeping_until` is read under
    /// it.)
    pub fn sleep_until(&self, theirs: u64) -> u64 {
        let next = theirs.min(self.earliest.load(Ordering::Relaxed));
        self.sleeping_until.store(next, Ordering::Relaxed);
        // ORDERING: the store, the fence, then the load: store buffering
        // against `lowered` (src/sched/README.md, "The timer cover"). An insert that lowers
        // `earliest` after the first load and sees the store wakes this
        // worker needlessly at worst.
        fence(Ordering::SeqCst);
        next.min(self.earliest.load(Ordering::Relaxed))
    }

    /// The worker in poller 0 woke: inserts need not wake it now.
    pub fn woke(&self) {
        self.sleeping_until.store(0, Ordering::Relaxed);
    }

    /// What the sleeper in poller 0 sleeps until (0: nobody sleeps there).
    /// Relaxed: callers use it as a hint, or under the outside wheel's
    /// lock.
    #[inline]
    pub fn sleeping_until(&self) -> u64 {
        self.sleeping_until.load(Ordering::Relaxed)
    }

    /// Whether a worker wheel's timer may be due at `now`.
    #[inline]
    pub fn due(&self, now: u64) -> bool {
        self.earliest.load(Ordering::Relaxed) <= now
    }

    /// A scan begins: `earliest` is "none" until [`scan_end`](Self::scan_end).
    pub fn scan_begin(&self) {
        // Acquire: pairs with the release of the inserts' RMW
        // (`lowered`): a wheel lowered before this swap is read lowered.
        self.earliest.swap(NONE, Ordering::AcqRel);
    }

    /// The scan found the wheels' next expirations at `m` at the earliest:
    /// as an insert of `m` ([`lowered`](Self::lowered)), since the sleeper
    /// may have read "none" meanwhile.
    #[must_use]
    pub fn scan_end(&self, m: u64) -> Lowered {
        if m == NONE {
            return Lowered {
                wake: false,
                sleeper: self.sleeping_until() != 0,
            };
        }
        self.lowered(m)
    }
}

/// What [`Cover::lowered`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lowered {
    /// The sleeper in poller 0 sleeps past the tick: wake it.
    pub wake: bool,
    /// A worker sleeps in poller 0.
    pub sleeper: bool,
}
