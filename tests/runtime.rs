//! Integration tests of the executor core: spawning (inside and outside),
//! ping-pong, the 32-worker synthetic topology, abort, detach, panics,
//! misuse messages, destructors at shutdown, wakes after shutdown, a wake
//! stress and stats consistency.
//!
//! Every test body runs under [`with_timeout`], so a hang fails the test
//! with a message instead of stalling the suite.

use std::future::Future;
use std::panic::catch_unwind;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use hwsched::{JoinError, JoinHandle, Runtime, TopologySource};

mod common;
use common::{with_timeout, BIG};

fn system(workers: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .build()
        .expect("build System runtime")
}

fn big() -> Runtime {
    let rt = Runtime::builder()
        .topology(TopologySource::Synthetic(BIG.into()))
        .build()
        .expect("build 32-worker synthetic runtime");
    assert_eq!(rt.workers(), 32);
    rt
}

/// The default runtime on this machine (one worker per allowed PU).
fn default_rt() -> Runtime {
    Runtime::builder().build().expect("build default runtime")
}

/// A waker that does nothing (`Waker::noop` is newer than the crate's MSRV).
struct Noop;
impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Polls `f` once with a no-op waker.
fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    let waker = Waker::from(Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    Pin::new(f).poll(&mut cx)
}

/// The output of a handle whose task is known to be finished.
fn ready<T>(mut h: JoinHandle<T>) -> Result<T, JoinError> {
    match poll_once(&mut h) {
        Poll::Ready(r) => r,
        Poll::Pending => panic!("JoinHandle of a finished or dropped task is still pending"),
    }
}

/// The panic message of a payload (`&str` or `String`).
fn payload_str(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string payload>".to_owned()
    }
}

/// Drop bookkeeping for many tasks: how many futures were dropped, and
/// whether any was dropped twice.
struct Book {
    dropped: Vec<AtomicBool>,
    drops: AtomicUsize,
    double: AtomicUsize,
}

impl Book {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Book {
            dropped: (0..n).map(|_| AtomicBool::new(false)).collect(),
            drops: AtomicUsize::new(0),
            double: AtomicUsize::new(0),
        })
    }

    fn guard(self: &Arc<Self>, id: usize) -> DropGuard {
        DropGuard {
            book: self.clone(),
            id,
        }
    }

    fn check_all_once(&self, what: &str) {
        assert_eq!(self.double.load(Ordering::SeqCst), 0, "{what}: double drop");
        assert_eq!(
            self.drops.load(Ordering::SeqCst),
            self.dropped.len(),
            "{what}: not every future was dropped"
        );
        let missing: Vec<usize> = self
            .dropped
            .iter()
            .enumerate()
            .filter(|(_, d)| !d.load(Ordering::SeqCst))
            .map(|(i, _)| i)
            .take(10)
            .collect();
        assert!(missing.is_empty(), "{what}: never dropped: {missing:?}");
    }
}

/// Moved into a task's future: records its drop (exactly once).
struct DropGuard {
    book: Arc<Book>,
    id: usize,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if self.book.dropped[self.id].swap(true, Ordering::SeqCst) {
            self.book.double.fetch_add(1, Ordering::SeqCst);
        }
        self.book.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// A tiny xorshift generator (no extra dependency).
struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

// ---------------------------------------------------------------------------
// Spawning many tasks
// ---------------------------------------------------------------------------

/// `total` tiny tasks spawned from inside the runtime by `spawners` tasks,
/// each awaiting its own handles.
fn spawn_inside(rt: &Runtime, total: usize, spawners: usize) {
    let count = Arc::new(AtomicUsize::new(0));
    let per = total / spawners;
    let c = count.clone();
    let sum = rt.block_on(async move {
        let outer: Vec<_> = (0..spawners)
            .map(|_| {
                let c = c.clone();
                hwsched::spawn(async move {
                    let hs: Vec<_> = (0..per)
                        .map(|i| {
                            let c = c.clone();
                            hwsched::spawn(async move {
                                c.fetch_add(1, Ordering::Relaxed);
                                i as u64
                            })
                        })
                        .collect();
                    let mut s = 0u64;
                    for h in hs {
                        s += h.await.expect("tiny task failed");
                    }
                    s
                })
            })
            .collect();
        let mut s = 0u64;
        for h in outer {
            s += h.await.expect("spawner task failed");
        }
        s
    });
    let per64 = per as u64;
    assert_eq!(count.load(Ordering::SeqCst), per * spawners);
    assert_eq!(sum, spawners as u64 * (per64 * (per64 - 1) / 2));
}

/// `total` tiny tasks spawned with `Runtime::spawn` from `threads` outside
/// std threads; all handles are awaited.
fn spawn_outside(rt: &Runtime, total: usize, threads: usize) {
    let count = Arc::new(AtomicUsize::new(0));
    let per = total / threads;
    let handles: Vec<JoinHandle<usize>> = thread::scope(|s| {
        let joins: Vec<_> = (0..threads)
            .map(|_| {
                let count = count.clone();
                s.spawn(move || {
                    (0..per)
                        .map(|i| {
                            let c = count.clone();
                            rt.spawn(async move {
                                c.fetch_add(1, Ordering::Relaxed);
                                i
                            })
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        joins
            .into_iter()
            .flat_map(|j| j.join().expect("outside spawner thread panicked"))
            .collect()
    });
    assert_eq!(handles.len(), per * threads);
    let sum = rt.block_on(async move {
        let mut s = 0usize;
        for h in handles {
            s += h.await.expect("outside-spawned task failed");
        }
        s
    });
    assert_eq!(count.load(Ordering::SeqCst), per * threads);
    assert_eq!(sum, threads * (per * (per - 1) / 2));
}

#[test]
fn million_tasks_spawned_inside() {
    with_timeout(120, "million_tasks_spawned_inside", || {
        let rt = default_rt();
        spawn_inside(&rt, 1_000_000, 4);
    });
}

#[test]
fn hundred_thousand_tasks_spawned_outside() {
    with_timeout(60, "hundred_thousand_tasks_spawned_outside", || {
        let rt = default_rt();
        spawn_outside(&rt, 100_000, 2);
    });
}

#[test]
fn million_tasks_spawned_inside_32_workers() {
    with_timeout(120, "million_tasks_spawned_inside_32_workers", || {
        let rt = big();
        // 32 spawners: one per worker once the first ones are stolen.
        spawn_inside(&rt, 1_000_000, 32);
    });
}

#[test]
fn hundred_thousand_tasks_spawned_outside_32_workers() {
    with_timeout(
        60,
        "hundred_thousand_tasks_spawned_outside_32_workers",
        || {
            let rt = big();
            spawn_outside(&rt, 100_000, 4);
        },
    );
}

/// Ping-pong between two tasks over bounded(1) channels.
fn ping_pong(rt: &Runtime, rounds: u64) {
    let (to_b, from_a) = async_channel::bounded::<u64>(1);
    let (to_a, from_b) = async_channel::bounded::<u64>(1);
    let b = rt.spawn(async move {
        let mut n = 0u64;
        while let Ok(v) = from_a.recv().await {
            to_a.send(v + 1).await.expect("pong send");
            n += 1;
        }
        n
    });
    let a = rt.spawn(async move {
        let mut v = 0u64;
        for _ in 0..rounds {
            to_b.send(v).await.expect("ping send");
            v = from_b.recv().await.expect("ping recv");
        }
        v
    });
    let (va, nb) = rt.block_on(async move { (a.await.unwrap(), b.await.unwrap()) });
    assert_eq!(va, rounds);
    assert_eq!(nb, rounds);
}

#[test]
fn ping_pong_100k() {
    with_timeout(60, "ping_pong_100k", || {
        let rt = default_rt();
        ping_pong(&rt, 100_000);
    });
}

#[test]
fn ping_pong_100k_32_workers() {
    with_timeout(60, "ping_pong_100k_32_workers", || {
        let rt = big();
        ping_pong(&rt, 100_000);
    });
}

// ---------------------------------------------------------------------------
// JoinHandle: abort, detach, panics
// ---------------------------------------------------------------------------

#[test]
fn abort_pending_task_is_cancelled_and_dropped() {
    with_timeout(20, "abort_pending_task_is_cancelled_and_dropped", || {
        let rt = system(2);
        let book = Book::new(1);
        let started = Arc::new(AtomicBool::new(false));
        let g = book.guard(0);
        let s = started.clone();
        let h = rt.spawn(async move {
            let _g = g;
            s.store(true, Ordering::SeqCst);
            std::future::pending::<()>().await;
        });
        while !started.load(Ordering::SeqCst) {
            thread::yield_now();
        }
        assert!(!h.is_finished());
        h.abort();
        // Awaiting the aborted handle yields Cancelled.
        let r = rt.block_on(h);
        assert!(
            matches!(r, Err(JoinError::Cancelled)),
            "aborted pending task: {r:?}"
        );
        book.check_all_once("aborted pending task");

        // Abort before the task ever ran: also Cancelled, also dropped once.
        let book = Book::new(100);
        let hs: Vec<_> = (0..100)
            .map(|i| {
                let g = book.guard(i);
                let h = rt.spawn(async move {
                    let _g = g;
                    std::future::pending::<()>().await;
                });
                h.abort();
                h
            })
            .collect();
        for h in hs {
            let r = rt.block_on(h);
            assert!(r.is_err_and(|e| e.is_cancelled()));
        }
        book.check_all_once("tasks aborted at once");
    });
}

#[test]
fn abort_of_finished_task_keeps_output() {
    with_timeout(20, "abort_of_finished_task_keeps_output", || {
        let rt = system(2);
        let h = rt.spawn(async { 7u32 });
        while !h.is_finished() {
            thread::yield_now();
        }
        h.abort();
        h.abort();
        assert_eq!(rt.block_on(h).expect("finished task lost its output"), 7);
    });
}

#[test]
fn dropped_handle_detaches_task() {
    with_timeout(20, "dropped_handle_detaches_task", || {
        let rt = system(2);
        let (tx, rx) = mpsc::channel();
        let (go_tx, go_rx) = async_channel::bounded::<()>(1);
        // The task waits for a signal that comes after its handle is gone.
        let h = rt.spawn(async move {
            go_rx.recv().await.expect("go signal");
            tx.send(42u32).expect("report");
        });
        drop(h);
        go_tx.send_blocking(()).expect("send go");
        let v = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("detached task never ran to completion");
        assert_eq!(v, 42);
        // And from inside the runtime.
        let (tx, rx) = mpsc::channel();
        rt.block_on(async move {
            drop(hwsched::spawn(async move {
                hwsched::yield_now().await;
                tx.send(1u8).unwrap();
            }));
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 1);
    });
}

#[test]
fn panic_propagates_payload() {
    with_timeout(20, "panic_propagates_payload", || {
        let rt = system(2);
        let h = rt.spawn(async {
            panic!("boom from a task");
        });
        let err = rt.block_on(h).expect_err("a panicking task returned Ok");
        assert!(err.is_panic());
        assert!(!err.is_cancelled());
        let p = err.into_panic();
        assert_eq!(p.downcast_ref::<&str>(), Some(&"boom from a task"));

        // A formatted message arrives as a String.
        let h = rt.spawn(async {
            let n = 3;
            panic!("boom {n}");
        });
        match rt.block_on(h) {
            Err(JoinError::Panicked(p)) => assert_eq!(payload_str(&*p.into_inner()), "boom 3"),
            other => panic!("expected Panicked, got {other:?}"),
        }

        // The worker survives: later tasks still run.
        let v = rt.block_on(rt.spawn(async { 5 })).unwrap();
        assert_eq!(v, 5);
    });
}

#[test]
fn block_on_inside_worker_panics() {
    with_timeout(20, "block_on_inside_worker_panics", || {
        let rt1 = system(2);
        let rt2 = Arc::new(system(1));
        let inner = rt2.clone();
        let h = rt1.spawn(async move {
            inner.block_on(async { 1 });
        });
        let err = rt1
            .block_on(h)
            .expect_err("block_on inside a worker did not panic");
        let msg = payload_str(&*err.into_panic());
        assert!(
            msg.contains("called from a hwsched worker thread"),
            "unexpected message: {msg:?}"
        );
        // Also on a worker of the same runtime, from hwsched::spawn.
        let rt1 = Arc::new(rt1);
        let same = rt1.clone();
        let h = rt1.spawn(async move {
            same.block_on(async {});
        });
        let err = rt2.block_on(h).expect_err("block_on on own worker");
        assert!(payload_str(&*err.into_panic()).contains("called from a hwsched worker thread"));
        // rt2 is still usable from a non-worker thread.
        assert_eq!(rt2.block_on(async { 3 }), 3);
    });
}

#[test]
fn spawn_outside_context_panics() {
    with_timeout(20, "spawn_outside_context_panics", || {
        let r = catch_unwind(|| {
            drop(hwsched::spawn(async {}));
        });
        let p = r.expect_err("hwsched::spawn outside a runtime did not panic");
        let msg = payload_str(&*p);
        assert!(
            msg.contains("outside a hwsched runtime"),
            "unexpected message: {msg:?}"
        );
        // After a block_on returns, the context is gone again.
        let rt = system(1);
        rt.block_on(async {
            hwsched::spawn(async {}).await.unwrap();
        });
        let r = catch_unwind(|| drop(hwsched::spawn(async {})));
        assert!(r.is_err(), "context leaked out of block_on");
    });
}

// ---------------------------------------------------------------------------
// Shutdown and destructors
// ---------------------------------------------------------------------------

#[test]
fn shutdown_drops_every_task_exactly_once() {
    with_timeout(60, "shutdown_drops_every_task_exactly_once", || {
        const N: usize = 10_000;
        // One worker, so the queued half really is queued behind the blocker.
        let rt = system(1);
        let book = Book::new(N);
        let polled = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::with_capacity(N);
        // Half: polled once, then pending forever on a future no one wakes.
        for i in 0..N / 2 {
            let g = book.guard(i);
            let p = polled.clone();
            handles.push(rt.spawn(async move {
                let _g = g;
                p.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await;
            }));
        }
        let t0 = Instant::now();
        while polled.load(Ordering::SeqCst) < N / 2 {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "pending half never polled"
            );
            thread::sleep(Duration::from_millis(1));
        }
        // The blocker occupies the only worker.
        let blocking = Arc::new(AtomicBool::new(false));
        let b = blocking.clone();
        let blocker = rt.spawn(async move {
            b.store(true, Ordering::SeqCst);
            thread::sleep(Duration::from_millis(300));
        });
        while !blocking.load(Ordering::SeqCst) {
            thread::yield_now();
        }
        // The other half: queued behind it (from outside and from inside).
        for i in N / 2..N {
            let g = book.guard(i);
            let p = polled.clone();
            handles.push(rt.spawn(async move {
                let _g = g;
                p.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await;
            }));
        }
        assert_eq!(
            book.drops.load(Ordering::SeqCst),
            0,
            "dropped before shutdown"
        );
        drop(rt);
        book.check_all_once("shutdown");
        assert!(
            ready(blocker).is_ok(),
            "the running blocker should finish its poll"
        );
        for (i, h) in handles.into_iter().enumerate() {
            match ready(h) {
                Err(JoinError::Cancelled) => {}
                other => panic!("task {i}: expected Cancelled after shutdown, got {other:?}"),
            }
        }
    });
}

#[test]
fn shutdown_drops_tasks_of_32_workers_exactly_once() {
    with_timeout(
        60,
        "shutdown_drops_tasks_of_32_workers_exactly_once",
        || {
            const N: usize = 10_000;
            let rt = big();
            let book = Book::new(N);
            let b2 = book.clone();
            // Spawned from inside: deques, LIFO slots, pending on wakers.
            let handles: Vec<JoinHandle<()>> = rt.block_on(async move {
                let mut hs = Vec::with_capacity(N);
                for i in 0..N {
                    let g = b2.guard(i);
                    hs.push(hwsched::spawn(async move {
                        let _g = g;
                        if i % 2 == 0 {
                            hwsched::yield_now().await;
                        }
                        std::future::pending::<()>().await;
                    }));
                }
                hs
            });
            drop(rt);
            book.check_all_once("shutdown of 32 workers");
            for h in handles {
                assert!(ready(h).is_err_and(|e| e.is_cancelled()));
            }
        },
    );
}

/// A future that stores its waker and stays pending.
struct StoreWaker {
    slot: Arc<Mutex<Option<Waker>>>,
}

impl Future for StoreWaker {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.slot.lock().unwrap() = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[test]
fn wake_after_shutdown_is_harmless() {
    with_timeout(20, "wake_after_shutdown_is_harmless", || {
        for rt in [system(2), big()] {
            let book = Book::new(1);
            let slot = Arc::new(Mutex::new(None));
            let g = book.guard(0);
            let s = slot.clone();
            let h = rt.spawn(async move {
                let _g = g;
                StoreWaker { slot: s }.await;
            });
            let t0 = Instant::now();
            while slot.lock().unwrap().is_none() {
                assert!(t0.elapsed() < Duration::from_secs(10), "task never polled");
                thread::yield_now();
            }
            drop(rt);
            assert_eq!(
                book.drops.load(Ordering::SeqCst),
                1,
                "not dropped by shutdown"
            );
            let w = slot.lock().unwrap().take().unwrap();
            w.wake_by_ref();
            // wake() by value, on a clone (the stored one is used below).
            let by_value = w.clone();
            by_value.wake();
            w.wake_by_ref();
            // From another thread too.
            let w2 = w.clone();
            thread::spawn(move || w2.wake()).join().unwrap();
            w.wake();
            book.check_all_once("woken after shutdown");
            assert!(ready(h).is_err_and(|e| e.is_cancelled()));
        }
    });
}

// ---------------------------------------------------------------------------
// Stress and stats
// ---------------------------------------------------------------------------

#[test]
fn stress_random_wakes_32_workers() {
    with_timeout(60, "stress_random_wakes_32_workers", || {
        const N: usize = 256;
        const MIN_ROUNDS: u64 = 50;
        let run_for = Duration::from_secs(2);
        let rt = big();
        // Each task has an inbox; a token received is forwarded to a random
        // other task (waking it), with a yield now and then. Receivers live
        // in `rxs` until the end, so no token is lost; the last task to be
        // done closes every channel, which wakes all waiting receivers.
        let chans: Vec<_> = (0..N).map(|_| async_channel::unbounded::<()>()).collect();
        let txs: Arc<Vec<_>> = Arc::new(chans.iter().map(|c| c.0.clone()).collect());
        let rxs: Vec<_> = chans.iter().map(|c| c.1.clone()).collect();
        drop(chans);
        let done = Arc::new(AtomicUsize::new(0));
        let deadline = Instant::now() + run_for;
        let handles: Vec<JoinHandle<u64>> = (0..N)
            .map(|i| {
                let rx = rxs[i].clone();
                let txs = txs.clone();
                let done = done.clone();
                rt.spawn(async move {
                    let mut rng = Rng::new(i as u64 + 1);
                    let mut rounds = 0u64;
                    let mut counted = false;
                    while rx.recv().await.is_ok() {
                        rounds += 1;
                        if !counted && rounds >= MIN_ROUNDS && Instant::now() >= deadline {
                            counted = true;
                            if done.fetch_add(1, Ordering::SeqCst) + 1 == N {
                                for t in txs.iter() {
                                    t.close();
                                }
                                break;
                            }
                        }
                        let mut j = rng.below(N - 1);
                        if j >= i {
                            j += 1;
                        }
                        let _ = txs[j].try_send(());
                        if rng.below(4) == 0 {
                            hwsched::yield_now().await;
                        }
                    }
                    rounds
                })
            })
            .collect();
        // One token per task to start, and more from an outside thread.
        for t in txs.iter() {
            t.try_send(()).unwrap();
        }
        let ext = {
            let txs = txs.clone();
            thread::spawn(move || {
                let mut rng = Rng::new(99);
                let mut sent = 0u64;
                while !txs[0].is_closed() {
                    if txs[rng.below(N)].try_send(()).is_ok() {
                        sent += 1;
                    }
                    thread::sleep(Duration::from_micros(200));
                }
                sent
            })
        };
        let rounds: Vec<u64> = rt.block_on(async move {
            let mut v = Vec::new();
            for h in handles {
                v.push(h.await.expect("stress task failed"));
            }
            v
        });
        let _ = ext.join().unwrap();
        assert_eq!(done.load(Ordering::SeqCst), N);
        for (i, r) in rounds.iter().enumerate() {
            assert!(*r >= MIN_ROUNDS, "task {i} ran only {r} rounds");
        }
        // One poll may take several queued tokens, so polls are only
        // bounded below by the task count here.
        let total = rt.stats().total();
        assert!(total.polls >= N as u64, "polls {} < tasks {N}", total.polls);
        assert_eq!(total.panics, 0);
        drop(rxs);
    });
}

/// Waits (bounded) until every spawned task has been retired.
fn settle(rt: &Runtime) {
    let t0 = Instant::now();
    loop {
        let s = rt.stats();
        if s.spawned == s.retired && rt.live_tasks() == 0 {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "stats never settled: spawned {} retired {} live {}",
            s.spawned,
            s.retired,
            rt.live_tasks()
        );
        thread::sleep(Duration::from_millis(1));
    }
}

fn stats_consistency(rt: &Runtime) {
    const N: u64 = 20_000;
    let yields = Arc::new(AtomicU64::new(0));
    let y = yields.clone();
    // Outside spawns plus inside spawns, some yielding.
    let outside: Vec<_> = (0..N / 2)
        .map(|i| {
            let y = y.clone();
            rt.spawn(async move {
                if i % 3 == 0 {
                    y.fetch_add(1, Ordering::Relaxed);
                    hwsched::yield_now().await;
                }
                i
            })
        })
        .collect();
    // The other half from inside a task (a worker: its local deque). The
    // spawner itself is one more task.
    let spawner = rt.spawn(async move {
        let inside: Vec<_> = (N / 2..N)
            .map(|i| {
                let y = y.clone();
                hwsched::spawn(async move {
                    if i % 3 == 0 {
                        y.fetch_add(1, Ordering::Relaxed);
                        hwsched::yield_now().await;
                    }
                    i
                })
            })
            .collect();
        let mut s = 0;
        for h in inside {
            s += h.await.unwrap();
        }
        s
    });
    let sum = rt.block_on(async move {
        let mut s = spawner.await.unwrap();
        for h in outside {
            s += h.await.unwrap();
        }
        s
    });
    assert_eq!(sum, N * (N - 1) / 2);
    let n = N + 1;
    settle(rt);
    let s = rt.stats();
    let t = s.total();
    assert_eq!(s.spawned, n, "spawned counter");
    assert_eq!(s.retired, n, "retired counter");
    assert_eq!(s.workers.len(), rt.workers());
    let y = yields.load(Ordering::SeqCst);
    assert!(
        t.polls >= n + y,
        "polls {} < tasks {n} + yields {y}",
        t.polls
    );
    assert!(t.lifo_polls <= t.polls);
    assert!(t.steals_succeeded <= t.steals_attempted);
    assert!(t.tasks_stolen >= t.steals_succeeded);
    assert!(
        t.local_spawns >= N / 2,
        "inside spawns not counted as local"
    );
    assert_eq!(t.panics, 0);
    // total() is the sum of the per-worker and external blocks.
    let polls: u64 = s.workers.iter().map(|w| w.polls).sum::<u64>() + s.external.polls;
    assert_eq!(polls, t.polls);
    let text = s.to_string();
    assert!(!text.is_empty());
}

#[test]
fn stats_are_consistent() {
    with_timeout(60, "stats_are_consistent", || {
        stats_consistency(&default_rt());
        stats_consistency(&big());
    });
}
