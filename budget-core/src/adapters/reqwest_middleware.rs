//! [`BudgetMiddleware`]: the request's budget on a `reqwest-middleware`
//! client, for a stack that already has its middlewares (tracing, retries,
//! auth) and does not move to [`BudgetClient`](crate::client::BudgetClient).
//!
//! Inside a request's budget scope (the [server layer][server-layer], or
//! [`RequestContext::scope`](crate::context::RequestContext::scope)), each
//! request that passes through it:
//!
//! 1. is not made when what is left of the budget, less the reserve, is
//!    below the middleware's floor (zero by default: a spent budget): the
//!    ledger says `skipped: 30ms < floor 50ms`, and the error is
//!    [`reqwest_middleware::Error::Middleware`] holding a
//!    [`CallError`] of kind
//!    [`BelowFloor`](crate::client::CallErrorKind::BelowFloor), to
//!    `downcast_ref`;
//! 2. carries `request-budget-ms` = what is left less the reserve, rounded
//!    down (replacing any value already there), `request-criticality`
//!    (unless it has one) and, when it has no `traceparent`, the one the
//!    request came with, as a `BudgetClient` call does (docs/contract.md
//!    §1, "Outbound");
//! 3. gets that much as its reqwest timeout ([`reqwest::Request::timeout_mut`],
//!    which covers the body too), never more than a timeout it already had
//!    nor than [`with_attempt_timeout`](BudgetMiddleware::with_attempt_timeout):
//!    a request cut off there fails with reqwest's own timeout error
//!    (`is_timeout()`), as any reqwest timeout does;
//! 4. is recorded in the request's ledger with its dependency's name,
//!    the time until its answer's head and what came back (`pricing;dur=41`,
//!    `desc="503"`, `desc="timeout"`, `desc="connect"`).
//!
//! Outside any budget scope a request passes through untouched: no header,
//! no timeout, no ledger entry.
//!
//! See the [module docs](super) for where it goes in a stack and what it
//! leaves to others.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
//! use budget_core::client::CallError;
//! use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Error};
//!
//! // The retry middleware first (outside), this one after it: each retry
//! // is then checked and stamped with what is left at that moment.
//! fn pricing_client(retries: impl reqwest_middleware::Middleware) -> ClientWithMiddleware {
//!     ClientBuilder::new(reqwest::Client::new())
//!         .with(retries)
//!         .with(BudgetMiddleware::new("pricing").with_floor(Duration::from_millis(50)))
//!         .build()
//! }
//!
//! // In a handler behind the server layer: no budget argument.
//! async fn quote(pricing: &ClientWithMiddleware) -> Result<String, Box<dyn std::error::Error>> {
//!     match pricing.get("http://127.0.0.1:9000/quote").send().await {
//!         Ok(res) => Ok(res.text().await?),
//!         // Not made: too little budget left. `CallError::problem` is the
//!         // contract's 504, should the handler answer with it instead.
//!         Err(Error::Middleware(e))
//!             if e.downcast_ref::<CallError>().is_some_and(|e| e.is_below_floor()) =>
//!         {
//!             Ok("no quote in time".to_owned())
//!         }
//!         Err(e) => Err(e.into()),
//!     }
//! }
//! ```
//!
#![cfg_attr(feature = "server", doc = "[server-layer]: crate::server")]
#![cfg_attr(not(feature = "server"), doc = "[server-layer]: crate::docs::server")]

use std::sync::Arc;
use std::time::Duration;

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{Error, Middleware, Next, Result};

use super::outbound::{Outbound, Refused, failure_kind};
use crate::client::attempt::head_failure;
use crate::client::{CallError, CallErrorKind};
use crate::context;
use crate::floor::Floor;
use crate::retry::Outcome;

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
///     .with_floor(Duration::from_millis(50))
///     .with_attempt_timeout(Duration::from_secs(2));
/// assert_eq!(pricing.dependency(), "pricing");
/// assert_eq!(pricing.floor(), Floor::new(Duration::from_millis(50)));
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
    /// errors carry), with no floor and no attempt timeout of its own.
    ///
    /// ```
    /// use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
    /// let m = BudgetMiddleware::new("inventory");
    /// assert!(m.floor().get().is_zero());
    /// assert_eq!(m.attempt_timeout(), None);
    /// ```
    pub fn new(dependency: impl Into<Arc<str>>) -> Self {
        Self {
            outbound: Outbound::new(dependency.into()),
            attempt_timeout: None,
        }
    }

    /// The same middleware with a floor: a request is not made when what
    /// is left of the budget, less the reserve, is below it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
    /// let m = BudgetMiddleware::new("pricing").with_floor(Duration::from_millis(80));
    /// assert_eq!(m.floor().get(), Duration::from_millis(80));
    /// ```
    pub fn with_floor(mut self, floor: impl Into<Floor>) -> Self {
        self.outbound = self.outbound.with_floor(floor.into());
        self
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
    /// let m = BudgetMiddleware::new("pricing").with_attempt_timeout(Duration::from_secs(1));
    /// assert_eq!(m.attempt_timeout(), Some(Duration::from_secs(1)));
    /// ```
    pub fn with_attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = Some(timeout);
        self
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

    /// The floor (zero unless set).
    ///
    /// ```
    /// use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
    /// assert!(BudgetMiddleware::new("pricing").floor().get().is_zero());
    /// ```
    pub fn floor(&self) -> Floor {
        self.outbound.floor()
    }

    /// The attempt timeout, if one was set.
    ///
    /// ```
    /// use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
    /// assert_eq!(BudgetMiddleware::new("pricing").attempt_timeout(), None);
    /// ```
    pub fn attempt_timeout(&self) -> Option<Duration> {
        self.attempt_timeout
    }

    /// The error of a request not made, as a `BudgetClient` call below its
    /// floor gives it (its problem is the contract's `504`).
    fn not_made(&self, refused: Refused) -> Error {
        let Refused { below, note } = refused;
        let error = CallError::new(
            Arc::clone(self.outbound.dependency()),
            CallErrorKind::BelowFloor,
        )
        .with_skip_note(note)
        .below(below);
        Error::middleware(error)
    }
}

#[async_trait::async_trait]
impl Middleware for BudgetMiddleware {
    async fn handle(
        &self,
        mut req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> Result<Response> {
        let Some(cx) = context::current() else {
            // Outside any request's budget: as it came.
            return next.run(req, extensions).await;
        };
        let cap = [req.timeout().copied(), self.attempt_timeout]
            .into_iter()
            .flatten()
            .min();
        let sent = self
            .outbound
            .admit(&cx, req.headers_mut(), cap)
            .map_err(|refused| self.not_made(refused))?;
        *req.timeout_mut() = Some(sent.limit());
        let result = next.run(req, extensions).await;
        sent.record(&outcome_of(&result));
        result
    }
}

/// What the ledger says of an answer: its status, or the kind of failure
/// (a reqwest error sorted as `BudgetClient` sorts its attempts').
fn outcome_of(result: &Result<Response>) -> Outcome {
    let kind = match result {
        Ok(res) => return Outcome::status(res.status()),
        Err(Error::Reqwest(e)) => head_failure(e),
        Err(Error::Middleware(e)) => failure_kind(&**e),
    };
    Outcome::Transport(kind)
}
