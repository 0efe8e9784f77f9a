//! `hwsched::net`'s UDP and Unix stream sockets on 2 workers: UDP echo
//! (unconnected and connected), Unix stream echo over many concurrent
//! connections, owned halves used from two tasks, `try_*` without
//! readiness, and the conversions to and from `std`.
//!
//! `cargo test --features io --test net_udp_unix`.
#![cfg(feature = "io")]

use std::io;
use std::net::Shutdown;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use hwsched::net::{UdpSocket, UnixListener, UnixStream};
use hwsched::Runtime;

/// A hang guard, not a performance bound.
const GUARD: Duration = Duration::from_secs(10);

fn rt() -> Runtime {
    Runtime::builder()
        .worker_threads(2)
        .build()
        .expect("a runtime")
}

/// Runs `f` in a fresh 2-worker runtime, failing if it takes over `GUARD`.
fn run<F: std::future::Future<Output = io::Result<()>> + Send + 'static>(f: F) {
    let rt = rt();
    rt.block_on(async move {
        hwsched::time::timeout(GUARD, f)
            .await
            .expect("the test hung")
            .expect("an I/O error")
    });
}

/// A socket path unique to this process and test, removed if left over.
fn sock_path(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("hwsched-test-{}-{}.sock", std::process::id(), name));
    let _ = std::fs::remove_file(&p);
    p
}

#[test]
fn udp_echo_100_datagrams() {
    run(async {
        let server = UdpSocket::bind("127.0.0.1:0").await?;
        let server_addr = server.local_addr()?;
        let echo = hwsched::spawn(async move {
            let mut buf = [0u8; 64];
            for _ in 0..100 {
                let (n, from) = server.recv_from(&mut buf).await?;
                let sent = server.send_to(&buf[..n], from).await?;
                assert_eq!(sent, n);
            }
            Ok::<_, io::Error>(())
        });
        let client = UdpSocket::bind("127.0.0.1:0").await?;
        let client_addr = client.local_addr()?;
        let mut buf = [0u8; 64];
        for i in 0u32..100 {
            let msg = format!("datagram {i}");
            assert_eq!(
                client.send_to(msg.as_bytes(), server_addr).await?,
                msg.len()
            );
            let (n, from) = client.recv_from(&mut buf).await?;
            assert_eq!(from, server_addr);
            assert_eq!(&buf[..n], msg.as_bytes());
        }
        echo.await.unwrap()?;
        assert_ne!(client_addr.port(), 0);
        Ok(())
    });
}

#[test]
fn udp_connected_send_recv_and_peek() {
    run(async {
        let a = UdpSocket::bind("127.0.0.1:0").await?;
        let b = UdpSocket::bind("127.0.0.1:0").await?;
        assert_eq!(
            a.peer_addr().unwrap_err().kind(),
            io::ErrorKind::NotConnected
        );
        a.connect(b.local_addr()?).await?;
        b.connect(a.local_addr()?).await?;
        assert_eq!(a.peer_addr()?, b.local_addr()?);

        let a = Arc::new(a);
        let a2 = a.clone();
        let echo = hwsched::spawn(async move {
            let mut buf = [0u8; 16];
            for _ in 0..100 {
                let n = a2.recv(&mut buf).await?;
                a2.send(&buf[..n]).await?;
            }
            Ok::<_, io::Error>(())
        });
        let mut buf = [0u8; 16];
        for i in 0u64..100 {
            b.send(&i.to_le_bytes()).await?;
            // Peek leaves the datagram queued: the recv returns it again.
            let (n, from) = b.peek_from(&mut buf).await?;
            assert_eq!((n, from), (8, a.local_addr()?));
            assert_eq!(b.recv(&mut buf).await?, 8);
            assert_eq!(u64::from_le_bytes(buf[..8].try_into().unwrap()), i);
        }
        echo.await.unwrap()?;
        Ok(())
    });
}

#[test]
fn udp_try_recv_would_block_then_readable() {
    run(async {
        let a = UdpSocket::bind("127.0.0.1:0").await?;
        let b = UdpSocket::bind("127.0.0.1:0").await?;
        let mut buf = [0u8; 8];
        assert_eq!(
            a.try_recv_from(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        b.writable().await?;
        assert_eq!(b.try_send_to(b"x", a.local_addr()?)?, 1);
        a.readable().await?;
        // Readable by the cache: a datagram may still be in flight on
        // loopback, so retry until it is read.
        let (n, from) = loop {
            match a.try_recv_from(&mut buf) {
                Ok(r) => break r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => a.readable().await?,
                Err(e) => return Err(e),
            }
        };
        assert_eq!((&buf[..n], from), (&b"x"[..], b.local_addr()?));
        assert_eq!(
            a.try_recv_from(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );

        a.connect(b.local_addr()?).await?;
        assert_eq!(
            a.try_recv(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        b.send_to(b"yz", a.local_addr()?).await?;
        a.readable().await?;
        assert_eq!(a.try_recv(&mut buf)?, 2);
        assert_eq!(&buf[..2], b"yz");
        a.writable().await?;
        assert_eq!(a.try_send(b"w")?, 1);
        assert_eq!(b.recv_from(&mut buf).await?.0, 1);
        Ok(())
    });
}

#[test]
fn udp_options_and_std_round_trip() {
    run(async {
        let s = UdpSocket::bind("127.0.0.1:0").await?;
        s.set_broadcast(true)?;
        assert!(s.broadcast()?);
        s.set_broadcast(false)?;
        assert!(!s.broadcast()?);
        s.set_ttl(42)?;
        assert_eq!(s.ttl()?, 42);
        assert!(s.take_error()?.is_none());
        let addr = s.local_addr()?;
        assert!(format!("{s:?}").contains(&addr.to_string()));

        let std_sock = s.into_std()?;
        assert_eq!(std_sock.local_addr()?, addr);
        let s = UdpSocket::from_std(std_sock)?;
        assert_eq!(s.local_addr()?, addr);
        let peer = std::net::UdpSocket::bind("127.0.0.1:0")?;
        peer.send_to(b"from std", addr)?;
        let mut buf = [0u8; 16];
        let (n, from) = s.recv_from(&mut buf).await?;
        assert_eq!((&buf[..n], from), (&b"from std"[..], peer.local_addr()?));
        Ok(())
    });
}

#[test]
fn udp_outside_runtime_is_an_error() {
    let std_sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let e = UdpSocket::from_std(std_sock).unwrap_err();
    assert!(e.to_string().contains("runtime"), "{e}");
}

#[test]
fn unix_echo_64_connections_100_round_trips() {
    const CONNS: usize = 64;
    const ROUNDS: usize = 100;
    let path = sock_path("echo");
    let p = path.clone();
    run(async move {
        let listener = UnixListener::bind(&p)?;
        assert_eq!(listener.local_addr()?.as_pathname(), Some(p.as_path()));
        let served = Arc::new(AtomicUsize::new(0));
        let s2 = served.clone();
        let server = hwsched::spawn(async move {
            let mut hs = Vec::new();
            for _ in 0..CONNS {
                let (mut s, _peer) = listener.accept().await?;
                let served = s2.clone();
                hs.push(hwsched::spawn(async move {
                    let mut buf = [0u8; 8];
                    for _ in 0..ROUNDS {
                        s.read_exact(&mut buf).await?;
                        s.write_all(&buf).await?;
                    }
                    // The client closes: EOF.
                    assert_eq!(s.read(&mut buf).await?, 0);
                    served.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, io::Error>(())
                }));
            }
            for h in hs {
                h.await.unwrap()?;
            }
            Ok::<_, io::Error>(())
        });
        let mut clients = Vec::new();
        for c in 0..CONNS {
            let p = p.clone();
            clients.push(hwsched::spawn(async move {
                let mut s = UnixStream::connect(&p).await?;
                assert_eq!(s.peer_addr()?.as_pathname(), Some(p.as_path()));
                let mut buf = [0u8; 8];
                for r in 0..ROUNDS {
                    let v = (c * ROUNDS + r) as u64;
                    s.write_all(&v.to_le_bytes()).await?;
                    s.read_exact(&mut buf).await?;
                    assert_eq!(u64::from_le_bytes(buf), v);
                }
                s.close().await?;
                Ok::<_, io::Error>(())
            }));
        }
        for c in clients {
            c.await.unwrap()?;
        }
        server.await.unwrap()?;
        assert_eq!(served.load(Ordering::SeqCst), CONNS);
        Ok(())
    });
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn unix_into_split_from_two_tasks() {
    const N: usize = 256 * 1024;
    run(async {
        let (a, b) = UnixStream::pair()?;
        // `b` echoes through its owned halves, one task each way.
        let (mut br, mut bw) = b.into_split();
        let (tx, rx) = async_channel::bounded::<Vec<u8>>(4);
        let reader = hwsched::spawn(async move {
            let mut buf = vec![0u8; 4096];
            loop {
                let n = br.read(&mut buf).await?;
                if n == 0 {
                    break;
                }
                tx.send(buf[..n].to_vec()).await.unwrap();
            }
            Ok::<_, io::Error>(br)
        });
        let writer = hwsched::spawn(async move {
            while let Ok(chunk) = rx.recv().await {
                bw.write_all(&chunk).await?;
            }
            bw.shutdown()?;
            Ok::<_, io::Error>(bw)
        });

        let (mut ar, mut aw) = a.into_split();
        let data: Vec<u8> = (0..N).map(|i| (i % 251) as u8).collect();
        let expect = data.clone();
        let send = hwsched::spawn(async move {
            aw.write_all(&data).await?;
            aw.shutdown()?;
            Ok::<_, io::Error>(aw)
        });
        let mut got = Vec::new();
        ar.read_to_end(&mut got).await?;
        assert_eq!(got.len(), N);
        assert!(got == expect, "the echo differs from what was sent");

        let aw = send.await.unwrap()?;
        let br = reader.await.unwrap()?;
        let bw = writer.await.unwrap()?;
        // Halves of different streams do not reunite; partners do.
        let (ar, bw) = ar.reunite(bw).unwrap_err();
        ar.reunite(aw).expect("partners");
        br.reunite(bw).expect("partners");
        Ok(())
    });
}

#[test]
fn unix_try_read_would_block_without_data() {
    run(async {
        let (a, b) = UnixStream::pair()?;
        let mut buf = [0u8; 16];
        assert_eq!(
            a.try_read(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        b.writable().await?;
        assert_eq!(b.try_write(b"hello")?, 5);
        a.readable().await?;
        assert_eq!(a.try_read(&mut buf)?, 5);
        assert_eq!(&buf[..5], b"hello");
        // Drained: WouldBlock again.
        assert_eq!(
            a.try_read(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        // A shut-down write half reads as EOF.
        b.shutdown(Shutdown::Write)?;
        a.readable().await?;
        assert_eq!(a.try_read(&mut buf)?, 0);
        Ok(())
    });
}

#[test]
fn unix_vectored_and_by_reference() {
    run(async {
        let (a, b) = UnixStream::pair()?;
        let mut wa = &a;
        let bufs = [io::IoSlice::new(b"ab"), io::IoSlice::new(b"cde")];
        let n = wa.write_vectored(&bufs).await?;
        assert_eq!(n, 5);
        let mut rb = &b;
        let mut x = [0u8; 2];
        let mut y = [0u8; 3];
        let mut bufs = [io::IoSliceMut::new(&mut x), io::IoSliceMut::new(&mut y)];
        // One write of 5 bytes on a Unix stream is read whole.
        assert_eq!(rb.read_vectored(&mut bufs).await?, 5);
        assert_eq!((&x, &y), (b"ab", b"cde"));
        Ok(())
    });
}

#[test]
fn unix_std_round_trip_and_errors() {
    let path = sock_path("std");
    let p = path.clone();
    run(async move {
        let l = UnixListener::bind(&p)?;
        // The path is taken.
        assert_eq!(
            UnixListener::bind(&p).unwrap_err().kind(),
            io::ErrorKind::AddrInUse
        );
        let l = UnixListener::from_std(l.into_std()?)?;
        let c = std::os::unix::net::UnixStream::connect(&p)?;
        let (s, _) = l.accept().await?;
        let mut s = UnixStream::from_std(s.into_std()?)?;
        let mut c = UnixStream::from_std(c)?;
        c.write_all(b"ok").await?;
        let mut buf = [0u8; 2];
        s.read_exact(&mut buf).await?;
        assert_eq!(&buf, b"ok");
        assert!(format!("{l:?}").contains("UnixListener"));
        assert!(format!("{s:?}").contains("UnixStream"));
        drop(l);
        // Nobody listens: the OS's error, unchanged.
        let e = UnixStream::connect(&p).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
        let e = UnixStream::connect(p.with_extension("missing"))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        Ok(())
    });
    std::fs::remove_file(&path).unwrap();
}
