//! `hwsched::hyper::serve`: HTTP/1 and HTTP/2 (prior knowledge) on one
//! listener, the header read timeout against slow clients (one and a
//! thousand), and graceful shutdown. Its own binary: it raises this
//! process's `RLIMIT_NOFILE`.
#![cfg(feature = "server")]

use std::convert::Infallible;
use std::future::IntoFuture;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};

mod common;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn rt() -> hwsched::Runtime {
    hwsched::Runtime::builder()
        .worker_threads(2)
        .build()
        .expect("runtime")
}

/// A handler: answers "<version> <path>"; `/slow` first notes that it
/// started, sleeps 300 ms, and notes that it finished.
#[derive(Clone, Default)]
struct App {
    started: Arc<AtomicBool>,
    finished: Arc<AtomicBool>,
}

impl App {
    async fn handle(self, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        if req.uri().path() == "/slow" {
            self.started.store(true, Ordering::SeqCst);
            hwsched::time::sleep(Duration::from_millis(300)).await;
            self.finished.store(true, Ordering::SeqCst);
        }
        let body = format!("{:?} {}", req.version(), req.uri().path());
        Ok(Response::new(Full::new(Bytes::from(body))))
    }
}

/// Serves `app` on a fresh listener with `timeout` as the header read
/// timeout; returns its address, the sender that stops it and its task.
async fn start(
    app: App,
    timeout: Duration,
) -> (
    SocketAddr,
    async_channel::Sender<()>,
    hwsched::JoinHandle<Result<(), hwsched::hyper::ServeError>>,
) {
    let listener = hwsched::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = async_channel::bounded::<()>(1);
    let svc = hyper::service::service_fn(move |req| app.clone().handle(req));
    let server = hwsched::hyper::serve(listener, hwsched::hyper::HyperService(svc))
        .header_read_timeout(timeout)
        .with_graceful_shutdown(async move {
            let _ = stopped.recv().await;
        });
    (addr, stop, hwsched::spawn(server.into_future()))
}

async fn get_h1(addr: SocketAddr, path: &str) -> Result<(StatusCode, String), BoxError> {
    let s = hwsched::net::TcpStream::connect(addr).await?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(s).await?;
    drop(hwsched::spawn(conn));
    let req = Request::get(format!("http://{addr}{path}"))
        .header("host", addr.to_string())
        .body(Empty::<Bytes>::new())?;
    let resp = send.send_request(req).await?;
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8(body.to_vec())?))
}

async fn get_h2(addr: SocketAddr, path: &str) -> Result<(StatusCode, String), BoxError> {
    let s = hwsched::net::TcpStream::connect(addr).await?;
    let (mut send, conn) =
        hyper::client::conn::http2::Builder::new(hwsched::hyper::Executor::new())
            .timer(hwsched::hyper::Timer)
            .handshake(s)
            .await?;
    drop(hwsched::spawn(conn));
    let req = Request::get(format!("http://{addr}{path}")).body(Empty::<Bytes>::new())?;
    let resp = send.send_request(req).await?;
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8(body.to_vec())?))
}

#[test]
fn serves_http1_and_http2_on_one_listener() {
    common::with_timeout(60, "h1_h2", || {
        let rt = rt();
        rt.block_on(async {
            let (addr, stop, server) = start(App::default(), Duration::from_secs(5)).await;
            for _ in 0..3 {
                let (st, body) = get_h1(addr, "/a").await.expect("HTTP/1.1 request");
                assert_eq!((st, body.as_str()), (StatusCode::OK, "HTTP/1.1 /a"));
                let (st, body) = get_h2(addr, "/b").await.expect("HTTP/2 request");
                assert_eq!((st, body.as_str()), (StatusCode::OK, "HTTP/2.0 /b"));
            }
            stop.send(()).await.unwrap();
            server.await.unwrap().expect("a graceful end");
        });
    });
}

#[test]
fn graceful_shutdown_finishes_in_flight_requests_and_stops_accepting() {
    common::with_timeout(60, "graceful", || {
        let rt = rt();
        rt.block_on(async {
            let app = App::default();
            let (addr, stop, server) = start(app.clone(), Duration::from_secs(5)).await;
            // Idle connections, one of each protocol: closed by the
            // shutdown, they do not hold it up.
            let idle1 = hwsched::net::TcpStream::connect(addr).await.unwrap();
            let (_idle1_send, idle1_conn) =
                hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(idle1)
                    .await
                    .unwrap();
            let idle1_conn = hwsched::spawn(idle1_conn);
            let idle2 = hwsched::net::TcpStream::connect(addr).await.unwrap();
            let (_idle2_send, idle2_conn) = hyper::client::conn::http2::handshake::<
                _,
                _,
                Empty<Bytes>,
            >(hwsched::hyper::Executor::new(), idle2)
            .await
            .unwrap();
            let idle2_conn = hwsched::spawn(idle2_conn);
            // Both are served (HTTP/2's handshake needs the server's
            // settings), before the shutdown.
            get_h1(addr, "/").await.unwrap();

            let h1 = hwsched::spawn(get_h1(addr, "/slow"));
            while !app.started.load(Ordering::SeqCst) {
                hwsched::time::sleep(Duration::from_millis(1)).await;
            }
            stop.send(()).await.unwrap();
            server.await.unwrap().expect("a graceful end");
            assert!(
                app.finished.load(Ordering::SeqCst),
                "serve returned before the in-flight request finished"
            );
            let (st, body) = h1
                .await
                .unwrap()
                .expect("the in-flight request is answered");
            assert_eq!((st, body.as_str()), (StatusCode::OK, "HTTP/1.1 /slow"));
            // The idle connections were closed by the server.
            hwsched::time::timeout(Duration::from_secs(10), idle1_conn)
                .await
                .expect("idle HTTP/1 connection closed")
                .unwrap()
                // hyper's client calls the end of a connection that never
                // carried a request an incomplete message.
                .ok();
            hwsched::time::timeout(Duration::from_secs(10), idle2_conn)
                .await
                .expect("idle HTTP/2 connection closed")
                .unwrap()
                .expect("closed cleanly");
            // The listener is closed: no more connections.
            let e = hwsched::net::TcpStream::connect(addr)
                .await
                .expect_err("the listener is closed");
            assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
        });
    });
}

/// Raises the soft descriptor limit to the hard one; returns it.
fn raise_nofile() -> u64 {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `l` is a valid rlimit to fill and then to set.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut l), 0);
        l.rlim_cur = l.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &l), 0);
    }
    l.rlim_cur
}

/// What a slow client sends before it waits: half a header line; nothing
/// at all; half of HTTP/2's preface.
const SLOW: [&[u8]; 3] = [b"GET / HTTP/1.1\r\nHo", b"", b"PRI * HTTP/2.0\r\n"];

/// Opens `n` slow clients; returns them with the instant each was opened.
fn slow_clients(addr: SocketAddr, n: usize) -> Vec<(std::net::TcpStream, Instant)> {
    (0..n)
        .map(|i| {
            let t = Instant::now();
            let mut c = std::net::TcpStream::connect(addr).expect("connect");
            c.write_all(SLOW[i % SLOW.len()]).unwrap();
            (c, t)
        })
        .collect()
}

/// Waits until the server closes `c`; returns how long after `opened`.
fn closed_after(c: &mut std::net::TcpStream, opened: Instant) -> Duration {
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut sink = Vec::new();
    match c.read_to_end(&mut sink) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server did not close a slow client: {e}"),
    }
    opened.elapsed()
}

#[test]
fn a_slow_header_client_is_disconnected_after_the_timeout() {
    common::with_timeout(60, "slow_one", || {
        let rt = rt();
        let (addr, stop, server) = rt.block_on(start(App::default(), Duration::from_millis(200)));
        for (mut c, opened) in slow_clients(addr, SLOW.len()) {
            let d = closed_after(&mut c, opened);
            assert!(
                d >= Duration::from_millis(200) && d < Duration::from_secs(10),
                "closed after {d:?}"
            );
        }
        rt.block_on(async {
            stop.send(()).await.unwrap();
            server.await.unwrap().unwrap();
        });
    });
}

#[test]
fn a_thousand_slow_header_clients_do_not_stop_the_server() {
    common::with_timeout(120, "slow_many", || {
        let limit = raise_nofile();
        // Two descriptors per client (the client's and the server's), and
        // some for the rest of the process.
        let n = 1000.min((limit.saturating_sub(200) / 2) as usize);
        assert!(n >= 100, "RLIMIT_NOFILE {limit} is too low for this test");
        let rt = rt();
        let (addr, stop, server) = rt.block_on(start(App::default(), Duration::from_millis(200)));
        let t0 = Instant::now();
        let mut slow = slow_clients(addr, n);
        // Others are answered meanwhile.
        rt.block_on(async {
            for _ in 0..5 {
                let t = Instant::now();
                let (st, _) = get_h1(addr, "/")
                    .await
                    .expect("answered beside slow clients");
                assert_eq!(st, StatusCode::OK);
                assert!(
                    t.elapsed() < Duration::from_secs(5),
                    "took {:?}",
                    t.elapsed()
                );
            }
        });
        for (c, opened) in &mut slow {
            let d = closed_after(c, *opened);
            assert!(d >= Duration::from_millis(200), "closed after {d:?}");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{n} slow clients took {:?} to be disconnected",
            t0.elapsed()
        );
        drop(slow);
        rt.block_on(async {
            let (st, _) = get_h2(addr, "/").await.expect("answered after");
            assert_eq!(st, StatusCode::OK);
            stop.send(()).await.unwrap();
            server.await.unwrap().unwrap();
        });
    });
}

/// Sends one whole HTTP/1.1 request for `path` on `c` and reads its
/// response (the App's bodies are short: one read of the head and the
/// body, by `Content-Length`); returns the response's text.
fn request_on(c: &mut std::net::TcpStream, path: &str) -> String {
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = c.read(&mut buf).expect("a response");
        assert!(n > 0, "closed before the response: {got:?}");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(head_end) = text.find("\r\n\r\n") {
            let len: usize = text[..head_end]
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .expect("content-length")
                .parse()
                .unwrap();
            if got.len() >= head_end + 4 + len {
                return text;
            }
        }
    }
}

#[test]
fn an_idle_keep_alive_connection_is_closed_the_timeout_after_its_last_response() {
    common::with_timeout(60, "idle_keep_alive", || {
        let rt = rt();
        let (addr, stop, server) = rt.block_on(start(App::default(), Duration::from_millis(300)));
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        // Requests 100 ms apart for longer than the timeout: each wait is
        // shorter than it, so the connection stays open.
        // The timeout runs from the server's end of the last response,
        // which the client cannot see: what it sees is that its request
        // went before it.
        let mut sent = Instant::now();
        for i in 0..5 {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(100));
            }
            sent = Instant::now();
            assert!(request_on(&mut c, "/a").ends_with("HTTP/1.1 /a"));
        }
        let d = closed_after(&mut c, sent);
        assert!(
            d >= Duration::from_millis(300) && d < Duration::from_secs(10),
            "closed {d:?} after the last request was sent"
        );
        rt.block_on(async {
            stop.send(()).await.unwrap();
            server.await.unwrap().unwrap();
        });
    });
}

#[test]
fn a_slow_head_after_a_request_is_cut_the_timeout_after_the_response() {
    common::with_timeout(60, "slow_second_head", || {
        let rt = rt();
        let (addr, stop, server) = rt.block_on(start(App::default(), Duration::from_millis(300)));
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        // From before the request: the server's end of the response is
        // after it (the previous test).
        let sent = Instant::now();
        assert!(request_on(&mut c, "/a").ends_with("HTTP/1.1 /a"));
        std::thread::sleep(Duration::from_millis(100));
        c.write_all(SLOW[0]).unwrap();
        let d = closed_after(&mut c, sent);
        assert!(
            d >= Duration::from_millis(300) && d < Duration::from_secs(10),
            "closed {d:?} after the request was sent"
        );
        rt.block_on(async {
            stop.send(()).await.unwrap();
            server.await.unwrap().unwrap();
        });
    });
}

#[test]
fn a_handler_slower_than_the_timeout_is_answered_and_its_connection_kept() {
    common::with_timeout(60, "slow_handler", || {
        let rt = rt();
        // `/slow` takes 300 ms: longer than the header read timeout, which
        // runs only while a request head is awaited.
        let (addr, stop, server) = rt.block_on(start(App::default(), Duration::from_millis(100)));
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        for _ in 0..2 {
            assert!(request_on(&mut c, "/slow").ends_with("HTTP/1.1 /slow"));
            assert!(request_on(&mut c, "/a").ends_with("HTTP/1.1 /a"));
        }
        rt.block_on(async {
            stop.send(()).await.unwrap();
            server.await.unwrap().unwrap();
        });
    });
}

#[test]
fn a_header_timeout_of_duration_max_never_fires_and_serves() {
    common::with_timeout(60, "max_timeout", || {
        let rt = rt();
        rt.block_on(async {
            let (addr, stop, server) = start(App::default(), Duration::MAX).await;
            for _ in 0..3 {
                let (st, body) = get_h1(addr, "/a").await.expect("HTTP/1.1 request");
                assert_eq!((st, body.as_str()), (StatusCode::OK, "HTTP/1.1 /a"));
                let (st, body) = get_h2(addr, "/b").await.expect("HTTP/2 request");
                assert_eq!((st, body.as_str()), (StatusCode::OK, "HTTP/2.0 /b"));
            }
            stop.send(()).await.unwrap();
            server.await.unwrap().expect("a graceful end");
        });
    });
}
