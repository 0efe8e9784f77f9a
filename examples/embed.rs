//! Embedding hwsched: build a runtime, spawn work, join it, print stats.
//!
//! ```text
//! cargo run --release --example embed
//! ```

use std::time::Instant;

fn main() -> Result<(), hwsched::BuildError> {
    let rt = hwsched::Runtime::builder().thread_name("embed").build()?;
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

    println!("{}", rt.stats());
    Ok(())
}
