//! # edge
//!
//! The public entry of the example chain (the project's `CONTRACT.md`,
//! section 6): `client -> edge -> checkout -> inventory, pricing,
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
//!   ([`prefixed_metrics`]).
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
mod error;
mod forward;
mod server_timing;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use budget_core::config::ConfigError;
use http::{HeaderName, Request};
use tokio::task::JoinHandle;
use tower::ServiceBuilder;
use tower_http::LatencyUnit;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnFailure, DefaultOnResponse, TraceLayer};
use tracing::Level;

pub use config::{CHECKOUT, CheckoutClientSettings, DEFAULT_LISTEN, EdgeConfig};
pub use error::Error;
pub use server_timing::prefixed_metrics;

/// The request id header, made up here when the caller sends none.
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Edge's routes with every layer: request id (a UUID when none arrives,
/// echoed on the response), request logs (method, path, id, status,
/// latency; never bodies or credentials), and with `budget_mode = on` the
/// budget layer on `/checkout`.
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
    let built = config.build()?;
    let app = Arc::new(forward::App {
        checkout: built.checkout,
    });
    let mut routes = Router::new()
        .route("/checkout", get(forward::forward).post(forward::forward))
        .with_state(app);
    if let Some(layer) = built.layer {
        routes = routes.layer(layer);
    }
    Ok(routes.route("/healthz", get(|| async { "ok" })).layer(
        ServiceBuilder::new()
            .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
            .layer(
                TraceLayer::new_for_http()
                    .make_span_with(request_span)
                    .on_response(
                        DefaultOnResponse::new()
                            .level(Level::INFO)
                            .latency_unit(LatencyUnit::Millis),
                    )
                    .on_failure(DefaultOnFailure::new().level(Level::WARN)),
            )
            .layer(PropagateRequestIdLayer::x_request_id()),
    ))
}

/// The span of one request: method, path (no query: it may carry secrets)
/// and request id.
fn request_span(req: &Request<Body>) -> tracing::Span {
    let id = req
        .headers()
        .get(X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    tracing::info_span!("request", method = %req.method(), path = req.uri().path(), request_id = id)
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
    let app = router(config)?;
    let bind = |source| Error::Bind {
        addr: config.listen,
        source,
    };
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(bind)?;
    let addr = listener.local_addr().map_err(bind)?;
    tracing::info!(%addr, budget_mode = ?config.budget_mode, "edge listening");
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
    });
    Ok((addr, server))
}
