//! Poll timing: how long polls run and how long runnable tasks wait, per
//! worker, and which spawn sites run long polls (DESIGN.md 16).
//!
//! Off by default: each timed poll costs two clock reads and each timed
//! wake one (the vDSO's `clock_gettime`, about 20 ns each), which a
//! hello-world request would feel. [`Builder::poll_timing`] turns it on;
//! [`Builder::long_poll_threshold`] too.
//!
//! - **Poll time** (tokio's poll-time histogram): the length of every
//!   poll, in power-of-two buckets of microseconds ([`Histogram`]).
//! - **Run-queue delay** (the kernel's schedstat `run_delay`, `perf sched
//!   latency`): from the moment a task became runnable (its wake, or its
//!   spawn) to the start of its poll. The moment is stamped into the task
//!   by the wake; a task placed on a worker or domain is timed from its
//!   wakes only, not from its spawn.
//! - **Long polls**: polls longer than the threshold are counted, and the
//!   newest [`LONG_POLL_LOG`] per worker are kept with the spawn location
//!   of their task (`#[track_caller]` on every spawn function), so that a
//!   user can find the handler that holds a worker
//!   ([`Runtime::long_polls`]).
//!
//! Each worker writes its own histograms (relaxed loads and stores, no
//! read-modify-write); snapshots read them relaxed.
//!
//! [`Builder::poll_timing`]: crate::Builder::poll_timing
//! [`Builder::long_poll_threshold`]: crate::Builder::long_poll_threshold
//! [`Runtime::long_polls`]: crate::Runtime::long_polls

use std::collections::VecDeque;
use std::fmt;
use std::panic::Location;
use std::time::Duration;

use crate::sync::{AtomicU64, Ordering};

/// A runtime's clock: nanoseconds since its start, read from
/// `CLOCK_MONOTONIC` (the clock `Instant` reads on Linux) with one vDSO
/// call and a subtraction. `Instant::elapsed` reads the same clock but
/// then subtracts two `timespec`s with checked arithmetic and converts the
/// result back, about three times the instructions of the read itself;
/// the trace and poll timing read the clock at every event and poll.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    /// The clock's reading at the runtime's start, in ns.
    origin: u64,
}

impl Clock {
    /// The clock of a runtime that started at `start`.
    pub(crate) fn new(start: std::time::Instant) -> Clock {
        // The same clock read twice, `start` as far back from this reading
        // as it lies from now: origin + (now - origin) stays consistent
        // with `start.elapsed()` to within the two reads' distance.
        let now = monotonic_ns();
        Clock {
            origin: now.saturating_sub(start.elapsed().as_nanos() as u64),
        }
    }

    /// Nanoseconds since the start.
    #[inline]
    pub(crate) fn ns(&self) -> u64 {
        monotonic_ns().saturating_sub(self.origin)
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds.
#[inline]
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC is always
    // available on Linux, so the call cannot fail (its result is checked in
    // debug builds).
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(r, 0, "clock_gettime(CLOCK_MONOTONIC)");
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Buckets of a [`Histogram`]: bucket 0 holds durations under 1 us, bucket
/// `i` those in `[2^(i-1), 2^i)` us, the last everything from 2^(BUCKETS-2)
/// us (about 4.2 s) up.
pub const BUCKETS: usize = 24;

/// Long polls kept per worker for [`Runtime::long_polls`](crate::Runtime::long_polls).
pub const LONG_POLL_LOG: usize = 64;

/// The bucket of a duration of `ns` nanoseconds.
pub fn bucket_of(ns: u64) -> usize {
    let us = ns / 1_000;
    if us == 0 {
        return 0;
    }
    ((64 - us.leading_zeros()) as usize).min(BUCKETS - 1)
}

/// The upper bound of bucket `i` (exclusive), or `None` for the last.
pub fn bucket_end(i: usize) -> Option<Duration> {
    (i < BUCKETS - 1).then(|| Duration::from_micros(1u64 << i))
}

/// A distribution of durations in power-of-two buckets of microseconds,
/// with its exact maximum.
///
/// ```
/// use hwsched::timing::Histogram;
/// use std::time::Duration;
///
/// let mut h = Histogram::default();
/// for _ in 0..99 {
///     h.record(Duration::from_micros(3));
/// }
/// h.record(Duration::from_millis(5));
/// assert_eq!(h.count(), 100);
/// assert_eq!(h.percentile(0.5), Duration::from_micros(4)); // bucket [2, 4) us
/// assert_eq!(h.percentile(1.0), Duration::from_millis(5)); // the maximum
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Histogram {
    /// Counts per bucket ([`bucket_of`]).
    pub buckets: [u64; BUCKETS],
    /// The longest duration recorded.
    pub max: Duration,
}

impl Histogram {
    /// Adds one duration.
    pub fn record(&mut self, d: Duration) {
        self.buckets[bucket_of(d.as_nanos() as u64)] += 1;
        self.max = self.max.max(d);
    }

    /// How many durations it holds.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// An upper estimate of the `q` quantile (`0.0..=1.0`): the end of the
    /// bucket that holds it, never more than the maximum. Zero when empty.
    pub fn percentile(&self, q: f64) -> Duration {
        let n = self.count();
        if n == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_end(i).map_or(self.max, |e| e.min(self.max));
            }
        }
        self.max
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(o.buckets.iter()) {
            *a += b;
        }
        self.max = self.max.max(o.max);
    }
}

/// A histogram one worker writes (relaxed load and store per record).
#[derive(Debug, Default)]
pub(crate) struct LiveHistogram {
    buckets: [AtomicU64; BUCKETS],
    max_ns: AtomicU64,
}

impl LiveHistogram {
    /// Records `ns`; only the owning worker calls it.
    #[inline]
    pub(crate) fn record(&self, ns: u64) {
        let b = &self.buckets[bucket_of(ns)];
        b.store(b.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        if ns > self.max_ns.load(Ordering::Relaxed) {
            self.max_ns.store(ns, Ordering::Relaxed);
        }
    }

    pub(crate) fn snapshot(&self) -> Histogram {
        Histogram {
            buckets: std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed)),
            max: Duration::from_nanos(self.max_ns.load(Ordering::Relaxed)),
        }
    }
}

/// A poll longer than the runtime's long-poll threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongPoll {
    /// Where the task was spawned.
    pub location: &'static Location<'static>,
    /// How long the poll ran.
    pub duration: Duration,
    /// The worker that ran it.
    pub worker: usize,
    /// When it ended, since the runtime started.
    pub at: Duration,
}

impl fmt::Display for LongPoll {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.3?} poll on worker {} at {:.3?}: task spawned at {}",
            self.duration, self.worker, self.at, self.location
        )
    }
}

/// One worker's timing: written by it, read by snapshots.
#[derive(Debug, Default)]
pub(crate) struct WorkerTiming {
    pub(crate) poll_time: LiveHistogram,
    pub(crate) run_delay: LiveHistogram,
    pub(crate) long_polls: AtomicU64,
    /// The newest long polls (taken only on a long poll, and by readers).
    pub(crate) log: parking_lot::Mutex<VecDeque<LongPoll>>,
}

impl WorkerTiming {
    /// A poll of `ns` by `worker` ended at `end_ns`; longer than
    /// `threshold_ns`, it is counted and logged with `location`.
    pub(crate) fn poll(
        &self,
        worker: usize,
        ns: u64,
        end_ns: u64,
        threshold_ns: u64,
        location: &'static Location<'static>,
    ) {
        self.poll_time.record(ns);
        if ns > threshold_ns {
            let n = &self.long_polls;
            n.store(n.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            let mut log = self.log.lock();
            if log.len() == LONG_POLL_LOG {
                log.pop_front();
            }
            log.push_back(LongPoll {
                location,
                duration: Duration::from_nanos(ns),
                worker,
                at: Duration::from_nanos(end_ns),
            });
        }
    }

    pub(crate) fn snapshot(&self) -> PollTiming {
        PollTiming {
            poll_time: self.poll_time.snapshot(),
            run_delay: self.run_delay.snapshot(),
            long_polls: self.long_polls.load(Ordering::Relaxed),
        }
    }
}

/// One worker's poll timing in a [`Stats`](crate::Stats) snapshot (with
/// [`Builder::poll_timing`](crate::Builder::poll_timing) on).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PollTiming {
    /// How long polls ran.
    pub poll_time: Histogram,
    /// How long tasks waited, runnable, before their poll began.
    pub run_delay: Histogram,
    /// Polls longer than the long-poll threshold.
    pub long_polls: u64,
}

impl PollTiming {
    /// Adds another worker's timing.
    pub fn merge(&mut self, o: &PollTiming) {
        self.poll_time.merge(&o.poll_time);
        self.run_delay.merge(&o.run_delay);
        self.long_polls += o.long_polls;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_of_microseconds() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(999), 0);
        assert_eq!(bucket_of(1_000), 1);
        assert_eq!(bucket_of(1_999), 1);
        assert_eq!(bucket_of(2_000), 2);
        assert_eq!(bucket_of(1_000_000), 10); // 1 ms: [512, 1024) us
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_end(0), Some(Duration::from_micros(1)));
        assert_eq!(bucket_end(10), Some(Duration::from_micros(1024)));
        assert_eq!(bucket_end(BUCKETS - 1), None);
    }

    #[test]
    fn percentiles_of_planted_durations() {
        let live = LiveHistogram::default();
        // 90 polls of 10 us, 9 of 300 us, 1 of 20 ms.
        for _ in 0..90 {
            live.record(10_000);
        }
        for _ in 0..9 {
            live.record(300_000);
        }
        live.record(20_000_000);
        let h = live.snapshot();
        assert_eq!(h.count(), 100);
        assert_eq!(h.buckets[bucket_of(10_000)], 90);
        assert_eq!(h.buckets[bucket_of(300_000)], 9);
        assert_eq!(h.percentile(0.5), Duration::from_micros(16));
        assert_eq!(h.percentile(0.9), Duration::from_micros(16));
        assert_eq!(h.percentile(0.99), Duration::from_micros(512));
        assert_eq!(h.percentile(1.0), Duration::from_millis(20));
        assert_eq!(h.max, Duration::from_millis(20));
        assert_eq!(Histogram::default().percentile(0.99), Duration::ZERO);
    }

    #[test]
    fn long_polls_are_counted_and_the_log_keeps_the_newest() {
        let t = WorkerTiming::default();
        let here = Location::caller();
        t.poll(3, 10, 0, 1_000, here);
        assert_eq!(t.snapshot().long_polls, 0);
        for i in 0..(LONG_POLL_LOG as u64 + 5) {
            t.poll(3, 2_000 + i, i, 1_000, here);
        }
        let s = t.snapshot();
        assert_eq!(s.long_polls, LONG_POLL_LOG as u64 + 5);
        assert_eq!(s.poll_time.count(), LONG_POLL_LOG as u64 + 6);
        let log = t.log.lock();
        assert_eq!(log.len(), LONG_POLL_LOG);
        assert_eq!(
            log.back().unwrap().duration,
            Duration::from_nanos(2_000 + LONG_POLL_LOG as u64 + 4)
        );
        assert_eq!(log.front().unwrap().at, Duration::from_nanos(5));
        assert_eq!(log.back().unwrap().worker, 3);
    }

    #[test]
    fn the_clock_agrees_with_instant() {
        let start = std::time::Instant::now() - Duration::from_millis(5);
        let c = Clock::new(start);
        let a = c.ns();
        let e = start.elapsed().as_nanos() as u64;
        let b = c.ns();
        // Read between two readings of the fast clock, `elapsed` lies
        // between them, up to the origin's rounding of a few microseconds.
        assert!(a >= 5_000_000, "{a} ns since a start 5 ms ago");
        assert!(a <= e + 50_000 && e <= b + 50_000, "{a} <= {e} <= {b}");
    }
}
