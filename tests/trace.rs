//! The scheduler's trace (the `trace` feature): every poll of known tasks
//! recorded once, on its worker, between a spawn or wake and the poll that
//! finished it; wake flows join a wake to the task's next poll; placed
//! tasks' polls in their place's lanes; the Chrome JSON parses back with
//! its required fields; the ring keeps the newest events and counts those
//! it dropped; recording across shutdown and `block_on` threads; and a
//! trace taken while sockets and timers are live (feature `io`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use hwsched::trace::{EventKind, Thread, Trace};
use hwsched::{Place, Runtime, TopologySource};

fn rt(workers: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .pin_workers(false)
        .build()
        .expect("runtime")
}

fn synthetic(desc: &str) -> Runtime {
    Runtime::builder()
        .topology(TopologySource::Synthetic(desc.into()))
        .pin_workers(false)
        .build()
        .expect("runtime")
}

/// The trace id of each task a test spawned, from the spawn events of its
/// spawn line.
fn ids_spawned_at(t: &Trace, line: u32) -> Vec<u64> {
    t.events()
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::Spawn { task, at }
                if at.line() == line && at.file().ends_with("trace.rs") =>
            {
                Some(task)
            }
            _ => None,
        })
        .collect()
}

/// The trace of `rt`'s window, read after its shutdown: a task's last
/// poll ends (and is recorded) after its `JoinHandle` sees the output, so
/// a trace read at once may lack that poll's end; the shutdown joins the
/// workers.
fn finish(rt: Runtime) -> Trace {
    let tracer = rt.tracer();
    drop(rt);
    tracer.stop()
}

fn json(t: &Trace) -> serde_json::Value {
    let mut out = Vec::new();
    t.write_chrome_json(&mut out).expect("written");
    serde_json::from_slice(&out).expect("the trace is JSON")
}

#[test]
fn every_poll_of_known_tasks_appears_once_on_its_worker() {
    let rt = synthetic("pack:1 l3:1 core:4 pu:1");
    rt.start_trace();
    // Each task records the workers it was polled on, in order.
    let ran: Arc<Mutex<HashMap<usize, Vec<usize>>>> = Arc::default();
    let line = site("polls");
    rt.block_on(async {
        let mut hs = Vec::new();
        for i in 0..64usize {
            let ran = ran.clone();
            // site: polls
            hs.push(hwsched::spawn(async move {
                for _ in 0..3 {
                    let w = hwsched::worker_index().expect("on a worker");
                    ran.lock().unwrap().entry(i).or_default().push(w);
                    hwsched::yield_now().await;
                }
                let w = hwsched::worker_index().expect("on a worker");
                ran.lock().unwrap().entry(i).or_default().push(w);
            }));
        }
        for h in hs {
            h.await.unwrap();
        }
    });
    let t = finish(rt);
    let ids = ids_spawned_at(&t, line);
    assert_eq!(ids.len(), 64, "one spawn event per task");
    for w in 0..t.workers().len() {
        assert_eq!(
            t.dropped(w),
            0,
            "a ring of the default capacity holds this run"
        );
    }
    let polls: Vec<_> = t.polls().collect();
    let mut by_task: BTreeMap<u64, Vec<hwsched::trace::Poll>> = BTreeMap::new();
    for p in &polls {
        by_task.entry(p.task).or_default().push(*p);
    }
    // The polls' workers, per task, equal what the tasks saw (each task
    // polled 4 times), so the trace's sequences as a multiset equal the
    // tasks'.
    let mut seen: Vec<Vec<usize>> = ids
        .iter()
        .map(|id| {
            let ps = by_task.get(id).expect("the task's polls are in the trace");
            ps.iter()
                .map(|p| match p.thread {
                    Thread::Worker(w) => w,
                    Thread::Outside(_) => panic!("a spawned task runs on a worker"),
                })
                .collect()
        })
        .collect();
    let mut expected: Vec<Vec<usize>> = ran.lock().unwrap().values().cloned().collect();
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected, "each poll once, on the worker that ran it");
    // Between a runnable (spawn or wake) and the finish: each poll follows
    // a spawn or wake of its task since the previous poll began (a task
    // that wakes itself, as `yield_now` does, is scheduled at the end of
    // the poll that woke it, before that poll's end is recorded), and only
    // the last one is ready.
    for id in &ids {
        let ps = &by_task[id];
        assert_eq!(ps.len(), 4);
        assert!(
            ps[..3].iter().all(|p| !p.ready) && ps[3].ready,
            "the last poll finishes"
        );
        let mut after = 0;
        for p in ps {
            let runnable = t.events().iter().any(|e| {
                e.ts_ns >= after
                    && e.ts_ns <= p.start_ns
                    && matches!(e.kind, EventKind::Spawn { task, .. } | EventKind::Wake { task, .. } if task == *id)
            });
            assert!(
                runnable,
                "task {id}: a poll at {} without a spawn or wake before it",
                p.start_ns
            );
            after = p.start_ns + 1;
        }
    }
}

#[test]
fn wake_flows_join_a_wake_to_the_next_poll_of_its_task() {
    let rt = synthetic("pack:1 l3:1 core:4 pu:1");
    rt.start_trace();
    let line = site("consumer");
    rt.block_on(async {
        let (tx, rx) = async_channel::bounded::<u32>(1);
        // site: consumer
        let consumer = hwsched::spawn(async move {
            let mut n = 0;
            while let Ok(v) = rx.recv().await {
                n += v;
            }
            n
        });
        for i in 0..200 {
            tx.send(i).await.unwrap();
        }
        drop(tx);
        assert_eq!(consumer.await.unwrap(), (0..200).sum::<u32>());
    });
    let t = finish(rt);
    let id = ids_spawned_at(&t, line)[0];
    let v = json(&t);
    let events = v["traceEvents"].as_array().unwrap();
    // Every flow start has one finish with its id, which binds to a poll of
    // the consumer on the finish's track at the same time.
    let mut starts = HashMap::new();
    let mut finishes = HashMap::new();
    for e in events {
        match e["ph"].as_str() {
            Some("s") => assert!(starts.insert(e["id"].as_u64().unwrap(), e).is_none()),
            Some("f") => assert!(finishes.insert(e["id"].as_u64().unwrap(), e).is_none()),
            _ => {}
        }
    }
    assert!(
        starts.len() >= 10,
        "the consumer was woken by the producer: {} flows",
        starts.len()
    );
    assert_eq!(starts.len(), finishes.len());
    let polls: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    for (id, s) in &starts {
        let f = finishes[id];
        assert!(
            f["ts"].as_f64() >= s["ts"].as_f64(),
            "a flow goes forward in time"
        );
        let task = f["args"]["task"].as_u64().unwrap();
        let poll = polls
            .iter()
            .find(|p| p["ts"] == f["ts"] && p["tid"] == f["tid"] && p["args"]["task"] == task);
        assert!(poll.is_some(), "flow {id} ends at a poll of its task");
        // The wake recorded at the flow's start is the task's last before
        // that poll.
        let wake_ts = s["ts"].as_f64().unwrap();
        let later_wake = events.iter().any(|e| {
            e["name"] == "wake"
                && e["ph"] == "i"
                && e["args"]["task"] == task
                && e["ts"].as_f64().unwrap() > wake_ts
                && e["ts"].as_f64().unwrap() < f["ts"].as_f64().unwrap()
        });
        assert!(
            !later_wake,
            "flow {id} starts at the task's last wake before its poll"
        );
    }
    // The consumer's polls after the first each have a flow to them.
    let consumer_polls: Vec<_> = t.polls().filter(|p| p.task == id).collect();
    let flows_to_consumer = finishes
        .values()
        .filter(|f| f["args"]["task"].as_u64() == Some(id))
        .count();
    assert_eq!(
        flows_to_consumer,
        consumer_polls.len() - 1,
        "one flow per poll after the first"
    );
}

#[test]
fn placed_tasks_polls_lie_in_their_places_lanes() {
    let rt = synthetic("pack:2 l3:2 core:2 pu:2");
    rt.start_trace();
    let line = site("placed");
    rt.block_on(async {
        let mut hs = Vec::new();
        for i in 0..32 {
            let place = if i % 2 == 0 {
                Place::Package(1)
            } else {
                Place::Worker(3)
            };
            hs.push(
                // site: placed
                hwsched::spawn_on(place, async {
                    for _ in 0..4 {
                        hwsched::yield_now().await;
                    }
                })
                .unwrap(),
            );
        }
        for h in hs {
            h.await.unwrap();
        }
    });
    let t = finish(rt);
    let ids = ids_spawned_at(&t, line);
    assert_eq!(ids.len(), 32);
    let places = t.workers();
    let mut n = 0;
    for p in t.polls().filter(|p| ids.contains(&p.task)) {
        let Thread::Worker(w) = p.thread else {
            panic!("a placed task runs on a worker")
        };
        let i = ids.iter().position(|&x| x == p.task).unwrap();
        if i % 2 == 0 {
            assert_eq!(
                places[w].package, 1,
                "a task placed on package 1 polled on worker {w}"
            );
        } else {
            assert_eq!(w, 3, "a task pinned to worker 3 polled on worker {w}");
        }
        n += 1;
    }
    assert_eq!(n, 32 * 5, "every poll of the placed tasks is in the trace");
}

#[test]
fn chrome_json_has_required_fields_and_one_track_per_worker_by_topology() {
    let rt = synthetic("pack:2 l3:2 core:2 pu:1");
    rt.start_trace();
    rt.block_on(async {
        let hs: Vec<_> = (0..100)
            .map(|_| hwsched::spawn(async { hwsched::yield_now().await }))
            .collect();
        for h in hs {
            h.await.unwrap();
        }
    });
    let t = finish(rt);
    let v = json(&t);
    let events = v["traceEvents"].as_array().expect("traceEvents");
    for e in events {
        for f in ["name", "ph", "ts", "pid", "tid"] {
            assert!(!e[f].is_null(), "an event without {f}: {e}");
        }
        assert!(e["ts"].is_number() && e["pid"].is_u64() && e["tid"].is_u64());
        if e["ph"] == "X" {
            assert!(e["dur"].as_f64().unwrap() >= 0.0);
        }
    }
    // One named track per worker, in the process of its LLC.
    let names: Vec<_> = events
        .iter()
        .filter(|e| e["name"] == "thread_name" && e["args"]["worker"].is_u64())
        .collect();
    assert_eq!(names.len(), t.workers().len());
    for n in names {
        let w = n["args"]["worker"].as_u64().unwrap() as usize;
        assert_eq!(n["pid"].as_u64().unwrap(), t.workers()[w].llc as u64 + 1);
    }
    let procs = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .count();
    assert_eq!(
        procs,
        4 + 1,
        "a process per LLC, and one for the outside threads"
    );
    let x = events.iter().filter(|e| e["ph"] == "X").count();
    assert_eq!(x, t.polls().count(), "a complete event per poll");
    assert_eq!(
        v["otherData"]["dropped"].as_array().unwrap().len(),
        t.workers().len()
    );
}

#[test]
fn the_ring_keeps_the_newest_events_and_counts_the_dropped() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .pin_workers(false)
        .trace(64)
        .build()
        .unwrap();
    let line = site("hundred");
    for _ in 0..100 {
        // site: hundred
        let h = rt.spawn(async {});
        rt.block_on(h).unwrap();
    }
    let t = finish(rt);
    let worker: Vec<_> = t
        .events()
        .iter()
        .filter(|e| e.thread == Thread::Worker(0))
        .collect();
    assert_eq!(worker.len(), 64, "the ring holds its capacity");
    assert!(
        t.dropped(0) >= 100,
        "it lost the oldest: dropped {}",
        t.dropped(0)
    );
    // The newest kept: the last task's poll is there, the first's is not.
    let spawned = ids_spawned_at(&t, line);
    assert_eq!(
        spawned.len(),
        100,
        "spawns from a thread outside block_on go to the shared outside ring"
    );
    let polled: Vec<u64> = t.polls().map(|p| p.task).collect();
    assert!(polled.contains(spawned.last().unwrap()));
    assert!(!polled.contains(&spawned[0]));
    assert_eq!(t.outside_dropped(), 0);
}

#[test]
fn recording_across_shutdown_and_block_on_threads() {
    let rt = rt(2);
    let tracer = rt.tracer();
    tracer.start();
    let h = rt.handle();
    let line = site("block-on");
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let h = h.clone();
            std::thread::spawn(move || {
                // site: block-on
                h.block_on(async { hwsched::spawn(async { 7 }).await.unwrap() })
            })
        })
        .collect();
    for th in threads {
        assert_eq!(th.join().unwrap(), 7);
    }
    // A task pending at shutdown: spawned, polled, never finished.
    let (tx, rx) = async_channel::bounded::<()>(1);
    let pending_line = site("pending");
    // site: pending
    let pending = rt.spawn(async move { rx.recv().await.ok() });
    while rt.live_tasks() > 1 {
        std::thread::yield_now();
    }
    drop(h);
    drop(rt);
    drop(tx);
    drop(pending);
    let t = tracer.stop();
    assert!(!tracer.is_recording());
    let ids = ids_spawned_at(&t, line);
    assert_eq!(ids.len(), 3, "a spawn from each block_on thread");
    let outside: Vec<_> = ids
        .iter()
        .map(|id| {
            t.events()
                .iter()
                .find(|e| matches!(e.kind, EventKind::Spawn { task, .. } if task == *id))
                .unwrap()
                .thread
        })
        .collect();
    assert!(outside.iter().all(|th| matches!(th, Thread::Outside(_))));
    let mut distinct = outside.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "each block_on thread its own track");
    let mut lanes: Vec<_> = t.block_on_threads().map(Thread::Outside).collect();
    lanes.sort();
    assert_eq!(lanes, distinct, "each block_on thread recorded in its lane");
    for id in &ids {
        assert!(
            t.polls().any(|p| p.task == *id && p.ready),
            "each finished on a worker"
        );
    }
    let p = ids_spawned_at(&t, pending_line);
    assert_eq!(p.len(), 1);
    let ps: Vec<_> = t.polls().filter(|x| x.task == p[0]).collect();
    assert!(
        !ps.is_empty() && ps.iter().all(|x| !x.ready),
        "polled, never finished"
    );
    // The trace is still written after the runtime is gone.
    let v = json(&t);
    assert!(v["traceEvents"].as_array().unwrap().len() > 10);
}

#[test]
fn local_tasks_of_block_on_are_polled_once_each_in_its_lane() {
    use std::cell::Cell;
    use std::future::Future;
    use std::rc::Rc;
    let rt = rt(2);
    rt.start_trace();
    let line = site("local");
    // Per task, the polls it saw, counted by a wrapper around its future.
    let counts: Vec<Rc<Cell<usize>>> = (0..16).map(|_| Rc::default()).collect();
    let sum = rt.block_on(async {
        let mut senders = Vec::new();
        let hs: Vec<_> = counts
            .iter()
            .map(|count| {
                let count = count.clone();
                let (tx, rx) = async_channel::bounded::<usize>(1);
                senders.push(tx);
                let mut body = Box::pin(async move {
                    let v = rx.recv().await.unwrap();
                    for _ in 0..2 {
                        hwsched::yield_now().await;
                    }
                    v
                });
                // site: local
                hwsched::spawn_local(std::future::poll_fn(move |cx| {
                    count.set(count.get() + 1);
                    body.as_mut().poll(cx)
                }))
            })
            .collect();
        // The loop runs the local tasks (each to its wait on the channel)
        // before it polls this future again.
        hwsched::yield_now().await;
        // Workers' tasks wake the local tasks: wakes from workers into the
        // block_on thread's queue.
        for (i, tx) in senders.into_iter().enumerate() {
            hwsched::spawn(async move { tx.send(i).await.unwrap() });
        }
        let mut sum = 0;
        for h in hs {
            sum += h.await.unwrap();
        }
        sum
    });
    assert_eq!(sum, (0..16).sum::<usize>());
    let t = finish(rt);
    let lanes: Vec<u32> = t.block_on_threads().collect();
    assert_eq!(lanes.len(), 1, "the block_on thread has a lane");
    let lane = Thread::Outside(lanes[0]);
    assert_eq!(t.dropped_on(lane), 0);
    let ids = ids_spawned_at(&t, line);
    assert_eq!(ids.len(), 16, "one spawn event per local task");
    for (id, count) in ids.iter().zip(&counts) {
        let spawn = t
            .events()
            .iter()
            .find(|e| matches!(e.kind, EventKind::Spawn { task, .. } if task == *id))
            .unwrap();
        assert_eq!(spawn.thread, lane, "spawned on the block_on thread");
        let ps: Vec<_> = t.polls().filter(|p| p.task == *id).collect();
        assert_eq!(ps.len(), count.get(), "task {id}: each poll once");
        assert!(
            ps.iter().all(|p| p.thread == lane),
            "task {id}: polled in the block_on lane"
        );
        let (last, rest) = ps.split_last().unwrap();
        assert!(
            last.ready && rest.iter().all(|p| !p.ready),
            "the last poll finishes"
        );
        // Each poll follows a spawn or wake of its task since the previous
        // poll began; the wakes put it on this thread's queue.
        let mut after = 0;
        for p in &ps {
            let runnable = t.events().iter().any(|e| {
                e.ts_ns >= after
                    && e.ts_ns <= p.start_ns
                    && match e.kind {
                        EventKind::Spawn { task, .. } => task == *id,
                        EventKind::Wake { task, to, decision } => {
                            task == *id
                                && decision == hwsched::trace::Decision::Local
                                && to == lanes[0] as usize
                        }
                        _ => false,
                    }
            });
            assert!(
                runnable,
                "task {id}: a poll at {} without a spawn or wake before it",
                p.start_ns
            );
            after = p.start_ns + 1;
        }
    }
    let from_workers = t
        .events()
        .iter()
        .filter(|e| {
            matches!(e.thread, Thread::Worker(_))
                && matches!(e.kind, EventKind::Wake { task, decision: hwsched::trace::Decision::Local, .. } if ids.contains(&task))
        })
        .count();
    assert!(
        from_workers > 0,
        "the workers' wakes of local tasks are recorded"
    );
    // The lane is a track of its own in the JSON, marked as block_on's,
    // holding the local tasks' polls.
    let v = json(&t);
    let events = v["traceEvents"].as_array().unwrap();
    let track = events
        .iter()
        .find(|e| e["name"] == "thread_name" && e["args"]["block_on"] == true)
        .expect("a block_on track");
    let on_track = events
        .iter()
        .filter(|e| {
            e["ph"] == "X"
                && e["tid"] == track["tid"]
                && e["pid"] == track["pid"]
                && e["args"]["task"].as_u64().is_some_and(|x| ids.contains(&x))
        })
        .count();
    assert_eq!(on_track, counts.iter().map(|c| c.get()).sum::<usize>());
}

#[test]
fn a_block_on_lane_keeps_the_newest_events_and_counts_the_dropped() {
    let rt = Runtime::builder()
        .worker_threads(1)
        .pin_workers(false)
        .trace(64)
        .build()
        .unwrap();
    let line = site("local-hundred");
    rt.block_on(async {
        for _ in 0..100 {
            // site: local-hundred
            hwsched::spawn_local(async {}).await.unwrap();
        }
    });
    let t = finish(rt);
    let lane = Thread::Outside(t.block_on_threads().next().expect("a lane"));
    let kept = t.events().iter().filter(|e| e.thread == lane).count();
    assert_eq!(kept, 64, "the lane holds its capacity");
    // Each local task: a spawn, a poll's start and end, at least.
    assert!(
        t.dropped_on(lane) >= 300 - 64,
        "it lost the oldest: dropped {}",
        t.dropped_on(lane)
    );
    let polled: Vec<u64> = t.polls().map(|p| p.task).collect();
    let spawned = ids_spawned_at(&t, line);
    assert!(spawned.len() < 100, "the oldest spawns are gone");
    assert!(polled.contains(spawned.last().unwrap()), "the newest kept");
}

#[cfg(feature = "io")]
#[test]
fn a_trace_taken_while_sockets_and_timers_are_live() {
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    use std::time::Duration;
    let rt = rt(2);
    rt.start_trace();
    rt.block_on(async {
        let listener = hwsched::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let server = hwsched::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4];
            for _ in 0..20 {
                s.read_exact(&mut buf).await.unwrap();
                s.write_all(&buf).await.unwrap();
            }
        });
        let timers = hwsched::spawn(async {
            for _ in 0..5 {
                hwsched::time::sleep(Duration::from_millis(2)).await;
            }
        });
        let mut c = hwsched::net::TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 4];
        for i in 0..20u32 {
            c.write_all(&i.to_le_bytes()).await.unwrap();
            c.read_exact(&mut buf).await.unwrap();
            assert_eq!(u32::from_le_bytes(buf), i);
        }
        server.await.unwrap();
        timers.await.unwrap();
    });
    let t = finish(rt);
    let timers: usize = t
        .events()
        .iter()
        .map(|e| match e.kind {
            EventKind::TimersFired { count } => count,
            _ => 0,
        })
        .sum();
    assert!(timers >= 5, "the sleeps' expiries are recorded: {timers}");
    let driver_wakes = t
        .events()
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::Wake {
                    decision: hwsched::trace::Decision::Batch,
                    ..
                }
            )
        })
        .count();
    assert!(
        driver_wakes >= 5,
        "readiness and timer wakes are batch wakes: {driver_wakes}"
    );
    assert!(t
        .events()
        .iter()
        .any(|e| matches!(e.kind, EventKind::Park { .. })));
    let v = json(&t);
    assert!(v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"] == "timers fired"));
}

/// A socket that becomes ready while the only worker sleeps in the
/// poller: the turn that dispatches it, taken from the sleeping path (a
/// park in the driver, an unpark, then the turn), records its events.
#[cfg(feature = "io")]
#[test]
fn a_poller_turn_taken_asleep_records_its_events() {
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    use std::io::{Read, Write};
    let rt = Runtime::builder()
        .worker_threads(1)
        .pin_workers(false)
        .trace(1 << 14)
        .build()
        .unwrap();
    let tracer = rt.tracer();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (accepted, _) = listener.accept().unwrap();
    let server = rt.spawn(async move {
        let mut s = hwsched::net::TcpStream::from_std(accepted).unwrap();
        let mut buf = [0u8; 4];
        while s.read_exact(&mut buf).await.is_ok() {
            s.write_all(&buf).await.unwrap();
        }
    });
    // The worker's last event a park in the driver: it sleeps there, with
    // the server's read pending (nothing else to run).
    let asleep = || {
        let t = tracer.snapshot();
        let last = t
            .events()
            .iter()
            .rev()
            .find(|e| e.thread == Thread::Worker(0));
        matches!(
            last,
            Some(e) if matches!(e.kind, EventKind::Park { why: hwsched::trace::ParkReason::Driver })
        )
    };
    for i in 0..3u32 {
        while !asleep() {
            std::thread::yield_now();
        }
        // Idle, the worker dispatches readiness only in the turns of its
        // sleep (a busy worker's look at the poller follows a task).
        client.write_all(&i.to_le_bytes()).unwrap();
        let mut buf = [0u8; 4];
        client.read_exact(&mut buf).unwrap();
        assert_eq!(u32::from_le_bytes(buf), i);
    }
    drop(client);
    rt.block_on(server).unwrap();
    let t = finish(rt);
    // The worker's turns taken asleep: a park in the driver, then (the
    // turn's dispatch and the timers recording their wakes and notifies
    // meanwhile) the unpark and the turn.
    let mut asleep_turns: Vec<(usize, usize)> = Vec::new();
    let mut parked = false;
    for e in t.events().iter().filter(|e| e.thread == Thread::Worker(0)) {
        match e.kind {
            EventKind::Park {
                why: hwsched::trace::ParkReason::Driver,
            } => parked = true,
            EventKind::Wake { .. }
            | EventKind::Notify { .. }
            | EventKind::Unpark
            | EventKind::TimersFired { .. } => {}
            EventKind::PollerTurn { events, batch } => {
                if parked {
                    asleep_turns.push((events, batch));
                }
                parked = false;
            }
            _ => parked = false,
        }
    }
    assert!(!asleep_turns.is_empty(), "turns taken asleep are recorded");
    let with_events = asleep_turns.iter().filter(|(e, _)| *e > 0).count();
    assert!(
        with_events >= 3,
        "each message's readiness dispatched by a turn taken asleep: {asleep_turns:?}"
    );
    assert!(
        asleep_turns.iter().any(|&(e, b)| e > 0 && b > 0),
        "a turn's batch: the server's task woken onto the worker: {asleep_turns:?}"
    );
}

/// The line after the comment `// site: NAME` in this file: a spawn call
/// whose location a test looks for in the trace, found by its text so that
/// no line arithmetic can drift from it.
fn site(name: &str) -> u32 {
    let tag = format!("// site: {name}");
    let i = include_str!("trace.rs")
        .lines()
        .position(|l| l.trim() == tag)
        .unwrap_or_else(|| panic!("no line is {tag:?}"));
    // 1-based, the line after the comment.
    i as u32 + 2
}
