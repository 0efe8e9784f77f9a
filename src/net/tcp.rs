//! TCP: [`TcpListener`] and [`TcpStream`].

use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::{each_addr, waited, OnWait, ReadyFuture, READ, WRITE};
use crate::io::{Direction, PollEvented, Ready};

/// A TCP listening socket.
///
/// ```
/// let rt = hwsched::Runtime::builder().worker_threads(1).build()?;
/// rt.block_on(async {
///     let l = hwsched::net::TcpListener::bind("127.0.0.1:0").await?;
///     assert!(l.local_addr()?.port() > 0);
///     Ok::<_, std::io::Error>(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TcpListener {
    io: PollEvented<mio::net::TcpListener>,
}

impl TcpListener {
    /// Binds to `addr` (the first address that works), with `SO_REUSEADDR`
    /// and a backlog of 1024 (mio's).
    pub async fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        each_addr(addr, |a| async move {
            let l = mio::net::TcpListener::bind(a)?;
            Ok(TcpListener {
                io: super::evented(l)?,
            })
        })
        .await
    }

    /// Takes over a listener bound with `std` (it is made non-blocking).
    pub fn from_std(l: std::net::TcpListener) -> io::Result<TcpListener> {
        l.set_nonblocking(true)?;
        Ok(TcpListener {
            io: super::evented(mio::net::TcpListener::from_std(l))?,
        })
    }

    /// Gives the listener back to `std` (deregistered, still non-blocking).
    pub fn into_std(self) -> io::Result<std::net::TcpListener> {
        let l = self.io.into_inner()?;
        Ok(std::net::TcpListener::from(std::os::fd::OwnedFd::from(l)))
    }

    /// Accepts a connection. The new socket registers with the poller of
    /// the domain whose CPU received it (`SO_INCOMING_CPU`) when the
    /// runtime has several pollers, else with the accepting worker's.
    ///
    /// An error (`EMFILE` when out of descriptors, say) is returned as the
    /// OS gave it, and leaves the listener ready: the next call retries.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        std::future::poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for a connection ([`accept`](Self::accept)).
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
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
        let poller = incoming_poller(&handle, s.as_raw_fd()).unwrap_or_else(|| {
            handle.current_worker().map_or(reg.poller(), |w| {
                handle.driver().map_or(0, |d| d.poller_of(w))
            })
        });
        Poll::Ready(PollEvented::with_poller(handle, poller, s).map(|io| (TcpStream { io }, addr)))
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }
}

impl std::fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpListener")
            .field("local_addr", &self.local_addr().ok())
            .finish()
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl AsFd for TcpListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

/// The poller for an accepted socket: that of the domain of the CPU the
/// kernel received it on, when the runtime has several pollers.
fn incoming_poller(handle: &crate::io::IoHandle, fd: RawFd) -> Option<usize> {
    let d = handle.get()?;
    if d.pollers.len() < 2 {
        return None;
    }
    let mut cpu: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` is an open socket owned by the caller; `cpu` and `len`
    // are valid for writes of the sizes given.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_INCOMING_CPU,
            (&mut cpu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r != 0 || cpu < 0 {
        return None;
    }
    handle.poller_of_cpu(d, cpu as usize)
}

/// A TCP connection.
///
/// Reads and writes through [`futures_io::AsyncRead`] /
/// [`futures_io::AsyncWrite`] (on `TcpStream` and on `&TcpStream`), the
/// `try_read` / `try_write` calls with `readable` / `writable`, (with the
/// `hyper` feature) hyper's `rt::Read` / `rt::Write`, and (with the `tokio`
/// feature) tokio's `io::AsyncRead` / `io::AsyncWrite`.
pub struct TcpStream {
    io: PollEvented<mio::net::TcpStream>,
}

impl TcpStream {
    /// Connects to `addr` (each resolved address in turn until one works).
    pub async fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        each_addr(addr, |a| async move {
            let s = TcpStream {
                io: super::evented(mio::net::TcpStream::connect(a)?)?,
            };
            // A non-blocking connect completes when the socket is writable;
            // its outcome is the socket's pending error.
            std::future::poll_fn(|cx| s.io.registration().poll_ready(cx, Direction::Write)).await?;
            if let Some(e) = s.io.get_ref().take_error()? {
                return Err(e);
            }
            s.io.get_ref().peer_addr()?;
            Ok(s)
        })
        .await
    }

    /// Takes over a connected `std` stream (it is made non-blocking).
    pub fn from_std(s: std::net::TcpStream) -> io::Result<TcpStream> {
        s.set_nonblocking(true)?;
        Ok(TcpStream {
            io: super::evented(mio::net::TcpStream::from_std(s))?,
        })
    }

    /// Gives the stream back to `std` (deregistered, still non-blocking).
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        Ok(self.io.into_inner()?.into())
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// Sets `TCP_NODELAY`.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.io.get_ref().set_nodelay(on)
    }

    /// Whether `TCP_NODELAY` is set.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.io.get_ref().nodelay()
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
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

    /// Reads into `buf` without consuming the data (`MSG_PEEK`).
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| {
            self.io
                .registration()
                .poll_io(cx, Direction::Read, || self.io.get_ref().peek(buf))
        })
        .await
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

    /// Borrowed halves, one to read and one to write, usable at once from
    /// two futures of one task.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        (ReadHalf(self), WriteHalf(self))
    }

    /// Owned halves, to read in one task and write in another. The write
    /// half does not shut the socket down when dropped; call
    /// [`OwnedWriteHalf::shutdown`] (or let the last half close it).
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let s = Arc::new(self);
        (OwnedReadHalf(s.clone()), OwnedWriteHalf(s))
    }
}

impl std::fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStream")
            .field("local_addr", &self.local_addr().ok())
            .field("peer_addr", &self.peer_addr().ok())
            .finish()
    }
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}

impl OnWait for TcpStream {
    fn on_wait(self: Pin<&mut Self>) -> bool {
        self.get_mut().io.note_wait()
    }
}
impl OnWait for &TcpStream {}
impl OnWait for ReadHalf<'_> {}
impl OnWait for WriteHalf<'_> {}
impl OnWait for OwnedReadHalf {}
impl OnWait for OwnedWriteHalf {}

stream_io!(TcpStream; TcpStream, s => s, read);
stream_io!(TcpStream; TcpStream, s => s, write);
stream_io!(TcpStream; &TcpStream, s => *s, read);
stream_io!(TcpStream; &TcpStream, s => *s, write);

/// The read half of [`TcpStream::split`].
#[derive(Debug)]
pub struct ReadHalf<'a>(&'a TcpStream);
/// The write half of [`TcpStream::split`].
#[derive(Debug)]
pub struct WriteHalf<'a>(&'a TcpStream);
/// The read half of [`TcpStream::into_split`].
#[derive(Debug)]
pub struct OwnedReadHalf(Arc<TcpStream>);
/// The write half of [`TcpStream::into_split`].
#[derive(Debug)]
pub struct OwnedWriteHalf(Arc<TcpStream>);

stream_io!(TcpStream; ReadHalf<'_>, s => s.0, read);
stream_io!(TcpStream; WriteHalf<'_>, s => s.0, write);
stream_io!(TcpStream; OwnedReadHalf, s => &*s.0, read);
stream_io!(TcpStream; OwnedWriteHalf, s => &*s.0, write);

impl OwnedReadHalf {
    /// The stream, if `w` is this half's partner.
    pub fn reunite(self, w: OwnedWriteHalf) -> Result<TcpStream, (OwnedReadHalf, OwnedWriteHalf)> {
        if !Arc::ptr_eq(&self.0, &w.0) {
            return Err((self, w));
        }
        drop(w);
        Arc::try_unwrap(self.0).map_err(|_| unreachable!("the two halves were the only owners"))
    }
}

impl AsRef<TcpStream> for OwnedReadHalf {
    fn as_ref(&self) -> &TcpStream {
        &self.0
    }
}

impl AsRef<TcpStream> for OwnedWriteHalf {
    fn as_ref(&self) -> &TcpStream {
        &self.0
    }
}

impl OwnedWriteHalf {
    /// Shuts the write half down (the peer reads EOF).
    pub fn shutdown(&self) -> io::Result<()> {
        self.0.shutdown(Shutdown::Write)
    }
}
