//! The backoff sleep, [`sleep_within`].
//!
//! The module is private: its items are public in [`crate::retry`], and
//! their docs carry the design notes.

use std::time::Duration;

use tokio::time::Instant;

use crate::budget::{Budget, Exhausted};

/// Sleeps for `wait`, or until `budget`'s deadline if that comes first.
///
/// [`RetryPolicy::decide`](super::RetryPolicy::decide) only asks for waits
/// that fit; [`sleep_within`] is the safety net that makes "never sleep past
/// the deadline" (docs/contract.md §2 rule 3) hold even when time passed
/// between the decision and the sleep. It runs on tokio's clock, so the
/// paused clock governs it in tests.
///
/// `Ok(())` when the whole wait passed with budget left; [`Exhausted`] when
/// the deadline was reached (at once, if the budget is already spent). When
/// the wait would end exactly at the deadline the deadline wins: the sleep
/// ends there and the answer is `Err`.
///
/// ```
/// use std::time::Duration;
/// use budget_core::Budget;
/// use budget_core::retry::sleep_within;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let spent = Budget::new(Duration::ZERO);
/// assert_eq!(
///     sleep_within(Duration::ZERO, &spent).await.unwrap_err().to_string(),
///     "budget of 0ms exhausted"
/// );
/// # }
/// ```
///
/// A wait that fits, then one that reaches the deadline:
///
/// ```
/// use std::time::Duration;
/// use budget_core::Budget;
/// use budget_core::retry::sleep_within;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let budget = Budget::new(Duration::from_millis(500));
/// assert!(sleep_within(Duration::from_millis(200), &budget).await.is_ok());
/// assert_eq!(budget.remaining(), Duration::from_millis(300));
///
/// // A wait reaching the deadline ends at the deadline, with an error.
/// assert!(sleep_within(Duration::from_secs(5), &budget).await.is_err());
/// assert!(budget.is_exhausted());
/// # }
/// ```
pub async fn sleep_within(wait: Duration, budget: &Budget) -> Result<(), Exhausted> {
    budget.check()?;
    let deadline = budget.deadline();
    let until = Instant::now()
        .checked_add(wait)
        .map_or(deadline, |end| end.min(deadline));
    tokio::time::sleep_until(until).await;
    if until >= deadline {
        budget.check()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[tokio::test(start_paused = true)]
    async fn rule3_a_wait_that_fits_sleeps_exactly_the_wait() {
        let budget = Budget::new(ms(1000));
        let start = Instant::now();
        assert_eq!(sleep_within(ms(250), &budget).await, Ok(()));
        assert_eq!(start.elapsed(), ms(250));
        assert_eq!(sleep_within(Duration::ZERO, &budget).await, Ok(()));
        assert_eq!(start.elapsed(), ms(250));
    }

    #[tokio::test(start_paused = true)]
    async fn rule3_never_sleeps_past_the_deadline() {
        let budget = Budget::new(ms(300));
        let start = Instant::now();
        assert!(sleep_within(ms(10_000), &budget).await.is_err());
        assert_eq!(start.elapsed(), ms(300));
        assert!(
            sleep_within(Duration::MAX, &Budget::new(ms(5)))
                .await
                .is_err()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule3_a_wait_ending_exactly_at_the_deadline_loses_to_it() {
        let budget = Budget::new(ms(300));
        let start = Instant::now();
        assert!(sleep_within(ms(300), &budget).await.is_err());
        assert_eq!(start.elapsed(), ms(300));
    }

    #[tokio::test(start_paused = true)]
    async fn rule3_an_exhausted_budget_does_not_sleep_at_all() {
        let budget = Budget::new(ms(100));
        tokio::time::advance(ms(100)).await;
        let start = Instant::now();
        assert!(sleep_within(ms(50), &budget).await.is_err());
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}
