//! Checkout's database step: one `update` that reserves a unit of stock,
//! labelled `reserve-stock` on the database `orders-db`.
//!
//! With `budget_mode = on` the statement is a call of the request's budget
//! ([`budget_core::postgres::Database`] with its defaults): the wait for a
//! pooled connection is paid from the budget (`orders-db-queue` in the
//! ledger), the server's `statement_timeout` is what is left, and a
//! statement whose request ran out is cancelled on the server.
//!
//! With `budget_mode = off` it is what most services run today: a raw
//! deadpool-postgres pool of the same size whose wait for a connection
//! gives up after a fixed 30 s (sqlx's default acquire timeout), no
//! `statement_timeout`, and a statement whose request went away simply
//! dropped (the server keeps running it). Its ledger entries have the same
//! names, so both modes give the same budget tables.
//!
//! ```
//! assert_eq!(checkout::stock::sku_of(Some("sku=7&x=1")), 7);
//! assert_eq!(checkout::stock::sku_of(Some("sku=1000")), checkout::stock::HOT_SKU);
//! assert_eq!(checkout::stock::sku_of(None), checkout::stock::HOT_SKU);
//! ```

use std::ops::RangeInclusive;
use std::time::Duration;

use budget_core::config::ConfigError;
use budget_core::ledger::{Entry, Ledger};
use budget_core::postgres::deadpool_postgres::{self, Pool, Runtime};
use budget_core::postgres::tokio_postgres::{self, NoTls};
use budget_core::postgres::{DEFAULT_POOL_SIZE, Database, DatabaseConfig};
use budget_core::problem::{Problem, ProblemKind};
use tokio::time::Instant;

/// The database's name in the ledger, the logs and the metrics.
pub const DATABASE: &str = "orders-db";

/// The reservation's statement label: `orders-db.reserve-stock` in the
/// ledger.
pub const RESERVE_STOCK: &str = "reserve-stock";

/// The reservation: one unit of `$1` held.
pub const RESERVE_SQL: &str = "update stock set held = held + 1 where sku = $1";

/// The table and its rows, created at start when missing.
pub const SCHEMA_SQL: &str = "create table if not exists stock \
     (sku int8 primary key, held int8 not null default 0); \
     insert into stock (sku) select generate_series(1, 100) on conflict do nothing";

/// The skus the schema seeds.
pub const SKUS: RangeInclusive<i64> = 1..=100;

/// The sku of a request that names none (or one out of [`SKUS`]).
pub const HOT_SKU: i64 = 1;

/// How long a raw pool waits for a connection: sqlx's default acquire
/// timeout.
pub const FIXED_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long creating the schema at start may take.
const SCHEMA_TIMEOUT: Duration = Duration::from_secs(10);

/// The sku a request reserves: its `sku` query parameter when it is one
/// of [`SKUS`], else [`HOT_SKU`].
pub fn sku_of(query: Option<&str>) -> i64 {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("sku="))
        .and_then(|v| v.parse().ok())
        .filter(|sku| SKUS.contains(sku))
        .unwrap_or(HOT_SKU)
}

/// A raw deadpool-postgres pool of [`DEFAULT_POOL_SIZE`] connections to
/// `url` that waits [`FIXED_ACQUIRE_TIMEOUT`] for a connection; with a
/// `statement_timeout`, each connection is opened with it
/// (`options=-c statement_timeout=..`), as a careful sqlx user sets it per
/// pool. `field` names the config field of `url` in errors.
///
/// # Errors
///
/// A URL tokio-postgres cannot read, or a pool deadpool cannot build.
pub fn fixed_pool(
    url: &str,
    statement_timeout: Option<Duration>,
    field: &'static str,
) -> Result<Pool, ConfigError> {
    let mut pg: tokio_postgres::Config = url
        .parse()
        .map_err(|e| ConfigError::new(field, format!("is not a PostgreSQL URL: {e}")))?;
    if let Some(limit) = statement_timeout {
        pg.options(format!("-c statement_timeout={}", limit.as_millis()));
    }
    let manager = deadpool_postgres::Manager::from_config(
        pg,
        NoTls,
        deadpool_postgres::ManagerConfig {
            recycling_method: deadpool_postgres::RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(DEFAULT_POOL_SIZE)
        .wait_timeout(Some(FIXED_ACQUIRE_TIMEOUT))
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|e| ConfigError::new(field, e.to_string()))
}

/// Creates the `stock` table and its rows when missing ([`SCHEMA_SQL`]),
/// on a connection of its own, in at most 10 s.
///
/// # Errors
///
/// The server could not be reached or refused the schema: an error of
/// `database_url`.
pub async fn create_schema(url: &str) -> Result<(), ConfigError> {
    let failed = |e: &dyn std::fmt::Display| {
        ConfigError::new(
            "database_url",
            format!("cannot create the stock table: {e}"),
        )
    };
    let work = async {
        let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
        let driver = tokio::spawn(connection);
        let done = client.batch_execute(SCHEMA_SQL).await;
        drop(client);
        let _ = driver.await;
        done
    };
    match tokio::time::timeout(SCHEMA_TIMEOUT, work).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(failed(&service_kit::error_chain(&e))),
        Err(_) => Err(failed(&"timed out after 10s")),
    }
}

/// Checkout's database, as the budget mode has it.
#[derive(Debug)]
pub(crate) enum Stock {
    /// Statements spend the request's budget.
    Budget(Database),
    /// A raw pool: fixed acquire timeout, no `statement_timeout`.
    Fixed(Pool),
}

impl Stock {
    /// The database at `url`: budget-aware with `budget`, else a raw pool.
    pub(crate) fn connect(url: &str, budget: bool) -> Result<Self, ConfigError> {
        let within = |e: ConfigError| match e.field() {
            "url" => ConfigError::new("database_url", e.problem().to_owned()),
            _ => e.within("database"),
        };
        if budget {
            Database::connect(&DatabaseConfig::new(DATABASE, url))
                .map(Stock::Budget)
                .map_err(within)
        } else {
            fixed_pool(url, None, "database_url").map(Stock::Fixed)
        }
    }

    /// Reserves one unit of `sku`; a failure is the problem of a required
    /// dependency (`504` out of budget or no connection in time, `502` a
    /// statement the server refused).
    pub(crate) async fn reserve(&self, sku: i64, ledger: &Ledger) -> Result<(), Problem> {
        let result = match self {
            Stock::Budget(db) => db
                .execute(RESERVE_STOCK, RESERVE_SQL, &[&sku])
                .await
                .map(drop)
                .map_err(|e| {
                    tracing::warn!(dependency = DATABASE, error = %service_kit::error_chain(&e), "reserve-stock failed");
                    e.problem()
                }),
            Stock::Fixed(pool) => reserve_fixed(pool, sku, ledger).await,
        };
        result.map_err(|p| p.with_dependency(format!("{DATABASE}.{RESERVE_STOCK}")))
    }
}

/// The raw pool's reservation, its wait and statement in `ledger` under
/// the budget mode's names.
async fn reserve_fixed(pool: &Pool, sku: i64, ledger: &Ledger) -> Result<(), Problem> {
    let name = format!("{DATABASE}.{RESERVE_STOCK}");
    let waiting = Instant::now();
    let conn = pool.get().await;
    ledger.record(Entry::local(
        format!("{DATABASE}-queue"),
        waiting.elapsed(),
        None,
    ));
    let conn = conn.map_err(|e| {
        ledger.record(Entry::skip(&name, "skipped: no connection"));
        Problem::new(
            ProblemKind::DependencyUnavailable,
            format!("{DATABASE}: no connection: {e}"),
        )
    })?;
    let started = Instant::now();
    let done = conn.execute(RESERVE_SQL, &[&sku]).await;
    let outcome = if done.is_ok() { "200" } else { "error" };
    ledger.record(Entry::attempt(&name, 1, started.elapsed(), outcome));
    done.map(drop).map_err(|e| {
        Problem::new(
            ProblemKind::DependencyFailed,
            format!("{name} failed: {}", service_kit::error_chain(&e)),
        )
    })
}
