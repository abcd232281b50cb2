//! A proxy in the path: what Envoy says of a call it carried.
//!
//! Between a service and its dependency there is often an Envoy (a
//! sidecar, a mesh, a front proxy). Its answers are of two kinds, and the
//! call engine tells them apart by the rule of docs/contract.md §2,
//! "Envoy in the path":
//!
//! - **The dependency's answer, carried.** Envoy stamps it with
//!   [`X_ENVOY_UPSTREAM_SERVICE_TIME`], how long the dependency took as
//!   Envoy saw it; [`upstream_time()`] reads it, and the attempt's ledger
//!   entry shows it (`200 (upstream 35ms)`: the rest of the attempt's time
//!   was Envoy's and the network's).
//! - **Envoy's own answer** (a "local reply"): its route timeout ran out,
//!   a circuit-breaker threshold overflowed, it could not connect, the
//!   adaptive concurrency filter shed the call. [`ProxyReply::recognise`]
//!   names it ([`ProxyRefusal`]), and the engine classifies it as the
//!   proxy's refusal, not as the dependency's status: its own ledger text
//!   (`envoy UT: upstream request timeout (504)`), metric label and retry
//!   and breaker rules.
//!
//! The module is pure: it reads a status and headers (and a body when the
//! transport holds one), for every transport alike.
//!
//! # Example
//!
//! ```
//! use budget_core::proxy::{ProxyRefusal, ProxyReply, upstream_time};
//! use http::{HeaderMap, StatusCode};
//!
//! // Envoy's circuit breaker overflowed: its own 503, marked overloaded.
//! let mut headers = HeaderMap::new();
//! headers.insert("server", "envoy".parse()?);
//! headers.insert("x-envoy-overloaded", "true".parse()?);
//! let reply = ProxyReply::recognise(StatusCode::SERVICE_UNAVAILABLE, &headers, None).unwrap();
//! assert_eq!(reply.refusal(), ProxyRefusal::Overflow);
//! assert_eq!(reply.to_string(), "envoy UO: upstream overflow (503)");
//!
//! // The dependency's own 503, carried by Envoy: not Envoy's.
//! let mut headers = HeaderMap::new();
//! headers.insert("server", "envoy".parse()?);
//! headers.insert("x-envoy-upstream-service-time", "12".parse()?);
//! assert_eq!(ProxyReply::recognise(StatusCode::SERVICE_UNAVAILABLE, &headers, None), None);
//! assert_eq!(upstream_time(&headers), Some(Ok(std::time::Duration::from_millis(12))));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod refusal;
mod upstream_time;

use http::HeaderName;

pub use refusal::{ProxyRefusal, ProxyReply};
pub use upstream_time::{UpstreamTime, upstream_time};

/// How long the dependency took, as Envoy measured it, in whole
/// milliseconds: on every answer Envoy's router carried (and on none it
/// made itself).
///
/// ```
/// assert_eq!(budget_core::proxy::X_ENVOY_UPSTREAM_SERVICE_TIME.as_str(), "x-envoy-upstream-service-time");
/// ```
pub const X_ENVOY_UPSTREAM_SERVICE_TIME: HeaderName =
    HeaderName::from_static("x-envoy-upstream-service-time");

/// Envoy's mark on a call it refused because a circuit-breaker threshold
/// (connections, pending requests, requests, retries) overflowed.
///
/// ```
/// assert_eq!(budget_core::proxy::X_ENVOY_OVERLOADED.as_str(), "x-envoy-overloaded");
/// ```
pub const X_ENVOY_OVERLOADED: HeaderName = HeaderName::from_static("x-envoy-overloaded");

/// Envoy's response flags (`UT`, `UO`, `UF`, `UH`, ...), when the route
/// adds them to its answers (`response_headers_to_add` with
/// `%RESPONSE_FLAGS%`; a stock Envoy does not). With it, every refusal is
/// named by Envoy's own flag.
///
/// ```
/// assert_eq!(budget_core::proxy::X_ENVOY_RESPONSE_FLAGS.as_str(), "x-envoy-response-flags");
/// ```
pub const X_ENVOY_RESPONSE_FLAGS: HeaderName = HeaderName::from_static("x-envoy-response-flags");
