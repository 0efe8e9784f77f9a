//! The I/O driver's handle: what a runtime keeps of its driver, and what
//! every socket keeps of it (an `Arc` in its [`Registration`]).
//!
//! The handle sits below the scheduler: the runtime's shared state
//! (`worker/shared.rs`) holds it, the worker drives the pollers through it, and
//! nothing here reaches up to them. What the driver needs of the scheduler
//! comes through two narrow doors: which worker runs on this thread
//! ([`IoHandle::current_worker`], from the thread-local context of
//! `context.rs`), and a callback run once the driver is created
//! ([`IoHandle::new`]'s `on_create`: the runtime notifies its workers there).
//!
//! [`Registration`]: super::Registration

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::driver::Driver;

/// The I/O driver of one runtime: its descriptors opened by `build`, put
/// to use on first use.
pub(crate) struct IoHandle {
    /// The driver, `None` when I/O is off (`Builder::enable_io(false)`).
    /// Its descriptors (per poller: the epoll instance, its registry's
    /// duplicate, the eventfd) are opened by `Builder::build`, which
    /// returns `BuildError::IoDriver` when it cannot: no later call fails
    /// (nor panics) because they could not be opened.
    driver: Option<Driver>,
    /// Whether the driver is in use ([`IoHandle::driver`] was called): until
    /// then the workers park on their condvars, as in a program without
    /// I/O ([`IoHandle::get`] is `None`).
    used: AtomicBool,
    /// The runtime is shutting down ([`IoHandle::shutdown`]): no new socket
    /// or timer, and the sockets' waits end with an error.
    shut: AtomicBool,
    /// Per worker, the OS index of its CPU (for `SO_INCOMING_CPU`).
    cpus: Box<[usize]>,
    /// Serializes the driver's first use.
    init: Mutex<()>,
    /// The runtime this handle belongs to, as an identity (the address
    /// `context::Here::rt` holds on its workers); never dereferenced.
    owner: usize,
    /// Run once, when the driver is first used.
    on_create: Box<dyn Fn() + Send + Sync>,
}

/// Opens the descriptors of a driver with one poller per distinct value of
/// `poller_domain` (per worker, its poller's index): `Builder::build`
/// calls it, so that the error is the build's.
pub(crate) fn open_driver(poller_domain: &[usize]) -> io::Result<Driver> {
    Driver::new(poller_domain)
}

impl IoHandle {
    /// A handle over `driver` (`None`: I/O is off), not yet in use.
    /// `cpus` is per worker; `owner` is the runtime's
    /// identity (its `context::Here::rt`); `on_create` runs at the driver's
    /// first use (the runtime wakes its workers there, so that they sleep
    /// in the pollers from their next park on).
    pub(crate) fn new(
        driver: Option<Driver>,
        cpus: Box<[usize]>,
        owner: *const (),
        on_create: Box<dyn Fn() + Send + Sync>,
    ) -> IoHandle {
        IoHandle {
            driver,
            used: AtomicBool::new(false),
            shut: AtomicBool::new(false),
            cpus,
            init: Mutex::new(()),
            owner: owner as usize,
            on_create,
        }
    }

    /// The driver, if it is in use.
    #[inline]
    pub(crate) fn get(&self) -> Option<&Driver> {
        // Acquire: pairs with `use_driver`'s release store (the workers
        // that see it sleep in the pollers).
        if self.used.load(Ordering::Acquire) {
            self.driver.as_ref()
        } else {
            None
        }
    }

    /// The driver, put to use on first use: `Err` only when I/O is off for
    /// this runtime (its descriptors were opened by `build`).
    #[inline]
    pub(crate) fn driver(&self) -> io::Result<&Driver> {
        match self.get() {
            Some(d) => Ok(d),
            None => self.use_driver(),
        }
    }

    #[cold]
    fn use_driver(&self) -> io::Result<&Driver> {
        let Some(d) = self.driver.as_ref() else {
            return Err(io::Error::other(
                "I/O is off for this runtime (Builder::enable_io(false)): sockets and timers \
                 need it on",
            ));
        };
        let _g = self.init.lock().unwrap_or_else(|e| e.into_inner());
        if !self.used.load(Ordering::Relaxed) {
            // Release: pairs with `get`'s acquire load.
            self.used.store(true, Ordering::Release);
            (self.on_create)();
        }
        Ok(d)
    }

    /// Whether the runtime is shutting down: its sockets' waits end with
    /// `registration::shut_down`'s error and its timers never fire.
    #[inline]
    pub(crate) fn is_shut(&self) -> bool {
        // Acquire: pairs with `shutdown`'s release store. (The lists that
        // must not miss it, the live registrations and the outside timer
        // wheel, read it under their locks.)
        self.shut.load(Ordering::Acquire)
    }

    /// The runtime shuts down: sets the flag, then ends the wait of every
    /// task on every registration of this driver (each sees
    /// `registration::shut_down`'s error), so that nothing, a blocking closure in
    /// `Handle::block_on` included, waits forever on a poller nobody turns
    /// any more. A registration made after it is refused.
    pub(crate) fn shutdown(&self) {
        // Release: pairs with `is_shut`'s acquire load; the flag is set
        // before each poller's live-list lock is taken below, so a
        // registration that takes that lock after sees it.
        self.shut.store(true, Ordering::Release);
        if let Some(d) = self.driver.as_ref() {
            for p in d.pollers.iter() {
                p.shut_registrations();
            }
        }
    }

    /// The index of this thread's worker, if it is one of this runtime's
    /// workers (the thread-local context, `context.rs`).
    #[inline]
    pub(crate) fn current_worker(&self) -> Option<usize> {
        crate::context::with_here(|h| h.filter(|h| h.rt as usize == self.owner).map(|h| h.index))
    }

    /// The poller of this thread's worker, or the first poller off this
    /// runtime's workers.
    #[inline]
    pub(crate) fn current_poller(&self, d: &Driver) -> usize {
        self.current_worker().map_or(0, |w| d.poller_of(w))
    }

    /// The poller of the worker on OS CPU `cpu`, if one runs there.
    pub(crate) fn poller_of_cpu(&self, d: &Driver, cpu: usize) -> Option<usize> {
        let w = self.cpus.iter().position(|&c| c == cpu)?;
        Some(d.poller_of(w))
    }
}
