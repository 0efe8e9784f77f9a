//! I/O side by side: a TCP echo server and an HTTP/1.1 "hello" server
//! (hyper 1.x) on hwsched with its own driver (`hwsched::net`, hyper's I/O
//! traits implemented directly), on hwsched running async-io sockets
//! (`hwsched-asyncio`: woken from async-io's own thread, through smol-hyper's
//! adapter), on tokio (its own net driver, hyper-util's `TokioIo`) and on
//! async-executor (threads in `async_io::block_on(ex.run(..))`, smol's way).
//!
//! ```text
//! cargo bench --features hyper --bench io -- [--runs 5] [--secs 3] [--workers 2] [--only echo|http] [--conns 64]
//! cargo bench --features hyper --bench io -- --only mixed [--runs 5] [--secs 3] [--workers 2] \
//!     [--conns 64] [--slow-conns 1] [--slow-us 1000] [--slow-load F] [--kinds hwsched,tokio]
//! cargo bench --features server,tokio-compat --bench io -- --only axum|reqwest [--runs 5] [--secs 3] \
//!     [--workers 2] [--conns 64]
//! ```
//!
//! `HWSCHED_TUNE` sets hwsched's tunables for both hwsched rows (as in the
//! other benches: `HWSCHED_TUNE=idle=governed`); `HWSCHED_PIN=0` leaves
//! their workers unpinned; `HWSCHED_TIMING=1` turns poll timing on and,
//! in the mixed bench, prints each round's runtime statistics (run-queue
//! delay, poll durations) on stderr.
//!
//! Each round runs every server once, in a rotating order, on the same
//! worker count:
//! - **echo**: a client process (this binary, one thread, 64 connections on
//!   a local async-executor) makes 500 round trips of 64 B per connection;
//!   round trips per second from the client's wall time;
//! - **http**: `wrk -t1 -c<conns> -d<secs>s` (apt package `wrk`), requests per
//!   second as wrk prints them.
//!
//! Beside each figure: the server process's CPU time (user + system, from
//! `getrusage`, async-io's thread included) per round trip or request, and
//! its voluntary context switches per operation: every cost the runtime
//! causes is charged. hwsched rows add the wakes by origin. The summary
//! gives medians and the median of the per-round ratios of hwsched to the
//! best peer.
//!
//! `--only axum` serves an axum Router as its user would: on hwsched with
//! `hwsched::hyper::serve` (its own sockets, HTTP/1 and HTTP/2, a header
//! read timeout), on tokio with `axum::serve`; wrk as above asks for `GET
//! /` (a text hello), then `GET /json` (a small struct serialized, the
//! Router's state read). `--only reqwest` runs reqwest's client against a
//! hyper hello server on tokio in a child process (one thread): one task
//! GETting back to back, then `--conns` such tasks sharing one
//! `reqwest::Client`, in hwsched tasks through the tokio bridge
//! (`Builder::tokio_compat`) against tokio tasks on tokio's multi-thread
//! runtime, `--workers` threads each; requests per second, the client
//! process's CPU per request (the bridge's thread included), and the
//! requests' p50 and p99.
//!
//! Without `--only`, echo and http run. `--only mixed` runs instead the
//! **mixed** bench: does cheap work wait behind expensive work? The HTTP
//! server has two routes: `/`, the hello above, and `/slow`, which holds its
//! worker for `--slow-us` microseconds (default 1000; spinning on
//! `Instant::now()` without an await) and then answers the same hello. A
//! client process (this binary, one thread, async-io sockets on a local
//! executor) opens `--conns` keep-alive connections (default 64) that each
//! send `GET /` as soon as the previous answer arrived, and `--slow-conns`
//! (default 1) that do the same with `GET /slow`, all connected before the
//! clock starts, for `--secs` seconds. With `--slow-load F` the slow
//! connections send on a schedule instead (open loop): together they offer
//! `F` CPUs of `/slow` work, `F * 1e6 / slow-us` requests per second spread
//! evenly over them, each request sent at its time or, if the previous
//! answer came after that, at once. Back to back, the runtime that answers
//! `/slow` sooner is sent more of it and has less CPU left for `/`; on a
//! schedule both serve the same slow work while they keep up (the slow
//! rate in the table shows whether they did). It records every request's latency
//! (the request's write to the end of its response's read), and the
//! percentiles are exact, from the sorted samples (nearest rank). By
//! default the servers are hwsched on its own driver and tokio on its own
//! (`--kinds` adds `async-executor` or `hwsched-asyncio`). Each line: the
//! cheap requests per second; their latency p50, p99, p99.9 and maximum in
//! microseconds; the slow requests per second (at most `slow-conns * 1e6 /
//! slow-us`); the server's CPU time per cheap request, the `/slow`
//! handlers' spinning excluded (each spin measures its own thread's CPU
//! time, `CLOCK_THREAD_CPUTIME_ID`; the rest of a slow request's work is
//! charged); its voluntary context switches per cheap request. The
//! summary gives each server's medians and the medians of the per-round
//! ratios hwsched / tokio: throughput (cheap and slow; above 1: hwsched
//! serves more), the cheap requests' p50, p99 and p99.9 and the CPU per
//! cheap request (below 1: hwsched's is lower).

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use async_io::Async;
use futures_lite::{AsyncReadExt, AsyncWriteExt};

#[path = "common/rt.rs"]
mod rt;

const CLIENTS: usize = 64;

/// wrk's connection count, and the mixed bench's cheap connections
/// (`--conns`, default 64).
static WRK_CONNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(64);
const ROUNDS: usize = 500;
const MSG: usize = 64;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    HwIo,
    HwNoIo,
    Tokio,
    Ae,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::HwIo => "hwsched",
            Kind::HwNoIo => "hwsched-asyncio",
            Kind::Tokio => "tokio",
            Kind::Ae => "async-executor",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Bench {
    Echo,
    Http,
    /// HTTP with a cheap route `/` and an expensive `/slow`.
    Mixed,
    /// An axum Router (`GET /`, a text hello): `hwsched::hyper::serve` on
    /// hwsched's sockets against `axum::serve` on tokio (`server` feature).
    Axum,
    /// The same Router's JSON route (`GET /json`, a serialized struct).
    AxumJson,
    /// reqwest's client against a local hyper server (a child process):
    /// in hwsched tasks through the tokio bridge against tokio tasks
    /// (`tokio-compat` feature).
    Reqwest,
}

impl Bench {
    /// The path wrk asks for.
    fn path(self) -> &'static str {
        match self {
            Bench::AxumJson => "/json",
            _ => "/",
        }
    }
}

/// A server running on one runtime; dropping it stops the runtime.
struct Server {
    addr: SocketAddr,
    rt: Rt,
}

enum Rt {
    Hw(hwsched::Runtime),
    /// Kept alive until the server is dropped.
    #[allow(dead_code)]
    Tokio(tokio::runtime::Runtime),
    Ae {
        stop: Option<async_channel::Sender<()>>,
        threads: Vec<thread::JoinHandle<()>>,
    },
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Rt::Ae { stop, threads } = &mut self.rt {
            drop(stop.take());
            for t in threads.drain(..) {
                let _ = t.join();
            }
        }
    }
}

async fn hello(
    _req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<http_body_util::Full<hyper::body::Bytes>>, Infallible> {
    Ok(hyper::Response::new(http_body_util::Full::new(
        hyper::body::Bytes::from_static(b"Hello, world!\n"),
    )))
}

/// How long `/slow` spins in the mixed bench (`--slow-us`, default 1000).
static SLOW_US: AtomicU64 = AtomicU64::new(1000);
/// The CPU time `/slow` handlers have spent spinning (each thread's own
/// clock, `CLOCK_THREAD_CPUTIME_ID`), in nanoseconds.
static SPIN_NS: AtomicU64 = AtomicU64::new(0);
/// `/slow` handlers spinning now.
static SPINNING: AtomicUsize = AtomicUsize::new(0);

/// CPU time of the calling thread.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the `timespec` we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime: {}", std::io::Error::last_os_error());
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The mixed bench's service: `/slow` holds its worker for `SLOW_US`
/// microseconds (spinning on the clock, no await), then answers as `/`
/// does; every other path is [`hello`].
async fn mixed(
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<http_body_util::Full<hyper::body::Bytes>>, Infallible> {
    if req.uri().path() == "/slow" {
        SPINNING.fetch_add(1, Relaxed);
        let cost = Duration::from_micros(SLOW_US.load(Relaxed));
        let cpu0 = thread_cpu_ns();
        let t0 = Instant::now();
        while t0.elapsed() < cost {
            std::hint::spin_loop();
        }
        SPIN_NS.fetch_add(thread_cpu_ns() - cpu0, Relaxed);
        SPINNING.fetch_sub(1, Relaxed);
    }
    hello(req).await
}

/// The accept loop on async-io sockets (hwsched and async-executor);
/// `spawn` detaches a connection task on the runtime.
async fn serve_async_io(
    listener: Async<TcpListener>,
    bench: Bench,
    spawn: impl Fn(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>),
) {
    loop {
        let Ok((s, _)) = listener.accept().await else {
            continue;
        };
        let _ = s.get_ref().set_nodelay(true);
        match bench {
            Bench::Echo => spawn(Box::pin(async move {
                let _ = futures_lite::io::copy(&s, &mut &s).await;
            })),
            Bench::Http => spawn(Box::pin(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(
                        smol_hyper::rt::FuturesIo::new(s),
                        hyper::service::service_fn(hello),
                    )
                    .await;
            })),
            Bench::Mixed => spawn(Box::pin(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(
                        smol_hyper::rt::FuturesIo::new(s),
                        hyper::service::service_fn(mixed),
                    )
                    .await;
            })),
            Bench::Axum | Bench::AxumJson | Bench::Reqwest => {
                unreachable!("{bench:?} has servers of its own")
            }
        }
    }
}

/// The accept loop on hwsched's own sockets.
async fn serve_hwsched(listener: hwsched::net::TcpListener, bench: Bench) {
    loop {
        let Ok((s, _)) = listener.accept().await else {
            continue;
        };
        let _ = s.set_nodelay(true);
        match bench {
            Bench::Echo => drop(hwsched::spawn(async move {
                let (mut r, mut w) = s.into_split();
                let _ = futures_lite::io::copy(&mut r, &mut w).await;
            })),
            Bench::Http => drop(hwsched::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(s, hyper::service::service_fn(hello))
                    .await;
            })),
            Bench::Mixed => drop(hwsched::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(s, hyper::service::service_fn(mixed))
                    .await;
            })),
            Bench::Axum | Bench::AxumJson | Bench::Reqwest => {
                unreachable!("{bench:?} has servers of its own")
            }
        }
    }
}

fn start(kind: Kind, bench: Bench, workers: usize) -> Server {
    if matches!(bench, Bench::Axum | Bench::AxumJson) {
        return start_axum(kind, workers);
    }
    match kind {
        Kind::HwIo => {
            // HWSCHED_TUNE, HWSCHED_PIN and HWSCHED_TIMING apply
            // (benches/common/rt.rs, `env_builder`).
            let rt = rt::env_builder(workers).build().expect("hwsched runtime");
            let listener = rt
                .block_on(hwsched::net::TcpListener::bind("127.0.0.1:0"))
                .expect("bind");
            let addr = listener.local_addr().unwrap();
            drop(rt.spawn(serve_hwsched(listener, bench)));
            Server {
                addr,
                rt: Rt::Hw(rt),
            }
        }
        Kind::HwNoIo => {
            let rt = rt::env_builder(workers).build().expect("hwsched runtime");
            let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).expect("bind");
            let addr = listener.get_ref().local_addr().unwrap();
            drop(rt.spawn(serve_async_io(listener, bench, |f| drop(hwsched::spawn(f)))));
            Server {
                addr,
                rt: Rt::Hw(rt),
            }
        }
        Kind::Tokio => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()
                .expect("tokio runtime");
            let listener = rt
                .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
                .expect("bind");
            let addr = listener.local_addr().unwrap();
            rt.spawn(async move {
                loop {
                    let Ok((mut s, _)) = listener.accept().await else {
                        continue;
                    };
                    let _ = s.set_nodelay(true);
                    match bench {
                        Bench::Echo => tokio::spawn(async move {
                            let (mut r, mut w) = s.split();
                            let _ = tokio::io::copy(&mut r, &mut w).await;
                        }),
                        Bench::Http => tokio::spawn(async move {
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(
                                    hyper_util::rt::TokioIo::new(s),
                                    hyper::service::service_fn(hello),
                                )
                                .await;
                        }),
                        Bench::Mixed => tokio::spawn(async move {
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(
                                    hyper_util::rt::TokioIo::new(s),
                                    hyper::service::service_fn(mixed),
                                )
                                .await;
                        }),
                        Bench::Axum | Bench::AxumJson | Bench::Reqwest => {
                            unreachable!("{bench:?} has servers of its own")
                        }
                    };
                }
            });
            Server {
                addr,
                rt: Rt::Tokio(rt),
            }
        }
        Kind::Ae => {
            let ex = Arc::new(async_executor::Executor::new());
            let (stop, stopped) = async_channel::bounded::<()>(1);
            let threads = (0..workers)
                .map(|i| {
                    let (ex, stopped) = (ex.clone(), stopped.clone());
                    thread::Builder::new()
                        .name(format!("async-executor-{i}"))
                        .spawn(move || {
                            let _ = async_io::block_on(ex.run(stopped.recv()));
                        })
                        .unwrap()
                })
                .collect();
            let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).expect("bind");
            let addr = listener.get_ref().local_addr().unwrap();
            let ex2 = ex.clone();
            ex.spawn(serve_async_io(listener, bench, move |f| {
                ex2.spawn(f).detach()
            }))
            .detach();
            Server {
                addr,
                rt: Rt::Ae {
                    stop: Some(stop),
                    threads,
                },
            }
        }
    }
}

/// The axum benches' Router: `GET /` answers a text hello, `GET /json` a
/// small struct as JSON (the Router's state read on every request).
#[cfg(feature = "server")]
fn axum_app(runtime: &'static str) -> axum::Router {
    #[derive(serde::Serialize)]
    struct Greeting {
        message: &'static str,
        runtime: &'static str,
        id: u64,
    }
    let ids = Arc::new(AtomicU64::new(0));
    axum::Router::new()
        .route("/", axum::routing::get(|| async { "Hello, world!\n" }))
        .route(
            "/json",
            axum::routing::get(
                |axum::extract::State((rt, ids)): axum::extract::State<(
                    &'static str,
                    Arc<AtomicU64>,
                )>| async move {
                    axum::Json(Greeting {
                        message: "Hello, world!",
                        runtime: rt,
                        id: ids.fetch_add(1, Relaxed),
                    })
                },
            ),
        )
        .with_state((runtime, ids))
}

/// The axum benches' servers, each as its user would write it:
/// `hwsched::hyper::serve` (defaults: HTTP/1 and HTTP/2, a 30 s header
/// read timeout) on hwsched's own listener, and `axum::serve` on tokio's.
#[cfg(feature = "server")]
fn start_axum(kind: Kind, workers: usize) -> Server {
    match kind {
        Kind::HwIo => {
            let rt = rt::env_builder(workers).build().expect("hwsched runtime");
            let listener = rt
                .block_on(hwsched::net::TcpListener::bind("127.0.0.1:0"))
                .expect("bind");
            let addr = listener.local_addr().unwrap();
            drop(rt.spawn(async move {
                let _ = hwsched::hyper::serve(listener, axum_app("hwsched")).await;
            }));
            Server {
                addr,
                rt: Rt::Hw(rt),
            }
        }
        Kind::Tokio => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()
                .expect("tokio runtime");
            let listener = rt
                .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
                .expect("bind");
            let addr = listener.local_addr().unwrap();
            rt.spawn(async move {
                let _ = axum::serve(listener, axum_app("tokio")).await;
            });
            Server {
                addr,
                rt: Rt::Tokio(rt),
            }
        }
        other => panic!(
            "the axum benches run hwsched and tokio, not {}",
            other.name()
        ),
    }
}

#[cfg(not(feature = "server"))]
fn start_axum(_: Kind, _: usize) -> Server {
    panic!("the axum benches need the `server` feature: cargo bench --features server,tokio-compat --bench io")
}

/// One reqwest client loop: GETs `url` one after the other until
/// `deadline` (the request in flight then is finished and counted), each
/// body read whole. Returns the requests made and their latencies (ns).
#[cfg(feature = "tokio-compat")]
async fn reqwest_loop(client: reqwest::Client, url: String, deadline: Instant) -> Vec<u64> {
    let mut lat = Vec::with_capacity(1 << 14);
    let mut now = Instant::now();
    while now < deadline {
        let body = client
            .get(&url)
            .send()
            .await
            .expect("a GET")
            .bytes()
            .await
            .expect("a body");
        assert_eq!(&body[..], b"Hello, world!\n");
        let t = Instant::now();
        lat.push((t - now).as_nanos() as u64);
        now = t;
    }
    lat
}

/// One round of the reqwest bench: `tasks` tasks sharing one
/// `reqwest::Client`, each GETting `url` back to back for `secs`; in
/// hwsched tasks on a runtime with the tokio bridge (`Kind::HwIo`), or in
/// tokio tasks on tokio's multi-thread runtime (`Kind::Tokio`), `workers`
/// threads either way. The figures: requests per second, this process's
/// CPU time per request (the server is another process; the bridge's
/// thread is charged to hwsched), its voluntary context switches per
/// request, and the requests' p50 and p99 latency (us).
#[cfg(feature = "tokio-compat")]
fn measure_reqwest(
    kind: Kind,
    addr: SocketAddr,
    workers: usize,
    tasks: usize,
    secs: u64,
) -> [f64; 5] {
    let url = format!("http://{addr}/");
    type Loop = std::pin::Pin<Box<dyn std::future::Future<Output = Vec<u64>> + Send>>;
    let run = move |spawn: &dyn Fn(Loop) -> Loop| {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(secs);
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                spawn(Box::pin(reqwest_loop(
                    client.clone(),
                    url.clone(),
                    deadline,
                )))
            })
            .collect();
        async move {
            let mut all = Vec::new();
            for h in handles {
                all.extend(h.await);
            }
            all
        }
    };
    let (lat, wall, cpu, csw) = match kind {
        Kind::HwIo => {
            let rt = rt::env_builder(workers)
                .tokio_compat(true)
                .build()
                .expect("hwsched runtime with the tokio bridge");
            let (cpu0, csw0) = usage();
            let t0 = Instant::now();
            let lat = rt.block_on(async {
                run(&|f| {
                    let h = hwsched::spawn(f);
                    Box::pin(async move { h.await.expect("a client task") })
                })
                .await
            });
            let wall = t0.elapsed();
            let (cpu1, csw1) = usage();
            drop(rt);
            (lat, wall, cpu1 - cpu0, csw1 - csw0)
        }
        Kind::Tokio => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()
                .expect("tokio runtime");
            let (cpu0, csw0) = usage();
            let t0 = Instant::now();
            let lat = rt.block_on(async {
                run(&|f| {
                    let h = tokio::spawn(f);
                    Box::pin(async move { h.await.expect("a client task") })
                })
                .await
            });
            let wall = t0.elapsed();
            let (cpu1, csw1) = usage();
            drop(rt);
            (lat, wall, cpu1 - cpu0, csw1 - csw0)
        }
        other => panic!(
            "the reqwest bench runs hwsched and tokio, not {}",
            other.name()
        ),
    };
    let mut lat = lat;
    lat.sort_unstable();
    let n = lat.len() as f64;
    [
        n / wall.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / n,
        csw as f64 / n,
        quantile(&lat, 0.5) as f64 / 1e3,
        quantile(&lat, 0.99) as f64 / 1e3,
    ]
}

/// The reqwest bench: a hyper hello server on tokio (one thread, in a
/// child process of this binary: `--serve tokio`), and the client in this
/// process, sequential (one task) and concurrent (`--conns` tasks, default
/// 64), `runs` rounds alternating the runtimes; medians and hwsched / tokio.
#[cfg(feature = "tokio-compat")]
fn run_reqwest(runs: usize, workers: usize, secs: u64, conns: usize) {
    let mut server = Command::new(std::env::current_exe().unwrap())
        .args(["--serve", "tokio", "--only", "http", "--workers", "1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the server process");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.as_mut().unwrap()),
        &mut line,
    )
    .expect("the server's address");
    let addr: SocketAddr = line.trim().parse().expect("the server's address");
    println!(
        "\n## reqwest: GET / of a hyper hello server on tokio (1 thread, another process), \
         client on {workers} workers, {secs} s per round"
    );
    println!("requests/s, client CPU us per request, voluntary csw per request, p50 / p99 us");
    for tasks in [1, conns] {
        let kinds = [Kind::HwIo, Kind::Tokio];
        let mut all: [Vec<[f64; 5]>; 2] = [Vec::new(), Vec::new()];
        for round in 0..runs {
            for j in 0..2 {
                let k = (round + j) % 2;
                let s = measure_reqwest(kinds[k], addr, workers, tasks, secs);
                println!(
                    "round {round} {tasks:>3} tasks {:>8} {:>9.0} req/s {:>7.2} us/req {:>6.3} csw/req  p50 {:>8.1}  p99 {:>8.1} us",
                    kinds[k].name(),
                    s[0],
                    s[1],
                    s[2],
                    s[3],
                    s[4]
                );
                all[k].push(s);
            }
        }
        let med = |k: usize, i: usize| median(all[k].iter().map(|s| s[i]).collect());
        println!("medians over {runs} rounds, {tasks} tasks:");
        for (k, kind) in kinds.iter().enumerate() {
            println!(
                "{:>15} {:>9.0} req/s {:>7.2} us/req {:>6.3} csw/req  p50 {:>8.1}  p99 {:>8.1} us",
                kind.name(),
                med(k, 0),
                med(k, 1),
                med(k, 2),
                med(k, 3),
                med(k, 4)
            );
        }
        let ratio = |i: usize| -> (f64, String) {
            let r: Vec<f64> = (0..runs).map(|x| all[0][x][i] / all[1][x][i]).collect();
            let rounds = r
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(" ");
            (median(r), rounds)
        };
        let (tp, tp_rounds) = ratio(0);
        println!(
            "hwsched / tokio, medians of the per-round ratios: throughput {tp:.2} (rounds {tp_rounds}), \
             CPU per request {:.2}, p50 {:.2}, p99 {:.2}",
            ratio(1).0,
            ratio(3).0,
            ratio(4).0
        );
    }
    let _ = server.kill();
    let _ = server.wait();
}

#[cfg(not(feature = "tokio-compat"))]
fn run_reqwest(_: usize, _: usize, _: u64, _: usize) {
    panic!("the reqwest bench needs the `tokio-compat` feature: cargo bench --features server,tokio-compat --bench io")
}

/// CPU time (user + system) and voluntary context switches of this process.
fn usage() -> (Duration, u64) {
    // SAFETY: getrusage writes a `rusage` we own; an all-zero rusage is a
    // valid value of the plain C struct.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(ru.ru_utime) + tv(ru.ru_stime), ru.ru_nvcsw as u64)
}

/// The echo client (run as a child process): 64 connections on one thread,
/// 500 round trips each; prints its wall time and the 99th percentile of
/// the round trips' latencies (write to the end of the read), in
/// nanoseconds.
fn echo_client(addr: SocketAddr) {
    let ex = async_executor::LocalExecutor::new();
    let t0 = Instant::now();
    let mut lat: Vec<u64> = async_io::block_on(ex.run(async {
        let tasks: Vec<_> = (0..CLIENTS)
            .map(|i| {
                ex.spawn(async move {
                    let mut c = Async::<TcpStream>::connect(addr).await.expect("connect");
                    c.get_ref().set_nodelay(true).unwrap();
                    let msg = [i as u8; MSG];
                    let mut back = [0u8; MSG];
                    let mut lat = Vec::with_capacity(ROUNDS);
                    for _ in 0..ROUNDS {
                        let t = Instant::now();
                        c.write_all(&msg).await.unwrap();
                        c.read_exact(&mut back).await.unwrap();
                        lat.push(t.elapsed().as_nanos() as u64);
                        assert_eq!(back, msg);
                    }
                    lat
                })
            })
            .collect();
        let mut all = Vec::with_capacity(CLIENTS * ROUNDS);
        for t in tasks {
            all.extend(t.await);
        }
        all
    }));
    let elapsed = t0.elapsed().as_nanos();
    lat.sort_unstable();
    let p99 = lat[(lat.len() * 99 / 100).min(lat.len() - 1)];
    println!("elapsed_ns {elapsed} p99_ns {p99}");
}

/// One measurement: operations per second, CPU per operation, voluntary
/// context switches per operation, and hwsched's wakes by origin.
struct Sample {
    ops_per_s: f64,
    /// The 99th percentile latency, in microseconds: wrk's (http), or the
    /// echo client's round trips.
    p99_us: f64,
    cpu_us_per_op: f64,
    csw_per_op: f64,
    wakes: Option<(u64, u64, u64, u64)>,
}

thread_local! {
    /// The last run's p99 latency (us).
    static P99: std::cell::Cell<f64> = const { std::cell::Cell::new(f64::NAN) };
}

fn measure(kind: Kind, bench: Bench, workers: usize, secs: u64) -> Sample {
    P99.with(|c| c.set(f64::NAN));
    let server = start(kind, bench, workers);
    thread::sleep(Duration::from_millis(100));
    let stats0 = match &server.rt {
        Rt::Hw(rt) => Some(rt.stats()),
        _ => None,
    };
    let (cpu0, csw0) = usage();
    let (ops, wall) = match bench {
        Bench::Echo => {
            let out = Command::new(std::env::current_exe().unwrap())
                .args(["--echo-client", &server.addr.to_string()])
                .output()
                .expect("run the echo client");
            let text = String::from_utf8_lossy(&out.stdout);
            let ns: f64 = text
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("echo client failed: {text} {out:?}"));
            let p99_ns: f64 = text
                .split_whitespace()
                .nth(3)
                .and_then(|v| v.parse().ok())
                .unwrap_or(f64::NAN);
            P99.with(|c| c.set(p99_ns / 1e3));
            ((CLIENTS * ROUNDS) as f64, ns / 1e9)
        }
        Bench::Http | Bench::Axum | Bench::AxumJson => {
            let out = Command::new("wrk")
                .args([
                    "-t1",
                    "--latency",
                    &format!("-c{}", WRK_CONNS.load(std::sync::atomic::Ordering::Relaxed)),
                    &format!("-d{secs}s"),
                    &format!("http://{}{}", server.addr, bench.path()),
                ])
                .output()
                .expect("run wrk (apt-get install wrk)");
            let text = String::from_utf8_lossy(&out.stdout);
            let total: f64 = text
                .lines()
                .find(|l| l.contains("requests in"))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("wrk output not understood: {text}"));
            let rps: f64 = text
                .lines()
                .find(|l| l.starts_with("Requests/sec:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("wrk output not understood: {text}"));
            // `--latency`'s distribution: "     99%    1.23ms".
            let p99 = text
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with("99%"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| {
                    let (num, unit) = v.split_at(v.find(|c: char| c.is_alphabetic())?);
                    let x: f64 = num.parse().ok()?;
                    Some(match unit {
                        "us" => x,
                        "ms" => x * 1e3,
                        "s" => x * 1e6,
                        _ => return None,
                    })
                })
                .unwrap_or(f64::NAN);
            P99.with(|c| c.set(p99));
            (total, total / rps)
        }
        Bench::Mixed | Bench::Reqwest => unreachable!("{bench:?} is measured on its own"),
    };
    let (cpu1, csw1) = usage();
    let wakes = match (&server.rt, stats0) {
        (Rt::Hw(rt), Some(s0)) => {
            let s1 = rt.stats();
            let (t0, t1) = (s0.total(), s1.total());
            Some((
                t1.wakes_by_driver - t0.wakes_by_driver,
                t1.batch_wakes - t0.batch_wakes,
                t1.wakes_by_task - t0.wakes_by_task,
                s1.external.wakes_foreign - s0.external.wakes_foreign,
            ))
        }
        _ => None,
    };
    drop(server);
    Sample {
        ops_per_s: ops / wall,
        p99_us: P99.with(|c| c.get()),
        cpu_us_per_op: (cpu1 - cpu0).as_secs_f64() * 1e6 / ops,
        csw_per_op: (csw1 - csw0) as f64 / ops,
        wakes,
    }
}

/// One keep-alive HTTP/1.1 connection of the mixed client.
struct HttpConn {
    s: Async<TcpStream>,
    /// The response read so far.
    buf: Vec<u8>,
}

impl HttpConn {
    async fn connect(addr: SocketAddr) -> HttpConn {
        let s = Async::<TcpStream>::connect(addr).await.expect("connect");
        s.get_ref().set_nodelay(true).unwrap();
        HttpConn {
            s,
            buf: Vec::with_capacity(512),
        }
    }

    /// Sends `req` and reads its whole response: status 200, a body of
    /// `content-length` bytes, nothing after it (one request in flight).
    async fn get(&mut self, req: &[u8]) {
        self.s.write_all(req).await.expect("send a request");
        self.buf.clear();
        let mut chunk = [0u8; 4096];
        let mut need = None;
        loop {
            let n = self.s.read(&mut chunk).await.expect("read a response");
            assert!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
            if need.is_none() {
                let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                    continue;
                };
                let head = std::str::from_utf8(&self.buf[..end]).expect("an ASCII head");
                assert!(head.starts_with("HTTP/1.1 200 "), "response: {head}");
                let len: usize = head
                    .lines()
                    .filter_map(|l| l.split_once(':'))
                    .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v)| v.trim().parse().ok())
                    .unwrap_or_else(|| panic!("no content-length: {head}"));
                need = Some(end + 4 + len);
            }
            if let Some(need) = need {
                if self.buf.len() >= need {
                    assert_eq!(self.buf.len(), need, "bytes after the response");
                    return;
                }
            }
        }
    }
}

/// The `q` quantile of sorted samples, exactly (nearest rank); 0 when
/// there are none.
fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The mixed bench's client (run as a child process, one thread, async-io
/// sockets on a local executor): `conns` keep-alive connections each
/// sending `GET /` as soon as the previous answer arrived, and `slow_conns`
/// doing the same with `GET /slow`, all connected before the clock starts,
/// for `secs` seconds (a request in flight at the end is finished and
/// counted). Prints, as `key=value` pairs: the cheap requests' count, the
/// time from the start to the last cheap connection's end, their latencies'
/// exact p50, p99, p99.9 and maximum (write to the end of the read), and the
/// same count and time for the slow requests, and how long this thread
/// waited for a CPU meanwhile (`client_wait_ns`), in nanoseconds. A
/// `slow_interval` (the open loop of `--slow-load`) spaces each slow
/// connection's requests: request `k` is sent at `t0 + k * interval` (its
/// connection's start staggered by an equal share of the interval), or at
/// once if the previous answer came later.
fn mixed_client(
    addr: SocketAddr,
    conns: usize,
    slow_conns: usize,
    secs: u64,
    slow_interval: Option<Duration>,
) {
    const CHEAP: &[u8] = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n";
    const SLOW: &[u8] = b"GET /slow HTTP/1.1\r\nHost: bench\r\n\r\n";
    let ex = async_executor::LocalExecutor::new();
    let (mut cheap, cheap_end, slow, slow_end, t0, client_wait) =
        async_io::block_on(ex.run(async {
            let mut cs = Vec::with_capacity(conns + slow_conns);
            for _ in 0..conns + slow_conns {
                cs.push(HttpConn::connect(addr).await);
            }
            let t0 = Instant::now();
            let deadline = t0 + Duration::from_secs(secs);
            let wait0 = run_delay_ns();
            let tasks: Vec<_> = cs
                .into_iter()
                .enumerate()
                .map(|(i, mut c)| {
                    let req = if i < conns { CHEAP } else { SLOW };
                    let schedule = slow_interval
                        .filter(|_| i >= conns)
                        .map(|d| (d, t0 + d.mul_f64((i - conns) as f64 / slow_conns as f64)));
                    ex.spawn(async move {
                        let mut lat = Vec::with_capacity(1 << 16);
                        let mut now = Instant::now();
                        let mut sends = 0u32;
                        while now < deadline {
                            if let Some((every, first)) = schedule {
                                let at = first + every * sends;
                                if at > now {
                                    async_io::Timer::at(at).await;
                                    now = Instant::now();
                                }
                                sends += 1;
                            }
                            c.get(req).await;
                            let t = Instant::now();
                            lat.push((t - now).as_nanos() as u64);
                            now = t;
                        }
                        (lat, now)
                    })
                })
                .collect();
            let (mut cheap, mut slow) = (Vec::new(), 0usize);
            let (mut cheap_end, mut slow_end) = (t0, t0);
            for (i, t) in tasks.into_iter().enumerate() {
                let (lat, end) = t.await;
                if i < conns {
                    cheap.extend(lat);
                    cheap_end = cheap_end.max(end);
                } else {
                    slow += lat.len();
                    slow_end = slow_end.max(end);
                }
            }
            (cheap, cheap_end, slow, slow_end, t0, run_delay_ns() - wait0)
        }));
    cheap.sort_unstable();
    println!(
        "cheap={} cheap_ns={} p50_ns={} p99_ns={} p999_ns={} max_ns={} slow={} slow_ns={} \
         client_wait_ns={client_wait}",
        cheap.len(),
        (cheap_end - t0).as_nanos(),
        quantile(&cheap, 0.5),
        quantile(&cheap, 0.99),
        quantile(&cheap, 0.999),
        cheap.last().copied().unwrap_or(0),
        slow,
        (slow_end - t0).as_nanos(),
    );
}

/// How long this thread has waited on a runqueue for a CPU, in
/// nanoseconds (`/proc/thread-self/schedstat`'s second field, the
/// kernel's `run_delay`); 0 where the kernel does not keep it.
fn run_delay_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// The mixed bench's settings.
#[derive(Clone, Copy)]
struct MixedCfg {
    workers: usize,
    secs: u64,
    /// Connections sending `/`.
    conns: usize,
    /// Connections sending `/slow`.
    slow_conns: usize,
    /// The CPUs of `/slow` work offered on a schedule (`--slow-load`), or
    /// `None`: back to back.
    slow_load: Option<f64>,
}

impl MixedCfg {
    /// The time between two requests of one slow connection under
    /// `--slow-load`.
    fn slow_interval(&self) -> Option<Duration> {
        let per_s = self.slow_load? * 1e6 / SLOW_US.load(Relaxed) as f64;
        Some(Duration::from_secs_f64(self.slow_conns as f64 / per_s))
    }
}

/// One round of the mixed bench on one server.
struct MixedSample {
    /// Cheap requests per second.
    cheap_per_s: f64,
    /// The cheap requests' latency percentiles and maximum, in microseconds.
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    max_us: f64,
    /// Slow requests per second.
    slow_per_s: f64,
    /// The server's CPU time per cheap request, the `/slow` handlers'
    /// spinning excluded (the rest of their requests' work included).
    cpu_us_per_cheap: f64,
    /// The server's voluntary context switches per cheap request.
    csw_per_cheap: f64,
    /// The share of the round the client's thread spent runnable but
    /// waiting for a CPU (the kernel's `run_delay`): how much the load
    /// generator itself was held back by the server's threads.
    client_wait: f64,
}

fn measure_mixed(kind: Kind, m: MixedCfg) -> MixedSample {
    let server = start(kind, Bench::Mixed, m.workers);
    thread::sleep(Duration::from_millis(100));
    let spin0 = SPIN_NS.load(Relaxed);
    let (cpu0, csw0) = usage();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--mixed-client",
            &server.addr.to_string(),
            &m.conns.to_string(),
            &m.slow_conns.to_string(),
            &m.secs.to_string(),
            &m.slow_interval().map_or(0, |d| d.as_nanos()).to_string(),
        ])
        .output()
        .expect("run the mixed client");
    // A `/slow` handler may still be spinning for the client's last
    // request: its spin is then counted in both figures.
    while SPINNING.load(Relaxed) > 0 {
        thread::sleep(Duration::from_micros(50));
    }
    let (cpu1, csw1) = usage();
    let spin = Duration::from_nanos(SPIN_NS.load(Relaxed) - spin0);
    if std::env::var_os("HWSCHED_TIMING").is_some() {
        // The runtime's own view of the round (run-queue delay, poll
        // durations), on stderr.
        if let Rt::Hw(rt) = &server.rt {
            eprintln!("{}", rt.stats());
        }
    }
    drop(server);
    let text = String::from_utf8_lossy(&out.stdout);
    let get = |key: &str| -> f64 {
        text.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or_else(|| panic!("mixed client failed ({key}): {text} {out:?}"))
    };
    let cheap = get("cheap");
    MixedSample {
        cheap_per_s: cheap / (get("cheap_ns") / 1e9),
        p50_us: get("p50_ns") / 1e3,
        p99_us: get("p99_ns") / 1e3,
        p999_us: get("p999_ns") / 1e3,
        max_us: get("max_ns") / 1e3,
        slow_per_s: get("slow") / (get("slow_ns") / 1e9),
        cpu_us_per_cheap: (cpu1 - cpu0).saturating_sub(spin).as_secs_f64() * 1e6 / cheap,
        csw_per_cheap: (csw1 - csw0) as f64 / cheap,
        client_wait: get("client_wait_ns") / get("cheap_ns"),
    }
}

/// The mixed bench: `runs` rounds, each running every server once in a
/// rotating order; per-round lines, medians, and hwsched / tokio.
fn run_mixed(kinds: &[Kind], runs: usize, m: MixedCfg) {
    let slow_us = SLOW_US.load(Relaxed);
    println!(
        "\n## Mixed: {} connections GET / beside {} GET /slow ({slow_us} us of CPU each, {}), \
         {} s per round",
        m.conns,
        m.slow_conns,
        m.slow_load.map_or("back to back".to_string(), |f| format!(
            "{:.0} per second on a schedule: {f} CPUs of work",
            f * 1e6 / slow_us as f64
        )),
        m.secs
    );
    println!(
        "cheap requests/s, their latency p50 / p99 / p99.9 / max (us), slow requests/s, \
         server CPU us per cheap request (the /slow spinning excluded), voluntary context \
         switches per cheap request, the share of the round the client's thread waited for \
         a CPU"
    );
    let line = |name: &str, s: &MixedSample| {
        format!(
            "{name:>15} {:>9.0} req/s  p50 {:>8.1}  p99 {:>8.1}  p99.9 {:>8.1}  max {:>8.1} us  \
             slow {:>7.1} req/s  {:>6.2} us/cheap {:>6.3} csw/cheap  client waited {:>4.1}%",
            s.cheap_per_s,
            s.p50_us,
            s.p99_us,
            s.p999_us,
            s.max_us,
            s.slow_per_s,
            s.cpu_us_per_cheap,
            s.csw_per_cheap,
            s.client_wait * 100.0,
        )
    };
    let mut all: Vec<Vec<MixedSample>> = kinds.iter().map(|_| Vec::new()).collect();
    for round in 0..runs {
        for j in 0..kinds.len() {
            let k = (round + j) % kinds.len();
            let s = measure_mixed(kinds[k], m);
            println!("round {round} {}", line(kinds[k].name(), &s));
            all[k].push(s);
        }
    }
    println!("\nmedians over {runs} rounds (Mixed):");
    for (k, samples) in kinds.iter().zip(&all) {
        let med = |f: fn(&MixedSample) -> f64| median(samples.iter().map(f).collect());
        let s = MixedSample {
            cheap_per_s: med(|s| s.cheap_per_s),
            p50_us: med(|s| s.p50_us),
            p99_us: med(|s| s.p99_us),
            p999_us: med(|s| s.p999_us),
            max_us: med(|s| s.max_us),
            slow_per_s: med(|s| s.slow_per_s),
            cpu_us_per_cheap: med(|s| s.cpu_us_per_cheap),
            csw_per_cheap: med(|s| s.csw_per_cheap),
            client_wait: med(|s| s.client_wait),
        };
        println!("{}", line(k.name(), &s));
    }
    let pos = |k: Kind| kinds.iter().position(|x| *x == k);
    let (Some(h), Some(t)) = (pos(Kind::HwIo), pos(Kind::Tokio)) else {
        return;
    };
    // Medians of the per-round ratios hwsched / tokio.
    let ratio = |f: fn(&MixedSample) -> f64| -> (f64, String) {
        let r: Vec<f64> = (0..runs).map(|i| f(&all[h][i]) / f(&all[t][i])).collect();
        let rounds = r.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>();
        (median(r), rounds.join(" "))
    };
    let (cheap, cheap_rounds) = ratio(|s| s.cheap_per_s);
    let (slow, slow_rounds) = ratio(|s| s.slow_per_s);
    let (p50, _) = ratio(|s| s.p50_us);
    let (p99, p99_rounds) = ratio(|s| s.p99_us);
    let (p999, p999_rounds) = ratio(|s| s.p999_us);
    let (cpu, _) = ratio(|s| s.cpu_us_per_cheap);
    println!(
        "hwsched / tokio, medians of the per-round ratios:\n  \
         throughput (above 1: hwsched serves more): cheap {cheap:.2} (rounds {cheap_rounds}), \
         slow {slow:.2} (rounds {slow_rounds})\n  \
         cheap latency hwsched/tokio (below 1: hwsched's is lower): p50 {p50:.2}, \
         p99 {p99:.2} (rounds {p99_rounds}), p99.9 {p999:.2} (rounds {p999_rounds})\n  \
         server CPU per cheap request hwsched/tokio (below 1: hwsched uses less): {cpu:.2}"
    );
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--echo-client") {
        echo_client(args[i + 1].parse().expect("--echo-client ADDR"));
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--mixed-client") {
        let n = |j: usize| -> u64 {
            args[i + j]
                .parse()
                .expect("--mixed-client ADDR N K SECS INTERVAL_NS")
        };
        mixed_client(
            args[i + 1].parse().expect("--mixed-client ADDR"),
            n(2) as usize,
            n(3) as usize,
            n(4),
            (n(5) > 0).then(|| Duration::from_nanos(n(5))),
        );
        return;
    }
    let val = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .map(|i| args[i + 1].clone())
    };
    let runs: usize = val("--runs").map_or(5, |v| v.parse().expect("--runs N"));
    let secs: u64 = val("--secs").map_or(3, |v| v.parse().expect("--secs N"));
    let workers: usize = val("--workers").map_or(2, |v| v.parse().expect("--workers N"));
    if let Some(c) = val("--conns") {
        let c: usize = c.parse().expect("--conns N");
        WRK_CONNS.store(c, std::sync::atomic::Ordering::Relaxed);
    }
    if let Some(us) = val("--slow-us") {
        SLOW_US.store(us.parse().expect("--slow-us N"), Relaxed);
    }
    let slow_conns: usize = val("--slow-conns").map_or(1, |v| v.parse().expect("--slow-conns K"));
    let slow_load: Option<f64> = val("--slow-load").map(|v| {
        let f: f64 = v
            .parse()
            .expect("--slow-load F (CPUs of /slow work, e.g. 0.25)");
        assert!(
            f > 0.0 && f.is_finite(),
            "--slow-load {v}: a positive number of CPUs"
        );
        f
    });
    // `--serve KIND` runs one server until killed and prints its address
    // (for `perf stat -p`: scripts/io-syscalls.sh).
    if let Some(name) = val("--serve") {
        let kind = [Kind::HwIo, Kind::HwNoIo, Kind::Tokio, Kind::Ae]
            .into_iter()
            .find(|k| k.name() == name)
            .unwrap_or_else(|| panic!("--serve: unknown server {name}"));
        let bench = match val("--only").as_deref() {
            Some("echo") => Bench::Echo,
            Some("mixed") => Bench::Mixed,
            Some("axum") => Bench::Axum,
            Some("axum-json") => Bench::AxumJson,
            _ => Bench::Http,
        };
        let server = start(kind, bench, workers);
        println!("{}", server.addr);
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        loop {
            thread::park();
        }
    }
    let benches: Vec<Bench> = match val("--only").as_deref() {
        Some("echo") => vec![Bench::Echo],
        Some("http") => vec![Bench::Http],
        Some("mixed") => vec![Bench::Mixed],
        Some("axum") => vec![Bench::Axum, Bench::AxumJson],
        Some("reqwest") => vec![Bench::Reqwest],
        None => vec![Bench::Echo, Bench::Http],
        Some(o) => panic!("--only echo|http|mixed|axum|reqwest, not {o}"),
    };
    let all_kinds = [Kind::HwIo, Kind::HwNoIo, Kind::Tokio, Kind::Ae];
    // `--kinds a,b` runs only those servers (for profiling one of them).
    let kinds: Vec<Kind> = match val("--kinds") {
        // The mixed, axum and reqwest benches compare the two runtimes
        // with their own drivers.
        None if !benches.contains(&Bench::Echo) && !benches.contains(&Bench::Http) => {
            vec![Kind::HwIo, Kind::Tokio]
        }
        None => all_kinds.to_vec(),
        Some(list) => list
            .split(',')
            .map(|n| {
                *all_kinds
                    .iter()
                    .find(|k| k.name() == n)
                    .unwrap_or_else(|| panic!("--kinds: unknown server {n}"))
            })
            .collect(),
    };
    let pos = |k: Kind| kinds.iter().position(|x| *x == k);
    println!(
        "I/O bench: {workers} workers per runtime, {runs} rounds, {} CPUs here",
        thread::available_parallelism().map_or(1, |n| n.get())
    );
    for bench in benches {
        let unit = match bench {
            Bench::Echo => "round trips/s",
            Bench::Http | Bench::Axum | Bench::AxumJson => "requests/s",
            Bench::Reqwest => {
                run_reqwest(runs, workers, secs, WRK_CONNS.load(Relaxed));
                continue;
            }
            Bench::Mixed => {
                let m = MixedCfg {
                    workers,
                    secs,
                    conns: WRK_CONNS.load(Relaxed),
                    slow_conns,
                    slow_load,
                };
                run_mixed(&kinds, runs, m);
                continue;
            }
        };
        println!("\n## {bench:?}: {unit}, server CPU us per op, voluntary context switches per op");
        let mut all: Vec<Vec<Sample>> = kinds.iter().map(|_| Vec::new()).collect();
        for round in 0..runs {
            for j in 0..kinds.len() {
                let k = (round + j) % kinds.len();
                let s = measure(kinds[k], bench, workers, secs);
                let wakes = s.wakes.map_or(String::new(), |(r, rl, t, f)| {
                    format!(
                        "  wakes: driver-on-worker {r} (searchers woken after batches {rl}), task {t}, \
                         foreign {f}"
                    )
                });
                println!(
                    "round {round} {:>15} {:>10.0} {:>8.2} us {:>6.3} csw {:>8.0} us p99{wakes}",
                    kinds[k].name(),
                    s.ops_per_s,
                    s.cpu_us_per_op,
                    s.csw_per_op,
                    s.p99_us,
                );
                all[k].push(s);
            }
        }
        println!("\nmedians over {runs} rounds ({bench:?}):");
        for (k, samples) in kinds.iter().zip(&all) {
            println!(
                "{:>15} {:>10.0} {unit} {:>8.2} us/op {:>6.3} csw/op {:>8.0} us p99",
                k.name(),
                median(samples.iter().map(|s| s.ops_per_s).collect()),
                median(samples.iter().map(|s| s.cpu_us_per_op).collect()),
                median(samples.iter().map(|s| s.csw_per_op).collect()),
                median(samples.iter().map(|s| s.p99_us).collect()),
            );
        }
        let (Some(h), Some(t)) = (pos(Kind::HwIo), pos(Kind::Tokio)) else {
            continue;
        };
        let vs_tokio = |f: fn(&Sample) -> f64| -> Vec<f64> {
            (0..runs).map(|r| f(&all[h][r]) / f(&all[t][r])).collect()
        };
        let tp = vs_tokio(|s| s.ops_per_s);
        println!(
            "hwsched / tokio, medians of the per-round ratios: throughput {:.2} (rounds {:?}), \
             CPU per op {:.2}, p99 {:.2}",
            median(tp.clone()),
            tp.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>(),
            median(vs_tokio(|s| s.cpu_us_per_op)),
            median(vs_tokio(|s| s.p99_us)),
        );
        // Per-round ratios of hwsched (its own driver) to the best peer.
        let Some(a) = pos(Kind::Ae) else {
            continue;
        };
        let ratios: Vec<f64> = (0..runs)
            .map(|r| {
                let best = all[t][r].ops_per_s.max(all[a][r].ops_per_s);
                all[h][r].ops_per_s / best
            })
            .collect();
        let cpu_ratios: Vec<f64> = (0..runs)
            .map(|r| {
                let best = all[t][r].cpu_us_per_op.min(all[a][r].cpu_us_per_op);
                all[h][r].cpu_us_per_op / best
            })
            .collect();
        println!(
            "hwsched / best peer: throughput {:.2} (rounds {:?}), CPU per op {:.2}",
            median(ratios.clone()),
            ratios.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>(),
            median(cpu_ratios),
        );
    }
}
