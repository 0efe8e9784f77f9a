//! UDP: [`UdpSocket`].
//!
//! A datagram socket registered once with a poller (read and write,
//! edge-triggered), its readiness cached like a TCP stream's. A datagram is
//! received whole or not at all, so no read is "short": only a `WouldBlock`
//! clears the cached readiness.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::task::{Context, Poll};

use super::{each_addr, ReadyFuture, READ, WRITE};
use crate::io::{Direction, PollEvented, Ready};

/// A UDP socket.
///
/// Unconnected, it sends with [`send_to`](Self::send_to) and receives with
/// [`recv_from`](Self::recv_from); after [`connect`](Self::connect), it
/// sends with [`send`](Self::send) and receives (from its peer only) with
/// [`recv`](Self::recv). Its methods take `&self`: share it in an `Arc` to
/// send from one task and receive in another.
///
/// ```
/// use hwsched::net::UdpSocket;
///
/// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
/// rt.block_on(async {
///     let a = UdpSocket::bind("127.0.0.1:0").await?;
///     let b = UdpSocket::bind("127.0.0.1:0").await?;
///     a.send_to(b"ping", b.local_addr()?).await?;
///     let mut buf = [0u8; 16];
///     let (n, from) = b.recv_from(&mut buf).await?;
///     assert_eq!(&buf[..n], b"ping");
///     assert_eq!(from, a.local_addr()?);
///     Ok::<_, std::io::Error>(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct UdpSocket {
    io: PollEvented<mio::net::UdpSocket>,
}

impl UdpSocket {
    /// Binds to `addr` (each resolved address in turn until one works).
    pub async fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        each_addr(addr, |a| async move {
            let s = mio::net::UdpSocket::bind(a)?;
            Ok(UdpSocket {
                io: super::evented(s)?,
            })
        })
        .await
    }

    /// Takes over a socket bound with `std` (it is made non-blocking).
    pub fn from_std(s: std::net::UdpSocket) -> io::Result<UdpSocket> {
        s.set_nonblocking(true)?;
        Ok(UdpSocket {
            io: super::evented(mio::net::UdpSocket::from_std(s))?,
        })
    }

    /// Gives the socket back to `std` (deregistered, still non-blocking).
    pub fn into_std(self) -> io::Result<std::net::UdpSocket> {
        Ok(self.io.into_inner()?.into())
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    /// The address of the peer set by [`connect`](Self::connect)
    /// (`NotConnected` before).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().peer_addr()
    }

    /// Sets the default destination of [`send`](Self::send) and the only
    /// source [`recv`](Self::recv) accepts: `connect(2)` on the socket,
    /// like `std`'s (no packet is sent). Each resolved address is tried in
    /// turn until one works.
    pub async fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        let s = self.io.get_ref();
        each_addr(addr, |a| async move { s.connect(a) }).await
    }

    /// Sends `buf` as one datagram to `target` (its first resolved
    /// address, with `std`'s resolver, which may block on DNS: pass a
    /// `SocketAddr` to avoid it) and returns the number of bytes sent.
    pub async fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], target: A) -> io::Result<usize> {
        let target = first_addr(target)?;
        std::future::poll_fn(|cx| self.poll_send_to(cx, buf, target)).await
    }

    /// Receives one datagram into `buf` (the excess of a longer one is
    /// discarded) and returns its length and sender.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        std::future::poll_fn(|cx| self.poll_recv_from(cx, buf)).await
    }

    /// Like [`recv_from`](Self::recv_from), but leaves the datagram queued
    /// (`MSG_PEEK`): the next receive returns it again.
    pub async fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        std::future::poll_fn(|cx| self.poll_peek_from(cx, buf)).await
    }

    /// Sends `buf` as one datagram to the connected peer.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_send(cx, buf)).await
    }

    /// Receives one datagram from the connected peer into `buf`.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_recv(cx, buf)).await
    }

    /// Polls a send of `buf` to `target` ([`send_to`](Self::send_to)).
    pub fn poll_send_to(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        target: SocketAddr,
    ) -> Poll<io::Result<usize>> {
        self.io.registration().poll_io(cx, Direction::Write, || {
            self.io.get_ref().send_to(buf, target)
        })
    }

    /// Polls a receive into `buf` ([`recv_from`](Self::recv_from)).
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        self.io.registration().poll_io(cx, Direction::Read, || {
            self.io.get_ref().recv_from(&mut *buf)
        })
    }

    /// Polls a peek into `buf` ([`peek_from`](Self::peek_from)).
    pub fn poll_peek_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        self.io.registration().poll_io(cx, Direction::Read, || {
            self.io.get_ref().peek_from(&mut *buf)
        })
    }

    /// Polls a send of `buf` to the connected peer ([`send`](Self::send)).
    pub fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.io
            .registration()
            .poll_io(cx, Direction::Write, || self.io.get_ref().send(buf))
    }

    /// Polls a receive from the connected peer ([`recv`](Self::recv)).
    pub fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.io
            .registration()
            .poll_io(cx, Direction::Read, || self.io.get_ref().recv(&mut *buf))
    }

    /// Waits until a datagram may be queued (or an error is pending).
    pub async fn readable(&self) -> io::Result<()> {
        self.ready(READ).await.map(drop)
    }

    /// Waits until the socket may be writable.
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

    /// Sends without waiting: `WouldBlock` (and no syscall) unless the
    /// cached readiness says writable.
    pub fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        self.io
            .registration()
            .try_io(WRITE, || self.io.get_ref().send_to(buf, target))
    }

    /// Receives without waiting: `WouldBlock` (and no syscall) unless the
    /// cached readiness says readable.
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.io
            .registration()
            .try_io(READ, || self.io.get_ref().recv_from(buf))
    }

    /// Sends to the connected peer without waiting (see
    /// [`try_send_to`](Self::try_send_to)).
    pub fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io
            .registration()
            .try_io(WRITE, || self.io.get_ref().send(buf))
    }

    /// Receives from the connected peer without waiting (see
    /// [`try_recv_from`](Self::try_recv_from)).
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io
            .registration()
            .try_io(READ, || self.io.get_ref().recv(buf))
    }

    /// Sets `SO_BROADCAST` (sending to a broadcast address).
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.io.get_ref().set_broadcast(on)
    }

    /// Whether `SO_BROADCAST` is set.
    pub fn broadcast(&self) -> io::Result<bool> {
        self.io.get_ref().broadcast()
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get_ref().set_ttl(ttl)
    }

    /// The `IP_TTL` of the socket.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get_ref().ttl()
    }

    /// Takes the pending error (`SO_ERROR`): an ICMP error reported for a
    /// datagram sent earlier, say.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get_ref().take_error()
    }
}

/// The first address `addr` resolves to (`send_to` sends one datagram).
fn first_addr<A: ToSocketAddrs>(addr: A) -> io::Result<SocketAddr> {
    addr.to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        )
    })
}

impl std::fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSocket")
            .field("local_addr", &self.local_addr().ok())
            .field("peer_addr", &self.peer_addr().ok())
            .finish()
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.io.get_ref().as_raw_fd()
    }
}

impl AsFd for UdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.get_ref().as_fd()
    }
}
