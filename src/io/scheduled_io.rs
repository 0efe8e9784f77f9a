//! Readiness cached per registration (tokio's `ScheduledIo`).
//!
//! One [`ScheduledIo`] per registered socket. Its state is one word:
//!
//! ```text
//! | shutdown: 1 bit | tick: 15 bits | readiness: 16 bits |
//! ```
//!
//! - The driver **sets** readiness when epoll reports an edge: it ORs the
//!   event's bits in and bumps the tick ([`ScheduledIo::set_readiness`]),
//!   then wakes the tasks waiting for those bits.
//! - A task **reads** the cached bits before any syscall
//!   ([`ScheduledIo::poll_ready`]): bits set means "try the syscall"; bits
//!   clear means `Pending`, with no syscall and no lock but the waiters'.
//! - A task **clears** exactly the readiness it observed when its syscall
//!   returned `WouldBlock` (or a short read proved the buffer drained):
//!   [`ScheduledIo::clear_readiness`] clears the bits only if the tick is
//!   still the one it read, so an edge the driver delivered between the
//!   syscall and the clear is never lost. The closed states are final (epoll
//!   keeps reporting them) and are never cleared.
//!
//! # Several waiters in one direction
//!
//! Any number of tasks may wait on one registration in one direction (4
//! tasks in `accept()` on one listener, readers of one `&TcpStream`), and
//! every one is woken by readiness in that direction (tokio wakes its
//! waiter list the same). The common case, one task per direction, keeps
//! one slot and costs what it did: no allocation, no list. A second task
//! waiting in a direction whose slot holds another task's waker goes to
//! that direction's overflow list (a waker already there, by
//! `Waker::will_wake`, is not added twice); readiness wakes the slot and
//! the whole list. A `poll_*` caller has no per-wait state to take its
//! waker back by, so a waker stays until the next readiness in its
//! direction (a spurious wake, harmless) or the registration's drop; the
//! list holds at most [`MAX_MORE`] wakers, past which each new one wakes
//! (and drops) the oldest, which polls again and, still waiting, comes
//! back: memory stays bounded whatever the churn of tasks. The futures of
//! `readable()` / `ready()` keep their own keyed slots instead (freed on
//! drop).
//!
//! # Shutdown
//!
//! When the runtime shuts down, the driver sets the registration's
//! `SHUTDOWN` bit and wakes every waiter ([`ScheduledIo::shutdown`]); a
//! poll then returns at once with the event's `shutdown` set, which the
//! registration turns into an error, since no poller will report readiness
//! any more. The bit lives in the same word as the readiness, so the fast
//! path's one load sees it too.
//!
//! # Why no wakeup is lost
//!
//! A waiter stores its waker under the waiters lock and then re-reads the
//! bits; the driver sets the bits (an `AcqRel` RMW) before it takes the same
//! lock to take the wakers. Either the driver's lock comes after the
//! waiter's (it finds the waker), or before (the waiter's re-read, after
//! the lock that the driver released, sees the bits).

use std::collections::VecDeque;
use std::task::{Context, Poll, Waker};

// The sync shim: loom's atomics and mutex under `cfg(loom)`, so the models
// `loom-tests/tests/driver.rs` (`readiness_*`, `two_readers_*`) and
// `readiness.rs` (the futures' keyed slots, the tick's wrap) check this
// protocol.
use crate::sync::{AtomicUsize, Mutex, Ordering};

/// Readiness bits of a registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Ready(u16);

impl Ready {
    /// Nothing is ready.
    pub const EMPTY: Ready = Ready(0);
    /// Readable.
    pub const READABLE: Ready = Ready(1);
    /// Writable.
    pub const WRITABLE: Ready = Ready(2);
    /// The read half is closed (EOF, `EPOLLRDHUP` or `EPOLLHUP`).
    pub const READ_CLOSED: Ready = Ready(4);
    /// The write half is closed (`EPOLLHUP` or a write error).
    pub const WRITE_CLOSED: Ready = Ready(8);
    /// An error is pending on the socket (`EPOLLERR`).
    pub const ERROR: Ready = Ready(16);
    /// Every bit.
    pub const ALL: Ready = Ready(31);

    /// The bits of both.
    pub const fn union(self, o: Ready) -> Ready {
        Ready(self.0 | o.0)
    }
    /// Whether nothing is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Whether the readable bit is set.
    pub fn is_readable(self) -> bool {
        self.0 & (Self::READABLE.0 | Self::READ_CLOSED.0) != 0
    }
    /// Whether the writable bit is set.
    pub fn is_writable(self) -> bool {
        self.0 & (Self::WRITABLE.0 | Self::WRITE_CLOSED.0) != 0
    }
    /// Whether the read half is closed.
    pub fn is_read_closed(self) -> bool {
        self.0 & Self::READ_CLOSED.0 != 0
    }
    /// Whether the write half is closed.
    pub fn is_write_closed(self) -> bool {
        self.0 & Self::WRITE_CLOSED.0 != 0
    }
    /// Whether an error is pending.
    pub fn is_error(self) -> bool {
        self.0 & Self::ERROR.0 != 0
    }
    /// Whether any bit of `o` is set here.
    pub(crate) fn intersects(self, o: Ready) -> bool {
        self.0 & o.0 != 0
    }
    pub(crate) fn from_mio(e: &mio::event::Event) -> Ready {
        let mut r = 0;
        if e.is_readable() {
            r |= Self::READABLE.0;
        }
        if e.is_writable() {
            r |= Self::WRITABLE.0;
        }
        if e.is_read_closed() {
            r |= Self::READ_CLOSED.0;
        }
        if e.is_write_closed() {
            r |= Self::WRITE_CLOSED.0;
        }
        if e.is_error() {
            r |= Self::ERROR.0;
        }
        Ready(r)
    }
}

impl std::ops::BitOr for Ready {
    type Output = Ready;
    fn bitor(self, o: Ready) -> Ready {
        Ready(self.0 | o.0)
    }
}

impl std::ops::BitAnd for Ready {
    type Output = Ready;
    fn bitand(self, o: Ready) -> Ready {
        Ready(self.0 & o.0)
    }
}

/// A direction a task waits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Waits for readable (or read-closed, or an error).
    Read,
    /// Waits for writable (or write-closed, or an error).
    Write,
}

impl Direction {
    /// The bits that wake a waiter of this direction (an error or a close
    /// wakes both: the syscall then reports it).
    pub(crate) fn mask(self) -> Ready {
        match self {
            Direction::Read => Ready::READABLE | Ready::READ_CLOSED | Ready::ERROR,
            Direction::Write => Ready::WRITABLE | Ready::WRITE_CLOSED | Ready::ERROR,
        }
    }
}

/// What a task saw when it found readiness: the bits (of its direction) and
/// the tick they were read at, for [`ScheduledIo::clear_readiness`]; or
/// that the runtime shut down (`shutdown`, with whatever bits were set).
#[derive(Clone, Copy, Debug)]
pub struct ReadyEvent {
    pub(crate) tick: u16,
    pub(crate) ready: Ready,
    pub(crate) shutdown: bool,
}

impl ReadyEvent {
    /// Whether the registration's runtime shut down (module docs).
    pub fn is_shutdown(&self) -> bool {
        self.shutdown
    }

    /// The tick the readiness was read at (a loom model's view).
    #[cfg(loom)]
    pub fn tick(&self) -> u16 {
        self.tick
    }
}

const READY_MASK: usize = 0xffff;
const TICK_SHIFT: u32 = 16;
/// Bits of the tick: 15. A loom model shrinks it to 2, so that a few sets
/// wrap it (`loom-tests/tests/readiness.rs`); the word's layout and the
/// comparison are the same.
#[cfg(not(loom))]
pub const TICK_BITS: u32 = 15;
/// Bits of the tick: 15 in the runtime; 2 under loom, so that a model
/// wraps it in a few sets.
#[cfg(loom)]
pub const TICK_BITS: u32 = 2;
/// The largest tick; the next set wraps it to 0.
const TICK_MAX: usize = (1 << TICK_BITS) - 1;
const TICK_MASK: usize = TICK_MAX << TICK_SHIFT;
/// The runtime shut down (module docs, "Shutdown"): final.
const SHUTDOWN: usize = 1 << 31;

/// Most wakers an overflow list holds (module docs, "Several waiters in one
/// direction").
pub const MAX_MORE: usize = 1024;

/// The event `s` makes for `mask`, if it is ready there or shut down.
#[inline]
fn event(s: usize, mask: Ready) -> Option<ReadyEvent> {
    (s & (mask.0 as usize | SHUTDOWN) != 0).then(|| ReadyEvent {
        tick: tick_of(s),
        ready: ready_of(s) & mask,
        shutdown: s & SHUTDOWN != 0,
    })
}

fn ready_of(s: usize) -> Ready {
    Ready((s & READY_MASK) as u16)
}

fn tick_of(s: usize) -> u16 {
    ((s & TICK_MASK) >> TICK_SHIFT) as u16
}

/// Wakers waiting on one registration.
#[derive(Default)]
struct Waiters {
    /// The task in `poll_read`-style calls (the first one; others go to
    /// `more_readers`).
    reader: Option<Waker>,
    /// The task in `poll_write`-style calls (the first one).
    writer: Option<Waker>,
    /// Other tasks waiting to read while `reader` holds another's waker
    /// (module docs, "Several waiters in one direction"); empty, and
    /// unallocated, in the common case.
    more_readers: VecDeque<Waker>,
    /// Other tasks waiting to write.
    more_writers: VecDeque<Waker>,
    /// Tasks in `readable()` / `writable()` / `ready()` futures, any number:
    /// a slot per waiting future, freed when it completes or is dropped.
    others: Vec<(Ready, Option<Waker>)>,
    free: Vec<usize>,
}

/// The per-socket state the driver and the tasks share (module docs).
// Two cache lines: the driver writes it, the socket's task reads it; its
// neighbours in memory belong to other sockets (tokio aligns it the same).
#[repr(align(128))]
pub struct ScheduledIo {
    readiness: AtomicUsize,
    waiters: Mutex<Waiters>,
}

impl Default for ScheduledIo {
    fn default() -> Self {
        Self::new()
    }
}

impl ScheduledIo {
    /// No readiness, no waiter.
    pub fn new() -> Self {
        ScheduledIo {
            readiness: AtomicUsize::new(0),
            waiters: Mutex::new(Waiters::default()),
        }
    }

    /// The cached readiness now.
    #[cfg_attr(not(any(test, loom)), allow(dead_code))]
    pub fn readiness(&self) -> Ready {
        ready_of(self.readiness.load(Ordering::Acquire))
    }

    /// ORs `ready` in and bumps the tick (the driver, on an event).
    pub fn set_readiness(&self, ready: Ready) {
        // AcqRel: release publishes the bits to the waiter's Acquire loads in
        // `poll_ready`; the lock taken after it in `wake` orders it before
        // the waker take (module docs).
        let _ = self
            .readiness
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                let tick = (tick_of(s) as usize + 1) & TICK_MAX;
                Some((s & !TICK_MASK) | (tick << TICK_SHIFT) | ready.0 as usize)
            });
    }

    /// Clears the readiness `ev` observed, unless the driver set new
    /// readiness since (the tick moved). Closed states stay.
    pub fn clear_readiness(&self, ev: ReadyEvent) {
        let clear = (ev.ready.0 & !(Ready::READ_CLOSED.0 | Ready::WRITE_CLOSED.0)) as usize;
        // AcqRel: pairs with set_readiness's RMW; both are on the same word,
        // so a set between the task's read and this clear moves the tick and
        // the CAS below gives up. The tick wraps (15 bits): it is compared
        // for equality only, never ordered, so a set that wraps it from
        // `TICK_MAX` to 0 during a read loop still moves it (loom:
        // `readiness.rs`; this file's `a_clear_after_the_tick_wrapped`).
        let _ = self
            .readiness
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (tick_of(s) == ev.tick).then_some(s & !clear)
            });
    }

    /// Wakes the waiters whose direction `ready` concerns.
    pub fn wake(&self, ready: Ready) {
        let mut list: [Option<Waker>; 8] = Default::default();
        let mut n = 0;
        let mut rest = Vec::new();
        {
            let mut guard = self.waiters.lock();
            let w = &mut *guard;
            if ready.intersects(Direction::Read.mask()) {
                if let Some(x) = w.reader.take() {
                    list[n] = Some(x);
                    n += 1;
                }
                if !w.more_readers.is_empty() {
                    rest.extend(w.more_readers.drain(..));
                }
            }
            if ready.intersects(Direction::Write.mask()) {
                if let Some(x) = w.writer.take() {
                    list[n] = Some(x);
                    n += 1;
                }
                if !w.more_writers.is_empty() {
                    rest.extend(w.more_writers.drain(..));
                }
            }
            // The slots stay allocated (their futures free them); only the
            // wakers are taken.
            for (interest, slot) in w.others.iter_mut() {
                if ready.intersects(*interest) {
                    if let Some(waker) = slot.take() {
                        if n < list.len() {
                            list[n] = Some(waker);
                            n += 1;
                        } else {
                            rest.push(waker);
                        }
                    }
                }
            }
        }
        // Woken outside the lock: a wake may run a schedule function that
        // polls nothing here, but keep the critical section short anyway.
        for w in list.iter_mut().take(n) {
            if let Some(w) = w.take() {
                w.wake();
            }
        }
        for w in rest {
            w.wake();
        }
    }

    /// The direction's readiness (or the shutdown), or `Pending` with
    /// `cx`'s waker stored: in the direction's slot, or in its overflow
    /// list when the slot holds another task's waker (module docs).
    pub fn poll_ready(&self, cx: &mut Context<'_>, dir: Direction) -> Poll<ReadyEvent> {
        let mask = dir.mask();
        // Acquire: pairs with set_readiness's release (module docs).
        let s = self.readiness.load(Ordering::Acquire);
        if let Some(ev) = event(s, mask) {
            return Poll::Ready(ev);
        }
        let evicted = {
            let mut guard = self.waiters.lock();
            let w = &mut *guard;
            let (slot, more) = match dir {
                Direction::Read => (&mut w.reader, &mut w.more_readers),
                Direction::Write => (&mut w.writer, &mut w.more_writers),
            };
            let waker = cx.waker();
            let mut evicted = None;
            match slot {
                None => *slot = Some(waker.clone()),
                Some(old) if old.will_wake(waker) => {}
                Some(_) => {
                    // Another task waits in this direction too: both are
                    // woken by its readiness.
                    if !more.iter().any(|m| m.will_wake(waker)) {
                        if more.len() >= MAX_MORE {
                            evicted = more.pop_front();
                        }
                        more.push_back(waker.clone());
                    }
                }
            }
            // Re-read under the lock (module docs, "Why no wakeup is lost").
            let s = self.readiness.load(Ordering::Acquire);
            if let Some(ev) = event(s, mask) {
                drop(guard);
                if let Some(e) = evicted {
                    e.wake();
                }
                return Poll::Ready(ev);
            }
            evicted
        };
        // The oldest overflow waker, woken outside the lock: it polls again.
        if let Some(e) = evicted {
            e.wake();
        }
        Poll::Pending
    }

    /// Ends every wait on this registration: its runtime shut down (module
    /// docs, "Shutdown"). Final: every later poll returns at once.
    pub fn shutdown(&self) {
        // AcqRel: release publishes the bit to the pollers' acquire loads;
        // the lock `wake` takes after it orders it before the waker take,
        // as for `set_readiness`.
        self.readiness.fetch_or(SHUTDOWN, Ordering::AcqRel);
        self.wake(Ready::ALL);
    }

    /// [`poll_ready`](Self::poll_ready) for a future that may share the
    /// registration with others (`readable()`, `ready()`): its waker lives
    /// in its own slot `*key` (allocated on first use, freed by
    /// [`drop_waiter`](Self::drop_waiter)).
    pub fn poll_interest(
        &self,
        cx: &mut Context<'_>,
        interest: Ready,
        key: &mut Option<usize>,
    ) -> Poll<ReadyEvent> {
        let s = self.readiness.load(Ordering::Acquire);
        if let Some(ev) = event(s, interest) {
            return Poll::Ready(ev);
        }
        let mut guard = self.waiters.lock();
        let w = &mut *guard;
        let k = match *key {
            Some(k) => k,
            None => {
                let k = match w.free.pop() {
                    Some(k) => k,
                    None => {
                        w.others.push((Ready::EMPTY, None));
                        w.others.len() - 1
                    }
                };
                *key = Some(k);
                k
            }
        };
        w.others[k] = (interest, Some(cx.waker().clone()));
        let s = self.readiness.load(Ordering::Acquire);
        if let Some(ev) = event(s, interest) {
            return Poll::Ready(ev);
        }
        Poll::Pending
    }

    /// The readiness of `interest` now (or the shutdown), with its tick,
    /// without waiting.
    pub(crate) fn poll_interest_now(&self, interest: Ready) -> Option<ReadyEvent> {
        event(self.readiness.load(Ordering::Acquire), interest)
    }

    /// Frees the waiter slot of a `readable()`-style future.
    pub fn drop_waiter(&self, key: usize) {
        let mut w = self.waiters.lock();
        if key < w.others.len() {
            w.others[key] = (Ready::EMPTY, None);
            w.free.push(key);
        }
    }

    /// Drops every stored waker (the registration is dropped, so nobody
    /// waits here any more). A waker holds its task, and the task its
    /// runtime: left in a released cell, it would keep the runtime alive.
    pub(crate) fn clear_wakers(&self) {
        let w = std::mem::take(&mut *self.waiters.lock());
        drop(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_drops_only_the_observed_readiness() {
        let io = ScheduledIo::new();
        io.set_readiness(Ready::READABLE);
        let ev = match io.poll_ready(&mut Context::from_waker(Waker::noop()), Direction::Read) {
            Poll::Ready(ev) => ev,
            Poll::Pending => panic!("readable"),
        };
        // A new edge after the read: the clear must not take it.
        io.set_readiness(Ready::READABLE);
        io.clear_readiness(ev);
        assert!(io.readiness().is_readable());
        let ev2 = match io.poll_ready(&mut Context::from_waker(Waker::noop()), Direction::Read) {
            Poll::Ready(ev) => ev,
            Poll::Pending => panic!("still readable"),
        };
        io.clear_readiness(ev2);
        assert!(!io.readiness().is_readable());
        assert!(io
            .poll_ready(&mut Context::from_waker(Waker::noop()), Direction::Read)
            .is_pending());
    }

    /// A read loop that saw the readiness at the last tick (`TICK_MAX`),
    /// then an edge that wraps the tick to 0 before the loop's clear: the
    /// clear must keep the new readiness (a comparison that orders the
    /// ticks would take 0 for older and clear it, and the task would wait
    /// with data in the socket).
    #[test]
    fn a_clear_after_the_tick_wrapped_keeps_the_new_readiness() {
        let io = ScheduledIo::new();
        for _ in 0..TICK_MAX {
            io.set_readiness(Ready::READABLE);
        }
        let Poll::Ready(ev) =
            io.poll_ready(&mut Context::from_waker(Waker::noop()), Direction::Read)
        else {
            panic!("readable")
        };
        assert_eq!(ev.tick as usize, TICK_MAX, "the read saw the last tick");
        io.set_readiness(Ready::READABLE);
        io.clear_readiness(ev);
        assert!(
            io.readiness().is_readable(),
            "an edge that wrapped the tick was cleared by an older read's clear"
        );
    }

    #[test]
    fn closed_states_are_never_cleared() {
        let io = ScheduledIo::new();
        io.set_readiness(Ready::READ_CLOSED | Ready::READABLE);
        let Poll::Ready(ev) =
            io.poll_ready(&mut Context::from_waker(Waker::noop()), Direction::Read)
        else {
            panic!("ready")
        };
        io.clear_readiness(ev);
        assert!(io.readiness().is_read_closed());
        assert!(!io.readiness().intersects(Ready::READABLE));
    }

    /// A waker that counts its wakes.
    struct Count(std::sync::atomic::AtomicUsize);
    impl std::task::Wake for Count {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    fn counting() -> (std::sync::Arc<Count>, Waker) {
        let c = std::sync::Arc::new(Count(std::sync::atomic::AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }
    fn wakes(c: &Count) -> usize {
        c.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[test]
    fn every_waiter_in_a_direction_is_woken_and_one_allocates_nothing() {
        let io = ScheduledIo::new();
        let (ca, a) = counting();
        // One task, polled again and again: its slot only, no list.
        for _ in 0..3 {
            assert!(io
                .poll_ready(&mut Context::from_waker(&a), Direction::Read)
                .is_pending());
        }
        assert_eq!(io.waiters.lock().more_readers.capacity(), 0);
        let (cb, b) = counting();
        let (cc, c) = counting();
        for w in [&b, &c, &b, &a] {
            assert!(io
                .poll_ready(&mut Context::from_waker(w), Direction::Read)
                .is_pending());
        }
        assert_eq!(
            io.waiters.lock().more_readers.len(),
            2,
            "b and c, once each"
        );
        // A writer is not woken by readability, nor the readers by
        // writability.
        let (cw, w) = counting();
        assert!(io
            .poll_ready(&mut Context::from_waker(&w), Direction::Write)
            .is_pending());
        io.set_readiness(Ready::READABLE);
        io.wake(Ready::READABLE);
        assert_eq!(
            (wakes(&ca), wakes(&cb), wakes(&cc), wakes(&cw)),
            (1, 1, 1, 0)
        );
        assert!(io.waiters.lock().more_readers.is_empty());
    }

    #[test]
    fn the_overflow_list_is_bounded_and_wakes_the_oldest_past_it() {
        let io = ScheduledIo::new();
        let (_, first) = counting();
        assert!(io
            .poll_ready(&mut Context::from_waker(&first), Direction::Read)
            .is_pending());
        let ws: Vec<_> = (0..MAX_MORE + 1).map(|_| counting()).collect();
        for (_, w) in &ws {
            assert!(io
                .poll_ready(&mut Context::from_waker(w), Direction::Read)
                .is_pending());
        }
        assert_eq!(io.waiters.lock().more_readers.len(), MAX_MORE);
        assert_eq!(wakes(&ws[0].0), 1, "the oldest woken to poll again");
        assert_eq!(wakes(&ws[1].0), 0);
    }

    #[test]
    fn shutdown_wakes_every_waiter_and_every_poll_after_sees_it() {
        let io = ScheduledIo::new();
        let (ca, a) = counting();
        let (cb, b) = counting();
        let (cw, w) = counting();
        let mut key = None;
        assert!(io
            .poll_ready(&mut Context::from_waker(&a), Direction::Read)
            .is_pending());
        assert!(io
            .poll_ready(&mut Context::from_waker(&b), Direction::Read)
            .is_pending());
        assert!(io
            .poll_interest(&mut Context::from_waker(&w), Ready::WRITABLE, &mut key)
            .is_pending());
        io.shutdown();
        assert_eq!((wakes(&ca), wakes(&cb), wakes(&cw)), (1, 1, 1));
        for dir in [Direction::Read, Direction::Write] {
            match io.poll_ready(&mut Context::from_waker(Waker::noop()), dir) {
                Poll::Ready(ev) => assert!(ev.is_shutdown() && ev.ready.is_empty()),
                Poll::Pending => panic!("shut down: ready at once"),
            }
        }
        // Final: an edge or a clear does not take it away.
        io.set_readiness(Ready::READABLE);
        let ev = io.poll_interest_now(Ready::READABLE).unwrap();
        io.clear_readiness(ev);
        assert!(io.poll_interest_now(Ready::READABLE).unwrap().is_shutdown());
    }

    #[test]
    fn directions_are_independent() {
        let io = ScheduledIo::new();
        io.set_readiness(Ready::WRITABLE);
        assert!(io
            .poll_ready(&mut Context::from_waker(Waker::noop()), Direction::Read)
            .is_pending());
        assert!(io
            .poll_ready(&mut Context::from_waker(Waker::noop()), Direction::Write)
            .is_ready());
    }
}
