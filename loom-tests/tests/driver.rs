//! The I/O driver's hand-off (`src/sched/README.md`, "The poller hand-off"): a task
//! wake, a readiness event and a timer expiry, each racing a worker that
//! enters or leaves `epoll_wait`; and the readiness cache a task reads and
//! clears while the driver sets it (`src/io/scheduled_io.rs`).
//!
//! The worker's side is production code: `io::poller_sleep::PollerSleep`
//! (take a free poller with a try-lock, else the thread's waker;
//! `Parker::poll_park` with that waker; `Parker::take_waker` when the wait
//! returns, before the dispatch; the poller released when the park ends),
//! `io::poller_sleep::wake_self` (a dispatch wake that lands on the sleeping
//! worker), and around them `Mailbox::{wait_with, resume, deliver}` as
//! `worker::idle` calls them. What the model supplies is the poller
//! (`MockPoller`, over a mock epoll instance: a loom mutex and condvar for
//! the kernel, its eventfd, its queued edges and a clock) and the thread
//! sleep (`ThreadToken`); its dispatch is `driver.rs`'s (`set_readiness`,
//! then `wake`, after `woke`). The worker's loop is `run_loop` reduced:
//! run what it holds, then `wait_with` (or `resume` while suspended),
//! `PollerSleep::wait` on `Suspended`, then the due timers; the wakes of
//! the dispatch and of the timers land on the worker (`Core`'s batch mode)
//! and call `wake_self`.
//!
//! Checked in every interleaving (bound 3):
//!
//! - every item is run exactly once, on the worker it was delivered or
//!   dispatched to; no thread sleeps forever (a lost wake is a loom
//!   deadlock: the worker waits in the mock `epoll_wait` or on its thread
//!   token with work for it);
//! - unparks are exact: the notifies that returned `Unparked` (deliverers'
//!   and the worker's own `wake_self`) equal the parks that slept (`slept`
//!   in the `Wait`s); the eventfd writes and thread unparks (the real
//!   wakes) never exceed the deliverers' `Unparked`, and a self-wake costs
//!   neither;
//! - the readiness cache loses no wakeup, and a clear never drops an edge
//!   the driver set after the task's syscall (`readiness_*`).
//!
//! | model | what races |
//! | --- | --- |
//! | `deliveries_race_a_worker_entering_and_leaving_the_poller` | two inbox deliveries (two threads) against one worker going into `epoll_wait` and coming out (the second may find the token already set: no unpark; or the worker asleep again: a second eventfd write) |
//! | `a_readiness_event_runs_its_task_on_the_polling_worker` | a "device" thread (data in a mock socket, an edge queued in the mock epoll) against the worker that polled the task, sleeps in the poller, dispatches the edge and must run the task itself (3 executions: the device meets the worker only at the mock kernel's lock, before the turn or during it) |
//! | `a_timer_expiry_races_a_delivery` | the clock (the turn's timeout passing: an early return of the wait) and a delivery against the worker; the timer's task lands on the worker when it fires after the turn |
//! | `an_empty_timeout_races_a_delivery` | the same, with a deadline at which nothing fires: the worker polls its park again, puts its waker back and sleeps again, and the delivery must find that waker; a delivery after `take_waker` returns `Unparked` with no eventfd write (also in the timer model) |
//! | `two_workers_one_poller` | two workers going to sleep with one poller (one holds it, the other parks on its thread waker) against a delivery to each |
//! | `readiness_set_races_a_task_clearing_it` | a driver thread setting readiness and waking (two edges, each after data arrived) against a task that polls readiness, reads until `WouldBlock`, clears with the tick it saw, and waits (`ScheduledIo::{poll_ready, clear_readiness, set_readiness, wake}`) |
//! | `two_readers_of_one_registration_are_both_woken` | the same driver against two tasks reading one unit each through one registration in one direction (two readers of one `&TcpStream`, two acceptors of one listener): the second waiter's waker goes to the overflow list, and each edge must reach whichever reader still waits (the single slot of old lost the displaced reader: a loom deadlock) |
//!
//! Timings (2-core VM under a load average of 10, `nice -n 5`): at bound 3
//! the six models take 23 s in all (the longest, `deliveries_race_...`,
//! 13.8 s; 4.4 s on a quieter machine); at bound 4, 75 s (`deliveries_race_...`
//! 45 s with 74657 executions, `two_workers_one_poller` 17 s,
//! `a_timer_expiry_races_a_delivery` 8 s, the others under 5 s).
//!
//! # Mutations
//!
//! Each applied alone to a copy of the tree, this file's models run at
//! `LOOM_MAX_PREEMPTIONS=3` (`scripts/loom.sh driver`), reverted. The
//! `park.rs` rows are also in `loom-tests/README.md`'s generated table,
//! with the other files' models that catch them:
//!
//! | mutation | change | result |
//! | --- | --- | --- |
//! | `handoff-take-waker-before-wait` | `PollerSleep::wait` takes the waker before the turn (`p.take_waker(); turn(g, timeout, \|\| {})`) instead of when it returns | caught: driver::a_timer_expiry_races_a_delivery, driver::an_empty_timeout_races_a_delivery, driver::deliveries_race_a_worker_entering_and_leaving_the_poller, driver::two_workers_one_poller: "deadlock; threads = [(Id(0), Blocked(Location(None))), (Id(1), Blocked(Location(None))), (Id(2), Terminated)]" |
//! | `handoff-no-take-waker` | no `take_waker` when the turn returns (`turn(g, timeout, \|\| {})`) | caught: driver::a_readiness_event_runs_its_task_on_the_polling_worker, driver::a_timer_expiry_races_a_delivery: "1 eventfd writes or thread unparks for 0 Unparked deliveries" |
//! | `handoff-thread-no-take-waker` | no `take_waker` after the thread's park | NOT caught: Not needed for correctness: a thread park that a wake ended was ended by a notify that took the waker; only a timeout or a spurious return leaves it in the slot, and the next `poll_park` either ends the park (and clears the slot) or keeps the same waker. The cost without it: a notify meanwhile unparks a thread that is awake (its next park returns at once). The models' thread sleep has no timeout. |
//! | `handoff-keeps-the-poller` | `sleep` keeps the poller when the park ends (`self.held = None` removed) | caught: driver::a_readiness_event_runs_its_task_on_the_polling_worker, driver::a_timer_expiry_races_a_delivery, driver::an_empty_timeout_races_a_delivery, driver::deliveries_race_a_worker_entering_and_leaving_the_poller, driver::two_workers_one_poller: "the worker left holding the poller" (the model's exit check; no wake is lost, since the guard drops when the worker ends, but the other workers cannot sleep in the poller meanwhile) |
//! | `handoff-thread-sleep-with-poller-waker` | holding no poller, `sleep` parks with its own poller's waker instead of its thread's | caught: driver::two_workers_one_poller: "deadlock; threads = [(Id(0), Blocked(Location(None))), (Id(1), Terminated), (Id(2), Blocked(Location(None)))]" |
//! | `handoff-no-wake-self` | `wake_self` does not notify (returns `NoUnparkNeeded`) | caught: driver::a_readiness_event_runs_its_task_on_the_polling_worker, driver::a_timer_expiry_races_a_delivery: "deadlock; threads = [(Id(0), Blocked(Location(None))), (Id(1), Blocked(Location(None)))]" |
//! | `park-poll-park-resume-no-waker` | `poll_park`, polled again without a token, does not put the waker back (`if false && !slot...will_wake`) | caught: driver::an_empty_timeout_races_a_delivery: "deadlock; threads = [(Id(0), Blocked(Location(None))), (Id(1), Blocked(Location(None))), (Id(2), Terminated)]" |
//! | `park-poll-park-waker-after-unlock` | `poll_park` stores the waker after releasing the parker's mutex | caught: driver::a_timer_expiry_races_a_delivery, driver::deliveries_race_a_worker_entering_and_leaving_the_poller, driver::two_workers_one_poller: "deadlock; threads = [(Id(0), Blocked(Location(None))), (Id(1), Blocked(Location(None))), (Id(2), Terminated)]" |
//! | `park-poll-park-sleeps-on-token` | `poll_park`'s first call sleeps even when `fetch_or(PARKED)` finds a token (no re-check: `if false && prev & NOTIFIED != 0`) | caught: driver::a_timer_expiry_races_a_delivery, driver::an_empty_timeout_races_a_delivery, driver::deliveries_race_a_worker_entering_and_leaving_the_poller, driver::two_workers_one_poller: "assertion `left == right` failed: unparks are not exact: 0 delivery Unparked + 0 self, 1 sleeps" |
//! | `sio-clear-no-tick-check` | `clear_readiness` clears whatever the tick (`Some(s & !clear)`) | caught: driver::readiness_set_races_a_task_clearing_it: "deadlock; threads = [(Id(0), Blocked(Location(None))), (Id(1), Terminated)]" |
//! | `sio-set-no-tick-bump` | `set_readiness` does not bump the tick | caught: driver::readiness_set_races_a_task_clearing_it: "deadlock; threads = [(Id(0), Blocked(Location(None))), (Id(1), Terminated)]" |
//! | `sio-poll-ready-no-recheck` | `poll_ready` does not re-read the bits under the waiters lock after storing its waker | caught: driver::readiness_set_races_a_task_clearing_it: "deadlock; threads = [(Id(0), Blocked(Location(None))), (Id(1), Terminated)]" |
//! | `sio-set-acqrel` | `set_readiness`'s `fetch_update(AcqRel, Acquire)` → `(Relaxed, Relaxed)` | NOT caught: Not needed: no wakeup is lost through the waiters mutex (the driver sets the bits before it takes the lock to take the wakers; the task re-reads after taking it to store its waker: whichever lock comes second sees the other side's write, by the lock's happens-before and coherence), the tick check is on one word's modification order (an RMW reads the latest value whatever its ordering), and the bits publish no other memory (the data is behind the kernel's own locking: the model's socket mutex). Kept: a `lock cmpxchg` on x86 either way. |
//! | `sio-clear-acqrel` | `clear_readiness`'s `fetch_update(AcqRel, Acquire)` → `(Relaxed, Relaxed)` | NOT caught: Not needed, as sio-set-acqrel: the tick comparison is on the modification order of the one word. |
//! | `sio-poll-ready-load` | `poll_ready`'s first `load(Acquire)` → `Relaxed` | NOT caught: Not needed: a stale "not ready" sends the task to the lock and the re-read; "ready" only sends it to the syscall, which the kernel orders. Kept: a plain load on x86 either way. |
//! | `sio-poll-ready-reload` | `poll_ready`'s re-read under the lock `load(Acquire)` → `Relaxed` | NOT caught: Not needed: it follows the waiters lock, so a driver whose wake took the lock first set the bits before (happens-before), and even a relaxed load reads them. Kept: a plain load on x86. |
//! | `park-notify-acqrel-release` | `notify`'s `fetch_or(NOTIFIED, AcqRel)` → `Release` | NOT caught: Not by these models: the acquire half is for the shutdown flag, which they do not set (the generated table: caught by `shutdown::shutdown_races_delivery_and_worker`). |
//! | `park-notify-acqrel-acquire` | `notify`'s `fetch_or(NOTIFIED, AcqRel)` → `Acquire` | caught: driver::a_timer_expiry_races_a_delivery, driver::an_empty_timeout_races_a_delivery, driver::deliveries_race_a_worker_entering_and_leaving_the_poller, driver::two_workers_one_poller: "deadlock; threads = [(Id(0), Blocked(Location(None))), (Id(1), Blocked(Location(None))), (Id(2), Terminated)]" |
//! | `park-prepare-fetch-and` | `prepare`'s `fetch_and(!NOTIFIED, AcqRel)` → `Relaxed` | caught: driver::a_timer_expiry_races_a_delivery, driver::an_empty_timeout_races_a_delivery, driver::deliveries_race_a_worker_entering_and_leaving_the_poller, driver::two_workers_one_poller: "deadlock; threads = [(Id(0), Blocked(Location(None))), (Id(1), Blocked(Location(None))), (Id(2), Terminated)]" |
//! | `park-poll-park-fetch-or` | `poll_park`'s `fetch_or(PARKED, AcqRel)` → `Relaxed` | NOT caught: As park-parked-fetch-or: the swaps after it carry the acquire (`park-poll-park-early-swap` and `park-poll-park-final-swap`). |
//! | `park-poll-park-resume-load` | `poll_park`'s `load(Acquire)` when polled again → `Relaxed` | NOT caught: Not needed: the final swap acquires before the inbox check (comment at the site). |
//! | `park-poll-park-early-swap` | `poll_park`'s `swap(0, AcqRel)` when the token was there → `Relaxed` | caught: driver::deliveries_race_a_worker_entering_and_leaving_the_poller: "deadlock; threads = [(Id(0), Blocked(Location(None))), (Id(1), Blocked(Location(None))), (Id(2), Terminated)]" |
//! | `park-poll-park-final-swap` | `poll_park`'s final `swap(0, AcqRel)` → `Relaxed` | caught: driver::a_timer_expiry_races_a_delivery, driver::deliveries_race_a_worker_entering_and_leaving_the_poller: "deadlock; threads = [(Id(0), Blocked(Location(None))), (Id(1), Blocked(Location(None))), (Id(2), Terminated)]" |

#![cfg(loom)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool as StdBool, AtomicUsize as StdCount, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use hwsched::io::poller_sleep::{wake_self, PollerSleep, SleepPoller, ThreadSleep};
use hwsched::io::scheduled_io::{Direction, ReadyEvent, ScheduledIo};
use hwsched::io::Ready;
use hwsched::sched::park::{Mailbox, Notified, Wait};
use hwsched::sched::queue::Local;
use loom::sync::atomic::AtomicBool;
use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
use loom::thread;
use loom_tests::{model, Cases, Ledger, Task};

// ---------------------------------------------------------------------------
// The mock kernel: an epoll instance with its eventfd, and a thread token.

/// What the mock epoll instance holds.
#[derive(Default)]
struct EpollState {
    /// The eventfd was written since the last turn returned (edge
    /// triggered: the next turn reports it once).
    woken: bool,
    /// Readiness edges queued and not yet returned (registration index).
    edges: Vec<usize>,
    /// The clock passed the worker's timer deadline.
    expired: bool,
}

/// A mock epoll instance: the kernel's lock and wait queue.
struct Epoll {
    st: Mutex<EpollState>,
    cv: Condvar,
    /// Observer counts (outside loom's view).
    eventfd_writes: StdCount,
    /// Turns that blocked at least once.
    blocked: StdCount,
    /// Turns that returned on the timeout (no eventfd write, no edge).
    timed_out: StdCount,
}

impl Epoll {
    fn new() -> Self {
        Epoll {
            st: Mutex::new(EpollState::default()),
            cv: Condvar::new(),
            eventfd_writes: StdCount::new(0),
            blocked: StdCount::new(0),
            timed_out: StdCount::new(0),
        }
    }

    /// `write(eventfd)`: the poller's waker.
    fn write_eventfd(&self) {
        self.eventfd_writes.fetch_add(1, SeqCst);
        self.st.lock().unwrap().woken = true;
        self.cv.notify_one();
    }

    /// An edge on registration `token` (data arrived on its socket).
    fn edge(&self, token: usize) {
        self.st.lock().unwrap().edges.push(token);
        self.cv.notify_one();
    }

    /// Time passes the timer's deadline.
    fn expire(&self) {
        self.st.lock().unwrap().expired = true;
        self.cv.notify_one();
    }

    fn expired(&self) -> bool {
        self.st.lock().unwrap().expired
    }
}

struct EventFd(Arc<Epoll>);

impl Wake for EventFd {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.write_eventfd();
    }
}

/// The model's poller: a try-lock, the epoll instance, its waker, and the
/// registrations its dispatch sets readiness on.
struct MockPoller {
    hold: Mutex<()>,
    epoll: Arc<Epoll>,
    waker: Waker,
    ios: Vec<Arc<ScheduledIo>>,
}

impl MockPoller {
    fn new(ios: Vec<Arc<ScheduledIo>>) -> Self {
        let epoll = Arc::new(Epoll::new());
        MockPoller {
            hold: Mutex::new(()),
            waker: Waker::from(std::sync::Arc::new(EventFd(epoll.clone()))),
            epoll,
            ios,
        }
    }
}

impl SleepPoller for MockPoller {
    type Held<'a> = MutexGuard<'a, ()>;

    fn try_hold(&self) -> Option<Self::Held<'_>> {
        self.hold.try_lock().ok()
    }

    fn waker(&self) -> &Waker {
        &self.waker
    }

    /// `epoll_wait`: until the eventfd was written, an edge is queued, or
    /// (with a timeout) the clock expired; then `woke`, then the dispatch of
    /// `driver.rs`'s `Poller::turn`.
    fn turn(
        &self,
        _held: &mut Self::Held<'_>,
        timeout: Option<Duration>,
        woke: impl FnOnce(),
    ) -> usize {
        let ep = &*self.epoll;
        let edges = {
            let mut st = ep.st.lock().unwrap();
            let mut blocked = false;
            loop {
                let timed_out = timeout.is_some_and(|d| d.is_zero() || st.expired);
                if st.woken || !st.edges.is_empty() {
                    break;
                }
                if timed_out {
                    ep.timed_out.fetch_add(1, SeqCst);
                    break;
                }
                blocked = true;
                st = ep.cv.wait(st).unwrap();
            }
            if blocked {
                ep.blocked.fetch_add(1, SeqCst);
            }
            st.woken = false;
            std::mem::take(&mut st.edges)
        };
        woke();
        for &t in &edges {
            let io = &self.ios[t];
            io.set_readiness(Ready::READABLE);
            io.wake(Ready::READABLE);
        }
        edges.len()
    }
}

/// A thread's park token (`std::thread::park` semantics, as in
/// `block_on.rs`: loom's own `thread::park` is avoided, README).
struct Token {
    set: Mutex<bool>,
    cv: Condvar,
    unparks: StdCount,
}

impl Token {
    fn new() -> Self {
        Token {
            set: Mutex::new(false),
            cv: Condvar::new(),
            unparks: StdCount::new(0),
        }
    }
    fn unpark(&self) {
        self.unparks.fetch_add(1, SeqCst);
        *self.set.lock().unwrap() = true;
        self.cv.notify_one();
    }
    fn park(&self) {
        let mut set = self.set.lock().unwrap();
        while !*set {
            set = self.cv.wait(set).unwrap();
        }
        *set = false;
    }
}

struct Unpark(Arc<Token>);

impl Wake for Unpark {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// The worker's thread sleep: its token and a waker that unparks it.
struct ThreadToken {
    token: Arc<Token>,
    waker: Waker,
}

impl ThreadToken {
    fn new(token: Arc<Token>) -> Self {
        ThreadToken {
            waker: Waker::from(std::sync::Arc::new(Unpark(token.clone()))),
            token,
        }
    }
}

impl ThreadSleep for ThreadToken {
    fn waker(&self) -> &Waker {
        &self.waker
    }
    /// No model parks a thread with a timer: the timeout is ignored.
    fn park(&self, _timeout: Option<Duration>) {
        self.token.park();
    }
}

// ---------------------------------------------------------------------------
// Work items, and the worker.

/// What a worker runs.
enum Job {
    /// A delivered item, or a timer's task.
    Item(Task),
    /// A task reading a socket (`IoTask`).
    Io(std::sync::Arc<IoTask>),
}

/// A task that reads one unit from a mock socket through its readiness:
/// `poll_ready`, the syscall, a clear on `WouldBlock` (what
/// `PollEvented::poll_read` does).
struct IoTask {
    io: Arc<ScheduledIo>,
    socket: Arc<Mutex<usize>>,
    home: Arc<Worker>,
    done: StdBool,
}

/// The task's waker: its schedule function, for wakes made on its worker
/// by the dispatch (weak: a waker left in the registration must not keep
/// the task alive).
struct IoWaker {
    task: std::sync::Weak<IoTask>,
    home: Arc<Worker>,
}

impl Wake for IoWaker {
    fn wake(self: std::sync::Arc<Self>) {
        if let Some(t) = self.task.upgrade() {
            self.home.land(Job::Io(t));
        }
    }
}

/// Reads until `want` units were read or the socket would block: the
/// readiness protocol of a task (`poll_ready`, the syscall, a clear with
/// the tick it saw on `WouldBlock`). Returns whether a clear was followed
/// by readiness still set (a newer edge outlived it).
fn poll_read(
    io: &ScheduledIo,
    socket: &Mutex<usize>,
    cx: &mut Context<'_>,
    got: &mut usize,
    want: usize,
    newer_edge_kept: &mut bool,
) -> Poll<()> {
    let mut cleared = false;
    loop {
        let ev: ReadyEvent = match io.poll_ready(cx, Direction::Read) {
            Poll::Ready(ev) => ev,
            Poll::Pending => return Poll::Pending,
        };
        if cleared {
            *newer_edge_kept = true;
        }
        loop {
            // The syscall: the socket's own lock is the kernel's.
            let mut buf = socket.lock().unwrap();
            if *buf == 0 {
                break;
            }
            *buf -= 1;
            drop(buf);
            *got += 1;
            if *got == want {
                return Poll::Ready(());
            }
        }
        // WouldBlock: clear what this read saw.
        io.clear_readiness(ev);
        cleared = true;
    }
}

impl IoTask {
    fn run(self: std::sync::Arc<Self>) {
        assert!(!self.done.load(SeqCst), "a finished task ran again");
        let waker = Waker::from(std::sync::Arc::new(IoWaker {
            task: std::sync::Arc::downgrade(&self),
            home: self.home.clone(),
        }));
        let mut cx = Context::from_waker(&waker);
        let mut got = 0;
        let mut kept = false;
        if poll_read(&self.io, &self.socket, &mut cx, &mut got, 1, &mut kept).is_ready() {
            self.done.store(true, SeqCst);
        }
    }
}

/// One worker as other threads see it, and what its dispatch lands on it.
struct Worker {
    mb: Mailbox<Job>,
    /// Its LIFO slot and deque for wakes made by its own dispatch and
    /// timers (`Core::push_batch`): only its own thread touches it.
    landed: std::sync::Mutex<VecDeque<Job>>,
    thread: std::sync::Mutex<Option<thread::ThreadId>>,
    /// `wake_self` calls that returned `Unparked`.
    self_unparks: StdCount,
}

impl Worker {
    fn new() -> Self {
        Worker {
            mb: Mailbox::new(),
            landed: std::sync::Mutex::new(VecDeque::new()),
            thread: std::sync::Mutex::new(None),
            self_unparks: StdCount::new(0),
        }
    }

    /// A wake made by this worker's dispatch or timers, while its idle
    /// period is suspended: to its own queue, then `wake_self` (what
    /// `worker/schedule.rs` does in batch mode, with `wake_self_in_driver`).
    fn land(&self, j: Job) {
        assert_eq!(
            *self.thread.lock().unwrap(),
            Some(thread::current().id()),
            "a dispatch wake landed on a worker that is not the polling one"
        );
        self.landed.lock().unwrap().push_back(j);
        if wake_self(&self.mb.parker) == Notified::Unparked {
            self.self_unparks.fetch_add(1, SeqCst);
        }
    }
}

/// The worker's timer: due once the clock expired, fired after a wait.
/// Without a task, it fires nothing (a deadline at which nothing is due:
/// a timer cancelled meanwhile, or the wheel's own next look).
struct Timer {
    epoll: Arc<Epoll>,
    armed: bool,
    task: Option<Task>,
}

/// What a worker saw.
#[derive(Debug, Default)]
struct Log {
    /// Parks that slept (`slept` in the `Wait`).
    sleeps: usize,
    /// Waits in a poller (turns), and on the thread.
    turns: usize,
    thread_parks: usize,
    /// `wake_self` calls that returned `Unparked`.
    self_unparks: usize,
}

/// The worker: `run_loop` reduced (see the module docs), until `done()`.
fn run_worker(
    w: &Worker,
    pollers: &[MockPoller],
    own: usize,
    thread: ThreadToken,
    mut timer: Option<Timer>,
    done: impl Fn() -> bool,
) -> Log {
    *w.thread.lock().unwrap() = Some(thread::current().id());
    let local = Local::new();
    let shutdown = AtomicBool::new(false);
    let mut sleep = PollerSleep::new(thread);
    let mut suspended = false;
    let mut log = Log::default();
    loop {
        if !suspended {
            // Run what the worker holds: its deque, then what landed.
            loop {
                let j = local.pop().or_else(|| w.landed.lock().unwrap().pop_front());
                match j {
                    Some(Job::Item(t)) => t.run(),
                    Some(Job::Io(t)) => t.run(),
                    None => break,
                }
            }
            if done() {
                break;
            }
        }
        let res = if suspended {
            w.mb.resume(&shutdown, |p| sleep.sleep(pollers, own, p))
        } else {
            w.mb.wait_with(
                &shutdown,
                || false,
                || true,
                |p| sleep.sleep(pollers, own, p),
            )
        };
        suspended = false;
        match res {
            Wait::Suspended => {
                suspended = true;
                // The next timer bounds the turn (its length is the clock's).
                let timeout = timer
                    .as_ref()
                    .filter(|t| t.armed)
                    .map(|_| Duration::from_millis(1));
                match sleep.wait(pollers, &w.mb.parker, timeout) {
                    Some(_) => log.turns += 1,
                    None => log.thread_parks += 1,
                }
                // The due timers fire after the wait, in batch mode.
                if let Some(t) = timer.as_mut() {
                    if t.armed && t.epoll.expired() {
                        t.armed = false;
                        if let Some(task) = t.task.take() {
                            w.land(Job::Item(task));
                        }
                    }
                }
            }
            Wait::Work { item, slept } => {
                log.sleeps += usize::from(slept);
                match item {
                    Job::Item(t) => t.run(),
                    Job::Io(t) => t.run(),
                }
            }
            Wait::Woken { slept, kicked_by } => {
                assert_eq!(kicked_by, None, "nobody kicks in this model");
                log.sleeps += usize::from(slept);
            }
            Wait::Shutdown => panic!("no shutdown in this model"),
        }
    }
    assert!(sleep.held().is_none(), "the worker left holding the poller");
    assert!(local.is_empty() && w.landed.lock().unwrap().is_empty());
    log.self_unparks = w.self_unparks.load(SeqCst);
    log
}

/// Unparks are exact, and real wakes only come from other threads'
/// notifies that found the worker parked.
fn check_unparks(delivered_unparks: usize, logs: &[&Log], real_wakes: usize) {
    let sleeps: usize = logs.iter().map(|l| l.sleeps).sum();
    let self_unparks: usize = logs.iter().map(|l| l.self_unparks).sum();
    assert_eq!(
        delivered_unparks + self_unparks,
        sleeps,
        "unparks are not exact: {delivered_unparks} delivery Unparked + {self_unparks} self, \
         {sleeps} sleeps"
    );
    assert!(
        real_wakes <= delivered_unparks,
        "{real_wakes} eventfd writes or thread unparks for {delivered_unparks} Unparked deliveries"
    );
}

fn unparked(n: &[Notified]) -> usize {
    n.iter().filter(|n| **n == Notified::Unparked).count()
}

// ---------------------------------------------------------------------------
// The models.

/// (a) Two deliveries, from two threads, against one worker entering and
/// leaving the poller: the first may wake it through the eventfd, the
/// second may land after it took its waker back (`Unparked`, no eventfd
/// write), or after it went back to sleep (a second eventfd write).
#[test]
fn deliveries_race_a_worker_entering_and_leaving_the_poller() {
    let cases = Cases::new(&[
        "never slept",
        "woken by an eventfd write",
        "the second notify found the token set: no unpark",
        "slept twice",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let pollers = Arc::new(vec![MockPoller::new(vec![])]);
            let w = Arc::new(Worker::new());
            let token = Arc::new(Token::new());
            let h = {
                let (pollers, w, ledger, token) =
                    (pollers.clone(), w.clone(), ledger.clone(), token.clone());
                thread::spawn(move || {
                    run_worker(&w, &pollers, 0, ThreadToken::new(token), None, || {
                        ledger.ran(0) + ledger.ran(1) == 2
                    })
                })
            };
            let d = {
                let (w, ledger) = (w.clone(), ledger.clone());
                thread::spawn(move || w.mb.deliver(Job::Item(ledger.task(1))))
            };
            let n0 = w.mb.deliver(Job::Item(ledger.task(0)));
            let n1 = d.join().unwrap();
            let log = h.join().unwrap();
            ledger.assert_each_once();
            assert!(w.mb.inbox.is_empty());
            let writes = pollers[0].epoll.eventfd_writes.load(SeqCst);
            let u = unparked(&[n0, n1]);
            check_unparks(u, &[&log], writes + token.unparks.load(SeqCst));
            assert_eq!(
                log.thread_parks, 0,
                "the only worker always gets the poller"
            );
            if log.sleeps == 0 {
                cases.hit("never slept");
            }
            if writes > 0 {
                cases.hit("woken by an eventfd write");
            }
            if log.sleeps == 1 && u == 1 {
                cases.hit("the second notify found the token set: no unpark");
            }
            if log.sleeps == 2 {
                cases.hit("slept twice");
            }
        }
    });
    cases.assert_all_reached();
}

/// (b) A readiness event against the worker: a device thread puts data in
/// the socket and queues an edge; the worker, which polled the task first
/// (`Pending`, its waker in the registration), sleeps in the poller,
/// dispatches the edge (readiness set, waker woken on its thread: the task
/// lands on it, `wake_self`), and runs the task itself.
#[test]
fn a_readiness_event_runs_its_task_on_the_polling_worker() {
    let cases = Cases::new(&[
        "the edge came while the worker blocked in epoll_wait",
        "the edge was queued before the turn",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let io = Arc::new(ScheduledIo::new());
            let socket = Arc::new(Mutex::new(0usize));
            let pollers = Arc::new(vec![MockPoller::new(vec![io.clone()])]);
            let w = Arc::new(Worker::new());
            let task = std::sync::Arc::new(IoTask {
                io: io.clone(),
                socket: socket.clone(),
                home: w.clone(),
                done: StdBool::new(false),
            });
            // Spawned onto the worker (its first poll registers the waker).
            w.landed.lock().unwrap().push_back(Job::Io(task.clone()));
            let token = Arc::new(Token::new());
            let h = {
                let (pollers, w, task, token) =
                    (pollers.clone(), w.clone(), task.clone(), token.clone());
                thread::spawn(move || {
                    run_worker(&w, &pollers, 0, ThreadToken::new(token), None, || {
                        task.done.load(SeqCst)
                    })
                })
            };
            // The device: data arrives, the kernel queues the edge.
            *socket.lock().unwrap() += 1;
            pollers[0].epoll.edge(0);
            let log = h.join().unwrap();
            assert!(task.done.load(SeqCst));
            assert_eq!(*socket.lock().unwrap(), 0);
            let writes = pollers[0].epoll.eventfd_writes.load(SeqCst);
            check_unparks(0, &[&log], writes + token.unparks.load(SeqCst));
            assert_eq!(writes, 0, "the self-wake wrote the eventfd");
            // Readiness is set only by a turn's dispatch: the task's first
            // poll always waits.
            assert!(log.turns >= 1);
            assert_eq!(log.self_unparks, 1, "the dispatch wake ends the park");
            if pollers[0].epoll.blocked.load(SeqCst) > 0 {
                cases.hit("the edge came while the worker blocked in epoll_wait");
            } else {
                cases.hit("the edge was queued before the turn");
            }
            drop(task);
        }
    });
    cases.assert_all_reached();
}

/// (c) A timer expiry (the turn's timeout passing: an early return of the
/// wait, modelled by a clock thread, since loom has no time) racing a
/// delivery: the timer's task lands on the worker when the timers fire
/// after the turn; the delivery's eventfd write may end the same turn, or
/// find the worker awake.
#[test]
fn a_timer_expiry_races_a_delivery() {
    let cases = Cases::new(&[
        "a turn returned on its timeout",
        "the delivery's eventfd write ended a turn",
        "the timer fired with the delivery's wake",
        "a notify after take_waker: Unparked, no eventfd write",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let pollers = Arc::new(vec![MockPoller::new(vec![])]);
            let w = Arc::new(Worker::new());
            let token = Arc::new(Token::new());
            let h = {
                let (pollers, w, ledger, token) =
                    (pollers.clone(), w.clone(), ledger.clone(), token.clone());
                thread::spawn(move || {
                    let timer = Timer {
                        epoll: pollers[0].epoll.clone(),
                        armed: true,
                        task: Some(ledger.task(1)),
                    };
                    run_worker(
                        &w,
                        &pollers,
                        0,
                        ThreadToken::new(token),
                        Some(timer),
                        || ledger.ran(0) + ledger.ran(1) == 2,
                    )
                })
            };
            let clock = {
                let pollers = pollers.clone();
                thread::spawn(move || pollers[0].epoll.expire())
            };
            let n = w.mb.deliver(Job::Item(ledger.task(0)));
            clock.join().unwrap();
            let log = h.join().unwrap();
            ledger.assert_each_once();
            let ep = &pollers[0].epoll;
            let writes = ep.eventfd_writes.load(SeqCst);
            check_unparks(unparked(&[n]), &[&log], writes + token.unparks.load(SeqCst));
            assert!(log.self_unparks <= 1);
            if unparked(&[n]) > writes {
                cases.hit("a notify after take_waker: Unparked, no eventfd write");
            }
            if ep.timed_out.load(SeqCst) > 0 {
                cases.hit("a turn returned on its timeout");
            }
            if writes > 0 {
                cases.hit("the delivery's eventfd write ended a turn");
                if log.turns == 1 && ep.timed_out.load(SeqCst) == 0 {
                    cases.hit("the timer fired with the delivery's wake");
                }
            }
        }
    });
    cases.assert_all_reached();
}

/// (c') A timeout that fires nothing (the turn returns early on its
/// deadline, and no task is due) racing a delivery: the worker polls its
/// park again, finds no token, puts its waker back and sleeps again; the
/// delivery must find that waker.
#[test]
fn an_empty_timeout_races_a_delivery() {
    let cases = Cases::new(&[
        "slept again after the timeout, woken by the delivery",
        "the delivery's eventfd write ended a turn",
        "delivered before the worker slept",
        "a notify after take_waker: Unparked, no eventfd write",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let pollers = Arc::new(vec![MockPoller::new(vec![])]);
            let w = Arc::new(Worker::new());
            let token = Arc::new(Token::new());
            let h = {
                let (pollers, w, ledger, token) =
                    (pollers.clone(), w.clone(), ledger.clone(), token.clone());
                thread::spawn(move || {
                    let timer = Timer {
                        epoll: pollers[0].epoll.clone(),
                        armed: true,
                        task: None,
                    };
                    run_worker(
                        &w,
                        &pollers,
                        0,
                        ThreadToken::new(token),
                        Some(timer),
                        || ledger.ran(0) == 1,
                    )
                })
            };
            let clock = {
                let pollers = pollers.clone();
                thread::spawn(move || pollers[0].epoll.expire())
            };
            let n = w.mb.deliver(Job::Item(ledger.task(0)));
            clock.join().unwrap();
            let log = h.join().unwrap();
            ledger.assert_each_once();
            let ep = &pollers[0].epoll;
            let writes = ep.eventfd_writes.load(SeqCst);
            check_unparks(unparked(&[n]), &[&log], writes + token.unparks.load(SeqCst));
            assert_eq!(log.self_unparks, 0, "nothing landed");
            if unparked(&[n]) > writes {
                cases.hit("a notify after take_waker: Unparked, no eventfd write");
            }
            if ep.timed_out.load(SeqCst) > 0 && log.turns >= 2 && log.sleeps == 1 {
                cases.hit("slept again after the timeout, woken by the delivery");
            }
            if writes > 0 {
                cases.hit("the delivery's eventfd write ended a turn");
            }
            if log.turns == 0 {
                cases.hit("delivered before the worker slept");
            }
        }
    });
    cases.assert_all_reached();
}

/// (d) Two workers, one poller: only one holds it at a time, the other
/// parks on its thread waker; a delivery to each is never lost.
#[test]
fn two_workers_one_poller() {
    let cases = Cases::new(&[
        "a worker parked on its thread while the other held the poller",
        "a worker woken by a thread unpark",
        "a worker woken by an eventfd write",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(2);
            let pollers = Arc::new(vec![MockPoller::new(vec![])]);
            let ws = [Arc::new(Worker::new()), Arc::new(Worker::new())];
            let tokens = [Arc::new(Token::new()), Arc::new(Token::new())];
            let hs: Vec<_> = (0..2)
                .map(|i| {
                    let (pollers, w, ledger, token) = (
                        pollers.clone(),
                        ws[i].clone(),
                        ledger.clone(),
                        tokens[i].clone(),
                    );
                    thread::spawn(move || {
                        run_worker(&w, &pollers, 0, ThreadToken::new(token), None, || {
                            ledger.ran(i) == 1
                        })
                    })
                })
                .collect();
            let n0 = ws[0].mb.deliver(Job::Item(ledger.task(0)));
            let n1 = ws[1].mb.deliver(Job::Item(ledger.task(1)));
            let logs: Vec<Log> = hs.into_iter().map(|h| h.join().unwrap()).collect();
            ledger.assert_each_once();
            let writes = pollers[0].epoll.eventfd_writes.load(SeqCst);
            let unparks: usize = tokens.iter().map(|t| t.unparks.load(SeqCst)).sum();
            check_unparks(unparked(&[n0, n1]), &[&logs[0], &logs[1]], writes + unparks);
            if logs.iter().any(|l| l.thread_parks > 0) {
                cases.hit("a worker parked on its thread while the other held the poller");
            }
            if unparks > 0 {
                cases.hit("a worker woken by a thread unpark");
            }
            if writes > 0 {
                cases.hit("a worker woken by an eventfd write");
            }
        }
    });
    cases.assert_all_reached();
}

/// A `block_on` over a token: polls `f` until `Ready`, parking between.
fn block_on(token: &Arc<Token>, mut f: impl FnMut(&mut Context<'_>) -> Poll<()>) -> usize {
    let waker = Waker::from(std::sync::Arc::new(Unpark(token.clone())));
    let mut cx = Context::from_waker(&waker);
    let mut parks = 0;
    while f(&mut cx).is_pending() {
        token.park();
        parks += 1;
    }
    parks
}

/// The readiness cache: a driver thread sets readiness and wakes (two
/// edges, each after its data arrived) while a task polls readiness,
/// reads until `WouldBlock`, clears with the tick it saw, and waits. No
/// wakeup is lost (the task would wait forever with data in the socket: a
/// loom deadlock), and a clear after a newer edge leaves it set.
#[test]
fn readiness_set_races_a_task_clearing_it() {
    let cases = Cases::new(&[
        "the task waited and the driver's wake woke it",
        "a newer edge outlived a clear",
        "read both without waiting",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let io = Arc::new(ScheduledIo::new());
            let socket = Arc::new(Mutex::new(0usize));
            let driver = {
                let (io, socket) = (io.clone(), socket.clone());
                thread::spawn(move || {
                    for _ in 0..2 {
                        *socket.lock().unwrap() += 1;
                        io.set_readiness(Ready::READABLE);
                        io.wake(Ready::READABLE);
                    }
                })
            };
            let token = Arc::new(Token::new());
            let mut got = 0;
            let mut kept = false;
            let parks = block_on(&token, |cx| {
                poll_read(&io, &socket, cx, &mut got, 2, &mut kept)
            });
            driver.join().unwrap();
            assert_eq!(got, 2);
            if parks > 0 {
                cases.hit("the task waited and the driver's wake woke it");
            } else {
                cases.hit("read both without waiting");
            }
            if kept {
                cases.hit("a newer edge outlived a clear");
            }
        }
    });
    cases.assert_all_reached();
}

/// Two tasks wait to read through one registration (the readers of one
/// `&TcpStream`, the acceptors of one listener) while the driver delivers
/// two edges, each after one unit of data: each task reads one unit, and
/// neither waits forever, whichever order they wait in (the second
/// waiter's waker goes to the direction's overflow list, and readiness
/// wakes the slot and the list).
#[test]
fn two_readers_of_one_registration_are_both_woken() {
    let cases = Cases::new(&["both readers waited", "a reader read without waiting"]);
    model({
        let cases = cases.clone();
        move || {
            let io = Arc::new(ScheduledIo::new());
            let socket = Arc::new(Mutex::new(0usize));
            let driver = {
                let (io, socket) = (io.clone(), socket.clone());
                thread::spawn(move || {
                    for _ in 0..2 {
                        *socket.lock().unwrap() += 1;
                        io.set_readiness(Ready::READABLE);
                        io.wake(Ready::READABLE);
                    }
                })
            };
            let other = {
                let (io, socket) = (io.clone(), socket.clone());
                thread::spawn(move || {
                    let token = Arc::new(Token::new());
                    let (mut got, mut kept) = (0, false);
                    block_on(&token, |cx| {
                        poll_read(&io, &socket, cx, &mut got, 1, &mut kept)
                    })
                })
            };
            let token = Arc::new(Token::new());
            let (mut got, mut kept) = (0, false);
            let parks = block_on(&token, |cx| {
                poll_read(&io, &socket, cx, &mut got, 1, &mut kept)
            });
            let other_parks = other.join().unwrap();
            driver.join().unwrap();
            assert_eq!(got, 1);
            assert_eq!(*socket.lock().unwrap(), 0, "both units read");
            if parks > 0 && other_parks > 0 {
                cases.hit("both readers waited");
            }
            if parks == 0 || other_parks == 0 {
                cases.hit("a reader read without waiting");
            }
        }
    });
    cases.assert_all_reached();
}
