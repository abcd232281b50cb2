//! [`BudgetResponse`]: a dependency's answer, buffered inside the attempt
//! that received it.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode, Version};
use serde::de::DeserializeOwned;

use crate::outbound::error::{CallError, CallErrorKind};
use crate::problem::{Problem, ProblemKind};

/// A dependency's HTTP answer, of any status, with its body already read.
///
/// The body was read inside the attempt, under the attempt's deadline and
/// capped by `max_body`, so a slow body counted against the budget and
/// nothing is left to stream: [`bytes`](Self::bytes), [`text`](Self::text)
/// and [`json`](Self::json) do not wait.
///
/// A `429` or `503` whose `Retry-After` asked for a wait that did not fit
/// (beyond `retry.retry_after_max`, or beyond the budget) is returned as it
/// is, with [`passes_up`](Self::passes_up) true: the handler answers its own
/// caller with the same status and `Retry-After`
/// ([`deferred`](Self::deferred) builds that problem), so the backoff
/// happens where the time is (docs/contract.md §2 rule 6).
///
/// # Example
///
/// ```
/// # #[derive(serde::Deserialize)] struct Quote { price: u64 }
/// # async fn run(pricing: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
/// let res = pricing.get("/quote").send().await?;
/// if let Some(problem) = res.deferred() {
///     println!("pricing asks us to wait: answer {} with {:?}", problem.status, res.retry_after());
/// }
/// let quote: Quote = res.error_for_status()?.json()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct BudgetResponse {
    inner: http::Response<Bytes>,
    dependency: Arc<str>,
    attempts: u32,
    retry_after: Option<Duration>,
    passes_up: bool,
    stale: Option<Duration>,
}

impl BudgetResponse {
    pub(crate) fn new(
        inner: http::Response<Bytes>,
        dependency: Arc<str>,
        attempts: u32,
        retry_after: Option<Duration>,
        passes_up: bool,
    ) -> Self {
        Self {
            inner,
            dependency,
            attempts,
            retry_after,
            passes_up,
            stale: None,
        }
    }

    /// An answer from the stale cache, `age` old, standing in for a call
    /// that made `attempts` attempts (0: not made).
    pub(crate) fn from_stale(
        inner: http::Response<Bytes>,
        dependency: Arc<str>,
        attempts: u32,
        age: Duration,
    ) -> Self {
        Self {
            stale: Some(age),
            ..Self::new(inner, dependency, attempts, None, false)
        }
    }

    /// The answer as received, for the stale cache to keep.
    pub(crate) fn as_http(&self) -> &http::Response<Bytes> {
        &self.inner
    }

    /// `Some(age)` when this is not the dependency's answer to this call
    /// but the last good one, `age` old, served because the call was not
    /// made or failed (`on_unavailable = "stale"`, see
    /// [`DependencyConfig::max_stale`](super::DependencyConfig::max_stale));
    /// `None` for an answer to this call. The caller should say its answer
    /// is degraded; the ledger already says `inventory;desc="stale 12s"`.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let res = c.get("/stock/7").send().await?;
    /// if let Some(age) = res.stale() {
    ///     println!("stock as of {}s ago", age.as_secs());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn stale(&self) -> Option<Duration> {
        self.stale
    }

    /// The status of the last attempt's answer.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let ok = c.get("").send().await?.status().is_success();
    /// # Ok(()) }
    /// ```
    pub fn status(&self) -> StatusCode {
        self.inner.status()
    }

    /// The answer's headers.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let res = c.get("").send().await?;
    /// let timing = res.headers().get("server-timing");
    /// # Ok(()) }
    /// ```
    pub fn headers(&self) -> &HeaderMap {
        self.inner.headers()
    }

    /// The HTTP version of the answer.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let v = c.get("").send().await?.version();
    /// # Ok(()) }
    /// ```
    pub fn version(&self) -> Version {
        self.inner.version()
    }

    /// The body (a cheap, shared clone).
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let body: bytes::Bytes = c.get("").send().await?.bytes();
    /// # Ok(()) }
    /// ```
    pub fn bytes(&self) -> Bytes {
        self.inner.body().clone()
    }

    /// The body as text; invalid UTF-8 is replaced (`U+FFFD`), never an
    /// error.
    ///
    /// Unlike reqwest's `Response::text`, this is not `async`: the body was
    /// read to its end inside the attempt, within the budget (a body that
    /// stalls is that attempt's timeout, not the caller's), so `.text()`
    /// without `.await` is intended; the same holds for
    /// [`bytes`](Self::bytes) and [`json`](Self::json).
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// println!("{}", c.get("").send().await?.text());
    /// # Ok(()) }
    /// ```
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(self.inner.body())
    }

    /// The body as JSON; a body that does not decode is a
    /// [`CallErrorKind::Decode`] error (`502` as a problem).
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let v: serde_json::Value = c.get("").send().await?.json()?;
    /// # Ok(()) }
    /// ```
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, CallError> {
        serde_json::from_slice(self.inner.body()).map_err(|e| {
            CallError::new(Arc::clone(&self.dependency), CallErrorKind::Decode)
                .with_attempts(self.attempts)
                .with_source(e)
        })
    }

    /// Attempts made for this answer, the first included (for a
    /// [`stale`](Self::stale) answer: the attempts of the call it stands in
    /// for, 0 when that call was not made).
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// assert!(c.get("").send().await?.attempts() >= 1);
    /// # Ok(()) }
    /// ```
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The answer's `Retry-After` (either RFC 9110 form), if it had a valid
    /// one.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// if let Some(wait) = c.get("").send().await?.retry_after() { println!("{wait:?}"); }
    /// # Ok(()) }
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// True when the dependency answered `429`/`503` and asked for a wait
    /// that did not fit: pass this answer up (see
    /// [`deferred`](Self::deferred)) instead of treating it as a failure
    /// to hide.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let res = c.get("").send().await?;
    /// if res.passes_up() { assert!(res.retry_after().is_some()); }
    /// # Ok(()) }
    /// ```
    pub fn passes_up(&self) -> bool {
        self.passes_up
    }

    /// When [`passes_up`](Self::passes_up): the problem to answer with, the
    /// dependency's own status and its `Retry-After` (docs/contract.md §3).
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// if let Some(p) = c.get("").send().await?.deferred() {
    ///     assert!(p.status == 429 || p.status == 503);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn deferred(&self) -> Option<Problem> {
        if !self.passes_up {
            return None;
        }
        let status = self.status();
        let mut problem = Problem::new(
            ProblemKind::Deferred {
                status: status.as_u16(),
            },
            format!(
                "`{}` answered {status} and asked for a wait that does not fit in the budget",
                self.dependency
            ),
        )
        .with_dependency(&*self.dependency);
        if let Some(wait) = self.retry_after {
            problem = problem.with_retry_after(wait);
        }
        Some(problem)
    }

    /// `Ok(self)` for a status below 400; a [`CallErrorKind::Status`] error
    /// otherwise, carrying the status, the `Retry-After` and whether it
    /// passes up, so that `?` in a handler answers with the right problem.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let body = c.get("").send().await?.error_for_status()?.bytes();
    /// # Ok(()) }
    /// ```
    pub fn error_for_status(self) -> Result<Self, CallError> {
        let status = self.status();
        if !(status.is_client_error() || status.is_server_error()) {
            return Ok(self);
        }
        Err(
            CallError::new(Arc::clone(&self.dependency), CallErrorKind::Status)
                .with_attempts(self.attempts)
                .with_status(status, self.passes_up)
                .with_retry_after(self.passes_up.then_some(self.retry_after).flatten()),
        )
    }

    /// The dependency's configured name.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// assert_eq!(c.get("").send().await?.dependency(), c.name());
    /// # Ok(()) }
    /// ```
    pub fn dependency(&self) -> &str {
        &self.dependency
    }

    /// The answer as an `http::Response` with its buffered body.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let res: http::Response<bytes::Bytes> = c.get("").send().await?.into_http();
    /// # Ok(()) }
    /// ```
    pub fn into_http(self) -> http::Response<Bytes> {
        self.inner
    }
}

impl From<BudgetResponse> for http::Response<Bytes> {
    fn from(res: BudgetResponse) -> Self {
        res.into_http()
    }
}
