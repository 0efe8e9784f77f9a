//! Timers: thin wrappers of async-io's `Timer` (with the `io` feature).
//!
//! hwsched has no timer wheel of its own: async-io's reactor keeps the
//! timers, and with [`Builder::enable_io`](crate::Builder::enable_io) an
//! idle worker drives it, so a timer's expiry wakes its task from a worker.
//! These work on any executor (they are async-io's), and are here so that a
//! user finds them where they look.
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

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

/// Waits until `duration` has passed.
pub async fn sleep(duration: Duration) {
    async_io::Timer::after(duration).await;
}

/// Waits until `deadline`.
pub async fn sleep_until(deadline: Instant) {
    async_io::Timer::at(deadline).await;
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
/// future is then dropped).
pub async fn timeout<F: Future>(duration: Duration, future: F) -> Result<F::Output, Elapsed> {
    let mut future = pin!(future);
    let mut timer = async_io::Timer::after(duration);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = future.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match std::pin::Pin::new(&mut timer).poll(cx) {
            Poll::Ready(_) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// A timer that fires every `period`, the first time after one period.
pub fn interval(period: Duration) -> Interval {
    Interval {
        timer: async_io::Timer::interval(period),
    }
}

/// Fires every period: [`interval`].
#[derive(Debug)]
pub struct Interval {
    timer: async_io::Timer,
}

impl Interval {
    /// Waits for the next tick; returns its instant.
    pub async fn tick(&mut self) -> Instant {
        // An interval timer, awaited again, waits for its next period.
        (&mut self.timer).await
    }
}
