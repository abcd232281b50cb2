use std::future::Future;
use std::io;
use std::net::SocketAddr;

use axum::Router;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::StartError;

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
}

/// Binds `addr` (port 0 picks a free port) for `app`.
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
    let listener = TcpListener::bind(addr).await.map_err(bind)?;
    let addr = listener.local_addr().map_err(bind)?;
    Ok(Bound {
        listener,
        addr,
        app,
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

    /// Serves the routes in a task until `shutdown` resolves, then lets
    /// requests in flight finish (axum's graceful shutdown). Returns the
    /// bound address and the server task.
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
        } = self;
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        });
        (addr, server)
    }
}
