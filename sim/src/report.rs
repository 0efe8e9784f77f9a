//! What a run reports: throughput, wake latency, CPU by purpose, the
//! work-conservation metric, migrations by level, and schedstat-like
//! counters named as in hwsched's `Stats`.

use std::fmt;

use crate::cost::Tier;

/// Event counters, named after the runtime's `Stats` fields they mirror.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Tasks polled.
    pub polls: u64,
    /// Polls taken from the LIFO slot.
    pub lifo_polls: u64,
    /// Tasks taken from the inbox (or the tokio-like global queue).
    pub inbox_pulls: u64,
    /// Spawns from a worker (to its own deque).
    pub local_spawns: u64,
    /// External spawns placed on an idle worker.
    pub spawn_placed_idle: u64,
    /// External spawns placed by load (`find_idlest_group`) or on the
    /// burst's target.
    pub spawn_placed_loaded: u64,
    /// Wakes that went to the waker's own LIFO slot.
    pub wake_local: u64,
    /// Wakes whose chosen parked worker could not be woken (a wake in
    /// flight): queued on the waker.
    pub wake_deferred: u64,
    /// `select_idle_sibling` step 1.
    pub sis_target: u64,
    /// Step 2.
    pub sis_prev: u64,
    /// Step 3 hit.
    pub sis_recent_hit: u64,
    /// Step 3 miss.
    pub sis_recent_miss: u64,
    /// Step 4, a whole idle core.
    pub sis_idle_core: u64,
    /// Step 4, an idle worker seen on the way.
    pub sis_idle_candidate: u64,
    /// Step 5 found an idle worker.
    pub sis_scan_found: u64,
    /// Step 6, fell back to target.
    pub sis_fallback: u64,
    /// Workers examined by step 5.
    pub sis_scanned: u64,
    /// Idle-mask words read by step 5.
    pub sis_words: u64,
    /// Parked workers claimed and woken to search.
    pub searcher_wakes: u64,
    /// Futex wakes sent.
    pub unparks: u64,
    /// Sleeps that ended (a worker parked and was woken).
    pub parks: u64,
    /// Re-checks of a worker going to sleep with no searcher left.
    pub park_rechecks: u64,
    /// Idle walks started.
    pub walks: u64,
    /// Walks of a worker woken or kicked to search.
    pub woken_searching: u64,
    /// Walks skipped by the gate (nothing queued anywhere).
    pub walks_skipped: u64,
    /// Levels tried, per level (smallest first; the fifth counts the rest).
    pub walk_tried: [u64; 5],
    /// Walks cut short by the cost bound before this level.
    pub walk_cut: [u64; 5],
    /// Walks that found work at this level.
    pub walk_success: [u64; 5],
    /// Victim queues looked at by walks and re-checks.
    pub walk_touched: u64,
    /// Steal attempts (deque, then inbox, per victim).
    pub steals_attempted: u64,
    /// Successful steals.
    pub steals_succeeded: u64,
    /// Tasks moved by steals.
    pub tasks_stolen: u64,
    /// Spins started.
    pub spins: u64,
    /// Spins that ended with work.
    pub spin_hits: u64,
    /// Spins that ran out and parked.
    pub spin_gave_up: u64,
    /// Load counters written.
    pub load_publishes: u64,
}

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
    /// Event counters.
    pub counters: Counters,
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
        let c = &self.counters;
        writeln!(
            f,
            "polls {} (lifo {}, inbox pulls {}), local spawns {}, external spawns idle/loaded {}/{}",
            c.polls,
            c.lifo_polls,
            c.inbox_pulls,
            c.local_spawns,
            c.spawn_placed_idle,
            c.spawn_placed_loaded
        )?;
        writeln!(
            f,
            "wake placement: local {}, target {}, prev {}, recent hit/miss {}/{}, idle core {}, candidate {}, scan found {}, fallback {}, scanned {}, words {}, deferred {}",
            c.wake_local,
            c.sis_target,
            c.sis_prev,
            c.sis_recent_hit,
            c.sis_recent_miss,
            c.sis_idle_core,
            c.sis_idle_candidate,
            c.sis_scan_found,
            c.sis_fallback,
            c.sis_scanned,
            c.sis_words,
            c.wake_deferred
        )?;
        writeln!(
            f,
            "idle: walks {} (woken/kicked {}, skipped {}), tried/cut/success per level {:?}/{:?}/{:?}, touched {}",
            c.walks,
            c.woken_searching,
            c.walks_skipped,
            c.walk_tried,
            c.walk_cut,
            c.walk_success,
            c.walk_touched
        )?;
        writeln!(
            f,
            "steals: attempted {}, succeeded {}, tasks moved {}; searcher wakes {}, unparks {}, parks {}, park re-checks {}",
            c.steals_attempted,
            c.steals_succeeded,
            c.tasks_stolen,
            c.searcher_wakes,
            c.unparks,
            c.parks,
            c.park_rechecks
        )?;
        writeln!(
            f,
            "spins {} (hits {}, gave up {}), load counters written {}",
            c.spins, c.spin_hits, c.spin_gave_up, c.load_publishes
        )
    }
}
