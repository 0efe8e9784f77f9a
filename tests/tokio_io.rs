//! tokio's `AsyncRead` / `AsyncWrite` on `hwsched::net`'s streams (the
//! `tokio` feature): tokio's `io` helpers and tokio-util's codecs over
//! hwsched's sockets, on an hwsched runtime, with no tokio runtime.
#![cfg(feature = "tokio")]

use futures_lite::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::codec::{FramedRead, LinesCodec};

mod common;

fn rt() -> hwsched::Runtime {
    hwsched::Runtime::builder()
        .worker_threads(2)
        .build()
        .expect("runtime")
}

/// A payload bigger than the socket buffers: partial reads and writes.
fn payload() -> Vec<u8> {
    (0..4u32 << 20).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn tcp_round_trip_through_tokio_traits() {
    common::with_timeout(60, "tcp", || {
        rt().block_on(async {
            let l = hwsched::net::TcpListener::bind("127.0.0.1:0")
                .await
                .unwrap();
            let addr = l.local_addr().unwrap();
            // An echo server: tokio::io::copy between the owned halves.
            let server = hwsched::spawn(async move {
                let (s, _) = l.accept().await.unwrap();
                let (mut r, mut w) = s.into_split();
                let n = tokio::io::copy(&mut r, &mut w).await.unwrap();
                AsyncWriteExt::shutdown(&mut w).await.unwrap();
                n
            });
            let data = payload();
            let c = hwsched::net::TcpStream::connect(addr).await.unwrap();
            let (mut r, mut w) = c.into_split();
            let sent = data.clone();
            let writer = hwsched::spawn(async move {
                w.write_all(&sent).await.unwrap();
                // EOF for the server's copy.
                AsyncWriteExt::shutdown(&mut w).await.unwrap();
                w
            });
            let mut back = Vec::new();
            r.read_to_end(&mut back).await.unwrap();
            assert_eq!(back.len(), data.len());
            assert!(back == data, "the echo differs");
            assert_eq!(server.await.unwrap(), data.len() as u64);
            let w = writer.await.unwrap();
            let mut s = r.reunite(w).unwrap();
            // The whole stream too (not only its halves), and by reference.
            let mut buf = [0u8; 1];
            assert_eq!(s.read(&mut buf).await.unwrap(), 0);
            assert_eq!((&s).read(&mut buf).await.unwrap(), 0);
        });
    });
}

#[test]
fn framed_lines_over_hwsched_streams() {
    common::with_timeout(60, "framed", || {
        rt().block_on(async {
            let l = hwsched::net::TcpListener::bind("127.0.0.1:0")
                .await
                .unwrap();
            let addr = l.local_addr().unwrap();
            let server = hwsched::spawn(async move {
                let (s, _) = l.accept().await.unwrap();
                let mut lines = FramedRead::new(s, LinesCodec::new());
                let mut got = Vec::new();
                while let Some(line) = lines.next().await {
                    got.push(line.unwrap());
                }
                got
            });
            let mut c = hwsched::net::TcpStream::connect(addr).await.unwrap();
            for i in 0..1000 {
                c.write_all(format!("line {i}\n").as_bytes()).await.unwrap();
            }
            c.flush().await.unwrap();
            AsyncWriteExt::shutdown(&mut c).await.unwrap();
            let got = server.await.unwrap();
            assert_eq!(got.len(), 1000);
            assert!(got
                .iter()
                .enumerate()
                .all(|(i, l)| *l == format!("line {i}")));
        });
    });
}

#[test]
fn unix_round_trip_through_tokio_traits() {
    common::with_timeout(60, "unix", || {
        rt().block_on(async {
            let (mut a, b) = hwsched::net::UnixStream::pair().unwrap();
            let (mut br, mut bw) = b.into_split();
            let echo =
                hwsched::spawn(async move { tokio::io::copy(&mut br, &mut bw).await.unwrap() });
            let data = payload();
            let (mut ar, mut aw) = (&a, &a);
            let sent = data.clone();
            let mut back = vec![0u8; data.len()];
            let (w, r) = futures_lite::future::zip(
                async {
                    aw.write_all(&sent).await.unwrap();
                },
                async {
                    ar.read_exact(&mut back).await.unwrap();
                },
            )
            .await;
            let ((), ()) = (w, r);
            assert!(back == data);
            AsyncWriteExt::shutdown(&mut a).await.unwrap();
            assert_eq!(echo.await.unwrap(), data.len() as u64);
        });
    });
}
