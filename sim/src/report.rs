//! What a run reports: throughput, wake latency, CPU by purpose, the
//! work-conservation metric, migrations by level, and hwsched's own
//! [`Stats`] of the run, printed with the runtime's table.

use std::fmt;

use hwsched::{Stats, WorkerStats};

use crate::cost::Tier;

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

    /// All CPU spent (work, warmth, scheduling, spin, and outside threads'
    /// spawns and wakes) per operation, in ns: what `benches/light_load.rs`
    /// reports as CPU per message.
    pub fn cpu_per_op_ns(&self) -> f64 {
        (self.work_ns + self.warmth_ns + self.sched_ns + self.spin_ns + self.external_ns) as f64
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
        let idle = cap.saturating_sub(self.work_ns + self.warmth_ns + self.sched_ns + self.spin_ns);
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
