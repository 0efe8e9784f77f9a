//! Callgrind's client requests (valgrind's `callgrind.h`): the magic
//! instruction sequence of `valgrind.h` for amd64, which valgrind recognises
//! and a real CPU runs as no-ops (four rotations of `rdi` by 128 bits in
//! all, and `xchg rbx, rbx`), leaving the default result in `rdx`.

use std::ffi::CStr;

/// `VG_USERREQ_TOOL_BASE('C', 'T')`.
const BASE: usize = ((b'C' as usize) << 24) | ((b'T' as usize) << 16);
/// `VG_USERREQ__ZERO_STATS`: zero the cost centers.
const ZERO_STATS: usize = BASE + 1;
/// `VG_USERREQ__DUMP_STATS_AT`: dump the cost centers, with the string
/// argument in the dump's `desc: Trigger: Client Request: ...`, and
/// zero them.
const DUMP_STATS_AT: usize = BASE + 3;
/// `VG_USERREQ__RUNNING_ON_VALGRIND` (a core request): 1 under
/// valgrind, the default 0 otherwise.
const RUNNING_ON_VALGRIND: usize = 0x1001;

/// `VALGRIND_DO_CLIENT_REQUEST_EXPR(default, request, a1, 0, 0, 0, 0)`.
fn request(default: usize, request: usize, a1: usize) -> usize {
    let args: [usize; 6] = [request, a1, 0, 0, 0, 0];
    let mut result = default;
    // SAFETY: the sequence only rotates rdi by 3+13+61+51 = 128 bits
    // (back to its value; declared clobbered anyway) and exchanges rbx
    // with itself, changing the flags (not declared preserved); under
    // valgrind it reads the six words at rax, which `args` holds alive
    // until after the asm, and writes the result to rdx. The pointed-to
    // strings of the requests used here are NUL-terminated and outlive
    // the call.
    unsafe {
        core::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            in("rax") args.as_ptr(),
            inout("rdx") result,
            out("rdi") _,
            options(nostack),
        );
    }
    result
}

/// Whether this process runs under valgrind.
pub fn running_on_valgrind() -> bool {
    request(0, RUNNING_ON_VALGRIND, 0) != 0
}

/// `CALLGRIND_ZERO_STATS`.
pub fn zero_stats() {
    request(0, ZERO_STATS, 0);
}

/// `CALLGRIND_DUMP_STATS_AT(label)`.
pub fn dump_stats_at(label: &CStr) {
    request(0, DUMP_STATS_AT, label.as_ptr() as usize);
}
