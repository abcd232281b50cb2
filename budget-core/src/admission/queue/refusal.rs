//! [`Refusal`]: why a waiter of a [`PermitQueue`](super::PermitQueue) got no
//! permit, and how long it waited for none.

use std::fmt;
use std::time::Duration;

/// Why a [`PermitQueue`](super::PermitQueue) refused a waiter.
///
/// # Example
///
/// ```
/// use budget_core::admission::RefusalReason;
/// assert_eq!(RefusalReason::StandingQueue.to_string(), "standing queue");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalReason {
    /// The waiter's `give_up_at` came (or had come on arrival) before a
    /// permit was free: it could no longer finish.
    Expired,
    /// The queue was overloaded and the waiter had waited `target` (the
    /// controlled-delay rule of the [module docs](super)).
    StandingQueue,
}

impl RefusalReason {
    /// A short lower-case name, for logs and metric labels.
    ///
    /// ```
    /// use budget_core::admission::RefusalReason;
    /// assert_eq!(RefusalReason::Expired.as_str(), "expired");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            RefusalReason::Expired => "expired",
            RefusalReason::StandingQueue => "standing queue",
        }
    }
}

impl fmt::Display for RefusalReason {
    /// The same as [`RefusalReason::as_str`].
    ///
    /// ```
    /// use budget_core::admission::RefusalReason;
    /// assert_eq!(format!("{}", RefusalReason::Expired), "expired");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A waiter got no permit: why, and how long it had waited.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::admission::{Refusal, RefusalReason};
///
/// let refusal = Refusal::new(RefusalReason::StandingQueue, Duration::from_millis(5));
/// assert_eq!(refusal.reason(), RefusalReason::StandingQueue);
/// assert_eq!(refusal.waited(), Duration::from_millis(5));
/// assert_eq!(refusal.to_string(), "no permit: standing queue after 5ms");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no permit: {reason} after {}", humantime::format_duration(*waited))]
pub struct Refusal {
    reason: RefusalReason,
    waited: Duration,
}

impl Refusal {
    /// A refusal for `reason` after `waited` in the queue.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::{Refusal, RefusalReason};
    /// let r = Refusal::new(RefusalReason::Expired, Duration::ZERO);
    /// assert_eq!(r.to_string(), "no permit: expired after 0s");
    /// ```
    pub const fn new(reason: RefusalReason, waited: Duration) -> Self {
        Self { reason, waited }
    }

    /// Why the waiter was refused.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::{Refusal, RefusalReason};
    /// let r = Refusal::new(RefusalReason::Expired, Duration::ZERO);
    /// assert_eq!(r.reason(), RefusalReason::Expired);
    /// ```
    pub const fn reason(&self) -> RefusalReason {
        self.reason
    }

    /// How long the waiter was queued before the refusal (zero when it was
    /// refused on arrival).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::{Refusal, RefusalReason};
    /// let r = Refusal::new(RefusalReason::Expired, Duration::from_millis(30));
    /// assert_eq!(r.waited(), Duration::from_millis(30));
    /// ```
    pub const fn waited(&self) -> Duration {
        self.waited
    }
}
