//! The tokio bridge's slot (the `tokio-compat` feature): a woken task that
//! the bridge's thread polls itself instead of waking a worker for it.
//! The why and the rules are src/tokio_compat.rs's, "Running a woken task
//! on the bridge"; the decision is `schedule::run_here`, the poll
//! `worker::poll_on_bridge`, the runner `runtime::block_on::bridge_runner`.

use std::cell::{Cell, RefCell};
use std::panic::Location;
use std::sync::Arc;
use std::task::Waker;

use parking_lot::Mutex;

use crate::task::{Runnable, TaskMeta};

/// The slot, the runner's waker, and the runner's `busy` lock.
#[derive(Default)]
pub(crate) struct Inline {
    /// The task to poll; taken by the runner, or by the shutdown's drain.
    pub(crate) slot: Mutex<Option<Runnable>>,
    /// The runner's waker, while the runner lives (`run_here` puts nothing
    /// in the slot without one).
    pub(crate) runner: Mutex<Option<Waker>>,
    /// Held by the runner around its look at the shutdown flag and what
    /// it polls; the shutdown's drain takes it, so that no poll on the
    /// bridge overlaps the shutdown's drops and none starts after them.
    pub(crate) busy: Mutex<()>,
}

impl Inline {
    /// The shutdown's drain (after the flag): waits for a poll the runner
    /// is in to end (until `deadline`, as the shutdown waits for its
    /// workers; not on the bridge thread itself, which may be in that
    /// poll), then takes the task in the slot, if any.
    pub(crate) fn drain(&self, deadline: Option<std::time::Instant>) -> Option<Runnable> {
        let _busy = match (is_bridge_of(self), deadline) {
            (true, _) => None,
            (false, Some(d)) => self.busy.try_lock_until(d),
            (false, None) => Some(self.busy.lock()),
        };
        self.slot.lock().take()
    }

    /// Stores the runner's waker (once per waker).
    pub(crate) fn set_runner(&self, w: &Waker) {
        let mut r = self.runner.lock();
        if !r.as_ref().is_some_and(|r| r.will_wake(w)) {
            *r = Some(w.clone());
        }
    }
}

thread_local! {
    /// On the bridge thread: its `Inline`.
    static BRIDGE: RefCell<Option<Arc<Inline>>> = const { RefCell::new(None) };
    /// On the bridge thread, while it polls an hwsched task.
    static POLLING: Cell<bool> = const { Cell::new(false) };
    /// On the bridge thread: the task whose last poll there was long, and
    /// its spawn location.
    static LAST_LONG: Cell<(*const TaskMeta, *const Location<'static>)> =
        const { Cell::new((std::ptr::null(), std::ptr::null())) };
    /// On the bridge thread: spawn locations whose tasks stay off it, each
    /// until a time (ns on the runtime's clock).
    static OFF_SITES: RefCell<Vec<(&'static Location<'static>, u64)>> =
        const { RefCell::new(Vec::new()) };
}

/// How long the tasks of a spawn location stay off the bridge once two of
/// its polls there in a row ran long: then they are tried again (a site
/// whose polls are long costs two long polls of the bridge a second, one
/// that two preemptions put there is back after a second).
pub(crate) const SITE_OFF_NS: u64 = 1_000_000_000;

/// At most this many spawn locations are kept off at once (the oldest
/// entry goes first).
const MAX_OFF_SITES: usize = 32;

/// Makes this thread the bridge's of `inline` (its thread's start).
pub(crate) fn enter_thread(inline: Arc<Inline>) {
    BRIDGE.with(|b| *b.borrow_mut() = Some(inline));
}

/// This thread is no longer a bridge's (before tokio's shutdown).
pub(crate) fn leave_thread() {
    let _ = BRIDGE.try_with(|b| b.borrow_mut().take());
}

/// Whether this thread is the bridge's of `inline`. `try_with`: a wake
/// from a thread-local's destructor at thread exit finds these gone.
pub(crate) fn is_bridge_of(inline: &Inline) -> bool {
    BRIDGE
        .try_with(|b| {
            b.borrow()
                .as_ref()
                .is_some_and(|i| std::ptr::eq(&**i, inline))
        })
        .unwrap_or(false)
}

/// Whether this thread is a bridge's, polling an hwsched task (`true`
/// once the thread-local is gone: then nothing is put in a slot).
pub(crate) fn polling() -> bool {
    POLLING.try_with(Cell::get).unwrap_or(true)
}

/// Whether this thread is a bridge's, polling an hwsched task (`false`
/// once the thread-local is gone): `block_on` refuses to block it, as it
/// refuses on a worker.
pub(crate) fn polling_here() -> bool {
    POLLING.try_with(Cell::get).unwrap_or(false)
}

/// Marks this bridge thread polling an hwsched task, or not.
pub(crate) fn set_polling(on: bool) {
    POLLING.with(|p| p.set(on));
}

/// Records whether the poll of `meta` (spawned at `site`) was long, at
/// `now`; returns whether the same task's last poll here was long too (its
/// address: a new task at the same address after it is freed is at worst
/// marked one poll early). When the last poll here was long and of the
/// same spawn location (another task of the same handler, as a server
/// spawns one per request), that location's tasks stay off the bridge for
/// [`SITE_OFF_NS`].
pub(crate) fn long_again(
    meta: *const TaskMeta,
    site: &'static Location<'static>,
    long: bool,
    now: u64,
) -> bool {
    let (last, last_site) = LAST_LONG.with(|l| {
        let prev = l.get();
        l.set(if long {
            (meta, site as *const _)
        } else {
            (std::ptr::null(), std::ptr::null())
        });
        prev
    });
    if long && std::ptr::eq(last_site, site) {
        OFF_SITES.with(|o| {
            let mut o = o.borrow_mut();
            o.retain(|&(s, _)| !std::ptr::eq(s, site));
            if o.len() == MAX_OFF_SITES {
                o.remove(0);
            }
            o.push((site, now.saturating_add(SITE_OFF_NS)));
        });
    }
    long && last == meta
}

/// Whether the tasks spawned at `site` stay off the bridge now (`now`
/// read only when the location is listed). `true` once the thread-local
/// is gone.
pub(crate) fn site_off(site: &'static Location<'static>, now: impl FnOnce() -> u64) -> bool {
    OFF_SITES
        .try_with(|o| {
            let o = o.borrow();
            match o.iter().find(|&&(s, _)| std::ptr::eq(s, site)) {
                Some(&(_, until)) => now() < until,
                None => false,
            }
        })
        .unwrap_or(true)
}

/// On a bridge thread: a waker of its runner, for the wakes of the local
/// tasks spawned there (`hwsched::spawn_local` from a task the bridge
/// polls), which the runner runs as `block_on` runs its thread's.
pub(crate) fn runner_waker() -> Option<Waker> {
    BRIDGE
        .try_with(|b| b.borrow().as_ref().and_then(|i| i.runner.lock().clone()))
        .ok()
        .flatten()
}
