//! Places: where a user says a task runs ([`Place`], checked into a
//! [`Target`] or refused with a [`PlaceError`]) and where the calling code
//! runs ([`CurrentPlace`]). The queues behind a place are a worker's
//! pinned queue (src/sched/README.md, "Pinned tasks") and a domain's place queue
//! (sched/place_queue.rs); the spawns are worker/spawn.rs's `spawn_on`
//! and `spawn_local`.

use std::fmt;
use std::ops::Range;

use crate::topology::{LevelKind, Topology};

/// Where a task spawned with [`spawn_on`](crate::spawn_on) runs.
///
/// Domain indices count the domains of one kind in worker order, as
/// [`Topology::domains`] lists them and [`CurrentPlace`] reports them.
///
/// A task placed on a worker ([`Place::Worker`], [`Place::Here`]) runs
/// only on that worker, before and after every wake, and no other worker
/// ever takes it (it waits while its worker is busy, by design). A task
/// placed in a domain ([`Place::Core`], [`Place::Llc`], [`Place::Numa`],
/// [`Place::Package`]) runs only on the domain's workers, before and after
/// every wake: it waits in the domain's own queue, which no other worker
/// looks at (stealing never moves it out), and inside the domain work
/// conservation holds (an idle worker of the domain takes it, and a
/// parked one is woken for it when none is awake: sched/place_queue.rs). An index
/// past the last domain of its kind that has workers is
/// [`PlaceError::DomainOutOfRange`]; nothing is spawned then.
///
/// ```
/// use hwsched::{Place, PlaceError};
/// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
/// let h = rt.spawn_on(Place::Worker(1), async { hwsched::worker_index() }).unwrap();
/// assert_eq!(rt.block_on(h).unwrap(), Some(1));
/// let err = rt.spawn_on(Place::Worker(2), async {}).unwrap_err();
/// assert!(matches!(err, PlaceError::WorkerOutOfRange { worker: 2, workers: 2 }));
///
/// // Two NUMA nodes of 4 workers: a task of node 1 polls on workers 4..8.
/// let rt = hwsched::Runtime::builder()
///     .topology(hwsched::TopologySource::Synthetic("pack:2 [numa] core:4 pu:1".into()))
///     .build()?;
/// let h = rt.spawn_on(Place::Numa(1), async {
///     let a = hwsched::current_place().unwrap();
///     hwsched::yield_now().await;
///     (a.numa, hwsched::current_place().unwrap().numa)
/// }).unwrap();
/// assert_eq!(rt.block_on(h).unwrap(), (1, 1));
/// let err = rt.spawn_on(Place::Numa(2), async {}).unwrap_err();
/// assert_eq!(err, PlaceError::DomainOutOfRange { place: Place::Numa(2), domains: 2 });
/// # Ok::<(), hwsched::BuildError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Place {
    /// One worker, by index (`0..Runtime::workers()`).
    Worker(usize),
    /// The worker running the caller ([`worker_index`](crate::worker_index)):
    /// an error off a worker of the runtime.
    Here,
    /// The workers of one core (its SMT siblings), by core index.
    Core(usize),
    /// The workers of one last-level cache ([`Topology::llc_span`]).
    Llc(usize),
    /// The workers of one NUMA node ([`Topology::numa_span`]).
    Numa(usize),
    /// The workers of one package ([`Topology::package_span`]).
    Package(usize),
    /// Near one worker, by index: the task starts in that worker's queue,
    /// and its wakes are placed as if it had last run there, but it is an
    /// ordinary task: any worker may steal it, and it moves like any other
    /// (a hint, where the places above are rules).
    NearWorker(usize),
    /// Near the worker running the caller, as [`NearWorker`](Place::NearWorker)
    /// (on a worker, what [`spawn`](crate::spawn) does already; the variant
    /// says so where the code names its places): an error off a worker of
    /// the runtime.
    NearHere,
}

impl Place {
    /// The level kind whose domains a domain place indexes (cores are
    /// [`LevelKind::Smt`]); `None` for a worker place.
    pub fn level(self) -> Option<LevelKind> {
        match self {
            Place::Worker(_) | Place::Here | Place::NearWorker(_) | Place::NearHere => None,
            Place::Core(_) => Some(LevelKind::Smt),
            Place::Llc(_) => Some(LevelKind::Llc),
            Place::Numa(_) => Some(LevelKind::Numa),
            Place::Package(_) => Some(LevelKind::Package),
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Worker(w) => write!(f, "worker {w}"),
            Place::Here => f.write_str("the current worker"),
            Place::Core(i) => write!(f, "core {i}"),
            Place::Llc(i) => write!(f, "LLC {i}"),
            Place::Numa(i) => write!(f, "NUMA node {i}"),
            Place::Package(i) => write!(f, "package {i}"),
            Place::NearWorker(w) => write!(f, "near worker {w}"),
            Place::NearHere => f.write_str("near the current worker"),
        }
    }
}

/// Why a [`Place`] was refused. Nothing was spawned (the future was
/// dropped), and the message names the place.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlaceError {
    /// [`Place::Worker`] with an index past the last worker.
    WorkerOutOfRange {
        /// The index asked for.
        worker: usize,
        /// How many workers the runtime has.
        workers: usize,
    },
    /// A domain place whose index is past the last domain of its kind
    /// that has workers (a node whose PUs the runtime left out has none).
    DomainOutOfRange {
        /// The place asked for.
        place: Place,
        /// How many domains of that kind the topology has.
        domains: usize,
    },
    /// [`Place::Here`] (or `spawn_local`) called off a worker of this
    /// runtime.
    NotOnWorker {
        /// The place asked for.
        place: Place,
    },
    /// A place this runtime does not honour. No place of this version
    /// is refused so; kept for places added later.
    Unsupported {
        /// The place asked for.
        place: Place,
    },
}

impl fmt::Display for PlaceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlaceError::WorkerOutOfRange { worker, workers } => write!(
                f,
                "worker {worker} is out of range: the runtime has {workers} workers (0..{workers})"
            ),
            PlaceError::DomainOutOfRange { place, domains } => write!(
                f,
                "{place} is out of range: the topology has {domains} such domains (0..{domains})"
            ),
            PlaceError::NotOnWorker { place } => write!(
                f,
                "{place} needs to be called on a worker thread of this runtime (from a task), \
                 not from outside it"
            ),
            PlaceError::Unsupported { place } => write!(
                f,
                "{place}: this runtime does not honour this place; use Place::Worker \
                 with a worker of the domain (Topology::domains lists their spans)"
            ),
        }
    }
}

impl std::error::Error for PlaceError {}

/// Where the calling code runs: its worker and that worker's domains
/// ([`current_place`](crate::current_place)).
///
/// The domain ids are indices of the domains of each kind in worker order,
/// as [`Topology::domains`] lists them and [`Place`] names them, so a
/// program can shard by node (`numa`) and first-touch its memory there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct CurrentPlace {
    /// The worker's index.
    pub worker: usize,
    /// Its core ([`Place::Core`]).
    pub core: usize,
    /// Its last-level cache ([`Place::Llc`]).
    pub llc: usize,
    /// Its NUMA node ([`Place::Numa`]).
    pub numa: usize,
    /// Its package ([`Place::Package`]).
    pub package: usize,
}

/// The domain kinds a [`CurrentPlace`] reports, in its field order.
const KINDS: [LevelKind; 4] = [
    LevelKind::Smt,
    LevelKind::Llc,
    LevelKind::Numa,
    LevelKind::Package,
];

/// The runtime's table of domains, built once: per kind, each domain's
/// span, and per worker, the index of its domain of each kind.
pub(crate) struct Places {
    spans: [Vec<Range<usize>>; 4],
    of: Box<[[usize; 4]]>,
    /// Per kind, each domain's place queue (sched/place_queue.rs): an index into the
    /// runtime's `DomainQueues`, set by [`Places::set_queues`].
    queue: [Vec<usize>; 4],
}

/// A place checked against the runtime: what a placed spawn does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// Pinned to one worker.
    Worker(usize),
    /// An ordinary task, started at one worker.
    Near(usize),
    /// Queued in a domain's place queue (sched/place_queue.rs), taken by its workers
    /// only.
    Domain {
        /// The queue's index.
        queue: usize,
        /// The kind, as [`PlaceKind`].
        kind: PlaceKind,
    },
}

/// The kinds of [`Place`] the counters of placed polls distinguish
/// ([`WorkerStats`](crate::WorkerStats)'s `placed_polls_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PlaceKind {
    Worker,
    Core,
    Llc,
    Numa,
    Package,
}

impl Places {
    /// Every domain span, kind by kind (cores, LLCs, nodes, packages), in
    /// the order [`Places::set_queues`] takes their queues.
    pub(crate) fn all_spans(&self) -> Vec<Range<usize>> {
        self.spans.iter().flatten().cloned().collect()
    }

    /// Sets the queue of each domain: `ids[i]` is the queue of the `i`-th
    /// span of [`Places::all_spans`].
    pub(crate) fn set_queues(&mut self, ids: &[usize]) {
        let mut it = ids.iter().copied();
        for (k, s) in self.spans.iter().enumerate() {
            self.queue[k] = it.by_ref().take(s.len()).collect();
        }
    }

    pub(crate) fn new(topo: &Topology) -> Self {
        let spans = KINDS.map(|k| topo.domains(k).expect("a domain kind"));
        let of = (0..topo.workers())
            .map(|w| {
                let mut ids = [0; 4];
                for (k, s) in spans.iter().enumerate() {
                    ids[k] = s.partition_point(|r| r.end <= w);
                }
                ids
            })
            .collect();
        Places {
            spans,
            of,
            queue: Default::default(),
        }
    }

    /// Where worker `w` is.
    pub(crate) fn current(&self, w: usize) -> CurrentPlace {
        let [core, llc, numa, package] = self.of[w];
        CurrentPlace {
            worker: w,
            core,
            llc,
            numa,
            package,
        }
    }

    /// Checks `place` for a caller on worker `here` (if any).
    pub(crate) fn check(&self, place: Place, here: Option<usize>) -> Result<Target, PlaceError> {
        let workers = self.of.len();
        let k = match place {
            Place::Worker(w) if w < workers => return Ok(Target::Worker(w)),
            Place::Worker(worker) => return Err(PlaceError::WorkerOutOfRange { worker, workers }),
            Place::Here => {
                return here
                    .map(Target::Worker)
                    .ok_or(PlaceError::NotOnWorker { place })
            }
            Place::NearWorker(w) if w < workers => return Ok(Target::Near(w)),
            Place::NearWorker(worker) => {
                return Err(PlaceError::WorkerOutOfRange { worker, workers })
            }
            Place::NearHere => {
                return here
                    .map(Target::Near)
                    .ok_or(PlaceError::NotOnWorker { place })
            }
            Place::Core(i) => (0, i, PlaceKind::Core),
            Place::Llc(i) => (1, i, PlaceKind::Llc),
            Place::Numa(i) => (2, i, PlaceKind::Numa),
            Place::Package(i) => (3, i, PlaceKind::Package),
        };
        let domains = self.spans[k.0].len();
        if k.1 >= domains {
            return Err(PlaceError::DomainOutOfRange { place, domains });
        }
        match self.queue[k.0].get(k.1) {
            Some(&queue) => Ok(Target::Domain { queue, kind: k.2 }),
            None => Err(PlaceError::Unsupported { place }),
        }
    }
}
