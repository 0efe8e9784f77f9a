//! `spawn_local` on the thread of `Runtime::block_on`: the local task runs
//! there, between polls of the main future, woken from any thread; it is
//! aborted and cancelled like any task, and dropped exactly once, on its
//! thread: when it finishes, when it is aborted, when its runtime shuts
//! down, or when the outermost `block_on` on its thread returns.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::thread::{self, ThreadId};
use std::time::Duration;

use common::with_timeout;
use hwsched::{JoinError, Runtime};

fn rt(workers: usize) -> Runtime {
    Runtime::builder().worker_threads(workers).build().unwrap()
}

/// Counts its drops (an `Rc`: the future holding it is not `Send`) and
/// records the thread of each.
struct LocalDrop {
    drops: Rc<Cell<u32>>,
    on: Arc<Mutex<Vec<ThreadId>>>,
}

impl Drop for LocalDrop {
    fn drop(&mut self) {
        self.drops.set(self.drops.get() + 1);
        self.on.lock().unwrap().push(thread::current().id());
    }
}

/// Waits until another thread wakes it: the waker goes to a plain thread,
/// which sets the flag, then wakes.
async fn woken_by_a_plain_thread() {
    let (tx, rx) = std::sync::mpsc::channel::<Waker>();
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    thread::spawn(move || {
        let w = rx.recv().unwrap();
        d2.store(true, Ordering::SeqCst);
        w.wake();
    });
    let mut tx = Some(tx);
    std::future::poll_fn(|cx| {
        if done.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        if let Some(tx) = tx.take() {
            tx.send(cx.waker().clone()).unwrap();
        }
        Poll::Pending
    })
    .await
}

/// Local tasks holding an `Rc` run to completion on `block_on`'s thread,
/// every poll there, woken from a plain thread, from `spawn_blocking` and
/// from a worker's task.
#[test]
fn local_tasks_run_on_the_block_on_thread_woken_from_anywhere() {
    with_timeout(60, "block_on spawn_local", || {
        let rt = rt(2);
        let me = thread::current().id();
        let (count, polls) = rt.block_on(async move {
            let count = Rc::new(Cell::new(0u32));
            let polls = Rc::new(Cell::new(0u32));
            let hs: Vec<_> = (0..40)
                .map(|i| {
                    let (c, p) = (count.clone(), polls.clone());
                    hwsched::spawn_local(async move {
                        for k in 0..9 {
                            assert_eq!(thread::current().id(), me, "task {i} moved");
                            p.set(p.get() + 1);
                            match (i + k) % 3 {
                                0 => hwsched::spawn_blocking(|| {
                                    thread::sleep(Duration::from_micros(50))
                                })
                                .await
                                .unwrap(),
                                1 => woken_by_a_plain_thread().await,
                                _ => hwsched::spawn(async { hwsched::yield_now().await })
                                    .await
                                    .unwrap(),
                            }
                        }
                        assert_eq!(thread::current().id(), me, "task {i} moved");
                        c.set(c.get() + 1);
                        i
                    })
                })
                .collect();
            for (i, h) in hs.into_iter().enumerate() {
                assert_eq!(h.await.unwrap(), i);
            }
            (count.get(), polls.get())
        });
        assert_eq!(count, 40);
        assert_eq!(polls, 40 * 9);
    })
}

/// A local task runs while the main future waits on something only that
/// task does (the main future never polls its handle), and a local task
/// spawns more local tasks.
#[test]
fn local_tasks_run_between_polls_of_the_main_future() {
    with_timeout(60, "block_on spawn_local turns", || {
        let rt = rt(1);
        let got = rt.block_on(async {
            let seen = Rc::new(Cell::new(0u32));
            let s = seen.clone();
            drop(hwsched::spawn_local(async move {
                for _ in 0..5 {
                    let s2 = s.clone();
                    hwsched::spawn_local(async move {
                        hwsched::yield_now().await;
                        s2.set(s2.get() + 1);
                    })
                    .await
                    .unwrap();
                }
            }));
            // The main future: woken only by a worker's task, five times.
            for _ in 0..5 {
                hwsched::spawn(async { hwsched::yield_now().await })
                    .await
                    .unwrap();
            }
            std::future::poll_fn(|cx| {
                if seen.get() == 5 {
                    return Poll::Ready(());
                }
                // Woken again soon, from elsewhere: a local task's
                // progress wakes no one.
                let w = cx.waker().clone();
                thread::spawn(move || {
                    thread::sleep(Duration::from_millis(1));
                    w.wake();
                });
                Poll::Pending
            })
            .await;
            seen.get()
        });
        assert_eq!(got, 5);
    })
}

/// An aborted local task (aborted from another thread while it waits) is
/// dropped once, on its thread, and its handle yields `Cancelled`.
#[test]
fn an_aborted_local_task_is_dropped_once_on_its_thread() {
    with_timeout(60, "block_on spawn_local abort", || {
        let rt = rt(1);
        let on = Arc::new(Mutex::new(Vec::new()));
        let on2 = on.clone();
        let (cancelled, drops) = rt.block_on(async move {
            let drops = Rc::new(Cell::new(0));
            let d = LocalDrop {
                drops: drops.clone(),
                on: on2,
            };
            let h = hwsched::spawn_local(async move {
                let _d = d;
                std::future::pending::<()>().await
            });
            hwsched::yield_now().await;
            let abort = h.abort_handle();
            thread::spawn(move || abort.abort()).join().unwrap();
            let r = h.await;
            (matches!(r, Err(JoinError::Cancelled)), drops.get())
        });
        assert!(cancelled);
        assert_eq!(drops, 1);
        assert_eq!(*on.lock().unwrap(), vec![thread::current().id()]);
    })
}

/// What is left when the outermost `block_on` returns (tasks pending on
/// nothing, on a waker another thread keeps waking, yielding forever) is
/// dropped there, exactly once each, before `block_on` returns; their
/// handles, awaited later, say `Cancelled`.
#[test]
fn local_tasks_left_when_block_on_returns_are_dropped_once_there() {
    with_timeout(60, "block_on spawn_local end", || {
        let rt = rt(2);
        let on = Arc::new(Mutex::new(Vec::new()));
        let wakers = Arc::new(Mutex::new(Vec::<Waker>::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let waker_thread = {
            let (stop, wakers) = (stop.clone(), wakers.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    for w in wakers.lock().unwrap().iter() {
                        w.wake_by_ref();
                    }
                    thread::yield_now();
                }
            })
        };
        let (hs, drops) = {
            let (on, wakers) = (on.clone(), wakers.clone());
            rt.block_on(async move {
                let drops = Rc::new(Cell::new(0u32));
                let hs: Vec<_> = (0..30)
                    .map(|i| {
                        let d = LocalDrop {
                            drops: drops.clone(),
                            on: on.clone(),
                        };
                        let wakers = wakers.clone();
                        hwsched::spawn_local(async move {
                            let _d = d;
                            match i % 3 {
                                0 => std::future::pending::<()>().await,
                                1 => {
                                    std::future::poll_fn(|cx| {
                                        wakers.lock().unwrap().push(cx.waker().clone());
                                        Poll::<()>::Pending
                                    })
                                    .await
                                }
                                _ => loop {
                                    hwsched::yield_now().await;
                                },
                            }
                        })
                    })
                    .collect();
                // Let every task run at least once.
                for _ in 0..3 {
                    hwsched::spawn(async {}).await.unwrap();
                }
                (hs, drops)
            })
        };
        // Dropped before block_on returned, and counted as retired.
        assert_eq!(drops.get(), 30, "each local task dropped exactly once");
        assert_eq!(rt.live_tasks(), 0, "{:?}", rt.stats());
        stop.store(true, Ordering::SeqCst);
        waker_thread.join().unwrap();
        wakers.lock().unwrap().clear();
        assert_eq!(drops.get(), 30, "nothing dropped twice");
        let me = thread::current().id();
        assert!(
            on.lock().unwrap().iter().all(|t| *t == me),
            "dropped elsewhere"
        );
        // The handles (their outputs are Send) resolve on a worker.
        let cancelled = rt
            .block_on(rt.spawn(async move {
                let mut n = 0;
                for h in hs {
                    n += usize::from(matches!(h.await, Err(JoinError::Cancelled)));
                }
                n
            }))
            .unwrap();
        assert_eq!(cancelled, 30);
    })
}

/// A nested `block_on` on the same thread runs the outer one's local tasks:
/// the inner future waits for one of them.
#[test]
fn a_nested_block_on_runs_the_threads_local_tasks() {
    with_timeout(60, "block_on spawn_local nested", || {
        let rt = rt(1);
        let v = rt.block_on(async {
            let flag = Rc::new(Cell::new(0u32));
            let f = flag.clone();
            let outer = hwsched::spawn_local(async move {
                hwsched::yield_now().await;
                f.set(7);
                8
            });
            let inner = rt.block_on(async {
                std::future::poll_fn(|cx| {
                    if flag.get() == 7 {
                        return Poll::Ready(flag.get());
                    }
                    cx.waker().wake_by_ref();
                    Poll::Pending
                })
                .await
            });
            inner + outer.await.unwrap()
        });
        assert_eq!(v, 15);
    })
}

/// When the runtime shuts down while another thread's `block_on` (through
/// a `Handle`) has a local task waiting, the task is cancelled and dropped
/// on that thread, and the handle awaiting it there says `Cancelled`.
#[test]
fn a_local_task_is_cancelled_on_its_thread_when_the_runtime_shuts_down() {
    with_timeout(60, "block_on spawn_local shutdown", || {
        let rt = rt(1);
        let handle = rt.handle();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let on = Arc::new(Mutex::new(Vec::new()));
        let on2 = on.clone();
        let t = thread::spawn(move || {
            let r = handle.block_on(async move {
                let drops = Rc::new(Cell::new(0));
                let d = LocalDrop {
                    drops: drops.clone(),
                    on: on2,
                };
                let h = hwsched::spawn_local(async move {
                    let _d = d;
                    std::future::pending::<()>().await
                });
                hwsched::yield_now().await;
                ready_tx.send(()).unwrap();
                let r = h.await;
                (matches!(r, Err(JoinError::Cancelled)), drops.get())
            });
            (r, thread::current().id())
        });
        ready_rx.recv().unwrap();
        assert!(rt.shutdown_timeout(Duration::from_secs(10)));
        let ((cancelled, drops), there) = t.join().unwrap();
        assert!(cancelled);
        assert_eq!(drops, 1);
        assert_eq!(*on.lock().unwrap(), vec![there]);
    })
}

/// Off a worker and outside `block_on` (a plain thread, a `spawn_blocking`
/// closure), `spawn_local` panics with a message saying where it works.
#[test]
fn spawn_local_outside_workers_and_block_on_panics_with_a_clear_message() {
    let message = |p: Box<dyn std::any::Any + Send>| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap()
    };
    let r = std::panic::catch_unwind(|| drop(hwsched::spawn_local(async {})));
    let msg = message(r.unwrap_err());
    assert!(msg.contains("outside Runtime::block_on"), "{msg}");
    let rt = rt(1);
    let r = rt.block_on(rt.spawn_blocking(|| {
        std::panic::catch_unwind(|| drop(hwsched::spawn_local(async {}))).map_err(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap()
        })
    }));
    let msg = r.unwrap().unwrap_err();
    assert!(msg.contains("spawn_blocking"), "{msg}");
}
