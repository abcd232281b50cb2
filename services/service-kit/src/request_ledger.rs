use std::convert::Infallible;

use axum::extract::FromRequestParts;
use axum::response::Response;
use budget_core::ledger::Ledger;
use budget_core::server::SERVER_TIMING;
use http::HeaderValue;
use http::request::Parts;

/// The ledger a handler records its calls in, with or without the budget
/// layer in front of it.
///
/// With `budget_mode = on`, the budget layer gives every request its ledger
/// (in its [`RequestContext`]) and adds it to the response as
/// `Server-Timing`. With `off` there is no layer: this extractor then makes
/// the handler a ledger of its own (attempts and waits, for the
/// side-by-side tables), and [`finish`](Self::finish) adds it itself.
/// Either way the answer carries one `Server-Timing` header.
///
/// ```
/// use axum::response::{IntoResponse, Response};
/// use service_kit::RequestLedger;
///
/// async fn handler(ledger: RequestLedger) -> Response {
///     // Calls record into `ledger.ledger()`...
///     ledger.finish("done".into_response())
/// }
/// let app: axum::Router = axum::Router::new().route("/", axum::routing::get(handler));
/// ```
#[derive(Clone, Debug)]
pub struct RequestLedger {
    ledger: Ledger,
    /// No budget layer: the ledger is the handler's and it adds the header.
    own: bool,
}

impl<S: Send + Sync> FromRequestParts<S> for RequestLedger {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(match budget_core::server::request_context(parts) {
            Some(cx) => Self {
                ledger: cx.ledger().clone(),
                own: false,
            },
            None => Self {
                ledger: Ledger::new(),
                own: true,
            },
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

    /// `res` with the ledger as its `Server-Timing` header when there is no
    /// budget layer to add it and the ledger is not empty; `res` unchanged
    /// otherwise.
    ///
    /// ```
    /// use axum::extract::FromRequestParts;
    /// use axum::response::IntoResponse;
    /// use budget_core::ledger::Entry;
    /// use service_kit::RequestLedger;
    ///
    /// # #[tokio::main] async fn main() {
    /// let (mut parts, ()) = http::Request::new(()).into_parts();
    /// let ledger = RequestLedger::from_request_parts(&mut parts, &()).await.unwrap();
    /// assert!(!ledger.finish("ok".into_response()).headers().contains_key("server-timing"));
    /// ledger.ledger().record(Entry::skip("recommendations", "skipped: circuit open"));
    /// let res = ledger.finish("ok".into_response());
    /// assert_eq!(res.headers()["server-timing"], "recommendations;desc=\"skipped: circuit open\"");
    /// # }
    /// ```
    pub fn finish(&self, mut res: Response) -> Response {
        if self.own
            && !self.ledger.is_empty()
            && let Ok(value) = HeaderValue::try_from(self.ledger.server_timing())
        {
            res.headers_mut().insert(SERVER_TIMING, value);
        }
        res
    }
}
