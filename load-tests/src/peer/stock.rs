//! The peer checkout's database step: checkout's reservation
//! ([`checkout::stock::RESERVE_SQL`]) on a raw deadpool-postgres pool whose
//! connections carry a fixed `statement_timeout`, as a careful sqlx user
//! configures a pool (`PgPoolOptions` with `options=-c statement_timeout=..`),
//! under the peer's own per-call `Timeout` (the wait for a connection and
//! the statement together), like its other dependencies. A statement whose
//! call timed out is dropped: the server stops it only at its
//! `statement_timeout`.

use std::time::Duration;

use budget_core::postgres::deadpool_postgres::Pool;
use checkout::stock::{DATABASE, RESERVE_SQL, RESERVE_STOCK};
use tokio::time::Instant;

use super::{DepFailure, Timing};

/// The ledger name of the reservation (`orders-db.reserve-stock`).
pub(crate) fn statement_name() -> String {
    format!("{DATABASE}.{RESERVE_STOCK}")
}

/// Reserves one unit of `sku` on `pool` within `timeout`, recording the
/// wait for a connection (`orders-db-queue`) and the statement in `timing`.
pub(crate) async fn reserve(
    pool: &Pool,
    sku: i64,
    timeout: Duration,
    timing: &mut Timing,
) -> Result<(), DepFailure> {
    let name = statement_name();
    let deadline = Instant::now() + timeout;
    let waiting = Instant::now();
    let conn = tokio::time::timeout_at(deadline, pool.get()).await;
    timing.push(&format!("{DATABASE}-queue"), waiting.elapsed(), None);
    let conn = match conn {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            timing.push(&name, Duration::ZERO, Some("transport"));
            return Err(DepFailure::Transport(e.to_string()));
        }
        Err(_) => {
            timing.push(&name, Duration::ZERO, Some("timeout"));
            return Err(DepFailure::Timeout);
        }
    };
    let started = Instant::now();
    let done = tokio::time::timeout_at(deadline, conn.execute(RESERVE_SQL, &[&sku])).await;
    let failure = match done {
        Ok(Ok(_)) => None,
        // `57014`: the server's statement_timeout stopped it.
        Ok(Err(e)) if e.code().is_some_and(|c| c.code() == "57014") => Some(DepFailure::Timeout),
        Ok(Err(e)) => Some(DepFailure::Transport(e.to_string())),
        Err(_) => Some(DepFailure::Timeout),
    };
    let desc = failure.as_ref().map(DepFailure::desc);
    timing.push(&name, started.elapsed(), desc.as_deref());
    failure.map_or(Ok(()), Err)
}
