//! Where a call's time comes from ([`Timing`]) and one attempt's window:
//! when it must end, and the budget its request says.

use tokio::time::Instant;

use super::Dependency;
use crate::budget::Budget;
use crate::floor::{BelowFloor, Effective, Floor};
use crate::retry::RetryBudget;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How a client spends time: from the request's budget (the point of this
/// crate) or with a fixed timeout (the usual setup, for comparison).
///
/// Serialises as `"budget"` or `"fixed"`.
///
/// ```
/// use budget_core::client::TimeoutMode;
/// let m: TimeoutMode = serde_json::from_str("\"fixed\"").unwrap();
/// assert_eq!(m, TimeoutMode::Fixed);
/// assert_eq!(TimeoutMode::default(), TimeoutMode::Budget);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum TimeoutMode {
    /// Every rule of docs/contract.md §2: the budget is read from the
    /// request (or given), forwarded, and pays for attempts, waits and
    /// queueing; calls below the floor are not made.
    #[default]
    Budget,
    /// The usual setup, what `--budget-mode off` switches to: no budget
    /// read, no budget header forwarded, no floor; every attempt gets
    /// `fixed_timeout`; retries up to `retry.max_attempts` with backoff and
    /// no budget checks; no retry budget. The breaker, the concurrency limit
    /// and `max_body` still apply when configured.
    Fixed,
}

/// Where a call's time comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Timing {
    /// The request's budget, already net of the per-hop reserve.
    Budget(Budget),
    /// Every attempt gets this long; no budget.
    Fixed(Duration),
}

/// One attempt's time: when it must end, how long that is, and the budget
/// its request says (`None` in fixed mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AttemptWindow {
    pub(crate) deadline: Instant,
    pub(crate) limit: Duration,
    pub(crate) budget: Option<Duration>,
}

impl Timing {
    /// What is left, net of the reserve; `None` in fixed mode.
    pub(crate) fn remaining(self) -> Option<Duration> {
        match self {
            Timing::Budget(net) => Some(net.remaining()),
            Timing::Fixed(_) => None,
        }
    }

    /// Rule 2: `Err` when what is left does not reach `floor`. Fixed mode
    /// has no floor.
    pub(crate) fn check_floor(self, floor: &Effective) -> Result<(), BelowFloor> {
        match self {
            Timing::Budget(net) => floor.check(net.remaining()),
            Timing::Fixed(_) => Ok(()),
        }
    }

    /// An attempt starting at `started`: it gets what is left, or less
    /// with a per-attempt `cap`, and its request says what it will be
    /// waited for; in fixed mode, the fixed timeout.
    pub(crate) fn attempt(self, started: Instant, cap: Option<Duration>) -> AttemptWindow {
        match self {
            Timing::Budget(net) => {
                let attempt = match cap {
                    Some(cap) => net.child_capped(cap),
                    None => net,
                };
                let left = attempt.remaining_at(started);
                AttemptWindow {
                    deadline: attempt.deadline(),
                    limit: left,
                    budget: Some(left),
                }
            }
            Timing::Fixed(timeout) => AttemptWindow {
                deadline: Budget::starting_at(started, timeout).deadline(),
                limit: timeout,
                budget: None,
            },
        }
    }

    /// Until when a call may wait for a concurrency permit (or a token
    /// refresh): until only the floor is left (later, the call could not
    /// be made anyway), or the fixed timeout from `start`.
    pub(crate) fn wait_until(self, start: Instant, floor: Floor) -> Instant {
        match self {
            Timing::Budget(net) => net
                .deadline()
                .checked_sub(floor.get())
                .map_or(start, |until| until.max(start)),
            Timing::Fixed(timeout) => Budget::starting_at(start, timeout).deadline(),
        }
    }

    /// What the retry decision sees: the time left and the floor the next
    /// attempt needs; unbounded and no floor in fixed mode.
    pub(crate) fn for_decision(self, floor: Floor) -> (Duration, Floor) {
        match self {
            Timing::Budget(net) => (net.remaining(), floor),
            Timing::Fixed(_) => (Duration::MAX, Floor::default()),
        }
    }

    /// The retry budget that pays for retries: none in fixed mode.
    pub(crate) fn retry_budget(self, dep: &Dependency) -> Option<&RetryBudget> {
        match self {
            Timing::Budget(_) => dep.retry_budget.as_ref(),
            Timing::Fixed(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_gets_what_is_left_or_its_cap_and_says_so() {
        let timing = Timing::Budget(Budget::new(ms(500)));
        tokio::time::advance(ms(100)).await;
        let now = Instant::now();
        let window = timing.attempt(now, None);
        assert_eq!(window.limit, ms(400));
        assert_eq!(window.budget, Some(ms(400)));
        assert_eq!(window.deadline, now + ms(400));
        let capped = timing.attempt(now, Some(ms(150)));
        assert_eq!(capped.budget, Some(ms(150)));
        assert_eq!(capped.deadline, now + ms(150));
        // A cap never lengthens an attempt past the budget.
        let long = timing.attempt(now, Some(ms(900)));
        assert_eq!(long.deadline, now + ms(400));
    }

    #[tokio::test(start_paused = true)]
    async fn fixed_mode_gives_each_attempt_the_timeout_and_sends_no_budget() {
        let timing = Timing::Fixed(ms(300));
        tokio::time::advance(ms(1000)).await;
        let now = Instant::now();
        let window = timing.attempt(now, None);
        assert_eq!((window.limit, window.budget), (ms(300), None));
        assert_eq!(window.deadline, now + ms(300));
        assert_eq!(timing.remaining(), None);
        assert_eq!(
            timing.for_decision(Floor::new(ms(50))),
            (Duration::MAX, Floor::default())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_where_only_the_floor_is_left_and_never_before_it_starts() {
        let timing = Timing::Budget(Budget::new(ms(500)));
        let now = Instant::now();
        assert_eq!(timing.wait_until(now, Floor::new(ms(100))), now + ms(400));
        assert_eq!(timing.wait_until(now, Floor::new(ms(900))), now);
        assert_eq!(
            Timing::Fixed(ms(300)).wait_until(now, Floor::new(ms(100))),
            now + ms(300)
        );
    }
}
