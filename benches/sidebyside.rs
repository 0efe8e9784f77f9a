//! One side-by-side harness for the wake protocol's fast paths: each
//! workload on hwsched, tokio (multi-thread) and async-executor with the same
//! worker count, and on tokio's current-thread runtime (`tokio-ct`, one
//! thread in `block_on`, every spawn from outside a remote one), rounds
//! interleaved across the runtimes (so a noisy moment hurts all of them),
//! medians printed with hwsched's throughput over the best multi-thread
//! peer's (`ratio`; above 1: hwsched is faster) and over tokio-ct's
//! (`vs tokio-ct`).
//!
//! Workloads (the shapes of issue 13's measurements; the sizes are
//! [`Sizes`]):
//! - `spawn_outside`: 100,000 empty tasks spawned from a thread outside the
//!   runtime into an idle runtime, then joined (op: a task);
//! - `spawn_many`: 100,000 empty tasks spawned from inside one task (op: a
//!   task);
//! - `ping_pong`: 1,000 pairs doing 100 round trips each over two
//!   capacity-1 `async_channel`s, spawned from one task (op: a round trip,
//!   100,000);
//! - `hackbench`: 10 groups, 20 fds, 100 loops, 100 bytes (the example's
//!   defaults; only the release-to-done interval is timed; op: a message,
//!   groups x fds x fds x loops = 400,000);
//! - `yield_many`: 200 tasks yielding 1,000 times each (op: a yield,
//!   200,000);
//! - `chained_spawn`: a chain of 1,000 spawns, each from the previous task
//!   (op: a spawn).
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

/// The sizes of the workloads: the one place their operation counts come
/// from.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    /// Tasks of `spawn_outside` and of `spawn_many`.
    spawns: usize,
    /// `ping_pong`'s pairs, and the round trips of each.
    pairs: usize,
    round_trips: usize,
    /// `hackbench_g10`'s parameters.
    hackbench: hackbench::Config,
    /// `yield_many`'s tasks, and the yields of each.
    yield_tasks: usize,
    yields: usize,
    /// `chained_spawn`'s chain length.
    chain: usize,
}

impl Sizes {
    /// The full sizes, divided by `scale` where it says so: the spawns,
    /// ping_pong's pairs, hackbench's loops and yield_many's yields per task
    /// (so the numbers of concurrent tasks stay, except ping_pong's);
    /// chained_spawn's 1,000 is small already and stays.
    fn new(scale: usize) -> Sizes {
        let div = |n: usize| (n / scale).max(1);
        Sizes {
            spawns: div(100_000),
            pairs: div(1_000),
            round_trips: 100,
            hackbench: hackbench::Config {
                loops: div(hackbench::Config::default().loops),
                ..hackbench::Config::default()
            },
            yield_tasks: 200,
            yields: div(1_000),
            chain: 1_000,
        }
    }
}

fn spawn_outside(rt: &Rt, z: &Sizes) -> Duration {
    let t0 = Instant::now();
    let handles: Vec<_> = (0..z.spawns).map(|_| rt.spawn(async {})).collect();
    rt.block_on(async {
        for h in handles {
            h.await;
        }
    });
    t0.elapsed()
}

fn spawn_many(rt: &Rt, z: &Sizes) -> Duration {
    let spawns = z.spawns;
    let rem = Arc::new(AtomicUsize::new(spawns));
    let sp = rt.spawner();
    let t0 = Instant::now();
    rt.block_on(rt.spawn(async move {
        let (done_tx, done_rx) = async_channel::bounded::<()>(1);
        for _ in 0..spawns {
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

fn ping_pong(rt: &Rt, z: &Sizes) -> Duration {
    let (pairs, round_trips) = (z.pairs, z.round_trips);
    let (done_tx, done_rx) = mpsc::sync_channel::<()>(1);
    let rem = Arc::new(AtomicUsize::new(pairs));
    let sp = rt.spawner();
    let t0 = Instant::now();
    drop(rt.spawn(async move {
        for _ in 0..pairs {
            let rem = rem.clone();
            let done_tx = done_tx.clone();
            let sp2 = sp.clone();
            drop(sp.spawn(async move {
                let (tx1, rx1) = async_channel::bounded::<()>(1);
                let (tx2, rx2) = async_channel::bounded::<()>(1);
                drop(sp2.spawn(async move {
                    for _ in 0..round_trips {
                        rx1.recv().await.unwrap();
                        tx2.send(()).await.unwrap();
                    }
                }));
                for _ in 0..round_trips {
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

fn hackbench_g10(rt: &Rt, z: &Sizes) -> Duration {
    hackbench::run(rt, &z.hackbench)
}

fn yield_many(rt: &Rt, z: &Sizes) -> Duration {
    let (tasks, yields) = (z.yield_tasks, z.yields);
    let (tx, rx) = mpsc::sync_channel::<()>(tasks);
    let t0 = Instant::now();
    for _ in 0..tasks {
        let tx = tx.clone();
        let kind = rt.kind();
        drop(rt.spawn(async move {
            for _ in 0..yields {
                rt::yield_now(kind).await;
            }
            tx.send(()).unwrap();
        }));
    }
    for _ in 0..tasks {
        rx.recv().unwrap();
    }
    t0.elapsed()
}

fn chained_spawn(rt: &Rt, z: &Sizes) -> Duration {
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
    let chain = z.chain;
    let t0 = Instant::now();
    drop(rt.spawn(async move { iter(sp, tx, chain) }));
    rx.recv().unwrap();
    t0.elapsed()
}

/// A workload: its name and one round of it.
struct Workload {
    name: &'static str,
    run: fn(&Rt, &Sizes) -> Duration,
}

const WORKLOADS: [Workload; 6] = [
    Workload {
        name: "spawn_outside",
        run: spawn_outside,
    },
    Workload {
        name: "spawn_many",
        run: spawn_many,
    },
    Workload {
        name: "ping_pong",
        run: ping_pong,
    },
    Workload {
        name: "hackbench_g10",
        run: hackbench_g10,
    },
    Workload {
        name: "yield_many",
        run: yield_many,
    },
    Workload {
        name: "chained_spawn",
        run: chained_spawn,
    },
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
usage: sidebyside [--runs N] [--workers N] [--scale S] [FILTER...]
  --runs N        rounds per workload and runtime; medians are shown (5)
  --workers N     workers of every runtime but tokio-ct (default: one per CPU)
  --scale S       divide the workloads' operation counts by S (1)
  FILTER          only workloads whose name contains one of these";

fn main() {
    let mut runs = 5usize;
    let mut workers = rt::default_workers();
    let mut scale = 1usize;
    let mut filters: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bench" => {}
            "--runs" | "--workers" | "--scale" => {
                let v = args.next().unwrap_or_default();
                match v.parse::<usize>() {
                    Ok(n) if n > 0 => match a.as_str() {
                        "--runs" => runs = n,
                        "--workers" => workers = n,
                        _ => scale = n,
                    },
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
    let sizes = Sizes::new(scale);
    let workloads: Vec<&Workload> = WORKLOADS
        .iter()
        .filter(|w| filters.is_empty() || filters.iter().any(|x| w.name.contains(x.as_str())))
        .collect();
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
        rt::tokio_current_thread().unwrap_or_else(|e| panic!("tokio-ct: {e}")),
    ];
    println!(
        "side by side: {workers} workers each (tokio-ct: 1 thread), {runs} rounds \
         (interleaved), medians; ratio = best multi-thread peer's time / hwsched's \
         (throughput of hwsched / best of tokio and async-executor); vs tokio-ct = \
         tokio-ct's time / hwsched's\n"
    );
    println!(
        "| workload | hwsched ms | tokio ms | async-executor ms | tokio-ct ms | ratio | vs tokio-ct \
         | hwsched nvcsw | tokio nvcsw | async-executor nvcsw | tokio-ct nvcsw |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for w in workloads {
        let f = |r: &Rt| (w.run)(r, &sizes);
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
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} | {:.0} | {:.0} |",
            w.name,
            t[0],
            t[1],
            t[2],
            t[3],
            best_peer / t[0],
            t[3] / t[0],
            c[0],
            c[1],
            c[2],
            c[3]
        );
        if !hw[0].is_empty() {
            let [p, u, s, st] = hw.map(median);
            println!(
                "|   hwsched per round: {p:.0} parks, {u:.0} unparks, {s:.0} searcher wakes, \
                 {st:.0} steals | | | | | | | | | | |"
            );
        }
    }
}
