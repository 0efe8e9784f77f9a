//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// The 32-worker synthetic topology (2 packages x 2 LLCs x 4 cores x 2 PUs).
/// On a small machine its workers are unpinned threads.
pub const BIG: &str = "pack:2 l3:2 core:4 pu:2";

/// Runs `f` on its own thread and fails with "`name` did not finish in
/// `secs`s" if it has not returned by then. A panic in `f` is re-raised here.
pub fn with_timeout<T, F>(secs: u64, name: &str, f: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let handle = thread::Builder::new()
        .name(format!("test-{name}"))
        .spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(f));
            let _ = tx.send(r);
        })
        .expect("spawn test thread");
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(Ok(v)) => {
            let _ = handle.join();
            v
        }
        Ok(Err(p)) => {
            let _ = handle.join();
            resume_unwind(p)
        }
        Err(_) => panic!("{name} did not finish in {secs}s"),
    }
}
