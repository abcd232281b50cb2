//! The problem body (RFC 9457 `application/problem+json`) every budget
//! error answers with.
//!
//! One type for every status of the contract's section 3, so that a peer can
//! parse what any hop said: `type`, `title`, `status`, `detail`, and where
//! they apply `remaining_ms`, `floor_ms`, `dependency`, `header`; `retryable`
//! says whether the caller should try again, `retry_after_ms` when.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::problem::{Problem, ProblemKind};
//!
//! let p = Problem::new(ProblemKind::BelowFloor, "budget 12ms is below this service's floor 50ms")
//!     .with_remaining(Duration::from_millis(12))
//!     .with_floor(Duration::from_millis(50));
//! assert_eq!(p.status, 504);
//! assert!(!p.retryable);
//! let json = p.to_json();
//! assert!(json.contains("\"floor_ms\":50"));
//! let back: Problem = serde_json::from_str(&json).unwrap();
//! assert_eq!(back, p);
//! ```

#[cfg(any(feature = "server", feature = "grpc"))]
mod body;

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[cfg(any(feature = "server", feature = "grpc"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "server", feature = "grpc"))))]
pub use body::ProblemBody;

use crate::budget::whole_millis;

/// The media type of a problem body.
pub const CONTENT_TYPE: &str = "application/problem+json";

/// The kinds of problem this framework answers with.
///
/// # Example
///
/// ```
/// use budget_core::problem::ProblemKind;
/// assert_eq!(ProblemKind::MalformedBudget.status(), 400);
/// assert_eq!(ProblemKind::CircuitOpen.status(), 503);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProblemKind {
    /// A budget header was present but malformed (400).
    MalformedBudget,
    /// The budget was below this service's floor on arrival (504).
    BelowFloor,
    /// The budget ran out while the handler worked (504).
    Expired,
    /// A required dependency could not be called in budget (504).
    DependencyOutOfBudget,
    /// A dependency asked for a wait that does not fit (429 or 503, passed up).
    Deferred {
        /// The status the dependency answered with (429 or 503).
        status: u16,
    },
    /// A required dependency gave no usable answer: refused, reset, or its
    /// connection failed, with its attempts spent (504: no answer came
    /// through in time, whatever the cause).
    DependencyUnavailable,
    /// A required dependency's circuit is open (503).
    CircuitOpen,
    /// This service is at its in-flight limit (503).
    Overloaded,
    /// A required dependency answered, but with an error status or a body
    /// that could not be used (502).
    DependencyFailed,
    /// No route at this path (404).
    NotFound,
    /// The route exists, the method is not one of its (405).
    MethodNotAllowed,
    /// The request body is larger than the service accepts (413).
    BodyTooLarge,
    /// The request body could not be read whole (cut short, or its framing
    /// broken) or is not what the route takes (400).
    BadBody,
    /// A handler asked for the request's budget, context or ledger on a
    /// route that is not behind the budget layer (for example a route
    /// added to the router after `.layer(..)`): a bug in this service, not
    /// in the request (500).
    MissingBudgetLayer,
}

impl ProblemKind {
    /// The HTTP status of this kind of problem.
    ///
    /// ```
    /// # use budget_core::problem::ProblemKind;
    /// assert_eq!(ProblemKind::Deferred { status: 429 }.status(), 429);
    /// ```
    pub fn status(&self) -> u16 {
        match self {
            ProblemKind::MalformedBudget | ProblemKind::BadBody => 400,
            ProblemKind::NotFound => 404,
            ProblemKind::MethodNotAllowed => 405,
            ProblemKind::BodyTooLarge => 413,
            ProblemKind::BelowFloor
            | ProblemKind::Expired
            | ProblemKind::DependencyOutOfBudget
            | ProblemKind::DependencyUnavailable => 504,
            ProblemKind::Deferred { status } => *status,
            ProblemKind::CircuitOpen | ProblemKind::Overloaded => 503,
            ProblemKind::DependencyFailed => 502,
            ProblemKind::MissingBudgetLayer => 500,
        }
    }

    /// The problem `type` URI.
    ///
    /// ```
    /// # use budget_core::problem::ProblemKind;
    /// assert_eq!(ProblemKind::Expired.type_uri(), "urn:budget:problem:budget-expired");
    /// ```
    pub fn type_uri(&self) -> &'static str {
        match self {
            ProblemKind::MalformedBudget => "urn:budget:problem:malformed-budget-header",
            ProblemKind::BelowFloor => "urn:budget:problem:below-floor",
            ProblemKind::Expired => "urn:budget:problem:budget-expired",
            ProblemKind::DependencyOutOfBudget => "urn:budget:problem:dependency-out-of-budget",
            ProblemKind::Deferred { .. } => "urn:budget:problem:dependency-deferred",
            ProblemKind::DependencyUnavailable => "urn:budget:problem:dependency-unavailable",
            ProblemKind::CircuitOpen => "urn:budget:problem:circuit-open",
            ProblemKind::Overloaded => "urn:budget:problem:overloaded",
            ProblemKind::DependencyFailed => "urn:budget:problem:dependency-failed",
            ProblemKind::NotFound => "urn:budget:problem:not-found",
            ProblemKind::MethodNotAllowed => "urn:budget:problem:method-not-allowed",
            ProblemKind::BodyTooLarge => "urn:budget:problem:body-too-large",
            ProblemKind::BadBody => "urn:budget:problem:bad-body",
            ProblemKind::MissingBudgetLayer => "urn:budget:problem:missing-budget-layer",
        }
    }

    /// The short, fixed human title.
    ///
    /// ```
    /// # use budget_core::problem::ProblemKind;
    /// assert_eq!(ProblemKind::BelowFloor.title(), "Budget below floor");
    /// ```
    pub fn title(&self) -> &'static str {
        match self {
            ProblemKind::MalformedBudget => "Malformed budget header",
            ProblemKind::BelowFloor => "Budget below floor",
            ProblemKind::Expired => "Budget expired",
            ProblemKind::DependencyOutOfBudget => "Dependency out of budget",
            ProblemKind::Deferred { .. } => "Dependency asked to wait",
            ProblemKind::DependencyUnavailable => "Dependency unavailable",
            ProblemKind::CircuitOpen => "Circuit open",
            ProblemKind::Overloaded => "Overloaded",
            ProblemKind::DependencyFailed => "Dependency failed",
            ProblemKind::NotFound => "Not found",
            ProblemKind::MethodNotAllowed => "Method not allowed",
            ProblemKind::BodyTooLarge => "Body too large",
            ProblemKind::BadBody => "Bad request body",
            ProblemKind::MissingBudgetLayer => "Route not behind the budget layer",
        }
    }

    /// Whether a caller should try again later: yes for 429 and 503 (after
    /// `Retry-After`), no for a spent budget or a malformed request.
    ///
    /// ```
    /// # use budget_core::problem::ProblemKind;
    /// assert!(ProblemKind::CircuitOpen.retryable());
    /// assert!(!ProblemKind::Expired.retryable());
    /// ```
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            ProblemKind::Deferred { .. } | ProblemKind::CircuitOpen | ProblemKind::Overloaded
        )
    }
}

/// An RFC 9457 problem body.
///
/// # Example
///
/// ```
/// use budget_core::problem::{Problem, ProblemKind};
/// let p = Problem::new(ProblemKind::MalformedBudget, "bad").with_header("grpc-timeout");
/// assert_eq!(p.header.as_deref(), Some("grpc-timeout"));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    /// A URI naming the kind of problem.
    #[serde(rename = "type")]
    pub type_uri: String,
    /// A short, fixed summary of the kind.
    pub title: String,
    /// The HTTP status.
    pub status: u16,
    /// What happened to this request.
    pub detail: String,
    /// Whether the caller should retry (after `retry_after_ms` if given).
    pub retryable: bool,
    /// The budget left when the problem arose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_ms: Option<u64>,
    /// The floor that was not reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor_ms: Option<u64>,
    /// The dependency concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency: Option<String>,
    /// The header concerned (for a malformed budget header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// How long to wait before retrying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl Problem {
    /// A problem of `kind` with `detail`.
    ///
    /// ```
    /// # use budget_core::problem::{Problem, ProblemKind};
    /// let p = Problem::new(ProblemKind::Expired, "budget of 100ms ran out");
    /// assert_eq!((p.status, p.title.as_str()), (504, "Budget expired"));
    /// ```
    pub fn new(kind: ProblemKind, detail: impl Into<String>) -> Self {
        Self {
            type_uri: kind.type_uri().to_owned(),
            title: kind.title().to_owned(),
            status: kind.status(),
            detail: detail.into(),
            retryable: kind.retryable(),
            remaining_ms: None,
            floor_ms: None,
            dependency: None,
            header: None,
            retry_after_ms: None,
        }
    }

    /// Adds the remaining budget.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::problem::{Problem, ProblemKind};
    /// let p = Problem::new(ProblemKind::Expired, "x").with_remaining(Duration::from_millis(3));
    /// assert_eq!(p.remaining_ms, Some(3));
    /// ```
    pub fn with_remaining(mut self, remaining: Duration) -> Self {
        self.remaining_ms = Some(whole_millis(remaining));
        self
    }

    /// Adds the floor.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::problem::{Problem, ProblemKind};
    /// let p = Problem::new(ProblemKind::BelowFloor, "x").with_floor(Duration::from_secs(1));
    /// assert_eq!(p.floor_ms, Some(1000));
    /// ```
    pub fn with_floor(mut self, floor: Duration) -> Self {
        self.floor_ms = Some(whole_millis(floor));
        self
    }

    /// Adds the dependency.
    ///
    /// ```
    /// # use budget_core::problem::{Problem, ProblemKind};
    /// let p = Problem::new(ProblemKind::CircuitOpen, "x").with_dependency("pricing");
    /// assert_eq!(p.dependency.as_deref(), Some("pricing"));
    /// ```
    pub fn with_dependency(mut self, dependency: impl Into<String>) -> Self {
        self.dependency = Some(dependency.into());
        self
    }

    /// Adds the header concerned.
    ///
    /// ```
    /// # use budget_core::problem::{Problem, ProblemKind};
    /// let p = Problem::new(ProblemKind::MalformedBudget, "x").with_header("request-budget-ms");
    /// assert_eq!(p.header.as_deref(), Some("request-budget-ms"));
    /// ```
    pub fn with_header(mut self, header: impl Into<String>) -> Self {
        self.header = Some(header.into());
        self
    }

    /// Adds when to retry.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::problem::{Problem, ProblemKind};
    /// let p = Problem::new(ProblemKind::CircuitOpen, "x").with_retry_after(Duration::from_millis(1500));
    /// assert_eq!(p.retry_after_ms, Some(1500));
    /// ```
    pub fn with_retry_after(mut self, wait: Duration) -> Self {
        self.retry_after_ms = Some(whole_millis(wait));
        self
    }

    /// The `Retry-After` header value for [`retry_after_ms`](Self::retry_after_ms):
    /// whole seconds, rounded up. A wait that saturated the milliseconds
    /// (`u64::MAX` ms, about 585 million years: a dependency asked for more
    /// than any integer holds) is written as the saturated delay-seconds,
    /// `18446744073709551615`, so one saturated value reads the same at every
    /// hop.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::problem::{Problem, ProblemKind};
    /// let p = Problem::new(ProblemKind::CircuitOpen, "x").with_retry_after(Duration::from_millis(1200));
    /// assert_eq!(p.retry_after_secs(), Some(2));
    /// let p = p.with_retry_after(Duration::from_secs(u64::MAX));
    /// assert_eq!(p.retry_after_secs(), Some(u64::MAX));
    /// ```
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after_ms.map(|ms| match ms {
            u64::MAX => u64::MAX,
            ms => ms.div_ceil(1000),
        })
    }

    /// The body as JSON text.
    ///
    /// ```
    /// # use budget_core::problem::{Problem, ProblemKind};
    /// let json = Problem::new(ProblemKind::Expired, "x").to_json();
    /// assert!(json.starts_with("{\"type\":\"urn:budget:problem:budget-expired\""));
    /// ```
    pub fn to_json(&self) -> String {
        // Serialising plain strings and integers cannot fail.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }
}
