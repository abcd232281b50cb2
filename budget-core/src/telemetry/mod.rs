//! Observability: where a request's budget went, as traces and metrics.
//!
//! # Traces
//!
//! The [server layer](crate::server) opens a `tracing` span per request
//! and the [client](crate::client) one per attempt of a dependency call
//! (and one for a call it refused to make), with the OpenTelemetry HTTP
//! semantic conventions plus the budget's own `budget.*` attributes: the
//! budget at ingress, what was left at each attempt, the backoff charged,
//! what the budget did (`budget.outcome`), and at the end the request's
//! ledger (`budget.ledger`, the `Server-Timing` value; docs/contract.md §4).
//! All names are in [`semconv`].
//!
//! These are plain `tracing` spans at `INFO`: with no subscriber (or none
//! that wants them) each costs a callsite check, and nothing is formatted.
//! `tracing-opentelemetry` turns them into OpenTelemetry spans.
//!
//! With the `otel` feature the trace also crosses the wire: the server
//! layer reads W3C `traceparent`/`tracestate` and makes the caller's span
//! the parent of its own, and every attempt sends its span's context next
//! to `request-budget-ms`, so one trace covers client -> edge -> checkout
//! -> partner. [`init_from_env`] installs what a service needs: log lines,
//! and an OTLP/HTTP exporter when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
//! Without the feature no OpenTelemetry crate is compiled.
//!
//! # Metrics
//!
//! With the `metrics` feature the layer and the client record histograms
//! of the budget at ingress and at each call, and counters of shed,
//! expired and malformed requests, of calls refused below their floor, of
//! retries, of retries the retry budget refused and of breaker state
//! changes, through the [`metrics`](https://docs.rs/metrics) facade: the
//! service picks the exporter. The `prometheus` feature adds one:
//! [`prometheus_router`] serves them at `/metrics`.
//!
//! # Example: a service's `main`
//!
//! ```no_run
//! # #[cfg(all(feature = "otel", feature = "prometheus"))]
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use axum::{Router, routing::get};
//! use budget_core::server::ServerConfig;
//!
//! // Log lines per RUST_LOG; spans over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set.
//! let telemetry = budget_core::telemetry::init_from_env("checkout")?;
//! let app = Router::new()
//!     .route("/checkout", get(|| async { "ok" }))
//!     .layer(ServerConfig::default().layer()?)
//!     .merge(budget_core::telemetry::prometheus_router()?);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! telemetry.shutdown()?; // flush the spans still queued
//! # Ok(()) }
//! # #[cfg(not(all(feature = "otel", feature = "prometheus")))] fn main() {}
//! ```

pub mod semconv;

pub(crate) mod meter;
#[cfg(any(feature = "server", any(feature = "client", feature = "grpc")))]
pub(crate) mod trace;

#[cfg(feature = "otel")]
mod init;
#[cfg(feature = "prometheus")]
mod prometheus;
#[cfg(all(
    feature = "otel",
    any(feature = "server", any(feature = "client", feature = "grpc"))
))]
mod propagation;

#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub use init::{
    OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_SDK_DISABLED,
    OTEL_SERVICE_NAME, Otlp, RUST_LOG, TelemetryConfig, TelemetryError, TelemetryGuard, init,
    init_from_env, otel_layer,
};
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use meter::{describe_metrics, record_server_request, register_server_metrics};
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub use prometheus::{
    METRICS_PATH, PrometheusError, SECONDS_BUCKETS, install_prometheus, metrics_router,
    prometheus_router,
};
