//! The pollers: mio's epoll, one or several per runtime, each taken by one
//! worker at a time (see the [module docs](super) for the hand-off).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};

use super::scheduled_io::{Ready, ScheduledIo};

/// The poller's own waker (an eventfd, never read: mio's).
pub(crate) const TOKEN_WAKEUP: mio::Token = mio::Token(0);
/// The signal pipe's read end (signal.rs).
pub(crate) const TOKEN_SIGNAL: mio::Token = mio::Token(1);

/// What an event on [`TOKEN_SIGNAL`] runs: set by the signal layer (above
/// this one) before it registers its pipe ([`on_signal_token`]).
static SIGNAL_DISPATCH: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Makes `dispatch` what an event on [`TOKEN_SIGNAL`] runs (signal.rs
/// calls it before it registers the pipe with that token; one function for
/// the process, set once).
pub(crate) fn on_signal_token(dispatch: fn()) {
    let _ = SIGNAL_DISPATCH.set(dispatch);
}

/// Most events one `epoll_wait` returns (tokio's default, 1024).
const EVENTS: usize = 1024;

/// What one poller holds for the worker in it.
pub(crate) struct PollState {
    poll: mio::Poll,
    events: mio::Events,
}

/// Counters of one poller (read into `Stats`).
#[derive(Default, Debug)]
pub(crate) struct PollerCounters {
    /// `epoll_wait` calls.
    pub(crate) turns: AtomicU64,
    /// Readiness events dispatched.
    pub(crate) events: AtomicU64,
    /// Writes to the poller's eventfd (a wake of the worker in `epoll_wait`).
    pub(crate) waker_writes: AtomicU64,
    /// Sockets registered.
    pub(crate) registered: AtomicU64,
    /// Sockets that moved here from another poller (their task moved).
    pub(crate) rehomed: AtomicU64,
}

/// Wakes the worker sleeping in this poller: one eventfd write.
struct PollerWaker {
    waker: mio::Waker,
    counters: Arc<PollerCounters>,
}

impl Wake for PollerWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.counters.waker_writes.fetch_add(1, Ordering::Relaxed);
        // An error here would mean the eventfd is gone (the poller is being
        // dropped): nobody sleeps in it then.
        let _ = self.waker.wake();
    }
}

/// One epoll instance, its waker and the registrations it has released.
pub(crate) struct Poller {
    state: Mutex<PollState>,
    registry: mio::Registry,
    waker: Waker,
    /// Registrations deregistered since the last turn: freed at the start of
    /// the next one, so that a token in an `epoll_wait` result being
    /// dispatched never points at freed memory (tokio's `pending_release`).
    release: Mutex<Vec<Arc<ScheduledIo>>>,
    has_release: AtomicBool,
    /// The live registrations of this poller, so that the runtime's
    /// shutdown can end their waits ([`Poller::shut_registrations`]).
    live: Mutex<Live>,
    pub(crate) counters: Arc<PollerCounters>,
}

/// A poller's live registrations: a slab (a cell per registration, freed
/// by its drop), and whether the shutdown has been through it. Locked once
/// when a socket registers and once when it is dropped, never on a wait.
#[derive(Default)]
struct Live {
    cells: Vec<Option<Arc<ScheduledIo>>>,
    free: Vec<usize>,
    shut: bool,
}

impl Poller {
    fn new() -> io::Result<Poller> {
        let poll = mio::Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let counters = Arc::new(PollerCounters::default());
        let waker = Waker::from(Arc::new(PollerWaker {
            waker: mio::Waker::new(poll.registry(), TOKEN_WAKEUP)?,
            counters: counters.clone(),
        }));
        Ok(Poller {
            state: Mutex::new(PollState {
                poll,
                events: mio::Events::with_capacity(EVENTS),
            }),
            registry,
            waker,
            release: Mutex::new(Vec::new()),
            has_release: AtomicBool::new(false),
            live: Mutex::new(Live::default()),
            counters,
        })
    }

    /// The poller if no other worker holds it.
    pub(crate) fn try_hold(&self) -> Option<MutexGuard<'_, PollState>> {
        self.state.try_lock()
    }

    /// The waker that interrupts the holder's `epoll_wait`.
    pub(crate) fn waker(&self) -> &Waker {
        &self.waker
    }

    /// The registry sockets register with.
    pub(crate) fn registry(&self) -> &mio::Registry {
        &self.registry
    }

    /// Adds `io` to the live registrations; its key, or `None` once the
    /// shutdown has been through them (the registration is refused).
    pub(crate) fn track(&self, io: &Arc<ScheduledIo>) -> Option<usize> {
        let mut l = self.live.lock();
        if l.shut {
            return None;
        }
        let k = match l.free.pop() {
            Some(k) => k,
            None => {
                l.cells.push(None);
                l.cells.len() - 1
            }
        };
        l.cells[k] = Some(io.clone());
        Some(k)
    }

    /// Removes the live registration `key` (its registration is dropped).
    pub(crate) fn untrack(&self, key: usize) {
        let mut l = self.live.lock();
        if let Some(c) = l.cells.get_mut(key) {
            if c.take().is_some() {
                l.free.push(key);
            }
        }
    }

    /// The runtime shuts down: every live registration's waits end
    /// (`ScheduledIo::shutdown`), and later ones are refused.
    pub(crate) fn shut_registrations(&self) {
        let cells = {
            let mut l = self.live.lock();
            l.shut = true;
            l.free.clear();
            std::mem::take(&mut l.cells)
        };
        // Woken outside the lock: a wake may drop a task whose socket's
        // drop takes it.
        for io in cells.into_iter().flatten() {
            io.shutdown();
        }
    }

    /// Keeps `io` alive until the next turn (see `release`).
    pub(crate) fn release(&self, io: Arc<ScheduledIo>) {
        self.release.lock().push(io);
        self.has_release.store(true, Ordering::Release);
    }

    /// One `epoll_wait` (bounded by `timeout`; `Some(ZERO)` does not block)
    /// and the dispatch of its events: readiness set, waiters woken on this
    /// thread. Returns the number of readiness events.
    /// `woke` runs when `epoll_wait` returns, before the dispatch (the
    /// worker takes its waker back there: io/mod.rs).
    pub(crate) fn turn(
        &self,
        st: &mut PollState,
        timeout: Option<Duration>,
        woke: impl FnOnce(),
    ) -> usize {
        // Acquire: pairs with `release`'s store; the lock orders the vector.
        if self.has_release.load(Ordering::Acquire) {
            let freed = std::mem::take(&mut *self.release.lock());
            self.has_release.store(false, Ordering::Relaxed);
            drop(freed);
        }
        self.counters.turns.fetch_add(1, Ordering::Relaxed);
        let PollState { poll, events } = st;
        let res = poll.poll(events, timeout);
        woke();
        if let Err(e) = res {
            // EINTR (a signal): nothing to dispatch. Anything else cannot
            // happen with a valid epoll fd and buffer; treat it the same.
            debug_assert_eq!(e.kind(), io::ErrorKind::Interrupted, "epoll_wait: {e}");
            return 0;
        }
        let mut n = 0;
        for ev in events.iter() {
            match ev.token() {
                TOKEN_WAKEUP => {}
                TOKEN_SIGNAL => {
                    if let Some(dispatch) = SIGNAL_DISPATCH.get() {
                        dispatch();
                    }
                }
                mio::Token(addr) => {
                    // SAFETY: every other token is the address of a
                    // `ScheduledIo` owned by a live `Registration` or by this
                    // poller's `release` list: a registration is
                    // deregistered from epoll before its `Arc` moves to
                    // `release`, and `release` is emptied only at the start
                    // of a turn, under the poller lock we hold, so no event
                    // of an `epoll_wait` still being dispatched can name a
                    // freed one.
                    let io = unsafe { &*(addr as *const ScheduledIo) };
                    let ready = Ready::from_mio(ev);
                    io.set_readiness(ready);
                    io.wake(ready);
                    n += 1;
                }
            }
        }
        self.counters.events.fetch_add(n as u64, Ordering::Relaxed);
        n
    }
}

/// How many pollers a runtime has ([`Builder::io_pollers`](crate::Builder::io_pollers)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum IoPollers {
    /// One poller for the whole runtime (tokio's and Go's choice).
    #[default]
    One,
    /// One poller per last-level cache: a socket registers with the poller
    /// of the LLC that accepts it, and workers of that LLC sleep in it first.
    PerLlc,
    /// One poller per NUMA node.
    PerNuma,
}

/// The runtime's I/O driver: its pollers and which worker uses which.
pub(crate) struct Driver {
    pub(crate) pollers: Box<[Poller]>,
    /// Per worker: its poller.
    poller_of: Box<[usize]>,
}

impl Driver {
    /// A driver with one poller per distinct value of `domain_of` (a
    /// worker's domain index, dense from 0).
    pub(crate) fn new(domain_of: &[usize]) -> io::Result<Driver> {
        let n = domain_of.iter().copied().max().map_or(1, |m| m + 1);
        let pollers = (0..n)
            .map(|_| Poller::new())
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Driver {
            pollers: pollers.into_boxed_slice(),
            poller_of: domain_of.into(),
        })
    }

    /// Worker `w`'s own poller.
    pub(crate) fn poller_of(&self, w: usize) -> usize {
        self.poller_of.get(w).copied().unwrap_or(0)
    }
}
