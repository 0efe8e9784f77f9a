//! [`serve`]: a tower or hyper service over HTTP/1 and HTTP/2 on an
//! hwsched [`TcpListener`], each connection a task.
//!
//! The protocol of a connection is read from its first bytes: HTTP/2's
//! preface (`PRI * HTTP/2.0...`, "prior knowledge", as h2c clients and
//! gRPC over plain TCP send) selects hyper's HTTP/2 server, anything else
//! hyper's HTTP/1 server (with upgrades, for WebSockets). The bytes read to
//! decide are handed back to hyper first ([`Rewind`]).
//!
//! # The header read timeout
//!
//! A client that connects and sends nothing, or a part of a request head,
//! is disconnected after the header read timeout. On HTTP/1 it runs while
//! a connection waits for a request head: from the connection's accept,
//! and again from the end of each response (when hyper drops its body)
//! until the next head is complete; a request being served (its handler,
//! its bodies) is not timed. These are the semantics of hyper's
//! `header_read_timeout`, but kept per connection, not per request
//! ([`HeadClock`]): hyper's boxes and registers a timer for every request
//! head and cancels it when the head has come (with the read that
//! re-arms it, 1,843 instructions per request under callgrind,
//! `examples/axum.rs`, 16% of a hello request). Here a connection holds
//! one timer; a request costs two counter updates and a clock read, and
//! the timer is looked at when it comes due (once per timeout at most, on
//! a busy connection): it is pushed to the end of the current idle period
//! or fires. On HTTP/2 it bounds the preface.
//!
//! Graceful shutdown: when the signal given to
//! [`Serve::with_graceful_shutdown`] completes, the listener is closed, each
//! connection is asked to close (`graceful_shutdown`: HTTP/1 closes after
//! the response in flight, or at once when idle; HTTP/2 sends GOAWAY and
//! finishes its open streams), and the serve future completes when the
//! last connection has.

use std::error::Error as StdError;
use std::future::{Future, IntoFuture};
use std::io;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use ::hyper::body::{Body, Incoming};
use ::hyper::server::conn::{http1, http2};
use ::hyper::{Request, Response};
use parking_lot::Mutex;

use super::{Executor, Timer};
use crate::net::{TcpListener, TcpStream};
use crate::runtime::handle::Handle;

type BoxError = Box<dyn StdError + Send + Sync>;

/// The default header read timeout: hyper's own default (once it has a
/// timer), 30 s.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the accept loop pauses after running out of descriptors or
/// memory (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`): the connections being
/// served close meanwhile, and a loop that retried at once would spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// The HTTP/2 connection preface.
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serves `service` on `listener`: every accepted connection is a task
/// that speaks HTTP/1 or HTTP/2 (read from its first bytes), with
/// [`Timer`] and a header read timeout of 30 s
/// ([`Serve::header_read_timeout`]). Await the returned [`Serve`] (inside
/// an hwsched runtime) to run it; it runs until its listener fails, or
/// until the signal of [`Serve::with_graceful_shutdown`].
///
/// `service` is a tower `Service` of `Request<Incoming>` (an axum
/// `Router`, a tower-http stack, tonic's `Routes`) that is `Clone`: each
/// request is served by a clone, made ready then called (tower's
/// `oneshot`). A hyper service (`hyper::service::service_fn`) goes in a
/// [`HyperService`].
///
/// ```
/// use std::convert::Infallible;
/// use std::future::IntoFuture;
/// use http_body_util::{BodyExt, Full};
/// use hyper::body::{Bytes, Incoming};
/// use hyper::{Request, Response};
///
/// async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
///     Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
/// }
///
/// let rt = hwsched::Runtime::builder().worker_threads(2).build()?;
/// rt.block_on(async {
///     let listener = hwsched::net::TcpListener::bind("127.0.0.1:0").await?;
///     let addr = listener.local_addr()?;
///     let (stop, stopped) = std::sync::mpsc::channel::<()>();
///     let server = hwsched::spawn(
///         hwsched::hyper::serve(listener, hwsched::hyper::HyperService(hyper::service::service_fn(hello)))
///             .header_read_timeout(std::time::Duration::from_secs(5))
///             .with_graceful_shutdown(async move {
///                 while stopped.try_recv().is_err() {
///                     hwsched::time::sleep(std::time::Duration::from_millis(1)).await;
///                 }
///             })
///             .into_future(),
///     );
///
///     // A client: hyper's, on an hwsched TcpStream.
///     let stream = hwsched::net::TcpStream::connect(addr).await?;
///     let (mut send, conn) = hyper::client::conn::http1::handshake(stream).await?;
///     hwsched::spawn(conn);
///     let req = Request::get("/").body(Full::<Bytes>::default())?;
///     let body = send.send_request(req).await?.into_body().collect().await?.to_bytes();
///     assert_eq!(&body[..], b"hello");
///     drop(send);
///
///     stop.send(()).unwrap();
///     server.await.expect("the serve task")?;
///     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// ```
pub fn serve<S>(listener: TcpListener, service: S) -> Serve<S, std::future::Pending<()>> {
    Serve {
        listener,
        service,
        signal: std::future::pending(),
        header_read_timeout: Some(HEADER_READ_TIMEOUT),
        nodelay: false,
    }
}

/// A server: what [`serve`] returns. Set its options, then `.await` it
/// (it is [`IntoFuture`]); its output is `Ok(())` after a graceful
/// shutdown, or the [`ServeError`] that stopped it.
#[must_use = "a Serve does nothing until it is awaited"]
pub struct Serve<S, G> {
    listener: TcpListener,
    service: S,
    signal: G,
    header_read_timeout: Option<Duration>,
    nodelay: bool,
}

impl<S, G> std::fmt::Debug for Serve<S, G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serve")
            .field("listener", &self.listener)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("nodelay", &self.nodelay)
            .finish()
    }
}

impl<S, G> Serve<S, G> {
    /// How long a client may take to send a request head: from the accept
    /// to the first bytes (which say HTTP/1 or HTTP/2) and, on HTTP/1, to
    /// the end of the first request head, then from the end of each
    /// response to the end of the next head (hyper's `header_read_timeout`
    /// semantics, which also close an HTTP/1 connection idle that long
    /// between requests; kept per connection, module docs). A client
    /// slower than that is disconnected; a request being served is never
    /// cut. `None` turns it off (not advised on a server that faces the
    /// network); a timeout past about 136 years (`Duration::MAX`) is kept
    /// as that, never reached. Default: 30 s.
    pub fn header_read_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.header_read_timeout = timeout.into();
        self
    }

    /// Sets `TCP_NODELAY` on every accepted connection. Default: off (the
    /// OS default, as `axum::serve`'s).
    pub fn tcp_nodelay(mut self, on: bool) -> Self {
        self.nodelay = on;
        self
    }

    /// Stops serving when `signal` completes: the listener is closed, the
    /// open connections finish what is in flight and close, and then the
    /// serve future completes with `Ok(())`.
    pub fn with_graceful_shutdown<G2>(self, signal: G2) -> Serve<S, G2>
    where
        G2: Future<Output = ()> + Send + 'static,
    {
        Serve {
            listener: self.listener,
            service: self.service,
            signal,
            header_read_timeout: self.header_read_timeout,
            nodelay: self.nodelay,
        }
    }

    /// The listener's local address.
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }
}

/// Why a [`Serve`] stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServeError {
    /// The listener failed with an error that retrying would not cure
    /// (not a connection aborted before it was accepted, nor running out
    /// of descriptors, which the loop waits out). The connections already
    /// accepted go on as detached tasks.
    Accept(io::Error),
    /// The serve future was polled outside any hwsched runtime.
    NoRuntime,
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Accept(e) => write!(f, "hwsched::hyper::serve: accept failed: {e}"),
            ServeError::NoRuntime => f.write_str(
                "hwsched::hyper::serve: polled outside any hwsched runtime (await it in \
                 Runtime::block_on or a task)",
            ),
        }
    }
}

impl StdError for ServeError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            ServeError::Accept(e) => Some(e),
            ServeError::NoRuntime => None,
        }
    }
}

impl<S, B, G> IntoFuture for Serve<S, G>
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
    G: Future<Output = ()> + Send + 'static,
{
    type Output = Result<(), ServeError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<(), ServeError>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

/// What each connection task shares: hyper's two builders.
struct Conf {
    h1: http1::Builder,
    h2: http2::Builder<Executor>,
    header_read_timeout: Option<Duration>,
    nodelay: bool,
}

/// What an accept error means to the loop.
enum AcceptError {
    /// The connection went away before it was accepted, or the attempt
    /// was interrupted: accept the next.
    Skip,
    /// Out of descriptors or memory: wait a little, then accept again.
    Pause,
    /// The listener itself is broken.
    Fatal,
}

fn classify(e: &io::Error) -> AcceptError {
    use io::ErrorKind as K;
    if matches!(
        e.kind(),
        K::ConnectionAborted | K::ConnectionReset | K::ConnectionRefused | K::Interrupted
    ) {
        return AcceptError::Skip;
    }
    match e.raw_os_error() {
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => AcceptError::Pause,
        // Linux passes pending network errors of the new socket to accept
        // (accept(2), "Error handling"): retry, as for ECONNABORTED.
        Some(
            libc::ENETDOWN
            | libc::EPROTO
            | libc::ENOPROTOOPT
            | libc::EHOSTDOWN
            | libc::ENONET
            | libc::EHOSTUNREACH
            | libc::EOPNOTSUPP
            | libc::ENETUNREACH
            | libc::EPERM,
        ) => AcceptError::Skip,
        _ => AcceptError::Fatal,
    }
}

impl<S, B, G> Serve<S, G>
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
    G: Future<Output = ()> + Send + 'static,
{
    async fn run(self) -> Result<(), ServeError> {
        let handle = Handle::try_current().ok_or(ServeError::NoRuntime)?;
        let mut h1 = http1::Builder::new();
        // The header read timeout is this module's, per connection
        // (`HeadClock`), not hyper's per request.
        h1.timer(Timer).header_read_timeout(None);
        let mut h2 = http2::Builder::new(Executor::with_handle(handle.clone()));
        h2.timer(Timer);
        let conf = Arc::new(Conf {
            h1,
            h2,
            header_read_timeout: self.header_read_timeout,
            nodelay: self.nodelay,
        });
        let track = Arc::new(Track::default());
        let listener = self.listener;
        let mut signal = pin!(self.signal);
        loop {
            let next = std::future::poll_fn(|cx| {
                if signal.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
                listener.poll_accept(cx).map(Some)
            })
            .await;
            match next {
                None => break,
                Some(Ok((stream, _peer))) => {
                    let guard = Track::enter(&track);
                    let svc = self.service.clone();
                    drop(handle.spawn(connection(stream, svc, conf.clone(), guard)));
                }
                Some(Err(e)) => match classify(&e) {
                    AcceptError::Skip => {}
                    AcceptError::Pause => {
                        let mut pause = pin!(crate::time::sleep(ACCEPT_PAUSE));
                        let stop = std::future::poll_fn(|cx| {
                            if signal.as_mut().poll(cx).is_ready() {
                                return Poll::Ready(true);
                            }
                            pause.as_mut().poll(cx).map(|()| false)
                        })
                        .await;
                        if stop {
                            break;
                        }
                    }
                    AcceptError::Fatal => return Err(ServeError::Accept(e)),
                },
            }
        }
        drop(listener);
        track.close();
        std::future::poll_fn(|cx| track.poll_drained(cx)).await;
        Ok(())
    }
}

/// One connection: its protocol, then hyper's server for it until it ends.
async fn connection<S, B>(stream: TcpStream, svc: S, conf: Arc<Conf>, mut guard: ConnGuard)
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    if conf.nodelay {
        let _ = stream.set_nodelay(true);
    }
    // The header read deadline, from the accept: it bounds the preface,
    // then (HTTP/1) each wait for a request head.
    let mut head = conf.header_read_timeout.map(HeadDeadline::new);
    let preface = {
        let mut read = pin!(read_preface(&stream));
        // Closing before a request has come: nothing is in flight.
        let r = std::future::poll_fn(|cx| {
            if guard.poll_closing(cx).is_ready() {
                return Poll::Ready(None);
            }
            if let Poll::Ready(r) = read.as_mut().poll(cx) {
                return Poll::Ready(Some(r));
            }
            match &mut head {
                // No request yet: the connection is idle since its accept.
                Some(h) => h.poll_expired(cx).map(|()| None),
                None => Poll::Pending,
            }
        })
        .await;
        match r {
            Some(Ok(p)) => p,
            // Timed out, failed or closing: drop the connection.
            Some(Err(_)) | None => return,
        }
    };
    let h2 = preface.is_h2();
    let io = Rewind {
        pre: preface.buf,
        pos: 0,
        end: preface.len as u8,
        io: stream,
    };
    // A connection's error (the client went away, a malformed request)
    // or its header timeout ends the connection only; hyper has answered
    // what it could.
    if h2 {
        let conn = conf.h2.serve_connection(io, ToHyper(svc));
        drive(conn, &mut guard, None, |c| c.graceful_shutdown()).await
    } else {
        let svc = ToHyperH1 {
            svc,
            clock: head.as_ref().map(|h| h.clock.clone()),
        };
        let conn = conf.h1.serve_connection(io, svc).with_upgrades();
        drive(conn, &mut guard, head.as_mut(), |c| c.graceful_shutdown()).await
    }
}

/// Polls `conn` to its end, asking it to close gracefully (once) when the
/// server closes; drops it when `head` (HTTP/1's header read deadline)
/// expires.
async fn drive<C: Future>(
    conn: C,
    guard: &mut ConnGuard,
    mut head: Option<&mut HeadDeadline>,
    graceful: impl Fn(Pin<&mut C>),
) {
    let mut conn = pin!(conn);
    let mut asked = false;
    std::future::poll_fn(|cx| {
        if !asked && guard.poll_closing(cx).is_ready() {
            asked = true;
            graceful(conn.as_mut());
        }
        if conn.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        match &mut head {
            Some(h) => h.poll_expired(cx),
            None => Poll::Pending,
        }
    })
    .await
}

/// An HTTP/1 connection's wait for request heads, as the requests see it:
/// how many are being served, and since when the connection waits for the
/// next head ([`HeadDeadline`] reads them when its timer comes due).
struct HeadClock {
    /// The connection's clock (from its accept).
    clock: crate::timing::Clock,
    /// When the connection began to wait for a request head: its accept
    /// (0), or the end of its last response, in ns of `clock`.
    idle_since: AtomicU64,
    /// Requests whose head has come and whose response body hyper has not
    /// dropped yet.
    busy: AtomicUsize,
}

/// A request being served, from its head to the drop of its response
/// body: while one is, its connection's header read timeout does not run.
struct Busy(Arc<HeadClock>);

impl Busy {
    fn new(clock: Arc<HeadClock>) -> Busy {
        // Relaxed, as every access to `busy` and `idle_since`: the
        // connection task makes and drops every `Busy` (hyper polls the
        // service's future and the response body within it) and reads
        // them; another thread running it later is ordered by the task's
        // hand-off.
        clock.busy.fetch_add(1, Ordering::Relaxed);
        Busy(clock)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let c = &self.0;
        c.idle_since.store(c.clock.ns(), Ordering::Relaxed);
        c.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection's header read timeout: one timer for the connection's
/// life ([`HeadClock`]'s, module docs).
struct HeadDeadline {
    timeout: Duration,
    /// The connection's accept: `clock`'s 0.
    start: Instant,
    clock: Arc<HeadClock>,
    sleep: crate::time::Sleep,
    /// The waker of the last poll that left `sleep` pending (registered
    /// with it, or, out of budget, with the task's deferred wake: the
    /// connection task's either way, as every poll's is): while the timer
    /// waits and the poll's waker wakes the same task, a poll reads the
    /// timer's state only, not its entry's lock.
    waker: Option<Waker>,
}

/// The longest header read timeout kept: a longer one (`Duration::MAX`)
/// is this, about 136 years, which is never reached, and every deadline
/// computed from it fits an `Instant`.
const MAX_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(u32::MAX as u64);

impl HeadDeadline {
    fn new(timeout: Duration) -> HeadDeadline {
        let timeout = timeout.min(MAX_HEADER_READ_TIMEOUT);
        let start = Instant::now();
        HeadDeadline {
            timeout,
            start,
            clock: Arc::new(HeadClock {
                clock: crate::timing::Clock::new(start),
                idle_since: AtomicU64::new(0),
                busy: AtomicUsize::new(0),
            }),
            sleep: crate::time::sleep_until(start + timeout),
            waker: None,
        }
    }

    /// Ready when the connection has waited `timeout` for a request head.
    /// When the timer comes due with a request being served, or after a
    /// response that ended later than the timer was set for, it is set
    /// again: `timeout` from now, or from that response.
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.sleep.waits() && self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            return Poll::Pending;
        }
        loop {
            if Pin::new(&mut self.sleep).poll(cx).is_pending() {
                self.waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
            self.waker = None;
            let now = Instant::now();
            let c = &self.clock;
            let due = if c.busy.load(Ordering::Relaxed) > 0 {
                now + self.timeout
            } else {
                let idle = Duration::from_nanos(c.idle_since.load(Ordering::Relaxed));
                self.start + idle + self.timeout
            };
            if due <= now {
                return Poll::Ready(());
            }
            self.sleep.reset(due);
        }
    }
}

/// The first bytes of a connection: up to HTTP/2's preface.
struct Preface {
    buf: [u8; 24],
    len: usize,
}

impl Preface {
    fn is_h2(&self) -> bool {
        self.len == H2_PREFACE.len() && &self.buf == H2_PREFACE
    }
}

/// Reads until the bytes are HTTP/2's whole preface, or differ from it, or
/// the client closed.
async fn read_preface(stream: &TcpStream) -> io::Result<Preface> {
    let mut p = Preface {
        buf: [0; 24],
        len: 0,
    };
    loop {
        let n = std::future::poll_fn(|cx| stream.poll_read_ref(cx, &mut p.buf[p.len..])).await?;
        if n == 0 {
            return Ok(p);
        }
        p.len += n;
        if p.len == H2_PREFACE.len() || p.buf[..p.len] != H2_PREFACE[..p.len] {
            return Ok(p);
        }
    }
}

/// A stream whose first bytes were read already: they are read again,
/// then the stream's own.
struct Rewind<T> {
    pre: [u8; 24],
    pos: u8,
    end: u8,
    io: T,
}

impl<T: ::hyper::rt::Read + Unpin> ::hyper::rt::Read for Rewind<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ::hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.pos < this.end {
            let (pos, end) = (this.pos as usize, this.end as usize);
            let n = (end - pos).min(buf.remaining());
            buf.put_slice(&this.pre[pos..pos + n]);
            this.pos += n as u8;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<T: ::hyper::rt::Write + Unpin> ::hyper::rt::Write for Rewind<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A hyper service for [`serve`]: wraps a `hyper::service::Service` (such
/// as `hyper::service::service_fn`'s) so that it is a tower service, the
/// kind `serve` takes. Always ready; each request is served by a clone.
#[derive(Clone, Copy, Debug, Default)]
pub struct HyperService<S>(pub S);

impl<S, R> tower_service::Service<R> for HyperService<S>
where
    S: ::hyper::service::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: R) -> S::Future {
        self.0.call(req)
    }
}

/// A tower service as hyper's: each request served by a clone, made ready
/// and then called.
struct ToHyper<S>(S);

impl<S, R> ::hyper::service::Service<R> for ToHyper<S>
where
    S: tower_service::Service<R> + Clone,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Oneshot<S, R>;

    fn call(&self, req: R) -> Self::Future {
        Oneshot {
            state: State::NotReady(self.0.clone(), Some(req)),
        }
    }
}

/// [`ToHyper`] for HTTP/1 with a header read timeout: each request is
/// [`Busy`] from its call to the drop of its response body.
struct ToHyperH1<S> {
    svc: S,
    clock: Option<Arc<HeadClock>>,
}

impl<S, R, B> ::hyper::service::Service<R> for ToHyperH1<S>
where
    S: tower_service::Service<R, Response = Response<B>> + Clone,
{
    type Response = Response<TimedBody<B>>;
    type Error = S::Error;
    type Future = Timed<S, R>;

    fn call(&self, req: R) -> Self::Future {
        Timed {
            busy: self.clock.clone().map(Busy::new),
            inner: Oneshot {
                state: State::NotReady(self.svc.clone(), Some(req)),
            },
        }
    }
}

/// A request's future under [`ToHyperH1`]: its response's body carries
/// the request's [`Busy`].
struct Timed<S: tower_service::Service<R>, R> {
    inner: Oneshot<S, R>,
    busy: Option<Busy>,
}

impl<S, R, B> Future for Timed<S, R>
where
    S: tower_service::Service<R, Response = Response<B>>,
{
    type Output = Result<Response<TimedBody<B>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `inner` is structurally pinned: it is polled through
        // `Pin::new_unchecked` and never moved out; `Timed` has no `Drop`
        // impl. `busy` is not pinned (it is moved out by `take`).
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above.
        let inner = unsafe { Pin::new_unchecked(&mut this.inner) };
        let resp = std::task::ready!(inner.poll(cx))?;
        let busy = this.busy.take();
        Poll::Ready(Ok(resp.map(|body| TimedBody { body, _busy: busy })))
    }
}

/// A response body that ends its request's [`Busy`] when hyper drops it
/// (written out, or the connection gone).
struct TimedBody<B> {
    body: B,
    _busy: Option<Busy>,
}

impl<B: Body> Body for TimedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<::hyper::body::Frame<B::Data>, B::Error>>> {
        // SAFETY: `body` is structurally pinned: it is polled through
        // `Pin::new_unchecked` and never moved out; `TimedBody` has no
        // `Drop` impl (its `Busy` is dropped in place after it).
        unsafe { self.map_unchecked_mut(|b| &mut b.body) }.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> ::hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// tower's `oneshot`: `poll_ready`, then `call`, then the call's future.
struct Oneshot<S: tower_service::Service<R>, R> {
    state: State<S, R>,
}

enum State<S: tower_service::Service<R>, R> {
    NotReady(S, Option<R>),
    Called(S::Future),
    Done,
}

impl<S: tower_service::Service<R>, R> Future for Oneshot<S, R> {
    type Output = Result<S::Response, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: only `State::Called`'s future is pinned (structurally):
        // it is polled through `Pin::new_unchecked` below and never moved
        // out; it is dropped in place when `state` is overwritten. The
        // service and the request of `NotReady` are not pinned (moved out
        // by `take`, or borrowed mutably), and `Oneshot` has no `Drop`
        // impl that could move the future.
        let this = unsafe { self.get_unchecked_mut() };
        loop {
            match &mut this.state {
                State::NotReady(svc, req) => {
                    if let Err(e) = std::task::ready!(svc.poll_ready(cx)) {
                        this.state = State::Done;
                        return Poll::Ready(Err(e));
                    }
                    let req = req.take().expect("a request until called");
                    let fut = svc.call(req);
                    this.state = State::Called(fut);
                }
                State::Called(fut) => {
                    // SAFETY: see above: the future stays where it is until
                    // it is dropped in place.
                    let fut = unsafe { Pin::new_unchecked(fut) };
                    let out = std::task::ready!(fut.poll(cx));
                    this.state = State::Done;
                    return Poll::Ready(out);
                }
                State::Done => panic!("Oneshot polled after it completed"),
            }
        }
    }
}

/// The connections of one server: the closing signal each watches, and
/// their count, which the shutdown waits to reach zero.
#[derive(Default)]
struct Track {
    closing: AtomicBool,
    conns: AtomicUsize,
    /// The wakers of connection tasks that watch `closing`, by slot.
    wakers: Mutex<Slots>,
    /// The serve future, waiting for the count to reach zero.
    drained: Mutex<Option<Waker>>,
}

#[derive(Default)]
struct Slots {
    wakers: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl Track {
    /// A new connection: counted until its guard drops.
    fn enter(track: &Arc<Track>) -> ConnGuard {
        track.conns.fetch_add(1, Ordering::AcqRel);
        ConnGuard {
            track: track.clone(),
            slot: None,
            last: None,
        }
    }

    /// Tells every connection to close.
    fn close(&self) {
        // Before the lock: a connection that registers after this takes the
        // lock after it and sees `closing` (in `poll_closing`).
        self.closing.store(true, Ordering::SeqCst);
        let wakers: Vec<Waker> = {
            let mut s = self.wakers.lock();
            s.wakers.iter_mut().filter_map(Option::take).collect()
        };
        for w in wakers {
            w.wake();
        }
    }

    fn poll_drained(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.conns.load(Ordering::Acquire) == 0 {
            return Poll::Ready(());
        }
        *self.drained.lock() = Some(cx.waker().clone());
        // After storing the waker: a guard that drops the count to zero
        // after this load takes the lock after the store, and wakes it.
        if self.conns.load(Ordering::Acquire) == 0 {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// A connection task's place in [`Track`].
struct ConnGuard {
    track: Arc<Track>,
    slot: Option<usize>,
    /// The waker registered in the slot (to register again only when the
    /// task's waker changes: one lock per connection, not per poll).
    last: Option<Waker>,
}

impl ConnGuard {
    /// Ready once the server closes.
    fn poll_closing(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.track.closing.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        if self.last.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            return Poll::Pending;
        }
        let mut s = self.track.wakers.lock();
        if self.track.closing.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        let w = cx.waker().clone();
        match self.slot {
            Some(i) => s.wakers[i] = Some(w.clone()),
            None => {
                let i = match s.free.pop() {
                    Some(i) => {
                        s.wakers[i] = Some(w.clone());
                        i
                    }
                    None => {
                        s.wakers.push(Some(w.clone()));
                        s.wakers.len() - 1
                    }
                };
                self.slot = Some(i);
            }
        }
        self.last = Some(w);
        Poll::Pending
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            let mut s = self.track.wakers.lock();
            s.wakers[i] = None;
            s.free.push(i);
        }
        if self.track.conns.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some(w) = self.track.drained.lock().take() {
                w.wake();
            }
        }
    }
}
