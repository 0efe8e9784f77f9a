//! The I/O driver's handle: what a runtime keeps of its driver, and what
//! every socket keeps of it (an `Arc` in its [`Registration`]).
//!
//! The handle sits below the scheduler: the runtime's shared state
//! (`shared.rs`) holds it, the worker drives the pollers through it, and
//! nothing here reaches up to them. What the driver needs of the scheduler
//! comes through two narrow doors: which worker runs on this thread
//! ([`Handle::current_worker`], from the thread-local context of
//! `context.rs`), and a callback run once the driver is created
//! ([`Handle::new`]'s `on_create`: the runtime notifies its workers there).
//!
//! [`Registration`]: super::Registration

use std::io;
use std::sync::{Mutex, OnceLock};

use super::driver::Driver;

/// The I/O driver of one runtime, created on first use.
pub(crate) struct Handle {
    /// Whether the driver may be created (`Builder::enable_io`).
    enabled: bool,
    /// The driver, once created ([`Handle::driver`]).
    driver: OnceLock<Driver>,
    /// Per worker, its poller's index (`Builder::io_pollers`).
    poller_domain: Box<[usize]>,
    /// Per worker, the OS index of its CPU (for `SO_INCOMING_CPU`).
    cpus: Box<[usize]>,
    /// Serializes the driver's creation.
    init: Mutex<()>,
    /// The runtime this handle belongs to, as an identity (the address
    /// `context::Here::rt` holds on its workers); never dereferenced.
    owner: usize,
    /// Run once, after the driver is created.
    on_create: Box<dyn Fn() + Send + Sync>,
}

impl Handle {
    /// A handle whose driver is not yet created. `poller_domain` and `cpus`
    /// are per worker; `owner` is the runtime's identity (its
    /// `context::Here::rt`); `on_create` runs once the driver exists (the
    /// runtime wakes its workers there, so that they sleep in the pollers
    /// from their next park on).
    pub(crate) fn new(
        enabled: bool,
        poller_domain: Box<[usize]>,
        cpus: Box<[usize]>,
        owner: *const (),
        on_create: Box<dyn Fn() + Send + Sync>,
    ) -> Handle {
        Handle {
            enabled,
            driver: OnceLock::new(),
            poller_domain,
            cpus,
            init: Mutex::new(()),
            owner: owner as usize,
            on_create,
        }
    }

    /// The driver, if it has been created.
    #[inline]
    pub(crate) fn get(&self) -> Option<&Driver> {
        self.driver.get()
    }

    /// The driver, created on first use: `Err` when I/O is off for this
    /// runtime or the poller cannot be created (the OS's error).
    #[inline]
    pub(crate) fn driver(&self) -> io::Result<&Driver> {
        match self.driver.get() {
            Some(d) => Ok(d),
            None => self.init_driver(),
        }
    }

    #[cold]
    fn init_driver(&self) -> io::Result<&Driver> {
        if !self.enabled {
            return Err(io::Error::other(
                "I/O is off for this runtime (Builder::enable_io(false)): sockets and timers \
                 need it on",
            ));
        }
        let _g = self.init.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = self.driver.get() {
            return Ok(d);
        }
        let d = Driver::new(&self.poller_domain)?;
        let _ = self.driver.set(d);
        (self.on_create)();
        Ok(self.driver.get().expect("set above"))
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
