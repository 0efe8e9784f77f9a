//! The three run queues of a worker, behind one small API.
//!
//! - [`Local`]: the worker's own FIFO deque (`crossbeam_deque::Worker`); only
//!   its owner pushes and pops.
//! - [`Stealer`]: the handle other workers steal from the back of a `Local`.
//! - [`Inbox`]: a multi-producer queue (`crossbeam_deque::Injector`) that any
//!   thread pushes to; the owner takes from it one item at a time (a yield
//!   moves a batch into its `Local`, ahead of the yielding task), and idle
//!   workers steal from it too.
//!
//! crossbeam-deque is not loom-instrumented and is not ours to prove; under
//! `cfg(loom)` they are replaced with the same API: `Local`/`Stealer` by a
//! loom `Mutex<VecDeque<T>>`, and `Inbox` by a few loom `AtomicPtr` slots
//! (push: a `Release` CAS into a free slot; steal: `Acquire` loads and CAS;
//! a steal whose CAS loses the item to another taker reports `Retry`, as
//! crossbeam's does under contention).
//! The atomic inbox matters: a steal that finds it empty has only loaded
//! nulls and synchronizes with nobody, as with crossbeam's `Injector`,
//! whereas a mutex stand-in would order every empty steal before the next
//! push and hide the orderings that publish a delivery (`notify`'s acquire
//! half, the fences of `Shared::bury`), which the models then could not
//! check.

pub use crossbeam_deque::Steal;

#[cfg(not(loom))]
mod imp {
    use super::Steal;

    /// A worker's own FIFO queue.
    pub struct Local<T>(crossbeam_deque::Worker<T>);
    /// A handle to steal from another worker's [`Local`].
    pub struct Stealer<T>(crossbeam_deque::Stealer<T>);
    /// A queue any thread can push to.
    pub struct Inbox<T>(crossbeam_deque::Injector<T>);

    impl<T> Local<T> {
        /// An empty FIFO queue.
        pub fn new() -> Self {
            Local(crossbeam_deque::Worker::new_fifo())
        }
        /// A stealer for this queue.
        pub fn stealer(&self) -> Stealer<T> {
            Stealer(self.0.stealer())
        }
        /// Pushes to the back.
        pub fn push(&self, t: T) {
            self.0.push(t)
        }
        /// Pops from the front.
        pub fn pop(&self) -> Option<T> {
            self.0.pop()
        }
        /// Number of queued items.
        pub fn len(&self) -> usize {
            self.0.len()
        }
        /// Whether nothing is queued.
        pub fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }

    impl<T> Default for Local<T> {
        fn default() -> Self {
            Self::new()
        }
    }

    impl<T> Stealer<T> {
        /// Steals about half of the victim's items into `dest`, returning one.
        pub fn steal_batch_and_pop(&self, dest: &Local<T>) -> Steal<T> {
            self.0.steal_batch_and_pop(&dest.0)
        }
        /// Steals one item.
        // Used by the loom models (loom-tests/).
        #[cfg_attr(not(loom), allow(dead_code))]
        pub fn steal(&self) -> Steal<T> {
            self.0.steal()
        }
        /// Number of queued items (a snapshot).
        pub fn len(&self) -> usize {
            self.0.len()
        }
        /// Whether the victim's queue looks empty.
        pub fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }

    impl<T> Clone for Stealer<T> {
        fn clone(&self) -> Self {
            Stealer(self.0.clone())
        }
    }

    impl<T> Inbox<T> {
        /// An empty inbox.
        pub fn new() -> Self {
            Inbox(crossbeam_deque::Injector::new())
        }
        /// Pushes to the back.
        pub fn push(&self, t: T) {
            self.0.push(t)
        }
        /// Takes one item.
        pub fn steal(&self) -> Steal<T> {
            self.0.steal()
        }
        /// Moves a batch into `dest` and returns one item.
        pub fn steal_batch_and_pop(&self, dest: &Local<T>) -> Steal<T> {
            self.0.steal_batch_and_pop(&dest.0)
        }
        /// Moves up to `limit` items into `dest`.
        pub fn steal_batch_with_limit(&self, dest: &Local<T>, limit: usize) -> Steal<()> {
            self.0.steal_batch_with_limit(&dest.0, limit)
        }
        /// Number of queued items (a snapshot).
        pub fn len(&self) -> usize {
            self.0.len()
        }
        /// Whether nothing is queued.
        pub fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }

    impl<T> Default for Inbox<T> {
        fn default() -> Self {
            Self::new()
        }
    }
}

#[cfg(loom)]
mod imp {
    use super::Steal;
    use crate::sync::{Arc, Mutex, STEAL_BATCH};
    use std::collections::VecDeque;

    /// Loom stand-in for a worker's FIFO queue.
    pub struct Local<T>(Arc<Mutex<VecDeque<T>>>);
    /// Loom stand-in for a stealer.
    pub struct Stealer<T>(Arc<Mutex<VecDeque<T>>>);
    /// Loom stand-in for the inbox.
    pub struct Inbox<T> {
        slots: Box<[loom::sync::atomic::AtomicPtr<T>]>,
    }

    /// Slots of the loom inbox: more than any model pushes.
    const INBOX_CAP: usize = 4;

    impl<T> Drop for Inbox<T> {
        fn drop(&mut self) {
            use loom::sync::atomic::Ordering::Relaxed;
            for s in self.slots.iter() {
                let p = s.swap(std::ptr::null_mut(), Relaxed);
                if !p.is_null() {
                    // SAFETY: a non-null slot owns the Box pushed into it.
                    drop(unsafe { Box::from_raw(p) });
                }
            }
        }
    }

    /// Takes one item and up to half the rest (at most `STEAL_BATCH` in all)
    /// out of `src`. The caller moves the extra items into its own queue
    /// after releasing `src`'s lock, so two workers stealing from each other
    /// never hold both locks.
    fn take_batch<T>(src: &Mutex<VecDeque<T>>) -> Option<(T, Vec<T>)> {
        let mut src = src.lock();
        let first = src.pop_front()?;
        let extra = (src.len() / 2).min(STEAL_BATCH - 1);
        let rest = src.drain(..extra).collect();
        Some((first, rest))
    }

    fn batch_into<T>(src: &Mutex<VecDeque<T>>, dest: &Local<T>) -> Steal<T> {
        match take_batch(src) {
            None => Steal::Empty,
            Some((first, rest)) => {
                if !rest.is_empty() {
                    dest.0.lock().extend(rest);
                }
                Steal::Success(first)
            }
        }
    }

    impl<T> Local<T> {
        /// An empty queue.
        pub fn new() -> Self {
            Local(Arc::new(Mutex::new(VecDeque::new())))
        }
        /// A stealer for this queue.
        pub fn stealer(&self) -> Stealer<T> {
            Stealer(self.0.clone())
        }
        /// Pushes to the back.
        pub fn push(&self, t: T) {
            self.0.lock().push_back(t)
        }
        /// Pops from the front.
        pub fn pop(&self) -> Option<T> {
            self.0.lock().pop_front()
        }
        /// Number of queued items.
        pub fn len(&self) -> usize {
            self.0.lock().len()
        }
        /// Whether nothing is queued.
        pub fn is_empty(&self) -> bool {
            self.0.lock().is_empty()
        }
    }

    impl<T> Default for Local<T> {
        fn default() -> Self {
            Self::new()
        }
    }

    impl<T> Stealer<T> {
        /// Steals a batch into `dest`, returning one.
        pub fn steal_batch_and_pop(&self, dest: &Local<T>) -> Steal<T> {
            if Arc::ptr_eq(&self.0, &dest.0) {
                return Steal::Empty;
            }
            batch_into(&self.0, dest)
        }
        /// Steals one item.
        pub fn steal(&self) -> Steal<T> {
            match self.0.lock().pop_front() {
                Some(t) => Steal::Success(t),
                None => Steal::Empty,
            }
        }
        /// Number of queued items.
        pub fn len(&self) -> usize {
            self.0.lock().len()
        }
        /// Whether nothing is queued.
        pub fn is_empty(&self) -> bool {
            self.0.lock().is_empty()
        }
    }

    impl<T> Clone for Stealer<T> {
        fn clone(&self) -> Self {
            Stealer(self.0.clone())
        }
    }

    impl<T> Inbox<T> {
        /// An empty inbox.
        pub fn new() -> Self {
            use loom::sync::atomic::AtomicPtr;
            Inbox {
                slots: (0..INBOX_CAP)
                    .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                    .collect(),
            }
        }
        /// Pushes into the first free slot (Release, as crossbeam's slot
        /// write).
        pub fn push(&self, t: T) {
            use loom::sync::atomic::Ordering::{Relaxed, Release};
            let p = Box::into_raw(Box::new(t));
            for s in self.slots.iter() {
                if s.compare_exchange(std::ptr::null_mut(), p, Release, Relaxed)
                    .is_ok()
                {
                    return;
                }
            }
            panic!("loom inbox full");
        }
        /// Takes one item. A steal that finds every slot empty has only
        /// loaded nulls: it synchronizes with nobody, like crossbeam's
        /// `Injector::steal` returning `Empty`. A steal that loses the item
        /// it saw to another taker (its CAS fails) reports `Retry`, as
        /// crossbeam's does under contention, though other slots may hold
        /// items: a taker that gives up on `Retry` is then seen leaving
        /// work behind (loom: `inbox.rs`).
        pub fn steal(&self) -> Steal<T> {
            use loom::sync::atomic::Ordering::{Acquire, Relaxed};
            for s in self.slots.iter() {
                let p = s.load(Acquire);
                if p.is_null() {
                    continue;
                }
                if s.compare_exchange(p, std::ptr::null_mut(), Acquire, Relaxed)
                    .is_err()
                {
                    return Steal::Retry;
                }
                // SAFETY: the slot owned the Box; we took it out.
                return Steal::Success(*unsafe { Box::from_raw(p) });
            }
            Steal::Empty
        }
        /// Moves a batch into `dest` and returns one item (here: one).
        pub fn steal_batch_and_pop(&self, _dest: &Local<T>) -> Steal<T> {
            self.steal()
        }
        /// Moves one item into `dest`.
        pub fn steal_batch_with_limit(&self, dest: &Local<T>, _limit: usize) -> Steal<()> {
            match self.steal() {
                Steal::Success(t) => {
                    dest.push(t);
                    Steal::Success(())
                }
                Steal::Empty => Steal::Empty,
                Steal::Retry => Steal::Retry,
            }
        }
        /// Number of queued items (a snapshot).
        pub fn len(&self) -> usize {
            use loom::sync::atomic::Ordering::Acquire;
            self.slots
                .iter()
                .filter(|s| !s.load(Acquire).is_null())
                .count()
        }
        /// Whether nothing is queued.
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }
    }

    impl<T> Default for Inbox<T> {
        fn default() -> Self {
            Self::new()
        }
    }
}

pub use imp::{Inbox, Local, Stealer};

use crate::sync::{AtomicPtr, Ordering};

/// A value that travels as one pointer: a task handle ([`Slot`] holds it
/// without allocating).
pub trait OnePtr: Sized {
    /// The pointer that stands for `self` until [`from_ptr`](OnePtr::from_ptr).
    fn into_ptr(self) -> *mut ();
    /// The value back.
    ///
    /// # Safety
    ///
    /// `p` came from [`into_ptr`](OnePtr::into_ptr) and is turned back once.
    unsafe fn from_ptr(p: *mut ()) -> Self;
}

impl<M> OnePtr for async_task::Runnable<M> {
    #[inline]
    fn into_ptr(self) -> *mut () {
        self.into_raw().as_ptr()
    }
    #[inline]
    unsafe fn from_ptr(p: *mut ()) -> Self {
        // SAFETY: `p` came from `into_raw` (never null), turned back once
        // (the caller's contract).
        unsafe { async_task::Runnable::from_raw(std::ptr::NonNull::new_unchecked(p)) }
    }
}

impl<T> OnePtr for Box<T> {
    fn into_ptr(self) -> *mut () {
        Box::into_raw(self).cast()
    }
    unsafe fn from_ptr(p: *mut ()) -> Self {
        // SAFETY: `p` came from `Box::into_raw`, turned back once.
        unsafe { Box::from_raw(p.cast()) }
    }
}

/// A worker's LIFO slot: one task, put and taken by its owner, and taken
/// by another worker when the owner does not get to it (src/sched/README.md, "The
/// LIFO slot"). The owner's put is a plain store when the slot is empty
/// (only the owner fills it, so an empty slot it sees stays empty) and a
/// swap when it replaces an occupant; every take is a swap, so a task
/// leaves the slot exactly once, to the owner or to one thief.
pub struct Slot<T: OnePtr> {
    p: AtomicPtr<()>,
    _t: std::marker::PhantomData<T>,
}

// SAFETY: the slot owns the `T` its pointer stands for and hands it to
// exactly one taker (every take is a swap); a `T: Send` may move to the
// thread that takes it.
unsafe impl<T: OnePtr + Send> Send for Slot<T> {}
// SAFETY: as above; `&Slot` only puts and takes whole values.
unsafe impl<T: OnePtr + Send> Sync for Slot<T> {}

impl<T: OnePtr> Slot<T> {
    /// An empty slot.
    pub fn new() -> Self {
        Slot {
            p: AtomicPtr::new(std::ptr::null_mut()),
            _t: std::marker::PhantomData,
        }
    }

    /// The owner puts `t` in; returns the occupant it replaced (which the
    /// caller queues).
    #[inline]
    pub fn put(&self, t: T) -> Option<T> {
        let new = t.into_ptr();
        // Relaxed: only the owner stores a task here; a null it reads (its
        // own take, or a thief's swap) stays null until its own store.
        if self.p.load(Ordering::Relaxed).is_null() {
            // Release: pairs with the thief's Acquire swap in `take`, which
            // then owns the task the pointer stands for.
            self.p.store(new, Ordering::Release);
            return None;
        }
        // Release as above, for `new`; the occupant returned is the owner's
        // own earlier store (no acquire needed) or null if a thief took it.
        let old = self.p.swap(new, Ordering::Release);
        // SAFETY: a non-null pointer in the slot came from `into_ptr` and
        // the swap took it out: turned back once.
        (!old.is_null()).then(|| unsafe { T::from_ptr(old) })
    }

    /// Takes the occupant (the owner, or a thief).
    #[inline]
    pub fn take(&self) -> Option<T> {
        // Relaxed: a look; the swap below decides.
        if self.p.load(Ordering::Relaxed).is_null() {
            return None;
        }
        // Acquire: pairs with the Release of `put` (a thief takes a task
        // another thread put).
        let old = self.p.swap(std::ptr::null_mut(), Ordering::Acquire);
        // SAFETY: as in `put`: taken out by the swap, turned back once.
        (!old.is_null()).then(|| unsafe { T::from_ptr(old) })
    }

    /// Whether the slot looks empty (a snapshot).
    #[inline]
    pub fn is_empty(&self) -> bool {
        // Relaxed: a hint for the re-checks, which take with `take`.
        self.p.load(Ordering::Relaxed).is_null()
    }
}

impl<T: OnePtr> Default for Slot<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: OnePtr> Drop for Slot<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}
