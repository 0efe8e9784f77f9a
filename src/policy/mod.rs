//! The scheduling policies, as plain functions and state machines over a
//! topology and a view of idle and load state: the deliberate public API of
//! hwsched's heuristics, for readers, tests and simulators (no threads, no
//! atomics needed). The runtime's mechanism (queues, parking, the wake
//! protocol) calls these same items.
//!
//! - wakeup placement, the kernel's `wake_affine` ([`wake_affine`]) then
//!   `select_idle_sibling`: [`select_idle_sibling`] over an [`IdleView`],
//!   with the scan depth of the [`SisMode`](crate::SisMode) ([`scan_depth`]:
//!   `SIS_PROP`'s [`prop_depth`], `SIS_UTIL`'s [`util_depth`]);
//! - placement of a task spawned from outside: [`place_external`] over an
//!   [`ExternalView`] (an awake idle worker, a parked one woken to search,
//!   the burst's target, then the kernel's `find_idlest_group`:
//!   [`find_idlest_group`] over a [`PlacementView`]);
//! - the bounded idle walk, `newidle_balance` with `max_newidle_lb_cost` and
//!   `avg_idle`: [`BalanceState`], [`LevelCost`], and the group it steals
//!   from at each level, `find_busiest_group`: [`busiest_group`];
//! - search orders, nearest first: [`near_spans`] (a worker's levels, then
//!   every worker) and [`wake_spans`] (the parked worker woken to search:
//!   on a hybrid machine the most capable workers of the LLC first,
//!   [`capable_runs`]);
//! - rate-limited load counters, `update_tg_load_avg`: [`Publisher`], and
//!   group classification, `group_classify`: [`GroupClass`];
//! - the idle governor (spin or park): [`Governor`].
//!
//! ```
//! use hwsched::policy::{prop_depth, util_depth, GroupClass, Load};
//! assert_eq!(prop_depth(8, 512_000, 999), 8);
//! assert_eq!(util_depth(16, 0.9), 0);
//! assert_eq!(
//!     GroupClass::of(Load { running: 2, queued: 3 }, 2),
//!     GroupClass::Overloaded(3)
//! );
//! ```

pub(crate) mod balance;
pub(crate) mod governor;
// The load counters the loom models drive: public under `cfg(loom)`.
#[cfg(loom)]
pub mod load;
#[cfg(not(loom))]
pub(crate) mod load;
pub(crate) mod search_order;
pub(crate) mod spawn_place;
pub(crate) mod wake;

pub use crate::policy::balance::{
    busiest_group, BalanceState, LevelCost, WalkOutcome, DECAY_PERIOD_NS,
};
pub use crate::policy::governor::{Choice as IdleChoice, Governor, MIN_SPIN_NS, SPIN_WINDOW_NS};
pub use crate::policy::load::{Contribution, GroupClass, Load, Publish, Publisher};
pub use crate::policy::search_order::{capable_runs, near_spans, wake_spans};
pub use crate::policy::spawn_place::{
    find_idlest_group, place_external, External, ExternalView, PlacementView,
};
pub use crate::policy::wake::{
    prop_depth, scan_depth, select_idle_sibling, util_depth, wake_affine, Choice, IdleView,
    Outcome, SisConfig, SCAN_COST_SAMPLE,
};
