//! The budget: [`Budget`] and [`Exhausted`]. The module is private; both
//! are public at the crate root (`budget_core::Budget`), their one path.

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

/// How far in the future a deadline may lie. A requested budget longer than
/// this (say `u64::MAX` milliseconds) ends here instead of overflowing the
/// clock: about thirty years is "forever" for a request.
pub(crate) const FOREVER: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);

/// `d` in whole milliseconds (rounded down), saturating at `u64::MAX`
/// rather than wrapping: the one conversion for every millisecond count this
/// crate writes (problem bodies, log fields, budgets cut to the millisecond).
pub(crate) fn whole_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One request's time budget: a deadline plus the duration it was made from.
///
/// A budget is what a caller is still willing to wait. It travels between
/// services as a *relative* duration (clocks of two hosts disagree), and
/// inside one process as an absolute deadline on [`tokio::time::Instant`], so
/// that tokio's paused clock governs every rule built on it.
///
/// `Budget` is `Copy`: handing it to a sub-call costs nothing. All arithmetic
/// saturates; a budget never panics and never wraps.
///
/// Not to be confused with tower's retry budget
/// (`tower::retry::budget`), which limits *how many* retries a client makes;
/// ours limits *how long* a request may take. The retry ratio of this crate is
/// [`RetryBudget`](crate::retry::RetryBudget).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::Budget;
///
/// let budget = Budget::new(Duration::from_millis(250));
/// assert!(!budget.is_exhausted());
/// assert!(budget.remaining() <= Duration::from_millis(250));
/// assert_eq!(budget.original(), Duration::from_millis(250));
/// ```
///
/// Time passes on tokio's clock; a sub-call gets what is left:
///
/// ```
/// use std::time::Duration;
/// use budget_core::Budget;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let budget = Budget::new(Duration::from_millis(2000));
/// tokio::time::sleep(Duration::from_millis(300)).await;
/// assert_eq!(budget.remaining(), Duration::from_millis(1700));
/// assert_eq!(budget.elapsed(), Duration::from_millis(300));
///
/// // A sub-call gets what is left, capped shorter if asked; never longer.
/// let child = budget.child_capped(Duration::from_millis(500));
/// assert_eq!(child.remaining(), Duration::from_millis(500));
/// assert_eq!(budget.child_capped(Duration::from_secs(60)).remaining(), budget.remaining());
/// # }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Budget {
    start: Instant,
    deadline: Instant,
    original: Duration,
}

impl Budget {
    /// A budget of `duration`, starting now.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// let huge = Budget::new(Duration::from_millis(u64::MAX)); // no panic, no wrap
    /// // Clamped to about thirty years.
    /// assert!(huge.remaining() <= Duration::from_secs(30 * 365 * 24 * 60 * 60));
    /// ```
    pub fn new(duration: Duration) -> Self {
        Self::starting_at(Instant::now(), duration)
    }

    /// A budget of `duration` that started at `start` (for example when the
    /// request's first byte arrived).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// let start = tokio::time::Instant::now();
    /// let budget = Budget::starting_at(start, Duration::from_secs(1));
    /// assert_eq!(budget.started(), start);
    /// ```
    #[inline]
    pub fn starting_at(start: Instant, duration: Duration) -> Self {
        Self {
            start,
            deadline: add_saturating(start, duration),
            original: duration,
        }
    }

    /// A budget that ends at `deadline`, as seen from `start`.
    ///
    /// When `deadline` lies before `start` the budget is exhausted from the
    /// outset (its original duration is zero).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// let now = tokio::time::Instant::now();
    /// let b = Budget::until(now, now + Duration::from_millis(40));
    /// assert_eq!(b.original(), Duration::from_millis(40));
    /// ```
    pub fn until(start: Instant, deadline: Instant) -> Self {
        let deadline = deadline.max(start);
        Self {
            start,
            deadline,
            original: deadline.saturating_duration_since(start),
        }
    }

    /// The instant at which the budget runs out.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// let b = Budget::new(Duration::from_secs(1));
    /// assert_eq!(b.deadline() - b.started(), Duration::from_secs(1));
    /// ```
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The instant the budget started.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// let b = Budget::new(Duration::from_secs(1));
    /// assert!(b.started() <= tokio::time::Instant::now());
    /// ```
    pub fn started(&self) -> Instant {
        self.start
    }

    /// The duration the budget was made from (what arrived on the wire,
    /// after clamping).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// assert_eq!(Budget::new(Duration::from_secs(2)).original(), Duration::from_secs(2));
    /// ```
    pub fn original(&self) -> Duration {
        self.original
    }

    /// Time left now; zero once the deadline has passed.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// assert_eq!(Budget::new(Duration::ZERO).remaining(), Duration::ZERO);
    /// ```
    pub fn remaining(&self) -> Duration {
        self.remaining_at(Instant::now())
    }

    /// Time left at `now`; zero once `now` has reached the deadline.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// let b = Budget::new(Duration::from_millis(100));
    /// assert_eq!(b.remaining_at(b.started() + Duration::from_millis(30)), Duration::from_millis(70));
    /// assert_eq!(b.remaining_at(b.deadline() + Duration::from_secs(9)), Duration::ZERO);
    /// ```
    pub fn remaining_at(&self, now: Instant) -> Duration {
        self.deadline.saturating_duration_since(now)
    }

    /// Time spent since the budget started.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// assert!(Budget::new(Duration::from_secs(1)).elapsed() < Duration::from_secs(1));
    /// ```
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(self.start)
    }

    /// True once the deadline has been reached. At the exact instant of the
    /// deadline the budget is exhausted: on a tie, the deadline wins.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// assert!(Budget::new(Duration::ZERO).is_exhausted());
    /// ```
    pub fn is_exhausted(&self) -> bool {
        self.remaining().is_zero()
    }

    /// True when `needed` still fits in what is left (`needed <= remaining`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// let b = Budget::new(Duration::from_secs(1));
    /// assert!(b.fits(Duration::from_millis(10)));
    /// assert!(!b.fits(Duration::from_secs(2)));
    /// ```
    pub fn fits(&self, needed: Duration) -> bool {
        needed <= self.remaining()
    }

    /// A budget for a sub-call: starts now, ends at the same deadline.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// let b = Budget::new(Duration::from_secs(1));
    /// assert_eq!(b.child().deadline(), b.deadline());
    /// ```
    pub fn child(&self) -> Budget {
        Budget::until(Instant::now(), self.deadline)
    }

    /// A budget for a sub-call that is at most `cap` long: the shorter of
    /// `cap` and what is left, never longer than the parent.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// let b = Budget::new(Duration::from_secs(1));
    /// assert!(b.child_capped(Duration::from_millis(10)).deadline() < b.deadline());
    /// assert_eq!(b.child_capped(Duration::MAX).deadline(), b.deadline());
    /// ```
    pub fn child_capped(&self, cap: Duration) -> Budget {
        let now = Instant::now();
        Budget::until(now, add_saturating(now, cap).min(self.deadline))
    }

    /// The same budget with `reserve` held back at the end (the per-hop
    /// reserve a service keeps for its own reply). Saturates at "exhausted".
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// let b = Budget::new(Duration::from_millis(100));
    /// let held = b.less(Duration::from_millis(30));
    /// assert_eq!(b.deadline() - held.deadline(), Duration::from_millis(30));
    /// assert!(b.less(Duration::from_secs(5)).is_exhausted());
    /// ```
    pub fn less(&self, reserve: Duration) -> Budget {
        let deadline = self
            .deadline
            .checked_sub(reserve)
            .unwrap_or(self.start)
            .max(self.start);
        Budget::until(self.start, deadline)
    }

    /// `Ok(remaining)` while time is left, or [`Exhausted`] once it is not.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// assert!(Budget::new(Duration::from_secs(1)).check().is_ok());
    /// let err = Budget::new(Duration::ZERO).check().unwrap_err();
    /// assert_eq!(err.to_string(), "budget of 0ms exhausted");
    /// ```
    pub fn check(&self) -> Result<Duration, Exhausted> {
        let remaining = self.remaining();
        if remaining.is_zero() {
            Err(Exhausted {
                original: self.original,
            })
        } else {
            Ok(remaining)
        }
    }
}

impl fmt::Debug for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Budget")
            .field("original", &self.original)
            .field("remaining", &self.remaining())
            .finish()
    }
}

/// The budget has run out.
///
/// # Example
///
/// ```
/// # use std::time::Duration;
/// # use budget_core::Budget;
/// let err = Budget::new(Duration::from_millis(5)).less(Duration::from_secs(1)).check().unwrap_err();
/// assert_eq!(err.original(), Duration::ZERO);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("budget of {}ms exhausted", original.as_millis())]
pub struct Exhausted {
    original: Duration,
}

impl Exhausted {
    /// The duration of the budget that ran out.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::Budget;
    /// let err = Budget::new(Duration::ZERO).check().unwrap_err();
    /// assert_eq!(err.original(), Duration::ZERO);
    /// ```
    pub fn original(&self) -> Duration {
        self.original
    }
}

/// `start + duration`, or the farthest instant we allow when that overflows.
#[inline]
fn add_saturating(start: Instant, duration: Duration) -> Instant {
    start
        .checked_add(duration.min(FOREVER))
        .or_else(|| start.checked_add(FOREVER / 1000))
        .unwrap_or(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_millis_rounds_down_and_saturates() {
        assert_eq!(whole_millis(Duration::from_micros(1999)), 1);
        assert_eq!(whole_millis(Duration::MAX), u64::MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn remaining_shrinks_with_paused_clock_and_saturates_at_zero() {
        let b = Budget::new(Duration::from_millis(100));
        tokio::time::advance(Duration::from_millis(60)).await;
        assert_eq!(b.remaining(), Duration::from_millis(40));
        assert_eq!(b.elapsed(), Duration::from_millis(60));
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(b.remaining(), Duration::ZERO);
        assert!(b.is_exhausted());
        assert_eq!(b.elapsed(), Duration::from_millis(160));
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_exact_deadline_the_budget_is_exhausted() {
        // Rule: on a tie the deadline wins.
        let b = Budget::new(Duration::from_millis(100));
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(b.is_exhausted());
        assert!(b.check().is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn child_never_outlives_parent() {
        let b = Budget::new(Duration::from_millis(100));
        tokio::time::advance(Duration::from_millis(30)).await;
        let c = b.child();
        assert_eq!(c.deadline(), b.deadline());
        assert_eq!(c.original(), Duration::from_millis(70));
        let capped = b.child_capped(Duration::from_millis(10));
        assert_eq!(capped.remaining(), Duration::from_millis(10));
        let uncapped = b.child_capped(Duration::from_secs(3600));
        assert_eq!(uncapped.deadline(), b.deadline());
    }

    #[test]
    fn u64_max_milliseconds_neither_panics_nor_wraps() {
        let b = Budget::new(Duration::from_millis(u64::MAX));
        assert!(!b.is_exhausted());
        assert!(b.remaining() > Duration::from_secs(365 * 24 * 3600));
        assert_eq!(b.original(), Duration::from_millis(u64::MAX));
        let c = b.child_capped(Duration::MAX);
        assert!(!c.is_exhausted());
        let huge = Budget::new(Duration::MAX);
        assert!(huge.remaining() <= FOREVER);
    }

    #[tokio::test(start_paused = true)]
    async fn less_holds_back_the_reserve_and_saturates() {
        let b = Budget::new(Duration::from_millis(100));
        assert_eq!(
            b.less(Duration::from_millis(20)).remaining(),
            Duration::from_millis(80)
        );
        assert!(b.less(Duration::from_millis(100)).is_exhausted());
        assert!(b.less(Duration::MAX).is_exhausted());
    }

    #[test]
    fn until_a_past_deadline_is_exhausted() {
        let start = Instant::now();
        let b = Budget::until(
            start,
            start.checked_sub(Duration::from_millis(1)).unwrap_or(start),
        );
        assert_eq!(b.original(), Duration::ZERO);
        assert!(b.is_exhausted());
        assert_eq!(b.deadline(), start);
    }
}
