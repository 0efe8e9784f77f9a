//! Per-task metrics a program attaches itself, after tokio-metrics'
//! `TaskMonitor`: wrap a future ([`TaskMonitor::instrument`]) and read how
//! often and how long it was polled, how many polls were slow, how long it
//! waited to be polled once woken (scheduled duration) and how long it
//! waited to be woken (idle duration); cumulative
//! ([`TaskMonitor::cumulative`]) or per interval
//! ([`TaskMonitor::intervals`], [`TaskMonitor::take_interval`]).
//!
//! Always compiled (no cargo feature): the scheduler never calls this code;
//! only futures a program wraps pay for it, two clock reads per poll and
//! one per wake, a few relaxed atomic additions on counters shared by the
//! monitor's tasks, and an `Arc` clone per poll for the wrapped waker.
//!
//! ```
//! use hwsched::metrics::TaskMonitor;
//! use std::time::Duration;
//!
//! let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
//! let monitor = TaskMonitor::new().with_slow_poll_threshold(Duration::from_millis(20));
//! let mut intervals = monitor.intervals();
//! rt.block_on(async {
//!     let hs: Vec<_> = (0..4)
//!         .map(|_| hwsched::spawn(monitor.instrument(async {
//!             hwsched::yield_now().await;
//!             std::thread::sleep(Duration::from_millis(25)); // a slow poll
//!         })))
//!         .collect();
//!     for h in hs {
//!         h.await.unwrap();
//!     }
//! });
//! let m = intervals.next().unwrap();
//! assert_eq!(m.instrumented_count, 4);
//! assert_eq!(m.dropped_count, 4);
//! assert_eq!(m.total_poll_count, 8); // two polls each
//! assert_eq!(m.total_slow_poll_count, 4);
//! assert_eq!(m.total_scheduled_count, 4); // each woken once, by its yield
//! assert!(m.mean_poll_duration() >= Duration::from_millis(12));
//! assert_eq!(intervals.next().unwrap().total_poll_count, 0); // nothing since
//! # Ok::<(), hwsched::BuildError>(())
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// The slow-poll threshold of [`TaskMonitor::new`]: 50 us, tokio-metrics'
/// default (a poll that long holds up every task queued behind it).
pub const DEFAULT_SLOW_POLL_THRESHOLD: Duration = Duration::from_micros(50);

/// Metrics of the tasks a [`TaskMonitor`] instruments, cumulative or over
/// an interval (then every count and duration is the interval's).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskMetrics {
    /// Futures instrumented.
    pub instrumented_count: u64,
    /// Instrumented futures dropped (finished or cancelled).
    pub dropped_count: u64,
    /// Instrumented futures polled at least once.
    pub first_poll_count: u64,
    /// From instrumenting to the first poll, summed.
    pub total_first_poll_delay: Duration,
    /// Polls.
    pub total_poll_count: u64,
    /// The polls' durations, summed.
    pub total_poll_duration: Duration,
    /// Polls at least as long as the slow-poll threshold.
    pub total_slow_poll_count: u64,
    /// Their durations, summed.
    pub total_slow_poll_duration: Duration,
    /// Polls that followed a wake (scheduled: runnable, waiting for a
    /// worker).
    pub total_scheduled_count: u64,
    /// From each wake to the poll it led to, summed.
    pub total_scheduled_duration: Duration,
    /// Idle periods (from a poll returning `Pending` to the wake).
    pub total_idled_count: u64,
    /// Their lengths, summed.
    pub total_idle_duration: Duration,
}

fn mean(total: Duration, n: u64) -> Duration {
    if n == 0 {
        Duration::ZERO
    } else {
        total / n.min(u32::MAX as u64) as u32
    }
}

impl TaskMetrics {
    /// Mean poll duration.
    pub fn mean_poll_duration(&self) -> Duration {
        mean(self.total_poll_duration, self.total_poll_count)
    }

    /// Mean slow poll duration.
    pub fn mean_slow_poll_duration(&self) -> Duration {
        mean(self.total_slow_poll_duration, self.total_slow_poll_count)
    }

    /// Share of polls that were slow (0 when there were none).
    pub fn slow_poll_ratio(&self) -> f64 {
        if self.total_poll_count == 0 {
            0.0
        } else {
            self.total_slow_poll_count as f64 / self.total_poll_count as f64
        }
    }

    /// Mean scheduled duration: from a wake to the poll it led to.
    pub fn mean_scheduled_duration(&self) -> Duration {
        mean(self.total_scheduled_duration, self.total_scheduled_count)
    }

    /// Mean idle duration: from a `Pending` to the next wake.
    pub fn mean_idle_duration(&self) -> Duration {
        mean(self.total_idle_duration, self.total_idled_count)
    }

    /// Mean delay from instrumenting to the first poll.
    pub fn mean_first_poll_delay(&self) -> Duration {
        mean(self.total_first_poll_delay, self.first_poll_count)
    }

    fn minus(&self, o: &TaskMetrics) -> TaskMetrics {
        TaskMetrics {
            instrumented_count: self.instrumented_count - o.instrumented_count,
            dropped_count: self.dropped_count - o.dropped_count,
            first_poll_count: self.first_poll_count - o.first_poll_count,
            total_first_poll_delay: self.total_first_poll_delay - o.total_first_poll_delay,
            total_poll_count: self.total_poll_count - o.total_poll_count,
            total_poll_duration: self.total_poll_duration - o.total_poll_duration,
            total_slow_poll_count: self.total_slow_poll_count - o.total_slow_poll_count,
            total_slow_poll_duration: self.total_slow_poll_duration - o.total_slow_poll_duration,
            total_scheduled_count: self.total_scheduled_count - o.total_scheduled_count,
            total_scheduled_duration: self.total_scheduled_duration - o.total_scheduled_duration,
            total_idled_count: self.total_idled_count - o.total_idled_count,
            total_idle_duration: self.total_idle_duration - o.total_idle_duration,
        }
    }
}

/// The monitor's counters: relaxed additions (statistics; a reader may see
/// one counter of a poll before another, never a lost count).
#[derive(Default)]
struct Counters {
    instrumented: AtomicU64,
    dropped: AtomicU64,
    first_poll: AtomicU64,
    first_poll_delay_ns: AtomicU64,
    polls: AtomicU64,
    poll_ns: AtomicU64,
    slow_polls: AtomicU64,
    slow_poll_ns: AtomicU64,
    scheduled: AtomicU64,
    scheduled_ns: AtomicU64,
    idled: AtomicU64,
    idle_ns: AtomicU64,
}

fn add(c: &AtomicU64, v: u64) {
    c.fetch_add(v, Ordering::Relaxed);
}

struct Shared {
    epoch: Instant,
    slow_ns: u64,
    c: Counters,
    /// What `take_interval` returned last (cumulative), to subtract.
    last: Mutex<TaskMetrics>,
}

impl Shared {
    /// ns since the monitor's epoch, never 0 (0 means "not set").
    fn now(&self) -> u64 {
        (self.epoch.elapsed().as_nanos() as u64).max(1)
    }
}

/// Collects [`TaskMetrics`] of the futures it instruments; cheap to clone
/// (clones share the counters).
#[derive(Clone)]
pub struct TaskMonitor {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TaskMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskMonitor")
            .field("slow_poll_threshold", &self.slow_poll_threshold())
            .field("cumulative", &self.cumulative())
            .finish()
    }
}

impl Default for TaskMonitor {
    fn default() -> Self {
        TaskMonitor::new()
    }
}

impl TaskMonitor {
    /// A monitor with the [`DEFAULT_SLOW_POLL_THRESHOLD`].
    pub fn new() -> Self {
        TaskMonitor {
            shared: Arc::new(Shared {
                epoch: Instant::now(),
                slow_ns: DEFAULT_SLOW_POLL_THRESHOLD.as_nanos() as u64,
                c: Counters::default(),
                last: Mutex::new(TaskMetrics::default()),
            }),
        }
    }

    /// This monitor with polls at least `threshold` long counted slow (a
    /// new monitor: call it before instrumenting).
    pub fn with_slow_poll_threshold(self, threshold: Duration) -> Self {
        TaskMonitor {
            shared: Arc::new(Shared {
                epoch: self.shared.epoch,
                slow_ns: threshold.as_nanos().min(u64::MAX as u128) as u64,
                c: Counters::default(),
                last: Mutex::new(TaskMetrics::default()),
            }),
        }
    }

    /// The slow-poll threshold.
    pub fn slow_poll_threshold(&self) -> Duration {
        Duration::from_nanos(self.shared.slow_ns)
    }

    /// Wraps `future` so that its polls and wakes count on this monitor;
    /// spawn the result, or await it.
    pub fn instrument<F: Future>(&self, future: F) -> Instrumented<F> {
        let s = &self.shared;
        add(&s.c.instrumented, 1);
        Instrumented {
            inner: future,
            state: Arc::new(TaskState {
                monitor: s.clone(),
                woke_at: AtomicU64::new(0),
                waker: Mutex::new(None),
            }),
            created_at: s.now(),
            polled: false,
            idled_at: 0,
        }
    }

    /// The metrics since the monitor was made.
    pub fn cumulative(&self) -> TaskMetrics {
        let c = &self.shared.c;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let d = |a: &AtomicU64| Duration::from_nanos(a.load(Ordering::Relaxed));
        TaskMetrics {
            instrumented_count: l(&c.instrumented),
            dropped_count: l(&c.dropped),
            first_poll_count: l(&c.first_poll),
            total_first_poll_delay: d(&c.first_poll_delay_ns),
            total_poll_count: l(&c.polls),
            total_poll_duration: d(&c.poll_ns),
            total_slow_poll_count: l(&c.slow_polls),
            total_slow_poll_duration: d(&c.slow_poll_ns),
            total_scheduled_count: l(&c.scheduled),
            total_scheduled_duration: d(&c.scheduled_ns),
            total_idled_count: l(&c.idled),
            total_idle_duration: d(&c.idle_ns),
        }
    }

    /// The metrics since the last call (or since the monitor was made):
    /// each call starts a new interval, for every clone of this monitor.
    pub fn take_interval(&self) -> TaskMetrics {
        let now = self.cumulative();
        let mut last = self.shared.last.lock().unwrap_or_else(|e| e.into_inner());
        // A counter read before another's increment is seen can make one
        // interval's sum run ahead of another's: clamp, never underflow.
        let now = max_each(&now, &last);
        let d = now.minus(&last);
        *last = now;
        d
    }

    /// An endless iterator of intervals: each `next` is
    /// [`take_interval`](Self::take_interval).
    pub fn intervals(&self) -> impl Iterator<Item = TaskMetrics> {
        let m = self.clone();
        std::iter::repeat_with(move || m.take_interval())
    }
}

fn max_each(a: &TaskMetrics, b: &TaskMetrics) -> TaskMetrics {
    TaskMetrics {
        instrumented_count: a.instrumented_count.max(b.instrumented_count),
        dropped_count: a.dropped_count.max(b.dropped_count),
        first_poll_count: a.first_poll_count.max(b.first_poll_count),
        total_first_poll_delay: a.total_first_poll_delay.max(b.total_first_poll_delay),
        total_poll_count: a.total_poll_count.max(b.total_poll_count),
        total_poll_duration: a.total_poll_duration.max(b.total_poll_duration),
        total_slow_poll_count: a.total_slow_poll_count.max(b.total_slow_poll_count),
        total_slow_poll_duration: a.total_slow_poll_duration.max(b.total_slow_poll_duration),
        total_scheduled_count: a.total_scheduled_count.max(b.total_scheduled_count),
        total_scheduled_duration: a.total_scheduled_duration.max(b.total_scheduled_duration),
        total_idled_count: a.total_idled_count.max(b.total_idled_count),
        total_idle_duration: a.total_idle_duration.max(b.total_idle_duration),
    }
}

/// An instrumented task's waker state: when it was woken, and the waker of
/// the task's last poll, which the wrapped waker passes the wake on to.
struct TaskState {
    monitor: Arc<Shared>,
    /// When the task was woken since its last poll (0: not woken).
    woke_at: AtomicU64,
    waker: Mutex<Option<Waker>>,
}

impl Wake for TaskState {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Relaxed: the first wake since the poll stamps the time; the wake
        // below, not this stamp, is what makes the task run.
        let _ = self.woke_at.compare_exchange(
            0,
            self.monitor.now(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        let w = self.waker.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(w) = w {
            w.wake();
        }
    }
}

/// A future instrumented by a [`TaskMonitor`].
pub struct Instrumented<F> {
    inner: F,
    state: Arc<TaskState>,
    created_at: u64,
    polled: bool,
    /// When the last poll returned `Pending` (0: none yet).
    idled_at: u64,
}

impl<F> std::fmt::Debug for Instrumented<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instrumented")
            .field("polled", &self.polled)
            .finish_non_exhaustive()
    }
}

impl<F: Future> Future for Instrumented<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `inner` is structurally pinned (never moved out of
        // `self`); the other fields are not pinned and only read or set.
        let this = unsafe { self.get_unchecked_mut() };
        let st = &this.state;
        let m = &*st.monitor;
        let start = m.now();
        if !this.polled {
            this.polled = true;
            add(&m.c.first_poll, 1);
            add(
                &m.c.first_poll_delay_ns,
                start.saturating_sub(this.created_at),
            );
        }
        // Relaxed: see `wake_by_ref`.
        let woke = st.woke_at.swap(0, Ordering::Relaxed);
        if woke != 0 {
            add(&m.c.scheduled, 1);
            add(&m.c.scheduled_ns, start.saturating_sub(woke));
            if this.idled_at != 0 {
                add(&m.c.idled, 1);
                add(&m.c.idle_ns, woke.saturating_sub(this.idled_at));
            }
        }
        {
            let mut w = st.waker.lock().unwrap_or_else(|e| e.into_inner());
            match &*w {
                Some(old) if old.will_wake(cx.waker()) => {}
                _ => *w = Some(cx.waker().clone()),
            }
        }
        let waker = Waker::from(st.clone());
        let mut cx2 = Context::from_waker(&waker);
        // SAFETY: `inner` is pinned in place inside the pinned `self`.
        let res = unsafe { Pin::new_unchecked(&mut this.inner) }.poll(&mut cx2);
        let end = m.now();
        let d = end.saturating_sub(start);
        add(&m.c.polls, 1);
        add(&m.c.poll_ns, d);
        if d >= m.slow_ns {
            add(&m.c.slow_polls, 1);
            add(&m.c.slow_poll_ns, d);
        }
        if res.is_pending() {
            this.idled_at = end;
        }
        res
    }
}

impl<F> Drop for Instrumented<F> {
    fn drop(&mut self) {
        add(&self.state.monitor.c.dropped, 1);
    }
}
