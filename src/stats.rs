//! Schedstat-like counters, per worker.
//!
//! Each worker's counters are written only by that worker (a relaxed load
//! and store, no read-modify-write, no shared cache line). Placement
//! decisions made on threads outside the runtime are counted in a separate
//! `external` block with `fetch_add`. [`Runtime::stats`](crate::Runtime::stats)
//! takes a snapshot; its `Display` prints a per-worker table with totals, the
//! idle-balance table per level and the wakeup-placement (SIS) table in the
//! spirit of `/proc/schedstat` and Mel Gorman's tables in seed 001.

use std::fmt;
use std::ops::{Add, AddAssign};
use std::time::Duration;

use crate::sync::{AtomicU64, Ordering};

/// How many levels the per-level counters hold (SMT, cluster, LLC, the
/// node, the kernel's NUMA levels, the machine): a worker with more (a
/// machine with many distinct NUMA distances) counts its levels past the
/// last slot in the last one.
pub const MAX_LEVELS: usize = 8;

macro_rules! counters {
    ($(#[$m:meta])* $name:ident, $snap:ident { $($(#[$fm:meta])* $f:ident),* $(,)? }
     levels { $($(#[$lm:meta])* $lf:ident),* $(,)? }) => {
        /// Live counters of one worker (or of outside threads).
        #[derive(Debug, Default)]
        pub(crate) struct $name {
            $(pub(crate) $f: AtomicU64,)*
            $(pub(crate) $lf: [AtomicU64; MAX_LEVELS],)*
        }

        $(#[$m])*
        #[derive(Debug, Default, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct $snap {
            $($(#[$fm])* pub $f: u64,)*
            $($(#[$lm])* pub $lf: [u64; MAX_LEVELS],)*
        }

        impl $name {
            pub(crate) fn snapshot(&self) -> $snap {
                $snap {
                    $($f: self.$f.load(Ordering::Relaxed),)*
                    $($lf: std::array::from_fn(|i| self.$lf[i].load(Ordering::Relaxed)),)*
                }
            }
        }

        impl AddAssign<&$snap> for $snap {
            fn add_assign(&mut self, o: &$snap) {
                $(self.$f += o.$f;)*
                $(for i in 0..MAX_LEVELS { self.$lf[i] += o.$lf[i]; })*
            }
        }

        impl Add<&$snap> for $snap {
            type Output = $snap;
            fn add(mut self, o: &$snap) -> $snap {
                self += o;
                self
            }
        }
    };
}

counters! {
    /// A snapshot of one worker's counters (or their sum).
    WorkerCounters, WorkerStats {
        /// Tasks spawned by this worker (or, for `external`, from outside).
        spawned,
        /// Tasks finished or dropped on this worker.
        retired,
        /// Tasks polled.
        polls,
        /// Polls taken from the LIFO slot.
        lifo_polls,
        /// Tasks this worker took from another worker's LIFO slot (a
        /// re-check's pending steal: the owner was in a long poll).
        lifo_steals,
        /// Batches taken from the inbox.
        inbox_pulls,
        /// Tasks spawned onto this worker's own deque.
        local_spawns,
        /// Steal attempts on a victim (deque or inbox).
        steals_attempted,
        /// Steal attempts that got work.
        steals_succeeded,
        /// Tasks moved by successful steals (the one run plus the batch).
        tasks_stolen,
        /// Times the worker slept on its condvar.
        parks,
        /// Unparks this thread issued (a futex wake of another worker).
        unparks,
        /// Panics caught in a task's poll or drop, or while dropping a task's
        /// output or panic payload.
        panics,
        /// Idle-balance walks started.
        walks,
        /// Walks skipped because nothing was queued anywhere.
        walks_skipped,
        /// Parked workers this thread woke to search (the wake protocol's
        /// `wake_one`: one per burst, then fan-out).
        searcher_wakes,
        /// Times this worker was woken to search, with a note of where the
        /// work is.
        woken_searching,
        /// Workers whose queues an idle walk or re-check looked at (victims
        /// tried, `queued` members verified).
        walk_touched,
        /// Bitmap words read by walks and re-checks (the `queued` set).
        recheck_words,
        /// Times this worker went to sleep with no searcher left (and so
        /// re-checked the `queued` set first).
        park_rechecks,
        /// Idle-mask words read by wake placement scans.
        sis_words,
        /// Task wakes made by code running on this worker (a task's poll,
        /// or a drop): the waker is a worker, placement sees it.
        wakes_by_task,
        /// Task wakes made on this worker's thread by the I/O driver (a
        /// readiness event, a timer's expiry): kept on this worker, its
        /// LIFO slot then its deque, without wake placement.
        wakes_by_driver,
        /// Poller turns (`epoll_wait`) this worker made, blocking or not.
        driver_turns,
        /// Of `driver_turns`, those whose batch woke at least one task.
        driver_batches,
        /// Parked workers woken to search by the one decision after a batch
        /// (the batch left more than this worker runs next, nobody searched).
        batch_wakes,
        /// Tasks a watcher took from other workers' private batch queues
        /// that had waited longer than `migration_cost` (sched/watch.rs).
        batch_rescued,
        /// Of `batch_rescued`, tasks taken because their owner had been in
        /// one poll for at least `watch::LONG_POLL_NS` (src/sched/README.md, "Long
        /// polls").
        long_poll_rescued,
        /// Times this worker made its private work stealable before polling
        /// a task marked a hog (a watcher had taken the work from behind
        /// one of its polls: worker/mod.rs, `run_with_private_behind`).
        hog_releases,
        /// Parked workers woken to watch over private batch queues (by an
        /// owner whose queue filled while nobody watched, or by the last
        /// watcher leaving with private work about).
        watch_wakes,
        /// Sleeps this worker made as a watcher (each at most a tick; the
        /// watch's cost in wake-ups, sched/watch.rs).
        watch_sleeps,
        /// Timers that fired on this worker.
        timers_fired,
        /// Tasks whose cooperative budget ran out and that yielded (their
        /// wake is deferred to after the next poller look).
        coop_yields,
        /// Task wakes made on threads outside the runtime (counted on
        /// `external`; async-io's own thread among them): placed near the
        /// task's previous worker.
        wakes_foreign,
        /// Of `wakes_foreign`, wakes made on the tokio bridge's thread while
        /// every worker slept, whose task the bridge polled itself
        /// (`Builder::tokio_compat`: tokio_compat.rs).
        bridge_polls,
        /// Wakes whose chosen idle worker was parked while another wake was
        /// in flight: queued on the waker's deque instead of a second
        /// futex wake.
        wake_deferred,
        /// Load publishes done (one per group counter written).
        load_publishes,
        /// Load publishes held back by the interval.
        load_skipped_interval,
        /// Load publishes held back by the 1/64 delta rule.
        load_skipped_delta,
        /// External spawns placed on an idle worker by `find_idlest_group`.
        spawn_placed_idle,
        /// External spawns placed on the least loaded worker (none idle).
        spawn_placed_loaded,
        /// Wakes placed on the waker's own worker through the LIFO slot by
        /// wake placement (the waker had nothing else queued, or the search
        /// chose it).
        wake_local,
        /// Wakes placed without a search because no worker could be found:
        /// none idle in the LLC of the waker (or, from outside, of the
        /// task's previous worker) and the previous worker not idle, read
        /// in one load of the idle mask per 64 workers. From a worker: its
        /// LIFO slot (tokio's `schedule_local`); from outside: the previous
        /// worker's inbox. Not counted in `wake_local`.
        wake_none_idle,
        /// select_idle_sibling: target was idle.
        sis_target,
        /// select_idle_sibling: prev was idle.
        sis_prev,
        /// select_idle_sibling: the recently used worker was idle.
        sis_recent_hit,
        /// select_idle_sibling: the recently used worker was not usable.
        sis_recent_miss,
        /// select_idle_sibling: a whole idle core was found.
        sis_idle_core,
        /// select_idle_sibling: no idle core, but an idle worker seen on the way.
        sis_idle_candidate,
        /// select_idle_sibling: the LLC scan found an idle worker.
        sis_scan_found,
        /// select_idle_sibling: workers examined by the LLC scan.
        sis_scanned,
        /// select_idle_sibling: nothing idle, fell back to target.
        sis_fallback,
        /// Tasks this worker took from the place queues of its domains
        /// (tasks spawned with a domain [`Place`](crate::Place)).
        placed_pulls,
        /// Polls on this worker of tasks placed on a worker
        /// ([`Place::Worker`](crate::Place::Worker), `Place::Here`).
        placed_polls_worker,
        /// Polls on this worker of tasks placed on a core.
        placed_polls_core,
        /// Polls on this worker of tasks placed on an LLC.
        placed_polls_llc,
        /// Polls on this worker of tasks placed on a NUMA node.
        placed_polls_numa,
        /// Polls on this worker of tasks placed on a package.
        placed_polls_package,
        /// Polls on this worker of placed tasks whose place does not hold
        /// this worker: always zero (each poll is checked).
        placed_polls_off,
        /// Idle governor: spins started.
        spins,
        /// Spins that ended with work.
        spin_hits,
        /// Nanoseconds spent in spins that ended with work.
        spin_hit_ns,
        /// Spins that gave up and parked.
        spin_gave_up,
        /// Nanoseconds spent spinning in all.
        spin_ns,
        /// Current avg_idle in nanoseconds (a gauge).
        avg_idle_ns,
    }
    levels {
        /// Walk levels cut short by the cost bound (avg_idle < cost), per level.
        walk_cut,
        /// Walk levels tried, per level.
        walk_tried,
        /// Successful steals per level.
        walk_success,
        /// Tasks moved by steals per level.
        walk_moved,
        /// Current max_cost per level in nanoseconds (a gauge).
        max_cost_ns,
    }
}

impl WorkerCounters {
    /// Adds `n` to a counter owned by this thread (no RMW).
    #[inline]
    pub(crate) fn bump(c: &AtomicU64, n: u64) {
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Adds `n` to a counter shared by several threads.
    #[inline]
    pub(crate) fn bump_shared(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// Sets a gauge.
    #[inline]
    pub(crate) fn set(c: &AtomicU64, v: u64) {
        c.store(v, Ordering::Relaxed);
    }
}

/// A snapshot of the runtime's counters: [`Runtime::stats`](crate::Runtime::stats).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Per worker, in worker order.
    pub workers: Vec<WorkerStats>,
    /// Per worker, in worker order, the poll timing (poll durations,
    /// run-queue delays, long polls), with
    /// [`Builder::poll_timing`](crate::Builder::poll_timing) on; empty
    /// otherwise.
    pub timing: Vec<crate::timing::PollTiming>,
    /// Work done by threads outside the runtime (external wakes, spawns).
    pub external: WorkerStats,
    /// Level names of worker 0, smallest first (for the per-level columns).
    pub level_names: Vec<&'static str>,
    /// Level names of each worker, smallest first, where workers' chains
    /// differ (a hybrid machine: SMT on the big cores, clusters on the
    /// little ones; the kernel's NUMA levels, one per distance that adds
    /// workers to that node's span); empty when every worker's are
    /// `level_names`. The per-level table names row `i` by every name found
    /// at position `i` (`SMT/cluster`).
    pub worker_level_names: Vec<Vec<&'static str>>,
    /// The park/unpark cost the idle governor uses (measured at start-up
    /// under [`IdleMode::Governed`](crate::IdleMode::Governed), or
    /// `Tunables::park_cost`); zero when neither applies.
    pub park_cost: Duration,
    /// Tasks spawned so far.
    pub spawned: u64,
    /// Tasks that have finished or been dropped so far.
    pub retired: u64,
    /// Workers asleep (or committed to sleeping) at the snapshot, from the
    /// wake protocol's count (sched/sleepers.rs).
    pub asleep: usize,
    /// Workers searching for work to steal at the snapshot.
    pub searching: usize,
    /// Threads of the blocking pool (`spawn_blocking`) at the snapshot.
    pub blocking_threads: usize,
    /// Of those, the ones idle (waiting for a closure, until keep-alive).
    pub blocking_idle: usize,
    /// Whether the workers drive hwsched's I/O driver: I/O is on
    /// ([`Builder::enable_io`](crate::Builder::enable_io)) and the program
    /// has registered a socket or a timer with this runtime, which puts
    /// the driver (its descriptors opened by `build`) to use. Until then
    /// workers park on their condvars.
    pub io_driven: bool,
    /// The driver's pollers (0 before it is in use).
    pub io_pollers: usize,
    /// Readiness events the pollers dispatched.
    pub io_events: u64,
    /// Writes to the pollers' eventfds: wakes of a worker sleeping in
    /// `epoll_wait`.
    pub io_waker_writes: u64,
    /// Sockets registered with the pollers.
    pub io_registered: u64,
    /// Sockets moved to another poller because their task moved there
    /// (several pollers only).
    pub io_rehomed: u64,
}

impl Stats {
    /// A snapshot assembled from counters kept elsewhere: per-worker
    /// counters (in worker order), the outside threads' block, and the level
    /// names of worker 0, smallest first (as [`Level::kind`]'s
    /// [`name`](crate::LevelKind::name)). `spawned` and `retired` are the
    /// sums of the blocks' counters; the gauges of the moment
    /// (`park_cost`, `asleep`, `searching`, the blocking pool) are zero
    /// (`io_driven` false), and
    /// the fields are public to set them.
    ///
    /// For code that keeps hwsched's counters itself and wants the same
    /// table: a simulator driving [`policy`](crate::policy) (`hwsched-sim`
    /// prints its runs with it), a test, or a sum of several runtimes'
    /// snapshots.
    ///
    /// [`Level::kind`]: crate::Level::kind
    ///
    /// ```
    /// use hwsched::{Stats, WorkerStats};
    /// let mut w = WorkerStats::default();
    /// w.polls = 10;
    /// w.walk_tried[0] = 3;
    /// let s = Stats::new(vec![w.clone(), w], WorkerStats::default(), vec!["LLC", "machine"]);
    /// assert_eq!(s.total().polls, 20);
    /// assert!(s.to_string().contains("idle balance: "));
    /// ```
    pub fn new(
        workers: Vec<WorkerStats>,
        external: WorkerStats,
        level_names: Vec<&'static str>,
    ) -> Stats {
        let spawned = workers.iter().map(|w| w.spawned).sum::<u64>() + external.spawned;
        let retired = workers.iter().map(|w| w.retired).sum::<u64>() + external.retired;
        Stats {
            workers,
            external,
            level_names,
            worker_level_names: Vec::new(),
            park_cost: Duration::ZERO,
            spawned,
            retired,
            asleep: 0,
            searching: 0,
            blocking_threads: 0,
            blocking_idle: 0,
            io_driven: false,
            io_pollers: 0,
            io_events: 0,
            io_waker_writes: 0,
            io_registered: 0,
            io_rehomed: 0,
            timing: Vec::new(),
        }
    }

    /// The per-level table's row names: at each position, the distinct
    /// names of the workers' levels there, in worker order, joined by `/`;
    /// one row per counter slot at most (the last names every level past
    /// it).
    pub fn row_names(&self) -> Vec<String> {
        let chains: Vec<&[&'static str]> = if self.worker_level_names.is_empty() {
            vec![&self.level_names]
        } else {
            self.worker_level_names.iter().map(Vec::as_slice).collect()
        };
        let rows = chains
            .iter()
            .map(|c| c.len())
            .max()
            .unwrap_or(0)
            .min(MAX_LEVELS);
        (0..rows)
            .map(|i| {
                let mut names: Vec<&str> = Vec::new();
                for c in &chains {
                    let here = if i + 1 == MAX_LEVELS {
                        &c[i.min(c.len())..]
                    } else {
                        c.get(i..=i).unwrap_or(&[])
                    };
                    for n in here {
                        if !names.contains(n) {
                            names.push(n);
                        }
                    }
                }
                names.join("/")
            })
            .collect()
    }

    /// Sum over workers and external threads.
    pub fn total(&self) -> WorkerStats {
        self.workers
            .iter()
            .fold(self.external.clone(), |acc, w| acc + w)
    }
}

fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.2}", a as f64 / b as f64)
    }
}

fn pct(a: u64, b: u64) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * a as f64 / b as f64)
    }
}

/// The poll-timing table: per worker and in all, poll time and run-queue
/// delay (p50, p99, max) and long polls.
fn write_timing(f: &mut fmt::Formatter<'_>, timing: &[crate::timing::PollTiming]) -> fmt::Result {
    fn us(d: Duration) -> String {
        format!("{:.1}us", d.as_secs_f64() * 1e6)
    }
    writeln!(
        f,
        "{:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6}",
        "timing",
        "polls",
        "poll p50",
        "poll p99",
        "poll max",
        "delay p50",
        "delay p99",
        "delay max",
        "long"
    )?;
    let mut all = crate::timing::PollTiming::default();
    let row = |f: &mut fmt::Formatter<'_>, name: &str, t: &crate::timing::PollTiming| {
        writeln!(
            f,
            "{:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6}",
            name,
            t.poll_time.count(),
            us(t.poll_time.percentile(0.5)),
            us(t.poll_time.percentile(0.99)),
            us(t.poll_time.max),
            us(t.run_delay.percentile(0.5)),
            us(t.run_delay.percentile(0.99)),
            us(t.run_delay.max),
            t.long_polls,
        )
    };
    for (i, t) in timing.iter().enumerate() {
        row(f, &i.to_string(), t)?;
        all.merge(t);
    }
    row(f, "all", &all)
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.total();
        writeln!(
            f,
            "hwsched stats: {} workers ({} asleep, {} searching now), {} tasks spawned, {} \
             retired, park cost {}",
            self.workers.len(),
            self.asleep,
            self.searching,
            self.spawned,
            self.retired,
            if self.park_cost.is_zero() {
                "not measured (only IdleMode::Governed measures it)".to_owned()
            } else {
                format!("{:.1} us", self.park_cost.as_secs_f64() * 1e6)
            }
        )?;
        writeln!(
            f,
            "{:>6} {:>10} {:>9} {:>8} {:>9} {:>9} {:>8} {:>8} {:>8} {:>7} {:>7} {:>10}",
            "worker",
            "polls",
            "lifo",
            "inbox",
            "steals",
            "stolen",
            "parks",
            "unparks",
            "walks",
            "wakes",
            "spins",
            "avg_idle"
        )?;
        let row =
            |f: &mut fmt::Formatter<'_>, name: &str, w: &WorkerStats, gauge: bool| {
                writeln!(
                f,
                "{:>6} {:>10} {:>9} {:>8} {:>4}/{:<4} {:>9} {:>8} {:>8} {:>8} {:>7} {:>7} {:>10}",
                name,
                w.polls,
                w.lifo_polls,
                w.inbox_pulls,
                w.steals_succeeded,
                w.steals_attempted,
                w.tasks_stolen,
                w.parks,
                w.unparks,
                w.walks,
                w.searcher_wakes,
                w.spins,
                if gauge { format!("{:.1}us", w.avg_idle_ns as f64 / 1e3) } else { "".into() }
            )
            };
        for (i, w) in self.workers.iter().enumerate() {
            row(f, &i.to_string(), w, true)?;
        }
        row(f, "ext", &self.external, false)?;
        row(f, "total", &t, false)?;
        writeln!(
            f,
            "idle balance: {} walks, {} skipped (nothing queued), steal success {}",
            t.walks,
            t.walks_skipped,
            pct(t.steals_succeeded, t.steals_attempted)
        )?;
        let per = |a: u64, b: u64| {
            if b == 0 {
                "-".to_owned()
            } else {
                format!("{:.2}", a as f64 / b as f64)
            }
        };
        writeln!(
            f,
            "wake protocol: {} searcher wakes, {} wakes deferred (one in flight), {} park \
             re-checks; per walk {} workers touched, {} queued-set words read",
            t.searcher_wakes,
            t.wake_deferred,
            t.park_rechecks,
            per(t.walk_touched, t.walks),
            per(t.recheck_words, t.walks + t.park_rechecks),
        )?;
        writeln!(
            f,
            "wakes by origin: {} from a task on a worker, {} from the I/O driver on a worker \
             (kept on it), {} from other threads{}",
            t.wakes_by_task,
            t.wakes_by_driver,
            t.wakes_foreign,
            if t.bridge_polls > 0 {
                format!(" ({} polled on the tokio bridge's thread)", t.bridge_polls)
            } else {
                String::new()
            },
        )?;
        if self.io_driven {
            writeln!(
                f,
                "I/O driver: {} poller(s), {} sockets registered ({} moved), {} readiness events in {} turns \
                 ({} with wakes, {} tasks per such batch, {} searcher wakes after batches, {} tasks \
                 taken by a watcher ({} behind a long poll), {} releases before a hog's poll, {} watcher wakes, {} watcher sleeps), {} \
                 waker writes, {} timers fired, {} cooperative yields",
                self.io_pollers,
                self.io_registered,
                self.io_rehomed,
                self.io_events,
                t.driver_turns,
                t.driver_batches,
                ratio(t.wakes_by_driver, t.driver_batches),
                t.batch_wakes,
                t.batch_rescued,
                t.long_poll_rescued,
                t.hog_releases,
                t.watch_wakes,
                t.watch_sleeps,
                self.io_waker_writes,
                t.timers_fired,
                t.coop_yields,
            )?;
        }
        let placed_polls = t.placed_polls_worker
            + t.placed_polls_core
            + t.placed_polls_llc
            + t.placed_polls_numa
            + t.placed_polls_package;
        if placed_polls > 0 {
            writeln!(
                f,
                "placed tasks: {} polls (worker {}, core {}, LLC {}, node {}, package {}), {} off \
                 their place; {} taken from place queues",
                placed_polls,
                t.placed_polls_worker,
                t.placed_polls_core,
                t.placed_polls_llc,
                t.placed_polls_numa,
                t.placed_polls_package,
                t.placed_polls_off,
                t.placed_pulls,
            )?;
        }
        if !self.timing.is_empty() {
            write_timing(f, &self.timing)?;
        }
        writeln!(
            f,
            "{:>8} {:>9} {:>9} {:>9} {:>9} {:>12}",
            "level", "tried", "cut", "success", "moved", "max_cost w0"
        )?;
        for (i, name) in self.row_names().iter().enumerate() {
            let mc = self.workers.first().map(|w| w.max_cost_ns[i]).unwrap_or(0);
            writeln!(
                f,
                "{:>8} {:>9} {:>9} {:>9} {:>9} {:>10.1}us",
                name,
                t.walk_tried[i],
                t.walk_cut[i],
                t.walk_success[i],
                t.walk_moved[i],
                mc as f64 / 1e3
            )?;
        }
        let placed = t.sis_target
            + t.sis_prev
            + t.sis_recent_hit
            + t.sis_idle_core
            + t.sis_idle_candidate
            + t.sis_scan_found
            + t.sis_fallback;
        writeln!(
            f,
            "wake placement (select_idle_sibling): {} placed, {} local (LIFO), {} with nobody \
             idle to find (no search), {} taken from a busy worker's LIFO slot",
            placed, t.wake_local, t.wake_none_idle, t.lifo_steals
        )?;
        writeln!(
            f,
            "  target {}  prev {}  recent hit {} miss {} (hit rate {})  idle core {}  idle candidate {}",
            t.sis_target,
            t.sis_prev,
            t.sis_recent_hit,
            t.sis_recent_miss,
            pct(t.sis_recent_hit, t.sis_recent_hit + t.sis_recent_miss),
            t.sis_idle_core,
            t.sis_idle_candidate
        )?;
        writeln!(
            f,
            "  scan found {}  scanned {}  search efficiency (scanned/found) {}  fallback {}  success {}",
            t.sis_scan_found,
            t.sis_scanned,
            ratio(t.sis_scanned, t.sis_scan_found),
            t.sis_fallback,
            pct(placed - t.sis_fallback, placed)
        )?;
        writeln!(
            f,
            "  idle-mask words read per placed wake {} (the scan reads words, not workers)",
            if placed == 0 {
                "-".to_owned()
            } else {
                format!("{:.2}", t.sis_words as f64 / placed as f64)
            }
        )?;
        writeln!(
            f,
            "load counters: {} publishes, {} held by interval, {} held by delta; external spawns: {} idle, {} least-loaded",
            t.load_publishes,
            t.load_skipped_interval,
            t.load_skipped_delta,
            t.spawn_placed_idle,
            t.spawn_placed_loaded
        )?;
        writeln!(
            f,
            "idle governor: {} spins, {} hit (avg {:.1} us), {} gave up, {:.3} ms spinning in all",
            t.spins,
            t.spin_hits,
            if t.spin_hits == 0 {
                0.0
            } else {
                t.spin_hit_ns as f64 / t.spin_hits as f64 / 1e3
            },
            t.spin_gave_up,
            t.spin_ns as f64 / 1e6
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_name_every_workers_level() {
        let w = WorkerStats::default;
        let mut s = Stats::new(vec![w(), w(), w()], w(), vec!["SMT", "machine"]);
        // One chain: worker 0's names.
        assert_eq!(s.row_names(), ["SMT", "machine"]);
        // A hybrid: SMT on the big cores, a cluster on the little ones.
        s.worker_level_names = vec![
            vec!["SMT", "machine"],
            vec!["SMT", "machine"],
            vec!["cluster", "machine"],
        ];
        assert_eq!(s.row_names(), ["SMT/cluster", "machine"]);
        let text = s.to_string();
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with("SMT/cluster")),
            "{text}"
        );
        // Chains of different lengths; past the last slot, one row.
        s.worker_level_names = vec![
            vec!["LLC", "NUMA group 1", "machine"],
            vec!["LLC", "machine"],
            (0..MAX_LEVELS + 2).map(|_| "NUMA group").collect(),
        ];
        let rows = s.row_names();
        assert_eq!(rows.len(), MAX_LEVELS);
        assert_eq!(rows[0], "LLC/NUMA group");
        assert_eq!(rows[1], "NUMA group 1/machine/NUMA group");
        assert_eq!(rows[2], "machine/NUMA group");
    }
}
