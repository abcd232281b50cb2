//! # checkout
//!
//! The middle hop of the example chain (`docs/contract.md`
//! §6): `client -> edge -> checkout -> inventory, pricing,
//! recommendations`. Every dependency is a URL (the slow partner, in demos
//! and tests) called through a [`BudgetClient`](budget_core::client::BudgetClient),
//! so the three calls share the one budget the request arrived with.
//!
//! - `GET`/`POST /checkout`: `inventory` (required, 2 attempts), then
//!   `pricing` (required, 3 attempts; for a `POST` it gets the inbound body
//!   and `Idempotency-Key`, and without a key it is sent once), then
//!   `recommendations` (optional: skipped below `recommendations_floor`,
//!   and any failure of it only marks the answer degraded). Sequential, so
//!   the `Server-Timing` ledger reads in call order. `x-request-id` goes on
//!   every call (made up here when none arrived).
//!   With `database_url` set, between pricing and recommendations one
//!   statement reserves a unit of stock in PostgreSQL (`reserve-stock` on
//!   `orders-db`, [`stock`]): required, so its failure is the request's.
//! - `GET /healthz`: `200 ok`, outside the budget layer.
//!
//! With `on_unavailable = "stale"` in `[inventory]` or `[pricing]` (off by
//! default), a call that is not made or fails is answered with that
//! dependency's last good answer, at most `max_stale` old, and the answer
//! lists it under `degraded` with its age (`stale 12s`, as the ledger says).
//!
//! The answer is a [`CheckoutAnswer`]:
//!
//! ```json
//! { "request_id": "...", "inventory": {...}, "pricing": {...}, "recommendations": null,
//!   "degraded": [{ "dependency": "recommendations", "reason": "skipped: 850ms < floor 1000ms" }] }
//! ```
//!
//! # Statuses (docs/contract.md §3)
//!
//! | situation | answer |
//! | --- | --- |
//! | budget below `floor` on arrival, or run out in the handler | `504` (the budget layer) |
//! | malformed budget header | `400` naming the header (the budget layer) |
//! | a required dependency not callable in budget (below its floor), or the budget ran out during its call (hang, blackhole, slow, drip) | `504`, naming it |
//! | a required dependency gave no usable answer after its attempts: refused, reset | `504` (`dependency-unavailable`), naming it |
//! | a required dependency answered `429`/`503` with a `Retry-After` that does not fit | the same status with its `Retry-After` |
//! | a required dependency's circuit is open | `503` with `Retry-After` |
//! | a required dependency answered an error status after its attempts, or a body that is not JSON | `502`, naming it |
//!
//! A refused connection is retried like any connect failure; when the
//! attempts are spent, no answer came through: `504` like every other
//! fault shape, with `type` `dependency-unavailable` and the
//! cause in `detail`, so it is not mistaken for a spent budget. Errors are
//! `application/problem+json` bodies ([`Problem`](budget_core::problem::Problem)).
//!
//! # `budget_mode = off`
//!
//! The baseline for comparisons: no budget layer (no ingress budget, no
//! `504` at a deadline), no budget header forwarded (no `grpc-timeout` to a
//! gRPC inventory either: its fixed timeout is checkout's own), every attempt gets a
//! fixed 30 s timeout, retries are the fixed attempt counts, and
//! recommendations is always called. Attempts are still listed in
//! `Server-Timing`, so both modes give budget tables.
//!
//! # Example
//!
//! ```no_run
//! use checkout::CheckoutConfig;
//!
//! # #[tokio::main] async fn main() -> Result<(), checkout::Error> {
//! let mut config = CheckoutConfig::new("127.0.0.1:0".parse().unwrap());
//! config.pricing_url = "http://127.0.0.1:9000/pricing?script=503@250ms,200@400ms".into();
//! let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
//! let (addr, server) = checkout::spawn(&config, async { let _ = stop.await; }).await?;
//! println!("checkout on http://{addr}/checkout");
//! // ...
//! let _ = shutdown.send(());
//! let _ = server.await;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod config;
mod grpc_inventory;
mod handler;
pub mod stock;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use budget_core::config::ConfigError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::task::JoinHandle;

pub use config::{
    CheckoutConfig, DEFAULT_DEPENDENCY_FLOOR, DEFAULT_LISTEN, DEFAULT_RECOMMENDATIONS_FLOOR,
    DependencySettings,
};
/// Why checkout could not start: a config file, a config value, or the
/// listening socket.
///
/// ```
/// use budget_core::config::ConfigError;
/// let err = checkout::Error::from(ConfigError::new("pricing_url", "must name a host"));
/// assert!(err.is_config());
/// assert_eq!(err.to_string(), "invalid config: `pricing_url` must name a host");
/// ```
pub use service_kit::StartError as Error;
/// The request id header, propagated along the chain.
pub use service_kit::X_REQUEST_ID;

/// The JSON body of a `200` from `/checkout`.
///
/// ```
/// let answer: checkout::CheckoutAnswer = serde_json::from_str(r#"{
///     "request_id": "r-1", "inventory": {"sku": 7}, "pricing": {"price": 12},
///     "recommendations": null,
///     "degraded": [{"dependency": "recommendations", "reason": "skipped: 850ms < floor 1000ms"}]
/// }"#).unwrap();
/// assert_eq!(answer.degraded[0].dependency, "recommendations");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckoutAnswer {
    /// The request's `x-request-id`.
    pub request_id: Option<String>,
    /// Inventory's answer, as it sent it.
    pub inventory: Value,
    /// Pricing's answer, as it sent it.
    pub pricing: Value,
    /// Recommendations' answer, or `null` when it was skipped or failed.
    pub recommendations: Option<Value>,
    /// The optional dependencies the answer lacks, and the dependencies it
    /// has only from a stale value, and why.
    pub degraded: Vec<Degraded>,
}

/// An optional dependency missing from an answer, or a dependency whose
/// part of it is a stale value (`on_unavailable = "stale"`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Degraded {
    /// Its name (`recommendations`).
    pub dependency: String,
    /// `skipped: 850ms < floor 1000ms`, `skipped: circuit open`,
    /// `failed: ...` with the error, or `stale 12s`: the age of the last
    /// good answer used in place of a call that was not made or failed
    /// (the ledger's note).
    pub reason: String,
}

/// Checkout's routes with every layer (see [`service_kit::router`]):
/// request id (made up when none arrives, and echoed on the response),
/// request logs (method, path, id, status, latency; never bodies or
/// credentials), and with `budget_mode = on` the budget layer on
/// `/checkout`.
///
/// # Errors
///
/// An invalid config, naming the field (see [`CheckoutConfig::validate`]).
///
/// ```
/// let app = checkout::router(&checkout::CheckoutConfig::default()).unwrap();
/// # let _: axum::Router = app;
/// ```
pub fn router(config: &CheckoutConfig) -> Result<Router, ConfigError> {
    // Before the clients are built: their counters register at 0 in it.
    service_kit::install_metrics();
    let built = config.build()?;
    let app = Arc::new(handler::App {
        inventory: built.inventory,
        pricing: built.pricing,
        recommendations: built.recommendations,
        stock: built.stock,
    });
    let checkout = get(handler::checkout)
        .post(handler::checkout)
        .with_state(app);
    Ok(service_kit::router("/checkout", checkout, built.layer))
}

/// Starts checkout on `config.listen` (port 0 picks a free port) and
/// serves until `shutdown` resolves, then lets requests in flight finish
/// (axum's graceful shutdown). Returns the bound address and the server
/// task.
///
/// # Errors
///
/// [`Error::Config`] for an invalid config or a database whose schema
/// cannot be created ([`stock::create_schema`]), [`Error::Bind`] when the
/// address cannot be bound.
///
/// ```no_run
/// # async fn run() -> Result<(), checkout::Error> {
/// let config = checkout::CheckoutConfig::new("127.0.0.1:0".parse().unwrap());
/// let (addr, server) = checkout::spawn(&config, std::future::pending()).await?;
/// server.abort();
/// # Ok(()) }
/// ```
pub async fn spawn<F>(
    config: &CheckoutConfig,
    shutdown: F,
) -> Result<(SocketAddr, JoinHandle<io::Result<()>>), Error>
where
    F: Future<Output = ()> + Send + 'static,
{
    let app = router(config)?;
    if let Some(url) = &config.database_url {
        stock::create_schema(url).await?;
    }
    let bound = service_kit::bind(config.listen, app)
        .await?
        .with_limits(config.http);
    tracing::info!(addr = %bound.addr(), budget_mode = ?config.budget_mode, "checkout listening");
    Ok(bound.serve(shutdown))
}
