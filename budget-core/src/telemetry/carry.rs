//! The trace context an outbound call carries: written once for the HTTP
//! client, the gRPC layer and both adapters (docs/architecture.md, "7.
//! Where metrics, spans and logs come from").

use tracing::Span;

/// The trace context an outbound call carries, written into `headers`:
/// with the `otel` feature, `span`'s own W3C context (the attempt's),
/// which replaces any `traceparent` there; without one (no OpenTelemetry
/// layer, spans off, no `otel` feature, or `Span::none()` from an adapter
/// that has no span of its own), `inbound`: the caller's `traceparent`
/// and `tracestate` as they came to this hop, so that the trace goes on
/// through a hop that does not export. `inbound` never replaces a
/// `traceparent` already in `headers` (the caller's own
/// instrumentation).
// Inlined: out of line it cost the HTTP client 60 instructions a call
// (BENCHMARKS.md, "The server layer's cost in instructions").
#[inline]
pub(crate) fn propagate(
    span: &Span,
    headers: &mut http::HeaderMap,
    inbound: Option<&crate::context::InboundTrace>,
) {
    #[cfg(feature = "otel")]
    if !span.is_disabled() {
        super::propagation::inject(span, headers);
    }
    #[cfg(not(feature = "otel"))]
    let _ = span;
    if let Some(trace) = inbound
        && !headers.contains_key(crate::context::TRACEPARENT)
    {
        headers.insert(crate::context::TRACEPARENT, trace.traceparent.clone());
        if let Some(state) = &trace.tracestate {
            headers.insert(crate::context::TRACESTATE, state.clone());
        }
    }
}
