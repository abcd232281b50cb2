use std::convert::Infallible;

use axum::extract::FromRequestParts;
use budget_core::ledger::Ledger;
use http::request::Parts;

/// The ledger a handler records its calls in, in both budget modes.
///
/// The layer in front of the route ([`RequestLayer`](crate::RequestLayer):
/// the budget layer with `budget_mode = on`, the ledger layer with `off`)
/// gives every request its ledger and is the one writer of its
/// `Server-Timing` header, so the answer carries one header either way.
/// Outside both layers the handler gets a ledger of its own, which no one
/// writes.
///
/// ```
/// use axum::response::{IntoResponse, Response};
/// use service_kit::RequestLedger;
///
/// async fn handler(ledger: RequestLedger) -> Response {
///     // Calls record into `ledger.ledger()`...
///     "done".into_response()
/// }
/// let app: axum::Router = axum::Router::new().route("/", axum::routing::get(handler));
/// ```
#[derive(Clone, Debug)]
pub struct RequestLedger {
    ledger: Ledger,
}

impl<S: Send + Sync> FromRequestParts<S> for RequestLedger {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self {
            ledger: budget_core::server::request_ledger(parts).unwrap_or_default(),
        })
    }
}

impl RequestLedger {
    /// The ledger, to hand to the request's outbound calls.
    ///
    /// ```
    /// # async fn handler(ledger: service_kit::RequestLedger) {
    /// let ledger: budget_core::ledger::Ledger = ledger.ledger().clone();
    /// # }
    /// ```
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }
}
