//! Poll timing (`src/timing.rs`): planted poll lengths and run-queue
//! delays show in `Stats::timing`, and a long poll is reported with the
//! spawn location of its task.

mod common;

use std::time::{Duration, Instant};

use common::with_timeout;
use hwsched::Builder;

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[test]
fn planted_poll_lengths_and_delays_show_in_the_histograms() {
    with_timeout(60, "planted_timing", || {
        let rt = Builder::new()
            .worker_threads(1)
            .long_poll_threshold(Duration::from_millis(3))
            .build()
            .unwrap();
        // Ten polls of at least 4 ms; the first spawns ten cheap tasks
        // onto its worker before it computes, so each waits at least 4 ms.
        let line = line!() + 1;
        let slow = rt.spawn(async {
            let cheap: Vec<_> = (0..10).map(|_| hwsched::spawn(async {})).collect();
            for _ in 0..10 {
                spin(Duration::from_millis(4));
                hwsched::yield_now().await;
            }
            for c in cheap {
                c.await.unwrap();
            }
        });
        rt.block_on(slow).unwrap();
        // A poll's timing is recorded when it returns, just after the task
        // finished: wait for the last one.
        let t0 = Instant::now();
        while rt.stats().timing[0].poll_time.count() < 21 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let stats = rt.stats();
        let t = &stats.timing[0];
        let long_bucket = hwsched::timing::bucket_of(4_000_000);
        let at_least_4ms: u64 = t.poll_time.buckets[long_bucket..].iter().sum();
        assert!(at_least_4ms >= 10, "ten polls of 4 ms: {t:?}\n{stats}");
        assert!(t.poll_time.max >= Duration::from_millis(4), "{stats}");
        assert!(t.long_polls >= 10, "{stats}");
        assert!(t.poll_time.count() >= 21, "{stats}");
        // At least the ten cheap tasks waited behind a 4 ms poll.
        let delayed: u64 = t.run_delay.buckets[long_bucket..].iter().sum();
        assert!(delayed >= 10, "ten cheap tasks waited 4 ms: {t:?}\n{stats}");
        assert!(t.run_delay.percentile(1.0) >= Duration::from_millis(4));
        assert!(stats.to_string().contains("delay p99"), "{stats}");

        let long = rt.long_polls();
        assert!(long.len() >= 10, "{long:?}");
        let mine: Vec<_> = long.iter().filter(|p| p.location.line() == line).collect();
        assert!(mine.len() >= 10, "the spawn on line {line}: {long:?}");
        for p in mine {
            assert_eq!(p.location.file(), file!());
            assert!(p.duration >= Duration::from_millis(4));
            assert_eq!(p.worker, 0);
        }
    });
}

#[test]
fn timing_is_off_unless_asked_for() {
    let rt = Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(rt.spawn(async { spin(Duration::from_millis(6)) }))
        .unwrap();
    assert!(rt.stats().timing.is_empty());
    assert!(rt.long_polls().is_empty());
}

const W1: hwsched::Place = hwsched::Place::Worker(1);

#[test]
fn spawn_locations_follow_every_spawn_function() {
    with_timeout(60, "spawn_locations", || {
        let rt = Builder::new()
            .worker_threads(2)
            .long_poll_threshold(Duration::from_millis(1))
            .build()
            .unwrap();
        let long = || spin(Duration::from_millis(2));
        let mut lines = Vec::new();
        lines.push(line!() + 1);
        let a = rt.spawn(async move { long() });
        lines.push(line!() + 1);
        let b = rt.handle().spawn(async move { long() });
        lines.push(line!() + 1);
        let c = rt.spawn_on(W1, async move { long() }).unwrap();
        let d = rt.spawn(async move {
            let mut set = hwsched::JoinSet::new();
            let l = line!() + 1;
            set.spawn(async move { spin(Duration::from_millis(2)) });
            let l2 = line!() + 1;
            let inner = hwsched::spawn(async move { spin(Duration::from_millis(2)) });
            while set.join_next().await.is_some() {}
            inner.await.unwrap();
            (l, l2)
        });
        for h in [a, b, c] {
            rt.block_on(h).unwrap();
        }
        let (l, l2) = rt.block_on(d).unwrap();
        lines.push(l);
        lines.push(l2);
        // A poll is logged when it returns, just after its task finished.
        let t0 = Instant::now();
        while rt.long_polls().len() < lines.len() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let long = rt.long_polls();
        for line in lines {
            assert!(
                long.iter()
                    .any(|p| p.location.line() == line && p.location.file() == file!()),
                "no long poll from line {line}: {long:#?}"
            );
        }
    });
}
