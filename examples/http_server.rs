//! An HTTP/1.1 "hello" server with hyper 1.x on hwsched, through async-io
//! sockets (smol-hyper's `FuturesIo` adapts them to hyper's I/O traits).
//! Idle workers drive async-io's reactor (`Builder::enable_io`), so a
//! request's readiness wakes its connection task from a worker.
//!
//! ```text
//! cargo run --release --features io --example http_server -- [--addr 127.0.0.1:8080] [--secs N] [--workers N] [--no-io]
//! curl http://127.0.0.1:8080/
//! wrk -t1 -c64 -d5s http://127.0.0.1:8080/
//! ```
//!
//! Stops on Ctrl-C or after `--secs`; connections still open are dropped
//! with the runtime, and the wake counters are printed.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_io::Async;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use smol_hyper::rt::FuturesIo;

/// Set by the SIGINT handler.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::Relaxed);
}

/// Makes Ctrl-C set [`STOP`] instead of killing the process.
fn stop_on_ctrl_c() {
    let handler: extern "C" fn(libc::c_int) = on_sigint;
    // SAFETY: installs a handler that only stores to an atomic (which is
    // async-signal-safe); the function pointer lives for the whole program.
    unsafe {
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
    }
}

async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"Hello, world!\n",
    ))))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut addr: SocketAddr = "127.0.0.1:8080".parse()?;
    let mut secs: Option<u64> = None;
    let mut workers: Option<usize> = None;
    let mut io = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--addr" => addr = val()?.parse()?,
            "--secs" => secs = Some(val()?.parse()?),
            "--workers" => workers = Some(val()?.parse()?),
            // Leave the reactor to async-io's own thread (for comparison).
            "--no-io" => io = false,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    stop_on_ctrl_c();
    let mut b = hwsched::Runtime::builder().enable_io(io);
    if let Some(n) = workers {
        b = b.worker_threads(n);
    }
    let rt = b.build()?;
    let deadline = secs.map(|s| Instant::now() + Duration::from_secs(s));
    let served = rt.block_on(async move {
        let listener = Async::<TcpListener>::bind(addr)?;
        println!(
            "http_server: listening on http://{}/",
            listener.get_ref().local_addr()?
        );
        let mut served = 0u64;
        while !STOP.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d) {
            // Look at the stop flag ten times a second.
            match hwsched::time::timeout(Duration::from_millis(100), listener.accept()).await {
                Ok(Ok((stream, _peer))) => {
                    served += 1;
                    drop(hwsched::spawn(async move {
                        let conn = http1::Builder::new()
                            .serve_connection(FuturesIo::new(stream), service_fn(hello));
                        if let Err(e) = conn.await {
                            eprintln!("http_server: connection: {e}");
                        }
                    }));
                }
                Ok(Err(e)) => eprintln!("http_server: accept: {e}"),
                Err(_elapsed) => {}
            }
        }
        Ok::<u64, std::io::Error>(served)
    })?;
    let stats = rt.stats();
    drop(rt);
    let t = stats.total();
    println!(
        "http_server: {served} connections; task wakes: {} from the reactor on a worker, {} \
         from tasks, {} from other threads",
        t.wakes_by_reactor, t.wakes_by_task, stats.external.wakes_foreign
    );
    Ok(())
}
