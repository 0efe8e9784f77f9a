//! Loom models of hwsched's concurrency protocols.
//!
//! The models live in `tests/`, one file per protocol:
//!
//! | file | protocol | production code |
//! | --- | --- | --- |
//! | `park.rs` | inbox hand-off racing a worker going to sleep, with and without spinning | `park::Mailbox::{deliver, wait}`, `park::Parker` |
//! | `placement.rs` | two placements claiming one idle worker while it leaves idle | `idle::WorkerSet::{insert, remove}` (the idle mask), `Mailbox::deliver_or_drain` |
//! | `conserve.rs` | work conservation: a push (onto a busy worker's deque, or from outside into its inbox) racing the last searcher going to sleep | `idle::Sleepers::{to_searching, leave_searching, needs_wake, wake_one, to_parked, leave_parked, find_queued}`, `Mailbox::{wait, kick, deliver_or_drain}`, the `queued` `WorkerSet` |
//! | `load.rs` | rate-limited publishes into packed group counters, one forced before a park | `load::{GroupLoad, Publisher}` |
//! | `shutdown.rs` | shutdown racing a delivery and the worker, with the burial of late tasks | `Mailbox::deliver_or_drain`, the sequences of `Runtime::shutdown` and `Shared::bury` |
//!
//! Every model drives the production types unchanged: under
//! `RUSTFLAGS="--cfg loom"`, `hwsched::sync` swaps in loom's atomics, mutex
//! and condvar; the deques become a loom `Mutex<VecDeque>` and the inbox a
//! few loom `AtomicPtr` slots, so that an empty steal synchronizes with
//! nobody, as with crossbeam's `Injector` (see `src/queue.rs`; the notes
//! below on what a mutex stand-in hides were written before the inbox
//! became atomic, and the files say which results were re-checked). Each file's docs say what it checks, which mutation of
//! the production code it catches (each was applied once, run, and
//! reverted) and which it does not, and why.
//!
//! # What these models cannot see
//!
//! - **Orderings that publish a queue push.** Under loom a push and a steal
//!   are mutex operations, and a mutex orders them both ways: a steal that
//!   finds nothing happens before the next push. crossbeam's `Injector`
//!   gives no such edge, and that is what the acquire half of
//!   `Parker::notify`'s `fetch_or` (read by `deliver_or_drain`'s `Relaxed`
//!   re-check of the shutdown flag) and the two `fence(SeqCst)` of
//!   `Shared::bury` / `Runtime::shutdown` are for. Weakening them is not
//!   caught here; with a stand-in inbox whose empty steal synchronizes with
//!   nobody, it is (`shutdown.rs` has the details).
//! - **Some interleavings, because of loom 0.7.2's partial-order
//!   reduction** (tokio-rs/loom#392, #166): when a thread loads an atomic
//!   and then writes it (the read-before-write idiom this crate uses in
//!   `Parker::prepare`, `WorkerSet::{insert, remove}`, `take_kick`),
//!   loom treats the thread's own load as the write's only dependency and
//!   never reorders the write before another thread's earlier load. The
//!   earlier kick model (removed with the overload kicks it modelled, now
//!   the wake protocol of `conserve.rs`) needed a `yield_now` to reach one
//!   branch because of it; every model asserts with [`Cases`] that the
//!   interleavings it is about were reached, but orderings whose failure
//!   needs such a reordering are not all caught (`shutdown.rs` lists them).
//!
//! # Running
//!
//! `make test-loom`, which is
//!
//! ```text
//! RUSTFLAGS="--cfg loom -C debug-assertions" LOOM_MAX_PREEMPTIONS=3 \
//!     cargo test -p loom-tests --release --target-dir target/loom
//! ```
//!
//! (the Makefile's default bound is 3; `make test-loom LOOM_MAX_PREEMPTIONS=4`
//! for a deeper run; without the variable, `model` uses bound 2). Add
//! `-- --nocapture` to see each model's execution count and the cases it
//! reached.
//! Without `--cfg loom` every test file compiles to nothing, so
//! `cargo test --workspace` stays fast. This crate's library holds only what
//! the models share: [`model`] (the bounded checker), a drop-counting
//! [`Task`] with its [`Ledger`], and [`Cases`], the interleavings each model
//! must be seen to reach.

// Models run in --release for speed, but the invariants they exercise are
// `debug_assert!`s in hwsched and here: refuse to build a loom run that
// would silently skip them (tokio's loom tests do the same).
#[cfg(all(loom, not(debug_assertions)))]
compile_error!(
    "loom models need debug assertions: build with \
     RUSTFLAGS=\"--cfg loom -C debug-assertions\" (what `make test-loom` does)"
);

#[cfg(loom)]
mod imp {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::{Arc, Mutex};

    /// Preemption bound used when `LOOM_MAX_PREEMPTIONS` is not set, so that
    /// a bare `cargo test` under `--cfg loom` still finishes (loom's own
    /// default is unbounded). `make test-loom` sets the variable explicitly.
    pub const DEFAULT_MAX_PREEMPTIONS: usize = 2;

    /// Runs `f` under loom: every interleaving up to the preemption bound
    /// (`LOOM_MAX_PREEMPTIONS`, else [`DEFAULT_MAX_PREEMPTIONS`]), then
    /// prints how many executions that was (shown with `--nocapture`).
    /// With the variable set this is plain `loom::model`, so `LOOM_LOG`
    /// and `LOOM_LOCATION` work for a failing model.
    pub fn model<F>(f: F)
    where
        F: Fn() + Sync + Send + 'static,
    {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = {
            let runs = runs.clone();
            move || {
                runs.fetch_add(1, SeqCst);
                f();
            }
        };
        let bound = std::env::var("LOOM_MAX_PREEMPTIONS").ok();
        if bound.is_some() {
            loom::model(counted);
        } else {
            let mut b = loom::model::Builder::new();
            b.preemption_bound = Some(DEFAULT_MAX_PREEMPTIONS);
            b.check(counted);
        }
        let name = std::thread::current().name().unwrap_or("model").to_owned();
        println!(
            "{name}: {} executions (preemption bound {})",
            runs.load(SeqCst),
            bound.as_deref().unwrap_or("2, default")
        );
    }

    /// Interleavings a model must reach at least once over all its
    /// executions: a guard against loom silently exploring less than the
    /// model intends (for instance tokio-rs/loom#392: a thread that loads
    /// an atomic and then writes it hides that write from an earlier load
    /// by another thread, so the branch that needs it is never taken).
    /// Counted with `std` atomics, outside loom's view, like [`Ledger`].
    #[derive(Debug)]
    pub struct Cases {
        names: Vec<&'static str>,
        hits: Vec<AtomicUsize>,
        /// Cases reached that the model did not list (printed, not required).
        others: Mutex<BTreeMap<String, usize>>,
    }

    impl Cases {
        /// Cases with these names, none reached yet.
        pub fn new(names: &[&'static str]) -> Arc<Cases> {
            Arc::new(Cases {
                names: names.to_vec(),
                hits: names.iter().map(|_| AtomicUsize::new(0)).collect(),
                others: Mutex::new(BTreeMap::new()),
            })
        }

        /// Records that this execution reached case `name`.
        pub fn hit(&self, name: &str) {
            match self.names.iter().position(|n| *n == name) {
                Some(i) => {
                    self.hits[i].fetch_add(1, SeqCst);
                }
                None => {
                    *self
                        .others
                        .lock()
                        .unwrap()
                        .entry(name.to_owned())
                        .or_default() += 1;
                }
            }
        }

        /// Panics naming every listed case no execution reached; prints
        /// the counts.
        pub fn assert_all_reached(&self) {
            let counts: Vec<(&str, usize)> = self
                .names
                .iter()
                .zip(&self.hits)
                .map(|(n, h)| (*n, h.load(SeqCst)))
                .collect();
            println!("  cases: {counts:?}");
            let others = self.others.lock().unwrap();
            if !others.is_empty() {
                println!("  also reached: {others:?}");
            }
            let missing: Vec<&str> = counts
                .iter()
                .filter(|(_, c)| *c == 0)
                .map(|(n, _)| *n)
                .collect();
            assert!(
                missing.is_empty(),
                "no execution reached {missing:?}: the model explores less than it claims \
                 (raise LOOM_MAX_PREEMPTIONS, or see tokio-rs/loom#392)"
            );
        }
    }

    /// What happened to each item of one model execution.
    ///
    /// Bookkeeping uses `std` atomics on purpose: it is the observer, not
    /// part of the protocol, so it must add neither interleavings nor
    /// happens-before edges that could hide a missing one. The flip side:
    /// loom does not see these accesses, so its partial-order reduction
    /// does not order them either. A thread may read only counts it wrote
    /// itself, or read them after joining the writers.
    #[derive(Debug)]
    pub struct Ledger {
        ran: Vec<AtomicUsize>,
        cancelled: Vec<AtomicUsize>,
        dropped: Vec<AtomicUsize>,
    }

    impl Ledger {
        /// A ledger for items `0..n`.
        pub fn new(n: usize) -> Arc<Ledger> {
            let v = || (0..n).map(|_| AtomicUsize::new(0)).collect();
            Arc::new(Ledger {
                ran: v(),
                cancelled: v(),
                dropped: v(),
            })
        }

        /// A new item `id` (one per id per execution).
        pub fn task(self: &Arc<Self>, id: usize) -> Task {
            Task {
                id,
                ledger: self.clone(),
            }
        }

        /// How many times item `id` ran.
        pub fn ran(&self, id: usize) -> usize {
            self.ran[id].load(SeqCst)
        }

        /// How many times item `id` was dropped without running (the
        /// shutdown path's `drop_task`).
        pub fn cancelled(&self, id: usize) -> usize {
            self.cancelled[id].load(SeqCst)
        }

        /// Every item was run or cancelled exactly once, and destroyed.
        /// Call it while the queues still exist: an item stranded in a
        /// queue has then neither run nor been cancelled.
        pub fn assert_each_once(&self) {
            for id in 0..self.ran.len() {
                let (r, c) = (self.ran(id), self.cancelled(id));
                assert_eq!(
                    r + c,
                    1,
                    "item {id}: ran {r} times, cancelled {c} times (stranded if 0)"
                );
                assert_eq!(self.dropped[id].load(SeqCst), 1, "item {id} not destroyed");
            }
        }
    }

    /// A queued item that records whether it ran or was cancelled, and that
    /// it was destroyed, in its [`Ledger`].
    #[derive(Debug)]
    pub struct Task {
        id: usize,
        ledger: Arc<Ledger>,
    }

    impl Task {
        /// Its id.
        pub fn id(&self) -> usize {
            self.id
        }

        /// "Polls" it: counts a run, then drops it.
        pub fn run(self) {
            self.ledger.ran[self.id].fetch_add(1, SeqCst);
        }

        /// Drops it without running (what shutdown's drain does).
        pub fn cancel(self) {
            self.ledger.cancelled[self.id].fetch_add(1, SeqCst);
        }
    }

    impl Drop for Task {
        fn drop(&mut self) {
            self.ledger.dropped[self.id].fetch_add(1, SeqCst);
        }
    }
}

#[cfg(loom)]
pub use imp::*;
