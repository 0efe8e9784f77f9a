//! `Runtime::block_on`: run a future on the calling thread.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::runtime::Shared;
use crate::worker::{on_worker_thread, BLOCK_ON};

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Restores the previous block_on context on exit (also on panic).
struct Restore(Option<Arc<Shared>>);

impl Drop for Restore {
    fn drop(&mut self) {
        let prev = self.0.take();
        BLOCK_ON.with(|b| *b.borrow_mut() = prev);
    }
}

pub(crate) fn block_on<F: Future>(shared: &Arc<Shared>, future: F) -> F::Output {
    if on_worker_thread() {
        panic!(
            "Runtime::block_on called from a hwsched worker thread: this would block the \
             worker; .await the future instead, or spawn it"
        );
    }
    let prev = BLOCK_ON.with(|b| b.borrow_mut().replace(shared.clone()));
    let _restore = Restore(prev);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}
