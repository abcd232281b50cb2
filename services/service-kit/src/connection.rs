//! One accepted connection, served by hyper under [`HttpLimits`]: the
//! header timeout (from a head's first byte), the idle timeout (between
//! kept-alive requests), and a graceful close on shutdown.
//!
//! # How the two HTTP/1 timeouts share hyper's one timer
//!
//! hyper has one HTTP/1 timer, `header_read_timeout`: it starts whenever
//! the connection begins to wait for a request head (when it is accepted,
//! and again after each response) and ends when the head is complete. Left
//! as it is, it makes the idle time between two kept-alive requests and the
//! time to send one head the same number, though a proxy's idle pool wants
//! the first long and a slowloris defence wants the second short. So hyper
//! is given a [`hyper::rt::Timer`] of this connection's own
//! ([`HeadTimer`]): the timer it starts runs until the idle timeout, and is
//! moved forward to *first byte + header timeout* as soon as the socket
//! ([`TimedIo`]) sees that head's first byte. A new connection's first head
//! counts from the accept, so a client that connects and never sends is
//! closed after the header timeout, not the idle one; before hyper reads
//! anything, the wait for the very first byte is bounded the same way.
//!
//! The cost per request is one relaxed atomic load per socket read, and one
//! clock read and two atomic stores for the read that brings a head's first
//! byte.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use budget_core::problem::{Problem, ProblemKind};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tower::ServiceExt as _;

use crate::HttpLimits;

/// "No first byte yet" in [`ConnState::first_byte`].
const NONE: u64 = u64::MAX;

/// What the socket and the timer of one connection share.
#[derive(Debug)]
struct ConnState {
    /// When the connection was accepted; the origin of `first_byte`.
    accepted: Instant,
    /// The timer waits for a head's first byte.
    awaiting: AtomicBool,
    /// Nanoseconds after `accepted` at which the awaited head's first byte
    /// came, or [`NONE`].
    first_byte: AtomicU64,
    /// The timer has not been started yet: the first head counts from the
    /// accept.
    fresh: AtomicBool,
}

impl ConnState {
    fn new(accepted: Instant) -> Self {
        Self {
            accepted,
            awaiting: AtomicBool::new(false),
            first_byte: AtomicU64::new(0),
            fresh: AtomicBool::new(true),
        }
    }

    /// hyper starts waiting for a head: from now on, the next byte read is
    /// its first (except for the first head, which counts from the accept).
    fn await_head(&self) {
        if !self.fresh.swap(false, Ordering::Relaxed) {
            self.first_byte.store(NONE, Ordering::Relaxed);
            self.awaiting.store(true, Ordering::Relaxed);
        }
    }

    /// A read brought bytes.
    fn on_bytes(&self) {
        if self.awaiting.load(Ordering::Relaxed) {
            self.awaiting.store(false, Ordering::Relaxed);
            let since = self.accepted.elapsed().as_nanos();
            let since = u64::try_from(since).unwrap_or(NONE - 1);
            self.first_byte.store(since, Ordering::Relaxed);
        }
    }

    /// When the awaited head's first byte came, if it has.
    fn first_byte(&self) -> Option<Instant> {
        match self.first_byte.load(Ordering::Relaxed) {
            NONE => None,
            nanos => self.accepted.checked_add(Duration::from_nanos(nanos)),
        }
    }
}

/// The accepted socket, telling [`ConnState`] when bytes come.
#[derive(Debug)]
struct TimedIo {
    stream: TcpStream,
    state: Arc<ConnState>,
}

impl AsyncRead for TimedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.state.on_bytes();
        }
        polled
    }
}

impl AsyncWrite for TimedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// hyper's HTTP/1 header timer for one connection (see the module docs).
#[derive(Clone, Debug)]
struct HeadTimer {
    state: Arc<ConnState>,
    header_timeout: Duration,
}

impl hyper::rt::Timer for HeadTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until((Instant::now() + duration).into_std())
    }

    fn sleep_until(&self, deadline: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        let deadline = Instant::from_std(deadline);
        self.state.await_head();
        Box::pin(HeadSleep {
            state: Arc::clone(&self.state),
            header_timeout: self.header_timeout,
            deadline,
            head_seen: false,
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
        })
    }

    fn now(&self) -> std::time::Instant {
        Instant::now().into_std()
    }
}

/// Sleeps until the idle deadline hyper asked for, or until the head's
/// first byte plus the header timeout once that byte has come.
struct HeadSleep {
    state: Arc<ConnState>,
    header_timeout: Duration,
    deadline: Instant,
    head_seen: bool,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl Future for HeadSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.head_seen
            && let Some(first) = self.state.first_byte()
        {
            self.head_seen = true;
            let head_deadline = first
                .checked_add(self.header_timeout)
                .unwrap_or(self.deadline);
            if head_deadline < self.deadline {
                self.deadline = head_deadline;
                self.sleep.as_mut().reset(head_deadline);
            }
        }
        self.sleep.as_mut().poll(cx)
    }
}

impl hyper::rt::Sleep for HeadSleep {}

/// Serves `stream` with `app` (HTTP/1 or HTTP/2) under `limits` until the
/// client closes, a timeout closes it, or `shutdown` resolves (then
/// requests in flight finish, and an idle connection closes at once).
///
/// [`Bound::serve`](crate::Bound::serve) runs this for every connection
/// it accepts; a binary with an accept loop of its own (the slow partner)
/// calls it directly, with [`refuse_connection`] for those over its limit.
///
/// ```
/// # #[tokio::main] async fn main() {
/// use service_kit::{HttpLimits, serve_connection};
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let addr = listener.local_addr().unwrap();
/// let app = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
/// tokio::spawn(async move {
///     let (stream, _) = listener.accept().await.unwrap();
///     serve_connection(stream, app, HttpLimits::default(), std::future::pending()).await;
/// });
/// let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
/// stream.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
/// let mut answer = String::new();
/// stream.read_to_string(&mut answer).await.unwrap();
/// assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
/// # }
/// ```
pub async fn serve_connection<F>(stream: TcpStream, app: Router, limits: HttpLimits, shutdown: F)
where
    F: Future<Output = ()>,
{
    let accepted = Instant::now();
    let _ = stream.set_nodelay(true);
    // The auto builder reads the first bytes (to tell HTTP/1 from HTTP/2)
    // before hyper's timer runs: bound that wait too.
    let deadline = accepted + limits.header_timeout;
    let mut first = [0u8; 1];
    if tokio::time::timeout_at(deadline, stream.peek(&mut first))
        .await
        .is_err()
    {
        tracing::debug!("connection sent nothing within the header timeout; closing");
        return;
    }
    let state = Arc::new(ConnState::new(accepted));
    let timer = HeadTimer {
        state: Arc::clone(&state),
        header_timeout: limits.header_timeout,
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(timer)
        .header_read_timeout(limits.idle_timeout.max(limits.header_timeout));
    // The caller's address, for extractors and the server span
    // (`client.address`), as axum's own `serve` gives it.
    let peer = stream.peer_addr().ok();
    let app = app.map_request(move |mut req: http::Request<hyper::body::Incoming>| {
        if let Some(peer) = peer {
            req.extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
        }
        req
    });
    let io = TokioIo::new(TimedIo { stream, state });
    // With upgrades: a WebSocket route (the slow partner's `/ws`) takes the
    // connection over after its `101`.
    let conn = builder.serve_connection_with_upgrades(io, TowerToHyperService::new(app));
    let mut conn = std::pin::pin!(conn);
    let mut shutdown = std::pin::pin!(shutdown);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(err) = result {
                tracing::debug!(%err, "connection ended with an error");
            }
            return;
        }
        () = shutdown.as_mut() => {}
    }
    conn.as_mut().graceful_shutdown();
    if let Err(err) = conn.await {
        tracing::debug!(%err, "connection ended with an error");
    }
}

/// What a connection over [`HttpLimits::max_connections`] is sent before
/// it is closed: a `503` problem with `Retry-After: 1`, written out whole
/// once.
static OVER_CAPACITY: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let problem = Problem::new(
        ProblemKind::Overloaded,
        "the server has as many connections open as it allows",
    )
    .with_retry_after(Duration::from_secs(1));
    let body = problem.to_json();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: {}\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        budget_core::problem::CONTENT_TYPE,
        body.len()
    )
    .into_bytes()
});

/// Answers a connection over [`HttpLimits::max_connections`] with a `503`
/// problem and `Retry-After: 1` (as much of it as the socket takes at
/// once, without waiting) and closes it.
///
/// ```
/// # #[tokio::main] async fn main() {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let addr = listener.local_addr().unwrap();
/// let client = tokio::spawn(async move {
///     let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
///     let mut answer = String::new();
///     tokio::io::AsyncReadExt::read_to_string(&mut stream, &mut answer).await.unwrap();
///     answer
/// });
/// let (stream, _) = listener.accept().await.unwrap();
/// service_kit::refuse_connection(stream);
/// let answer = client.await.unwrap();
/// assert!(answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{answer}");
/// assert!(answer.contains("urn:budget:problem:overloaded"));
/// # }
/// ```
pub fn refuse_connection(stream: TcpStream) {
    let _ = stream.try_write(&OVER_CAPACITY);
    drop(stream);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_over_capacity_answer_is_a_whole_problem() {
        let text = std::str::from_utf8(&OVER_CAPACITY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(length, body.len());
        let problem: budget_core::problem::Problem = serde_json::from_str(body).unwrap();
        assert_eq!((problem.status, problem.retry_after_ms), (503, Some(1000)));
        assert_eq!(
            problem.type_uri,
            budget_core::problem::ProblemKind::Overloaded.type_uri()
        );
    }

    #[test]
    fn the_first_head_counts_from_the_accept_and_later_ones_from_their_first_byte() {
        let accepted = Instant::now();
        let state = ConnState::new(accepted);
        state.await_head();
        assert_eq!(state.first_byte(), Some(accepted));
        state.on_bytes();
        assert_eq!(state.first_byte(), Some(accepted), "not awaiting yet");
        state.await_head();
        assert_eq!(state.first_byte(), None);
        state.on_bytes();
        let first = state.first_byte().unwrap();
        assert!(first >= accepted);
        state.on_bytes();
        assert_eq!(
            state.first_byte(),
            Some(first),
            "only the first byte counts"
        );
    }
}
