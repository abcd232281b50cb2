//! A Prometheus recorder for the [`metrics`] facade, installed once per
//! process, and the axum route that serves it.
//!
//! The global recorder is the binary's to install: budget-core only emits
//! its metrics through the facade, to whatever recorder is installed. Its
//! histogram buckets are budget-core's [`SECONDS_BUCKETS`], the boundaries
//! the project's dashboards assume.

use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use budget_core::telemetry::SECONDS_BUCKETS;
use http::header::CONTENT_TYPE;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

/// The path [`prometheus_router`] serves.
pub const METRICS_PATH: &str = "/metrics";

/// The Prometheus text exposition format's content type.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How often the recorder's upkeep runs (draining histogram samples that
/// no scrape has collected yet).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
static INSTALLING: Mutex<()> = Mutex::new(());

/// Why the Prometheus recorder could not be installed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrometheusError {
    /// Another `metrics` recorder is already the global one.
    #[error("another metrics recorder is already installed")]
    OtherRecorder,
    /// The exporter refused the histogram buckets.
    #[error("invalid histogram buckets")]
    Buckets(#[source] BuildError),
}

/// Installs the Prometheus recorder as the global `metrics` recorder, once
/// per process, and returns its handle; later calls return the same handle.
/// Every `*_seconds` histogram gets budget-core's [`SECONDS_BUCKETS`];
/// every budget metric is described
/// ([`describe_metrics`](budget_core::telemetry::describe_metrics)), and
/// the server's counters are registered at 0
/// ([`register_server_metrics`](budget_core::telemetry::register_server_metrics)).
/// Inside a tokio runtime, a task runs the recorder's upkeep every few
/// seconds.
///
/// Errors, without panicking, when some other recorder is the global one.
///
/// ```
/// let a = service_kit::prometheus::install_prometheus().unwrap();
/// let b = service_kit::prometheus::install_prometheus().unwrap();
/// metrics::counter!("demo_total").increment(1);
/// assert!(b.render().contains("demo_total 1"));
/// # drop(a);
/// ```
pub fn install_prometheus() -> Result<PrometheusHandle, PrometheusError> {
    if let Some(handle) = HANDLE.get() {
        return Ok(handle.clone());
    }
    let _installing = INSTALLING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(handle) = HANDLE.get() {
        return Ok(handle.clone());
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
        .map_err(PrometheusError::Buckets)?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|_| PrometheusError::OtherRecorder)?;
    budget_core::telemetry::describe_metrics();
    budget_core::telemetry::register_server_metrics();
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let upkeep = handle.clone();
        runtime.spawn(async move {
            let mut every = tokio::time::interval(UPKEEP_EVERY);
            loop {
                every.tick().await;
                upkeep.run_upkeep();
            }
        });
    }
    Ok(HANDLE.get_or_init(|| handle).clone())
}

/// A router serving `handle`'s metrics at `GET /metrics`, in the
/// Prometheus text format. Merge it into a service's router, or serve it
/// on an admin port.
///
/// ```
/// let handle = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder().handle();
/// let router: axum::Router = service_kit::prometheus::metrics_router(handle);
/// # let _ = router;
/// ```
pub fn metrics_router<S: Clone + Send + Sync + 'static>(handle: PrometheusHandle) -> Router<S> {
    Router::new().route(
        METRICS_PATH,
        get(move || {
            let body = handle.render();
            async move { ([(CONTENT_TYPE, TEXT_FORMAT)], body) }
        }),
    )
}

/// [`install_prometheus`] and [`metrics_router`] in one call: what a
/// service binary merges into its router.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app: axum::Router = axum::Router::new()
///     // ... routes, BudgetLayer ...
///     .merge(service_kit::prometheus::prometheus_router()?);
/// # Ok(()) }
/// ```
pub fn prometheus_router<S: Clone + Send + Sync + 'static>() -> Result<Router<S>, PrometheusError> {
    install_prometheus().map(metrics_router)
}
