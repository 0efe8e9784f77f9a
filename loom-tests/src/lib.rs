//! Loom models of hwsched's concurrency protocols.
//!
//! The models live in `tests/`, one file per protocol; `README.md` beside
//! this crate lists each model and the production functions it calls, says
//! what loom cannot see, and holds the mutation table that
//! `scripts/mutate.sh` generates.
//!
//! The models drive production code: under `RUSTFLAGS="--cfg loom"`,
//! `hwsched::sync` swaps in loom's atomics, mutex and condvar, and the
//! folders of the protocols (`runtime`, `sched`, `task`, `worker`, and of
//! the I/O driver, which this crate enables with the `io` feature,
//! `io::poller_sleep` and `io::scheduled_io`) become public so a model can
//! call their functions. crossbeam's deques are not ours to
//! prove and are replaced (`src/sched/queue.rs`): a worker's deque by
//! a loom `Mutex<VecDeque>`, the inbox by a few loom `AtomicPtr` slots, so
//! that an empty steal synchronizes with nobody, as with crossbeam's
//! `Injector`, and a steal that loses its item to another taker reports
//! `Retry`, as crossbeam's does under contention.
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
//! [`Rt`], the runtime view the pusher's steps (`hwsched::sched::push`) take.

// Models run in --release for speed, but some invariants they exercise are
// `debug_assert!`s in hwsched (the counts of `sleepers::Sleepers`, the registry
// slots of `task.rs`): refuse to build a loom run that would silently skip
// them (tokio's loom tests do the same).
#[cfg(all(loom, not(debug_assertions)))]
compile_error!(
    "loom models need debug assertions: build with \
     RUSTFLAGS=\"--cfg loom -C debug-assertions\" (what `make test-loom` does)"
);

#[cfg(loom)]
mod imp {
    use hwsched::sched::queue::{Local, Steal, Stealer};
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

    /// As [`model`], at a preemption bound of at least `min`: for a model
    /// whose bug needs `min` preemptions to show (its doc says which), so
    /// that it is explored there whatever `LOOM_MAX_PREEMPTIONS` says.
    pub fn model_bound_at_least<F>(min: usize, f: F)
    where
        F: Fn() + Sync + Send + 'static,
    {
        let env = std::env::var("LOOM_MAX_PREEMPTIONS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(DEFAULT_MAX_PREEMPTIONS);
        let bound = env.max(min);
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = {
            let runs = runs.clone();
            move || {
                runs.fetch_add(1, SeqCst);
                f();
            }
        };
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(bound);
        b.max_branches = 20_000;
        b.check(counted);
        let name = std::thread::current().name().unwrap_or("model").to_owned();
        println!(
            "{name}: {} executions (preemption bound {bound})",
            runs.load(SeqCst)
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

    // A task of the model travels through a LIFO slot as a boxed pointer
    // (the runtime's `Runnable` is one pointer already).
    impl hwsched::sched::queue::OnePtr for Task {
        fn into_ptr(self) -> *mut () {
            Box::into_raw(Box::new(self)).cast()
        }
        unsafe fn from_ptr(p: *mut ()) -> Self {
            // SAFETY: `p` came from `into_ptr`'s `Box::into_raw`, turned
            // back once (the trait's contract).
            *unsafe { Box::from_raw(p.cast::<Task>()) }
        }
    }

    impl Drop for Task {
        fn drop(&mut self) {
            self.ledger.dropped[self.id].fetch_add(1, SeqCst);
        }
    }

    /// The runtime as `hwsched::sched::push`'s steps see it (its `Workers`
    /// view): `n` workers in one span, their mailboxes, the shutdown flag.
    /// Shared by the models that drive the pusher's steps.
    pub struct Rt {
        pub s: hwsched::sched::sleepers::Sleepers,
        pub mailboxes: Vec<hwsched::sched::park::Mailbox<Task>>,
        /// What other workers see of each worker's deque.
        pub stealers: Vec<Stealer<Task>>,
        /// Each worker's LIFO slot (`hwsched::sched::push::push_lifo`).
        pub lifos: Vec<hwsched::sched::queue::Slot<Task>>,
        pub all: std::ops::Range<usize>,
        pub shutdown: loom::sync::atomic::AtomicBool,
        /// Where tasks found after the shutdown flag are buried
        /// (`Workers::bury`, `Shared::bury`'s body).
        pub graveyard: hwsched::sched::shutdown::Graveyard<Task>,
        /// The model's bookkeeping (`std`, outside loom's view): set by a
        /// model's schedule path once its task passed `push::admit`,
        /// so that a burial after it is named the delivery's re-check.
        pub admitted: std::sync::atomic::AtomicBool,
        /// Set by [`Stop::shutdown`] once the production shutdown returned:
        /// a worker polling a task after it fails the model.
        pub stopped: std::sync::atomic::AtomicBool,
        /// Where burials are recorded, in the models that look.
        pub cases: std::sync::OnceLock<Arc<Cases>>,
        /// The place queues of the domains, if the model has any
        /// (`Rt::with_domains`).
        pub domains: Option<hwsched::sched::place_queue::DomainQueues<Task>>,
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
        /// the domains `spans` (`hwsched::sched::place_queue`: queue `i` is `spans[i]`'s
        /// when the spans differ).
        #[allow(clippy::single_range_in_vec_init)]
        pub fn with_domains(
            n: usize,
            spans: &[std::ops::Range<usize>],
        ) -> (loom::sync::Arc<Rt>, Vec<Local<Task>>) {
            let locals: Vec<Local<Task>> = (0..n).map(|_| Local::new()).collect();
            let domains = (!spans.is_empty())
                .then(|| hwsched::sched::place_queue::DomainQueues::new(n, spans).0);
            let rt = loom::sync::Arc::new(Rt {
                s: hwsched::sched::sleepers::Sleepers::new(n, &[0..n]),
                mailboxes: (0..n)
                    .map(|_| hwsched::sched::park::Mailbox::new())
                    .collect(),
                stealers: locals.iter().map(|l| l.stealer()).collect(),
                lifos: (0..n).map(|_| hwsched::sched::queue::Slot::new()).collect(),
                all: 0..n,
                shutdown: loom::sync::atomic::AtomicBool::new(false),
                graveyard: hwsched::sched::shutdown::Graveyard::new(),
                admitted: std::sync::atomic::AtomicBool::new(false),
                stopped: std::sync::atomic::AtomicBool::new(false),
                cases: std::sync::OnceLock::new(),
                domains,
            });
            (rt, locals)
        }

        /// Records case `name`, in a model that gave its cases.
        pub fn hit(&self, name: &str) {
            if let Some(c) = self.cases.get() {
                c.hit(name);
            }
        }

        /// Nothing is left queued in an inbox or the graveyard.
        pub fn assert_empty(&self) {
            for (w, m) in self.mailboxes.iter().enumerate() {
                assert!(
                    m.inbox.is_empty(),
                    "an item is stranded in worker {w}'s inbox"
                );
                assert!(
                    m.take_pinned().is_none(),
                    "an item is stranded in worker {w}'s pinned queue"
                );
            }
            assert!(
                self.graveyard.is_empty(),
                "an item is stranded in the graveyard"
            );
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

    impl hwsched::sched::idle_steps::Queues<Task> for Rt {
        fn has_work(&self, v: usize) -> bool {
            // As the runtime's: the re-checks count the LIFO slot too.
            !self.stealers[v].is_empty()
                || !self.mailboxes[v].inbox.is_empty()
                || !self.lifos[v].is_empty()
        }
        fn find_queued_work(&self, me: usize) -> Option<usize> {
            self.s.find_queued(&self.all, me, |v| self.has_work(v)).0
        }
        fn places(&self) -> Option<&hwsched::sched::place_queue::DomainQueues<Task>> {
            self.domains.as_ref()
        }
    }

    /// An idle worker of a model, driven through the production idle
    /// sequence (`hwsched::sched::idle_steps::idle`): its walk tries every other
    /// worker (`kicked_by` first), its wait parks on its condvar (no spin),
    /// and it records in `cases` how it found its work.
    pub struct Worker {
        pub rt: loom::sync::Arc<Rt>,
        pub me: usize,
        pub local: Local<Task>,
        pub searching: bool,
        pub queued_bit: bool,
        pub cases: Arc<Cases>,
        suspended: Option<hwsched::sched::idle_steps::Suspended>,
        pending: bool,
        /// Whether this worker's loop has seen the shutdown (its check at
        /// the top, or an idle period that ended with it): it must poll
        /// nothing more.
        saw_shutdown: std::cell::Cell<bool>,
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
                saw_shutdown: std::cell::Cell::new(false),
                slept: false,
            }
        }

        /// The worker's loop until shutdown, then its exit: each step is
        /// the production `hwsched::sched::shutdown::next` (the flag, then its own
        /// queues, then the idle sequence), each task found is given to
        /// `run` (which may push more onto `w.local`, as a task that spawns
        /// does), and the exit is `hwsched::sched::shutdown::exit`. Fails the
        /// model when a task is polled after this worker saw the shutdown,
        /// or after the production shutdown returned.
        pub fn run_until_shutdown(&mut self, mut run: impl FnMut(&mut Worker, Task)) {
            loop {
                match hwsched::sched::shutdown::next(self) {
                    hwsched::sched::idle_steps::Idle::Run(t) => {
                        assert!(
                            !self.saw_shutdown.get(),
                            "item {} polled after its worker saw the shutdown",
                            t.id()
                        );
                        assert!(
                            !self.rt.stopped.load(SeqCst),
                            "item {} polled after the shutdown returned",
                            t.id()
                        );
                        run(self, t);
                    }
                    hwsched::sched::idle_steps::Idle::Shutdown => break,
                    hwsched::sched::idle_steps::Idle::Suspended => {
                        unreachable!("a condvar park does not suspend")
                    }
                }
            }
            hwsched::sched::shutdown::exit(self);
        }

        /// One idle period (the production sequence): an item found, or
        /// `None` at shutdown.
        pub fn idle(&mut self) -> Option<Task> {
            let rt = self.rt.clone();
            match hwsched::sched::idle_steps::idle(&*rt, self, |p| std::task::Poll::Ready(p.park()))
            {
                hwsched::sched::idle_steps::Idle::Run(t) => Some(t),
                hwsched::sched::idle_steps::Idle::Shutdown => None,
                hwsched::sched::idle_steps::Idle::Suspended => {
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

    impl hwsched::sched::shutdown::Running<Task> for Worker {
        fn is_shutdown(&self) -> bool {
            // Relaxed: as `Shared::is_shutdown`.
            let s = self.rt.shutdown.load(loom::sync::atomic::Ordering::Relaxed);
            if s {
                self.saw_shutdown.set(true);
            }
            s
        }
        fn resuming(&self) -> bool {
            self.suspended.is_some()
        }
        /// Its deque, then a batch from its inbox (`Core::next_local`
        /// without the LIFO slot and the private batch, which the models
        /// do not have).
        fn next_own(&mut self) -> Option<Task> {
            if let Some(t) = self.local.pop() {
                return Some(t);
            }
            loop {
                match self.rt.mailboxes[self.me]
                    .inbox
                    .steal_batch_and_pop(&self.local)
                {
                    Steal::Success(t) => {
                        self.cases.hit("the worker took the item from its inbox");
                        return Some(t);
                    }
                    Steal::Empty => return None,
                    Steal::Retry => continue,
                }
            }
        }
        fn idle(&mut self) -> hwsched::sched::idle_steps::Idle<Task> {
            let rt = self.rt.clone();
            let cases = self.cases.clone();
            let res = hwsched::sched::idle_steps::idle(&*rt, self, |p| {
                let slept = p.park();
                if slept {
                    cases.hit("a worker slept");
                }
                std::task::Poll::Ready(slept)
            });
            if let hwsched::sched::idle_steps::Idle::Shutdown = res {
                self.saw_shutdown.set(true);
            }
            res
        }
    }

    impl hwsched::sched::shutdown::Exiting<Task> for Worker {
        fn take_held(&mut self) -> Option<Task> {
            self.local.pop()
        }
        fn drop_pinned(&mut self) {
            let m = &self.rt.mailboxes[self.me];
            m.drain_pinned(|t| {
                self.cases
                    .hit("dropped by the worker's exit (placed on it)");
                t.cancel();
            });
            while let Some(t) = m.take_local() {
                self.cases
                    .hit("dropped by the worker's exit (placed on it)");
                t.cancel();
            }
        }
        fn drop_task(&mut self, t: Task) {
            self.cases.hit("dropped by the worker's exit");
            t.cancel();
        }
    }

    impl hwsched::sched::idle_steps::IdleWorker<Task> for Worker {
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
            // As the runtime's pending steal: the deque, the inbox, then
            // the LIFO slot (the walk does not look there).
            let t = self.rt.steal_from(v, &self.local).or_else(|| {
                let t = self.rt.lifos[v].take();
                if t.is_some() {
                    self.cases
                        .hit("the re-check took the task from the LIFO slot");
                }
                t
            });
            if t.is_some() && self.pending {
                self.cases
                    .hit("the last searcher's re-check found the item");
            }
            t
        }
        fn take_own(&mut self) -> Option<Task> {
            self.rt.lifos[self.me].take().or_else(|| self.local.pop())
        }
        fn wait(
            &mut self,
            before_sleep: impl FnOnce() -> bool,
            sleep: impl FnOnce(&hwsched::sched::park::Parker) -> std::task::Poll<bool>,
        ) -> hwsched::sched::park::Wait<Task> {
            let res = self.rt.mailboxes[self.me].wait_with(
                &self.rt.shutdown,
                || false,
                before_sleep,
                sleep,
            );
            if let hwsched::sched::park::Wait::Work { slept, .. } = res {
                self.cases.hit("the worker took the item from its inbox");
                if slept {
                    self.cases.hit("the worker slept, then took the item");
                }
            }
            res
        }
        fn resume(
            &mut self,
            sleep: impl FnOnce(&hwsched::sched::park::Parker) -> std::task::Poll<bool>,
        ) -> hwsched::sched::park::Wait<Task> {
            self.rt.mailboxes[self.me].resume(&self.rt.shutdown, sleep)
        }
        fn suspended(&mut self) -> &mut Option<hwsched::sched::idle_steps::Suspended> {
            &mut self.suspended
        }
        fn count(&mut self, e: hwsched::sched::idle_steps::Event) {
            use hwsched::sched::idle_steps::Event;
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

    /// The runtime as the production shutdown sequence
    /// (`hwsched::sched::shutdown::shutdown`) sees it: [`Rt`], the workers'
    /// threads, a blocking pool (closures not yet started, which its close
    /// cancels, and running ones, which its wait joins), and what the
    /// final drain's wake of pending tasks does. Each drop the sequence
    /// makes is recorded in the cases: the inbox drain's, the reap loop's,
    /// and the last reap's (`Graveyard::close`).
    pub struct Stop {
        pub rt: loom::sync::Arc<Rt>,
        pub workers: Vec<loom::thread::JoinHandle<()>>,
        /// Blocking closures not yet started (each a ledger item).
        pub queued_closures: std::cell::RefCell<Vec<Task>>,
        /// Running blocking closures (their threads, until joined), and
        /// whether each returned.
        #[allow(clippy::type_complexity)]
        pub running_closures: std::cell::RefCell<
            Vec<(
                Option<loom::thread::JoinHandle<()>>,
                Arc<std::sync::atomic::AtomicBool>,
            )>,
        >,
        /// The registry's `close_and_wake_all`: wakes the tasks pending on
        /// a waker (a model's schedule path buries each).
        pub wake_waiting: std::cell::RefCell<Option<Box<dyn FnOnce()>>>,
        /// Called with each task the sequence drops, before it is
        /// cancelled (a model's `JoinHandle` resolving).
        #[allow(clippy::type_complexity)]
        pub on_cancel: Option<Box<dyn Fn(&Task)>>,
        cases: Arc<Cases>,
        drains: std::cell::Cell<usize>,
        reaped_at: std::cell::RefCell<Vec<usize>>,
    }

    impl Stop {
        /// The shutdown of `rt`, with no workers, pool or pending tasks
        /// yet; the sequence's drops (and `rt`'s burials) go to `cases`.
        pub fn new(rt: &loom::sync::Arc<Rt>, cases: &Arc<Cases>) -> Stop {
            let _ = rt.cases.set(cases.clone());
            Stop {
                rt: rt.clone(),
                workers: Vec::new(),
                queued_closures: Default::default(),
                running_closures: Default::default(),
                wake_waiting: Default::default(),
                on_cancel: None,
                cases: cases.clone(),
                drains: std::cell::Cell::new(0),
                reaped_at: Default::default(),
            }
        }

        /// A running blocking closure: a thread running `f`.
        pub fn spawn_closure(&self, f: impl FnOnce() + Send + 'static) {
            let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let h = {
                let finished = finished.clone();
                loom::thread::spawn(move || {
                    f();
                    finished.store(true, SeqCst);
                })
            };
            self.running_closures.borrow_mut().push((Some(h), finished));
        }

        /// Runs the production sequence (`hwsched::sched::shutdown::shutdown`),
        /// then checks that every worker and closure was joined, and marks
        /// the runtime stopped (a poll after this fails the model).
        pub fn shutdown(mut self) {
            let joined = hwsched::sched::shutdown::shutdown(&mut self);
            self.rt.stopped.store(true, SeqCst);
            assert!(joined, "the shutdown reports a thread it did not join");
            assert!(
                self.running_closures
                    .borrow()
                    .iter()
                    .all(|(_, f)| f.load(SeqCst)),
                "a running blocking closure outlived the shutdown"
            );
            for d in self.reaped_at.take() {
                self.cases.hit(if d == self.drains.get() {
                    "reaped by the last reap (close)"
                } else {
                    "reaped by the shutdown's loop"
                });
            }
        }

        fn cancel(&self, t: Task) {
            if let Some(f) = &self.on_cancel {
                f(&t);
            }
            t.cancel();
        }
    }

    impl hwsched::sched::shutdown::Stopping<Task> for Stop {
        fn flag(&self) -> &loom::sync::atomic::AtomicBool {
            &self.rt.shutdown
        }
        fn parkers(&self) -> impl Iterator<Item = &hwsched::sched::park::Parker> {
            self.rt.mailboxes.iter().map(|m| &m.parker)
        }
        fn close_blocking(&self) {
            for t in self.queued_closures.take() {
                self.cases
                    .hit("a queued blocking closure cancelled by the close");
                self.cancel(t);
            }
        }
        fn join_workers(&mut self) -> bool {
            for w in self.workers.drain(..) {
                w.join().unwrap();
            }
            true
        }
        fn graveyard(&self) -> &hwsched::sched::shutdown::Graveyard<Task> {
            &self.rt.graveyard
        }
        fn drain_inboxes(&self) -> usize {
            // A graveyard drop after the last call of this is
            // `Graveyard::close`'s (the loop ends with a drain that found
            // nothing, after a reap that found nothing).
            self.drains.set(self.drains.get() + 1);
            hwsched::sched::shutdown::drain_inboxes(self.rt.mailboxes.iter(), |t| {
                self.cases.hit("dropped by the shutdown's inbox drain");
                self.cancel(t);
            })
        }
        fn wake_waiting(&self) {
            if let Some(f) = self.wake_waiting.take() {
                f();
            }
        }
        fn wait_running(&self) -> bool {
            for (h, _) in self.running_closures.borrow_mut().iter_mut() {
                if let Some(h) = h.take() {
                    h.join().unwrap();
                }
            }
            true
        }
        fn drop_task(&self, t: Task) {
            self.reaped_at.borrow_mut().push(self.drains.get());
            self.cancel(t);
        }
    }

    impl hwsched::sched::push::Workers<Task> for Rt {
        fn sleepers(&self) -> &hwsched::sched::sleepers::Sleepers {
            &self.s
        }
        fn mailbox(&self, w: usize) -> &hwsched::sched::park::Mailbox<Task> {
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
        /// `Shared::bury`: `Graveyard::bury`, the burier reaping itself
        /// once the final drain closed the graveyard.
        fn bury(&self, t: Task) {
            self.hit(if self.admitted.load(SeqCst) {
                "buried by the waker's re-check"
            } else {
                "buried by schedule's early check"
            });
            self.graveyard.bury(t, |t| {
                self.hit("reaped by the burier itself");
                t.cancel();
            });
        }
    }
}

#[cfg(loom)]
pub use imp::*;
