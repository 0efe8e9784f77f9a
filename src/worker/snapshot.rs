//! What the runtime reports of the state every worker shares: the
//! [`Stats`] snapshot (the type and its report are `stats.rs`'s, a leaf;
//! its building reads `Shared`, the topology, the wake protocol's counts,
//! the blocking pool and the driver, so it lives in the worker's layer)
//! and the long polls the workers logged.

use std::time::Duration;

use crate::stats::Stats;
use crate::sync::Ordering;
use crate::worker::shared::Shared;

impl Shared {
    /// Every worker's logged long polls, oldest first (timing.rs).
    pub(crate) fn long_polls(&self) -> Vec<crate::timing::LongPoll> {
        let mut all: Vec<_> = self
            .workers
            .iter()
            .flat_map(|w| w.timing.log.lock().iter().cloned().collect::<Vec<_>>())
            .collect();
        all.sort_by_key(|p| p.at);
        all
    }

    /// A snapshot of every counter (`Runtime::stats`, `Handle::stats`).
    pub(crate) fn stats(&self) -> Stats {
        let workers: Vec<_> = self.workers.iter().map(|w| w.stats.snapshot()).collect();
        let external = self.external.snapshot();
        let spawned = workers.iter().map(|w| w.spawned).sum::<u64>() + external.spawned;
        let retired = workers.iter().map(|w| w.retired).sum::<u64>()
            + self.registry.retired_elsewhere.load(Ordering::Relaxed);
        #[allow(unused_mut)]
        let mut stats = Stats {
            workers,
            external,
            level_names: self
                .topology
                .levels(0)
                .iter()
                .map(|l| l.kind.name())
                .collect(),
            worker_level_names: {
                let names: Vec<Vec<&'static str>> = (0..self.topology.workers())
                    .map(|w| {
                        self.topology
                            .levels(w)
                            .iter()
                            .map(|l| l.kind.name())
                            .collect()
                    })
                    .collect();
                if names.windows(2).all(|p| p[0] == p[1]) {
                    Vec::new()
                } else {
                    names
                }
            },
            park_cost: Duration::from_nanos(self.park_cost_ns.load(Ordering::Relaxed)),
            spawned,
            retired,
            asleep: self
                .workers
                .len()
                .saturating_sub(self.sleepers.counts().awake),
            searching: self.sleepers.counts().searching,
            blocking_threads: self.blocking.threads(),
            blocking_idle: self.blocking.idle_threads(),
            io_driven: false,
            io_pollers: 0,
            io_events: 0,
            io_waker_writes: 0,
            io_registered: 0,
            io_rehomed: 0,
            timing: if self.poll_timing {
                self.workers.iter().map(|w| w.timing.snapshot()).collect()
            } else {
                Vec::new()
            },
        };
        #[cfg(feature = "io")]
        if let Some(d) = self.driver.io.get() {
            stats.io_driven = true;
            stats.io_pollers = d.pollers.len();
            for p in d.pollers.iter() {
                let c = &p.counters;
                // Relaxed: statistics.
                stats.io_events += c.events.load(std::sync::atomic::Ordering::Relaxed);
                stats.io_waker_writes += c.waker_writes.load(std::sync::atomic::Ordering::Relaxed);
                stats.io_registered += c.registered.load(std::sync::atomic::Ordering::Relaxed);
                stats.io_rehomed += c.rehomed.load(std::sync::atomic::Ordering::Relaxed);
            }
        }
        stats
    }
}
