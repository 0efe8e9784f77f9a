//! Configuration types that the runtime's shared state keeps (below
//! `worker/shared.rs`, so that the state does not reach up to the API that builds
//! it).

use std::sync::Arc;

/// A thread start or stop hook, of the workers and of the blocking pool's
/// threads.
#[derive(Clone)]
pub(crate) struct Hook(pub(crate) Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<hook>")
    }
}

impl Hook {
    /// Runs the hook; a panic in it is caught (and counted by the caller's
    /// panic counter when on a worker), so a hook cannot take a thread of
    /// the runtime down with it.
    pub(crate) fn run(&self) {
        if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.0)())) {
            crate::context::count_panic();
            crate::task::discard(p);
        }
    }
}
