//! A socket's registration with a poller, and the read/write loops on top
//! of the cached readiness ([`PollEvented`]).

use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::coop;
use super::handle::IoHandle;
use super::scheduled_io::{Direction, Ready, ReadyEvent, ScheduledIo};

/// The error of an I/O type created outside any runtime.
pub(crate) fn no_runtime() -> io::Error {
    io::Error::other(
        "no hwsched runtime here: create hwsched::net types inside Runtime::block_on, \
         Handle::block_on, a task or a spawn_blocking closure",
    )
}

/// The error of a socket whose runtime is shutting down or gone (a wait,
/// a read or a write on it, or a new socket in its context): no poller
/// reports its readiness any more (tokio returns an error the same way).
pub(crate) fn shut_down() -> io::Error {
    io::Error::other(
        "hwsched::net: this socket's runtime is shutting down or has shut down: its readiness \
         is no longer reported (a socket cannot outlive its runtime)",
    )
}

/// One socket's registration: its readiness cell and the poller it lives in.
pub(crate) struct Registration {
    handle: Arc<IoHandle>,
    poller: usize,
    io: Arc<ScheduledIo>,
    /// Its key in the poller's list of live registrations (which the
    /// shutdown walks).
    live: usize,
}

impl Registration {
    /// Registers `src` (read and write, edge-triggered, once for its
    /// lifetime) with `handle`'s driver: the poller of the current worker's
    /// domain, or the first poller off the workers.
    pub(crate) fn new<S: mio::event::Source + ?Sized>(
        handle: Arc<IoHandle>,
        src: &mut S,
    ) -> io::Result<Registration> {
        let driver = handle.driver()?;
        let poller = handle.current_poller(driver);
        Self::with_poller(handle, poller, src)
    }

    /// Registers `src` with poller `poller` of `handle`'s driver.
    pub(crate) fn with_poller<S: mio::event::Source + ?Sized>(
        handle: Arc<IoHandle>,
        poller: usize,
        src: &mut S,
    ) -> io::Result<Registration> {
        if handle.is_shut() {
            return Err(shut_down());
        }
        let driver = handle.driver()?;
        let p = &driver.pollers[poller];
        let io = Arc::new(ScheduledIo::new());
        let token = mio::Token(Arc::as_ptr(&io) as usize);
        p.registry().register(
            src,
            token,
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        )?;
        // Into the live list, unless the shutdown went through it already
        // (it sets its flag under the list's lock): then out of epoll again.
        let Some(live) = p.track(&io) else {
            let _ = p.registry().deregister(src);
            return Err(shut_down());
        };
        p.counters
            .registered
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Registration {
            handle,
            poller,
            io,
            live,
        })
    }

    /// The driver this registration belongs to.
    pub(crate) fn handle(&self) -> &Arc<IoHandle> {
        &self.handle
    }

    /// The poller this registration lives in.
    pub(crate) fn poller(&self) -> usize {
        self.poller
    }

    /// Registers `src` again with this registration's poller and token.
    pub(crate) fn reregister<S: mio::event::Source + ?Sized>(&self, src: &mut S) -> io::Result<()> {
        let driver = self.handle.driver()?;
        let token = mio::Token(Arc::as_ptr(&self.io) as usize);
        driver.pollers[self.poller].registry().register(
            src,
            token,
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        )
    }

    /// Removes `src` from its poller (before its descriptor is closed).
    pub(crate) fn deregister<S: mio::event::Source + ?Sized>(&self, src: &mut S) -> io::Result<()> {
        let driver = self.handle.driver()?;
        driver.pollers[self.poller].registry().deregister(src)
    }

    /// Readiness in `dir`, charged to the task's budget; `Pending` (waker
    /// stored) when the cached bits are clear, or when the budget is spent
    /// (the waker is then woken after the worker's next look at the poller).
    pub(crate) fn poll_ready(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
    ) -> Poll<io::Result<ReadyEvent>> {
        if !coop::has_budget() {
            coop::defer(cx.waker());
            return Poll::Pending;
        }
        match self.io.poll_ready(cx, dir) {
            Poll::Ready(ev) if ev.is_shutdown() => Poll::Ready(Err(shut_down())),
            Poll::Ready(ev) => {
                coop::consume();
                Poll::Ready(Ok(ev))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Readiness of any bit of `interest`, for a future that may share the
    /// registration with others (its waiter slot is `*key`).
    pub(crate) fn poll_interest(
        &self,
        cx: &mut Context<'_>,
        interest: Ready,
        key: &mut Option<usize>,
    ) -> Poll<io::Result<ReadyEvent>> {
        if !coop::has_budget() {
            coop::defer(cx.waker());
            return Poll::Pending;
        }
        match self.io.poll_interest(cx, interest, key) {
            Poll::Ready(ev) if ev.is_shutdown() => Poll::Ready(Err(shut_down())),
            Poll::Ready(ev) => {
                coop::consume();
                Poll::Ready(Ok(ev))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Frees the waiter slot of a future that used [`poll_interest`](Self::poll_interest).
    pub(crate) fn drop_waiter(&self, key: usize) {
        self.io.drop_waiter(key);
    }

    /// Forgets the readiness `ev` saw (its syscall said `WouldBlock`).
    pub(crate) fn clear_readiness(&self, ev: ReadyEvent) {
        self.io.clear_readiness(ev);
    }

    /// Runs `f` (a non-blocking syscall) when `dir` is ready, until it does
    /// not say `WouldBlock`; each `WouldBlock` clears the readiness it saw.
    pub(crate) fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        mut f: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            let ev = match self.poll_ready(cx, dir) {
                Poll::Ready(Ok(ev)) => ev,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            match f() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.clear_readiness(ev),
                r => return Poll::Ready(r),
            }
        }
    }

    /// Runs `f` once if `interest` is ready by the cache; `WouldBlock`
    /// without a syscall otherwise (and clears what a `WouldBlock` saw).
    pub(crate) fn try_io<R>(
        &self,
        interest: Ready,
        f: impl FnOnce() -> io::Result<R>,
    ) -> io::Result<R> {
        let ev = match self.io.poll_interest_now(interest) {
            Some(ev) if ev.is_shutdown() => return Err(shut_down()),
            Some(ev) => ev,
            None => return Err(io::ErrorKind::WouldBlock.into()),
        };
        match f() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.clear_readiness(ev);
                Err(e)
            }
            r => r,
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Nobody can wait here any more (waiters borrow the registration):
        // drop their wakers, then keep the cell alive until the poller's
        // next turn (driver.rs, `release`).
        self.io.clear_wakers();
        if let Some(d) = self.handle.get() {
            let p = &d.pollers[self.poller];
            p.untrack(self.live);
            p.release(self.io.clone());
        }
    }
}

/// A mio source and its registration: what every `hwsched::net` type is.
/// Reads and writes go through the cached readiness; a short read or write
/// proves the kernel buffer drained (filled), so it clears readiness
/// without the `WouldBlock` syscall that would otherwise follow (tokio's
/// rule for epoll, which reports every new edge).
pub(crate) struct PollEvented<E: mio::event::Source> {
    io: Option<E>,
    reg: Registration,
    /// Consecutive waits made on workers of another poller's domain
    /// ([`PollEvented::note_wait`]).
    away: u8,
}

/// Consecutive waits from another domain after which a socket moves to
/// that domain's poller: its task has moved for good, not for one steal.
pub(crate) const REHOME_AFTER: u8 = 4;

impl<E: mio::event::Source> PollEvented<E> {
    /// Registers `io` with `handle`'s driver ([`Registration::new`]).
    pub(crate) fn new(handle: Arc<IoHandle>, mut io: E) -> io::Result<Self> {
        let reg = Registration::new(handle, &mut io)?;
        Ok(PollEvented {
            io: Some(io),
            reg,
            away: 0,
        })
    }

    /// Registers `io` with a given poller of `handle`'s driver.
    pub(crate) fn with_poller(handle: Arc<IoHandle>, poller: usize, mut io: E) -> io::Result<Self> {
        let reg = Registration::with_poller(handle, poller, &mut io)?;
        Ok(PollEvented {
            io: Some(io),
            reg,
            away: 0,
        })
    }

    /// The source.
    pub(crate) fn get_ref(&self) -> &E {
        self.io.as_ref().expect("present until drop or into_inner")
    }

    /// The registration.
    pub(crate) fn registration(&self) -> &Registration {
        &self.reg
    }

    /// Called by an owner (`&mut`) whose read or write is about to wait:
    /// with several pollers, a socket whose task keeps waiting on workers
    /// of another poller's domain ([`REHOME_AFTER`] waits in a row) moves to
    /// that poller, so its events are seen where its task runs. Returns
    /// whether it moved. One poller: nothing to do (one load).
    pub(crate) fn note_wait(&mut self) -> bool {
        let Some(d) = self.reg.handle.get() else {
            return false;
        };
        if d.pollers.len() < 2 {
            return false;
        }
        let Some(w) = self.reg.handle.current_worker() else {
            return false;
        };
        let here = d.poller_of(w);
        self.rehome_to(here)
    }

    /// The rule of [`note_wait`](Self::note_wait) for a wait made in the
    /// domain of poller `here`.
    pub(crate) fn rehome_to(&mut self, here: usize) -> bool {
        if here == self.reg.poller {
            self.away = 0;
            return false;
        }
        self.away += 1;
        if self.away < REHOME_AFTER {
            return false;
        }
        self.away = 0;
        let handle = self.reg.handle.clone();
        let io = self.io.as_mut().expect("present until drop or into_inner");
        // Out of the old poller first (a descriptor may sit in two epoll
        // instances, but its events belong in one), then into the new one
        // with an empty cache: an edge-triggered ADD reports the readiness
        // the socket has now, so nothing is lost in the move.
        if self.reg.deregister(io).is_err() {
            return false;
        }
        match Registration::with_poller(handle, here, io) {
            Ok(reg) => {
                if let Ok(d) = reg.handle.driver() {
                    d.pollers[here]
                        .counters
                        .rehomed
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                // The old registration's waiters (this task's) are dropped
                // with it; the caller waits on the new one.
                self.reg = reg;
                true
            }
            Err(_) => {
                // Could not register with the new poller: back to the old
                // one (which accepted it before).
                let _ = self.reg.reregister(io);
                false
            }
        }
    }

    /// Deregisters and returns the source.
    pub(crate) fn into_inner(mut self) -> io::Result<E> {
        let mut io = self.io.take().expect("present until drop or into_inner");
        self.reg.deregister(&mut io)?;
        Ok(io)
    }

    /// Reads with `f` (which reads into a buffer of `len` bytes and returns
    /// the count), clearing readiness on `WouldBlock` and on a short read.
    pub(crate) fn poll_read_with(
        &self,
        cx: &mut Context<'_>,
        len: usize,
        f: impl FnMut(&E) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        self.poll_transfer(cx, Direction::Read, len, f)
    }

    /// Writes with `f` (`len` bytes offered), clearing readiness on
    /// `WouldBlock` and on a short write.
    pub(crate) fn poll_write_with(
        &self,
        cx: &mut Context<'_>,
        len: usize,
        f: impl FnMut(&E) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        self.poll_transfer(cx, Direction::Write, len, f)
    }

    /// The loop of both: `f` moves up to `len` bytes when `dir` is ready; a
    /// `WouldBlock`, or a transfer short of `len` (the kernel buffer is
    /// drained, or full), clears the readiness it saw.
    fn poll_transfer(
        &self,
        cx: &mut Context<'_>,
        dir: Direction,
        len: usize,
        mut f: impl FnMut(&E) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        loop {
            let ev = match self.reg.poll_ready(cx, dir) {
                Poll::Ready(Ok(ev)) => ev,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            match f(self.get_ref()) {
                Ok(n) => {
                    if n > 0 && n < len {
                        self.reg.clear_readiness(ev);
                    }
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.reg.clear_readiness(ev),
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl<E: mio::event::Source> Drop for PollEvented<E> {
    fn drop(&mut self) {
        if let Some(mut io) = self.io.take() {
            // Deregister before the descriptor closes (with the source's
            // drop, right after), so no later event names this cell.
            let _ = self.reg.deregister(&mut io);
        }
    }
}

impl<E: mio::event::Source + std::fmt::Debug> std::fmt::Debug for PollEvented<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollEvented").field("io", &self.io).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::IoPollers;
    use crate::{Runtime, TopologySource};
    use std::io::Write;

    #[test]
    fn a_socket_moves_to_the_poller_its_task_keeps_waiting_in() {
        let rt = Runtime::builder()
            .topology(TopologySource::Synthetic("pack:1 l3:2 core:2 pu:1".into()))
            .io_pollers(IoPollers::PerLlc)
            .build()
            .unwrap();
        rt.block_on(async {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let mut peer = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (s, _) = l.accept().unwrap();
            s.set_nonblocking(true).unwrap();
            // Off the workers: the first poller.
            let handle = crate::runtime::handle::current().unwrap().driver.io.clone();
            let mut pe = PollEvented::new(handle, mio::net::TcpStream::from_std(s)).unwrap();
            assert_eq!(pe.registration().poller(), 0);
            assert_eq!(rt.stats().io_pollers, 2);
            // A wait back home resets the count: a steal is not a move.
            for _ in 0..REHOME_AFTER - 1 {
                assert!(!pe.rehome_to(1));
            }
            assert!(!pe.rehome_to(0));
            for _ in 0..REHOME_AFTER - 1 {
                assert!(!pe.rehome_to(1));
            }
            assert!(pe.rehome_to(1), "moved after {REHOME_AFTER} waits away");
            assert_eq!(pe.registration().poller(), 1);
            assert_eq!(rt.stats().io_rehomed, 1);
            // Its events now come through the new poller.
            peer.write_all(b"x").unwrap();
            std::future::poll_fn(|cx| pe.registration().poll_ready(cx, Direction::Read))
                .await
                .unwrap();
            let mut buf = [0u8; 4];
            let n = std::future::poll_fn(|cx| {
                pe.poll_read_with(cx, buf.len(), |s| std::io::Read::read(&mut &*s, &mut buf))
            })
            .await
            .unwrap();
            assert_eq!(n, 1);
        });
    }
}
