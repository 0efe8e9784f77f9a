//! hackbench messaging (pipe mode, 20 fds, 100 loops, 100 bytes) at 1, 4
//! and 10 groups on hwsched, tokio, async-executor and hwsched-32. Each
//! sample times only the release-to-done interval, as hackbench does; the
//! spawning and ready handshake are not counted.
//!
//! ```text
//! cargo bench --bench messaging                          # full run
//! cargo bench --bench messaging -- hackbench_g4/         # one size
//! HACKBENCH_LOOPS=10 cargo bench --bench messaging -- --warm-up-time 0.5 --measurement-time 1
//! ```
// criterion_group! generates an undocumented `pub fn`.
#![allow(missing_docs)]

#[path = "common/hackbench.rs"]
mod hackbench;
#[path = "common/rt.rs"]
mod rt;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn messaging(c: &mut Criterion) {
    // HACKBENCH_LOOPS shrinks the workload for smoke runs.
    let loops = std::env::var("HACKBENCH_LOOPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let rts = rt::standard_set();
    for groups in [1, 4, 10] {
        let cfg = hackbench::Config {
            groups,
            loops,
            ..Default::default()
        };
        let mut g = c.benchmark_group(format!("hackbench_g{groups}"));
        g.throughput(Throughput::Elements(cfg.messages()));
        for rt in &rts {
            g.bench_function(rt.name.as_str(), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| hackbench::run(rt, &cfg)).sum())
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = messaging
}
criterion_main!(benches);
