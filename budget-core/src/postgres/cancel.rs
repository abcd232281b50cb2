//! Stopping a statement whose caller stopped: the guard around a
//! statement in flight ([`Armed`]), and the cancel it sends when dropped.
//!
//! Dropping a tokio-postgres future sends nothing: the server runs the
//! statement to its end. An armed statement dropped before its answer
//! (the caller's deadline, a request dropped) hands its connection to a
//! task that sends the protocol's cancel request and waits for the server
//! to *confirm* it (to close the cancel connection, which it does after
//! signalling the statement's backend), then gives the connection back to
//! the pool, after a `ROLLBACK` when it was in a transaction. A cancel that
//! is not confirmed in time closes the connection instead.
//!
//! Waiting for the confirmation is what keeps a cancel off the next
//! statement: the signal reaches the backend before the next statement is
//! even sent, and a backend reading its next command drops a pending
//! cancel (a cancel arriving while it is idle is a no-op). tokio-postgres's
//! own `cancel_query` returns once the request is written, before that: a
//! cancel that lands late hits whatever the connection runs next
//! (docs/postgres.md, "Cancels").

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use deadpool_postgres::Object;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::Host;
use tokio_postgres::{CancelToken, NoTls};

use crate::config::ConfigError;
use crate::outbound::error::BoxError;

/// Where cancel requests go: the server the pool connects to.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    Tcp(String, u16),
    #[cfg(unix)]
    Unix(std::path::PathBuf, u16),
}

impl Target {
    /// The first host and port of `config`, as the pool connects to them.
    pub(crate) fn of(config: &tokio_postgres::Config) -> Result<Self, ConfigError> {
        let port = config.get_ports().first().copied().unwrap_or(5432);
        match config.get_hosts().first() {
            Some(Host::Tcp(host)) => Ok(Target::Tcp(host.clone(), port)),
            #[cfg(unix)]
            Some(Host::Unix(dir)) => Ok(Target::Unix(dir.clone(), port)),
            None => Err(ConfigError::new("url", "must name a host")),
        }
    }
}

/// What stopping a statement needs, shared by a database's calls.
#[derive(Debug)]
pub(crate) struct Stopper {
    pub(crate) target: Target,
    /// How long a cancel (and a transaction's `ROLLBACK` after it) may take.
    pub(crate) timeout: Duration,
    /// The database's name, for the log.
    pub(crate) name: Arc<str>,
}

/// A statement in flight on `conn`: dropped before [`disarm`](Self::disarm),
/// it stops the statement on the server (see the module docs).
pub(crate) struct Armed {
    conn: Option<Object>,
    stopper: Arc<Stopper>,
    in_transaction: bool,
}

impl Armed {
    pub(crate) fn new(conn: Object, stopper: Arc<Stopper>, in_transaction: bool) -> Self {
        Self {
            conn: Some(conn),
            stopper,
            in_transaction,
        }
    }

    /// The connection the statement runs on.
    pub(crate) fn conn(&self) -> Option<&Object> {
        self.conn.as_ref()
    }

    /// The statement answered: the connection, with nothing to stop.
    pub(crate) fn disarm(mut self) -> Option<Object> {
        self.conn.take()
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let stop = stop(conn, Arc::clone(&self.stopper), self.in_transaction);
                drop(runtime.spawn(stop));
            }
            // No runtime to send a cancel from: closing the connection is
            // all that is left (the server notices when it next writes).
            Err(_) => drop(Object::take(conn)),
        }
    }
}

/// What a connection needs before it goes back to the pool after a
/// stopped statement: its transaction ended, its limit back to its own
/// default (what the stopped statement set is no longer known), and a
/// last statement that takes the blow of a stop still pending on the
/// server. PostgreSQL's own `statement_timeout` timer can fire as a
/// statement ends and stop the connection's *next* statement instead
/// (docs/postgres.md, "Cancels"): the `SELECT 1` is that next statement,
/// and a cleanup that fails closes the connection.
fn cleanup(in_transaction: bool) -> &'static str {
    if in_transaction {
        "ROLLBACK; RESET statement_timeout; SELECT 1"
    } else {
        "RESET statement_timeout; SELECT 1"
    }
}

/// Cancels what runs on `conn` and confirms it; then the connection is
/// [cleaned](clean_up).
async fn stop(conn: Object, stopper: Arc<Stopper>, in_transaction: bool) {
    let token = conn.cancel_token();
    let cancelled = tokio::time::timeout(stopper.timeout, cancel(&token, &stopper.target)).await;
    match cancelled {
        Ok(Ok(())) => clean_up(conn, &stopper, in_transaction).await,
        Ok(Err(e)) => {
            tracing::warn!(database = %stopper.name, error = %e, "cancel request failed: closing the connection");
            drop(Object::take(conn));
        }
        Err(_) => {
            tracing::warn!(database = %stopper.name, "cancel request not confirmed in time: closing the connection");
            drop(Object::take(conn));
        }
    }
}

/// Runs the [cleanup] on `conn`: it goes back to the pool, or is closed
/// when the cleanup fails or takes longer than the stopper allows.
async fn clean_up(conn: Object, stopper: &Stopper, in_transaction: bool) {
    let done =
        tokio::time::timeout(stopper.timeout, conn.batch_execute(cleanup(in_transaction))).await;
    if !matches!(done, Ok(Ok(()))) {
        // Out of the pool, then dropped: the connection closes.
        drop(Object::take(conn));
    }
}

/// Gives back `conn` after a statement stopped by the server (`57014`) or
/// a transaction its caller dropped: [cleaned](clean_up) first, on a task
/// of its own; closed when there is no runtime to clean it from.
pub(crate) fn hand_back(conn: Object, stopper: Arc<Stopper>, in_transaction: bool) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        drop(Object::take(conn));
        return;
    };
    drop(runtime.spawn(async move { clean_up(conn, &stopper, in_transaction).await }));
}

/// Sends the cancel request for `token`'s connection to `target` and waits
/// until the server has acted on it.
pub(crate) async fn cancel(token: &CancelToken, target: &Target) -> Result<(), BoxError> {
    match target {
        Target::Tcp(host, port) => {
            let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
            token
                .cancel_query_raw(Confirming::new(stream), NoTls)
                .await?;
        }
        #[cfg(unix)]
        Target::Unix(dir, port) => {
            let stream =
                tokio::net::UnixStream::connect(dir.join(format!(".s.PGSQL.{port}"))).await?;
            token
                .cancel_query_raw(Confirming::new(stream), NoTls)
                .await?;
        }
    }
    Ok(())
}

/// A stream whose shutdown completes only when the peer has closed its
/// side too: for a cancel request, when the server has read it and
/// signalled the statement's backend.
struct Confirming<S> {
    inner: S,
    write_closed: bool,
}

impl<S> Confirming<S> {
    fn new(inner: S) -> Self {
        Self {
            inner,
            write_closed: false,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Confirming<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Confirming<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.write_closed {
            ready!(Pin::new(&mut self.inner).poll_shutdown(cx))?;
            self.write_closed = true;
        }
        // The server sends nothing back: read until it closes.
        let mut scratch = [0u8; 64];
        loop {
            let mut buf = ReadBuf::new(&mut scratch);
            ready!(Pin::new(&mut self.inner).poll_read(cx, &mut buf))?;
            if buf.filled().is_empty() {
                return Poll::Ready(Ok(()));
            }
        }
    }
}
