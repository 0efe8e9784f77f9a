//! Light load: where idle-balance and idle-state overhead shows.
//!
//! One outside thread wakes one of 64 receiver tasks (random) every 50 us
//! for 1 s; each receiver awaits its own async-channel and spins ~2 us per
//! message. Reported per runtime: the runtime's CPU time per message
//! (process user+sys minus the sender's and the main thread's own, plus the
//! sender's CPU time *inside* `try_send`: the wake a runtime makes the
//! waker pay, a futex wake, is the runtime's cost; it is also shown alone
//! as "send us/msg"), worker
//! sleeps per message (hwsched's park counter; voluntary context switches
//! of the runtime's threads for every runtime), and wake latency
//! percentiles (receiver's `Instant::now()` minus the sender's stamp).
//!
//! ```text
//! cargo bench --bench light_load                      # 1 s per row
//! cargo bench --bench light_load -- --runs 5          # median of 5
//! cargo bench --bench light_load -- --quick           # 0.2 s per row
//! cargo bench --bench light_load -- --quick tokio     # rows whose name contains "tokio"
//! HWSCHED_STATS=1 cargo bench --bench light_load -- hwsched   # and each hwsched row's stats
//! ```
//!
//! Linux only (getrusage(RUSAGE_THREAD), PR_SET_TIMERSLACK).

#[path = "common/rt.rs"]
mod rt;

use std::process::exit;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hwsched::{IdleMode, StealWalk, Tunables};

const RECEIVERS: usize = 64;
const PERIOD: Duration = Duration::from_micros(50);
const WORK: Duration = Duration::from_micros(2);

#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    cpu: Duration,
    nvcsw: libc::c_long,
    nivcsw: libc::c_long,
}

impl std::ops::Sub for Usage {
    type Output = Usage;
    fn sub(self, o: Usage) -> Usage {
        Usage {
            cpu: self.cpu.saturating_sub(o.cpu),
            nvcsw: self.nvcsw - o.nvcsw,
            nivcsw: self.nivcsw - o.nivcsw,
        }
    }
}

fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
}

/// getrusage for RUSAGE_SELF (the process) or RUSAGE_THREAD (the caller).
fn usage(who: libc::c_int) -> Usage {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` points to writable memory the size of a `rusage`, which
    // getrusage fills; `who` is RUSAGE_SELF or RUSAGE_THREAD.
    let rc = unsafe { libc::getrusage(who, ru.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage: {}", std::io::Error::last_os_error());
    // SAFETY: zero-initialised (all-integer struct) and filled by getrusage.
    let ru = unsafe { ru.assume_init() };
    Usage {
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
        nvcsw: ru.ru_nvcsw,
        nivcsw: ru.ru_nivcsw,
    }
}

/// This thread's CPU time (CLOCK_THREAD_CPUTIME_ID).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a
    // constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime: {}", std::io::Error::last_os_error());
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

async fn receiver(rx: async_channel::Receiver<Instant>, processed: Arc<AtomicU64>) -> Vec<u64> {
    let mut lat = Vec::with_capacity(1024);
    while let Ok(stamp) = rx.recv().await {
        lat.push(stamp.elapsed().as_nanos() as u64);
        spin(WORK);
        processed.fetch_add(1, Relaxed);
    }
    lat
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    msgs: f64,
    cpu_us_per_msg: f64,
    send_us_per_msg: f64,
    cpu_util: f64,
    parks_per_msg: Option<f64>,
    nvcsw_per_msg: f64,
    nivcsw_per_msg: f64,
    p50_us: f64,
    p99_us: f64,
}

fn measure(rt: &rt::Rt, duration: Duration) -> Sample {
    let processed = Arc::new(AtomicU64::new(0));
    let mut txs = Vec::with_capacity(RECEIVERS);
    let mut handles = Vec::with_capacity(RECEIVERS);
    for _ in 0..RECEIVERS {
        let (tx, rx) = async_channel::unbounded::<Instant>();
        txs.push(tx);
        handles.push(rt.spawn(receiver(rx, processed.clone())));
    }
    // Let every receiver reach its first await and the workers go idle.
    thread::sleep(Duration::from_millis(50));

    let stats0 = rt.stats().map(|s| s.total());
    let self0 = usage(libc::RUSAGE_SELF);
    let main0 = usage(libc::RUSAGE_THREAD);
    let t0 = Instant::now();

    let sender_txs = txs.clone();
    let sender = thread::spawn(move || {
        // SAFETY: PR_SET_TIMERSLACK takes one unsigned long argument and
        // only affects the calling thread's timer slack.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong);
        }
        let u0 = usage(libc::RUSAGE_THREAD);
        let start = Instant::now();
        let end = start + duration;
        let mut next = start;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut sent = 0u64;
        let mut in_send = Duration::ZERO;
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            if next > now {
                thread::sleep(next - now);
            }
            // xorshift64: a random receiver.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let i = (seed % RECEIVERS as u64) as usize;
            let c0 = thread_cpu();
            sender_txs[i]
                .try_send(Instant::now())
                .expect("receiver gone");
            in_send += thread_cpu().saturating_sub(c0);
            sent += 1;
            next += PERIOD;
            let now = Instant::now();
            if next + PERIOD < now {
                // Fell behind (a long sleep): do not burst to catch up.
                next = now;
            }
        }
        drop(sender_txs);
        (sent, usage(libc::RUSAGE_THREAD) - u0, in_send)
    });
    let (sent, sender_usage, in_send) = sender.join().expect("sender thread panicked");
    let wait = Instant::now();
    while processed.load(Relaxed) < sent {
        if wait.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "light_load: {} on {}: only {} of {} messages processed after 10 s (lost wakeup?)",
                rt.name,
                rt.workers(),
                processed.load(Relaxed),
                sent
            );
            exit(1);
        }
        thread::sleep(Duration::from_micros(200));
    }
    let elapsed = t0.elapsed();
    let main_usage = usage(libc::RUSAGE_THREAD) - main0;
    let self_usage = usage(libc::RUSAGE_SELF) - self0;
    let stats1 = rt.stats().map(|s| s.total());

    drop(txs);
    let mut lat: Vec<u64> = rt.block_on(async move {
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.await);
        }
        all
    });
    assert_eq!(lat.len() as u64, sent, "light_load: messages lost");
    lat.sort_unstable();
    let pct = |p: usize| lat[(lat.len() * p / 100).min(lat.len() - 1)] as f64 / 1e3;

    let rt_cpu = self_usage
        .cpu
        .saturating_sub(sender_usage.cpu)
        .saturating_sub(main_usage.cpu)
        + in_send;
    let n = sent.max(1) as f64;
    Sample {
        msgs: sent as f64,
        cpu_us_per_msg: rt_cpu.as_secs_f64() * 1e6 / n,
        send_us_per_msg: in_send.as_secs_f64() * 1e6 / n,
        cpu_util: rt_cpu.as_secs_f64() / elapsed.as_secs_f64(),
        parks_per_msg: match (stats0, stats1) {
            (Some(a), Some(b)) => Some((b.parks - a.parks) as f64 / n),
            _ => None,
        },
        nvcsw_per_msg: (self_usage.nvcsw - sender_usage.nvcsw - main_usage.nvcsw) as f64 / n,
        nivcsw_per_msg: (self_usage.nivcsw - sender_usage.nivcsw - main_usage.nivcsw) as f64 / n,
        p50_us: pct(50),
        p99_us: pct(99),
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

fn median_sample(s: &[Sample]) -> Sample {
    let m = |f: fn(&Sample) -> f64| median(s.iter().map(f).collect());
    Sample {
        msgs: m(|x| x.msgs),
        cpu_us_per_msg: m(|x| x.cpu_us_per_msg),
        send_us_per_msg: m(|x| x.send_us_per_msg),
        cpu_util: m(|x| x.cpu_util),
        parks_per_msg: s[0]
            .parks_per_msg
            .map(|_| median(s.iter().filter_map(|x| x.parks_per_msg).collect())),
        nvcsw_per_msg: m(|x| x.nvcsw_per_msg),
        nivcsw_per_msg: m(|x| x.nivcsw_per_msg),
        p50_us: m(|x| x.p50_us),
        p99_us: m(|x| x.p99_us),
    }
}

type Make = Box<dyn Fn() -> rt::Rt>;

fn rows() -> Vec<(&'static str, Make)> {
    let hw = |name: &'static str, topo: Option<&'static str>, t: Tunables| -> Make {
        Box::new(move || {
            rt::hwsched(name, None, topo, t.clone())
                .unwrap_or_else(|e| panic!("cannot build {name}: {e}"))
        })
    };
    let n = rt::default_workers();
    vec![
        ("hwsched", hw("hwsched", None, Tunables::default())),
        (
            "hwsched walk=unbounded",
            hw(
                "hwsched walk=unbounded",
                None,
                Tunables {
                    walk: StealWalk::Unbounded,
                    ..Default::default()
                },
            ),
        ),
        (
            "hwsched idle=governed",
            hw(
                "hwsched idle=governed",
                None,
                Tunables {
                    idle: IdleMode::Governed,
                    ..Default::default()
                },
            ),
        ),
        (
            "hwsched idle=spin:50us",
            hw(
                "hwsched idle=spin:50us",
                None,
                Tunables {
                    idle: IdleMode::AlwaysSpin(Duration::from_micros(50)),
                    ..Default::default()
                },
            ),
        ),
        ("tokio", Box::new(move || rt::tokio(n))),
        ("async-executor", Box::new(move || rt::async_executor(n))),
        (
            "hwsched-32",
            hw("hwsched-32", Some(rt::SYNTH_32), Tunables::default()),
        ),
        (
            "hwsched-32 walk=unbounded",
            hw(
                "hwsched-32 walk=unbounded",
                Some(rt::SYNTH_32),
                Tunables {
                    walk: StealWalk::Unbounded,
                    ..Default::default()
                },
            ),
        ),
        (
            "hwsched-32 idle=governed",
            hw(
                "hwsched-32 idle=governed",
                Some(rt::SYNTH_32),
                Tunables {
                    idle: IdleMode::Governed,
                    ..Default::default()
                },
            ),
        ),
    ]
}

const USAGE: &str = "\
usage: light_load [--quick] [--runs N] [--secs S] [FILTER...]
  --quick     0.2 s per run instead of 1 s
  --runs N    runs per row; the table shows medians (1)
  --secs S    seconds per run (overrides --quick)
  FILTER      only rows whose name contains one of these";

fn main() {
    let mut duration = Duration::from_secs(1);
    let mut secs: Option<f64> = None;
    let mut runs = 1usize;
    let mut filters: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bench" => {} // passed by `cargo bench`
            "--quick" => duration = Duration::from_millis(200),
            "--runs" | "--secs" => {
                let v = args.next().unwrap_or_default();
                let ok = if a == "--runs" {
                    v.parse::<usize>().ok().filter(|&n| n > 0).map(|n| runs = n)
                } else {
                    v.parse::<f64>()
                        .ok()
                        .filter(|s| *s > 0.0 && *s <= 600.0)
                        .map(|s| secs = Some(s))
                };
                if ok.is_none() {
                    eprintln!("light_load: invalid value {v:?} for {a}\n{USAGE}");
                    exit(2);
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            f if !f.starts_with('-') => filters.push(f.to_owned()),
            _ => {
                eprintln!("light_load: unknown option {a:?}\n{USAGE}");
                exit(2);
            }
        }
    }
    if let Some(s) = secs {
        duration = Duration::from_secs_f64(s);
    }

    println!(
        "light load: 1 sender thread, {RECEIVERS} receivers, a message every {} us for {:.1} s, \
         {} us of work each; {runs} run(s) per row, medians\n",
        PERIOD.as_micros(),
        duration.as_secs_f64(),
        WORK.as_micros()
    );
    println!(
        "| runtime | workers | msgs | CPU us/msg | send us/msg | CPU util | parks/msg | nvcsw/msg | nivcsw/msg | p50 wake us | p99 wake us |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, make) in rows() {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let rt = make();
        let samples: Vec<Sample> = (0..runs).map(|_| measure(&rt, duration)).collect();
        let s = median_sample(&samples);
        println!(
            "| {} | {} | {:.0} | {:.2} | {:.2} | {:.1}% | {} | {:.3} | {:.3} | {:.1} | {:.1} |",
            name,
            rt.workers(),
            s.msgs,
            s.cpu_us_per_msg,
            s.send_us_per_msg,
            100.0 * s.cpu_util,
            s.parks_per_msg
                .map_or_else(|| "n/a".to_owned(), |p| format!("{p:.3}")),
            s.nvcsw_per_msg,
            s.nivcsw_per_msg,
            s.p50_us,
            s.p99_us
        );
        if std::env::var_os("HWSCHED_STATS").is_some() {
            if let Some(st) = rt.stats() {
                eprintln!("{name}:\n{st}");
            }
        }
    }
}
