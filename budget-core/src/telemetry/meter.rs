//! The budget metrics, through the [`metrics`](https://docs.rs/metrics)
//! facade: whatever recorder the service installs (Prometheus, StatsD,
//! OpenTelemetry) receives them; without one, each call is a no-op. Without
//! the `metrics` feature these functions are empty and compile to nothing.
//!
//! Names and labels are in [`semconv`](super::semconv).

#[cfg(any(feature = "metrics", outbound))]
use std::sync::Arc;
#[cfg(any(feature = "metrics", outbound, feature = "server"))]
use std::time::Duration;

#[cfg(feature = "metrics")]
use super::semconv::*;
#[cfg(feature = "metrics")]
use metrics::Unit;

#[cfg(feature = "metrics")]
use crate::breaker::BreakerState;
#[cfg(outbound)]
use crate::retry::Decision;

/// The reasons of [`METRIC_NO_PERMIT_TOTAL`], each registered at 0.
#[cfg(all(feature = "metrics", outbound))]
const NO_PERMIT_REASONS: [&str; 3] = [REASON_EXPIRED, REASON_STANDING_QUEUE, REASON_PREDICTED_WAIT];

/// Which `describe_*` of the recorder a metric's description goes to.
#[cfg(feature = "metrics")]
#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One metric's description: its name, unit (if any) and help text.
#[cfg(feature = "metrics")]
struct Description {
    kind: Kind,
    name: &'static str,
    unit: Option<metrics::Unit>,
    help: &'static str,
}

#[cfg(feature = "metrics")]
impl Description {
    /// Hands the description to the installed recorder, as the
    /// `describe_*!` macros do.
    fn describe(&self) {
        let (name, unit, help) = (self.name, self.unit, self.help);
        metrics::with_recorder(|recorder| match self.kind {
            Kind::Counter => recorder.describe_counter(name.into(), unit, help.into()),
            Kind::Gauge => recorder.describe_gauge(name.into(), unit, help.into()),
            Kind::Histogram => recorder.describe_histogram(name.into(), unit, help.into()),
        });
    }
}

/// Every budget metric's description, in the order they are described.
#[cfg(feature = "metrics")]
const DESCRIPTIONS: [Description; 24] = [
    Description {
        kind: Kind::Histogram,
        name: METRIC_HTTP_SERVER_DURATION,
        unit: Some(Unit::Seconds),
        help: "How long the service took to answer, by route, method and status.",
    },
    Description {
        kind: Kind::Histogram,
        name: METRIC_DB_CLIENT_DURATION,
        unit: Some(Unit::Seconds),
        help: "How long each database statement's attempt took, by database and statement label, and outcome.",
    },
    Description {
        kind: Kind::Histogram,
        name: METRIC_HTTP_CLIENT_DURATION,
        unit: Some(Unit::Seconds),
        help: "How long each dependency attempt took, by dependency, method and outcome (status code or failure).",
    },
    Description {
        kind: Kind::Histogram,
        name: METRIC_INGRESS_SECONDS,
        unit: Some(Unit::Seconds),
        help: "The budget requests arrived with, after default and clamp.",
    },
    Description {
        kind: Kind::Histogram,
        name: METRIC_REMAINING_AT_CALL_SECONDS,
        unit: Some(Unit::Seconds),
        help: "The budget each dependency attempt was sent with, net of the reserve.",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_ENDPOINT_REQUESTS_TOTAL,
        unit: None,
        help: "Attempts to each endpoint of a dependency with several (replicas), by dependency and endpoint.",
    },
    Description {
        kind: Kind::Gauge,
        name: METRIC_ENDPOINT_LOAD_SECONDS,
        unit: Some(Unit::Seconds),
        help: "Each endpoint's latency estimate (peak-EWMA) after its last attempt, by dependency and endpoint.",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_RESOLVE_FAILURES_TOTAL,
        unit: None,
        help: "Lookups of a dependency's host name that failed (the last good endpoints are kept).",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_SHED_TOTAL,
        unit: None,
        help: "Requests shed below the ingress floor, on arrival or after waiting for an in-flight slot (504).",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_EXPIRED_TOTAL,
        unit: None,
        help: "Requests whose budget ran out in the handler (504).",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_MALFORMED_TOTAL,
        unit: None,
        help: "Requests with a malformed budget header (400).",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_STREAM_ENDED_TOTAL,
        unit: None,
        help: "Response bodies that stopped streaming, by reason (a limit's end is clean, not an error).",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_OVERLOADED_TOTAL,
        unit: None,
        help: "Requests answered 503 at the server's in-flight limit (a standing line).",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_BELOW_FLOOR_TOTAL,
        unit: None,
        help: "Dependency calls not made: the budget was below the dependency's floor.",
    },
    Description {
        kind: Kind::Gauge,
        name: METRIC_FLOOR_SECONDS,
        unit: Some(Unit::Seconds),
        help: "The floor in force for each dependency (fixed or learned from its latency).",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_RETRIES_TOTAL,
        unit: None,
        help: "Dependency retries made.",
    },
    Description {
        kind: Kind::Gauge,
        name: METRIC_CONCURRENCY_LIMIT,
        unit: None,
        help: "Each dependency's concurrency limit now (fixed, or adaptive with concurrency = \"auto\").",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_UNKNOWN_CRITICALITY_TOTAL,
        unit: None,
        help: "Requests whose request-criticality was not a known value (read as default).",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_NO_PERMIT_TOTAL,
        unit: None,
        help: "Dependency calls not made: no concurrency permit in time, by reason (expired, standing_queue).",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_RETRY_BUDGET_REFUSALS_TOTAL,
        unit: None,
        help: "Dependency retries refused by the per-client retry budget.",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_BREAKER_TRANSITIONS_TOTAL,
        unit: None,
        help: "Circuit breaker state changes.",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_HEDGES_TOTAL,
        unit: None,
        help: "Hedged attempts sent, by whether the hedge answered first (won) or was cancelled (lost).",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_HEDGES_DECLINED_TOTAL,
        unit: None,
        help: "Hedges that were due and not sent, by reason (hedge budget, floor, circuit, permit).",
    },
    Description {
        kind: Kind::Counter,
        name: METRIC_STALE_SERVED_TOTAL,
        unit: None,
        help: "Dependency calls answered from the client's stale cache: the call was not made or failed.",
    },
];

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
    for description in &DESCRIPTIONS {
        description.describe();
    }
}

/// Registers the server's counters at 0 (shed, expired, malformed,
/// overloaded, unknown criticality, streams ended by each reason), so that a dashboard's `rate()` sees
/// their first event: a counter that first appears at 1 loses it.
/// The binaries' Prometheus recorder (`service_kit::prometheus`) calls
/// it; call it after installing any other recorder.
///
/// ```
/// budget_core::telemetry::register_server_metrics();
/// ```
#[cfg(feature = "metrics")]
pub fn register_server_metrics() {
    for name in [
        METRIC_SHED_TOTAL,
        METRIC_EXPIRED_TOTAL,
        METRIC_MALFORMED_TOTAL,
        METRIC_OVERLOADED_TOTAL,
        METRIC_UNKNOWN_CRITICALITY_TOTAL,
    ] {
        metrics::counter!(name).increment(0);
    }
    for reason in [
        STREAM_END_COMPLETE,
        STREAM_END_IDLE,
        STREAM_END_DURATION,
        STREAM_END_DEADLINE,
        STREAM_END_CLIENT_GONE,
        STREAM_END_ERROR,
    ] {
        metrics::counter!(METRIC_STREAM_ENDED_TOTAL, LABEL_REASON => reason).increment(0);
    }
}

/// Registers `dependency`'s counters at 0 (retries, below floor, no permit
/// by reason, retry budget refusals, stale answers served): called when
/// its client is built.
#[cfg(outbound)]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn register_dependency(dependency: &Arc<str>) {
    #[cfg(feature = "metrics")]
    {
        for name in [
            METRIC_RETRIES_TOTAL,
            METRIC_BELOW_FLOOR_TOTAL,
            METRIC_RETRY_BUDGET_REFUSALS_TOTAL,
            METRIC_STALE_SERVED_TOTAL,
        ] {
            metrics::counter!(name, LABEL_DEPENDENCY => Arc::clone(dependency)).increment(0);
        }
        for reason in NO_PERMIT_REASONS {
            metrics::counter!(METRIC_NO_PERMIT_TOTAL, LABEL_DEPENDENCY => Arc::clone(dependency), LABEL_REASON => reason)
                .increment(0);
        }
    }
}

/// A request answered `status` for `method` on `route` (the route
/// template, empty when none matched) after `took`: the RED histogram
/// [`METRIC_HTTP_SERVER_DURATION`]. For a service's outermost layer (the
/// chain's services record it in their router, in both budget modes).
///
/// ```
/// use std::time::Duration;
/// budget_core::telemetry::record_server_request("/checkout", &http::Method::GET, 504, Duration::from_millis(1990));
/// ```
#[cfg(feature = "metrics")]
pub fn record_server_request(route: &str, method: &http::Method, status: u16, took: Duration) {
    metrics::histogram!(
        METRIC_HTTP_SERVER_DURATION,
        LABEL_ROUTE => route.to_owned(),
        LABEL_METHOD => method_label(method),
        LABEL_STATUS => status_label(status)
    )
    .record(took.as_secs_f64());
}

/// A method as a label value, without allocating for the standard ones.
#[cfg(feature = "metrics")]
fn method_label(method: &http::Method) -> metrics::SharedString {
    use http::Method;
    let name: &'static str = match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        _ => return method.as_str().to_owned().into(),
    };
    name.into()
}

/// A status code as a label value, without allocating for the common ones.
#[cfg(feature = "metrics")]
fn status_label(status: u16) -> metrics::SharedString {
    match status {
        200 => "200".into(),
        400 => "400".into(),
        404 => "404".into(),
        429 => "429".into(),
        502 => "502".into(),
        503 => "503".into(),
        504 => "504".into(),
        other => other.to_string().into(),
    }
}

/// A dependency attempt ended with `outcome` (its status code, or the
/// failure's kind) after `took`; `rpc_system` is `Some("grpc")` for a gRPC
/// call.
#[cfg(outbound)]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn attempt_done(
    dependency: &Arc<str>,
    method: &http::Method,
    outcome: &crate::retry::Outcome,
    took: Duration,
    rpc_system: Option<&'static str>,
) {
    #[cfg(feature = "metrics")]
    {
        let outcome = match outcome {
            crate::retry::Outcome::Status { status, .. } => status_label(status.as_u16()),
            // The proxy's refusal, apart from every answer of the
            // dependency's (`envoy-upstream-timeout`).
            crate::retry::Outcome::Proxy(reply) => reply.refusal().label().into(),
            _ => outcome.to_string().into(),
        };
        let histogram = match rpc_system {
            Some(DB_SYSTEM_POSTGRESQL) => metrics::histogram!(
                METRIC_DB_CLIENT_DURATION,
                LABEL_DEPENDENCY => Arc::clone(dependency),
                LABEL_OUTCOME => outcome,
                LABEL_DB_SYSTEM_NAME => DB_SYSTEM_POSTGRESQL
            ),
            None => metrics::histogram!(
                METRIC_HTTP_CLIENT_DURATION,
                LABEL_DEPENDENCY => Arc::clone(dependency),
                LABEL_METHOD => method_label(method),
                LABEL_OUTCOME => outcome
            ),
            Some(system) => metrics::histogram!(
                METRIC_HTTP_CLIENT_DURATION,
                LABEL_DEPENDENCY => Arc::clone(dependency),
                LABEL_METHOD => method_label(method),
                LABEL_OUTCOME => outcome,
                LABEL_RPC_SYSTEM => system
            ),
        };
        histogram.record(took.as_secs_f64());
    }
}

/// The handle of an unlabelled metric, its key and metadata made at compile
/// time: `metrics::histogram!(NAME)` with a constant (not a literal) name
/// builds and hashes the key on every call, about 80 instructions per
/// request on the server layer's path (BENCHMARKS.md, "The server layer's
/// cost in instructions").
#[cfg(all(feature = "metrics", feature = "server"))]
macro_rules! unlabelled {
    (histogram, $name:expr) => {
        unlabelled!(@register register_histogram, $name)
    };
    (counter, $name:expr) => {
        unlabelled!(@register register_counter, $name)
    };
    (@register $register:ident, $name:expr) => {{
        static KEY: metrics::Key = metrics::Key::from_static_name($name);
        static METADATA: metrics::Metadata<'static> =
            metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));
        metrics::with_recorder(|recorder| recorder.$register(&KEY, &METADATA))
    }};
}

#[cfg(feature = "server")]
/// A request's budget at ingress.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn ingress(budget: Duration) {
    #[cfg(feature = "metrics")]
    unlabelled!(histogram, METRIC_INGRESS_SECONDS).record(budget.as_secs_f64());
}

#[cfg(feature = "server")]
/// A request shed below the ingress floor.
#[inline]
pub(crate) fn shed() {
    #[cfg(feature = "metrics")]
    unlabelled!(counter, METRIC_SHED_TOTAL).increment(1);
}

#[cfg(feature = "server")]
/// A request whose budget ran out in the handler.
#[inline]
pub(crate) fn expired() {
    #[cfg(feature = "metrics")]
    unlabelled!(counter, METRIC_EXPIRED_TOTAL).increment(1);
}

#[cfg(feature = "server")]
/// A request whose `request-criticality` was not a known value (read as
/// `default`, docs/contract.md §3).
#[inline]
pub(crate) fn unknown_criticality() {
    #[cfg(feature = "metrics")]
    unlabelled!(counter, METRIC_UNKNOWN_CRITICALITY_TOTAL).increment(1);
}

#[cfg(feature = "server")]
/// A request answered `503` at the in-flight limit.
#[inline]
pub(crate) fn overloaded() {
    #[cfg(feature = "metrics")]
    unlabelled!(counter, METRIC_OVERLOADED_TOTAL).increment(1);
}

#[cfg(feature = "server")]
/// A request with a malformed budget header.
#[inline]
pub(crate) fn malformed() {
    #[cfg(feature = "metrics")]
    unlabelled!(counter, METRIC_MALFORMED_TOTAL).increment(1);
}

#[cfg(feature = "server")]
/// A response body that stopped streaming, for `reason` (a
/// [`semconv`](super::semconv) `STREAM_END_*` value).
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn stream_ended(reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(METRIC_STREAM_ENDED_TOTAL, LABEL_REASON => reason).increment(1);
}

/// An attempt to `dependency` about to be sent, the `number`th (retries
/// are the attempts after the first), with `budget` (`None` in fixed mode).
#[cfg(outbound)]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn attempt(dependency: &Arc<str>, number: u32, budget: Option<Duration>) {
    #[cfg(feature = "metrics")]
    {
        if let Some(budget) = budget {
            metrics::histogram!(METRIC_REMAINING_AT_CALL_SECONDS, LABEL_DEPENDENCY => Arc::clone(dependency))
                .record(budget.as_secs_f64());
        }
        if number > 1 {
            metrics::counter!(METRIC_RETRIES_TOTAL, LABEL_DEPENDENCY => Arc::clone(dependency))
                .increment(1);
        }
    }
}

/// The retry policy's `decision` after an attempt to `dependency`: counts
/// the retries that the retry budget refused.
#[cfg(outbound)]
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

/// Registers `dependency`'s hedge counters at 0, one declined counter per
/// reason in `declined`: called when a client with hedging is built (the
/// client names its reasons; this module knows none of its types).
#[cfg(outbound)]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn register_hedging(
    dependency: &Arc<str>,
    declined: impl IntoIterator<Item = &'static str>,
) {
    #[cfg(feature = "metrics")]
    {
        for result in [true, false] {
            hedge(dependency, result, 0);
        }
        for reason in declined {
            hedge_declined_by(dependency, reason, 0);
        }
    }
}

/// A hedge sent to `dependency`: `won` when it answered first.
#[cfg(outbound)]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn hedge(dependency: &Arc<str>, won: bool, count: u64) {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        METRIC_HEDGES_TOTAL,
        LABEL_DEPENDENCY => Arc::clone(dependency),
        LABEL_RESULT => if won { "won" } else { "lost" }
    )
    .increment(count);
}

/// A hedge to `dependency` that was due and not sent, for `reason`.
#[cfg(outbound)]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn hedge_declined_by(dependency: &Arc<str>, reason: &'static str, count: u64) {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        METRIC_HEDGES_DECLINED_TOTAL,
        LABEL_DEPENDENCY => Arc::clone(dependency),
        LABEL_REASON => reason
    )
    .increment(count);
}

/// A call to `dependency` not made below its floor.
#[cfg(outbound)]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn below_floor(dependency: &Arc<str>) {
    #[cfg(feature = "metrics")]
    metrics::counter!(METRIC_BELOW_FLOOR_TOTAL, LABEL_DEPENDENCY => Arc::clone(dependency))
        .increment(1);
}

/// A call to `dependency` answered from its stale cache (the HTTP
/// client's or the gRPC layer's).
#[cfg(any(feature = "client", feature = "grpc"))]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn stale_served(dependency: &Arc<str>) {
    #[cfg(feature = "metrics")]
    metrics::counter!(METRIC_STALE_SERVED_TOTAL, LABEL_DEPENDENCY => Arc::clone(dependency))
        .increment(1);
}

/// A call to `dependency` refused by its permit queue, for `reason`.
#[cfg(outbound)]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn no_permit(dependency: &Arc<str>, reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(METRIC_NO_PERMIT_TOTAL, LABEL_DEPENDENCY => Arc::clone(dependency), LABEL_REASON => reason)
        .increment(1);
}

/// An attempt to `endpoint` of `dependency` (one of several) ended; its
/// latency estimate is now `load`.
#[cfg(outbound)]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn endpoint_attempt(dependency: &Arc<str>, endpoint: &Arc<str>, load: Option<Duration>) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!(
            METRIC_ENDPOINT_REQUESTS_TOTAL,
            LABEL_DEPENDENCY => Arc::clone(dependency),
            LABEL_ENDPOINT => Arc::clone(endpoint)
        )
        .increment(1);
        if let Some(load) = load {
            metrics::gauge!(
                METRIC_ENDPOINT_LOAD_SECONDS,
                LABEL_DEPENDENCY => Arc::clone(dependency),
                LABEL_ENDPOINT => Arc::clone(endpoint)
            )
            .set(load.as_secs_f64());
        }
    }
}

/// A lookup of `dependency`'s host name failed.
#[cfg(outbound)]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn resolve_failed(dependency: &Arc<str>) {
    #[cfg(feature = "metrics")]
    metrics::counter!(METRIC_RESOLVE_FAILURES_TOTAL, LABEL_DEPENDENCY => Arc::clone(dependency))
        .increment(1);
}

/// `dependency`'s adaptive concurrency limit changed to `limit`.
#[cfg(outbound)]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
#[inline]
pub(crate) fn concurrency_limit(dependency: &Arc<str>, limit: usize) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(METRIC_CONCURRENCY_LIMIT, LABEL_DEPENDENCY => Arc::clone(dependency))
        .set(limit as f64);
}

/// The budget metrics of breakers and floors: an observer of both
/// ([`breaker::Observer`](crate::breaker::Observer),
/// [`floor::Observer`](crate::floor::Observer)) that counts each breaker's
/// transitions as `budget_breaker_transitions_total` (registered at 0 when
/// the breaker is made) and sets each dependency's `budget_floor_seconds`
/// gauge.
///
/// A client built from a `DependencyConfig`
/// (and a `GrpcBudgetLayer`) installs it
/// on its breakers and floor by itself; hand it to a policy only for a
/// breaker made by hand.
///
/// ```
/// use std::sync::Arc;
/// use budget_core::breaker::{BreakerPolicy, CircuitBreaker};
/// use budget_core::telemetry::Metrics;
///
/// let policy = BreakerPolicy::default().with_observer(Arc::new(Metrics));
/// let breaker = CircuitBreaker::new("http://pricing:80", policy); // its counters start at 0
/// # let _ = breaker;
/// ```
#[cfg(feature = "metrics")]
#[derive(Clone, Copy, Debug, Default)]
pub struct Metrics;

#[cfg(feature = "metrics")]
impl crate::floor::Observer for Metrics {
    #[inline]
    fn floor_changed(&self, dependency: &Arc<str>, floor: Duration) {
        metrics::gauge!(METRIC_FLOOR_SECONDS, LABEL_DEPENDENCY => Arc::clone(dependency))
            .set(floor.as_secs_f64());
    }
}

#[cfg(feature = "metrics")]
impl crate::breaker::Observer for Metrics {
    /// Registers the state changes a breaker of `endpoint` can make at 0.
    fn registered(&self, endpoint: &str) {
        use BreakerState::{Closed, HalfOpen, Open};
        for (from, to) in [
            (Closed, Open),
            (Open, HalfOpen),
            (HalfOpen, Closed),
            (HalfOpen, Open),
        ] {
            metrics::counter!(
                METRIC_BREAKER_TRANSITIONS_TOTAL,
                LABEL_ENDPOINT => endpoint.to_owned(),
                LABEL_FROM => from.as_str(),
                LABEL_TO => to.as_str()
            )
            .increment(0);
        }
    }

    #[inline]
    fn transition(&self, endpoint: &str, from: BreakerState, to: BreakerState) {
        metrics::counter!(
            METRIC_BREAKER_TRANSITIONS_TOTAL,
            LABEL_ENDPOINT => endpoint.to_owned(),
            LABEL_FROM => from.as_str(),
            LABEL_TO => to.as_str()
        )
        .increment(1);
    }
}

/// `policy` reporting to [`Metrics`] with the `metrics` feature, unless it
/// has an observer of its own; as is without the feature. For the breakers
/// a client builds.
#[cfg(outbound)]
pub(crate) fn observe_breakers(
    policy: crate::breaker::BreakerPolicy,
) -> crate::breaker::BreakerPolicy {
    #[cfg(feature = "metrics")]
    if !policy.has_observer() {
        return policy.with_observer(Arc::new(Metrics));
    }
    policy
}

/// Reports `floor` as `dependency`'s `budget_floor_seconds` gauge, with
/// the `metrics` feature: now, and each time a learned floor is
/// recomputed. For the floor a client builds.
#[cfg(outbound)]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn report_floor(floor: &crate::floor::DependencyFloor, dependency: &Arc<str>) {
    #[cfg(feature = "metrics")]
    floor.report_to(Arc::clone(dependency), Arc::new(Metrics));
}
