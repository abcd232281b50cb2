//! Another attempt or not (the [retry policy](crate::retry::RetryPolicy)
//! with what is left and the floor the next attempt needs), and the wait
//! before it: paid from the budget (rule 3), then the floor and the
//! circuit checked again, as for the first attempt (rule 2).

use std::time::Duration;

use tokio::time::Instant;

use super::record::{self, Refusal};
use super::{Dependency, Plan, Timing, admission};
use crate::breaker::BreakerPermit;
use crate::floor::Floor;
use crate::ledger::Entry;
use crate::retry::{Decision, DecisionInput, Outcome, RetryBudget, StopReason, sleep_within};

/// The decision after an attempt, and what it saw.
#[derive(Debug)]
pub(crate) struct Decided {
    pub(crate) decision: Decision,
    /// What was left (`Duration::MAX` in fixed mode).
    pub(crate) remaining: Duration,
    /// The floor the next attempt would need.
    pub(crate) floor: Floor,
}

/// The retry policy's decision after attempt `attempts`, which read as
/// `outcome`; `waited` is the wait before it (the backoff's memory), and
/// `retry_budget` pays for a retry.
pub(crate) fn decide(
    dep: &Dependency,
    plan: &Plan,
    outcome: Outcome,
    attempts: u32,
    waited: Option<Duration>,
    retry_budget: Option<&RetryBudget>,
) -> Decided {
    let (remaining, floor) = plan.timing.for_decision(dep.floor.current().floor);
    let input = DecisionInput {
        outcome,
        attempts,
        may_retry: plan.may_retry,
        remaining,
        floor,
        previous_wait: waited,
    };
    let decision = dep.policy.decide(&input, retry_budget, &mut rand::rng());
    Decided {
        decision,
        remaining,
        floor,
    }
}

/// Sleeps `after` within the budget and records the wait; then the next
/// attempt's admission: its breaker permit, or the decision that stops
/// the call (a refusal recorded as for the first attempt; `remaining` and
/// `floor` are what the decision saw).
pub(crate) async fn wait(
    dep: &Dependency,
    plan: &Plan,
    after: Duration,
    remaining: Duration,
    floor: Floor,
) -> Result<(Duration, Option<BreakerPermit>), Decision> {
    let waiting = Instant::now();
    match plan.timing {
        // An error means the deadline came: the floor check below stops.
        Timing::Budget(net) => sleep_within(after, &net).await.unwrap_or_default(),
        Timing::Fixed(_) => tokio::time::sleep(after).await,
    }
    let wait = waiting.elapsed();
    record::ledger(plan, Entry::wait(&*dep.name, wait));
    let refuse = |refusal| record::refused(&dep.name, plan.timing, &plan.ledger, refusal);
    // Rule 2 holds for retries too: the wait was chosen to leave the
    // floor, but time passes between the decision and the send (rule 3).
    if let Err(below) = plan.timing.check_floor(&dep.floor.current()) {
        refuse(Refusal::BelowFloor(below));
        return Err(Decision::Stop(StopReason::WaitExceedsBudget {
            wait: after,
            remaining,
            floor,
        }));
    }
    match admission::breaker(dep) {
        Ok(permit) => Ok((wait, permit)),
        Err(open) => {
            refuse(Refusal::CircuitOpen(open));
            Err(Decision::Stop(StopReason::NotRetryable))
        }
    }
}
