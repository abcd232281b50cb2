//! # edge
//!
//! The public entry of the example chain (`docs/contract.md`
//! §6): `client -> edge -> checkout -> inventory, pricing,
//! recommendations`.
//!
//! - Its budget layer gives every request a budget: the caller's (any known
//!   header, the smallest wins) clamped to `max_budget`, or `default_budget`
//!   when it sends none; a malformed budget header is a `400` naming the
//!   header; a budget below `floor` is a `504` and checkout is not called.
//! - `GET`/`POST /checkout` is forwarded to checkout's `/checkout` (method,
//!   query, body, `Content-Type`, `Idempotency-Key`, `x-request-id`, and
//!   `request-budget-ms` = what is left less `reserve`) through a
//!   [`BudgetClient`](budget_core::client::BudgetClient) that makes **one
//!   attempt**: retries happen next to the failing dependency, not again at
//!   every hop (retry amplification).
//! - Checkout's answer is passed up as it is: status, body, `Content-Type`,
//!   `Retry-After`, so its `429`/`503` with `Retry-After` and its `504`
//!   reach the caller unchanged. Edge's own failures are problem+json:
//!   `504` when checkout could not be called in budget or gave no answer
//!   within it (refused, reset, hang), `502` for an unusable answer (`503`
//!   with `Retry-After` for an open circuit, when a breaker is configured).
//! - One `Server-Timing` header shows both hops: edge's ledger (`budget`,
//!   `checkout`) and checkout's metrics prefixed `checkout.`
//!   ([`prefixed_metrics`], bounded by [`record_downstream`]).
//! - `x-request-id` is made up (a UUID) when the caller sends none, and
//!   echoed on the response. `GET /healthz` answers `200 ok`.
//!
//! With `budget_mode = off` there is no budget layer, no budget header is
//! forwarded and the call to checkout has a fixed 30 s timeout: the
//! baseline for comparisons. `Server-Timing` is still sent.
//!
//! # Example: the whole chain in one process
//!
//! ```no_run
//! use checkout::CheckoutConfig;
//! use edge::EdgeConfig;
//! use slow_partner::PartnerConfig;
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let loopback = "127.0.0.1:0".parse()?;
//! let partner = slow_partner::spawn(PartnerConfig::new(loopback)).await?;
//!
//! let mut checkout = CheckoutConfig::new(loopback);
//! checkout.inventory_url = partner.url("/inventory?delay=100ms");
//! checkout.pricing_url = partner.url("/pricing?script=503@250ms,200@400ms");
//! checkout.recommendations_url = partner.url("/recommendations");
//! let (checkout_addr, _checkout) = checkout::spawn(&checkout, std::future::pending()).await?;
//!
//! let edge = EdgeConfig::new(loopback, format!("http://{checkout_addr}"));
//! let (edge_addr, _edge) = edge::spawn(&edge, std::future::pending()).await?;
//!
//! let res = reqwest::get(format!("http://{edge_addr}/checkout")).await?;
//! println!("{} {:?}", res.status(), res.headers().get("server-timing"));
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod config;
mod forward;
mod server_timing;

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;
use budget_core::config::ConfigError;
use tokio::task::JoinHandle;

pub use config::{CHECKOUT, CheckoutClientSettings, DEFAULT_LISTEN, EdgeConfig};
pub use server_timing::{prefixed_metrics, record_downstream};
/// Why edge could not start: a config file, a config value, or the
/// listening socket.
///
/// ```
/// use budget_core::config::ConfigError;
/// let err = edge::Error::from(ConfigError::new("checkout_url", "must name a host"));
/// assert!(err.is_config());
/// assert_eq!(err.to_string(), "invalid config: `checkout_url` must name a host");
/// ```
pub use service_kit::StartError as Error;
/// The request id header, made up here when the caller sends none.
pub use service_kit::X_REQUEST_ID;

/// Edge's routes with every layer (see [`service_kit::router`]): request
/// id (a UUID when none arrives, echoed on the response), request logs
/// (method, path, id, status, latency; never bodies or credentials), and
/// with `budget_mode = on` the budget layer on `/checkout`.
///
/// # Errors
///
/// An invalid config, naming the field (see [`EdgeConfig::validate`]).
///
/// ```
/// let app = edge::router(&edge::EdgeConfig::default()).unwrap();
/// # let _: axum::Router = app;
/// ```
pub fn router(config: &EdgeConfig) -> Result<Router, ConfigError> {
    // Before the clients are built: their counters register at 0 in it.
    service_kit::install_metrics();
    let built = config.build()?;
    let forward = get(forward::forward)
        .post(forward::forward)
        .with_state(built.checkout);
    Ok(service_kit::router("/checkout", forward, built.layer))
}

/// Starts edge on `config.listen` (port 0 picks a free port) and serves
/// until `shutdown` resolves, then lets requests in flight finish (axum's
/// graceful shutdown). Returns the bound address and the server task.
///
/// # Errors
///
/// [`Error::Config`] for an invalid config, [`Error::Bind`] when the
/// address cannot be bound.
///
/// ```no_run
/// # async fn run() -> Result<(), edge::Error> {
/// let config = edge::EdgeConfig::new("127.0.0.1:0".parse().unwrap(), "http://127.0.0.1:8081");
/// let (addr, server) = edge::spawn(&config, std::future::pending()).await?;
/// server.abort();
/// # Ok(()) }
/// ```
pub async fn spawn<F>(
    config: &EdgeConfig,
    shutdown: F,
) -> Result<(SocketAddr, JoinHandle<io::Result<()>>), Error>
where
    F: Future<Output = ()> + Send + 'static,
{
    let bound = service_kit::bind(config.listen, router(config)?)
        .await?
        .with_limits(config.http);
    tracing::info!(addr = %bound.addr(), budget_mode = ?config.budget_mode, "edge listening");
    Ok(bound.serve(shutdown))
}
