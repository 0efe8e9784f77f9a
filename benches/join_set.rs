//! `JoinSet` at any size: N tasks that finish one at a time in spawn order,
//! in reverse order or in a random order, joined with `join_next`, on
//! hwsched's `JoinSet` and on tokio's (multi-thread), each runtime with the
//! same number of workers. Prints a table of medians.
//!
//! One worker by default: each release then wakes its task on the worker
//! that runs the loop, and the time is the set's and the run queue's, not
//! a cross-CPU wake-up per task (which `--workers 2` adds, and which
//! dominates on a loaded machine: hwsched places a woken task on an idle
//! worker, tokio keeps it in the waker's LIFO slot).
//!
//! One round, inside a task of the runtime: spawn N tasks into the set,
//! each waiting on its own `tokio::sync::oneshot` (runtime-agnostic, the
//! same on both sides); then, for each task in the chosen order, release it
//! and `join_next` it (the result must be that task). So the k-th task to
//! finish is exactly the k-th of the order, and every `join_next` finds one
//! finished task among the N - k still in the set: a set that looks at
//! every task per poll is quadratic here, one with a ready list is linear.
//! The time is the whole round (spawns included) over N: nanoseconds per
//! task. Rounds alternate between the runtimes (so a noisy moment hurts
//! both); the ratio is hwsched's median over tokio's (below 1: hwsched is
//! faster, as everywhere in BENCHMARKS.md).
//!
//! ```text
//! cargo bench --bench join_set                          # 1k, 16k, 100k, 1M
//! cargo bench --bench join_set -- --sizes 1000,16000 --runs 9 --workers 2
//! ```
#![allow(missing_docs)]

use std::time::{Duration, Instant};

/// Completion orders.
#[derive(Clone, Copy, Debug)]
enum Order {
    Spawn,
    Reverse,
    Random,
}

impl Order {
    fn name(self) -> &'static str {
        match self {
            Order::Spawn => "spawn",
            Order::Reverse => "reverse",
            Order::Random => "random",
        }
    }

    /// The order in which the tasks `0..n` are released.
    fn indices(self, n: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).collect();
        match self {
            Order::Spawn => {}
            Order::Reverse => v.reverse(),
            Order::Random => {
                // Fisher-Yates with xorshift64*, a fixed seed: the same
                // order for both runtimes and every round.
                let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ n as u64;
                for i in (1..n).rev() {
                    x ^= x >> 12;
                    x ^= x << 25;
                    x ^= x >> 27;
                    let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
                    v.swap(i, (r % (i as u64 + 1)) as usize);
                }
            }
        }
        v
    }
}

/// One round on hwsched: the time from the first spawn to the last join.
fn round_hwsched(rt: &hwsched::Runtime, order: &[usize]) -> Duration {
    let order = order.to_vec();
    rt.block_on(rt.spawn(async move {
        let n = order.len();
        let t0 = Instant::now();
        let mut set = hwsched::JoinSet::new();
        let mut release = Vec::with_capacity(n);
        for i in 0..n {
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            release.push(Some(tx));
            set.spawn(async move {
                let _ = rx.await;
                i
            });
        }
        for &i in &order {
            release[i].take().unwrap().send(()).unwrap();
            let got = set.join_next().await.unwrap().unwrap();
            assert_eq!(got, i);
        }
        assert!(set.join_next().await.is_none());
        t0.elapsed()
    }))
    .unwrap()
}

/// One round on tokio: the same program with tokio's `JoinSet`.
fn round_tokio(rt: &tokio::runtime::Runtime, order: &[usize]) -> Duration {
    let order = order.to_vec();
    rt.block_on(rt.spawn(async move {
        let n = order.len();
        let t0 = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        let mut release = Vec::with_capacity(n);
        for i in 0..n {
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            release.push(Some(tx));
            set.spawn(async move {
                let _ = rx.await;
                i
            });
        }
        for &i in &order {
            release[i].take().unwrap().send(()).unwrap();
            let got = set.join_next().await.unwrap().unwrap();
            assert_eq!(got, i);
        }
        assert!(set.join_next().await.is_none());
        t0.elapsed()
    }))
    .unwrap()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Rounds per size when `--runs` is not given: fewer for the big sizes.
fn default_runs(n: usize) -> usize {
    match n {
        0..=20_000 => 11,
        20_001..=200_000 => 5,
        _ => 3,
    }
}

fn main() {
    let mut sizes = vec![1_000, 16_000, 100_000, 1_000_000];
    let mut runs: Option<usize> = None;
    let mut workers = 1;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--sizes" => {
                sizes = args
                    .next()
                    .expect("--sizes N,N,..")
                    .split(',')
                    .map(|s| s.parse().expect("a size"))
                    .collect()
            }
            "--runs" => runs = Some(args.next().expect("--runs N").parse().expect("a count")),
            "--workers" => workers = args.next().expect("--workers N").parse().expect("a count"),
            // cargo bench passes --bench.
            _ => {}
        }
    }
    let hw = hwsched::Runtime::builder()
        .worker_threads(workers)
        .build()
        .expect("hwsched runtime");
    let tk = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .build()
        .expect("tokio runtime");
    println!(
        "JoinSet, {workers} worker(s) each: ns per task (spawn + release + join_next), medians"
    );
    println!(
        "| tasks | order | runs | hwsched ns/task | tokio ns/task | hwsched / tokio |\n\
         | ---: | --- | ---: | ---: | ---: | ---: |"
    );
    for &n in &sizes {
        for order in [Order::Spawn, Order::Reverse, Order::Random] {
            let idx = order.indices(n);
            let r = runs.unwrap_or_else(|| default_runs(n));
            let (mut h, mut t) = (Vec::new(), Vec::new());
            for _ in 0..r {
                h.push(round_hwsched(&hw, &idx));
                t.push(round_tokio(&tk, &idx));
            }
            let (h, t) = (median(h), median(t));
            let per = |d: Duration| d.as_nanos() as f64 / n as f64;
            println!(
                "| {n} | {} | {r} | {:.0} | {:.0} | {:.2} |",
                order.name(),
                per(h),
                per(t),
                per(h) / per(t)
            );
        }
    }
}
