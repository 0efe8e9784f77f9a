//! Sockets on hwsched's I/O driver: [`TcpListener`], [`TcpStream`],
//! [`UdpSocket`], [`UnixListener`], [`UnixStream`].
//!
//! Each registers once with a poller of the runtime it is created in (read
//! and write, edge-triggered) and caches its readiness, so a read runs only
//! when epoll said there is something to read, and waiting costs no
//! syscall (`hwsched::io`'s module docs). They implement futures-io's
//! [`AsyncRead`](futures_io::AsyncRead) / [`AsyncWrite`](futures_io::AsyncWrite);
//! with the `hyper` feature, hyper 1.x's `rt::Read` / `rt::Write`
//! (reading into hyper's uninitialized buffer, with vectored writes); and
//! with the `tokio` feature, tokio's `io::AsyncRead` / `io::AsyncWrite`
//! (the same way), so tokio-util's codecs, `tokio::io::copy` and crates
//! written against tokio's traits (axum's, tonic's servers) take them as
//! they are, with no adapter and no tokio runtime.
//! Errors are the OS's `io::Error`, unchanged.
//!
//! Create them inside the runtime (in `Runtime::block_on` or a task): off
//! any runtime, their constructors return an error that says so.
//!
//! ```
//! use futures_lite::{AsyncReadExt, AsyncWriteExt};
//! use hwsched::net::{TcpListener, TcpStream};
//!
//! let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
//! rt.block_on(async {
//!     let listener = TcpListener::bind("127.0.0.1:0").await?;
//!     let addr = listener.local_addr()?;
//!     let server = hwsched::spawn(async move {
//!         let (mut s, _) = listener.accept().await?;
//!         let mut buf = [0u8; 5];
//!         s.read_exact(&mut buf).await?;
//!         s.write_all(&buf).await?;
//!         Ok::<_, std::io::Error>(())
//!     });
//!     let mut c = TcpStream::connect(addr).await?;
//!     c.write_all(b"hello").await?;
//!     let mut buf = [0u8; 5];
//!     c.read_exact(&mut buf).await?;
//!     assert_eq!(&buf, b"hello");
//!     server.await.unwrap()?;
//!     Ok::<_, std::io::Error>(())
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// The impls shared by every stream type (tcp.rs, unix.rs).
/// What a type does when one of its reads or writes waits: an owned stream
/// may move to the poller of the domain its task now runs in
/// (`PollEvented::note_wait`; returns whether it moved); borrowed and
/// shared halves cannot.
pub(crate) trait OnWait {
    fn on_wait(self: Pin<&mut Self>) -> bool {
        false
    }
}

/// Calls `on_wait` when `r` is `Pending`, then returns `r`. A stream that
/// moved to another poller left the waker of this wait in the old
/// registration (dropped with it): the task is woken at once, to poll again
/// and wait on the new one (whose registration reported the socket's
/// current readiness, so nothing is lost).
pub(crate) fn waited<T: OnWait + ?Sized, R>(
    this: Pin<&mut T>,
    cx: &mut Context<'_>,
    r: Poll<R>,
) -> Poll<R> {
    if r.is_pending() && this.on_wait() {
        cx.waker().wake_by_ref();
    }
    r
}

/// futures-io, hyper and tokio trait impls for a type that derefs to a
/// stream.
macro_rules! stream_io {
    ($stream:ty; $t:ty, $s:ident => $e:expr, read) => {
        impl futures_io::AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut [u8],
            ) -> Poll<io::Result<usize>> {
                let $s = &*self;
                let r = $e.poll_read_ref(cx, buf);
                waited(self, cx, r)
            }
            fn poll_read_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &mut [IoSliceMut<'_>],
            ) -> Poll<io::Result<usize>> {
                let $s = &*self;
                $e.poll_read_vectored_ref(cx, bufs)
            }
        }

        #[cfg(feature = "hyper")]
        impl hyper::rt::Read for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                mut buf: hyper::rt::ReadBufCursor<'_>,
            ) -> Poll<io::Result<()>> {
                let $s = &*self;
                let stream: &$stream = $e;
                // SAFETY: only written by the kernel below, never
                // de-initialized; `advance` counts only the bytes recv wrote.
                let dst = unsafe { buf.as_mut() };
                let len = dst.len();
                let r = stream.io.poll_read_with(cx, len, |s| {
                    // SAFETY: `dst` is valid for writes of `len` bytes (an
                    // uninitialized region recv fills), `s` an open socket.
                    let r = unsafe {
                        libc::recv(s.as_raw_fd(), dst.as_mut_ptr().cast(), len, 0)
                    };
                    if r < 0 {
                        Err(io::Error::last_os_error())
                    } else {
                        Ok(r as usize)
                    }
                });
                let n = match r {
                    Poll::Ready(Ok(n)) => n,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return waited(self, cx, Poll::Pending),
                };
                // SAFETY: recv initialized the first `n` bytes of `dst`.
                unsafe { buf.advance(n) };
                Poll::Ready(Ok(()))
            }
        }

        #[cfg(feature = "tokio")]
        impl tokio::io::AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                let $s = &*self;
                let stream: &$stream = $e;
                // SAFETY: only written by the kernel below, never
                // de-initialized; `assume_init` counts only the bytes recv
                // wrote.
                let dst = unsafe { buf.unfilled_mut() };
                let len = dst.len();
                let r = stream.io.poll_read_with(cx, len, |s| {
                    // SAFETY: `dst` is valid for writes of `len` bytes (an
                    // uninitialized region recv fills), `s` an open socket.
                    let r = unsafe {
                        libc::recv(s.as_raw_fd(), dst.as_mut_ptr().cast(), len, 0)
                    };
                    if r < 0 {
                        Err(io::Error::last_os_error())
                    } else {
                        Ok(r as usize)
                    }
                });
                let n = match r {
                    Poll::Ready(Ok(n)) => n,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return waited(self, cx, Poll::Pending),
                };
                // SAFETY: recv initialized the first `n` bytes of the
                // unfilled part.
                unsafe { buf.assume_init(n) };
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
        }
    };
    ($stream:ty; $t:ty, $s:ident => $e:expr, write) => {
        impl futures_io::AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                let $s = &*self;
                let r = $e.poll_write_ref(cx, buf);
                waited(self, cx, r)
            }
            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                let $s = &*self;
                $e.poll_write_vectored_ref(cx, bufs)
            }
            fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }
            fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                let $s = &*self;
                Poll::Ready($crate::net::shutdown_write($e.shutdown(Shutdown::Write)))
            }
        }

        #[cfg(feature = "hyper")]
        impl hyper::rt::Write for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                let $s = &*self;
                let r = $e.poll_write_ref(cx, buf);
                waited(self, cx, r)
            }
            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                let $s = &*self;
                $e.poll_write_vectored_ref(cx, bufs)
            }
            fn is_write_vectored(&self) -> bool {
                true
            }
            fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }
            fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                let $s = &*self;
                Poll::Ready($crate::net::shutdown_write($e.shutdown(Shutdown::Write)))
            }
        }

        #[cfg(feature = "tokio")]
        impl tokio::io::AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                let $s = &*self;
                let r = $e.poll_write_ref(cx, buf);
                waited(self, cx, r)
            }
            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                let $s = &*self;
                $e.poll_write_vectored_ref(cx, bufs)
            }
            fn is_write_vectored(&self) -> bool {
                true
            }
            fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }
            fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                let $s = &*self;
                Poll::Ready($crate::net::shutdown_write($e.shutdown(Shutdown::Write)))
            }
        }
    };
}

mod tcp;
mod udp;
pub mod unix;

pub use tcp::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, TcpListener, TcpStream, WriteHalf};
pub use udp::UdpSocket;
pub use unix::{UnixListener, UnixStream};

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::io::{PollEvented, Ready, Registration};

/// Registers `io` with the driver of this thread's runtime (its worker's,
/// or the one `block_on` runs); the error of [`no_runtime`] outside any.
///
/// [`no_runtime`]: crate::io::no_runtime
pub(crate) fn evented<E: mio::event::Source>(io: E) -> io::Result<PollEvented<E>> {
    let shared = crate::runtime::handle::current().ok_or_else(crate::io::no_runtime)?;
    PollEvented::new(shared.driver.io.clone(), io)
}

/// Waits until any bit of `interest` is ready on `reg` (the futures of
/// `readable()` / `writable()`: several may wait on one socket).
pub(crate) struct ReadyFuture<'a> {
    pub(crate) reg: &'a Registration,
    pub(crate) interest: Ready,
    pub(crate) key: Option<usize>,
}

impl Future for ReadyFuture<'_> {
    type Output = io::Result<Ready>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<Ready>> {
        let this = &mut *self;
        this.reg
            .poll_interest(cx, this.interest, &mut this.key)
            .map(|r| r.map(|ev| ev.ready))
    }
}

impl Drop for ReadyFuture<'_> {
    fn drop(&mut self) {
        if let Some(k) = self.key {
            self.reg.drop_waiter(k);
        }
    }
}

/// The result of closing a stream's write half for `poll_close` /
/// `poll_shutdown`: `ENOTCONN` (the peer has already closed or reset the
/// connection) means the write half is closed, which is what the caller
/// asked for.
pub(crate) fn shutdown_write(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
        r => r,
    }
}

/// Readable interest (data, a closed read half, or an error).
pub(crate) const READ: Ready = Ready::READABLE
    .union(Ready::READ_CLOSED)
    .union(Ready::ERROR);
/// Writable interest.
pub(crate) const WRITE: Ready = Ready::WRITABLE
    .union(Ready::WRITE_CLOSED)
    .union(Ready::ERROR);

/// Resolves `addr` (with `std`'s resolver, which may block on DNS: pass a
/// `SocketAddr` to avoid it) and runs `f` on each address until one works.
pub(crate) async fn each_addr<A, T, F, Fut>(addr: A, mut f: F) -> io::Result<T>
where
    A: std::net::ToSocketAddrs,
    F: FnMut(std::net::SocketAddr) -> Fut,
    Fut: Future<Output = io::Result<T>>,
{
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        match f(a).await {
            Ok(t) => return Ok(t),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        )
    }))
}
