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
//! - `GET /events` opens the partner's event stream (`events_url`, the
//!   caller's query string and `Last-Event-ID` passed on) as a call of a
//!   second client (floor, breaker, ledger, one attempt, in the request's
//!   budget), then streams its body to the caller unchanged, as it comes
//!   (`text/event-stream`). The stream ends when the partner's does, when
//!   it is cut, after `events_idle_timeout` without a byte, after
//!   `events_max_duration`, or when edge shuts down: always a clean end,
//!   which a browser's `EventSource` answers by reconnecting with
//!   `Last-Event-ID`. A failed opening is a problem as for `/checkout`;
//!   the partner's refusal is passed up. Pages from `cors_origins` may
//!   read it (CORS).
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
mod events;
mod forward;
mod server_timing;
mod stream_end;

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;
use budget_core::config::ConfigError;
use http::Method;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tower_http::cors::{AllowOrigin, CorsLayer};

pub use config::{
    CHECKOUT, CheckoutClientSettings, DEFAULT_EVENTS_IDLE_TIMEOUT, DEFAULT_EVENTS_MAX_DURATION,
    DEFAULT_LISTEN, EVENTS, EdgeConfig,
};
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

/// Edge's routes with every layer (see [`service_kit::router_of`]): request
/// id (a UUID when none arrives, echoed on the response), request logs
/// (method, path, id, status, latency; never bodies or credentials), and
/// with `budget_mode = on` the budget layer on `/checkout` and `/events`
/// (an event stream's opening is held to the request's budget, the stream
/// itself to `events_idle_timeout` and `events_max_duration`).
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
    app(config, CancellationToken::new())
}

/// [`router`], its event streams ended when `stop` is cancelled.
fn app(config: &EdgeConfig, stop: CancellationToken) -> Result<Router, ConfigError> {
    // Before the clients are built: their counters register at 0 in it.
    service_kit::install_metrics();
    let built = config.build()?;
    let forward = get(forward::forward)
        .post(forward::forward)
        .with_state(built.checkout);
    // The stream's own limits, inside the budget layer: the budget holds
    // to the head, the policy after it.
    let mut events = get(events::events)
        .with_state(events::Events {
            client: built.events,
            stop,
        })
        .layer(built.stream_policy);
    if !built.cors_origins.is_empty() {
        // A browser's `EventSource` sends a simple request (no preflight):
        // its `Last-Event-ID` is set by the browser itself.
        events = events.layer(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list(built.cors_origins))
                .allow_methods([Method::GET])
                .allow_headers([events::LAST_EVENT_ID, http::header::CACHE_CONTROL]),
        );
    }
    let routes = Router::new()
        .route("/checkout", forward)
        .route("/events", events);
    Ok(service_kit::router_of(routes, built.layer))
}

/// Starts edge on `config.listen` (port 0 picks a free port) and serves
/// until `shutdown` resolves, then ends the event streams it serves and lets
/// requests in flight finish (axum's graceful shutdown). Returns the bound address and the server task.
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
    let stop = CancellationToken::new();
    let bound = service_kit::bind(config.listen, app(config, stop.clone())?)
        .await?
        .with_limits(config.http);
    tracing::info!(addr = %bound.addr(), budget_mode = ?config.budget_mode, "edge listening");
    // Requests in flight finish on shutdown; event streams have no end of
    // their own, so shutdown ends them.
    Ok(bound.serve(async move {
        shutdown.await;
        stop.cancel();
    }))
}
