//! `POST /ingest`: a batch sink that applies each `Idempotency-Key` once,
//! and fails on command (the ingest_state module holds what it remembers;
//! docs/binaries.md documents the endpoint).
//!
//! The order of checks: a failing window first (the endpoint is down,
//! whatever the request), then the `Idempotency-Key` header (1 to 200
//! visible ASCII characters, else `400` naming it), then the body's size
//! (over `max_batch_bytes`: `413`), then the body (a JSON array, else
//! `400` naming `body`). Then the batch is applied, or counted as a
//! duplicate when its key was applied already.
//!
//! While failing: mode `status` answers the window's status with a
//! problem (and `Retry-After` in whole seconds, rounded up, when set);
//! mode `hang` holds the request without an answer until the window ends
//! or is lifted, then answers as `status` would; mode `reset` closes the
//! connection without an answer. Nothing is applied in any of them. Mode
//! `applied-reset` is the failure that makes a batch applied twice: the
//! request is handled as when healthy (the checks, then the apply or the
//! duplicate), then the connection is closed without the answer, as
//! `reset` does.
//!
//! Like the streams, the route takes no worker, fault or slowdown of the
//! work fallback.

use std::io;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::app::{AppState, problem};
use crate::ingest_state::{FailMode, Failure, Ingest};

/// The longest idempotency key accepted.
const MAX_KEY_LEN: usize = 200;

/// The handler of `POST /ingest`.
pub(crate) async fn ingest(
    State(app): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (failure, max_batch_bytes) = app.ingest.arrive();
    match failure {
        None => handle(&app.ingest, &headers, body, max_batch_bytes).await,
        Some(Failure {
            mode: FailMode::AppliedReset,
            ..
        }) => {
            // Applied (or not) as when healthy; the answer is lost.
            let _lost = handle(&app.ingest, &headers, body, max_batch_bytes).await;
            reset("ingest fails with mode applied-reset")
        }
        Some(failure) => failing(&app.ingest, failure).await,
    }
}

/// A request handled as when healthy: the checks, then the apply.
async fn handle(
    ingest: &Ingest,
    headers: &HeaderMap,
    body: Body,
    max_batch_bytes: usize,
) -> Response {
    let key = match idempotency_key(headers) {
        Ok(key) => key,
        Err(detail) => {
            return problem(
                StatusCode::BAD_REQUEST,
                "urn:slow-partner:problem:bad-idempotency-key",
                "Bad Idempotency-Key header",
                detail,
                Some("Idempotency-Key"),
            );
        }
    };
    let bytes = match axum::body::to_bytes(body, max_batch_bytes).await {
        Ok(bytes) => bytes,
        Err(err) => return unreadable(&err, max_batch_bytes),
    };
    let items = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Array(items)) => items,
        Ok(_) => return bad_body("the body is not a JSON array".to_owned()),
        Err(err) => return bad_body(format!("the body is not JSON: {err}")),
    };
    let count = items.len() as u64;
    let answer = if ingest.apply(key, &items) {
        json!({"applied": true, "items": count})
    } else {
        json!({"applied": false, "duplicate": true, "items": count})
    };
    Json(answer).into_response()
}

/// The key of `headers`, or why it cannot be used.
fn idempotency_key(headers: &HeaderMap) -> Result<&str, String> {
    let value = headers
        .get("idempotency-key")
        .ok_or_else(|| "the header `Idempotency-Key` is missing".to_owned())?;
    let bytes = value.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_KEY_LEN || !bytes.iter().all(u8::is_ascii_graphic) {
        return Err(format!(
            "header `Idempotency-Key` must be 1 to {MAX_KEY_LEN} visible ASCII characters"
        ));
    }
    // All visible ASCII: valid UTF-8.
    value
        .to_str()
        .map_err(|_| "header `Idempotency-Key` is not ASCII".to_owned())
}

/// A body that could not be read: too large (`413`) or cut short.
fn unreadable(err: &axum::Error, max: usize) -> Response {
    let too_large = std::iter::successors(Some(err as &dyn std::error::Error), |e| e.source())
        .any(|e| e.is::<http_body_util::LengthLimitError>())
        || err.to_string().contains("length limit exceeded");
    if too_large {
        return problem(
            StatusCode::PAYLOAD_TOO_LARGE,
            "urn:slow-partner:problem:batch-too-large",
            "Batch too large",
            format!("the batch is larger than max_batch_bytes ({max} bytes)"),
            Some("body"),
        );
    }
    bad_body(format!("the body could not be read: {err}"))
}

fn bad_body(detail: String) -> Response {
    problem(
        StatusCode::BAD_REQUEST,
        "urn:slow-partner:problem:bad-parameter",
        "Bad parameter",
        detail,
        Some("body"),
    )
}

/// The answer of a failing window (see the module docs).
async fn failing(ingest: &Ingest, failure: Failure) -> Response {
    match failure.mode {
        FailMode::Status => failure_answer(&failure),
        // Handled by the caller; closed without an answer all the same.
        FailMode::Reset | FailMode::AppliedReset => reset("ingest fails with mode reset"),
        FailMode::Hang => {
            let mut last = failure;
            loop {
                let changed = ingest.changed();
                let Some(now) = ingest.failure() else { break };
                last = now;
                tokio::select! {
                    () = tokio::time::sleep_until(now.until) => {}
                    () = changed => {}
                }
            }
            failure_answer(&last)
        }
    }
}

/// A response whose body fails before its first byte: hyper closes the
/// connection without sending anything.
fn reset(why: &'static str) -> Response {
    Response::new(Body::from_stream(futures_util::stream::once(async move {
        Err::<Bytes, _>(io::Error::other(why))
    })))
}

fn failure_answer(failure: &Failure) -> Response {
    let mut response = problem(
        failure.status,
        "urn:slow-partner:problem:ingest-failing",
        "Ingest failing",
        "the ingest endpoint fails on command (PUT /admin/ingest); nothing was applied".to_owned(),
        None,
    );
    if let Some(retry_after) = failure.retry_after {
        let secs = retry_after
            .as_secs()
            .saturating_add(u64::from(retry_after.subsec_nanos() > 0));
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}
