//! The work every non-reserved path does: wait, then answer as the query
//! string asks.
//!
//! The budget is read exactly like a budget-aware service reads it (every
//! inbound format, the smallest wins: [`budget_core::header::decode`]) and
//! then *ignored*: it is echoed in the answer, listed in `/stats` and used to
//! judge lateness, never to cut the work short. A malformed budget header is
//! an unknown budget (`budget_ms: null`), not a `400`: the partner does not
//! care.
//!
//! Before its delay starts, a request of a path with a worker limit takes a
//! worker, waiting in the path's queue when all are busy (see the workers
//! module); it keeps the worker until its work (delay, jitter, drip) is
//! done or abandoned. The wait counts toward lateness: the budget runs from
//! arrival. A path with a run-time override answers its status at once,
//! without a delay or a worker, before the query is even read. The
//! partner's slowdown factor (the slowdown module) multiplies the delay,
//! jitter included, and the drip pauses.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use budget_core::header::{Decoded, decode};
use bytes::Bytes;
use rand::Rng;
use serde::{Deserialize, Serialize};
use tokio::time::{Instant, sleep};

use crate::app::AppState;
use crate::knobs::{DRIP_CHUNKS, Knobs};
use crate::overrides::Fault;
use crate::stats::{Stats, whole_millis};
use crate::workers::Worker;

/// The `x-request-id` header: read to count attempts, echoed on the answer.
pub use service_kit::X_REQUEST_ID;

/// The JSON body of every work answer, whatever its status.
///
/// # Example
///
/// ```
/// use slow_partner::Answer;
///
/// let json = r#"{"path":"/pricing","attempt":2,"request_id":"abc","budget_ms":null,
///   "budget_header":null,"status":503,"delay_ms":250}"#;
/// let answer: Answer = serde_json::from_str(json).unwrap();
/// assert_eq!(answer.attempt, 2);
/// assert_eq!(answer.budget_ms, None);
/// assert!(answer.padding.is_empty());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Answer {
    /// The request's path.
    pub path: String,
    /// The attempt number for this `x-request-id` and path, from 1 (always 1
    /// without an id).
    pub attempt: u32,
    /// The request's `x-request-id`, when it had one.
    pub request_id: Option<String>,
    /// The budget the request arrived with, in whole milliseconds; `null`
    /// when none (or only a malformed one) arrived.
    pub budget_ms: Option<u64>,
    /// The header that carried the budget (the smallest one wins).
    pub budget_header: Option<String>,
    /// The status of this answer.
    pub status: u16,
    /// The delay waited before the head, jitter included, in milliseconds.
    pub delay_ms: u64,
    /// Filler that brings the body to `body_bytes`; absent when not asked for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub padding: String,
}

impl Answer {
    /// The JSON body, exactly `body_bytes` long when asked for and possible:
    /// a `padding` field of `x`s does most of it, trailing spaces (valid JSON
    /// whitespace) the last few bytes. A `body_bytes` shorter than the bare
    /// answer gets the bare answer.
    fn into_body(mut self, body_bytes: Option<usize>) -> Vec<u8> {
        /// `,"padding":""`: what an empty padding field adds.
        const FIELD: usize = 13;
        let bare = serde_json::to_vec(&self).expect("an answer always serialises");
        let Some(want) = body_bytes.filter(|&want| want > bare.len()) else {
            return bare;
        };
        let mut body = if want >= bare.len() + FIELD {
            self.padding = "x".repeat(want - bare.len() - FIELD);
            serde_json::to_vec(&self).expect("an answer always serialises")
        } else {
            bare
        };
        body.resize(want, b' ');
        body
    }
}

/// The handler of every non-reserved path.
pub(crate) async fn work(State(app): State<AppState>, uri: Uri, headers: HeaderMap) -> Response {
    let arrival = Instant::now();
    let (budget, budget_header) = match decode(&headers) {
        Decoded::Valid { budget, header } => (Some(budget), Some(header.as_str().to_owned())),
        Decoded::Absent | Decoded::Invalid(_) => (None, None),
    };
    let echo_id = headers.get(&X_REQUEST_ID).cloned();
    let request_id = echo_id
        .as_ref()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let path = uri.path();
    let attempt = app.stats.arrive(request_id.as_deref(), path, budget);
    let mut answer = Answer {
        path: path.to_owned(),
        attempt,
        request_id,
        budget_ms: budget.map(whole_millis),
        budget_header,
        status: 0,
        delay_ms: 0,
        padding: String::new(),
    };

    if let Some(fault) = app.overrides.get(path) {
        return overridden(&app.stats, fault, answer, echo_id);
    }
    if let Some(held) = HungCall::enter(&app.stats, path, budget) {
        // No answer, ever: the future is dropped when the caller goes away
        // or the partner stops, and `held` counts the call's end then.
        let _held = held;
        return std::future::pending().await;
    }

    let knobs = match Knobs::from_query(uri.query().unwrap_or("")) {
        Ok(knobs) => knobs,
        Err(err) => {
            tracing::debug!(%err, "malformed query");
            app.stats.answered(StatusCode::BAD_REQUEST.as_u16());
            return err.into_response();
        }
    };
    let plan = knobs.plan(attempt);
    let usual = match knobs.tail {
        Some(tail) => tail.pick(plan.delay, rand::rng().random::<f64>()),
        None => plan.delay,
    };
    // The partner's slowdown multiplies every wait of the request (read
    // once: a request keeps the factor it was planned with).
    let slowdown = app.slowdown.get();
    let delay = slowdown.apply(usual + random_up_to(knobs.jitter));
    let no_body = matches!(
        plan.status,
        StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED
    );
    answer.status = plan.status.as_u16();
    answer.delay_ms = whole_millis(delay);
    let body = if no_body {
        Vec::new()
    } else {
        answer.into_body(knobs.body_bytes)
    };
    let chunks = match knobs.drip {
        Some(_) => split(body, DRIP_CHUNKS),
        None => vec![Bytes::from(body)],
    };
    let drip_pause = knobs.drip.map(|pause| slowdown.apply(pause));
    let pauses = drip_pause
        .unwrap_or_default()
        .saturating_mul(pause_count(chunks.len()));

    // Dropped here (the caller went away) the request leaves the queue and
    // does no work.
    let worker = match app.stats.workers().pool(path) {
        Some(pool) => Some(pool.take().await),
        None => None,
    };
    let wait = worker.as_ref().map(Worker::wait).unwrap_or_default();
    let guard = WorkGuard {
        stats: Arc::clone(&app.stats),
        arrival,
        budget,
        planned: wait.saturating_add(delay).saturating_add(pauses),
        done: false,
        worker,
    };

    sleep(delay).await;

    let mut response = Response::new(Body::empty());
    *response.status_mut() = plan.status;
    let headers = response.headers_mut();
    if !no_body {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    if let Some(retry_after) = knobs.retry_after {
        headers.insert(header::RETRY_AFTER, retry_after);
    }
    if let Some(id) = echo_id {
        headers.insert(X_REQUEST_ID, id);
    }
    app.stats.answered(plan.status.as_u16());
    if let Some(worker) = &guard.worker {
        worker.answered();
    }

    *response.body_mut() = match drip_pause {
        Some(pause) if chunks.len() > 1 => drip(chunks, pause, guard),
        _ => {
            guard.finish();
            Body::from(chunks.into_iter().next().unwrap_or_default())
        }
    };
    response
}

/// The answer of an overridden path: its status at once, with the
/// override's `Retry-After`, and the usual [`Answer`] body (no delay).
fn overridden(
    stats: &Stats,
    fault: Fault,
    mut answer: Answer,
    echo_id: Option<HeaderValue>,
) -> Response {
    answer.status = fault.status.as_u16();
    let no_body = matches!(
        fault.status,
        StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED
    );
    let mut response = if no_body {
        Response::new(Body::empty())
    } else {
        let mut response = Response::new(Body::from(answer.into_body(None)));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    };
    *response.status_mut() = fault.status;
    if let Some(retry_after) = fault.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, retry_after);
    }
    if let Some(id) = echo_id {
        response.headers_mut().insert(X_REQUEST_ID, id);
    }
    stats.answered(fault.status.as_u16());
    response
}

/// A call held on a hanging path (see the hangs module); when it is
/// dropped (its caller went away), the call leaves the path's count and is
/// recorded as abandoned, and as late when it had a budget: its work never
/// ended.
struct HungCall {
    stats: Arc<Stats>,
    path: String,
    budget: Option<Duration>,
}

impl HungCall {
    /// `Some` when `path` hangs now.
    fn enter(stats: &Arc<Stats>, path: &str, budget: Option<Duration>) -> Option<Self> {
        stats.hangs().enter(path).then(|| Self {
            stats: Arc::clone(stats),
            path: path.to_owned(),
            budget,
        })
    }
}

impl Drop for HungCall {
    fn drop(&mut self) {
        self.stats.hangs().leave(&self.path);
        self.stats.finished(self.budget.is_some(), true);
    }
}

/// A uniformly random duration in `[0, max]`.
fn random_up_to(max: Duration) -> Duration {
    if max.is_zero() {
        return Duration::ZERO;
    }
    let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rand::rng().random_range(0..=nanos))
}

/// `body` cut into `min(n, body.len())` chunks whose sizes differ by at most
/// one byte.
fn split(body: Vec<u8>, n: usize) -> Vec<Bytes> {
    let body = Bytes::from(body);
    let n = n.min(body.len());
    (0..n)
        .map(|i| body.slice(i * body.len() / n..(i + 1) * body.len() / n))
        .collect()
}

/// The pauses between `chunks` chunks.
fn pause_count(chunks: usize) -> u32 {
    u32::try_from(chunks.saturating_sub(1)).unwrap_or(u32::MAX)
}

/// A body that sends `chunks` with `pause` between two of them; the work is
/// finished when the last chunk is handed over.
fn drip(chunks: Vec<Bytes>, pause: Duration, guard: WorkGuard) -> Body {
    let state = (chunks.into_iter().enumerate(), Some(guard));
    let stream = futures_util::stream::unfold(state, move |(mut chunks, mut guard)| async move {
        let (i, chunk) = chunks.next()?;
        if i > 0 {
            sleep(pause).await;
        }
        if chunks.len() == 0
            && let Some(guard) = guard.take()
        {
            guard.finish();
        }
        Some((Ok::<_, Infallible>(chunk), (chunks, guard)))
    });
    Body::from_stream(stream)
}

/// Judges one request's work when it ends: at [`finish`](Self::finish), or,
/// when the caller went away first, at the time it was planned to end.
struct WorkGuard {
    stats: Arc<Stats>,
    arrival: Instant,
    budget: Option<Duration>,
    /// Queue wait, delay, jitter and drip pauses: how long after arrival
    /// the work ends when nobody stops it.
    planned: Duration,
    done: bool,
    /// The path's worker, held until the work ends (dropped with the
    /// guard); `None` on an unlimited path.
    worker: Option<Worker>,
}

impl WorkGuard {
    /// The work is done now.
    fn finish(mut self) {
        self.done = true;
        self.record(self.arrival.elapsed(), false);
    }

    fn record(&self, took: Duration, abandoned: bool) {
        let late = self.budget.is_some_and(|budget| took > budget);
        self.stats.finished(late, abandoned);
    }
}

impl Drop for WorkGuard {
    fn drop(&mut self) {
        if !self.done {
            // The caller went away; a partner that ignores budgets would have
            // kept working until the planned end.
            self.record(self.planned.max(self.arrival.elapsed()), true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer() -> Answer {
        Answer {
            path: "/p".into(),
            attempt: 1,
            request_id: None,
            budget_ms: Some(5),
            budget_header: Some("request-budget-ms".into()),
            status: 200,
            delay_ms: 0,
            padding: String::new(),
        }
    }

    #[test]
    fn the_body_is_exactly_body_bytes_whenever_the_answer_fits() {
        let bare = serde_json::to_vec(&answer()).unwrap().len();
        for want in [
            bare,
            bare + 1,
            bare + 12,
            bare + 13,
            bare + 14,
            4096,
            100_000,
        ] {
            let body = answer().into_body(Some(want));
            assert_eq!(body.len(), want, "want {want}");
            let back: Answer = serde_json::from_slice(&body).unwrap();
            assert_eq!(back.path, "/p");
        }
    }

    #[test]
    fn a_body_bytes_below_the_bare_answer_gets_the_bare_answer() {
        let bare = serde_json::to_vec(&answer()).unwrap();
        assert_eq!(answer().into_body(Some(3)), bare);
        assert_eq!(answer().into_body(None), bare);
    }

    #[test]
    fn the_answer_names_budget_ms_even_when_null() {
        let mut a = answer();
        a.budget_ms = None;
        let json = String::from_utf8(a.into_body(None)).unwrap();
        assert!(json.contains(r#""budget_ms":null"#), "{json}");
    }

    #[test]
    fn a_dripped_body_is_cut_into_at_most_drip_chunks() {
        let chunks = split(vec![7; 1000], DRIP_CHUNKS);
        assert_eq!(chunks.len(), DRIP_CHUNKS);
        assert_eq!(chunks.iter().map(Bytes::len).sum::<usize>(), 1000);
        assert_eq!(split(vec![7; 5], DRIP_CHUNKS).len(), 5);
        let seventeen = split(vec![7; 17], DRIP_CHUNKS);
        assert_eq!(seventeen.len(), DRIP_CHUNKS);
        assert!(seventeen.iter().all(|c| !c.is_empty()));
        assert!(split(Vec::new(), DRIP_CHUNKS).is_empty());
        assert_eq!(pause_count(16), 15);
        assert_eq!(pause_count(0), 0);
    }

    #[test]
    fn jitter_stays_within_its_bound() {
        let max = Duration::from_millis(3);
        for _ in 0..1000 {
            assert!(random_up_to(max) <= max);
        }
        assert_eq!(random_up_to(Duration::ZERO), Duration::ZERO);
    }
}
