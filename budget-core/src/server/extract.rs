use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use http::request::Parts;

use crate::budget::Budget;
use crate::context::RequestContext;
use crate::ledger::Ledger;
use crate::problem::{Problem, ProblemKind};

/// The budget extractor was used on a route without [`BudgetLayer`](crate::server::BudgetLayer).
///
/// The usual cause is a route added to the router after `.layer(..)`:
/// axum's `Router::layer` wraps the routes added before it only. A server
/// bug, not a client error: it answers `500` with a problem body
/// (`application/problem+json`, type
/// `urn:budget:problem:missing-budget-layer`, docs/contract.md §3), as
/// every other error of the layer does.
///
/// # Example
///
/// ```
/// use axum::response::IntoResponse;
/// use budget_core::server::MissingBudgetLayer;
///
/// assert_eq!(MissingBudgetLayer.status(), 500);
/// let res = MissingBudgetLayer.into_response();
/// assert_eq!(res.status(), 500);
/// assert_eq!(res.headers()["content-type"], "application/problem+json");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, thiserror::Error)]
#[error(
    "no budget on this request: its route is not behind budget_core::server::BudgetLayer \
     (a route added to the router after `.layer(..)` is not wrapped by it): \
     add the route before the layer, or take `Option<Budget>`"
)]
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

    /// The problem answered: `500` `missing-budget-layer`, its `detail`
    /// the [`body_text`](Self::body_text).
    ///
    /// ```
    /// # use budget_core::server::MissingBudgetLayer;
    /// let p = MissingBudgetLayer.problem();
    /// assert_eq!(p.status, 500);
    /// assert_eq!(p.type_uri, "urn:budget:problem:missing-budget-layer");
    /// assert!(p.detail.contains("after `.layer(..)`"));
    /// ```
    pub fn problem(&self) -> Problem {
        Problem::new(ProblemKind::MissingBudgetLayer, self.body_text())
    }
}

/// The [`problem`](MissingBudgetLayer::problem) as
/// `application/problem+json`.
impl IntoResponse for MissingBudgetLayer {
    fn into_response(self) -> Response {
        self.problem().into_response()
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

    use axum::Router;
    use axum::routing::get;

    use super::*;
    use crate::server::ServerConfig;

    /// A route added after `.layer()` is not behind the layer: its `Budget`
    /// extractor's rejection is a problem, like every other error, over a
    /// real loopback connection.
    #[tokio::test]
    async fn a_route_added_after_the_layer_answers_a_problem_not_plain_text() {
        let router =
            Router::new()
                .route(
                    "/early",
                    get(|budget: Budget| async move {
                        format!("{}", budget.remaining().as_millis() > 0)
                    }),
                )
                .layer(ServerConfig::default().layer().unwrap())
                .route("/late", get(|_: Budget| async { "unreachable" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        let client = reqwest::Client::new();

        let early = client
            .get(format!("http://{addr}/early"))
            .send()
            .await
            .unwrap();
        assert_eq!(early.status(), 200);

        let late = client
            .get(format!("http://{addr}/late"))
            .send()
            .await
            .unwrap();
        assert_eq!(late.status(), 500);
        assert_eq!(late.headers()["content-type"], "application/problem+json");
        let problem: Problem = late.json().await.unwrap();
        assert_eq!(problem.type_uri, "urn:budget:problem:missing-budget-layer");
        assert_eq!(problem.status, 500);
        assert!(!problem.retryable);
        assert!(
            problem
                .detail
                .contains("not behind budget_core::server::BudgetLayer"),
            "{}",
            problem.detail
        );
    }

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
