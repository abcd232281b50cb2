//! [`OutboundBudgetLayer`]: the request's budget on a tower client of
//! `http::Request`s (hyper-util's legacy `Client`, or any
//! `Service<http::Request<B>, Response = http::Response<RB>>`), for a stack
//! that does not move to [`BudgetClient`].
//! Feature `tower-client`; it needs neither reqwest nor axum.
//!
//! Inside a request's budget scope (the server layer's, or
//! [`RequestContext::scope`](crate::context::RequestContext::scope)), each
//! request that passes through it runs through the outbound engine
//! (docs/adapters.md):
//!
//! 1. it is not made when what is left of the budget, less the reserve,
//!    is below the floor (zero by default: a spent budget), when its
//!    circuit is open or no concurrency permit comes in time: the inner
//!    client is not called, the ledger says why (`skipped: 30ms < floor
//!    50ms`), and the error is a [`CallError`](crate::client::CallError);
//! 2. it carries `request-budget-ms` = what is left less the reserve,
//!    rounded down (replacing any value already there),
//!    `request-criticality` (unless it has one) and the trace context
//!    (unless it has one) (docs/contract.md §1, "Outbound");
//! 3. it is given that long: past it the inner future is dropped (and with
//!    it the request) and the error is a
//!    [`CallError`](crate::client::CallError) of kind `Timeout`. The
//!    deadline covers the response head; a streaming body is read after
//!    the future answered, and is the caller's to bound;
//! 4. it is recorded in the request's ledger with its dependency's name,
//!    its duration and what came back (`pricing;dur=41`, `desc="503"`,
//!    `desc="timeout"`, `desc="connect"`), with the client's metrics and
//!    attempt span.
//!
//! A request is sent once (its body is not replayed); the inner client
//! must be `Clone`, as tower's `Buffer` and hyper-util's client are.
//! Outside any budget scope, with no `default_budget`, a request passes
//! through untouched: no header, no deadline, no ledger entry; only the
//! inner client's error is boxed.
//!
//! The error is `Box<dyn Error + Send + Sync>`, tower's `BoxError`:
//! `downcast_ref::<CallError>()` tells a call not made or out of budget
//! from the inner client's own failure.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use budget_core::adapters::tower::OutboundBudgetLayer;
//! use bytes::Bytes;
//! use http_body_util::Full;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # async fn handler() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let http = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
//! let pricing = ServiceBuilder::new()
//!     .layer(OutboundBudgetLayer::new("pricing").floor(Duration::from_millis(50)))
//!     .service(http);
//! // Inside a handler behind the server layer: `request-budget-ms` is
//! // what is left, and the request may take that long and no more.
//! let req = http::Request::get("http://127.0.0.1:9000/quote").body(Full::default())?;
//! let res = pricing.oneshot(req).await?;
//! println!("{}", res.status());
//! # Ok(()) }
//! ```
//!
#![cfg_attr(
    feature = "client",
    doc = "[`BudgetClient`]: crate::client::BudgetClient"
)]
#![cfg_attr(not(feature = "client"), doc = "[`BudgetClient`]: crate::docs::client")]

pub mod future;
mod layer;
mod service;

pub use layer::OutboundBudgetLayer;
pub use service::OutboundBudget;
