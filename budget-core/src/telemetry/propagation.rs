//! W3C trace context (`traceparent`, `tracestate`) in and out, so that one
//! trace spans every hop of a call chain, next to the budget header.
//!
//! The propagator is W3C's whatever the global one is: the contract names
//! W3C, and it works whatever the binary installed (or did not: in tests,
//! or in a service that sets up its own subscriber).

use http::HeaderMap;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C header that carries the parent span.
#[cfg(feature = "server")]
const TRACEPARENT: &str = "traceparent";

#[cfg(feature = "server")]
/// Makes the caller's span (from `traceparent`/`tracestate`) the parent of
/// `span`, which must not have been entered yet. No `traceparent`, an
/// invalid one, or no OpenTelemetry layer: `span` keeps its local parent.
pub(crate) fn extract_parent(span: &Span, headers: &HeaderMap) {
    if !headers.contains_key(TRACEPARENT) {
        return;
    }
    let parent =
        TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(headers));
    // Fails only without an OpenTelemetry layer, or for a span already
    // started: then there is no trace to join.
    let _ = span.set_parent(parent);
}

#[cfg(outbound)]
/// Writes `span`'s trace context into `headers` (replacing any
/// `traceparent` there). Nothing is written when `span` is not known to an
/// OpenTelemetry layer.
pub(crate) fn inject(span: &Span, headers: &mut HeaderMap) {
    let cx = span.context();
    TraceContextPropagator::new()
        .inject_context(&cx, &mut opentelemetry_http::HeaderInjector(headers));
    // The propagator writes `tracestate` even when there is none: an empty
    // header is noise to every hop after.
    if headers
        .get(crate::context::TRACESTATE)
        .is_some_and(|v| v.is_empty())
    {
        headers.remove(crate::context::TRACESTATE);
    }
}
