//! The recorder (rings, the outside ring, the flag) and what a reader gets
//! back ([`Trace`]). See the module docs of `trace`.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::panic::Location;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crossbeam_utils::CachePadded;

use crate::place::CurrentPlace;
use crate::sync::{fence, AtomicBool, AtomicU64, Mutex, Ordering};
use crate::task::TaskMeta;

/// Events kept per worker when no capacity is given
/// ([`Builder::trace`](crate::Builder::trace) sets one): 64 Ki events of
/// 48 bytes, 3 MiB per worker, a few tens of milliseconds of a busy
/// worker's life.
pub const DEFAULT_CAPACITY: usize = 1 << 16;

/// Events kept from threads outside the workers.
const OUTSIDE_CAPACITY: usize = 1 << 14;

/// Where a woken (or spawned) task was put, and which decision chose it:
/// the wakeup placement of worker/schedule.rs and policy/wake.rs, each named after the
/// `Stats` counter that counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Decision {
    /// A task woken by its own poll on the worker that ran it: to the back
    /// of the worker's deque (no placement).
    SelfWake,
    /// A task that yielded ([`yield_now`](crate::yield_now)): behind the
    /// deque and the inbox.
    Yield,
    /// The waker's own LIFO slot, chosen by wake placement (`wake_local`).
    Lifo,
    /// No idle worker near: the waker's LIFO slot, or from outside the
    /// previous worker's inbox, without a search (`wake_none_idle`).
    NoneIdle,
    /// `select_idle_sibling`: the target was idle (`sis_target`).
    Target,
    /// `select_idle_sibling`: the previous worker was idle (`sis_prev`).
    Prev,
    /// `select_idle_sibling`: the recently used worker was idle
    /// (`sis_recent_hit`).
    RecentHit,
    /// `select_idle_sibling`: a whole idle core (`sis_idle_core`).
    IdleCore,
    /// `select_idle_sibling`: an idle worker seen on the way
    /// (`sis_idle_candidate`).
    IdleCandidate,
    /// `select_idle_sibling`: the LLC scan found an idle worker
    /// (`sis_scan_found`).
    ScanFound,
    /// `select_idle_sibling`: nothing idle, the target (`sis_fallback`).
    Fallback,
    /// The idle worker chosen was parked while another wake was in flight:
    /// the waker's deque (`wake_deferred`).
    Deferred,
    /// The waking worker's core was borrowed (its own code woke the task):
    /// its inbox.
    Inbox,
    /// A wake by the I/O driver or a timer: kept on the worker in its batch
    /// (`wakes_by_driver`).
    Batch,
    /// A task out of its cooperative budget: the back of the deque
    /// (`coop_yields`).
    CoopYield,
    /// A task pinned to a worker ([`Place::Worker`](crate::Place::Worker)):
    /// that worker's pinned queue.
    Pinned,
    /// A task placed in a domain: its place queue.
    PlaceQueue,
    /// A spawn's first placement (the spawner's deque, an idle worker
    /// found by `find_idlest_group`, or the place asked for).
    Spawn,
    /// A local task of a `block_on` thread
    /// ([`spawn_local`](crate::spawn_local)): that thread's local queue.
    /// The wake's `to` is the thread's number, as in
    /// [`Thread::Outside`], not a worker's index.
    Local,
}

impl Decision {
    const ALL: [Decision; 19] = [
        Decision::SelfWake,
        Decision::Yield,
        Decision::Lifo,
        Decision::NoneIdle,
        Decision::Target,
        Decision::Prev,
        Decision::RecentHit,
        Decision::IdleCore,
        Decision::IdleCandidate,
        Decision::ScanFound,
        Decision::Fallback,
        Decision::Deferred,
        Decision::Inbox,
        Decision::Batch,
        Decision::CoopYield,
        Decision::Pinned,
        Decision::PlaceQueue,
        Decision::Spawn,
        Decision::Local,
    ];

    /// Its name in a trace's JSON (`"decision"`).
    pub fn name(self) -> &'static str {
        match self {
            Decision::SelfWake => "self",
            Decision::Yield => "yield",
            Decision::Lifo => "lifo",
            Decision::NoneIdle => "none idle",
            Decision::Target => "target",
            Decision::Prev => "prev",
            Decision::RecentHit => "recent",
            Decision::IdleCore => "idle core",
            Decision::IdleCandidate => "idle candidate",
            Decision::ScanFound => "scan",
            Decision::Fallback => "fallback",
            Decision::Deferred => "deferred",
            Decision::Inbox => "inbox",
            Decision::Batch => "batch",
            Decision::CoopYield => "coop yield",
            Decision::Pinned => "pinned",
            Decision::PlaceQueue => "place queue",
            Decision::Spawn => "spawn",
            Decision::Local => "local",
        }
    }
}

/// Why a worker went to sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParkReason {
    /// Idle, on its condvar (no I/O driver).
    Condvar,
    /// Idle, in the I/O driver: in a poller it holds, or on its thread,
    /// until an event, a wake or its next timer.
    Driver,
}

impl ParkReason {
    /// Its name in a trace's JSON (`"why"`).
    pub fn name(self) -> &'static str {
        match self {
            ParkReason::Condvar => "idle",
            ParkReason::Driver => "idle in the I/O driver",
        }
    }
}

/// The thread an event was recorded on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Thread {
    /// A worker, by index.
    Worker(usize),
    /// A thread outside the workers (a `block_on` caller, a spawner, a
    /// blocking-pool thread), numbered in the order it first recorded. A
    /// thread running `block_on` records into a ring of its own while it
    /// does ([`Trace::block_on_threads`]); the others share one.
    Outside(u32),
}

/// What happened ([`Event`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventKind {
    /// A task was spawned (it became runnable).
    Spawn {
        /// The task's trace id.
        task: u64,
        /// Where it was spawned.
        at: &'static Location<'static>,
    },
    /// A poll of a task began.
    PollStart {
        /// The task's trace id.
        task: u64,
        /// Where the task was spawned.
        at: &'static Location<'static>,
    },
    /// The poll begun by the last `PollStart` on this thread ended.
    PollEnd {
        /// The task's trace id.
        task: u64,
        /// Whether the poll finished the task.
        ready: bool,
    },
    /// A task was woken (it became runnable).
    Wake {
        /// The task's trace id.
        task: u64,
        /// The worker it was put on (its queue, slot or inbox); for
        /// [`Decision::Local`], the number of the `block_on` thread whose
        /// local queue it went to ([`Thread::Outside`]).
        to: usize,
        /// How that worker was chosen.
        decision: Decision,
    },
    /// This worker stole from another.
    Steal {
        /// The worker robbed.
        victim: usize,
        /// Tasks moved (the one run and the batch).
        moved: usize,
        /// The nearest domain the two workers share: `"core"`, `"LLC"`,
        /// `"NUMA"` (a node within a package), `"package"` or `"machine"`.
        level: &'static str,
    },
    /// This worker went to sleep.
    Park {
        /// Where it sleeps.
        why: ParkReason,
    },
    /// This worker woke up.
    Unpark,
    /// This thread woke a parked worker (a futex wake, or a poller's).
    Notify {
        /// The worker woken.
        target: usize,
    },
    /// This worker turned a poller, or slept on its thread in the I/O
    /// driver, and fired its due timers: a batch.
    PollerTurn {
        /// Readiness events the turn dispatched (0 when the worker slept
        /// on its thread, holding no poller).
        events: usize,
        /// Tasks the batch woke onto this worker.
        batch: usize,
    },
    /// This worker, watching, took private work from other workers
    /// (sched/watch.rs).
    WatcherTake {
        /// Tasks taken.
        tasks: usize,
        /// Of them, taken from behind a long poll.
        long: usize,
    },
    /// Timers fired on this worker.
    TimersFired {
        /// How many.
        count: usize,
    },
    /// A closure was handed to the blocking pool.
    Blocking {
        /// Its task's trace id.
        task: u64,
        /// Where `spawn_blocking` was called.
        at: &'static Location<'static>,
    },
}

/// One recorded event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Nanoseconds since the runtime started.
    pub ts_ns: u64,
    /// The thread that recorded it.
    pub thread: Thread,
    /// What happened.
    pub kind: EventKind,
}

/// One poll, paired from its start and end events ([`Trace::polls`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poll {
    /// The thread that ran it.
    pub thread: Thread,
    /// The task's trace id.
    pub task: u64,
    /// Where the task was spawned.
    pub at: &'static Location<'static>,
    /// When it began (ns since the runtime started).
    pub start_ns: u64,
    /// When it ended.
    pub end_ns: u64,
    /// Whether it finished the task.
    pub ready: bool,
}

// The raw kinds, in the low byte of a slot's word 3.
const K_SPAWN: u64 = 1;
const K_POLL_START: u64 = 2;
const K_POLL_END: u64 = 3;
const K_WAKE: u64 = 4;
const K_STEAL: u64 = 5;
const K_PARK: u64 = 6;
const K_UNPARK: u64 = 7;
const K_NOTIFY: u64 = 8;
const K_TURN: u64 = 9;
const K_WATCH: u64 = 10;
const K_TIMERS: u64 = 11;
const K_BLOCKING: u64 = 12;

/// An event as stored: time, task, location, packed kind (kind in bits
/// 0..8, a small argument in 8..16, a 32-bit one in 32..64), and a wide
/// argument.
type Raw = [u64; 5];

#[inline]
fn loc_word(at: &'static Location<'static>) -> u64 {
    at as *const Location<'static> as usize as u64
}

#[inline]
fn pack(kind: u64, small: u64, mid: usize) -> u64 {
    kind | (small & 0xff) << 8 | (mid as u64 & 0xffff_ffff) << 32
}

/// One slot of a worker's ring (trace/mod.rs, "The ring").
#[derive(Default)]
struct Slot {
    seq: AtomicU64,
    data: [AtomicU64; 5],
}

/// A worker's ring, or a `block_on` thread's: written by that thread
/// only.
struct Ring {
    /// Events ever written (the next one's number); written by the owner
    /// only.
    head: AtomicU64,
    slots: Box<[Slot]>,
    mask: u64,
}

impl Ring {
    fn new(capacity: usize) -> Self {
        let cap = capacity.max(2).next_power_of_two();
        Ring {
            head: AtomicU64::new(0),
            slots: (0..cap).map(|_| Slot::default()).collect(),
            mask: cap as u64 - 1,
        }
    }

    /// Appends an event: called only by the ring's thread (its worker, or
    /// the `block_on` thread of a lane).
    #[inline]
    fn push(&self, raw: Raw) {
        // Relaxed: only this thread writes `head`.
        let n = self.head.load(Ordering::Relaxed);
        let s = &self.slots[(n & self.mask) as usize];
        s.seq.store(0, Ordering::Relaxed);
        // Release fence: pairs with the reader's Acquire fence in `read`:
        // a reader that sees any of the data stored below also sees the
        // cleared sequence word on its second load, and drops the slot.
        fence(Ordering::Release);
        for (d, v) in s.data.iter().zip(raw) {
            d.store(v, Ordering::Relaxed);
        }
        // Release: pairs with the reader's first (Acquire) load of `seq`:
        // a reader that sees n + 1 sees this event's data.
        s.seq.store(n + 1, Ordering::Release);
        // Release: pairs with `read`'s Acquire load of `head`, so the
        // reader looks at slots whose sequence words are published.
        self.head.store(n + 1, Ordering::Release);
    }

    /// The events kept, oldest first, the number of the first event the
    /// ring still held when read, and how many of the kept slots were torn
    /// by the writer during the read.
    fn read(&self) -> (Vec<Raw>, u64, u64) {
        // Acquire: pairs with `push`'s last store.
        let head = self.head.load(Ordering::Acquire);
        let cap = self.mask + 1;
        let from = head.saturating_sub(cap);
        let mut out = Vec::with_capacity((head - from) as usize);
        let mut torn = 0;
        for n in from..head {
            let s = &self.slots[(n & self.mask) as usize];
            // Acquire: pairs with `push`'s Release store of `seq`.
            if s.seq.load(Ordering::Acquire) != n + 1 {
                torn += 1;
                continue;
            }
            let raw: Raw = std::array::from_fn(|i| s.data[i].load(Ordering::Relaxed));
            // Acquire fence: pairs with `push`'s Release fence (see there).
            fence(Ordering::Acquire);
            if s.seq.load(Ordering::Relaxed) != n + 1 {
                torn += 1;
                continue;
            }
            out.push(raw);
        }
        (out, from, torn)
    }
}

/// The ring of the threads outside the workers that run no `block_on`:
/// behind a mutex, off the workers' path.
#[derive(Default)]
struct Outside {
    events: VecDeque<(u32, Raw)>,
    dropped: u64,
    /// Thread number -> name, for the trace's track names.
    names: BTreeMap<u32, String>,
}

thread_local! {
    /// This thread's number among the outside threads (0: not yet given).
    static OUTSIDE_ID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The next outside thread's number.
static NEXT_OUTSIDE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

fn outside_id() -> u32 {
    OUTSIDE_ID.with(|c| {
        if c.get() == 0 {
            // Relaxed: a unique number is all that is asked.
            c.set(NEXT_OUTSIDE.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        }
        c.get()
    })
}

/// This thread's number among the threads outside the workers (its
/// [`Thread::Outside`]).
pub(crate) fn thread_number() -> u32 {
    outside_id()
}

/// The ring of a thread running `block_on` (its lane): written by that
/// thread only, as a worker's ring is by its worker, with no lock.
struct Lane {
    /// The thread's number ([`Thread::Outside`]).
    thread: u32,
    ring: Arc<Ring>,
    /// The ring's head when recording last started (0 for a lane made
    /// since).
    from: u64,
}

thread_local! {
    /// The lane of the `block_on` running on this thread, if any: its
    /// recorder's id, and its ring once the thread recorded an event in
    /// it ([`Recorder::enter_lane`]).
    static LANE: RefCell<Option<(u64, Option<Arc<Ring>>)>> = const { RefCell::new(None) };
}

/// The next recorder's id (a lane names its recorder by it: an address
/// could be reused by a later recorder).
static NEXT_RECORDER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Makes the calling thread a lane of a recorder while it lives
/// ([`Recorder::enter_lane`]); restores the thread's previous lane when
/// dropped.
pub(crate) struct LaneGuard {
    prev: Option<(u64, Option<Arc<Ring>>)>,
}

impl Drop for LaneGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        // `try_with`: a guard dropped during the thread's exit, after the
        // slot is gone, has nothing to restore.
        let _ = LANE.try_with(|l| *l.borrow_mut() = prev);
    }
}

/// The runtime's recorder: a flag, a ring per worker (made at the first
/// start), a ring per `block_on` thread (made at its first event) and the
/// outside ring.
pub(crate) struct Recorder {
    on: CachePadded<AtomicBool>,
    /// Names it in the lanes of `block_on` threads.
    id: u64,
    /// The runtime's clock, read at every event (`timing::Clock`).
    clock: crate::timing::Clock,
    capacity: usize,
    rings: OnceLock<Box<[CachePadded<Ring>]>>,
    lanes: Mutex<Vec<Lane>>,
    outside: Mutex<Outside>,
    /// Per worker: the ring's head when recording last started, and when.
    window: Mutex<(Vec<u64>, u64)>,
    places: Vec<CurrentPlace>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("on", &self.on.load(Ordering::Relaxed))
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder for workers at `places`, the runtime's clock starting at
    /// `start`, keeping `capacity` events per worker.
    pub(crate) fn new(places: Vec<CurrentPlace>, start: Instant, capacity: usize) -> Self {
        Recorder {
            on: CachePadded::new(AtomicBool::new(false)),
            // Relaxed: a unique number is all that is asked.
            id: NEXT_RECORDER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            clock: crate::timing::Clock::new(start),
            capacity: capacity.max(2),
            rings: OnceLock::new(),
            lanes: Mutex::new(Vec::new()),
            outside: Mutex::new(Outside::default()),
            window: Mutex::new((vec![0; places.len()], 0)),
            places,
        }
    }

    /// Whether recording is on: the one relaxed load of every site.
    #[inline(always)]
    fn on(&self) -> bool {
        // Relaxed: a switch; an event recorded just before or after a
        // start or stop is harmless (the reader filters by time).
        self.on.load(Ordering::Relaxed)
    }

    /// Whether recording is on, for a site whose arguments cost something
    /// to compute (`if is_on() { record }`).
    #[inline(always)]
    pub(crate) fn is_on(&self) -> bool {
        self.on()
    }

    fn now(&self) -> u64 {
        self.clock.ns()
    }

    /// Starts recording (the rings are made at the first start).
    pub(crate) fn start(&self) {
        let rings = self.rings.get_or_init(|| {
            (0..self.places.len())
                .map(|_| CachePadded::new(Ring::new(self.capacity)))
                .collect()
        });
        let mut w = self.window.lock();
        // Relaxed: a stale head makes `dropped` count events of before the
        // window, which the time filter drops anyway.
        w.0 = rings
            .iter()
            .map(|r| r.head.load(Ordering::Relaxed))
            .collect();
        w.1 = self.now();
        for l in self.lanes.lock().iter_mut() {
            // Relaxed: as the workers' heads above.
            l.from = l.ring.head.load(Ordering::Relaxed);
        }
        {
            let mut o = self.outside.lock();
            o.events.clear();
            o.dropped = 0;
        }
        // Relaxed: see `on`.
        self.on.store(true, Ordering::Relaxed);
    }

    /// Stops recording.
    pub(crate) fn stop(&self) {
        // Relaxed: see `on`.
        self.on.store(false, Ordering::Relaxed);
    }

    #[inline]
    fn record(&self, from: Option<usize>, raw: Raw) {
        match from {
            Some(w) => {
                if let Some(rings) = self.rings.get() {
                    rings[w].push(raw);
                }
            }
            None => self.record_outside(raw),
        }
    }

    /// Makes the calling thread (one running `block_on`) record into a
    /// lane of its own until the guard is dropped: its ring is made (or
    /// found, made by an earlier call) at its first event, under the lanes'
    /// lock; every event after that is pushed with no lock and no
    /// allocation, as a worker's.
    pub(crate) fn enter_lane(&self) -> LaneGuard {
        let prev = LANE.with(|l| {
            let mut l = l.borrow_mut();
            // A nested call of the same runtime keeps the ring found.
            let ring = match &*l {
                Some((id, ring)) if *id == self.id => ring.clone(),
                _ => None,
            };
            l.replace((self.id, ring))
        });
        LaneGuard { prev }
    }

    /// The lane of thread `thread`, made if it has none.
    #[cold]
    fn lane(&self, thread: u32) -> Arc<Ring> {
        let ring = {
            let mut lanes = self.lanes.lock();
            if let Some(l) = lanes.iter().find(|l| l.thread == thread) {
                return l.ring.clone();
            }
            let ring = Arc::new(Ring::new(self.capacity));
            lanes.push(Lane {
                thread,
                ring: ring.clone(),
                from: 0,
            });
            ring
        };
        self.name_thread(&mut self.outside.lock(), thread);
        ring
    }

    fn name_thread(&self, o: &mut Outside, id: u32) {
        o.names.entry(id).or_insert_with(|| {
            std::thread::current()
                .name()
                .map_or_else(|| format!("thread {id}"), str::to_owned)
        });
    }

    /// An event of a thread outside the workers: into its lane when it
    /// runs a `block_on` of this runtime, else into the shared ring.
    #[cold]
    fn record_outside(&self, raw: Raw) {
        let in_lane = LANE.with(|l| {
            let mut l = l.borrow_mut();
            match &mut *l {
                Some((id, ring)) if *id == self.id => {
                    ring.get_or_insert_with(|| self.lane(outside_id()))
                        .push(raw);
                    true
                }
                _ => false,
            }
        });
        if !in_lane {
            self.record_shared(raw);
        }
    }

    #[cold]
    fn record_shared(&self, raw: Raw) {
        let id = outside_id();
        let mut o = self.outside.lock();
        if o.events.len() >= OUTSIDE_CAPACITY {
            o.events.pop_front();
            o.dropped += 1;
        }
        o.events.push_back((id, raw));
        self.name_thread(&mut o, id);
    }

    /// A task spawned from worker `from` (or outside).
    #[inline(always)]
    pub(crate) fn spawn(&self, from: Option<usize>, meta: &TaskMeta) {
        if self.on() {
            self.record(
                from,
                [
                    self.now(),
                    meta.trace_id(),
                    loc_word(meta.spawned_at),
                    K_SPAWN,
                    0,
                ],
            );
        }
    }

    /// A closure handed to the blocking pool from `from`.
    #[inline(always)]
    pub(crate) fn blocking(&self, from: Option<usize>, meta: &TaskMeta) {
        if self.on() {
            self.record(
                from,
                [
                    self.now(),
                    meta.trace_id(),
                    loc_word(meta.spawned_at),
                    K_BLOCKING,
                    0,
                ],
            );
        }
    }

    /// A poll begins on worker `w` (or outside): the task's id when the
    /// start was recorded, which the poll's end takes ([`poll_end`]), so
    /// that the pair costs one load of the flag and every recorded start
    /// has its end.
    ///
    /// [`poll_end`]: Self::poll_end
    #[inline(always)]
    pub(crate) fn poll_start(&self, w: Option<usize>, meta: &TaskMeta) -> Option<u64> {
        if self.on() {
            let task = meta.trace_id();
            // A finish recorded by a poll whose end was not recorded
            // (recording was off at its start) must not mark this one's.
            crate::task::take_poll_ready();
            self.record(
                w,
                [self.now(), task, loc_word(meta.spawned_at), K_POLL_START, 0],
            );
            Some(task)
        } else {
            None
        }
    }

    /// The poll whose start `started` ([`poll_start`](Self::poll_start))
    /// recorded ends on worker `w` (or outside).
    #[inline(always)]
    pub(crate) fn poll_end(&self, w: Option<usize>, started: Option<u64>) {
        if let Some(task) = started {
            let ready = crate::task::take_poll_ready();
            self.record(
                w,
                [self.now(), task, 0, pack(K_POLL_END, ready as u64, 0), 0],
            );
        }
    }

    /// A task woken by worker `from` (or outside), put on worker `to`.
    #[inline(always)]
    pub(crate) fn wake(&self, from: Option<usize>, meta: &TaskMeta, to: usize, d: Decision) {
        if self.on() {
            self.record(
                from,
                [
                    self.now(),
                    meta.trace_id(),
                    0,
                    pack(K_WAKE, d as u64, to),
                    0,
                ],
            );
        }
    }

    /// Worker `w` stole `moved` tasks from `victim`.
    #[inline(always)]
    pub(crate) fn steal(&self, w: usize, victim: usize, moved: usize) {
        if self.on() {
            self.record(
                Some(w),
                [self.now(), 0, 0, pack(K_STEAL, 0, victim), moved as u64],
            );
        }
    }

    /// Worker `w` goes to sleep.
    #[inline(always)]
    pub(crate) fn park(&self, w: usize, why: ParkReason) {
        if self.on() {
            self.record(Some(w), [self.now(), 0, 0, pack(K_PARK, why as u64, 0), 0]);
        }
    }

    /// Worker `w` woke up.
    #[inline(always)]
    pub(crate) fn unpark(&self, w: usize) {
        if self.on() {
            self.record(Some(w), [self.now(), 0, 0, K_UNPARK, 0]);
        }
    }

    /// Worker `from` (or an outside thread) woke parked worker `target`.
    #[inline(always)]
    pub(crate) fn notify(&self, from: Option<usize>, target: usize) {
        if self.on() {
            self.record(from, [self.now(), 0, 0, pack(K_NOTIFY, 0, target), 0]);
        }
    }

    /// Worker `w` turned a poller (`events` dispatched) or fired timers;
    /// the batch put `batch` tasks on it.
    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn poller_turn(&self, w: usize, events: usize, batch: usize) {
        if self.on() {
            self.record(
                Some(w),
                [self.now(), 0, 0, pack(K_TURN, 0, events), batch as u64],
            );
        }
    }

    /// Worker `w`, watching, took `tasks` tasks (`long` from behind a long
    /// poll).
    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn watcher_take(&self, w: usize, tasks: usize, long: usize) {
        if self.on() {
            self.record(
                Some(w),
                [self.now(), 0, 0, pack(K_WATCH, 0, long), tasks as u64],
            );
        }
    }

    /// `count` timers fired on worker `w`.
    #[cfg_attr(not(feature = "io"), allow(dead_code))]
    #[inline(always)]
    pub(crate) fn timers_fired(&self, w: usize, count: usize) {
        if self.on() {
            self.record(Some(w), [self.now(), 0, 0, K_TIMERS, count as u64]);
        }
    }

    /// What the rings hold now, of the current (or last) window.
    pub(crate) fn collect(&self) -> Trace {
        let (heads, since) = {
            let w = self.window.lock();
            (w.0.clone(), w.1)
        };
        let mut events = Vec::new();
        let mut dropped = vec![0; self.places.len()];
        if let Some(rings) = self.rings.get() {
            for (w, ring) in rings.iter().enumerate() {
                let (raws, from, torn) = ring.read();
                dropped[w] = from.saturating_sub(heads[w]) + torn;
                events.extend(
                    raws.iter()
                        .filter(|r| r[0] >= since)
                        .filter_map(|r| decode(Thread::Worker(w), r, &self.places)),
                );
            }
        }
        let mut lane_dropped = BTreeMap::new();
        for l in self.lanes.lock().iter() {
            let (raws, from, torn) = l.ring.read();
            let thread = Thread::Outside(l.thread);
            let before = events.len();
            events.extend(
                raws.iter()
                    .filter(|r| r[0] >= since)
                    .filter_map(|r| decode(thread, r, &self.places)),
            );
            let dropped = from.saturating_sub(l.from) + torn;
            // A lane of an earlier window, idle in this one, is left out.
            if events.len() > before || dropped > 0 {
                lane_dropped.insert(l.thread, dropped);
            }
        }
        let (outside_dropped, names) = {
            let o = self.outside.lock();
            events.extend(
                o.events
                    .iter()
                    .filter(|(_, r)| r[0] >= since)
                    .filter_map(|(id, r)| decode(Thread::Outside(*id), r, &self.places)),
            );
            (o.dropped, o.names.clone())
        };
        // A stable sort: events of one thread keep their order.
        events.sort_by_key(|e| e.ts_ns);
        Trace {
            workers: self.places.clone(),
            events,
            dropped,
            outside_dropped,
            lane_dropped,
            outside_names: names,
        }
    }
}

/// The nearest domain workers at `a` and `b` share.
fn level_name(a: &CurrentPlace, b: &CurrentPlace) -> &'static str {
    if a.core == b.core {
        "core"
    } else if a.llc == b.llc {
        "LLC"
    } else if a.package == b.package && a.numa == b.numa {
        "NUMA"
    } else if a.package == b.package {
        "package"
    } else {
        // Across packages (a NUMA node that spans them is the machine).
        "machine"
    }
}

fn decode(thread: Thread, r: &Raw, places: &[CurrentPlace]) -> Option<Event> {
    let [ts, task, loc, packed, wide] = *r;
    let kind = packed & 0xff;
    let small = (packed >> 8) & 0xff;
    let mid = (packed >> 32) as usize;
    let at = || {
        (loc != 0).then(|| {
            // SAFETY: `loc` was stored from a `&'static Location` by the
            // recording site (`loc_word`), and the ring's sequence words
            // vouch that the slot's words all come from one event (module
            // docs, "The ring"); the outside ring is behind a mutex.
            unsafe { &*(loc as usize as *const Location<'static>) }
        })
    };
    let kind = match kind {
        K_SPAWN => EventKind::Spawn { task, at: at()? },
        K_BLOCKING => EventKind::Blocking { task, at: at()? },
        K_POLL_START => EventKind::PollStart { task, at: at()? },
        K_POLL_END => EventKind::PollEnd {
            task,
            ready: small != 0,
        },
        K_WAKE => EventKind::Wake {
            task,
            to: mid,
            decision: *Decision::ALL.get(small as usize)?,
        },
        K_STEAL => {
            let Thread::Worker(w) = thread else {
                return None;
            };
            EventKind::Steal {
                victim: mid,
                moved: wide as usize,
                level: level_name(places.get(w)?, places.get(mid)?),
            }
        }
        K_PARK => EventKind::Park {
            why: if small == ParkReason::Driver as u64 {
                ParkReason::Driver
            } else {
                ParkReason::Condvar
            },
        },
        K_UNPARK => EventKind::Unpark,
        K_NOTIFY => EventKind::Notify { target: mid },
        K_TURN => EventKind::PollerTurn {
            events: mid,
            batch: wide as usize,
        },
        K_WATCH => EventKind::WatcherTake {
            tasks: wide as usize,
            long: mid,
        },
        K_TIMERS => EventKind::TimersFired {
            count: wide as usize,
        },
        _ => return None,
    };
    Some(Event {
        ts_ns: ts,
        thread,
        kind,
    })
}

/// A recorded trace: the events of every worker and of the threads
/// outside them, in time order, with the workers' places in the topology
/// and how many events each ring dropped.
#[derive(Debug, Clone)]
pub struct Trace {
    workers: Vec<CurrentPlace>,
    events: Vec<Event>,
    dropped: Vec<u64>,
    outside_dropped: u64,
    /// Per `block_on` thread with a lane: the events its ring lost.
    lane_dropped: BTreeMap<u32, u64>,
    outside_names: BTreeMap<u32, String>,
}

impl Trace {
    /// Where each worker sits in the topology (by worker index).
    pub fn workers(&self) -> &[CurrentPlace] {
        &self.workers
    }

    /// Every event, in time order (a thread's own events in the order it
    /// recorded them).
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Events worker `w`'s ring lost in this trace's window: overwritten
    /// when it was full (it keeps the newest), or overwritten while being
    /// read.
    pub fn dropped(&self, w: usize) -> u64 {
        self.dropped.get(w).copied().unwrap_or(0)
    }

    /// Events the ring shared by the outside threads that run no
    /// `block_on` lost.
    pub fn outside_dropped(&self) -> u64 {
        self.outside_dropped
    }

    /// The outside threads that recorded into a lane of their own while
    /// running `block_on` in this trace's window (their
    /// [`Thread::Outside`] numbers), ascending.
    pub fn block_on_threads(&self) -> impl Iterator<Item = u32> + '_ {
        self.lane_dropped.keys().copied()
    }

    /// Events the ring of `thread` lost in this trace's window: a
    /// worker's ([`dropped`](Self::dropped)) or a `block_on` thread's
    /// lane; 0 for another outside thread (the ring they share counts its
    /// losses in [`outside_dropped`](Self::outside_dropped)).
    pub fn dropped_on(&self, thread: Thread) -> u64 {
        match thread {
            Thread::Worker(w) => self.dropped(w),
            Thread::Outside(id) => self.lane_dropped.get(&id).copied().unwrap_or(0),
        }
    }

    /// The name of outside thread `id` ([`Thread::Outside`]).
    pub fn outside_name(&self, id: u32) -> Option<&str> {
        self.outside_names.get(&id).map(String::as_str)
    }

    /// The polls, each paired from its start and end on one thread, in
    /// order of their start. A poll whose start or end the ring lost (or
    /// that had not ended when the trace was taken) is left out.
    pub fn polls(&self) -> impl Iterator<Item = Poll> + '_ {
        let mut open: HashMap<Thread, (u64, u64, &'static Location<'static>)> = HashMap::new();
        let mut polls = Vec::new();
        for e in &self.events {
            match e.kind {
                EventKind::PollStart { task, at } => {
                    open.insert(e.thread, (task, e.ts_ns, at));
                }
                EventKind::PollEnd { task, ready } => {
                    if let Some((t, start, at)) = open.remove(&e.thread) {
                        if t == task {
                            polls.push(Poll {
                                thread: e.thread,
                                task,
                                at,
                                start_ns: start,
                                end_ns: e.ts_ns,
                                ready,
                            });
                        }
                    }
                }
                _ => {}
            }
        }
        polls.sort_by_key(|p| p.start_ns);
        polls.into_iter()
    }

    /// Writes the trace as Chrome Trace Event JSON (the JSON object
    /// format), which Perfetto's UI and `chrome://tracing` open, and
    /// `hwsched-trace` renders:
    ///
    /// - a process per LLC (named with its package and NUMA node, sorted in
    ///   topology order) holding a thread per worker, so the page's
    ///   structure is the machine's; the outside threads in a process of
    ///   their own, last (a `block_on` thread's track marked `"block_on"`,
    ///   with the events its lane dropped);
    /// - each poll a complete event (`"ph": "X"`) named by its task's spawn
    ///   location, with the task id, the run-queue delay (from its spawn or
    ///   wake) and whether it finished the task in `args`;
    /// - each wake an instant event with its placement decision, and a
    ///   flow (`"s"` / `"f"`) from it to the task's next poll;
    /// - spawns, steals, parks, unparks, notifies, poller turns, watcher
    ///   takes, timer expiries and blocking hand-offs as instant events;
    /// - in `otherData`, the events each worker's ring and the shared
    ///   outside ring dropped.
    pub fn write_chrome_json(&self, w: impl std::io::Write) -> std::io::Result<()> {
        super::chrome::write(self, w)
    }
}

/// A handle to a runtime's recorder that outlives the runtime: start and
/// stop recording, and read what was recorded, also after shutdown.
/// [`Runtime::tracer`](crate::Runtime::tracer) hands one out.
#[derive(Clone)]
pub struct Tracer(pub(crate) Arc<Recorder>);

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Tracer").field(&*self.0).finish()
    }
}

impl Tracer {
    /// Starts recording a new window (events of before it are left out of
    /// the next [`Trace`]).
    pub fn start(&self) {
        self.0.start();
    }

    /// Stops recording and returns the window's trace.
    pub fn stop(&self) -> Trace {
        self.0.stop();
        self.0.collect()
    }

    /// The window's trace so far, recording going on (a flight
    /// recorder's dump).
    pub fn snapshot(&self) -> Trace {
        self.0.collect()
    }

    /// Whether it is recording.
    pub fn is_recording(&self) -> bool {
        self.0.on()
    }
}
