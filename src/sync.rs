//! The one place concurrency primitives come from.
//!
//! Every atomic, mutex, condvar and thread spawn that the runtime's protocols
//! (parking, idle state, inbox hand-off, load counters, shutdown) use is
//! imported from here. Normally these are `std` / `parking_lot` /
//! `crossbeam`; under `cfg(loom)` they are loom's instrumented types, so the
//! loom models in `loom-tests/` check the production code unchanged. This is
//! tokio's `src/loom/` shim, reduced to what hwsched needs.

#[cfg(not(loom))]
mod imp {
    pub(crate) use std::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering,
    };

    /// A mutex whose `lock` cannot fail (parking_lot's, without poisoning).
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(parking_lot::Mutex<T>);
    pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        pub(crate) fn new(t: T) -> Self {
            Mutex(parking_lot::Mutex::new(t))
        }
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock()
        }
    }

    /// A condition variable paired with [`Mutex`].
    #[derive(Debug, Default)]
    pub(crate) struct Condvar(parking_lot::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(parking_lot::Condvar::new())
        }
        pub(crate) fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(&mut guard);
            guard
        }
        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }
        /// Waits at most `dur`; returns the guard and whether it timed out.
        pub(crate) fn wait_for<'a, T>(
            &self,
            mut guard: MutexGuard<'a, T>,
            dur: std::time::Duration,
        ) -> (MutexGuard<'a, T>, bool) {
            let r = self.0.wait_for(&mut guard, dur);
            (guard, r.timed_out())
        }
    }

    /// Spin hint.
    pub(crate) fn spin_loop() {
        std::hint::spin_loop();
    }
}

#[cfg(loom)]
mod imp {
    pub(crate) use loom::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering,
    };
    pub(crate) use loom::sync::Arc;

    /// Loom's mutex behind the same infallible `lock` as production's.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);
    pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        pub(crate) fn new(t: T) -> Self {
            Mutex(loom::sync::Mutex::new(t))
        }
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap()
        }
    }

    /// Loom's condvar behind production's API.
    #[derive(Debug)]
    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(loom::sync::Condvar::new())
        }
        pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(guard).unwrap()
        }
        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }
        /// Loom does not model timeouts: this waits like `wait`, so models
        /// check that no protocol depends on a timeout firing.
        pub(crate) fn wait_for<'a, T>(
            &self,
            guard: MutexGuard<'a, T>,
            dur: std::time::Duration,
        ) -> (MutexGuard<'a, T>, bool) {
            let (g, r) = self.0.wait_timeout(guard, dur).unwrap();
            (g, r.timed_out())
        }
    }

    /// Under loom a spin must yield, or the model never lets the other
    /// thread make progress.
    pub(crate) fn spin_loop() {
        loom::thread::yield_now();
    }
}

pub(crate) use imp::*;

/// Batch size for draining an inbox or stealing under loom. crossbeam's own
/// batch limit is 32; under loom the mutex-backed queues move at most 2 so models stay
/// small (tokio shrinks its local queue to 4 slots under loom the same way).
#[cfg(loom)]
pub(crate) const STEAL_BATCH: usize = 2;
