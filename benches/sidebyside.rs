//! One side-by-side harness for the wake protocol's fast paths: each
//! workload on hwsched, tokio (multi-thread) and async-executor with the same
//! worker count, rounds interleaved across the runtimes (so a noisy moment
//! hurts all of them), medians printed with hwsched's throughput over the
//! best peer's (above 1: hwsched is faster).
//!
//! Workloads (the shapes of issue 13's measurements):
//! - `spawn_outside`: 100,000 empty tasks spawned from a thread outside the
//!   runtime into an idle runtime, then joined;
//! - `spawn_many`: 100,000 empty tasks spawned from inside one task;
//! - `ping_pong`: 1,000 pairs doing 100 round trips each over two
//!   capacity-1 `async_channel`s, spawned from one task;
//! - `hackbench`: 10 groups, 20 fds, 100 loops, 100 bytes (the example's
//!   defaults; only the release-to-done interval is timed);
//! - `yield_many`: 200 tasks yielding 1,000 times each;
//! - `chained_spawn`: a chain of 1,000 spawns, each from the previous task.
//!
//! Besides time, each row shows the process's voluntary context switches
//! per round (`getrusage`): every futex wait a runtime causes, whichever
//! thread pays it, the spawner's included.
//!
//! ```text
//! cargo bench --bench sidebyside                       # 5 rounds
//! cargo bench --bench sidebyside -- --runs 9 ping_pong # one workload
//! HWSCHED_STATS=1 cargo bench --bench sidebyside        # and hwsched's counters per round
//! ```
//!
//! With `HWSCHED_STATS` set, each workload's row is followed by hwsched's
//! counters per round (medians over the rounds): sleeps (`parks`), futex
//! wakes (`unparks`), searcher wakes and successful steals, the figures
//! `hwsched-sim` reports for the same workload (SIMULATION.md,
//! "Calibration").
//!
//! Linux only (getrusage).
#![allow(missing_docs)]

#[path = "common/hackbench.rs"]
mod hackbench;
#[path = "common/rt.rs"]
mod rt;

use std::process::exit;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use rt::{Rt, Spawner};

/// Voluntary context switches of the whole process so far.
fn nvcsw() -> i64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` points to writable memory the size of a `rusage`, which
    // getrusage fills.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage: {}", std::io::Error::last_os_error());
    // SAFETY: zero-initialised (all-integer struct) and filled by getrusage.
    unsafe { ru.assume_init() }.ru_nvcsw
}

const SPAWNS: usize = 100_000;

fn spawn_outside(rt: &Rt) -> Duration {
    let t0 = Instant::now();
    let handles: Vec<_> = (0..SPAWNS).map(|_| rt.spawn(async {})).collect();
    rt.block_on(async {
        for h in handles {
            h.await;
        }
    });
    t0.elapsed()
}

fn spawn_many(rt: &Rt) -> Duration {
    let rem = Arc::new(AtomicUsize::new(SPAWNS));
    let sp = rt.spawner();
    let t0 = Instant::now();
    rt.block_on(rt.spawn(async move {
        let (done_tx, done_rx) = async_channel::bounded::<()>(1);
        for _ in 0..SPAWNS {
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
    t0.elapsed()
}

fn ping_pong(rt: &Rt) -> Duration {
    const PAIRS: usize = 1_000;
    const ROUND_TRIPS: usize = 100;
    let (done_tx, done_rx) = mpsc::sync_channel::<()>(1);
    let rem = Arc::new(AtomicUsize::new(PAIRS));
    let sp = rt.spawner();
    let t0 = Instant::now();
    drop(rt.spawn(async move {
        for _ in 0..PAIRS {
            let rem = rem.clone();
            let done_tx = done_tx.clone();
            let sp2 = sp.clone();
            drop(sp.spawn(async move {
                let (tx1, rx1) = async_channel::bounded::<()>(1);
                let (tx2, rx2) = async_channel::bounded::<()>(1);
                drop(sp2.spawn(async move {
                    for _ in 0..ROUND_TRIPS {
                        rx1.recv().await.unwrap();
                        tx2.send(()).await.unwrap();
                    }
                }));
                for _ in 0..ROUND_TRIPS {
                    tx1.send(()).await.unwrap();
                    rx2.recv().await.unwrap();
                }
                if rem.fetch_sub(1, Relaxed) == 1 {
                    done_tx.send(()).unwrap();
                }
            }));
        }
    }));
    done_rx.recv().unwrap();
    t0.elapsed()
}

fn hackbench_10(rt: &Rt) -> Duration {
    hackbench::run(rt, &hackbench::Config::default())
}

fn yield_many(rt: &Rt) -> Duration {
    const TASKS: usize = 200;
    const YIELDS: usize = 1_000;
    let (tx, rx) = mpsc::sync_channel::<()>(TASKS);
    let t0 = Instant::now();
    for _ in 0..TASKS {
        let tx = tx.clone();
        let kind = rt.kind();
        drop(rt.spawn(async move {
            for _ in 0..YIELDS {
                rt::yield_now(kind).await;
            }
            tx.send(()).unwrap();
        }));
    }
    for _ in 0..TASKS {
        rx.recv().unwrap();
    }
    t0.elapsed()
}

fn chained_spawn(rt: &Rt) -> Duration {
    fn iter(sp: Spawner, done: mpsc::SyncSender<()>, n: usize) {
        if n == 0 {
            done.send(()).unwrap();
        } else {
            let sp2 = sp.clone();
            drop(sp.spawn(async move { iter(sp2, done, n - 1) }));
        }
    }
    let (tx, rx) = mpsc::sync_channel::<()>(1);
    let sp = rt.spawner();
    let t0 = Instant::now();
    drop(rt.spawn(async move { iter(sp, tx, 1_000) }));
    rx.recv().unwrap();
    t0.elapsed()
}

type Workload = (&'static str, fn(&Rt) -> Duration);

const WORKLOADS: [Workload; 6] = [
    ("spawn_outside", spawn_outside),
    ("spawn_many", spawn_many),
    ("ping_pong", ping_pong),
    ("hackbench_g10", hackbench_10),
    ("yield_many", yield_many),
    ("chained_spawn", chained_spawn),
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

const USAGE: &str = "\
usage: sidebyside [--runs N] [--workers N] [FILTER...]
  --runs N     rounds per workload and runtime; medians are shown (5)
  --workers N  workers of every runtime (default: one per CPU)
  FILTER       only workloads whose name contains one of these";

fn main() {
    let mut runs = 5usize;
    let mut workers = rt::default_workers();
    let mut filters: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bench" => {}
            "--runs" | "--workers" => {
                let v = args.next().unwrap_or_default();
                match v.parse::<usize>() {
                    Ok(n) if n > 0 => {
                        if a == "--runs" {
                            runs = n
                        } else {
                            workers = n
                        }
                    }
                    _ => {
                        eprintln!("sidebyside: invalid value {v:?} for {a}\n{USAGE}");
                        exit(2);
                    }
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            f if !f.starts_with('-') => filters.push(f.to_owned()),
            _ => {
                eprintln!("sidebyside: unknown option {a:?}\n{USAGE}");
                exit(2);
            }
        }
    }
    let rts = [
        rt::hwsched(
            "hwsched",
            Some(workers),
            None,
            rt::env_tunables(Default::default()),
        )
        .unwrap_or_else(|e| panic!("hwsched: {e}")),
        rt::tokio(workers),
        rt::async_executor(workers),
    ];
    println!(
        "side by side: {workers} workers each, {runs} rounds (interleaved), medians; \
         ratio = best peer's time / hwsched's (throughput of hwsched / best peer)\n"
    );
    println!(
        "| workload | hwsched ms | tokio ms | async-executor ms | ratio | hwsched nvcsw | tokio nvcsw | async-executor nvcsw |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, f) in WORKLOADS {
        if !filters.is_empty() && !filters.iter().any(|x| name.contains(x.as_str())) {
            continue;
        }
        // A warm-up round each, then `runs` interleaved rounds.
        for r in &rts {
            f(r);
        }
        let mut times = vec![Vec::new(); rts.len()];
        let mut switches = vec![Vec::new(); rts.len()];
        // hwsched's parks, unparks, searcher wakes, steals per round.
        let mut hw: [Vec<f64>; 4] = Default::default();
        let want_stats = std::env::var_os("HWSCHED_STATS").is_some();
        let snap = |r: &Rt| want_stats.then(|| r.stats()).flatten().map(|s| s.total());
        for _ in 0..runs {
            for (i, r) in rts.iter().enumerate() {
                let s0 = snap(r);
                let c0 = nvcsw();
                let d = f(r);
                switches[i].push((nvcsw() - c0) as f64);
                times[i].push(d.as_secs_f64() * 1e3);
                if let (Some(a), Some(b)) = (s0, snap(r)) {
                    for (v, (x, y)) in hw.iter_mut().zip([
                        (a.parks, b.parks),
                        (a.unparks, b.unparks),
                        (a.searcher_wakes, b.searcher_wakes),
                        (a.steals_succeeded, b.steals_succeeded),
                    ]) {
                        v.push((y - x) as f64);
                    }
                }
            }
        }
        let t: Vec<f64> = times.into_iter().map(median).collect();
        let c: Vec<f64> = switches.into_iter().map(median).collect();
        let best_peer = t[1].min(t[2]);
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} | {:.0} |",
            t[0],
            t[1],
            t[2],
            best_peer / t[0],
            c[0],
            c[1],
            c[2]
        );
        if !hw[0].is_empty() {
            let [p, u, s, st] = hw.map(median);
            println!(
                "|   hwsched per round: {p:.0} parks, {u:.0} unparks, {s:.0} searcher wakes, \
                 {st:.0} steals | | | | | | | |"
            );
        }
    }
}
