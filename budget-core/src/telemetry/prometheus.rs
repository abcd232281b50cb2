//! A Prometheus recorder for the [`metrics`] facade, installed once per
//! process, and the axum route that serves it.

use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use http::header::CONTENT_TYPE;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

/// The path [`prometheus_router`] serves.
pub const METRICS_PATH: &str = "/metrics";

/// The Prometheus text exposition format's content type.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Histogram buckets of every `*_seconds` histogram (request and attempt
/// durations, budgets): from 1 ms to the default 30 s maximum budget, fine
/// between 1 s and 10 s where the budgets of a chain are spent (a median of
/// 1 s reads as 1 s, not somewhere in 1-2 s).
pub const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5,
    3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 30.0,
];

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
/// Every `*_seconds` histogram gets [`SECONDS_BUCKETS`]; every budget metric
/// is described, and the server's counters are registered at 0
/// ([`register_server_metrics`](super::register_server_metrics)). Inside a tokio runtime, a task runs the recorder's upkeep
/// every few seconds.
///
/// Errors, without panicking, when some other recorder is the global one.
///
/// ```
/// let a = budget_core::telemetry::install_prometheus().unwrap();
/// let b = budget_core::telemetry::install_prometheus().unwrap();
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
    super::describe_metrics();
    super::register_server_metrics();
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
/// let router: axum::Router = budget_core::telemetry::metrics_router(handle);
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
///     .merge(budget_core::telemetry::prometheus_router()?);
/// # Ok(()) }
/// ```
pub fn prometheus_router<S: Clone + Send + Sync + 'static>() -> Result<Router<S>, PrometheusError> {
    install_prometheus().map(metrics_router)
}
