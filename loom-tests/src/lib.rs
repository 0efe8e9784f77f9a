//! Loom models of hwsched's concurrency protocols.
//!
//! The models live in `tests/`, one file per protocol; `README.md` beside
//! this crate lists each model and the production functions it calls, says
//! what loom cannot see, and holds the mutation table that
//! `scripts/mutate.sh` generates.
//!
//! The models drive production code: under `RUSTFLAGS="--cfg loom"`,
//! `hwsched::sync` swaps in loom's atomics, mutex and condvar, and the
//! protocol modules (`idle`, `load`, `park`, `queue`, `shared`, `task`, and
//! of the I/O driver, which this crate enables with the `io` feature,
//! `io::handoff` and `io::scheduled_io`) become public so a model can call
//! their functions. crossbeam's deques are
//! not ours to prove and are replaced (`src/queue.rs`): a worker's deque by
//! a loom `Mutex<VecDeque>`, the inbox by a few loom `AtomicPtr` slots, so
//! that an empty steal synchronizes with nobody, as with crossbeam's
//! `Injector`.
//!
//! # Running
//!
//! `make test-loom`, which runs `scripts/loom.sh`: it builds with
//! `RUSTFLAGS="--cfg loom -C debug-assertions"` in `--release`, then runs
//! each model in its own process at `LOOM_MAX_PREEMPTIONS=3` (the
//! Makefile's bound; `make test-loom LOOM_MAX_PREEMPTIONS=4` for a deeper
//! run), so that one failing model does not hide the others. A plain
//! `cargo test -p loom-tests` under `--cfg loom` also works (all models of a
//! file in one process); without the variable, [`model`] uses bound
//! [`DEFAULT_MAX_PREEMPTIONS`]. Add `-- --nocapture` to see each model's
//! execution count and the cases it reached. Without `--cfg loom` every
//! test file compiles to nothing, so `cargo test --workspace` stays fast.
//!
//! This crate's library holds only what the models share: [`model`] (the
//! bounded checker), a drop-counting [`Task`] with its [`Ledger`],
//! [`Cases`], the interleavings each model must be seen to reach, and
//! [`Rt`], the runtime view the pusher's steps (`hwsched::handoff`) take.

// Models run in --release for speed, but some invariants they exercise are
// `debug_assert!`s in hwsched (the counts of `idle::Sleepers`, the registry
// slots of `task.rs`): refuse to build a loom run that would silently skip
// them (tokio's loom tests do the same).
#[cfg(all(loom, not(debug_assertions)))]
compile_error!(
    "loom models need debug assertions: build with \
     RUSTFLAGS=\"--cfg loom -C debug-assertions\" (what `make test-loom` does)"
);

#[cfg(loom)]
mod imp {
    use hwsched::queue::{Local, Steal, Stealer};
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

    /// The runtime as `hwsched::handoff`'s steps see it (its `Workers`
    /// view): `n` workers in one span, their mailboxes, the shutdown flag.
    /// Shared by the models that drive the pusher's steps.
    pub struct Rt {
        pub s: hwsched::idle::Sleepers,
        pub mailboxes: Vec<hwsched::park::Mailbox<Task>>,
        /// What other workers see of each worker's deque.
        pub stealers: Vec<Stealer<Task>>,
        pub all: std::ops::Range<usize>,
        pub shutdown: loom::sync::atomic::AtomicBool,
        /// The place queues of the domains, if the model has any
        /// (`Rt::with_domains`).
        pub domains: Option<hwsched::domain::DomainQueues<Task>>,
    }

    impl Rt {
        /// `n` workers (their deques unused: the pusher's steps alone).
        pub fn new(n: usize) -> loom::sync::Arc<Rt> {
            Rt::with_locals(n).0
        }

        /// `n` workers and each one's deque, for its owner.
        // One span covering every worker: `&[0..n]` is the list of spans.
        #[allow(clippy::single_range_in_vec_init)]
        pub fn with_locals(n: usize) -> (loom::sync::Arc<Rt>, Vec<Local<Task>>) {
            Rt::with_domains(n, &[])
        }

        /// `n` workers, each one's deque, and a place queue for each of
        /// the domains `spans` (`hwsched::domain`: queue `i` is `spans[i]`'s
        /// when the spans differ).
        #[allow(clippy::single_range_in_vec_init)]
        pub fn with_domains(
            n: usize,
            spans: &[std::ops::Range<usize>],
        ) -> (loom::sync::Arc<Rt>, Vec<Local<Task>>) {
            let locals: Vec<Local<Task>> = (0..n).map(|_| Local::new()).collect();
            let domains =
                (!spans.is_empty()).then(|| hwsched::domain::DomainQueues::new(n, spans).0);
            let rt = loom::sync::Arc::new(Rt {
                s: hwsched::idle::Sleepers::new(n, &[0..n]),
                mailboxes: (0..n).map(|_| hwsched::park::Mailbox::new()).collect(),
                stealers: locals.iter().map(|l| l.stealer()).collect(),
                all: 0..n,
                shutdown: loom::sync::atomic::AtomicBool::new(false),
                domains,
            });
            (rt, locals)
        }

        /// `worker::steal_from`: worker `v`'s deque, then its inbox, into
        /// `local`; the one item to run.
        pub fn steal_from(&self, v: usize, local: &Local<Task>) -> Option<Task> {
            for from_inbox in [false, true] {
                loop {
                    let s = if from_inbox {
                        self.mailboxes[v].inbox.steal_batch_and_pop(local)
                    } else {
                        self.stealers[v].steal_batch_and_pop(local)
                    };
                    match s {
                        Steal::Success(t) => return Some(t),
                        Steal::Empty => break,
                        Steal::Retry => continue,
                    }
                }
            }
            None
        }
    }

    impl hwsched::idle_worker::Queues<Task> for Rt {
        fn has_work(&self, v: usize) -> bool {
            !self.stealers[v].is_empty() || !self.mailboxes[v].inbox.is_empty()
        }
        fn find_queued_work(&self, me: usize) -> Option<usize> {
            self.s.find_queued(&self.all, me, |v| self.has_work(v)).0
        }
        fn places(&self) -> Option<&hwsched::domain::DomainQueues<Task>> {
            self.domains.as_ref()
        }
    }

    /// An idle worker of a model, driven through the production idle
    /// sequence (`hwsched::idle_worker::idle`): its walk tries every other
    /// worker (`kicked_by` first), its wait parks on its condvar (no spin),
    /// and it records in `cases` how it found its work.
    pub struct Worker {
        pub rt: loom::sync::Arc<Rt>,
        pub me: usize,
        pub local: Local<Task>,
        pub searching: bool,
        pub queued_bit: bool,
        pub cases: Arc<Cases>,
        suspended: Option<hwsched::idle_worker::Suspended>,
        pending: bool,
        slept: bool,
    }

    impl Worker {
        /// Worker `me` of `rt`, with its deque.
        pub fn new(
            rt: loom::sync::Arc<Rt>,
            me: usize,
            local: Local<Task>,
            cases: Arc<Cases>,
        ) -> Worker {
            Worker {
                rt,
                me,
                local,
                searching: false,
                queued_bit: false,
                cases,
                suspended: None,
                pending: false,
                slept: false,
            }
        }

        /// One idle period (the production sequence): an item found, or
        /// `None` at shutdown.
        pub fn idle(&mut self) -> Option<Task> {
            let rt = self.rt.clone();
            match hwsched::idle_worker::idle(&*rt, self, |p| std::task::Poll::Ready(p.park())) {
                hwsched::idle_worker::Idle::Run(t) => Some(t),
                hwsched::idle_worker::Idle::Shutdown => None,
                hwsched::idle_worker::Idle::Suspended => {
                    unreachable!("a condvar park does not suspend")
                }
            }
        }

        /// The idle period until it finds an item; shutdown is not
        /// expected.
        pub fn idle_until_work(&mut self) -> Task {
            self.idle().expect("no shutdown in this model")
        }
    }

    impl hwsched::idle_worker::IdleWorker<Task> for Worker {
        fn index(&self) -> usize {
            self.me
        }
        fn parts(&mut self) -> (&Local<Task>, &mut bool, &mut bool) {
            (&self.local, &mut self.searching, &mut self.queued_bit)
        }
        fn walk(&mut self, kicked_by: Option<usize>) -> Option<Task> {
            let n = self.rt.all.len();
            for v in kicked_by.into_iter().chain(0..n) {
                if v != self.me {
                    if let Some(t) = self.rt.steal_from(v, &self.local) {
                        self.cases.hit("the walk found the item");
                        return Some(t);
                    }
                }
            }
            None
        }
        fn steal_from(&mut self, v: usize) -> Option<Task> {
            let t = self.rt.steal_from(v, &self.local);
            if t.is_some() && self.pending {
                self.cases
                    .hit("the last searcher's re-check found the item");
            }
            t
        }
        fn take_own(&mut self) -> Option<Task> {
            self.local.pop()
        }
        fn wait(
            &mut self,
            before_sleep: impl FnOnce() -> bool,
            sleep: impl FnOnce(&hwsched::park::Parker) -> std::task::Poll<bool>,
        ) -> hwsched::park::Wait<Task> {
            let res = self.rt.mailboxes[self.me].wait_with(
                &self.local,
                &self.rt.shutdown,
                || false,
                before_sleep,
                sleep,
            );
            if let hwsched::park::Wait::Work { .. } = res {
                self.cases.hit("the worker took the item from its inbox");
            }
            res
        }
        fn resume(
            &mut self,
            sleep: impl FnOnce(&hwsched::park::Parker) -> std::task::Poll<bool>,
        ) -> hwsched::park::Wait<Task> {
            self.rt.mailboxes[self.me].resume(&self.local, &self.rt.shutdown, sleep)
        }
        fn suspended(&mut self) -> &mut Option<hwsched::idle_worker::Suspended> {
            &mut self.suspended
        }
        fn count(&mut self, e: hwsched::idle_worker::Event) {
            use hwsched::idle_worker::Event;
            self.pending = e == Event::PendingSteal;
            match e {
                Event::Slept => self.slept = true,
                Event::PlacedPull if self.slept => {
                    self.cases.hit("slept, then took the placed task")
                }
                Event::PlacedPull => self.cases.hit("took the placed task without sleeping"),
                _ => {}
            }
        }
    }

    impl hwsched::handoff::Workers<Task> for Rt {
        fn sleepers(&self) -> &hwsched::idle::Sleepers {
            &self.s
        }
        fn mailbox(&self, w: usize) -> &hwsched::park::Mailbox<Task> {
            &self.mailboxes[w]
        }
        fn wake_spans(
            &self,
            _near: usize,
        ) -> impl Iterator<Item = &std::ops::Range<usize>> + Clone {
            std::iter::once(&self.all)
        }
        fn shutdown(&self) -> &loom::sync::atomic::AtomicBool {
            &self.shutdown
        }
        fn bury(&self, _t: Task) {
            panic!("no shutdown in this model");
        }
    }
}

#[cfg(loom)]
pub use imp::*;
