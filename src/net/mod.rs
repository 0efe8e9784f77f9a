//! Sockets on hwsched's I/O driver: [`TcpListener`], [`TcpStream`],
//! [`UdpSocket`], [`UnixListener`], [`UnixStream`].
//!
//! Each registers once with a poller of the runtime it is created in (read
//! and write, edge-triggered) and caches its readiness, so a read runs only
//! when epoll said there is something to read, and waiting costs no
//! syscall (`hwsched::io`'s module docs). They implement futures-io's
//! [`AsyncRead`](futures_io::AsyncRead) / [`AsyncWrite`](futures_io::AsyncWrite)
//! and, with the `hyper` feature, hyper 1.x's `rt::Read` / `rt::Write`
//! (reading into hyper's uninitialized buffer, with vectored writes).
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

mod tcp;
mod udp;
mod unix;

pub use tcp::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, TcpListener, TcpStream, WriteHalf};
pub use udp::UdpSocket;
pub use unix::{UnixListener, UnixStream};

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::io::{Ready, Registration};

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
