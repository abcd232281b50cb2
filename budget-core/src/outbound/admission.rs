//! Whether a call may be made at all, before any I/O: what is left covers
//! the dependency's floor (rule 2), an endpoint's circuit lets a call
//! through ([`choose`](super::choose)), a concurrency permit comes within
//! the budget (rules 8 and 11); then the call pays its deposits into the
//! retry and hedge budgets.

use tokio::time::Instant;

use super::choose::{self, Chosen, NotChosen};
use super::record::{self, QUEUE_SUFFIX, Refusal};
use super::{Dependency, Plan, Timing};
use crate::admission::criticality::Criticality;
use crate::floor::Floor;
use crate::ledger::Entry;
use crate::outbound::error::CallError;
use crate::outbound::hedging::Hedging;
use crate::outbound::permits::{Permit, Permits};
use crate::retry::RetryBudget;

/// A call let through: the permits it holds and the budgets that pay for
/// its retries and hedge.
pub(crate) struct Admitted<'a> {
    /// Held to the end of the call, backoff included (rule 8).
    pub(crate) permit: Option<Permit>,
    /// The first attempt's endpoint and its breaker permit.
    pub(crate) chosen: Chosen,
    /// Pays for retries (none in fixed mode).
    pub(crate) retry_budget: Option<&'a RetryBudget>,
    /// The call may be hedged: only a call that may be sent twice, in
    /// budget mode (docs/hedging-and-stale.md).
    pub(crate) hedging: Option<&'a Hedging>,
}

/// Lets a call through or says why not ([`record::refused`]: the ledger's
/// skip note, the metric, the span, the log).
pub(crate) async fn admit<'a>(dep: &'a Dependency, plan: &Plan) -> Result<Admitted<'a>, CallError> {
    let timing = plan.timing;
    let refuse = |refusal| record::refused(&dep.name, timing, &plan.ledger, refusal);

    // Rule 2: below the floor, no I/O at all.
    let floor = dep.floor.current();
    plan.check_floor(&floor)
        .map_err(|below| refuse(Refusal::BelowFloor(below)))?;

    // One endpoint (the usual case) is chosen without an await; a name's
    // first lookup is boxed, so that only dependencies with replicas carry
    // its state in the call's future.
    let mut chosen = match choose::only(dep) {
        Some(only) => only,
        None => Box::pin(choose::first(dep, timing.remaining())).await,
    }
    .map_err(|not| refuse(not.into()))?;

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
            let permit = acquired.map_err(refuse)?;
            if waited.is_some() && chosen.balanced {
                // Chosen again: the replicas' loads and breakers moved
                // while the call waited (tower's balancer, too, chooses
                // when the call can go). The first choice's breaker
                // permit is dropped unheard, which is neutral.
                drop(chosen);
                chosen = choose::next(dep, timing.remaining(), None)
                    .map_err(|not| refuse(not.into()))?;
            }
            Some(permit)
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
        chosen,
        retry_budget,
        hedging,
    })
}

impl From<NotChosen> for Refusal {
    fn from(not: NotChosen) -> Self {
        match not {
            NotChosen::Open(open) => Refusal::CircuitOpen(open),
            NotChosen::Resolve(e) => Refusal::Unresolved(e),
        }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::budget::Budget;
    use crate::client::DependencyConfig;
    use crate::floor::FloorConfig;
    use crate::ledger::Ledger;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn dependency(config: DependencyConfig) -> Dependency {
        config.settings(None).unwrap().dependency
    }

    fn plan(timing: Timing, ledger: &Ledger, may_retry: bool) -> Plan {
        Plan::test(timing, ledger, may_retry)
    }

    #[tokio::test(start_paused = true)]
    async fn below_the_floor_nothing_is_taken_and_the_skip_note_says_why() {
        let dep = dependency(
            DependencyConfig::new("pricing", "http://127.0.0.1:9/")
                .floor(FloorConfig::fixed(ms(50)))
                .concurrency(1),
        );
        let ledger = Ledger::new();
        let timing = Timing::Budget(Budget::new(ms(30)));
        let Err(refused) = admit(&dep, &plan(timing, &ledger, true)).await else {
            panic!("admitted below the floor");
        };
        assert!(refused.is_below_floor());
        assert_eq!(refused.skip_note(), Some("skipped: 30ms < floor 50ms"));
        // No permit was taken: the one there is, is free.
        assert!(dep.permits.as_ref().unwrap().try_acquire().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_for_a_permit_is_paid_from_the_budget_and_in_the_ledger() {
        let dep =
            dependency(DependencyConfig::new("pricing", "http://127.0.0.1:9/").concurrency(1));
        let held = dep.permits.as_ref().unwrap().try_acquire().unwrap();
        let ledger = Ledger::new();
        let timing = Timing::Budget(Budget::new(ms(1000)));
        let release = async {
            tokio::time::sleep(ms(40)).await;
            drop(held);
        };
        let plan = plan(timing, &ledger, true);
        let (admitted, ()) = tokio::join!(admit(&dep, &plan), release);
        let admitted = admitted.unwrap();
        assert!(admitted.permit.is_some());
        let waited: Vec<Duration> = ledger
            .entries()
            .into_iter()
            .filter_map(|e| match e {
                Entry::Local { name, duration, .. } if name == "pricing-queue" => Some(duration),
                _ => None,
            })
            .collect();
        assert_eq!(waited, [ms(40)]);
    }

    /// A call that waited for its permit goes where the choice falls when
    /// it gets it: the replica chosen at its arrival opened its circuit
    /// in the meantime, and the call goes to the other one.
    #[tokio::test(start_paused = true)]
    async fn a_call_that_waited_for_its_permit_chooses_its_replica_again() {
        use crate::breaker::{BreakerConfig, Verdict};
        let dep = dependency(
            DependencyConfig::new("pricing", "http://127.0.0.1:9000/")
                .endpoints(["http://127.0.0.1:9001", "http://127.0.0.1:9002"])
                .breaker(BreakerConfig::default().failure_threshold(1))
                .concurrency(1),
        );
        let set = dep.endpoints.current();
        // Replica 0 the faster: the choice at arrival.
        set[0].load.observe(ms(10), Instant::now());
        set[1].load.observe(ms(500), Instant::now());
        let held = dep.permits.as_ref().unwrap().try_acquire().unwrap();
        let ledger = Ledger::new();
        let plan = plan(Timing::Budget(Budget::new(ms(1000))), &ledger, true);
        let meanwhile = async {
            tokio::time::sleep(ms(40)).await;
            let breaker = set[0].breaker.as_ref().unwrap();
            breaker.try_acquire().unwrap().record(Verdict::Failure);
            drop(held);
        };
        let (admitted, ()) = tokio::join!(admit(&dep, &plan), meanwhile);
        let admitted = admitted.unwrap();
        assert_eq!(admitted.chosen.endpoint, set[1]);
        assert!(admitted.chosen.breaker.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_call_that_may_be_sent_twice_in_budget_mode_may_be_hedged() {
        let dep = dependency(
            DependencyConfig::new("pricing", "http://127.0.0.1:9/")
                .hedge(crate::client::HedgeConfig::after(ms(20))),
        );
        let ledger = Ledger::new();
        let budget = Timing::Budget(Budget::new(ms(1000)));
        let hedged = admit(&dep, &plan(budget, &ledger, true)).await.unwrap();
        assert!(hedged.hedging.is_some());
        let once = admit(&dep, &plan(budget, &ledger, false)).await.unwrap();
        assert!(once.hedging.is_none(), "not idempotent");
        let fixed = admit(&dep, &plan(Timing::Fixed(ms(300)), &ledger, true))
            .await
            .unwrap();
        assert!(fixed.hedging.is_none(), "fixed mode");
        assert!(
            fixed.retry_budget.is_none(),
            "fixed mode pays no retry budget"
        );
    }
}
