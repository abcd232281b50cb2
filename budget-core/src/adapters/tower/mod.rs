//! [`OutboundBudgetLayer`]: the request's budget on a tower client of
//! `http::Request`s (hyper-util's legacy `Client`, or any
//! `Service<http::Request<B>, Response = http::Response<RB>>`), for a stack
//! that does not move to [`BudgetClient`].
//! Feature `tower-client`; it needs neither reqwest nor axum.
//!
//! Inside a request's budget scope (the server layer's, or
//! [`RequestContext::scope`](crate::context::RequestContext::scope)), each
//! request that passes through it:
//!
//! 1. is not made when what is left of the budget, less the reserve, is
//!    below the layer's floor (zero by default: a spent budget): the inner
//!    client is not called, the ledger says `skipped: 30ms < floor 50ms`,
//!    and the error is a [`BelowFloor`](crate::floor::BelowFloor);
//! 2. carries `request-budget-ms` = what is left less the reserve, rounded
//!    down (replacing any value already there), and `request-criticality`
//!    (unless it has one) (docs/contract.md §1, "Outbound");
//! 3. is given that long: past it the inner future is dropped (and with it
//!    the request) and the error is a [`BudgetElapsed`]. The deadline
//!    covers the response head; a streaming body is read after the future
//!    answered, and is the caller's to bound;
//! 4. is recorded in the request's ledger with its dependency's name, its
//!    duration and what came back (`pricing;dur=41`, `desc="503"`,
//!    `desc="timeout"`, `desc="connect"`).
//!
//! Outside any budget scope a request passes through untouched: no header,
//! no deadline, no ledger entry; only the inner client's error is boxed.
//!
//! The error is `Box<dyn Error + Send + Sync>`, tower's `BoxError`, as
//! `tower::timeout`'s: `downcast_ref` it to tell the three apart. The
//! layer writes no `traceparent`: trace context is the tracing layer's
//! (see the [adapters' docs](super)).
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
//!     .layer(OutboundBudgetLayer::new("pricing").with_floor(Duration::from_millis(50)))
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
