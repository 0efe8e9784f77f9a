//! `EMFILE` on accept: with the descriptor limit reached, `accept` returns
//! the OS's error and the listener stays ready (its readiness is cleared
//! only by `WouldBlock`), so the server serves the waiting connections once
//! descriptors free up, without a new connection's edge to wake it. Its own
//! binary: it lowers this process's `RLIMIT_NOFILE`.
#![cfg(feature = "io")]

use std::io::{Read, Write};
use std::time::Duration;

use futures_lite::AsyncWriteExt;

mod common;

fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

fn set_soft_nofile(n: u64) -> u64 {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `l` is a valid rlimit to fill and then to set.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut l), 0);
        let old = l.rlim_cur;
        l.rlim_cur = n.min(l.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &l), 0);
        old
    }
}

#[test]
fn emfile_on_accept_leaves_the_server_serving_once_descriptors_free_up() {
    common::with_timeout(120, "emfile", || {
        const CLIENTS: usize = 24;
        let rt = hwsched::Runtime::builder()
            .worker_threads(2)
            .build()
            .unwrap();
        let listener = rt
            .block_on(hwsched::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        // Every client connects first: the kernel completes the handshakes
        // and the connections wait in the backlog.
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        // Room for 4 more descriptors: the server can hold 4 connections.
        let old = set_soft_nofile(open_fds() + 4);
        let server = rt.spawn(async move {
            let mut held = Vec::new();
            let mut served = 0;
            let mut emfile = 0;
            while served < CLIENTS {
                match listener.accept().await {
                    Ok((s, _)) => held.push(s),
                    Err(e) if e.raw_os_error() == Some(libc::EMFILE) => {
                        emfile += 1;
                        // Out of descriptors: answer and close the
                        // connections held, which frees them.
                        for mut s in held.drain(..) {
                            s.write_all(b"!").await.unwrap();
                            served += 1;
                        }
                    }
                    Err(e) => panic!("accept: {e}"),
                }
                if held.len() + served == CLIENTS {
                    for mut s in held.drain(..) {
                        s.write_all(b"!").await.unwrap();
                        served += 1;
                    }
                }
            }
            emfile
        });
        let emfile = rt.block_on(server).unwrap();
        set_soft_nofile(old);
        assert!(emfile > 0, "the limit was reached");
        for mut c in clients {
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut b = [0u8; 1];
            c.read_exact(&mut b).unwrap();
            assert_eq!(&b, b"!");
            let _ = c.write(b"");
        }
    });
}
