use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use http::request::Parts;

use crate::budget::Budget;
use crate::context::RequestContext;
use crate::ledger::Ledger;

/// The budget extractor was used on a route without [`BudgetLayer`](crate::server::BudgetLayer).
///
/// A server bug, not a client error: answers `500` with a plain-text body.
///
/// # Example
///
/// ```
/// use axum::response::IntoResponse;
/// use budget_core::server::MissingBudgetLayer;
///
/// assert_eq!(MissingBudgetLayer.status(), 500);
/// assert_eq!(MissingBudgetLayer.into_response().status(), 500);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, thiserror::Error)]
#[error("no budget on this request: add budget_core::server::BudgetLayer to the router")]
pub struct MissingBudgetLayer;

impl MissingBudgetLayer {
    /// The status of the rejection (`500`).
    ///
    /// ```
    /// # use budget_core::server::MissingBudgetLayer;
    /// assert_eq!(MissingBudgetLayer.status(), http::StatusCode::INTERNAL_SERVER_ERROR);
    /// ```
    pub fn status(&self) -> StatusCode {
        StatusCode::INTERNAL_SERVER_ERROR
    }

    /// The body text of the rejection.
    ///
    /// ```
    /// # use budget_core::server::MissingBudgetLayer;
    /// assert!(MissingBudgetLayer.body_text().contains("BudgetLayer"));
    /// ```
    pub fn body_text(&self) -> String {
        self.to_string()
    }
}

impl IntoResponse for MissingBudgetLayer {
    fn into_response(self) -> Response {
        (self.status(), self.body_text()).into_response()
    }
}

/// The request's context, as every extractor here finds it: the one the
/// budget layer runs the handler in (the [`context`](crate::context)
/// scope), or else one a middleware put in the request's extensions.
/// `None` outside the budget layer.
///
/// The layer does not put the context in the extensions itself: a map
/// entry costs three allocations on every request, and code inside the
/// layer reaches the context through its scope anyway.
///
/// # Example
///
/// ```
/// let (parts, ()) = http::Request::new(()).into_parts();
/// assert!(budget_core::server::request_context(&parts).is_none());
/// ```
pub fn request_context(parts: &Parts) -> Option<RequestContext> {
    crate::context::current().or_else(|| parts.extensions.get::<RequestContext>().cloned())
}

/// Extracts the request's [`RequestContext`] (budget, ledger, reserve).
impl<S: Send + Sync> FromRequestParts<S> for RequestContext {
    type Rejection = MissingBudgetLayer;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        request_context(parts).ok_or(MissingBudgetLayer)
    }
}

/// The request's budget, found as [`request_context`] finds the context,
/// without cloning it (nor sharing its ledger).
fn request_budget(parts: &Parts) -> Option<Budget> {
    crate::context::current_budget().or_else(|| {
        parts
            .extensions
            .get::<RequestContext>()
            .map(|cx| cx.budget())
    })
}

/// Extracts the request's [`Budget`]; rejects with [`MissingBudgetLayer`]
/// when the route has no budget layer (use `Option<Budget>` to allow that).
impl<S: Send + Sync> FromRequestParts<S> for Budget {
    type Rejection = MissingBudgetLayer;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        request_budget(parts).ok_or(MissingBudgetLayer)
    }
}

/// `Option<Budget>`: `None` on a route without the budget layer.
impl<S: Send + Sync> OptionalFromRequestParts<S> for Budget {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Option<Self>, Self::Rejection> {
        Ok(request_budget(parts))
    }
}

/// The request's ledger: its context's, or else the one a
/// [`LedgerLayer`](crate::server::LedgerLayer) gave it (a service with its
/// budget off). `None` outside both layers.
///
/// ```
/// let (parts, ()) = http::Request::new(()).into_parts();
/// assert!(budget_core::server::request_ledger(&parts).is_none());
/// ```
pub fn request_ledger(parts: &Parts) -> Option<Ledger> {
    request_context(parts)
        .map(|cx| cx.ledger().clone())
        .or_else(|| parts.extensions.get::<Ledger>().cloned())
}

/// Extracts the request's [`Ledger`], to record the handler's own steps
/// (from [`BudgetLayer`](crate::server::BudgetLayer) or
/// [`LedgerLayer`](crate::server::LedgerLayer)).
impl<S: Send + Sync> FromRequestParts<S> for Ledger {
    type Rejection = MissingBudgetLayer;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        request_ledger(parts).ok_or(MissingBudgetLayer)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn the_scoped_context_comes_first_then_the_extensions() {
        let (mut parts, ()) = http::Request::new(()).into_parts();
        assert!(request_context(&parts).is_none(), "no layer, nothing put");
        let inserted = RequestContext::new(Budget::new(Duration::from_secs(7)));
        parts.extensions.insert(inserted);
        let found = request_context(&parts).expect("a middleware's context");
        assert_eq!(found.budget().original(), Duration::from_secs(7));
        let scoped = RequestContext::new(Budget::new(Duration::from_secs(3)));
        let found = scoped
            .scope(async { request_context(&parts) })
            .await
            .expect("the layer's context");
        assert_eq!(found.budget().original(), Duration::from_secs(3));
    }
}
