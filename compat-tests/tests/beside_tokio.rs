//! hwsched and the newest tokio in one process: each runtime runs its own
//! tasks, tokio's sync primitives work across them, and a hyper client on
//! tokio talks to a hyper server on hwsched's sockets.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, Response};

#[test]
fn both_runtimes_run_their_tasks_in_one_process() {
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let hw = hwsched::Builder::new().worker_threads(2).build().unwrap();

    // A tokio channel crossing the two runtimes: hwsched sends, tokio receives.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(4);
    let received = tokio_rt.spawn(async move {
        let mut sum = 0;
        while let Some(v) = rx.recv().await {
            sum += v;
        }
        sum
    });
    let sent = hw.spawn(async move {
        for v in 1..=100 {
            tx.send(v).await.unwrap();
        }
    });
    hw.block_on(sent).unwrap();
    assert_eq!(tokio_rt.block_on(received).unwrap(), 5050);
}

#[test]
fn a_tokio_hyper_client_reaches_a_hyper_server_on_hwsched_sockets() {
    let hw = hwsched::Builder::new().worker_threads(2).build().unwrap();
    let listener = hw
        .block_on(async { hwsched::net::TcpListener::bind("127.0.0.1:0").await })
        .unwrap();
    let addr = listener.local_addr().unwrap();
    hw.spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            hwsched::spawn(async move {
                let service =
                    hyper::service::service_fn(|_req: Request<hyper::body::Incoming>| async {
                        Ok::<_, std::convert::Infallible>(Response::new(Full::new(
                            Bytes::from_static(b"hello from hwsched"),
                        )))
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(stream, service)
                    .await;
            });
        }
    });

    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let body = tokio_rt.block_on(async move {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        let req = Request::get("/").body(Full::new(Bytes::new())).unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(10), sender.send_request(req))
            .await
            .expect("the server answered within 10 s")
            .unwrap();
        resp.into_body().collect().await.unwrap().to_bytes()
    });
    assert_eq!(&body[..], b"hello from hwsched");
}
