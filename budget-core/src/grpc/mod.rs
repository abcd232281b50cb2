//! gRPC: how a budget problem reads as a gRPC status ([`GrpcCode`],
//! [`encode_message`]), for the budget layer's answers to gRPC requests.
//!
//! A request whose `content-type` is `application/grpc` (or `+proto`,
//! `-web`, ...) is a gRPC call: what the layer refuses or cuts short it
//! answers the gRPC way, as a trailers-only response (HTTP 200, one HEADERS
//! frame that ends the stream) with `grpc-status` and a percent-encoded
//! `grpc-message`, `grpc-retry-pushback-ms` where the problem says when to
//! retry, and the ledger as `server-timing` in that same frame. docs/grpc.md,
//! "The server", lists the statuses.
//!
//! With the `grpc` feature, [`GrpcBudgetLayer`] makes a tonic client's
//! channel spend the current request's budget, and
//! [`GrpcBudgetLayer::balanced`] with [`EndpointChannels`] spreads a
//! dependency's calls over its replicas as the HTTP client does.
//!
#![cfg_attr(feature = "grpc", doc = "[`GrpcBudgetLayer`]: GrpcBudgetLayer")]
#![cfg_attr(not(feature = "grpc"), doc = "[`GrpcBudgetLayer`]: crate::docs::grpc")]
#![cfg_attr(
    feature = "grpc",
    doc = "[`GrpcBudgetLayer::balanced`]: GrpcBudgetLayer::balanced"
)]
#![cfg_attr(
    not(feature = "grpc"),
    doc = "[`GrpcBudgetLayer::balanced`]: crate::docs::grpc"
)]
#![cfg_attr(feature = "grpc", doc = "[`EndpointChannels`]: EndpointChannels")]
#![cfg_attr(not(feature = "grpc"), doc = "[`EndpointChannels`]: crate::docs::grpc")]

#[cfg(any(feature = "server", feature = "grpc"))]
mod answer;
#[cfg(feature = "grpc")]
mod channels;
#[cfg(feature = "grpc")]
mod client;
#[cfg(feature = "grpc")]
mod stale;
#[cfg(feature = "grpc")]
mod transport;

#[cfg(any(feature = "server", feature = "grpc"))]
pub(crate) use answer::grpc_answer;

pub use crate::grpc_status::{
    GRPC_MESSAGE, GRPC_RETRY_PUSHBACK_MS, GRPC_STATUS, GrpcCode, Pushback, encode_message, is_grpc,
    parse_pushback,
};
#[cfg(feature = "grpc")]
pub use channels::EndpointChannels;
#[cfg(feature = "grpc")]
pub use client::{GrpcBudgetLayer, GrpcBudgetService};
#[cfg(feature = "grpc")]
pub use stale::Stale;
