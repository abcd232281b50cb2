//! [`OutboundBudget`]: a tower client of `http::Request`s that spends the
//! current request's budget, through the call engine.

use std::error::Error as StdError;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::future::ResponseFuture;
use crate::adapters::outbound::{Outbound, answer, failure_kind};
use crate::client::DependencyConfig;
use crate::clock::WallClock;
use crate::config::ConfigError;
use crate::context;
use crate::floor::Floor;
use crate::outbound::{AttemptError, AttemptSpec, Head, HeaderRules, Transport, http_outcome};
use crate::retry::Outcome;

type BoxError = Box<dyn StdError + Send + Sync>;

/// A tower client of `http::Request`s (hyper-util's legacy `Client`, a
/// `tower::ServiceBuilder` stack around one) that spends the current
/// request's budget on each request: see the [module docs](super).
///
/// Made by [`OutboundBudgetLayer`](super::OutboundBudgetLayer), or with
/// [`new`](Self::new). Its error is boxed: a
/// [`CallError`](crate::client::CallError) for a request not made (below
/// the floor, circuit open, no concurrency permit) or cut off when its
/// budget ran out, the inner client's own error for a transport failure.
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use budget_core::adapters::tower::OutboundBudget;
/// use budget_core::client::CallError;
/// use bytes::Bytes;
/// use http_body_util::Full;
/// use hyper_util::client::legacy::Client;
/// use hyper_util::rt::TokioExecutor;
/// use tower::ServiceExt;
///
/// // In a handler behind the server layer: no budget argument.
/// async fn quote() -> Result<u16, Box<dyn std::error::Error + Send + Sync>> {
///     let http = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
///     let pricing = OutboundBudget::new(http, "pricing").floor(Duration::from_millis(50));
///     let req = http::Request::get("http://127.0.0.1:9000/quote").body(Full::default())?;
///     match pricing.oneshot(req).await {
///         Ok(res) => Ok(res.status().as_u16()),
///         // Not made, or out of budget: the contract's 504/503 problem.
///         Err(e) if e.is::<CallError>() => Ok(504),
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
    /// `inner`'s requests to the dependency called `dependency` (the name
    /// its ledger entries carry), with no floor.
    ///
    /// ```
    /// use budget_core::adapters::tower::OutboundBudget;
    /// let svc = OutboundBudget::new(tower::service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(()))
    /// }), "pricing");
    /// assert_eq!(svc.dependency(), "pricing");
    /// ```
    pub fn new(inner: S, dependency: impl Into<Arc<str>>) -> Self {
        Self::from_parts(inner, Outbound::new(dependency.into()))
    }

    /// `inner`'s requests with everything `config` gives a
    /// `BudgetClient`: its floor (learned
    /// or fixed), breaker, concurrency limit and permit queue, timeout
    /// mode, default budget outside a request and `forward`. A request is
    /// sent once (its body is not replayed), so the retry policy's
    /// attempts beyond the first are not used.
    ///
    /// # Errors
    ///
    /// The first invalid field, named as
    /// `DependencyConfig::build`
    /// names it.
    ///
    /// ```
    /// use budget_core::adapters::tower::OutboundBudget;
    /// use budget_core::client::DependencyConfig;
    /// let inner = tower::service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(()))
    /// });
    /// let config = DependencyConfig::new("pricing", "http://127.0.0.1:9000");
    /// let svc = OutboundBudget::from_config(inner, &config).unwrap();
    /// assert_eq!(svc.dependency(), "pricing");
    /// ```
    pub fn from_config(inner: S, config: &DependencyConfig) -> Result<Self, ConfigError> {
        Ok(Self::from_parts(inner, Outbound::from_config(config)?))
    }

    pub(super) fn from_parts(inner: S, outbound: Outbound) -> Self {
        Self { inner, outbound }
    }

    /// The same, with a fixed floor: a request is not made when what is
    /// left of the budget, less the reserve, is below it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::adapters::tower::OutboundBudget;
    /// let svc = OutboundBudget::new((), "pricing").floor(Duration::from_millis(50));
    /// assert_eq!(svc.current_floor().get(), Duration::from_millis(50));
    /// ```
    pub fn floor(mut self, floor: impl Into<Floor>) -> Self {
        self.outbound = self.outbound.with_floor(floor.into());
        self
    }

    /// The old name of [`floor`](Self::floor).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # #[allow(deprecated)]
    /// let svc = budget_core::adapters::tower::OutboundBudget::new((), "pricing")
    ///     .with_floor(Duration::from_millis(50));
    /// assert_eq!(svc.current_floor().get(), Duration::from_millis(50));
    /// ```
    #[deprecated(note = "renamed to `floor`, as `GrpcBudgetLayer::floor`")]
    pub fn with_floor(self, floor: impl Into<Floor>) -> Self {
        self.floor(floor)
    }

    /// The dependency's name.
    ///
    /// ```
    /// let svc = budget_core::adapters::tower::OutboundBudget::new((), "pricing");
    /// assert_eq!(svc.dependency(), "pricing");
    /// ```
    pub fn dependency(&self) -> &str {
        self.outbound.dependency()
    }

    /// The floor now (zero unless set; a learned floor's current value).
    ///
    /// ```
    /// let svc = budget_core::adapters::tower::OutboundBudget::new((), "pricing");
    /// assert!(svc.current_floor().get().is_zero());
    /// ```
    pub fn current_floor(&self) -> Floor {
        self.outbound.floor()
    }

    /// The inner client.
    ///
    /// ```
    /// let svc = budget_core::adapters::tower::OutboundBudget::new(7, "pricing");
    /// assert_eq!(*svc.get_ref(), 7);
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner client, mutably.
    ///
    /// ```
    /// let mut svc = budget_core::adapters::tower::OutboundBudget::new(7, "pricing");
    /// *svc.get_mut() = 8;
    /// assert_eq!(*svc.get_ref(), 8);
    /// ```
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner client, unwrapped.
    ///
    /// ```
    /// let svc = budget_core::adapters::tower::OutboundBudget::new(7, "pricing");
    /// assert_eq!(svc.into_inner(), 7);
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, RB> Service<Request<B>> for OutboundBudget<S>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError> + Send,
    B: Send + 'static,
    RB: Send + 'static,
{
    type Response = Response<RB>;
    type Error = BoxError;
    type Future = ResponseFuture<Response<RB>>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // The ready service for this call; a clone waits for the next.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let cx = context::current();
        let Some(resolved) = self.outbound.resolve(cx.as_ref()) else {
            // No budget to spend (outside any request): as it came.
            let answered = inner.call(req);
            return ResponseFuture::new(async move { answered.await.map_err(Into::into) });
        };
        let outbound = self.outbound.clone();
        ResponseFuture::new(async move {
            // Sent once: its body is not replayed.
            let plan = resolved.plan(req.method().clone(), false);
            let transport = Client {
                inner: Mutex::new(inner),
                request: Mutex::new(Some(req)),
                failed: Mutex::new(None),
            };
            let result = outbound.call(plan, &transport).await;
            answer(result, transport.failed, |e| Box::new(e) as BoxError)
        })
    }
}

/// The inner client as a [`Transport`] for one request, sent once.
struct Client<S, B> {
    /// Behind a lock only to be called from the call's task (a client
    /// need not be `Sync`).
    inner: Mutex<S>,
    request: Mutex<Option<Request<B>>>,
    /// The inner client's own error, given back as it came.
    failed: Mutex<Option<BoxError>>,
}

impl<S, B, RB> Transport for Client<S, B>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send,
    S::Future: Send,
    S::Error: Into<BoxError> + Send,
    B: Send,
    RB: Send,
{
    type Answer = Response<RB>;
    type Error = BoxError;

    async fn send(&self, spec: AttemptSpec, rules: &HeaderRules) -> Result<Response<RB>, BoxError> {
        let taken = self
            .request
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(mut req) = taken else {
            return Err(Box::new(SentOnce));
        };
        self.stamp(req.headers_mut(), rules, spec.budget);
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        std::future::poll_fn(|task| inner.poll_ready(task))
            .await
            .map_err(Into::into)?;
        inner.call(req).await.map_err(Into::into)
    }

    fn classify(&self, answer: &Response<RB>, clock: &dyn WallClock) -> Outcome {
        http_outcome(answer, clock)
    }

    fn head<'a>(&self, answer: &'a Response<RB>) -> Option<Head<'a>> {
        Some(Head::new(answer.headers(), None))
    }

    fn classify_error(&self, error: BoxError) -> AttemptError {
        let kind = failure_kind(&*error);
        // Our own refusal to send the body twice says nothing of the
        // endpoint: neutral to its breaker.
        let ours = error.is::<SentOnce>();
        let described = error.to_string();
        *self.failed.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
        if ours {
            AttemptError::neutral(kind, described)
        } else {
            AttemptError::new(kind, described)
        }
    }
}

/// A second attempt of a request whose body was sent: never made, as the
/// engine sends such a request once.
#[derive(Debug, thiserror::Error)]
#[error("the request was sent once and its body cannot be sent again")]
struct SentOnce;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::CallError;

    #[test]
    fn a_call_error_is_what_the_caller_downcasts_to() {
        let e: BoxError = Box::new(CallError::new(
            Arc::from("pricing"),
            crate::client::CallErrorKind::BelowFloor,
        ));
        assert!(
            e.downcast_ref::<CallError>()
                .is_some_and(CallError::is_below_floor)
        );
    }

    /// A client that answers `200` at once.
    #[derive(Clone)]
    struct Answers;

    impl Service<Request<()>> for Answers {
        type Response = Response<()>;
        type Error = BoxError;
        type Future = std::future::Ready<Result<Response<()>, BoxError>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            std::future::ready(Ok(Response::new(())))
        }
    }

    #[test]
    fn our_refusal_to_send_twice_is_neutral_to_the_breaker_and_the_clients_failure_is_not() {
        use crate::breaker::Verdict;
        let client = Client {
            inner: Mutex::new(Answers),
            request: Mutex::new(None::<Request<()>>),
            failed: Mutex::new(None),
        };
        let ours = client.classify_error(Box::new(SentOnce));
        assert_eq!(ours.verdict, Verdict::Neutral);
        let theirs = client.classify_error(Box::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        assert_eq!(theirs.verdict, Verdict::Failure);
        let failed = client.failed.lock().unwrap().take();
        assert!(
            failed.is_some_and(|e| e.is::<std::io::Error>()),
            "given back as it came"
        );
    }
}
