//! Who is idle, who sleeps, and who wakes whom: the wake protocol's shared
//! state ([`Sleepers`]: the `searching` and `awake` counts, and the
//! `parked`, `idle` and `queued` sets, each a [`WorkerSet`]) and the claims
//! made on it. The protocol (its invariant, work conservation; its steps;
//! why no wake is lost; the orderings' chains 1-3) is in
//! src/sched/README.md, "The wake protocol".

use std::ops::Range;

use crossbeam_utils::CachePadded;

use crate::sync::{fence, spin_loop, AtomicU64, AtomicUsize, Ordering};

const AWAKE_MASK: usize = (1 << 32) - 1;
const SEARCHING_ONE: usize = 1 << 32;

/// What [`Sleepers::wake_specific`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum WakeSpecific {
    /// The worker was parked and is now claimed to search: notify it.
    Woken,
    /// Another wake is in flight (a worker searches): wake nobody.
    InFlight,
    /// The worker is awake already (it cleared its own bit).
    Awake,
}

/// A decoded [`Sleepers`] state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Workers looking for work to steal.
    pub searching: usize,
    /// Workers not parked.
    pub awake: usize,
}

impl Counts {
    fn of(v: usize) -> Counts {
        Counts {
            searching: v >> 32,
            awake: v & AWAKE_MASK,
        }
    }
}

/// A set of workers, one bit each, laid out so that each group given at
/// construction (a last-level cache) starts on its own cache-padded word:
/// workers of one LLC never share a cache line with another LLC's.
///
/// Every operation reads before it writes, so a bit already in the wanted
/// state costs a load, not an RMW.
#[derive(Debug)]
pub struct WorkerSet {
    words: Box<[CachePadded<AtomicU64>]>,
    /// Word and bit of each worker.
    pos: Box<[(u32, u8)]>,
    /// First worker of each word.
    base: Box<[usize]>,
}

impl WorkerSet {
    /// An empty set of `n` workers; each of `groups` (contiguous spans,
    /// normally the LLCs) starts a new word. Spans of over 64 workers take
    /// several words.
    pub fn new(n: usize, groups: &[Range<usize>]) -> Self {
        let starts: Vec<usize> = groups.iter().map(|g| g.start).collect();
        let mut pos = vec![(0u32, 0u8); n];
        let mut base: Vec<usize> = Vec::new();
        for (w, p) in pos.iter_mut().enumerate() {
            let full = base.last().is_some_and(|&b| w - b == 64);
            if base.is_empty() || full || starts.contains(&w) {
                base.push(w);
            }
            let b = *base.last().expect("a word was started");
            *p = ((base.len() - 1) as u32, (w - b) as u8);
        }
        WorkerSet {
            words: base
                .iter()
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            pos: pos.into_boxed_slice(),
            base: base.into_boxed_slice(),
        }
    }

    fn at(&self, w: usize) -> (&AtomicU64, u64) {
        let (word, bit) = self.pos[w];
        (&self.words[word as usize], 1u64 << bit)
    }

    /// Whether `w` is in the set. `Relaxed`: a hint (see each caller).
    pub fn contains(&self, w: usize) -> bool {
        let (word, bit) = self.at(w);
        word.load(Ordering::Relaxed) & bit != 0
    }

    /// Adds `w` with `order` (read before write: no RMW when present).
    pub fn insert(&self, w: usize, order: Ordering) {
        let (word, bit) = self.at(w);
        if word.load(Ordering::Relaxed) & bit == 0 {
            word.fetch_or(bit, order);
        }
    }

    /// Adds `w` with an RMW even if it looks present (an RMW is needed to
    /// order what precedes it with a reader's RMW on the same word).
    pub fn insert_rmw(&self, w: usize, order: Ordering) {
        let (word, bit) = self.at(w);
        word.fetch_or(bit, order);
    }

    /// Removes `w`; returns whether this call removed it (it was present).
    pub fn remove(&self, w: usize, order: Ordering) -> bool {
        let (word, bit) = self.at(w);
        word.load(Ordering::Relaxed) & bit != 0 && word.fetch_and(!bit, order) & bit != 0
    }

    /// Removes `w` with an RMW even if it looks absent; returns whether it
    /// was present (the RMW reads the latest value).
    pub fn remove_rmw(&self, w: usize, order: Ordering) -> bool {
        let (word, bit) = self.at(w);
        word.fetch_and(!bit, order) & bit != 0
    }

    /// The first member of `span` at or after `from` (wrapping inside the
    /// span), looking at most `max` workers away, reading words with
    /// `order`. Returns it and the number of words read.
    pub fn find(
        &self,
        span: &Range<usize>,
        from: usize,
        max: usize,
        order: Ordering,
        skip: Option<usize>,
    ) -> (Option<usize>, usize) {
        if span.is_empty() || max == 0 {
            return (None, 0);
        }
        let from = if span.contains(&from) {
            from
        } else {
            span.start
        };
        let max = max.min(span.len());
        let first = from..(from + max).min(span.end);
        let rest = max - first.len();
        let second = span.start..(span.start + rest).min(from);
        let mut words = 0;
        for seg in [first, second] {
            let (found, n) = self.find_in(seg, order, skip);
            words += n;
            if found.is_some() {
                return (found, words);
            }
        }
        (None, words)
    }

    /// The first member of the contiguous range `seg` (other than `skip`).
    fn find_in(
        &self,
        seg: Range<usize>,
        order: Ordering,
        skip: Option<usize>,
    ) -> (Option<usize>, usize) {
        self.scan(seg, order, skip, |_| true)
    }

    /// Calls `f` on each member of the contiguous range `seg` other than
    /// `skip`, in worker order, reading each word once with `order`, until
    /// `f` returns `true`; returns that member and the words read.
    pub fn scan(
        &self,
        seg: Range<usize>,
        order: Ordering,
        skip: Option<usize>,
        mut f: impl FnMut(usize) -> bool,
    ) -> (Option<usize>, usize) {
        let mut w = seg.start;
        let mut words = 0;
        while w < seg.end {
            let (wi, bit) = self.pos[w];
            let base = self.base[wi as usize];
            // Workers of this word inside the segment: bits bit..bit+k (a
            // word's workers are contiguous and end where the next word's
            // begin).
            let word_end = self
                .base
                .get(wi as usize + 1)
                .copied()
                .unwrap_or(self.pos.len());
            let k = seg.end.min(word_end) - w;
            let mask = if k >= 64 {
                u64::MAX
            } else {
                ((1u64 << k) - 1) << bit
            };
            let mut v = self.words[wi as usize].load(order) & mask;
            words += 1;
            if let Some(s) = skip {
                if (w..w + k).contains(&s) {
                    v &= !(1u64 << self.pos[s].1);
                }
            }
            while v != 0 {
                let x = base + v.trailing_zeros() as usize;
                if f(x) {
                    return (Some(x), words);
                }
                v &= v - 1;
            }
            w += k;
        }
        (None, words)
    }

    /// Whether any worker of `span` is in the set, reading `Relaxed` (a
    /// hint): one load when the span lies in one word (an LLC of up to 64
    /// workers: each LLC starts a word), else [`any`](Self::any).
    #[inline]
    pub fn any_in(&self, span: &Range<usize>) -> bool {
        match self.word_of(span) {
            Some(wm) => self.any_of(wm),
            None => !span.is_empty() && self.any(span, Ordering::Relaxed, None).0,
        }
    }

    /// The word and mask of `span` when it lies in one word (an LLC of up to
    /// 64 workers), for [`any_of`](Self::any_of): computed once, read on
    /// every wake.
    pub fn word_of(&self, span: &Range<usize>) -> Option<(usize, u64)> {
        if span.is_empty() {
            return None;
        }
        let (w0, b0) = self.pos[span.start];
        let (w1, b1) = self.pos[span.end - 1];
        (w0 == w1).then(|| (w0 as usize, (u64::MAX >> (63 - (b1 - b0) as u32)) << b0))
    }

    /// Whether any worker of a [`word_of`](Self::word_of) is in the set:
    /// one `Relaxed` load (a hint).
    #[inline]
    pub fn any_of(&self, (word, mask): (usize, u64)) -> bool {
        self.words[word].load(Ordering::Relaxed) & mask != 0
    }

    /// Whether any member other than `skip` is in `span`, reading with
    /// `order`; and the number of words read.
    pub fn any(&self, span: &Range<usize>, order: Ordering, skip: Option<usize>) -> (bool, usize) {
        let (f, n) = self.find_in(span.clone(), order, skip);
        (f.is_some(), n)
    }

    /// Finds and removes a member of `span`, nearest at or after `from`
    /// (wrapping). Returns it and the words read.
    pub fn take(
        &self,
        span: &Range<usize>,
        from: usize,
        order: Ordering,
    ) -> (Option<usize>, usize) {
        let mut words = 0;
        loop {
            let (f, n) = self.find(span, from, span.len(), Ordering::Relaxed, None);
            words += n;
            match f {
                None => return (None, words),
                Some(w) => {
                    if self.remove(w, order) {
                        return (Some(w), words);
                    }
                    // Someone else took it first: look again.
                }
            }
        }
    }
}

/// The shared idle state of a runtime: the counts, and the `parked`,
/// `idle` and `queued` sets. See src/sched/README.md, "The wake protocol".
#[derive(Debug)]
pub struct Sleepers {
    state: CachePadded<AtomicUsize>,
    workers: usize,
    /// Workers that announced sleep and were not claimed since.
    pub parked: WorkerSet,
    /// Workers running no task (placement's idle mask; a hint).
    pub idle: WorkerSet,
    /// Workers whose deque or inbox may hold stealable work.
    pub queued: WorkerSet,
}

impl Sleepers {
    /// State for `workers` workers, all awake and busy; `llcs` partition
    /// them (each LLC's bits start a new cache line).
    pub fn new(workers: usize, llcs: &[Range<usize>]) -> Self {
        Sleepers {
            state: CachePadded::new(AtomicUsize::new(workers)),
            workers,
            parked: WorkerSet::new(workers, llcs),
            idle: WorkerSet::new(workers, llcs),
            queued: WorkerSet::new(workers, llcs),
        }
    }

    /// The counts now (`Relaxed`: for stats and tests).
    pub fn counts(&self) -> Counts {
        Counts::of(self.state.load(Ordering::Relaxed))
    }

    /// Becomes a searcher unless half the workers already search (tokio's
    /// cap: more searchers would only contend on the same victims).
    /// Returns whether it did.
    pub fn to_searching(&self) -> bool {
        let c = Counts::of(self.state.load(Ordering::Relaxed));
        if 2 * c.searching >= self.workers.max(2) {
            return false;
        }
        // ORDERING: SeqCst, but Relaxed would do. The increment publishes
        // nothing and acquires nothing: a pusher that reads it defers its
        // wake to this searcher, and what makes that safe is the fence this
        // worker makes when it stops searching as the last searcher
        // (`leave_searching`, `to_parked`: README, wake protocol, "Orderings"). The
        // release sequences of chain 1 run through RMWs of any ordering.
        self.state.fetch_add(SEARCHING_ONE, Ordering::SeqCst);
        true
    }

    /// Stops searching (work was found). Returns whether this was the last
    /// searcher: then the caller must wake another worker if work is still
    /// queued anywhere ([`Sleepers::needs_wake`] then `wake_one`), because
    /// pushers may have counted on it.
    pub fn leave_searching(&self) -> bool {
        // ORDERING: SeqCst, but Relaxed would do: the store-buffering with
        // the pushers' fences is carried by the fence below (README,
        // "Orderings": this RMW comes after the value any pusher that
        // counted on this searcher loaded, so the fence after it comes
        // after the pusher's). The decrement follows this worker's own
        // increment in the modification order (program order, or chain 2
        // when a claim made it a searcher), so the count cannot underflow.
        let prev = Counts::of(self.state.fetch_sub(SEARCHING_ONE, Ordering::SeqCst));
        debug_assert!(prev.searching > 0, "leave_searching without a searcher");
        let last = prev.searching == 1;
        if last {
            // Pairs with the pushers' fences in `needs_wake`
            // (store-buffering): the caller's re-check of the queues after
            // it sees every push whose check saw this searcher.
            fence(Ordering::SeqCst);
        }
        last
    }

    /// The pusher's check: no searcher, and someone parked? `fence(SeqCst)`
    /// first, so that the caller's push is ordered before this load against
    /// the last searcher's decrement and re-check (README, "Why no wake is lost").
    pub fn needs_wake(&self) -> bool {
        fence(Ordering::SeqCst);
        // SeqCst, but Relaxed would do: the store-buffering argument rests
        // on the fences (a relaxed load after a SeqCst fence sees every
        // store before a fence that precedes ours in the fences' total
        // order). A plain load on x86 either way.
        let c = Counts::of(self.state.load(Ordering::SeqCst));
        c.searching == 0 && c.awake < self.workers
    }

    /// Claims one parked worker to search: `searching += 1` and
    /// `awake += 1` in one CAS (only while nobody searches and somebody is
    /// parked: at most one wake in flight), then takes the `parked` bit
    /// nearest to the work, trying `near` spans in order (the caller passes
    /// the topology's levels around the busy worker, nearest first, the
    /// last one covering every worker). Returns the worker to notify, and
    /// the bitmap words read; `None` when nobody needs waking.
    ///
    /// If no bit is found (the worker counted parked counted itself awake
    /// and cleared its bit since the claim), the claim is undone, and
    /// because pushers may have skipped their wake while it stood, the
    /// check is made again; it goes round again only if another worker
    /// parked meanwhile (README, "Why no wake is lost").
    pub fn wake_one<'a>(
        &self,
        near: usize,
        spans: impl Iterator<Item = &'a Range<usize>> + Clone,
    ) -> (Option<usize>, usize) {
        let mut words = 0;
        // SeqCst, but Relaxed would do: every caller has just made the
        // pusher's check (`needs_wake`: fence, load) on this thread, so by
        // read-read coherence this load sees that value or a later one, and
        // a later one that shows a searcher, or nobody parked, is a state in
        // which the protocol owes no wake (README); a stale value only
        // fails the CAS below, which reads the latest.
        let mut cur = self.state.load(Ordering::SeqCst);
        loop {
            let c = Counts::of(cur);
            if c.searching != 0 || c.awake >= self.workers {
                return (None, words);
            }
            // ORDERING: acquire needed (chain 1, README "Orderings"): it
            // reads a value at or after the decrement of every worker it
            // counts parked, each released after that worker set its bit,
            // so the take below finds the bit. (Without it the fence after
            // the undo would acquire the decrement, and the next lap find
            // the bit.) Release is not needed: the take's clear releases
            // the claim to the woken worker (chain 2). Failure: Relaxed
            // would do (the loop only retries with the value read). SeqCst
            // kept: one `lock cmpxchg` on x86 either way.
            if let Err(v) = self.state.compare_exchange_weak(
                cur,
                cur + SEARCHING_ONE + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                cur = v;
                continue;
            }
            for span in spans.clone() {
                // ORDERING: the clear needs release (chain 2: the woken
                // worker's `leave_parked` acquires the claim through it);
                // its acquire is not needed. The scan's loads are Relaxed:
                // the CAS acquired the bits (chain 1).
                let (w, n) = self.parked.take(span, near, Ordering::SeqCst);
                words += n;
                if let Some(w) = w {
                    return (Some(w), words);
                }
            }
            // Nobody to take: undo the claim, then check again (a worker
            // that announced sleep while the claim stood skipped its
            // re-check because of it). ORDERING: SeqCst, but Relaxed would
            // do: the load below reads this undo or a later value by
            // coherence, whatever the orderings, and the undo publishes
            // nothing.
            self.state.fetch_sub(SEARCHING_ONE + 1, Ordering::SeqCst);
            // Acquire needed (chain 3): the take read the clear of the bit
            // of a worker that woke by itself; that clear was released
            // after the worker counted itself awake, and this fence
            // acquires it, so the load below shows the worker awake and
            // the loop does not go round for it. The store-buffering with
            // the pushers is not this fence's (README, "Orderings");
            // SeqCst kept: this path is rare (a claim that lost its worker).
            fence(Ordering::SeqCst);
            spin_loop();
            // SeqCst, but Relaxed would do: after the fence, and it reads
            // the undo or later (coherence).
            cur = self.state.load(Ordering::SeqCst);
        }
    }

    /// Wakes parked worker `w` (chosen by wake placement) as the one wake
    /// in flight: like [`wake_one`](Self::wake_one), but for this worker.
    /// `searching += 1` and `awake += 1` only while nobody searches; then
    /// `w`'s bit is taken. If `w` woke by itself first, the claim is undone
    /// (and the caller delivers to `w`, which is awake, with the pusher's
    /// check).
    pub fn wake_specific(&self, w: usize) -> WakeSpecific {
        // SeqCst, but Relaxed would do: a stale value that shows a searcher
        // returns `InFlight`, and the caller then queues the task with the
        // pusher's check (`needs_wake`), which decides afresh; one that
        // shows none only fails the CAS below, which reads the latest.
        let mut cur = self.state.load(Ordering::SeqCst);
        loop {
            if Counts::of(cur).searching != 0 {
                return WakeSpecific::InFlight;
            }
            // ORDERING: SeqCst, but Relaxed would do: unlike `wake_one`'s,
            // this claim needs no acquire, because the bit is then taken by
            // an RMW, which reads the latest value of the bitmap word
            // whatever the orderings; and the clear releases the claim
            // (chain 2).
            match self.state.compare_exchange_weak(
                cur,
                cur + SEARCHING_ONE + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => break,
                Err(v) => cur = v,
            }
        }
        // ORDERING: release needed (chain 2: `w`'s `leave_parked` acquires
        // the claim through this clear). Acquire not needed: when `w`
        // cleared its bit first, the caller's pusher check (fence, load)
        // decides afresh, and a stale view of `w` as parked costs at most a
        // claim that `wake_one` undoes.
        if self.parked.remove_rmw(w, Ordering::SeqCst) {
            WakeSpecific::Woken
        } else {
            // `w` is awake: undo. Pushers that skipped their wake while the
            // claim stood are covered by the caller's delivery to `w`,
            // which runs the pusher's check (its fence, then a load that
            // reads this undo or later). ORDERING: SeqCst, but Relaxed
            // would do: that check's fence, not this RMW, orders it.
            self.state.fetch_sub(SEARCHING_ONE + 1, Ordering::SeqCst);
            WakeSpecific::Awake
        }
    }

    /// Claims a parked worker of `span` for work only the workers of
    /// `span` may take (a domain's queue: sched/place_queue.rs), whether or not a
    /// worker searches elsewhere: a searcher outside `span` cannot take
    /// that work. The claim is [`wake_specific`](Self::wake_specific)'s
    /// (`searching += 1`, `awake += 1` in one CAS, while somebody is
    /// counted parked; then a bit taken by an RMW), for the parked worker
    /// of `span` nearest at or after `near`; the woken worker starts out
    /// searching. Call after a `fence(SeqCst)` (the domain check's).
    /// Returns the worker to notify; `None` when no worker of `span` is
    /// parked. If the bits found are gone when taken (those workers woke
    /// by themselves), the claim is undone and `on_undo` runs: pushers
    /// may have skipped their wake while the claim counted a searcher, so
    /// the caller makes the pusher's check again.
    pub fn wake_in(
        &self,
        span: &Range<usize>,
        near: usize,
        on_undo: impl FnOnce(),
    ) -> Option<usize> {
        // A look first (Relaxed, after the caller's fence: a bit set
        // before a re-checker's fence that precedes the caller's is seen):
        // no parked worker in the span, no claim.
        if !self.parked.any(span, Ordering::Relaxed, None).0 {
            return None;
        }
        // SeqCst, but Relaxed would do: a stale value only fails the CAS.
        let mut cur = self.state.load(Ordering::SeqCst);
        loop {
            if Counts::of(cur).awake >= self.workers {
                // Nobody counted parked: the worker whose bit was seen has
                // not counted itself parked yet, and its re-check comes
                // after its decrement and fence, after the caller's fence
                // (or the caller's load would show the decrement): it
                // sees the work.
                return None;
            }
            // ORDERING: SeqCst, but Relaxed would do, as in
            // `wake_specific`: the bit is then taken by an RMW, which
            // reads the latest value of the word, and its clear releases
            // the claim (chain 2).
            match self.state.compare_exchange_weak(
                cur,
                cur + SEARCHING_ONE + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => break,
                Err(v) => cur = v,
            }
        }
        // ORDERING: the clear needs release (chain 2), as in `wake_one`.
        if let (Some(w), _) = self.parked.take(span, near, Ordering::SeqCst) {
            return Some(w);
        }
        // Nobody left to take: undo. ORDERING: SeqCst, but Relaxed would
        // do (as in `wake_one`); the caller's pusher's check has its own
        // fence.
        self.state.fetch_sub(SEARCHING_ONE + 1, Ordering::SeqCst);
        // Then the caller's `on_undo` (the global pusher's check): while
        // the claim stood it counted a searcher, so a global push meanwhile
        // skipped its wake, and the worker whose bit was seen, leaving its
        // wait by itself, may have been refused as a searcher by that
        // count, or have stopped searching as not the last searcher (no
        // re-check); after the undo nobody may search for that push's
        // task (loom: `domain_handover.rs`,
        // `an_undone_claim_makes_the_pushers_check_again`).
        on_undo();
        None
    }

    /// Announces that worker `w` goes to sleep: its `parked` bit, then
    /// `awake -= 1` (and `searching -= 1` when it searched) in one RMW.
    /// Returns whether no worker searches any more: the caller must then
    /// re-check the `queued` set (after the fence this makes) before it
    /// sleeps. This holds for a worker that did not search too: it could
    /// not because of the cap, the searchers have left since, and a pusher
    /// that saw them (or saw this worker still awake) sent no wake.
    pub fn to_parked(&self, w: usize, searching: bool) -> bool {
        // ORDERING: SeqCst, but Relaxed would do: the decrement below
        // releases the bit (chain 1), and this worker's bit is clear here
        // (its own `leave_parked`, or a waker's clear that its
        // `leave_parked` acquired), so there is nothing to acquire.
        self.parked.insert_rmw(w, Ordering::SeqCst);
        let d = 1 + if searching { SEARCHING_ONE } else { 0 };
        // ORDERING: release needed (chain 1: the bit set above is visible
        // to a claim that reads this decrement or later). Acquire not
        // needed. The store-buffering with the pushers is the fence's.
        let prev = Counts::of(self.state.fetch_sub(d, Ordering::SeqCst));
        debug_assert!(prev.awake > 0, "to_parked: no worker was awake");
        debug_assert!(
            !searching || prev.searching > 0,
            "to_parked: searching without a searcher counted"
        );
        let none_left = prev.searching == usize::from(searching);
        if none_left {
            // Pairs with the pushers' fences in `needs_wake`
            // (store-buffering): the caller's re-check of `queued` after it
            // sees every push whose check saw this worker awake or a
            // searcher that has left since.
            fence(Ordering::SeqCst);
        }
        none_left
    }

    /// Worker `w` is awake again (woken, or it decided not to sleep).
    /// Returns whether a waker had claimed it: the claim then counted it
    /// awake and searching.
    ///
    /// It counts itself awake *before* it clears its bit, so that it is
    /// never counted parked without its bit (a claim made then would find
    /// no bit, and its waker would spin until the count came); if a waker
    /// cleared the bit first, the count is taken back.
    pub fn leave_parked(&self, w: usize) -> bool {
        // ORDERING: SeqCst, but Relaxed would do: released by the clear
        // below (chain 3).
        let prev = Counts::of(self.state.fetch_add(1, Ordering::SeqCst));
        debug_assert!(
            prev.awake < self.workers || prev.searching > 0,
            "leave_parked: every worker counted awake, and no claim"
        );
        // ORDERING: acquire and release needed. Release (chain 3): a waker
        // whose take reads this clear sees the count above. Acquire (chain
        // 2): when a waker cleared the bit first, this reads its clear and
        // acquires its claim, so the decrements below and this worker's
        // leaving searching come after the claim's increments. An RMW: of
        // this worker and one claimer, exactly one clears the bit.
        if self.parked.remove_rmw(w, Ordering::SeqCst) {
            false
        } else {
            // Claimed: the claim counted this worker awake; take our count
            // back. ORDERING: SeqCst, but Relaxed would do: it follows the
            // claim (chain 2), and it publishes nothing.
            let prev = Counts::of(self.state.fetch_sub(1, Ordering::SeqCst));
            debug_assert!(
                prev.awake > 0 && prev.searching > 0,
                "leave_parked: claimed, but the claim is not counted"
            );
            true
        }
    }
}

impl Sleepers {
    /// Claims an idle worker that is not parked (walking or spinning: a
    /// push reaches it without a futex wake), scanning every word once from
    /// worker `from`. `Relaxed`: a placement hint, like the kernel's idle
    /// mask; the delivery that follows goes through the parker.
    pub fn claim_awake_idle(&self, from: usize) -> Option<usize> {
        let n = self.workers;
        if n == 0 {
            return None;
        }
        let words = self.idle.words.len();
        let first = self.idle.pos[from % n].0 as usize;
        for i in 0..words {
            let wi = (first + i) % words;
            let mut v = self.idle.words[wi].load(Ordering::Relaxed)
                & !self.parked.words[wi].load(Ordering::Relaxed);
            while v != 0 {
                let w = self.idle.base[wi] + v.trailing_zeros() as usize;
                if self.idle.remove(w, Ordering::Relaxed) {
                    return Some(w);
                }
                v &= v - 1;
            }
        }
        None
    }

    /// Calls `f` on each member of `queued` in `span` other than `skip`,
    /// reading words with `SeqCst` (after the caller's fence), until `f`
    /// returns `true`; returns that member and the words read.
    ///
    /// ORDERING: `SeqCst`, but `Relaxed` would do. A re-check
    /// (`leave_searching`, `to_parked`) calls this after its `SeqCst`
    /// fence, and a pusher sets its `queued` bit before its own fence
    /// (`needs_wake`): when the pusher's fence comes first in the fences'
    /// total order, every load after the re-checker's fence, relaxed or
    /// not, reads the bit or a later value of the word (and `f`'s look at
    /// the queue sees the push the same way); when it comes second, the
    /// pusher's check sees the re-checker's decrement. The walk's scans
    /// (policy/balance.rs) are hints that nothing counts on. A plain load on x86
    /// either way.
    pub fn find_queued(
        &self,
        span: &Range<usize>,
        skip: usize,
        f: impl FnMut(usize) -> bool,
    ) -> (Option<usize>, usize) {
        self.queued
            .scan(span.clone(), Ordering::SeqCst, Some(skip), f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn any_in_reads_exactly_the_span_in_one_word_or_many() {
        // Two LLCs: 0..5 (one word) and 5..150 (three words: 64+64+17).
        let s = WorkerSet::new(150, &[0..5, 5..150]);
        assert!(!s.any_in(&(0..5)) && !s.any_in(&(5..150)) && !s.any_in(&(0..0)));
        s.insert(4, Ordering::Relaxed);
        assert!(s.any_in(&(0..5)) && s.any_in(&(4..5)) && !s.any_in(&(0..4)));
        assert!(!s.any_in(&(5..150)), "another LLC's word");
        // Only a worker beyond the LLC's first word.
        s.insert(140, Ordering::Relaxed);
        assert!(s.any_in(&(5..150)) && s.any_in(&(140..141)));
        assert!(!s.any_in(&(5..69)) && !s.any_in(&(141..150)));
        s.remove(140, Ordering::Relaxed);
        s.insert(68, Ordering::Relaxed);
        assert!(s.any_in(&(5..150)) && s.any_in(&(68..69)) && !s.any_in(&(69..133)));
    }

    #[test]
    fn state_word_layout() {
        let v = 3 * SEARCHING_ONE + 17;
        assert_eq!(
            Counts::of(v),
            Counts {
                searching: 3,
                awake: 17
            }
        );
    }

    #[test]
    fn worker_set_starts_each_group_on_a_new_word() {
        let s = WorkerSet::new(10, &[0..3, 3..10]);
        assert_eq!(s.words.len(), 2);
        assert_eq!(s.pos[3], (1, 0));
        s.insert(4, Ordering::Relaxed);
        s.insert(1, Ordering::Relaxed);
        assert!(s.contains(4) && s.contains(1) && !s.contains(3));
        // Scan 3..10 from 5, wrapping: finds 4 last.
        assert_eq!(s.find(&(3..10), 5, 7, Ordering::Relaxed, None).0, Some(4));
        assert_eq!(s.find(&(3..10), 5, 6, Ordering::Relaxed, None).0, None);
        assert_eq!(s.find(&(0..10), 2, 10, Ordering::Relaxed, None).0, Some(4));
        assert_eq!(s.find(&(0..10), 5, 10, Ordering::Relaxed, None).0, Some(1));
        assert_eq!(
            s.find(&(0..10), 2, 10, Ordering::Relaxed, Some(4)).0,
            Some(1)
        );
        assert!(s.remove(4, Ordering::Relaxed));
        assert!(!s.remove(4, Ordering::Relaxed));
        assert_eq!(s.take(&(0..10), 0, Ordering::Relaxed).0, Some(1));
        assert_eq!(s.take(&(0..10), 0, Ordering::Relaxed).0, None);
    }

    #[test]
    fn worker_set_spans_of_more_than_64() {
        let s = WorkerSet::new(200, &[0..130, 130..200]);
        assert_eq!(s.words.len(), 5, "0..130 takes three words, 130..200 two");
        for w in [0, 63, 64, 129, 130, 199] {
            s.insert(w, Ordering::Relaxed);
        }
        let mut seen = Vec::new();
        while let (Some(w), _) = s.take(&(0..200), 0, Ordering::Relaxed) {
            seen.push(w);
        }
        assert_eq!(seen, vec![0, 63, 64, 129, 130, 199]);
        s.insert(129, Ordering::Relaxed);
        let (f, words) = s.find(&(0..130), 100, 130, Ordering::Relaxed, None);
        assert_eq!(f, Some(129));
        assert_eq!(words, 2, "100..128 and 128..130 are two words");
    }

    /// One LLC of 96 workers (`pack:1 l3:1 core:96 pu:1`): its bits take
    /// two words. Members only in the second word must be found by every
    /// scan that starts in the first: `find`, `scan`, `any`, `take`, and
    /// `find` wrapping round to them. Word 0 is kept empty, so that a scan
    /// that reads only the first word, or reads word 0 in place of word 1,
    /// finds nothing (or a member that is not there) and the assertions
    /// fail rather than `take` looping.
    #[test]
    fn worker_set_scans_reach_the_second_word_of_one_span() {
        let all = 0..96;
        let s = WorkerSet::new(96, std::slice::from_ref(&all));
        assert_eq!(s.words.len(), 2, "96 workers of one LLC take two words");
        assert_eq!(s.pos[64], (1, 0));
        assert_eq!(s.find(&all, 0, 96, Ordering::Relaxed, None).0, None);
        for w in [66, 80, 95] {
            s.insert(w, Ordering::Relaxed);
        }
        assert_eq!(s.find(&all, 3, 96, Ordering::Relaxed, None).0, Some(66));
        assert_eq!(s.find(&all, 70, 96, Ordering::Relaxed, None).0, Some(80));
        assert_eq!(s.find(&all, 81, 96, Ordering::Relaxed, None).0, Some(95));
        // A span that ends inside the second word: 10..80 holds 66.
        assert_eq!(
            s.find(&(0..80), 10, 70, Ordering::Relaxed, None).0,
            Some(66)
        );
        assert_eq!(s.find(&all, 86, 96, Ordering::Relaxed, None).0, Some(95));
        s.remove(95, Ordering::Relaxed);
        // From 86 the first segment (86..96) is empty: the wrap (0..86)
        // crosses from word 0 into word 1 and finds 66.
        assert_eq!(s.find(&all, 86, 96, Ordering::Relaxed, None).0, Some(66));
        s.insert(95, Ordering::Relaxed);
        let (any, words) = s.any(&all, Ordering::Relaxed, None);
        assert!(any, "any() over 0..96 misses members of the second word");
        assert_eq!(words, 2, "any() over 0..96 reads both words");
        assert_eq!(s.any(&(0..64), Ordering::Relaxed, None), (false, 1));
        let mut seen = Vec::new();
        let (none, words) = s.scan(all.clone(), Ordering::Relaxed, Some(80), |w| {
            seen.push(w);
            false
        });
        assert_eq!((none, words), (None, 2));
        assert_eq!(seen, vec![66, 95], "scan over both words, skipping 80");
        let mut taken = Vec::new();
        while let (Some(w), _) = s.take(&all, 0, Ordering::Relaxed) {
            taken.push(w);
            assert!(
                taken.len() <= 3,
                "take found {taken:?}: more than were put in"
            );
        }
        assert_eq!(taken, vec![66, 80, 95]);
    }

    /// The wake protocol over that LLC when every worker of the first word
    /// is busy and only workers of the second are parked or idle: the
    /// claim finds a parked worker of the second word from any `near`, the
    /// re-check's `find_queued` sees a queue of the second word, and an
    /// external spawn's `claim_awake_idle` from the first word reaches an
    /// idle worker of the second.
    #[test]
    fn sleepers_find_workers_of_the_second_word() {
        let all = 0..96;
        let s = Sleepers::new(96, std::slice::from_ref(&all));
        for w in [70, 90] {
            s.idle.insert(w, Ordering::Relaxed);
            assert!(s.to_parked(w, false), "no searcher: re-check");
        }
        assert!(s.needs_wake());
        // What the claim's take will scan (checked first: `wake_one` would
        // go round forever if its take found no bit).
        assert_eq!(
            s.parked.find(&all, 5, 96, Ordering::Relaxed, None).0,
            Some(70),
            "a scan from worker 5 misses the parked workers of the second word"
        );
        let (w, words) = s.wake_one(5, std::iter::once(&all));
        assert_eq!(w, Some(70), "the parked worker nearest after 5");
        assert!(words >= 2, "the claim read {words} words for a span of two");
        assert!(s.leave_parked(70), "woken by the claim");
        assert!(s.leave_searching());
        // From 91 nothing is parked up to the end of the span: the search
        // wraps round to 0..91, from the first word into the second.
        assert!(s.to_parked(70, false));
        assert_eq!(
            s.parked.find(&all, 91, 96, Ordering::Relaxed, None).0,
            Some(70),
            "a scan from worker 91 does not wrap round to the parked workers"
        );
        assert_eq!(s.wake_one(91, std::iter::once(&all)).0, Some(70));
        assert!(s.leave_parked(70));
        assert!(s.leave_searching());
        assert_eq!(
            s.counts(),
            Counts {
                searching: 0,
                awake: 95
            }
        );

        s.queued.insert(93, Ordering::Relaxed);
        let mut looked = Vec::new();
        let (f, words) = s.find_queued(&all, 90, |v| {
            looked.push(v);
            true
        });
        assert_eq!(
            f,
            Some(93),
            "the re-check misses a queue of the second word"
        );
        assert_eq!(words, 2);
        assert_eq!(looked, vec![93]);

        // Worker 70 is idle and awake (its idle bit, no parked bit); 90 is
        // idle and parked. An external spawn from worker 3's word claims 70.
        assert_eq!(
            s.claim_awake_idle(3),
            Some(70),
            "claim_awake_idle from the first word misses an idle worker of the second"
        );
        assert_eq!(s.claim_awake_idle(3), None, "90 is parked, 70 claimed");
    }

    #[test]
    fn one_wake_in_flight_and_the_woken_worker_searches() {
        let llcs = vec![0..2, 2..4];
        let s = Sleepers::new(4, &llcs);
        let all = 0..4;
        // Workers 1, 2 and 3 go to sleep without searching.
        for w in 1..4 {
            assert!(
                s.to_parked(w, false),
                "no searcher is left: it must re-check"
            );
        }
        assert_eq!(
            s.counts(),
            Counts {
                searching: 0,
                awake: 1
            }
        );
        assert!(s.needs_wake());
        let (w, _) = s.wake_one(2, std::iter::once(&all));
        assert_eq!(w, Some(2), "the parked worker nearest to 2");
        assert!(!s.needs_wake(), "a searcher is on its way: no second wake");
        assert_eq!(s.wake_one(2, std::iter::once(&all)).0, None);
        assert!(s.leave_parked(2), "woken by a claim: searching");
        assert_eq!(
            s.counts(),
            Counts {
                searching: 1,
                awake: 2
            }
        );
        assert!(s.leave_searching(), "the last searcher");
        // Worker 3 wakes by itself (a direct delivery): not searching.
        assert!(!s.leave_parked(3));
        assert_eq!(
            s.counts(),
            Counts {
                searching: 0,
                awake: 3
            }
        );
        // Searcher cap: half of 4.
        assert!(s.to_searching() && s.to_searching());
        assert!(!s.to_searching());
        assert!(!s.to_parked(0, true));
        assert!(s.to_parked(3, true), "the last searcher to sleep");
    }
}
