//! The idle governor: spin or park, by predicted idle time against the cost
//! of parking.
//!
//! The kernel's cpuidle governors (menu, teo) choose an idle state by
//! comparing the predicted idle duration with each state's *target
//! residency*: the shortest stay for which entering the state pays for its
//! exit latency. A worker has two states:
//!
//! - **spin**: poll its own inbox and parker token; exit latency ~0, but it
//!   burns the CPU;
//! - **park**: sleep on a futex; free while asleep, but the wake-up costs a
//!   futex round trip (measured at start-up by the park module's `measure_park_cost`: on the
//!   2-core VM the benchmarks run on, about 26 us of CPU and 40 us of
//!   wall time; a few us on bare metal).
//!
//! The park's target residency is its cost, so [`Governor::choose`] spins
//! when the predicted idle time (the balance's `avg_idle`, the kernel's
//! `rq->avg_idle` that `newidle_balance` uses, an EWMA of recent idle
//! periods) is below the park cost; otherwise, or when the spin ends empty,
//! the worker parks. A spin lasts at most the park cost: the ski-rental
//! rule (keep renting until the rent paid equals the price of buying), which
//! costs at most twice what the best choice in hindsight would have, however
//! long the idle period turns out to be. (The prediction is a mean of a
//! noisy quantity: were the spin bounded by it, a prediction of ~0 would
//! spin too briefly to catch a reply already in flight, the worker would
//! park, and that would drive the prediction down further.)
//!
//! An idle period that ended in a park is sampled without the park's own
//! wake-up latency (the measured park cost): that latency is a cost of the
//! state chosen, not idleness of the workload (teo measures the sleep length
//! the same way). Left in, it would keep the prediction above the park cost
//! forever once a worker starts parking.
//!
//! # The cap
//!
//! A mispredicting workload must not turn the runtime into a busy loop:
//! - one spin lasts at most the park cost;
//! - over each 10 ms window a worker spins at most
//!   [`Tunables::spin_cap_percent`](crate::Tunables::spin_cap_percent)
//!   of the window; past it, it parks until the next window.
//!
//! So the worst case burns `spin_cap_percent`% of one CPU per worker, and a
//! spin never costs more than the park it tries to avoid.

use std::time::Duration;

use crate::tunables::IdleMode;

/// Length of the window over which the spin cap is measured.
pub const SPIN_WINDOW_NS: u64 = 10_000_000;

/// The shortest spin the governor chooses (when it spins at all).
pub const MIN_SPIN_NS: u64 = 2_000;

/// The governor's choice for one idle period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Spin until this time (ns on the worker's clock), then park.
    Spin {
        /// End of the spin.
        until_ns: u64,
    },
    /// Park now.
    Park,
}

/// Per-worker governor state. Pure: time comes in as arguments, so it is
/// tested with a fake clock.
#[derive(Debug, Clone)]
pub struct Governor {
    mode: IdleMode,
    park_cost_ns: u64,
    cap_ns: u64,
    window_start_ns: u64,
    spun_in_window_ns: u64,
}

impl Governor {
    /// A governor for `mode` with the given park cost and cap (percent of
    /// each window).
    pub fn new(mode: IdleMode, park_cost: Duration, cap_percent: u32) -> Self {
        Governor {
            mode,
            park_cost_ns: park_cost.as_nanos() as u64,
            cap_ns: SPIN_WINDOW_NS * u64::from(cap_percent.min(100)) / 100,
            window_start_ns: 0,
            spun_in_window_ns: 0,
        }
    }

    /// Chooses spin or park at `now_ns` for a predicted idle of
    /// `predicted_ns`.
    pub fn choose(&mut self, now_ns: u64, predicted_ns: u64) -> Choice {
        if now_ns.saturating_sub(self.window_start_ns) >= SPIN_WINDOW_NS {
            self.window_start_ns = now_ns;
            self.spun_in_window_ns = 0;
        }
        let budget_left = self.cap_ns.saturating_sub(self.spun_in_window_ns);
        let want = match self.mode {
            IdleMode::AlwaysPark => return Choice::Park,
            IdleMode::AlwaysSpin(d) => d.as_nanos() as u64,
            IdleMode::Governed => {
                if predicted_ns >= self.park_cost_ns {
                    return Choice::Park;
                }
                // Spin for as long as a park costs, then park: the ski-rental
                // rule (rent until the rent paid equals the price), which
                // never pays more than twice the best choice in hindsight,
                // whatever the idle period turns out to be. The prediction
                // decides whether to rent at all.
                self.park_cost_ns.max(MIN_SPIN_NS)
            }
        };
        let spin = want.min(budget_left);
        if spin == 0 {
            Choice::Park
        } else {
            Choice::Spin {
                until_ns: now_ns + spin,
            }
        }
    }

    /// Records a spin of `spun_ns` (whether or not it found work).
    pub fn record_spin(&mut self, spun_ns: u64) {
        self.spun_in_window_ns += spun_ns;
    }

    /// Nanoseconds spun in the current window.
    pub fn spun_in_window(&self) -> u64 {
        self.spun_in_window_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    #[test]
    fn short_predicted_idle_spins_long_one_parks() {
        let mut g = Governor::new(IdleMode::Governed, Duration::from_micros(30), 25);
        // Below the park cost: spin, for as long as a park costs (ski rental).
        assert_eq!(g.choose(0, 10 * US), Choice::Spin { until_ns: 30 * US });
        assert_eq!(g.choose(0, 0), Choice::Spin { until_ns: 30 * US });
        assert_eq!(g.choose(0, 30 * US), Choice::Park, "at the park cost: park");
        assert_eq!(g.choose(0, 500 * US), Choice::Park);
    }

    #[test]
    fn always_modes() {
        let mut p = Governor::new(IdleMode::AlwaysPark, Duration::from_micros(30), 100);
        assert_eq!(p.choose(0, 1), Choice::Park);
        let mut s = Governor::new(
            IdleMode::AlwaysSpin(Duration::from_micros(50)),
            Duration::ZERO,
            100,
        );
        assert_eq!(
            s.choose(0, 10 * 1_000 * US),
            Choice::Spin { until_ns: 50 * US }
        );
    }

    #[test]
    fn the_spin_cap_holds_under_a_run_of_mispredictions() {
        // Predicted 20 us every time, but the work never comes: every spin
        // runs to its end. Over each 10 ms window at most 25% is spun.
        let mut g = Governor::new(IdleMode::Governed, Duration::from_micros(30), 25);
        let mut now = 0u64;
        let mut spun_total = 0u64;
        let mut windows = std::collections::BTreeMap::<u64, u64>::new();
        while now < 100 * 1_000 * US {
            match g.choose(now, 20 * US) {
                Choice::Spin { until_ns } => {
                    let d = until_ns - now;
                    assert!(d <= 30 * US, "one spin is at most the park cost");
                    g.record_spin(d);
                    spun_total += d;
                    *windows.entry(now / SPIN_WINDOW_NS).or_default() += d;
                    now = until_ns;
                }
                Choice::Park => now += 100 * US, // a park of 100 us
            }
        }
        for (w, spun) in &windows {
            assert!(
                *spun <= SPIN_WINDOW_NS / 4 + 20 * US,
                "window {w}: spun {spun} ns"
            );
        }
        assert!(spun_total <= 100 * 1_000 * US / 4 + 10 * 20 * US);
        assert!(spun_total > 0);
    }
}
