use std::future::Future;
use std::io;
use std::net::SocketAddr;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::connection::{refuse_connection, serve_connection};
use crate::{HttpLimits, StartError};

/// The pause after a failed `accept` (say, out of file descriptors), so
/// that the loop does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// A service's listening socket, bound, and the routes it is to serve.
///
/// Binding and serving are two steps so that the service can log that it
/// listens, under its own name, in between.
///
/// ```no_run
/// # async fn run() -> Result<(), service_kit::StartError> {
/// let bound = service_kit::bind("127.0.0.1:0".parse().unwrap(), axum::Router::new()).await?;
/// tracing::info!(addr = %bound.addr(), "demo listening");
/// let (addr, server) = bound.serve(std::future::pending());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Bound {
    listener: TcpListener,
    addr: SocketAddr,
    app: Router,
    limits: HttpLimits,
}

/// How many connections a listener queues before it accepts them: a burst
/// of a few hundred new connections (a deploy's cold start, a fan-out) is
/// queued, not dropped. The standard library's and tokio's `bind` use
/// 128, and past it Linux drops the SYN, so the client retries a second
/// later (its budget gone before the service sees the request). The
/// kernel caps it at `net.core.somaxconn` (4096 on current Linux).
pub const ACCEPT_BACKLOG: u32 = 1024;

/// Binds `addr` (port 0 picks a free port) for `app`, with an accept
/// backlog of [`ACCEPT_BACKLOG`].
///
/// # Errors
///
/// [`StartError::Bind`] when the address cannot be bound.
///
/// ```
/// # #[tokio::main] async fn main() {
/// let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
/// let addr = taken.local_addr().unwrap();
/// let err = service_kit::bind(addr, axum::Router::new()).await.unwrap_err();
/// assert!(err.to_string().starts_with("cannot listen on 127.0.0.1:"), "{err}");
/// # }
/// ```
pub async fn bind(addr: SocketAddr, app: Router) -> Result<Bound, StartError> {
    let bind = |source| StartError::Bind { addr, source };
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }
    .map_err(bind)?;
    // As `TcpListener::bind` does: a restarted service rebinds its port
    // at once.
    socket.set_reuseaddr(true).map_err(bind)?;
    socket.bind(addr).map_err(bind)?;
    let listener = socket.listen(ACCEPT_BACKLOG).map_err(bind)?;
    let addr = listener.local_addr().map_err(bind)?;
    Ok(Bound {
        listener,
        addr,
        app,
        limits: HttpLimits::default(),
    })
}

impl Bound {
    /// The address bound: the port is the one picked when port 0 was asked.
    ///
    /// ```
    /// # #[tokio::main] async fn main() {
    /// let bound = service_kit::bind("127.0.0.1:0".parse().unwrap(), axum::Router::new()).await.unwrap();
    /// assert_ne!(bound.addr().port(), 0);
    /// # }
    /// ```
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves under `limits` instead of [`HttpLimits::default`].
    ///
    /// ```
    /// # #[tokio::main] async fn main() {
    /// use std::time::Duration;
    /// use service_kit::HttpLimits;
    /// let limits = HttpLimits { header_timeout: Duration::from_secs(2), ..HttpLimits::default() };
    /// let bound = service_kit::bind("127.0.0.1:0".parse().unwrap(), axum::Router::new()).await.unwrap();
    /// let bound = bound.with_limits(limits);
    /// # }
    /// ```
    pub fn with_limits(mut self, limits: HttpLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Serves the routes in a task until `shutdown` resolves, each
    /// connection under the [`HttpLimits`]; then stops accepting, lets
    /// requests in flight finish and closes idle connections at once.
    /// Returns the bound address and the server task.
    ///
    /// ```
    /// # #[tokio::main] async fn main() {
    /// let app = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
    /// let bound = service_kit::bind("127.0.0.1:0".parse().unwrap(), app).await.unwrap();
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let (addr, server) = bound.serve(async { let _ = stopped.await; });
    /// assert_ne!(addr.port(), 0);
    /// stop.send(()).unwrap();
    /// assert!(server.await.unwrap().is_ok());
    /// # }
    /// ```
    pub fn serve<F>(self, shutdown: F) -> (SocketAddr, JoinHandle<io::Result<()>>)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let Bound {
            listener,
            addr,
            app,
            limits,
        } = self;
        let server = tokio::spawn(accept_loop(listener, app, limits, shutdown));
        (addr, server)
    }
}

/// Accepts connections until `shutdown`, each served on its own task while
/// fewer than `max_connections` are open (one more is refused with a
/// `503`); then waits for every connection to finish.
async fn accept_loop<F>(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    shutdown: F,
) -> io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let stop = CancellationToken::new();
    let tracker = TaskTracker::new();
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = shutdown.as_mut() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(err) => {
                tracing::warn!(%err, "accept failed");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
            tracing::debug!(
                limit = limits.max_connections,
                "over max_connections; refusing a connection"
            );
            refuse_connection(stream);
            continue;
        };
        let stopped = stop.clone().cancelled_owned();
        let app = app.clone();
        tracker.spawn(async move {
            serve_connection(stream, app, limits, stopped).await;
            drop(permit);
        });
    }
    drop(listener);
    stop.cancel();
    tracker.close();
    tracker.wait().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bound listener that has not accepted yet queues a burst of 300
    /// connections: with the standard backlog of 128, Linux would drop
    /// the SYNs past 129 and those connects would hang for a second.
    #[tokio::test]
    async fn a_burst_of_300_connections_is_queued_before_any_accept() {
        let bound = bind("127.0.0.1:0".parse().unwrap(), Router::new())
            .await
            .unwrap();
        let addr = bound.addr();
        let connects: Vec<_> = (0..300)
            .map(|_| {
                tokio::spawn(async move {
                    tokio::time::timeout(
                        Duration::from_millis(500),
                        tokio::net::TcpStream::connect(addr),
                    )
                    .await
                })
            })
            .collect();
        let mut connected = Vec::new();
        for connect in connects {
            let stream = connect.await.unwrap().expect("connected within 500 ms");
            connected.push(stream.unwrap());
        }
        assert_eq!(connected.len(), 300);
        drop(bound);
    }
}
