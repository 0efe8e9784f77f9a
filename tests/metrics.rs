//! `hwsched::metrics::TaskMonitor`: polls, slow polls, scheduled and idle
//! durations of instrumented tasks, cumulative and per interval.

use std::time::Duration;

use hwsched::metrics::TaskMonitor;
use hwsched::Runtime;

fn rt() -> Runtime {
    Runtime::builder()
        .worker_threads(2)
        .pin_workers(false)
        .build()
        .unwrap()
}

#[test]
fn idle_time_is_the_wait_for_a_wake_and_scheduled_time_the_wait_after() {
    let rt = rt();
    let monitor = TaskMonitor::new();
    let (tx, rx) = async_channel::bounded::<()>(1);
    let h = rt.spawn(monitor.instrument(async move { rx.recv().await.unwrap() }));
    // Wait for the first poll (the task is then idle, waiting).
    while monitor.cumulative().total_poll_count == 0 {
        std::thread::yield_now();
    }
    std::thread::sleep(Duration::from_millis(200));
    tx.send_blocking(()).unwrap();
    rt.block_on(h).unwrap();
    let m = monitor.cumulative();
    assert_eq!(m.instrumented_count, 1);
    assert_eq!(m.first_poll_count, 1);
    assert_eq!(m.total_poll_count, 2);
    assert_eq!(m.dropped_count, 1);
    assert_eq!(m.total_idled_count, 1);
    assert!(m.total_idle_duration >= Duration::from_millis(200), "{m:?}");
    assert_eq!(m.total_scheduled_count, 1);
    // The wake reached a worker at once: scheduled far shorter than idle.
    assert!(m.total_scheduled_duration < m.total_idle_duration, "{m:?}");
    // Whether a poll counts as slow is the wall clock's call (a debug build
    // on a busy machine passes 50 us); the slow polls are a part of the polls.
    assert!(m.total_slow_poll_count <= m.total_poll_count, "{m:?}");
    assert!(m.total_slow_poll_duration <= m.total_poll_duration, "{m:?}");
}

#[test]
fn slow_polls_over_the_threshold_and_intervals() {
    let rt = rt();
    // A threshold far above a trivial poll, even one the OS preempts on a
    // busy machine, and the slow polls well above it.
    let monitor = TaskMonitor::new().with_slow_poll_threshold(Duration::from_millis(100));
    let spawn_some = |n: usize, slow: bool| {
        let hs: Vec<_> = (0..n)
            .map(|_| {
                rt.spawn(monitor.instrument(async move {
                    if slow {
                        std::thread::sleep(Duration::from_millis(110));
                    }
                    hwsched::yield_now().await;
                }))
            })
            .collect();
        rt.block_on(async {
            for h in hs {
                h.await.unwrap();
            }
        });
    };
    spawn_some(3, true);
    let a = monitor.take_interval();
    spawn_some(5, false);
    let b = monitor.take_interval();
    assert_eq!((a.instrumented_count, b.instrumented_count), (3, 5));
    assert_eq!((a.total_poll_count, b.total_poll_count), (6, 10));
    assert_eq!((a.total_slow_poll_count, b.total_slow_poll_count), (3, 0));
    assert!(a.mean_slow_poll_duration() >= Duration::from_millis(110));
    assert!((a.slow_poll_ratio() - 0.5).abs() < 1e-9);
    let c = monitor.cumulative();
    assert_eq!(c.total_poll_count, 16);
    assert_eq!(c.dropped_count, 8);
    assert_eq!(
        monitor.take_interval().total_poll_count,
        0,
        "nothing since the last interval"
    );
}
