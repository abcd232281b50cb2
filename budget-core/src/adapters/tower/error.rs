//! [`BudgetElapsed`]: the one timeout of the outbound tower layer.

use std::time::Duration;

/// A request that did not answer within what was left of its budget (less
/// the reserve): the outbound layer dropped it at that deadline. It comes
/// back in the service's boxed error, to `downcast_ref`.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::adapters::tower::BudgetElapsed;
///
/// let e = BudgetElapsed::new(Duration::from_millis(740));
/// assert_eq!(e.to_string(), "request ran out of its budget after 740ms");
/// let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(e);
/// assert_eq!(boxed.downcast_ref::<BudgetElapsed>().unwrap().limit(), Duration::from_millis(740));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("request ran out of its budget after {}ms", limit.as_millis())]
pub struct BudgetElapsed {
    limit: Duration,
}

impl BudgetElapsed {
    /// A request that was given `limit` ran out of it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::adapters::tower::BudgetElapsed;
    /// assert_eq!(BudgetElapsed::new(Duration::ZERO).limit(), Duration::ZERO);
    /// ```
    pub fn new(limit: Duration) -> Self {
        Self { limit }
    }

    /// The time the request was given: what was left of the budget, less
    /// the reserve, when it was sent.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::adapters::tower::BudgetElapsed;
    /// assert_eq!(BudgetElapsed::new(Duration::from_secs(1)).limit(), Duration::from_secs(1));
    /// ```
    pub fn limit(&self) -> Duration {
        self.limit
    }
}
