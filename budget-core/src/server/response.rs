use axum::body::Body;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};

use crate::ledger::Ledger;
use crate::problem::{self, Problem};
use crate::server::SERVER_TIMING;

/// A problem+json response carrying `ledger` as `Server-Timing`, and
/// `Retry-After` (whole seconds, rounded up) when the problem says when to
/// retry.
///
/// Used by the budget layer for its own answers, and by handlers that pass
/// a dependency's problem up.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::Ledger;
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
    let status = StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut res = Response::new(Body::from(problem.to_json()));
    *res.status_mut() = status;
    let headers = res.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static(problem::CONTENT_TYPE),
    );
    if let Some(secs) = problem.retry_after_secs() {
        headers.insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    append_server_timing(&mut res, ledger);
    res
}

/// Appends the ledger as a `Server-Timing` header (kept next to any the
/// handler set); an empty ledger adds nothing.
pub(crate) fn append_server_timing<B>(res: &mut Response<B>, ledger: &Ledger) {
    if let Some(value) = ledger.header_value() {
        res.headers_mut().append(SERVER_TIMING, value);
    }
}
