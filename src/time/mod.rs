//! Timers: [`sleep`], [`sleep_until`], [`timeout`] and [`interval`], on
//! hierarchical timing wheels (6 levels of 64 slots, 1 ms resolution), one
//! per worker, driven by the workers' park timeouts: no timer thread.
//!
//! A timer goes into the wheel of the worker that first polls it (an
//! uncontended lock, O(1) to insert and to cancel); the worker sleeping in
//! the first poller sleeps until the earliest deadline of every wheel (in
//! `epoll_wait`) and fires every wheel's due timers when it wakes, so a
//! timer of a worker in a long poll fires on time; busy workers fire due
//! timers every 61 tasks. A timer fires exactly once, never before its
//! deadline (deadlines round up to the next millisecond), and its task is
//! woken on the worker that fired it. Timers polled off the workers (in
//! `Runtime::block_on`) go to one shared wheel looked at by the same
//! workers. See `entry.rs` for the protocol.
//!
//! Timers belong to the runtime they are first polled in; polling one
//! outside any hwsched runtime, or in one built with
//! [`enable_io(false)`](crate::Builder::enable_io), panics with a message
//! that says so (as tokio's do).
//!
//! # At the edges
//!
//! - **Any deadline**: every deadline computation saturates. A `Duration`
//!   or `Instant` past what the wheel's millisecond ticks hold (about 584
//!   million years from the runtime's start) waits forever; none wraps to
//!   an earlier tick, none panics (`Duration::MAX`, `u64::MAX`
//!   milliseconds, `Sleep::reset` to the farthest `Instant`).
//! - **The runtime gone**: when a runtime shuts down, its timers that have
//!   not fired are *shut* and their tasks woken: polling one then panics
//!   ("this timer's runtime is shutting down or has shut down"), and so
//!   does a new timer polled in its context (`Handle::block_on` of a
//!   dropped runtime), on any thread, as tokio's do. A timer whose
//!   deadline already passed needs no runtime and is ready. So a
//!   `spawn_blocking` closure waiting on a timer (`Handle::block_on`)
//!   returns (its panic reaches its `JoinHandle`) and the runtime's drop
//!   does not wait on it forever.
//! - **The budget**: a timer that is ready (`sleep`, `sleep_until`,
//!   `timeout`, `timeout_at` whose deadline passed, or a `timeout` whose
//!   future is ready) spends one unit of the task's cooperative budget
//!   (`io/coop.rs`, 128 per poll), so a loop on them yields.
//!
//! ```
//! use std::time::Duration;
//! let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
//! rt.block_on(async {
//!     hwsched::time::sleep(Duration::from_millis(5)).await;
//!     let r = hwsched::time::timeout(Duration::from_millis(5), std::future::pending::<()>()).await;
//!     assert!(r.is_err());
//!     let mut tick = hwsched::time::interval(Duration::from_millis(1));
//!     tick.tick().await;
//!     tick.tick().await;
//! });
//! # Ok::<(), hwsched::BuildError>(())
//! ```

// The timers' cover protocol: public under `cfg(loom)` so the model
// `loom-tests/tests/timers.rs` drives the production steps.
#[cfg(loom)]
pub mod cover;
#[cfg(not(loom))]
mod cover;
mod entry;
mod interval;
mod ops;
mod wheel;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

pub use interval::{interval, interval_at, Interval, MissedTickBehavior};
pub use std::time::Instant;

use crate::io::coop;

pub(crate) use ops::{
    enter_worker, exit_worker, fire_worker, sleep_deadline, take_uncovered, wake_sleeper_done,
    TimerHandle,
};

/// The driver of this thread's runtime: its worker's, or, off the
/// workers, that of the runtime the thread runs for (`block_on`, a
/// blocking thread, the shutdown's drops), from the thread-local context
/// (`context.rs`, which the runtime fills: `block_on::enter` and the
/// worker's start).
pub(crate) fn current() -> Option<Arc<TimerHandle>> {
    crate::context::driver::<TimerHandle>()
}

/// Waits until `duration` has passed. Never early, for any `Duration`: a
/// deadline past what the wheel's millisecond ticks hold (about 584
/// million years) waits forever, and one past what an `Instant` holds
/// (`Duration::MAX`) is the farthest `Instant` there is, which waits
/// forever too.
pub fn sleep(duration: Duration) -> Sleep {
    let now = Instant::now();
    sleep_until(now.checked_add(duration).unwrap_or_else(|| far_future(now)))
}

/// Waits until `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        reg: None,
    }
}

/// The farthest `Instant` after `now` found by halving `Duration::MAX`
/// until the addition fits (at most 64 tries, on this rare path only): the
/// deadline of a sleep too long to represent. Its tick saturates at the
/// wheel's last one (`entry::NEVER`), so it never fires; tokio's 30 years
/// would be early for a duration past them.
fn far_future(now: Instant) -> Instant {
    let mut d = Duration::MAX;
    loop {
        d /= 2;
        if let Some(t) = now.checked_add(d) {
            return t;
        }
    }
}

/// A registered timer.
struct Reg {
    rt: Arc<TimerHandle>,
    entry: Arc<entry::Entry>,
    home: entry::Home,
}

/// The future of [`sleep`] and [`sleep_until`].
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    deadline: Instant,
    reg: Option<Reg>,
}

impl std::fmt::Debug for Sleep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .field("registered", &self.reg.is_some())
            .finish()
    }
}

impl Sleep {
    /// The instant this sleep ends at.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline has passed (and the sleep, polled, is ready).
    pub fn is_elapsed(&self) -> bool {
        match &self.reg {
            Some(r) => r.entry.fired(),
            None => Instant::now() >= self.deadline,
        }
    }

    /// Whether the sleep is registered and has neither fired nor been
    /// shut: a poll now would store its waker and return `Pending`, so a
    /// caller that knows the stored waker wakes the same task may skip it
    /// (one load instead of the entry's lock).
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn waits(&self) -> bool {
        self.reg.as_ref().is_some_and(|r| !r.entry.done())
    }

    /// Moves the deadline. A later deadline costs one atomic update (the
    /// wheel keeps its slot and re-files the timer when that comes due);
    /// an earlier one re-registers the timer.
    pub fn reset(&mut self, deadline: Instant) {
        self.deadline = deadline;
        if let Some(r) = &self.reg {
            let tick = entry::tick_up(r.rt.start, deadline);
            if r.entry.extend(tick) {
                return;
            }
        }
        self.deregister();
    }

    fn deregister(&mut self) {
        if let Some(r) = self.reg.take() {
            ops::cancel(&r.rt, r.entry, &r.home);
        }
    }

    /// Registers the timer, with `waker` stored in its entry before the
    /// entry is in a wheel (so the first poll takes no entry lock), unless
    /// it is registered already.
    fn register(&mut self, waker: &Waker) -> &Reg {
        if self.reg.is_none() {
            let rt = current().unwrap_or_else(|| {
                panic!(
                    "hwsched::time: a timer was polled outside any hwsched runtime (poll it in \
                     Runtime::block_on or a task)"
                )
            });
            if rt.io.is_shut() {
                shut_down();
            }
            // The driver's descriptors exist from `build` (io/handle.rs):
            // this fails only when I/O is off for the runtime.
            if let Err(e) = rt.io.driver() {
                panic!("hwsched::time: this runtime cannot keep timers: {e}");
            }
            let tick = entry::tick_up(rt.start, self.deadline);
            let (entry, home) = ops::insert(&rt, tick, waker);
            self.reg = Some(Reg { rt, entry, home });
        }
        self.reg.as_ref().expect("registered above")
    }
}

/// The panic of a timer whose runtime is shutting down or gone (tokio
/// panics the same way): its timers can never fire, so the poll that
/// would wait forever panics instead. In a task, the task layer catches
/// it (its `JoinHandle` resolves to a panic).
#[cold]
#[track_caller]
fn shut_down() -> ! {
    panic!(
        "hwsched::time: this timer's runtime is shutting down or has shut down: its timers \
         never fire (a timer cannot outlive its runtime)"
    )
}

impl Future for Sleep {
    type Output = ();

    /// Ready once the deadline has passed. A poll that finds it passed
    /// spends one unit of the task's cooperative budget (io/coop.rs), and
    /// a poll with the budget spent returns `Pending` (the task yields), as
    /// tokio's does: a loop on timers that are always due still yields.
    ///
    /// # Panics
    ///
    /// Outside any hwsched runtime, in one built with
    /// [`enable_io(false)`](crate::Builder::enable_io), and when the
    /// timer's runtime is shutting down or has shut down before the
    /// deadline came (a `Sleep` moved to another runtime or thread, a
    /// `Handle::block_on` of a dropped runtime): never a wait that cannot
    /// end.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !coop::has_budget() {
            coop::defer(cx.waker());
            return Poll::Pending;
        }
        let first = self.reg.is_none();
        if first && Instant::now() >= self.deadline {
            coop::consume();
            return Poll::Ready(());
        }
        let r = self.register(cx.waker());
        // On the first poll the entry holds the waker from before it was
        // in a wheel: whoever fires it wakes this task.
        if r.entry.fired() || (!first && r.entry.register(cx.waker())) {
            coop::consume();
            return Poll::Ready(());
        }
        if r.entry.is_shut() {
            if Instant::now() >= self.deadline {
                // Due anyway: nothing to wait for.
                coop::consume();
                return Poll::Ready(());
            }
            shut_down();
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.deregister();
    }
}

/// The error of [`timeout`]: the future did not finish in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// Runs `future` for at most `duration`: its output, or `Err(Elapsed)` (the
/// future is then dropped). A future that is ready at the deadline wins.
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout {
        future,
        sleep: sleep(duration),
    }
}

/// Runs `future` until `deadline` at most: [`timeout`] with an instant.
pub fn timeout_at<F: Future>(deadline: Instant, future: F) -> Timeout<F> {
    Timeout {
        future,
        sleep: sleep_until(deadline),
    }
}

/// The future of [`timeout`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Timeout<F> {
    future: F,
    sleep: Sleep,
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    /// The future's output if it is ready, else `Err(Elapsed)` once the
    /// deadline has passed. Each completion spends one unit of the task's
    /// cooperative budget (unless the future spent it already), and a poll
    /// with the budget spent returns `Pending`: a loop on timeouts that
    /// complete at once still yields. When the future itself ran out of
    /// budget, the deadline is still looked at (unbudgeted), so a starved
    /// future cannot hold its timeout off (tokio's rule).
    ///
    /// # Panics
    ///
    /// As [`Sleep`]'s poll does, when the deadline must be waited for.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if !coop::has_budget() {
            coop::defer(cx.waker());
            return Poll::Pending;
        }
        // SAFETY: `future` is structurally pinned: it is never moved out of
        // `self` and `Timeout` has no `Drop` impl nor `Unpin` impl that
        // would let it move; `sleep` is `Unpin` and not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above.
        let fut = unsafe { Pin::new_unchecked(&mut this.future) };
        let before = coop::left();
        if let Poll::Ready(v) = fut.poll(cx) {
            if coop::left() == before {
                coop::consume();
            }
            return Poll::Ready(Ok(v));
        }
        let sleep = Pin::new(&mut this.sleep);
        let r = if coop::has_budget() {
            sleep.poll(cx)
        } else {
            coop::unconstrained(|| sleep.poll(cx))
        };
        match r {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    }
}
