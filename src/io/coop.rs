//! The cooperative budget: a task that keeps finding its sockets (or
//! timers: `time/mod.rs`) ready yields after [`BUDGET`] operations, so the other tasks of its worker and
//! the poller get their turn (tokio's `coop`).
//!
//! The worker sets the budget before each poll ([`budget`]); every
//! readiness poll that finds the socket ready spends one unit; with none
//! left, the poll returns `Pending` and the task's waker is *deferred*: it
//! is woken after the worker's next look at its poller, and the task goes
//! to the back of the worker's deque. Off a worker (a `block_on` thread)
//! there is no budget.

use std::cell::{Cell, RefCell};
use std::task::Waker;

/// Operations per task poll (tokio's 128).
pub const BUDGET: u8 = 128;

thread_local! {
    /// What is left of the running task's budget (`None`: unconstrained).
    static LEFT: Cell<Option<u8>> = const { Cell::new(None) };
    /// Wakers of tasks that ran out, woken after the next poller look.
    static DEFERRED: RefCell<Vec<Waker>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` (a task's poll) with a fresh budget.
#[inline]
pub(crate) fn budget<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(Option<u8>);
    impl Drop for Reset {
        fn drop(&mut self) {
            LEFT.with(|l| l.set(self.0));
        }
    }
    let _reset = Reset(LEFT.with(|l| l.replace(Some(BUDGET))));
    f()
}

/// Whether the running task may do another operation.
#[inline]
pub(crate) fn has_budget() -> bool {
    LEFT.with(|l| l.get() != Some(0))
}

/// What is left of the running task's budget (`None`: unconstrained).
#[inline]
pub(crate) fn left() -> Option<u8> {
    LEFT.with(|l| l.get())
}

/// Runs `f` without a budget (restoring the running task's after): for a
/// look that must happen even when the task ran out (a timeout's deadline
/// after its future spent the budget).
pub(crate) fn unconstrained<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(Option<u8>);
    impl Drop for Reset {
        fn drop(&mut self) {
            LEFT.with(|l| l.set(self.0));
        }
    }
    let _reset = Reset(LEFT.with(|l| l.replace(None)));
    f()
}

/// Spends one unit.
#[inline]
pub(crate) fn consume() {
    LEFT.with(|l| {
        if let Some(n) = l.get() {
            l.set(Some(n.saturating_sub(1)));
        }
    });
}

/// Defers `waker` to after the worker's next poller look. Off a worker
/// (no budget is ever spent there) this is not reached.
pub(crate) fn defer(waker: &Waker) {
    DEFERRED.with(|d| {
        let mut d = d.borrow_mut();
        if !d.iter().any(|w| w.will_wake(waker)) {
            d.push(waker.clone());
        }
    });
}

/// Whether wakers wait for the next poller look.
#[inline]
pub(crate) fn has_deferred() -> bool {
    DEFERRED.with(|d| !d.borrow().is_empty())
}

/// Takes the deferred wakers.
pub(crate) fn take_deferred() -> Vec<Waker> {
    DEFERRED.with(|d| std::mem::take(&mut *d.borrow_mut()))
}
