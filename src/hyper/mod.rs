//! hyper 1.x on hwsched: [`Executor`] and [`Timer`] (the `hyper`
//! feature), and, with the `server` feature, [`serve`]: an HTTP/1 and
//! HTTP/2 server for a tower or hyper service on a
//! [`TcpListener`](crate::net::TcpListener).
//!
//! hyper does not pick a runtime: it asks for an executor (to spawn the
//! tasks of HTTP/2 streams) and a timer (for its header read timeout and
//! HTTP/2 keep-alive pings). Without a timer, hyper's `header_read_timeout`
//! does nothing, and a client that sends half a request head holds its
//! connection open forever. These are hwsched's: [`Executor`] spawns on the
//! hwsched runtime, [`Timer`] sleeps on `hwsched::time`'s wheels.
//!
//! ```
//! use std::time::Duration;
//! use hyper::rt::Timer as _;
//!
//! let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
//! rt.block_on(async {
//!     let timer = hwsched::hyper::Timer;
//!     let t0 = std::time::Instant::now();
//!     timer.sleep(Duration::from_millis(5)).await;
//!     assert!(t0.elapsed() >= Duration::from_millis(5));
//!
//!     // What hyper's builders take.
//!     let mut h1 = hyper::server::conn::http1::Builder::new();
//!     h1.timer(hwsched::hyper::Timer)
//!         .header_read_timeout(Duration::from_secs(10));
//!     let _h2 = hyper::server::conn::http2::Builder::new(hwsched::hyper::Executor::new());
//! });
//! # Ok::<(), hwsched::BuildError>(())
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::runtime::handle::Handle;

#[cfg(feature = "server")]
mod serve;
#[cfg(feature = "server")]
pub use serve::{serve, HyperService, Serve, ServeError};

/// hyper's [`Executor`](::hyper::rt::Executor) on hwsched: spawns each
/// future as a detached hwsched task.
///
/// [`Executor::new`] spawns on the runtime of the thread that calls
/// `execute` (a worker, `block_on`'s thread, a blocking thread; outside
/// any, `execute` panics as [`spawn`](crate::spawn) does);
/// [`Executor::with_handle`] always spawns on one runtime, from any thread.
/// Once that runtime is shut down, a future given to it is dropped at once.
#[derive(Clone, Debug, Default)]
pub struct Executor {
    handle: Option<Handle>,
}

impl Executor {
    /// An executor that spawns on the calling thread's runtime.
    pub fn new() -> Executor {
        Executor { handle: None }
    }

    /// An executor that spawns on `handle`'s runtime.
    pub fn with_handle(handle: Handle) -> Executor {
        Executor {
            handle: Some(handle),
        }
    }
}

impl<F> ::hyper::rt::Executor<F> for Executor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        // Detached: hyper keeps what it needs of the task's outcome.
        drop(match &self.handle {
            Some(h) => h.spawn(fut),
            None => crate::spawn(fut),
        });
    }
}

/// hyper's [`Timer`](::hyper::rt::Timer) on `hwsched::time`: its sleeps
/// are [`hwsched::time::Sleep`](crate::time::Sleep)s, and `reset` moves
/// one in place (one atomic update when the deadline moves later, as
/// hyper's header timer and keep-alive do).
///
/// The sleeps belong to the runtime that first polls them: poll them in an
/// hwsched runtime that has timers (as every `time` future).
#[derive(Clone, Copy, Debug, Default)]
pub struct Timer;

/// A [`Timer`]'s sleep, as hyper holds it.
struct HyperSleep(crate::time::Sleep);

impl Future for HyperSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl ::hyper::rt::Sleep for HyperSleep {}

impl ::hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn ::hyper::rt::Sleep>> {
        Box::pin(HyperSleep(crate::time::sleep(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn ::hyper::rt::Sleep>> {
        Box::pin(HyperSleep(crate::time::sleep_until(deadline)))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn ::hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<HyperSleep>() {
            // `HyperSleep` is `Unpin`: the sleep moves its deadline in place.
            Some(s) => s.get_mut().0.reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::hyper::rt::Timer as _;

    #[test]
    fn timer_reset_moves_the_sleep_in_place() {
        let rt = crate::Runtime::builder().worker_threads(1).build().unwrap();
        rt.block_on(async {
            let t = Timer;
            let mut s = t.sleep(Duration::from_secs(3600));
            let t0 = Instant::now();
            t.reset(&mut s, Instant::now() + Duration::from_millis(5));
            assert!(s.as_mut().downcast_mut_pin::<HyperSleep>().is_some());
            s.await;
            let e = t0.elapsed();
            assert!(
                e >= Duration::from_millis(5) && e < Duration::from_secs(60),
                "{e:?}"
            );
        });
    }

    #[test]
    fn executor_spawns_on_the_runtime() {
        use ::hyper::rt::Executor as _;
        let rt = crate::Runtime::builder().worker_threads(1).build().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let tx2 = tx.clone();
        Executor::with_handle(rt.handle()).execute(async move {
            tx.send(crate::worker_index().is_some()).unwrap();
        });
        rt.block_on(async move {
            Executor::new().execute(async move {
                tx2.send(crate::worker_index().is_some()).unwrap();
            });
        });
        assert!(rx.recv().unwrap());
        assert!(rx.recv().unwrap());
    }
}
