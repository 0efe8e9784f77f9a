//! An axum `Router` (with state and a JSON route) on hwsched's own
//! sockets, through `hwsched::hyper::serve` (the `server` feature): no
//! tokio runtime, no adapter, HTTP/1 and HTTP/2, a header read timeout.
//!
//! ```text
//! cargo run --release --features server --example axum -- [--addr 127.0.0.1:8080] [--workers N] [--secs S] [--header-timeout-ms MS] [--tokio]
//! curl http://127.0.0.1:8080/            # Hello, world!
//! curl http://127.0.0.1:8080/stats       # {"runtime":"hwsched","uptime_ms":...}
//! curl -d '{"a":1}' -H 'content-type: application/json' http://127.0.0.1:8080/echo
//! wrk -t1 -c64 -d5s http://127.0.0.1:8080/
//! ```
//!
//! `--header-timeout-ms` sets `serve`'s header read timeout (0: none;
//! default 30 s, as `serve`'s). `--tokio` serves the same Router with `axum::serve` on a tokio
//! multi-thread runtime of `--workers` threads instead: the comparison.
//! Stops after `--secs` (gracefully: the requests in flight finish), or on
//! Ctrl-C on hwsched.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_lite::future;

#[derive(Clone)]
struct AppState {
    runtime: &'static str,
    started: Instant,
}

#[derive(serde::Serialize)]
struct Stats {
    runtime: &'static str,
    uptime_ms: u64,
}

async fn hello() -> &'static str {
    "Hello, world!\n"
}

async fn stats(State(s): State<AppState>) -> Json<Stats> {
    Json(Stats {
        runtime: s.runtime,
        uptime_ms: s.started.elapsed().as_millis() as u64,
    })
}

async fn echo(Json(v): Json<serde_json::Value>) -> Json<serde_json::Value> {
    Json(v)
}

fn app(runtime: &'static str) -> Router {
    Router::new()
        .route("/", get(hello))
        .route("/stats", get(stats))
        .route("/echo", post(echo))
        .with_state(AppState {
            runtime,
            started: Instant::now(),
        })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut addr: SocketAddr = "127.0.0.1:8080".parse()?;
    let mut secs: Option<u64> = None;
    let mut workers: Option<usize> = None;
    let mut on_tokio = false;
    let mut header_timeout = Some(Duration::from_secs(30));
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--addr" => addr = val()?.parse()?,
            "--secs" => secs = Some(val()?.parse()?),
            "--workers" => workers = Some(val()?.parse()?),
            "--header-timeout-ms" => {
                header_timeout =
                    Some(Duration::from_millis(val()?.parse()?)).filter(|d| !d.is_zero())
            }
            "--tokio" => on_tokio = true,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    if on_tokio {
        return tokio_main(addr, workers, secs);
    }
    let mut b = hwsched::Runtime::builder();
    if let Some(n) = workers {
        b = b.worker_threads(n);
    }
    let rt = b.build()?;
    rt.block_on(async move {
        let listener = hwsched::net::TcpListener::bind(addr).await?;
        println!(
            "axum on hwsched: listening on http://{}/",
            listener.local_addr()?
        );
        let ctrl_c = hwsched::signal::ctrl_c();
        let stop = future::or(
            async move {
                match secs {
                    Some(s) => hwsched::time::sleep(Duration::from_secs(s)).await,
                    None => std::future::pending().await,
                }
            },
            async move {
                let _ = ctrl_c.await;
            },
        );
        hwsched::hyper::serve(listener, app("hwsched"))
            .header_read_timeout(header_timeout)
            .with_graceful_shutdown(stop)
            .await?;
        Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    })
    .map_err(|e| e as Box<dyn std::error::Error>)?;
    println!("axum on hwsched: stopped");
    Ok(())
}

/// The same Router with `axum::serve` on tokio.
fn tokio_main(
    addr: SocketAddr,
    workers: Option<usize>,
    secs: Option<u64>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        b.worker_threads(n);
    }
    b.enable_all().build()?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        println!(
            "axum on tokio: listening on http://{}/",
            listener.local_addr()?
        );
        axum::serve(listener, app("tokio"))
            .with_graceful_shutdown(async move {
                match secs {
                    Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
                    None => std::future::pending().await,
                }
            })
            .await?;
        println!("axum on tokio: stopped");
        Ok(())
    })
}
