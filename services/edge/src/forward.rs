//! `GET`/`POST /checkout`: one attempt at checkout's `/checkout`, its answer
//! passed up as it is.

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use budget_core::client::{BudgetClient, BudgetResponse};
use budget_core::ledger::Ledger;
use budget_core::retry::IDEMPOTENCY_KEY;
use budget_core::server::SERVER_TIMING;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, Method, Uri};
use service_kit::{BodyBytes, RequestLedger};

use crate::{CHECKOUT, X_REQUEST_ID, record_downstream};

/// The route handler; its state is the client of checkout, shared by every
/// request. With `budget_mode = on` the budget layer gives the request its
/// budget and ledger and adds the ledger to the response; with `off` the
/// handler keeps and adds a ledger of its own ([`RequestLedger`]).
pub(crate) async fn forward(
    State(checkout): State<BudgetClient>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    ledger: RequestLedger,
    BodyBytes(body): BodyBytes,
) -> Response {
    let path = match uri.query() {
        Some(query) => format!("/checkout?{query}"),
        None => "/checkout".to_owned(),
    };
    let mut req = checkout
        .request(method, &path)
        .ledger(ledger.ledger().clone());
    for name in [X_REQUEST_ID, CONTENT_TYPE, IDEMPOTENCY_KEY] {
        if let Some(value) = headers.get(&name) {
            req = req.header(name, value.clone());
        }
    }
    if !body.is_empty() {
        req = req.body(body);
    }
    // No header here: the layer in front (budget or ledger) adds the ledger.
    match req.send().await {
        Ok(answer) => pass_up(&answer, ledger.ledger()),
        Err(e) => {
            // 504 when checkout could not be called in budget, did not
            // answer within it or not at all; 503 for an open circuit.
            tracing::warn!(error = %service_kit::error_chain(&e), "checkout failed");
            e.problem().into_response()
        }
    }
}

/// Checkout's answer as edge's: its status, body, `Content-Type` and
/// `Retry-After` as they are (so its `429`/`503` with `Retry-After` and its
/// `504` reach the caller unchanged); its `Server-Timing` metrics go into
/// edge's ledger, prefixed `checkout.`, so one header shows both hops.
fn pass_up(answer: &BudgetResponse, ledger: &Ledger) -> Response {
    let timing: Vec<&str> = answer
        .headers()
        .get_all(SERVER_TIMING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    record_downstream(ledger, &timing.join(", "), CHECKOUT);
    let mut res = Response::new(Body::from(answer.bytes()));
    *res.status_mut() = answer.status();
    for name in [CONTENT_TYPE, RETRY_AFTER] {
        if let Some(value) = answer.headers().get(&name) {
            res.headers_mut().insert(name, value.clone());
        }
    }
    res
}
