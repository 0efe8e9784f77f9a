//! The simulator: simulated workers on a topology, driven by events in
//! virtual nanoseconds, calling hwsched's production policy code.
//!
//! # What is production code and what is mirrored
//!
//! The policies are called, not copied (`hwsched::policy`):
//! [`wake_affine`] and [`select_idle_sibling`] over an [`IdleView`] of the
//! simulated idle flags, with [`scan_depth`] (and [`prop_depth`] for a wake
//! from outside) for its scan depth; [`find_idlest_group`] over a
//! [`PlacementView`] of the simulated load counters;
//! [`BalanceState::walk_with`] (the bounded walk, its `max_newidle_lb_cost`
//! per level and `avg_idle`) and [`busiest_group`] for the group each level
//! steals from; [`wake_spans`] (with [`capable_runs`]) for the parked
//! worker a wake takes and [`near_spans`] for the re-check's order;
//! [`Governor::choose`]; [`Publisher::decide`] (and `GroupClass`, inside
//! `busiest_group`).
//!
//! The mechanism around them lives in `src/worker/mod.rs`, `worker/schedule.rs`, `sched/sleepers.rs`
//! and `sched/park.rs`, over atomics and real queues, and is not callable without
//! threads. It is reproduced here, step for step, in plain code over the
//! simulated state; each function below names the production function it
//! mirrors. When those files change, these mirrors must follow (SIMULATION.md
//! lists them). They follow `main` at fd9db96, and its `wake_spans` (issue
//! 16) through the policy function.
//!
//! The I/O driver (io/mod.rs, io/driver.rs, src/worker/driven.rs `Driven`,
//! `Core::push_batch` and `end_batch`, io/registration.rs `note_wait`) is
//! mirrored for workloads that make sockets ([`Action::Socket`]): pollers
//! per domain (`Config::pollers`), an idle worker sleeping in a free one
//! (its own first) or on its thread, readiness events through the socket's
//! poller, the batch kept by the polling worker and its one decision, busy
//! workers' look every `EVENT_INTERVAL` tasks, sockets moving after
//! `REHOME_AFTER` waits elsewhere. An epoll instance is a serialized
//! resource: callbacks, turns and `epoll_ctl` on it queue behind each other
//! (SIMULATION.md, "I/O: one poller or one per LLC"). Timers, signals and
//! the cooperative budget are not modelled.
//!
//! # The model of time
//!
//! One event queue (a binary heap ordered by time, then by a sequence
//! number, so equal times run in the order they were scheduled: the run is
//! deterministic for a seed). A worker's step (pick a task, walk, park) is
//! computed at once at the step's start; its cost, from the [`CostModel`],
//! is how long the worker is busy before its next event. State changes a
//! step makes (a steal, a claim, a push) are visible to others at the
//! step's start: the simulator has no races, so it cannot show the ones the
//! runtime handles (loom checks those).

use std::cell::{Cell, RefCell};
use std::cmp::{Ordering as CmpOrdering, Reverse};
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::ops::Range;
use std::rc::Rc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use hwsched::policy::{
    busiest_group, capable_runs, near_spans, place_external, prop_depth, scan_depth,
    select_idle_sibling, wake_affine, wake_spans, BalanceState, Contribution, External,
    ExternalView, Governor, IdleChoice, IdleView, Load, Outcome, PlacementView, Publish, Publisher,
    SisConfig, SCAN_COST_SAMPLE,
};
use hwsched::{
    IdleMode, LevelKind, SisMode, Span, Stats, StealWalk, Topology, Tunables, WorkerStats,
};

use crate::cost::{CostModel, Tier};
use crate::report::Report;
use crate::rng::Rng;
use crate::workload::{Action, Ctx, TaskId, Workload};

/// "No worker" (the runtime's `NO_WORKER`).
const NO_WORKER: usize = usize::MAX;
/// The tokio-like baseline's global injection queue, as a steal victim.
const INJECT: usize = usize::MAX - 1;
/// src/worker/mod.rs `MAX_LIFO_POLLS`.
const MAX_LIFO_POLLS: u32 = 3;
/// src/worker/mod.rs `INBOX_CHECK_INTERVAL`.
const INBOX_CHECK_INTERVAL: u32 = 61;
/// src/worker/mod.rs `PUBLISH_CHECK_EVERY`.
const PUBLISH_CHECK_EVERY: u32 = 32;
/// sched/park.rs `ADMIT_BATCH`: a yield moves up to this many inbox tasks into
/// the deque ahead of itself.
const ADMIT_BATCH: usize = 128;
/// tokio's `next_remote_task_batch`: at most half its local queue (128).
const TOKIO_REMOTE_BATCH: usize = 128;
/// crossbeam-deque's `MAX_BATCH`: a steal moves at most this many plus the
/// one it returns.
const MAX_BATCH: usize = 32;

/// io/mod.rs `EVENT_INTERVAL`: a busy worker looks at its poller without
/// blocking every this many tasks.
const EVENT_INTERVAL: u32 = 61;
/// io/driver.rs `EVENTS`: most events one `epoll_wait` returns.
const EPOLL_EVENTS: usize = 1024;
/// io/registration.rs `REHOME_AFTER`: consecutive waits from another
/// poller's domain after which a socket moves to that poller.
const REHOME_AFTER: u8 = 4;

/// How many pollers the I/O driver has: the runtime's
/// `hwsched::io::IoPollers` (`Builder::io_pollers`), mirrored because it is
/// behind hwsched's `io` feature, which the simulator does not build; the
/// workers of each domain are runtime/mod.rs's (`poller_domain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pollers {
    /// One poller for the whole runtime (the default, as tokio and Go).
    #[default]
    One,
    /// One poller per last-level cache.
    PerLlc,
    /// One poller per NUMA node.
    PerNuma,
}

impl Pollers {
    /// `one`, `llc` or `numa`.
    pub fn parse(s: &str) -> Option<Pollers> {
        match s {
            "one" => Some(Pollers::One),
            "llc" => Some(Pollers::PerLlc),
            "numa" => Some(Pollers::PerNuma),
            _ => None,
        }
    }

    /// The name `parse` takes.
    pub fn name(self) -> &'static str {
        match self {
            Pollers::One => "one",
            Pollers::PerLlc => "llc",
            Pollers::PerNuma => "numa",
        }
    }
}

/// Which scheduler the simulated workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// hwsched's policies (the production code) with its mechanism.
    Hwsched,
    /// A tokio-like baseline written against the same views: a woken task
    /// goes to the waker's LIFO slot, a task from outside to one global
    /// queue, an idle searcher steals from a random victim in one pass over
    /// all workers, the worker woken is the last one parked; no topology,
    /// no load counters.
    TokioLike,
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct Config {
    /// The machine (its workers and levels).
    pub topology: Topology,
    /// hwsched's tunables (ignored by [`Policy::TokioLike`] except the
    /// searcher protocol, which both share).
    pub tunables: Tunables,
    /// The scheduler.
    pub policy: Policy,
    /// The cost model.
    pub cost: CostModel,
    /// Seed of every random choice (workload jitter, steal starts).
    pub seed: u64,
    /// Stop the simulation at this virtual time (a safety net).
    pub time_limit_ns: u64,
    /// The re-check fix found by this simulator and adopted by the runtime
    /// (src/sched/idle_steps.rs `after_wait`), on by default: a worker whose pre-sleep
    /// re-check found work and took it from a queue that is now empty looks
    /// for other queued work and wakes a searcher for it. Off, other queues
    /// found by no one wait while workers sleep (SIMULATION.md, "Findings").
    pub recheck_wakes_for_others: bool,
    /// A proposed change, off by default (the runtime does not do it): a
    /// worker leaves the `queued` set (re-checking its inbox) just before it
    /// sleeps, not only when it goes idle (SIMULATION.md, "Findings").
    pub park_clears_queued: bool,
    /// The thread outside the runtime (the workload's `start` and timers:
    /// the burst workload's spawner, the light workload's sender) is a
    /// simulated thread on the timeline: it does one action at a time,
    /// each costing it what the model charges (the placement, the futex
    /// wakes it pays) plus `CostModel::spawn_ns` per spawn, so its next
    /// action waits for the last one; at the end it awaits every task it
    /// spawned (`CostModel::join_ns` each), and the run ends when it has.
    /// Off (the default, and every policy table): outside actions take
    /// effect at the instant asked, at no time on anyone's clock.
    pub spawner_on_timeline: bool,
    /// The I/O driver's pollers, used once the workload creates a socket
    /// ([`Ctx::socket`](crate::workload::Ctx::socket)): as in the runtime,
    /// no poller exists before.
    pub pollers: Pollers,
    /// An idle worker whose own domain's poller is taken sleeps in another
    /// domain's free poller (on, the runtime's rule: src/worker/mod.rs
    /// `Driven::sleep`); off, a variant the runtime does not have: it
    /// sleeps on its thread, so a poller serves only its own domain's
    /// workers (SIMULATION.md, "I/O").
    pub foreign_pollers: bool,
    /// A socket whose task waits `REHOME_AFTER` times in a row from
    /// another poller's domain moves to that poller (on, the runtime:
    /// io/registration.rs `note_wait`); off, sockets stay where they were
    /// accepted (a variant, for comparison).
    pub rehome: bool,
    /// The CPUs the sockets are accepted on: the k-th socket on CPU
    /// `k mod accept_cpus` (0: every worker's CPU). 1 is one accepting CPU
    /// (a NIC queue, or a listener whose flows are not spread), every
    /// socket in its domain's poller.
    pub accept_cpus: usize,
    /// Tasks with a home node ([`Workload::home`]) are placed there, as
    /// `spawn_on(Place::Numa(node), ..)` places them: spawned, woken and
    /// yielding, they go to their node's place queue, which only the
    /// node's workers take from (no steal moves them out); a push wakes a
    /// parked worker of the node when none of its workers is awake and
    /// idle, so work is conserved inside the node (SIMULATION.md, "Places:
    /// NUMA shards"). Off (the default): they are ordinary tasks.
    pub places: bool,
    /// With places: how many workers of a place a queued task keeps awake.
    /// Off (the default), the runtime's searcher rule inside the place:
    /// one awake idle worker is enough, and each worker that takes a task
    /// and leaves more wakes the next. On, a variant: one awake idle
    /// worker per queued task, so a burst wakes as many parked workers at
    /// once as it has tasks (as external spawns' placement does).
    pub place_wake_per_task: bool,
}

impl Config {
    /// A config with default tunables, the hwsched policy, the default
    /// cost model and seed 1.
    pub fn new(topology: Topology) -> Self {
        Config {
            topology,
            tunables: Tunables::default(),
            policy: Policy::Hwsched,
            cost: CostModel::default(),
            seed: 1,
            time_limit_ns: 60_000_000_000,
            recheck_wakes_for_others: true,
            park_clears_queued: false,
            spawner_on_timeline: false,
            pollers: Pollers::One,
            foreign_pollers: true,
            rehome: true,
            accept_cpus: 0,
            places: false,
            place_wake_per_task: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TState {
    Unspawned,
    Blocked,
    Queued,
    Running,
    Done,
}

#[derive(Debug)]
struct Task {
    last_worker: usize,
    recent_used: AtomicUsize,
    state: TState,
    ready_at: u64,
    notified: bool,
}

/// What a worker is doing, for the idle-while-queued metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Running a task or scheduler code on the way to one.
    Busy,
    /// Idle: walking, re-checking, deciding.
    Walking,
    /// Idle: spinning.
    Spinning,
    /// Idle: asleep.
    Parked,
    /// Idle: a futex wake is on its way.
    Waking,
}

impl Phase {
    fn idle(self) -> bool {
        self != Phase::Busy
    }
}

#[derive(Debug)]
struct Worker {
    lifo: Option<TaskId>,
    lifo_streak: u32,
    local: VecDeque<TaskId>,
    inbox: VecDeque<TaskId>,
    tick: u32,
    running: bool,
    publisher: Publisher,
    ops_since_publish: u32,
    balance: BalanceState,
    avg_scan_cost_ns: u64,
    governor: Governor,
    rng: u64,
    wakes: u32,
    last_victim: Option<usize>,
    searching: bool,
    queued_bit: bool,
    /// The mailbox's kick note (sched/park.rs `kicked_by`).
    kick: Option<usize>,
    phase: Phase,
    /// Generation of the current spin, so stale spin events are ignored.
    gen: u64,
    idle_since: Option<u64>,
    slept_any: bool,
    pending_kick: Option<usize>,
    spin_start: u64,
    spin_until: u64,
    /// Order in which it last parked (the tokio-like sleeper stack).
    park_seq: u64,
    /// The task's run in progress: its actions and whether it finishes.
    run_actions: Vec<Action>,
    run_done: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    Step(usize),
    RunEnd(usize, TaskId),
    WalkDone(usize, Option<TaskId>),
    SpinEnd(usize, u64),
    SpinHit(usize, u64),
    Woken(usize),
    Timer(u64),
    /// The outside thread's next action (`Config::spawner_on_timeline`).
    Outside,
}

#[derive(Debug, PartialEq, Eq)]
struct Queued {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl Ord for Queued {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

/// Per-worker time, by what it was spent on.
#[derive(Debug, Clone, Default)]
struct Time {
    work: u64,
    warmth: u64,
    sched: u64,
    spin: u64,
    /// Extra time of runs off their home node ([`Home`](crate::workload::Home)).
    remote: u64,
}

impl Time {
    fn sum<'a>(times: impl Iterator<Item = &'a Time>) -> Time {
        times.fold(Time::default(), |a, t| Time {
            work: a.work + t.work,
            warmth: a.warmth + t.warmth,
            sched: a.sched + t.sched,
            spin: a.spin + t.spin,
            remote: a.remote + t.remote,
        })
    }
}

/// One poller of the simulated I/O driver (io/driver.rs `Poller`): who
/// holds it (the try-lock), and its epoll instance as a serialized
/// resource: every readiness callback, turn and `epoll_ctl` on it waits
/// until the previous one is done (`free_at`) and moves its lines from the
/// CPU that used it last (`owner`).
#[derive(Debug, Clone)]
struct Poller {
    /// The worker asleep in its `epoll_wait` (the try-lock's holder).
    holder: Option<usize>,
    /// A busy worker's non-blocking turn holds it until then.
    held_until: u64,
    /// The epoll instance is busy until then.
    free_at: u64,
    /// The CPU whose cache holds the instance's lines.
    owner: usize,
    /// Sockets on the ready list, in order.
    ready: VecDeque<TaskId>,
    busy_ns: u64,
    turns: u64,
    events: u64,
}

/// The simulated I/O driver (io/mod.rs, io/driver.rs, src/worker/driven.rs `Driven`).
#[derive(Debug, Clone)]
struct IoDriver {
    pollers: Vec<Poller>,
    /// Per worker: its own poller (runtime/mod.rs `poller_domain`).
    poller_of: Vec<usize>,
    /// Per worker: the poller it sleeps in (src/worker/driven.rs `Driven::held`).
    held: Vec<Option<usize>>,
    /// Per worker: its parker was notified while it held a poller (a
    /// delivery, a search request: the park's token, `NOTIFIED`).
    token: Vec<bool>,
    /// Per worker: tasks of the current batch (`Core::batch`).
    batch: Vec<u32>,
    /// Per worker: tasks run (`Driven::tasks`, for `EVENT_INTERVAL`).
    ran: Vec<u32>,
    /// Per worker: it left the parked set in the driver, for its own batch
    /// (`SuspendedIdle::left_parked`: whether a waker had claimed it).
    left_parked: Vec<Option<bool>>,
    /// Per task: its socket's poller (`usize::MAX`: not a socket).
    sock_poller: Vec<usize>,
    /// Per task: the CPU its socket's packets arrive on (`SO_INCOMING_CPU`).
    sock_cpu: Vec<usize>,
    /// Per task: on its poller's ready list.
    on_list: Vec<bool>,
    /// Per task: consecutive waits from another poller's domain.
    away: Vec<u8>,
    sockets: usize,
    /// Counters for the report.
    c: IoCounters,
}

/// What the I/O driver did in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounters {
    /// Pollers.
    pub pollers: usize,
    /// Readiness events arrived (callbacks).
    pub callbacks: u64,
    /// `epoll_wait` calls: by a worker waking in a poller, and by a busy
    /// worker's look every `EVENT_INTERVAL` tasks.
    pub turns_woken: u64,
    /// Of the turns, the busy workers' non-blocking ones.
    pub turns_busy: u64,
    /// Events the turns returned (each woke a socket's task).
    pub events: u64,
    /// Events whose task had last run in another LLC than the worker that
    /// took the event (the task's wake crossed LLCs).
    pub events_cross_llc: u64,
    /// Turns that ended a batch with work left and woke a parked worker to
    /// search (`batch_wakes`).
    pub batch_wakes: u64,
    /// Parked workers woken to search, all of the run (after batches,
    /// pushes, steals).
    pub searcher_wakes: u64,
    /// Of those, the ones whose woken worker is in another LLC than the
    /// work it was woken for.
    pub searcher_wakes_cross_llc: u64,
    /// Times a worker went to sleep in a poller, and on its thread (every
    /// poller taken).
    pub sleeps_in_poller: u64,
    /// Sleeps on the worker's thread.
    pub sleeps_on_thread: u64,
    /// Wakes of a worker asleep in a poller by its events (not an eventfd
    /// write).
    pub poller_wakes: u64,
    /// eventfd writes: a delivery or a search request woke a worker asleep
    /// in a poller.
    pub eventfd_writes: u64,
    /// Sockets moved to another poller (`REHOME_AFTER`).
    pub rehomed: u64,
    /// The busiest poller's epoll instance busy time (ns).
    pub busy_max_ns: u64,
    /// Sum over pollers of the busy time (ns).
    pub busy_sum_ns: u64,
}

/// A simulation in progress.
pub struct Sim {
    cfg: Config,
    topo: Rc<Topology>,
    n: usize,
    tier: Vec<Tier>,
    workers: Vec<Worker>,
    time: Vec<Time>,
    tasks: Vec<Task>,
    workload: Box<dyn Workload>,
    rng: Rng,
    next_task: usize,
    // The shared state of sched/sleepers.rs and worker/shared.rs.
    idle: Vec<bool>,
    parked: Vec<bool>,
    queued: Vec<bool>,
    idle_cores: Vec<bool>,
    llc_of: Vec<usize>,
    /// Per LLC (indexed by `llc_of`): the runs of its most capable workers
    /// (worker/shared.rs `capable`, from the policy's `capable_runs`).
    capable: Vec<Box<[Range<usize>]>>,
    /// Every worker (worker/shared.rs `all`).
    all: Range<usize>,
    searching: usize,
    awake: usize,
    loads: Vec<Load>,
    span_index: HashMap<Span, usize>,
    ancestors: Vec<Vec<(usize, Tier)>>,
    machine: usize,
    burst_target: usize,
    spawn_rr: usize,
    /// The outside thread on the timeline: actions not done yet, whether
    /// an `Ev::Outside` is queued, when its last action ended, and the
    /// tasks it spawned (to join).
    outside_pending: VecDeque<Action>,
    outside_busy: bool,
    outside_free_at: u64,
    outside_spawns: u64,
    inject: VecDeque<TaskId>,
    park_counter: u64,
    // Events and time.
    events: BinaryHeap<Reverse<Queued>>,
    seq: u64,
    now: u64,
    /// Cost accrued by the current actor's step.
    acc: u64,
    // Metrics.
    /// hwsched's counters, kept as the runtime keeps them: one block per
    /// worker and one for outside threads (the last), each written by the
    /// actor whose step it is (`actor`).
    stats: Vec<WorkerStats>,
    /// Whose step runs now: a worker, or `n` for outside threads (the
    /// workload's timers and start).
    actor: usize,
    latencies: Vec<u64>,
    queued_total: usize,
    idle_count: usize,
    last_integrate: u64,
    idle_while_queued_ns: u128,
    makespan: u64,
    at_end: Time,
    external_ns: u64,
    migrations: [u64; 6],
    /// The I/O driver, from the first socket on.
    io: Option<IoDriver>,
    /// Each worker's NUMA node (its index among `node_spans`).
    node_of: Vec<usize>,
    /// The NUMA nodes' spans, in worker order (`Place::Numa`'s numbering).
    node_spans: Vec<Range<usize>>,
    /// Per node, its place queue (`Config::places`).
    place_q: Vec<VecDeque<TaskId>>,
    /// Runs of tasks with a home node, and those on another node's worker.
    homed_runs: u64,
    remote_runs: u64,
    /// Runs on another node than the task's previous run.
    cross_node_migrations: u64,
    /// Per node, its idle workers.
    idle_in_node: Vec<usize>,
    /// Integral over time of, per node, min(its idle workers, its place
    /// queue's length): work conservation inside the places.
    idle_while_place_queued_ns: u128,
}

/// The per-level counter slot of level `i` (src/worker/steal.rs `stat_slot`): levels
/// past the counters' arrays count in the last slot.
fn stat_slot(i: usize) -> usize {
    i.min(WorkerStats::default().walk_tried.len() - 1)
}

/// How far apart workers `a` and `b` are: the smallest span of `a` that
/// holds `b`. A cluster (cores sharing an L2) counts as the SMT tier, a
/// NUMA group or the machine as remote.
fn tier_of(topo: &Topology, a: usize, b: usize) -> Tier {
    if a == b {
        Tier::Local
    } else if topo.core_span(a).contains(&b)
        || topo
            .level(a, LevelKind::Cluster)
            .is_some_and(|l| l.span.contains(b))
    {
        Tier::Core
    } else if topo.llc_span(a).contains(&b) {
        Tier::Llc
    } else {
        // The smaller of the NUMA node (when it is not the whole machine)
        // and the package that holds both.
        let n = topo.workers();
        let numa = Some(topo.numa_span(a)).filter(|s| s.len() < n && s.contains(&b));
        let pkg = topo
            .level(a, LevelKind::Package)
            .map(|l| l.span.clone())
            .filter(|s| s.contains(b));
        match (numa, pkg) {
            (Some(x), Some(p)) if p.len() < x.len() => Tier::Package,
            (Some(_), _) => Tier::Node,
            (None, Some(_)) => Tier::Package,
            (None, None) => Tier::Remote,
        }
    }
}

impl Sim {
    /// A simulation of `workload` under `cfg`.
    pub fn new(cfg: Config, workload: Box<dyn Workload>) -> Self {
        let topo = &cfg.topology;
        let n = topo.workers();
        let mut tier = Vec::with_capacity(n * n);
        for a in 0..n {
            for b in 0..n {
                tier.push(tier_of(topo, a, b));
            }
        }
        // One load counter per span of the tree (policy/load.rs `LoadMap`).
        let spans = topo.all_spans();
        let mut span_index = HashMap::new();
        for s in &spans {
            let k = span_index.len();
            span_index.entry(s.clone()).or_insert(k);
        }
        let far = |w: usize, s: &Span| {
            s.iter()
                .map(|x| tier[w * n + x])
                .max()
                .unwrap_or(Tier::Local)
        };
        // policy/load.rs: every span holding the worker (its chain's, and where the
        // kernel's NUMA spans overlap, other nodes' that hold it).
        let mut ancestors: Vec<Vec<(usize, Tier)>> = vec![Vec::new(); n];
        for s in spans.iter().rev() {
            let i = span_index[s];
            for w in s.iter() {
                if !ancestors[w].iter().any(|&(g, _)| g == i) {
                    let tier = if s.len() == 1 { Tier::Local } else { far(w, s) };
                    ancestors[w].push((i, tier));
                }
            }
        }
        let machine = span_index[&Span::range(0..n)];
        let mut llc_starts: Vec<usize> = (0..n).map(|w| topo.llc_span(w).start).collect();
        llc_starts.dedup();
        let llc_of = (0..n)
            .map(|w| {
                let s = topo.llc_span(w).start;
                llc_starts.iter().position(|&x| x == s).unwrap_or(0)
            })
            .collect();
        let t = &cfg.tunables;
        let park_cost = t
            .park_cost
            .unwrap_or(Duration::from_nanos(cfg.cost.park_round_trip_ns()));
        let workers = (0..n)
            .map(|w| Worker {
                lifo: None,
                lifo_streak: 0,
                local: VecDeque::new(),
                inbox: VecDeque::new(),
                tick: 0,
                running: true,
                publisher: Publisher::new(),
                ops_since_publish: 0,
                balance: BalanceState::new(
                    topo.levels(w).len(),
                    t.migration_cost.as_nanos() as u64,
                ),
                avg_scan_cost_ns: 0,
                governor: Governor::new(t.idle, park_cost, t.spin_cap_percent),
                rng: (0x9E37_79B9_7F4A_7C15 ^ (w as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03))
                    ^ cfg.seed.wrapping_mul(0x2545_F491_4F6C_DD1D),
                wakes: 0,
                last_victim: None,
                searching: false,
                queued_bit: false,
                kick: None,
                phase: Phase::Busy,
                gen: 0,
                idle_since: None,
                slept_any: false,
                pending_kick: None,
                spin_start: 0,
                spin_until: 0,
                park_seq: 0,
                run_actions: Vec::new(),
                run_done: false,
            })
            .collect();
        let nl = spans.len();
        let n_llc = llc_starts.len();
        let node_spans = topo
            .domains(LevelKind::Numa)
            .expect("NUMA is a domain kind");
        let node_of = (0..n)
            .map(|w| node_spans.partition_point(|r| r.end <= w))
            .collect();
        let n_nodes = node_spans.len();
        Sim {
            rng: Rng::new(cfg.seed),
            topo: Rc::new(cfg.topology.clone()),
            n,
            tier,
            workers,
            time: vec![Time::default(); n],
            tasks: Vec::new(),
            workload,
            next_task: 0,
            idle: vec![false; n],
            parked: vec![false; n],
            queued: vec![false; n],
            idle_cores: vec![false; n_llc],
            capable: llc_starts
                .iter()
                .map(|&s| capable_runs(topo, topo.llc_span(s)))
                .collect(),
            all: 0..n,
            llc_of,
            searching: 0,
            awake: n,
            loads: vec![Load::default(); nl],
            span_index,
            ancestors,
            machine,
            burst_target: 0,
            spawn_rr: 0,
            outside_pending: VecDeque::new(),
            outside_busy: false,
            outside_free_at: 0,
            outside_spawns: 0,
            inject: VecDeque::new(),
            park_counter: 0,
            events: BinaryHeap::new(),
            seq: 0,
            now: 0,
            acc: 0,
            stats: vec![WorkerStats::default(); n + 1],
            actor: n,
            latencies: Vec::new(),
            queued_total: 0,
            idle_count: 0,
            last_integrate: 0,
            idle_while_queued_ns: 0,
            makespan: 0,
            at_end: Time::default(),
            external_ns: 0,
            migrations: [0; 6],
            io: None,
            node_of,
            place_q: vec![VecDeque::new(); n_nodes],
            node_spans,
            homed_runs: 0,
            remote_runs: 0,
            cross_node_migrations: 0,
            idle_in_node: vec![0; n_nodes],
            idle_while_place_queued_ns: 0,
            cfg,
        }
    }

    fn tier(&self, a: usize, b: usize) -> Tier {
        if b >= self.n || a >= self.n {
            return Tier::Llc; // the injection queue: a shared line
        }
        self.tier[a * self.n + b]
    }

    fn line(&self, a: usize, b: usize) -> u64 {
        self.cfg.cost.line(self.tier(a, b))
    }

    fn at(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse(Queued {
            at,
            seq: self.seq,
            ev,
        }));
    }

    /// The counters of the actor whose step runs now (src/worker/mod.rs bumps the
    /// current thread's block: a worker's own, or `external`).
    fn k(&mut self) -> &mut WorkerStats {
        &mut self.stats[self.actor]
    }

    fn set_phase(&mut self, w: usize, p: Phase) {
        let old = self.workers[w].phase;
        if old.idle() != p.idle() {
            let node = self.node_of[w];
            if p.idle() {
                self.idle_count += 1;
                self.idle_in_node[node] += 1;
            } else {
                self.idle_count -= 1;
                self.idle_in_node[node] -= 1;
            }
        }
        self.workers[w].phase = p;
    }

    /// Runs the workload to the end (or the time limit) and reports.
    pub fn run(mut self) -> Report {
        // Every worker starts awake and looks for work (runtime/mod.rs starts
        // the threads, which find nothing and go idle).
        for w in 0..self.n {
            self.at(0, Ev::Step(w));
        }
        let mut actions = Vec::new();
        {
            let mut ctx = Ctx::new(0, &mut self.rng, &mut self.next_task, &mut actions);
            self.workload.start(&mut ctx);
        }
        self.outside(actions);
        while let Some(Reverse(q)) = self.events.pop() {
            if q.at > self.cfg.time_limit_ns {
                break;
            }
            let dt = q.at - self.last_integrate;
            self.idle_while_queued_ns +=
                u128::from(dt) * self.idle_count.min(self.queued_total) as u128;
            if self.cfg.places {
                let stranded: usize = (0..self.place_q.len())
                    .map(|i| self.idle_in_node[i].min(self.place_q[i].len()))
                    .sum();
                self.idle_while_place_queued_ns += u128::from(dt) * stranded as u128;
            }
            self.last_integrate = q.at;
            self.now = q.at;
            self.acc = 0;
            self.actor = match q.ev {
                Ev::Step(w)
                | Ev::RunEnd(w, _)
                | Ev::WalkDone(w, _)
                | Ev::SpinEnd(w, _)
                | Ev::SpinHit(w, _)
                | Ev::Woken(w) => w,
                Ev::Timer(_) | Ev::Outside => self.n,
            };
            match q.ev {
                Ev::Step(w) => self.step(w),
                Ev::RunEnd(w, t) => self.run_end(w, t),
                Ev::WalkDone(w, found) => self.walk_done(w, found),
                Ev::SpinEnd(w, g) => self.spin_end(w, g),
                Ev::SpinHit(w, g) => self.spin_hit(w, g),
                Ev::Woken(w) => self.woken(w),
                Ev::Timer(tag) => {
                    let mut actions = Vec::new();
                    {
                        let mut ctx =
                            Ctx::new(self.now, &mut self.rng, &mut self.next_task, &mut actions);
                        self.workload.timer(tag, &mut ctx);
                    }
                    self.outside(actions);
                }
                Ev::Outside => self.outside_step(),
            }
        }
        if self.cfg.spawner_on_timeline {
            // The outside thread awaits every task it spawned, in order:
            // each costs `join_ns`, and the last cannot end before the last
            // task did (a bound: exact when it waits only for the last).
            let join = self.outside_spawns * self.cfg.cost.join_ns;
            self.external_ns += join;
            let end = (self.outside_free_at + join).max(self.makespan + self.cfg.cost.join_ns);
            self.makespan = self.makespan.max(end);
        }
        self.report()
    }

    /// What the outside world does now (the workload's `start` or a
    /// timer): applied at once, or, with the spawner on the timeline,
    /// queued for the outside thread (a timer request is only a future
    /// event, and costs nothing).
    fn outside(&mut self, actions: Vec<Action>) {
        if !self.cfg.spawner_on_timeline {
            self.apply(None, actions);
            // What the outside thread spent in the runtime's code.
            self.external_ns += self.acc;
            return;
        }
        for a in actions {
            match a {
                Action::Timer { at_ns, tag } => self.at(at_ns, Ev::Timer(tag)),
                a => self.outside_pending.push_back(a),
            }
        }
        if !self.outside_busy && !self.outside_pending.is_empty() {
            self.outside_busy = true;
            let at = self.now.max(self.outside_free_at);
            self.at(at, Ev::Outside);
        }
    }

    /// The outside thread on the timeline does its next action: a spawn
    /// costs it `spawn_ns` plus the placement the model charges; the next
    /// action starts when this one ends.
    fn outside_step(&mut self) {
        let Some(a) = self.outside_pending.pop_front() else {
            self.outside_busy = false;
            return;
        };
        if let Action::Spawn(_) = a {
            self.acc += self.cfg.cost.spawn_ns;
            self.outside_spawns += 1;
        }
        self.apply(None, vec![a]);
        self.external_ns += self.acc;
        self.outside_free_at = self.now + self.acc;
        if self.outside_pending.is_empty() {
            self.outside_busy = false;
        } else {
            let at = self.outside_free_at;
            self.at(at, Ev::Outside);
        }
    }

    /// hwsched's `Stats` of the run: the counters per worker and outside,
    /// the gauges (`avg_idle`, each level's `max_cost`) as the runtime
    /// leaves them, the level names of worker 0, and the idle counts at the
    /// end.
    fn stats(&self) -> Stats {
        let mut workers = self.stats[..self.n].to_vec();
        for (w, s) in workers.iter_mut().enumerate() {
            let b = &self.workers[w].balance;
            s.avg_idle_ns = b.avg_idle_ns;
            for (i, l) in b.levels.iter().enumerate().take(s.max_cost_ns.len()) {
                s.max_cost_ns[i] = l.max_ns;
            }
        }
        let names = self
            .cfg
            .topology
            .levels(0)
            .iter()
            .map(|l| l.kind.name())
            .collect();
        let mut st = Stats::new(workers, self.stats[self.n].clone(), names);
        // worker/shared.rs: each worker's names where the chains differ.
        let topo = &self.cfg.topology;
        let chains: Vec<Vec<&'static str>> = (0..self.n)
            .map(|w| topo.levels(w).iter().map(|l| l.kind.name()).collect())
            .collect();
        if chains.windows(2).any(|p| p[0] != p[1]) {
            st.worker_level_names = chains;
        }
        if self.cfg.tunables.park_cost.is_some() || self.cfg.tunables.idle == IdleMode::Governed {
            st.park_cost = Duration::from_nanos(self.governor_park_cost());
        }
        st.asleep = self.n - self.awake;
        st.searching = self.searching;
        if let Some(io) = &self.io {
            // The driver's counters (io/driver.rs `PollerCounters`).
            st.io_driven = true;
            st.io_pollers = io.pollers.len();
            st.io_events = io.c.events;
            st.io_waker_writes = io.c.eventfd_writes;
            st.io_registered = io.sockets as u64;
            st.io_rehomed = io.c.rehomed;
        }
        st
    }

    fn report(self) -> Report {
        let stats = self.stats();
        let mut lat = self.latencies;
        lat.sort_unstable();
        let pct = |p: usize| -> u64 {
            if lat.is_empty() {
                0
            } else {
                lat[((lat.len() - 1) * p) / 100]
            }
        };
        // A server's connections wait on their sockets at the end: not
        // unfinished.
        let server = self.io.is_some();
        let unfinished = self
            .tasks
            .iter()
            .filter(|t| t.state != TState::Done && !(server && t.state == TState::Blocked))
            .count();
        let mut op_lat = self
            .workload
            .op_latencies()
            .map(<[u64]>::to_vec)
            .unwrap_or_default();
        op_lat.sort_unstable();
        let op_pct = |p: usize| -> u64 {
            if op_lat.is_empty() {
                0
            } else {
                op_lat[((op_lat.len() - 1) * p) / 100]
            }
        };
        let io = self.io.as_ref().map(|io| {
            let mut c = io.c;
            c.busy_max_ns = io.pollers.iter().map(|p| p.busy_ns).max().unwrap_or(0);
            c.busy_sum_ns = io.pollers.iter().map(|p| p.busy_ns).sum();
            c
        });
        Report {
            workload: self.workload.describe(),
            op_name: self.workload.op_name(),
            topology: self.cfg.topology.description().to_string(),
            workers: self.n,
            policy: match self.cfg.policy {
                Policy::Hwsched => format!(
                    "hwsched sis={:?} walk={:?} idle={:?} recent={} idle_core={}",
                    self.cfg.tunables.sis,
                    self.cfg.tunables.walk,
                    self.cfg.tunables.idle,
                    self.cfg.tunables.sis_recent_used,
                    self.cfg.tunables.sis_idle_core
                ),
                Policy::TokioLike => "tokio-like baseline".into(),
            },
            cost: self.cfg.cost.name.clone(),
            seed: self.cfg.seed,
            makespan_ns: self.makespan,
            ops: self.workload.ops(),
            tasks: self.tasks.len(),
            unfinished,
            work_ns: self.at_end.work,
            warmth_ns: self.at_end.warmth,
            remote_ns: self.at_end.remote,
            homed_runs: self.homed_runs,
            remote_runs: self.remote_runs,
            cross_node_migrations: self.cross_node_migrations,
            places: self.cfg.places,
            idle_while_place_queued_ns: self.idle_while_place_queued_ns,
            sched_ns: self.at_end.sched,
            spin_ns: self.at_end.spin,
            external_ns: self.external_ns,
            wake_p50_ns: pct(50),
            wake_p99_ns: pct(99),
            wake_max_ns: lat.last().copied().unwrap_or(0),
            wakes_measured: lat.len(),
            idle_while_queued_ns: self.idle_while_queued_ns,
            migrations: self.migrations,
            op_p50_ns: op_pct(50),
            op_p99_ns: op_pct(99),
            op_max_ns: op_lat.last().copied().unwrap_or(0),
            io,
            counters: stats.total(),
            stats,
        }
    }

    // ---- workload actions -------------------------------------------------

    /// Applies what a task (on worker `from`) or the outside world did.
    fn apply(&mut self, from: Option<usize>, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Spawn(t) => {
                    // Ids are handed out when a task's run starts, spawns
                    // applied when it ends: not necessarily in order.
                    self.grow_tasks(t);
                    debug_assert_eq!(self.tasks[t].state, TState::Unspawned, "spawned once");
                    self.tasks[t].state = TState::Queued;
                    self.tasks[t].ready_at = self.now;
                    self.k().spawned += 1;
                    if let Some(node) = self.placed(t) {
                        self.push_place(from, node, t);
                        continue;
                    }
                    match from {
                        // src/worker/schedule.rs `place_spawn`: a worker's spawn goes to
                        // its own deque.
                        Some(w) => {
                            self.k().local_spawns += 1;
                            self.push_local(w, t);
                        }
                        None => self.place_external(t),
                    }
                }
                Action::Wake(t) => self.wake(from, t),
                Action::Socket(t) => self.io_socket(t),
                Action::Ready(t) => self.io_ready(t),
                Action::Timer { at_ns, tag } => self.at(at_ns, Ev::Timer(tag)),
            }
        }
    }

    // ---- the I/O driver (io/mod.rs, io/driver.rs, src/worker/driven.rs `Driven`) -------

    /// The driver, created with the first socket (io/mod.rs, "Started on
    /// first use"): one poller per domain of runtime/mod.rs `poller_domain`.
    fn new_driver(&self) -> IoDriver {
        let topo = &self.cfg.topology;
        let n = self.n;
        let mut seen: Vec<Range<usize>> = Vec::new();
        let poller_of: Vec<usize> = (0..n)
            .map(|w| {
                let s = match self.cfg.pollers {
                    Pollers::One => 0..n,
                    Pollers::PerLlc => topo.llc_span(w),
                    Pollers::PerNuma => topo.numa_span(w),
                };
                seen.iter().position(|x| *x == s).unwrap_or_else(|| {
                    seen.push(s);
                    seen.len() - 1
                })
            })
            .collect();
        let pollers = seen
            .iter()
            .map(|s| Poller {
                holder: None,
                held_until: 0,
                free_at: 0,
                owner: s.start,
                ready: VecDeque::new(),
                busy_ns: 0,
                turns: 0,
                events: 0,
            })
            .collect();
        IoDriver {
            pollers,
            poller_of,
            held: vec![None; n],
            token: vec![false; n],
            batch: vec![0; n],
            ran: vec![0; n],
            left_parked: vec![None; n],
            sock_poller: Vec::new(),
            sock_cpu: Vec::new(),
            on_list: Vec::new(),
            away: Vec::new(),
            sockets: 0,
            c: IoCounters {
                pollers: seen.len(),
                ..IoCounters::default()
            },
        }
    }

    /// A connection's task: blocked on its socket, which was accepted on
    /// CPU `k mod workers` (`Config::accept_cpus`) for the k-th socket (`SO_INCOMING_CPU`: the
    /// NIC's receive queues spread flows over the CPUs) and registers with
    /// that CPU's domain's poller (net/tcp.rs); the task last ran there.
    fn io_socket(&mut self, t: TaskId) {
        self.grow_tasks(t);
        if self.io.is_none() {
            self.io = Some(self.new_driver());
        }
        let n = match self.cfg.accept_cpus {
            0 => self.n,
            k => k.min(self.n),
        };
        let io = self.io.as_mut().expect("created above");
        let cpu = io.sockets % n;
        io.sockets += 1;
        if io.sock_poller.len() <= t {
            io.sock_poller.resize(t + 1, usize::MAX);
            io.sock_cpu.resize(t + 1, 0);
            io.on_list.resize(t + 1, false);
            io.away.resize(t + 1, 0);
        }
        io.sock_poller[t] = io.poller_of[cpu];
        io.sock_cpu[t] = cpu;
        let task = &mut self.tasks[t];
        task.state = TState::Blocked;
        task.last_worker = cpu;
    }

    /// A readiness event on `t`'s socket: `ep_poll_callback` on the CPU
    /// that received it, serialized on the poller's instance; the socket
    /// joins the ready list (once: edge-triggered, a socket already on it
    /// stays there once); a worker asleep in that poller's `epoll_wait` is
    /// woken (no eventfd: the kernel's wakeup).
    fn io_ready(&mut self, t: TaskId) {
        let now = self.now + self.acc;
        let Some(io) = self.io.as_ref() else {
            return;
        };
        let p = io.sock_poller[t];
        let cpu = io.sock_cpu[t];
        let owner = io.pollers[p].owner;
        let cost =
            self.cfg.cost.epoll_callback_ns + self.cfg.cost.epoll_lines * self.line(cpu, owner);
        let latency = self.cfg.cost.wake_latency_ns;
        let io = self.io.as_mut().expect("checked");
        io.c.callbacks += 1;
        let pl = &mut io.pollers[p];
        let start = now.max(pl.free_at);
        pl.free_at = start + cost;
        pl.busy_ns += cost;
        pl.owner = cpu;
        if !io.on_list[t] {
            io.on_list[t] = true;
            pl.ready.push_back(t);
        }
        let done_at = pl.free_at;
        let holder = pl.holder;
        if let Some(h) = holder.filter(|&h| self.workers[h].phase == Phase::Parked) {
            io.c.poller_wakes += 1;
            self.set_phase(h, Phase::Waking);
            self.at(done_at + latency, Ev::Woken(h));
        }
    }

    /// src/worker/driven.rs `Driven::sleep`: a free poller, its own first, then the
    /// others in index order from its own (`(own + k) % pollers`); true
    /// when `epoll_wait` returns at once (events wait on its ready list).
    /// With no poller free the worker sleeps on its thread.
    fn io_sleep(&mut self, w: usize) -> bool {
        let t = self.now + self.acc;
        let io = self.io.as_mut().expect("driver");
        let np = if self.cfg.foreign_pollers {
            io.pollers.len()
        } else {
            1
        };
        let own = io.poller_of[w];
        let got = (0..np)
            .map(|k| (own + k) % io.pollers.len())
            .find(|&i| io.pollers[i].holder.is_none() && io.pollers[i].held_until <= t);
        let Some(p) = got else {
            io.c.sleeps_on_thread += 1;
            return false;
        };
        io.c.sleeps_in_poller += 1;
        io.pollers[p].holder = Some(w);
        io.held[w] = Some(p);
        io.token[w] = false;
        if io.pollers[p].ready.is_empty() {
            return false;
        }
        self.time[w].sched += self.acc;
        self.set_phase(w, Phase::Waking);
        self.at(t, Ev::Woken(w));
        true
    }

    /// One `epoll_wait` of worker `w` on poller `p` (io/driver.rs
    /// `Poller::turn`): it waits for the instance, takes up to
    /// `EPOLL_EVENTS` sockets off the ready list, and dispatches them on
    /// this worker's thread, in batch mode; the poller stays held until the
    /// dispatch is done.
    fn io_turn(&mut self, w: usize, p: usize, busy: bool) {
        let t = self.now + self.acc;
        let io = self.io.as_ref().expect("driver");
        let owner = io.pollers[p].owner;
        let k = io.pollers[p].ready.len().min(EPOLL_EVENTS);
        let c = &self.cfg.cost;
        let cost =
            c.epoll_turn_ns + k as u64 * c.epoll_event_ns + c.epoll_lines * self.line(w, owner);
        let io = self.io.as_mut().expect("driver");
        let pl = &mut io.pollers[p];
        let start = t.max(pl.free_at);
        pl.free_at = start + cost;
        pl.busy_ns += cost;
        pl.owner = w;
        pl.turns += 1;
        pl.events += k as u64;
        let socks: Vec<TaskId> = pl.ready.drain(..k).collect();
        if busy {
            io.c.turns_busy += 1;
        } else {
            io.c.turns_woken += 1;
        }
        io.c.events += k as u64;
        self.acc += start - t + cost;
        self.k().driver_turns += 1;
        for s in socks {
            self.io_dispatch(w, s);
        }
        let until = self.now + self.acc;
        let pl = &mut self.io.as_mut().expect("driver").pollers[p];
        pl.held_until = pl.held_until.max(until);
    }

    /// One event of a turn: the socket's readiness set and its task woken
    /// on the polling worker (`ScheduledIo::set_readiness` and `wake`: the
    /// lines the task's last worker wrote), in batch mode (worker/schedule.rs
    /// `WakeMode::Batch`: `Core::push_batch`, no placement, no pusher's
    /// check).
    fn io_dispatch(&mut self, w: usize, t: TaskId) {
        let last = self.tasks[t].last_worker;
        let cross = last != NO_WORKER && self.llc_of[last] != self.llc_of[w];
        if last != NO_WORKER {
            self.acc += 2 * self.line(w, last);
        }
        let io = self.io.as_mut().expect("driver");
        io.on_list[t] = false;
        io.c.events_cross_llc += u64::from(cross);
        match self.tasks[t].state {
            TState::Blocked => {
                io.batch[w] += 1;
                self.tasks[t].state = TState::Queued;
                self.tasks[t].ready_at = self.now + self.acc;
                self.k().wakes_by_driver += 1;
                // Core::push_batch.
                self.acc += self.cfg.cost.local_queue_ns;
                if let Some(prev) = self.workers[w].lifo.replace(t) {
                    self.workers[w].local.push_back(prev);
                    self.queued_total += 1;
                }
            }
            TState::Running => self.tasks[t].notified = true,
            _ => {}
        }
    }

    /// Mirrors `Core::end_batch`: if the batch left more than this worker
    /// runs next (its deque holds work), the pusher's check once
    /// (`push::after_push`: the queued bit, and a parked worker woken to
    /// search if nobody searches).
    fn io_end_batch(&mut self, w: usize) {
        let Some(io) = self.io.as_mut() else {
            return;
        };
        if io.batch[w] == 0 {
            return;
        }
        io.batch[w] = 0;
        self.k().driver_batches += 1;
        if !self.workers[w].local.is_empty() {
            if !self.workers[w].queued_bit {
                self.workers[w].queued_bit = true;
                self.queued[w] = true;
            }
            let before = self.k().searcher_wakes;
            self.notify_parked(w, Some(w));
            if self.k().searcher_wakes > before {
                self.k().batch_wakes += 1;
                self.io.as_mut().expect("driver").c.batch_wakes += 1;
            }
        }
    }

    /// A worker asleep in poller `p` returns from `epoll_wait` (an event,
    /// or an eventfd write): its turn's dispatch; with no token (nothing
    /// notified it, nothing of the batch landed here) it waits again,
    /// holding the poller (false). Otherwise the poller is given back
    /// (src/worker/driven.rs `Driven::sleep`: `held = None`),
    /// `Core::wake_self_in_driver` (a batch that put work here takes the
    /// worker out of the parked set and the idle mask), then `end_batch`
    /// (src/worker/driven.rs `Driven::wait`), and the park ends (true).
    fn io_woken(&mut self, w: usize, p: usize) -> bool {
        self.io_turn(w, p, false);
        let io = self.io.as_mut().expect("driver");
        let token = std::mem::take(&mut io.token[w]);
        let has = self.workers[w].lifo.is_some() || !self.workers[w].local.is_empty();
        if !token && !has {
            // `Driven::sleep`: `poll_park` without a token (no notify, no task of its own
            // batch), the park goes on: back into `epoll_wait`, holding the
            // poller.
            let again = !io.pollers[p].ready.is_empty();
            self.time[w].sched += self.acc;
            if again {
                self.set_phase(w, Phase::Waking);
                let at = self.now + self.acc;
                self.at(at, Ev::Woken(w));
            } else {
                self.set_phase(w, Phase::Parked);
            }
            return false;
        }
        io.held[w] = None;
        io.pollers[p].holder = None;
        let has = self.workers[w].lifo.is_some() || !self.workers[w].local.is_empty();
        if io.batch[w] > 0 && has && io.left_parked[w].is_none() {
            let searching = self.leave_parked(w);
            self.io.as_mut().expect("driver").left_parked[w] = Some(searching);
            self.idle[w] = false;
        }
        self.io_end_batch(w);
        true
    }

    /// src/worker/driven.rs `Driven::after_task`: every `EVENT_INTERVAL` tasks, a
    /// look at its own poller without blocking if no other worker holds it,
    /// then the end of that batch.
    fn io_after_task(&mut self, w: usize) {
        let t = self.now + self.acc;
        let io = self.io.as_mut().expect("driver");
        io.ran[w] = io.ran[w].wrapping_add(1);
        if io.ran[w] % EVENT_INTERVAL != 0 {
            return;
        }
        let p = io.poller_of[w];
        if io.pollers[p].holder.is_none() && io.pollers[p].held_until <= t {
            self.io_turn(w, p, true);
        }
        self.io_end_batch(w);
    }

    /// io/registration.rs `PollEvented::note_wait`, after a run of a
    /// socket's task on worker `w`: with several pollers, a socket whose
    /// task waited `REHOME_AFTER` times in a row from another poller's
    /// domain moves there (`epoll_ctl` DEL on the old, ADD on the new,
    /// each serialized on its instance; an edge-triggered ADD reports the
    /// readiness the socket has, so one on the old ready list moves too).
    fn io_note_wait(&mut self, w: usize, t: TaskId) {
        let io = self.io.as_mut().expect("driver");
        if !self.cfg.rehome
            || io.pollers.len() < 2
            || t >= io.sock_poller.len()
            || io.sock_poller[t] == usize::MAX
        {
            return;
        }
        let here = io.poller_of[w];
        let old = io.sock_poller[t];
        if here == old {
            io.away[t] = 0;
            return;
        }
        io.away[t] += 1;
        if io.away[t] < REHOME_AFTER {
            return;
        }
        io.away[t] = 0;
        for p in [old, here] {
            let t0 = self.now + self.acc;
            let owner = self.io.as_ref().expect("driver").pollers[p].owner;
            let cost = self.cfg.cost.epoll_ctl_ns + self.cfg.cost.epoll_lines * self.line(w, owner);
            let pl = &mut self.io.as_mut().expect("driver").pollers[p];
            let start = t0.max(pl.free_at);
            pl.free_at = start + cost;
            pl.busy_ns += cost;
            pl.owner = w;
            self.acc += start - t0 + cost;
        }
        let io = self.io.as_mut().expect("driver");
        io.sock_poller[t] = here;
        io.c.rehomed += 1;
        if io.on_list[t] {
            io.pollers[old].ready.retain(|&x| x != t);
            io.pollers[here].ready.push_back(t);
        }
    }

    fn grow_tasks(&mut self, t: TaskId) {
        while self.tasks.len() <= t {
            self.tasks.push(Task {
                last_worker: NO_WORKER,
                recent_used: AtomicUsize::new(NO_WORKER),
                state: TState::Unspawned,
                ready_at: 0,
                notified: false,
            });
        }
    }

    /// A waker: async-task's state machine (a task already scheduled is
    /// not scheduled again; one woken while running is rescheduled when its
    /// poll ends), then worker/schedule.rs `schedule`.
    fn wake(&mut self, from: Option<usize>, t: TaskId) {
        match self.tasks[t].state {
            TState::Queued | TState::Done | TState::Unspawned => {}
            TState::Running => self.tasks[t].notified = true,
            TState::Blocked => {
                self.tasks[t].state = TState::Queued;
                self.tasks[t].ready_at = self.now;
                // stats.rs: a wake by a task on a worker, or from outside.
                match from {
                    Some(_) => self.k().wakes_by_task += 1,
                    None => self.k().wakes_foreign += 1,
                }
                if let Some(node) = self.placed(t) {
                    return self.push_place(from, node, t);
                }
                match self.cfg.policy {
                    Policy::Hwsched => self.schedule(from, t),
                    Policy::TokioLike => match from {
                        Some(me) => self.push_lifo(me, t),
                        None => self.push_inject(t),
                    },
                }
            }
        }
    }

    // ---- worker/schedule.rs ------------------------------------------------------

    /// Mirrors worker/schedule.rs `schedule` (the wake path; `woken_while_running`
    /// is handled in `run_end`).
    fn schedule(&mut self, from: Option<usize>, t: TaskId) {
        let last = self.tasks[t].last_worker;
        let Some(me) = from else {
            // Woken from outside the runtime: the target is prev.
            let target = if last == NO_WORKER { 0 } else { last };
            let scan_nr = match self.cfg.tunables.sis {
                SisMode::Prop => prop_depth(
                    self.cfg.topology.llc_span(target).len(),
                    2 * self.cfg.tunables.migration_cost.as_nanos() as u64,
                    0,
                ),
                _ => self.scan_depth(target, 0, 0),
            };
            let (c, _) = self.place(target, t, last, target, scan_nr);
            self.deliver(None, c, t);
            return;
        };
        // The production wake_affine (worker/schedule.rs): prev when it is idle
        // and shares the waker's LLC, or when the waker is loaded and prev is
        // not.
        let target = wake_affine(
            &self.cfg.topology,
            me,
            (last != NO_WORKER).then_some(last),
            || !self.workers[me].local.is_empty(),
            |p| self.idle[p],
            |p| self.queue_loaded(p),
        );
        if target == me && self.workers[me].lifo.is_none() && self.workers[me].local.is_empty() {
            self.k().wake_local += 1;
            self.push_lifo(me, t);
            return;
        }
        let prev = if last == NO_WORKER { target } else { last };
        self.workers[me].wakes = self.workers[me].wakes.wrapping_add(1);
        let sample = self.cfg.tunables.sis == SisMode::Prop
            && self.workers[me].wakes % SCAN_COST_SAMPLE == 0;
        let scan_nr = self.scan_depth(
            target,
            self.workers[me].balance.avg_idle_ns,
            self.workers[me].avg_scan_cost_ns,
        );
        let before = self.acc;
        let (c, claimed) = self.place(me, t, prev, target, scan_nr);
        if sample {
            // Two clock reads around the placement (SIS_PROP's sampled
            // avg_scan_cost).
            self.acc += 2 * self.cfg.cost.clock_ns;
            let cost = (self.acc - before) as i64;
            let wk = &mut self.workers[me];
            let avg = wk.avg_scan_cost_ns as i64;
            wk.avg_scan_cost_ns = (avg + (cost - avg) / 8).max(0) as u64;
        }
        if c == me {
            self.k().wake_local += 1;
            self.push_lifo(me, t);
            return;
        }
        if claimed && self.parked[c] {
            // sched/sleepers.rs `wake_specific`: the one wake in flight.
            if self.searching != 0 {
                self.idle[c] = true;
                self.k().wake_deferred += 1;
                self.push_local(me, t);
                return;
            }
            self.searching += 1;
            self.parked[c] = false;
            self.awake += 1;
            self.k().searcher_wakes += 1;
            self.deliver_to_woken(Some(me), c, t);
            return;
        }
        self.deliver(Some(me), c, t);
    }

    /// worker/schedule.rs `queue_loaded`.
    fn queue_loaded(&self, w: usize) -> bool {
        !self.workers[w].local.is_empty() || !self.workers[w].inbox.is_empty()
    }

    /// worker/schedule.rs `scan_depth`: the production `scan_depth` over the
    /// target's LLC and its simulated load counter.
    fn scan_depth(&self, target: usize, avg_idle_ns: u64, avg_scan_cost_ns: u64) -> usize {
        let llc = self.cfg.topology.llc_span(target);
        scan_depth(
            self.cfg.tunables.sis,
            llc.len(),
            avg_idle_ns,
            avg_scan_cost_ns,
            || self.load(&llc.clone().into()).running,
        )
    }

    /// worker/schedule.rs `place`: the production `select_idle_sibling` over the
    /// simulated idle flags. `me` is who reads them (for the cost).
    fn place(
        &mut self,
        me: usize,
        t: TaskId,
        prev: usize,
        target: usize,
        scan_nr: usize,
    ) -> (usize, bool) {
        let tn = &self.cfg.tunables;
        let cfg = SisConfig {
            recent_used: tn.sis_recent_used,
            idle_core: tn.sis_idle_core,
            scan_nr,
        };
        let view = SimIdle {
            idle: RefCell::new(&mut self.idle),
            hints: RefCell::new(&mut self.idle_cores),
            llc_of: &self.llc_of,
            topo: &self.cfg.topology,
            tier: &self.tier,
            n: self.n,
            cost: &self.cfg.cost,
            me,
            ns: Cell::new(0),
            seen: RefCell::new(Vec::new()),
        };
        let c = select_idle_sibling(
            &self.cfg.topology,
            &view,
            cfg,
            &self.tasks[t].recent_used,
            prev,
            target,
        );
        self.acc += view.ns.get();
        let k = self.k();
        match c.outcome {
            Outcome::Target => k.sis_target += 1,
            Outcome::Prev => k.sis_prev += 1,
            Outcome::RecentHit => k.sis_recent_hit += 1,
            Outcome::IdleCore => k.sis_idle_core += 1,
            Outcome::IdleCandidate => k.sis_idle_candidate += 1,
            Outcome::ScanFound => k.sis_scan_found += 1,
            Outcome::Fallback => k.sis_fallback += 1,
        }
        k.sis_recent_miss += u64::from(c.recent_miss);
        k.sis_scanned += c.scanned as u64;
        k.sis_words += c.words as u64;
        (c.worker, c.outcome != Outcome::Fallback)
    }

    // ---- src/worker/mod.rs: delivery and the wake protocol (sched/sleepers.rs) --------------

    fn inbox_push(&mut self, to: usize, t: TaskId) {
        self.workers[to].inbox.push_back(t);
        self.queued_total += 1;
    }

    fn push_inject(&mut self, t: TaskId) {
        self.inject.push_back(t);
        self.queued_total += 1;
        self.acc += self.cfg.cost.line(Tier::Llc);
        self.notify_parked(0, None);
    }

    /// Notifies worker `w`'s parker: a sleeping worker is woken (a futex
    /// wake, paid by the caller), a spinning one sees it within a line
    /// transfer. Returns whether it was asleep (sched/park.rs `Notified::Unparked`).
    fn notify(&mut self, from: Option<usize>, w: usize) -> bool {
        if let Some(io) = self.io.as_mut() {
            // sched/park.rs `Parker::notify`: the token, whatever the phase.
            io.token[w] |= io.held[w].is_some();
        }
        match self.workers[w].phase {
            Phase::Parked => {
                // A futex wake, or (asleep in a poller) an eventfd write:
                // one syscall and the kernel's wakeup either way.
                self.acc += self.cfg.cost.wake_cpu_ns;
                self.k().unparks += 1;
                if let Some(io) = self.io.as_mut() {
                    io.c.eventfd_writes += u64::from(io.held[w].is_some());
                }
                self.set_phase(w, Phase::Waking);
                let at = self.now + self.acc + self.cfg.cost.wake_latency_ns;
                self.at(at, Ev::Woken(w));
                true
            }
            Phase::Spinning => {
                let l = from.map_or(self.cfg.cost.line(Tier::Llc), |f| self.line(f, w));
                let g = self.workers[w].gen;
                let at = self.now + self.acc + l;
                self.at(at, Ev::SpinHit(w, g));
                false
            }
            _ => false,
        }
    }

    /// Mirrors src/worker/mod.rs `deliver`.
    fn deliver(&mut self, from: Option<usize>, to: usize, t: TaskId) {
        self.inbox_push(to, t);
        if let Some(f) = from {
            self.acc += 2 * self.line(f, to);
        }
        if self.notify(from, to) {
            return;
        }
        self.queued[to] = true;
        self.notify_parked(to, from);
    }

    /// Mirrors src/worker/mod.rs `deliver_to_woken`.
    fn deliver_to_woken(&mut self, from: Option<usize>, w: usize, t: TaskId) {
        self.inbox_push(w, t);
        if let Some(f) = from {
            self.acc += 2 * self.line(f, w);
        }
        self.notify(from, w);
        self.queued[w] = true;
    }

    /// Mirrors src/sched/push.rs `notify_parked` (sched/sleepers.rs `needs_wake`).
    fn notify_parked(&mut self, near: usize, from: Option<usize>) {
        if self.searching == 0 && self.awake < self.n {
            self.wake_searcher(near, from);
        }
    }

    /// Mirrors the pusher's wake (src/sched/push.rs `notify_parked`) and sched/sleepers.rs `wake_one`: claims the
    /// parked worker nearest to `near` (the tokio-like baseline: the last
    /// one parked) as the one searcher in flight and kicks it.
    fn wake_searcher(&mut self, near: usize, from: Option<usize>) {
        if self.searching != 0 || self.awake >= self.n {
            return;
        }
        let w = match self.cfg.policy {
            Policy::Hwsched => self.take_parked_near(near, from),
            Policy::TokioLike => (0..self.n)
                .filter(|&w| self.parked[w])
                .max_by_key(|&w| self.workers[w].park_seq),
        };
        let Some(w) = w else { return };
        self.searching += 1;
        self.parked[w] = false;
        self.awake += 1;
        self.k().searcher_wakes += 1;
        if let Some(io) = self.io.as_mut() {
            io.c.searcher_wakes += 1;
            let near = near.min(self.n - 1);
            io.c.searcher_wakes_cross_llc += u64::from(self.llc_of[near] != self.llc_of[w]);
        }
        // sched/park.rs `Mailbox::kick`: the note, then the parker.
        self.workers[w].kick = Some(near.min(self.n - 1));
        self.notify(from, w);
    }

    /// sched/sleepers.rs `Sleepers::wake_one`'s search: the first `parked` bit of the
    /// production `wake_spans` order around `near` (src/worker/mod.rs `wake_spans`:
    /// on a hybrid machine the most capable workers of `near`'s LLC, then
    /// its levels' spans, nearest first), each span from `near` (from its
    /// start when `near` is outside it: `WorkerSet::find`), wrapping.
    fn take_parked_near(&mut self, near: usize, from: Option<usize>) -> Option<usize> {
        let near = near.min(self.n - 1);
        let spans: Vec<Range<usize>> = wake_spans(
            &self.capable[self.llc_of[near]],
            self.cfg.topology.levels(near),
            &self.all,
        )
        .cloned()
        .collect();
        for s in spans {
            let from_w = from.unwrap_or(near);
            self.acc += s.len().div_ceil(64) as u64 * self.line(from_w, s.start);
            let len = s.len();
            let off = if s.contains(&near) { near - s.start } else { 0 };
            if let Some(w) = (0..len)
                .map(|i| s.start + (off + i) % len)
                .find(|&w| self.parked[w])
            {
                return Some(w);
            }
        }
        None
    }

    /// src/policy/spawn_place.rs `place_external`: the production
    /// [`place_external`](hwsched::policy::place_external) decides over
    /// [`SimPlacement`], and the task is delivered as the runtime delivers
    /// it (tokio-like: a push to the global queue).
    fn place_external(&mut self, t: TaskId) {
        if self.cfg.policy == Policy::TokioLike {
            self.push_inject(t);
            return;
        }
        self.spawn_rr = self.spawn_rr.wrapping_add(1);
        let rr = self.spawn_rr;
        let topo = Rc::clone(&self.topo);
        let choice = place_external(
            &topo,
            &SimPlacement {
                sim: RefCell::new(self),
            },
            rr,
        );
        match choice {
            External::AwakeIdle(w) => {
                self.k().spawn_placed_idle += 1;
                self.deliver(None, w, t);
            }
            External::Woken(w) => {
                self.k().spawn_placed_idle += 1;
                self.k().searcher_wakes += 1;
                self.deliver_to_woken(None, w, t);
            }
            External::BurstTarget(to) | External::Idlest(to) => {
                self.k().spawn_placed_loaded += 1;
                self.deliver(None, to, t);
            }
        }
    }

    // ---- places (`Config::places`) -----------------------------------------

    /// The node `t` is placed on: its home node, with places on.
    fn placed(&self, t: TaskId) -> Option<usize> {
        if !self.cfg.places {
            return None;
        }
        self.workload.home(t).map(|h| h.node)
    }

    /// Queues `t` on `node`'s place queue, which only the node's workers
    /// take from ([`place_take`](Self::place_take)), then keeps work
    /// conserved inside the node ([`place_wake`](Self::place_wake)).
    fn push_place(&mut self, from: Option<usize>, node: usize, t: TaskId) {
        let start = self.node_spans[node].start;
        self.place_q[node].push_back(t);
        self.queued_total += 1;
        self.acc += 2 * match from {
            Some(f) => self.line(f, start),
            None => self.cfg.cost.line(Tier::Llc),
        };
        self.place_wake(from, node);
    }

    /// Work conservation inside a place, the searcher rule of the runtime
    /// restricted to the node's workers: when `node`'s place queue holds a
    /// task and no worker of the node other than `from` is awake and idle
    /// (walking, spinning, or a wake on its way: each looks at the queue
    /// before it sleeps), a spinning one is told, else a parked one is
    /// claimed and woken, nearest to `from` first (as `wake_specific`
    /// claims one). A worker that takes a task and leaves more behind calls
    /// it again, so a burst wakes the node's workers one after another, as
    /// `found_work` does.
    fn place_wake(&mut self, from: Option<usize>, node: usize) {
        if self.place_q[node].is_empty() {
            return;
        }
        let span = self.node_spans[node].clone();
        let other = |m: usize| Some(m) != from;
        let awake_idle = span
            .clone()
            .filter(|&m| {
                other(m) && matches!(self.workers[m].phase, Phase::Walking | Phase::Waking)
            })
            .count();
        let enough = if self.cfg.place_wake_per_task {
            self.place_q[node].len()
        } else {
            1
        };
        if awake_idle >= enough {
            return;
        }
        if let Some(m) = span
            .clone()
            .find(|&m| other(m) && self.workers[m].phase == Phase::Spinning)
        {
            self.notify(from, m);
            return;
        }
        let near = from.filter(|f| span.contains(f)).unwrap_or(span.start);
        let len = span.len();
        let Some(m) = (0..len)
            .map(|i| span.start + (near - span.start + i) % len)
            .find(|&m| self.parked[m])
        else {
            // Every worker of the node is busy: each looks at the queue when
            // its own queues run dry (`next_local`).
            return;
        };
        self.searching += 1;
        self.parked[m] = false;
        self.awake += 1;
        self.k().searcher_wakes += 1;
        self.notify(from, m);
    }

    /// Worker `w` takes the oldest task of its node's place queue (when its
    /// inbox is empty: from `mailbox_take`, which every path that looks for
    /// work calls before the worker sleeps), and wakes another worker of
    /// the node for what it leaves there.
    fn place_take(&mut self, w: usize) -> Option<TaskId> {
        if !self.cfg.places {
            return None;
        }
        let node = self.node_of[w];
        let t = self.place_q[node].pop_front()?;
        self.queued_total -= 1;
        self.acc += 2 * self.line(w, self.node_spans[node].start);
        self.place_wake(Some(w), node);
        Some(t)
    }

    // ---- src/worker/mod.rs: the worker's own queues ---------------------------------

    /// Mirrors `Core::push_local`.
    fn push_local(&mut self, w: usize, t: TaskId) {
        self.workers[w].local.push_back(t);
        self.queued_total += 1;
        self.acc += self.cfg.cost.local_queue_ns;
        self.maybe_publish(w);
        if !self.workers[w].queued_bit {
            self.workers[w].queued_bit = true;
            self.queued[w] = true;
        }
        self.notify_parked(w, Some(w));
    }

    /// Mirrors `Core::push_lifo`.
    fn push_lifo(&mut self, w: usize, t: TaskId) {
        self.acc += self.cfg.cost.local_queue_ns;
        if let Some(prev) = self.workers[w].lifo.replace(t) {
            self.push_local(w, prev);
        }
    }

    /// Mirrors sched/park.rs `Mailbox::take`: one inbox task (the worker runs
    /// what its own work wakes before it admits more).
    fn mailbox_take(&mut self, w: usize) -> Option<TaskId> {
        let Some(first) = self.workers[w].inbox.pop_front() else {
            return self.place_take(w);
        };
        self.queued_total -= 1;
        self.acc += 2 * self.cfg.cost.line(Tier::Llc);
        Some(first)
    }

    /// Mirrors sched/park.rs `Mailbox::admit`: a yield moves up to `ADMIT_BATCH`
    /// inbox tasks into the deque, ahead of the yielding task.
    fn mailbox_admit(&mut self, w: usize) {
        let k = self.workers[w].inbox.len().min(ADMIT_BATCH);
        if k == 0 {
            return;
        }
        for _ in 0..k {
            let x = self.workers[w].inbox.pop_front().expect("counted");
            self.workers[w].local.push_back(x);
        }
        self.acc += (2 + k.div_ceil(8) as u64) * self.cfg.cost.line(Tier::Llc);
    }

    fn inject_take(&mut self, w: usize) -> Option<TaskId> {
        let first = self.inject.pop_front()?;
        self.queued_total -= 1;
        // tokio's `next_remote_task_batch`: its share of the queue.
        let k = (self.inject.len() / self.n).min(TOKIO_REMOTE_BATCH);
        for _ in 0..k {
            let x = self.inject.pop_front().expect("counted");
            self.workers[w].local.push_back(x);
        }
        self.acc += (2 + k.div_ceil(8) as u64) * self.cfg.cost.line(Tier::Llc);
        Some(first)
    }

    /// Mirrors `Core::next_local`.
    fn next_local(&mut self, w: usize) -> Option<TaskId> {
        let tokio = self.cfg.policy == Policy::TokioLike;
        let wk = &mut self.workers[w];
        wk.tick = wk.tick.wrapping_add(1);
        if wk.tick % INBOX_CHECK_INTERVAL == 0 {
            let r = if tokio {
                self.inject_take(w)
            } else {
                self.mailbox_take(w)
            };
            if let Some(t) = r {
                self.k().inbox_pulls += 1;
                return Some(t);
            }
        }
        if let Some(t) = self.workers[w].lifo.take() {
            if self.workers[w].lifo_streak < MAX_LIFO_POLLS {
                self.workers[w].lifo_streak += 1;
                self.k().lifo_polls += 1;
                self.acc += self.cfg.cost.local_queue_ns;
                return Some(t);
            }
            self.push_local(w, t);
        }
        self.workers[w].lifo_streak = 0;
        if let Some(t) = self.workers[w].local.pop_front() {
            self.queued_total -= 1;
            self.acc += self.cfg.cost.local_queue_ns;
            return Some(t);
        }
        let r = if tokio {
            self.inject_take(w)
        } else {
            self.mailbox_take(w)
        };
        if r.is_some() {
            self.k().inbox_pulls += 1;
        }
        r
    }

    // ---- policy/load.rs through src/worker/mod.rs ----------------------------------------

    fn load(&self, span: &Span) -> Load {
        self.loads[self.span_index[span]]
    }

    fn publish(&mut self, w: usize, d: Publish) {
        if let Publish::Now { running, queued } = d {
            for i in 0..self.ancestors[w].len() {
                let (g, tier) = self.ancestors[w][i];
                let l = &mut self.loads[g];
                l.running = (i64::from(l.running) + running) as u32;
                l.queued = (i64::from(l.queued) + queued) as u32;
                self.acc += self.cfg.cost.line(tier);
            }
            self.k().load_publishes += self.ancestors[w].len() as u64;
        }
    }

    /// Mirrors `Core::publish_load` (the production `Publisher::decide`).
    fn publish_load(&mut self, w: usize, force: bool) {
        if self.cfg.policy == Policy::TokioLike {
            return;
        }
        let wk = &mut self.workers[w];
        wk.ops_since_publish = 0;
        let cur = Contribution {
            running: u32::from(wk.running),
            queued: (wk.local.len() + usize::from(wk.lifo.is_some()) + wk.inbox.len()) as u32,
        };
        let interval = self.cfg.tunables.load_update_interval.as_nanos() as u64;
        let d = wk
            .publisher
            .decide(self.now + self.acc, cur, interval, force);
        self.publish(w, d);
    }

    /// Mirrors `Core::maybe_publish`.
    fn maybe_publish(&mut self, w: usize) {
        self.workers[w].ops_since_publish += 1;
        if self.workers[w].ops_since_publish >= PUBLISH_CHECK_EVERY {
            self.publish_load(w, false);
        }
    }

    // ---- src/worker/mod.rs: running tasks ------------------------------------------

    fn start_run(&mut self, w: usize, t: TaskId) {
        self.set_phase(w, Phase::Busy);
        self.acc += self.cfg.cost.poll_ns;
        let start = self.now + self.acc;
        let task = &mut self.tasks[t];
        debug_assert_eq!(task.state, TState::Queued, "task {t} runs once per wake");
        task.state = TState::Running;
        task.notified = false;
        self.latencies.push(start.saturating_sub(task.ready_at));
        let mut penalty = 0;
        if task.last_worker != NO_WORKER && task.last_worker != w {
            let tier = self.tier[task.last_worker * self.n + w];
            self.migrations[tier.index()] += 1;
            penalty = self.cfg.cost.warmth_ns[tier.index()];
            if self.node_of[task.last_worker] != self.node_of[w] {
                self.cross_node_migrations += 1;
            }
        }
        task.last_worker = w;
        let home = self.workload.home(t);
        self.k().polls += 1;
        let mut actions = std::mem::take(&mut self.workers[w].run_actions);
        let run = {
            let mut ctx = Ctx::new(start, &mut self.rng, &mut self.next_task, &mut actions);
            self.workload.run(t, &mut ctx)
        };
        self.workers[w].run_actions = actions;
        self.workers[w].run_done = run.done;
        // A less capable worker (an E-core of a hybrid machine) takes
        // longer for the same work: capacity 1024 is the most capable.
        let cap = u64::from(self.topo.capacity(w).clamp(1, 1024));
        let work_ns = run.work_ns * 1024 / cap;
        // A run off its home node reads its memory across the interconnect.
        let mut remote = 0;
        if let Some(h) = home {
            self.homed_runs += 1;
            if h.node != self.node_of[w] {
                self.remote_runs += 1;
                remote = work_ns * h.remote_pct / 100;
            }
        }
        let tm = &mut self.time[w];
        tm.sched += self.acc;
        tm.warmth += penalty;
        tm.work += work_ns;
        tm.remote += remote;
        self.at(start + penalty + work_ns + remote, Ev::RunEnd(w, t));
    }

    fn run_end(&mut self, w: usize, t: TaskId) {
        let actions = std::mem::take(&mut self.workers[w].run_actions);
        self.apply(Some(w), actions);
        let done = self.workers[w].run_done;
        let task = &mut self.tasks[t];
        if done {
            task.state = TState::Done;
            self.stats[w].retired += 1;
            // Completion, output, deallocation (0 but on the `vm` costs).
            self.acc += self.cfg.cost.task_ns;
            if self.now >= self.makespan {
                self.makespan = self.now;
                // Worker time as of the end (what idle workers spend after
                // it is not part of the run).
                self.at_end = Time::sum(self.time.iter());
            }
        } else if task.notified {
            // Woken while running (a yield): worker/schedule.rs sends it to the
            // back of the local deque, behind the inbox (`Core::push_yield`;
            // tokio-like: the back of the local queue).
            task.state = TState::Queued;
            task.ready_at = self.now;
            self.k().wakes_by_task += 1;
            match self.placed(t) {
                Some(node) => self.push_place(Some(w), node, t),
                None => {
                    if self.cfg.policy != Policy::TokioLike {
                        self.mailbox_admit(w);
                    }
                    self.push_local(w, t)
                }
            }
        } else {
            task.state = TState::Blocked;
        }
        if self.io.is_some() {
            self.io_note_wait(w, t);
            self.io_after_task(w);
            // A server's tasks never finish: the run ends with its last
            // request handled.
            if self.now >= self.makespan {
                self.makespan = self.now;
                self.at_end = Time::sum(self.time.iter());
            }
        }
        self.time[w].sched += self.acc;
        let at = self.now + self.acc;
        self.at(at, Ev::Step(w));
    }

    /// The top of the worker loop (src/worker/mod.rs `run`).
    fn step(&mut self, w: usize) {
        if let Some(t) = self.next_local(w) {
            self.maybe_publish(w);
            return self.start_run(w, t);
        }
        self.idle_begin(w);
    }

    // ---- src/worker/mod.rs: the idle path -------------------------------------------

    /// Mirrors `Core::clear_queued`.
    fn clear_queued(&mut self, w: usize) -> Option<TaskId> {
        self.workers[w].queued_bit = false;
        if std::mem::replace(&mut self.queued[w], false) {
            if let Some(t) = self.mailbox_take(w) {
                self.k().inbox_pulls += 1;
                return Some(t);
            }
        }
        None
    }

    /// Mirrors src/worker/idle.rs `enter_idle`.
    fn enter_idle(&mut self, w: usize) {
        self.workers[w].running = false;
        self.idle[w] = true;
        if self.cfg.policy == Policy::Hwsched && self.cfg.tunables.sis_idle_core {
            let cs = self.cfg.topology.core_span(w);
            if cs.clone().all(|x| self.idle[x]) {
                self.idle_cores[self.llc_of[w]] = true;
            }
        }
        self.publish_load(w, false);
    }

    /// Mirrors src/worker/idle.rs `exit_idle`.
    fn exit_idle(&mut self, w: usize) {
        self.workers[w].running = true;
        self.idle[w] = false;
        if let Some(t0) = self.workers[w].idle_since {
            let mut sample = (self.now + self.acc).saturating_sub(t0);
            if self.workers[w].slept_any {
                sample = sample.saturating_sub(self.governor_park_cost());
            }
            self.workers[w].balance.record_idle(sample);
        }
        self.publish_load(w, false);
    }

    fn governor_park_cost(&self) -> u64 {
        self.cfg
            .tunables
            .park_cost
            .map_or(self.cfg.cost.park_round_trip_ns(), |d| d.as_nanos() as u64)
    }

    /// sched/sleepers.rs `to_searching`.
    fn become_searcher(&mut self) -> bool {
        if 2 * self.searching >= self.n.max(2) {
            return false;
        }
        self.searching += 1;
        true
    }

    /// sched/sleepers.rs `leave_searching`: whether it was the last searcher.
    fn leave_searching(&mut self) -> bool {
        debug_assert!(self.searching > 0, "leave_searching without a searcher");
        self.searching -= 1;
        self.searching == 0
    }

    /// Mirrors `Core::found_work`.
    fn found_work(&mut self, w: usize) {
        let last = std::mem::take(&mut self.workers[w].searching) && self.leave_searching();
        // sched/idle_steps.rs `found_work`: its deque, and its inbox.
        if !self.workers[w].local.is_empty() || !self.workers[w].inbox.is_empty() {
            if !self.workers[w].queued_bit {
                self.workers[w].queued_bit = true;
                self.queued[w] = true;
            }
            self.notify_parked(w, Some(w));
        } else if last {
            if let Some(v) = self.find_queued_work(w) {
                let near = if v == INJECT { w } else { v };
                self.notify_parked(near, Some(w));
            }
        }
    }

    /// src/worker/idle.rs `has_work`.
    fn has_work(&self, v: usize) -> bool {
        if v == INJECT {
            return !self.inject.is_empty();
        }
        !self.workers[v].local.is_empty() || !self.workers[v].inbox.is_empty()
    }

    /// Mirrors src/worker/idle.rs `find_queued_work`: the `queued` set, nearest
    /// spans first (tokio-like: also its global queue).
    fn find_queued_work(&mut self, me: usize) -> Option<usize> {
        if self.cfg.policy == Policy::TokioLike && !self.inject.is_empty() {
            return Some(INJECT);
        }
        let spans: Vec<Range<usize>> = near_spans(self.cfg.topology.levels(me), &self.all)
            .cloned()
            .collect();
        for s in spans {
            // The `queued` words read (one per 64 workers of the span).
            self.k().recheck_words += s.len().div_ceil(64) as u64;
            self.acc += s.len().div_ceil(64) as u64 * self.line(me, s.start);
            for v in s {
                if v != me && self.queued[v] {
                    self.k().walk_touched += 1;
                    self.acc += self.cfg.cost.steal_probe_lines * self.line(me, v);
                    if self.has_work(v) {
                        return Some(v);
                    }
                }
            }
        }
        None
    }

    fn rand(&mut self, w: usize, n: usize) -> usize {
        // src/worker/mod.rs `Core::rand` (xorshift).
        let wk = &mut self.workers[w];
        let mut x = wk.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        wk.rng = x;
        (x % n.max(1) as u64) as usize
    }

    /// Mirrors src/worker/idle.rs `steal_from`: half the victim's deque (at most
    /// crossbeam's batch), then its inbox.
    fn steal_from(&mut self, w: usize, victim: usize) -> Option<TaskId> {
        let l = self.line(w, victim);
        let cost = self.cfg.cost.clone();
        let sources: &[bool] = if victim == INJECT {
            &[true]
        } else {
            &[false, true]
        };
        for &from_inbox in sources {
            self.k().steals_attempted += 1;
            let q = if victim == INJECT {
                &mut self.inject
            } else if from_inbox {
                &mut self.workers[victim].inbox
            } else {
                &mut self.workers[victim].local
            };
            if q.is_empty() {
                self.acc += cost.steal_probe_lines * l;
                continue;
            }
            // crossbeam's `steal_batch_and_pop`: half a deque, or what an
            // injector block holds, at most MAX_BATCH + 1 with the one popped.
            let k = if from_inbox {
                q.len().min(MAX_BATCH + 1)
            } else {
                q.len().div_ceil(2).min(MAX_BATCH + 1)
            };
            let mut taken: Vec<TaskId> = q.drain(..k).collect();
            let first = taken.remove(0);
            self.queued_total -= 1;
            self.workers[w].local.extend(taken);
            self.acc += (cost.steal_lines + k.div_ceil(8) as u64) * l;
            self.workers[w].last_victim = (victim != INJECT).then_some(victim);
            self.k().steals_succeeded += 1;
            self.k().tasks_stolen += k as u64;
            return Some(first);
        }
        None
    }

    /// Mirrors src/worker/steal.rs `steal_from_level`: the busiest other group by the
    /// (stale) load counters, the production `busiest_group`; else the
    /// `queued` set; then the group's queued members from a random start.
    fn steal_from_level(&mut self, w: usize, level: usize, searched: &Span) -> Option<TaskId> {
        let groups = self.cfg.topology.levels(w)[level].groups.clone();
        let start = self.rand(w, groups.len());
        let inside = |g: &Span| searched.is_subset(g);
        // The production choice; each group's counter read costs a line.
        let mut read = 0;
        let mut best = busiest_group(&groups, searched, start, |g| {
            read += self.line(w, g.first());
            self.load(g)
        })
        .cloned();
        self.acc += read;
        if best.is_none() {
            for g in groups.iter().filter(|g| !inside(g)) {
                let words: usize = g.runs().iter().map(|r| r.len().div_ceil(64)).sum();
                self.k().recheck_words += words as u64;
                self.acc += words as u64 * self.line(w, g.first());
                if g.iter().any(|v| v != w && self.queued[v]) {
                    best = Some(g.clone());
                    break;
                }
            }
        }
        let group = best?;
        // src/worker/mod.rs: from a random member on, wrapping over the runs.
        let members: Vec<usize> = group.iter().collect();
        let off = self.rand(w, members.len());
        for part in [&members[off..], &members[..off]] {
            for &v in part {
                if v != w && self.queued[v] {
                    self.k().walk_touched += 1;
                    if let Some(t) = self.steal_from(w, v) {
                        return Some(t);
                    }
                }
            }
        }
        None
    }

    /// Mirrors src/worker/idle.rs `walk` (tokio-like: one pass over every other
    /// worker from a random start, then the global queue). The production
    /// `BalanceState::walk_with` decides which levels are tried, against a
    /// clock that advances by the modelled cost of each level.
    fn walk(&mut self, w: usize, kicked_by: Option<usize>) -> Option<TaskId> {
        self.k().walks += 1;
        if let Some(k) = kicked_by {
            self.k().woken_searching += 1;
            if k != w && k < self.n {
                self.k().walk_touched += 1;
                if let Some(t) = self.steal_from(w, k) {
                    return Some(t);
                }
            }
        }
        if let Some(v) = self.workers[w].last_victim.take() {
            self.acc += self.cfg.cost.steal_probe_lines * self.line(w, v);
            if v != w && self.has_work(v) {
                self.k().walk_touched += 1;
                if let Some(t) = self.steal_from(w, v) {
                    return Some(t);
                }
            }
        }
        let n = self.n;
        if self.cfg.policy == Policy::TokioLike || self.cfg.tunables.walk == StealWalk::Unbounded {
            let start = self.rand(w, n);
            for i in 0..n {
                let v = (start + i) % n;
                if v != w {
                    self.k().walk_touched += 1;
                    if let Some(t) = self.steal_from(w, v) {
                        return Some(t);
                    }
                }
            }
            if self.cfg.policy == Policy::TokioLike {
                return self.steal_from(w, INJECT);
            }
            return None;
        }
        // The gate (rd->overload): the machine counter, then the queued set.
        self.acc += self.cfg.cost.line(Tier::Remote);
        if self.loads[self.machine].queued == 0 {
            self.k().recheck_words += n.div_ceil(64) as u64;
            self.acc += n.div_ceil(64) as u64 * self.cfg.cost.line(Tier::Remote);
            if !(0..n).any(|v| v != w && self.queued[v]) {
                self.k().walks_skipped += 1;
                return None;
            }
        }
        let clock = Cell::new(self.now + self.acc);
        let stolen_before = self.k().tasks_stolen;
        let mut searched = Span::single(w);
        let mut balance = std::mem::replace(&mut self.workers[w].balance, BalanceState::new(0, 1));
        let clock_ns = self.cfg.cost.clock_ns;
        let out = balance.walk_with(
            true,
            || clock.get(),
            |i| {
                let before = self.acc;
                let found = self.steal_from_level(w, i, &searched);
                searched = self.cfg.topology.levels(w)[i].span.clone();
                self.acc += 2 * clock_ns;
                clock.set(clock.get() + (self.acc - before));
                found
            },
        );
        self.workers[w].balance = balance;
        for &i in &out.tried {
            self.k().walk_tried[stat_slot(i)] += 1;
        }
        if let Some(i) = out.cut_at {
            self.k().walk_cut[stat_slot(i)] += 1;
        }
        let (level, t) = out.found?;
        self.k().walk_success[stat_slot(level)] += 1;
        // Only the successful steal moved tasks.
        let moved = self.k().tasks_stolen - stolen_before;
        self.k().walk_moved[stat_slot(level)] += moved;
        Some(t)
    }

    /// Mirrors the start of src/worker/mod.rs `idle`.
    fn idle_begin(&mut self, w: usize) {
        if let Some(t) = self.clear_queued(w) {
            return self.start_run(w, t);
        }
        self.set_phase(w, Phase::Walking);
        self.enter_idle(w);
        if !self.workers[w].searching {
            self.workers[w].searching = self.become_searcher();
        }
        let wk = &mut self.workers[w];
        wk.idle_since = None;
        wk.slept_any = false;
        wk.pending_kick = None;
        self.idle_top(w);
    }

    /// The top of src/worker/mod.rs `idle`'s loop: walk when searching or kicked.
    fn idle_top(&mut self, w: usize) {
        self.set_phase(w, Phase::Walking);
        // Its place's queue before the walk: cheap, and no other worker
        // may take that work (`Config::places`).
        if let Some(t) = self.place_take(w) {
            self.k().inbox_pulls += 1;
            return self.got_work(w, t);
        }
        let wk = &mut self.workers[w];
        let kick = wk.pending_kick.take().or_else(|| wk.kick.take());
        if wk.searching || kick.is_some() {
            let found = self.walk(w, kick);
            self.time[w].sched += self.acc;
            let at = self.now + self.acc;
            self.at(at, Ev::WalkDone(w, found));
            return;
        }
        self.after_walk(w);
    }

    fn walk_done(&mut self, w: usize, found: Option<TaskId>) {
        match found {
            Some(t) => self.got_work(w, t),
            None => self.after_walk(w),
        }
    }

    /// Work found while idle: `found_work`, `exit_idle`, run it.
    fn got_work(&mut self, w: usize, t: TaskId) {
        self.found_work(w);
        self.exit_idle(w);
        self.start_run(w, t);
    }

    /// src/worker/mod.rs `idle` after the walk: the governor, then sched/park.rs
    /// `wait_for` (inbox, kick, spin, before-sleep, park).
    fn after_walk(&mut self, w: usize) {
        let now = self.now + self.acc;
        // The idle period's start (the kernel's `rq->idle_stamp`), kept
        // across passes of the loop.
        self.workers[w].idle_since.get_or_insert(now);
        self.idle[w] = true;
        let avg_idle = self.workers[w].balance.avg_idle_ns;
        let choice = self.workers[w].governor.choose(now, avg_idle);
        let tokio = self.cfg.policy == Policy::TokioLike;
        let r = if tokio {
            self.inject_take(w).or_else(|| self.mailbox_take(w))
        } else {
            self.mailbox_take(w)
        };
        if let Some(t) = r {
            self.k().inbox_pulls += 1;
            return self.got_work(w, t);
        }
        if let Some(k) = self.workers[w].kick.take() {
            return self.handle_woken(w, Some(k), None);
        }
        if let IdleChoice::Spin { until_ns } = choice {
            self.k().spins += 1;
            self.set_phase(w, Phase::Spinning);
            let wk = &mut self.workers[w];
            wk.gen += 1;
            wk.spin_start = now;
            wk.spin_until = until_ns.max(now);
            let g = wk.gen;
            self.time[w].sched += self.acc;
            self.at(until_ns.max(now), Ev::SpinEnd(w, g));
            return;
        }
        self.before_sleep(w);
    }

    /// The `before_sleep` closure of src/worker/mod.rs `idle`: publish, announce
    /// (sched/sleepers.rs `to_parked`), re-check with no searcher left, then sleep.
    fn before_sleep(&mut self, w: usize) {
        self.set_phase(w, Phase::Walking);
        // Its place's queue, last: a spinner told of a push can reach here
        // (its spin over) before the notice does, and `place_wake` woke no
        // one else for that task.
        if let Some(t) = self.place_take(w) {
            self.k().inbox_pulls += 1;
            return self.got_work(w, t);
        }
        if self.cfg.policy == Policy::Hwsched {
            let wk = &mut self.workers[w];
            let cur = Contribution {
                running: 0,
                queued: (wk.local.len() + wk.inbox.len()) as u32,
            };
            let interval = self.cfg.tunables.load_update_interval.as_nanos() as u64;
            let d = wk
                .publisher
                .decide(self.now + self.acc, cur, interval, true);
            self.publish(w, d);
        }
        if self.cfg.park_clears_queued {
            // Proposed (not in the runtime): leave the `queued` set before
            // sleeping, as `clear_queued` does when going idle. A bit set
            // by a delivery whose task a thief took would otherwise stay
            // set for the whole sleep, and every walk probes this queue.
            if let Some(t) = self.clear_queued(w) {
                return self.got_work(w, t);
            }
        }
        // to_parked.
        let searching = self.workers[w].searching;
        self.parked[w] = true;
        self.park_counter += 1;
        self.workers[w].park_seq = self.park_counter;
        self.awake -= 1;
        if searching {
            self.searching -= 1;
        }
        let none_left = self.searching == 0;
        if none_left {
            self.k().park_rechecks += 1;
            if let Some(v) = self.find_queued_work(w) {
                // Not sleeping: leave_parked, then the Woken branch.
                let kick = self.workers[w].kick.take();
                self.workers[w].searching = self.leave_parked(w);
                return self.handle_woken(w, kick, Some(v));
            }
        }
        if self.io.is_some() && self.io_sleep(w) {
            return;
        }
        self.acc += self.cfg.cost.park_cpu_ns;
        self.time[w].sched += self.acc;
        self.set_phase(w, Phase::Parked);
    }

    /// sched/sleepers.rs `leave_parked`: whether a waker had claimed this worker.
    fn leave_parked(&mut self, w: usize) -> bool {
        if self.parked[w] {
            self.parked[w] = false;
            self.awake += 1;
            false
        } else {
            true
        }
    }

    fn spin_end(&mut self, w: usize, g: u64) {
        if self.workers[w].gen != g || self.workers[w].phase != Phase::Spinning {
            return;
        }
        let spun = self.now - self.workers[w].spin_start;
        self.workers[w].governor.record_spin(spun);
        self.time[w].spin += spun;
        self.k().spin_gave_up += 1;
        self.k().spin_ns += spun;
        self.before_sleep(w);
    }

    fn spin_hit(&mut self, w: usize, g: u64) {
        if self.workers[w].gen != g || self.workers[w].phase != Phase::Spinning {
            return;
        }
        let wk = &mut self.workers[w];
        wk.gen += 1;
        let spun = self.now - wk.spin_start;
        wk.governor.record_spin(spun);
        self.time[w].spin += spun;
        self.k().spin_hits += 1;
        self.k().spin_ns += spun;
        self.k().spin_hit_ns += spun;
        self.set_phase(w, Phase::Walking);
        let kick = self.workers[w].kick.take();
        self.handle_woken(w, kick, None);
    }

    /// A futex wake arrived: sched/park.rs `wait_for` returns after the park.
    fn woken(&mut self, w: usize) {
        self.set_phase(w, Phase::Walking);
        if let Some(p) = self.io.as_ref().and_then(|io| io.held[w]) {
            if !self.io_woken(w, p) {
                return;
            }
        }
        self.k().parks += 1;
        let left = self.io.as_mut().and_then(|io| io.left_parked[w].take());
        self.workers[w].searching = match left {
            Some(searching) => searching,
            None => self.leave_parked(w),
        };
        self.workers[w].slept_any = true;
        let r = if self.cfg.policy == Policy::TokioLike {
            self.inject_take(w).or_else(|| self.mailbox_take(w))
        } else {
            self.mailbox_take(w)
        };
        if let Some(t) = r {
            self.k().inbox_pulls += 1;
            return self.got_work(w, t);
        }
        let kick = self.workers[w].kick.take();
        self.handle_woken(w, kick, None);
    }

    /// src/worker/mod.rs `idle`'s `Wait::Woken` branch.
    fn handle_woken(&mut self, w: usize, kick: Option<usize>, pending: Option<usize>) {
        self.workers[w].pending_kick = kick;
        if let Some(v) = pending {
            self.k().walk_touched += 1;
            if let Some(t) = self.steal_from(w, v) {
                if self.has_work(v) {
                    let near = if v == INJECT { w } else { v };
                    self.notify_parked(near, Some(w));
                } else if self.cfg.recheck_wakes_for_others {
                    // As the runtime does (src/sched/idle_steps.rs `after_wait`): the re-check found more
                    // than one queue with work; having taken from one, make
                    // sure the others get a searcher, as the last searcher
                    // leaving does.
                    if let Some(u) = self.find_queued_work(w) {
                        let near = if u == INJECT { w } else { u };
                        self.notify_parked(near, Some(w));
                    }
                }
                return self.got_work(w, t);
            }
        }
        if !self.workers[w].searching {
            self.workers[w].searching = self.become_searcher();
        }
        if self.io.is_some() {
            // src/sched/idle_steps.rs `after_wait`: what its own poller turn put in its
            // LIFO slot or deque is its own work.
            let lifo = self.workers[w].lifo.take();
            let t = lifo.or_else(|| {
                let x = self.workers[w].local.pop_front();
                if x.is_some() {
                    self.queued_total -= 1;
                }
                x
            });
            if let Some(t) = t {
                return self.got_work(w, t);
            }
        }
        self.idle_top(w);
    }
}

/// The simulated idle flags as wake placement sees them (worker/schedule.rs
/// `RuntimeIdle`), costing one cache line per idle-mask word read (at the
/// distance of its workers) and per claim.
struct SimIdle<'a> {
    idle: RefCell<&'a mut Vec<bool>>,
    hints: RefCell<&'a mut Vec<bool>>,
    llc_of: &'a [usize],
    topo: &'a Topology,
    tier: &'a [Tier],
    n: usize,
    cost: &'a CostModel,
    me: usize,
    ns: Cell<u64>,
    seen: RefCell<Vec<usize>>,
}

impl SimIdle<'_> {
    fn line(&self, w: usize) -> u64 {
        self.cost.line(self.tier[self.me * self.n + w])
    }

    /// The idle-mask word holding `w` (sched/sleepers.rs `WorkerSet`: each LLC starts
    /// a word, 64 workers a word).
    fn word(&self, w: usize) -> usize {
        let s = self.topo.llc_span(w).start;
        s + (w - s) / 64 * 64
    }

    fn read(&self, w: usize) -> usize {
        let word = self.word(w);
        let mut seen = self.seen.borrow_mut();
        if seen.contains(&word) {
            0
        } else {
            seen.push(word);
            self.ns.set(self.ns.get() + self.line(w));
            1
        }
    }
}

impl IdleView for SimIdle<'_> {
    fn is_idle(&self, w: usize) -> bool {
        self.read(w);
        self.idle.borrow()[w]
    }
    fn claim(&self, w: usize) -> bool {
        self.read(w);
        let was = std::mem::replace(&mut self.idle.borrow_mut()[w], false);
        if was {
            // The RMW that takes the bit.
            self.ns.set(self.ns.get() + self.line(w));
        }
        was
    }
    fn has_idle_cores(&self, w: usize) -> bool {
        self.ns.set(self.ns.get() + self.line(w));
        self.hints.borrow()[self.llc_of[w]]
    }
    fn clear_idle_cores(&self, w: usize) {
        let mut h = self.hints.borrow_mut();
        if h[self.llc_of[w]] {
            h[self.llc_of[w]] = false;
            self.ns.set(self.ns.get() + self.line(w));
        }
    }
    fn find_idle(&self, span: &Range<usize>, from: usize, max: usize) -> (Option<usize>, usize) {
        let n = span.len();
        if n == 0 {
            return (None, 0);
        }
        let off = from.saturating_sub(span.start) % n;
        let mut words = 0;
        let mut found = None;
        for i in 0..max.min(n) {
            let w = span.start + (off + i) % n;
            words += self.read(w);
            if self.idle.borrow()[w] {
                found = Some(w);
                break;
            }
        }
        (found, words)
    }
}

/// The simulated load counters and idle flags as external spawn placement
/// sees them (worker/schedule.rs `RuntimeView`).
struct SimPlacement<'a> {
    sim: RefCell<&'a mut Sim>,
}

impl PlacementView for SimPlacement<'_> {
    fn load(&self, span: &Span) -> Load {
        self.sim.borrow().load(span)
    }
    fn claim_idle(&self, w: usize) -> bool {
        std::mem::replace(&mut self.sim.borrow_mut().idle[w], false)
    }
    fn is_parked(&self, w: usize) -> bool {
        self.sim.borrow().parked[w]
    }
    fn backlog(&self, w: usize) -> usize {
        let s = self.sim.borrow();
        s.workers[w].inbox.len() + s.workers[w].local.len()
    }
}

/// The simulated wake protocol (sched/sleepers.rs `Sleepers`) as the production
/// `place_external` reads and claims it.
impl ExternalView for SimPlacement<'_> {
    /// sched/sleepers.rs `claim_awake_idle`: an idle worker that is not parked,
    /// scanning the idle words from the one holding worker `from`.
    fn claim_awake_idle(&self, from: usize) -> Option<usize> {
        let mut s = self.sim.borrow_mut();
        let n = s.n;
        let llc = s.topo.llc_span(from);
        let start = llc.start + (from - llc.start) / 64 * 64;
        let w = (0..n)
            .map(|i| (start + i) % n)
            .find(|&w| s.idle[w] && !s.parked[w])?;
        s.idle[w] = false;
        Some(w)
    }
    fn needs_wake(&self) -> bool {
        let s = self.sim.borrow();
        s.searching == 0 && s.awake < s.n
    }
    /// sched/sleepers.rs `wake_one`: the claim (`searching += 1`), the `parked` bit
    /// nearest to `near`, and `awake += 1`.
    fn wake_one(&self, near: usize) -> Option<usize> {
        let mut s = self.sim.borrow_mut();
        if s.searching != 0 || s.awake >= s.n {
            return None;
        }
        let w = s.take_parked_near(near, None)?;
        s.searching += 1;
        s.parked[w] = false;
        s.awake += 1;
        Some(w)
    }
    fn someone_asleep(&self) -> bool {
        let s = self.sim.borrow();
        s.awake < s.n
    }
    fn burst_target(&self) -> usize {
        self.sim.borrow().burst_target
    }
    fn set_burst_target(&self, w: usize) {
        self.sim.borrow_mut().burst_target = w;
    }
}

/// Runs `workload` under `cfg` and returns the report.
pub fn simulate(cfg: Config, workload: Box<dyn Workload>) -> Report {
    Sim::new(cfg, workload).run()
}

/// The idle mode for the CLI: `park`, `governed`, or `spin:<us>`.
pub fn parse_idle(s: &str) -> Option<IdleMode> {
    match s {
        "park" => Some(IdleMode::AlwaysPark),
        "governed" => Some(IdleMode::Governed),
        _ => s
            .strip_prefix("spin:")
            .and_then(|u| u.parse::<u64>().ok())
            .map(|u| IdleMode::AlwaysSpin(Duration::from_micros(u))),
    }
}
