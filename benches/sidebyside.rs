//! One side-by-side harness for the wake protocol's fast paths: each
//! workload on hwsched, tokio (multi-thread) and async-executor with the same
//! worker count, and on tokio's current-thread runtime (`tokio-ct`, one
//! thread in `block_on`, every spawn from outside a remote one), rounds
//! interleaved across the runtimes (so a noisy moment hurts all of them),
//! medians printed with hwsched's throughput over the best multi-thread
//! peer's (`ratio`; above 1: hwsched is faster) and over tokio-ct's
//! (`vs tokio-ct`).
//!
//! Workloads (the sizes are
//! [`Sizes`], the operation counts the instruction mode divides by are in
//! [`WORKLOADS`]):
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
//! `mixed`, run only when named (`sidebyside mixed`), asks whether cheap
//! work waits behind expensive work: `--mixed-pairs` ping_pong pairs
//! (default 64, as above, but each pair doing round trips until the round
//! ends) beside `--mixed-spinners` tasks (default 1) that each loop
//! `{ spin for --mixed-cost-us (default 1000; 100 to 5000 is the range of
//! interest), the runtime's yield_now }`, for `--mixed-ms` per round
//! (default 1000). Every round builds its runtimes afresh, in a rotating
//! order, with `--workers` workers: `hwsched`, `hwsched-timed` (the same
//! with `Builder::poll_timing(true)`, the only runtime of this harness
//! with poll timing on), tokio and async-executor. Each row: round trips
//! per second (the pairs' round trips, divided by the time from the first
//! spawn to the end of the round), the spinners' spins per second, the
//! process's voluntary context switches per round and, for
//! `hwsched-timed` only (the others cannot report it), the run-queue
//! delay (a task's wake or spawn to the start of its poll; every task's,
//! merged over the workers) p50, p99 and max in microseconds: p50 and p99
//! are the ends of the power-of-two buckets that hold them
//! (`hwsched::timing::Histogram::percentile`). Medians over the rounds;
//! then hwsched / tokio message rate, from the untimed `hwsched` row (the
//! timed one pays two clock reads per poll and one per wake; above 1:
//! hwsched passes more messages).
//!
//! Besides time, each row shows the process's voluntary context switches
//! per round (`getrusage`): every futex wait a runtime causes, whichever
//! thread pays it, the spawner's included.
//!
//! ```text
//! cargo bench --bench sidebyside                       # 5 rounds
//! cargo bench --bench sidebyside -- --runs 9 ping_pong # one workload
//! HWSCHED_STATS=1 cargo bench --bench sidebyside        # and hwsched's counters per round
//! scripts/instructions.sh 2                            # instructions per op (callgrind)
//! cargo bench --bench sidebyside -- mixed --mixed-cost-us 1000 --mixed-spinners 1
//! ```
//!
//! With `HWSCHED_STATS` set, each workload's row is followed by hwsched's
//! counters per round (medians over the rounds): sleeps (`parks`), futex
//! wakes (`unparks`), searcher wakes and successful steals, the figures
//! `hwsched-sim` reports for the same workload (SIMULATION.md,
//! "Calibration").
//!
//! `--instructions` (x86_64) is the instruction-count mode, meant to run
//! under `valgrind --tool=callgrind` (`scripts/instructions.sh` does, and
//! makes the table): for each workload and runtime a warm-up round, 50 ms
//! for every runtime's workers to go idle and park, callgrind's ZERO_STATS
//! client request, one round, and DUMP_STATS_AT `"<workload>/<runtime>"`;
//! it prints each workload's operation count. Outside valgrind the requests
//! are no-ops. Valgrind runs one thread at a time, so what it counts is not
//! parallel execution: an idle worker that spins does so for its whole time
//! slice while the thread with the work waits (spin loops inflate the counts
//! of runtimes that spin), there is no truly parallel stealing, and wake
//! latencies differ. The figure is a deterministic count of the work done
//! per operation, idle spinning included. `--scale S` divides the
//! operation counts (see [`Sizes::new`]) for quicker runs.
//!
//! Linux only (getrusage).
#![allow(missing_docs)]

#[cfg(target_arch = "x86_64")]
#[path = "common/callgrind.rs"]
mod callgrind;
#[path = "common/hackbench.rs"]
mod hackbench;
#[path = "common/rt.rs"]
mod rt;

use std::process::exit;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
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
/// from (the instruction mode prints them for `scripts/instructions.sh`).
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

/// A workload: its name, what one of its operations is and how many one
/// round does (for the instruction counts), and one round of it.
struct Workload {
    name: &'static str,
    op: &'static str,
    ops: fn(&Sizes) -> u64,
    run: fn(&Rt, &Sizes) -> Duration,
}

const WORKLOADS: [Workload; 6] = [
    Workload {
        name: "spawn_outside",
        op: "task",
        ops: |z| z.spawns as u64,
        run: spawn_outside,
    },
    Workload {
        name: "spawn_many",
        op: "task",
        ops: |z| z.spawns as u64,
        run: spawn_many,
    },
    Workload {
        name: "ping_pong",
        op: "round trip",
        ops: |z| (z.pairs * z.round_trips) as u64,
        run: ping_pong,
    },
    Workload {
        name: "hackbench_g10",
        op: "message",
        ops: |z| z.hackbench.messages(),
        run: hackbench_g10,
    },
    Workload {
        name: "yield_many",
        op: "yield",
        ops: |z| (z.yield_tasks * z.yields) as u64,
        run: yield_many,
    },
    Workload {
        name: "chained_spawn",
        op: "spawn",
        ops: |z| z.chain as u64,
        run: chained_spawn,
    },
];

/// The `mixed` workload's settings (`--mixed-*`).
#[derive(Debug, Clone, Copy)]
struct MixedCfg {
    /// ping_pong pairs.
    pairs: usize,
    /// Tasks that spin between yields.
    spinners: usize,
    /// How long a spinner spins before each yield.
    cost: Duration,
    /// How long a round lasts.
    round: Duration,
}

/// Holds the thread for `d`, without yielding.
fn spin(d: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// One round of `mixed` on one runtime.
struct MixedRound {
    round_trips_per_s: f64,
    spins_per_s: f64,
    nvcsw: f64,
    /// hwsched's run-queue delays of the round, merged over the workers
    /// (a runtime with poll timing on).
    run_delay: Option<hwsched::timing::Histogram>,
}

/// One round of `mixed`: the pairs and the spinners spawned from one task,
/// stopped after `m.round`; a pinger counts the round trips it finished (at
/// most one each after the stop), a spinner its spins.
fn mixed_round(rt: &Rt, m: &MixedCfg) -> MixedRound {
    let MixedCfg {
        pairs,
        spinners,
        cost,
        round,
    } = *m;
    let stop = Arc::new(AtomicBool::new(false));
    // (a spinner's, its count)
    let (done_tx, done_rx) = mpsc::channel::<(bool, u64)>();
    let sp = rt.spawner();
    let kind = rt.kind();
    let stop2 = stop.clone();
    let c0 = nvcsw();
    let t0 = Instant::now();
    drop(rt.spawn(async move {
        for _ in 0..spinners {
            let (stop, done) = (stop2.clone(), done_tx.clone());
            drop(sp.spawn(async move {
                let mut n = 0;
                while !stop.load(Relaxed) {
                    spin(cost);
                    n += 1;
                    rt::yield_now(kind).await;
                }
                done.send((true, n)).unwrap();
            }));
        }
        for _ in 0..pairs {
            let (stop, done) = (stop2.clone(), done_tx.clone());
            let sp2 = sp.clone();
            drop(sp.spawn(async move {
                let (tx1, rx1) = async_channel::bounded::<()>(1);
                let (tx2, rx2) = async_channel::bounded::<()>(1);
                drop(sp2.spawn(async move {
                    while rx1.recv().await.is_ok() {
                        if tx2.send(()).await.is_err() {
                            break;
                        }
                    }
                }));
                let mut n = 0;
                while !stop.load(Relaxed) {
                    tx1.send(()).await.unwrap();
                    rx2.recv().await.unwrap();
                    n += 1;
                }
                done.send((false, n)).unwrap();
            }));
        }
    }));
    std::thread::sleep(round);
    stop.store(true, Relaxed);
    let elapsed = t0.elapsed().as_secs_f64();
    let (mut trips, mut spins) = (0, 0);
    for _ in 0..pairs + spinners {
        match done_rx.recv().unwrap() {
            (true, n) => spins += n,
            (false, n) => trips += n,
        }
    }
    let switches = (nvcsw() - c0) as f64;
    let run_delay = rt.stats().filter(|s| !s.timing.is_empty()).map(|s| {
        let mut all = hwsched::timing::PollTiming::default();
        for t in &s.timing {
            all.merge(t);
        }
        all.run_delay
    });
    MixedRound {
        round_trips_per_s: trips as f64 / elapsed,
        spins_per_s: spins as f64 / elapsed,
        nvcsw: switches,
        run_delay,
    }
}

/// The `mixed` workload: `runs` rounds, each on freshly built runtimes in a
/// rotating order; a table of medians and hwsched / tokio message rate.
fn run_mixed(workers: usize, runs: usize, m: &MixedCfg) {
    let names = ["hwsched", "hwsched-timed", "tokio", "async-executor"];
    let build = |i: usize| -> Rt {
        let tunables = rt::env_tunables(Default::default());
        match i {
            0 => rt::hwsched(names[0], Some(workers), None, tunables),
            1 => rt::hwsched_with(names[1], Some(workers), None, tunables, |b| {
                b.poll_timing(true)
            }),
            2 => return rt::tokio(workers),
            _ => return rt::async_executor(workers),
        }
        .unwrap_or_else(|e| panic!("hwsched: {e}"))
    };
    println!(
        "\nmixed: {} ping_pong pairs beside {} task(s) spinning {} us between yields; {workers} \
         workers each, {} ms per round, {runs} rounds (a fresh runtime each, interleaved), \
         medians; run delay (hwsched-timed only: poll timing on): p50 and p99 are power-of-two \
         bucket ends, merged over the workers\n",
        m.pairs,
        m.spinners,
        m.cost.as_micros(),
        m.round.as_millis()
    );
    let mut rounds: Vec<Vec<MixedRound>> = names.iter().map(|_| Vec::new()).collect();
    for r in 0..runs {
        for j in 0..names.len() {
            let i = (r + j) % names.len();
            let rt = build(i);
            rounds[i].push(mixed_round(&rt, m));
        }
    }
    println!(
        "| runtime | round trips/s | spins/s | nvcsw per round | run delay p50 us | \
         run delay p99 us | run delay max us |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let med = |i: usize, f: &dyn Fn(&MixedRound) -> f64| median(rounds[i].iter().map(f).collect());
    for (i, name) in names.iter().enumerate() {
        let delay = if rounds[i].iter().all(|x| x.run_delay.is_some()) {
            let us = |d: Duration| d.as_secs_f64() * 1e6;
            let q = |q: f64| med(i, &|x| us(x.run_delay.as_ref().unwrap().percentile(q)));
            let max = med(i, &|x| us(x.run_delay.as_ref().unwrap().max));
            format!("{:.0} | {:.0} | {max:.0}", q(0.5), q(0.99))
        } else {
            "- | - | -".to_owned()
        };
        println!(
            "| {name} | {:.0} | {:.0} | {:.0} | {delay} |",
            med(i, &|x| x.round_trips_per_s),
            med(i, &|x| x.spins_per_s),
            med(i, &|x| x.nvcsw),
        );
    }
    let ratios: Vec<f64> = (0..runs)
        .map(|r| rounds[0][r].round_trips_per_s / rounds[2][r].round_trips_per_s)
        .collect();
    println!(
        "\nhwsched / tokio message rate: {:.2} (rounds {}) (above 1: hwsched passes more \
         messages)",
        median(ratios.clone()),
        ratios
            .iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
}

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
       sidebyside --instructions [--workers N] [--scale S] [FILTER...]
  --runs N        rounds per workload and runtime; medians are shown (5)
  --workers N     workers of every runtime but tokio-ct (default: one per CPU)
  --scale S       divide the workloads' operation counts by S (1)
  --instructions  one measured round per workload and runtime, between
                  callgrind client requests (run under valgrind
                  --tool=callgrind; scripts/instructions.sh does)
  FILTER          only workloads whose name contains one of these;
                  `mixed` runs the mixed workload (only when named)
  --mixed-pairs N      mixed: ping_pong pairs (64)
  --mixed-spinners N   mixed: tasks spinning between yields (1; 0 allowed)
  --mixed-cost-us N    mixed: microseconds each spin lasts (1000)
  --mixed-ms N         mixed: milliseconds per round (1000)";

fn main() {
    let mut runs = 5usize;
    let mut workers = rt::default_workers();
    let mut scale = 1usize;
    let mut instructions = false;
    let mut filters: Vec<String> = Vec::new();
    let mut mixed = MixedCfg {
        pairs: 64,
        spinners: 1,
        cost: Duration::from_millis(1),
        round: Duration::from_secs(1),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bench" => {}
            "--instructions" => instructions = true,
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
            "--mixed-pairs" | "--mixed-spinners" | "--mixed-cost-us" | "--mixed-ms" => {
                let v = args.next().unwrap_or_default();
                match v.parse::<u64>() {
                    Ok(n) if n > 0 || a == "--mixed-spinners" => match a.as_str() {
                        "--mixed-pairs" => mixed.pairs = n as usize,
                        "--mixed-spinners" => mixed.spinners = n as usize,
                        "--mixed-cost-us" => mixed.cost = Duration::from_micros(n),
                        _ => mixed.round = Duration::from_millis(n),
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
    // `mixed` is not in the table: it runs after it, only when named.
    let want_mixed = filters.iter().any(|f| f == "mixed");
    filters.retain(|f| f != "mixed");
    let workloads: Vec<&Workload> = WORKLOADS
        .iter()
        .filter(|w| filters.is_empty() || filters.iter().any(|x| w.name.contains(x.as_str())))
        .filter(|_| !(want_mixed && filters.is_empty()))
        .collect();
    if want_mixed && instructions {
        eprintln!("sidebyside: the mixed workload has no instruction mode; not run");
    }
    if want_mixed && !instructions && workloads.is_empty() {
        run_mixed(workers, runs, &mixed);
        return;
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
        rt::tokio_current_thread().unwrap_or_else(|e| panic!("tokio-ct: {e}")),
    ];
    if instructions {
        #[cfg(target_arch = "x86_64")]
        instruction_mode(&rts, &workloads, &sizes, workers, scale);
        #[cfg(not(target_arch = "x86_64"))]
        {
            eprintln!(
                "sidebyside: --instructions issues valgrind client requests, \
                 implemented for x86_64 only"
            );
            exit(2);
        }
        return;
    }
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
    if want_mixed {
        drop(rts);
        run_mixed(workers, runs, &mixed);
    }
}

/// How long the instruction mode waits after a warm-up round before it
/// zeroes the counts: long enough for every runtime's workers to have
/// finished spinning and parked (hwsched's spin is as long as a park costs,
/// measured at start, under valgrind too).
#[cfg(target_arch = "x86_64")]
const SETTLE: Duration = Duration::from_millis(50);

/// The instruction mode: for each workload, its operation count, then for
/// each runtime a warm-up round, a pause for the workers to park, and one
/// round between callgrind's ZERO_STATS and DUMP_STATS_AT
/// `"<workload>/<runtime>"`.
///
/// Prints, for `scripts/instructions.sh`, one tab-separated line per
/// workload, `ops <workload> <op> <count>`, and one per dump,
/// `dump <workload>/<runtime>`.
#[cfg(target_arch = "x86_64")]
fn instruction_mode(
    rts: &[Rt],
    workloads: &[&Workload],
    sizes: &Sizes,
    workers: usize,
    scale: usize,
) {
    if !callgrind::running_on_valgrind() {
        eprintln!(
            "sidebyside: not running under valgrind: the callgrind requests are no-ops \
             (run scripts/instructions.sh)"
        );
    }
    println!("workers\t{workers}\tscale\t{scale}");
    for w in workloads {
        println!("ops\t{}\t{}\t{}", w.name, w.op, (w.ops)(sizes));
        for r in rts {
            (w.run)(r, sizes);
            std::thread::sleep(SETTLE);
            let label = format!("{}/{}", w.name, r.name);
            let c_label = std::ffi::CString::new(label.as_str()).expect("label without NUL");
            callgrind::zero_stats();
            (w.run)(r, sizes);
            callgrind::dump_stats_at(&c_label);
            println!("dump\t{label}");
        }
    }
}
