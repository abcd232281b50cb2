//! The budget metrics, through the [`metrics`](https://docs.rs/metrics)
//! facade: whatever recorder the service installs (Prometheus, StatsD,
//! OpenTelemetry) receives them; without one, each call is a no-op. Without
//! the `metrics` feature these functions are empty and compile to nothing.
//!
//! Names and labels are in [`semconv`](super::semconv).

use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "metrics")]
use super::semconv::*;
use crate::breaker::BreakerState;
#[cfg(feature = "client")]
use crate::retry::Decision;

/// Milliseconds with the sub-millisecond part, for a histogram.
#[cfg(all(feature = "metrics", any(feature = "server", feature = "client")))]
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Describes every budget metric (unit and help text) to the installed
/// recorder. Call once after installing it; exporters that show help text
/// (Prometheus' `# HELP`) use it.
///
/// # Example
///
/// ```
/// budget_core::telemetry::describe_metrics();
/// ```
#[cfg(feature = "metrics")]
pub fn describe_metrics() {
    use super::semconv::*;
    use metrics::{Unit, describe_counter, describe_histogram};
    describe_histogram!(
        METRIC_INGRESS_MS,
        Unit::Milliseconds,
        "The budget requests arrived with, after default and clamp."
    );
    describe_histogram!(
        METRIC_REMAINING_AT_CALL_MS,
        Unit::Milliseconds,
        "The budget each dependency attempt was sent with, net of the reserve."
    );
    describe_counter!(
        METRIC_SHED_TOTAL,
        "Requests shed below the ingress floor (504)."
    );
    describe_counter!(
        METRIC_EXPIRED_TOTAL,
        "Requests whose budget ran out in the handler (504)."
    );
    describe_counter!(
        METRIC_MALFORMED_TOTAL,
        "Requests with a malformed budget header (400)."
    );
    describe_counter!(
        METRIC_BELOW_FLOOR_TOTAL,
        "Dependency calls not made: the budget was below the dependency's floor."
    );
    metrics::describe_gauge!(
        METRIC_FLOOR_SECONDS,
        Unit::Seconds,
        "The floor in force for each dependency (fixed or learned from its latency)."
    );
    describe_counter!(METRIC_RETRIES_TOTAL, "Dependency retries made.");
    metrics::describe_gauge!(
        METRIC_CONCURRENCY_LIMIT,
        "Each dependency's concurrency limit now (fixed, or adaptive with concurrency = \"auto\")."
    );
    describe_counter!(
        METRIC_UNKNOWN_CRITICALITY_TOTAL,
        "Requests whose request-criticality was not a known value (read as default)."
    );
    describe_counter!(
        METRIC_NO_PERMIT_TOTAL,
        "Dependency calls not made: no concurrency permit in time, by reason (expired, standing_queue)."
    );
    describe_counter!(
        METRIC_RETRY_BUDGET_REFUSALS_TOTAL,
        "Dependency retries refused by the per-client retry budget."
    );
    describe_counter!(
        METRIC_BREAKER_TRANSITIONS_TOTAL,
        "Circuit breaker state changes."
    );
}

#[cfg(feature = "server")]
/// A request's budget at ingress.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn ingress(budget: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(METRIC_INGRESS_MS).record(ms(budget));
}

#[cfg(feature = "server")]
/// A request shed below the ingress floor.
#[inline]
pub(crate) fn shed() {
    #[cfg(feature = "metrics")]
    metrics::counter!(METRIC_SHED_TOTAL).increment(1);
}

#[cfg(feature = "server")]
/// A request whose budget ran out in the handler.
#[inline]
pub(crate) fn expired() {
    #[cfg(feature = "metrics")]
    metrics::counter!(METRIC_EXPIRED_TOTAL).increment(1);
}

#[cfg(feature = "server")]
/// A request whose `request-criticality` was not a known value (read as
/// `default`, CONTRACT section 3).
#[inline]
pub(crate) fn unknown_criticality() {
    #[cfg(feature = "metrics")]
    metrics::counter!(METRIC_UNKNOWN_CRITICALITY_TOTAL).increment(1);
}

#[cfg(feature = "server")]
/// A request with a malformed budget header.
#[inline]
pub(crate) fn malformed() {
    #[cfg(feature = "metrics")]
    metrics::counter!(METRIC_MALFORMED_TOTAL).increment(1);
}

/// An attempt to `dependency` about to be sent, the `number`th (retries
/// are the attempts after the first), with `budget` (`None` in fixed mode).
#[cfg(feature = "client")]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn attempt(dependency: &Arc<str>, number: u32, budget: Option<Duration>) {
    #[cfg(feature = "metrics")]
    {
        if let Some(budget) = budget {
            metrics::histogram!(METRIC_REMAINING_AT_CALL_MS, LABEL_DEPENDENCY => Arc::clone(dependency))
                .record(ms(budget));
        }
        if number > 1 {
            metrics::counter!(METRIC_RETRIES_TOTAL, LABEL_DEPENDENCY => Arc::clone(dependency))
                .increment(1);
        }
    }
}

/// The retry policy's `decision` after an attempt to `dependency`: counts
/// the retries that the retry budget refused.
#[cfg(feature = "client")]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn decision(dependency: &Arc<str>, decision: &Decision) {
    #[cfg(feature = "metrics")]
    if matches!(
        decision,
        Decision::Stop(crate::retry::StopReason::RetryBudgetEmpty)
    ) {
        metrics::counter!(
            METRIC_RETRY_BUDGET_REFUSALS_TOTAL,
            LABEL_DEPENDENCY => Arc::clone(dependency)
        )
        .increment(1);
    }
}

/// A call to `dependency` not made below its floor.
#[cfg(feature = "client")]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn below_floor(dependency: &Arc<str>) {
    #[cfg(feature = "metrics")]
    metrics::counter!(METRIC_BELOW_FLOOR_TOTAL, LABEL_DEPENDENCY => Arc::clone(dependency))
        .increment(1);
}

/// A call to `dependency` refused by its permit queue, for `reason`.
#[cfg(feature = "client")]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn no_permit(dependency: &Arc<str>, reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(METRIC_NO_PERMIT_TOTAL, LABEL_DEPENDENCY => Arc::clone(dependency), LABEL_REASON => reason)
        .increment(1);
}

/// `dependency`'s adaptive concurrency limit changed to `limit`.
#[cfg(feature = "client")]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn concurrency_limit(dependency: &Arc<str>, limit: usize) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(METRIC_CONCURRENCY_LIMIT, LABEL_DEPENDENCY => Arc::clone(dependency))
        .set(limit as f64);
}

/// The floor in force for `dependency`: set when its client is built and
/// each time a learned floor is recomputed, not on every call.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn floor(dependency: &Arc<str>, floor: Duration) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(METRIC_FLOOR_SECONDS, LABEL_DEPENDENCY => Arc::clone(dependency))
        .set(floor.as_secs_f64());
}

/// The breaker of `endpoint` went from `from` to `to`.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn breaker_transition(endpoint: &str, from: BreakerState, to: BreakerState) {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        METRIC_BREAKER_TRANSITIONS_TOTAL,
        LABEL_ENDPOINT => endpoint.to_owned(),
        LABEL_FROM => from.as_str(),
        LABEL_TO => to.as_str()
    )
    .increment(1);
}
