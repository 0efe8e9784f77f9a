//! The readiness cache (`src/io/scheduled_io.rs`) beyond `driver.rs`'s two
//! models of `poll_ready`: the futures of `readable()` / `ready()`, which
//! wait through `ScheduledIo::poll_interest` in keyed slots of their own
//! (one future, and two sharing a registration), racing the driver's set
//! and wake; and a clear after the tick wrapped. Under `cfg(loom)` the
//! tick has `TICK_BITS = 2` bits (15 in the runtime), so a model wraps it
//! in a few sets; the comparison is the runtime's.
//!
//! A task here is a read loop over a mock socket (a count of units behind
//! a loom mutex, the kernel's own locking): wait for readiness, read until
//! the socket is empty (`WouldBlock`), clear the readiness that read saw,
//! wait again. A lost wakeup leaves the task waiting with data in the
//! socket: loom reports the deadlock.
//!
//! # Mutations
//!
//! Logic mutations each model catches are listed in `loom-tests/README.md`
//! ("Logic mutations").

#![cfg(loom)]

use std::task::{Context, Poll, Wake, Waker};

use hwsched::io::scheduled_io::{Direction, ReadyEvent, ScheduledIo, TICK_BITS};
use hwsched::io::Ready;
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use loom_tests::{model, Cases};

/// A thread's park token (`std::thread::park` semantics, as in
/// `driver.rs`: loom's own `thread::park` is avoided, README).
struct Token {
    set: Mutex<bool>,
    cv: Condvar,
}

impl Token {
    fn new() -> Self {
        Token {
            set: Mutex::new(false),
            cv: Condvar::new(),
        }
    }
    fn unpark(&self) {
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

/// A `block_on` over a token: polls `f` until `Ready`, parking between.
/// Returns how many times it parked.
fn block_on(mut f: impl FnMut(&mut Context<'_>) -> Poll<()>) -> usize {
    let token = Arc::new(Token::new());
    let waker = Waker::from(std::sync::Arc::new(Unpark(token.clone())));
    let mut cx = Context::from_waker(&waker);
    let mut parks = 0;
    while f(&mut cx).is_pending() {
        token.park();
        parks += 1;
    }
    parks
}

/// The driver: `edges` times, one unit of data into the socket, then the
/// edge (`set_readiness`, then `wake`, as `io/driver.rs` dispatches).
fn driver(
    io: &Arc<ScheduledIo>,
    socket: &Arc<Mutex<usize>>,
    edges: usize,
) -> thread::JoinHandle<()> {
    let (io, socket) = (io.clone(), socket.clone());
    thread::spawn(move || {
        for _ in 0..edges {
            *socket.lock().unwrap() += 1;
            io.set_readiness(Ready::READABLE);
            io.wake(Ready::READABLE);
        }
    })
}

/// What a read loop saw.
#[derive(Default)]
struct Read {
    got: usize,
    /// A clear was followed by a readiness the loop found without waiting
    /// (the clear gave up: a newer edge moved the tick).
    newer_edge_kept: bool,
}

/// One poll of a `readable()`-style read loop through `poll_interest`,
/// with its waiter slot `key` (freed when the loop is done, as the
/// future's drop does): reads until it has `want` units.
fn poll_readable(
    io: &ScheduledIo,
    socket: &Mutex<usize>,
    cx: &mut Context<'_>,
    key: &mut Option<usize>,
    r: &mut Read,
    want: usize,
) -> Poll<()> {
    let mut cleared = false;
    loop {
        let ev: ReadyEvent = match io.poll_interest(cx, Ready::READABLE, key) {
            Poll::Ready(ev) => ev,
            Poll::Pending => return Poll::Pending,
        };
        if cleared {
            r.newer_edge_kept = true;
        }
        loop {
            // The syscall: the socket's own lock is the kernel's.
            let mut buf = socket.lock().unwrap();
            if *buf == 0 {
                break;
            }
            *buf -= 1;
            drop(buf);
            r.got += 1;
            if r.got == want {
                if let Some(k) = key.take() {
                    io.drop_waiter(k);
                }
                return Poll::Ready(());
            }
        }
        // WouldBlock: clear what this read saw.
        io.clear_readiness(ev);
        cleared = true;
    }
}

/// A `readable()` future's read loop against the driver delivering two
/// edges, each after one unit of data: the future's first load, its
/// registration in its keyed slot and its re-read under the waiters lock
/// race the driver's set and its take of the wakers. The task reads both
/// units and never waits forever.
#[test]
fn a_readable_future_races_the_drivers_set() {
    let cases = Cases::new(&[
        "the task waited and the driver's wake woke it",
        "read both without waiting",
        "a newer edge outlived a clear",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let io = Arc::new(ScheduledIo::new());
            let socket = Arc::new(Mutex::new(0usize));
            let d = driver(&io, &socket, 2);
            let (mut key, mut r) = (None, Read::default());
            let parks = block_on(|cx| poll_readable(&io, &socket, cx, &mut key, &mut r, 2));
            d.join().unwrap();
            assert_eq!(r.got, 2);
            cases.hit(if parks > 0 {
                "the task waited and the driver's wake woke it"
            } else {
                "read both without waiting"
            });
            if r.newer_edge_kept {
                cases.hit("a newer edge outlived a clear");
            }
        }
    });
    cases.assert_all_reached();
}

/// Two `readable()` futures on one registration (two tasks awaiting
/// `readable()` on one socket), each with its own keyed slot, against the
/// driver delivering two edges, each after one unit: each reads one unit,
/// and neither waits forever. Every future whose interest an edge
/// concerns must be woken (its slot, not only the first).
#[test]
fn two_readable_futures_of_one_registration_are_both_woken() {
    let cases = Cases::new(&["both futures waited", "a future read without waiting"]);
    model({
        let cases = cases.clone();
        move || {
            let io = Arc::new(ScheduledIo::new());
            let socket = Arc::new(Mutex::new(0usize));
            let d = driver(&io, &socket, 2);
            let other = {
                let (io, socket) = (io.clone(), socket.clone());
                thread::spawn(move || {
                    let (mut key, mut r) = (None, Read::default());
                    block_on(|cx| poll_readable(&io, &socket, cx, &mut key, &mut r, 1))
                })
            };
            let (mut key, mut r) = (None, Read::default());
            let parks = block_on(|cx| poll_readable(&io, &socket, cx, &mut key, &mut r, 1));
            let other_parks = other.join().unwrap();
            d.join().unwrap();
            if parks > 0 && other_parks > 0 {
                cases.hit("both futures waited");
            }
            if parks == 0 || other_parks == 0 {
                cases.hit("a future read without waiting");
            }
        }
    });
    cases.assert_all_reached();
}

/// The tick wraps during a read loop: earlier edges (their data read
/// already) left the tick at its largest value with the readiness set.
/// The task's poll sees that stale readiness, its read finds the socket
/// empty, and it clears with the tick it saw; meanwhile the driver
/// delivers one edge (one unit), whose set wraps the tick to 0. A clear
/// after that set must give up (the tick moved), or the new readiness is
/// lost and the task waits forever with the unit in the socket.
#[test]
fn a_clear_after_the_tick_wrapped_keeps_the_new_readiness() {
    let cases = Cases::new(&[
        "the edge wrapped the tick between the read and its clear",
        "the task waited and the driver's wake woke it",
    ]);
    model({
        let cases = cases.clone();
        move || {
            let io = Arc::new(ScheduledIo::new());
            let max = (1u16 << TICK_BITS) - 1;
            // The earlier edges: the tick at its largest, readiness set.
            for _ in 0..max {
                io.set_readiness(Ready::READABLE);
            }
            let socket = Arc::new(Mutex::new(0usize));
            // Bookkeeping outside loom's view (as `Ledger`): set once the
            // driver's set returned.
            let set = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let d = {
                let (io, socket, set) = (io.clone(), socket.clone(), set.clone());
                thread::spawn(move || {
                    *socket.lock().unwrap() += 1;
                    io.set_readiness(Ready::READABLE);
                    set.store(true, std::sync::atomic::Ordering::SeqCst);
                    io.wake(Ready::READABLE);
                })
            };
            let mut wrapped = false;
            // A read loop through `poll_ready` (the `AsyncRead` path).
            let parks = block_on(|cx| loop {
                let ev = match io.poll_ready(cx, Direction::Read) {
                    Poll::Ready(ev) => ev,
                    Poll::Pending => return Poll::Pending,
                };
                let mut buf = socket.lock().unwrap();
                if *buf > 0 {
                    *buf -= 1;
                    return Poll::Ready(());
                }
                drop(buf);
                io.clear_readiness(ev);
                // Read after the clear (loom runs one thread at a time and
                // switches only at its own operations, so this shows
                // whether the driver's set ran before the clear ended).
                if ev.tick() == max && set.load(std::sync::atomic::Ordering::SeqCst) {
                    wrapped = true;
                }
            });
            d.join().unwrap();
            assert_eq!(*socket.lock().unwrap(), 0, "the unit was read");
            if wrapped {
                cases.hit("the edge wrapped the tick between the read and its clear");
            }
            if parks > 0 {
                cases.hit("the task waited and the driver's wake woke it");
            }
        }
    });
    cases.assert_all_reached();
}
