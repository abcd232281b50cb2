//! `GET /events`: the partner's event stream (server-sent events) through
//! edge. The opening is a call of edge's client of the partner (floor,
//! breaker, ledger, one attempt, in the request's budget); the body then
//! streams to the caller as it comes, unchanged and unbuffered, under the
//! route's [`StreamPolicy`](budget_core::server::StreamPolicy) (idle
//! timeout, total duration) and ended cleanly however it ends
//! ([`crate::stream_end`]).

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use budget_core::client::BudgetClient;
use budget_core::stream::StreamResponse;
use http::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue, Uri};
use service_kit::RequestLedger;
use tokio_util::sync::CancellationToken;

use crate::X_REQUEST_ID;
use crate::stream_end::ended_cleanly;

/// The header an SSE client sends on a reconnect: the id of the last
/// event it read (the WHATWG HTML spec's server-sent events).
pub(crate) const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// The state of `GET /events`, shared by every stream.
#[derive(Clone, Debug)]
pub(crate) struct Events {
    /// The client of the partner's event stream.
    pub(crate) client: BudgetClient,
    /// Cancelled when edge shuts down: every stream ends.
    pub(crate) stop: CancellationToken,
}

/// The route handler: opens the partner's stream with the caller's query
/// string and `Last-Event-ID`, and answers with it. A failed opening is a
/// problem, as for `/checkout`: `504` when the partner could not be
/// called in budget or gave no head within it, `503` for an open circuit;
/// the partner's own refusal (its status, `Content-Type`, `Retry-After`
/// and body) is passed up as it is.
pub(crate) async fn events(
    State(events): State<Events>,
    uri: Uri,
    headers: HeaderMap,
    ledger: RequestLedger,
) -> Response {
    let path = uri
        .query()
        .map_or_else(String::new, |query| format!("?{query}"));
    let mut req = events
        .client
        .get(&path)
        .ledger(ledger.ledger().clone())
        .header(ACCEPT, HeaderValue::from_static("text/event-stream"));
    for name in [X_REQUEST_ID, LAST_EVENT_ID] {
        if let Some(value) = headers.get(&name) {
            req = req.header(name, value.clone());
        }
    }
    match req.open().await {
        Ok(opened) => pass_up(opened, &events),
        Err(e) => {
            tracing::warn!(error = %service_kit::error_chain(&e), "the event stream did not open");
            e.problem().into_response()
        }
    }
}

/// The partner's answer as edge's: status, `Content-Type`,
/// `Cache-Control` and `Retry-After` as they are, the body streamed as it
/// comes.
fn pass_up(opened: StreamResponse, events: &Events) -> Response {
    let status = opened.status();
    let mut head = HeaderMap::new();
    for name in [CONTENT_TYPE, CACHE_CONTROL, RETRY_AFTER] {
        if let Some(value) = opened.headers().get(&name) {
            head.insert(name, value.clone());
        }
    }
    let body = ended_cleanly(opened.bytes_stream(), events.stop.clone(), move |end| {
        tracing::info!(end = end.as_str(), %status, "the partner's event stream ended");
    });
    let mut res = Response::new(Body::from_stream(body));
    *res.status_mut() = status;
    *res.headers_mut() = head;
    res
}
