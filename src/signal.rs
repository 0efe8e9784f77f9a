//! Unix signals, delivered to tasks: [`ctrl_c`] and [`signal`].
//!
//! # How a signal reaches a task
//!
//! The first listener of a signal installs a process-wide handler for it
//! (through signal-hook-registry, which chains with handlers installed by
//! others). The handler does only what is async-signal-safe: it sets the
//! signal's pending flag (an atomic) and writes one byte to a non-blocking
//! self-pipe. The pipe's read end is registered with the first poller of
//! each runtime that has signal listeners, so the write wakes the worker
//! asleep in that poller (or is seen by a busy worker's next look at it).
//! That worker drains the pipe and, for each signal whose flag is set,
//! bumps the signal's generation and wakes its listeners.
//!
//! Every [`Signal`] remembers the last generation it saw: each listener
//! sees each delivery, and deliveries that arrive before a listener looks
//! again coalesce into one, as Unix signals do.
//!
//! # Handlers stay installed
//!
//! A handler, once installed, stays for the life of the process, even with
//! no listener left: the signal's default action (terminating the process,
//! for `SIGINT` or `SIGTERM`) no longer happens. This is tokio's behaviour
//! too.
//!
//! # A runtime is needed
//!
//! [`signal`] and [`ctrl_c`] register the pipe with the current runtime:
//! call them inside one (in `Runtime::block_on` or a task). A listener is
//! woken by whichever runtime with listeners sees the pipe first; when
//! every such runtime has shut down, no listener is woken.
//!
//! ```
//! use hwsched::signal::{signal, SignalKind};
//!
//! let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
//! rt.block_on(async {
//!     let mut usr1 = signal(SignalKind::user_defined1())?;
//!     // SAFETY: kill(2) on this process, whose SIGUSR1 handler is installed.
//!     unsafe { libc::kill(libc::getpid(), libc::SIGUSR1) };
//!     assert_eq!(usr1.recv().await, Some(()));
//!     Ok::<_, std::io::Error>(())
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

use crate::io::TOKEN_SIGNAL;

/// Signal numbers handled: 1 to 64 (Linux's `SIGRTMAX`).
const NSIG: usize = 65;

/// A kind of signal: its number.
///
/// ```
/// use hwsched::signal::SignalKind;
///
/// assert_eq!(SignalKind::interrupt().as_raw_value(), libc::SIGINT);
/// assert_eq!(SignalKind::from_raw(libc::SIGTERM), SignalKind::terminate());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SignalKind(libc::c_int);

impl SignalKind {
    /// The signal numbered `signum` (`libc::SIGWINCH`, say). Whether it can
    /// be listened for is checked by [`signal`].
    pub const fn from_raw(signum: libc::c_int) -> SignalKind {
        SignalKind(signum)
    }

    /// The signal's number.
    pub const fn as_raw_value(self) -> libc::c_int {
        self.0
    }

    /// `SIGINT`: interrupt from the terminal (Ctrl-C).
    pub const fn interrupt() -> SignalKind {
        SignalKind(libc::SIGINT)
    }

    /// `SIGTERM`: a request to terminate (`kill`'s default).
    pub const fn terminate() -> SignalKind {
        SignalKind(libc::SIGTERM)
    }

    /// `SIGHUP`: the terminal hung up (daemons read it as "reload").
    pub const fn hangup() -> SignalKind {
        SignalKind(libc::SIGHUP)
    }

    /// `SIGQUIT`: quit from the terminal (Ctrl-\).
    pub const fn quit() -> SignalKind {
        SignalKind(libc::SIGQUIT)
    }

    /// `SIGUSR1`.
    pub const fn user_defined1() -> SignalKind {
        SignalKind(libc::SIGUSR1)
    }

    /// `SIGUSR2`.
    pub const fn user_defined2() -> SignalKind {
        SignalKind(libc::SIGUSR2)
    }
}

impl From<libc::c_int> for SignalKind {
    fn from(signum: libc::c_int) -> SignalKind {
        SignalKind(signum)
    }
}

/// What the process knows of one signal number.
struct Slot {
    /// Set by the handler, taken by [`dispatch`].
    pending: AtomicBool,
    /// Deliveries dispatched so far.
    generation: AtomicU64,
    /// Listeners waiting for the next generation: (listener id, waker).
    waiters: Mutex<Vec<(u64, Waker)>>,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            pending: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            waiters: Mutex::new(Vec::new()),
        }
    }
}

static SLOTS: [Slot; NSIG] = [const { Slot::new() }; NSIG];

/// The self-pipe: the handler writes, [`dispatch`] drains.
struct Pipe {
    tx: mio::unix::pipe::Sender,
    rx: mio::unix::pipe::Receiver,
}

/// Created once, under [`INSTALL`]'s lock, before any handler is installed;
/// never closed.
static PIPE: std::sync::OnceLock<Pipe> = std::sync::OnceLock::new();

/// What installation has done so far (changed only under this lock).
struct Installed {
    /// Signals whose handler is installed.
    handlers: [bool; NSIG],
    /// The I/O drivers (one per runtime) whose first poller watches the
    /// pipe (a dead one is pruned when the next listener is created).
    runtimes: Vec<Weak<crate::io::IoHandle>>,
}

static INSTALL: Mutex<Installed> = Mutex::new(Installed {
    handlers: [false; NSIG],
    runtimes: Vec::new(),
});

/// Ids of listeners (their slot in a signal's waiters).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// The handler's action, run in signal context: only atomics and write(2).
fn on_signal(signum: usize) {
    if let Some(slot) = SLOTS.get(signum) {
        // Release: `dispatch` takes it after draining the pipe that the
        // write below fills.
        slot.pending.store(true, Ordering::Release);
    }
    if let Some(p) = PIPE.get() {
        let byte = 1u8;
        // SAFETY: write(2) is async-signal-safe (and `as_raw_fd` a field
        // read); `tx` is the write end of the pipe, open for the life of
        // the process (`PIPE` is never dropped); the buffer is one valid
        // byte. A full pipe (`EAGAIN`) already holds a byte that wakes
        // `dispatch`, which then sees the flag set above.
        // signal-hook-registry restores `errno`.
        let _ = unsafe { libc::write(p.tx.as_raw_fd(), (&byte as *const u8).cast(), 1) };
    }
}

/// Run by the worker that found the signal pipe readable in its poller
/// (the I/O driver calls it through [`on_signal_token`](crate::io::on_signal_token)):
/// drains the pipe (it is edge-triggered), then, for each signal delivered
/// since the last call, bumps its generation and wakes its listeners.
pub(crate) fn dispatch() {
    let Some(p) = PIPE.get() else { return };
    let mut buf = [0u8; 128];
    loop {
        match (&p.rx).read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // `WouldBlock`: drained.
            Err(_) => break,
        }
    }
    // A signal that arrives after the drain writes a new byte (a new edge,
    // a new call); one that arrives before it set its flag before its byte,
    // so the swaps below see it.
    for slot in SLOTS.iter() {
        if slot.pending.swap(false, Ordering::AcqRel) {
            // The bump comes before the waiters' lock, which a listener
            // holds while it re-reads the generation: a listener either
            // left its waker before (it is taken here) or sees the bump.
            slot.generation.fetch_add(1, Ordering::AcqRel);
            let waiters = std::mem::take(&mut *slot.waiters.lock());
            for (_, w) in waiters {
                w.wake();
            }
        }
    }
}

/// The name of a signal number, for errors.
fn name(signum: libc::c_int) -> Option<&'static str> {
    Some(match signum {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGURG => "SIGURG",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGIO => "SIGIO",
        libc::SIGSYS => "SIGSYS",
        _ => return None,
    })
}

/// "SIGKILL (9)", or "signal 42".
fn describe(signum: libc::c_int) -> String {
    match name(signum) {
        Some(n) => format!("{n} ({signum})"),
        None => format!("signal {signum}"),
    }
}

/// Listens for `kind` from now on: each delivery after this call wakes the
/// returned [`Signal`] once (deliveries it has not yet seen coalesce).
///
/// The first listener of a signal installs its handler for the rest of the
/// process (the signal's default action, such as terminating, no longer
/// happens: [module docs](self)).
///
/// # Errors
///
/// - outside a runtime, or in one with I/O off;
/// - `InvalidInput` for a signal that cannot be handled: `SIGKILL`,
///   `SIGSTOP`, and `SIGILL`, `SIGFPE`, `SIGSEGV` (which signal-hook-registry
///   refuses), or a number out of range; the message names the signal;
/// - the OS's error if creating the pipe, registering it or installing the
///   handler fails.
pub fn signal(kind: SignalKind) -> io::Result<Signal> {
    let signum = kind.0;
    let index = usize::try_from(signum)
        .ok()
        .filter(|&i| i > 0 && i < NSIG)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a signal number (1 to {})", signum, NSIG - 1),
            )
        })?;
    if signal_hook_registry::FORBIDDEN.contains(&signum) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} cannot be listened for (SIGKILL and SIGSTOP cannot be caught; SIGILL, \
                 SIGFPE and SIGSEGV are not handled)",
                describe(signum)
            ),
        ));
    }
    let io = crate::time::current()
        .map(|d| d.io.clone())
        .ok_or_else(crate::io::no_runtime)?;

    let mut inst = INSTALL.lock();
    let pipe = match PIPE.get() {
        Some(p) => p,
        None => {
            let (tx, rx) = mio::unix::pipe::new()?;
            let _ = PIPE.set(Pipe { tx, rx });
            PIPE.get().expect("set above, under the lock")
        }
    };
    inst.runtimes.retain(|w| w.strong_count() > 0);
    if !inst
        .runtimes
        .iter()
        .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(&io)))
    {
        let driver = io.driver()?;
        crate::io::on_signal_token(dispatch);
        let rx_fd = pipe.rx.as_raw_fd();
        // Edge-triggered (mio's only mode): `dispatch` drains the pipe. A
        // byte written before this registration is reported by it.
        driver.pollers[0].registry().register(
            &mut mio::unix::SourceFd(&rx_fd),
            TOKEN_SIGNAL,
            mio::Interest::READABLE,
        )?;
        inst.runtimes.push(Arc::downgrade(&io));
    }
    if !inst.handlers[index] {
        // SAFETY: the action runs in signal context and does only what is
        // async-signal-safe (`on_signal`: atomic stores, an atomic load of
        // `PIPE` and write(2)); it cannot panic (`SLOTS.get`, no
        // allocation). `signum` is not in `FORBIDDEN` (checked above), so
        // `register` does not panic.
        unsafe { signal_hook_registry::register(signum, move || on_signal(index)) }?;
        inst.handlers[index] = true;
    }
    drop(inst);

    Ok(Signal {
        kind,
        // Acquire: pairs with `dispatch`'s bump.
        seen: SLOTS[index].generation.load(Ordering::Acquire),
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
    })
}

/// Resolves at the next `SIGINT` (Ctrl-C) delivered after its first poll.
///
/// Its first poll installs the `SIGINT` handler, which stays for the rest
/// of the process: from then on, Ctrl-C no longer terminates the process,
/// even after this future is dropped (tokio's behaviour; the
/// [module docs](self) say why). A program that wants to stop on a second
/// Ctrl-C calls `std::process::exit` itself.
///
/// # Errors
///
/// Those of [`signal`]: outside a runtime, say.
///
/// ```no_run
/// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
/// rt.block_on(async {
///     hwsched::signal::ctrl_c().await?;
///     println!("interrupted: shutting down");
///     Ok::<_, std::io::Error>(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub async fn ctrl_c() -> io::Result<()> {
    signal(SignalKind::interrupt())?.recv().await;
    Ok(())
}

/// A listener of one signal ([`signal`]): each delivery since the last
/// [`recv`](Self::recv) makes the next one return (deliveries in between
/// coalesce into one).
#[derive(Debug)]
pub struct Signal {
    kind: SignalKind,
    /// The generation of the last delivery this listener returned.
    seen: u64,
    /// This listener's slot among its signal's waiters.
    id: u64,
}

impl Signal {
    /// Waits for the next delivery. Returns `Some(())`; `None` is never
    /// returned (a signal's stream does not end), the `Option` keeping
    /// tokio's signature for `while let Some(()) = sig.recv().await` loops.
    pub async fn recv(&mut self) -> Option<()> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Polls for the next delivery ([`recv`](Self::recv)).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<()>> {
        let slot = self.slot();
        // Acquire: pairs with `dispatch`'s bump.
        let g = slot.generation.load(Ordering::Acquire);
        if g != self.seen {
            self.seen = g;
            return Poll::Ready(Some(()));
        }
        let mut waiters = slot.waiters.lock();
        // Re-read under the lock `dispatch` takes after its bump: a bump we
        // miss here finds our waker.
        let g = slot.generation.load(Ordering::Acquire);
        if g != self.seen {
            waiters.retain(|(id, _)| *id != self.id);
            self.seen = g;
            return Poll::Ready(Some(()));
        }
        match waiters.iter_mut().find(|(id, _)| *id == self.id) {
            Some((_, w)) => w.clone_from(cx.waker()),
            None => waiters.push((self.id, cx.waker().clone())),
        }
        Poll::Pending
    }

    /// The signal listened for.
    pub fn kind(&self) -> SignalKind {
        self.kind
    }

    fn slot(&self) -> &'static Slot {
        // In range: checked by `signal`.
        &SLOTS[self.kind.0 as usize]
    }
}

impl Drop for Signal {
    fn drop(&mut self) {
        self.slot().waiters.lock().retain(|(id, _)| *id != self.id);
    }
}
