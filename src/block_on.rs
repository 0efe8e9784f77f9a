//! `Runtime::block_on`: run a future on the calling thread.
//!
//! Each call has its own wake flag: the waker sets it, then unparks the
//! thread (in that order: [`WakeFlag::wake`]); the loop polls again only
//! when its own flag is set, and parks until then. So a wake is never lost to code that consumes the thread's
//! park token (a `std::sync::mpsc::Receiver::recv_timeout` inside the
//! future, or another parker on the same thread), and calls nest: an inner
//! `block_on` on the same thread runs its own loop, and the outer one polls
//! again when the inner returns if its flag was set meanwhile (as
//! futures-lite's `block_on` does; tokio refuses to nest instead).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::context::on_worker_thread;
use crate::shared::Shared;
use crate::shared::BLOCK_ON;
use crate::sync::{AtomicBool, Ordering};

/// The wake flag of one `block_on` call: the waker sets it, then unparks
/// the thread; the loop consumes it, parking until it is set. The loom
/// model `loom-tests/tests/block_on.rs` drives it.
#[derive(Debug, Default)]
pub struct WakeFlag(AtomicBool);

impl WakeFlag {
    /// A flag not set.
    pub fn new() -> Self {
        WakeFlag(AtomicBool::new(false))
    }

    /// The waker's side: sets the flag, *then* unparks the polling thread
    /// (`unpark`). The other order loses the wake: the loop could take the
    /// unpark's token in a park that returns at once, find the flag still
    /// clear, and park again, and the flag set afterwards has no unpark
    /// left to end that park (the loom model `block_on.rs` finds it).
    #[inline]
    pub fn wake(&self, unpark: impl FnOnce()) {
        self.set();
        unpark();
    }

    /// Sets the flag (the first half of [`wake`](Self::wake)).
    #[inline]
    fn set(&self) {
        // ORDERING: Release, paired with `wait`'s Acquire swap: whatever
        // the waker did before the wake happens before the next poll (the
        // waker contract). The unpark does not carry it when the loop finds
        // the flag set without parking.
        //
        // A swap, where a store would do in C11: loom 0.7.2 keeps a partial
        // modification order, in which a plain store not ordered with the
        // loop's earlier swap may be read past by the loop's next swap (the
        // model `loom-tests/tests/block_on.rs` deadlocked on it), and two
        // RMWs are always ordered. Its cost is lost in the unpark that
        // follows (an atomic RMW at least, a futex wake when parked).
        let _ = self.0.swap(true, Ordering::Release);
    }

    /// The loop's side: consumes the flag, calling `park` until it is set.
    #[inline]
    pub fn wait(&self, mut park: impl FnMut()) {
        // ORDERING: Acquire, paired with `set`'s Release store.
        while !self.0.swap(false, Ordering::Acquire) {
            park();
        }
    }
}

/// The waker of one `block_on` call: its flag and its thread.
struct CallWaker {
    woken: WakeFlag,
    thread: std::thread::Thread,
}

impl Wake for CallWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.wake(|| self.thread.unpark());
    }
}

/// Restores the previous runtime context of this thread on exit (also on
/// panic).
pub(crate) struct Restore {
    prev: Option<Arc<Shared>>,
    /// The driver context it replaced (dropped after `prev` is back).
    #[cfg(feature = "io")]
    _driver: Option<crate::context::DriverGuard>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        let prev = self.prev.take();
        BLOCK_ON.with(|b| *b.borrow_mut() = prev);
    }
}

/// Makes `shared` this thread's runtime context (what `hwsched::spawn`
/// spawns onto, and whose driver keeps the timers and sockets made here)
/// until the returned guard is dropped. On a worker thread the worker's
/// runtime stays the context (`shared::current`): its driver stays too.
pub(crate) fn enter(shared: Arc<Shared>) -> Restore {
    #[cfg(feature = "io")]
    let _driver =
        (!on_worker_thread()).then(|| crate::context::enter_driver(shared.driver.clone()));
    Restore {
        prev: BLOCK_ON.with(|b| b.borrow_mut().replace(shared)),
        #[cfg(feature = "io")]
        _driver,
    }
}

pub(crate) fn block_on<F: Future>(shared: &Arc<Shared>, future: F) -> F::Output {
    if on_worker_thread() {
        panic!(
            "Runtime::block_on called from a hwsched worker thread: this would block the \
             worker; .await the future instead, or spawn it"
        );
    }
    let _restore = enter(shared.clone());
    let call = Arc::new(CallWaker {
        woken: WakeFlag::new(),
        thread: std::thread::current(),
    });
    let waker = Waker::from(call.clone());
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        call.woken.wait(std::thread::park);
    }
}
