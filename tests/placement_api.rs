//! The placement API: `current_place`, `spawn_on` (worker places, typed
//! errors for bad places), `spawn_local`. Domain places:
//! `placement_domains.rs`.

mod common;

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use common::{with_timeout, with_timeout_alone, BIG};
use hwsched::{LevelKind, Place, PlaceError, Runtime, TopologySource};

/// Two NUMA nodes of 4 cores of 2 PUs: 16 workers.
const TWO_NODES: &str = "pack:2 [numa] core:4 pu:2";

fn rt(topo: &str) -> Runtime {
    Runtime::builder()
        .topology(TopologySource::Synthetic(topo.into()))
        .build()
        .unwrap()
}

#[test]
fn current_place_names_the_domains_of_each_worker() {
    with_timeout(60, "current_place", || {
        let rt = rt(BIG);
        assert_eq!(hwsched::current_place(), None);
        assert_eq!(rt.handle().current_place(), None);
        rt.block_on(async {
            assert_eq!(hwsched::current_place(), None, "block_on's thread");
        });
        for w in 0..rt.workers() {
            let h = rt
                .spawn_on(Place::Worker(w), async {
                    (
                        hwsched::current_place(),
                        hwsched::Handle::current().current_place(),
                    )
                })
                .unwrap();
            let (p, q) = rt.block_on(h).unwrap();
            let p = p.unwrap();
            assert_eq!(Some(p), q);
            assert_eq!(p.worker, w);
            assert_eq!(p.core, w / 2, "worker {w}");
            assert_eq!(p.llc, w / 8, "worker {w}");
            assert_eq!(p.package, w / 16, "worker {w}");
            assert_eq!(p.numa, 0, "one node: worker {w}");
        }
        let h = rt.spawn_blocking(hwsched::current_place);
        assert_eq!(rt.block_on(h).unwrap(), None, "a blocking thread");

        let rt = rt_two_nodes();
        for w in 0..rt.workers() {
            let h = rt
                .spawn_on(Place::Worker(w), async { hwsched::current_place() })
                .unwrap();
            let p = rt.block_on(h).unwrap().unwrap();
            assert_eq!(
                (p.worker, p.core, p.numa, p.package),
                (w, w / 2, w / 8, w / 8)
            );
        }
    })
}

fn rt_two_nodes() -> Runtime {
    let rt = rt(TWO_NODES);
    let nodes = rt.topology().domains(LevelKind::Numa).unwrap();
    assert_eq!(nodes, vec![0..8, 8..16], "{}", rt.topology());
    rt
}

/// A future that records the worker of each of its polls, and is woken
/// `wakes` times from wherever `wake` sends its waker.
struct Recorder {
    polls: Arc<Mutex<Vec<usize>>>,
    left: u32,
    wake: fn(Waker),
}

impl Future for Recorder {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let w = hwsched::worker_index().expect("polled on a worker");
        self.polls.lock().unwrap().push(w);
        if self.left == 0 {
            return Poll::Ready(());
        }
        self.left -= 1;
        (self.wake)(cx.waker().clone());
        Poll::Pending
    }
}

fn wake_here(w: Waker) {
    w.wake()
}

fn wake_from_thread(w: Waker) {
    std::thread::spawn(move || w.wake());
}

/// Tasks pinned to random workers, woken many times (by themselves, from
/// other tasks and from other threads), with the machine kept busy by
/// unplaced tasks that steal: every poll of every placed task happened on
/// its worker.
#[test]
fn every_poll_of_a_pinned_task_is_on_its_worker() {
    for topo in [BIG, TWO_NODES] {
        with_timeout(120, "pinned polls", move || {
            let rt = rt(topo);
            let n = rt.workers();
            let mut rng = 0x2545_F491_4F6C_DD1Du64;
            let mut next = move || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            // Busy unplaced work, so that idle workers walk and steal.
            let noise: Vec<_> = (0..64)
                .map(|_| {
                    rt.spawn(async {
                        for _ in 0..200 {
                            hwsched::yield_now().await;
                        }
                    })
                })
                .collect();
            const TASKS: usize = 40_000;
            const WAKES: u32 = 25;
            let mut tasks = Vec::with_capacity(TASKS);
            for i in 0..TASKS {
                let w = (next() % n as u64) as usize;
                let polls = Arc::new(Mutex::new(Vec::new()));
                let wake = if i % 50 == 0 {
                    wake_from_thread
                } else {
                    wake_here
                };
                let fut = Recorder {
                    polls: polls.clone(),
                    left: WAKES,
                    wake,
                };
                let h = if i % 2 == 0 {
                    rt.spawn_on(Place::Worker(w), fut).unwrap()
                } else {
                    // Spawned from a task on some other worker.
                    let inner = rt.spawn(async move { hwsched::spawn_on(Place::Worker(w), fut) });
                    rt.block_on(inner).unwrap().unwrap()
                };
                tasks.push((w, polls, h));
            }
            for (w, polls, h) in tasks {
                rt.block_on(h).unwrap();
                let polls = polls.lock().unwrap();
                assert_eq!(polls.len(), WAKES as usize + 1);
                assert!(
                    polls.iter().all(|&p| p == w),
                    "a task pinned to worker {w} was polled on {polls:?}"
                );
            }
            for h in noise {
                rt.block_on(h).unwrap();
            }
        });
    }
}

/// `Place::Here` from a worker: the task stays on the spawner's worker
/// across yields, while other workers are idle and would steal.
#[test]
fn here_is_the_spawning_worker() {
    with_timeout(60, "here", || {
        let rt = rt(BIG);
        let h = rt.spawn(async {
            let me = hwsched::worker_index().unwrap();
            let hs: Vec<_> = (0..100)
                .map(|_| {
                    hwsched::spawn_on(Place::Here, async {
                        let mut seen = Vec::new();
                        for _ in 0..20 {
                            seen.push(hwsched::worker_index().unwrap());
                            hwsched::yield_now().await;
                        }
                        seen
                    })
                    .unwrap()
                })
                .collect();
            let mut all = Vec::new();
            for h in hs {
                all.extend(h.await.unwrap());
            }
            (me, all)
        });
        let (me, all) = rt.block_on(h).unwrap();
        assert!(all.iter().all(|&w| w == me), "{me}: {all:?}");
    })
}

/// Bad places: typed errors naming the place, and nothing spawned (the
/// future is dropped at once, never polled).
#[test]
fn bad_places_are_typed_errors_and_spawn_nothing() {
    with_timeout(60, "bad places", || {
        let rt = rt(BIG);
        let polled = Arc::new(AtomicBool::new(false));
        let spawned_before = rt.stats().spawned;
        let fut = |p: &Arc<AtomicBool>| {
            let p = p.clone();
            async move { p.store(true, Ordering::SeqCst) }
        };
        let e = rt.spawn_on(Place::Worker(32), fut(&polled)).unwrap_err();
        assert_eq!(
            e,
            PlaceError::WorkerOutOfRange {
                worker: 32,
                workers: 32
            }
        );
        assert!(e.to_string().contains("worker 32"), "{e}");
        let e = rt.spawn_on(Place::Here, fut(&polled)).unwrap_err();
        assert_eq!(e, PlaceError::NotOnWorker { place: Place::Here });
        let e = rt.spawn_on(Place::Llc(4), fut(&polled)).unwrap_err();
        assert_eq!(
            e,
            PlaceError::DomainOutOfRange {
                place: Place::Llc(4),
                domains: 4
            }
        );
        assert!(e.to_string().contains("LLC 4"), "{e}");
        for (place, domains) in [
            (Place::Core(16), 16),
            (Place::Numa(1), 1),
            (Place::Package(2), 2),
        ] {
            let e = rt.spawn_on(place, fut(&polled)).unwrap_err();
            assert_eq!(e, PlaceError::DomainOutOfRange { place, domains });
        }
        // From a task: `Here` works there, the rest is refused the same way.
        let h = rt.spawn({
            let p = polled.clone();
            async move {
                let e = hwsched::spawn_on(Place::Worker(99), {
                    let p = p.clone();
                    async move { p.store(true, Ordering::SeqCst) }
                })
                .unwrap_err();
                matches!(e, PlaceError::WorkerOutOfRange { worker: 99, .. })
            }
        });
        assert!(rt.block_on(h).unwrap());
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !polled.load(Ordering::SeqCst),
            "a refused future was polled"
        );
        assert_eq!(
            rt.stats().spawned,
            spawned_before + 1,
            "only the checking task"
        );
    })
}

/// A pinned task waits for its worker (never stolen) and runs once that
/// worker is free; an unplaced task queued behind the blocked worker is
/// taken by another.
#[test]
fn a_pinned_task_waits_for_its_blocked_worker() {
    with_timeout_alone(60, "pinned behind a blocked worker", || {
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        let release = Arc::new(AtomicBool::new(false));
        let r2 = release.clone();
        let blocker = rt
            .spawn_on(Place::Worker(0), async move {
                while !r2.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let ran = Arc::new(AtomicUsize::new(usize::MAX));
        let r = ran.clone();
        let pinned = rt
            .spawn_on(Place::Worker(0), async move {
                r.store(hwsched::worker_index().unwrap(), Ordering::SeqCst)
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(ran.load(Ordering::SeqCst), usize::MAX, "ran off its worker");
        release.store(true, Ordering::SeqCst);
        rt.block_on(blocker).unwrap();
        rt.block_on(pinned).unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 0);
    })
}

/// Pending pinned tasks are cancelled at shutdown like any other: their
/// handles resolve to `Cancelled` and their futures are dropped once.
#[test]
fn pinned_tasks_are_cancelled_at_shutdown() {
    with_timeout(60, "pinned shutdown", || {
        let drops = Arc::new(AtomicUsize::new(0));
        struct D(Arc<AtomicUsize>);
        impl Drop for D {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let rt = rt(BIG);
        let mut hs = Vec::new();
        for i in 0..256 {
            let d = D(drops.clone());
            let h = rt
                .spawn_on(Place::Worker(i % 32), async move {
                    let _d = d;
                    if i % 2 == 0 {
                        std::future::pending::<()>().await;
                    } else {
                        loop {
                            hwsched::yield_now().await;
                        }
                    }
                })
                .unwrap();
            hs.push(h);
        }
        std::thread::sleep(Duration::from_millis(50));
        rt.shutdown_timeout(Duration::from_secs(10));
        assert_eq!(drops.load(Ordering::SeqCst), 256);
        let check = Runtime::builder().worker_threads(1).build().unwrap();
        for h in hs {
            assert!(check.block_on(h).unwrap_err().is_cancelled());
        }
    })
}

/// A local task's drop counter: counts drops and the thread of each.
struct LocalDrop {
    drops: Rc<Cell<u32>>,
    on: Arc<Mutex<Vec<std::thread::ThreadId>>>,
}

impl Drop for LocalDrop {
    fn drop(&mut self) {
        self.drops.set(self.drops.get() + 1);
        self.on.lock().unwrap().push(std::thread::current().id());
    }
}

/// `spawn_local` futures holding an `Rc`: run to completion on their
/// worker, woken from other threads and from `spawn_blocking`.
#[test]
fn local_tasks_run_on_their_worker_woken_from_anywhere() {
    with_timeout(60, "spawn_local", || {
        let rt = rt(BIG);
        let h = rt.spawn(async {
            hwsched::spawn_local(async {
                let me = hwsched::worker_index().unwrap();
                let count = Rc::new(Cell::new(0u32));
                let mut hs = Vec::new();
                for i in 0..50 {
                    let c = count.clone();
                    hs.push(hwsched::spawn_local(async move {
                        let mut seen = vec![hwsched::worker_index().unwrap()];
                        for k in 0..10 {
                            if (i + k) % 2 == 0 {
                                // Woken from a blocking thread.
                                hwsched::spawn_blocking(|| {
                                    std::thread::sleep(Duration::from_micros(50))
                                })
                                .await
                                .unwrap();
                            } else {
                                // Woken from a plain thread.
                                let (tx, rx) = std::sync::mpsc::channel::<Waker>();
                                let done = Arc::new(AtomicBool::new(false));
                                let d2 = done.clone();
                                std::thread::spawn(move || {
                                    let w = rx.recv().unwrap();
                                    d2.store(true, Ordering::SeqCst);
                                    w.wake();
                                });
                                let mut tx = Some(tx);
                                std::future::poll_fn(|cx| {
                                    if done.load(Ordering::SeqCst) {
                                        return Poll::Ready(());
                                    }
                                    if let Some(tx) = tx.take() {
                                        tx.send(cx.waker().clone()).unwrap();
                                    }
                                    Poll::Pending
                                })
                                .await;
                            }
                            seen.push(hwsched::worker_index().unwrap());
                        }
                        // `c`, an Rc, was held across every await.
                        c.set(c.get() + 1);
                        assert!(seen.iter().all(|&w| w == me), "{me}: {seen:?}");
                    }));
                }
                for h in hs {
                    h.await.unwrap();
                }
                (me, count.get())
            })
            .await
            .unwrap()
        });
        let (_, n) = rt.block_on(h).unwrap();
        assert_eq!(n, 50);
    })
}

/// Polls of local tasks are all on the spawning worker (checked by
/// async-task at each poll, and recorded here).
#[test]
fn local_task_polls_stay_on_the_spawner() {
    with_timeout(60, "spawn_local polls", || {
        let rt = rt(BIG);
        let h = rt.spawn(async {
            hwsched::spawn_local(async {
                let me = hwsched::worker_index().unwrap();
                let seen = Rc::new(std::cell::RefCell::new(Vec::new()));
                let hs: Vec<_> = (0..64)
                    .map(|_| {
                        let s = seen.clone();
                        hwsched::spawn_local(async move {
                            for _ in 0..20 {
                                s.borrow_mut().push(hwsched::worker_index().unwrap());
                                hwsched::yield_now().await;
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.await.unwrap();
                }
                let v = seen.borrow().clone();
                (me, v)
            })
            .await
            .unwrap()
        });
        let (me, v) = rt.block_on(h).unwrap();
        assert_eq!(v.len(), 64 * 20);
        assert!(v.iter().all(|&w| w == me));
    })
}

/// An aborted local task is dropped (on its worker) and its handle says
/// `Cancelled`.
#[test]
fn local_tasks_can_be_aborted() {
    with_timeout(60, "spawn_local abort", || {
        let rt = rt(BIG);
        let on = Arc::new(Mutex::new(Vec::new()));
        let on2 = on.clone();
        let h = rt.spawn(async move {
            hwsched::spawn_local(async move {
                let drops = Rc::new(Cell::new(0));
                let d = LocalDrop {
                    drops: drops.clone(),
                    on: on2,
                };
                let h = hwsched::spawn_local(async move {
                    let _d = d;
                    std::future::pending::<()>().await
                });
                hwsched::yield_now().await;
                let abort = h.abort_handle();
                // Aborted from another thread.
                std::thread::spawn(move || abort.abort()).join().unwrap();
                let r = h.await;
                (
                    r.unwrap_err().is_cancelled(),
                    drops.get(),
                    std::thread::current().id(),
                )
            })
            .await
            .unwrap()
        });
        let (cancelled, drops, thread) = rt.block_on(h).unwrap();
        assert!(cancelled);
        assert_eq!(drops, 1);
        assert_eq!(*on.lock().unwrap(), vec![thread]);
    })
}

/// At shutdown, pending local tasks (waiting on nothing, on a waker held by
/// another thread, queued) are dropped exactly once each, on their own
/// worker's thread.
#[test]
fn local_tasks_are_dropped_once_on_their_thread_at_shutdown() {
    with_timeout(60, "spawn_local shutdown", || {
        let rt = rt(BIG);
        let on = Arc::new(Mutex::new(Vec::new()));
        let threads = Arc::new(Mutex::new(Vec::new()));
        let wakers = Arc::new(Mutex::new(Vec::<Waker>::new()));
        let hs: Vec<_> = (0..8)
            .map(|k| {
                let (on, threads, wakers) = (on.clone(), threads.clone(), wakers.clone());
                rt.spawn_on(Place::Worker(k * 4), async move {
                    threads.lock().unwrap().push(std::thread::current().id());
                    let drops = Rc::new(Cell::new(0));
                    for i in 0..30 {
                        let d = LocalDrop {
                            drops: drops.clone(),
                            on: on.clone(),
                        };
                        let wakers = wakers.clone();
                        drop(hwsched::spawn_local(async move {
                            let _d = d;
                            match i % 3 {
                                0 => std::future::pending::<()>().await,
                                1 => {
                                    // Its waker held (and later dropped) elsewhere.
                                    std::future::poll_fn(|cx| {
                                        wakers.lock().unwrap().push(cx.waker().clone());
                                        Poll::<()>::Pending
                                    })
                                    .await
                                }
                                _ => loop {
                                    hwsched::yield_now().await;
                                },
                            }
                        }));
                    }
                })
                .unwrap()
            })
            .collect();
        for h in hs {
            rt.block_on(h).unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        let stop = Arc::new(AtomicBool::new(false));
        let waker_thread = {
            let (stop, wakers) = (stop.clone(), wakers.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    for w in wakers.lock().unwrap().iter() {
                        w.wake_by_ref();
                    }
                    std::thread::yield_now();
                }
            })
        };
        assert!(rt.shutdown_timeout(Duration::from_secs(10)));
        stop.store(true, Ordering::SeqCst);
        waker_thread.join().unwrap();
        wakers.lock().unwrap().clear();
        let on = on.lock().unwrap();
        assert_eq!(on.len(), 8 * 30, "each local task dropped exactly once");
        let threads = threads.lock().unwrap();
        assert!(
            on.iter().all(|t| threads.contains(t)),
            "every drop on a worker thread that spawned local tasks"
        );
        let per: Vec<usize> = threads
            .iter()
            .map(|t| on.iter().filter(|x| *x == t).count())
            .collect();
        assert_eq!(per, vec![30; 8]);
    })
}

#[test]
fn spawn_local_off_a_worker_panics_with_a_clear_message() {
    let rt = Runtime::builder().worker_threads(1).build().unwrap();
    let r = std::panic::catch_unwind(|| {
        drop(hwsched::spawn_local(async {}));
    });
    let p = r.unwrap_err();
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap();
    assert!(msg.contains("off a worker thread"), "{msg}");
    // block_on's thread is not a worker, but runs local tasks of its own
    // (tests/block_on_local.rs).
    let v = rt.block_on(async { hwsched::spawn_local(async { 3 }).await.unwrap() });
    assert_eq!(v, 3);
}

/// The JoinHandle of a local task is `Send` exactly when its output is.
#[test]
fn local_join_handle_is_send_iff_output_is() {
    fn is_send<T: Send>(_: &T) {}
    let rt = Runtime::builder().worker_threads(1).build().unwrap();
    let v = rt.block_on(rt.spawn(async {
        let h = hwsched::spawn_local(async { 5u32 });
        is_send(&h);
        // A `Send` handle may be awaited from another worker's task.
        hwsched::spawn(h).await.unwrap().unwrap()
    }));
    assert_eq!(v.unwrap(), 5);
}

/// `Place::NearWorker` is a hint, not a rule: a task spawned near a worker
/// that is busy in a long poll still starts at once on another worker
/// (where `Place::Worker` would wait for it), and a bad index or a
/// `NearHere` off a worker is a typed error that spawns nothing.
#[test]
fn a_task_near_a_blocked_worker_starts_elsewhere() {
    with_timeout(60, "near", || {
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        let started = Arc::new(AtomicBool::new(false));
        let s = started.clone();
        let blocker = rt
            .spawn_on(Place::Worker(0), async move {
                s.store(true, Ordering::SeqCst);
                let t0 = std::time::Instant::now();
                while t0.elapsed() < Duration::from_secs(1) {
                    std::hint::spin_loop();
                }
            })
            .unwrap();
        while !started.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let t0 = std::time::Instant::now();
        let near = rt
            .spawn_on(Place::NearWorker(0), async move {
                (t0.elapsed(), hwsched::worker_index())
            })
            .unwrap();
        let (after, on) = rt.block_on(near).unwrap();
        assert_eq!(on, Some(1), "the task near busy worker 0 ran on worker 1");
        assert!(
            after < Duration::from_millis(500),
            "it started while worker 0 was busy (after {after:?})"
        );
        rt.block_on(blocker).unwrap();

        let before = rt.stats().total().spawned + rt.stats().external.spawned;
        assert_eq!(
            rt.spawn_on(Place::NearWorker(2), async {}).unwrap_err(),
            PlaceError::WorkerOutOfRange {
                worker: 2,
                workers: 2
            }
        );
        assert_eq!(
            rt.spawn_on(Place::NearHere, async {}).unwrap_err(),
            PlaceError::NotOnWorker {
                place: Place::NearHere
            }
        );
        let after = rt.stats().total().spawned + rt.stats().external.spawned;
        assert_eq!(before, after, "a refused place spawns nothing");
        // On a worker, NearHere is that worker (its own deque).
        let h = rt.spawn(async {
            hwsched::spawn_on(Place::NearHere, async { 7 })
                .unwrap()
                .await
                .unwrap()
        });
        assert_eq!(rt.block_on(h).unwrap(), 7);
    });
}
