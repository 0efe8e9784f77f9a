//! hwsched's I/O driver (the `io` feature): no wake is lost between the
//! pollers and the workers, on 2 workers and on 32 with a poller per LLC;
//! shutdown with sockets and timers open drops each task once, closes every
//! descriptor and stops every thread; faults (RST, half-close, partial
//! writes, thousands of connections); timers fire once and never early; the
//! cooperative budget lets a ticking task run beside an always-ready socket.
//!
//! `cargo test --features io --test io`; under load:
//! `scripts/under-hog.sh 30 --features io --test io`.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use hwsched::io::IoPollers;
use hwsched::net::{TcpListener, TcpStream};
use hwsched::{Runtime, TopologySource};

mod common;
use common::{with_timeout, BIG};

fn rt_io(topology: Option<&str>, workers: Option<usize>, pollers: IoPollers) -> Runtime {
    let mut b = Runtime::builder().enable_io(true).io_pollers(pollers);
    if let Some(t) = topology {
        b = b.topology(TopologySource::Synthetic(t.into()));
    }
    if let Some(n) = workers {
        b = b.worker_threads(n);
    }
    b.build().expect("a runtime with I/O")
}

/// Many sockets and timers at once: every round trip completes (no wake is
/// lost between the pollers and the workers). Both ends are tasks, so both
/// ends' wakes come from the driver.
fn stress(rt: &Runtime, conns: usize, rounds: usize) {
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let server = rt.spawn(async move {
        let mut hs = Vec::new();
        for _ in 0..conns {
            let (mut s, _) = listener.accept().await.unwrap();
            let d = d.clone();
            hs.push(hwsched::spawn(async move {
                let mut buf = [0u8; 8];
                for r in 0..rounds {
                    s.read_exact(&mut buf).await.unwrap();
                    if r % 4 == 0 {
                        hwsched::time::sleep(Duration::from_micros(200)).await;
                    }
                    s.write_all(&buf).await.unwrap();
                }
                d.fetch_add(1, Ordering::SeqCst);
            }));
        }
        for h in hs {
            h.await.unwrap();
        }
    });
    let clients: Vec<_> = (0..conns)
        .map(|i| {
            rt.spawn(async move {
                let mut c = TcpStream::connect(addr).await.unwrap();
                let mut back = [0u8; 8];
                for r in 0..rounds {
                    let msg = [(i + r) as u8; 8];
                    c.write_all(&msg).await.unwrap();
                    c.read_exact(&mut back).await.unwrap();
                    assert_eq!(back, msg);
                }
            })
        })
        .collect();
    for c in clients {
        rt.block_on(c).unwrap();
    }
    rt.block_on(server).unwrap();
    assert_eq!(done.load(Ordering::SeqCst), conns);
    let st = rt.stats();
    assert!(st.io_driven, "{st}");
    assert!(st.total().wakes_by_driver > 0, "{st}");
}

#[test]
fn many_sockets_and_timers_complete_on_2_workers() {
    with_timeout(120, "io_stress_2", || {
        let rt = rt_io(None, Some(2), IoPollers::One);
        stress(&rt, 64, 50);
    });
}

#[test]
fn many_sockets_and_timers_complete_on_32_workers_with_a_poller_per_llc() {
    with_timeout(120, "io_stress_32", || {
        let rt = rt_io(Some(BIG), None, IoPollers::PerLlc);
        stress(&rt, 64, 50);
        assert_eq!(rt.stats().io_pollers, 4, "one poller per LLC of {BIG}");
    });
}

#[test]
fn many_sockets_complete_on_32_workers_with_a_poller_per_numa_node() {
    with_timeout(120, "io_stress_32_numa", || {
        let rt = rt_io(
            Some("pack:2 [numa] l3:2 core:4 pu:2"),
            None,
            IoPollers::PerNuma,
        );
        stress(&rt, 32, 20);
    });
}

/// The descriptors this process has open.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// This process's threads whose name starts with `prefix`.
fn threads(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

#[test]
fn shutdown_with_sockets_and_timers_open_drops_each_task_once_closes_every_fd() {
    // Counts /proc/self/fd and /proc/self/task: alone, so that no other
    // test of this binary opens or closes anything meanwhile.
    common::with_timeout_alone(60, "io_shutdown", || {
        let fds0 = open_fds();
        let stopped = Arc::new(AtomicUsize::new(0));
        let s2 = stopped.clone();
        let rt = Runtime::builder()
            .worker_threads(2)
            .thread_name("io-shut")
            .on_thread_stop(move || {
                s2.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap();
        let dropped = Arc::new(AtomicUsize::new(0));
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let d = dropped.clone();
        rt.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            for i in 0..16 {
                let c = Counted(d.clone());
                // Half wait on a socket that never gets a byte, half on a
                // timer an hour away.
                if i % 2 == 0 {
                    let mut s = TcpStream::connect(addr).await.unwrap();
                    let (peer, _) = listener.accept().await.unwrap();
                    drop(hwsched::spawn(async move {
                        let _c = c;
                        let _peer = peer;
                        let mut buf = [0u8; 1];
                        let _ = s.read(&mut buf).await;
                    }));
                } else {
                    drop(hwsched::spawn(async move {
                        let _c = c;
                        hwsched::time::sleep(Duration::from_secs(3600)).await;
                    }));
                }
            }
        });
        thread::sleep(Duration::from_millis(50));
        assert!(open_fds() > fds0, "the driver and sockets are open");
        assert_eq!(threads("io-shut"), 2, "the workers run");
        drop(rt);
        assert_eq!(dropped.load(Ordering::SeqCst), 16, "each task dropped once");
        assert_eq!(stopped.load(Ordering::SeqCst), 2, "every worker stopped");
        let left: Vec<_> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .collect();
        assert_eq!(open_fds(), fds0, "every descriptor closed: {left:?}");
        // Worker threads are joined by the drop; the blocking pool's too.
        // (Counted by name: other tests' threads come and go meanwhile.)
        let t0 = Instant::now();
        while threads("io-shut") > 0 && t0.elapsed() < Duration::from_secs(5) {
            thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(threads("io-shut"), 0, "no thread of the runtime left");
    });
}

/// What the `io` feature costs a program that does no I/O: the driver's
/// descriptors, opened by `build` (so that the first socket or timer never
/// fails for want of one): per poller an epoll instance, its registry's
/// duplicate and an eventfd, 3 with the default single poller. Nobody
/// sleeps in the poller until a socket or timer is used, and
/// `enable_io(false)` opens none.
#[test]
fn a_program_without_io_opens_only_the_drivers_three_descriptors() {
    common::with_timeout_alone(60, "io_unused", || {
        let fds0 = open_fds();
        let off = Runtime::builder()
            .worker_threads(2)
            .enable_io(false)
            .build()
            .unwrap();
        assert_eq!(open_fds(), fds0, "I/O off: no descriptor");
        drop(off);
        let rt = Runtime::builder().worker_threads(2).build().unwrap();
        assert_eq!(open_fds(), fds0 + 3, "epoll, its duplicate, the eventfd");
        let n = rt.block_on(async {
            let hs: Vec<_> = (0..100).map(|i| hwsched::spawn(async move { i })).collect();
            let mut n = 0;
            for h in hs {
                n += h.await.unwrap();
            }
            n
        });
        assert_eq!(n, 4950);
        assert_eq!(open_fds(), fds0 + 3, "nothing more while no I/O is done");
        assert!(!rt.stats().io_driven, "nobody sleeps in the poller");
        drop(rt);
        assert_eq!(open_fds(), fds0, "closed with the runtime");
    });
}

#[test]
fn peer_reset_half_close_and_partial_writes() {
    with_timeout(120, "io_faults", || {
        let rt = rt_io(None, Some(2), IoPollers::One);
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();

            // RST: the peer closes with unread data (SO_LINGER 0 makes it a
            // reset); our read sees an error or EOF, never hangs.
            let peer = std::net::TcpStream::connect(addr).unwrap();
            let (mut s, _) = listener.accept().await.unwrap();
            let sock = socket_linger_zero(&peer);
            drop(peer);
            drop(sock);
            let mut buf = [0u8; 16];
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => {}
                Ok(n) => panic!("read {n} bytes from a reset connection"),
            }

            // Half-close: the peer shuts its write half; we read EOF and
            // can still write to it.
            let mut peer = std::net::TcpStream::connect(addr).unwrap();
            let (mut s, _) = listener.accept().await.unwrap();
            peer.write_all(b"bye").unwrap();
            peer.shutdown(std::net::Shutdown::Write).unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.unwrap();
            assert_eq!(got, b"bye");
            s.write_all(b"still here").await.unwrap();
            s.close().await.unwrap();
            let mut back = Vec::new();
            peer.read_to_end(&mut back).unwrap();
            assert_eq!(back, b"still here");

            // 16 MiB written at once to a slow reader: partial writes, each
            // waiting for writability; every byte arrives in order.
            let mut peer = std::net::TcpStream::connect(addr).unwrap();
            let (mut s, _) = listener.accept().await.unwrap();
            const N: usize = 16 << 20;
            let reader = thread::spawn(move || {
                let mut total = 0usize;
                let mut buf = vec![0u8; 64 << 10];
                let mut sum = 0u64;
                loop {
                    let n = peer.read(&mut buf).unwrap();
                    if n == 0 {
                        return (total, sum);
                    }
                    for (i, b) in buf[..n].iter().enumerate() {
                        assert_eq!(*b, ((total + i) % 251) as u8);
                        sum += *b as u64;
                    }
                    total += n;
                    if total < (1 << 20) {
                        thread::sleep(Duration::from_millis(1));
                    }
                }
            });
            let data: Vec<u8> = (0..N).map(|i| (i % 251) as u8).collect();
            s.write_all(&data).await.unwrap();
            s.close().await.unwrap();
            drop(s);
            let (total, sum) = reader.join().unwrap();
            assert_eq!(total, N);
            assert_eq!(sum, data.iter().map(|b| *b as u64).sum::<u64>());
        });
    });
}

/// Sets SO_LINGER to 0 on a duplicate of `s`'s descriptor (so that its
/// close sends RST); returns the duplicate, to be dropped after `s`.
fn socket_linger_zero(s: &std::net::TcpStream) -> std::net::TcpStream {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    use std::os::fd::AsRawFd;
    // SAFETY: a valid socket and a `linger` of the right size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
    s.try_clone().unwrap()
}

#[test]
fn five_thousand_concurrent_connections() {
    with_timeout(180, "io_5000", || {
        // Each connection needs two descriptors (both ends are here).
        raise_nofile(12_000);
        let rt = rt_io(None, Some(2), IoPollers::One);
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            const N: usize = 5000;
            let server = hwsched::spawn(async move {
                let mut hs = Vec::with_capacity(N);
                for _ in 0..N {
                    let (mut s, _) = listener.accept().await.unwrap();
                    hs.push(hwsched::spawn(async move {
                        let mut b = [0u8; 4];
                        s.read_exact(&mut b).await.unwrap();
                        s.write_all(&b).await.unwrap();
                    }));
                }
                for h in hs {
                    h.await.unwrap();
                }
            });
            // All connected first, then all talk: 5,000 open at once.
            let mut conns = Vec::with_capacity(N);
            for _ in 0..N {
                conns.push(TcpStream::connect(addr).await.unwrap());
            }
            let hs: Vec<_> = conns
                .into_iter()
                .enumerate()
                .map(|(i, mut c)| {
                    hwsched::spawn(async move {
                        let m = (i as u32).to_le_bytes();
                        c.write_all(&m).await.unwrap();
                        let mut b = [0u8; 4];
                        c.read_exact(&mut b).await.unwrap();
                        assert_eq!(b, m);
                    })
                })
                .collect();
            for h in hs {
                h.await.unwrap();
            }
            server.await.unwrap();
        });
    });
}

/// Raises the soft descriptor limit to `n` (or the hard limit).
fn raise_nofile(n: u64) {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `l` is a valid rlimit to fill and then to set.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut l), 0);
        if l.rlim_cur < n {
            l.rlim_cur = n.min(l.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &l), 0);
        }
    }
}

#[test]
fn a_hundred_thousand_random_timers_fire_once_and_never_early() {
    with_timeout(120, "timers_100k", || {
        let rt = rt_io(None, Some(2), IoPollers::One);
        const N: usize = 100_000;
        let fired = Arc::new(AtomicUsize::new(0));
        let early = Arc::new(AtomicUsize::new(0));
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let hs: Vec<_> = (0..N)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let us = seed % 50_000;
                let (f, e) = (fired.clone(), early.clone());
                rt.spawn(async move {
                    let d = Duration::from_micros(us);
                    let t0 = Instant::now();
                    hwsched::time::sleep(d).await;
                    if t0.elapsed() < d {
                        e.fetch_add(1, Ordering::SeqCst);
                    }
                    f.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        for h in hs {
            rt.block_on(h).unwrap();
        }
        assert_eq!(fired.load(Ordering::SeqCst), N, "each timer fired once");
        assert_eq!(early.load(Ordering::SeqCst), 0, "no timer fired early");
        assert!(rt.stats().total().timers_fired > 0);
    });
}

#[test]
fn timers_from_block_on_and_timeout_racing_completion() {
    with_timeout(60, "timers_outside", || {
        let rt = rt_io(None, Some(2), IoPollers::One);
        rt.block_on(async {
            // On block_on's thread: the outside wheel.
            let t0 = Instant::now();
            hwsched::time::sleep(Duration::from_millis(20)).await;
            assert!(t0.elapsed() >= Duration::from_millis(20));
            let mut wins = 0;
            for i in 0..200u64 {
                // The future and the deadline race; either outcome is
                // correct, but it must be one of them and never a hang.
                let r = hwsched::time::timeout(
                    Duration::from_micros(500),
                    hwsched::spawn(async move {
                        hwsched::time::sleep(Duration::from_micros(i * 5)).await;
                        i
                    }),
                )
                .await;
                if let Ok(v) = r {
                    assert_eq!(v.unwrap(), i);
                    wins += 1;
                }
            }
            assert!(wins > 0, "some futures finished before their deadline");
        });
        // An interval ticks in order, each tick at or after its instant,
        // the first at its start.
        let ticks = rt.block_on(rt.spawn(async {
            let mut last = Instant::now();
            let mut iv = hwsched::time::interval(Duration::from_millis(2));
            for _ in 0..10 {
                let at = iv.tick().await;
                assert!(Instant::now() >= at);
                assert!(at >= last);
                last = at;
            }
            10
        }));
        assert_eq!(ticks.unwrap(), 10);
    });
}

#[test]
#[should_panic(expected = "`period` must be non-zero")]
fn an_interval_with_a_zero_period_panics() {
    let _ = hwsched::time::interval(Duration::ZERO);
}

#[test]
fn an_always_ready_socket_lets_a_ticking_task_run() {
    with_timeout(60, "coop", || {
        // One worker: the reader and the ticker share it.
        let rt = rt_io(None, Some(1), IoPollers::One);
        let ticks = Arc::new(AtomicU64::new(0));
        let t = ticks.clone();
        rt.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            // A peer thread writes without pause: the socket stays ready.
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let written = Arc::new(AtomicU64::new(0));
            let (st, wr) = (stop.clone(), written.clone());
            let writer = thread::spawn(move || {
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                let buf = [7u8; 64 << 10];
                while !st.load(Ordering::Relaxed) {
                    if c.write_all(&buf).is_err() {
                        break;
                    }
                    wr.fetch_add(buf.len() as u64, Ordering::SeqCst);
                }
            });
            let (mut s, _) = listener.accept().await.unwrap();
            // The premise, whatever the machine's load: 64 KiB wait in the
            // socket before the reader starts, a thousand ready reads of
            // 64 B (8 budgets), however slowly the writer runs after.
            while written.load(Ordering::SeqCst) < 64 << 10 {
                hwsched::time::sleep(Duration::from_millis(1)).await;
            }
            let reader = hwsched::spawn(async move {
                // Reads in small pieces so each read finds the socket ready.
                let mut buf = [0u8; 64];
                let mut n = 0u64;
                while n < (64 << 20) {
                    n += s.read(&mut buf).await.unwrap() as u64;
                }
                n
            });
            let ticker = hwsched::spawn(async move {
                for _ in 0..20 {
                    hwsched::yield_now().await;
                    t.fetch_add(1, Ordering::SeqCst);
                }
            });
            // The ticker finishes while the reader still has most of its
            // 64 MiB ahead of it: the budget made the reader yield.
            ticker.await.unwrap();
            assert!(!reader.is_finished(), "the ticker waited for the reader");
            stop.store(true, Ordering::Relaxed);
            drop(reader);
            writer.join().unwrap();
        });
        assert_eq!(ticks.load(Ordering::SeqCst), 20);
        assert!(rt.stats().total().coop_yields > 0, "{}", rt.stats());
    });
}

#[test]
fn creating_a_socket_outside_any_runtime_is_an_error_that_says_so() {
    // Inside `with_timeout`: a socket made and closed here must not be
    // seen by the tests that count descriptors.
    with_timeout(60, "socket_outside_runtime", || {
        let r = futures_lite::future::block_on(TcpListener::bind("127.0.0.1:0"));
        let e = r.expect_err("no runtime");
        assert!(e.to_string().contains("no hwsched runtime"), "{e}");
    });
}

#[test]
fn a_timer_far_enough_to_cascade_does_not_spin_the_poller() {
    with_timeout(60, "timer_cascade", || {
        // 300 ms sits in the wheel's second level, whose slot starts before
        // the deadline: the sleeper wakes at the slot's start, cascades the
        // timer, and sleeps again until the deadline, a handful of turns in
        // all (a look keyed on the deadline instead spun the poller with a
        // zero timeout until it came).
        let rt = rt_io(None, Some(2), IoPollers::One);
        for on_worker in [false, true] {
            let before = rt.stats().total().driver_turns;
            let t0 = Instant::now();
            if on_worker {
                rt.block_on(rt.spawn(hwsched::time::sleep(Duration::from_millis(300))))
                    .unwrap();
            } else {
                rt.block_on(hwsched::time::sleep(Duration::from_millis(300)));
            }
            assert!(t0.elapsed() >= Duration::from_millis(300));
            let turns = rt.stats().total().driver_turns - before;
            assert!(
                turns < 100,
                "{turns} poller turns for one timer (on a worker: {on_worker})"
            );
        }
    });
}

/// The panic message of `f`, which must panic.
fn panic_message(f: impl FnOnce()) -> String {
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("it panics");
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// A timer takes the driver of the runtime whose context its thread has:
/// a worker's, `block_on`'s, a blocking thread's; none outside any. (A
/// timer that is refused panics at its first poll; a minute is long enough
/// that it is not already due then.)
#[test]
fn a_timer_uses_the_driver_of_its_threads_runtime() {
    // Whole, inside `with_timeout`: its runtimes open and close the
    // driver's descriptors, which the tests that count them must not see.
    with_timeout(60, "timers_outside_runtime", || {
        let refused =
            || futures_lite::future::block_on(hwsched::time::sleep(Duration::from_secs(60)));
        let m = panic_message(refused);
        assert!(m.contains("outside any hwsched runtime"), "{m}");
        let off = Runtime::builder()
            .worker_threads(1)
            .enable_io(false)
            .build()
            .unwrap();
        let m = panic_message(|| off.block_on(hwsched::time::sleep(Duration::from_secs(60))));
        assert!(m.contains("cannot keep timers"), "{m}");
        let m = off
            .block_on(off.spawn_blocking(move || panic_message(refused)))
            .unwrap();
        assert!(m.contains("cannot keep timers"), "{m}");

        // Timers on a worker, in block_on, on a blocking thread.
        let rt = rt_io(None, Some(2), IoPollers::One);
        let h = rt.handle();
        let sleep = || hwsched::time::sleep(Duration::from_millis(1));
        h.block_on(sleep());
        h.block_on(h.spawn(sleep())).unwrap();
        h.block_on(h.spawn_blocking(move || futures_lite::future::block_on(sleep())))
            .unwrap();
    });
}

/// Work conservation with the driver's batches: readiness for several
/// sockets arrives in one poller turn, and the first task of the batch to
/// run then runs a long poll (1 s without yielding). The batch's other
/// tasks must start elsewhere while it runs: a batch kept on the worker
/// that polled it (its LIFO slot and private batch queue) must not wait
/// behind that poll while the other worker sleeps.
///
/// The batch's tasks beyond the LIFO slot sit in the worker's private
/// batch queue (`Core::push_batch`), and the other worker parked before the
/// batch came: the owner's check wakes it to watch (no worker watched), and
/// when its tick ends it takes the queue, whose batch is older than
/// `migration_cost` by then (sched/watch.rs).
#[test]
fn a_batch_whose_first_task_runs_long_starts_the_rest_elsewhere() {
    const K: usize = 4;
    const BLOCK: Duration = Duration::from_secs(1);
    const START_WITHIN: Duration = Duration::from_millis(100);
    with_timeout(120, "batch_first_task_long", || {
        let rt = rt_io(None, Some(2), IoPollers::One);
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let starts = Arc::new(std::sync::Mutex::new(Vec::<Instant>::new()));
        let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (s, f) = (starts.clone(), first.clone());
        let server = rt.spawn(async move {
            let mut hs = Vec::new();
            for _ in 0..K {
                let (mut sock, _) = listener.accept().await.unwrap();
                let (s, f) = (s.clone(), f.clone());
                hs.push(hwsched::spawn(async move {
                    let mut b = [0u8; 1];
                    sock.read_exact(&mut b).await.unwrap();
                    s.lock().unwrap().push(Instant::now());
                    if f.swap(false, Ordering::SeqCst) {
                        let t0 = Instant::now();
                        while t0.elapsed() < BLOCK {
                            std::hint::spin_loop();
                        }
                    }
                }));
            }
            for h in hs {
                h.await.unwrap();
            }
        });
        let mut clients: Vec<std::net::TcpStream> = (0..K)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        // Every server task waits in its read, and both workers sleep.
        thread::sleep(Duration::from_millis(200));
        let sent = Instant::now();
        for c in &mut clients {
            c.write_all(&[1]).unwrap();
        }
        thread::sleep(START_WITHIN * 2);
        let stats = rt.stats();
        let v = starts.lock().unwrap().clone();
        let late: Vec<Duration> = v
            .iter()
            .map(|t| t.duration_since(sent))
            .filter(|d| *d > START_WITHIN)
            .collect();
        assert!(
            v.len() == K && late.is_empty(),
            "{} of {K} tasks started while the first one ran, {} later than {START_WITHIN:?} \
             ({late:?}); stats:\n{stats}",
            v.len(),
            late.len(),
        );
        rt.block_on(server).unwrap();
    });
}
