//! Observability: where a request's budget went, as traces and metrics.
//!
//! # Traces
//!
//! The [server layer][server-layer] opens a `tracing` span per request
//! and the [client][client-side] one per attempt of a dependency call
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
//! -> partner. The span context comes from the subscriber's
//! `tracing-opentelemetry` layer, which the binary installs; without one,
//! a caller's `traceparent` and `tracestate` still pass through the hop
//! unchanged. Without the feature no OpenTelemetry crate is compiled.
//!
//! # Metrics
//!
//! With the `metrics` feature the layer and the client record histograms
//! of the budget at ingress and at each call, and counters of shed,
//! expired and malformed requests, of calls refused below their floor, of
//! retries, of retries the retry budget refused and of breaker state
//! changes, through the [`metrics`](https://docs.rs/metrics) facade: the
//! service picks the exporter. `describe_metrics` gives the installed
//! recorder their units and help texts, `register_server_metrics`
//! registers the server's counters at 0, and `SECONDS_BUCKETS` are the
//! histogram buckets the project's dashboards assume.
//!
//! # Who installs what
//!
//! This library only emits: it never installs a global tracing subscriber,
//! an OpenTelemetry exporter or propagator, or a `metrics` recorder. That is
//! the binary's business, done once in its `main`. The project's own
//! binaries show how, in their kit (`services/service-kit`):
//! `service_kit::telemetry::init_from_env` installs log lines and, when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set, an OTLP/HTTP exporter behind a
//! layer that exports only the budget spans (`service_kit::telemetry::otel_layer`);
//! `service_kit::prometheus::install_prometheus` installs a Prometheus
//! recorder with `SECONDS_BUCKETS`, and `service_kit::prometheus::prometheus_router`
//! serves it at `/metrics`.
//!
//! # Example: a service's `main` with its own recorder and subscriber
//!
//! ```no_run
//! # #[cfg(all(feature = "metrics", feature = "server"))]
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use axum::{Router, routing::get};
//! use budget_core::server::ServerConfig;
//! use budget_core::telemetry;
//! use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
//!
//! // The binary installs the subscriber and the recorder; the library emits.
//! tracing_subscriber::fmt().with_env_filter("info,budget_core::spans=off").init();
//! let prometheus = PrometheusBuilder::new()
//!     .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), telemetry::SECONDS_BUCKETS)?
//!     .install_recorder()?;
//! telemetry::describe_metrics();
//! telemetry::register_server_metrics();
//!
//! let app = Router::new()
//!     .route("/checkout", get(|| async { "ok" }))
//!     .layer(ServerConfig::default().layer()?)
//!     // Outside the budget layer: a scrape has no budget.
//!     .route("/metrics", get(move || std::future::ready(prometheus.render())));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! # #[cfg(not(all(feature = "metrics", feature = "server")))] fn main() {}
//! ```
#![cfg_attr(feature = "server", doc = "[server-layer]: crate::server")]
#![cfg_attr(not(feature = "server"), doc = "[server-layer]: crate::docs::server")]
#![cfg_attr(outbound, doc = "[client-side]: crate::client")]
#![cfg_attr(not(outbound), doc = "[client-side]: crate::docs::client")]

pub mod semconv;

#[cfg(outbound)]
pub(crate) mod carry;
pub(crate) mod meter;
#[cfg(any(feature = "server", outbound))]
pub(crate) mod trace;

#[cfg(all(
    feature = "otel",
    any(
        feature = "server",
        feature = "client",
        feature = "grpc",
        feature = "tower-client"
    )
))]
mod propagation;

#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use meter::{Metrics, describe_metrics, record_server_request, register_server_metrics};

/// The histogram bucket boundaries, in seconds, of every `*_seconds`
/// histogram (request and attempt durations, budgets): the boundaries the
/// project's dashboards and PromQL (`docs/observability.md`) assume. A
/// service that installs its own recorder gives them to it to match them;
/// the project's binaries do (`service_kit::prometheus::install_prometheus`).
///
/// From 1 ms to the default 30 s maximum budget, fine between 1 s and 10 s
/// where the budgets of a chain are spent (a median of 1 s reads as 1 s,
/// not somewhere in 1-2 s).
///
/// ```
/// use budget_core::telemetry::SECONDS_BUCKETS;
/// use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
///
/// let recorder = PrometheusBuilder::new()
///     .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
///     .unwrap()
///     .build_recorder();
/// # drop(recorder);
/// assert!(SECONDS_BUCKETS.is_sorted());
/// ```
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5,
    3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 30.0,
];
