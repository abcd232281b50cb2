//! The sources a [`CallError`](super::CallError) carries for a failure of
//! its own making: an attempt out of time, a body over its limit, no
//! concurrency permit within the budget.

use std::fmt;
use std::time::Duration;

use crate::admission::queue::{Prediction, RefusalReason};

/// An attempt ran out of its time limit: the budget's deadline in budget
/// mode, `fixed_timeout` in fixed mode.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::client::AttemptTimedOut;
/// let e = AttemptTimedOut::new(Duration::from_millis(740));
/// assert_eq!(e.to_string(), "attempt timed out after 740ms");
/// assert_eq!(e.limit(), Duration::from_millis(740));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("attempt timed out after {}ms", limit.as_millis())]
pub struct AttemptTimedOut {
    limit: Duration,
}

impl AttemptTimedOut {
    /// An attempt whose limit was `limit` timed out.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::AttemptTimedOut;
    /// assert_eq!(AttemptTimedOut::new(Duration::ZERO).limit(), Duration::ZERO);
    /// ```
    pub fn new(limit: Duration) -> Self {
        Self { limit }
    }

    /// The time the attempt was given.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::AttemptTimedOut;
    /// assert_eq!(AttemptTimedOut::new(Duration::from_secs(1)).limit(), Duration::from_secs(1));
    /// ```
    pub fn limit(&self) -> Duration {
        self.limit
    }
}

/// A response body was larger than the dependency's `max_body`.
///
/// # Example
///
/// ```
/// use budget_core::client::BodyTooLarge;
/// let e = BodyTooLarge::new(1024);
/// assert_eq!(e.to_string(), "response body larger than max_body 1024 bytes");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("response body larger than max_body {limit} bytes")]
pub struct BodyTooLarge {
    limit: u64,
}

impl BodyTooLarge {
    /// A body went past `limit` bytes.
    ///
    /// ```
    /// # use budget_core::client::BodyTooLarge;
    /// assert_eq!(BodyTooLarge::new(7).limit(), 7);
    /// ```
    pub fn new(limit: u64) -> Self {
        Self { limit }
    }

    /// The configured `max_body`.
    ///
    /// ```
    /// # use budget_core::client::BodyTooLarge;
    /// assert_eq!(BodyTooLarge::new(7).limit(), 7);
    /// ```
    pub fn limit(&self) -> u64 {
        self.limit
    }
}

/// No concurrency permit came free while the budget still allowed the call
/// (the wait is bounded by the deadline less the floor), or the permit
/// queue predicted that none would (docs/architecture.md, "Admission").
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::admission::queue::{Prediction, RefusalReason};
/// use budget_core::client::NoPermitInBudget;
///
/// let e = NoPermitInBudget::new(Duration::from_millis(300));
/// assert_eq!(e.to_string(), "waited 300ms for a concurrency permit");
///
/// let p = Prediction::new(Duration::from_millis(2400), 180, Duration::from_micros(13_333));
/// let e = NoPermitInBudget::predicted(
///     RefusalReason::PredictedWait,
///     p,
///     Duration::from_millis(60),
///     Duration::from_millis(1100),
/// );
/// assert_eq!(
///     e.to_string(),
///     "expected wait 2.4s + floor 60ms > 1.1s left (180 queued, 75/s)"
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", Why(self))]
pub struct NoPermitInBudget {
    waited: Duration,
    predicted: Option<Predicted>,
}

/// What the queue predicted, with what the call had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Predicted {
    reason: RefusalReason,
    prediction: Prediction,
    floor: Duration,
    left: Duration,
}

/// The message of a [`NoPermitInBudget`].
struct Why<'a>(&'a NoPermitInBudget);

impl fmt::Display for Why<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.0;
        let Some(p) = e.predicted else {
            return write!(
                f,
                "waited {}ms for a concurrency permit",
                e.waited.as_millis()
            );
        };
        write!(f, "{}", p.prediction.against(p.reason, p.floor, p.left))?;
        if !e.waited.is_zero() {
            write!(f, " after waiting {}ms", e.waited.as_millis())?;
        }
        Ok(())
    }
}

impl NoPermitInBudget {
    /// The call waited `waited` in vain.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::NoPermitInBudget;
    /// assert_eq!(NoPermitInBudget::new(Duration::ZERO).waited(), Duration::ZERO);
    /// ```
    pub fn new(waited: Duration) -> Self {
        Self {
            waited,
            predicted: None,
        }
    }

    /// The queue refused the call for `reason` on `prediction`, with
    /// `floor` to keep and `left` of the budget.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::{Prediction, RefusalReason};
    /// use budget_core::client::NoPermitInBudget;
    /// let p = Prediction::new(Duration::from_millis(300), 12, Duration::from_millis(25));
    /// let e = NoPermitInBudget::predicted(
    ///     RefusalReason::StandingQueue, p, Duration::from_millis(60), Duration::from_millis(1100),
    /// );
    /// assert_eq!(
    ///     e.to_string(),
    ///     "standing queue: expected wait 300ms (12 queued, 40/s), more than a newcomer may wait with 1.1s left"
    /// );
    /// assert_eq!(e.prediction(), Some(p));
    /// ```
    pub fn predicted(
        reason: RefusalReason,
        prediction: Prediction,
        floor: Duration,
        left: Duration,
    ) -> Self {
        Self {
            waited: Duration::ZERO,
            predicted: Some(Predicted {
                reason,
                prediction,
                floor,
                left,
            }),
        }
    }

    /// The same, after `waited` in the queue.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::NoPermitInBudget;
    /// let e = NoPermitInBudget::new(Duration::ZERO).after(Duration::from_millis(3));
    /// assert_eq!(e.waited(), Duration::from_millis(3));
    /// ```
    pub fn after(self, waited: Duration) -> Self {
        Self { waited, ..self }
    }

    /// How long the call waited.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::NoPermitInBudget;
    /// assert_eq!(NoPermitInBudget::new(Duration::from_secs(1)).waited(), Duration::from_secs(1));
    /// ```
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// What the queue predicted of the wait, when it refused on a
    /// prediction.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::NoPermitInBudget;
    /// assert_eq!(NoPermitInBudget::new(Duration::ZERO).prediction(), None);
    /// ```
    pub fn prediction(&self) -> Option<Prediction> {
        self.predicted.map(|p| p.prediction)
    }
}
