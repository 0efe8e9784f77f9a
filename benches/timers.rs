//! Timers: what a runtime costs per timer expiry, and how late its timers
//! fire, idle and beside a long poll.
//!
//! Workloads (each a row per runtime, 2 workers unless `--workers N`):
//! - `sleepers-N`: N tasks each loop on `sleep(1 ms)` for the round;
//!   reported: expiries a second, the lateness of each sleep (its end
//!   minus its deadline) p50/p99/max, the process's CPU time per expiry and
//!   its voluntary context switches per expiry (a runtime that wakes two
//!   threads per expiry shows it here).
//! - `behind-long-poll`: one task pins a 50 ms computation to its own
//!   worker, then sleeps 5 ms (the timer is on that worker); reported: the
//!   lateness p50/p99/max over the round's repetitions.
//! - `timeout-churn`: 64 tasks each loop on `timeout(30 s, f)` where `f`
//!   is pending once (waking its task at once) and then ready: a timer
//!   registered (the timeout's first poll) and cancelled (its drop, the
//!   future having finished) per operation, as a server's per-request
//!   timeouts and hyper's header read timer are, plus one reschedule;
//!   reported: operations a second (the `exp/s` column) and the CPU time
//!   per operation (no lateness: nothing fires).
//!
//! `--instructions` runs `timeout-churn` for callgrind instead
//! (`scripts/timer-instructions.sh`): per runtime a warm-up round, a pause,
//! then a round of a fixed 64 x 1,000 operations between callgrind's
//! ZERO_STATS and DUMP_STATS_AT `"timeout-churn/<runtime>"`.
//!
//! hwsched is built with its I/O driver (timers need it); tokio is the
//! multi-thread runtime with `enable_all`.
//!
//! ```text
//! cargo bench --bench timers --features io              # 2 s per row, 5 runs
//! cargo bench --bench timers --features io -- --runs 3 --secs 1 sleepers
//! ```
//!
//! `HWSCHED_STATS=1` prints each hwsched row's statistics.
//!
//! Linux only (getrusage).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[cfg(target_arch = "x86_64")]
#[path = "common/callgrind.rs"]
mod callgrind;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Hwsched,
    Tokio,
}

enum Rt {
    Hw(hwsched::Runtime),
    Tokio(tokio::runtime::Runtime),
}

impl Rt {
    fn new(kind: Kind, workers: usize) -> Rt {
        match kind {
            Kind::Hwsched => Rt::Hw(
                hwsched::Runtime::builder()
                    .worker_threads(workers)
                    .build()
                    .expect("hwsched runtime"),
            ),
            Kind::Tokio => Rt::Tokio(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(workers)
                    .enable_all()
                    .build()
                    .expect("tokio runtime"),
            ),
        }
    }

    /// Runs `n` copies of the sleeper loop until `stop`; returns their
    /// latenesses.
    fn sleepers(&self, n: usize, secs: f64) -> Vec<Duration> {
        let stop = Arc::new(AtomicBool::new(false));
        let late = Arc::new(Mutex::new(Vec::new()));
        let mut hs = Vec::new();
        for _ in 0..n {
            let stop = stop.clone();
            let late = late.clone();
            match self {
                Rt::Hw(rt) => hs.push(Handle::Hw(rt.spawn(async move {
                    let mut mine = Vec::new();
                    while !stop.load(Relaxed) {
                        let t = Instant::now();
                        hwsched::time::sleep(Duration::from_millis(1)).await;
                        mine.push(t.elapsed().saturating_sub(Duration::from_millis(1)));
                    }
                    late.lock().unwrap().extend(mine);
                }))),
                Rt::Tokio(rt) => hs.push(Handle::Tokio(rt.spawn(async move {
                    let mut mine = Vec::new();
                    while !stop.load(Relaxed) {
                        let t = Instant::now();
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        mine.push(t.elapsed().saturating_sub(Duration::from_millis(1)));
                    }
                    late.lock().unwrap().extend(mine);
                }))),
            }
        }
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Relaxed);
        for h in hs {
            self.join(h);
        }
        let v = std::mem::take(&mut *late.lock().unwrap());
        v
    }

    /// Repeats the long-poll round for `secs`; returns the latenesses.
    fn behind_long_poll(&self, secs: f64) -> Vec<Duration> {
        let end = Instant::now() + Duration::from_secs_f64(secs);
        let mut late = Vec::new();
        while Instant::now() < end {
            let l = match self {
                Rt::Hw(rt) => rt
                    .block_on(rt.spawn(async {
                        let me = hwsched::worker_index().expect("on a worker");
                        let busy = hwsched::spawn_on(hwsched::Place::Worker(me), async {
                            spin(Duration::from_millis(50))
                        })
                        .expect("a worker place");
                        let t = Instant::now();
                        hwsched::time::sleep(Duration::from_millis(5)).await;
                        let l = t.elapsed().saturating_sub(Duration::from_millis(5));
                        busy.await.unwrap();
                        l
                    }))
                    .unwrap(),
                // tokio has no placement: the computation is spawned from
                // the task, into its worker's queue (its LIFO slot), the
                // closest equivalent.
                Rt::Tokio(rt) => rt
                    .block_on(rt.spawn(async {
                        let busy = tokio::spawn(async { spin(Duration::from_millis(50)) });
                        let t = Instant::now();
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        let l = t.elapsed().saturating_sub(Duration::from_millis(5));
                        busy.await.unwrap();
                        l
                    }))
                    .unwrap(),
            };
            late.push(l);
        }
        late
    }

    /// Runs `n` tasks that each loop on `timeout(30 s, PendOnce)`,
    /// `iters` times each, or until `stop` if `iters` is 0; returns the
    /// operations done.
    fn timeout_churn(&self, n: usize, iters: usize, secs: f64) -> u64 {
        const FAR: Duration = Duration::from_secs(30);
        let stop = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(AtomicU64::new(0));
        let mut hs = Vec::new();
        for _ in 0..n {
            let (stop, ops) = (stop.clone(), ops.clone());
            let go = move |i: usize| {
                if iters == 0 {
                    !stop.load(Relaxed)
                } else {
                    i < iters
                }
            };
            match self {
                Rt::Hw(rt) => hs.push(Handle::Hw(rt.spawn(async move {
                    let mut i = 0;
                    while go(i) {
                        hwsched::time::timeout(FAR, PendOnce(false))
                            .await
                            .expect("ready long before 30 s");
                        i += 1;
                    }
                    ops.fetch_add(i as u64, Relaxed);
                }))),
                Rt::Tokio(rt) => hs.push(Handle::Tokio(rt.spawn(async move {
                    let mut i = 0;
                    while go(i) {
                        tokio::time::timeout(FAR, PendOnce(false))
                            .await
                            .expect("ready long before 30 s");
                        i += 1;
                    }
                    ops.fetch_add(i as u64, Relaxed);
                }))),
            }
        }
        if iters == 0 {
            std::thread::sleep(Duration::from_secs_f64(secs));
            stop.store(true, Relaxed);
        }
        for h in hs {
            self.join(h);
        }
        ops.load(Relaxed)
    }

    fn join(&self, h: Handle) {
        match (self, h) {
            (Rt::Hw(rt), Handle::Hw(h)) => rt.block_on(h).unwrap(),
            (Rt::Tokio(rt), Handle::Tokio(h)) => rt.block_on(h).unwrap(),
            _ => unreachable!("a handle of another runtime"),
        }
    }
}

/// A future that is pending once, waking its task at once, then ready:
/// the same on every runtime (unlike their `yield_now`s: tokio's defers
/// the wake to its next driver poll, a syscall), so `timeout-churn`
/// measures the timers and one reschedule.
struct PendOnce(bool);

impl std::future::Future for PendOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

enum Handle {
    Hw(hwsched::JoinHandle<()>),
    Tokio(tokio::task::JoinHandle<()>),
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// CPU time and voluntary context switches of the process.
fn usage() -> (Duration, libc::c_long) {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` points to writable memory the size of a `rusage`, which
    // getrusage fills.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage: {}", std::io::Error::last_os_error());
    // SAFETY: zero-initialised (all-integer struct) and filled above.
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    (tv(ru.ru_utime) + tv(ru.ru_stime), ru.ru_nvcsw)
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

struct Args {
    runs: usize,
    secs: f64,
    workers: usize,
    filter: Vec<String>,
    instructions: bool,
}

fn args() -> Args {
    let mut a = Args {
        runs: 5,
        secs: 2.0,
        workers: 2,
        filter: Vec::new(),
        instructions: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut num =
            |name: &str| -> String { it.next().unwrap_or_else(|| panic!("{name} needs a value")) };
        match s.as_str() {
            "--bench" => {}
            "--runs" => a.runs = num("--runs").parse().expect("--runs: a count"),
            "--secs" => a.secs = num("--secs").parse().expect("--secs: seconds"),
            "--workers" => a.workers = num("--workers").parse().expect("--workers: a count"),
            "--instructions" => a.instructions = true,
            f if f.starts_with("--") => panic!("unknown option {f}"),
            f => a.filter.push(f.to_string()),
        }
    }
    a
}

/// The instruction mode (module docs): prints `ops timeout-churn N` and,
/// per runtime, `dump timeout-churn/<runtime>`.
#[cfg(target_arch = "x86_64")]
fn instruction_mode(workers: usize) {
    const TASKS: usize = 64;
    const ITERS: usize = 1_000;
    if !callgrind::running_on_valgrind() {
        eprintln!("timers: not running under valgrind (run scripts/timer-instructions.sh)");
    }
    println!("ops\ttimeout-churn\t{}", TASKS * ITERS);
    for (kind, name) in [(Kind::Hwsched, "hwsched"), (Kind::Tokio, "tokio")] {
        let rt = Rt::new(kind, workers);
        rt.timeout_churn(TASKS, ITERS / 5, 0.0);
        std::thread::sleep(Duration::from_millis(50));
        let label = format!("timeout-churn/{name}");
        let c_label = std::ffi::CString::new(label.as_str()).expect("label without NUL");
        callgrind::zero_stats();
        let ops = rt.timeout_churn(TASKS, ITERS, 0.0);
        callgrind::dump_stats_at(&c_label);
        assert_eq!(ops, (TASKS * ITERS) as u64);
        println!("dump\t{label}");
    }
}

fn main() {
    let a = args();
    if a.instructions {
        #[cfg(target_arch = "x86_64")]
        instruction_mode(a.workers);
        #[cfg(not(target_arch = "x86_64"))]
        panic!("--instructions: callgrind's client requests are written for x86_64");
        #[allow(unreachable_code)]
        return;
    }
    let rows: Vec<(&str, Option<usize>)> = vec![
        ("sleepers-1", Some(1)),
        ("sleepers-64", Some(64)),
        ("behind-long-poll", None),
        ("timeout-churn", Some(64)),
    ];
    println!(
        "{} workers, {} runs of {} s, medians over the runs",
        a.workers, a.runs, a.secs
    );
    println!(
        "{:<18} {:<8} {:>10} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "workload", "runtime", "exp/s", "late p50", "late p99", "late max", "cpu us/exp", "csw/exp"
    );
    for (name, n) in rows {
        if !a.filter.is_empty() && !a.filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        for kind in [Kind::Hwsched, Kind::Tokio] {
            let mut cols: [Vec<f64>; 6] = Default::default();
            for _ in 0..a.runs {
                let rt = Rt::new(kind, a.workers);
                std::thread::sleep(Duration::from_millis(50));
                let (c0, s0) = usage();
                let t0 = Instant::now();
                let mut churned = None;
                let mut late = match n {
                    _ if name == "timeout-churn" => {
                        churned = Some(rt.timeout_churn(n.unwrap_or(64), 0, a.secs));
                        Vec::new()
                    }
                    Some(n) => rt.sleepers(n, a.secs),
                    None => rt.behind_long_poll(a.secs),
                };
                let wall = t0.elapsed().as_secs_f64();
                let (c1, s1) = usage();
                if let (Rt::Hw(rt), Some(_)) = (&rt, std::env::var_os("HWSCHED_STATS")) {
                    eprintln!("{name}:\n{}", rt.stats());
                }
                drop(rt);
                let count = churned.unwrap_or(late.len() as u64);
                let k = count.max(1) as f64;
                cols[0].push(count as f64 / wall);
                cols[1].push(pct(&mut late, 0.5).as_secs_f64() * 1e6);
                cols[2].push(pct(&mut late, 0.99).as_secs_f64() * 1e6);
                cols[3].push(pct(&mut late, 1.0).as_secs_f64() * 1e6);
                cols[4].push((c1 - c0).as_secs_f64() * 1e6 / k);
                cols[5].push((s1 - s0) as f64 / k);
            }
            let [e, p50, p99, max, cpu, csw] = cols.map(median);
            println!(
                "{:<18} {:<8} {:>10.0} {:>7.0}us {:>7.0}us {:>7.0}us {:>10.2} {:>10.2}",
                name,
                match kind {
                    Kind::Hwsched => "hwsched",
                    Kind::Tokio => "tokio",
                },
                e,
                p50,
                p99,
                max,
                cpu,
                csw
            );
        }
    }
}
