//! Work conservation: no worker sleeps while a runnable task waits in a
//! queue it could take (the invariant of `src/sched/sleepers.rs`).
//!
//! Each scenario blocks one worker in a poll that runs for [`BLOCK`] without
//! yielding, with tasks queued where only that worker would otherwise find
//! them, and checks that every queued task *starts* within [`START_WITHIN`]
//! while the blocker still runs. The bound is generous on purpose: it tests
//! the protocol (a wake that is never sent leaves a task waiting the whole
//! second), not speed.
//!
//! Run on three topologies: this machine (`System`, 2 workers here), two
//! packages of one core each (`pack:2 core:1 pu:1`: each worker is its own
//! LLC, so wake placement finds no idle sibling), and the 32-worker
//! synthetic tree.
//!
//! These are guarantees, so they must hold on a busy machine:
//! `scripts/under-hog.sh 30 --test conservation` runs this file 30 times in
//! a row while two busy threads outside the runtime compete for the CPUs.
//! `HWSCHED_CONSERVATION_TOPOLOGY=system|pack2|big` restricts a run to one
//! topology.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hwsched::{Runtime, TopologySource};

mod common;
use common::{drive_reactor, with_timeout, BIG};

/// How long the blocker runs without yielding.
const BLOCK: Duration = Duration::from_secs(1);
/// Every queued task must have started this soon.
const START_WITHIN: Duration = Duration::from_millis(100);

/// A named way to build a runtime.
type Topo = (&'static str, Box<dyn Fn() -> Runtime>);

fn topologies() -> Vec<Topo> {
    let only = std::env::var("HWSCHED_CONSERVATION_TOPOLOGY").ok();
    let all: Vec<Topo> = vec![
        (
            "system",
            Box::new(|| {
                drive_reactor(
                    Runtime::builder()
                        .worker_threads(2)
                        .build()
                        .expect("System runtime"),
                )
            }),
        ),
        (
            "pack2",
            Box::new(|| {
                drive_reactor(
                    Runtime::builder()
                        .topology(TopologySource::Synthetic("pack:2 core:1 pu:1".into()))
                        .build()
                        .expect("pack:2 core:1 pu:1"),
                )
            }),
        ),
        (
            "big",
            Box::new(|| {
                drive_reactor(
                    Runtime::builder()
                        .topology(TopologySource::Synthetic(BIG.into()))
                        .build()
                        .expect("32-worker synthetic runtime"),
                )
            }),
        ),
    ];
    all.into_iter()
        .filter(|(n, _)| only.as_deref().is_none_or(|o| o == *n))
        .collect()
}

/// Runs without yielding for `d` (a busy loop: the worker is not blocked in
/// the OS, it is running a long poll).
fn run_for(d: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Start delays of tasks, each measured from `since`.
#[derive(Clone, Default)]
struct Starts(Arc<Mutex<Vec<Duration>>>);

impl Starts {
    fn record(&self, since: Instant) {
        self.0.lock().unwrap().push(since.elapsed());
    }

    /// Fails unless exactly `k` tasks started, each within START_WITHIN.
    fn check(&self, k: usize, what: &str, during: &hwsched::Stats) {
        let v = self.0.lock().unwrap().clone();
        let late = v.iter().filter(|d| **d > START_WITHIN).count();
        let worst = v.iter().max().copied().unwrap_or_default();
        assert!(
            v.len() == k && late == 0,
            "{what}: {} of {k} tasks started while the blocker ran, {late} later than \
             {START_WITHIN:?} (worst {worst:?}); stats while the blocker ran:\n{during}",
            v.len(),
        );
    }
}

/// A task spawns `k` tasks onto its own worker's deque, then runs for BLOCK
/// without yielding. Every one of the k must start while it runs.
fn spawned_by_the_blocker(rt: &Runtime, k: usize, what: &str) {
    let starts = Starts::default();
    let s = starts.clone();
    let blocker = rt.spawn(async move {
        let t0 = Instant::now();
        for _ in 0..k {
            let s = s.clone();
            drop(hwsched::spawn(async move { s.record(t0) }));
        }
        run_for(BLOCK);
    });
    let during = stats_while_blocked(rt);
    rt.block_on(blocker).unwrap();
    starts.check(k, what, &during);
}

/// A snapshot of the stats taken while the blocker still runs (after the
/// time every task should have started).
fn stats_while_blocked(rt: &Runtime) -> hwsched::Stats {
    thread::sleep(START_WITHIN * 2);
    rt.stats()
}

/// `k` tasks spawned from outside while one worker runs a long poll.
fn spawned_from_outside(rt: &Runtime, k: usize, what: &str) {
    let started = Arc::new(AtomicBool::new(false));
    let st = started.clone();
    let blocker = rt.spawn(async move {
        st.store(true, Ordering::SeqCst);
        run_for(BLOCK);
    });
    while !started.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    let starts = Starts::default();
    let t0 = Instant::now();
    for _ in 0..k {
        let s = starts.clone();
        drop(rt.spawn(async move { s.record(t0) }));
    }
    let during = stats_while_blocked(rt);
    rt.block_on(blocker).unwrap();
    starts.check(k, what, &during);
}

/// A task that last ran on worker `w` is woken from a thread outside the
/// runtime while `w` runs a long poll. The sleeper runs wherever placement
/// puts it and reports its worker `w`; the blocker is then pinned to `w`
/// (`Place::Worker`), so the arrangement holds by construction; only the
/// sleeper, which has no place, is under test.
fn woken_onto_the_blocked_worker(rt: &Runtime, what: &str) {
    let (tx, rx) = async_channel::bounded::<Instant>(1);
    let (where_tx, where_rx) = mpsc::channel::<usize>();
    let starts = Starts::default();
    let s = starts.clone();
    drop(rt.spawn(async move {
        let _ = where_tx.send(hwsched::worker_index().unwrap());
        if let Ok(sent) = rx.recv().await {
            s.record(sent);
        }
    }));
    let w = where_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let st = started.clone();
    let blocker = rt
        .spawn_on(hwsched::Place::Worker(w), async move {
            st.store(true, Ordering::SeqCst);
            run_for(BLOCK);
            hwsched::worker_index()
        })
        .unwrap();
    while !started.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    // The sleeper's poll that reported `w` ended before the blocker started
    // on `w`: it waits in `recv` with `w` as its last worker.
    tx.try_send(Instant::now()).unwrap();
    let during = stats_while_blocked(rt);
    assert_eq!(
        rt.block_on(blocker).unwrap(),
        Some(w),
        "{what}: the blocker ran on its place"
    );
    starts.check(1, what, &during);
}

fn each_topology(name: &str, f: impl Fn(&Runtime, &str)) {
    for (topo, build) in topologies() {
        let rt = build();
        f(&rt, &format!("{name} on {topo}"));
    }
}

#[test]
fn tasks_spawned_by_a_blocked_task_start_elsewhere() {
    with_timeout(120, "spawned_by_the_blocker", || {
        each_topology("spawned by the blocker", |rt, what| {
            for k in [1, 2, 8, 1000] {
                spawned_by_the_blocker(rt, k, &format!("{what}, k = {k}"));
            }
        })
    });
}

#[test]
fn tasks_spawned_from_outside_start_while_a_worker_is_blocked() {
    with_timeout(120, "spawned_from_outside", || {
        each_topology("spawned from outside", |rt, what| {
            for k in [1, 8, 1000] {
                spawned_from_outside(rt, k, &format!("{what}, k = {k}"));
            }
        })
    });
}

#[test]
fn a_task_woken_onto_a_blocked_worker_runs_elsewhere() {
    with_timeout(120, "woken_onto_the_blocked_worker", || {
        each_topology("woken from outside", woken_onto_the_blocked_worker)
    });
}

/// A task woken by a task that then runs a long poll, at a moment when every
/// other worker is busy (so nobody idle could take the wake): the wake lands
/// on the waker's worker. The other workers then finish and go idle; the
/// woken task must start on one of them while the blocker still runs.
fn woken_by_the_blocker_while_all_busy(rt: &Runtime, what: &str) {
    const BUSY: Duration = Duration::from_millis(50);
    let n = rt.stats().workers.len();
    let (tx, rx) = async_channel::bounded::<Instant>(1);
    let starts = Starts::default();
    let s = starts.clone();
    drop(rt.spawn(async move {
        if let Ok(sent) = rx.recv().await {
            s.record(sent);
        }
    }));
    // Let the sleeper reach its `recv`.
    thread::sleep(Duration::from_millis(20));
    let a = 0;
    let busy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for w in (0..n).filter(|w| *w != a) {
        let b = busy.clone();
        drop(
            rt.spawn_on(hwsched::Place::Worker(w), async move {
                b.fetch_add(1, Ordering::SeqCst);
                run_for(BUSY);
            })
            .unwrap(),
        );
    }
    let b = busy.clone();
    let blocker = rt
        .spawn_on(hwsched::Place::Worker(a), async move {
            while b.load(Ordering::SeqCst) < n - 1 {
                std::hint::spin_loop();
            }
            tx.try_send(Instant::now()).unwrap();
            run_for(BLOCK);
        })
        .unwrap();
    let during = stats_while_blocked(rt);
    rt.block_on(blocker).unwrap();
    starts.check(1, what, &during);
}

#[test]
fn a_task_woken_by_a_blocked_task_while_all_are_busy_runs_elsewhere() {
    with_timeout(120, "woken_by_the_blocker_while_all_busy", || {
        each_topology("woken by the blocker", woken_by_the_blocker_while_all_busy)
    });
}
