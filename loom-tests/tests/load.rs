//! Rate-limited load publishing (`src/policy/load.rs`: `GroupLoad`, `Publisher`,
//! `LoadMap::publish`; the worker's `publish_load` and the forced publish
//! before it parks).
//!
//! Two workers share one group counter (the core, LLC, ... they both belong
//! to) and each has its own worker counter, as in `LoadMap`. Each keeps a
//! `Publisher` and adds `Publish::Now` deltas to its counters (one
//! `fetch_add` of a packed `queued << 32 | running` delta each). The clock
//! is fake, so `decide` is deterministic:
//!
//! - worker A publishes (1 running, 1 queued), then holds back two changes
//!   inside the interval (the last one, going idle with 2 queued, leaves it
//!   with a pending delta), then parks through `Mailbox::wait`, whose
//!   `before_sleep` makes the forced publish;
//! - worker B publishes three times, the last one forced (it would sleep
//!   next), with a negative running delta that borrows across the two
//!   halves of the packed word;
//! - the main thread delivers an item to A, reads the group counter once,
//!   then joins both. A, once it has run the item, would park again: one
//!   more forced publish (a no-op when the one before the first park ran).
//!
//! Checked in every interleaving:
//! - both halves of the group counter stay within what the workers could
//!   have published at any instant (the packed wrapping addition never
//!   shows a borrow);
//! - when the delivery had to unpark A (`Notified::Unparked`), A's counter
//!   already shows its forced publish: a parked worker's contribution is
//!   exact while it sleeps. This holds because the publish happens before
//!   `park`'s `fetch_or(PARKED, AcqRel)`, which the deliverer's
//!   `fetch_or(NOTIFIED, AcqRel)` reads;
//! - after both finish, every counter equals the sum of the final
//!   contributions (`Publisher::published`), which are the final states.
//!
//! # Mutations
//!
//! Each applied once (to `src/` on a copy of the working tree, or to this
//! model), the model run at `LOOM_MAX_PREEMPTIONS=3`, reverted:
//!
//! | mutation | result |
//! | --- | --- |
//! | `GroupLoad::add` as a `load` + `store` instead of `fetch_add` | caught: "group counter: Load { running: 4294967295, queued: 1 } != Load { running: 0, queued: 5 }" (a lost update, which also shows as a borrow) |
//! | `decide` ignores `force` | caught (sequentially): worker B's forced publish is `HeldByInterval` |
//! | the forced publish added after `wait` returns (model side), as `worker::idle` does today | caught: "a parked worker's contribution is stale: Load { running: 1, queued: 1 } != Load { running: 0, queued: 2 }" |
//! | every `Parker` ordering `Relaxed` | see the table in `loom-tests/README.md` (`scripts/mutate.sh`), one ordering at a time |
//!
//! The third row was a bug in `src/worker/mod.rs` `idle()`, found by this
//! model: the publish of the forced delta ran after `wait` returned, so a
//! parked worker looked busy for its whole sleep. `idle()` now publishes
//! inside `before_sleep`, as this model does. The model still replays that
//! closure (`Publisher::decide`, then `LoadMap::publish`) rather
//! than calling src/worker/mod.rs.

#![cfg(loom)]

use hwsched::policy::load::{Contribution, Load, Publish, Publisher};
use hwsched::sched::load_map::LoadMap;
use hwsched::sched::park::{Mailbox, Notified, Wait};
use hwsched::topology::{Topology, TopologySource};
use loom::sync::atomic::AtomicBool;
use loom::sync::Arc;
use loom::thread;
use loom_tests::{model, Cases, Ledger, Task};

const MS: u64 = 1_000_000;

fn c(running: u32, queued: u32) -> Contribution {
    Contribution { running, queued }
}

fn load(running: u32, queued: u32) -> Load {
    Load { running, queued }
}

/// `Core::publish_load` after `Publisher::decide`: a decided delta goes to
/// `LoadMap::publish` (the production map, over a two-worker topology).
fn publish(map: &LoadMap, w: usize, d: Publish) {
    if let Publish::Now { running, queued } = d {
        map.publish(w, running, queued);
    }
}

/// Worker A: publishes, holds back, then parks with a forced publish.
fn worker_a(mb: &Mailbox<Task>, shutdown: &AtomicBool, map: &LoadMap) -> Contribution {
    let mut p = Publisher::new();
    publish(map, 0, p.decide(0, c(1, 1), MS, false));
    assert_eq!(p.decide(100, c(1, 2), MS, false), Publish::HeldByInterval);
    // enter_idle's publish: still inside the interval, held back.
    assert_eq!(p.decide(200, c(0, 2), MS, false), Publish::HeldByInterval);
    loop {
        let res = mb.wait(
            shutdown,
            || false,
            // About to sleep: publish whatever is held back.
            || {
                publish(map, 0, p.decide(300, c(0, 2), MS, true));
                true
            },
        );
        match res {
            Wait::Work { item, .. } => {
                item.run();
                break;
            }
            Wait::Woken { .. } => {}
            Wait::Shutdown => panic!("no shutdown in this model"),
            Wait::Suspended => unreachable!("a condvar park does not suspend"),
        }
    }
    // The item ran; A is idle again with its 2 queued and would park: a
    // forced publish (a no-op if the one before the park already made it).
    publish(map, 0, p.decide(400, c(0, 2), MS, true));
    p.published()
}

/// Worker B: three publishes, the last one forced.
fn worker_b(map: &LoadMap) -> Contribution {
    let mut p = Publisher::new();
    publish(map, 1, p.decide(0, c(1, 0), MS, false));
    let d = p.decide(2 * MS, c(1, 3), MS, false);
    assert_eq!(
        d,
        Publish::Now {
            running: 0,
            queued: 3
        }
    );
    publish(map, 1, d);
    assert_eq!(
        p.decide(2 * MS + 10, c(0, 3), MS, false),
        Publish::HeldByInterval
    );
    let d = p.decide(2 * MS + 20, c(0, 3), MS, true);
    assert_eq!(
        d,
        Publish::Now {
            running: -1,
            queued: 0
        }
    );
    publish(map, 1, d);
    p.published()
}

#[test]
fn publishes_race_and_a_parked_worker_is_exact() {
    let cases = Cases::new(&[
        "delivery unparked A: its counter checked",
        "delivery found A awake",
    ]);
    // Two workers sharing one core (its span is also the machine's).
    let topology = std::sync::Arc::new(
        Topology::new(
            &TopologySource::Synthetic("pack:1 core:1 pu:2".into()),
            None,
        )
        .expect("a synthetic two-worker topology"),
    );
    assert_eq!(topology.workers(), 2);
    model({
        let cases = cases.clone();
        move || {
            let ledger = Ledger::new(1);
            let mb = Arc::new(Mailbox::new());
            let shutdown = Arc::new(AtomicBool::new(false));
            let map = Arc::new(LoadMap::new(&topology));
            let a = {
                let (mb, shutdown, map) = (mb.clone(), shutdown.clone(), map.clone());
                thread::spawn(move || worker_a(&mb, &shutdown, &map))
            };
            let b = {
                let map = map.clone();
                thread::spawn(move || worker_b(&map))
            };
            let (ga, gb, group) = (
                map.group(&(0..1).into()),
                map.group(&(1..2).into()),
                map.group(&(0..2).into()),
            );
            let n = mb.deliver(ledger.task(0));
            let mid = group.read();
            assert!(
                mid.running <= 2 && mid.queued <= 5,
                "group counter shows a borrow: {mid:?}"
            );
            if n == Notified::Unparked {
                cases.hit("delivery unparked A: its counter checked");
                assert_eq!(
                    ga.read(),
                    load(0, 2),
                    "a parked worker's contribution is stale"
                );
            } else {
                cases.hit("delivery found A awake");
            }
            let fa = a.join().unwrap();
            let fb = b.join().unwrap();
            assert_eq!((fa, fb), (c(0, 2), c(0, 3)));
            assert_eq!(ga.read(), load(0, 2), "worker A's counter");
            assert_eq!(gb.read(), load(0, 3), "worker B's counter");
            let sum = load(fa.running + fb.running, fa.queued + fb.queued);
            assert_eq!(
                group.read(),
                sum,
                "group counter: {:?} != {sum:?}",
                group.read()
            );
            ledger.assert_each_once();
        }
    });
    cases.assert_all_reached();
}
