//! Sockets: binding the main port, filling the blackhole, and what each mode
//! does with an accepted connection.
//!
//! Every listener is bound with `SO_REUSEADDR`, so that a mode switch can
//! rebind the same port at once even while connections of the previous mode
//! linger in `TIME_WAIT`. Every accepted connection runs as a task on the
//! partner's [`TaskTracker`] and watches its mode's [`CancellationToken`]: when
//! the mode changes or the partner stops, HTTP connections finish the
//! requests in flight (up to the shutdown grace) and close, held (`hang`)
//! connections close at once. No task outlives its mode by more than the
//! grace.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use std::sync::Arc;

use axum::Router;
use service_kit::HttpLimits;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{sleep, timeout};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::PartnerError;
use crate::mode::FaultMode;

/// The accept backlog of serving listeners.
pub(crate) const BACKLOG: u32 = 1024;

/// A blackhole listens with this backlog and is filled with
/// [`BLACKHOLE_FILL`] connections of its own. (Linux queues `backlog + 1`.)
const BLACKHOLE_BACKLOG: u32 = 1;

/// How many connections fill the blackhole's accept queue.
const BLACKHOLE_FILL: usize = 2;

/// How long `reset` waits for the request's first bytes before resetting
/// anyway, so that the reset usually lands after the request was sent.
const RESET_READ_WAIT: Duration = Duration::from_secs(1);

/// The pause after a failed `accept` (say, out of file descriptors), so that
/// the loop does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// A listener on `addr` with `SO_REUSEADDR` and the given backlog.
pub(crate) fn bind(addr: SocketAddr, backlog: u32) -> io::Result<TcpListener> {
    let socket = new_socket(addr)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// The port held in `refuse` mode: bound (with `SO_REUSEADDR`, as every
/// listener here) but not listened on. The kernel answers a connect to it
/// with a reset, so the client sees "connection refused" at once, as from
/// a port nobody holds; but the system does not hand the port to another
/// socket that binds port 0 (another server in the same process or on the
/// machine), which would then answer in the partner's place.
pub(crate) fn hold(addr: SocketAddr) -> io::Result<TcpSocket> {
    let socket = new_socket(addr)?;
    socket.bind(addr)?;
    Ok(socket)
}

/// The address a listener on `addr` gets: `addr` itself, or with port 0 a
/// free port picked by the system (bound, not listened on, then released).
pub(crate) fn resolve(addr: SocketAddr) -> io::Result<SocketAddr> {
    if addr.port() != 0 {
        return Ok(addr);
    }
    let socket = new_socket(addr)?;
    socket.bind(addr)?;
    socket.local_addr()
}

fn new_socket(addr: SocketAddr) -> io::Result<TcpSocket> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    Ok(socket)
}

/// A port that listens but never accepts, with a full accept queue: the
/// kernel drops further handshakes, so connects time out. Dropping it closes
/// the listener and its own queued connections.
#[derive(Debug)]
pub(crate) struct Blackhole {
    _listener: TcpListener,
    _queue: Vec<TcpStream>,
}

/// Opens a [`Blackhole`] on `addr`: listen with backlog 1, then connect to
/// itself until the queue is full.
pub(crate) async fn blackhole(addr: SocketAddr) -> Result<Blackhole, PartnerError> {
    let listener = bind(addr, BLACKHOLE_BACKLOG).map_err(|source| PartnerError::Bind {
        addr,
        purpose: format!("mode {}", FaultMode::Blackhole),
        source,
    })?;
    let target = SocketAddr::new(connectable(addr.ip()), addr.port());
    let mut queue = Vec::with_capacity(BLACKHOLE_FILL);
    for _ in 0..BLACKHOLE_FILL {
        match timeout(Duration::from_secs(1), TcpStream::connect(target)).await {
            Ok(Ok(stream)) => queue.push(stream),
            Ok(Err(source)) => return Err(PartnerError::Blackhole { addr, source }),
            // The handshake was dropped: the queue is full already, filled
            // by callers that connected first (a switch under load). That
            // is the blackhole; never-accepted connections stay queued.
            Err(_) => break,
        }
    }
    Ok(Blackhole {
        _listener: listener,
        _queue: queue,
    })
}

/// The address to connect to for a listener on `ip`: loopback for the
/// unspecified address.
fn connectable(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    }
}

/// What an accept loop does with each connection.
#[derive(Clone)]
pub(crate) enum Serve {
    /// Serve HTTP/1 and HTTP/2 with this router.
    Http(Router),
    /// Read the first bytes, then reset.
    Reset,
    /// Read forever, never answer.
    Hang,
}

/// How HTTP connections are served: under the binaries' [`HttpLimits`]
/// (header and idle timeouts, open connections per listener), and given
/// `grace` to finish on a mode switch or shutdown.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Conns {
    pub(crate) limits: HttpLimits,
    pub(crate) grace: Duration,
}

/// Accepts connections until `token` is cancelled, running each on
/// `tracker`; returns (dropping the listener, so the port closes) as soon as
/// `token` is cancelled. HTTP connections beyond `max_connections` are
/// answered `503` and closed; `reset` and `hang` take any number (they are
/// the failures the partner plays).
pub(crate) async fn accept_loop(
    listener: TcpListener,
    serve: Serve,
    token: CancellationToken,
    tracker: TaskTracker,
    conns: Conns,
) {
    let open = Arc::new(Semaphore::new(conns.limits.max_connections));
    loop {
        let accepted = tokio::select! {
            () = token.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, peer)) => {
                tracing::trace!(%peer, "accepted");
                stream
            }
            Err(err) => {
                tracing::warn!(%err, "accept failed");
                sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        let token = token.clone();
        match &serve {
            Serve::Http(router) => {
                let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
                    service_kit::refuse_connection(stream);
                    continue;
                };
                let router = router.clone();
                tracker.spawn(async move {
                    serve_http(stream, router, token, conns).await;
                    drop(permit);
                });
            }
            Serve::Reset => {
                tracker.spawn(reset(stream, token));
            }
            Serve::Hang => {
                tracker.spawn(hang(stream, token));
            }
        }
    }
}

/// Serves one HTTP connection under the limits; on cancellation, lets the
/// requests in flight finish for up to the grace, then closes.
async fn serve_http(stream: TcpStream, router: Router, token: CancellationToken, conns: Conns) {
    let serving = service_kit::serve_connection(
        stream,
        router,
        conns.limits,
        token.clone().cancelled_owned(),
    );
    let mut serving = std::pin::pin!(serving);
    tokio::select! {
        () = serving.as_mut() => return,
        () = token.cancelled() => {}
    }
    if timeout(conns.grace, serving).await.is_err() {
        tracing::debug!("requests still in flight after the shutdown grace; closing");
    }
}

/// Waits for the request's first bytes (or [`RESET_READ_WAIT`]), then resets
/// the connection: `SO_LINGER` 0 makes the close send `RST`.
async fn reset(mut stream: TcpStream, token: CancellationToken) {
    let mut buf = [0u8; 4096];
    tokio::select! {
        () = token.cancelled() => {}
        _ = timeout(RESET_READ_WAIT, stream.read(&mut buf)) => {}
    }
    if let Err(err) = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO)) {
        tracing::warn!(%err, "cannot set SO_LINGER 0; closing normally");
    }
    drop(stream);
}

/// Reads and discards whatever comes, never answers; returns when the peer
/// closes or `token` is cancelled.
async fn hang(mut stream: TcpStream, token: CancellationToken) {
    let mut buf = vec![0u8; 8192];
    loop {
        tokio::select! {
            () = token.cancelled() => break,
            read = stream.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn port_zero_resolves_to_a_free_port_that_can_be_bound_again() {
        let addr = resolve("127.0.0.1:0".parse().unwrap()).unwrap();
        assert_ne!(addr.port(), 0);
        let first = bind(addr, BACKLOG).unwrap();
        drop(first);
        bind(addr, BACKLOG).expect("SO_REUSEADDR lets the same port be bound again");
    }

    #[tokio::test]
    async fn a_blackhole_makes_further_connects_time_out() {
        let addr = resolve("127.0.0.1:0".parse().unwrap()).unwrap();
        let hole = blackhole(addr).await.unwrap();
        let third = timeout(Duration::from_millis(300), TcpStream::connect(addr)).await;
        assert!(third.is_err(), "the handshake must not complete: {third:?}");
        drop(hole);
        let listener = bind(addr, BACKLOG).expect("the port is free again");
        drop(listener);
    }

    #[test]
    fn the_unspecified_address_connects_through_loopback() {
        assert_eq!(
            connectable("0.0.0.0".parse().unwrap()),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
        assert_eq!(
            connectable("::".parse().unwrap()),
            IpAddr::V6(Ipv6Addr::LOCALHOST)
        );
        let ip: IpAddr = "127.0.0.2".parse().unwrap();
        assert_eq!(connectable(ip), ip);
    }
}
