//! End-to-end checks of the scheduling heuristics on a 32-worker synthetic
//! topology (`pack:2 l3:2 core:4 pu:2`): external spawn placement, wakeup
//! placement, the idle walk's locality, overload kicks, and the idle
//! governor. Assertions are on placement and counters, never on timings.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use hwsched::{IdleMode, Runtime, TopologySource, Tunables};

mod common;
use common::BIG;

fn big(tunables: Tunables) -> Runtime {
    Runtime::builder()
        .topology(TopologySource::Synthetic(BIG.into()))
        .tunables(tunables)
        .build()
        .expect("32-worker synthetic runtime")
}

/// The tests of this file run one at a time: each builds a runtime with more
/// workers than this machine has CPUs, and the governor test measures how
/// often workers park, which a concurrent test's threads would disturb.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `f` on a thread and fails with a message if it takes longer than
/// `secs` (instead of hanging the test binary).
fn bounded<T: Send + 'static>(secs: u64, name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    common::with_timeout(secs, name, f)
}

/// Waits until every worker of `rt` has gone to sleep at least once and the
/// runtime is quiet.
fn settle(rt: &Runtime) {
    let t0 = Instant::now();
    while rt.stats().asleep < rt.workers() && t0.elapsed() < Duration::from_secs(5) {
        thread::sleep(Duration::from_millis(5));
    }
    thread::sleep(Duration::from_millis(20));
}

#[test]
fn external_spawns_into_an_idle_runtime_spread_out() {
    bounded(60, "external_spawns", || {
        let rt = big(Tunables::default());
        settle(&rt);
        let before = rt.stats().total();
        // Each task holds its worker for 200 us (a sleep, not a spin: 32
        // workers share this machine's 2 CPUs), so one worker cannot keep up
        // with the burst and it must spread. (Tasks that finish as fast as
        // they are spawned are best run by the one worker already awake.)
        let handles: Vec<_> = (0..1000)
            .map(|_| {
                rt.spawn(async {
                    std::thread::sleep(Duration::from_micros(200));
                    hwsched::worker_index()
                })
            })
            .collect();
        let mut seen = HashSet::new();
        for h in handles {
            seen.insert(rt.block_on(h).unwrap().expect("ran on a worker"));
        }
        let s = rt.stats();
        assert!(
            seen.len() >= 16,
            "1000 external spawns touched only {} workers\n{s}",
            seen.len(),
        );
        // One wake in flight at a time, the woken workers fanning out: the
        // burst costs wakes in proportion to the workers, not the spawns.
        let t = s.total();
        let unparks = t.unparks - before.unparks;
        assert!(
            unparks <= 4 * rt.workers() as u64,
            "{unparks} unparks for a burst of 1000 spawns on {} workers\n{s}",
            rt.workers()
        );
        println!(
            "{} workers used, {unparks} unparks, {} searcher wakes",
            seen.len(),
            t.searcher_wakes - before.searcher_wakes
        );
    });
}

#[test]
fn a_burst_of_wakes_spreads_near_the_waker() {
    bounded(60, "burst_of_wakes", || {
        let rt = big(Tunables::default());
        // 64 receivers, each waiting on its own channel.
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for _ in 0..64 {
            let (tx, rx) = async_channel::bounded::<()>(1);
            senders.push(tx);
            handles.push(rt.spawn(async move {
                rx.recv().await.unwrap();
                let w = hwsched::worker_index().unwrap();
                // Some work per wake, so that spreading matters. It sleeps
                // rather than spins: 32 workers share this machine's 2 CPUs,
                // and a spinning worker would keep the helpers it kicks from
                // being scheduled by the OS at all.
                std::thread::sleep(Duration::from_millis(1));
                w
            }));
        }
        settle(&rt);
        // One task wakes all 64 at once; it reports where it ran.
        let waker = rt.spawn(async move {
            let me = hwsched::worker_index().unwrap();
            for tx in &senders {
                tx.try_send(()).unwrap();
            }
            me
        });
        let me = rt.block_on(waker).unwrap();
        let ran: Vec<usize> = handles
            .into_iter()
            .map(|h| rt.block_on(h).unwrap())
            .collect();
        let distinct: HashSet<_> = ran.iter().copied().collect();
        assert!(
            distinct.len() >= 16,
            "64 wakes from worker {me} ran on only {} workers: {ran:?}\n{}",
            distinct.len(),
            rt.stats()
        );
        let package = (me / 16) * 16..(me / 16) * 16 + 16;
        let llc = (me / 8) * 8..(me / 8) * 8 + 8;
        let in_llc = ran.iter().filter(|&&w| llc.contains(&w)).count();
        // The waker's LLC had 7 idle workers: each of them got a wake
        // before any wake left the package.
        let llc_workers: HashSet<_> = ran.iter().filter(|&&w| llc.contains(&w)).collect();
        assert!(
            llc_workers.len() >= 7,
            "waker {me}: only {} LLC workers used: {ran:?}\n{}",
            llc_workers.len(),
            rt.stats()
        );
        let outside = ran.iter().filter(|&&w| !package.contains(&w)).count();
        let s = rt.stats().total();
        println!(
            "waker {me}: {in_llc} in its LLC, {outside} outside its package; \
             sis target {} prev {} recent {} idle-core {} cand {} scan {} fallback {}",
            s.sis_target,
            s.sis_prev,
            s.sis_recent_hit,
            s.sis_idle_core,
            s.sis_idle_candidate,
            s.sis_scan_found,
            s.sis_fallback
        );
        // (sis_target counts wakes whose target was the task's idle prev.)
        let placed_idle = s.sis_target
            + s.sis_prev
            + s.sis_recent_hit
            + s.sis_idle_core
            + s.sis_idle_candidate
            + s.sis_scan_found;
        assert!(
            placed_idle >= 7,
            "wakes were placed on idle LLC workers ({placed_idle})"
        );
        // Every wake placed on an idle worker stayed in the waker's LLC: the
        // only way out of the package is a steal after the LLC filled up.
        assert!(
            outside <= 64 - llc_workers.len(),
            "{outside} wakes ran outside the package"
        );
    });
}

#[test]
fn queued_work_is_found_inside_the_llc_first_and_nothing_starves() {
    bounded(120, "no_starvation", || {
        let rt = big(Tunables::default());
        settle(&rt);
        let done = Arc::new(AtomicUsize::new(0));
        let first_helper = Arc::new(AtomicUsize::new(usize::MAX));
        let (d, f) = (done.clone(), first_helper.clone());
        let owner = rt.spawn(async move {
            let me = hwsched::worker_index().unwrap();
            for _ in 0..10_000 {
                let (d, f) = (d.clone(), f.clone());
                // Spawned onto this worker's own deque.
                hwsched::spawn(async move {
                    let w = hwsched::worker_index().unwrap();
                    if w != me {
                        let _ =
                            f.compare_exchange(usize::MAX, w, Ordering::SeqCst, Ordering::SeqCst);
                    }
                    d.fetch_add(1, Ordering::SeqCst);
                });
            }
            // Block this worker in a long task: only other workers can run
            // the 10,000 tasks, and they are all parked when this starts.
            let t0 = Instant::now();
            while d.load(Ordering::SeqCst) < 10_000 && t0.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(1));
            }
            (me, d.load(Ordering::SeqCst))
        });
        let (me, seen) = rt.block_on(owner).unwrap();
        assert_eq!(
            seen, 10_000,
            "tasks queued on a blocked worker were not all run by others"
        );
        let helper = first_helper.load(Ordering::SeqCst);
        let llc = (me / 8) * 8..(me / 8) * 8 + 8;
        assert!(
            llc.contains(&helper),
            "first helper {helper} is outside owner {me}'s LLC {llc:?}"
        );
        let s = rt.stats().total();
        assert!(
            s.searcher_wakes > 0,
            "the overloaded worker woke a parked one to search"
        );
        assert!(s.tasks_stolen > 0);
    });
}

/// What [`ping_pong_parks`] saw.
#[derive(Debug, Clone, Copy)]
struct Rounds {
    /// Rounds with a short gap: the reply left the outside thread less
    /// than [`SHORT_GAP`] after the request.
    short: u64,
    /// Of those, rounds in which the reply was not there when the task
    /// looked for it: its worker had an idle gap to spend.
    waited: u64,
    /// Of the short rounds, those in which the task's worker slept on its
    /// condvar (only a round that waited can).
    parked: u64,
    /// Rounds run in all.
    all: u64,
}

/// A gap shorter than this is short: well under the 300 us park cost the
/// runtimes below are given, so a governor that spins on it is right.
const SHORT_GAP: Duration = Duration::from_micros(150);

/// Short rounds, and short rounds that waited, that each mode runs for
/// (unless 20,000 rounds come first).
const PREMISE_ROUNDS: u64 = 1_000;

fn ping_pong_parks(idle: IdleMode) -> Rounds {
    // A task on a 2-worker runtime and a thread outside it bounce a message
    // with ~3 us of work per side (a ping-pong across two CPUs): the
    // worker's idle gaps are far shorter than a park. The park cost is
    // fixed (300 us) so the result does not depend on this VM's futex
    // latency.
    //
    // Only rounds where the premise held count: the reply left the
    // outside thread less than SHORT_GAP after the request (a descheduled
    // outside thread makes a long gap, on which parking is right). Of
    // those, `waited` are the rounds where the task found no reply when it
    // looked, so that its worker had an idle gap to spend (on a loaded
    // machine the outside thread may preempt the worker and reply before
    // the task even waits). Rounds run until PREMISE_ROUNDS of each held
    // (at most 20,000).
    let rt = Runtime::builder()
        .topology(TopologySource::System)
        .worker_threads(2)
        .tunables(Tunables {
            idle,
            park_cost: Some(Duration::from_micros(300)),
            spin_cap_percent: 100,
            ..Default::default()
        })
        .build()
        .unwrap();
    // Requests carry when they were sent, replies when they were sent.
    let (a_tx, a_rx) = async_channel::bounded::<Instant>(1);
    let (b_tx, b_rx) = async_channel::bounded::<Instant>(1);
    let spin = |us: u64| {
        let t = Instant::now();
        while t.elapsed() < Duration::from_micros(us) {
            std::hint::spin_loop();
        }
    };
    // The outside side blocks between messages (it needs no CPU of its own
    // while waiting, so the test holds up on a loaded machine): each reply
    // comes a thread wake-up (tens of us here) plus 3 us after the request,
    // well under the 300 us park cost.
    let pong = thread::spawn(move || {
        while let Ok(_sent) = b_rx.recv_blocking() {
            spin(3);
            if a_tx.send_blocking(Instant::now()).is_err() {
                break;
            }
        }
    });
    let ping = rt.spawn(async move {
        let handle = hwsched::Handle::current();
        let mut r = Rounds {
            short: 0,
            waited: 0,
            parked: 0,
            all: 0,
        };
        while (r.short < PREMISE_ROUNDS || r.waited < PREMISE_ROUNDS) && r.all < 20_000 {
            r.all += 1;
            // The worker this task runs on, which goes idle if the reply
            // is not there: its own parks (the other worker's are not
            // about this round).
            let me = hwsched::worker_index().expect("on a worker");
            let parks = handle.stats().workers[me].parks;
            let sent = Instant::now();
            b_tx.send(sent).await.unwrap();
            let (replied, waited) = match a_rx.try_recv() {
                Ok(at) => (at, false),
                Err(_) => (a_rx.recv().await.unwrap(), true),
            };
            if replied.saturating_duration_since(sent) < SHORT_GAP {
                r.short += 1;
                r.waited += u64::from(waited);
                if handle.stats().workers[me].parks > parks {
                    r.parked += 1;
                }
            }
            spin(3);
        }
        r
    });
    let rounds = rt.block_on(ping).unwrap();
    if std::env::var_os("HWSCHED_TEST_VERBOSE").is_some() {
        println!("{}", rt.stats());
    }
    pong.join().unwrap();
    rounds
}

#[test]
fn governed_idle_parks_far_less_than_always_park_on_short_gaps() {
    bounded(120, "governor_ping_pong", || {
        let park = ping_pong_parks(IdleMode::AlwaysPark);
        let governed = ping_pong_parks(IdleMode::Governed);
        println!("ping-pong rounds: AlwaysPark {park:?}, Governed {governed:?}");
        // AlwaysPark's premise: rounds where its worker had a gap to park
        // in. Its rate over those is what parking on every short gap costs.
        assert!(
            park.waited >= PREMISE_ROUNDS / 4,
            "AlwaysPark: only {} of {} rounds had a short idle gap: the premise did not hold \
             often enough to compare",
            park.waited,
            park.all
        );
        let always = park.parked as f64 / park.waited as f64;
        assert!(
            always >= 0.5,
            "AlwaysPark should park on most short rounds with an idle gap: {park:?}"
        );
        // Governed, over every short round: spinning through a gap (and
        // so often leaving none, the reply already there when the task
        // looks) is what it is for.
        assert!(
            governed.short >= PREMISE_ROUNDS / 4,
            "Governed: only {} of {} rounds were short: the premise did not hold often enough \
             to compare",
            governed.short,
            governed.all
        );
        let gov = governed.parked as f64 / governed.short as f64;
        assert!(
            gov * 2.0 <= always,
            "Governed parked on {gov:.2} of its short rounds ({governed:?}), AlwaysPark on \
             {always:.2} of those with a gap ({park:?})"
        );
    });
}
