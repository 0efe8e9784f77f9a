//! `Builder::enable_io` costs a program that does no I/O nothing: no
//! reactor is started (no async-io thread exists) and the workers park on
//! their condvars, until the first I/O or timer wake; from then on the
//! workers drive the reactor. Its own test binary: async-io's reactor is
//! process-wide and, once started, stays.
//!
//! `cargo test --features io --test io_first_use`
#![cfg(feature = "io")]

use std::time::{Duration, Instant};

use hwsched::Runtime;

mod common;
use common::with_timeout;

/// The names of this process's threads (Linux: /proc/self/task/*/comm).
fn thread_names() -> Vec<String> {
    let mut names = Vec::new();
    for e in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let path = e.expect("a task entry").path().join("comm");
        if let Ok(s) = std::fs::read_to_string(path) {
            names.push(s.trim().to_owned());
        }
    }
    names
}

#[test]
fn the_reactor_starts_on_first_use_and_then_the_workers_drive_it() {
    with_timeout(60, "io_first_use", || {
        let rt = Runtime::builder()
            .worker_threads(2)
            .enable_io(true)
            .build()
            .expect("a runtime with I/O");
        // Work without I/O: tasks that wake each other through a channel,
        // spawned from outside and from a worker, with the workers asleep
        // in between.
        for _ in 0..20 {
            let (tx, rx) = async_channel::bounded::<u32>(1);
            let consumer = rt.spawn(async move {
                let mut sum = 0u32;
                while let Ok(v) = rx.recv().await {
                    sum += v;
                }
                sum
            });
            let producer = rt.spawn(async move {
                for i in 0..100 {
                    tx.send(i).await.unwrap();
                }
            });
            rt.block_on(producer).unwrap();
            assert_eq!(rt.block_on(consumer).unwrap(), 4950);
            std::thread::sleep(Duration::from_millis(1));
        }
        let quiet = rt.stats();
        let names = thread_names();
        assert!(
            !names.iter().any(|n| n == "async-io"),
            "no reactor thread before any I/O: threads {names:?}"
        );
        assert!(!quiet.io_driven, "no worker drives a reactor yet\n{quiet}");
        assert_eq!(quiet.total().wakes_by_reactor, 0, "{quiet}");

        // Now timers: the first expiry comes from async-io's thread, and
        // switches the workers to driving the reactor.
        let t0 = Instant::now();
        let ticks = rt.spawn(async {
            for _ in 0..50 {
                hwsched::time::sleep(Duration::from_millis(1)).await;
            }
        });
        rt.block_on(ticks).unwrap();
        assert!(t0.elapsed() >= Duration::from_millis(50));
        let after = rt.stats();
        assert!(
            thread_names().iter().any(|n| n == "async-io"),
            "the first timer started async-io's reactor"
        );
        assert!(after.io_driven, "the workers drive the reactor\n{after}");
        assert!(
            after.total().wakes_by_reactor > 0,
            "timer wakes came from a worker in the reactor\n{after}"
        );
    });
}
