//! Where the CPU of `sidebyside`'s `spawn_outside` goes: the spawning
//! thread's CPU per spawn and per join, the workers' CPU per task, and the
//! futex wakes the spawner paid. The figures behind the `vm` cost preset's
//! `spawn_ns` and `task_ns` in `hwsched-sim` (SIMULATION.md, "Calibration").
//!
//! ```text
//! cargo run --release --example spawn_cost -- --workers 1 --runs 7
//! ```
//!
//! Each round spawns `--tasks` empty tasks from the main thread (a plain
//! thread, outside the runtime) into an idle runtime, then joins them, as
//! `spawn_outside` does. CPU times are `CLOCK_THREAD_CPUTIME_ID` (the
//! spawner) and `CLOCK_PROCESS_CPUTIME_ID` (the process); the workers' CPU
//! is the process's less the spawner's. Linux only.
//!
//! With `--backlog`, each worker is held by a spinning task while the
//! tasks are spawned, so they all wait in queues; then the spinners stop,
//! and the workers' CPU from then to the end, per task, is what running a
//! queued empty task costs a worker (no idling in between): the `vm`
//! preset's `task_ns` is that, less the model's own per-task cost.

use std::time::Instant;

const USAGE: &str = "\
usage: spawn_cost [--workers N] [--tasks N] [--runs N] [--backlog]
  --workers N   worker threads (2)
  --tasks N     empty tasks per round (100000)
  --runs N      rounds; the median of each column is printed (7)
  --backlog     hold the workers while spawning: the workers' CPU column is
                then measured from their release (a drain of queued tasks)";

fn cpu_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let (mut workers, mut tasks, mut runs) = (2usize, 100_000usize, 7usize);
    let mut backlog = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--backlog" {
            backlog = true;
            continue;
        }
        let mut num = || -> usize {
            args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                eprintln!("{USAGE}");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--workers" => workers = num(),
            "--tasks" => tasks = num(),
            "--runs" => runs = num(),
            _ => {
                eprintln!("{USAGE}");
                std::process::exit(2);
            }
        }
    }
    let rt = hwsched::Runtime::builder()
        .worker_threads(workers)
        .build()
        .expect("runtime");
    // Columns, per round.
    let names = [
        "wall ms",
        "spawn loop wall ns/spawn",
        "spawner CPU ns/spawn",
        "spawner join CPU ns/task",
        "workers CPU ns/task",
        "spawner futex wakes",
        "parks",
        "polls",
    ];
    let mut cols: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for _ in 0..runs {
        // Let the workers go idle (park), as between sidebyside's rounds.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let hold = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(backlog));
        let held = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let spinners: Vec<_> = (0..if backlog { workers } else { 0 })
            .map(|_| {
                let (hold, held) = (hold.clone(), held.clone());
                rt.spawn(async move {
                    held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    while hold.load(std::sync::atomic::Ordering::Acquire) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        while held.load(std::sync::atomic::Ordering::SeqCst) < spinners.len() {
            std::thread::yield_now();
        }
        let s0 = rt.stats();
        let (mut p0, mut c0, t0) = (
            cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID),
            cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID),
            Instant::now(),
        );
        let handles: Vec<_> = (0..tasks).map(|_| rt.spawn(async {})).collect();
        let (c1, t1) = (cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID), Instant::now());
        if backlog {
            // The workers' CPU is counted from their release.
            p0 = cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID);
            c0 = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
            hold.store(false, std::sync::atomic::Ordering::Release);
        }
        rt.block_on(async {
            for h in spinners {
                let _ = h.await;
            }
            for h in handles {
                let _ = h.await;
            }
        });
        let (p2, c2, t2) = (
            cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID),
            cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID),
            Instant::now(),
        );
        let s1 = rt.stats();
        let n = tasks as f64;
        let row = [
            (t2 - t0).as_secs_f64() * 1e3,
            (t1 - t0).as_nanos() as f64 / n,
            (c1 - c0.min(c1)) as f64 / n,
            (c2 - c1) as f64 / n,
            ((p2 - p0) - (c2 - c0)) as f64 / n,
            (s1.external.unparks - s0.external.unparks) as f64,
            (s1.total().parks - s0.total().parks) as f64,
            (s1.total().polls - s0.total().polls) as f64,
        ];
        for (c, v) in cols.iter_mut().zip(row) {
            c.push(v);
        }
    }
    println!(
        "spawn_cost: {workers} workers, {tasks} tasks, median of {runs} rounds{}",
        if backlog { ", backlog" } else { "" }
    );
    for (name, c) in names.iter().zip(cols) {
        let (lo, hi) = c
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
        println!("  {name:28} {:10.1}   ({lo:.1}-{hi:.1})", median(c));
    }
}
