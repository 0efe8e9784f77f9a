//! The shortest hwsched program: `#[hwsched::main]` builds a runtime (a
//! worker per allowed CPU; `#[hwsched::main(worker_threads = 2)]` or
//! `topology = "pack:2 core:4 pu:2"` would choose) and runs `main`'s body on
//! it; the tasks it spawns run on the workers.
//!
//! ```text
//! cargo run --example hello
//! ```

use hwsched::{Handle, JoinSet};

#[hwsched::main]
async fn main() -> Result<(), hwsched::JoinError> {
    let mut set = JoinSet::new();
    for i in 0..8u64 {
        set.spawn(async move {
            hwsched::yield_now().await;
            (i, i * i, hwsched::worker_index())
        });
    }
    let mut sum = 0;
    while let Some(r) = set.join_next().await {
        let (i, square, worker) = r?;
        println!("task {i}: {square} on worker {worker:?}");
        sum += square;
    }
    println!("sum of squares: {sum}");
    print!("{}", Handle::current().stats());
    Ok(())
}
