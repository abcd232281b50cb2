//! What [`send_optional`](super::RequestBuilder::send_optional) answers:
//! the response, or that the call was skipped and why.
//!
//! An optional dependency (`on_unavailable = "skip"`) that cannot be called
//! in time (below its floor, circuit open, no concurrency permit) is not an
//! error for the caller, who serves a fallback; but the caller usually
//! wants to say why (a "degraded" flag with a reason, a log line). So the
//! skip is a value, [`Skipped`], carrying the same note the ledger got
//! (`skipped: 850ms < floor 1000ms`) and the refusal itself, a
//! [`CallError`] with its kind, budget, floor and `Retry-After`.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::{Budget, floor::Floor};
//! use budget_core::client::{BudgetClient, DependencyConfig, OnUnavailable, OptionalResponse};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let mut config = DependencyConfig::new("recommendations", "http://127.0.0.1:9/recs");
//! config.floor = Floor::new(Duration::from_secs(1)).into();
//! config.on_unavailable = OnUnavailable::Skip;
//! let recommendations = BudgetClient::builder(config).build().unwrap();
//!
//! // 200 ms left: below the 1 s floor, so the call is not made.
//! let answer = recommendations
//!     .get("")
//!     .budget(Budget::new(Duration::from_millis(200)))
//!     .send_optional()
//!     .await
//!     .unwrap();
//! match answer {
//!     OptionalResponse::Answered(res) => println!("{}", res.status()),
//!     OptionalResponse::Skipped(skipped) => {
//!         assert_eq!(skipped.reason(), "skipped: 200ms < floor 1000ms");
//!         assert!(skipped.error().is_below_floor());
//!     }
//! }
//! # }
//! ```

use std::fmt;

use super::response::BudgetResponse;
use crate::outbound::error::CallError;

/// The answer of [`send_optional`][send-optional]:
/// the dependency's response, or the skip of a call that could not be made.
///
#[cfg_attr(
    feature = "client",
    doc = "[send-optional]: super::RequestBuilder::send_optional"
)]
#[cfg_attr(not(feature = "client"), doc = "[send-optional]: crate::docs::client")]
///
/// Not `#[non_exhaustive]`: answered or skipped is the whole choice, so a
/// `match` needs no wildcard arm.
///
/// # Example
///
/// ```
/// # async fn run(recommendations: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
/// use budget_core::client::OptionalResponse;
///
/// let recs: Vec<String> = match recommendations.get("").send_optional().await? {
///     OptionalResponse::Answered(res) => res.error_for_status()?.json()?,
///     OptionalResponse::Skipped(skipped) => {
///         tracing::info!(reason = skipped.reason(), "recommendations skipped");
///         Vec::new()
///     }
/// };
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub enum OptionalResponse {
    /// The call was made and the dependency answered (any status, as
    /// [`send`][send] returns it).
    ///
    #[cfg_attr(feature = "client", doc = "[send]: super::RequestBuilder::send")]
    #[cfg_attr(not(feature = "client"), doc = "[send]: crate::docs::client")]
    Answered(BudgetResponse),
    /// The call was not made: what remained was below the floor, the
    /// circuit was open, or no concurrency permit came in time.
    Skipped(Skipped),
}

impl OptionalResponse {
    /// The response, if the call was made: `None` for a skip.
    ///
    /// ```
    /// # async fn run(recommendations: budget_core::client::BudgetClient) {
    /// // Forgiving every failure of an optional dependency:
    /// let recs: Vec<String> = recommendations
    ///     .get("")
    ///     .send_optional()
    ///     .await
    ///     .ok()
    ///     .and_then(|answer| answer.into_response())
    ///     .and_then(|res| res.json().ok())
    ///     .unwrap_or_default();
    /// # }
    /// ```
    pub fn into_response(self) -> Option<BudgetResponse> {
        match self {
            OptionalResponse::Answered(res) => Some(res),
            OptionalResponse::Skipped(_) => None,
        }
    }

    /// The skip, if the call was not made.
    ///
    /// ```
    /// # async fn run(recommendations: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let answer = recommendations.get("").send_optional().await?;
    /// if let Some(skipped) = answer.skipped() {
    ///     println!("degraded: {skipped}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn skipped(&self) -> Option<&Skipped> {
        match self {
            OptionalResponse::Answered(_) => None,
            OptionalResponse::Skipped(skipped) => Some(skipped),
        }
    }
}

/// Why an optional call was not made: the ledger's skip note and the
/// refusal.
///
/// Its `Display` is the [`reason`](Self::reason).
///
/// # Example
///
/// ```
/// # async fn run(recommendations: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
/// use budget_core::client::OptionalResponse;
///
/// if let OptionalResponse::Skipped(skipped) = recommendations.get("").send_optional().await? {
///     // "skipped: 850ms < floor 1000ms", "skipped: circuit open", ...
///     println!("{}: {skipped}", skipped.error().dependency());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Skipped {
    error: CallError,
}

impl Skipped {
    /// The skip of `error`, a call that was not made.
    pub(crate) fn new(error: CallError) -> Self {
        Self { error }
    }

    /// Why the call was not made, as the ledger's skip note says it:
    /// `skipped: 850ms < floor 1000ms`, `skipped: circuit open`,
    /// `skipped: no concurrency permit in 40ms`.
    ///
    /// ```
    /// # async fn run(recommendations: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// if let Some(skipped) = recommendations.get("").send_optional().await?.skipped() {
    ///     assert!(skipped.reason().starts_with("skipped: "));
    /// }
    /// # Ok(()) }
    /// ```
    pub fn reason(&self) -> &str {
        self.error.skip_note().unwrap_or("skipped")
    }

    /// The refusal, with its [`kind`](CallError::kind),
    /// [`retry_after`](CallError::retry_after) and the rest.
    ///
    /// ```
    /// # async fn run(recommendations: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// if let Some(skipped) = recommendations.get("").send_optional().await?.skipped() {
    ///     assert!(skipped.error().is_unavailable());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn error(&self) -> &CallError {
        &self.error
    }

    /// The refusal, owned: for a caller that treats the skip as a failure
    /// after all (`return Err(skipped.into_error())`).
    ///
    /// ```
    /// # async fn run(pricing: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// use budget_core::client::OptionalResponse;
    /// let res = match pricing.get("").send_optional().await? {
    ///     OptionalResponse::Answered(res) => res,
    ///     OptionalResponse::Skipped(skipped) => return Err(skipped.into_error()),
    /// };
    /// # Ok(()) }
    /// ```
    pub fn into_error(self) -> CallError {
        self.error
    }
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}
