//! The edges of the runtime's life: `block_on` on one thread,
//! dropping the runtime from inside itself, destructors that spawn while
//! shutdown drops them, and `pinned_workers()` right after `build()`.
//! Each test is bounded by a watchdog, so a hang fails instead of blocking
//! the suite.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use hwsched::{JoinError, JoinHandle, Runtime};

mod common;
use common::{block_on_plain, drive_reactor, with_timeout};

fn two() -> Runtime {
    drive_reactor(
        Runtime::builder()
            .worker_threads(2)
            .build()
            .expect("a 2-worker runtime"),
    )
}

// ---------------------------------------------------------------------------
// 1. block_on
// ---------------------------------------------------------------------------

#[test]
fn nested_block_on_completes() {
    with_timeout(30, "nested_block_on", || {
        let rt = Arc::new(two());
        let inner = rt.clone();
        let v = rt.block_on(async move { inner.block_on(async { 1 }) + 2 });
        assert_eq!(v, 3);
        // Nested with a real wait inside: the inner call's future is woken
        // by a task on the runtime.
        let inner = rt.clone();
        let v = rt.block_on(async move {
            let h = hwsched::spawn(async {
                thread::sleep(Duration::from_millis(5));
                40
            });
            inner.block_on(h).unwrap() + 2
        });
        assert_eq!(v, 42);
    });
}

/// A future that, on its first poll, registers interest in a join handle
/// and then blocks in `recv_timeout` (which parks the thread and may
/// consume the unpark the handle's wake sends), then returns `Pending`.
struct ConsumesToken<T> {
    handle: JoinHandle<T>,
    first: bool,
}

impl<T> Future for ConsumesToken<T> {
    type Output = Result<T, JoinError>;
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let r = std::pin::Pin::new(&mut self.handle).poll(cx);
        if r.is_pending() && self.first {
            self.first = false;
            // The task completes during this wait; its wake's unpark may be
            // consumed here.
            let (_tx, rx) = mpsc::channel::<()>();
            let _ = rx.recv_timeout(Duration::from_millis(100));
        }
        r
    }
}

#[test]
fn block_on_survives_a_future_that_consumes_the_park_token() {
    with_timeout(30, "block_on_park_token", || {
        let rt = two();
        for _ in 0..20 {
            let h = rt.spawn(async {
                thread::sleep(Duration::from_millis(10));
                7
            });
            let v = rt.block_on(ConsumesToken {
                handle: h,
                first: true,
            });
            assert_eq!(v.unwrap(), 7);
        }
    });
}

// ---------------------------------------------------------------------------
// 2. Dropping the runtime from one of its own tasks
// ---------------------------------------------------------------------------

/// Counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn dropping_the_last_runtime_reference_inside_a_task_shuts_it_down() {
    with_timeout(30, "drop_inside_task", || {
        let dropped = Arc::new(AtomicUsize::new(0));
        let rt = Arc::new(two());
        // 50 tasks that never finish, each holding a drop-counted value.
        let (_keep, never) = async_channel::bounded::<()>(1);
        let pending: Vec<_> = (0..50)
            .map(|_| {
                let c = Counted(dropped.clone());
                let never = never.clone();
                rt.spawn(async move {
                    let _c = c;
                    let _ = never.recv().await;
                })
            })
            .collect();
        // Let them all reach their first await.
        thread::sleep(Duration::from_millis(50));
        let (done_tx, done_rx) = mpsc::channel();
        let last = rt.clone();
        drop(rt.spawn(async move {
            // The last reference goes away on a worker of this runtime.
            drop(last);
            done_tx.send(()).unwrap();
        }));
        drop(rt);
        done_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the task that dropped the runtime finished");
        for h in pending {
            assert!(
                matches!(block_on_plain(h), Err(JoinError::Cancelled)),
                "a pending task's handle resolves to Cancelled"
            );
        }
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            50,
            "each pending task dropped once"
        );
    });
}

#[test]
fn shutdown_timeout_from_inside_a_task_returns() {
    with_timeout(30, "shutdown_inside_task", || {
        let rt = two();
        let (tx, rx) = mpsc::channel::<Runtime>();
        let (done_tx, done_rx) = mpsc::channel::<bool>();
        let h = rt.spawn(async move {
            let inner = rx.recv().unwrap();
            // A timeout far beyond the watchdog's: the call must not wait
            // for the worker it runs on.
            done_tx
                .send(inner.shutdown_timeout(Duration::from_secs(600)))
                .unwrap();
        });
        drop(h);
        tx.send(rt).unwrap();
        let joined = done_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("shutdown_timeout returned without waiting for its own worker");
        assert!(!joined, "the worker running the task cannot be joined");
    });
}

// ---------------------------------------------------------------------------
// 3. Destructors that spawn while shutdown drops them
// ---------------------------------------------------------------------------

/// Spawns from its destructor and keeps the handle.
struct SpawnsOnDrop(Arc<Mutex<Vec<JoinHandle<()>>>>);

impl Drop for SpawnsOnDrop {
    fn drop(&mut self) {
        let h = hwsched::spawn(async {});
        self.0.lock().unwrap().push(h);
    }
}

#[test]
fn a_destructor_that_spawns_during_shutdown_gets_a_cancelled_handle() {
    with_timeout(30, "spawn_in_drop_during_shutdown", || {
        let handles = Arc::new(Mutex::new(Vec::new()));
        let rt = two();
        let (_keep, never) = async_channel::bounded::<()>(1);
        for _ in 0..20 {
            // Two such values per task: a panic from the first would turn
            // the second into an abort.
            let (a, b) = (SpawnsOnDrop(handles.clone()), SpawnsOnDrop(handles.clone()));
            let never = never.clone();
            drop(rt.spawn(async move {
                let _a = a;
                let _b = b;
                let _ = never.recv().await;
            }));
        }
        thread::sleep(Duration::from_millis(50));
        drop(rt);
        let hs = std::mem::take(&mut *handles.lock().unwrap());
        assert_eq!(hs.len(), 40, "every destructor ran once");
        for h in hs {
            assert!(matches!(block_on_plain(h), Err(JoinError::Cancelled)));
        }
    });
}

// ---------------------------------------------------------------------------
// 7. pinned_workers() right after build()
// ---------------------------------------------------------------------------

#[test]
fn pinned_workers_is_exact_right_after_build() {
    with_timeout(60, "pinned_workers_after_build", || {
        // Can this process pin at all (a restricted container may refuse)?
        let can_pin = thread::spawn(|| hwsched::topology::pin_current_thread(0))
            .join()
            .unwrap();
        for i in 0..50 {
            let rt = two();
            let expect = if can_pin { rt.workers() } else { 0 };
            assert_eq!(
                rt.pinned_workers(),
                expect,
                "build {i}: pinned_workers() right after build()"
            );
        }
    });
}
