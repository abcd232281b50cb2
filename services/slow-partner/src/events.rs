//! `GET /events`: a server-sent event stream (the WHATWG HTML spec's
//! `text/event-stream`), shaped by the stream knobs (the `stream_knobs`
//! module) and documented in docs/binaries.md.
//!
//! Every event is `id: N\nevent: tick\ndata: {"id":N}\n\n`. A request with
//! `Last-Event-ID: K` starts at K+1, else at `from` (default 1); a header
//! that is not a u64 (or is `u64::MAX`, after which there is no id) is a
//! `400` problem naming it. With `retry`, the stream opens with
//! `retry: <ms>\n\n`; with `heartbeat`, a `: hb\n\n` comment fills every
//! idle interval. `drop_after` ends the body cleanly (the chunked body's
//! last chunk: the client reads a clean end of stream).
//!
//! A cut (`POST /admin/events/cut`, a mode switch, the partner stopping)
//! ends the body with an error: hyper closes the connection without the
//! last chunk (HTTP/1) or resets the stream (HTTP/2), so the client reads
//! an incomplete body, not a clean end.
//!
//! A stream is served by the route itself, not by the work fallback: it
//! takes no worker of a limited path, no per-path fault or hang, and no
//! slowdown, so a stream open for hours holds nothing but its connection.

use std::io;

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::app::{AppState, problem};
use crate::knobs::Reason;
use crate::stats::whole_millis;
use crate::stream_knobs::{StreamKnobs, resume_after};
use crate::ticks::{Tick, Ticks};

/// The SSE header that resumes a stream.
const LAST_EVENT_ID: &str = "last-event-id";

/// The handler of `GET /events`.
pub(crate) async fn events(
    State(app): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let knobs =
        match StreamKnobs::from_query(query.as_deref().unwrap_or(""), app.streams.defaults()) {
            Ok(knobs) => knobs,
            Err(err) => return err.into_response(),
        };
    let first = match headers.get(LAST_EVENT_ID) {
        None => knobs.from,
        Some(value) => match value
            .to_str()
            .map_err(|_| Reason::NotANumber)
            .and_then(resume_after)
        {
            Ok(first) => first,
            Err(reason) => return bad_last_event_id(value, &reason),
        },
    };
    if let Some(status) = knobs.base.status {
        return refusal(status);
    }
    let retry = knobs
        .base
        .retry
        .map(|r| Bytes::from(format!("retry: {}\n\n", whole_millis(r))));
    let ticks = Ticks::new(&knobs.base, first, app.streams.open());
    let body = futures_util::stream::unfold((retry, Some(ticks)), |(retry, ticks)| async move {
        if let Some(retry) = retry {
            return Some((Ok(retry), (None, ticks)));
        }
        let mut ticks = ticks?;
        let chunk = match ticks.next().await {
            Tick::Event(id) => event(id),
            Tick::Heartbeat => Bytes::from_static(b": hb\n\n"),
            Tick::End => return None,
            Tick::Cut => return Some((Err(io::Error::other("the stream was cut")), (None, None))),
        };
        Some((Ok(chunk), (None, Some(ticks))))
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

/// The frame of event `id`.
fn event(id: u64) -> Bytes {
    Bytes::from(format!("id: {id}\nevent: tick\ndata: {{\"id\":{id}}}\n\n"))
}

fn bad_last_event_id(value: &HeaderValue, reason: &Reason) -> Response {
    let given = String::from_utf8_lossy(value.as_bytes());
    problem(
        StatusCode::BAD_REQUEST,
        "urn:slow-partner:problem:bad-last-event-id",
        "Bad Last-Event-ID header",
        format!(
            "header `Last-Event-ID` = `{}`: {reason}",
            crate::knobs::shorten(&given)
        ),
        Some("Last-Event-ID"),
    )
}

/// A stream's opening refused with `status` (its `status` knob): a
/// problem, with `Retry-After: 1` on a `429` or `503`.
pub(crate) fn refusal(status: StatusCode) -> Response {
    let mut response = problem(
        status,
        "urn:slow-partner:problem:stream-refused",
        "Stream refused",
        format!("the stream's `status` knob asks for {}", status.as_u16()),
        None,
    );
    if matches!(status.as_u16(), 429 | 503) {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_frame_carries_its_id_twice() {
        assert_eq!(
            event(42),
            Bytes::from_static(b"id: 42\nevent: tick\ndata: {\"id\":42}\n\n")
        );
    }

    #[test]
    fn a_refusal_asks_to_retry_after_a_second_on_429_and_503() {
        for (status, retry_after) in [(503, true), (429, true), (401, false), (404, false)] {
            let response = refusal(StatusCode::from_u16(status).unwrap());
            assert_eq!(response.status().as_u16(), status);
            assert_eq!(
                response.headers().contains_key(header::RETRY_AFTER),
                retry_after
            );
        }
    }
}
