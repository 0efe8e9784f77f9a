//! A trace of the scheduler (the `trace` cargo feature): what every worker
//! did and when, kept in a bounded ring per worker (a flight recorder), and
//! written as Chrome Trace Event JSON, which Perfetto's UI and
//! `chrome://tracing` open, one track per worker grouped by the topology.
//!
//! The events are the decisions the [`Stats`](crate::Stats) table counts,
//! with their time, their worker and their task: a task's spawn (with the
//! spawn location `#[track_caller]` gives every spawn function), each poll
//! (start and end), each wake (the waker's thread, the worker the task went
//! to, and the placement decision that chose it: [`Decision`]), steals
//! (level, victim, tasks moved), parks and unparks, poller turns, the
//! watcher's takes, timer expiries and hand-offs to the blocking pool.
//!
//! # Cost
//!
//! - Without the feature, nothing is compiled in: the recording sites call
//!   empty inline methods of a zero-sized recorder.
//! - With the feature and recording off, each site costs one relaxed load
//!   of the recorder's flag.
//! - Recording, each event costs a clock read (`Instant::elapsed`) and
//!   seven stores to the worker's own ring, with no lock, no allocation
//!   and no read-modify-write (BENCHMARKS.md, "Tracing cost"). A thread
//!   running `block_on` records into a ring of its own (its lane) the
//!   same way, once the ring is made at its first event; other threads
//!   outside the workers (a spawner, a blocking-pool thread) record into
//!   one mutex-protected ring they share, off the workers' path.
//!
//! # Use
//!
//! [`Builder::trace`](crate::Builder::trace) records from the runtime's
//! start; [`Runtime::start_trace`](crate::Runtime::start_trace) and
//! [`Runtime::stop_trace`](crate::Runtime::stop_trace) record a window; a
//! [`Tracer`] ([`Runtime::tracer`](crate::Runtime::tracer)) outlives the
//! runtime, so a trace can be read after its shutdown.
//!
//! ```
//! # #[cfg(feature = "trace")] {
//! let rt = hwsched::Runtime::builder().worker_threads(2).build().unwrap();
//! let tracer = rt.tracer();
//! tracer.start();
//! rt.block_on(async {
//!     hwsched::spawn(async { 1 + 1 }).await.unwrap();
//! });
//! // A poll's end is recorded after its output reaches the awaiter: the
//! // shutdown joins the workers, so every poll is complete.
//! drop(rt);
//! let trace = tracer.stop();
//! assert_eq!(trace.polls().count(), 1);
//! let mut json = Vec::new();
//! trace.write_chrome_json(&mut json).unwrap();
//! # }
//! ```
//!
//! # The ring
//!
//! Each worker's ring is written only by that worker, and each
//! `block_on` thread's lane only by that thread. A slot is a
//! sequence word and five data words, all atomics (so a reader racing the
//! writer reads stale or torn values, never undefined ones): the writer
//! clears the sequence word, writes the data, then stores the event's
//! number + 1 (a seqlock per slot); a reader keeps a slot whose sequence
//! word reads the same number before and after its data. When the ring is
//! full the oldest event is overwritten: the ring keeps the newest
//! `capacity` events and [`Trace::dropped`] ([`Trace::dropped_on`] for a
//! lane) says how many it lost.

#[cfg(feature = "trace")]
mod chrome;
#[cfg(feature = "trace")]
mod record;

#[cfg(feature = "trace")]
pub use record::DEFAULT_CAPACITY;
#[cfg(feature = "trace")]
pub(crate) use record::{thread_number, Recorder};
#[cfg(feature = "trace")]
pub use record::{Decision, Event, EventKind, ParkReason, Poll, Thread, Trace, Tracer};

/// The placement decisions a wake records (the `Stats` counter each one
/// is counted in, where one is). Without the feature: its names only.
#[cfg(not(feature = "trace"))]
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    SelfWake,
    Yield,
    Lifo,
    NoneIdle,
    Target,
    Prev,
    RecentHit,
    IdleCore,
    IdleCandidate,
    ScanFound,
    Fallback,
    Deferred,
    Inbox,
    Batch,
    CoopYield,
    Pinned,
    PlaceQueue,
    Spawn,
    Local,
}

/// Why a worker sleeps. Without the feature: its names only.
#[cfg(not(feature = "trace"))]
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParkReason {
    Condvar,
    Driver,
}

/// Without the `trace` feature: a guard of no lane.
#[cfg(not(feature = "trace"))]
pub(crate) struct LaneGuard;

/// Without the `trace` feature: no thread is numbered.
#[cfg(not(feature = "trace"))]
#[inline(always)]
pub(crate) fn thread_number() -> u32 {
    0
}

/// Without the `trace` feature: a recorder of nothing, zero-sized, whose
/// methods are empty and inline away.
#[cfg(not(feature = "trace"))]
#[derive(Debug, Default)]
pub(crate) struct Recorder;

#[cfg(not(feature = "trace"))]
#[allow(dead_code)]
impl Recorder {
    #[inline(always)]
    pub(crate) fn is_on(&self) -> bool {
        false
    }
    #[inline(always)]
    pub(crate) fn spawn(&self, _from: Option<usize>, _meta: &crate::task::TaskMeta) {}
    #[inline(always)]
    pub(crate) fn blocking(&self, _from: Option<usize>, _meta: &crate::task::TaskMeta) {}
    #[inline(always)]
    pub(crate) fn poll_start(
        &self,
        _w: Option<usize>,
        _meta: &crate::task::TaskMeta,
    ) -> Option<u64> {
        None
    }
    #[inline(always)]
    pub(crate) fn poll_end(&self, _w: Option<usize>, _started: Option<u64>) {}
    #[inline(always)]
    pub(crate) fn enter_lane(&self) -> LaneGuard {
        LaneGuard
    }
    #[inline(always)]
    pub(crate) fn wake(
        &self,
        _from: Option<usize>,
        _meta: &crate::task::TaskMeta,
        _to: usize,
        _d: Decision,
    ) {
    }
    #[inline(always)]
    pub(crate) fn steal(&self, _w: usize, _victim: usize, _moved: usize) {}
    #[inline(always)]
    pub(crate) fn park(&self, _w: usize, _why: ParkReason) {}
    #[inline(always)]
    pub(crate) fn unpark(&self, _w: usize) {}
    #[inline(always)]
    pub(crate) fn notify(&self, _from: Option<usize>, _target: usize) {}
    #[inline(always)]
    pub(crate) fn poller_turn(&self, _w: usize, _events: usize, _batch: usize) {}
    #[inline(always)]
    pub(crate) fn watcher_take(&self, _w: usize, _tasks: usize, _long: usize) {}
    #[inline(always)]
    pub(crate) fn timers_fired(&self, _w: usize, _count: usize) {}
}
