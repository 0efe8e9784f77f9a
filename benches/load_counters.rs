//! Shared load counters under migration (seed 004: rate-limiting
//! `tg->load_avg` updates to once per ms).
//!
//! 256 tasks in a ring pass 16 tokens through async-channels for ~1 s, so
//! tasks wake each other across workers all the time. For
//! `load_update_interval` = 1 ms (the default) and 0 (publish every change),
//! on this machine and on the 32-worker synthetic topology, report the
//! shared-counter writes per second (`load_publishes`), the publishes held
//! back by the interval, and the throughput (token hops per second).
//!
//! ```text
//! cargo bench --bench load_counters                 # 1 s per row
//! cargo bench --bench load_counters -- --runs 5     # median of 5
//! cargo bench --bench load_counters -- --quick      # 0.2 s per row
//! ```

#[path = "common/rt.rs"]
mod rt;

use std::process::exit;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hwsched::Tunables;

const TASKS: usize = 256;

#[derive(Debug, Clone, Copy)]
struct Sample {
    hops_per_s: f64,
    publishes_per_s: f64,
    held_interval_per_s: f64,
    held_delta_per_s: f64,
    publishes_per_khop: f64,
}

async fn member(
    rx: async_channel::Receiver<u64>,
    tx: async_channel::Sender<u64>,
    stop: Arc<AtomicBool>,
) -> u64 {
    let mut hops = 0;
    while let Ok(token) = rx.recv().await {
        if stop.load(Relaxed) {
            break;
        }
        hops += 1;
        if tx.send(token + 1).await.is_err() {
            break;
        }
    }
    hops
}

fn measure(rt: &rt::Rt, duration: Duration, tokens: usize) -> Sample {
    let stop = Arc::new(AtomicBool::new(false));
    let chans: Vec<_> = (0..TASKS)
        .map(|_| async_channel::bounded::<u64>(tokens))
        .collect();
    let handles: Vec<_> = (0..TASKS)
        .map(|i| {
            let rx = chans[i].1.clone();
            let tx = chans[(i + 1) % TASKS].0.clone();
            rt.spawn(member(rx, tx, stop.clone()))
        })
        .collect();
    let injectors: Vec<_> = (0..tokens)
        .map(|k| chans[k * TASKS / tokens].0.clone())
        .collect();
    drop(chans);
    thread::sleep(Duration::from_millis(20));

    let s0 = rt.stats().expect("hwsched").total();
    let t0 = Instant::now();
    for (k, tx) in injectors.iter().enumerate() {
        tx.try_send(k as u64).expect("ring channel full");
    }
    drop(injectors);
    thread::sleep(duration);
    stop.store(true, Relaxed);
    let elapsed = t0.elapsed().as_secs_f64();
    let s1 = rt.stats().expect("hwsched").total();
    let hops: u64 = rt.block_on(async move {
        let mut sum = 0;
        for h in handles {
            sum += h.await;
        }
        sum
    });
    let publishes = (s1.load_publishes - s0.load_publishes) as f64;
    Sample {
        hops_per_s: hops as f64 / elapsed,
        publishes_per_s: publishes / elapsed,
        held_interval_per_s: (s1.load_skipped_interval - s0.load_skipped_interval) as f64 / elapsed,
        held_delta_per_s: (s1.load_skipped_delta - s0.load_skipped_delta) as f64 / elapsed,
        publishes_per_khop: 1e3 * publishes / (hops.max(1) as f64),
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

const USAGE: &str = "\
usage: load_counters [--quick] [--runs N] [--secs S] [--tokens N]
  --quick     0.2 s per run instead of 1 s
  --runs N    runs per row; the table shows medians (1)
  --secs S    seconds per run (overrides --quick)
  --tokens N  tokens circulating in the 256-task ring (16)";

fn main() {
    let mut duration = Duration::from_secs(1);
    let mut secs: Option<f64> = None;
    let mut runs = 1usize;
    let mut tokens = 16usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bench" => {} // passed by `cargo bench`
            "--quick" => duration = Duration::from_millis(200),
            "--runs" | "--tokens" | "--secs" => {
                let v = args.next().unwrap_or_default();
                let ok = match a.as_str() {
                    "--runs" => v.parse::<usize>().ok().filter(|&n| n > 0).map(|n| runs = n),
                    "--tokens" => v
                        .parse::<usize>()
                        .ok()
                        .filter(|&n| (1..=TASKS).contains(&n))
                        .map(|n| tokens = n),
                    _ => v
                        .parse::<f64>()
                        .ok()
                        .filter(|s| *s > 0.0 && *s <= 600.0)
                        .map(|s| secs = Some(s)),
                };
                if ok.is_none() {
                    eprintln!("load_counters: invalid value {v:?} for {a}\n{USAGE}");
                    exit(2);
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            _ => {
                eprintln!("load_counters: unknown option {a:?}\n{USAGE}");
                exit(2);
            }
        }
    }
    if let Some(s) = secs {
        duration = Duration::from_secs_f64(s);
    }

    println!(
        "load counters: {TASKS}-task ring, {tokens} tokens, {:.1} s per run, {runs} run(s) per row, medians\n",
        duration.as_secs_f64()
    );
    println!(
        "| topology | workers | load_update_interval | hops/s | publishes/s | publishes/1k hops | held by interval/s | held by delta/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (topo_name, topo) in [("machine", None), ("synthetic-32", Some(rt::SYNTH_32))] {
        for interval in [Duration::from_millis(1), Duration::ZERO] {
            let tunables = Tunables {
                load_update_interval: interval,
                ..Default::default()
            };
            let rt = rt::hwsched(topo_name, None, topo, tunables)
                .unwrap_or_else(|e| panic!("cannot build hwsched on {topo_name}: {e}"));
            let samples: Vec<Sample> = (0..runs).map(|_| measure(&rt, duration, tokens)).collect();
            let m = |f: fn(&Sample) -> f64| median(samples.iter().map(f).collect());
            println!(
                "| {} | {} | {:?} | {:.0} | {:.0} | {:.2} | {:.0} | {:.0} |",
                topo_name,
                rt.workers(),
                interval,
                m(|s| s.hops_per_s),
                m(|s| s.publishes_per_s),
                m(|s| s.publishes_per_khop),
                m(|s| s.held_interval_per_s),
                m(|s| s.held_delta_per_s),
            );
        }
    }
}
