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
//! Both run each outbound request through the outbound engine that
//! [`BudgetClient`] and the gRPC layer use (docs/architecture.md, "The
//! outbound engine"): the same header rules (docs/contract.md §1
//! "Outbound"), the floor, the breaker, the permit queue, the ledger
//! entry, metrics and spans (§2, §4). Made with `new(name)` an adapter
//! has a name and nothing else (no floor but a spent budget, one attempt
//! per request); made with `from_config(&DependencyConfig)` it has what
//! the dependency's configuration gives a [`BudgetClient`].
//!
//! A request not made (below the floor, circuit open, no permit in time)
//! or cut off when its budget ran out is a [`CallError`], as
//! [`BudgetClient`] gives it: inside `reqwest_middleware::Error::Middleware`
//! for the middleware (and `CallError: From<reqwest_middleware::Error>`,
//! so `?` answers the same problem+json), boxed for the tower layer. A
//! transport failure is the stack's own error, as it came, so that its
//! retry middleware reads it as its own.
//!
//! Outside any budget scope (a background job, a warm-up, a spawned task
//! that did not carry the context) with no `default_budget`, a request
//! passes through untouched: no header, no timeout, no ledger entry.
//!
//! # What stays `BudgetClient`'s
//!
//! - **Retries** are the stack's (`reqwest-retry`, `tower::retry`) with
//!   `new`: put the adapter *inside* the retry middleware, and each retry
//!   passes through it, is told what is left and is refused below the
//!   floor (reqwest-retry stops there: a middleware error is fatal to
//!   it). With `from_config` the engine may retry itself (the middleware
//!   only): let one of the two retry (docs/adapters.md, "With
//!   reqwest-retry").
//! - **The stale fallback, the token refresh and `send_optional`**, and a
//!   response body read inside the attempt: they need the whole call in
//!   the library's hands.
//!
//! # An adapter or `BudgetClient`
//!
//! A [`BudgetClient`] is the whole contract for one dependency. An adapter
//! is the same engine on a client you keep: the stack's other
//! middlewares (auth, tracing, retries, caching) stay as they are, and the
//! dependency is still told its budget, refused when it cannot fit, and
//! cut off when it runs out. docs/adapters.md has the details and a
//! handler that answers with `?`.
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

mod outbound;

#[cfg(feature = "reqwest-middleware")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest-middleware")))]
pub mod reqwest_middleware;

#[cfg(feature = "tower-client")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower-client")))]
pub mod tower;
