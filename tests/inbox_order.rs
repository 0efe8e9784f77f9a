//! The order in which a worker takes external work (its inbox: tasks
//! spawned or woken from outside the runtime) against the work its own
//! tasks wake (sched/park.rs, `Mailbox::take` and `Mailbox::admit`):
//!
//! - a worker takes one inbox task at a time, so the tasks that task wakes
//!   run before the next inbox task;
//! - `yield_now` lets the inbox's tasks run before the yielding task runs
//!   again, so a worker kept busy by tasks that yield still starts
//!   external work at once.
//!
//! One worker in each test, so the order is the worker's alone. Every test
//! body runs under [`with_timeout`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use hwsched::Runtime;

mod common;
use common::with_timeout;

fn one_worker() -> Runtime {
    Runtime::builder()
        .worker_threads(1)
        .build()
        .expect("build a one-worker runtime")
}

#[test]
fn tasks_woken_by_an_inbox_task_run_before_the_next_inbox_task() {
    with_timeout(
        30,
        "tasks_woken_by_an_inbox_task_run_before_the_next_inbox_task",
        || {
            let rt = one_worker();
            let order = Arc::new(Mutex::new(Vec::<&'static str>::new()));
            // Two receivers, each waiting on its own channel.
            let (tx1, rx1) = async_channel::bounded::<()>(1);
            let (tx2, rx2) = async_channel::bounded::<()>(1);
            let (waiting_tx, waiting_rx) = mpsc::channel::<()>();
            let mut receivers = Vec::new();
            for (name, rx) in [("woken 1", rx1), ("woken 2", rx2)] {
                let (order, waiting) = (order.clone(), waiting_tx.clone());
                receivers.push(rt.spawn(async move {
                    let _ = waiting.send(());
                    rx.recv().await.expect("the sender sends");
                    order.lock().unwrap().push(name);
                }));
            }
            waiting_rx.recv().unwrap();
            waiting_rx.recv().unwrap();
            // Hold the worker in a blocking task while two tasks arrive in its
            // inbox from this thread.
            let (release_tx, release_rx) = mpsc::channel::<()>();
            let (held_tx, held_rx) = mpsc::channel::<()>();
            let gate = rt.spawn(async move {
                held_tx.send(()).unwrap();
                release_rx.recv().unwrap();
            });
            held_rx.recv().unwrap();
            let waker = {
                let order = order.clone();
                rt.spawn(async move {
                    order.lock().unwrap().push("first inbox task");
                    tx1.send(()).await.unwrap();
                    tx2.send(()).await.unwrap();
                })
            };
            let second = {
                let order = order.clone();
                rt.spawn(async move {
                    order.lock().unwrap().push("second inbox task");
                })
            };
            release_tx.send(()).unwrap();
            rt.block_on(async move {
                gate.await.unwrap();
                waker.await.unwrap();
                second.await.unwrap();
                for r in receivers {
                    r.await.unwrap();
                }
            });
            let order = order.lock().unwrap().clone();
            assert_eq!(order.len(), 4, "every task ran once: {order:?}");
            assert_eq!(order[0], "first inbox task", "{order:?}");
            assert_eq!(
                order[3], "second inbox task",
                "the tasks the first inbox task woke run before the second: {order:?}"
            );
        },
    );
}

#[test]
fn a_task_spawned_from_outside_starts_at_the_next_yield_of_a_busy_worker() {
    with_timeout(
        30,
        "a_task_spawned_from_outside_starts_at_the_next_yield",
        || {
            let rt = one_worker();
            let yields = Arc::new(AtomicU64::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let (started_tx, started_rx) = mpsc::channel::<()>();
            // Two tasks that keep the worker busy, yielding to each other.
            let mut busy = Vec::new();
            for _ in 0..2 {
                let (yields, stop, started) = (yields.clone(), stop.clone(), started_tx.clone());
                busy.push(rt.spawn(async move {
                    let _ = started.send(());
                    while !stop.load(Ordering::Relaxed) {
                        yields.fetch_add(1, Ordering::Relaxed);
                        hwsched::yield_now().await;
                    }
                }));
            }
            started_rx.recv().unwrap();
            started_rx.recv().unwrap();
            for round in 0..20 {
                let seen = Arc::new(AtomicU64::new(u64::MAX));
                let h = {
                    let (yields, seen) = (yields.clone(), seen.clone());
                    rt.spawn(async move {
                        seen.store(yields.load(Ordering::Relaxed), Ordering::Relaxed);
                    })
                };
                // Read after the spawn: the task was in the inbox by then, so
                // at most the two yields in progress (one per busy task) come
                // before it. Without the yield's admission it would wait for
                // the worker's periodic inbox check, 61 polls.
                let after_spawn = yields.load(Ordering::Relaxed);
                rt.block_on(h).unwrap();
                let at_start = seen.load(Ordering::Relaxed);
                assert!(
                    at_start <= after_spawn + 2,
                    "round {round}: the external task started after {} yields of the \
                 busy tasks (at most 2 expected)",
                    at_start - after_spawn
                );
            }
            stop.store(true, Ordering::Relaxed);
            rt.block_on(async move {
                for b in busy {
                    b.await.unwrap();
                }
            });
        },
    );
}
