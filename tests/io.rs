//! I/O and timers with `Builder::enable_io` (the `io` feature): an idle
//! worker drives async-io's reactor, so I/O and timer wakes come from a
//! worker; no wake is lost between the reactor and the workers; shutdown
//! with sockets open drops every task once and stops every worker.
//!
//! `cargo test --features io --test io`; under load:
//! `scripts/under-hog.sh 30 --features io --test io`.

use std::future::Future;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use async_io::Async;
use futures_lite_io::{read_exact, write_all};
use hwsched::{Runtime, TopologySource};

mod common;
use common::{with_timeout, BIG};

/// Minimal async read/write helpers over `Async<TcpStream>` (no extra
/// dependency: async-io's `read_with` / `write_with`).
mod futures_lite_io {
    use super::*;

    pub async fn read_exact(s: &Async<TcpStream>, buf: &mut [u8]) -> std::io::Result<()> {
        let mut got = 0;
        while got < buf.len() {
            let n = s.read_with(|mut t| t.read(&mut buf[got..])).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            got += n;
        }
        Ok(())
    }

    pub async fn write_all(s: &Async<TcpStream>, buf: &[u8]) -> std::io::Result<()> {
        let mut sent = 0;
        while sent < buf.len() {
            sent += s.write_with(|mut t| t.write(&buf[sent..])).await?;
        }
        Ok(())
    }
}

/// The I/O tests run one at a time: async-io's reactor is process-wide, so
/// another test's runtime waiting in it would deliver this one's wakes (as
/// a thread outside this runtime).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn rt_io(topology: Option<&str>, workers: Option<usize>) -> Runtime {
    let mut b = Runtime::builder().enable_io(true);
    if let Some(t) = topology {
        b = b.topology(TopologySource::Synthetic(t.into()));
    }
    if let Some(n) = workers {
        b = b.worker_threads(n);
    }
    b.build().expect("a runtime with I/O")
}

/// Waits until every worker of `rt` sleeps.
fn settle(rt: &Runtime) {
    let t0 = Instant::now();
    while rt.stats().asleep < rt.workers() && t0.elapsed() < Duration::from_secs(5) {
        thread::sleep(Duration::from_millis(2));
    }
}

/// Polls `F`, recording the name of each thread that wakes it.
struct RecordWaker<F> {
    inner: F,
    wakers: Arc<Mutex<Vec<String>>>,
}

struct Recorder {
    inner: Waker,
    wakers: Arc<Mutex<Vec<String>>>,
}

impl Wake for Recorder {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let name = thread::current().name().unwrap_or("<unnamed>").to_owned();
        self.wakers.lock().unwrap().push(name);
        self.inner.wake_by_ref();
    }
}

impl<F: Future + Unpin> Future for RecordWaker<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let w = Waker::from(Arc::new(Recorder {
            inner: cx.waker().clone(),
            wakers: self.wakers.clone(),
        }));
        Pin::new(&mut self.inner).poll(&mut Context::from_waker(&w))
    }
}

fn record<F: Future + Unpin>(inner: F, wakers: &Arc<Mutex<Vec<String>>>) -> RecordWaker<F> {
    RecordWaker {
        inner,
        wakers: wakers.clone(),
    }
}

/// A task waiting on a socket read and on a timer, on an idle runtime, is
/// woken by a worker thread (the one sleeping in the reactor), for most of
/// 20 round trips: the waker's thread name is recorded. async-io's own
/// thread may take the reactor when a worker leaves it (its back-off), so
/// not every wake can be a worker's; the counters say the same.
#[test]
fn io_and_timer_wakes_come_from_a_worker_in_the_reactor() {
    let _serial = serial();
    with_timeout(60, "io_wakes_from_worker", || {
        let rt = rt_io(None, Some(2));
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
        let addr = listener.get_ref().local_addr().unwrap();
        // A client outside the runtime: connects, waits, sends 5 bytes 20
        // times, reading each echo.
        let client = thread::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            for i in 0..20u8 {
                thread::sleep(Duration::from_millis(5));
                c.write_all(&[i; 5]).unwrap();
                let mut back = [0u8; 5];
                c.read_exact(&mut back).unwrap();
                assert_eq!(back, [i; 5]);
            }
        });
        settle(&rt);
        let before = rt.stats();
        let io_wakers = Arc::new(Mutex::new(Vec::new()));
        let timer_wakers = Arc::new(Mutex::new(Vec::new()));
        let (iw, tw) = (io_wakers.clone(), timer_wakers.clone());
        let server = rt.spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 5];
            for _ in 0..20 {
                // Wait for readability with the recording waker, then read.
                record(Box::pin(s.readable()), &iw).await.unwrap();
                read_exact(&s, &mut buf).await.unwrap();
                write_all(&s, &buf).await.unwrap();
            }
            for _ in 0..5 {
                record(
                    Box::pin(async_io::Timer::after(Duration::from_millis(2))),
                    &tw,
                )
                .await;
            }
        });
        rt.block_on(server).unwrap();
        client.join().unwrap();
        let after = rt.stats();
        let io = io_wakers.lock().unwrap().clone();
        let timers = timer_wakers.lock().unwrap().clone();
        let on_worker = |v: &[String]| v.iter().filter(|n| n.starts_with("hwsched-worker")).count();
        println!(
            "socket wakes by thread: {io:?}\ntimer wakes by thread: {timers:?}\n\
             counters: {} wakes from the reactor on a worker, {} from other threads",
            after.total().wakes_by_reactor - before.total().wakes_by_reactor,
            after.external.wakes_foreign - before.external.wakes_foreign
        );
        assert!(
            io.len() >= 20 && timers.len() >= 5,
            "every wait was woken once at least"
        );
        assert!(
            2 * on_worker(&io) > io.len(),
            "most socket wakes come from a worker: {io:?}\n{after}"
        );
        assert!(
            2 * on_worker(&timers) > timers.len(),
            "most timer wakes come from a worker: {timers:?}\n{after}"
        );
        assert!(
            after.total().wakes_by_reactor > before.total().wakes_by_reactor,
            "the counters saw reactor wakes on a worker\n{after}"
        );
    });
}

/// Many sockets and timers at once: every round trip completes (no wake is
/// lost between the reactor and the workers).
fn stress(rt: &Runtime, conns: usize, rounds: usize) {
    let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
    let addr = listener.get_ref().local_addr().unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let server = rt.spawn(async move {
        let mut hs = Vec::new();
        for _ in 0..conns {
            let (s, _) = listener.accept().await.unwrap();
            let d = d.clone();
            hs.push(hwsched::spawn(async move {
                let mut buf = [0u8; 8];
                for r in 0..rounds {
                    read_exact(&s, &mut buf).await.unwrap();
                    if r % 4 == 0 {
                        hwsched::time::sleep(Duration::from_micros(200)).await;
                    }
                    write_all(&s, &buf).await.unwrap();
                }
                d.fetch_add(1, Ordering::SeqCst);
            }));
        }
        for h in hs {
            h.await.unwrap();
        }
    });
    // Clients are tasks too (async sockets), so both ends' wakes go
    // through the reactor.
    let clients: Vec<_> = (0..conns)
        .map(|i| {
            rt.spawn(async move {
                let c = Async::<TcpStream>::connect(addr).await.unwrap();
                let mut back = [0u8; 8];
                for r in 0..rounds {
                    let msg = [(i + r) as u8; 8];
                    write_all(&c, &msg).await.unwrap();
                    read_exact(&c, &mut back).await.unwrap();
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
}

#[test]
fn many_sockets_and_timers_complete_on_2_workers() {
    let _serial = serial();
    with_timeout(120, "io_stress_2", || {
        let rt = rt_io(None, Some(2));
        stress(&rt, 64, 50);
    });
}

#[test]
fn many_sockets_and_timers_complete_on_32_workers() {
    let _serial = serial();
    with_timeout(120, "io_stress_32", || {
        let rt = rt_io(Some(BIG), None);
        stress(&rt, 64, 50);
    });
}

#[test]
fn shutdown_with_sockets_open_drops_every_task_once_and_stops_every_worker() {
    let _serial = serial();
    with_timeout(60, "io_shutdown", || {
        let stopped = Arc::new(AtomicUsize::new(0));
        let s2 = stopped.clone();
        let rt = Runtime::builder()
            .worker_threads(2)
            .enable_io(true)
            .on_thread_stop(move || {
                s2.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap();
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
        let addr = listener.get_ref().local_addr().unwrap();
        // 16 connections whose server side waits for bytes that never come.
        let clients: Vec<_> = (0..16).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let dropped = Arc::new(AtomicUsize::new(0));
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let d = dropped.clone();
        let accepted = rt.block_on(async move {
            let mut hs = Vec::new();
            for _ in 0..16 {
                let (s, _) = listener.accept().await.unwrap();
                let c = Counted(d.clone());
                hs.push(hwsched::spawn(async move {
                    let _c = c;
                    let mut buf = [0u8; 1];
                    let _ = read_exact(&s, &mut buf).await;
                }));
            }
            hs
        });
        thread::sleep(Duration::from_millis(50));
        let t0 = Instant::now();
        drop(rt);
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "shutdown returned promptly with sockets open"
        );
        assert_eq!(dropped.load(Ordering::SeqCst), 16, "each task dropped once");
        assert_eq!(stopped.load(Ordering::SeqCst), 2, "every worker stopped");
        drop(accepted);
        drop(clients);
    });
}
