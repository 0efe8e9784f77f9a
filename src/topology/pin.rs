//! Pinning worker threads to their PU, and reading the process's affinity.

/// The largest CPU OS index [`pin_current_thread`] tries: no kernel has more
/// CPUs than this (Linux's `NR_CPUS` is at most 8192 today). Larger indices
/// are refused without a system call, so the affinity mask stays small.
pub const MAX_PIN_CPU: usize = (1 << 20) - 1;

/// Bits per word of a kernel CPU mask.
#[cfg(any(target_os = "linux", target_os = "android"))]
const WORD_BITS: usize = libc::c_ulong::BITS as usize;

/// Pins the calling thread to the CPU with OS index `os_index`.
///
/// Returns whether the kernel accepted the affinity. A restricted container
/// may refuse it; that is not an error for a runtime, whose worker then runs
/// unpinned (and [`Runtime::pinned_workers`](crate::Runtime::pinned_workers)
/// says so). A CPU the machine does not have, or any index above
/// [`MAX_PIN_CPU`], is refused the same way: the result is `false` and the
/// thread's affinity is unchanged. It never panics.
///
/// ```
/// // Pinning to CPU 0 works on any Linux machine with CPU 0 allowed.
/// let pinned = hwsched::topology::pin_current_thread(0);
/// println!("pinned: {pinned}");
/// // A CPU no machine has is refused, not an abort.
/// assert!(!hwsched::topology::pin_current_thread(1_000_000));
/// ```
pub fn pin_current_thread(os_index: usize) -> bool {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        if os_index > MAX_PIN_CPU {
            return false;
        }
        // A mask sized to the index (the kernel accepts any whole number of
        // words and ignores bits past its own CPU count; a mask left empty
        // by that is refused with EINVAL).
        let mut mask: Vec<libc::c_ulong> = vec![0; os_index / WORD_BITS + 1];
        mask[os_index / WORD_BITS] = 1 << (os_index % WORD_BITS);
        let bytes = std::mem::size_of_val(mask.as_slice());
        // SAFETY: `mask` is a live, initialised buffer of exactly `bytes`
        // bytes, suitably aligned for `cpu_set_t` (an array of `c_ulong`);
        // the kernel only reads it. Pid 0 is the calling thread.
        let rc =
            unsafe { libc::sched_setaffinity(0, bytes, mask.as_ptr().cast::<libc::cpu_set_t>()) };
        rc == 0
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = os_index;
        false
    }
}

/// The OS indices of the CPUs the calling thread may run on
/// (`sched_getaffinity`), or `None` if the kernel does not say.
///
/// The mask grows until the kernel's CPU count fits, so machines with more
/// than 1024 CPUs are read whole.
pub(crate) fn current_affinity() -> Option<Vec<usize>> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let mut words = 1024 / WORD_BITS;
        loop {
            let mut mask: Vec<libc::c_ulong> = vec![0; words];
            let bytes = std::mem::size_of_val(mask.as_slice());
            // SAFETY: `mask` is a live buffer of exactly `bytes` bytes,
            // aligned for `cpu_set_t`; the kernel writes at most `bytes`
            // bytes into it. Pid 0 is the calling thread.
            let rc = unsafe {
                libc::sched_getaffinity(0, bytes, mask.as_mut_ptr().cast::<libc::cpu_set_t>())
            };
            if rc == 0 {
                let cpus = mask
                    .iter()
                    .enumerate()
                    .flat_map(|(i, &w)| {
                        (0..WORD_BITS)
                            .filter(move |b| w & (1 << b) != 0)
                            .map(move |b| i * WORD_BITS + b)
                    })
                    .collect();
                return Some(cpus);
            }
            // EINVAL: the mask is smaller than the kernel's; try twice as big.
            let einval = std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL);
            if !einval || words * WORD_BITS > MAX_PIN_CPU {
                return None;
            }
            words *= 2;
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        None
    }
}
