//! reqwest as a [`Transport`]: one attempt of a [`Prepared`] request, its
//! headers stamped, its answer buffered under the attempt's deadline (the
//! engine's), and its failures sorted into a [`TransportKind`].

use std::error::Error as StdError;
use std::io;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method};
use reqwest::Url;

use crate::client::BodyTooLarge;
use crate::clock::WallClock;
use crate::outbound::{AttemptError, AttemptSpec, Head, HeaderRules, Transport, http_outcome};
use crate::retry::{Outcome, TransportKind};
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
}

/// [`Prepared`] requests sent by a `reqwest::Client`, their answers
/// buffered up to `max_body` bytes.
pub(crate) struct Reqwest<'a> {
    pub(crate) http: &'a reqwest::Client,
    pub(crate) prepared: &'a Prepared,
    pub(crate) max_body: u64,
}

/// How a reqwest attempt failed.
#[derive(Debug)]
pub(crate) enum Failed {
    /// Before the answer's head.
    Head(reqwest::Error),
    /// While reading its body.
    Body(reqwest::Error),
    /// The body was over `max_body` bytes.
    TooLarge(u64),
}

impl Transport for Reqwest<'_> {
    type Answer = http::Response<Bytes>;
    type Error = Failed;

    async fn send(&self, spec: AttemptSpec, rules: &HeaderRules) -> Result<Self::Answer, Failed> {
        let req = self.request(&spec, rules);
        let mut res = self.http.execute(req).await.map_err(Failed::Head)?;
        let max_body = self.max_body;
        if res.content_length().is_some_and(|len| len > max_body) {
            return Err(Failed::TooLarge(max_body));
        }
        let mut out = http::Response::new(Bytes::new());
        *out.status_mut() = res.status();
        *out.version_mut() = res.version();
        *out.headers_mut() = std::mem::take(res.headers_mut());
        *out.body_mut() = read_body(&mut res, max_body).await?;
        Ok(out)
    }

    fn classify(&self, answer: &Self::Answer, clock: &dyn WallClock) -> Outcome {
        http_outcome(answer, clock)
    }

    fn head<'a>(&self, answer: &'a Self::Answer) -> Option<Head<'a>> {
        Some(Head::new(answer.headers(), Some(answer.body())))
    }

    fn classify_error(&self, error: Failed) -> AttemptError {
        match error {
            Failed::Head(e) => AttemptError::new(head_failure(&e), e.without_url()),
            Failed::Body(e) => AttemptError::new(body_failure(&e), e.without_url()),
            Failed::TooLarge(limit) => {
                AttemptError::neutral(TransportKind::Body, BodyTooLarge::new(limit))
            }
        }
    }
}

impl Reqwest<'_> {
    /// Attempt `spec`'s request: to its endpoint, its headers stamped.
    pub(crate) fn request(&self, spec: &AttemptSpec, rules: &HeaderRules) -> reqwest::Request {
        let prepared = self.prepared;
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
        // The attempt's span is current here (the engine instruments this
        // future with it): say where it goes.
        trace::record_url(&tracing::Span::current(), &url, prepared.trace_query);
        self.stamp(&mut headers, rules, spec.budget);
        let mut req = reqwest::Request::new(prepared.method.clone(), url);
        *req.headers_mut() = headers;
        if let Some(body) = &prepared.body {
            *req.body_mut() = Some(body.clone().into());
        }
        req
    }
}

/// `res`'s body, at most `max_body` bytes: one chunk (the common case) as
/// it is, more joined.
async fn read_body(res: &mut reqwest::Response, max_body: u64) -> Result<Bytes, Failed> {
    let mut body = Bytes::new();
    let mut joined: Option<BytesMut> = None;
    let mut total: u64 = 0;
    while let Some(chunk) = res.chunk().await.map_err(Failed::Body)? {
        total = total.saturating_add(chunk.len() as u64);
        if total > max_body {
            return Err(Failed::TooLarge(max_body));
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
    Ok(joined.map_or(body, BytesMut::freeze))
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
