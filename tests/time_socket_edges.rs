//! Timers and sockets at their edges: deadlines past what the wheel holds
//! never fire early; a timer, socket or `Handle::block_on` of a runtime
//! that is gone resolves at once (a panic for timers, an error for
//! sockets), on any thread; dropping a runtime returns while a blocking
//! closure waits on one of its timers or sockets; every task waiting on one
//! socket in one direction is woken; the first timer of a runtime works
//! with the process out of descriptors; timers spend the cooperative
//! budget. Every test runs under a watchdog (`common::with_timeout`): a
//! hang fails it.
#![cfg(feature = "io")]

use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::task::Poll;
use std::thread;
use std::time::{Duration, Instant};

use futures_lite::AsyncReadExt;
use hwsched::net::{TcpListener, TcpStream, UdpSocket};
use hwsched::time::{sleep, sleep_until, timeout, timeout_at};
use hwsched::Runtime;

mod common;
use common::{with_timeout, with_timeout_alone};

fn rt(workers: usize) -> Runtime {
    Runtime::builder().worker_threads(workers).build().unwrap()
}

/// Polls every future until all are done; their outputs in order.
async fn join_all<T>(futs: Vec<Pin<Box<dyn Future<Output = T> + Send>>>) -> Vec<T> {
    let mut futs: Vec<_> = futs.into_iter().map(Some).collect();
    let mut out: Vec<Option<T>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(move |cx| {
        let mut pending = false;
        for (f, o) in futs.iter_mut().zip(out.iter_mut()) {
            if let Some(fut) = f {
                match fut.as_mut().poll(cx) {
                    Poll::Ready(v) => {
                        *o = Some(v);
                        *f = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(out.iter_mut().map(|o| o.take().unwrap()).collect())
        }
    })
    .await
}

/// The panic message of `f`, which must panic.
fn panic_message(f: impl FnOnce()) -> String {
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("it panics");
    message(&*p)
}

fn message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// An instant as far ahead as `Instant` can hold (halving from the
/// largest `Duration` until the addition fits).
fn farthest_instant() -> Instant {
    let now = Instant::now();
    let mut d = Duration::MAX;
    loop {
        if let Some(t) = now.checked_add(d) {
            return t;
        }
        d /= 2;
    }
}

/// The timers of every huge-duration case, each raced against `wait`:
/// `true` if the huge one fired first (early).
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

fn huge_cases(wait: Duration) -> Vec<BoxFuture<(&'static str, bool)>> {
    let far = Instant::now() + Duration::from_secs(86_400 * 365 * 1000);
    let cases: Vec<(&'static str, BoxFuture<()>)> = vec![
        (
            "sleep(from_millis(u64::MAX))",
            Box::pin(sleep(Duration::from_millis(u64::MAX))),
        ),
        (
            "sleep(from_secs(u64::MAX / 1000))",
            Box::pin(sleep(Duration::from_secs(u64::MAX / 1000))),
        ),
        (
            "sleep(from_millis(u64::MAX) + 2 s)",
            Box::pin(sleep(
                Duration::from_millis(u64::MAX) + Duration::from_secs(2),
            )),
        ),
        (
            "sleep(from_millis(u64::MAX) + 1 ms)",
            Box::pin(sleep(
                Duration::from_millis(u64::MAX) + Duration::from_millis(1),
            )),
        ),
        ("sleep(Duration::MAX)", Box::pin(sleep(Duration::MAX))),
        ("sleep_until(now + 1000 years)", Box::pin(sleep_until(far))),
        (
            "sleep_until(the farthest Instant)",
            Box::pin(sleep_until(farthest_instant())),
        ),
        (
            "timeout(from_millis(u64::MAX), pending)",
            Box::pin(async {
                let _ = timeout(
                    Duration::from_millis(u64::MAX),
                    std::future::pending::<()>(),
                )
                .await;
            }),
        ),
        (
            "timeout_at(farthest, pending)",
            Box::pin(async {
                let _ = timeout_at(farthest_instant(), std::future::pending::<()>()).await;
            }),
        ),
        (
            "Sleep::reset(now + from_millis(u64::MAX))",
            Box::pin(async {
                let mut s = Box::pin(sleep(Duration::from_millis(5)));
                // Registered at 5 ms, then pushed past what the wheel holds.
                std::future::poll_fn(|cx| {
                    let _ = s.as_mut().poll(cx);
                    Poll::Ready(())
                })
                .await;
                let to = Instant::now() + Duration::from_millis(u64::MAX);
                s.as_mut().reset(to);
                s.await;
            }),
        ),
        (
            "Sleep::reset(farthest)",
            Box::pin(async {
                let mut s = Box::pin(sleep(Duration::from_millis(5)));
                s.as_mut().reset(farthest_instant());
                s.await;
            }),
        ),
    ];
    cases
        .into_iter()
        .map(|(name, f)| {
            Box::pin(async move { (name, timeout(wait, f).await.is_ok()) })
                as Pin<Box<dyn Future<Output = _> + Send>>
        })
        .collect()
}

#[test]
fn huge_durations_and_far_instants_never_fire_early_nor_panic() {
    with_timeout(60, "huge_durations", || {
        // 2.5 s: past the 2 s at which `from_millis(u64::MAX) + 2 s` fired.
        let wait = Duration::from_millis(2500);
        let rt = rt(2);
        // On the workers' wheels (a task each) and on the outside wheel
        // (block_on), at once.
        let tasks: Vec<_> = huge_cases(wait).into_iter().map(|f| rt.spawn(f)).collect();
        let outside = rt.block_on(join_all(huge_cases(wait)));
        for (name, early) in outside {
            assert!(!early, "{name} fired early (off the workers)");
        }
        for t in tasks {
            let (name, early) = rt.block_on(t).expect("no panic");
            assert!(!early, "{name} fired early (on a worker)");
        }
    });
}

/// A `Sleep` registered in runtime `a` (on a worker, and off the workers),
/// then `a` dropped: awaiting it in another runtime or on a plain thread
/// panics at once, and so do new timers through a `Handle` of `a`.
#[test]
// The runtime's task and `block_on` return a `Sleep` on purpose: polled
// once there, it is awaited elsewhere after that runtime is gone.
#[allow(clippy::async_yields_async)]
fn a_dropped_runtimes_timers_panic_at_once_never_hang() {
    with_timeout(60, "dropped_runtime_timers", || {
        let a = rt(2);
        let h = a.handle();
        // Polled once on a worker of `a`, so it sits in that worker's wheel.
        let on_worker = a
            .block_on(a.spawn(async {
                let mut s = Box::pin(sleep(Duration::from_secs(5)));
                std::future::poll_fn(|cx| {
                    assert!(s.as_mut().poll(cx).is_pending());
                    Poll::Ready(())
                })
                .await;
                s
            }))
            .unwrap();
        // Polled once in `a.block_on`: the outside wheel.
        let outside = a.block_on(async {
            let mut s = Box::pin(sleep(Duration::from_secs(5)));
            std::future::poll_fn(|cx| {
                assert!(s.as_mut().poll(cx).is_pending());
                Poll::Ready(())
            })
            .await;
            s
        });
        drop(a);
        let b = rt(1);
        let t0 = Instant::now();
        let e = b.block_on(b.spawn(on_worker)).expect_err("it panics");
        let m = message(&*e.into_panic());
        assert!(m.contains("shut down"), "{m}");
        let m = panic_message(|| futures_lite::future::block_on(outside));
        assert!(m.contains("shut down"), "{m}");
        let m = panic_message(|| h.block_on(sleep(Duration::from_millis(10))));
        assert!(m.contains("shut down"), "{m}");
        let h2 = h.clone();
        let m = panic_message(|| {
            let _ = h2.block_on(timeout(
                Duration::from_millis(10),
                std::future::pending::<()>(),
            ));
        });
        assert!(m.contains("shut down"), "{m}");
        // On a plain thread too.
        let h3 = h.clone();
        let m = thread::spawn(move || panic_message(|| h3.block_on(sleep(Duration::from_secs(5)))))
            .join()
            .unwrap();
        assert!(m.contains("shut down"), "{m}");
        // A sleep already due needs no runtime: it is ready.
        h.block_on(sleep(Duration::ZERO));
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "at once: {:?}",
            t0.elapsed()
        );
    });
}

/// A connected pair: a `TcpStream` of the current runtime and its std peer.
async fn pair() -> (TcpStream, std::net::TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peer = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().await.unwrap();
    (s, peer)
}

#[test]
fn a_dropped_runtimes_sockets_return_an_error_at_once_never_hang() {
    with_timeout(60, "dropped_runtime_sockets", || {
        let a = rt(2);
        let h = a.handle();
        let (mut s1, mut p1) = a.block_on(pair());
        let (mut s2, mut p2) = a.block_on(pair());
        let (mut s3, mut p3) = a.block_on(pair());
        drop(a);
        p1.write_all(b"data").unwrap();
        p2.write_all(b"data").unwrap();
        p3.write_all(b"data").unwrap();
        let t0 = Instant::now();
        let mut buf = [0u8; 8];
        // In another runtime.
        let b = rt(1);
        let r = b.block_on(b.spawn(async move {
            let mut buf = [0u8; 8];
            s1.read(&mut buf).await
        }));
        let e = r.unwrap().expect_err("its runtime is gone");
        assert!(e.to_string().contains("shut down"), "{e}");
        // On a plain thread.
        let e = futures_lite::future::block_on(s2.read(&mut buf)).expect_err("gone");
        assert!(e.to_string().contains("shut down"), "{e}");
        // Through a Handle of the dropped runtime.
        let e = h.block_on(s3.read(&mut buf)).expect_err("gone");
        assert!(e.to_string().contains("shut down"), "{e}");
        // And a new socket through it is refused.
        let e = h
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect_err("gone");
        assert!(e.to_string().contains("shut down"), "{e}");
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "at once: {:?}",
            t0.elapsed()
        );
    });
}

/// Dropping the runtime returns while a `spawn_blocking` closure waits on
/// one of its timers (in `Handle::block_on`): shutdown ends the timer, so
/// the closure returns.
#[test]
fn drop_returns_while_a_blocking_closure_waits_on_a_timer() {
    with_timeout_alone(60, "drop_blocking_timer", || {
        let rt = rt(2);
        let (tx, rx) = mpsc::channel();
        let _j = rt.spawn_blocking(move || {
            let h = hwsched::Handle::current();
            tx.send(()).unwrap();
            let _ = h.block_on(timeout(
                Duration::from_secs(20),
                sleep(Duration::from_secs(10)),
            ));
        });
        rx.recv().unwrap();
        // Let the closure register its timers.
        thread::sleep(Duration::from_millis(20));
        let t0 = Instant::now();
        drop(rt);
        let took = t0.elapsed();
        assert!(took < Duration::from_secs(5), "the drop took {took:?}");
    });
}

#[test]
fn drop_returns_while_a_blocking_closure_waits_on_a_socket() {
    with_timeout_alone(60, "drop_blocking_socket", || {
        let rt = rt(2);
        let (mut s, peer) = rt.block_on(pair());
        let (tx, rx) = mpsc::channel();
        let result = Arc::new(std::sync::Mutex::new(None));
        let r2 = result.clone();
        let _j = rt.spawn_blocking(move || {
            let h = hwsched::Handle::current();
            tx.send(()).unwrap();
            let mut buf = [0u8; 4];
            let r = h.block_on(s.read(&mut buf));
            *r2.lock().unwrap() = Some(r.map_err(|e| e.to_string()));
        });
        rx.recv().unwrap();
        thread::sleep(Duration::from_millis(20));
        let t0 = Instant::now();
        drop(rt);
        let took = t0.elapsed();
        assert!(took < Duration::from_secs(5), "the drop took {took:?}");
        let r = result.lock().unwrap().take().expect("the closure returned");
        let e = r.expect_err("no data came: the shutdown error");
        assert!(e.contains("shut down"), "{e}");
        drop(peer);
    });
}

#[test]
fn four_acceptors_on_one_listener_each_accept_one_of_four_clients() {
    with_timeout(60, "four_acceptors", || {
        let rt = rt(2);
        let l = Arc::new(rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap());
        let addr = l.local_addr().unwrap();
        let accepted = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let (l, accepted) = (l.clone(), accepted.clone());
                rt.spawn(async move {
                    let (s, _) = l.accept().await.unwrap();
                    accepted.fetch_add(1, Ordering::SeqCst);
                    s
                })
            })
            .collect();
        // Every acceptor waits before the first client comes.
        thread::sleep(Duration::from_millis(50));
        let clients: Vec<_> = (0..4)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        let t0 = Instant::now();
        while accepted.load(Ordering::SeqCst) < 4 && t0.elapsed() < Duration::from_secs(10) {
            thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 4, "accepted of 4");
        for t in tasks {
            rt.block_on(t).unwrap();
        }
        drop(clients);
    });
}

#[test]
fn four_receivers_on_one_udp_socket_each_get_one_of_four_datagrams() {
    with_timeout(60, "four_receivers", || {
        let rt = rt(2);
        let sock = Arc::new(rt.block_on(UdpSocket::bind("127.0.0.1:0")).unwrap());
        let addr = sock.local_addr().unwrap();
        let got = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let (sock, got) = (sock.clone(), got.clone());
                rt.spawn(async move {
                    let mut buf = [0u8; 16];
                    let (n, _) = sock.recv_from(&mut buf).await.unwrap();
                    got.fetch_add(1, Ordering::SeqCst);
                    n
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(50));
        for i in 0..4u8 {
            let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            c.send_to(&[i; 3], addr).unwrap();
        }
        let t0 = Instant::now();
        while got.load(Ordering::SeqCst) < 4 && t0.elapsed() < Duration::from_secs(10) {
            thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(got.load(Ordering::SeqCst), 4, "received of 4");
        for t in tasks {
            assert_eq!(rt.block_on(t).unwrap(), 3);
        }
    });
}

#[test]
fn two_readers_of_one_stream_each_get_a_message() {
    with_timeout(60, "two_readers", || {
        let rt = rt(2);
        let (s, mut peer) = rt.block_on(pair());
        let s = Arc::new(s);
        let got = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let (s, got) = (s.clone(), got.clone());
                rt.spawn(async move {
                    let mut buf = [0u8; 1];
                    let n = (&*s).read(&mut buf).await.unwrap();
                    got.fetch_add(1, Ordering::SeqCst);
                    n
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(50));
        // One byte, one reader; then the other byte for the other.
        peer.write_all(b"a").unwrap();
        let t0 = Instant::now();
        while got.load(Ordering::SeqCst) < 1 && t0.elapsed() < Duration::from_secs(10) {
            thread::sleep(Duration::from_millis(1));
        }
        peer.write_all(b"b").unwrap();
        while got.load(Ordering::SeqCst) < 2 && t0.elapsed() < Duration::from_secs(10) {
            thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(got.load(Ordering::SeqCst), 2, "readers woken of 2");
        for t in tasks {
            assert_eq!(rt.block_on(t).unwrap(), 1);
        }
    });
}

fn set_soft_nofile(n: u64) -> u64 {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `l` is a valid rlimit to fill and then to set.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut l), 0);
        let old = l.rlim_cur;
        l.rlim_cur = n.min(l.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &l), 0);
        old
    }
}

fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

/// With the process out of descriptors, the first timer of a runtime built
/// before works (its driver exists from `build`), and `build` itself
/// returns a typed error instead of a runtime whose timers would panic.
#[test]
fn the_first_timer_works_with_the_process_out_of_descriptors() {
    with_timeout_alone(60, "emfile_first_timer", || {
        let rt = rt(2);
        // No room for one more descriptor (read_dir's own is closed again).
        let old = set_soft_nofile(open_fds() - 1);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(sleep(Duration::from_millis(5)));
            let t = rt.block_on(timeout(
                Duration::from_millis(5),
                std::future::pending::<()>(),
            ));
            assert!(t.is_err());
            rt.block_on(rt.spawn(sleep(Duration::from_millis(5))))
                .unwrap();
            Runtime::builder().worker_threads(1).build().map(drop)
        }));
        set_soft_nofile(old);
        let built = r.expect("no panic: the driver existed before the first timer");
        match built {
            Err(hwsched::BuildError::IoDriver(e)) => {
                assert_eq!(e.raw_os_error(), Some(libc::EMFILE), "{e}")
            }
            Err(e) => panic!("another error: {e}"),
            Ok(()) => panic!("a runtime built with no descriptor left"),
        }
    });
}

/// The CPU time of the calling thread: the heartbeat's gaps are measured
/// in the worker thread's CPU time, which the CPU hog's preemptions of
/// that thread (tens of milliseconds on a loaded 2-core machine) do not
/// advance, so they measure the runtime's scheduling alone.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to fill.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(r, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A task looping on a timer that is always due beside a 1 ms heartbeat on
/// one worker: the timers spend the cooperative budget (128 per poll), so
/// the looper yields every 128 iterations, and the heartbeat's gap is its
/// period (1 ms, plus the tick's round-up) plus one looper poll (128 timer
/// polls, tens of microseconds): about 2-3 ms of the worker's CPU time.
/// Without the budget it starves for the looper's whole run (400 ms).
#[test]
fn timers_always_due_spend_the_budget_so_a_heartbeat_keeps_beating() {
    with_timeout_alone(60, "timer_budget", || {
        let rt = rt(1);
        type Looper = fn() -> Pin<Box<dyn Future<Output = ()> + Send>>;
        let loopers: [(&str, Looper); 4] = [
            ("sleep(ZERO)", || Box::pin(sleep(Duration::ZERO))),
            ("sleep_until(past)", || {
                Box::pin(sleep_until(Instant::now() - Duration::from_millis(1)))
            }),
            ("timeout(1 s, ready)", || {
                Box::pin(async {
                    timeout(Duration::from_secs(1), std::future::ready(()))
                        .await
                        .unwrap()
                })
            }),
            ("timeout(ZERO, pending)", || {
                Box::pin(async {
                    let _ = timeout(Duration::ZERO, std::future::pending::<()>()).await;
                })
            }),
        ];
        for (name, make) in loopers {
            let stop = Arc::new(AtomicBool::new(false));
            let max_gap_us = Arc::new(AtomicU64::new(0));
            let max_wall_us = Arc::new(AtomicU64::new(0));
            let beats = Arc::new(AtomicU64::new(0));
            let heartbeat = {
                let (stop, max_gap_us, max_wall_us, beats) = (
                    stop.clone(),
                    max_gap_us.clone(),
                    max_wall_us.clone(),
                    beats.clone(),
                );
                rt.spawn(async move {
                    let (mut last, mut last_wall) = (thread_cpu(), Instant::now());
                    while !stop.load(Ordering::Relaxed) {
                        sleep(Duration::from_millis(1)).await;
                        let (now, wall) = (thread_cpu(), Instant::now());
                        max_gap_us.fetch_max((now - last).as_micros() as u64, Ordering::Relaxed);
                        max_wall_us
                            .fetch_max((wall - last_wall).as_micros() as u64, Ordering::Relaxed);
                        beats.fetch_add(1, Ordering::Relaxed);
                        (last, last_wall) = (now, wall);
                    }
                })
            };
            // The heartbeat beats before the looper starts.
            while beats.load(Ordering::Relaxed) < 3 {
                thread::sleep(Duration::from_millis(1));
            }
            let looper = {
                let stop = stop.clone();
                rt.spawn(async move {
                    // 400 ms of the worker's CPU: a starved heartbeat's gap.
                    let t0 = thread_cpu();
                    while thread_cpu() - t0 < Duration::from_millis(400) {
                        make().await;
                    }
                    stop.store(true, Ordering::Relaxed);
                })
            };
            rt.block_on(looper).unwrap();
            rt.block_on(heartbeat).unwrap();
            let gap = Duration::from_micros(max_gap_us.load(Ordering::Relaxed));
            let wall = Duration::from_micros(max_wall_us.load(Ordering::Relaxed));
            eprintln!("{name}: longest heartbeat gap {gap:?} of CPU, {wall:?} of wall time");
            // 2-3 ms expected (above); 50 ms leaves room for a debug
            // build, and is far below the 400 ms of a starved one.
            assert!(
                gap < Duration::from_millis(50),
                "{name}: the heartbeat's longest gap was {gap:?} of the worker's CPU \
                 ({wall:?} of wall time)"
            );
        }
    });
}

#[test]
fn a_socket_made_outside_any_runtime_names_only_functions_that_exist() {
    with_timeout(60, "outside_message", || {
        let e = futures_lite::future::block_on(TcpListener::bind("127.0.0.1:0"))
            .expect_err("no runtime");
        let m = e.to_string();
        assert!(m.contains("no hwsched runtime"), "{m}");
        assert!(!m.contains("Handle::enter"), "{m}");
    });
}

/// A timer registered by a task on worker 0 (its wheel's first entry) and
/// dropped by a task on worker 1, which has a timer of its own (its wheel's
/// first entry too: the same slot key, in another wheel). The cancel must
/// remove the dropped timer from its owner's wheel (worker 0's, under that
/// wheel's lock), not from the wheel of the thread that drops it: there
/// the key names worker 1's own timer, which would then never fire.
#[test]
fn a_timer_dropped_on_another_worker_is_removed_from_its_owners_wheel() {
    use hwsched::Place;
    with_timeout(30, "cancel_on_another_worker", || {
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        let (tx, rx) = mpsc::channel::<Pin<Box<hwsched::time::Sleep>>>();
        let (mine_tx, mine_rx) = mpsc::channel::<()>();
        let owner = rt
            .spawn_on(Place::Worker(0), async move {
                let mut far = Box::pin(sleep(Duration::from_secs(3600)));
                // Registered on worker 0's wheel by its first poll.
                assert!(futures_lite::future::poll_once(far.as_mut())
                    .await
                    .is_none());
                // Sent once worker 1's timer is in its wheel.
                mine_rx.recv_timeout(Duration::from_secs(10)).unwrap();
                tx.send(far).unwrap();
            })
            .unwrap();
        let dropper = rt
            .spawn_on(Place::Worker(1), async move {
                let mut mine = Box::pin(sleep(Duration::from_millis(20)));
                assert!(futures_lite::future::poll_once(mine.as_mut())
                    .await
                    .is_none());
                mine_tx.send(()).unwrap();
                let far = rx.recv_timeout(Duration::from_secs(10)).unwrap();
                // The cancel, on worker 1's thread.
                drop(far);
                timeout(Duration::from_secs(5), mine).await.is_ok()
            })
            .unwrap();
        rt.block_on(owner).unwrap();
        assert!(
            rt.block_on(dropper).unwrap(),
            "worker 1's timer did not fire within 5 s once worker 0's timer was dropped on \
             worker 1 (the cancel removed it from the wrong wheel?)"
        );
    });
}
