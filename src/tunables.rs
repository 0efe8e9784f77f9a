//! Knobs for every heuristic, so each can be measured by ablation.

use std::time::Duration;

use crate::error::BuildError;

/// How an idle worker looks for work (see [`BalanceState`](crate::policy::BalanceState)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StealWalk {
    /// Level by level, nearest first, stopping when the next level's
    /// measured cost would exceed the expected idle time: the kernel's
    /// `newidle_balance()` with `max_newidle_lb_cost` against `avg_idle`
    /// (Peter Zijlstra's model at the end of seed 000).
    #[default]
    Bounded,
    /// Try every other worker once, as a classic work-stealing pool does
    /// (the kernel before `sysctl_sched_migration_cost` bounded it).
    Unbounded,
}

/// How deep the wakeup path scans the LLC for an idle worker (step 5 of
/// `select_idle_sibling`, see [`select_idle_sibling`](crate::policy::select_idle_sibling)).
///
/// `Prop` is the default provisionally: on the benchmarks' 2-core machine
/// no mode separated from the others beyond noise on hackbench, `Util`
/// scanned 5x fewer workers with better placement success on the 32-worker
/// synthetic topology, and ping_pong favoured the modes that find fewer idle
/// workers (BENCHMARKS.md, "Wakeup placement"). The choice between `Prop`
/// and `Util` needs a machine with real cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SisMode {
    /// `SIS_PROP` (seed 001): depth proportional to `avg_idle` over the
    /// waker's average scan cost, at least 4.
    #[default]
    Prop,
    /// `SIS_UTIL` (upstream since v6.0): depth from the LLC's busy fraction
    /// `u`: `llc_weight * (1 - (1.17 u)^2)`, nothing above ~85% busy.
    Util,
    /// Scan the whole LLC.
    Full,
    /// No scan: straight to target.
    Off,
}

/// What a worker does when it has no work and its walk found none (see
/// [`Governor`](crate::policy::Governor)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdleMode {
    /// Spin when the predicted idle time is below the park cost, else park:
    /// the cpuidle menu/teo governors' choice by target residency.
    Governed,
    /// Always park at once (what tokio and async-executor do).
    #[default]
    AlwaysPark,
    /// Spin this long, then park (a busy-poll runtime; for ablation).
    AlwaysSpin(Duration),
}

/// Scheduler tunables. `Default` is what the benches chose.
///
/// ```
/// use hwsched::{SisMode, Tunables};
/// let t = Tunables { sis: SisMode::Full, ..Default::default() };
/// assert_eq!(t.load_update_interval.as_millis(), 1);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Tunables {
    /// Minimum time between two publishes of a worker's load to the shared
    /// group counters: the kernel's once-per-ms limit in
    /// `update_tg_load_avg()` (seed 004). Zero publishes every change (for
    /// ablation). At most 1 s.
    pub load_update_interval: Duration,
    /// The floor and start of `max_idle_balance_cost`, and so of the
    /// expected idle time: the kernel's `sysctl_sched_migration_cost`
    /// (500 us there). Must be in 1 us ..= 100 ms.
    pub migration_cost: Duration,
    /// Bounded (default) or unbounded idle walk. The default is the one
    /// the simulator supports on large machines: at 25% light load the
    /// unbounded walk spends 1.4-2x the scheduling CPU on four real
    /// topologies (SIMULATION.md, finding 5).
    pub walk: StealWalk,
    /// LLC scan depth for wakeup placement. Default `Prop`: the simulator
    /// does not separate the modes beyond seed noise (SIMULATION.md,
    /// finding 4), so the kernel's default stays.
    pub sis: SisMode,
    /// Check the task's recently used worker on wakeup (seed 001 patch 3).
    pub sis_recent_used: bool,
    /// Search for a whole idle core when the LLC's `has_idle_cores` hint is
    /// set (the kernel's `select_idle_core`, seed 001 patch 4).
    pub sis_idle_core: bool,
    /// Idle state choice: spin or park. (In the simulator the governor
    /// almost never spins at a microsecond-scale park cost: SIMULATION.md,
    /// finding 6.)
    pub idle: IdleMode,
    /// Override the measured park/unpark round-trip cost used by
    /// [`IdleMode::Governed`]. At most 10 ms.
    pub park_cost: Option<Duration>,
    /// Most of the wall time a worker may spend spinning, in percent of the
    /// last period (the governor's cap). 1 ..= 100.
    pub spin_cap_percent: u32,
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            load_update_interval: Duration::from_millis(1),
            migration_cost: Duration::from_micros(500),
            walk: StealWalk::Bounded,
            sis: SisMode::Prop,
            sis_recent_used: true,
            sis_idle_core: true,
            idle: IdleMode::default(),
            park_cost: None,
            spin_cap_percent: 25,
        }
    }
}

fn bad(name: &'static str, value: impl std::fmt::Debug, expected: &'static str) -> BuildError {
    BuildError::InvalidTunable {
        name,
        value: format!("{value:?}"),
        expected,
    }
}

impl Tunables {
    /// Checks every field's range; the error names the field and its value.
    pub fn validate(&self) -> Result<(), BuildError> {
        if self.load_update_interval > Duration::from_secs(1) {
            return Err(bad(
                "load_update_interval",
                self.load_update_interval,
                "0 ..= 1s",
            ));
        }
        if self.migration_cost < Duration::from_micros(1)
            || self.migration_cost > Duration::from_millis(100)
        {
            return Err(bad("migration_cost", self.migration_cost, "1us ..= 100ms"));
        }
        if let Some(pc) = self.park_cost {
            if pc > Duration::from_millis(10) {
                return Err(bad("park_cost", pc, "0 ..= 10ms"));
            }
        }
        if let IdleMode::AlwaysSpin(d) = self.idle {
            if d.is_zero() || d > Duration::from_secs(1) {
                return Err(bad("idle", self.idle, "AlwaysSpin(d) with d in (0, 1s]"));
            }
        }
        if self.spin_cap_percent == 0 || self.spin_cap_percent > 100 {
            return Err(bad("spin_cap_percent", self.spin_cap_percent, "1 ..= 100"));
        }
        Ok(())
    }
}
