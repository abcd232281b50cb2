//! [`OutboundBudget`]: a tower client of `http::Request`s that spends the
//! current request's budget.

use std::error::Error as StdError;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::future::ResponseFuture;
use crate::adapters::outbound::Outbound;
use crate::context;
use crate::floor::Floor;

/// A tower client of `http::Request`s (hyper-util's legacy `Client`, a
/// `tower::ServiceBuilder` stack around one) that spends the current
/// request's budget on each request: see the [module docs](super).
///
/// Made by [`OutboundBudgetLayer`](super::OutboundBudgetLayer), or with
/// [`new`](Self::new). Its error is boxed: the inner client's own, a
/// [`BelowFloor`](crate::floor::BelowFloor) for a request not made, or a
/// [`BudgetElapsed`](super::BudgetElapsed) for one cut off at its deadline.
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use budget_core::adapters::tower::{BudgetElapsed, OutboundBudget};
/// use budget_core::floor::BelowFloor;
/// use bytes::Bytes;
/// use http_body_util::Full;
/// use hyper_util::client::legacy::Client;
/// use hyper_util::rt::TokioExecutor;
/// use tower::ServiceExt;
///
/// // In a handler behind the server layer: no budget argument.
/// async fn quote() -> Result<u16, Box<dyn std::error::Error + Send + Sync>> {
///     let http = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
///     let pricing = OutboundBudget::new(http, "pricing").with_floor(Duration::from_millis(50));
///     let req = http::Request::get("http://127.0.0.1:9000/quote").body(Full::default())?;
///     match pricing.oneshot(req).await {
///         Ok(res) => Ok(res.status().as_u16()),
///         Err(e) if e.is::<BelowFloor>() => Ok(504), // not made
///         Err(e) if e.is::<BudgetElapsed>() => Ok(504), // cut off
///         Err(e) => Err(e),
///     }
/// }
/// ```
#[derive(Clone, Debug)]
pub struct OutboundBudget<S> {
    inner: S,
    outbound: Outbound,
}

impl<S> OutboundBudget<S> {
    /// `inner`, spending the budget on `dependency` (the name its ledger
    /// entries carry), with no floor.
    ///
    /// ```
    /// use budget_core::adapters::tower::OutboundBudget;
    /// let svc = OutboundBudget::new(tower::service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(()))
    /// }), "pricing");
    /// # drop(svc);
    /// ```
    pub fn new(inner: S, dependency: impl Into<Arc<str>>) -> Self {
        Self::from_parts(inner, Outbound::new(dependency.into()))
    }

    pub(super) fn from_parts(inner: S, outbound: Outbound) -> Self {
        Self { inner, outbound }
    }

    /// The same service with a floor: a request is not made when what is
    /// left of the budget, less the reserve, is below it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use budget_core::adapters::tower::OutboundBudget;
    /// let svc = OutboundBudget::new(7u8, "pricing").with_floor(Duration::from_millis(80));
    /// # drop(svc);
    /// ```
    pub fn with_floor(mut self, floor: impl Into<Floor>) -> Self {
        self.outbound = self.outbound.with_floor(floor.into());
        self
    }

    /// The wrapped client.
    ///
    /// ```
    /// use budget_core::adapters::tower::OutboundBudget;
    /// assert_eq!(*OutboundBudget::new(7u8, "pricing").get_ref(), 7);
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped client, mutably.
    ///
    /// ```
    /// use budget_core::adapters::tower::OutboundBudget;
    /// let mut svc = OutboundBudget::new(7u8, "pricing");
    /// *svc.get_mut() = 8;
    /// assert_eq!(svc.into_inner(), 8);
    /// ```
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the client.
    ///
    /// ```
    /// use budget_core::adapters::tower::OutboundBudget;
    /// assert_eq!(OutboundBudget::new(7u8, "pricing").into_inner(), 7);
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, RB> Service<Request<B>> for OutboundBudget<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    type Response = Response<RB>;
    type Error = Box<dyn StdError + Send + Sync>;
    type Future = ResponseFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let Some(cx) = context::current() else {
            // Outside any request's budget: as it came.
            return ResponseFuture::passthrough(self.inner.call(req));
        };
        match self.outbound.admit(&cx, req.headers_mut(), None) {
            Ok(sent) => ResponseFuture::bounded(self.inner.call(req), sent),
            Err(refused) => ResponseFuture::refused(refused.below),
        }
    }
}
