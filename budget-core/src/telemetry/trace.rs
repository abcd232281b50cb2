//! The spans of the server layer and the client: where they open, what
//! they record. Crate-internal hooks, called at a few points of the hot
//! path.
//!
//! Every function starts from a `tracing` span that is disabled when no
//! subscriber wants it (no subscriber at all, a level filter above `INFO`,
//! or a filter that turns [`SPAN_TARGET`] off): creating it is then a
//! level or callsite check, and everything that costs (formatting a name,
//! reading a route, rendering the ledger, extracting or injecting trace
//! context) happens behind `is_disabled`.
//!
//! A disabled span is returned as `Span::none()`, which carries no
//! metadata: `tracing`'s `log` compatibility (on in this workspace through
//! axum's `tower-log`) then has nothing to do on enter, exit and drop,
//! which it otherwise checks on every call while no subscriber was ever
//! set (about 250 instructions per request, measured with callgrind).

use std::time::Duration;

use tracing::Span;
use tracing::field::{self, Empty};

use super::semconv::*;
#[cfg(outbound)]
use crate::retry::{Decision, Outcome, StopReason, TransportKind};

/// Whole milliseconds as an OpenTelemetry integer (`tracing-opentelemetry`
/// records `u64` as text, `i64` as a number).
fn ms(d: Duration) -> i64 {
    i64::try_from(crate::budget::whole_millis(d)).unwrap_or(i64::MAX)
}

// ------------------------------------------------------------------ server

/// Opens the server span of one request; with the `otel` feature, its
/// parent is the caller's W3C `traceparent`, when it sent one. `None` when
/// no subscriber wants it: the layer then holds, enters and drops no span
/// at all (carrying, entering and dropping a disabled `Span` showed in
/// callgrind's profile of every request; BENCHMARKS.md, "Steps").
#[cfg(feature = "server")]
#[inline]
pub(crate) fn server_span<B>(req: &http::Request<B>, floor: Duration) -> Option<Span> {
    if !tracing::level_enabled!(tracing::Level::INFO) {
        return None;
    }
    open_server_span(req, floor)
}

/// [`server_span`] once a subscriber may want it.
#[cfg(feature = "server")]
#[inline(never)]
fn open_server_span<B>(req: &http::Request<B>, floor: Duration) -> Option<Span> {
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        SERVER_SPAN,
        { OTEL_KIND } = KIND_SERVER,
        { OTEL_NAME } = Empty,
        { OTEL_STATUS_CODE } = Empty,
        { HTTP_REQUEST_METHOD } = Empty,
        { URL_PATH } = Empty,
        { URL_SCHEME } = Empty,
        { HTTP_ROUTE } = Empty,
        { SERVER_ADDRESS } = Empty,
        { SERVER_PORT } = Empty,
        { CLIENT_ADDRESS } = Empty,
        { USER_AGENT_ORIGINAL } = Empty,
        { HTTP_REQUEST_HEADER_X_REQUEST_ID } = Empty,
        { HTTP_RESPONSE_STATUS_CODE } = Empty,
        { ERROR_TYPE } = Empty,
        { BUDGET_INGRESS_MS } = Empty,
        { BUDGET_FLOOR_MS } = ms(floor),
        { BUDGET_OUTCOME } = Empty,
        { BUDGET_LEDGER } = Empty,
    );
    if span.is_disabled() {
        return None;
    }
    let method = req.method().as_str();
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(axum::extract::MatchedPath::as_str);
    match route {
        Some(route) => {
            span.record(OTEL_NAME, field::display(format_args!("{method} {route}")));
            span.record(HTTP_ROUTE, route);
        }
        None => {
            span.record(OTEL_NAME, method);
        }
    }
    span.record(HTTP_REQUEST_METHOD, method);
    span.record(URL_PATH, req.uri().path());
    span.record(URL_SCHEME, req.uri().scheme_str().unwrap_or("http"));
    let headers = req.headers();
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(host) = req.uri().host().or_else(|| text("host")) {
        let (address, port) = split_host(host);
        span.record(SERVER_ADDRESS, address);
        if let Some(port) = port.or_else(|| req.uri().port_u16()) {
            span.record(SERVER_PORT, i64::from(port));
        }
    }
    if let Some(peer) = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
    {
        span.record(CLIENT_ADDRESS, field::display(peer.0.ip()));
    }
    if let Some(agent) = text("user-agent") {
        span.record(USER_AGENT_ORIGINAL, agent);
    }
    if let Some(id) = text("x-request-id") {
        span.record(HTTP_REQUEST_HEADER_X_REQUEST_ID, id);
    }
    #[cfg(feature = "otel")]
    super::propagation::extract_parent(&span, req.headers());
    Some(span)
}

/// `host[:port]` (a bracketed IPv6 address included) as address and port.
#[cfg(feature = "server")]
fn split_host(host: &str) -> (&str, Option<u16>) {
    let (address, port) = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((v6, tail)) => (v6, tail.strip_prefix(':')),
            None => (host, None),
        }
    } else {
        match host.rsplit_once(':') {
            Some((address, port)) => (address, Some(port)),
            None => (host, None),
        }
    };
    (address, port.and_then(|p| p.parse().ok()))
}

/// The budget the request arrived with.
#[cfg(feature = "server")]
pub(crate) fn record_ingress(span: &Span, budget: Duration) {
    // `record` looks its field up by name even on a disabled span.
    if !span.is_disabled() {
        span.record(BUDGET_INGRESS_MS, ms(budget));
    }
}

/// The answer: status, `error.type` for a 5xx, the budget's outcome and
/// the ledger (rendered as the layer writes it into `Server-Timing`, from
/// the ledger itself: the span does not read the response back).
#[cfg(feature = "server")]
pub(crate) fn record_response(
    span: &Span,
    status: http::StatusCode,
    ledger: &crate::ledger::Ledger,
    outcome: &'static str,
) {
    if span.is_disabled() {
        return;
    }
    span.record(HTTP_RESPONSE_STATUS_CODE, i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record(ERROR_TYPE, status.as_str());
        span.record(OTEL_STATUS_CODE, STATUS_ERROR);
    }
    // What the layer decided, or, when it let the handler answer, what the
    // handler's status says the budget came to.
    let outcome = match (outcome, status.as_u16()) {
        (OUTCOME_OK, 504) => OUTCOME_OUT_OF_BUDGET,
        (OUTCOME_OK, 429 | 503) => OUTCOME_DEFERRED,
        (OUTCOME_OK, status) if status >= 500 => OUTCOME_ERROR,
        (outcome, _) => outcome,
    };
    span.record(BUDGET_OUTCOME, outcome);
    // The value the layer writes (for the common ingress-only ledger, the
    // header cache's: no second rendering).
    if let Some(value) = ledger.header_value()
        && let Ok(text) = value.to_str()
    {
        span.record(BUDGET_LEDGER, text);
    }
}

// ------------------------------------------------------------------ client

#[cfg(outbound)]
/// Opens the span of one attempt. `budget` is what the attempt carries
/// (`None` in fixed mode), `waited` the backoff paid before it, `rpc_system`
/// `Some("grpc")` for a gRPC call.
pub(crate) fn attempt_span(
    dependency: &str,
    method: &http::Method,
    number: u32,
    budget: Option<Duration>,
    waited: Option<Duration>,
    rpc_system: Option<&'static str>,
) -> Span {
    if !tracing::level_enabled!(tracing::Level::INFO) {
        return Span::none();
    }
    // A database statement's attempt: named by its dependency (the
    // database and the label), with no HTTP method.
    let db = rpc_system == Some(DB_SYSTEM_POSTGRESQL);
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        ATTEMPT_SPAN,
        { OTEL_KIND } = KIND_CLIENT,
        // Name and kind are fixed when the OpenTelemetry span starts (its
        // first enter): they are given here, not recorded later.
        // OpenTelemetry's HTTP client span name: the method (the
        // dependency is an attribute).
        { OTEL_NAME } = if db { dependency } else { method.as_str() },
        { OTEL_STATUS_CODE } = Empty,
        { HTTP_REQUEST_METHOD } = (!db).then(|| method.as_str()),
        { URL_FULL } = Empty,
        { SERVER_ADDRESS } = Empty,
        { SERVER_PORT } = Empty,
        { HTTP_RESPONSE_STATUS_CODE } = Empty,
        { HTTP_REQUEST_RESEND_COUNT } = (number > 1).then(|| i64::from(number - 1)),
        { ERROR_TYPE } = Empty,
        { RPC_SYSTEM } = rpc_system.filter(|s| *s != DB_SYSTEM_POSTGRESQL),
        { DB_SYSTEM_NAME } = rpc_system.filter(|s| *s == DB_SYSTEM_POSTGRESQL),
        { RPC_GRPC_STATUS_CODE } = Empty,
        { BUDGET_DEPENDENCY } = dependency,
        { BUDGET_REMAINING_MS } = budget.map(ms),
        { BUDGET_WAIT_MS } = waited.map(ms),
        { BUDGET_OUTCOME } = Empty,
        { BUDGET_DECISION } = Empty,
    );
    if span.is_disabled() {
        return Span::none();
    }
    span
}

/// `url.full` without credentials and, unless `trace_query`, with every
/// query value `REDACTED`; `server.address`, `server.port`.
#[cfg(feature = "client")]
pub(crate) fn record_url(span: &Span, url: &url::Url, trace_query: bool) {
    if span.is_disabled() {
        return;
    }
    let redact = !trace_query && url.query().is_some();
    if url.username().is_empty() && url.password().is_none() && !redact {
        span.record(URL_FULL, url.as_str());
    } else {
        // Never credentials in a trace.
        let mut clean = url.clone();
        let _ = clean.set_username("");
        let _ = clean.set_password(None);
        if redact {
            let keys: Vec<String> = url.query_pairs().map(|(k, _)| k.into_owned()).collect();
            clean
                .query_pairs_mut()
                .clear()
                .extend_pairs(keys.iter().map(|k| (k.as_str(), "REDACTED")));
        }
        span.record(URL_FULL, clean.as_str());
    }
    if let Some(host) = url.host_str() {
        span.record(SERVER_ADDRESS, host);
    }
    if let Some(port) = url.port_or_known_default() {
        span.record(SERVER_PORT, i64::from(port));
    }
}

#[cfg(outbound)]
/// How the attempt ended and what the retry policy made of it.
/// `remaining` is the budget left after it (`Duration::MAX` in fixed mode).
pub(crate) fn record_attempt(
    span: &Span,
    outcome: &Outcome,
    decision: &Decision,
    remaining: Duration,
) {
    if span.is_disabled() {
        return;
    }
    let failed = match outcome {
        Outcome::Status { status, .. } => {
            span.record(HTTP_RESPONSE_STATUS_CODE, i64::from(status.as_u16()));
            let failed = status.is_client_error() || status.is_server_error();
            if failed {
                span.record(ERROR_TYPE, status.as_str());
            }
            failed
        }
        Outcome::Transport(kind) => {
            span.record(ERROR_TYPE, kind.as_str());
            true
        }
        Outcome::Grpc { code, .. } => {
            span.record(RPC_GRPC_STATUS_CODE, i64::from(*code));
            true
        }
        Outcome::Proxy(reply) => {
            match reply.grpc_code() {
                Some(code) => span.record(RPC_GRPC_STATUS_CODE, i64::from(code)),
                None => span.record(
                    HTTP_RESPONSE_STATUS_CODE,
                    i64::from(reply.status().as_u16()),
                ),
            };
            span.record(ERROR_TYPE, reply.refusal().label());
            true
        }
    };
    if failed {
        span.record(OTEL_STATUS_CODE, STATUS_ERROR);
    }
    let ran_out = remaining.is_zero()
        && matches!(
            outcome,
            Outcome::Transport(TransportKind::Timeout | TransportKind::ConnectTimeout)
        );
    let budget_outcome = if decision.passes_up(outcome) {
        OUTCOME_RETRY_AFTER_TOO_LONG
    } else if ran_out {
        OUTCOME_EXPIRED
    } else if matches!(
        decision,
        Decision::Stop(StopReason::WaitExceedsBudget { .. })
    ) {
        OUTCOME_BELOW_FLOOR
    } else {
        OUTCOME_OK
    };
    span.record(BUDGET_OUTCOME, budget_outcome);
    span.record(BUDGET_DECISION, field::display(decision));
}

#[cfg(all(test, feature = "server"))]
mod tests {
    use super::split_host;

    #[test]
    fn host_headers_split_into_address_and_port() {
        assert_eq!(split_host("127.0.0.1:8080"), ("127.0.0.1", Some(8080)));
        assert_eq!(split_host("edge"), ("edge", None));
        assert_eq!(split_host("[::1]:8080"), ("::1", Some(8080)));
        assert_eq!(split_host("[::1]"), ("::1", None));
        assert_eq!(split_host("a:b"), ("a", None));
    }
}

#[cfg(outbound)]
/// A call (or its retry) that was not made: a client span of its own, so
/// the trace shows the call that the budget, the breaker or the
/// concurrency limit refused, and why.
pub(crate) fn refused(
    dependency: &str,
    outcome: &'static str,
    remaining: Option<Duration>,
    floor: Option<Duration>,
    floor_source: Option<&dyn std::fmt::Display>,
) {
    if !tracing::level_enabled!(tracing::Level::INFO) {
        return;
    }
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        REFUSED_SPAN,
        { OTEL_KIND } = KIND_CLIENT,
        { OTEL_NAME } = field::display(format_args!("{dependency} not sent")),
        { OTEL_STATUS_CODE } = STATUS_ERROR,
        { ERROR_TYPE } = outcome,
        { BUDGET_DEPENDENCY } = dependency,
        { BUDGET_REMAINING_MS } = remaining.map(ms),
        { BUDGET_FLOOR_MS } = floor.map(ms),
        { BUDGET_FLOOR_SOURCE } = floor_source.map(field::display),
        { BUDGET_OUTCOME } = outcome,
    );
    drop(span);
}

#[cfg(any(feature = "client", feature = "grpc"))]
/// A stale answer `age` old served for a call to `dependency` that was not
/// made or failed: a span of its own beside the call's attempt or refused
/// spans, so the trace shows that the answer was old.
pub(crate) fn stale(dependency: &str, age: Duration) {
    if !tracing::level_enabled!(tracing::Level::INFO) {
        return;
    }
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        STALE_SPAN,
        { OTEL_NAME } = field::display(format_args!("{dependency} stale")),
        { BUDGET_DEPENDENCY } = dependency,
        { BUDGET_STALE_AGE_MS } = ms(age),
        { BUDGET_OUTCOME } = OUTCOME_STALE,
    );
    drop(span);
}
