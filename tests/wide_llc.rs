//! A last-level cache of more than 64 workers (`pack:1 l3:1 core:96
//! pu:1`): its `parked`, `idle` and `queued` bits take two words
//! (sched/sleepers.rs, `WorkerSet`), and every scan of the LLC starts in the first.
//!
//! The test makes every worker of the first word (0..63) busy, blocked
//! inside a task, so that only workers of the second word (64..95) are
//! idle, parked, or hold work: a scan that reads the first word alone
//! finds nobody to wake and no queue to steal from. Each phase waits
//! under a deadline and fails with what it was waiting for: a wake that
//! finds no parked bit spins in `Sleepers::wake_one` forever, and a task
//! left in a queue nobody finds never runs.
//!
//! Its counters use `SeqCst`: test bookkeeping, not what is under test.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hwsched::{Runtime, TopologySource};

mod common;
use common::with_timeout_alone;

const WIDE: &str = "pack:1 l3:1 core:96 pu:1";
const WORKERS: usize = 96;
/// Workers of the first bitmap word.
const FIRST_WORD: usize = 64;

/// What a blocked worker is told to do next.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Order {
    Wait,
    /// Spawn this many tasks onto its own deque, then wait again.
    Spawn(usize),
    Finish,
}

/// One gate per worker: the blocker task running on worker `i` waits on
/// gate `i`.
struct Gates {
    orders: Mutex<Vec<Order>>,
    cv: Condvar,
}

impl Gates {
    fn new() -> Arc<Gates> {
        Arc::new(Gates {
            orders: Mutex::new(vec![Order::Wait; WORKERS]),
            cv: Condvar::new(),
        })
    }

    fn order(&self, w: usize, o: Order) {
        self.orders.lock().unwrap()[w] = o;
        self.cv.notify_all();
    }

    /// Blocks worker `w`'s thread until it has an order other than `Wait`;
    /// takes it (a `Spawn` goes back to `Wait`).
    fn wait(&self, w: usize) -> Order {
        let mut g = self.orders.lock().unwrap();
        loop {
            match g[w] {
                Order::Wait => g = self.cv.wait(g).unwrap(),
                Order::Spawn(n) => {
                    g[w] = Order::Wait;
                    return Order::Spawn(n);
                }
                Order::Finish => return Order::Finish,
            }
        }
    }
}

/// Waits until `cond` holds; fails naming `what` (and the runtime's
/// stats) after `secs`.
fn wait_for(rt: &Runtime, secs: u64, what: &str, cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "timed out after {secs}s waiting for {what}\n{}",
            rt.stats()
        );
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_wide_llc_wakes_and_steals_beyond_the_first_word() {
    with_timeout_alone(120, "a_wide_llc_wakes_and_steals", || {
        let rt = Runtime::builder()
            .topology(TopologySource::Synthetic(WIDE.into()))
            .build()
            .expect("build the 96-worker runtime");
        assert_eq!(rt.workers(), WORKERS);
        let gates = Gates::new();
        let (tx, rx) = mpsc::channel::<usize>();
        let ran_on = Arc::new(Mutex::new(Vec::<usize>::new()));

        // Phase 1: one blocker per worker. Each reports its worker and
        // waits on that worker's gate; a worker runs one blocker at a time,
        // so all 96 are blocked once 96 distinct workers reported (the
        // blockers queued behind a blocked worker are stolen by idle ones:
        // work conservation over two words).
        let blockers: Vec<_> = (0..WORKERS)
            .map(|_| {
                let (gates, tx, ran_on) = (gates.clone(), tx.clone(), ran_on.clone());
                rt.spawn(async move {
                    let me = hwsched::worker_index().expect("a blocker runs on a worker");
                    tx.send(me).expect("report");
                    while let Order::Spawn(n) = gates.wait(me) {
                        for _ in 0..n {
                            let ran_on = ran_on.clone();
                            drop(hwsched::spawn(async move {
                                let w = hwsched::worker_index().expect("on a worker");
                                ran_on.lock().unwrap().push(w);
                            }));
                        }
                    }
                })
            })
            .collect();
        let mut blocked = [false; WORKERS];
        let t0 = Instant::now();
        for n in 0..WORKERS {
            let left = Duration::from_secs(30).saturating_sub(t0.elapsed());
            let w = rx.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "phase 1: only {n} of {WORKERS} workers took a blocker in 30s \
                     (not: {:?})\n{}",
                    (0..WORKERS).filter(|&w| !blocked[w]).collect::<Vec<_>>(),
                    rt.stats()
                )
            });
            assert!(!blocked[w], "worker {w} ran two blockers at once");
            blocked[w] = true;
        }

        // Phase 2: the workers of the second word, but 95, finish their
        // blocker and go to sleep: 31 workers asleep, all in word 1.
        for w in FIRST_WORD..WORKERS - 1 {
            gates.order(w, Order::Finish);
        }
        wait_for(&rt, 30, "workers 64..95 to fall asleep", || {
            rt.stats().asleep == WORKERS - FIRST_WORD - 1
        });

        // Phase 3, a steal: worker 95 (busy) spawns tasks onto its own
        // deque. Its pusher's check wakes a parked worker (`wake_one` from
        // 95, wrapping round from word 0 into word 1), which must find 95's
        // queue through the `queued` word it is in.
        const LOCAL: usize = 8;
        gates.order(WORKERS - 1, Order::Spawn(LOCAL));
        wait_for(
            &rt,
            30,
            "the tasks queued on worker 95 to be stolen",
            || ran_on.lock().unwrap().len() == LOCAL,
        );
        let stolen = ran_on.lock().unwrap().clone();
        assert!(
            stolen
                .iter()
                .all(|&w| (FIRST_WORD..WORKERS - 1).contains(&w)),
            "tasks ran on {stolen:?}: only workers 64..94 were free"
        );

        // Phase 4, wake placement: a spawn from outside the runtime, made
        // each time with every free worker asleep, so that its
        // `claim_awake_idle` finds nobody and `wake_one` must take a parked
        // bit of word 1 from `near` = 1 (the round-robin ticket of a fresh
        // thread's first spawn): the take's scan starts in word 0. Each
        // spawn is made and awaited on a thread of its own, so that a spawn
        // stuck in `wake_one` fails here with a message.
        let spawned = Arc::new(AtomicUsize::new(0));
        for i in 0..12 {
            wait_for(&rt, 30, "workers 64..95 to fall asleep again", || {
                rt.stats().asleep == WORKERS - FIRST_WORD - 1
            });
            let (s, handle) = (spawned.clone(), rt.handle());
            let (htx, hrx) = mpsc::channel();
            thread::spawn(move || {
                let h = handle.spawn(async move {
                    s.fetch_add(1, Ordering::SeqCst);
                    hwsched::worker_index().expect("on a worker")
                });
                let _ = htx.send(handle.block_on(h));
            });
            let w = hrx
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| {
                    panic!(
                        "phase 4: spawn {i} did not run in 30s (a wake that found \
                         no parked worker?)\n{}",
                        rt.stats()
                    )
                })
                .expect("the spawned task");
            assert!(
                (FIRST_WORD..WORKERS - 1).contains(&w),
                "spawn {i} ran on worker {w}: only workers 64..94 were free"
            );
        }
        assert_eq!(spawned.load(Ordering::SeqCst), 12);

        for w in 0..WORKERS {
            gates.order(w, Order::Finish);
        }
        for h in blockers {
            rt.block_on(h).expect("a blocker");
        }
    });
}
