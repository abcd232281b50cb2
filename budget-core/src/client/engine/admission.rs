//! Whether a call may be made at all, before any I/O: what is left covers
//! the dependency's floor (rule 2), its circuit lets a call through, a
//! concurrency permit comes within the budget (rules 8 and 11); then the
//! call pays its deposits into the retry and hedge budgets.

use tokio::time::Instant;

use super::record::{self, QUEUE_SUFFIX, Refusal};
use super::{Dependency, Plan, Timing};
use crate::admission::Criticality;
use crate::breaker::{BreakerPermit, CircuitOpen};
use crate::client::error::CallError;
use crate::client::hedge::Hedging;
use crate::client::permits::{Permit, Permits};
use crate::floor::Floor;
use crate::ledger::Entry;
use crate::retry::RetryBudget;

/// A call let through: the permits it holds and the budgets that pay for
/// its retries and hedge.
pub(crate) struct Admitted<'a> {
    /// Held to the end of the call, backoff included (rule 8).
    pub(crate) permit: Option<Permit>,
    /// The first attempt's breaker permit.
    pub(crate) breaker: Option<BreakerPermit>,
    /// Pays for retries (none in fixed mode).
    pub(crate) retry_budget: Option<&'a RetryBudget>,
    /// The call may be hedged: only a call that may be sent twice, in
    /// budget mode (README, "Hedged requests").
    pub(crate) hedging: Option<&'a Hedging>,
}

/// Lets a call through or says why not ([`record::refused`]: the ledger's
/// skip note, the metric, the span, the log).
pub(crate) async fn admit<'a>(dep: &'a Dependency, plan: &Plan) -> Result<Admitted<'a>, CallError> {
    let timing = plan.timing;
    let refuse = |refusal| record::refused(&dep.name, timing, &plan.ledger, refusal);

    // Rule 2: below the floor, no I/O at all.
    let floor = dep.floor.current();
    timing
        .check_floor(&floor)
        .map_err(|below| refuse(Refusal::BelowFloor(below)))?;

    let breaker = breaker(dep).map_err(|open| refuse(Refusal::CircuitOpen(open)))?;

    let permit = match &dep.permits {
        Some(permits) => {
            let acquired = permit(permits, timing, floor.floor, plan.criticality).await;
            let waited = match &acquired {
                Ok(permit) => permit.waited,
                // Refused at arrival: no wait to show, the skip note says why.
                Err(Refusal::NoPermit { waited, .. }) => Some(*waited).filter(|w| !w.is_zero()),
                Err(_) => None,
            };
            if let Some(waited) = waited {
                let name = &dep.name;
                record::ledger(
                    plan,
                    Entry::local(format!("{name}{QUEUE_SUFFIX}"), waited, None),
                );
            }
            Some(acquired.map_err(refuse)?)
        }
        None => None,
    };

    let retry_budget = timing.retry_budget(dep);
    if let Some(retry_budget) = retry_budget {
        retry_budget.deposit();
    }
    let hedging = match (&dep.hedge, timing) {
        (Some(hedging), Timing::Budget(_)) if plan.may_retry => {
            hedging.deposit();
            Some(&**hedging)
        }
        _ => None,
    };
    Ok(Admitted {
        permit,
        breaker,
        retry_budget,
        hedging,
    })
}

/// A breaker permit for the next attempt (`None` without a breaker), or
/// why the circuit refuses.
pub(crate) fn breaker(dep: &Dependency) -> Result<Option<BreakerPermit>, CircuitOpen> {
    match &dep.breaker {
        Some(breaker) => breaker.try_acquire().map(Some),
        None => Ok(None),
    }
}

/// Waits for a concurrency permit: at once when one is free; otherwise at
/// most until [`Timing::wait_until`] (the queue may refuse earlier, rule
/// 11).
async fn permit(
    permits: &Permits,
    timing: Timing,
    floor: Floor,
    criticality: Criticality,
) -> Result<Permit, Refusal> {
    let until = timing.wait_until(Instant::now(), floor);
    permits
        .acquire(until, criticality)
        .await
        .map_err(|(waited, queue)| Refusal::NoPermit {
            waited,
            floor,
            queue,
            left: timing.remaining(),
        })
}
