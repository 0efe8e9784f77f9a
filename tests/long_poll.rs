//! Nothing waits behind a long poll (DESIGN.md 16; `src/sched/README.md`, "Long
//! polls"): the tasks of a poller batch kept private on the worker that
//! polled it start on another worker while that worker is in a long poll,
//! and a task that yields over and over does not starve its worker's
//! private batch (sockets, timers, signals); a timer on the wheel of a
//! worker in a long poll fires on time.
//!
//! Each round makes nine sockets readable while every worker is busy, so
//! that one poller turn returns all nine events as one batch: the last one
//! written, whose task computes for [`LONG_POLL`] without yielding, lands
//! in the polling worker's LIFO slot and runs first; the eight cheap tasks
//! wait in its private batch queue. The rounds are [`PAUSE`] apart, long
//! enough for the watchers' tick to back off between them (to 16 ms),
//! short enough that they keep watching.
//!
//! In the first round a watcher finds the batch: at most `migration_cost`
//! plus two backed-off ticks (33 ms; [`FIRST_BOUND`] with room for the
//! hog), and its second look sees the owner's poll count unchanged while
//! the owner ran: a long poll ([`LONG_POLL_NS`]), which makes the slow
//! task a hog. From the second round on, the owner makes its batch
//! stealable before each of the hog's polls and a parked worker takes it
//! at once: a wake-up ([`BOUND`], with room for the hog; 0.05-0.3 ms
//! measured on a quiet machine, against 32-33 ms every round before).
//!
//! [`LONG_POLL_NS`]: hwsched::sched::watch::LONG_POLL_NS

#![cfg(feature = "io")]

mod common;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{with_timeout_alone, BIG};
use hwsched::net::{TcpListener, TcpStream};
use hwsched::topology::TopologySource;
use hwsched::{Builder, Runtime};

/// How long the slow task's poll computes.
const LONG_POLL: Duration = Duration::from_millis(50);
/// Cheap tasks per round.
const CHEAP: usize = 8;
/// Rounds per test.
const ROUNDS: usize = 12;
/// The quiet time between rounds.
const PAUSE: Duration = Duration::from_millis(12);
/// The bound a cheap task's start may lag the slow task's once the slow
/// task is a hog: a wake-up of a parked worker, with room for the CPU hog
/// of `scripts/under-hog.sh` delaying its thread.
const BOUND: Duration = Duration::from_millis(12);
/// The bound in the first round: `migration_cost` plus two ticks backed
/// off to 16 ms (32.5 ms), with room for the CPU hog, and below the 50 ms
/// poll: nothing waits for the whole long poll.
const FIRST_BOUND: Duration = Duration::from_millis(45);

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// One server task per connection: reads a byte, records when its poll
/// began, computes for [`LONG_POLL`] if it is the slow one, answers.
async fn serve(mut s: TcpStream, slow: bool, starts: Arc<Mutex<Vec<(bool, Instant)>>>) {
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    let mut b = [0u8; 1];
    while let Ok(1) = s.read(&mut b).await {
        starts.lock().unwrap().push((slow, Instant::now()));
        if slow {
            spin(LONG_POLL);
        }
        if s.write_all(&b).await.is_err() {
            return;
        }
    }
}

fn rounds(rt: Runtime) {
    let workers = rt.workers();
    let starts = Arc::new(Mutex::new(Vec::new()));
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().unwrap();
    let mut clients = Vec::new();
    for i in 0..=CHEAP {
        let c = std::net::TcpStream::connect(addr).unwrap();
        c.set_nodelay(true).unwrap();
        let (s, _) = rt.block_on(listener.accept()).unwrap();
        rt.spawn(serve(s, i == CHEAP, starts.clone()));
        clients.push(c);
    }
    let mut first = Duration::ZERO;
    let mut worst = Duration::ZERO;
    for round in 0..ROUNDS {
        std::thread::sleep(PAUSE);
        starts.lock().unwrap().clear();
        // Every worker busy while the nine sockets become readable: the
        // next poller turn returns them together.
        let busy = Arc::new(AtomicUsize::new(0));
        let written = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..workers)
            .map(|_| {
                let (busy, written) = (busy.clone(), written.clone());
                rt.spawn(async move {
                    busy.fetch_add(1, Ordering::SeqCst);
                    let t = Instant::now();
                    while !written.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(2) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let t = Instant::now();
        while busy.load(Ordering::SeqCst) < workers && t.elapsed() < Duration::from_secs(2) {
            std::thread::yield_now();
        }
        for c in clients.iter_mut() {
            c.write_all(&[round as u8]).unwrap();
        }
        std::thread::sleep(Duration::from_millis(1));
        written.store(true, Ordering::SeqCst);
        for s in spinners {
            rt.block_on(s).unwrap();
        }
        for c in clients.iter_mut() {
            let mut b = [0u8; 1];
            c.read_exact(&mut b).unwrap();
        }
        let starts = starts.lock().unwrap().clone();
        assert_eq!(starts.len(), CHEAP + 1, "every task ran once");
        let slow = starts.iter().find(|(s, _)| *s).unwrap().1;
        let mut lag = Vec::new();
        for &(_, at) in starts.iter().filter(|(s, _)| !*s) {
            let l = at.saturating_duration_since(slow);
            lag.push(l);
            if round == 0 {
                first = first.max(l);
            } else {
                worst = worst.max(l);
            }
        }
        if std::env::var_os("LONG_POLL_DEBUG").is_some() {
            eprintln!("round {round}: {lag:?}");
        }
    }
    let stats = rt.stats();
    assert!(
        first < FIRST_BOUND,
        "first round: a cheap task started {first:?} after the long poll began \
         (bound {FIRST_BOUND:?}):\n{stats}"
    );
    assert!(
        worst < BOUND,
        "later rounds: a cheap task started {worst:?} after the hog's poll began \
         (bound {BOUND:?}):\n{stats}"
    );
    eprintln!("worst start behind the long poll: first round {first:?}, then {worst:?}");
}

fn two_workers() -> Runtime {
    Builder::new().worker_threads(2).build().unwrap()
}

#[test]
fn a_private_batch_starts_elsewhere_while_its_worker_is_in_a_long_poll() {
    with_timeout_alone(60, "long_poll_2w", || rounds(two_workers()));
}

#[test]
fn a_private_batch_starts_elsewhere_on_the_32_worker_topology() {
    with_timeout_alone(60, "long_poll_32w", || {
        rounds(
            Builder::new()
                .topology(TopologySource::Synthetic(BIG.into()))
                .build()
                .unwrap(),
        )
    });
}

/// How long the yield-loop test's sockets may wait for their tasks: a
/// worker running a `yield_now` loop looks at the poller every
/// `EVENT_INTERVAL` polls (well under a millisecond of yields), and its
/// next yield puts the private batch ahead of the yielder; the rest is
/// room for the CPU hog.
const YIELD_BOUND: Duration = Duration::from_millis(100);

/// Ten sockets made readable at once while every worker runs a task that
/// loops on `yield_now`: every socket's task runs within [`YIELD_BOUND`]
/// (a yielder refilled the deque, which its worker takes before the private
/// batch, and the batch waited for the loops to end).
#[test]
fn a_yield_loop_does_not_starve_a_private_batch() {
    with_timeout_alone(60, "yield_loop_batch", || {
        let rt = two_workers();
        let workers = rt.workers();
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let started = Arc::new(Mutex::new(Vec::new()));
        let mut clients = Vec::new();
        for _ in 0..10 {
            let c = std::net::TcpStream::connect(addr).unwrap();
            let (mut s, _) = rt.block_on(listener.accept()).unwrap();
            let started = started.clone();
            rt.spawn(async move {
                use futures_lite::AsyncReadExt;
                let mut b = [0u8; 1];
                if let Ok(1) = s.read(&mut b).await {
                    started.lock().unwrap().push(Instant::now());
                }
            });
            clients.push(c);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let running = Arc::new(AtomicUsize::new(0));
        let loops: Vec<_> = (0..workers)
            .map(|_| {
                let (stop, running) = (stop.clone(), running.clone());
                rt.spawn(async move {
                    running.fetch_add(1, Ordering::SeqCst);
                    let t = Instant::now();
                    while !stop.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(5) {
                        hwsched::yield_now().await;
                    }
                })
            })
            .collect();
        while running.load(Ordering::SeqCst) < workers {
            std::thread::yield_now();
        }
        let t0 = Instant::now();
        for c in clients.iter_mut() {
            c.write_all(b"x").unwrap();
        }
        while started.lock().unwrap().len() < 10 && t0.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::SeqCst);
        for l in loops {
            rt.block_on(l).unwrap();
        }
        let started = started.lock().unwrap().clone();
        let late = started
            .iter()
            .map(|t| t.saturating_duration_since(t0))
            .max()
            .unwrap_or(Duration::MAX);
        assert!(
            started.len() == 10 && late < YIELD_BOUND,
            "{} of 10 socket tasks ran, the last {late:?} after the writes (bound {YIELD_BOUND:?}):\n{}",
            started.len(),
            rt.stats()
        );
    });
}

/// Runs `f` while every worker of `rt` runs a task looping on
/// `yield_now` (for at most 5 s), then ends the loops.
fn with_yield_loops<R>(rt: &Runtime, f: impl FnOnce() -> R) -> R {
    let workers = rt.workers();
    let stop = Arc::new(AtomicBool::new(false));
    let running = Arc::new(AtomicUsize::new(0));
    let loops: Vec<_> = (0..workers)
        .map(|_| {
            let (stop, running) = (stop.clone(), running.clone());
            rt.spawn(async move {
                running.fetch_add(1, Ordering::SeqCst);
                let t = Instant::now();
                while !stop.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(5) {
                    hwsched::yield_now().await;
                }
            })
        })
        .collect();
    while running.load(Ordering::SeqCst) < workers {
        std::thread::yield_now();
    }
    let r = f();
    stop.store(true, Ordering::SeqCst);
    for l in loops {
        rt.block_on(l).unwrap();
    }
    r
}

/// Waits until `started` holds `n` instants or 3 s passed; returns them.
fn wait_for(started: &Mutex<Vec<Instant>>, n: usize) -> Vec<Instant> {
    let t0 = Instant::now();
    while started.lock().unwrap().len() < n && t0.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(1));
    }
    started.lock().unwrap().clone()
}

/// Ten timers of one deadline, set before every worker starts a
/// `yield_now` loop: all ten tasks run within [`YIELD_BOUND`] of the
/// deadline (a yielding worker fires due timers at its look every
/// `EVENT_INTERVAL` polls, its own wheel's and every other's).
#[test]
fn ten_timers_of_one_deadline_run_beside_yield_loops() {
    with_timeout_alone(60, "yield_loop_timers", || {
        let rt = common::drive_reactor(two_workers());
        let started = Arc::new(Mutex::new(Vec::new()));
        let armed = Arc::new(AtomicUsize::new(0));
        let deadline = Instant::now() + Duration::from_millis(100);
        for _ in 0..10 {
            let (started, armed) = (started.clone(), armed.clone());
            rt.spawn(async move {
                let sleep = hwsched::time::sleep_until(deadline);
                armed.fetch_add(1, Ordering::SeqCst);
                sleep.await;
                started.lock().unwrap().push(Instant::now());
            });
        }
        while armed.load(Ordering::SeqCst) < 10 {
            std::thread::yield_now();
        }
        let started = with_yield_loops(&rt, || wait_for(&started, 10));
        let late = started
            .iter()
            .map(|t| t.saturating_duration_since(deadline))
            .max()
            .unwrap_or(Duration::MAX);
        assert!(
            started.len() == 10 && late < YIELD_BOUND,
            "{} of 10 timer tasks ran, the last {late:?} after the deadline (bound {YIELD_BOUND:?}):\n{}",
            started.len(),
            rt.stats()
        );
    });
}

/// Two listeners of one signal, the signal raised while every worker runs
/// a `yield_now` loop: both tasks run within [`YIELD_BOUND`] of the raise.
#[test]
fn two_signal_listeners_run_beside_yield_loops() {
    use hwsched::signal::{signal, SignalKind};
    with_timeout_alone(60, "yield_loop_signals", || {
        let rt = common::drive_reactor(two_workers());
        let started = Arc::new(Mutex::new(Vec::new()));
        let mut listening = Vec::new();
        for _ in 0..2 {
            let mut sig = rt
                .block_on(async { signal(SignalKind::user_defined2()) })
                .expect("a SIGUSR2 listener");
            let started = started.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            rt.spawn(async move {
                let recv = sig.recv();
                tx.send(()).unwrap();
                if recv.await.is_some() {
                    started.lock().unwrap().push(Instant::now());
                }
            });
            listening.push(rx);
        }
        for rx in listening {
            rx.recv().unwrap();
        }
        let (started, t0) = with_yield_loops(&rt, || {
            let t0 = Instant::now();
            // SAFETY: kill(2) on this process; the listeners above
            // installed hwsched's handler for SIGUSR2.
            let r = unsafe { libc::kill(libc::getpid(), libc::SIGUSR2) };
            assert_eq!(r, 0, "kill: {}", std::io::Error::last_os_error());
            (wait_for(&started, 2), t0)
        });
        let late = started
            .iter()
            .map(|t| t.saturating_duration_since(t0))
            .max()
            .unwrap_or(Duration::MAX);
        assert!(
            started.len() == 2 && late < YIELD_BOUND,
            "{} of 2 signal listeners ran, the last {late:?} after the signal (bound {YIELD_BOUND:?}):\n{}",
            started.len(),
            rt.stats()
        );
    });
}

/// How late a timer may fire while a worker is in a long poll: the worker
/// sleeping in poller 0 sleeps until the earliest timer of every wheel and
/// fires the busy worker's (or a worker is called to sleep there: a wake),
/// so the bound is the millisecond rounding of deadlines, a wake or two,
/// with room for the CPU hog; far below the long polls (60 and 300 ms),
/// which a timer waited for before.
const TIMER_BOUND: Duration = Duration::from_millis(25);

/// Starts `rounds` tasks on `rt`, each (spawned by `spawn`) sleeping
/// 5 ms after pinning a task that computes for 60 ms without yielding
/// to its own worker: the sleep's timer is on the wheel of the worker that
/// runs it, which is in that long poll when the timer comes due. Returns
/// how late each sleep ended.
fn sleeps_behind_a_long_poll(
    rt: &Runtime,
    rounds: usize,
    spawn: impl Fn(
        &Runtime,
        std::pin::Pin<Box<dyn std::future::Future<Output = Duration> + Send>>,
    ) -> hwsched::JoinHandle<Duration>,
) -> Vec<Duration> {
    (0..rounds)
        .map(|_| {
            let h = spawn(
                rt,
                Box::pin(async {
                    let me = hwsched::worker_index().expect("on a worker");
                    // Queued on this worker, run once this task waits.
                    let busy = hwsched::spawn_on(hwsched::Place::Worker(me), async {
                        spin(Duration::from_millis(60));
                    })
                    .unwrap();
                    let t = Instant::now();
                    // Registered on this worker's wheel by this poll.
                    hwsched::time::sleep(Duration::from_millis(5)).await;
                    let late = t.elapsed().saturating_sub(Duration::from_millis(5));
                    busy.await.unwrap();
                    late
                }),
            );
            rt.block_on(h).unwrap()
        })
        .collect()
}

/// A 5 ms sleep whose timer is on a worker that then computes for 60 ms
/// without yielding: it ends within [`TIMER_BOUND`] of its deadline (the
/// worker in poller 0 fires it and runs its task), not when the long poll
/// ends.
#[test]
fn a_timer_of_a_worker_in_a_long_poll_fires_elsewhere() {
    with_timeout_alone(60, "worker_timer_long_poll", || {
        let rt = common::drive_reactor(two_workers());
        let late = sleeps_behind_a_long_poll(&rt, 10, |rt, f| rt.spawn(f));
        let worst = late.iter().max().unwrap();
        assert!(
            *worst < TIMER_BOUND,
            "sleeps ended {late:?} late (bound {TIMER_BOUND:?}):\n{}",
            rt.stats()
        );
    });
}

/// The same for a task placed on an LLC of the 32-worker topology: its
/// sleep ends within [`TIMER_BOUND`] while the worker whose wheel holds
/// it is in a long poll, and its task runs in its place.
#[test]
fn a_timer_of_a_placed_task_fires_while_its_worker_is_in_a_long_poll() {
    with_timeout_alone(60, "placed_timer_long_poll", || {
        let rt = common::drive_reactor(
            Builder::new()
                .topology(TopologySource::Synthetic(BIG.into()))
                .build()
                .unwrap(),
        );
        let late = sleeps_behind_a_long_poll(&rt, 10, |rt, f| {
            rt.spawn_on(hwsched::Place::Llc(1), async move {
                let late = f.await;
                let llc = rt_llc_of_current();
                assert_eq!(llc, Some(1), "the placed task left its LLC");
                late
            })
            .unwrap()
        });
        let worst = late.iter().max().unwrap();
        assert!(
            *worst < TIMER_BOUND,
            "sleeps ended {late:?} late (bound {TIMER_BOUND:?}):\n{}",
            rt.stats()
        );
    });
}

/// The LLC of the worker running the caller.
fn rt_llc_of_current() -> Option<usize> {
    hwsched::current_place().map(|p| p.llc)
}

/// A 20 ms sleep of `block_on`'s thread while one of two workers computes
/// for 300 ms without yielding: it ends within [`TIMER_BOUND`] of its
/// deadline, whichever worker holds the poller.
#[test]
fn a_block_on_timer_fires_while_a_worker_is_in_a_long_poll() {
    with_timeout_alone(60, "block_on_timer_long_poll", || {
        let rt = common::drive_reactor(two_workers());
        for round in 0..6 {
            let started = Arc::new(AtomicBool::new(false));
            let s = started.clone();
            let busy = rt.spawn(async move {
                s.store(true, Ordering::SeqCst);
                spin(Duration::from_millis(300));
            });
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            let t = Instant::now();
            rt.block_on(hwsched::time::sleep(Duration::from_millis(20)));
            let late = t.elapsed().saturating_sub(Duration::from_millis(20));
            rt.block_on(busy).unwrap();
            assert!(
                late < TIMER_BOUND,
                "round {round}: the sleep ended {late:?} late:\n{}",
                rt.stats()
            );
        }
    });
}

/// Counts its drops (a task's future owns one).
struct Probe(Arc<AtomicUsize>);

impl Drop for Probe {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// One worker; ten sockets made readable while it runs a blocking task,
/// so that its next poller turn returns the ten readiness edges together:
/// one task in its LIFO slot, the rest in its private batch (no other
/// worker to watch it). The first task to run stays in its poll while the
/// runtime shuts down. When the shutdown returns, every socket task's
/// future has been dropped, none polled after the flag: the worker's exit
/// drops its private batch too, not only its LIFO slot and deque.
#[test]
fn a_shutdown_while_a_private_batch_holds_tasks_drops_them() {
    with_timeout_alone(60, "shutdown_private_batch", || {
        let rt = Builder::new().worker_threads(1).build().unwrap();
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let dropped = Arc::new(AtomicUsize::new(0));
        let ran = Arc::new(AtomicUsize::new(0));
        let (first_tx, first_rx) = std::sync::mpsc::channel::<()>();
        let first_tx = Arc::new(Mutex::new(Some(first_tx)));
        let mut clients = Vec::new();
        for _ in 0..10 {
            let c = std::net::TcpStream::connect(addr).unwrap();
            let (mut s, _) = rt.block_on(listener.accept()).unwrap();
            let probe = Probe(dropped.clone());
            let (ran, first_tx) = (ran.clone(), first_tx.clone());
            rt.spawn(async move {
                use futures_lite::AsyncReadExt;
                let _probe = probe;
                let mut b = [0u8; 1];
                if let Ok(1) = s.read(&mut b).await {
                    ran.fetch_add(1, Ordering::SeqCst);
                    if let Some(tx) = first_tx.lock().unwrap().take() {
                        let _ = tx.send(());
                        // Stays in its poll while the runtime shuts down.
                        std::thread::sleep(Duration::from_millis(300));
                    }
                }
            });
            clients.push(c);
        }
        // The worker blocked in a task while the ten sockets become
        // readable: its next poller turn returns them together.
        let written = Arc::new(AtomicBool::new(false));
        let blocker = {
            let written = written.clone();
            rt.spawn(async move {
                let t = Instant::now();
                while !written.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(5) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        };
        // Let the blocker start and every socket task wait on its read.
        std::thread::sleep(Duration::from_millis(50));
        for c in clients.iter_mut() {
            c.write_all(b"x").unwrap();
        }
        written.store(true, Ordering::SeqCst);
        first_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("no socket task ran");
        drop(blocker);
        let stats = rt.stats().to_string();
        assert!(rt.shutdown_timeout(Duration::from_secs(10)), "joined");
        let (ran, dropped) = (ran.load(Ordering::SeqCst), dropped.load(Ordering::SeqCst));
        assert_eq!(
            (ran, dropped),
            (1, 10),
            "after the shutdown: socket tasks run, and futures dropped (the worker's exit \
             keeps its private batch?):\n{stats}"
        );
    });
}
