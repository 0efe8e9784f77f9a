//! A trace of hackbench (`perf bench sched messaging`, pipe mode) on
//! hwsched, written as Chrome Trace Event JSON (the `trace` feature): open
//! it in Perfetto's UI (<https://ui.perfetto.dev>) or `chrome://tracing`,
//! or render it with `hwsched-trace` (the `trace-tool/` crate).
//!
//! ```text
//! cargo run --release --features trace --example trace -- --out trace.json
//! cargo run --release --features trace --example trace -- \
//!     --topology "pack:2 l3:2 core:2 pu:1" --groups 2 --fds 4 --loops 20 --out trace.json
//! cargo run --release -p hwsched-trace -- svg trace.json trace.svg
//! cargo run --release -p hwsched-trace -- summary trace.json
//! ```

#[path = "../benches/common/hackbench.rs"]
mod hackbench;
#[path = "../benches/common/rt.rs"]
mod rt;

use std::process::exit;

const USAGE: &str = "\
usage: trace --out FILE [options]

Runs hackbench with the scheduler's trace recording, and writes the trace
as Chrome Trace Event JSON.

      --out FILE          where to write the trace (required)
      --workers N         worker threads (default: one per allowed CPU, or
                          every PU of --topology)
      --topology S        hwloc synthetic topology, e.g.
                          \"pack:2 l3:2 core:4 pu:2\", or an XML export
      --capacity N        events kept per worker (the newest) (262144)
  -g, --groups N          groups of senders and receivers (4)
  -f, --fds N             senders and receivers per group (8)
  -l, --loops N           messages each sender writes to each receiver (50)
  -s, --datasize N        bytes per message (100)
  -h, --help              this text";

fn fail(msg: String) -> ! {
    eprintln!("trace: {msg}");
    eprintln!("{USAGE}");
    exit(2)
}

fn number(flag: &str, v: Option<String>) -> usize {
    match v.as_deref().map(str::parse::<usize>) {
        Some(Ok(n)) if n >= 1 => n,
        _ => fail(format!("{flag} takes an integer >= 1")),
    }
}

fn main() {
    let mut out = None;
    let mut workers = None;
    let mut topology = None;
    let mut capacity = 1 << 18;
    let mut cfg = hackbench::Config {
        groups: 4,
        fds: 8,
        loops: 50,
        datasize: 100,
    };
    let mut argv = std::env::args().skip(1);
    while let Some(a) = argv.next() {
        match a.as_str() {
            "--out" => {
                out = Some(
                    argv.next()
                        .unwrap_or_else(|| fail("--out takes a file".into())),
                )
            }
            "--workers" => workers = Some(number("--workers", argv.next())),
            "--topology" => {
                topology = Some(
                    argv.next()
                        .unwrap_or_else(|| fail("--topology takes a description".into())),
                )
            }
            "--capacity" => capacity = number("--capacity", argv.next()),
            "-g" | "--groups" => cfg.groups = number("--groups", argv.next()),
            "-f" | "--fds" => cfg.fds = number("--fds", argv.next()),
            "-l" | "--loops" => cfg.loops = number("--loops", argv.next()),
            "-s" | "--datasize" => cfg.datasize = number("--datasize", argv.next()),
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => fail(format!("unknown option {other:?}")),
        }
    }
    let Some(out) = out else {
        fail("--out FILE is required".into())
    };
    let tunables = rt::env_tunables(hwsched::Tunables::default());
    let rt = rt::hwsched_with("hwsched", workers, topology.as_deref(), tunables, |b| {
        b.trace(capacity)
    })
    .unwrap_or_else(|e| fail(format!("cannot build the runtime: {e}")));
    let tracer = rt.hw().expect("a hwsched runtime").tracer();
    let elapsed = hackbench::run(&rt, &cfg);
    // The shutdown joins the workers: every poll's end is recorded.
    drop(rt);
    let trace = tracer.stop();
    let file = std::fs::File::create(&out).unwrap_or_else(|e| fail(format!("{out}: {e}")));
    trace
        .write_chrome_json(file)
        .unwrap_or_else(|e| fail(format!("{out}: {e}")));
    let dropped: u64 = (0..trace.workers().len()).map(|w| trace.dropped(w)).sum();
    println!(
        "hackbench: {} messages in {:.3} ms on {} workers; trace: {} events, {} polls, {} dropped -> {out}",
        cfg.messages(),
        elapsed.as_secs_f64() * 1e3,
        trace.workers().len(),
        trace.events().len(),
        trace.polls().count(),
        dropped,
    );
}
