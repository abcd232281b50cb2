//! The client side: a reqwest wrapper that spends the current request's
//! budget on a dependency, and nothing more.
//!
//! The outbound engine behind it (docs/architecture.md, "The outbound
//! engine") is shared with the gRPC layer ([`GrpcBudgetLayer`](crate::grpc))
//! and both adapters: with the `grpc` or `tower-client` feature alone this
//! module holds [`DependencyConfig`], [`CallError`] and the types they
//! name, without reqwest. [`BudgetClient`] and what only its calls make or
//! use ([`BudgetResponse`], [`OptionalResponse`], [`Skipped`], the bearer
//! tokens of `client::auth`) are built with the `client` feature alone:
//! without reqwest they would be of no use.
//!
//! A [`BudgetClient`] is made per dependency from a [`DependencyConfig`]
//! and cloned into handlers. Inside a request handled by the
//! [server layer][server-layer], a call needs no budget argument: it reads
//! the request's budget, ledger and per-hop reserve from the
//! [`context`](crate::context) the layer set, and for each call
//! (docs/contract.md §2):
//!
//! 1. refuses it before any I/O when `remaining - reserve` is below the
//!    dependency's floor ([`CallError::is_below_floor`]; the ledger says
//!    `skipped: 850ms < floor 1000ms`), or when its circuit is open
//!    ([`CallError::is_circuit_open`], with `retry_after`);
//! 2. waits for a concurrency permit, if the dependency has a limit: the
//!    wait is paid from the budget, bounded by it, recorded as
//!    `<name>-queue`, and the permit is held through retries and backoff;
//! 3. sends each attempt with `request-budget-ms` = what is left net of the
//!    reserve at that moment, rounded down (and optionally `grpc-timeout`),
//!    so the header shrinks on every retry; the attempt may take what is
//!    left and no more, its connect at most `min(connect_cap, remaining)`;
//!    the response body is read inside the attempt, capped by `max_body`;
//! 4. asks [`RetryPolicy::decide`](crate::retry::RetryPolicy::decide)
//!    whether to retry (idempotent requests only, or keyed with
//!    `Idempotency-Key`; within the attempts, the retry budget and the
//!    budget less the floor), and sleeps the backoff or the server's
//!    `Retry-After` without passing the deadline;
//! 5. records every attempt, wait and skip in the request's ledger (the
//!    `Server-Timing` budget table) and logs each attempt with `tracing`
//!    (dependency, attempt, outcome, duration, budget sent and left; never
//!    a body, a header value or a URL).
//!
//! # What a call returns
//!
//! - `Ok(`[`BudgetResponse`]`)` for *any* HTTP answer, non-2xx included (as
//!   reqwest does), with its body buffered. When the dependency answered
//!   `429`/`503` with a `Retry-After` that does not fit the budget, the call
//!   ends at once and [`BudgetResponse::passes_up`] is true:
//!   [`deferred`][deferred] is the problem to answer with
//!   (the same status, its `Retry-After`), so the caller backs off instead
//!   of timing out. [`error_for_status`][error-for-status]
//!   turns an error status into a [`CallError`] for `?`.
//! - `Err(`[`CallError`]`)` when no usable answer came: not made (floor,
//!   circuit, permit), connect failure, timeout, reset, body failure.
//!   [`CallError::problem`] is the contract's answer (`504`, `503` +
//!   `Retry-After`, `502`); with the `server` feature `CallError` is an
//!   axum `IntoResponse`, so a handler can `?` it.
//! - [`send_optional`][send-optional] gives
//!   `Ok(`[`OptionalResponse::Skipped`]`)` for a call that could not be
//!   made, when the dependency is configured with `on_unavailable = "skip"`:
//!   the [`Skipped`] says why (the ledger's note, `skipped: 850ms < floor
//!   1000ms`, and the refusal), and the caller serves its fallback
//!   (`.unwrap_or_default()`, a stale value, a "degraded" flag with the
//!   reason).
//!
//! Cancellation is structural: a call is one future polled by the caller's
//! task, so when the server layer drops a handler at its deadline (or a
//! caller drops the call), the attempt in flight is dropped, reqwest closes
//! its connection, and no further attempt starts. Nothing is spawned.
//!
//! # Fixed mode
//!
//! With `mode = "fixed"` (what the services' `--budget-mode off` selects)
//! the client behaves like the usual setup, for side-by-side comparison: no
//! budget is read or forwarded, each attempt gets `fixed_timeout`, retries
//! follow `retry.max_attempts` and the backoff with no budget check and no
//! retry budget. Attempts and waits are still recorded in the ledger.
//!
//! # `BudgetClient` or a reqwest-middleware stack
//!
//! A service that already has a `reqwest_middleware::ClientWithMiddleware`
//! (with reqwest-retry, say) can add
//! `adapters::reqwest_middleware::BudgetMiddleware` (feature
//! `reqwest-middleware`) to it instead: made
//! `BudgetMiddleware::from_config(&config)`, its requests run through the
//! same engine (floor, breaker, permit queue, ledger, metrics) and its
//! refusals are the same [`CallError`]. What stays `BudgetClient`'s: its
//! `Middleware` hands back a streaming `reqwest::Response`, so a body read
//! after it returned is bounded by reqwest's timeout (set to the attempt's
//! window), not read inside the attempt; the stale fallback and token
//! refresh are `BudgetClient`'s. See docs/adapters.md.
//!
//! # Example: a handler calling a dependency
//!
//! ```no_run
//! # #[cfg(feature = "server")] mod example {
//! use axum::{Json, Router, extract::State, routing::get};
//! use budget_core::client::{BudgetClient, CallError, DependencyConfig, OptionalResponse};
//! use budget_core::server::ServerConfig;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Deserialize, Serialize)]
//! struct Quote { price: u64 }
//!
//! #[derive(Clone)]
//! struct Deps { pricing: BudgetClient, recommendations: BudgetClient }
//!
//! #[derive(Serialize)]
//! struct Checkout { price: u64, recommendations: Vec<String>, degraded: bool }
//!
//! // No budget argument: the calls read the request's budget from the
//! // context the BudgetLayer set, forward what is left, and record their
//! // attempts in its Server-Timing ledger.
//! async fn checkout(State(deps): State<Deps>) -> Result<Json<Checkout>, CallError> {
//!     // Required: any failure becomes the right problem (504/503/502, or
//!     // pricing's own 429/503 with its Retry-After when that wait does not fit).
//!     let quote: Quote = deps.pricing.get("").send().await?.error_for_status()?.json()?;
//!     // Optional: skipped below its floor (on_unavailable = "skip").
//!     let recs: Option<Vec<String>> = match deps.recommendations.get("").send_optional().await {
//!         Ok(OptionalResponse::Answered(res)) => res.json().ok(),
//!         Ok(OptionalResponse::Skipped(_)) | Err(_) => None,
//!     };
//!     Ok(Json(Checkout {
//!         price: quote.price,
//!         degraded: recs.is_none(),
//!         recommendations: recs.unwrap_or_default(),
//!     }))
//! }
//!
//! async fn serve() -> Result<(), Box<dyn std::error::Error>> {
//!     let pricing: DependencyConfig = toml::from_str(r#"
//!         name = "pricing"
//!         url = "http://127.0.0.1:9000/pricing?script=503@250ms,200@400ms"
//!         floor = "100ms"
//!         [retry_budget]
//!         ratio = 0.2
//!     "#)?;
//!     let mut recommendations = DependencyConfig::new("recommendations", "http://127.0.0.1:9000/recs");
//!     recommendations.floor = budget_core::floor::Floor::new(std::time::Duration::from_secs(1)).into();
//!     recommendations.on_unavailable = budget_core::client::OnUnavailable::Skip;
//!     let deps = Deps { pricing: pricing.build()?, recommendations: recommendations.build()? };
//!
//!     let app = Router::new()
//!         .route("/checkout", get(checkout))
//!         .with_state(deps)
//!         .layer(ServerConfig::default().layer()?);
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//!     axum::serve(listener, app).await?;
//!     Ok(())
//! }
//! # }
//! # fn main() {}
//! ```
//!
#![cfg_attr(feature = "client", doc = "[`BudgetClient`]: BudgetClient")]
#![cfg_attr(not(feature = "client"), doc = "[`BudgetClient`]: crate::docs::client")]
#![cfg_attr(feature = "server", doc = "[server-layer]: crate::server")]
#![cfg_attr(not(feature = "server"), doc = "[server-layer]: crate::docs::server")]
#![cfg_attr(
    feature = "client",
    doc = "[send-optional]: RequestBuilder::send_optional"
)]
#![cfg_attr(not(feature = "client"), doc = "[send-optional]: crate::docs::client")]
#![cfg_attr(
    feature = "client",
    doc = "[`BudgetResponse`]: BudgetResponse\n[`BudgetResponse::passes_up`]: BudgetResponse::passes_up\n[deferred]: BudgetResponse::deferred\n[error-for-status]: BudgetResponse::error_for_status\n[`OptionalResponse`]: OptionalResponse\n[`OptionalResponse::Skipped`]: OptionalResponse::Skipped\n[`Skipped`]: Skipped"
)]
#![cfg_attr(
    not(feature = "client"),
    doc = "[`BudgetResponse`]: crate::docs::client\n[`BudgetResponse::passes_up`]: crate::docs::client\n[deferred]: crate::docs::client\n[error-for-status]: crate::docs::client\n[`OptionalResponse`]: crate::docs::client\n[`OptionalResponse::Skipped`]: crate::docs::client\n[`Skipped`]: crate::docs::client"
)]

#[cfg(feature = "client")]
pub mod auth;
#[cfg(feature = "client")]
mod budget_client;
#[cfg(feature = "client")]
mod call;
mod config;
#[cfg(feature = "streams")]
mod opening;
#[cfg(feature = "client")]
mod optional;
#[cfg(feature = "client")]
mod request;
#[cfg(feature = "client")]
mod response;
pub mod stale;
#[cfg(feature = "client")]
pub(crate) mod transport;
#[cfg(feature = "streams")]
pub(crate) mod upgrade;

pub use crate::outbound::QUEUE_SUFFIX;
pub use crate::outbound::TimeoutMode;
pub use crate::outbound::endpoints::DEFAULT_RESOLVE_INTERVAL;
#[cfg(feature = "client")]
pub use budget_client::{BudgetClient, BudgetClientBuilder};
pub use config::{
    DEFAULT_CONNECT_CAP, DEFAULT_FIXED_TIMEOUT, DEFAULT_MAX_BODY, DEFAULT_POOL_IDLE_TIMEOUT,
    DependencyConfig, OnUnavailable,
};
#[cfg(feature = "client")]
pub use optional::{OptionalResponse, Skipped};

/// The old name of [`TimeoutMode`] (how a client spends time: from the
/// budget or with a fixed timeout).
///
/// ```
/// #[allow(deprecated)]
/// let mode = budget_core::client::Mode::Fixed;
/// assert_eq!(mode, budget_core::client::TimeoutMode::Fixed);
/// ```
#[deprecated(note = "renamed to `TimeoutMode`")]
pub type Mode = TimeoutMode;
pub use crate::outbound::error::{
    AttemptTimedOut, BodyTooLarge, BoxError, CallError, CallErrorKind, NoPermitInBudget,
};
pub use crate::outbound::hedging::{CANCELLED, HEDGE_SUFFIX, HedgeConfig, HedgeDelay};
#[cfg(feature = "client")]
pub use request::RequestBuilder;
#[cfg(feature = "client")]
pub use response::BudgetResponse;

/// The reqwest this client is built on, for its types (`reqwest::Url`,
/// `reqwest::Certificate`, ...) without a second dependency line that
/// must agree on its version.
///
/// ```
/// let url: budget_core::client::reqwest::Url = "http://127.0.0.1:9000/".parse().unwrap();
/// assert_eq!(url.port(), Some(9000));
/// ```
#[cfg(feature = "client")]
pub use reqwest;
