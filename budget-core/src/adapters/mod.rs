//! Adapters: the request's budget on an HTTP client stack you already
//! have, without moving to [`BudgetClient`].
//!
//! - [`reqwest_middleware::BudgetMiddleware`] (feature
//!   `reqwest-middleware`) is one more middleware in a `reqwest-middleware`
//!   stack (`reqwest_middleware::ClientBuilder::with`).
//! - [`tower::OutboundBudgetLayer`] (feature `tower-client`) is a tower
//!   layer around any client of `http::Request`s, such as hyper-util's
//!   legacy `Client`.
//!
//! # What they do
//!
//! Both read the request's [context](crate::context) (its budget, ledger,
//! per-hop reserve and criticality, set by the [server layer][server-layer]
//! or by [`RequestContext::scope`](crate::context::RequestContext::scope)),
//! and for each outbound request apply the client's rules of one attempt
//! (docs/contract.md §1 "Outbound", §2 rules 1 and 2, §4), written once for
//! both:
//!
//! 1. **The floor.** A request that cannot fit (what is left, less the
//!    reserve, below the adapter's floor; zero by default, so a spent
//!    budget is never sent) is not made: the ledger says why
//!    (`pricing;desc="skipped: 30ms < floor 50ms"`) and the caller gets a
//!    typed error: a [`CallError`] (kind
//!    `BelowFloor`) inside `reqwest_middleware::Error::Middleware`, a
//!    [`BelowFloor`](crate::floor::BelowFloor) in the tower layer's boxed
//!    error.
//! 2. **The headers.** `request-budget-ms` = what is left less the
//!    reserve, rounded down, and `request-criticality`, as a
//!    `BudgetClient` attempt sends them.
//! 3. **The deadline.** The request may take what it was told and no more:
//!    reqwest's per-request timeout (the body included; never longer than
//!    a timeout the request already had), or the tower layer's own
//!    deadline on the response head
//!    ([`BudgetElapsed`][budget-elapsed]).
//! 4. **The ledger.** One attempt entry in the request's ledger (its
//!    `Server-Timing` budget table): the dependency's name, the duration,
//!    the status or the kind of failure (`pricing;dur=41`,
//!    `desc="503"`, `desc="timeout"`).
//!
//! Outside any budget scope (a background job, a warm-up, a spawned task
//! that did not carry the context) a request passes through untouched: no
//! header, no timeout, no ledger entry.
//!
//! # What they leave out
//!
//! An adapter spends the budget on the request it is given; it does not
//! decide what else to send. Everything else a `BudgetClient` does stays
//! with the rest of your stack, or with `BudgetClient`:
//!
//! - **Retries** are your retry middleware's (`reqwest-retry`,
//!   `tower::retry`). Put the adapter *inside* it (with
//!   `reqwest-middleware`, attach the retry middleware first): each retry
//!   then passes through the adapter, is told what is left at that
//!   moment, and is refused once that is below the floor (`reqwest-retry`
//!   stops there: a middleware error is fatal to it; a `tower::retry`
//!   policy should not retry a [`BelowFloor`](crate::floor::BelowFloor)).
//!   The backoff is the retry middleware's own and does not look at the
//!   budget. A `BudgetClient` retries only what is safe to send twice,
//!   within what is left less the floor, under a retry budget.
//! - **No circuit breaker, no concurrency permits, no hedging, no learned
//!   floor, no stale fallback, no `Retry-After` handling**: each is a
//!   `BudgetClient` rule that needs the whole call, not one request.
//! - **No metrics and no spans** of their own: the ledger entry and a
//!   `debug` log line per attempt. Trace context is your tracing
//!   middleware's (`reqwest-tracing`, an OpenTelemetry layer); the reqwest
//!   middleware only passes on the caller's `traceparent` when the request
//!   has none, as a `BudgetClient` does.
//! - **One attempt number.** Each request an adapter sees is recorded as
//!   an attempt of its own: it cannot tell a retry from a new call.
//!
//! # An adapter or `BudgetClient`
//!
//! A [`BudgetClient`] is the whole contract
//! for one dependency: every rule above and below, one call engine, its
//! telemetry. An adapter is the budget's part of it on a client you keep:
//! the stack's other middlewares (auth, tracing, retries, caching) stay as
//! they are, and the dependency is still told its budget, refused when it
//! cannot fit, and cut off when it runs out.
//!
//! # Example
//!
//! The tower layer around a client that answers with the budget it was
//! told (a real one is hyper-util's legacy `Client`):
//!
//! ```
//! # #[cfg(feature = "tower-client")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::convert::Infallible;
//! use std::time::Duration;
//! use budget_core::adapters::tower::OutboundBudgetLayer;
//! use budget_core::{Budget, context::RequestContext};
//! use tower::{Layer, ServiceExt};
//!
//! let told = tower::service_fn(|req: http::Request<()>| async move {
//!     let budget = req.headers()["request-budget-ms"].to_str().unwrap_or("").to_owned();
//!     Ok::<_, Infallible>(http::Response::new(budget))
//! });
//! let pricing = OutboundBudgetLayer::new("pricing").layer(told);
//!
//! // Inside a request with 2 s and a 10 ms reserve (what the server layer sets).
//! let cx = RequestContext::new(Budget::new(Duration::from_secs(2)))
//!     .with_reserve(Duration::from_millis(10));
//! let res = cx.clone().scope(pricing.oneshot(http::Request::new(()))).await.unwrap();
//! let told: u64 = res.body().parse().unwrap();
//! assert!((1900..=1990).contains(&told), "{told}");
//! assert!(cx.ledger().server_timing().starts_with("pricing;dur="));
//! # }
//! # #[cfg(not(feature = "tower-client"))]
//! # fn main() {}
//! ```
//!
#![cfg_attr(
    feature = "client",
    doc = "[`BudgetClient`]: crate::client::BudgetClient"
)]
#![cfg_attr(not(feature = "client"), doc = "[`BudgetClient`]: crate::docs::client")]
#![cfg_attr(feature = "client", doc = "[`CallError`]: crate::client::CallError")]
#![cfg_attr(not(feature = "client"), doc = "[`CallError`]: crate::docs::client")]
#![cfg_attr(feature = "server", doc = "[server-layer]: crate::server")]
#![cfg_attr(not(feature = "server"), doc = "[server-layer]: crate::docs::server")]
#![cfg_attr(
    feature = "reqwest-middleware",
    doc = "[`reqwest_middleware::BudgetMiddleware`]: reqwest_middleware::BudgetMiddleware"
)]
#![cfg_attr(
    not(feature = "reqwest-middleware"),
    doc = "[`reqwest_middleware::BudgetMiddleware`]: self"
)]
#![cfg_attr(
    feature = "tower-client",
    doc = "[`tower::OutboundBudgetLayer`]: tower::OutboundBudgetLayer"
)]
#![cfg_attr(
    not(feature = "tower-client"),
    doc = "[`tower::OutboundBudgetLayer`]: self"
)]
#![cfg_attr(
    feature = "tower-client",
    doc = "[budget-elapsed]: tower::BudgetElapsed"
)]
#![cfg_attr(not(feature = "tower-client"), doc = "[budget-elapsed]: self")]

mod outbound;

#[cfg(feature = "reqwest-middleware")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest-middleware")))]
pub mod reqwest_middleware;

#[cfg(feature = "tower-client")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower-client")))]
pub mod tower;
