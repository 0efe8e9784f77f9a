//! Panic isolation for task outputs and panic payloads:
//! a value that hwsched or async-task drops on the user's behalf (the output
//! of a detached task, of a handle dropped unawaited, of a task whose handle
//! outlives the runtime, a panic payload nobody will see) may panic in its
//! `Drop`. That panic is caught and counted like one in a task's poll or
//! drop: the process does not abort, the worker keeps running, and
//! `stats().total().panics` counts it when it happens on a worker.
//!
//! Each test runs under [`with_timeout`]. A panic that escapes one of these
//! drops aborts the whole test binary (SIGABRT); run the tests one at a
//! time by name to tell which one did.
//!
//! The tests' counters and flags use `SeqCst`: each store pairs with the
//! test thread's load of the same atomic (in `wait_until` or an assert);
//! their ordering is not what is under test.

use std::future::Future;
use std::panic::{catch_unwind, panic_any, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant};

use hwsched::{JoinError, JoinHandle, Runtime};

mod common;
use common::with_timeout;

/// Panics whose message contains this are intentional; the quiet hook does
/// not print them.
const QUIET: &str = "[intentional test panic]";

/// Installs (once, for the whole test binary) a panic hook that hides the
/// intentional panics of these tests (a message containing [`QUIET`], or a
/// [`PayloadBomb`] payload) and passes every other panic to the previous
/// hook unchanged. See `tests/reliability.rs` for why it is installed once.
fn quiet_intentional_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let p = info.payload();
            let quiet = p.downcast_ref::<&str>().is_some_and(|s| s.contains(QUIET))
                || p.downcast_ref::<String>()
                    .is_some_and(|s| s.contains(QUIET))
                || p.is::<PayloadBomb>();
            if !quiet {
                prev(info);
            }
        }));
    });
}

/// A one-worker runtime: every task runs on that worker, so "a task spawned
/// afterwards completes" shows that this very worker survived.
fn one_worker() -> Runtime {
    Runtime::builder()
        .worker_threads(1)
        .build()
        .expect("build 1-worker runtime")
}

/// Waits (up to 10 s) until `cond` holds; fails with `what` otherwise.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(10), "timed out: {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// The runtime's worker still runs tasks.
fn assert_worker_alive(rt: &Runtime) {
    let v = rt
        .block_on(rt.spawn(async { 6 * 7 }))
        .expect("a task spawned after the caught panic did not complete");
    assert_eq!(v, 42);
}

/// A task output whose destructor panics.
struct OutputBomb {
    drops: Arc<AtomicUsize>,
}

impl Drop for OutputBomb {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        panic!("{QUIET} output Drop");
    }
}

/// A panic payload whose destructor panics: with `depth > 0`, with another
/// `PayloadBomb` of `depth - 1` as the payload (whose drop panics again),
/// with `depth == 0` with a plain message.
struct PayloadBomb {
    depth: u32,
    drops: Arc<AtomicUsize>,
}

impl Drop for PayloadBomb {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        if self.depth > 0 {
            panic_any(PayloadBomb {
                depth: self.depth - 1,
                drops: self.drops.clone(),
            });
        }
        panic!("{QUIET} payload Drop");
    }
}

/// A future field whose destructor panics with a [`PayloadBomb`] payload.
struct DropPanicsWithBomb {
    depth: u32,
    drops: Arc<AtomicUsize>,
}

impl Drop for DropPanicsWithBomb {
    fn drop(&mut self) {
        panic_any(PayloadBomb {
            depth: self.depth,
            drops: self.drops.clone(),
        });
    }
}

/// A future whose poll panics (with a message) and whose field's `Drop`
/// then panics with a [`PayloadBomb`] when the runtime drops the finished
/// future. (A local of an `async` block would instead be dropped while the
/// poll's panic unwinds, which aborts whatever the runtime does.)
struct PollPanics {
    _guard: DropPanicsWithBomb,
}

impl Future for PollPanics {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        panic!("{QUIET} poll");
    }
}

fn panics(rt: &Runtime) -> u64 {
    rt.stats().total().panics
}

/// A task that waits for `go`, then returns the output `make` builds.
fn gated<T: Send + 'static>(
    rt: &Runtime,
    make: impl FnOnce() -> T + Send + 'static,
) -> (JoinHandle<T>, async_channel::Sender<()>) {
    let (go_tx, go_rx) = async_channel::bounded::<()>(1);
    let h = rt.spawn(async move {
        go_rx.recv().await.expect("go signal");
        make()
    });
    (h, go_tx)
}

/// Path 1: a detached task (handle dropped before it completes) whose output
/// panics in `Drop`: async-task drops that output on the worker, under its
/// abort-on-panic guard.
#[test]
fn detached_output_panicking_in_drop_is_caught() {
    with_timeout(30, "detached_output_panicking_in_drop_is_caught", || {
        quiet_intentional_panics();
        let rt = one_worker();
        let drops = Arc::new(AtomicUsize::new(0));
        let d = drops.clone();
        let (h, go) = gated(&rt, move || OutputBomb { drops: d });
        drop(h);
        go.send_blocking(()).expect("send go");
        wait_until("the detached output's panic was counted", || {
            panics(&rt) >= 1
        });
        assert_eq!(drops.load(Ordering::SeqCst), 1, "output dropped once");
        assert_worker_alive(&rt);
        assert_eq!(panics(&rt), 1, "exactly the output's Drop panic");
    });
}

/// Path 2: a `JoinHandle` dropped after its task completed, without being
/// awaited: the output is dropped where the handle is (on a worker inside
/// another task, then on a plain thread).
#[test]
fn finished_handle_dropped_unawaited_is_caught() {
    with_timeout(30, "finished_handle_dropped_unawaited_is_caught", || {
        quiet_intentional_panics();
        let rt = one_worker();
        let drops = Arc::new(AtomicUsize::new(0));

        // On a worker, inside a task: the task itself must not see a panic.
        let d = drops.clone();
        let outer = rt.spawn(async move {
            let inner = hwsched::spawn(async move { OutputBomb { drops: d } });
            while !inner.is_finished() {
                hwsched::yield_now().await;
            }
            drop(inner);
            5u32
        });
        match rt.block_on(outer) {
            Ok(v) => assert_eq!(v, 5),
            Err(e) => panic!(
                "dropping a finished handle failed its task (panicked: {})",
                e.is_panic()
            ),
        }
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(panics(&rt), 1, "the output's Drop panic, on the worker");
        assert_worker_alive(&rt);

        // On a thread that is not a worker: caught, not counted (no worker).
        let d = drops.clone();
        let h = rt.spawn(async move { OutputBomb { drops: d } });
        wait_until("the task finished", || h.is_finished());
        drop(h);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        assert_eq!(panics(&rt), 1);
        assert_worker_alive(&rt);
    });
}

/// Path 3a: a detached task whose poll panicked with a payload whose own
/// `Drop` panics (twice over: the second payload's drop panics too, and
/// that third payload is leaked).
#[test]
fn detached_panic_payload_panicking_in_drop_is_caught() {
    with_timeout(
        30,
        "detached_panic_payload_panicking_in_drop_is_caught",
        || {
            quiet_intentional_panics();
            let rt = one_worker();
            let drops = Arc::new(AtomicUsize::new(0));
            let d = drops.clone();
            let (h, go) = gated(&rt, move || -> u32 {
                panic_any(PayloadBomb { depth: 2, drops: d });
            });
            drop(h);
            go.send_blocking(()).expect("send go");
            // The poll's panic, then the payload's Drop panic.
            wait_until("both panics were counted", || panics(&rt) >= 2);
            // Depth 2 dropped (panics with depth 1), depth 1 dropped (panics
            // with depth 0), depth 0 leaked.
            assert_eq!(drops.load(Ordering::SeqCst), 2);
            assert_worker_alive(&rt);
            assert_eq!(panics(&rt), 2);
        },
    );
}

/// Path 3b: awaited. The poll's panic payload is handed to the awaiter
/// intact (dropping it is the user's business); a second panic raised while
/// the finished future is dropped, whose payload panics in `Drop`, is
/// discarded by hwsched without losing the first.
#[test]
fn awaited_panic_payload_panicking_in_drop_is_caught() {
    with_timeout(
        30,
        "awaited_panic_payload_panicking_in_drop_is_caught",
        || {
            quiet_intentional_panics();
            let rt = one_worker();
            let drops = Arc::new(AtomicUsize::new(0));

            // The payload itself reaches the awaiter, undropped.
            let d = drops.clone();
            let h = rt.spawn(async move {
                panic_any(PayloadBomb { depth: 0, drops: d });
            });
            let p = match rt.block_on(h) {
                Err(JoinError::Panicked(p)) => p.into_inner(),
                other => panic!("expected Panicked, got Ok or Cancelled: {}", other.is_ok()),
            };
            assert!(p.is::<PayloadBomb>(), "payload replaced");
            assert_eq!(
                drops.load(Ordering::SeqCst),
                0,
                "payload dropped by hwsched"
            );
            // The user's value: the user drops it (and catches its panic).
            assert!(catch_unwind(AssertUnwindSafe(move || drop(p))).is_err());
            assert_eq!(drops.load(Ordering::SeqCst), 1);
            assert_eq!(panics(&rt), 1);

            // Poll panics with a message; dropping the finished future then
            // panics with a PayloadBomb payload, which hwsched discards.
            let d = drops.clone();
            let h = rt.spawn(PollPanics {
                _guard: DropPanicsWithBomb { depth: 1, drops: d },
            });
            match rt.block_on(h) {
                Err(JoinError::Panicked(p)) => {
                    let msg = p.message().unwrap_or_default().to_owned();
                    assert!(msg.contains("poll"), "wrong payload: {msg:?}");
                }
                other => panic!(
                    "expected the poll's Panicked, got Ok or Cancelled: {}",
                    other.is_ok()
                ),
            }
            // The drop's payload (depth 1) dropped, its own payload leaked.
            assert_eq!(drops.load(Ordering::SeqCst), 2);
            assert_eq!(panics(&rt), 3, "poll panic and drop panic, both counted");
            assert_worker_alive(&rt);
        },
    );
}

/// Path 4: the runtime is dropped while completed outputs are still unjoined:
/// held by a task pending forever (dropped by shutdown, off any worker) and
/// by the test thread (dropped after the runtime is gone). Two in each
/// place, so that an uncaught first panic makes the second a panic during
/// unwinding.
#[test]
fn shutdown_with_unjoined_outputs_is_caught() {
    with_timeout(30, "shutdown_with_unjoined_outputs_is_caught", || {
        quiet_intentional_panics();
        let rt = one_worker();
        let drops = Arc::new(AtomicUsize::new(0));
        let holding = Arc::new(AtomicBool::new(false));
        let (d, hold) = (drops.clone(), holding.clone());
        let holder = rt.spawn(async move {
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let d = d.clone();
                    hwsched::spawn(async move { OutputBomb { drops: d } })
                })
                .collect();
            while !hs.iter().all(|h| h.is_finished()) {
                hwsched::yield_now().await;
            }
            hold.store(true, Ordering::SeqCst);
            std::future::pending::<()>().await;
            drop(hs);
        });
        let mine: Vec<_> = (0..2)
            .map(|_| {
                let d = drops.clone();
                rt.spawn(async move { OutputBomb { drops: d } })
            })
            .collect();
        wait_until("the holder holds two finished handles", || {
            holding.load(Ordering::SeqCst)
        });
        wait_until("the test's tasks finished", || {
            mine.iter().all(|h| h.is_finished())
        });
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        assert_worker_alive(&rt);
        drop(rt);
        assert_eq!(drops.load(Ordering::SeqCst), 2, "holder's outputs");
        assert!(
            holder.is_finished(),
            "the holder was not dropped by shutdown"
        );
        drop(holder);
        drop(mine);
        assert_eq!(drops.load(Ordering::SeqCst), 4, "all four outputs");
        // The process survived; a fresh runtime works.
        assert_worker_alive(&one_worker());
    });
}

/// Path 5: `abort()` of a task that already finished keeps its output
/// (`abort_of_finished_task_keeps_output` in tests/runtime.rs); dropping
/// the aborted handle then drops that output, which panics. And `abort()`
/// of a pending task whose destructor panics with a payload that panics in
/// `Drop`: the worker drops the task under async-task's abort guard.
#[test]
fn abort_paths_with_panicking_drops_are_caught() {
    with_timeout(30, "abort_paths_with_panicking_drops_are_caught", || {
        quiet_intentional_panics();
        let rt = one_worker();
        let drops = Arc::new(AtomicUsize::new(0));

        // Finished, aborted, dropped unawaited inside a task on the worker.
        let d = drops.clone();
        let outer = rt.spawn(async move {
            let inner = hwsched::spawn(async move { OutputBomb { drops: d } });
            while !inner.is_finished() {
                hwsched::yield_now().await;
            }
            inner.abort();
            drop(inner);
            5u32
        });
        match rt.block_on(outer) {
            Ok(v) => assert_eq!(v, 5),
            Err(e) => panic!(
                "dropping an aborted finished handle failed its task (panicked: {})",
                e.is_panic()
            ),
        }
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(panics(&rt), 1);
        assert_worker_alive(&rt);

        // Finished, aborted, dropped on the test thread.
        let d = drops.clone();
        let h = rt.spawn(async move { OutputBomb { drops: d } });
        wait_until("the task finished", || h.is_finished());
        h.abort();
        drop(h);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        assert_worker_alive(&rt);

        // Pending, aborted: its future's Drop panics with a PayloadBomb.
        let pdrops = Arc::new(AtomicUsize::new(0));
        let started = Arc::new(AtomicBool::new(false));
        let (pd, s) = (pdrops.clone(), started.clone());
        let h = rt.spawn(async move {
            let _guard = DropPanicsWithBomb {
                depth: 1,
                drops: pd,
            };
            s.store(true, Ordering::SeqCst);
            std::future::pending::<()>().await;
        });
        wait_until("the pending task ran", || started.load(Ordering::SeqCst));
        let before = panics(&rt);
        h.abort();
        let r = rt.block_on(h);
        assert!(
            r.is_err_and(|e| e.is_cancelled()),
            "aborted task not Cancelled"
        );
        // The drop's payload (depth 1) dropped, its own payload leaked.
        assert_eq!(pdrops.load(Ordering::SeqCst), 1);
        assert_eq!(panics(&rt), before + 1, "the future's Drop panic");
        assert_worker_alive(&rt);
    });
}
