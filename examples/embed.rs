//! Embedding hwsched: build a runtime, spawn work, join it; a library
//! function written against `Handle::try_current`, `spawn_blocking` and a
//! `JoinSet`; print stats.
//!
//! ```text
//! cargo run --release --example embed
//! ```

use std::time::Instant;

use hwsched::{Handle, JoinSet};

/// Library code: sizes of files, read off the workers, on whichever
/// hwsched runtime calls it.
async fn file_sizes(paths: Vec<std::path::PathBuf>) -> std::io::Result<u64> {
    let handle = Handle::try_current().expect("call file_sizes on a hwsched runtime");
    let mut set = JoinSet::new();
    for p in paths {
        set.spawn_on(
            async move {
                let bytes = hwsched::spawn_blocking(move || std::fs::read(p))
                    .await
                    .expect("the read panicked")?;
                Ok::<u64, std::io::Error>(bytes.len() as u64)
            },
            &handle,
        );
    }
    let mut total = 0;
    while let Some(r) = set.join_next().await {
        total += r.expect("the task panicked")?;
    }
    Ok(total)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = hwsched::Runtime::builder()
        .thread_name("embed")
        .thread_stack_size(4 << 20)
        .on_thread_start(|| {
            let name = std::thread::current().name().unwrap_or("?").to_owned();
            eprintln!("thread up: {name}");
        })
        .build()?;
    println!("{}", rt.topology());

    let t0 = Instant::now();
    let total: u64 = rt.block_on(async {
        // Fan out: 1,000 tasks, each spawning 10 children and summing them.
        let parents: Vec<_> = (0..1_000u64)
            .map(|i| {
                hwsched::spawn(async move {
                    let kids: Vec<_> = (0..10u64)
                        .map(|j| hwsched::spawn(async move { i * 10 + j }))
                        .collect();
                    let mut sum = 0;
                    for k in kids {
                        sum += k.await.expect("child task failed");
                    }
                    sum
                })
            })
            .collect();
        let mut total = 0;
        for p in parents {
            total += p.await.expect("parent task failed");
        }
        total
    });
    assert_eq!(total, (0..10_000u64).sum::<u64>());
    println!("11,000 tasks summed to {total} in {:?}\n", t0.elapsed());

    // A panicking task does not take the runtime down: its handle says so.
    let err = rt.block_on(rt.spawn(async { panic!("boom") })).unwrap_err();
    println!("a panicking task reports: {err}\n");

    // Blocking work goes to the blocking pool, not the workers.
    let here = env!("CARGO_MANIFEST_DIR");
    let paths = ["Cargo.toml", "README.md"]
        .map(|f| std::path::Path::new(here).join(f))
        .to_vec();
    let total = rt.block_on(file_sizes(paths))?;
    println!("Cargo.toml and README.md: {total} bytes, read on the blocking pool\n");

    println!("{}", rt.stats());
    Ok(())
}
