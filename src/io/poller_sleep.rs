//! The worker's side of the poller hand-off (which worker sleeps in which
//! poller: [`PollerSleep`], [`wake_self`]), written once over a poller trait
//! ([`SleepPoller`]): the runtime drives it with mio's pollers
//! (`worker/driven.rs`'s `Driven`), the loom models of
//! `loom-tests/tests/driver.rs` with a mock poller built from loom's mutex,
//! condvar and atomics. The steps (1-6) and why no wake is lost:
//! src/sched/README.md, "The poller hand-off".

use std::task::{Poll, Waker};
use std::time::Duration;

use crate::sched::park::{Notified, Parker};

/// A poller a worker may sleep in: mio's epoll in the runtime, a mock in
/// the loom models.
pub trait SleepPoller {
    /// What holding the poller gives its holder (mio: the guard of its
    /// `epoll` state).
    type Held<'a>
    where
        Self: 'a;

    /// The poller, if no other worker holds it: a try-lock, a worker never
    /// waits for a poller.
    fn try_hold(&self) -> Option<Self::Held<'_>>;

    /// The waker that interrupts the holder's wait (mio: an eventfd write).
    fn waker(&self) -> &Waker;

    /// One wait of the holder, bounded by `timeout` (`Some(ZERO)`: do not
    /// block): returns when its waker was woken, an event came, or the
    /// timeout passed. Calls `woke` as soon as the wait returns, before it
    /// dispatches the events (readiness set, waiters woken on this thread).
    /// Returns the number of events dispatched.
    fn turn(
        &self,
        held: &mut Self::Held<'_>,
        timeout: Option<Duration>,
        woke: impl FnOnce(),
    ) -> usize;
}

/// How a worker sleeps when every poller is taken: on its thread.
pub trait ThreadSleep {
    /// The waker that ends [`park`](Self::park).
    fn waker(&self) -> &Waker;

    /// Sleeps until the waker is woken or `timeout` passed (may return
    /// early, spuriously).
    fn park(&self, timeout: Option<Duration>);
}

/// The runtime's thread sleep: `std::thread::park`, and a waker that
/// unparks the thread that created it.
#[derive(Debug, Clone)]
pub struct ThreadPark {
    waker: Waker,
}

struct Unpark(std::thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

impl ThreadPark {
    /// The sleep of the calling thread.
    pub fn current() -> ThreadPark {
        ThreadPark {
            waker: Waker::from(std::sync::Arc::new(Unpark(std::thread::current()))),
        }
    }
}

impl ThreadSleep for ThreadPark {
    fn waker(&self) -> &Waker {
        &self.waker
    }
    fn park(&self, timeout: Option<Duration>) {
        match timeout {
            Some(t) => std::thread::park_timeout(t),
            None => std::thread::park(),
        }
    }
}

impl SleepPoller for super::Poller {
    type Held<'a> = parking_lot::MutexGuard<'a, super::PollState>;

    fn try_hold(&self) -> Option<Self::Held<'_>> {
        super::Poller::try_hold(self)
    }
    fn waker(&self) -> &Waker {
        super::Poller::waker(self)
    }
    fn turn(
        &self,
        held: &mut Self::Held<'_>,
        timeout: Option<Duration>,
        woke: impl FnOnce(),
    ) -> usize {
        super::Poller::turn(self, held, timeout, woke)
    }
}

/// One worker's sleep in the driver (poller steps 1 to 4 and 6,
/// src/sched/README.md): the poller it holds while it sleeps in it, and its thread's
/// sleep for when every poller is taken.
pub struct PollerSleep<'a, P: SleepPoller + 'a, T> {
    /// The poller held (its index and what holding gives), from the first
    /// poll of a park until the park ends.
    held: Option<(usize, P::Held<'a>)>,
    thread: T,
}

impl<'a, P: SleepPoller + 'a, T: ThreadSleep> PollerSleep<'a, P, T> {
    /// Holds no poller; sleeps on `thread` when every poller is taken.
    pub fn new(thread: T) -> Self {
        PollerSleep { held: None, thread }
    }

    /// The index of the poller held, if any.
    pub fn held(&self) -> Option<usize> {
        self.held.as_ref().map(|(i, _)| *i)
    }

    /// Idle step 5 (src/sched/README.md), the `sleep` of
    /// [`Mailbox::wait_with`](crate::sched::park::Mailbox::wait_with) and
    /// [`resume`](crate::sched::park::Mailbox::resume): takes a free poller if it
    /// holds none (`own` first, then the next ones of `pollers`), and polls
    /// the park with that poller's waker, or its thread's. `Pending`: asleep,
    /// the caller suspends its idle period and calls [`wait`](Self::wait).
    /// `Ready`: the park is over, and the poller is free again.
    pub fn sleep(&mut self, pollers: &'a [P], own: usize, p: &Parker) -> Poll<bool> {
        if self.held.is_none() {
            let n = pollers.len();
            self.held = (0..n).find_map(|k| {
                let i = (own + k) % n;
                pollers[i].try_hold().map(|g| (i, g))
            });
        }
        let waker = match &self.held {
            Some((i, _)) => pollers[*i].waker(),
            None => self.thread.waker(),
        };
        let r = p.poll_park(waker);
        if r.is_ready() {
            // Awake: the poller is free for the next worker to sleep in.
            self.held = None;
        }
        r
    }

    /// Sleeps after [`sleep`](Self::sleep) returned `Pending`: one turn of
    /// the poller held (until an event, its waker, or `timeout`), taking
    /// the waker back out of `p`'s slot when the wait returns and before the
    /// dispatch; or, holding none, a park of the thread, then the same take.
    /// Returns the events dispatched (`None`: it slept on its thread).
    pub fn wait(
        &mut self,
        pollers: &'a [P],
        p: &Parker,
        timeout: Option<Duration>,
    ) -> Option<usize> {
        match &mut self.held {
            Some((i, g)) => Some(pollers[*i].turn(g, timeout, || p.take_waker())),
            None => {
                self.thread.park(timeout);
                p.take_waker();
                None
            }
        }
    }
}

/// Poller step 5: a wake made by this worker's dispatch (a readiness event, or a
/// timer fired after the wait) put a task on this worker while its idle
/// period is suspended: the worker notifies its own parker, so that its
/// next [`PollerSleep::sleep`] ends the park instead of waiting again with
/// the task beside it. The waker was taken out of the slot (step 4): the
/// notify writes no eventfd and wakes no thread (it returns
/// [`Notified::Unparked`] all the same when it ends a park: the park it
/// ends is counted like any other).
pub fn wake_self(p: &Parker) -> Notified {
    p.notify()
}
