//! The tokio bridge (`Builder::tokio_compat`, the `tokio-compat` feature):
//! `tokio::time`, `tokio::net` and `tokio::spawn` in hwsched tasks, in
//! `block_on` and on blocking threads; tower's timeout middleware;
//! reqwest's client and its timeout; a tonic health check, client and
//! server; axum's server and hyper-util's pooled client; without it, tokio's panic; and a
//! shutdown with tokio resources pending that does not hang.
#![cfg(feature = "tokio-compat")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;

fn rt() -> hwsched::Runtime {
    hwsched::Runtime::builder()
        .worker_threads(2)
        .tokio_compat(true)
        .build()
        .expect("runtime")
}

/// Whether this thread is the tokio bridge's (`rt()`'s threads keep the
/// default name).
fn on_bridge() -> bool {
    std::thread::current().name() == Some("hwsched-worker-tokio")
}

#[test]
fn tokio_time_runs_in_tasks_block_on_and_blocking_threads() {
    common::with_timeout(60, "time", || {
        let rt = rt();
        // In block_on.
        rt.block_on(async {
            let t = Instant::now();
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(t.elapsed() >= Duration::from_millis(20));
        });
        // In tasks, on the workers.
        let r = rt.block_on(rt.spawn(async {
            let mut set = hwsched::JoinSet::new();
            for i in 0..50u64 {
                set.spawn(async move {
                    let t = Instant::now();
                    tokio::time::sleep(Duration::from_millis(i % 10)).await;
                    assert!(t.elapsed() >= Duration::from_millis(i % 10));
                    let r = tokio::time::timeout(
                        Duration::from_millis(5),
                        std::future::pending::<()>(),
                    )
                    .await;
                    assert!(r.is_err());
                    // On the runtime's threads: a worker, or the bridge's,
                    // which polls a task that tokio woke while every worker
                    // slept.
                    hwsched::worker_index().is_some() || on_bridge()
                });
            }
            let mut n = 0;
            while let Some(on_worker) = set.join_next().await {
                assert!(on_worker.unwrap());
                n += 1;
            }
            n
        }));
        assert_eq!(r.unwrap(), 50);
        // On a blocking thread: tokio's handle is there.
        let r = rt.block_on(rt.spawn_blocking(|| {
            tokio::runtime::Handle::current().block_on(async {
                tokio::time::sleep(Duration::from_millis(2)).await;
                7
            })
        }));
        assert_eq!(r.unwrap(), 7);
    });
}

#[test]
fn tokio_net_and_tokio_spawn_in_hwsched_tasks() {
    common::with_timeout(60, "net", || {
        let rt = rt();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let server = hwsched::spawn(async move {
                for _ in 0..10 {
                    let (mut s, _) = l.accept().await.unwrap();
                    drop(hwsched::spawn(async move {
                        let mut buf = [0u8; 64];
                        loop {
                            let n = s.read(&mut buf).await.unwrap();
                            if n == 0 {
                                break;
                            }
                            s.write_all(&buf[..n]).await.unwrap();
                        }
                    }));
                }
            });
            let mut clients = Vec::new();
            for i in 0..10u8 {
                clients.push(hwsched::spawn(async move {
                    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
                    let msg = [i; 32];
                    c.write_all(&msg).await.unwrap();
                    let mut back = [0u8; 32];
                    c.read_exact(&mut back).await.unwrap();
                    assert_eq!(back, msg);
                }));
            }
            for c in clients {
                c.await.unwrap();
            }
            server.await.unwrap();
            // tokio::spawn runs on the bridge's thread.
            let name = tokio::spawn(async { std::thread::current().name().map(str::to_owned) })
                .await
                .unwrap();
            assert_eq!(name.as_deref(), Some("hwsched-worker-tokio"));
        });
    });
}

#[test]
fn user_hooks_still_run_beside_the_bridge() {
    common::with_timeout(60, "hooks", || {
        let started = Arc::new(AtomicUsize::new(0));
        let stopped = Arc::new(AtomicUsize::new(0));
        let (s, t) = (started.clone(), stopped.clone());
        let rt = hwsched::Runtime::builder()
            .worker_threads(2)
            .tokio_compat(true)
            .on_thread_start(move || {
                // tokio's context is entered before the user's hook.
                assert!(tokio::runtime::Handle::try_current().is_ok());
                s.fetch_add(1, Ordering::SeqCst);
            })
            .on_thread_stop(move || {
                assert!(tokio::runtime::Handle::try_current().is_ok());
                t.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap();
        assert_eq!(started.load(Ordering::SeqCst), 2);
        drop(rt);
        assert_eq!(stopped.load(Ordering::SeqCst), 2);
    });
}

/// On the 32-worker synthetic topology: tokio's timers and sockets in
/// tasks placed on every worker, and `tokio::spawn` from each, complete;
/// the tokio thread is one more thread beside the 32 workers.
#[test]
fn the_bridge_on_32_workers() {
    common::with_timeout(60, "32w", || {
        let rt = hwsched::Runtime::builder()
            .topology(hwsched::TopologySource::Synthetic(common::BIG.into()))
            .tokio_compat(true)
            .build()
            .expect("runtime");
        assert_eq!(rt.workers(), 32);
        let listener = rt
            .block_on(async { tokio::net::TcpListener::bind("127.0.0.1:0").await })
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let server = rt.spawn(async move {
            for _ in 0..32 {
                let (mut s, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut b = [0u8; 1];
                    s.read_exact(&mut b).await.unwrap();
                    s.write_all(&b).await.unwrap();
                });
            }
        });
        let hs: Vec<_> = (0..32)
            .map(|w| {
                rt.spawn_on(hwsched::Place::Worker(w), async move {
                    tokio::time::sleep(Duration::from_millis(1 + w as u64 % 5)).await;
                    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
                    c.write_all(&[w as u8]).await.unwrap();
                    let mut b = [0u8; 1];
                    c.read_exact(&mut b).await.unwrap();
                    (b[0], hwsched::worker_index())
                })
                .unwrap()
            })
            .collect();
        for (w, h) in hs.into_iter().enumerate() {
            assert_eq!(rt.block_on(h).unwrap(), (w as u8, Some(w)));
        }
        rt.block_on(server).unwrap();
    });
}

/// tower's `Timeout` (tokio's `sleep` inside; tower-http's `TimeoutLayer`
/// and tonic's timeouts are built on it) in an hwsched task: a slow
/// service's call ends with tower's `Elapsed` at its timeout, a fast one's
/// with its response.
#[test]
fn tower_timeouts_run_in_hwsched_tasks() {
    use tower::{Service, ServiceBuilder, ServiceExt};
    common::with_timeout(60, "tower", || {
        let rt = rt();
        let (fast, slow) = rt
            .block_on(rt.spawn(async {
                let mut svc = ServiceBuilder::new()
                    .timeout(Duration::from_millis(50))
                    .service_fn(|d: Duration| async move {
                        tokio::time::sleep(d).await;
                        Ok::<_, std::convert::Infallible>(d)
                    });
                let fast = svc.ready().await.unwrap().call(Duration::ZERO).await;
                let t = Instant::now();
                let slow = svc
                    .ready()
                    .await
                    .unwrap()
                    .call(Duration::from_secs(10))
                    .await;
                (fast, slow.map_err(|e| (e.to_string(), t.elapsed())))
            }))
            .unwrap();
        assert_eq!(fast.unwrap(), Duration::ZERO);
        let (msg, after) = slow.expect_err("a 10 s call under a 50 ms timeout");
        assert!(msg.contains("timed out"), "{msg}");
        assert!(after >= Duration::from_millis(50), "{after:?}");
        assert!(after < Duration::from_secs(10), "{after:?}");
    });
}

/// tonic's server and client in hwsched tasks: the health service served
/// on tokio's sockets (tonic spawns each connection with `tokio::spawn`),
/// a channel connected to it, checks of the whole server and of a named
/// service whose status changes between two checks, then a graceful stop
/// through tonic's shutdown signal; on 2 workers and on the 32-worker
/// synthetic topology.
#[test]
fn a_tonic_health_check_runs_in_hwsched_tasks() {
    common::with_timeout(60, "tonic", || {
        tonic_health_round(&rt());
        let big = hwsched::Runtime::builder()
            .topology(hwsched::TopologySource::Synthetic(common::BIG.into()))
            .tokio_compat(true)
            .build()
            .expect("runtime");
        tonic_health_round(&big);
    });
}

/// One server, one channel, three checks and the stop (above).
fn tonic_health_round(rt: &hwsched::Runtime) {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    let (whole, before, after) = rt
        .block_on(rt.spawn(async {
            let (reporter, service) = tonic_health::server::health_reporter();
            reporter
                .set_service_status("kv", tonic_health::ServingStatus::NotServing)
                .await;
            let incoming =
                tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap())
                    .expect("bind");
            let addr = incoming.local_addr().unwrap();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let server = hwsched::spawn(
                tonic::transport::Server::builder()
                    .add_service(service)
                    .serve_with_incoming_shutdown(incoming, async {
                        stopped.await.ok();
                    }),
            );
            let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
                .unwrap()
                .connect()
                .await
                .expect("connect");
            let mut client = HealthClient::new(channel);
            let whole = health(&mut client, "").await;
            let before = health(&mut client, "kv").await;
            reporter
                .set_service_status("kv", tonic_health::ServingStatus::Serving)
                .await;
            let after = health(&mut client, "kv").await;
            stop.send(()).unwrap();
            server.await.unwrap().expect("tonic's server ends cleanly");
            (whole, before, after)
        }))
        .unwrap();
    assert_eq!(whole, ServingStatus::Serving as i32);
    assert_eq!(before, ServingStatus::NotServing as i32);
    assert_eq!(after, ServingStatus::Serving as i32);
}

/// The status tonic's health service gives `service` (`""`: the server).
async fn health(
    client: &mut tonic_health::pb::health_client::HealthClient<tonic::transport::Channel>,
    service: &str,
) -> i32 {
    client
        .check(tonic_health::pb::HealthCheckRequest {
            service: service.to_owned(),
        })
        .await
        .expect("a health check")
        .into_inner()
        .status
}

/// reqwest's client in hwsched tasks: requests to a plain HTTP/1.1 server
/// (a std thread) complete, several at once, and reqwest's own timeout
/// (tokio's timer inside) ends a request the server never answers.
#[test]
fn reqwest_requests_and_timeouts_run_in_hwsched_tasks() {
    use std::io::{BufRead, BufReader, Write};
    common::with_timeout(60, "reqwest", || {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                std::thread::spawn(move || {
                    let mut r = BufReader::new(s.try_clone().unwrap());
                    loop {
                        let mut path = None;
                        let mut line = String::new();
                        while r.read_line(&mut line).is_ok_and(|n| n > 0) {
                            if path.is_none() {
                                path = line.split_whitespace().nth(1).map(str::to_owned);
                            }
                            if line == "\r\n" {
                                break;
                            }
                            line.clear();
                        }
                        let Some(path) = path else { return };
                        if path == "/never" {
                            // Holds the connection, never answers.
                            std::thread::sleep(Duration::from_secs(30));
                            return;
                        }
                        let body = format!("hello {path}");
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if s.write_all(resp.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let rt = rt();
        let (bodies, timed_out) = rt
            .block_on(rt.spawn(async move {
                let client = reqwest::Client::new();
                let mut hs = Vec::new();
                for i in 0..8 {
                    let client = client.clone();
                    hs.push(hwsched::spawn(async move {
                        let r = client.get(format!("http://{addr}/{i}")).send().await?;
                        r.text().await
                    }));
                }
                let mut bodies = Vec::new();
                for h in hs {
                    bodies.push(h.await.unwrap().expect("a reqwest request"));
                }
                let t = Instant::now();
                let e = client
                    .get(format!("http://{addr}/never"))
                    .timeout(Duration::from_millis(50))
                    .send()
                    .await
                    .expect_err("a request the server never answers");
                (bodies, (e.is_timeout(), t.elapsed()))
            }))
            .unwrap();
        let want: Vec<String> = (0..8).map(|i| format!("hello /{i}")).collect();
        assert_eq!(bodies, want);
        assert!(timed_out.0, "reqwest's error is its timeout");
        assert!(
            timed_out.1 >= Duration::from_millis(50),
            "{:?}",
            timed_out.1
        );
        assert!(timed_out.1 < Duration::from_secs(10), "{:?}", timed_out.1);
    });
}

#[test]
fn without_the_bridge_tokio_time_panics_as_tokio_does() {
    common::with_timeout(60, "off", || {
        let rt = hwsched::Runtime::builder()
            .worker_threads(1)
            .build()
            .unwrap();
        let r = rt.block_on(rt.spawn(async {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }));
        assert!(matches!(r, Err(hwsched::JoinError::Panicked(_))), "{r:?}");
    });
}

#[test]
fn shutdown_with_tokio_resources_pending_does_not_hang() {
    common::with_timeout(60, "shutdown", || {
        for _ in 0..5 {
            let rt = rt();
            let dropped = Arc::new(AtomicUsize::new(0));
            struct Count(Arc<AtomicUsize>);
            impl Drop for Count {
                fn drop(&mut self) {
                    self.0.fetch_add(1, Ordering::SeqCst);
                }
            }
            let addr = rt.block_on(async {
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = l.local_addr().unwrap();
                let d = Count(dropped.clone());
                drop(hwsched::spawn(async move {
                    let _d = d;
                    let _ = l.accept().await;
                }));
                let d = Count(dropped.clone());
                drop(hwsched::spawn(async move {
                    let _d = d;
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }));
                let d = Count(dropped.clone());
                drop(tokio::spawn(async move {
                    let _d = d;
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }));
                // A connection pending in a task, and one blocking tokio
                // thread busy for a while (not waited for).
                let d = Count(dropped.clone());
                drop(hwsched::spawn(async move {
                    let _d = d;
                    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                    let mut b = [0u8; 1];
                    let _ = s.read(&mut b).await;
                }));
                // Far longer than the bound below: the drop does not wait for it.
                drop(tokio::task::spawn_blocking(|| {
                    std::thread::sleep(Duration::from_secs(30))
                }));
                tokio::time::sleep(Duration::from_millis(5)).await;
                addr
            });
            let t = Instant::now();
            drop(rt);
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "drop took {:?}",
                t.elapsed()
            );
            assert_eq!(dropped.load(Ordering::SeqCst), 4, "every task was dropped");
            let _ = addr;
        }
    });
}

#[test]
fn axum_serve_and_hyper_utils_pooled_client_run_unchanged() {
    // The stack reqwest is built on (hyper-util's legacy client: tokio's
    // sockets, tokio::spawn for its connections, tokio's timer) against
    // axum::serve (a tokio listener, tokio::spawn per connection), both
    // started from hwsched tasks.
    use http_body_util::{BodyExt, Empty};
    use hyper::body::Bytes;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;

    common::with_timeout(60, "axum_client", || {
        let rt = rt();
        rt.block_on(async {
            let app = axum::Router::new().route("/", axum::routing::get(|| async { "hi" }));
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let (stop, stopped) = async_channel::bounded::<()>(1);
            let server = hwsched::spawn(async move {
                axum::serve(l, app)
                    .with_graceful_shutdown(async move {
                        let _ = stopped.recv().await;
                    })
                    .await
            });
            let got = hwsched::spawn(async move {
                let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
                let mut bodies = Vec::new();
                for _ in 0..3 {
                    let uri = format!("http://{addr}/").parse().unwrap();
                    let resp = client.get(uri).await.unwrap();
                    assert_eq!(resp.status(), 200);
                    bodies.push(resp.into_body().collect().await.unwrap().to_bytes());
                }
                bodies
            })
            .await
            .unwrap();
            assert!(got.iter().all(|b| &b[..] == b"hi"));
            stop.send(()).await.unwrap();
            server.await.unwrap().unwrap();
        });
    });
}

/// A task that waits on tokio resources (here its timers) while every
/// worker sleeps is woken on the bridge's thread, which polls it itself
/// (no worker's wake-up, no hand-off back: reqwest's sequential requests).
/// There it is a task as on a worker: its `spawn_local` tasks run (on the
/// bridge's thread), its spawns and wakes go to the workers, and it may
/// be polled on a worker next.
#[test]
fn a_task_woken_by_tokio_while_the_workers_sleep_runs_on_the_bridge() {
    common::with_timeout(60, "bridge", || {
        let rt = rt();
        let before = rt.stats().external.bridge_polls;
        let (on_bridge_polls, locals) = rt
            .block_on(rt.spawn(async {
                let (mut here, mut locals) = (0, 0);
                for i in 0..40u32 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    here += on_bridge() as u32;
                    // A local task stays on this thread and runs.
                    let me = std::thread::current().id();
                    let l = hwsched::spawn_local(async move {
                        tokio::time::sleep(Duration::from_micros(100)).await;
                        assert_eq!(std::thread::current().id(), me);
                        i
                    });
                    locals += (l.await.unwrap() == i) as u32;
                    // A spawned task runs on a worker.
                    let w = hwsched::spawn(async { hwsched::worker_index() });
                    assert!(w.await.unwrap().is_some());
                }
                (here, locals)
            }))
            .unwrap();
        assert_eq!(locals, 40);
        let polled = rt.stats().external.bridge_polls - before;
        assert!(
            on_bridge_polls > 0 && polled >= on_bridge_polls as u64,
            "no poll on the bridge ({on_bridge_polls} seen, {polled} counted)"
        );
    });
}

/// A poll on the bridge holds tokio's driver: a task whose polls there ran
/// long twice in a row is not polled there again.
#[test]
fn a_long_poll_on_the_bridge_is_not_repeated_there() {
    common::with_timeout(60, "bridge-long", || {
        let rt = rt();
        let long_on_bridge = rt
            .block_on(rt.spawn(async {
                let mut n = 0;
                for _ in 0..20 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    if on_bridge() {
                        n += 1;
                        // Longer than the bridge lets a poll run.
                        let t = Instant::now();
                        while t.elapsed() < Duration::from_millis(2) {
                            std::hint::spin_loop();
                        }
                    }
                }
                n
            }))
            .unwrap();
        assert!(
            long_on_bridge <= 2,
            "{long_on_bridge} long polls on the bridge"
        );
    });
}

/// A runtime dropped while its tasks are polled on the bridge (woken by
/// tokio's timers while the workers sleep): the drop returns, and every
/// task is dropped exactly once.
#[test]
fn dropping_the_runtime_while_the_bridge_polls_its_tasks() {
    struct Count(Arc<AtomicUsize>);
    impl Drop for Count {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    common::with_timeout(60, "bridge-drop", || {
        for _ in 0..20 {
            let rt = rt();
            let dropped = Arc::new(AtomicUsize::new(0));
            let polled = Arc::new(AtomicUsize::new(0));
            for _ in 0..4 {
                let c = Count(dropped.clone());
                let polled = polled.clone();
                drop(rt.spawn(async move {
                    let _c = c;
                    loop {
                        tokio::time::sleep(Duration::from_micros(300)).await;
                        if on_bridge() {
                            polled.fetch_add(1, Ordering::Relaxed);
                            // Short, but long enough to be dropped into.
                            let t = Instant::now();
                            while t.elapsed() < Duration::from_micros(100) {
                                std::hint::spin_loop();
                            }
                        }
                    }
                }));
            }
            // The drop lands among polls on the bridge (a busy machine may
            // keep a worker awake, and the wakes on the workers: the drop
            // is then the plain case).
            let t = Instant::now();
            while polled.load(Ordering::Relaxed) < 4 && t.elapsed() < Duration::from_millis(500) {
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(rt);
            assert_eq!(dropped.load(Ordering::SeqCst), 4);
        }
    });
}

/// A server spawns a task per request: tasks of one spawn location whose
/// polls on the bridge ran long twice in a row keep that location's tasks
/// off the bridge (each new task would otherwise hold tokio's driver once
/// or twice before its own mark).
#[test]
fn long_polls_of_one_spawn_location_keep_its_tasks_off_the_bridge() {
    common::with_timeout(60, "bridge-site", || {
        let rt = rt();
        let long_on_bridge = rt.block_on(async {
            let mut n = 0;
            for _ in 0..20 {
                // One spawn location, a new task each time.
                let t = hwsched::spawn(async {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    if !on_bridge() {
                        return 0;
                    }
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_millis(2) {
                        std::hint::spin_loop();
                    }
                    1
                });
                n += t.await.unwrap();
            }
            n
        });
        assert!(
            long_on_bridge <= 2,
            "{long_on_bridge} long polls on the bridge"
        );
    });
}
