//! Pinning worker threads to their PU.

/// Pins the calling thread to the CPU with OS index `os_index`.
///
/// Returns whether the kernel accepted the affinity. A restricted container
/// may refuse it; that is not an error for a runtime, whose worker then runs
/// unpinned (and [`Runtime::pinned_workers`](crate::Runtime::pinned_workers)
/// says so).
///
/// ```
/// // Pinning to CPU 0 works on any Linux machine with CPU 0 allowed.
/// let pinned = hwsched::topology::pin_current_thread(0);
/// println!("pinned: {pinned}");
/// ```
pub fn pin_current_thread(os_index: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: os_index })
}
