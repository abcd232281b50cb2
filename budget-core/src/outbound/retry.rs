//! Another attempt or not (the [retry policy](crate::retry::RetryPolicy)
//! with what is left and the floor the next attempt needs), and the wait
//! before it: paid from the budget (rule 3), then the floor and the
//! circuit checked again, as for the first attempt (rule 2). A retry of an
//! attempt that never reached its replica goes to another replica at once
//! ([`requeue`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::attempt::Attempted;
use super::choose::{self, Chosen};
use super::record::{self, Refusal};
use super::{Dependency, Plan, Timing};
use crate::floor::Floor;
use crate::ledger::Entry;
use crate::retry::{
    Decision, DecisionInput, Outcome, RetryBudget, StopReason, TransportKind, sleep_within,
};

/// The decision after an attempt, and what it saw.
#[derive(Debug)]
pub(crate) struct Decided {
    pub(crate) decision: Decision,
    /// What was left (`Duration::MAX` in fixed mode).
    pub(crate) remaining: Duration,
    /// The floor the next attempt would need.
    pub(crate) floor: Floor,
    /// The next attempt's endpoint, when the retry goes to another at once
    /// ([`requeue`]).
    pub(crate) requeued: Option<Chosen>,
}

/// The retry policy's decision after `attempted` (its outcome, its
/// number, the wait before it: the backoff's memory); `retry_budget` pays
/// for a retry.
pub(crate) fn decide<R>(
    dep: &Dependency,
    plan: &Plan,
    attempted: &Attempted<R>,
    retry_budget: Option<&RetryBudget>,
) -> Decided {
    let (remaining, floor) = plan.timing.for_decision(dep.floor.current().floor);
    let input = DecisionInput {
        outcome: attempted.outcome,
        attempts: attempted.number,
        may_retry: plan.may_retry,
        remaining,
        floor,
        previous_wait: attempted.waited,
    };
    let decision = dep.policy.decide(&input, retry_budget, &mut rand::rng());
    Decided {
        decision,
        remaining,
        floor,
        requeued: None,
    }
}

/// The next attempt's endpoint when the retry is a *requeue*: the attempt
/// that failed never reached its endpoint (no connection was made:
/// refused, unreachable, or not within the connect cap), and another
/// endpoint than `last`'s can be chosen now. Such a retry goes at once,
/// with no backoff (docs/contract.md §2 rule 7): the wait protects a
/// partner that failed from being asked again too soon, and this retry
/// neither asks it again nor follows any work it did (Finagle requeues
/// such requests the same way). It is still a retry: the retry policy
/// allowed it, the retry budget paid for it, and the floor holds.
/// `None` for any other failure, for a dependency of one endpoint, or
/// when the choice falls on `last`'s endpoint again: the retry then waits
/// its backoff ([`wait`]).
pub(crate) fn requeue(
    dep: &Dependency,
    plan: &Plan,
    outcome: Outcome,
    last: &Chosen,
) -> Option<Chosen> {
    let unreached = matches!(
        outcome,
        Outcome::Transport(TransportKind::Connect | TransportKind::ConnectTimeout)
    );
    if !unreached || dep.endpoints.only().is_some() {
        return None;
    }
    plan.check_floor(&dep.floor.current()).ok()?;
    let next = choose::next(dep, plan.timing.remaining(), Some(&last.endpoint)).ok()?;
    // Dropped unused when it is the same endpoint: a breaker permit
    // dropped unheard is neutral.
    (!Arc::ptr_eq(&next.endpoint, &last.endpoint)).then_some(next)
}

/// Sleeps the retry's wait within the budget and records it; then the
/// next attempt's admission: its endpoint (another than `last`'s, when
/// there is one) and breaker permit, or the decision that stops the call
/// (a refusal recorded as for the first attempt, with what `decided`
/// saw).
pub(crate) async fn wait(
    dep: &Dependency,
    plan: &Plan,
    decided: &Decided,
    last: &Chosen,
) -> Result<(Duration, Chosen), Decision> {
    let Decision::Retry { after } = decided.decision else {
        return Err(decided.decision);
    };
    let (remaining, floor) = (decided.remaining, decided.floor);
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
    if let Err(below) = plan.check_floor(&dep.floor.current()) {
        refuse(Refusal::BelowFloor(below));
        return Err(Decision::Stop(StopReason::WaitExceedsBudget {
            wait: after,
            remaining,
            floor,
        }));
    }
    match choose::next(dep, plan.timing.remaining(), Some(&last.endpoint)) {
        Ok(next) => Ok((wait, next)),
        Err(not) => {
            refuse(not.into());
            Err(Decision::Stop(StopReason::NotRetryable))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Budget;
    use crate::client::DependencyConfig;
    use crate::floor::FloorConfig;
    use crate::ledger::Ledger;
    use crate::retry::TransportKind;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn plan(timing: Timing, ledger: &Ledger) -> Plan {
        Plan::test(timing, ledger, true)
    }

    fn dependency(floor: u64) -> Dependency {
        DependencyConfig::new("pricing", "http://127.0.0.1:9/")
            .floor(FloorConfig::fixed(ms(floor)))
            .settings(None)
            .unwrap()
            .dependency
    }

    /// A decision to retry after `after`, with what it saw.
    fn retry_after(after: Duration, remaining: Duration, floor: Floor) -> Decided {
        Decided {
            decision: Decision::Retry { after },
            remaining,
            floor,
            requeued: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_decision_sees_what_is_left_and_the_floor_and_fixed_mode_sees_neither() {
        let dep = dependency(50);
        let ledger = Ledger::new();
        let refused = Outcome::Transport(TransportKind::Connect);
        let budget = plan(Timing::Budget(Budget::new(ms(800))), &ledger);
        let attempted = Attempted::test(refused, ms(10), None, None);
        let decided = decide(&dep, &budget, &attempted, None);
        assert_eq!(
            (decided.remaining, decided.floor),
            (ms(800), Floor::new(ms(50)))
        );
        assert!(decided.decision.is_retry());
        let fixed = plan(Timing::Fixed(ms(300)), &ledger);
        let decided = decide(&dep, &fixed, &attempted, None);
        assert_eq!(
            (decided.remaining, decided.floor),
            (Duration::MAX, Floor::default())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_is_paid_from_the_budget_and_recorded() {
        let dep = dependency(50);
        let ledger = Ledger::new();
        let timing = Timing::Budget(Budget::new(ms(800)));
        let start = Instant::now();
        let last = choose::next(&dep, None, None).unwrap();
        let (waited, next) = wait(
            &dep,
            &plan(timing, &ledger),
            &retry_after(ms(100), ms(800), Floor::new(ms(50))),
            &last,
        )
        .await
        .unwrap();
        assert_eq!((waited, start.elapsed()), (ms(100), ms(100)));
        assert!(next.breaker.is_none(), "no breaker, no permit");
        assert!(
            matches!(&ledger.entries()[..], [Entry::Wait { duration, .. }] if *duration == ms(100)),
            "{:?}",
            ledger.entries()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_whose_wait_left_less_than_the_floor_is_not_made_and_says_why() {
        let dep = dependency(200);
        let ledger = Ledger::new();
        let timing = Timing::Budget(Budget::new(ms(250)));
        let last = choose::next(&dep, None, None).unwrap();
        let stop = wait(
            &dep,
            &plan(timing, &ledger),
            &retry_after(ms(100), ms(250), Floor::new(ms(200))),
            &last,
        )
        .await
        .unwrap_err();
        assert_eq!(
            stop,
            Decision::Stop(StopReason::WaitExceedsBudget {
                wait: ms(100),
                remaining: ms(250),
                floor: Floor::new(ms(200)),
            })
        );
        let entries = ledger.entries();
        assert!(
            matches!(&entries[..], [Entry::Wait { .. }, Entry::Skip { reason, .. }] if reason == "skipped: 150ms < floor 200ms"),
            "{entries:?}"
        );
    }
}
