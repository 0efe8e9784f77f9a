//! Reliability tests: exactly-once under a random workload, shutdown under
//! load, panic storms and panicking destructors, a task that blocks its
//! worker, every build-time `BuildError`, and (ignored, they print numbers)
//! memory per idle task and RSS growth.
//!
//! Every test body runs under [`with_timeout`], so a hang fails the test
//! with a message instead of stalling the suite.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, Once};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use hwsched::{BuildError, IdleMode, JoinError, JoinHandle, Runtime, TopologySource, Tunables};

mod common;
use common::{drive_reactor, with_timeout, with_timeout_alone, BIG};

/// Panics whose message contains this are intentional; the quiet hook does
/// not print them.
const QUIET: &str = "[intentional test panic]";

/// Installs (once, for the whole test binary) a panic hook that hides the
/// intentional panics of these tests and passes every other panic to the
/// previous hook unchanged. Tests run in parallel threads and the hook is
/// process-global, so it is installed once and never swapped back and forth
/// (which could race); for any panic not marked [`QUIET`] it behaves exactly
/// like the hook it wraps.
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

fn synthetic(desc: &str) -> TopologySource {
    TopologySource::Synthetic(desc.to_owned())
}

fn big() -> Runtime {
    let rt = drive_reactor(
        Runtime::builder()
            .topology(synthetic(BIG))
            .build()
            .expect("build 32-worker synthetic runtime"),
    );
    assert_eq!(rt.workers(), 32);
    rt
}

fn system() -> Runtime {
    drive_reactor(Runtime::builder().build().expect("build System runtime"))
}

/// A waker that does nothing (`Waker::noop` is newer than the crate's MSRV).
struct Noop;
impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// The output of a handle whose task is known to be finished or dropped.
fn ready<T>(mut h: JoinHandle<T>) -> Result<T, JoinError> {
    let waker = Waker::from(Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    match Pin::new(&mut h).poll(&mut cx) {
        Poll::Ready(r) => r,
        Poll::Pending => panic!("JoinHandle of a finished or dropped task is still pending"),
    }
}

fn payload_str(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string payload>".to_owned()
    }
}

/// A tiny xorshift generator (no extra dependency).
struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Self {
        let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        r.next_u64();
        r
    }
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// Per-task drop bookkeeping.
struct Book {
    dropped: Vec<AtomicBool>,
    completed: Vec<AtomicBool>,
    drops: AtomicUsize,
    double: AtomicUsize,
}

impl Book {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Book {
            dropped: (0..n).map(|_| AtomicBool::new(false)).collect(),
            completed: (0..n).map(|_| AtomicBool::new(false)).collect(),
            drops: AtomicUsize::new(0),
            double: AtomicUsize::new(0),
        })
    }

    fn guard(self: &Arc<Self>, id: usize) -> DropGuard {
        DropGuard {
            book: self.clone(),
            id,
        }
    }

    /// Every id below `n` dropped exactly once, none above.
    fn check_once(&self, n: usize, what: &str) {
        assert_eq!(
            self.double.load(Ordering::SeqCst),
            0,
            "{what}: a future was dropped twice"
        );
        let missing: Vec<usize> = (0..n)
            .filter(|&i| !self.dropped[i].load(Ordering::SeqCst))
            .take(10)
            .collect();
        assert!(
            missing.is_empty(),
            "{what}: {} of {n} futures never dropped (first: {missing:?})",
            n - self.drops.load(Ordering::SeqCst).min(n)
        );
        assert_eq!(self.drops.load(Ordering::SeqCst), n, "{what}: drop count");
    }
}

struct DropGuard {
    book: Arc<Book>,
    id: usize,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if self.book.dropped[self.id].swap(true, Ordering::SeqCst) {
            self.book.double.fetch_add(1, Ordering::SeqCst);
        }
        self.book.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// Waits (bounded) until every spawned task has been retired.
fn settle(rt: &Runtime, what: &str) {
    let t0 = Instant::now();
    loop {
        let s = rt.stats();
        if s.spawned == s.retired && rt.live_tasks() == 0 {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{what}: stats never settled: spawned {} retired {} live {}",
            s.spawned,
            s.retired,
            rt.live_tasks()
        );
        thread::sleep(Duration::from_millis(1));
    }
}

// ---------------------------------------------------------------------------
// Exactly once under a random workload
// ---------------------------------------------------------------------------

/// Tasks of the exactly-once workload (1,000,000 in debug builds too: about
/// 7 s each on 2 cores).
const EXACTLY_ONCE_TASKS: usize = 1_000_000;

/// Shared state of the random workload.
struct Workload {
    book: Arc<Book>,
    total: usize,
    /// Ids handed out so far (a task exists for each id below it, or is
    /// about to).
    next_id: AtomicUsize,
    /// Tasks whose handle reached the collector.
    registered: AtomicUsize,
    /// Senders of tasks waiting to be woken, taken by other tasks and by a
    /// sweeper thread.
    pool: Mutex<Vec<async_channel::Sender<()>>>,
    handles: async_channel::Sender<(usize, bool, JoinHandle<usize>)>,
    aborts: AtomicUsize,
}

impl Workload {
    fn take_id(&self) -> Option<usize> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        (id < self.total).then_some(id)
    }

    /// Wakes up to `n` waiting tasks.
    fn wake_some(&self, n: usize) {
        for _ in 0..n {
            let s = self.pool.lock().unwrap().pop();
            match s {
                Some(s) => {
                    let _ = s.try_send(());
                }
                None => return,
            }
        }
    }
}

/// One tracked task: random yields, waits for a wake by another task, wakes
/// others, spawns children (some of which it aborts).
fn tracked(w: Arc<Workload>, id: usize) -> impl Future<Output = usize> + Send + 'static {
    let g = w.book.guard(id);
    async move {
        let _g = g;
        let mut rng = Rng::new(id as u64 + 7);
        // Every task wakes one waiter as it starts: wake chains stay inside
        // the runtime.
        w.wake_some(1);
        match rng.below(4) {
            0 => {
                for _ in 0..=rng.below(3) {
                    hwsched::yield_now().await;
                }
            }
            1 => {
                let (tx, rx) = async_channel::bounded::<()>(1);
                w.pool.lock().unwrap().push(tx);
                // The sender is in the pool until someone sends on it.
                rx.recv().await.expect("waiter's sender dropped unsent");
            }
            2 => w.wake_some(2),
            _ => {}
        }
        if rng.one_in(3) {
            for _ in 0..=rng.below(2) {
                let Some(child) = w.take_id() else { break };
                // No await between taking the id and handing over the
                // handle: this task may itself be aborted at any await.
                let h = hwsched::spawn(tracked(w.clone(), child));
                let abort = rng.one_in(16);
                if abort {
                    // Before the child ever ran.
                    h.abort();
                    w.aborts.fetch_add(1, Ordering::Relaxed);
                }
                let _ = w.handles.try_send((child, abort, h));
            }
        }
        if rng.one_in(5) {
            hwsched::yield_now().await;
        }
        w.book.completed[id].store(true, Ordering::SeqCst);
        id
    }
}

fn exactly_once(rt: &Runtime, what: &str) {
    // Tasks spawned before (drive_reactor's timer, with the io feature).
    let base = rt.stats();
    let total = EXACTLY_ONCE_TASKS;
    const DRIVERS: usize = 8;
    let (htx, hrx) = async_channel::unbounded();
    let w = Arc::new(Workload {
        book: Book::new(total),
        total,
        next_id: AtomicUsize::new(0),
        registered: AtomicUsize::new(0),
        pool: Mutex::new(Vec::new()),
        handles: htx,
        aborts: AtomicUsize::new(0),
    });
    let stop = Arc::new(AtomicBool::new(false));
    // A sweeper thread wakes waiters from outside the runtime.
    let sweeper = {
        let w = w.clone();
        let stop = stop.clone();
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let pending: Vec<_> = std::mem::take(&mut *w.pool.lock().unwrap());
                for s in pending {
                    let _ = s.try_send(());
                }
                thread::sleep(Duration::from_micros(500));
            }
        })
    };
    // Drivers (never aborted) spawn tracked tasks until the ids run out.
    let drivers: Vec<JoinHandle<()>> = (0..DRIVERS)
        .map(|d| {
            let w = w.clone();
            rt.spawn(async move {
                let mut rng = Rng::new(1000 + d as u64);
                while let Some(id) = w.take_id() {
                    let h = hwsched::spawn(tracked(w.clone(), id));
                    let abort = rng.one_in(16);
                    if abort {
                        h.abort();
                        w.aborts.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = w.handles.try_send((id, abort, h));
                    if rng.one_in(64) {
                        hwsched::yield_now().await;
                    }
                }
            })
        })
        .collect();
    // An outside thread spawns some too (Runtime::spawn from a std thread).
    let (ok, cancelled) = thread::scope(|s| {
        let w2 = w.clone();
        s.spawn(move || {
            let mut n = 0;
            while n < 5_000 {
                let Some(id) = w2.take_id() else { break };
                let h = rt.spawn(tracked(w2.clone(), id));
                let _ = w2.handles.try_send((id, false, h));
                n += 1;
            }
        });
        // The collector: awaits every handle as it arrives.
        let w3 = w.clone();
        rt.block_on(async move {
            let (mut ok, mut cancelled) = (0usize, 0usize);
            let mut rng = Rng::new(4242);
            while w3.registered.load(Ordering::Relaxed) < w3.total {
                let (id, mut aborted, h) = hrx.recv().await.expect("handle channel closed");
                w3.registered.fetch_add(1, Ordering::Relaxed);
                // Some more aborts from here, at whatever point the task has
                // reached by now: queued, running, pending on a wake, done.
                if !aborted && rng.one_in(16) {
                    h.abort();
                    w3.aborts.fetch_add(1, Ordering::Relaxed);
                    aborted = true;
                }
                match h.await {
                    Ok(v) => {
                        assert_eq!(v, id, "task {id} returned another task's output");
                        assert!(w3.book.completed[id].load(Ordering::SeqCst));
                        ok += 1;
                    }
                    Err(JoinError::Cancelled) => {
                        assert!(aborted, "task {id} cancelled but never aborted");
                        assert!(
                            !w3.book.completed[id].load(Ordering::SeqCst),
                            "task {id} ran to completion but its handle says Cancelled"
                        );
                        cancelled += 1;
                    }
                    Err(e) => panic!("task {id}: {e:?}"),
                }
            }
            for d in drivers {
                d.await.expect("driver failed");
            }
            (ok, cancelled)
        })
    });
    stop.store(true, Ordering::Relaxed);
    sweeper.join().unwrap();
    settle(rt, what);
    w.book.check_once(total, what);
    assert_eq!(ok + cancelled, total, "{what}: completed + cancelled");
    let completed = (0..total)
        .filter(|&i| w.book.completed[i].load(Ordering::SeqCst))
        .count();
    assert_eq!(completed, ok, "{what}: bodies completed vs Ok handles");
    assert!(cancelled <= w.aborts.load(Ordering::SeqCst));
    let s = rt.stats();
    let t = s.total();
    let spawned = (total + DRIVERS) as u64;
    assert_eq!(s.spawned - base.spawned, spawned, "{what}: stats.spawned");
    assert_eq!(s.retired - base.retired, spawned, "{what}: stats.retired");
    assert_eq!(
        s.retired - base.retired,
        (ok + cancelled + DRIVERS) as u64,
        "{what}: retired == completed + cancelled"
    );
    assert!(
        t.polls >= ok as u64 + DRIVERS as u64,
        "{what}: polls {} < tasks completed {ok}",
        t.polls
    );
    assert!(t.steals_succeeded <= t.steals_attempted);
    assert!(t.tasks_stolen >= t.steals_succeeded);
    assert!(
        t.tasks_stolen > 0,
        "{what}: no task was ever stolen ({} workers)",
        rt.workers()
    );
    eprintln!(
        "{what}: {total} tasks, ok {ok}, cancelled {cancelled}, polls {}, stolen {}, \
         steals {}/{}, parks {}, searcher wakes {}",
        t.polls, t.tasks_stolen, t.steals_succeeded, t.steals_attempted, t.parks, t.searcher_wakes
    );
}

#[test]
fn exactly_once_random_workload_32_workers() {
    with_timeout(150, "exactly_once_random_workload_32_workers", || {
        exactly_once(&big(), "32 workers");
    });
}

#[test]
fn exactly_once_random_workload_system() {
    with_timeout(150, "exactly_once_random_workload_system", || {
        exactly_once(&system(), "System");
    });
}

// ---------------------------------------------------------------------------
// Shutdown under load
// ---------------------------------------------------------------------------

type Held = Arc<Mutex<mpsc::Sender<Waker>>>;

/// A spawn storm: each task spawns two children (local deques) and then
/// either pends on a waker held by an outside thread, or yields forever, or
/// (with `pairs`) ping-pongs forever with a partner over async-channel
/// bounded(1) channels (LIFO slots, wakes between workers).
fn storm(
    book: Arc<Book>,
    next: Arc<AtomicUsize>,
    held: Held,
    pairs: bool,
    id: usize,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    let g = book.guard(id);
    Box::pin(async move {
        let _g = g;
        for _ in 0..2 {
            let child = next.fetch_add(1, Ordering::Relaxed);
            if child >= book.dropped.len() {
                break;
            }
            drop(hwsched::spawn(storm(
                book.clone(),
                next.clone(),
                held.clone(),
                pairs,
                child,
            )));
        }
        match id % 3 {
            2 if pairs => {
                let (a_tx, a_rx) = async_channel::bounded::<u32>(1);
                let (b_tx, b_rx) = async_channel::bounded::<u32>(1);
                drop(hwsched::spawn(async move {
                    while let Ok(v) = a_rx.recv().await {
                        if b_tx.send(v + 1).await.is_err() {
                            break;
                        }
                    }
                }));
                let mut v = 0;
                loop {
                    if a_tx.send(v).await.is_err() {
                        break;
                    }
                    match b_rx.recv().await {
                        Ok(x) => v = x,
                        Err(_) => break,
                    }
                }
                std::future::pending::<()>().await
            }
            1 => loop {
                hwsched::yield_now().await;
            },
            _ => {
                let mut sent = false;
                std::future::poll_fn(|cx| {
                    if !sent {
                        sent = true;
                        let _ = held.lock().unwrap().send(cx.waker().clone());
                    }
                    Poll::<()>::Pending
                })
                .await
            }
        }
    })
}

/// Drops a 32-worker runtime in the middle of a spawn storm: tasks running,
/// queued in deques, inboxes and LIFO slots, pending on wakers held by
/// another thread. Drop must return within 1 s, every future must have been
/// dropped exactly once when it returns, and waking the held wakers
/// afterwards (from another thread) must do nothing harmful.
fn shutdown_under_load(pairs: bool, what: &str) {
    const CAP: usize = 400_000;
    let rt = big();
    let book = Book::new(CAP);
    let next = Arc::new(AtomicUsize::new(0));
    let (wtx, wrx) = mpsc::channel::<Waker>();
    let held: Held = Arc::new(Mutex::new(wtx));
    for _ in 0..64 {
        let id = next.fetch_add(1, Ordering::Relaxed);
        drop(rt.spawn(storm(book.clone(), next.clone(), held.clone(), pairs, id)));
    }
    // Let the storm grow: tasks queued everywhere, many pending.
    let t0 = Instant::now();
    while next.load(Ordering::Relaxed) < CAP / 4 && t0.elapsed() < Duration::from_secs(5) {
        thread::sleep(Duration::from_millis(5));
    }
    let live_before = rt.live_tasks();
    let holder = thread::spawn(move || {
        let mut kept = Vec::new();
        while let Ok(w) = wrx.recv_timeout(Duration::from_millis(200)) {
            kept.push(w);
        }
        kept
    });
    let t = Instant::now();
    drop(rt);
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "{what}: dropping a loaded runtime took {took:?} (live tasks before: {live_before})"
    );
    let spawned = next.load(Ordering::SeqCst).min(CAP);
    book.check_once(spawned, what);
    drop(held);
    let kept = holder.join().unwrap();
    let n = kept.len();
    let woke = thread::spawn(move || {
        for w in &kept {
            w.wake_by_ref();
        }
        for w in kept {
            w.wake();
        }
    });
    woke.join().expect("waking after shutdown panicked");
    assert_eq!(book.double.load(Ordering::SeqCst), 0);
    assert_eq!(book.drops.load(Ordering::SeqCst), spawned);
    eprintln!(
        "{what}: {spawned} tasks spawned, {live_before} live, drop took {took:?}, {n} wakers \
         woken afterwards"
    );
}

#[test]
fn shutdown_under_load_is_prompt_and_exactly_once() {
    with_timeout_alone(30, "shutdown_under_load_is_prompt_and_exactly_once", || {
        shutdown_under_load(true, "shutdown under load");
    });
}

#[test]
fn shutdown_under_load_without_channels() {
    // The same storm without the channel pairs: isolates the 1 s bound and
    // exactly-once from the drop cascade of the next test.
    with_timeout_alone(30, "shutdown_under_load_without_channels", || {
        shutdown_under_load(false, "shutdown under load, no channels");
    });
}

#[test]
fn shutdown_drop_cascade_through_channel_does_not_deadlock() {
    // Minimal form: at shutdown, dropping task B's future drops a Sender,
    // which closes the channel and wakes task A (pending in recv) from
    // inside event-listener's notify, with that event's lock held. If the
    // runtime drops A's future right there, inside wake(), A's listener
    // removal takes the same lock: a self-deadlock.
    with_timeout(
        10,
        "shutdown_drop_cascade_through_channel_does_not_deadlock",
        || {
            let rt = drive_reactor(Runtime::builder().worker_threads(1).build().unwrap());
            let (tx, rx) = async_channel::bounded::<()>(1);
            let polled = Arc::new(AtomicUsize::new(0));
            let p = polled.clone();
            // B first (the registry wakes in spawn order): holds the sender.
            let b = rt.spawn(async move {
                let _tx = tx;
                p.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await
            });
            let p = polled.clone();
            let a = rt.spawn(async move {
                p.fetch_add(1, Ordering::SeqCst);
                let _ = rx.recv().await;
            });
            while polled.load(Ordering::SeqCst) < 2 {
                thread::yield_now();
            }
            thread::sleep(Duration::from_millis(10));
            drop(rt);
            assert!(ready(b).is_err_and(|e| e.is_cancelled()));
            // A is either Cancelled (dropped) or, if it was polled again after
            // the channel closed, Ok.
            let _ = ready(a);
        },
    );
}

// ---------------------------------------------------------------------------
// Panics
// ---------------------------------------------------------------------------

fn panic_storm(rt: &Runtime, n: usize, what: &str) -> u64 {
    quiet_intentional_panics();
    let handles: Vec<_> = (0..n)
        .map(|i| {
            rt.spawn(async move {
                if i % 3 == 0 {
                    hwsched::yield_now().await;
                }
                if i % 10 == 7 {
                    panic!("{QUIET} task {i}");
                }
                i
            })
        })
        .collect();
    let (ok, panicked) = rt.block_on(async move {
        let (mut ok, mut panicked) = (0, 0);
        for (i, h) in handles.into_iter().enumerate() {
            match h.await {
                Ok(v) => {
                    assert_ne!(i % 10, 7, "{what}: task {i} should have panicked");
                    assert_eq!(v, i);
                    ok += 1;
                }
                Err(JoinError::Panicked(p)) => {
                    assert_eq!(i % 10, 7, "{what}: task {i} panicked unexpectedly");
                    assert_eq!(payload_str(&*p.into_inner()), format!("{QUIET} task {i}"));
                    panicked += 1;
                }
                Err(e) => panic!("{what}: task {i}: {e:?}"),
            }
        }
        (ok, panicked)
    });
    assert_eq!(ok + panicked, n);
    assert_eq!(panicked, n / 10);
    // Every worker is still alive: a task pinned to each one's neighbourhood
    // is overkill; instead run a second full batch, which needs them all
    // only for speed, and check the runtime still completes work.
    let v = rt.block_on(async {
        let hs: Vec<_> = (0..1000u64)
            .map(|i| hwsched::spawn(async move { i }))
            .collect();
        let mut s = 0;
        for h in hs {
            s += h.await.unwrap();
        }
        s
    });
    assert_eq!(v, 999 * 1000 / 2);
    panicked as u64
}

#[test]
fn panic_storm_does_not_lose_tasks() {
    with_timeout(60, "panic_storm_does_not_lose_tasks", || {
        panic_storm(&system(), 20_000, "System");
        panic_storm(&big(), 20_000, "32 workers");
    });
}

#[test]
fn panic_counter_counts_task_panics() {
    with_timeout(30, "panic_counter_counts_task_panics", || {
        // WorkerStats::panics is documented as "Panics caught in a task's
        // poll or drop".
        let rt = system();
        let panicked = panic_storm(&rt, 1_000, "counter");
        let t = rt.stats().total();
        assert_eq!(
            t.panics, panicked,
            "stats.total().panics does not count the {panicked} task panics"
        );
    });
}

/// A future, pending forever, whose destructor panics.
struct PanicOnDrop {
    drops: Arc<AtomicUsize>,
    polled: Arc<AtomicUsize>,
    seen: bool,
}

impl Future for PanicOnDrop {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if !self.seen {
            self.seen = true;
            self.polled.fetch_add(1, Ordering::SeqCst);
        }
        Poll::Pending
    }
}

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        panic!("{QUIET} panic in Drop");
    }
}

#[test]
fn panic_in_drop_during_shutdown_is_contained() {
    with_timeout_alone(60, "panic_in_drop_during_shutdown_is_contained", || {
        quiet_intentional_panics();
        for (name, rt) in [
            (
                "1 worker",
                drive_reactor(Runtime::builder().worker_threads(1).build().unwrap()),
            ),
            ("32 workers", big()),
        ] {
            let drops = Arc::new(AtomicUsize::new(0));
            let polled = Arc::new(AtomicUsize::new(0));
            let mut handles = Vec::new();
            // Pending forever on a future nobody wakes (dropped through the
            // registry at shutdown).
            for _ in 0..100 {
                handles.push(rt.spawn(PanicOnDrop {
                    drops: drops.clone(),
                    polled: polled.clone(),
                    seen: false,
                }));
            }
            let t0 = Instant::now();
            while polled.load(Ordering::SeqCst) < 100 {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "{name}: never polled"
                );
                thread::sleep(Duration::from_millis(1));
            }
            // Queued behind blockers, in deques (spawned from a task) and
            // inboxes (spawned from outside), never polled.
            let started = Arc::new(AtomicUsize::new(0));
            let blockers = rt.workers().min(4);
            for _ in 0..blockers {
                let (d, p, s) = (drops.clone(), polled.clone(), started.clone());
                drop(rt.spawn(async move {
                    for _ in 0..50 {
                        drop(hwsched::spawn(PanicOnDrop {
                            drops: d.clone(),
                            polled: p.clone(),
                            seen: false,
                        }));
                    }
                    s.fetch_add(1, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(200));
                }));
            }
            while started.load(Ordering::SeqCst) < 1 {
                thread::yield_now();
            }
            for _ in 0..100 {
                handles.push(rt.spawn(PanicOnDrop {
                    drops: drops.clone(),
                    polled: polled.clone(),
                    seen: false,
                }));
            }
            let t = Instant::now();
            drop(rt);
            let took = t.elapsed();
            assert!(
                took < Duration::from_secs(2),
                "{name}: shutdown with panicking destructors took {took:?}"
            );
            // Every PanicOnDrop made (200 here, 50 per blocker that ran)
            // had its destructor run exactly once.
            let expect = 200 + 50 * started.load(Ordering::SeqCst);
            assert_eq!(
                drops.load(Ordering::SeqCst),
                expect,
                "{name}: destructors run vs futures made"
            );
            for h in handles {
                assert!(ready(h).is_err(), "{name}: a pending task finished");
            }
        }
        // And the process is still alive: a fresh runtime works.
        let rt = system();
        assert_eq!(rt.block_on(rt.spawn(async { 1 })).unwrap(), 1);
    });
}

// ---------------------------------------------------------------------------
// Blocking misuse
// ---------------------------------------------------------------------------

/// A task blocks its worker for 100 ms; 1,000 small tasks must all run on
/// the other worker while it is blocked. `from_blocker`: the small tasks are
/// spawned by the blocker itself before it sleeps (so they sit in its local
/// deque and must be stolen, or reached through a kick); otherwise from
/// outside while it sleeps (placement may put some in the blocked worker's
/// inbox, from which the other worker must steal). The 100 ms count from
/// the property's own start: the tasks that exist when the window opens
/// must all have run when it closes. An outside spawner starved by a loaded
/// machine may not have made all 1,000 by then (the window opens when it
/// has, or after 30 s); the check counts only the tasks it had made.
/// Returns a description of the failure, if any.
fn blocked_worker(rt: Runtime, from_blocker: bool, what: &str) -> Option<String> {
    const SMALL: usize = 1_000;
    assert_eq!(rt.workers(), 2);
    let count = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicBool::new(false));
    // Tasks spawned from outside so far (read by the blocker when it wakes:
    // a failure says whether the spawner or the runtime was behind).
    let made = Arc::new(AtomicUsize::new(0));
    let (c, s, m) = (count.clone(), started.clone(), made.clone());
    let blocker = rt.spawn(async move {
        let mut hs = Vec::new();
        if from_blocker {
            for _ in 0..SMALL {
                let c = c.clone();
                hs.push(hwsched::spawn(async move {
                    c.fetch_add(1, Ordering::SeqCst);
                }));
            }
        }
        s.store(true, Ordering::SeqCst);
        // Spawned from outside: the window opens once all are spawned, so
        // that it measures the runtime, not how fast a spawner thread gets
        // the CPU on a busy machine. The worker stays blocked meanwhile.
        let t0 = Instant::now();
        while !from_blocker
            && m.load(Ordering::SeqCst) < SMALL
            && t0.elapsed() < Duration::from_secs(30)
        {
            thread::yield_now();
        }
        // The tasks that exist as the window opens (SeqCst: the count is
        // bumped after each spawn returns).
        let made = if from_blocker {
            SMALL
        } else {
            m.load(Ordering::SeqCst)
        };
        thread::sleep(Duration::from_millis(100));
        let seen = c.load(Ordering::SeqCst);
        for h in hs {
            h.await.unwrap();
        }
        (seen, made)
    });
    while !started.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    let t0 = Instant::now();
    let mut hs = Vec::new();
    if !from_blocker {
        for _ in 0..SMALL {
            let c = count.clone();
            hs.push(rt.spawn(async move {
                c.fetch_add(1, Ordering::SeqCst);
            }));
            made.fetch_add(1, Ordering::SeqCst);
        }
    }
    let (seen, made) = rt.block_on(blocker).expect("blocker failed");
    let took = t0.elapsed();
    for h in hs {
        rt.block_on(h).unwrap();
    }
    assert_eq!(
        count.load(Ordering::SeqCst),
        SMALL,
        "{what}: small tasks lost"
    );
    if made == 0 {
        return Some(format!(
            "{what}: the outside spawner made no task in 30 s; stats:\n{}",
            rt.stats()
        ));
    }
    (seen < made).then(|| {
        format!(
            "{what}: only {seen} of the {made} small tasks spawned before the 100 ms window ran \
             in it while a worker was blocked (blocker returned after {took:?}); stats:\n{}",
            rt.stats()
        )
    })
}

#[test]
fn blocked_worker_does_not_stop_the_other() {
    with_timeout_alone(60, "blocked_worker_does_not_stop_the_other", || {
        let two = || {
            drive_reactor(
                Runtime::builder()
                    .topology(synthetic("core:2 pu:1"))
                    .build()
                    .expect("core:2 pu:1"),
            )
        };
        let sys = || {
            drive_reactor(
                Runtime::builder()
                    .worker_threads(2)
                    .build()
                    .expect("System, 2 workers"),
            )
        };
        // Every variant runs; the failures are reported together.
        let failures: Vec<String> = [
            blocked_worker(two(), true, "synthetic, spawned by the blocker"),
            blocked_worker(two(), false, "synthetic, spawned from outside"),
            blocked_worker(sys(), true, "System, spawned by the blocker"),
            blocked_worker(sys(), false, "System, spawned from outside"),
        ]
        .into_iter()
        .flatten()
        .collect();
        assert!(
            failures.is_empty(),
            "{} of 4 variants failed:\n{}",
            failures.len(),
            failures.join("\n")
        );
    });
}

// ---------------------------------------------------------------------------
// Bad input at build time
// ---------------------------------------------------------------------------

fn build_err(b: hwsched::Builder, what: &str) -> BuildError {
    match b.build() {
        Ok(rt) => panic!("{what}: built a runtime with {} workers", rt.workers()),
        Err(e) => e,
    }
}

fn assert_names(e: &BuildError, needles: &[&str], what: &str) {
    let msg = e.to_string();
    for n in needles {
        assert!(
            msg.contains(n),
            "{what}: message {msg:?} does not name {n:?}"
        );
    }
}

#[test]
fn bad_builder_input_is_a_build_error() {
    with_timeout(60, "bad_builder_input_is_a_build_error", || {
        let b = Runtime::builder;

        let e = build_err(b().worker_threads(0), "zero workers");
        assert!(matches!(e, BuildError::ZeroWorkers), "{e:?}");
        assert_names(&e, &["worker_threads(0)"], "zero workers");

        let e = build_err(
            b().worker_threads(0).topology(synthetic(BIG)),
            "zero workers, big",
        );
        assert!(matches!(e, BuildError::ZeroWorkers), "{e:?}");

        let e = build_err(
            b().topology(synthetic("core:2 pu:1")).worker_threads(3),
            "3 workers on 2 PUs",
        );
        assert!(
            matches!(
                e,
                BuildError::TooManyWorkers {
                    requested: 3,
                    available: 2
                }
            ),
            "{e:?}"
        );
        assert_names(&e, &["3", "2"], "3 workers on 2 PUs");

        let e = build_err(b().worker_threads(1000), "1000 workers on System");
        assert!(
            matches!(
                e,
                BuildError::TooManyWorkers {
                    requested: 1000,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_names(&e, &["1000"], "1000 workers on System");

        for bad in ["pack:two core:banana", "", "core:0", "nonsense"] {
            let e = build_err(b().topology(synthetic(bad)), "bad synthetic");
            assert!(
                matches!(&e, BuildError::InvalidSynthetic { description, .. } if description == bad),
                "synthetic {bad:?}: {e:?}"
            );
            assert_names(&e, &[bad], "bad synthetic");
        }

        let missing = PathBuf::from("/nonexistent/hwsched-test-missing-topology.xml");
        let e = build_err(
            b().topology(TopologySource::Xml(missing.clone())),
            "missing XML",
        );
        assert!(
            matches!(&e, BuildError::InvalidXml { path, .. } if *path == missing),
            "{e:?}"
        );
        assert_names(&e, &["hwsched-test-missing-topology.xml"], "missing XML");

        let e = build_err(b().cpus([]), "empty cpuset");
        assert!(matches!(e, BuildError::EmptyCpuset { .. }), "{e:?}");
        assert_names(&e, &["empty"], "empty cpuset");
        let e = build_err(
            b().topology(synthetic(BIG)).cpus(Vec::new()),
            "empty cpuset, big",
        );
        assert!(matches!(e, BuildError::EmptyCpuset { .. }), "{e:?}");

        let e = build_err(b().cpus([999]), "cpu 999");
        assert!(
            matches!(e, BuildError::CpuOutsideTopology { cpu: 999, .. }),
            "{e:?}"
        );
        assert_names(&e, &["999"], "cpu 999");
        let e = build_err(b().topology(synthetic("core:2 pu:1")).cpus([0, 5]), "cpu 5");
        assert!(
            matches!(e, BuildError::CpuOutsideTopology { cpu: 5, .. }),
            "{e:?}"
        );
        assert_names(&e, &["5"], "cpu 5");

        let tun = |t: Tunables| b().topology(synthetic("core:2 pu:1")).tunables(t);
        let cases: Vec<(Tunables, &str, &str)> = vec![
            (
                Tunables {
                    migration_cost: Duration::ZERO,
                    ..Default::default()
                },
                "migration_cost",
                "0ns",
            ),
            (
                Tunables {
                    migration_cost: Duration::from_secs(1),
                    ..Default::default()
                },
                "migration_cost",
                "1s",
            ),
            (
                Tunables {
                    spin_cap_percent: 0,
                    ..Default::default()
                },
                "spin_cap_percent",
                "0",
            ),
            (
                Tunables {
                    spin_cap_percent: 101,
                    ..Default::default()
                },
                "spin_cap_percent",
                "101",
            ),
            (
                Tunables {
                    load_update_interval: Duration::from_secs(2),
                    ..Default::default()
                },
                "load_update_interval",
                "2s",
            ),
            (
                Tunables {
                    idle: IdleMode::AlwaysSpin(Duration::ZERO),
                    ..Default::default()
                },
                "idle",
                "AlwaysSpin(0ns)",
            ),
            (
                Tunables {
                    park_cost: Some(Duration::from_secs(1)),
                    ..Default::default()
                },
                "park_cost",
                "1s",
            ),
        ];
        for (t, field, value) in cases {
            let v = t.validate().expect_err(field);
            assert!(
                matches!(&v, BuildError::InvalidTunable { name, .. } if *name == field),
                "validate {field}: {v:?}"
            );
            let e = build_err(tun(t), field);
            match &e {
                BuildError::InvalidTunable {
                    name, value: got, ..
                } => {
                    assert_eq!(*name, field, "{e:?}");
                    assert!(
                        got.contains(value),
                        "{field}: value {got:?} is not {value:?}"
                    );
                }
                other => panic!("{field}: expected InvalidTunable, got {other:?}"),
            }
            assert_names(&e, &[field, value], field);
        }
        assert!(Tunables::default().validate().is_ok());

        let e = build_err(b().thread_name("bad\0name"), "thread name with NUL");
        assert!(
            matches!(&e, BuildError::InvalidThreadName { name } if name == "bad\0name"),
            "{e:?}"
        );
        assert_names(&e, &["bad", "name", "NUL"], "thread name with NUL");

        // Good input still builds after all that.
        let rt = b().topology(synthetic("core:2 pu:1")).build().unwrap();
        assert_eq!(rt.workers(), 2);
    });
}

// ---------------------------------------------------------------------------
// Resource use (ignored: they print numbers)
// ---------------------------------------------------------------------------

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("parse statm");
    // SAFETY: sysconf has no preconditions; _SC_PAGESIZE is always valid.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(4096) as u64
}

/// Returns freed heap pages to the OS, so one measurement does not reuse
/// what the previous one freed.
fn trim() {
    // SAFETY: malloc_trim only releases free memory of the allocator.
    unsafe {
        libc::malloc_trim(0);
    }
}

const IDLE_TASKS: usize = 100_000;

fn hwsched_bytes_per_idle_task(workers: usize) -> f64 {
    let rt = Runtime::builder().worker_threads(workers).build().unwrap();
    let polled = Arc::new(AtomicUsize::new(0));
    trim();
    let before = rss_bytes();
    let handles: Vec<_> = (0..IDLE_TASKS)
        .map(|_| {
            let p = polled.clone();
            rt.spawn(async move {
                p.fetch_add(1, Ordering::Relaxed);
                std::future::pending::<()>().await
            })
        })
        .collect();
    while polled.load(Ordering::Relaxed) < IDLE_TASKS {
        thread::sleep(Duration::from_millis(1));
    }
    let after = rss_bytes();
    drop(rt);
    drop(handles);
    (after.saturating_sub(before)) as f64 / IDLE_TASKS as f64
}

fn tokio_bytes_per_idle_task(workers: usize) -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .build()
        .unwrap();
    let polled = Arc::new(AtomicUsize::new(0));
    // Warm the workers up.
    rt.block_on(async { tokio::spawn(async {}).await.unwrap() });
    trim();
    let before = rss_bytes();
    let handles: Vec<_> = (0..IDLE_TASKS)
        .map(|_| {
            let p = polled.clone();
            rt.spawn(async move {
                p.fetch_add(1, Ordering::Relaxed);
                std::future::pending::<()>().await
            })
        })
        .collect();
    while polled.load(Ordering::Relaxed) < IDLE_TASKS {
        thread::sleep(Duration::from_millis(1));
    }
    let after = rss_bytes();
    drop(rt);
    drop(handles);
    (after.saturating_sub(before)) as f64 / IDLE_TASKS as f64
}

#[test]
#[ignore = "resource measurement: prints bytes per idle task"]
fn memory_per_idle_task() {
    with_timeout(120, "memory_per_idle_task", || {
        let workers = Runtime::builder().build().unwrap().workers();
        // Each measured twice, alternating, with freed memory trimmed in
        // between; the second round is reported.
        let mut rows = Vec::new();
        for round in 0..2 {
            let h = hwsched_bytes_per_idle_task(workers);
            trim();
            let t = tokio_bytes_per_idle_task(workers);
            trim();
            rows.push((round, h, t));
        }
        for (round, h, t) in &rows {
            println!(
                "memory per idle task (round {round}, {IDLE_TASKS} pending tasks, {workers} \
                 workers, handles kept): hwsched {h:.0} B, tokio {t:.0} B"
            );
        }
        let (_, h, t) = rows[1];
        assert!(
            h > 0.0 && t > 0.0,
            "RSS did not grow: hwsched {h}, tokio {t}"
        );
    });
}

#[test]
#[ignore = "resource measurement: 30 s spawn/complete loop, prints RSS"]
fn rss_does_not_grow_over_spawn_complete_loop() {
    with_timeout(90, "rss_does_not_grow_over_spawn_complete_loop", || {
        let rt = big();
        let start = Instant::now();
        let mut next_report = Duration::from_secs(5);
        let mut after_first = None;
        let mut last = 0;
        let mut batches = 0u64;
        let tasks = Arc::new(AtomicU64::new(0));
        while start.elapsed() < Duration::from_secs(30) {
            let t = tasks.clone();
            rt.block_on(async move {
                let (tx, rx) = async_channel::bounded::<u64>(64);
                let hs: Vec<_> = (0..5_000u64)
                    .map(|i| {
                        let tx = tx.clone();
                        let rx = rx.clone();
                        let t = t.clone();
                        hwsched::spawn(async move {
                            t.fetch_add(1, Ordering::Relaxed);
                            if i % 2 == 0 {
                                tx.send(i).await.unwrap();
                            } else {
                                hwsched::yield_now().await;
                                let _ = rx.recv().await;
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.await.unwrap();
                }
            });
            batches += 1;
            if start.elapsed() >= next_report {
                last = rss_bytes();
                println!(
                    "t={:>2}s RSS {:.1} MiB ({} tasks in {batches} batches, live {})",
                    next_report.as_secs(),
                    last as f64 / (1 << 20) as f64,
                    tasks.load(Ordering::Relaxed),
                    rt.live_tasks()
                );
                after_first.get_or_insert(last);
                next_report += Duration::from_secs(5);
            }
        }
        let first = after_first.expect("no report");
        assert!(
            (last as f64) <= first as f64 * 1.5,
            "RSS grew from {first} B at 5 s to {last} B at the end"
        );
    });
}
