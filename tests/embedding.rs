//! The embedding API: `Handle`, thread hooks and stack size,
//! `JoinSet` and `AbortHandle`, `spawn_blocking`. Each test is bounded by a
//! watchdog.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hwsched::{Handle, JoinError, JoinSet, Runtime};

mod common;
use common::{block_on_plain, with_timeout};

fn rt(n: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(n)
        .build()
        .expect("a runtime")
}

// ---------------------------------------------------------------------------
// Handle
// ---------------------------------------------------------------------------

#[test]
fn handle_current_works_in_tasks_block_on_and_hooks_and_not_elsewhere() {
    with_timeout(30, "handle_current", || {
        assert!(Handle::try_current().is_none(), "a plain thread has none");
        let in_hook = Arc::new(AtomicUsize::new(0));
        let h = in_hook.clone();
        let rt = Runtime::builder()
            .worker_threads(2)
            .on_thread_start(move || {
                if Handle::try_current().is_some() {
                    h.fetch_add(1, Ordering::SeqCst);
                }
            })
            .build()
            .unwrap();
        assert_eq!(in_hook.load(Ordering::SeqCst), 2, "inside both start hooks");
        // Inside block_on, and inside a task.
        let v = rt.block_on(async {
            let outer = Handle::current();
            let inner = outer
                .spawn(async { Handle::current().spawn(async { 20 }).await.unwrap() + 1 })
                .await
                .unwrap();
            inner * 2
        });
        assert_eq!(v, 42);
        assert!(Handle::try_current().is_none(), "restored after block_on");
        // A Handle used from another thread.
        let handle = rt.handle();
        let got = thread::spawn(move || handle.block_on(handle.spawn(async { 5 })))
            .join()
            .unwrap();
        assert_eq!(got.unwrap(), 5);
    });
}

#[test]
fn a_handle_outliving_its_runtime_spawns_cancelled_tasks() {
    with_timeout(30, "handle_after_drop", || {
        let rt = rt(2);
        let handle = rt.handle();
        drop(rt);
        let h = handle.spawn(async { 1 });
        // No runtime runs the task: poll its handle with a plain waker.
        let r = block_on_plain(h);
        let r = matches!(r, Err(JoinError::Cancelled));
        assert!(
            r,
            "spawning through a Handle after the runtime is dropped resolves Cancelled"
        );
    });
}

// ---------------------------------------------------------------------------
// Hooks and stack size
// ---------------------------------------------------------------------------

#[test]
fn hooks_run_once_per_thread_start_before_tasks_and_stop_after() {
    with_timeout(30, "hooks", || {
        let log = Arc::new(Mutex::new(Vec::<(String, thread::ThreadId)>::new()));
        let (l1, l2) = (log.clone(), log.clone());
        let rt = Runtime::builder()
            .worker_threads(2)
            .on_thread_start(move || {
                l1.lock()
                    .unwrap()
                    .push(("start".into(), thread::current().id()))
            })
            .on_thread_stop(move || {
                l2.lock()
                    .unwrap()
                    .push(("stop".into(), thread::current().id()))
            })
            .build()
            .unwrap();
        let l3 = log.clone();
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let l = l3.clone();
                rt.spawn(async move {
                    l.lock()
                        .unwrap()
                        .push(("task".into(), thread::current().id()));
                })
            })
            .collect();
        for t in tasks {
            rt.block_on(t).unwrap();
        }
        drop(rt);
        let log = log.lock().unwrap().clone();
        let threads: HashSet<_> = log
            .iter()
            .filter(|(k, _)| k == "start")
            .map(|(_, t)| *t)
            .collect();
        assert_eq!(threads.len(), 2, "one start per worker: {log:?}");
        for t in &threads {
            let mine: Vec<&str> = log
                .iter()
                .filter(|(_, x)| x == t)
                .map(|(k, _)| k.as_str())
                .collect();
            assert_eq!(mine.first(), Some(&"start"), "start first: {mine:?}");
            assert_eq!(mine.last(), Some(&"stop"), "stop last: {mine:?}");
            assert_eq!(mine.iter().filter(|k| **k == "start").count(), 1);
            assert_eq!(mine.iter().filter(|k| **k == "stop").count(), 1);
        }
    });
}

#[test]
fn a_bigger_stack_runs_a_task_with_a_4_mib_frame() {
    with_timeout(30, "stack_size", || {
        let rt = Runtime::builder()
            .worker_threads(1)
            .thread_stack_size(8 << 20)
            .build()
            .unwrap();
        let n = rt
            .block_on(rt.spawn(async {
                let big = [7u8; 4 << 20];
                std::hint::black_box(&big)
                    .iter()
                    .map(|&b| b as usize)
                    .sum::<usize>()
            }))
            .unwrap();
        assert_eq!(n, 7 * (4 << 20));
    });
}

#[test]
fn bad_thread_options_are_build_errors_naming_them() {
    let cases: Vec<(hwsched::Builder, &str)> = vec![
        (
            Runtime::builder().thread_stack_size(1024),
            "thread_stack_size",
        ),
        (
            Runtime::builder().max_blocking_threads(0),
            "max_blocking_threads",
        ),
        (
            Runtime::builder().thread_keep_alive(Duration::from_secs(100_000)),
            "thread_keep_alive",
        ),
    ];
    for (b, name) in cases {
        let e = b.worker_threads(1).build().expect_err(name);
        assert!(e.to_string().contains(name), "{name}: {e}");
    }
}

// ---------------------------------------------------------------------------
// JoinSet and AbortHandle
// ---------------------------------------------------------------------------

#[test]
fn join_set_yields_in_completion_order() {
    with_timeout(30, "join_set_order", || {
        let rt = rt(2);
        let order = rt.block_on(async {
            let mut set = JoinSet::new();
            // Each task finishes when the test releases it: the completion
            // order is the release order (1, 2, 0), whatever the load on
            // the machine (sleeps of different lengths raced under load).
            let mut go = Vec::new();
            for i in 0u32..3 {
                let (tx, rx) = async_channel::bounded::<()>(1);
                go.push(tx);
                set.spawn(async move {
                    rx.recv().await.unwrap();
                    i
                });
            }
            assert_eq!(set.len(), 3);
            let mut order = Vec::new();
            for i in [1usize, 2, 0] {
                go[i].send(()).await.unwrap();
                order.push(set.join_next().await.unwrap().unwrap());
                assert_eq!(set.len(), 2 - (order.len() - 1));
            }
            assert!(set.join_next().await.is_none());
            assert!(set.is_empty());
            order
        });
        assert_eq!(order, vec![1, 2, 0], "join_next yields in completion order");
    });
}

#[test]
fn join_set_abort_all_and_drop_cancel_pending_tasks() {
    with_timeout(30, "join_set_abort", || {
        let rt = rt(2);
        let dropped = Arc::new(AtomicUsize::new(0));
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let d = dropped.clone();
        rt.block_on(async move {
            let mut set = JoinSet::new();
            for _ in 0..10 {
                let c = Counted(d.clone());
                set.spawn(async move {
                    let _c = c;
                    std::future::pending::<()>().await
                });
            }
            set.abort_all();
            let mut cancelled = 0;
            while let Some(r) = set.join_next().await {
                assert!(matches!(r, Err(JoinError::Cancelled)));
                cancelled += 1;
            }
            assert_eq!(cancelled, 10);
        });
        assert_eq!(dropped.load(Ordering::SeqCst), 10);
        // Dropping a set aborts what it holds.
        let d = dropped.clone();
        rt.block_on(async move {
            let mut set = JoinSet::new();
            for _ in 0..10 {
                let c = Counted(d.clone());
                set.spawn(async move {
                    let _c = c;
                    std::future::pending::<()>().await
                });
            }
            drop(set);
        });
        let t0 = Instant::now();
        while dropped.load(Ordering::SeqCst) < 20 && t0.elapsed() < Duration::from_secs(10) {
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            20,
            "dropping the set aborted its tasks"
        );
    });
}

#[test]
fn an_abort_handle_outlives_its_join_handle() {
    with_timeout(30, "abort_handle", || {
        let rt = rt(1);
        let (tx, rx) = mpsc::channel::<()>();
        struct Signal(mpsc::Sender<()>);
        impl Drop for Signal {
            fn drop(&mut self) {
                let _ = self.0.send(());
            }
        }
        let s = Signal(tx);
        let h = rt.spawn(async move {
            let _s = s;
            std::future::pending::<()>().await
        });
        let abort = h.abort_handle();
        drop(h);
        // Clone it onto another thread and abort from there.
        let a2 = abort.clone();
        thread::spawn(move || a2.abort()).join().unwrap();
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the aborted task was dropped");
    });
}

// ---------------------------------------------------------------------------
// spawn_blocking
// ---------------------------------------------------------------------------

#[test]
fn blocking_calls_leave_the_workers_free() {
    with_timeout(60, "blocking_leaves_workers_free", || {
        let rt = rt(2);
        // A 5 ms ticker outside the runtime; a task on a worker counts ticks.
        let (tick_tx, tick_rx) = async_channel::unbounded::<()>();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let st = stop.clone();
        let ticker = thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(5));
                let _ = tick_tx.try_send(());
            }
        });
        let ticks = Arc::new(AtomicUsize::new(0));
        let t = ticks.clone();
        let counter = rt.spawn(async move {
            while tick_rx.recv().await.is_ok() {
                t.fetch_add(1, Ordering::SeqCst);
            }
        });
        // 64 blocking calls of 50 ms, from tasks on both workers.
        let t0 = Instant::now();
        let calls: Vec<_> = (0..64)
            .map(|_| {
                rt.spawn(async {
                    hwsched::spawn_blocking(|| thread::sleep(Duration::from_millis(50)))
                        .await
                        .unwrap()
                })
            })
            .collect();
        let before = ticks.load(Ordering::SeqCst);
        thread::sleep(Duration::from_millis(300));
        let during = ticks.load(Ordering::SeqCst) - before;
        for c in calls {
            rt.block_on(c).unwrap();
        }
        let took = t0.elapsed();
        stop.store(true, Ordering::SeqCst);
        ticker.join().unwrap();
        drop(counter);
        // 300 ms at one tick per 5 ms is 60; within 2x of the period is 30.
        assert!(
            during >= 30,
            "the 5 ms ticker ticked {during} times in 300 ms while 64 blocking calls ran \
             (they took {took:?})"
        );
        let s = rt.stats();
        assert!(
            s.blocking_threads >= 2,
            "the pool grew: {}",
            s.blocking_threads
        );
    });
}

#[test]
fn the_blocking_pool_honours_its_limit_and_shrinks_after_keep_alive() {
    with_timeout(60, "blocking_pool_limit", || {
        let rt = Runtime::builder()
            .worker_threads(2)
            .max_blocking_threads(4)
            .thread_keep_alive(Duration::from_millis(100))
            .build()
            .unwrap();
        let now = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..16)
            .map(|_| {
                let (now, peak) = (now.clone(), peak.clone());
                rt.spawn_blocking(move || {
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(n, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(20));
                    now.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        assert!(rt.stats().blocking_threads <= 4);
        for h in hs {
            rt.block_on(h).unwrap();
        }
        let p = peak.load(Ordering::SeqCst);
        assert!(
            (2..=4).contains(&p),
            "peak concurrency {p} with a limit of 4"
        );
        assert!(rt.stats().blocking_threads <= 4);
        // Idle threads exit after the keep-alive.
        let t0 = Instant::now();
        while rt.stats().blocking_threads > 0 && t0.elapsed() < Duration::from_secs(10) {
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            rt.stats().blocking_threads,
            0,
            "the pool shrank after keep-alive"
        );
    });
}

#[test]
fn a_blocking_panic_reaches_the_handle_and_the_context_is_the_runtime() {
    with_timeout(30, "blocking_panic_context", || {
        let rt = rt(2);
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let r = rt.block_on(rt.spawn_blocking(|| -> u32 { panic!("blocking boom") }));
        std::panic::set_hook(prev);
        match r {
            Err(JoinError::Panicked(p)) => {
                assert_eq!(p.message(), Some("blocking boom"))
            }
            other => panic!("expected Panicked, got {other:?}"),
        }
        // Handle::current and hwsched::spawn work inside the closure.
        let v = rt
            .block_on(rt.spawn_blocking(|| {
                let h = Handle::current();
                h.block_on(hwsched::spawn(async { 41 })).unwrap() + 1
            }))
            .unwrap();
        assert_eq!(v, 42);
    });
}

#[test]
fn shutdown_timeout_reports_a_blocking_call_that_outlives_it() {
    // A running closure blocked until after the shutdown returns: the
    // shutdown waits for it up to its timeout, then says it did not join
    // everything (and returns: the closure is left to finish on its own).
    with_timeout(60, "blocking_outlives_shutdown", || {
        let rt = rt(1);
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let _call = rt.spawn_blocking(move || {
            started_tx.send(()).unwrap();
            let _ = release_rx.recv();
            let _ = done_tx.send(());
        });
        started_rx.recv().unwrap();
        assert!(
            !rt.shutdown_timeout(Duration::from_millis(50)),
            "shutdown_timeout reported everything joined while a blocking call still ran"
        );
        release_tx.send(()).unwrap();
        done_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the released call returned");
    });
}

#[test]
fn shutdown_cancels_queued_blocking_calls_and_waits_for_running_ones() {
    with_timeout(60, "blocking_shutdown", || {
        let rt = Runtime::builder()
            .worker_threads(1)
            .max_blocking_threads(1)
            .build()
            .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let r = ran.clone();
        // The running call holds the pool's one thread until released.
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let running = rt.spawn_blocking(move || {
            started_tx.send(()).unwrap();
            release_rx.recv_timeout(Duration::from_secs(30)).unwrap();
            r.fetch_add(1, Ordering::SeqCst);
            7
        });
        started_rx.recv().unwrap();
        // With one pool thread busy, these wait in the queue.
        let queued: Vec<_> = (0..5)
            .map(|_| {
                let r = ran.clone();
                rt.spawn_blocking(move || {
                    r.fetch_add(1, Ordering::SeqCst);
                    0
                })
            })
            .collect();
        let shutdown = thread::spawn(move || rt.shutdown_timeout(Duration::from_secs(10)));
        // The shutdown cancels the queued calls, then waits for the running one.
        for q in queued {
            assert!(matches!(block_on_plain(q), Err(JoinError::Cancelled)));
        }
        assert!(
            !shutdown.is_finished(),
            "the shutdown waits for the running call"
        );
        release_tx.send(()).unwrap();
        assert!(shutdown.join().unwrap(), "everything joined");
        assert_eq!(ran.load(Ordering::SeqCst), 1, "only the running call ran");
        assert_eq!(
            block_on_plain(running).unwrap(),
            7,
            "the running call completed"
        );
    });
}

#[cfg(target_os = "linux")]
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_blocking_thread_runs_on_its_callers_numa_node() {
    with_timeout(30, "blocking_affinity", || {
        // On this machine (one NUMA node) the node is every allowed CPU.
        let rt = rt(2);
        let all = allowed_cpus();
        let seen = rt
            .block_on(rt.spawn(async { hwsched::spawn_blocking(allowed_cpus).await.unwrap() }))
            .unwrap();
        assert_eq!(seen, all, "a pool thread's CPU set is its caller's node's");
    });
}

// ---------------------------------------------------------------------------
// Shutdown with blocking closures that wait: pending tasks are cancelled
// before the running closures are waited for, and a `spawn_blocking` made
// during shutdown resolves `Cancelled` at once.
// ---------------------------------------------------------------------------

/// How long a drop that should return at once may take before the test
/// calls it a hang: a liveness bound, far above the milliseconds it takes
/// (printed by each test), so that a loaded machine does not fail it.
const DROP_BOUND: Duration = Duration::from_secs(5);

/// Drops `rt` on another thread; panics, naming `what`, if the drop has
/// not returned within [`DROP_BOUND`] (the thread is left hanging).
/// Returns how long it took.
fn drop_returns(rt: Runtime, what: &str) -> Duration {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let t0 = Instant::now();
        drop(rt);
        let _ = tx.send(t0.elapsed());
    });
    let took = rx.recv_timeout(DROP_BOUND).unwrap_or_else(|_| {
        panic!("{what}: dropping the runtime did not return within {DROP_BOUND:?}")
    });
    println!("{what}: the drop took {took:?}");
    took
}

/// Spawns a task that signals its first poll, then waits forever holding
/// `held`; returns its handle once it has been polled (so it is pending on
/// a waker, not queued).
fn pending_task_holding<H: Send + 'static>(rt: &Runtime, held: H) -> hwsched::JoinHandle<()> {
    let (polled_tx, polled_rx) = mpsc::channel::<()>();
    let h = rt.spawn(async move {
        let _held = held;
        let _ = polled_tx.send(());
        std::future::pending::<()>().await
    });
    polled_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the task was polled");
    h
}

#[test]
fn shutdown_cancels_the_task_a_blocking_closure_waits_on() {
    with_timeout(60, "shutdown_cancels_awaited_task", || {
        // A closure draining a channel whose sender lives in a task.
        let rt = self::rt(2);
        let (tx, rx) = mpsc::channel::<u32>();
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let (seen_tx, seen_rx) = mpsc::channel();
        let _task = pending_task_holding(&rt, tx);
        let _closure = rt.spawn_blocking(move || {
            started_tx.send(()).unwrap();
            // Ends when every sender is gone: the task was cancelled.
            let got: Vec<u32> = rx.iter().collect();
            seen_tx.send(got).unwrap();
        });
        started_rx.recv().unwrap();
        drop_returns(rt, "a closure draining a channel of a task");
        assert_eq!(
            seen_rx.recv_timeout(DROP_BOUND),
            Ok(vec![]),
            "the closure saw the sender dropped"
        );

        // A closure that awaits a task's handle with `Handle::block_on`.
        let rt = self::rt(2);
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let (seen_tx, seen_rx) = mpsc::channel();
        let task = pending_task_holding(&rt, ());
        let _closure = rt.spawn_blocking(move || {
            started_tx.send(()).unwrap();
            let r = Handle::current().block_on(task);
            seen_tx.send(r.map_err(|e| e.is_cancelled())).unwrap();
        });
        started_rx.recv().unwrap();
        drop_returns(rt, "a closure blocking on a task's handle");
        assert_eq!(
            seen_rx.recv_timeout(DROP_BOUND),
            Ok(Err(true)),
            "the closure saw its task Cancelled"
        );

        // And with a timeout: it returns `true` (everything joined), at once.
        let rt = self::rt(2);
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let task = pending_task_holding(&rt, ());
        let _closure = rt.spawn_blocking(move || {
            started_tx.send(()).unwrap();
            Handle::current().block_on(task).is_err()
        });
        started_rx.recv().unwrap();
        assert!(
            rt.shutdown_timeout(Duration::from_secs(30)),
            "shutdown_timeout joined the blocking thread"
        );
    });
}

/// Blocks until `handle`'s runtime has started to shut down: a spawn then
/// resolves `Cancelled` at once.
fn wait_for_shutdown(handle: &Handle) {
    loop {
        match handle.block_on(handle.spawn(async {})) {
            Ok(()) => thread::sleep(Duration::from_millis(1)),
            Err(e) => {
                assert!(e.is_cancelled(), "{e:?}");
                return;
            }
        }
    }
}

#[test]
fn shutdown_cancels_spawn_blocking_from_a_running_closure() {
    with_timeout(60, "shutdown_cancels_nested_blocking", || {
        let rt = rt(2);
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let (seen_tx, seen_rx) = mpsc::channel();
        let _closure = rt.spawn_blocking(move || {
            let handle = Handle::current();
            started_tx.send(()).unwrap();
            wait_for_shutdown(&handle);
            // The runtime shuts down: the nested call resolves at once.
            let r = handle.block_on(handle.spawn_blocking(|| 7));
            seen_tx.send(r.map_err(|e| e.is_cancelled())).unwrap();
        });
        started_rx.recv().unwrap();
        drop_returns(rt, "a closure waiting on a nested spawn_blocking");
        assert_eq!(
            seen_rx.recv_timeout(DROP_BOUND),
            Ok(Err(true)),
            "the nested spawn_blocking resolved Cancelled"
        );
    });
}

#[test]
fn shutdown_cancels_spawn_blocking_from_a_destructor_it_runs() {
    with_timeout(60, "shutdown_cancels_blocking_in_drop", || {
        /// Waits, in its `Drop`, for a `spawn_blocking` on the current
        /// runtime, and reports what it got.
        struct WaitsOnBlocking(mpsc::Sender<Result<u32, bool>>);
        impl Drop for WaitsOnBlocking {
            fn drop(&mut self) {
                let handle = Handle::current();
                let r = handle.block_on(handle.spawn_blocking(|| 7));
                let _ = self.0.send(r.map_err(|e| e.is_cancelled()));
            }
        }
        let rt = rt(2);
        let (seen_tx, seen_rx) = mpsc::channel();
        let _task = pending_task_holding(&rt, WaitsOnBlocking(seen_tx));
        drop_returns(rt, "a destructor waiting on spawn_blocking");
        assert_eq!(
            seen_rx.recv_timeout(DROP_BOUND),
            Ok(Err(true)),
            "the destructor's spawn_blocking resolved Cancelled"
        );
    });
}

// ---------------------------------------------------------------------------
// JoinSet at any size
// ---------------------------------------------------------------------------

#[test]
fn join_set_reverse_order_64k_completes() {
    // 65,536 tasks that finish one at a time, the last spawned first: each
    // `join_next` returns exactly the task just released. A set that looks
    // at every task per poll needs 2^31 handle polls here (minutes); the
    // ready list needs one per wake. No time is asserted: the watchdog
    // only turns a hang into a failure.
    with_timeout(600, "join_set_reverse_64k", || {
        const N: usize = 1 << 16;
        let rt = rt(2);
        let order = rt
            .block_on(rt.spawn(async {
                let mut set = JoinSet::new();
                let mut release = Vec::with_capacity(N);
                for i in 0..N {
                    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                    release.push(tx);
                    set.spawn(async move {
                        rx.await.expect("released");
                        i
                    });
                }
                assert_eq!(set.len(), N);
                let mut order = Vec::with_capacity(N);
                while let Some(tx) = release.pop() {
                    tx.send(()).expect("the task waits");
                    let i = set.join_next().await.expect("a task").expect("its output");
                    order.push(i);
                    assert_eq!(set.len(), release.len());
                }
                assert!(set.join_next().await.is_none());
                assert!(set.is_empty());
                order
            }))
            .unwrap();
        assert!(
            order.iter().copied().eq((0..N).rev()),
            "join_next returned the tasks in the order they finished"
        );
    });
}

#[test]
fn join_set_reuses_slots_and_keeps_len_and_abort_semantics() {
    // Tasks released in a scrambled order while new ones are spawned into
    // the slots the joined ones freed; some aborted. Every `join_next`
    // returns a task that has finished (the one just released, or an
    // aborted one as `Cancelled`), and `len` counts what is left.
    with_timeout(120, "join_set_slots", || {
        let rt = rt(2);
        rt.block_on(rt.spawn(async {
            let mut set = JoinSet::new();
            let mut release = std::collections::HashMap::new();
            let mut next = 0u64;
            // Senders of aborted tasks, kept so that no task sees its
            // channel closed.
            let mut kept = Vec::new();
            let spawn = |set: &mut JoinSet<u64>,
                         release: &mut std::collections::HashMap<u64, _>,
                         next: &mut u64| {
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                let i = *next;
                *next += 1;
                let abort = set.spawn(async move {
                    rx.await.expect("released");
                    i
                });
                release.insert(i, (tx, abort));
            };
            for _ in 0..1_000 {
                spawn(&mut set, &mut release, &mut next);
            }
            let mut x = 0x2545_F491_4F6C_DD1Du64;
            let mut joined = 0;
            while !release.is_empty() {
                // A scrambled pick among the tasks still waiting.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let mut keys: Vec<u64> = release.keys().copied().collect();
                keys.sort_unstable();
                let i = keys[(x % keys.len() as u64) as usize];
                let (tx, abort) = release.remove(&i).unwrap();
                if i % 7 == 0 {
                    abort.abort();
                    kept.push(tx);
                    let r = set.join_next().await.expect("a task");
                    assert!(matches!(r, Err(JoinError::Cancelled)), "{i}: {r:?}");
                } else {
                    tx.send(()).unwrap();
                    assert_eq!(set.join_next().await.unwrap().unwrap(), i);
                }
                joined += 1;
                assert_eq!(set.len(), release.len());
                if joined % 3 == 0 && next < 2_000 {
                    // Into a slot a joined task freed.
                    spawn(&mut set, &mut release, &mut next);
                    assert_eq!(set.len(), release.len());
                }
            }
            assert!(set.join_next().await.is_none());
            assert!(set.is_empty());
        }))
        .unwrap();
    });
}
