//! `hwsched::signal`: a signal raised by another thread reaches a listener
//! while the workers sleep; every listener sees a delivery; `ctrl_c`
//! resolves on `SIGINT` once its handler is installed; signals that cannot
//! be handled are refused with an error that names them.
//!
//! The tests share one process, so each uses its own signal, except where
//! an extra delivery cannot change the outcome.
//!
//! `cargo test --features io --test signal`.
#![cfg(feature = "io")]

use std::io;
use std::time::Duration;

use hwsched::signal::{ctrl_c, signal, SignalKind};
use hwsched::Runtime;

/// A hang guard, not a performance bound.
const GUARD: Duration = Duration::from_secs(10);

fn rt() -> Runtime {
    Runtime::builder()
        .worker_threads(2)
        .build()
        .expect("a runtime")
}

/// Sends `signum` to this process from a new thread, after `delay` (so
/// that the workers are asleep by then).
fn kill_later(signum: libc::c_int, delay: Duration) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        // SAFETY: kill(2) on this process; the test installed a handler
        // for `signum` before starting this thread.
        let r = unsafe { libc::kill(libc::getpid(), signum) };
        assert_eq!(r, 0, "kill: {}", io::Error::last_os_error());
    })
}

#[hwsched::test(worker_threads = 2)]
async fn sigusr1_from_another_thread_wakes_recv() {
    let mut sig = signal(SignalKind::user_defined1()).unwrap();
    assert_eq!(sig.kind(), SignalKind::user_defined1());
    for _ in 0..3 {
        let t = kill_later(libc::SIGUSR1, Duration::from_millis(50));
        let got = hwsched::time::timeout(GUARD, sig.recv()).await;
        assert_eq!(got, Ok(Some(())), "SIGUSR1 did not reach the listener");
        t.join().unwrap();
    }
}

#[test]
fn recv_in_a_task_with_all_workers_asleep() {
    let rt = rt();
    let mut sig = rt.block_on(async { signal(SignalKind::hangup()) }).unwrap();
    let h = rt.spawn(async move { hwsched::time::timeout(GUARD, sig.recv()).await });
    // Long enough for both workers to park (one in the poller).
    std::thread::sleep(Duration::from_millis(100));
    kill_later(libc::SIGHUP, Duration::ZERO).join().unwrap();
    let got = rt.block_on(h).unwrap();
    assert_eq!(got, Ok(Some(())), "SIGHUP did not reach the task");
}

#[hwsched::test(worker_threads = 2)]
async fn two_listeners_both_see_one_delivery() {
    let mut a = signal(SignalKind::user_defined2()).unwrap();
    let mut b = signal(SignalKind::user_defined2()).unwrap();
    let ha = hwsched::spawn(async move { hwsched::time::timeout(GUARD, a.recv()).await });
    let hb = hwsched::spawn(async move { hwsched::time::timeout(GUARD, b.recv()).await });
    let t = kill_later(libc::SIGUSR2, Duration::from_millis(50));
    assert_eq!(ha.await.unwrap(), Ok(Some(())), "listener a missed it");
    assert_eq!(hb.await.unwrap(), Ok(Some(())), "listener b missed it");
    t.join().unwrap();
}

#[test]
fn deliveries_coalesce_and_new_listeners_see_only_later_ones() {
    // A real-time signal: nothing outside this test sends it.
    let signum = libc::SIGRTMIN() + 3;
    let kind = SignalKind::from_raw(signum);
    let rt = rt();
    rt.block_on(async {
        let mut idle = signal(kind).unwrap();
        let mut watcher = signal(kind).unwrap();
        // Two deliveries, each dispatched (the watcher saw it) before the
        // next is sent; `idle` does not look meanwhile.
        for _ in 0..2 {
            let t = kill_later(signum, Duration::from_millis(20));
            assert_eq!(
                hwsched::time::timeout(GUARD, watcher.recv()).await,
                Ok(Some(()))
            );
            t.join().unwrap();
        }
        // `idle` sees the two as one.
        assert_eq!(
            futures_lite::future::poll_once(idle.recv()).await,
            Some(Some(()))
        );
        assert_eq!(futures_lite::future::poll_once(idle.recv()).await, None);
        // A listener created now does not see past deliveries.
        let mut late = signal(kind).unwrap();
        assert_eq!(futures_lite::future::poll_once(late.recv()).await, None);
        // All three see the next one.
        let t = kill_later(signum, Duration::from_millis(20));
        for s in [&mut late, &mut idle, &mut watcher] {
            assert_eq!(hwsched::time::timeout(GUARD, s.recv()).await, Ok(Some(())));
        }
        t.join().unwrap();
    });
}

#[test]
fn ctrl_c_resolves_on_sigint() {
    let rt = rt();
    rt.block_on(async {
        let mut first = std::pin::pin!(ctrl_c());
        // The first poll installs the handler (and does not resolve).
        assert!(futures_lite::future::poll_once(&mut first).await.is_none());
        let t = kill_later(libc::SIGINT, Duration::from_millis(50));
        let got = hwsched::time::timeout(GUARD, first).await;
        assert!(matches!(got, Ok(Ok(()))), "{got:?}");
        t.join().unwrap();

        // Installed for good: a second SIGINT does not kill the process.
        let mut second = std::pin::pin!(ctrl_c());
        assert!(futures_lite::future::poll_once(&mut second).await.is_none());
        let t = kill_later(libc::SIGINT, Duration::from_millis(20));
        let got = hwsched::time::timeout(GUARD, second).await;
        assert!(matches!(got, Ok(Ok(()))), "{got:?}");
        t.join().unwrap();
    });
}

#[hwsched::test(worker_threads = 2)]
async fn forbidden_signals_are_refused_by_name() {
    for (signum, name) in [
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGSTOP, "SIGSTOP"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGFPE, "SIGFPE"),
    ] {
        let e = signal(SignalKind::from_raw(signum)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains(name), "{e}");
    }
    for signum in [0, -1, 65, 1000] {
        let e = signal(SignalKind::from_raw(signum)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }
}

#[test]
fn outside_a_runtime_is_an_error() {
    let e = signal(SignalKind::terminate()).unwrap_err();
    assert!(e.to_string().contains("runtime"), "{e}");
}

#[test]
fn dropped_listener_leaves_others_working() {
    let rt = rt();
    rt.block_on(async {
        let kind = SignalKind::from_raw(libc::SIGURG);
        let mut keep = signal(kind).unwrap();
        {
            let mut gone = signal(kind).unwrap();
            // Registered as a waiter, then dropped.
            assert!(futures_lite::future::poll_once(gone.recv()).await.is_none());
        }
        let t = kill_later(libc::SIGURG, Duration::from_millis(20));
        assert_eq!(
            hwsched::time::timeout(GUARD, keep.recv()).await,
            Ok(Some(()))
        );
        t.join().unwrap();
    });
}
