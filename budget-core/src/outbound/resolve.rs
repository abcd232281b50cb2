//! The steps before the engine, written once for every transport: which
//! budget a call spends (its own, the request's, or the dependency's
//! default outside any request), less the request's per-hop reserve and
//! capped by the call's own deadline; or the fixed timeout; the request's
//! criticality and trace context; and what the attempts' headers carry
//! ([`HeaderRules`]).

use std::time::Duration;

use super::TimeoutMode;
use super::headers::{Deadline, HeaderRules};
use super::{Plan, Timing};
use crate::Budget;
use crate::admission::criticality::Criticality;
use crate::context::RequestContext;
use crate::ledger::Ledger;

/// What the steps before the engine read of a dependency's configuration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallDefaults {
    /// From the budget, or with a fixed timeout.
    pub(crate) mode: TimeoutMode,
    /// Each attempt's timeout in fixed mode.
    pub(crate) fixed_timeout: Duration,
    /// The budget of a call made outside any request.
    pub(crate) default_budget: Option<Duration>,
    /// The budget and criticality headers are sent.
    pub(crate) forward: bool,
    /// How the deadline goes besides `request-budget-ms`.
    pub(crate) deadline: Deadline,
}

/// What a call brings of its own, beside the request it is made in.
#[derive(Debug, Default)]
pub(crate) struct Own {
    /// A budget of its own, in place of the request's.
    pub(crate) budget: Option<Budget>,
    /// A reserve of its own, in place of the request's.
    pub(crate) reserve: Option<Duration>,
    /// A ledger of its own, in place of the request's.
    pub(crate) ledger: Option<Ledger>,
    /// A deadline of its own (a gRPC call's `grpc-timeout`): when shorter
    /// than the budget, it bounds the call.
    pub(crate) cap: Option<Duration>,
}

/// A call in budget mode with no budget to spend: made outside any
/// request, with no budget of its own and no default. The HTTP client
/// refuses it (`NoBudget`); a layer in the caller's stack passes it
/// through as it came.
#[derive(Debug)]
pub(crate) struct NoBudget;

/// The call as the engine will run it, before its request's own parts
/// (method, idempotence).
#[derive(Debug)]
pub(crate) struct Resolved {
    pub(crate) timing: Timing,
    /// The budget before the reserve, and the reserve, when one was taken
    /// off and nothing shorter bounds the call.
    pub(crate) reserved: Option<(Budget, Duration)>,
    pub(crate) ledger: Option<Ledger>,
    pub(crate) criticality: Criticality,
    pub(crate) headers: HeaderRules,
}

impl CallDefaults {
    /// The call made in `cx` (or outside any request) with `own`.
    pub(crate) fn resolve(
        &self,
        own: Own,
        cx: Option<&RequestContext>,
    ) -> Result<Resolved, NoBudget> {
        let ledger = own.ledger.or_else(|| cx.map(|cx| cx.ledger().clone()));
        let mut reserved = None;
        let timing = match self.mode {
            TimeoutMode::Fixed => Timing::Fixed(self.fixed_timeout),
            TimeoutMode::Budget => {
                let Some(budget) = own
                    .budget
                    .or_else(|| cx.map(RequestContext::budget))
                    .or_else(|| self.default_budget.map(Budget::new))
                else {
                    return Err(NoBudget);
                };
                let reserve = own
                    .reserve
                    .or_else(|| cx.map(RequestContext::reserve))
                    .unwrap_or_default();
                let net = budget.less(reserve);
                let capped = own.cap.map(|cap| net.child_capped(cap));
                if !reserve.is_zero() && capped.is_none_or(|c| c.deadline() >= net.deadline()) {
                    reserved = Some((budget, reserve));
                }
                Timing::Budget(capped.unwrap_or(net))
            }
        };
        let criticality = cx.map_or(Criticality::Default, RequestContext::criticality);
        Ok(Resolved {
            timing,
            reserved,
            ledger,
            criticality,
            headers: HeaderRules {
                forward: self.forward,
                deadline: self.deadline,
                criticality,
                inbound_trace: cx.and_then(|cx| cx.inbound_trace().cloned()),
            },
        })
    }
}

impl Resolved {
    /// The engine's plan for a request of `method` that may be sent again
    /// when `may_retry` (over plain HTTP: a gRPC layer sets its
    /// `rpc_system`).
    pub(crate) fn plan(self, method: http::Method, may_retry: bool) -> Plan {
        Plan {
            timing: self.timing,
            ledger: self.ledger,
            may_retry,
            method,
            criticality: self.criticality,
            refreshes_auth: false,
            rpc_system: None,
            headers: self.headers,
            attempt_timeout: None,
            reserved: self.reserved,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn defaults(mode: TimeoutMode, default_budget: Option<u64>) -> CallDefaults {
        CallDefaults {
            mode,
            fixed_timeout: ms(700),
            default_budget: default_budget.map(ms),
            forward: true,
            deadline: Deadline::Http,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_in_a_request_spends_its_budget_less_the_reserve() {
        let cx = RequestContext::new(Budget::new(ms(500))).with_reserve(ms(20));
        let resolved = defaults(TimeoutMode::Budget, Some(9000))
            .resolve(Own::default(), Some(&cx))
            .unwrap();
        assert_eq!(resolved.timing.remaining(), Some(ms(480)));
        assert!(resolved.ledger.is_some());
        assert_eq!(resolved.reserved.map(|(_, r)| r), Some(ms(20)));
    }

    /// A call refused below its floor names the reserve when the reserve
    /// is what left too little (docs/contract.md §4); otherwise the note
    /// is the usual one.
    #[tokio::test(start_paused = true)]
    async fn a_refusal_names_the_reserve() {
        use crate::floor::{Effective, Floor};
        let check = |budget: u64, floor: u64| {
            let cx = RequestContext::new(Budget::new(ms(budget))).with_reserve(ms(5));
            let plan = defaults(TimeoutMode::Budget, None)
                .resolve(Own::default(), Some(&cx))
                .unwrap()
                .plan(http::Method::GET, true);
            plan.check_floor(&Effective::fixed(Floor::new(ms(floor))))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            check(5, 0),
            "no budget left: 5ms left, all of it the 5ms per-hop reserve"
        );
        assert_eq!(
            check(22, 20),
            "17ms left after the 5ms reserve < floor 20ms"
        );
        assert_eq!(check(8, 20), "3ms < floor 20ms");
    }

    #[tokio::test(start_paused = true)]
    async fn its_own_budget_and_reserve_win_and_its_own_deadline_caps() {
        let cx = RequestContext::new(Budget::new(ms(500))).with_reserve(ms(20));
        let own = Own {
            budget: Some(Budget::new(ms(300))),
            reserve: Some(ms(0)),
            ..Own::default()
        };
        let d = defaults(TimeoutMode::Budget, None);
        assert_eq!(
            d.resolve(own, Some(&cx)).unwrap().timing.remaining(),
            Some(ms(300))
        );
        let capped = Own {
            cap: Some(ms(100)),
            ..Own::default()
        };
        assert_eq!(
            d.resolve(capped, Some(&cx)).unwrap().timing.remaining(),
            Some(ms(100))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn outside_a_request_the_default_budget_or_none() {
        let with = defaults(TimeoutMode::Budget, Some(2000)).resolve(Own::default(), None);
        assert_eq!(with.unwrap().timing.remaining(), Some(ms(2000)));
        let without = defaults(TimeoutMode::Budget, None).resolve(Own::default(), None);
        assert!(without.is_err());
        // Fixed mode needs no budget.
        let fixed = defaults(TimeoutMode::Fixed, None).resolve(Own::default(), None);
        assert!(matches!(fixed.unwrap().timing, Timing::Fixed(t) if t == ms(700)));
    }
}
