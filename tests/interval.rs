//! `hwsched::time::interval`: the first tick at once, each
//! `MissedTickBehavior` after the task was busy, the resets, and periods
//! too long for `Instant` (no panic; the second tick never comes).
#![cfg(feature = "io")]

use std::time::{Duration, Instant};

use hwsched::time::{interval, interval_at, MissedTickBehavior};

mod common;

const P: Duration = Duration::from_millis(50);

fn run<F: std::future::Future<Output = ()> + Send + 'static>(name: &str, f: F) {
    let name = name.to_owned();
    common::with_timeout(60, &name.clone(), move || {
        let rt = hwsched::Runtime::builder()
            .worker_threads(2)
            .build()
            .expect("runtime");
        rt.block_on(rt.spawn(f)).expect("the test task");
    });
}

#[test]
fn the_first_tick_is_at_once() {
    run("first", async {
        let before = Instant::now();
        let mut iv = interval(Duration::from_secs(3600));
        let at = iv.tick().await;
        assert!(at >= before && at <= Instant::now());
        assert_eq!(iv.period(), Duration::from_secs(3600));
        assert_eq!(iv.missed_tick_behavior(), MissedTickBehavior::Burst);
        // The second is an hour away.
        let second = hwsched::time::timeout(Duration::from_millis(20), iv.tick()).await;
        assert!(second.is_err());
    });
}

#[test]
fn on_time_ticks_keep_the_schedule() {
    run("schedule", async {
        let start = Instant::now();
        let mut iv = interval_at(start, Duration::from_millis(5));
        for k in 0..10u32 {
            let at = iv.tick().await;
            // Late ticks burst back onto the schedule: the due instants
            // are the schedule's whatever the delays.
            assert_eq!(at, start + Duration::from_millis(5) * k);
            assert!(Instant::now() >= at);
        }
    });
}

#[test]
fn interval_at_a_later_start_waits_for_it() {
    run("at", async {
        let start = Instant::now() + P;
        let mut iv = interval_at(start, P);
        assert_eq!(iv.tick().await, start);
        assert!(Instant::now() >= start);
    });
}

/// Takes the first tick, then keeps the task busy for a little over five
/// periods; returns the start and the instant the task was free again.
async fn busy_after_first(iv: &mut hwsched::time::Interval) -> (Instant, Instant) {
    let start = iv.tick().await;
    std::thread::sleep(P * 5 + P / 5);
    (start, Instant::now())
}

#[test]
fn burst_delivers_every_missed_tick_then_keeps_the_schedule() {
    run("burst", async {
        let mut iv = interval(P);
        let (start, free) = busy_after_first(&mut iv).await;
        let mut dues = Vec::new();
        let t = Instant::now();
        for _ in 0..5 {
            dues.push(iv.tick().await);
        }
        let burst = t.elapsed();
        let expected: Vec<Instant> = (1..=5u32).map(|k| start + P * k).collect();
        assert_eq!(dues, expected);
        // They came at once, not a period apart (which would take 250 ms).
        assert!(burst < P * 4, "the missed ticks took {burst:?}");
        // Then the schedule again: start + 6 P.
        let next = iv.tick().await;
        assert_eq!(next, start + P * 6);
        assert!(next > free);
    });
}

#[test]
fn delay_shifts_the_schedule_by_the_delay() {
    run("delay", async {
        let mut iv = interval(P);
        iv.set_missed_tick_behavior(MissedTickBehavior::Delay);
        assert_eq!(iv.missed_tick_behavior(), MissedTickBehavior::Delay);
        let (start, free) = busy_after_first(&mut iv).await;
        // The missed tick, once.
        let late = iv.tick().await;
        assert_eq!(late, start + P);
        let taken = Instant::now();
        // The next one a period after the late one was taken, then a
        // period apart.
        let next = iv.tick().await;
        assert!(next >= free + P);
        assert!(next <= taken + P, "{:?} after", next - taken);
        let after = iv.tick().await;
        assert!(after >= next + P);
    });
}

#[test]
fn skip_drops_missed_ticks_and_keeps_the_phase() {
    run("skip", async {
        let mut iv = interval(P);
        iv.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let (start, free) = busy_after_first(&mut iv).await;
        let late = iv.tick().await;
        assert_eq!(late, start + P);
        let taken = Instant::now();
        let next = iv.tick().await;
        // The first instant of the original schedule after the late tick
        // was taken.
        let k = (next - start).as_nanos() / P.as_nanos();
        assert_eq!(start + P * k as u32, next, "on the schedule");
        assert!(next > free && next <= taken + P);
    });
}

#[test]
fn reset_moves_the_next_tick() {
    run("reset", async {
        let mut iv = interval(Duration::from_secs(3600));
        iv.tick().await;
        iv.reset_immediately();
        let t = Instant::now();
        iv.tick().await;
        assert!(t.elapsed() < Duration::from_secs(30));
        iv.reset_after(Duration::from_millis(10));
        let t = Instant::now();
        iv.tick().await;
        assert!(t.elapsed() >= Duration::from_millis(10));
        iv.reset();
        let second = hwsched::time::timeout(Duration::from_millis(20), iv.tick()).await;
        assert!(second.is_err(), "reset: a period from now");
        let at = Instant::now() + Duration::from_millis(5);
        iv.reset_at(at);
        assert_eq!(iv.tick().await, at);
    });
}

#[test]
fn a_period_past_instant_ticks_once_and_never_panics() {
    run("max", async {
        for b in [
            MissedTickBehavior::Burst,
            MissedTickBehavior::Delay,
            MissedTickBehavior::Skip,
        ] {
            for period in [Duration::MAX, Duration::from_secs(u64::MAX / 2)] {
                let mut iv = interval(period);
                iv.set_missed_tick_behavior(b);
                assert_eq!(iv.period(), period);
                iv.tick().await;
                let second = hwsched::time::timeout(Duration::from_millis(10), iv.tick()).await;
                assert!(second.is_err(), "{b:?}: no second tick");
                iv.reset();
                let again = hwsched::time::timeout(Duration::from_millis(10), iv.tick()).await;
                assert!(again.is_err());
                iv.reset_immediately();
                iv.tick().await;
                // A late first tick (the late path) saturates too.
                let mut iv = interval_at(Instant::now() - Duration::from_millis(100), period);
                iv.set_missed_tick_behavior(b);
                iv.tick().await;
                let second = hwsched::time::timeout(Duration::from_millis(10), iv.tick()).await;
                assert!(second.is_err());
            }
        }
        // Far, but within Instant: a timer far away, not a panic.
        let mut iv = interval(Duration::from_secs(86_400 * 365 * 1000));
        iv.tick().await;
        let second = hwsched::time::timeout(Duration::from_millis(10), iv.tick()).await;
        assert!(second.is_err());
    });
}

#[test]
#[should_panic(expected = "`period` must be non-zero")]
fn a_zero_period_panics_as_tokio_does() {
    let _ = interval_at(Instant::now(), Duration::ZERO);
}
