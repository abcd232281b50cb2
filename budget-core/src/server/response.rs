use axum::body::Body;
use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};

use crate::ledger::Ledger;
use crate::problem::ProblemBody;
use crate::problem::{self, Problem};
use crate::server::SERVER_TIMING;

/// A problem+json response carrying `ledger` as `Server-Timing`, and
/// `Retry-After` (whole seconds, rounded up) when the problem says when to
/// retry: for an answer made outside the budget layer with a ledger of its
/// own. Inside the layer a handler returns the [`Problem`] itself (it is
/// `IntoResponse`) and the layer adds the request's ledger.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::ledger::Ledger;
/// use budget_core::problem::{Problem, ProblemKind};
/// use budget_core::server::problem_response;
///
/// let p = Problem::new(ProblemKind::CircuitOpen, "pricing is failing")
///     .with_retry_after(Duration::from_millis(1200));
/// let res = problem_response(&p, &Ledger::new());
/// assert_eq!(res.status(), 503);
/// assert_eq!(res.headers()["retry-after"], "2");
/// assert_eq!(res.headers()["content-type"], "application/problem+json");
/// ```
pub fn problem_response(problem: &Problem, ledger: &Ledger) -> Response<Body> {
    let mut res = problem_answer(problem);
    append_server_timing(&mut res, ledger);
    res
}

/// `problem` as a problem+json response in any body the layer can write
/// ([`ProblemBody`]): status, `Content-Type` and `Retry-After` (whole
/// seconds, rounded up) when the problem says when to retry. No
/// `Server-Timing`: the budget layer, the one writer, adds it.
pub(crate) fn problem_answer<B: ProblemBody>(problem: &Problem) -> Response<B> {
    let status = StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut res = Response::new(B::from_problem(Bytes::from(problem.to_json())));
    *res.status_mut() = status;
    let headers = res.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static(problem::CONTENT_TYPE),
    );
    if let Some(secs) = problem.retry_after_secs() {
        headers.insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    res
}

/// A handler's answer with a problem: problem+json with its status and
/// `Retry-After`. Inside the budget layer the response gets the request's
/// ledger as `Server-Timing` from the layer; nothing here makes one up.
///
/// ```
/// use axum::response::IntoResponse;
/// use budget_core::problem::{Problem, ProblemKind};
///
/// let res = Problem::new(ProblemKind::Expired, "out of time").into_response();
/// assert_eq!(res.status(), 504);
/// assert_eq!(res.headers()["content-type"], "application/problem+json");
/// assert!(!res.headers().contains_key("server-timing"));
/// ```
impl axum::response::IntoResponse for Problem {
    fn into_response(self) -> axum::response::Response {
        problem_answer(&self)
    }
}

/// Appends the ledger as a `Server-Timing` header (kept next to any the
/// handler set); an empty ledger adds nothing.
pub(crate) fn append_server_timing<B>(res: &mut Response<B>, ledger: &Ledger) {
    if let Some(value) = ledger.header_value() {
        res.headers_mut().append(SERVER_TIMING, value);
    }
}
