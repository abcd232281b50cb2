//! The server side: a tower layer that gives every request a budget, and
//! axum extractors that read it.
//!
//! [`BudgetLayer`] wraps any tower HTTP service (an axum `Router`, a tonic
//! server, a hand-written service). On each request it
//!
//! 1. decodes the inbound budget from every known header (the smallest
//!    wins), applies the default when there is none and clamps to the
//!    maximum (docs/contract.md §1);
//! 2. answers `400` problem+json for a malformed budget header (or ignores
//!    it, if so configured);
//! 3. sheds with `504` at once when the budget is already below the
//!    service's ingress floor: the inner service is never called;
//! 4. at `max_in_flight`, waits for a slot while the budget covers the
//!    wait and the floor (the more critical first), and answers `504` when
//!    it no longer does: the inner service's future is not polled until a
//!    slot comes;
//! 5. otherwise runs the inner service under the deadline until the
//!    answer's head (status and headers); when the deadline passes first,
//!    the inner future is dropped (so its downstream calls are cancelled
//!    too) and the answer is `504`. The body that follows the head is not
//!    held to the budget (nor to the in-flight slot, given back with the
//!    head): a streaming route sets its own limits with a [`StreamPolicy`],
//!    except a gRPC call, whose deadline covers the whole call (gRPC's
//!    rule): its body ends at the deadline with `grpc-status: 4`;
//! 6. makes the budget, the ledger and the per-hop reserve available to the
//!    handler: the inner service's future (where handlers, middleware
//!    futures and client calls run) is polled in the
//!    [`context`](crate::context) scope, where the client side
//!    and the extractors find them. The inner service's synchronous `call`
//!    runs outside it, and the context is not put in the request's
//!    extensions (see [`request_context`]): either would cost a clone, and
//!    with it an allocation, on every request;
//! 7. adds the `Server-Timing` ledger to every response, success or error.
//!
//! Budget problems become responses; the inner service's error type is kept
//! and its errors pass through untouched. So is its response body type: the
//! layer writes its own answers in it ([`ProblemBody`](crate::problem::ProblemBody)) rather than
//! re-boxing every response, so it wraps a plain hyper service as it wraps
//! an axum router.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use axum::{Router, routing::get};
//! use budget_core::{Budget, floor::Floor};
//! use budget_core::server::{BudgetLayer, ServerConfig};
//!
//! async fn handler(budget: Budget) -> String {
//!     format!("{}ms left", budget.remaining().as_millis())
//! }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config: ServerConfig = toml::from_str(r#"
//!     default_budget = "2s"
//!     max_budget = "10s"
//!     floor = "20ms"
//!     reserve = "5ms"
//! "#)?;
//! let app = Router::new().route("/", get(handler)).layer(config.layer()?);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```
//!
//! # How this differs from `tower_http::timeout` and `tower::timeout`
//!
//! | | `tower::timeout::Timeout` | `tower_http::timeout::TimeoutLayer` | [`BudgetLayer`] |
//! | --- | --- | --- | --- |
//! | limit | one fixed duration | one fixed duration | what the caller said it will wait (headers), clamped, or a default |
//! | on expiry | an `Elapsed` *error* (the connection may be dropped) | an empty response with a chosen status | `504` problem+json with the ledger |
//! | below a floor | called anyway | called anyway | shed at once, handler not run |
//! | downstream | knows nothing | knows nothing | the client side reads the remaining budget and forwards it |
//! | accounting | none | none | `Server-Timing` ledger on every response |
//!
//! A fixed timeout says "no request takes longer than 30 s here"; a budget
//! says "this request's caller stops waiting in 740 ms, so do not start what
//! cannot finish by then". The two compose: a fixed timeout outside the
//! budget layer is a last-resort guard.

mod config;
mod event;
mod extract;
mod future;
mod in_flight;
mod ingress;
mod layer;
mod ledger_layer;
pub(crate) mod response;
mod server_timing;
mod service;
mod stream_limit;

pub use config::ServerConfig;
pub use event::{BudgetEvent, OnBudgetEvent};
pub use extract::{MissingBudgetLayer, request_context, request_ledger};
pub use future::ResponseFuture;
pub use layer::BudgetLayer;
pub use ledger_layer::{LedgerFuture, LedgerLayer, LedgerService};
pub use response::problem_response;
pub use server_timing::ServerTiming;
pub use service::BudgetService;
pub use stream_limit::{
    BodyLimit, LimitedBody, StreamEnd, StreamLimit, StreamLimitFuture, StreamLimitLayer,
    StreamPolicy,
};

/// The `Server-Timing` header name.
pub const SERVER_TIMING: http::HeaderName = http::HeaderName::from_static("server-timing");
