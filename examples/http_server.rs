//! An HTTP/1.1 "hello" server with hyper 1.x on hwsched's own sockets
//! (`hwsched::net::TcpStream` implements hyper's `rt::Read` / `rt::Write`
//! with the `hyper` feature: no adapter between them).
//!
//! ```text
//! cargo run --release --features hyper --example http_server -- [--addr 127.0.0.1:8080] [--secs N] [--workers N] [--topology SYNTHETIC] [--stats]
//! curl http://127.0.0.1:8080/
//! wrk -t1 -c64 -d5s http://127.0.0.1:8080/
//!
//! cargo run --release --features hyper,trace --example http_server -- --secs 5 --trace http.json
//! cargo run --release -p hwsched-trace -- summary http.json
//! ```
//!
//! `--trace FILE` (the `trace` feature) records the scheduler's trace from
//! the start to the shutdown, the last `--trace-events N` events of each
//! worker (default 65,536: a flight recorder), and writes it as Chrome
//! Trace Event JSON (Perfetto's UI and `chrome://tracing` open it;
//! `hwsched-trace svg` draws it).
//!
//! Stops on Ctrl-C (`hwsched::signal::ctrl_c`) or after `--secs`;
//! connections still open are dropped with the runtime, and the driver's
//! counters are printed.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use futures_lite::future;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};

async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"Hello, world!\n",
    ))))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut addr: SocketAddr = "127.0.0.1:8080".parse()?;
    let mut secs: Option<u64> = None;
    let mut workers: Option<usize> = None;
    let mut print_stats = false;
    let mut topology: Option<String> = None;
    let mut trace_out: Option<String> = None;
    let mut trace_events: usize = 1 << 16;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--addr" => addr = val()?.parse()?,
            "--secs" => secs = Some(val()?.parse()?),
            "--workers" => workers = Some(val()?.parse()?),
            // An hwloc synthetic topology (e.g. "pack:2 l3:2 core:4"): a
            // larger machine's workers on this one, unpinned.
            "--topology" => topology = Some(val()?),
            // The runtime's whole Stats table at the end.
            "--stats" => print_stats = true,
            "--trace" => trace_out = Some(val()?),
            "--trace-events" => trace_events = val()?.parse()?,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let mut b = hwsched::Runtime::builder();
    if let Some(n) = workers {
        b = b.worker_threads(n);
    }
    if let Some(t) = topology {
        b = b.topology(hwsched::TopologySource::Synthetic(t));
    }
    #[cfg(feature = "trace")]
    if trace_out.is_some() {
        b = b.trace(trace_events);
    }
    #[cfg(not(feature = "trace"))]
    if trace_out.is_some() {
        let _ = trace_events;
        return Err("--trace needs the `trace` feature: --features hyper,trace".into());
    }
    let rt = b.build()?;
    #[cfg(feature = "trace")]
    let tracer = rt.tracer();
    let served = rt.block_on(async move {
        let listener = hwsched::net::TcpListener::bind(addr).await?;
        println!(
            "http_server: listening on http://{}/",
            listener.local_addr()?
        );
        let ctrl_c = hwsched::signal::ctrl_c();
        let deadline = async {
            match secs {
                Some(s) => hwsched::time::sleep(Duration::from_secs(s)).await,
                None => std::future::pending().await,
            }
        };
        let mut stop = std::pin::pin!(future::or(deadline, async {
            let _ = ctrl_c.await;
        }));
        let mut served = 0u64;
        loop {
            let next = future::or(async { Some(listener.accept().await) }, async {
                (&mut stop).await;
                None
            });
            match next.await {
                Some(Ok((stream, _peer))) => {
                    served += 1;
                    drop(hwsched::spawn(async move {
                        let conn =
                            http1::Builder::new().serve_connection(stream, service_fn(hello));
                        if let Err(e) = conn.await {
                            eprintln!("http_server: connection: {e}");
                        }
                    }));
                }
                Some(Err(e)) => eprintln!("http_server: accept: {e}"),
                None => break,
            }
        }
        Ok::<u64, std::io::Error>(served)
    })?;
    let stats = rt.stats();
    drop(rt);
    #[cfg(feature = "trace")]
    if let Some(path) = &trace_out {
        // After the shutdown: every poll recorded has ended.
        let trace = tracer.stop();
        let file = std::io::BufWriter::new(std::fs::File::create(path)?);
        trace.write_chrome_json(file)?;
        println!(
            "http_server: trace of {} events written to {path}",
            trace.events().len()
        );
    }
    if print_stats {
        println!("{stats}");
    }
    let t = stats.total();
    println!(
        "http_server: {served} connections; task wakes: {} from the I/O driver on a worker, {} \
         from tasks, {} from other threads; {} readiness events, {} eventfd writes",
        t.wakes_by_driver,
        t.wakes_by_task,
        stats.external.wakes_foreign,
        stats.io_events,
        stats.io_waker_writes,
    );
    Ok(())
}
