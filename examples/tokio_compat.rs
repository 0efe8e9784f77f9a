//! tokio-based crates in hwsched tasks through the tokio bridge
//! (`Builder::tokio_compat`, the `tokio-compat` feature): reqwest calls
//! against a local axum server (served on hwsched's own sockets by
//! `hwsched::hyper::serve`), a tonic health check against a tonic server,
//! and `tokio::time`, all unchanged.
//!
//! ```text
//! cargo run --release --features server,tokio-compat --example tokio_compat -- [--workers N] [--requests N]
//! ```
//!
//! Prints what each call returned and how long the calls took.

use std::time::{Duration, Instant};

use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut workers = 2;
    let mut requests = 64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| -> Result<usize, String> {
            let v = args.next().ok_or(format!("{name} needs a value"))?;
            v.parse().map_err(|_| format!("{name}: not a count: {v:?}"))
        };
        match a.as_str() {
            "--workers" => workers = value("--workers")?,
            "--requests" => requests = value("--requests")?,
            _ => return Err(format!("unknown argument {a:?} (--workers N, --requests N)").into()),
        }
    }
    let rt = hwsched::Runtime::builder()
        .worker_threads(workers)
        .tokio_compat(true)
        .build()?;
    rt.block_on(async move {
        // An HTTP server on hwsched's own sockets (no bridge needed).
        let listener =
            hwsched::net::TcpListener::bind("127.0.0.1:0".parse::<std::net::SocketAddr>()?).await?;
        let addr = listener.local_addr()?;
        let app = axum::Router::new().route(
            "/{name}",
            axum::routing::get(
                |axum::extract::Path(name): axum::extract::Path<String>| async move {
                    format!("hello {name}")
                },
            ),
        );
        let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
        let http = hwsched::spawn(async move {
            hwsched::hyper::serve(listener, app)
                .with_graceful_shutdown(async {
                    http_stopped.await.ok();
                })
                .await
        });

        // reqwest: tokio's sockets and timers inside, through the bridge.
        let client = reqwest::Client::new();
        let t = Instant::now();
        let calls: Vec<_> = (0..requests)
            .map(|i| {
                let client = client.clone();
                hwsched::spawn(async move {
                    client
                        .get(format!("http://{addr}/{i}"))
                        .timeout(Duration::from_secs(5))
                        .send()
                        .await?
                        .text()
                        .await
                })
            })
            .collect();
        let mut bodies = Vec::new();
        for c in calls {
            bodies.push(c.await??);
        }
        println!(
            "reqwest: {} requests at once in {:?}; the first answer {:?}",
            bodies.len(),
            t.elapsed(),
            bodies.first()
        );

        // tonic: a health service and a client of it.
        let (reporter, service) = tonic_health::server::health_reporter();
        reporter
            .set_service_status("kv", tonic_health::ServingStatus::Serving)
            .await;
        let incoming = tonic::transport::server::TcpIncoming::bind(
            "127.0.0.1:0".parse::<std::net::SocketAddr>()?,
        )?;
        let grpc_addr = incoming.local_addr()?;
        let (stop_grpc, grpc_stopped) = tokio::sync::oneshot::channel::<()>();
        let grpc = hwsched::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, async {
                    grpc_stopped.await.ok();
                }),
        );
        let t = Instant::now();
        let channel = tonic::transport::Channel::from_shared(format!("http://{grpc_addr}"))?
            .connect()
            .await?;
        let status = HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: "kv".into(),
            })
            .await?
            .into_inner()
            .status();
        println!("tonic: health of \"kv\" is {status:?} ({:?})", t.elapsed());

        // tokio::time: its timer, on the bridge's thread.
        let t = Instant::now();
        tokio::time::sleep(Duration::from_millis(10)).await;
        println!("tokio::time::sleep(10 ms) took {:?}", t.elapsed());

        stop_grpc.send(()).ok();
        grpc.await??;
        stop_http.send(()).ok();
        http.await??;
        Ok(())
    })
}
