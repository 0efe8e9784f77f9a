//! tokio's `benches/rt_multi_threaded.rs` set on hwsched, tokio
//! (multi-thread) and async-executor with the same worker count, and on
//! hwsched with the 32-worker synthetic topology (`hwsched-32`).
//!
//! ```text
//! cargo bench --bench runtime                       # full run
//! cargo bench --bench runtime -- ping_pong/tokio    # one bench, one runtime
//! cargo bench --bench runtime -- --warm-up-time 0.5 --measurement-time 1   # smoke
//! ```
// criterion_group! generates an undocumented `pub fn`.
#![allow(missing_docs)]

#[path = "common/rt.rs"]
mod rt;

use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

use rt::{Rt, Spawner};

const NUM_SPAWN: usize = 10_000;
const STALL_DUR: Duration = Duration::from_micros(10);

/// From inside one task, spawn 10,000 tasks that each count down; the last
/// one signals the spawner.
fn spawn_many_local(c: &mut Criterion, rts: &[Rt]) {
    let mut g = c.benchmark_group("spawn_many_local");
    for rt in rts {
        let rem = Arc::new(AtomicUsize::new(0));
        g.bench_function(rt.name.as_str(), |b| {
            b.iter(|| {
                rem.store(NUM_SPAWN, Relaxed);
                let rem = rem.clone();
                let sp = rt.spawner();
                rt.block_on(rt.spawn(async move {
                    let (done_tx, done_rx) = async_channel::bounded::<()>(1);
                    for _ in 0..NUM_SPAWN {
                        let rem = rem.clone();
                        let done_tx = done_tx.clone();
                        drop(sp.spawn(async move {
                            if rem.fetch_sub(1, Relaxed) == 1 {
                                done_tx.try_send(()).unwrap();
                            }
                        }));
                    }
                    done_rx.recv().await.unwrap();
                }));
            })
        });
    }
    g.finish();
}

/// Spawn 10,000 empty tasks from the outside thread into an idle runtime,
/// then join them all.
fn spawn_many_remote_idle(c: &mut Criterion, rts: &[Rt]) {
    let mut g = c.benchmark_group("spawn_many_remote_idle");
    for rt in rts {
        let mut handles = Vec::with_capacity(NUM_SPAWN);
        g.bench_function(rt.name.as_str(), |b| {
            b.iter(|| {
                for _ in 0..NUM_SPAWN {
                    handles.push(rt.spawn(async {}));
                }
                rt.block_on(async {
                    for h in handles.drain(..) {
                        h.await;
                    }
                });
            })
        });
    }
    g.finish();
}

fn stall() {
    let now = Instant::now();
    while now.elapsed() < STALL_DUR {
        std::thread::yield_now();
    }
}

/// As spawn_many_remote_idle, while 2 tasks per worker keep every worker
/// busy (yield, then stall 10 us).
fn spawn_many_remote_busy(c: &mut Criterion, rts: &[Rt]) {
    let mut g = c.benchmark_group("spawn_many_remote_busy");
    for rt in rts {
        let flag = Arc::new(AtomicBool::new(true));
        let busy: Vec<_> = (0..2 * rt.workers())
            .map(|_| {
                let flag = flag.clone();
                let kind = rt.kind();
                rt.spawn(async move {
                    while flag.load(Relaxed) {
                        rt::yield_now(kind).await;
                        stall();
                    }
                })
            })
            .collect();
        let mut handles = Vec::with_capacity(NUM_SPAWN);
        g.bench_function(rt.name.as_str(), |b| {
            b.iter(|| {
                for _ in 0..NUM_SPAWN {
                    handles.push(rt.spawn(async {}));
                }
                rt.block_on(async {
                    for h in handles.drain(..) {
                        h.await;
                    }
                });
            })
        });
        flag.store(false, Relaxed);
        rt.block_on(async {
            for h in busy {
                h.await;
            }
        });
    }
    g.finish();
}

/// 1,000 ping-pong pairs spawned from one task, each over two
/// `async_channel::bounded(1)` (for tokio's oneshots).
fn ping_pong(c: &mut Criterion, rts: &[Rt]) {
    const NUM_PINGS: usize = 1_000;
    let mut g = c.benchmark_group("ping_pong");
    for rt in rts {
        let (done_tx, done_rx) = mpsc::sync_channel::<()>(1000);
        let rem = Arc::new(AtomicUsize::new(0));
        g.bench_function(rt.name.as_str(), |b| {
            b.iter(|| {
                let done_tx = done_tx.clone();
                let rem = rem.clone();
                rem.store(NUM_PINGS, Relaxed);
                let sp = rt.spawner();
                rt.block_on(async {
                    drop(rt.spawn(async move {
                        for _ in 0..NUM_PINGS {
                            let rem = rem.clone();
                            let done_tx = done_tx.clone();
                            let sp2 = sp.clone();
                            drop(sp.spawn(async move {
                                let (tx1, rx1) = async_channel::bounded::<()>(1);
                                let (tx2, rx2) = async_channel::bounded::<()>(1);
                                drop(sp2.spawn(async move {
                                    rx1.recv().await.unwrap();
                                    tx2.send(()).await.unwrap();
                                }));
                                tx1.send(()).await.unwrap();
                                rx2.recv().await.unwrap();
                                if rem.fetch_sub(1, Relaxed) == 1 {
                                    done_tx.send(()).unwrap();
                                }
                            }));
                        }
                    }));
                    done_rx.recv().unwrap();
                });
            })
        });
    }
    g.finish();
}

/// 200 tasks that each yield 1,000 times.
fn yield_many(c: &mut Criterion, rts: &[Rt]) {
    const NUM_YIELD: usize = 1_000;
    const TASKS: usize = 200;
    let mut g = c.benchmark_group("yield_many");
    for rt in rts {
        let (tx, rx) = mpsc::sync_channel::<()>(TASKS);
        g.bench_function(rt.name.as_str(), |b| {
            b.iter(|| {
                for _ in 0..TASKS {
                    let tx = tx.clone();
                    let kind = rt.kind();
                    drop(rt.spawn(async move {
                        for _ in 0..NUM_YIELD {
                            rt::yield_now(kind).await;
                        }
                        tx.send(()).unwrap();
                    }));
                }
                for _ in 0..TASKS {
                    rx.recv().unwrap();
                }
            })
        });
    }
    g.finish();
}

/// A task spawns a child, which spawns a child, ... 1,000 deep.
fn chained_spawn(c: &mut Criterion, rts: &[Rt]) {
    const ITER: usize = 1_000;

    fn iter(sp: Spawner, done_tx: mpsc::SyncSender<()>, n: usize) {
        if n == 0 {
            done_tx.send(()).unwrap();
        } else {
            let sp2 = sp.clone();
            drop(sp.spawn(async move {
                iter(sp2, done_tx, n - 1);
            }));
        }
    }

    let mut g = c.benchmark_group("chained_spawn");
    for rt in rts {
        let (done_tx, done_rx) = mpsc::sync_channel::<()>(1000);
        g.bench_function(rt.name.as_str(), |b| {
            b.iter(|| {
                let done_tx = done_tx.clone();
                let sp = rt.spawner();
                rt.block_on(async {
                    drop(rt.spawn(async move {
                        iter(sp, done_tx, ITER);
                    }));
                    done_rx.recv().unwrap();
                });
            })
        });
    }
    g.finish();
}

fn all(c: &mut Criterion) {
    let rts = rt::standard_set();
    spawn_many_local(c, &rts);
    spawn_many_remote_idle(c, &rts);
    spawn_many_remote_busy(c, &rts);
    ping_pong(c, &rts);
    yield_many(c, &rts);
    chained_spawn(c, &rts);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = all
}
criterion_main!(benches);
