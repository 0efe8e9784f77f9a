//! The task layer's promises, tested so that a broken one fails (with a
//! message) rather than hangs (`src/task.rs`, `src/runtime/block_on.rs`,
//! `src/runtime/join_set.rs`; the loom models of `loom-tests/tests/task_layer.rs`
//! check the same promises in every interleaving of a small model):
//!
//! - **Drops**: each output and each payload (the future, with what it
//!   captured) is dropped exactly once on every path: completed and
//!   joined, completed with the handle dropped, detached, aborted before
//!   its first poll, while pending and after completion, a poll that
//!   returns a value while the future's drop panics, the runtime shut down
//!   with tasks waiting, queued and finished, a spawn after shutdown,
//!   `spawn_blocking` and `JoinSet`; and the runtime itself is freed once
//!   its last handle is gone (no task allocation kept by the registry).
//! - **Abort**: a task is not polled after its abort is observed: aborted
//!   from another thread while a wake races it, at most one poll begins
//!   after `abort` returned (one the worker had committed to); aborted from
//!   inside its own poll, never again.
//! - **Wakes**: a `JoinHandle` awaited from another thread (or another
//!   runtime) is woken by the completion; `block_on` polls again exactly
//!   when woken, whatever the thread's park token says, and a wake from
//!   another thread racing its sleep is never lost; `JoinSet::join_next`
//!   is woken by each completion.
//!
//! Every test runs under a watchdog ([`with_timeout`]), and each wait
//! inside has its own deadline that fails naming what it waited for.
//! Counters and flags are `SeqCst`: test bookkeeping, not what is tested.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, Once};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use hwsched::{AbortHandle, JoinError, JoinHandle, JoinSet, Runtime};

mod common;
use common::with_timeout;

/// Deadline of each wait inside a test.
const DEADLINE: Duration = Duration::from_secs(20);

/// Panics whose message contains this are intentional; the hook installed
/// by [`quiet_intentional_panics`] does not print them.
const QUIET: &str = "[intentional test panic]";

fn quiet_intentional_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let p = info.payload();
            let quiet = p.downcast_ref::<&str>().is_some_and(|s| s.contains(QUIET))
                || p.downcast_ref::<String>()
                    .is_some_and(|s| s.contains(QUIET));
            if !quiet {
                prev(info);
            }
        }));
    });
}

fn runtime(workers: usize) -> Runtime {
    Runtime::builder()
        .worker_threads(workers)
        .build()
        .expect("build runtime")
}

/// Waits until `cond` holds; fails naming `what` after [`DEADLINE`].
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < DEADLINE, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// Awaits `h` on a thread of its own (a plain thread waker, no runtime);
/// fails naming `what` if it does not resolve within [`DEADLINE`].
fn join_within<T: Send + 'static>(h: JoinHandle<T>, what: &str) -> Result<T, JoinError> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(common::block_on_plain(h));
    });
    rx.recv_timeout(DEADLINE)
        .unwrap_or_else(|_| panic!("{what}: the JoinHandle did not resolve in {DEADLINE:?}"))
}

/// What happened to one task: polls, polls after its abort returned, drops
/// of its payload and of its output.
#[derive(Default)]
struct Probe {
    polls: AtomicUsize,
    polls_after_abort: AtomicUsize,
    abort_returned: AtomicBool,
    payload_drops: AtomicUsize,
    output_drops: AtomicUsize,
}

impl Probe {
    /// Leaked, as [`Gate::new`]: a slip that drops what holds it twice then
    /// counts two drops, and the test fails with its message, instead of
    /// freeing memory twice and aborting the whole test binary.
    fn new() -> &'static Probe {
        Box::leak(Box::default())
    }
    fn polls(&self) -> usize {
        self.polls.load(Ordering::SeqCst)
    }
    fn late_polls(&self) -> usize {
        self.polls_after_abort.load(Ordering::SeqCst)
    }
    fn payloads(&self) -> usize {
        self.payload_drops.load(Ordering::SeqCst)
    }
    fn outputs(&self) -> usize {
        self.output_drops.load(Ordering::SeqCst)
    }
    /// Marks that an abort of the task returned.
    fn aborted(&self) {
        self.abort_returned.store(true, Ordering::SeqCst);
    }
    /// The end of a path: payload dropped once, output `outputs` times.
    fn check(&self, path: &str, outputs: usize) {
        assert_eq!(
            self.payloads(),
            1,
            "{path}: payload dropped {} times",
            self.payloads()
        );
        assert_eq!(
            self.outputs(),
            outputs,
            "{path}: output dropped {} times, expected {outputs}",
            self.outputs()
        );
    }
}

/// Part of a task's future (what it captured): counts its drop.
struct Payload(&'static Probe);

impl Drop for Payload {
    fn drop(&mut self) {
        self.0.payload_drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// A task's output: counts its drop.
struct Out(&'static Probe, u32);

impl Drop for Out {
    fn drop(&mut self) {
        self.0.output_drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// A one-shot gate the task waits on: its flag and the waker of its last
/// poll. Waking without opening is a wake that brings nothing.
#[derive(Default)]
struct Gate {
    open: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Gate {
    /// Leaked (see [`Probe::new`]).
    fn new() -> &'static Gate {
        Box::leak(Box::default())
    }
    fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
        self.wake();
    }
    fn wake(&self) {
        let w = self.waker.lock().unwrap().clone();
        if let Some(w) = w {
            w.wake();
        }
    }
    fn has_waker(&self) -> bool {
        self.waker.lock().unwrap().is_some()
    }
}

/// The probed task: counts its polls (and those that began after its
/// abort returned), waits on its gate, then yields an [`Out`]. With
/// `abort_self`, its first poll aborts its own task (and `ready_then`
/// makes that poll return its output anyway).
struct Probed {
    gate: &'static Gate,
    payload: Payload,
    abort_self: Option<Arc<Mutex<Option<AbortHandle>>>>,
    ready_then: bool,
}

impl Probed {
    fn new(gate: &'static Gate, probe: &'static Probe) -> Probed {
        Probed {
            gate,
            payload: Payload(probe),
            abort_self: None,
            ready_then: false,
        }
    }
}

impl Future for Probed {
    type Output = Out;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Out> {
        let probe = self.payload.0;
        probe.polls.fetch_add(1, Ordering::SeqCst);
        if probe.abort_returned.load(Ordering::SeqCst) {
            probe.polls_after_abort.fetch_add(1, Ordering::SeqCst);
        }
        if let Some(cell) = self.abort_self.take() {
            let h = cell
                .lock()
                .unwrap()
                .take()
                .expect("the task's abort handle");
            h.abort();
            probe.aborted();
            if self.ready_then {
                return Poll::Ready(Out(probe, 42));
            }
        }
        let mut w = self.gate.waker.lock().unwrap();
        if self.gate.open.load(Ordering::SeqCst) {
            return Poll::Ready(Out(probe, 42));
        }
        *w = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// A worker blocked until the returned sender is dropped or sends (so
/// that what is spawned next waits, unpolled, in its queue).
fn block_worker(rt: &Runtime) -> (mpsc::Sender<()>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel();
    let h = rt.spawn(async move {
        started_tx.send(()).unwrap();
        let _ = rx.recv();
    });
    started_rx
        .recv_timeout(DEADLINE)
        .expect("the blocker task never started");
    (tx, h)
}

// ---------------------------------------------------------------------------
// Drops: every path
// ---------------------------------------------------------------------------

#[test]
fn completed_and_joined_drops_each_once() {
    with_timeout(60, "completed_and_joined_drops_each_once", || {
        let rt = runtime(2);
        let (probe, gate) = (Probe::new(), Gate::new());
        let h = rt.spawn(Probed::new(gate, probe));
        wait_until("the first poll", || gate.has_waker());
        gate.open();
        let out = join_within(h, "completed and joined").expect("the task's output");
        assert_eq!(out.1, 42);
        assert_eq!(
            probe.payloads(),
            1,
            "payload not dropped once at completion"
        );
        assert_eq!(
            probe.outputs(),
            0,
            "the joined output was dropped by hwsched"
        );
        drop(out);
        probe.check("completed and joined", 1);

        // Joined inside the runtime (the handle awaited by a task).
        let (probe, gate) = (Probe::new(), Gate::new());
        let inner = rt.spawn(Probed::new(gate, probe));
        let outer = rt.spawn(async move { inner.await.map(|o| o.1) });
        gate.open();
        assert_eq!(join_within(outer, "joined by a task").unwrap().unwrap(), 42);
        probe.check("joined by a task", 1);

        // A panic's payload is the user's: `into_panic`, dropped once.
        quiet_intentional_panics_payload();
        let probe = Probe::new();
        let p = Out(probe, 0);
        let h = rt.spawn(async move { explode(p) });
        let e = join_within(h, "a panicking task").expect_err("Panicked");
        let payload = e.into_panic();
        assert_eq!(
            probe.outputs(),
            0,
            "the panic payload was dropped by hwsched"
        );
        drop(payload);
        assert_eq!(probe.outputs(), 1, "the panic payload was not dropped once");
    });
}

/// Panics with `p` as the payload.
fn explode(p: Out) -> u8 {
    std::panic::panic_any(p)
}

/// The panic hook also stays quiet for an [`Out`] payload.
fn quiet_intentional_panics_payload() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        quiet_intentional_panics();
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<Out>() {
                prev(info);
            }
        }));
    });
}

#[test]
fn completed_with_the_handle_dropped_drops_each_once() {
    with_timeout(60, "completed_with_the_handle_dropped", || {
        let rt = runtime(2);
        let (probe, gate) = (Probe::new(), Gate::new());
        let h = rt.spawn(Probed::new(gate, probe));
        gate.open();
        wait_until("the task to finish", || h.is_finished());
        assert_eq!(
            probe.outputs(),
            0,
            "the output was dropped before its handle"
        );
        drop(h);
        probe.check("completed, handle dropped", 1);

        // Aborted after completion: the output is kept, then dropped once
        // with the handle, or joined.
        let (probe, gate) = (Probe::new(), Gate::new());
        let h = rt.spawn(Probed::new(gate, probe));
        gate.open();
        wait_until("the task to finish", || h.is_finished());
        h.abort();
        drop(h);
        probe.check("completed, aborted, handle dropped", 1);
        let (probe, gate) = (Probe::new(), Gate::new());
        let h = rt.spawn(Probed::new(gate, probe));
        gate.open();
        wait_until("the task to finish", || h.is_finished());
        h.abort();
        let out = join_within(h, "completed, aborted, joined")
            .expect("an abort after completion keeps the output");
        drop(out);
        probe.check("completed, aborted, joined", 1);
    });
}

#[test]
fn a_detached_task_runs_and_drops_each_once() {
    with_timeout(60, "a_detached_task_runs_and_drops_each_once", || {
        let rt = runtime(2);
        let (probe, gate) = (Probe::new(), Gate::new());
        let h = rt.spawn(Probed::new(gate, probe));
        wait_until("the first poll", || gate.has_waker());
        drop(h);
        gate.open();
        wait_until("the detached task to complete (its output dropped)", || {
            probe.outputs() >= 1
        });
        probe.check("detached", 1);
        assert_eq!(probe.polls(), 2, "a detached task: two polls");

        // Detached before its first poll.
        let (probe, gate) = (Probe::new(), Gate::new());
        gate.open();
        drop(rt.spawn(Probed::new(gate, probe)));
        wait_until("the detached task to complete (its output dropped)", || {
            probe.outputs() >= 1
        });
        probe.check("detached before its first poll", 1);
    });
}

#[test]
fn aborted_before_its_first_poll_drops_the_payload_once() {
    with_timeout(60, "aborted_before_its_first_poll", || {
        let rt = runtime(1);
        let (release, blocker) = block_worker(&rt);
        let (probe, gate) = (Probe::new(), Gate::new());
        gate.open();
        let h = rt.spawn(Probed::new(gate, probe));
        h.abort();
        probe.aborted();
        drop(release);
        join_within(blocker, "the blocker").unwrap();
        let r = join_within(h, "aborted before its first poll");
        assert!(matches!(r, Err(JoinError::Cancelled)), "not Cancelled");
        assert_eq!(probe.polls(), 0, "an aborted task was polled");
        probe.check("aborted before its first poll", 0);
    });
}

#[test]
fn aborted_while_pending_drops_the_payload_once_and_is_not_polled_again() {
    with_timeout(60, "aborted_while_pending", || {
        let rt = runtime(2);
        let (probe, gate) = (Probe::new(), Gate::new());
        let h = rt.spawn(Probed::new(gate, probe));
        wait_until("the first poll", || gate.has_waker());
        h.abort();
        probe.aborted();
        let r = join_within(h, "aborted while pending");
        assert!(matches!(r, Err(JoinError::Cancelled)), "not Cancelled");
        // Nothing else woke it: no poll had been committed to when the
        // abort came, so none may follow it.
        assert_eq!(probe.late_polls(), 0, "polled after its abort returned");
        probe.check("aborted while pending", 0);
    });
}

#[test]
fn a_value_superseded_by_a_drop_panic_is_dropped_once() {
    /// Returns an [`Out`] at once; its own drop then panics.
    struct ReadyThenPanicsInDrop(&'static Probe);
    impl Future for ReadyThenPanicsInDrop {
        type Output = Out;
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Out> {
            Poll::Ready(Out(self.0, 1))
        }
    }
    impl Drop for ReadyThenPanicsInDrop {
        fn drop(&mut self) {
            self.0.payload_drops.fetch_add(1, Ordering::SeqCst);
            panic!("{QUIET} future Drop");
        }
    }
    with_timeout(60, "a_value_superseded_by_a_drop_panic", || {
        quiet_intentional_panics();
        let rt = runtime(1);
        let probe = Probe::new();
        let h = rt.spawn(ReadyThenPanicsInDrop(probe));
        let r = join_within(h, "a value superseded by a panic");
        assert!(
            matches!(r, Err(JoinError::Panicked(_))),
            "the drop's panic was lost"
        );
        probe.check("a value superseded by the future's drop panic", 1);
    });
}

#[test]
fn shutdown_drops_waiting_queued_and_finished_tasks_once() {
    with_timeout(60, "shutdown_drops_each_once", || {
        let rt = runtime(1);
        // Waiting (registered), with its gate never opened.
        let waiting: Vec<_> = (0..4)
            .map(|_| {
                let (probe, gate) = (Probe::new(), Gate::new());
                let h = rt.spawn(Probed::new(gate, probe));
                wait_until("the first poll", || gate.has_waker());
                (probe, gate, h)
            })
            .collect();
        // Finished, not joined.
        let finished: Vec<_> = (0..4)
            .map(|_| {
                let (probe, gate) = (Probe::new(), Gate::new());
                gate.open();
                let h = rt.spawn(Probed::new(gate, probe));
                wait_until("the task to finish", || h.is_finished());
                (probe, h)
            })
            .collect();
        // Queued behind a blocked worker: run or dropped, depending on
        // whether the shutdown's announce or the release comes first.
        let (release, blocker) = block_worker(&rt);
        let queued: Vec<_> = (0..4)
            .map(|_| {
                let (probe, gate) = (Probe::new(), Gate::new());
                gate.open();
                let h = rt.spawn(Probed::new(gate, probe));
                (probe, h)
            })
            .collect();
        let handle = rt.handle();
        let releaser = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            drop(release);
        });
        drop(rt);
        releaser.join().unwrap();
        drop(blocker);
        // A spawn after the shutdown: dropped at once, Cancelled.
        let (late, gate) = (Probe::new(), Gate::new());
        gate.open();
        let h = handle.spawn(Probed::new(gate, late));
        assert!(matches!(
            common::block_on_plain(h),
            Err(JoinError::Cancelled)
        ));
        late.check("spawned after shutdown", 0);
        drop(handle);

        for (i, (probe, _gate, h)) in waiting.into_iter().enumerate() {
            assert!(
                matches!(common::block_on_plain(h), Err(JoinError::Cancelled)),
                "waiting task {i}: not Cancelled by the shutdown"
            );
            probe.check(&format!("waiting task {i} at shutdown"), 0);
        }
        for (i, (probe, h)) in finished.into_iter().enumerate() {
            assert_eq!(
                probe.outputs(),
                0,
                "finished task {i}: output dropped early"
            );
            drop(h);
            probe.check(&format!("finished task {i} at shutdown"), 1);
        }
        for (i, (probe, h)) in queued.into_iter().enumerate() {
            let outputs = match common::block_on_plain(h) {
                Ok(out) => {
                    drop(out);
                    1
                }
                Err(e) => {
                    assert!(e.is_cancelled(), "queued task {i}: {e}");
                    0
                }
            };
            probe.check(&format!("queued task {i} at shutdown"), outputs);
        }
    });
}

#[test]
fn spawn_blocking_and_join_set_drop_each_output_once() {
    with_timeout(60, "spawn_blocking_and_join_set", || {
        let rt = runtime(2);
        let probe = Probe::new();
        let p = probe;
        let payload = Payload(probe);
        let h = rt.spawn_blocking(move || {
            let _payload = payload;
            Out(p, 3)
        });
        drop(join_within(h, "spawn_blocking joined").unwrap());
        probe.check("spawn_blocking joined", 1);
        let probe = Probe::new();
        let (p, payload) = (probe, Payload(probe));
        let h = rt.spawn_blocking(move || {
            let _payload = payload;
            Out(p, 3)
        });
        wait_until("the blocking task to finish", || h.is_finished());
        drop(h);
        probe.check("spawn_blocking, handle dropped", 1);

        // JoinSet: outputs taken by join_next, then a set dropped with
        // finished and waiting tasks in it.
        let probes: Vec<_> = (0..6).map(|_| (Probe::new(), Gate::new())).collect();
        let ps: Vec<_> = probes.to_vec();
        rt.block_on(async move {
            let mut set = JoinSet::new();
            for (p, g) in &ps[..3] {
                g.open();
                set.spawn(Probed::new(g, p));
            }
            for _ in 0..3 {
                let out = set.join_next().await.expect("a task").expect("its output");
                drop(out);
            }
            assert!(set.is_empty());
            for (p, g) in &ps[3..5] {
                g.open();
                set.spawn(Probed::new(g, p));
            }
            set.spawn(Probed::new(ps[5].1, ps[5].0)); // waits forever
            for (p, _) in &ps[3..5] {
                while p.polls() == 0 {
                    hwsched::yield_now().await;
                }
            }
            drop(set);
        });
        for (i, (p, _)) in probes.iter().enumerate().take(3) {
            p.check(&format!("JoinSet task {i}, joined"), 1);
        }
        for (i, (p, _)) in probes.iter().enumerate().skip(3).take(2) {
            wait_until("the dropped set's finished tasks to be dropped", || {
                p.outputs() >= 1
            });
            p.check(&format!("JoinSet task {i}, finished, set dropped"), 1);
        }
        wait_until("the dropped set's waiting task to be aborted", || {
            probes[5].0.payloads() >= 1
        });
        probes[5].0.check("JoinSet task 5, waiting, set dropped", 0);
    });
}

#[test]
fn the_runtime_is_freed_once_its_tasks_and_handles_are_gone() {
    /// Counts its drop: the `on_thread_start` hook's closure holds it, and
    /// the runtime's shared state holds the hook.
    struct Freed(Arc<AtomicBool>);
    impl Drop for Freed {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    with_timeout(60, "the_runtime_is_freed", || {
        let freed = Arc::new(AtomicBool::new(false));
        let f = Freed(freed.clone());
        let rt = Runtime::builder()
            .worker_threads(2)
            .on_thread_start(move || {
                let _ = &f;
            })
            .build()
            .expect("build");
        // Tasks that registered in the registry (returned Pending), then
        // completed, were aborted, or are left waiting for the shutdown.
        let (mut keep, mut gates) = (Vec::new(), Vec::new());
        for i in 0..3 {
            let (probe, gate) = (Probe::new(), Gate::new());
            gates.push(gate);
            let h = rt.spawn(Probed::new(gate, probe));
            wait_until("the first poll", || gate.has_waker());
            match i {
                0 => {
                    gate.open();
                    drop(join_within(h, "a registered task").unwrap());
                }
                1 => {
                    h.abort();
                    assert!(join_within(h, "an aborted task").is_err());
                }
                _ => keep.push((probe, gate, h)),
            }
        }
        drop(rt);
        drop(keep);
        // The gates are leaked (`Probe::new` says why): drop the wakers
        // they still hold, each a reference on its task.
        for g in gates {
            g.waker.lock().unwrap().take();
        }
        wait_until(
            "the runtime's shared state to be freed (a task allocation kept alive?)",
            || freed.load(Ordering::SeqCst),
        );
    });
}

// ---------------------------------------------------------------------------
// Abort: never polled after it is observed
// ---------------------------------------------------------------------------

#[test]
fn an_abort_racing_a_wake_allows_at_most_one_more_poll() {
    with_timeout(120, "an_abort_racing_a_wake", || {
        let rt = runtime(2);
        for round in 0..200 {
            let (probe, gate) = (Probe::new(), Gate::new());
            let h = rt.spawn(Probed::new(gate, probe));
            wait_until("the first poll", || gate.has_waker());
            let abort = h.abort_handle();
            let g = gate;
            let waker = thread::spawn(move || {
                for _ in 0..3 {
                    g.wake(); // brings nothing: the gate stays shut
                    thread::yield_now();
                }
            });
            if round % 2 == 0 {
                thread::yield_now();
            }
            abort.abort();
            probe.aborted();
            let t0 = Instant::now();
            while !h.is_finished() {
                assert!(
                    probe.late_polls() <= 1,
                    "round {round}: polled {} times after its abort returned",
                    probe.late_polls()
                );
                assert!(t0.elapsed() < DEADLINE, "round {round}: the abort was lost");
                thread::yield_now();
            }
            waker.join().unwrap();
            let r = join_within(h, "an aborted task");
            assert!(
                matches!(r, Err(JoinError::Cancelled)),
                "round {round}: not Cancelled"
            );
            assert!(
                probe.late_polls() <= 1,
                "round {round}: polled {} times after its abort returned",
                probe.late_polls()
            );
            probe.check(&format!("round {round}: aborted racing a wake"), 0);
        }
    });
}

#[test]
fn a_task_that_aborts_itself_is_not_polled_again() {
    with_timeout(120, "a_task_that_aborts_itself", || {
        let rt = runtime(2);
        for round in 0..200 {
            let ready_then = round % 4 == 3;
            let (probe, gate) = (Probe::new(), Gate::new());
            let cell = Arc::new(Mutex::new(None));
            let mut fut = Probed::new(gate, probe);
            fut.abort_self = Some(cell.clone());
            fut.ready_then = ready_then;
            // The handle goes into the cell before the task can run: the
            // worker is held until then by a lock the future takes.
            let guard = cell.lock().unwrap();
            let h = rt.spawn(fut);
            let mut guard = guard;
            *guard = Some(h.abort_handle());
            drop(guard);
            // Another thread wakes it while it aborts itself.
            let g = gate;
            let waker = thread::spawn(move || {
                for _ in 0..3 {
                    g.wake();
                    thread::yield_now();
                }
            });
            let r = join_within(h, "a task that aborted itself");
            waker.join().unwrap();
            if ready_then {
                let out = r.expect("a task that aborted itself and returned keeps its output");
                drop(out);
                probe.check(&format!("round {round}: aborted itself, then Ready"), 1);
            } else {
                assert!(
                    matches!(r, Err(JoinError::Cancelled)),
                    "round {round}: not Cancelled"
                );
                probe.check(&format!("round {round}: aborted itself"), 0);
            }
            assert_eq!(
                probe.polls(),
                1,
                "round {round}: polled again after aborting itself in its first poll"
            );
        }
    });
}

// ---------------------------------------------------------------------------
// Wakes: JoinHandle, block_on, JoinSet
// ---------------------------------------------------------------------------

/// A waker that records that it was woken and unparks its thread.
struct Flag(AtomicBool, thread::Thread);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
        self.1.unpark();
    }
}

#[test]
fn a_join_handle_awaited_on_another_thread_is_woken_by_completion() {
    with_timeout(120, "a_join_handle_awaited_on_another_thread", || {
        let rt = runtime(2);
        // Ordered: the awaiter's first poll is Pending (the gate is shut)
        // and registers its waker; then the gate opens and the task
        // completes: the waker must be woken.
        for round in 0..50 {
            let (probe, gate) = (Probe::new(), Gate::new());
            let mut h = rt.spawn(Probed::new(gate, probe));
            let (registered_tx, registered_rx) = mpsc::channel();
            let (done_tx, done_rx) = mpsc::channel();
            thread::spawn(move || {
                let flag = Arc::new(Flag(AtomicBool::new(false), thread::current()));
                let waker = Waker::from(flag.clone());
                let mut cx = Context::from_waker(&waker);
                assert!(Pin::new(&mut h).poll(&mut cx).is_pending());
                registered_tx.send(()).unwrap();
                let t0 = Instant::now();
                while !flag.0.swap(false, Ordering::SeqCst) {
                    if t0.elapsed() > DEADLINE {
                        let _ = done_tx.send(Err("the JoinHandle's waker was never woken"));
                        return;
                    }
                    thread::park_timeout(Duration::from_millis(10));
                }
                let r = match Pin::new(&mut h).poll(&mut cx) {
                    Poll::Ready(Ok(out)) => {
                        drop(out);
                        Ok(())
                    }
                    Poll::Ready(Err(_)) => Err("the task did not complete"),
                    Poll::Pending => Err("woken, but the handle is still Pending"),
                };
                let _ = done_tx.send(r);
            });
            registered_rx
                .recv_timeout(DEADLINE)
                .expect("the awaiter's first poll");
            gate.open();
            let r = done_rx
                .recv_timeout(DEADLINE + Duration::from_secs(5))
                .expect("the awaiter thread");
            if let Err(why) = r {
                panic!("round {round}: {why}");
            }
            probe.check(&format!("round {round}: awaited on another thread"), 1);
        }
        // Racing: the task completes while the other thread first polls.
        for round in 0..200 {
            let probe = Probe::new();
            let p = probe;
            let h = rt.spawn(async move { Out(p, 7) });
            let out = join_within(h, &format!("racing round {round}")).expect("output");
            drop(out);
            assert_eq!(probe.outputs(), 1);
        }
        // Awaited from another runtime: by its block_on and by its task.
        let other = runtime(1);
        for round in 0..50 {
            let gate = Gate::new();
            let probe = Probe::new();
            let h = rt.spawn(Probed::new(gate, probe));
            let g = gate;
            let opener = thread::spawn(move || {
                thread::yield_now();
                g.open();
            });
            let r = if round % 2 == 0 {
                let (tx, rx) = mpsc::channel();
                let oh = other.handle();
                thread::spawn(move || {
                    let _ = tx.send(oh.block_on(h).map(|o| o.1));
                });
                rx.recv_timeout(DEADLINE).unwrap_or_else(|_| {
                    panic!("round {round}: another runtime's block_on never woke")
                })
            } else {
                let t = other.spawn(async move { h.await.map(|o| o.1) });
                join_within(
                    t,
                    &format!("round {round}: awaited by another runtime's task"),
                )
                .expect("the awaiting task")
            };
            assert_eq!(r.expect("output"), 42);
            opener.join().unwrap();
        }
    });
}

#[test]
fn block_on_polls_again_only_when_woken() {
    /// Pending for `rounds` rounds; each round leaves a park token on the
    /// polling thread (as code that consumed or left one would) and has a
    /// thread wake it a little later. Counts polls; a poll before the
    /// round's wake is spurious.
    struct Rounds {
        left: usize,
        woken: Arc<AtomicBool>,
        polls: Arc<AtomicUsize>,
        spurious: Arc<AtomicUsize>,
    }
    impl Future for Rounds {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            let first = self.polls.fetch_add(1, Ordering::SeqCst) == 0;
            if !first && !self.woken.swap(false, Ordering::SeqCst) {
                self.spurious.fetch_add(1, Ordering::SeqCst);
                return Poll::Pending;
            }
            if self.left == 0 {
                return Poll::Ready(());
            }
            self.left -= 1;
            thread::current().unpark();
            let (w, woken) = (cx.waker().clone(), self.woken.clone());
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(5));
                woken.store(true, Ordering::SeqCst);
                w.wake();
            });
            Poll::Pending
        }
    }
    with_timeout(60, "block_on_polls_again_only_when_woken", || {
        let rt = runtime(1);
        let (polls, spurious) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        rt.block_on(Rounds {
            left: 3,
            woken: Arc::default(),
            polls: polls.clone(),
            spurious: spurious.clone(),
        });
        assert_eq!(
            spurious.load(Ordering::SeqCst),
            0,
            "block_on polled without a wake"
        );
        assert_eq!(polls.load(Ordering::SeqCst), 4, "three wakes, four polls");
    });
}

#[test]
fn block_on_never_loses_a_wake_racing_its_sleep() {
    /// Pending `left` times; each time it sends its waker to a thread that
    /// wakes it at once, racing the blocked thread going to sleep.
    struct Pingy {
        left: usize,
        to_waker: mpsc::Sender<Waker>,
    }
    impl Future for Pingy {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.left == 0 {
                return Poll::Ready(());
            }
            self.left -= 1;
            self.to_waker.send(cx.waker().clone()).unwrap();
            Poll::Pending
        }
    }
    with_timeout(120, "block_on_never_loses_a_wake_racing_its_sleep", || {
        let rt = runtime(1);
        let (tx, rx) = mpsc::channel::<Waker>();
        let waker = thread::spawn(move || {
            for w in rx {
                w.wake();
            }
        });
        let (done_tx, done_rx) = mpsc::channel();
        let h = rt.handle();
        thread::spawn(move || {
            h.block_on(Pingy {
                left: 5000,
                to_waker: tx,
            });
            let _ = done_tx.send(());
        });
        done_rx
            .recv_timeout(Duration::from_secs(90))
            .unwrap_or_else(|_| {
                panic!("block_on did not finish 5000 wakes in 90s: a wake was lost")
            });
        waker.join().unwrap();
    });
}

#[test]
fn join_next_is_woken_by_each_completion() {
    with_timeout(120, "join_next_is_woken_by_each_completion", || {
        let rt = runtime(2);
        const N: usize = 8;
        let gates: Vec<_> = (0..N).map(|_| Gate::new()).collect();
        let probes: Vec<_> = (0..N).map(|_| Probe::new()).collect();
        let (tx, rx) = mpsc::channel();
        let (gs, ps) = (gates.clone(), probes.clone());
        let h = rt.handle();
        thread::spawn(move || {
            h.block_on(async move {
                let mut set = JoinSet::new();
                for (g, p) in gs.iter().zip(&ps) {
                    set.spawn(Probed::new(g, p));
                }
                let mut left = N;
                while let Some(r) = set.join_next().await {
                    left -= 1;
                    let v = r.map(|o| o.1).map_err(|e| e.to_string());
                    if tx.send((v, set.len(), left)).is_err() {
                        return;
                    }
                }
            });
        });
        for (i, g) in gates.iter().enumerate().rev() {
            wait_until("the task's first poll", || g.has_waker());
            g.open();
            let (v, len, left) = rx.recv_timeout(DEADLINE).unwrap_or_else(|_| {
                panic!("join_next did not return after task {i} completed (a lost wake?)")
            });
            assert_eq!(v, Ok(42));
            assert_eq!(len, left, "the set's len is not one less after each join");
        }
        for (i, p) in probes.iter().enumerate() {
            p.check(&format!("JoinSet task {i}"), 1);
        }
    });
}

#[test]
#[should_panic(expected = "JoinHandle polled after it returned Ready")]
fn a_join_handle_polled_after_ready_panics() {
    let rt = runtime(1);
    let mut h = rt.spawn(async { 1u8 });
    let waker = Waker::from(Arc::new(Flag(AtomicBool::new(false), thread::current())));
    let mut cx = Context::from_waker(&waker);
    let t0 = Instant::now();
    while Pin::new(&mut h).poll(&mut cx).is_pending() {
        assert!(t0.elapsed() < DEADLINE, "the task did not complete");
        thread::sleep(Duration::from_millis(1));
    }
    let _ = Pin::new(&mut h).poll(&mut cx);
}
