//! [`interval`] and [`interval_at`]: ticks every period, the first at once
//! (at the start instant), as tokio's do; what happens to the ticks missed
//! while the task was busy is its [`MissedTickBehavior`].
//!
//! A tick whose instant is past what [`Instant`] can hold (a period of
//! `Duration::MAX`, say) never comes: the interval then waits forever,
//! holds no timer, and never panics.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::{sleep_until, Instant, Sleep};

/// How late a tick may be and still count as on time: a wake this close
/// to the instant is not a missed tick (tokio's margin, 5 ms; the wheel's
/// resolution is 1 ms).
const LATE: Duration = Duration::from_millis(5);

/// What an [`Interval`] does with the ticks it missed: the ticks whose
/// instants passed while the task did not call [`Interval::tick`] (it was
/// busy, or the worker was). The names and choices are tokio's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedTickBehavior {
    /// The missed ticks come at once, one per call, until the interval has
    /// caught up; then it ticks on its original schedule (`start + k *
    /// period`). The default, as tokio's.
    #[default]
    Burst,
    /// The next tick comes one period after the late one was taken: the
    /// schedule shifts by the delay, and the ticks stay at least a period
    /// apart.
    Delay,
    /// The missed ticks are dropped: the next tick comes at the next instant
    /// of the original schedule after now.
    Skip,
}

impl MissedTickBehavior {
    /// The tick after the one due at `due`, taken late at `now`.
    fn next(self, due: Instant, now: Instant, period: Duration) -> Option<Instant> {
        match self {
            MissedTickBehavior::Burst => due.checked_add(period),
            MissedTickBehavior::Delay => now.checked_add(period),
            MissedTickBehavior::Skip => {
                // now - due < period * k for the smallest k: the next
                // multiple of the period after `now`.
                let late = now.saturating_duration_since(due).as_nanos();
                let p = period.as_nanos();
                let into = late % p;
                let into =
                    Duration::new((into / 1_000_000_000) as u64, (into % 1_000_000_000) as u32);
                // `into < period`: the difference is positive.
                now.checked_add(period - into)
            }
        }
    }
}

/// An interval whose first tick is now and then every `period`: a loop
/// on [`Interval::tick`] runs at once and then once per period (tokio's
/// `interval`). Missed ticks come in a burst by default
/// ([`MissedTickBehavior`]).
///
/// A period too long for [`Instant`] (up to `Duration::MAX`) is allowed:
/// the first tick comes at once, and the second never does.
///
/// ```
/// use std::time::{Duration, Instant};
/// use hwsched::time::{interval, MissedTickBehavior};
///
/// let rt = hwsched::Runtime::builder().worker_threads(1).build()?;
/// rt.block_on(async {
///     let t0 = Instant::now();
///     let mut every = interval(Duration::from_millis(10));
///     every.set_missed_tick_behavior(MissedTickBehavior::Delay);
///     every.tick().await; // at once
///     every.tick().await; // 10 ms later
///     assert!(t0.elapsed() >= Duration::from_millis(10));
///
///     let mut never = interval(Duration::MAX);
///     never.tick().await; // at once, and never again
/// });
/// # Ok::<(), hwsched::BuildError>(())
/// ```
///
/// # Panics
///
/// If `period` is zero (a loop on such an interval would never yield), as
/// tokio's `interval` does: "`period` must be non-zero".
#[track_caller]
pub fn interval(period: Duration) -> Interval {
    assert!(period > Duration::ZERO, "`period` must be non-zero");
    interval_at(Instant::now(), period)
}

/// An interval whose first tick is at `start` and then every `period`
/// ([`interval`], which starts now).
///
/// # Panics
///
/// If `period` is zero, as [`interval`].
#[track_caller]
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(period > Duration::ZERO, "`period` must be non-zero");
    Interval {
        delay: Some(sleep_until(start)),
        period,
        missed: MissedTickBehavior::default(),
    }
}

/// Ticks every period: [`interval`], [`interval_at`].
#[derive(Debug)]
pub struct Interval {
    /// The next tick's timer; `None`: the next tick is past what
    /// `Instant` can hold, and never comes.
    delay: Option<Sleep>,
    period: Duration,
    missed: MissedTickBehavior,
}

impl Interval {
    /// Waits for the next tick; returns the instant it was due at (which,
    /// for a late tick, is before now).
    pub async fn tick(&mut self) -> Instant {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick (what [`tick`](Self::tick) awaits). When it
    /// is `Pending`, `cx`'s waker is woken at the tick's instant.
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        let Some(delay) = self.delay.as_mut() else {
            return Poll::Pending;
        };
        let due = delay.deadline();
        if Pin::new(&mut *delay).poll(cx).is_pending() {
            return Poll::Pending;
        }
        let now = Instant::now();
        let next = if due.checked_add(LATE).is_some_and(|t| now > t) {
            self.missed.next(due, now, self.period)
        } else {
            due.checked_add(self.period)
        };
        self.set_next(next);
        Poll::Ready(due)
    }

    /// Makes the next tick one period from now (the ones before are
    /// dropped).
    pub fn reset(&mut self) {
        self.set_next(Instant::now().checked_add(self.period));
    }

    /// Makes the next tick now.
    pub fn reset_immediately(&mut self) {
        self.set_next(Some(Instant::now()));
    }

    /// Makes the next tick `after` from now.
    pub fn reset_after(&mut self, after: Duration) {
        self.set_next(Instant::now().checked_add(after));
    }

    /// Makes the next tick at `deadline`.
    pub fn reset_at(&mut self, deadline: Instant) {
        self.set_next(Some(deadline));
    }

    /// Moves the timer to `next` (`None`: never).
    fn set_next(&mut self, next: Option<Instant>) {
        match (next, self.delay.as_mut()) {
            // Later: one atomic update, the wheel keeps the timer.
            (Some(t), Some(d)) => d.reset(t),
            (Some(t), None) => self.delay = Some(sleep_until(t)),
            (None, _) => self.delay = None,
        }
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// What the interval does with missed ticks.
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.missed
    }

    /// Sets what the interval does with missed ticks (from the next tick
    /// on).
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed = behavior;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_lands_on_the_schedule_after_now() {
        let due = Instant::now();
        let p = Duration::from_millis(10);
        let now = due + Duration::from_millis(35);
        let next = MissedTickBehavior::Skip.next(due, now, p).unwrap();
        assert_eq!(next, due + Duration::from_millis(40));
        let next = MissedTickBehavior::Delay.next(due, now, p).unwrap();
        assert_eq!(next, now + p);
        let next = MissedTickBehavior::Burst.next(due, now, p).unwrap();
        assert_eq!(next, due + p);
        // On the schedule exactly: the next one after.
        let now = due + Duration::from_millis(30);
        let next = MissedTickBehavior::Skip.next(due, now, p).unwrap();
        assert_eq!(next, due + Duration::from_millis(40));
    }

    #[test]
    fn a_period_past_instant_saturates() {
        let now = Instant::now();
        for b in [
            MissedTickBehavior::Burst,
            MissedTickBehavior::Delay,
            MissedTickBehavior::Skip,
        ] {
            assert_eq!(b.next(now, now + LATE * 2, Duration::MAX), None);
        }
    }
}
