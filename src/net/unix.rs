//! Unix domain stream sockets: [`UnixListener`] and [`UnixStream`].
//!
//! They work like their TCP counterparts (registered once, readiness
//! cached, a short read or write clears readiness); addresses are
//! [`std::os::unix::net::SocketAddr`], the type mio gives (a path, an
//! unnamed socket, or on Linux an abstract name).

use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::{waited, OnWait, ReadyFuture, READ, WRITE};
use crate::io::{Direction, PollEvented, Ready};

/// A Unix domain stream socket listening at a path.
///
/// Binding creates the socket file; dropping the listener does not remove
/// it (as with `std`): remove it yourself to bind the same path again.
///
/// ```
/// use futures_lite::{AsyncReadExt, AsyncWriteExt};
/// use hwsched::net::{UnixListener, UnixStream};
///
/// let path = std::env::temp_dir().join(format!("hwsched-doc-{}.sock", std::process::id()));
/// let _ = std::fs::remove_file(&path);
/// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
/// rt.block_on(async {
///     let listener = UnixListener::bind(&path)?;
///     let server = hwsched::spawn(async move {
///         let (mut s, _) = listener.accept().await?;
///         let mut buf = [0u8; 5];
///         s.read_exact(&mut buf).await?;
///         s.write_all(&buf).await?;
///         Ok::<_, std::io::Error>(())
///     });
///     let mut c = UnixStream::connect(&path).await?;
///     c.write_all(b"hello").await?;
///     let mut buf = [0u8; 5];
///     c.read_exact(&mut buf).await?;
///     assert_eq!(&buf, b"hello");
///     server.await.unwrap()?;
///     Ok::<_, std::io::Error>(())
/// })?;
/// std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct UnixListener {
    io: PollEvented<mio::net::UnixListener>,
}

impl UnixListener {
    /// Binds to `path` (which must not exist yet), with mio's backlog.
    /// Not async: binding a Unix socket does not wait.
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        Ok(UnixListener {
            io: super::evented(mio::net::UnixListener::bind(path)?)?,
        })
    }

    /// Takes over a listener bound with `std` (it is made non-blocking).
    pub fn from_std(l: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        l.set_nonblocking(true)?;
        Ok(UnixListener {
            io: super::evented(mio::net::UnixListener::from_std(l))?,
        })
    }

    /// Gives the listener back to `std` (deregistered, still non-blocking).
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixListener> {
        Ok(self.io.into_inner()?.into())
    }

    /// Accepts a connection, and returns it with the peer's address (most
    /// often unnamed: a client that did not bind). The new socket registers
    /// with the poller of the worker that accepts it (or, polled off the
    /// workers, with the listener's).
    ///
    /// An error (`EMFILE` when out of descriptors, say) is returned as the
    /// OS gave it, and leaves the listener ready: the next call retries.
    pub async fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        std::future::poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for a connection ([`accept`](Self::accept)).
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(UnixStream, SocketAddr)>> {
        let (s, addr) = match self
            .io
            .registration()
            .poll_io(cx, Direction::Read, || self.io.get_ref().accept())
        {
            Poll::Ready(Ok(x)) => x,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        let reg = self.io.registration();
        let handle = reg.handle().clone();
        let poller = handle.current_worker().map_or(reg.poller(), |w| {
            handle.driver().map_or(0, |d| d.poller_of(w))
        });
        Poll::Ready(PollEvented::with_poller(handle, poller, s).map(|io| (UnixStream { io }, addr)))
    }

    /// The local address (the path bound).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// Takes the pending error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }
}

impl std::fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnixListener")
            .field("local_addr", &self.local_addr().ok())
            .finish()
    }
}

impl AsRawFd for UnixListener {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl AsFd for UnixListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

/// A Unix domain stream connection.
///
/// Reads and writes through [`futures_io::AsyncRead`] /
/// [`futures_io::AsyncWrite`] (on `UnixStream` and on `&UnixStream`), the
/// `try_read` / `try_write` calls with `readable` / `writable`, (with the
/// `hyper` feature) hyper's `rt::Read` / `rt::Write`, and (with the `tokio`
/// feature) tokio's `io::AsyncRead` / `io::AsyncWrite`.
///
/// ```
/// use futures_lite::{AsyncReadExt, AsyncWriteExt};
///
/// let rt = hwsched::Runtime::builder().worker_threads(1).build()?;
/// rt.block_on(async {
///     let (mut a, mut b) = hwsched::net::UnixStream::pair()?;
///     a.write_all(b"ping").await?;
///     let mut buf = [0u8; 4];
///     b.read_exact(&mut buf).await?;
///     assert_eq!(&buf, b"ping");
///     Ok::<_, std::io::Error>(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct UnixStream {
    io: PollEvented<mio::net::UnixStream>,
}

impl UnixStream {
    /// Connects to the socket bound at `path`.
    ///
    /// A listener whose backlog is full makes this fail with `WouldBlock`
    /// (`EAGAIN`: a non-blocking Unix connect does not wait for room).
    pub async fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        let s = UnixStream {
            io: super::evented(mio::net::UnixStream::connect(path)?)?,
        };
        // A connect in progress completes when the socket is writable; its
        // outcome is the socket's pending error.
        std::future::poll_fn(|cx| s.io.registration().poll_ready(cx, Direction::Write)).await?;
        if let Some(e) = s.io.get_ref().take_error()? {
            return Err(e);
        }
        Ok(s)
    }

    /// A connected pair of unnamed sockets (`socketpair(2)`), both
    /// registered with the current runtime.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = mio::net::UnixStream::pair()?;
        Ok((
            UnixStream {
                io: super::evented(a)?,
            },
            UnixStream {
                io: super::evented(b)?,
            },
        ))
    }

    /// Takes over a connected `std` stream (it is made non-blocking).
    pub fn from_std(s: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        s.set_nonblocking(true)?;
        Ok(UnixStream {
            io: super::evented(mio::net::UnixStream::from_std(s))?,
        })
    }

    /// Gives the stream back to `std` (deregistered, still non-blocking).
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixStream> {
        Ok(self.io.into_inner()?.into())
    }

    /// The local address (unnamed unless the socket was bound).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Takes the pending error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }

    /// Shuts down the read half, the write half or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.io.get_ref().shutdown(how)
    }

    /// Waits until the stream may be readable (data, EOF or an error).
    pub async fn readable(&self) -> io::Result<()> {
        self.ready(READ).await.map(drop)
    }

    /// Waits until the stream may be writable.
    pub async fn writable(&self) -> io::Result<()> {
        self.ready(WRITE).await.map(drop)
    }

    /// Waits until any readiness of `interest` is cached, and returns it.
    pub async fn ready(&self, interest: Ready) -> io::Result<Ready> {
        ReadyFuture {
            reg: self.io.registration(),
            interest,
            key: None,
        }
        .await
    }

    /// Reads without waiting: `WouldBlock` (and no syscall) unless the
    /// cached readiness says readable.
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io
            .registration()
            .try_io(READ, || self.io.get_ref().read(buf))
    }

    /// Writes without waiting: `WouldBlock` unless writable by the cache.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.io
            .registration()
            .try_io(WRITE, || self.io.get_ref().write(buf))
    }

    /// Polls a read into `buf` ([`futures_io::AsyncRead::poll_read`], by
    /// reference).
    pub fn poll_read_ref(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.io
            .poll_read_with(cx, buf.len(), |s| (&*s).read(&mut *buf))
    }

    /// Polls a write of `buf`, by reference.
    pub fn poll_write_ref(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.io.poll_write_with(cx, buf.len(), |s| (&*s).write(buf))
    }

    fn poll_read_vectored_ref(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        self.io
            .poll_read_with(cx, len, |s| (&*s).read_vectored(&mut *bufs))
    }

    fn poll_write_vectored_ref(
        &self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        self.io
            .poll_write_with(cx, len, |s| (&*s).write_vectored(bufs))
    }

    /// Owned halves, to read in one task and write in another. The write
    /// half does not shut the socket down when dropped; call
    /// [`OwnedWriteHalf::shutdown`] (or let the last half close it).
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let s = Arc::new(self);
        (OwnedReadHalf(s.clone()), OwnedWriteHalf(s))
    }
}

impl std::fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnixStream")
            .field("local_addr", &self.local_addr().ok())
            .field("peer_addr", &self.peer_addr().ok())
            .finish()
    }
}

impl AsRawFd for UnixStream {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl AsFd for UnixStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

impl OnWait for UnixStream {
    fn on_wait(self: Pin<&mut Self>) -> bool {
        self.get_mut().io.note_wait()
    }
}
impl OnWait for &UnixStream {}
impl OnWait for OwnedReadHalf {}
impl OnWait for OwnedWriteHalf {}

stream_io!(UnixStream; UnixStream, s => s, read);
stream_io!(UnixStream; UnixStream, s => s, write);
stream_io!(UnixStream; &UnixStream, s => *s, read);
stream_io!(UnixStream; &UnixStream, s => *s, write);

/// The read half of [`UnixStream::into_split`].
#[derive(Debug)]
pub struct OwnedReadHalf(Arc<UnixStream>);
/// The write half of [`UnixStream::into_split`].
#[derive(Debug)]
pub struct OwnedWriteHalf(Arc<UnixStream>);

stream_io!(UnixStream; OwnedReadHalf, s => &*s.0, read);
stream_io!(UnixStream; OwnedWriteHalf, s => &*s.0, write);

impl OwnedReadHalf {
    /// The stream, if `w` is this half's partner.
    pub fn reunite(self, w: OwnedWriteHalf) -> Result<UnixStream, (OwnedReadHalf, OwnedWriteHalf)> {
        if !Arc::ptr_eq(&self.0, &w.0) {
            return Err((self, w));
        }
        drop(w);
        Arc::try_unwrap(self.0).map_err(|_| unreachable!("the two halves were the only owners"))
    }
}

impl AsRef<UnixStream> for OwnedReadHalf {
    /// The stream both halves share.
    fn as_ref(&self) -> &UnixStream {
        &self.0
    }
}

impl OwnedWriteHalf {
    /// Shuts the write half down (the peer reads EOF).
    pub fn shutdown(&self) -> io::Result<()> {
        self.0.shutdown(Shutdown::Write)
    }
}

impl AsRef<UnixStream> for OwnedWriteHalf {
    /// The stream both halves share.
    fn as_ref(&self) -> &UnixStream {
        &self.0
    }
}
