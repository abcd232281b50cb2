//! One attempt over reqwest: stamp the budget headers, send, read the body
//! under the attempt's deadline (the caller's `timeout_at`), and sort a
//! failure into a [`TransportKind`].

use std::error::Error as StdError;
use std::io;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method};
use reqwest::Url;

use super::call::AttemptResult;
use crate::context::InboundTrace;
use crate::header::{GRPC_TIMEOUT, REQUEST_BUDGET_MS, encode_grpc_timeout, encode_ms};
use crate::outbound::{AttemptError, AttemptSpec};
use crate::retry::TransportKind;
use crate::telemetry::trace;

/// A request ready to be sent any number of times (its body is `Bytes`, so
/// every attempt replays it).
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    pub(crate) method: Method,
    pub(crate) url: Url,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Option<Bytes>,
    /// Keep the query in the span's `url.full` (else its values are
    /// redacted).
    pub(crate) trace_query: bool,
    /// The caller's trace context, from the request context the call was
    /// made in: sent on when the attempt has none of its own.
    pub(crate) inbound_trace: Option<InboundTrace>,
}

/// Sends `prepared` once and buffers the answer, at most `max_body` bytes.
///
/// `spec.budget` becomes `request-budget-ms` (and `grpc-timeout` when
/// `grpc` is set), both rounded down to the millisecond, unless `forward`
/// is off; in fixed mode it is `None` and no budget header is added.
pub(crate) async fn send_once(
    http: &reqwest::Client,
    prepared: &Prepared,
    spec: AttemptSpec,
    (forward, grpc): (bool, bool),
    max_body: u64,
) -> AttemptResult {
    // Built in a block: its locals end before the first await, so the
    // attempt's future keeps only the request.
    let req = {
        let mut url = prepared.url.clone();
        let target = spec.endpoint.target.as_ref();
        if let Some(target) = target {
            target.apply(&mut url);
        }
        let mut headers = prepared.headers.clone();
        if let Some(host) = target.and_then(|t| t.host_header.as_ref()) {
            // A resolved name's address in the URL: the name stays the Host.
            headers.insert(http::header::HOST, host.clone());
        }
        if let Some(budget) = spec.budget.filter(|_| forward) {
            headers.insert(REQUEST_BUDGET_MS, encode_ms(budget));
            if grpc {
                // The same value as request-budget-ms: whole milliseconds.
                let whole_ms = Duration::from_millis(crate::budget::whole_millis(budget));
                headers.insert(GRPC_TIMEOUT, encode_grpc_timeout(whole_ms));
            }
        }
        // The attempt's span is current here (the engine instruments this
        // future with it): say where it goes, and pass its trace context on.
        trace::record_send(
            &tracing::Span::current(),
            &url,
            &mut headers,
            prepared.trace_query,
            prepared.inbound_trace.as_ref(),
        );
        let mut req = reqwest::Request::new(prepared.method.clone(), url);
        *req.headers_mut() = headers;
        if let Some(body) = &prepared.body {
            *req.body_mut() = Some(body.clone().into());
        }
        req
    };

    let mut res = http
        .execute(req)
        .await
        .map_err(|e| AttemptError::new(head_failure(&e), e.without_url()))?;

    if res.content_length().is_some_and(|len| len > max_body) {
        return Err(AttemptError::too_large(max_body));
    }
    let mut out = http::Response::new(Bytes::new());
    *out.status_mut() = res.status();
    *out.version_mut() = res.version();
    *out.headers_mut() = std::mem::take(res.headers_mut());

    // One chunk (the common case) is kept as it is; more are joined.
    let mut body = Bytes::new();
    let mut joined: Option<BytesMut> = None;
    let mut total: u64 = 0;
    while let Some(chunk) = res
        .chunk()
        .await
        .map_err(|e| AttemptError::new(body_failure(&e), e.without_url()))?
    {
        total = total.saturating_add(chunk.len() as u64);
        if total > max_body {
            return Err(AttemptError::too_large(max_body));
        }
        match &mut joined {
            Some(buf) => buf.extend_from_slice(&chunk),
            None if body.is_empty() => body = chunk,
            None => {
                let mut buf = BytesMut::with_capacity(body.len() + chunk.len());
                buf.extend_from_slice(&body);
                buf.extend_from_slice(&chunk);
                joined = Some(buf);
            }
        }
    }
    *out.body_mut() = joined.map_or(body, BytesMut::freeze);
    Ok(out)
}

/// The kind of a failure before the response head arrived: connect (timed
/// out or not), timeout, reset (or closed early), body, other.
pub(crate) fn head_failure(e: &reqwest::Error) -> TransportKind {
    if e.is_connect() {
        if e.is_timeout() {
            TransportKind::ConnectTimeout
        } else {
            TransportKind::Connect
        }
    } else if e.is_timeout() {
        TransportKind::Timeout
    } else if is_reset(e) {
        TransportKind::Reset
    } else if e.is_body() || e.is_decode() {
        TransportKind::Body
    } else {
        TransportKind::Other
    }
}

/// The kind of a failure while reading the body: the status was seen, so
/// anything but running out of time is [`TransportKind::Body`] (final).
pub(crate) fn body_failure(e: &reqwest::Error) -> TransportKind {
    if e.is_timeout() {
        TransportKind::Timeout
    } else {
        TransportKind::Body
    }
}

/// A connection reset, aborted, broken, or closed before the message was
/// complete, anywhere in the source chain.
fn is_reset(e: &(dyn StdError + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<io::Error>()
            && matches!(
                io.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::UnexpectedEof
            )
        {
            return true;
        }
        if let Some(hyper) = err.downcast_ref::<hyper::Error>()
            && hyper.is_incomplete_message()
        {
            return true;
        }
        source = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] io::Error);

    #[test]
    fn a_reset_is_found_anywhere_in_the_chain() {
        let e = Outer(io::Error::from(io::ErrorKind::ConnectionReset));
        assert!(is_reset(&e));
        let e = Outer(io::Error::from(io::ErrorKind::PermissionDenied));
        assert!(!is_reset(&e));
    }
}
