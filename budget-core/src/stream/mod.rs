//! Streams on the client side (docs/streams.md): a stream's opening is a
//! call ([`RequestBuilder::open`](crate::client::RequestBuilder::open),
//! through the same engine as any call: floor, admission, breaker,
//! retries of the opening, ledger), followed with reconnects that do not
//! stampede a recovering server ([`ReconnectPolicy`]): server-sent events
//! ([`sse::EventSource`]) and WebSockets ([`ws::WebSocket`]).
//!
//! The breaker hears the opening's status, by the one rule of
//! [`Verdict::from_status`](crate::breaker::Verdict::from_status) (`5xx`,
//! `401`, `429` and transport failures are failures, other `4xx`
//! neutral); what happens after the stream opened (a clean end, a
//! disconnect, an idle timeout) is never recorded on it.

mod config;
mod error;
mod follow;
mod reconnect;
mod response;
pub mod sse;
mod stats;
pub mod ws;

pub use config::StreamConfig;
pub use error::StreamError;
pub use reconnect::{ReconnectConfig, ReconnectPolicy, RetryField};
pub use response::{BodyStream, StreamResponse};
pub use stats::StreamStats;
