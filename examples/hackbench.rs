//! hackbench (`perf bench sched messaging`, pipe mode) on hwsched, tokio or
//! async-executor.
//!
//! ```text
//! cargo run --release --example hackbench -- -g 10 -f 20 -l 100 -s 100
//! cargo run --release --example hackbench -- --runtime tokio --runs 5
//! cargo run --release --example hackbench -- --topology "pack:2 l3:2 core:4 pu:2" --sis util
//! ```

#[path = "../benches/common/hackbench.rs"]
mod hackbench;
#[path = "../benches/common/rt.rs"]
mod rt;

use std::process::exit;
use std::time::Duration;

use hwsched::{IdleMode, SisMode, StealWalk, Tunables};

const USAGE: &str = "\
usage: hackbench [options]

hackbench (perf bench sched messaging, pipe mode) with tasks for processes.

  -g, --groups N          groups of senders and receivers (10)
  -f, --fds N             senders and receivers per group (20)
  -l, --loops N           messages each sender writes to each receiver (100)
  -s, --datasize N        bytes per message (100)
      --runtime R         hwsched | tokio | async-executor | tokio-ct
                          (tokio's current-thread runtime on one thread;
                          --workers does not apply) (hwsched)
      --workers N         worker threads (default: one per allowed CPU, or
                          every PU of --topology)
      --topology S        hwloc synthetic topology for hwsched, e.g.
                          \"pack:2 l3:2 core:4 pu:2\", or an XML export
                          (a path ending in .xml)
      --runs N            repeat N times and print the median (1)
  hwsched tunables:
      --sis M             prop | util | full | off (prop)
      --no-recent         do not try the recently used worker on wakeup
      --no-idle-core      do not search for a whole idle core on wakeup
      --walk W            bounded | unbounded (bounded)
      --idle I            governed | park | spin:<us> (park)
      --load-interval-us N  load counter publish interval, 0 = every change (1000)
  -h, --help              this text";

struct Args {
    cfg: hackbench::Config,
    runtime: rt::Kind,
    workers: Option<usize>,
    topology: Option<String>,
    runs: usize,
    tunables: Tunables,
    tuned: Vec<&'static str>,
}

fn fail(msg: String) -> ! {
    eprintln!("hackbench: {msg}");
    eprintln!("try --help");
    exit(2)
}

fn number(flag: &str, v: &str, min: usize) -> usize {
    match v.parse::<usize>() {
        Ok(n) if n >= min => n,
        _ => fail(format!(
            "invalid value {v:?} for {flag}: expected an integer >= {min}"
        )),
    }
}

fn parse(argv: impl Iterator<Item = String>) -> Args {
    let mut a = Args {
        cfg: hackbench::Config::default(),
        runtime: rt::Kind::Hwsched,
        workers: None,
        topology: None,
        runs: 1,
        tunables: Tunables::default(),
        tuned: Vec::new(),
    };
    let mut argv = argv.peekable();
    while let Some(arg) = argv.next() {
        // Accept both `--flag value` and `--flag=value`.
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let takes_value = match flag.as_str() {
            "-h" | "--help" | "--no-recent" | "--no-idle-core" | "--bench" => false,
            "-g" | "--groups" | "-f" | "--fds" | "-l" | "--loops" | "-s" | "--datasize"
            | "--workers" | "--runs" | "--topology" | "--runtime" | "--sis" | "--walk"
            | "--idle" | "--load-interval-us" => true,
            _ => fail(format!("unknown option {arg:?}")),
        };
        let value = if takes_value {
            match inline.or_else(|| argv.next()) {
                Some(v) => v,
                None => fail(format!("{flag} needs a value")),
            }
        } else {
            if inline.is_some() {
                fail(format!("{flag} takes no value"));
            }
            String::new()
        };
        let v = value.as_str();
        match flag.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                exit(0);
            }
            // `cargo bench` passes --bench to every target; ignore it.
            "--bench" => {}
            "-g" | "--groups" => a.cfg.groups = number(&flag, v, 1),
            "-f" | "--fds" => a.cfg.fds = number(&flag, v, 1),
            "-l" | "--loops" => a.cfg.loops = number(&flag, v, 1),
            "-s" | "--datasize" => a.cfg.datasize = number(&flag, v, 1),
            "--workers" => a.workers = Some(number(&flag, v, 1)),
            "--runs" => a.runs = number(&flag, v, 1),
            "--topology" => a.topology = Some(value.clone()),
            "--runtime" => {
                a.runtime = match v {
                    "hwsched" => rt::Kind::Hwsched,
                    "tokio" => rt::Kind::Tokio,
                    "async-executor" | "async_executor" => rt::Kind::AsyncExecutor,
                    "tokio-ct" | "tokio_ct" => rt::Kind::TokioCurrentThread,
                    _ => fail(format!(
                        "invalid value {v:?} for --runtime: expected hwsched, tokio, \
                         async-executor or tokio-ct"
                    )),
                }
            }
            "--sis" => {
                a.tuned.push("--sis");
                a.tunables.sis = match v {
                    "prop" => SisMode::Prop,
                    "util" => SisMode::Util,
                    "full" => SisMode::Full,
                    "off" => SisMode::Off,
                    _ => fail(format!(
                        "invalid value {v:?} for --sis: expected prop, util, full or off"
                    )),
                }
            }
            "--no-recent" => {
                a.tuned.push("--no-recent");
                a.tunables.sis_recent_used = false;
            }
            "--no-idle-core" => {
                a.tuned.push("--no-idle-core");
                a.tunables.sis_idle_core = false;
            }
            "--walk" => {
                a.tuned.push("--walk");
                a.tunables.walk = match v {
                    "bounded" => StealWalk::Bounded,
                    "unbounded" => StealWalk::Unbounded,
                    _ => fail(format!(
                        "invalid value {v:?} for --walk: expected bounded or unbounded"
                    )),
                }
            }
            "--idle" => {
                a.tuned.push("--idle");
                a.tunables.idle = match v {
                    "governed" => IdleMode::Governed,
                    "park" => IdleMode::AlwaysPark,
                    _ => match v.strip_prefix("spin:").map(str::parse::<u64>) {
                        Some(Ok(us)) if us > 0 => IdleMode::AlwaysSpin(Duration::from_micros(us)),
                        _ => fail(format!(
                            "invalid value {v:?} for --idle: expected governed, park or \
                             spin:<us> with us > 0"
                        )),
                    },
                }
            }
            "--load-interval-us" => {
                a.tuned.push("--load-interval-us");
                a.tunables.load_update_interval = Duration::from_micros(number(&flag, v, 0) as u64);
            }
            _ => unreachable!("option {flag} not handled"),
        }
    }
    a
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

fn main() {
    let args = parse(std::env::args().skip(1));
    let cfg = args.cfg;
    let runtime = match args.runtime {
        rt::Kind::Hwsched => {
            match rt::hwsched(
                "hwsched",
                args.workers,
                args.topology.as_deref(),
                args.tunables.clone(),
            ) {
                Ok(r) => r,
                Err(e) => fail(format!("cannot build the hwsched runtime: {e}")),
            }
        }
        other => {
            if args.topology.is_some() {
                eprintln!("hackbench: --topology only applies to hwsched; ignored");
            }
            if !args.tuned.is_empty() {
                eprintln!(
                    "hackbench: {} only apply to hwsched; ignored",
                    args.tuned.join(", ")
                );
            }
            let n = args.workers.unwrap_or_else(rt::default_workers);
            match other {
                rt::Kind::Tokio => rt::tokio(n),
                rt::Kind::TokioCurrentThread => {
                    if args.workers.is_some() {
                        eprintln!("hackbench: --workers does not apply to tokio-ct; ignored");
                    }
                    match rt::tokio_current_thread() {
                        Ok(r) => r,
                        Err(e) => fail(format!("cannot build the tokio-ct runtime: {e}")),
                    }
                }
                _ => rt::async_executor(n),
            }
        }
    };

    println!(
        "Running in task mode on {} ({} workers) with {} groups using {} channels each (== {} tasks)",
        runtime.name,
        runtime.workers(),
        cfg.groups,
        cfg.fds * 2,
        cfg.tasks()
    );
    println!(
        "Each sender will pass {} messages of {} bytes",
        cfg.loops, cfg.datasize
    );
    let mut times: Vec<f64> = (0..args.runs)
        .map(|i| {
            let t = hackbench::run(&runtime, &cfg).as_secs_f64();
            if args.runs > 1 {
                println!("run {}: {t:.3} s", i + 1);
            }
            t
        })
        .collect();
    let t = median(&mut times);
    if args.runs > 1 {
        println!("median of {} runs:", args.runs);
    }
    println!("Time: {t:.3}");
    println!(
        "{:.0} messages/s ({} messages)",
        cfg.messages() as f64 / t,
        cfg.messages()
    );
    if let Some(stats) = runtime.stats() {
        println!();
        println!("{stats}");
    }
}
