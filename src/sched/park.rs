//! Parking and the inbox hand-off: each worker's [`Mailbox`] (its inbox,
//! its [`Parker`], the queues of the tasks pinned to it, its idle flag and a
//! "kicked by" note), which make sure that a notification sent to one
//! worker is never lost. The protocol, the race it closes and its
//! orderings: src/sched/README.md, "Parking and the inbox hand-off" and
//! "Pinned tasks". Who sleeps and who wakes whom is the wake protocol's
//! ([`sleepers`](crate::sched::sleepers)), built on this one.

use std::task::{Poll, Waker};

use crate::sched::queue::{Inbox, Local, Steal};
use crate::sync::{spin_loop, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering};

const NOTIFIED: usize = 1;
const PARKED: usize = 2;

/// Most items a yield moves from the inbox into the local queue, ahead of
/// the yielding task ([`Mailbox::admit`]). A worker busy with tasks that
/// yield to each other would otherwise admit external work one task per
/// `INBOX_CHECK_INTERVAL` polls; tokio's `yield_now` defers the yielder
/// behind its whole global queue the same way.
pub const ADMIT_BATCH: usize = 128;

/// Sentinel for "no worker" in [`Mailbox`]'s kick note (the policy's).
pub use crate::policy::wake::NO_WORKER;

/// A worker's sleep state: a token (`NOTIFIED`) and a sleeping bit (`PARKED`).
/// The protocol: src/sched/README.md, "Parking and the inbox hand-off".
#[derive(Debug)]
pub struct Parker {
    state: AtomicUsize,
    /// Held by a sleeper on the condvar from before it sets `PARKED` until
    /// the wait releases it; holds the waker of an owner that sleeps inside
    /// an executor's `block_on` instead ([`Parker::poll_park`]).
    lock: Mutex<Option<Waker>>,
    cvar: Condvar,
}

/// What [`Parker::notify`] had to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Notified {
    /// The worker was parked: the condvar was signalled (an unpark).
    Unparked,
    /// The worker was running, spinning or already notified: no unpark.
    NoUnparkNeeded,
}

impl Default for Parker {
    fn default() -> Self {
        Self::new()
    }
}

impl Parker {
    /// A parker with no token and nobody asleep.
    pub fn new() -> Self {
        Parker {
            state: AtomicUsize::new(0),
            lock: Mutex::new(None),
            cvar: Condvar::new(),
        }
    }

    /// Gives the worker the token, and wakes it if it is parked.
    pub fn notify(&self) -> Notified {
        // AcqRel: release publishes the caller's inbox push (or kick note,
        // or shutdown flag) to the worker's RMW that reads this bit.
        let prev = self.state.fetch_or(NOTIFIED, Ordering::AcqRel);
        if prev & PARKED != 0 && prev & NOTIFIED == 0 {
            // The sleeper holds the mutex from before its fetch_or(PARKED)
            // until the condvar wait releases it (or, sleeping in an
            // executor, until its waker is in the slot): taking it here
            // means it is waiting, on the condvar or behind its waker.
            let waker = self.lock.lock().take();
            match waker {
                Some(w) => w.wake(),
                None => self.cvar.notify_one(),
            }
            Notified::Unparked
        } else {
            Notified::NoUnparkNeeded
        }
    }

    /// Consumes a stale token before the worker's last check of its queues.
    /// Reads first, so a worker without a token writes nothing.
    pub fn prepare(&self) {
        if self.state.load(Ordering::Relaxed) & NOTIFIED != 0 {
            // AcqRel: acquire pairs with notify's release, so the check of
            // the queues that follows sees what the notifier pushed.
            self.state.fetch_and(!NOTIFIED, Ordering::AcqRel);
        }
    }

    /// Whether a token is waiting (what a spinning worker watches).
    pub fn is_notified(&self) -> bool {
        // Acquire: pairs with notify's release; a spinner that sees the bit
        // then sees the delivered item. (Relaxed would do for `Mailbox::wait`:
        // a spin that sees the bit returns `Woken`, and the next wait's
        // `prepare` consumes the token with an AcqRel RMW before it checks
        // the inbox; the mutation table in loom-tests/README.md records
        // that no model needs it. Kept: a plain load either way on x86.)
        self.state.load(Ordering::Acquire) & NOTIFIED != 0
    }

    /// Whether the worker is parked (or committed to parking).
    // Used by the loom models (loom-tests/).
    #[cfg_attr(not(loom), allow(dead_code))]
    pub fn is_parked(&self) -> bool {
        self.state.load(Ordering::Relaxed) & PARKED != 0
    }

    /// Sleeps until notified. Returns `true` if it slept, `false` if a token
    /// was already there (no sleep). Either way the token is consumed.
    pub fn park(&self) -> bool {
        self.park_timeout(None)
    }

    /// [`park`](Self::park), waking by itself after `timeout` if given. A
    /// timeout is handled like a notification that brought nothing: the
    /// final `swap(0)` clears `PARKED` (and any token that raced in), and the
    /// caller re-checks its queues, so a notify racing with the timeout is
    /// never lost (its signal finds nobody waiting, and is not needed).
    pub fn park_timeout(&self, timeout: Option<std::time::Duration>) -> bool {
        let mut guard = self.lock.lock();
        // AcqRel: pairs with notify's fetch_or (README, "The race it closes"). Either
        // half alone is more than needed: what the worker reads after the
        // park is ordered by the final `swap(0, AcqRel)`, which reads every
        // notify so far, and a notifier that reads PARKED takes the mutex
        // we hold. Not both this and the swap may be weakened: the swap is
        // the one that carries it (loom: `park-final-swap` is caught).
        let prev = self.state.fetch_or(PARKED, Ordering::AcqRel);
        let slept = prev & NOTIFIED == 0;
        if slept {
            // Acquire: pairs with notify's release (Relaxed would do: the
            // final swap acquires before the caller's inbox check).
            while self.state.load(Ordering::Acquire) & NOTIFIED == 0 {
                match timeout {
                    None => guard = self.cvar.wait(guard),
                    Some(d) => {
                        let (g, timed_out) = self.cvar.wait_for(guard, d);
                        guard = g;
                        if timed_out {
                            break;
                        }
                    }
                }
            }
        }
        drop(guard);
        // swap, not store: synchronizes with every notify so far (see docs).
        self.state.swap(0, Ordering::AcqRel);
        slept
    }

    /// [`park`](Self::park) for an owner that sleeps elsewhere (in a
    /// poller's `epoll_wait`, or on its thread: "Sleeping in the I/O
    /// driver" in src/sched/README.md): `Pending` means "asleep: go and sleep
    /// until `waker` is woken", and the owner calls it again when awake.
    /// `Ready(slept)` ends the park as `park` returns: the token is
    /// consumed.
    ///
    /// The first call takes the mutex, sets `PARKED` as `park` does, and,
    /// unless a token was there, leaves `waker` in the mutex's slot before
    /// releasing it. A notifier that sees `PARKED` (and no token) takes the
    /// mutex, so it comes after the waker is in the slot: it takes the waker
    /// and wakes it. A notifier whose `fetch_or` came first is seen by the
    /// owner's `fetch_or(PARKED)`, which then does not sleep.
    #[cfg_attr(not(any(loom, feature = "io")), allow(dead_code))]
    pub fn poll_park(&self, waker: &Waker) -> Poll<bool> {
        let mut slot = self.lock.lock();
        // Relaxed: only the owner sets or clears PARKED.
        if self.state.load(Ordering::Relaxed) & PARKED == 0 {
            // AcqRel: pairs with notify's fetch_or, as in `park_timeout`
            // (and, as there, the swaps below are what carry the acquire).
            let prev = self.state.fetch_or(PARKED, Ordering::AcqRel);
            if prev & NOTIFIED != 0 {
                drop(slot);
                // swap, not store: as in `park_timeout`.
                self.state.swap(0, Ordering::AcqRel);
                return Poll::Ready(false);
            }
            *slot = Some(waker.clone());
            return Poll::Pending;
        }
        // Acquire: pairs with notify's release (the final swap acquires
        // too). Polled again before a notify (the executor may poll for
        // its own reasons): still asleep.
        if self.state.load(Ordering::Acquire) & NOTIFIED == 0 {
            if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
                *slot = Some(waker.clone());
            }
            return Poll::Pending;
        }
        // The notifier took the waker; clear a stale one all the same.
        *slot = None;
        drop(slot);
        // swap, not store: synchronizes with every notify so far (see docs).
        self.state.swap(0, Ordering::AcqRel);
        Poll::Ready(true)
    }
}

impl Parker {
    /// Takes the waker out of the slot (the owner, awake in its executor:
    /// a notify then finds no waker to wake, and costs no eventfd write or
    /// unpark; the owner sees its token when it polls `poll_park` again,
    /// which puts the waker back if it sleeps on).
    #[cfg_attr(not(any(loom, feature = "io")), allow(dead_code))]
    pub fn take_waker(&self) {
        let w = self.lock.lock().take();
        drop(w);
    }
}

/// The part of a worker other threads touch: its inbox, parker and wake
/// note. Generic over the item so loom models use integers.
#[derive(Debug)]
pub struct Mailbox<T> {
    /// Items pushed by other threads.
    pub inbox: Inbox<T>,
    /// Items only this worker takes (tasks placed on it): never stolen,
    /// never in the `queued` set. See "Pinned tasks" in src/sched/README.md.
    pub pinned: Inbox<T>,
    /// This worker's `!Send` items (its local tasks): taken and dropped by
    /// this worker alone, also at shutdown (never drained by another
    /// thread).
    pub locals: Inbox<T>,
    /// Items in `pinned` and `locals` (counted after the push, before the
    /// notify; uncounted after the pop): the owner's look at both queues is
    /// one load of this word.
    placed: AtomicUsize,
    /// Sleep state.
    pub parker: Parker,
    kicked_by: AtomicUsize,
}

impl<T> std::fmt::Debug for Inbox<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox").field("len", &self.len()).finish()
    }
}

/// How a [`Mailbox::wait`] step ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Wait<T> {
    /// An item from the inbox.
    Work {
        /// The item.
        item: T,
        /// Whether the worker slept on the condvar before it came.
        slept: bool,
    },
    /// The runtime is shutting down.
    Shutdown,
    /// The owner sleeps inside an executor's `block_on`
    /// ([`Parker::poll_park`] returned `Pending`): it returns `Pending`
    /// there, and calls [`Mailbox::resume`] when polled again.
    Suspended,
    /// Woken (or the spin saw a token) without inbox work: a kick, or a
    /// token whose item someone else took. Look again.
    Woken {
        /// Whether the worker slept on the condvar.
        slept: bool,
        /// The worker that kicked this one, if that is why it woke.
        kicked_by: Option<usize>,
    },
}

impl<T> Default for Mailbox<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Mailbox<T> {
    /// An empty mailbox.
    pub fn new() -> Self {
        Mailbox {
            inbox: Inbox::new(),
            pinned: Inbox::new(),
            locals: Inbox::new(),
            placed: AtomicUsize::new(0),
            parker: Parker::new(),
            kicked_by: AtomicUsize::new(NO_WORKER),
        }
    }

    /// Delivers `item`: inbox push, then the parker's token (an unpark only
    /// when the worker sleeps).
    pub fn deliver(&self, item: T) -> Notified {
        self.inbox.push(item);
        self.parker.notify()
    }

    /// Delivers `item` unless the runtime is shutting down: push, notify,
    /// then re-check `shutdown`. If the flag is set by then, everything in
    /// the inbox (this item included) is handed to `drop_item`.
    ///
    /// Why this cannot strand an item: shutdown sets its flag and then
    /// notifies every parker (an RMW on the same word as ours). If our
    /// `fetch_or` comes first in that word's order, shutdown's RMW acquires
    /// it, so the inbox drain that follows shutdown's notify sees our push;
    /// if it comes second, our RMW acquires shutdown's, so our load of the
    /// flag sees `true` and we drain ourselves. Each item is taken out of the
    /// inbox exactly once by whoever drains it.
    pub fn deliver_or_drain(
        &self,
        item: T,
        shutdown: &AtomicBool,
        mut drop_item: impl FnMut(T),
    ) -> Notified {
        let n = self.deliver(item);
        // Relaxed: ordered by the AcqRel RMW in deliver (see above).
        if shutdown.load(Ordering::Relaxed) {
            loop {
                match self.inbox.steal() {
                    Steal::Success(t) => drop_item(t),
                    Steal::Empty => break,
                    Steal::Retry => continue,
                }
            }
        }
        n
    }

    /// Kicks the worker on behalf of overloaded worker `from`: notes who
    /// kicked, then notifies.
    pub fn kick(&self, from: usize) -> Notified {
        // Relaxed: published by notify's release.
        self.kicked_by.store(from, Ordering::Relaxed);
        self.parker.notify()
    }

    /// One idle step of the owner, whose own queues are empty.
    ///
    /// Consumes a stale token, checks the inbox (one item) and `shutdown`;
    /// then, while `keep_spinning()` says so, spins watching the token and
    /// the inbox; then calls `before_sleep` (the worker publishes its load
    /// and announces its sleep there) and parks, unless `before_sleep`
    /// returns `false` (the worker found work elsewhere): then it returns
    /// [`Wait::Woken`] without sleeping.
    // Used by the loom models (loom-tests/).
    #[cfg_attr(not(loom), allow(dead_code))]
    pub fn wait(
        &self,
        shutdown: &AtomicBool,
        keep_spinning: impl FnMut() -> bool,
        before_sleep: impl FnOnce() -> bool,
    ) -> Wait<T> {
        self.wait_for(shutdown, keep_spinning, before_sleep, None)
    }

    /// [`wait`](Self::wait), with the park bounded by `timeout` when given
    /// (the worker then returns [`Wait::Woken`] to look around again).
    pub fn wait_for(
        &self,
        shutdown: &AtomicBool,
        keep_spinning: impl FnMut() -> bool,
        before_sleep: impl FnOnce() -> bool,
        timeout: Option<std::time::Duration>,
    ) -> Wait<T> {
        self.wait_with(shutdown, keep_spinning, before_sleep, |p| {
            Poll::Ready(p.park_timeout(timeout))
        })
    }

    /// [`wait`](Self::wait), sleeping with `sleep`: a park on the condvar
    /// (`Ready(slept)`), or [`Parker::poll_park`] for an owner that sleeps
    /// inside an executor's `block_on`. When `sleep` returns `Pending` this
    /// returns [`Wait::Suspended`]; the owner calls [`resume`](Self::resume)
    /// when polled again.
    pub fn wait_with(
        &self,
        shutdown: &AtomicBool,
        mut keep_spinning: impl FnMut() -> bool,
        before_sleep: impl FnOnce() -> bool,
        sleep: impl FnOnce(&Parker) -> Poll<bool>,
    ) -> Wait<T> {
        self.parker.prepare();
        if let Some(item) = self.take().or_else(|| self.take_pinned()) {
            return Wait::Work { item, slept: false };
        }
        // Relaxed: the shutdown store is published by notify's release,
        // which prepare() or park() acquired.
        if shutdown.load(Ordering::Relaxed) {
            return Wait::Shutdown;
        }
        // A kick whose token `prepare` just consumed (it came while the
        // worker was busy with other work) must not be slept through: the
        // kicker counted on this worker to steal.
        if let Some(k) = self.take_kick() {
            return Wait::Woken {
                slept: false,
                kicked_by: Some(k),
            };
        }
        while keep_spinning() {
            if self.parker.is_notified() || !self.inbox.is_empty() {
                return Wait::Woken {
                    slept: false,
                    kicked_by: self.take_kick(),
                };
            }
            spin_loop();
        }
        if !before_sleep() {
            // The worker found work elsewhere (the re-check of a worker that
            // sleeps with no searcher left, sched/sleepers.rs): it does not sleep.
            return Wait::Woken {
                slept: false,
                kicked_by: self.take_kick(),
            };
        }
        match sleep(&self.parker) {
            Poll::Ready(slept) => self.after_sleep(shutdown, slept),
            Poll::Pending => Wait::Suspended,
        }
    }

    /// Goes on with a wait that returned [`Wait::Suspended`]: `sleep` (the
    /// same [`Parker::poll_park`]) says whether the sleep is over, then the
    /// wait ends as [`wait_with`](Self::wait_with)'s does.
    pub fn resume(
        &self,
        shutdown: &AtomicBool,
        sleep: impl FnOnce(&Parker) -> Poll<bool>,
    ) -> Wait<T> {
        match sleep(&self.parker) {
            Poll::Ready(slept) => self.after_sleep(shutdown, slept),
            Poll::Pending => Wait::Suspended,
        }
    }

    /// The end of a wait, after the park: the inbox, then shutdown.
    fn after_sleep(&self, shutdown: &AtomicBool, slept: bool) -> Wait<T> {
        if let Some(item) = self.take().or_else(|| self.take_pinned()) {
            return Wait::Work { item, slept };
        }
        if shutdown.load(Ordering::Relaxed) {
            return Wait::Shutdown;
        }
        Wait::Woken {
            slept,
            kicked_by: self.take_kick(),
        }
    }

    /// Takes one inbox item, and only one: the owner runs the tasks its own
    /// work has woken before it admits more external work (the inbox is
    /// where idle workers steal external work from, so it need not move
    /// into the deque to be found). A batch moved into the deque would run
    /// ahead of every task woken after it: on hackbench at one worker, a
    /// batch of 128 let the senders it admitted fill the pipes before their
    /// receivers ran (35,000 messages in flight on average against 1,100,
    /// 1.35x the time: BENCHMARKS.md, "One inbox task at a time").
    pub fn take(&self) -> Option<T> {
        loop {
            match self.inbox.steal() {
                Steal::Success(t) => return Some(t),
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }

    /// Moves up to [`ADMIT_BATCH`] inbox items into `local`, behind what it
    /// holds (two steals: crossbeam's injector hands out at most one block,
    /// 63 items, per steal). A yielding task calls this before it queues
    /// itself, so that external work runs before it runs again; its own
    /// push then runs the pusher's check for the deque (sched/push.rs).
    #[inline]
    pub fn admit(&self, local: &Local<T>) {
        if self.inbox.is_empty() {
            return;
        }
        self.admit_batch(local);
    }

    #[cold]
    #[inline(never)]
    fn admit_batch(&self, local: &Local<T>) {
        let _ = self.inbox.steal_batch_with_limit(local, ADMIT_BATCH / 2);
        if !self.inbox.is_empty() {
            let _ = self.inbox.steal_batch_with_limit(local, ADMIT_BATCH / 2);
        }
    }

    /// Takes one item only this worker may take: from
    /// [`pinned`](Self::pinned), then from [`locals`](Self::locals). One
    /// load when both are empty.
    #[inline]
    pub fn take_pinned(&self) -> Option<T> {
        // Acquire: pairs with the pusher's Release increment, which comes
        // after its push, so the pop below sees the item counted.
        if self.placed.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.take_pinned_slow()
    }

    #[cold]
    fn take_pinned_slow(&self) -> Option<T> {
        let t = pop(&self.pinned).or_else(|| pop(&self.locals))?;
        // Relaxed: a count; what it publishes is the pushers' increments'.
        self.placed.fetch_sub(1, Ordering::Relaxed);
        Some(t)
    }

    /// Pushes `item` into [`pinned`](Self::pinned) (or
    /// [`locals`](Self::locals), with `local`) and counts it, without a
    /// notify: the owner's own push, made while it runs (it looks at the
    /// queues before it waits), or the first step of a delivery.
    #[inline]
    pub fn push_pinned(&self, item: T, local: bool) {
        if local {
            self.locals.push(item);
        } else {
            self.pinned.push(item);
        }
        // Release: publishes the push to the owner's Acquire load of the
        // count (`take_pinned`).
        self.placed.fetch_add(1, Ordering::Release);
    }

    /// Delivers `item` to [`pinned`](Self::pinned) unless the runtime is
    /// shutting down: push and count, notify, then the re-check of
    /// [`deliver_or_drain`](Self::deliver_or_drain), which drains the
    /// pinned queue into `drop_item` when the flag is set by then (the same
    /// argument: shutdown's notify and ours are RMWs of one word).
    pub fn deliver_pinned_or_drain(
        &self,
        item: T,
        shutdown: &AtomicBool,
        mut drop_item: impl FnMut(T),
    ) -> Notified {
        self.push_pinned(item, false);
        let n = self.parker.notify();
        // Relaxed: ordered by notify's AcqRel RMW (as in deliver_or_drain).
        if shutdown.load(Ordering::Relaxed) {
            self.drain_pinned(&mut drop_item);
        }
        n
    }

    /// Hands everything in [`pinned`](Self::pinned) to `drop_item` (the
    /// shutdown's drain; never `locals`, which only the owner drops).
    /// Returns how many.
    pub fn drain_pinned(&self, mut drop_item: impl FnMut(T)) -> usize {
        let mut n = 0;
        while let Some(t) = pop(&self.pinned) {
            self.placed.fetch_sub(1, Ordering::Relaxed);
            drop_item(t);
            n += 1;
        }
        n
    }

    /// Takes one item of [`locals`](Self::locals) (the owner, at shutdown).
    pub fn take_local(&self) -> Option<T> {
        let t = pop(&self.locals)?;
        self.placed.fetch_sub(1, Ordering::Relaxed);
        Some(t)
    }

    /// Delivers `item` to [`locals`](Self::locals): push and count, then
    /// notify. No shutdown re-check: only the owner drops what is there.
    pub fn deliver_local(&self, item: T) -> Notified {
        self.push_pinned(item, true);
        self.parker.notify()
    }

    /// Takes the kick note, if any: who kicked this worker since it last
    /// looked.
    pub fn take_kick(&self) -> Option<usize> {
        if self.kicked_by.load(Ordering::Relaxed) == NO_WORKER {
            return None;
        }
        match self.kicked_by.swap(NO_WORKER, Ordering::Relaxed) {
            NO_WORKER => None,
            w => Some(w),
        }
    }
}

/// Pops one item of `q`, retrying a contended steal.
#[inline]
fn pop<T>(q: &Inbox<T>) -> Option<T> {
    if q.is_empty() {
        return None;
    }
    loop {
        match q.steal() {
            Steal::Success(t) => return Some(t),
            Steal::Empty => return None,
            Steal::Retry => continue,
        }
    }
}

/// Measures the median cost of waking a parked thread: two threads bounce a
/// token through two [`Parker`]s; half the round trip is one park/unpark.
/// Takes at most ~5 ms.
pub(crate) fn measure_park_cost() -> std::time::Duration {
    let a = std::sync::Arc::new(Parker::new());
    let b = std::sync::Arc::new(Parker::new());
    let (a2, b2) = (a.clone(), b.clone());
    const SAMPLES: usize = 200;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let t = std::thread::spawn(move || loop {
        b2.park();
        let _ = a2.notify();
        if stop2.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
    });
    let mut samples = Vec::with_capacity(SAMPLES);
    let budget = std::time::Instant::now();
    for _ in 0..SAMPLES {
        // Let the partner reach its park first, so the notify is a real unpark.
        std::thread::sleep(std::time::Duration::from_micros(20));
        let t0 = std::time::Instant::now();
        let _ = b.notify();
        a.park();
        samples.push(t0.elapsed());
        if budget.elapsed() > std::time::Duration::from_millis(8) && samples.len() >= 16 {
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = b.notify();
    let _ = t.join();
    samples.sort();
    samples[samples.len() / 2] / 2
}
