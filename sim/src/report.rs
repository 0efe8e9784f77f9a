//! What a run reports: throughput, wake latency, CPU by purpose, the
//! work-conservation metric, migrations by level, and hwsched's own
//! [`Stats`] of the run, printed with the runtime's table.

use std::fmt;

use hwsched::{Stats, WorkerStats};

use crate::cost::Tier;
use crate::sim::IoCounters;

/// The result of one simulation.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The workload and its parameters.
    pub workload: String,
    /// What one operation is.
    pub op_name: &'static str,
    /// The topology's description.
    pub topology: String,
    /// Number of workers.
    pub workers: usize,
    /// The policy and its tunables.
    pub policy: String,
    /// The cost model's name.
    pub cost: String,
    /// The seed.
    pub seed: u64,
    /// Time of the last task's end (ns).
    pub makespan_ns: u64,
    /// Operations completed.
    pub ops: u64,
    /// Tasks created.
    pub tasks: usize,
    /// Tasks not finished when the simulation ended (0 unless the time
    /// limit cut it).
    pub unfinished: usize,
    /// Worker time running the tasks' own work (ns, all workers).
    pub work_ns: u64,
    /// Worker time lost to cold caches after migrations (ns).
    pub warmth_ns: u64,
    /// Worker time lost to runs off their task's home node: the
    /// workload's [`Home::remote_pct`] of their work (ns).
    ///
    /// [`Home::remote_pct`]: crate::workload::Home::remote_pct
    pub remote_ns: u64,
    /// Runs of tasks that have a home node ([`Workload::home`]).
    ///
    /// [`Workload::home`]: crate::workload::Workload::home
    pub homed_runs: u64,
    /// Of those, runs on a worker of another node than the task's home.
    pub remote_runs: u64,
    /// Runs on a worker of another NUMA node than the task's previous run.
    pub cross_node_migrations: u64,
    /// Whether tasks were placed on their home node (`Config::places`).
    pub places: bool,
    /// With places: the integral over time of, per node, min(its idle
    /// workers, its place queue's length): worker-nanoseconds a worker was
    /// idle while a task of its own node waited (work conservation inside
    /// the places; `idle_while_queued_ns` also counts the other nodes'
    /// idle workers, which may not take those tasks).
    pub idle_while_place_queued_ns: u128,
    /// Worker time in scheduler code: polls, queue operations, placement,
    /// walks, load publishes, futex wakes and parks (ns).
    pub sched_ns: u64,
    /// Worker time spinning (ns).
    pub spin_ns: u64,
    /// CPU that threads outside the runtime spent in its code when they
    /// spawned or woke tasks: placement, delivery and futex wakes (ns).
    pub external_ns: u64,
    /// Median time from a task becoming runnable to running (ns).
    pub wake_p50_ns: u64,
    /// 99th percentile of the same (ns).
    pub wake_p99_ns: u64,
    /// Largest of the same (ns).
    pub wake_max_ns: u64,
    /// How many runnable-to-running intervals were measured.
    pub wakes_measured: usize,
    /// Integral over time of min(idle workers, stealable queued tasks):
    /// worker-nanoseconds a worker was idle while a task it could have
    /// taken waited (the LIFO slot excluded, as the invariant does).
    pub idle_while_queued_ns: u128,
    /// Task migrations (ran on another worker than last time), per
    /// [`Tier`].
    pub migrations: [u64; 6],
    /// For a workload whose operations arrive from outside (`io`): the
    /// median time from an operation's arrival to the start of the run that
    /// handled it (ns); 0 otherwise.
    pub op_p50_ns: u64,
    /// 99th percentile of the same (ns).
    pub op_p99_ns: u64,
    /// Largest of the same (ns).
    pub op_max_ns: u64,
    /// What the I/O driver did, when the workload used sockets.
    pub io: Option<IoCounters>,
    /// hwsched's counters of the run, as [`Runtime::stats`] gives them for
    /// a real run: per worker, outside threads' block, the gauges, and the
    /// level names (the simulator keeps the runtime's counters, bumped by
    /// the simulated thread the runtime bumps them on).
    ///
    /// [`Runtime::stats`]: hwsched::Runtime::stats
    pub stats: Stats,
    /// `stats.total()`: the sum over workers and outside threads.
    pub counters: WorkerStats,
}

impl Report {
    /// Operations per second of virtual time.
    pub fn throughput(&self) -> f64 {
        if self.makespan_ns == 0 {
            0.0
        } else {
            self.ops as f64 * 1e9 / self.makespan_ns as f64
        }
    }

    /// Worker time available: workers x makespan (ns).
    pub fn capacity_ns(&self) -> u64 {
        self.workers as u64 * self.makespan_ns
    }

    /// One markdown table row: label, makespan (ms), throughput (ops/s),
    /// wake latency p50 and p99 (us), scheduling CPU per work CPU,
    /// idle-while-queued as a share of capacity, and migrations that left
    /// the LLC (node, package and remote tiers).
    pub fn row(&self, label: &str) -> String {
        let cross: u64 = self.migrations[Tier::Node.index()..].iter().sum();
        format!(
            "| {} | {:.3} | {:.0} | {:.1} | {:.1} | {} | {} | {} |",
            label,
            self.makespan_ns as f64 / 1e6,
            self.throughput(),
            self.wake_p50_ns as f64 / 1e3,
            self.wake_p99_ns as f64 / 1e3,
            pct(self.sched_ns, self.work_ns),
            pct(
                self.idle_while_queued_ns.min(u128::from(u64::MAX)) as u64,
                self.capacity_ns()
            ),
            cross
        )
    }

    /// One markdown row for an I/O run: label, pollers, requests/s
    /// sustained, request latency (arrival to running) p50 and p99 (us),
    /// the busiest poller's utilization and the mean over pollers, events
    /// per `epoll_wait`, events whose task had last run in another LLC,
    /// searcher wakes across LLCs, migrations that left the LLC.
    pub fn io_row(&self, label: &str) -> String {
        let io = self.io.unwrap_or_default();
        let cross: u64 = self.migrations[Tier::Node.index()..].iter().sum();
        let turns = io.turns_woken + io.turns_busy;
        format!(
            "| {} | {} | {:.0} | {:.1} | {:.1} | {} | {} | {:.1} | {} | {} | {} |",
            label,
            io.pollers,
            self.throughput(),
            self.op_p50_ns as f64 / 1e3,
            self.op_p99_ns as f64 / 1e3,
            pct(io.busy_max_ns, self.makespan_ns),
            pct(io.busy_sum_ns, self.makespan_ns * io.pollers.max(1) as u64),
            io.events as f64 / turns.max(1) as f64,
            pct(io.events_cross_llc, io.events),
            io.searcher_wakes_cross_llc,
            cross
        )
    }

    /// One markdown row for a workload whose tasks have a home node
    /// (`shards`): label, makespan (ms), idle-while-queued as a share of
    /// capacity, the same inside the places (with places on; `-` off), runs
    /// off their home node (of all runs), cross-node
    /// migrations, the time those remote runs cost (ms, all workers), and
    /// scheduling CPU per work CPU.
    pub fn numa_row(&self, label: &str) -> String {
        format!(
            "| {} | {:.3} | {} | {} | {} of {} | {} | {:.3} | {} |",
            label,
            self.makespan_ns as f64 / 1e6,
            pct(
                self.idle_while_queued_ns.min(u128::from(u64::MAX)) as u64,
                self.capacity_ns()
            ),
            if self.places {
                pct(
                    self.idle_while_place_queued_ns.min(u128::from(u64::MAX)) as u64,
                    self.capacity_ns(),
                )
            } else {
                "-".into()
            },
            self.remote_runs,
            self.homed_runs,
            self.cross_node_migrations,
            self.remote_ns as f64 / 1e6,
            pct(self.sched_ns, self.work_ns)
        )
    }

    /// All CPU spent (work, warmth, remote memory, scheduling, spin, and
    /// outside threads' spawns and wakes) per operation, in ns: what
    /// `benches/light_load.rs` reports as CPU per message.
    pub fn cpu_per_op_ns(&self) -> f64 {
        (self.work_ns
            + self.warmth_ns
            + self.remote_ns
            + self.sched_ns
            + self.spin_ns
            + self.external_ns) as f64
            / self.ops.max(1) as f64
    }

    /// Total migrations.
    pub fn total_migrations(&self) -> u64 {
        self.migrations.iter().sum()
    }
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn pct(a: u64, b: u64) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * a as f64 / b as f64)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cap = self.capacity_ns();
        writeln!(f, "workload:   {}", self.workload)?;
        writeln!(
            f,
            "topology:   {} ({} workers)",
            self.topology, self.workers
        )?;
        writeln!(f, "policy:     {}", self.policy)?;
        writeln!(f, "cost model: {}, seed {}", self.cost, self.seed)?;
        writeln!(
            f,
            "makespan:   {} for {} {}s ({} tasks, {} unfinished): {:.0} {}s/s",
            ms(self.makespan_ns),
            self.ops,
            self.op_name,
            self.tasks,
            self.unfinished,
            self.throughput(),
            self.op_name
        )?;
        writeln!(
            f,
            "wake latency (runnable -> running): p50 {} ns, p99 {} ns, max {} ns ({} measured)",
            self.wake_p50_ns, self.wake_p99_ns, self.wake_max_ns, self.wakes_measured
        )?;
        let idle = cap.saturating_sub(
            self.work_ns + self.warmth_ns + self.remote_ns + self.sched_ns + self.spin_ns,
        );
        writeln!(
            f,
            "worker time: work {} ({}), cache warmth {} ({}), scheduling {} ({}), spin {} ({}), idle {} ({})",
            ms(self.work_ns),
            pct(self.work_ns, cap),
            ms(self.warmth_ns),
            pct(self.warmth_ns, cap),
            ms(self.sched_ns),
            pct(self.sched_ns, cap),
            ms(self.spin_ns),
            pct(self.spin_ns, cap),
            ms(idle),
            pct(idle, cap)
        )?;
        if self.homed_runs > 0 {
            writeln!(
                f,
                "home nodes ({}): {} of {} runs off their task's home node, costing {} ({}); {} cross-node migrations",
                if self.places {
                    format!(
                        "places on, idle while its own node's work queued: {}",
                        ms(self.idle_while_place_queued_ns.min(u128::from(u64::MAX)) as u64)
                    )
                } else {
                    "places off".to_string()
                },
                self.remote_runs,
                self.homed_runs,
                ms(self.remote_ns),
                pct(self.remote_ns, cap),
                self.cross_node_migrations
            )?;
        }
        writeln!(
            f,
            "scheduling CPU per work CPU: {} (spin included: {})",
            pct(self.sched_ns, self.work_ns),
            pct(self.sched_ns + self.spin_ns, self.work_ns)
        )?;
        if self.external_ns > 0 {
            writeln!(
                f,
                "outside threads' CPU in spawns and wakes: {} ({:.2} us per {})",
                ms(self.external_ns),
                self.external_ns as f64 / 1e3 / self.ops.max(1) as f64,
                self.op_name
            )?;
        }
        writeln!(
            f,
            "CPU per {} (work + scheduling + spin + outside threads): {:.2} us",
            self.op_name,
            self.cpu_per_op_ns() / 1e3
        )?;
        writeln!(
            f,
            "idle while work queued: {} worker-time ({} of capacity)",
            ms(self.idle_while_queued_ns.min(u128::from(u64::MAX)) as u64),
            pct(
                self.idle_while_queued_ns.min(u128::from(u64::MAX)) as u64,
                cap
            )
        )?;
        if let Some(io) = &self.io {
            let turns = io.turns_woken + io.turns_busy;
            writeln!(
                f,
                "requests: latency (arrival -> running) p50 {} ns, p99 {} ns, max {} ns",
                self.op_p50_ns, self.op_p99_ns, self.op_max_ns
            )?;
            writeln!(
                f,
                "I/O driver: {} pollers, busy (epoll instance) max {} mean {}; {} readiness callbacks, {} epoll_wait ({} by busy workers), {:.1} events each",
                io.pollers,
                pct(io.busy_max_ns, self.makespan_ns),
                pct(io.busy_sum_ns, self.makespan_ns * io.pollers.max(1) as u64),
                io.callbacks,
                turns,
                io.turns_busy,
                io.events as f64 / turns.max(1) as f64
            )?;
            writeln!(
                f,
                "I/O wakes: {} events, {} of them to a task last run in another LLC; {} searcher wakes ({} after a batch, {} across LLCs); {} sleeps in a poller, {} on the thread; {} wakes by events, {} eventfd writes; {} sockets moved",
                io.events,
                io.events_cross_llc,
                io.searcher_wakes,
                io.batch_wakes,
                io.searcher_wakes_cross_llc,
                io.sleeps_in_poller,
                io.sleeps_on_thread,
                io.poller_wakes,
                io.eventfd_writes,
                io.rehomed
            )?;
        }
        write!(f, "migrations:")?;
        for t in Tier::ALL.iter().skip(1) {
            write!(f, " {} {}", t.name(), self.migrations[t.index()])?;
        }
        writeln!(f, " (total {})", self.total_migrations())?;
        // The runtime's own table (stats.rs `Display`), from the same
        // counters: per worker, per level, wake placement, load counters,
        // governor.
        write!(f, "{}", self.stats)
    }
}
