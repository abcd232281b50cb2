//! Streams on the server: the request's budget holds until a response's
//! head, then the route's own [`StreamPolicy`](crate::server::StreamPolicy)
//! holds its body (docs/streams.md, "Streams on the server").
//!
//! The [`BudgetLayer`](crate::server::BudgetLayer) races the handler's
//! future, which ends when the head (status and headers) is ready, against
//! the request's deadline; the body is not tied to that deadline, and the
//! in-flight slot is given back with the head. A streaming body is held by
//! its route's limits instead: an idle timeout between frames and a total
//! duration, both ended cleanly ([`LimitedBody`](crate::server::LimitedBody)).
//! A gRPC call is the exception, by gRPC's own rule: its deadline covers the
//! whole call, so the budget layer holds a gRPC body to the deadline with
//! the same engine, ending it with `grpc-status: 4` in the trailers.

mod body;
mod end;
mod future;
mod layer;
mod policy;
mod service;
#[cfg(test)]
mod tests;

pub use body::LimitedBody;
pub use end::{BodyLimit, StreamEnd};
pub use future::StreamLimitFuture;
pub use layer::StreamLimitLayer;
pub use policy::StreamPolicy;
pub use service::StreamLimit;
