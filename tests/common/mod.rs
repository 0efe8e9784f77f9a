//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// The 32-worker synthetic topology (2 packages x 2 LLCs x 4 cores x 2 PUs).
/// On a small machine its workers are unpinned threads.
pub const BIG: &str = "pack:2 l3:2 core:4 pu:2";

/// Tests that time a guarantee (prompt shutdown, a blocked worker's queue
/// served within a bound) hold this exclusively: they run beside the CPU
/// hog of `scripts/under-hog.sh`, the load they are specified for, but not
/// beside another test of the same binary with 32 busy workers of its own.
/// Every other test holds it shared.
static TIMED: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Runs `f` on its own thread and fails with "`name` did not finish in
/// `secs`s" if it has not returned by then. A panic in `f` is re-raised here.
/// Runs beside other tests, but not beside a [`with_timeout_alone`] one.
pub fn with_timeout<T, F>(secs: u64, name: &str, f: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let _shared = TIMED.read().unwrap_or_else(|e| e.into_inner());
    run_with_timeout(secs, name, f)
}

/// [`with_timeout`] for a test that times a guarantee: no other test of
/// this binary runs meanwhile (the timeout counts from when it starts).
pub fn with_timeout_alone<T, F>(secs: u64, name: &str, f: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let _alone = TIMED.write().unwrap_or_else(|e| e.into_inner());
    run_with_timeout(secs, name, f)
}

fn run_with_timeout<T, F>(secs: u64, name: &str, f: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let handle = thread::Builder::new()
        .name(format!("test-{name}"))
        .spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(f));
            let _ = tx.send(r);
        })
        .expect("spawn test thread");
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(Ok(v)) => {
            let _ = handle.join();
            v
        }
        Ok(Err(p)) => {
            let _ = handle.join();
            resume_unwind(p)
        }
        Err(_) => panic!("{name} did not finish in {secs}s"),
    }
}

/// A unique path in the temp directory (no extra dependency): pid, a
/// counter and the time.
pub fn temp_path(tag: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    std::env::temp_dir().join(format!(
        "hwsched-test-{tag}-{}-{n}-{nanos}",
        std::process::id()
    ))
}

/// Polls `f` to completion on this thread with a plain thread waker, no
/// runtime involved (for join handles whose runtime is gone).
pub fn block_on_plain<F: std::future::Future>(f: F) -> F::Output {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    struct W(thread::Thread, AtomicBool);
    impl Wake for W {
        fn wake(self: Arc<Self>) {
            self.1.store(true, Ordering::SeqCst);
            self.0.unpark();
        }
    }
    let w = Arc::new(W(thread::current(), AtomicBool::new(false)));
    let waker = Waker::from(w.clone());
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        // SeqCst: a test helper; pairs with the waker's store.
        while !w.1.swap(false, Ordering::SeqCst) {
            thread::park();
        }
    }
}

/// With the `io` feature, makes `rt`'s workers sleep in its I/O driver and
/// returns it: the driver is created on the program's first socket or
/// timer (io/mod.rs, "Opened by `build`, used from first use"), which a timer here provides.
/// So the suites run with `--features io` park every worker in a poller or
/// on its thread through the driver's hand-off. Without the feature: `rt`
/// as is.
pub fn drive_reactor(rt: hwsched::Runtime) -> hwsched::Runtime {
    #[cfg(feature = "io")]
    {
        let t0 = std::time::Instant::now();
        while !rt.stats().io_driven {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the I/O driver was never created:\n{}",
                rt.stats()
            );
            let h = rt.spawn(hwsched::time::sleep(Duration::from_millis(1)));
            rt.block_on(h).expect("a timer task");
        }
        // Its tasks retired, so that a test's counts start from a quiet
        // runtime.
        while rt.stats().spawned != rt.stats().retired {
            assert!(t0.elapsed() < Duration::from_secs(10), "{}", rt.stats());
            thread::sleep(Duration::from_millis(1));
        }
    }
    rt
}
