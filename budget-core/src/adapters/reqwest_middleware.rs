//! [`BudgetMiddleware`]: the request's budget on a `reqwest-middleware`
//! client, for a stack that already has its middlewares (tracing, retries,
//! auth) and does not move to [`BudgetClient`](crate::client::BudgetClient).
//!
//! Inside a request's budget scope (the [server layer][server-layer], or
//! [`RequestContext::scope`](crate::context::RequestContext::scope)), each
//! request that passes through it runs through the outbound engine
//! (docs/adapters.md):
//!
//! 1. it is not made when what is left of the budget, less the reserve,
//!    is below the floor (zero by default: a spent budget), when its
//!    circuit is open or no concurrency permit comes in time: the ledger
//!    says why (`skipped: 30ms < floor 50ms`), and the error is
//!    `reqwest_middleware::Error::Middleware` holding a [`CallError`];
//! 2. it carries `request-budget-ms` = what is left less the reserve,
//!    rounded down (replacing any value already there),
//!    `request-criticality` (unless it has one) and, when it has no
//!    `traceparent`, the trace context, as a `BudgetClient` call does
//!    (docs/contract.md §1, "Outbound"; neither of the first two with
//!    `forward = false`);
//! 3. it gets that much as its reqwest timeout (`Request::timeout_mut`,
//!    which covers the body too), never more than a timeout it already had
//!    nor than [`attempt_timeout`](BudgetMiddleware::attempt_timeout): a
//!    request cut off there is a [`CallError`] of kind `Timeout` (the
//!    contract's `504`);
//! 4. it is recorded in the request's ledger with its dependency's name,
//!    the time until its answer's head and what came back
//!    (`pricing;dur=41`, `desc="503"`, `desc="timeout"`,
//!    `desc="connect"`), with the client's metrics and attempt span.
//!
//! A transport failure is reqwest's own error (`Error::Reqwest`), as it
//! came, so that a retry middleware outside reads it as its own.
//! `CallError: From<reqwest_middleware::Error>`, so a handler answering
//! with [`CallError`] uses `?` on the call.
//!
//! Outside any budget scope, with no `default_budget`, a request passes
//! through untouched: no header, no timeout, no ledger entry.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
//! use budget_core::client::CallError;
//! use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
//!
//! // The retry middleware first (outside), this one after it: each retry
//! // is then checked and stamped with what is left at that moment.
//! fn pricing_client(retries: impl reqwest_middleware::Middleware) -> ClientWithMiddleware {
//!     ClientBuilder::new(reqwest::Client::new())
//!         .with(retries)
//!         .with(BudgetMiddleware::new("pricing").floor(Duration::from_millis(50)))
//!         .build()
//! }
//!
//! // In a handler behind the server layer: no budget argument, and `?`
//! // answers a call not made or out of budget with the contract's 504.
//! async fn quote(pricing: &ClientWithMiddleware) -> Result<String, CallError> {
//!     let res = pricing.get("http://127.0.0.1:9000/quote").send().await?;
//!     Ok(res.text().await.unwrap_or_default())
//! }
//! ```
//!
#![cfg_attr(feature = "server", doc = "[server-layer]: crate::server")]
#![cfg_attr(not(feature = "server"), doc = "[server-layer]: crate::docs::server")]

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{Error, Middleware, Next, Result};

use super::outbound::{Outbound, answer, failure_kind};
use crate::client::transport::head_failure;
use crate::client::{CallError, DependencyConfig};
use crate::clock::WallClock;
use crate::config::ConfigError;
use crate::context;
use crate::floor::Floor;
use crate::outbound::{AttemptError, AttemptSpec, Head, HeaderRules, Transport, http_outcome};
use crate::retry::{Outcome, is_idempotent};

/// A `reqwest_middleware::Middleware` that spends the current request's
/// budget on one dependency: the floor, the budget headers, the budget as
/// the timeout, the ledger entry (see the [module docs](self)).
///
/// One per dependency, named as its ledger entries should be; cheap to
/// clone.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
/// use budget_core::floor::Floor;
///
/// let pricing = BudgetMiddleware::new("pricing")
///     .floor(Duration::from_millis(50))
///     .attempt_timeout(Duration::from_secs(2));
/// assert_eq!(pricing.dependency(), "pricing");
/// assert_eq!(pricing.current_floor(), Floor::new(Duration::from_millis(50)));
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(pricing)
///     .build();
/// # drop(client);
/// ```
#[derive(Clone, Debug)]
pub struct BudgetMiddleware {
    outbound: Outbound,
    attempt_timeout: Option<Duration>,
}

impl BudgetMiddleware {
    /// The middleware for `dependency` (the name its ledger entries and
    /// errors carry), with no floor, no attempt timeout of its own and no
    /// retries of its own (the stack's retry middleware retries).
    ///
    /// ```
    /// use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
    /// let m = BudgetMiddleware::new("inventory");
    /// assert!(m.current_floor().get().is_zero());
    /// assert_eq!(m.attempt_timeout_limit(), None);
    /// ```
    pub fn new(dependency: impl Into<Arc<str>>) -> Self {
        Self {
            outbound: Outbound::new(dependency.into()),
            attempt_timeout: None,
        }
    }

    /// The middleware with everything `config` gives a
    /// [`BudgetClient`](crate::client::BudgetClient) of the same
    /// dependency, on this stack's client: its floor (learned or fixed),
    /// retry policy and retry budget, breaker, concurrency limit and
    /// permit queue, timeout mode, default budget outside a request, and
    /// `forward`. The URL only names the breaker's endpoint: the stack
    /// sends each request where its URL says.
    ///
    /// # Errors
    ///
    /// The first invalid field, named as
    /// [`DependencyConfig::build`] names it.
    ///
    /// ```
    /// use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
    /// use budget_core::client::DependencyConfig;
    /// let mut config = DependencyConfig::new("pricing", "http://127.0.0.1:9000");
    /// config.concurrency = Some(8.into());
    /// let m = BudgetMiddleware::from_config(&config).unwrap();
    /// assert_eq!(m.dependency(), "pricing");
    /// ```
    pub fn from_config(config: &DependencyConfig) -> std::result::Result<Self, ConfigError> {
        Ok(Self {
            outbound: Outbound::from_config(config)?,
            // The retry policy's own attempt timeout caps each attempt.
            attempt_timeout: None,
        })
    }

    /// The same middleware with a fixed floor: a request is not made when
    /// what is left of the budget, less the reserve, is below it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
    /// let m = BudgetMiddleware::new("pricing").floor(Duration::from_millis(80));
    /// assert_eq!(m.current_floor().get(), Duration::from_millis(80));
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
    /// let m = budget_core::adapters::reqwest_middleware::BudgetMiddleware::new("pricing")
    ///     .with_floor(Duration::from_millis(80));
    /// assert_eq!(m.current_floor().get(), Duration::from_millis(80));
    /// ```
    #[deprecated(note = "renamed to `floor`, as `GrpcBudgetLayer::floor`")]
    pub fn with_floor(self, floor: impl Into<Floor>) -> Self {
        self.floor(floor)
    }

    /// The same middleware with an attempt timeout: the longest one
    /// request may take even with more budget left (the header says the
    /// shorter too).
    ///
    /// A request's own timeout (`RequestBuilder::timeout`) is honoured
    /// as it is. A client-wide one (`ClientBuilder::timeout`) is not
    /// visible here, and reqwest lets a request's timeout replace it: give
    /// it here as well to keep it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
    /// let m = BudgetMiddleware::new("pricing").attempt_timeout(Duration::from_secs(1));
    /// assert_eq!(m.attempt_timeout_limit(), Some(Duration::from_secs(1)));
    /// ```
    pub fn attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = Some(timeout);
        self
    }

    /// The old name of [`attempt_timeout`](Self::attempt_timeout).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # #[allow(deprecated)]
    /// let m = budget_core::adapters::reqwest_middleware::BudgetMiddleware::new("pricing")
    ///     .with_attempt_timeout(Duration::from_secs(1));
    /// assert_eq!(m.attempt_timeout_limit(), Some(Duration::from_secs(1)));
    /// ```
    #[deprecated(note = "renamed to `attempt_timeout`")]
    pub fn with_attempt_timeout(self, timeout: Duration) -> Self {
        self.attempt_timeout(timeout)
    }

    /// The dependency's name.
    ///
    /// ```
    /// use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
    /// assert_eq!(BudgetMiddleware::new("pricing").dependency(), "pricing");
    /// ```
    pub fn dependency(&self) -> &str {
        self.outbound.dependency()
    }

    /// The floor now (zero unless set; a learned floor's current value).
    ///
    /// ```
    /// use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
    /// assert!(BudgetMiddleware::new("pricing").current_floor().get().is_zero());
    /// ```
    pub fn current_floor(&self) -> Floor {
        self.outbound.floor()
    }

    /// The attempt timeout, if one was set.
    ///
    /// ```
    /// use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
    /// assert_eq!(BudgetMiddleware::new("pricing").attempt_timeout_limit(), None);
    /// ```
    pub fn attempt_timeout_limit(&self) -> Option<Duration> {
        self.attempt_timeout
    }
}

#[async_trait::async_trait]
impl Middleware for BudgetMiddleware {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> Result<Response> {
        let cx = context::current();
        let cap = [req.timeout().copied(), self.attempt_timeout]
            .into_iter()
            .flatten()
            .min();
        let Some(resolved) = self.outbound.resolve(cx.as_ref()) else {
            // No budget to spend (outside any request): as it came.
            return next.run(req, extensions).await;
        };
        // Sent again only when the policy retries, the request is safe to
        // send twice, and its body can be replayed.
        let again = (self.outbound.max_attempts() > 1
            && is_idempotent(req.method(), req.headers()))
        .then(|| req.try_clone())
        .flatten();
        let mut plan = resolved.plan(req.method().clone(), again.is_some());
        plan.attempt_timeout = cap;
        let transport = Stack {
            first: Mutex::new(Some(req)),
            again,
            spare: extensions.clone(),
            extensions: Mutex::new(Some(extensions)),
            next,
            failed: Mutex::new(None),
        };
        let result = self.outbound.call(plan, &transport).await;
        answer(result, transport.failed, Error::middleware)
    }
}

/// The rest of the stack as a [`Transport`]: each attempt goes on through
/// `next`, with reqwest's timeout set to the attempt's window.
struct Stack<'a, 'e> {
    /// The request as it came, for the first attempt.
    first: Mutex<Option<Request>>,
    /// A copy to clone for each attempt after the first.
    again: Option<Request>,
    /// The stack's extensions, lent to one attempt at a time.
    extensions: Mutex<Option<&'e mut Extensions>>,
    /// A copy of them for an attempt sent while another has them (a hedge).
    spare: Extensions,
    next: Next<'a>,
    /// The stack's own error of the last attempt that failed, given back
    /// as it came.
    failed: Mutex<Option<Error>>,
}

impl Transport for Stack<'_, '_> {
    type Answer = Response;
    type Error = Error;

    async fn send(&self, spec: AttemptSpec, rules: &HeaderRules) -> Result<Response> {
        let taken = self
            .first
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(mut req) = taken.or_else(|| self.again.as_ref()?.try_clone()) else {
            return Err(Error::middleware(NotReplayable));
        };
        self.stamp(req.headers_mut(), rules, spec.budget);
        if let Some(budget) = spec.budget {
            // The deadline covers the body too: reqwest's own timeout,
            // the attempt's window (never longer than the request's own).
            *req.timeout_mut() = Some(budget);
        }
        let lent = self
            .extensions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match lent {
            Some(extensions) => {
                let answered = self.next.clone().run(req, &mut *extensions).await;
                *self
                    .extensions
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(extensions);
                answered
            }
            None => {
                let mut spare = self.spare.clone();
                self.next.clone().run(req, &mut spare).await
            }
        }
    }

    fn classify(&self, answer: &Response, clock: &dyn WallClock) -> Outcome {
        let mut head = http::Response::new(());
        *head.status_mut() = answer.status();
        // Only what the outcome reads: the status and `Retry-After`.
        if let Some(after) = answer.headers().get(http::header::RETRY_AFTER) {
            head.headers_mut()
                .insert(http::header::RETRY_AFTER, after.clone());
        }
        http_outcome(&head, clock)
    }

    fn head<'a>(&self, answer: &'a Response) -> Option<Head<'a>> {
        Some(Head::new(answer.headers(), None))
    }

    fn classify_error(&self, error: Error) -> AttemptError {
        let kind = match &error {
            Error::Reqwest(e) => head_failure(e),
            Error::Middleware(e) => failure_kind(&**e),
        };
        // Our own refusal to send the body twice says nothing of the
        // endpoint: neutral to its breaker.
        let ours = matches!(&error, Error::Middleware(e) if e.is::<NotReplayable>());
        let described = error.to_string();
        *self.failed.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
        if ours {
            AttemptError::neutral(kind, described)
        } else {
            AttemptError::new(kind, described)
        }
    }
}

/// The [`CallError`] `error` is, or holds as a middleware error (a
/// `reqwest_middleware::Error` is transparent: its source skips the
/// error it holds).
fn call_error_in<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a CallError> {
    error
        .downcast_ref::<CallError>()
        .or_else(|| match error.downcast_ref::<Error>()? {
            Error::Middleware(e) => e.downcast_ref::<CallError>(),
            Error::Reqwest(_) => None,
        })
}

/// An attempt after the first of a request whose body cannot be sent
/// twice: never made, as the engine retries only replayable requests.
#[derive(Debug, thiserror::Error)]
#[error("the request's body cannot be sent again")]
struct NotReplayable;

impl From<Error> for CallError {
    /// A `reqwest_middleware` error as the [`CallError`] a handler answers
    /// with: the middleware's own `CallError` as it is (a call not made,
    /// or out of budget), any other failure sorted by its kind (connect,
    /// reset, timeout) under the dependency named by its URL's host, so
    /// that `?` gives the same problem+json as a `BudgetClient` call.
    ///
    /// ```
    /// use budget_core::client::{CallError, CallErrorKind};
    /// let refused = CallError::from(reqwest_middleware::Error::middleware(std::io::Error::from(
    ///     std::io::ErrorKind::ConnectionRefused,
    /// )));
    /// assert_eq!(refused.kind(), CallErrorKind::Connect);
    /// ```
    fn from(error: Error) -> Self {
        match error {
            Error::Middleware(e) => match e.downcast::<CallError>() {
                Ok(call) => call,
                Err(e) => {
                    // Wrapped by a middleware outside (reqwest-retry's
                    // `RetryError`): the call error in its chain, its
                    // wrapper kept as the source.
                    let found = e.chain().find_map(call_error_in);
                    if let Some(call) = found.map(CallError::echo) {
                        return call.with_source(e);
                    }
                    let kind = failure_kind(&*e);
                    CallError::from_transport(Arc::from("reqwest-middleware"), kind).with_source(e)
                }
            },
            Error::Reqwest(e) => {
                let name: Arc<str> = e
                    .url()
                    .and_then(|u| u.host_str())
                    .unwrap_or("reqwest")
                    .into();
                CallError::from_transport(name, head_failure(&e)).with_source(e.without_url())
            }
        }
    }
}
