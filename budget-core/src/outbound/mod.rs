//! The outbound engine: docs/contract.md §2 for one dependency call, from
//! the floor check to the last attempt, shared by every transport
//! (reqwest's `BudgetClient`, a tonic channel's `GrpcBudgetLayer`, the
//! reqwest-middleware and tower adapters; docs/architecture.md, "The
//! outbound engine").
//!
//! Before the engine, [`resolve`] reads the call's time, criticality and
//! header rules once for every transport. Then [`Call::run`] reads as the
//! order of its steps; each step is a method of [`Call`] or one file,
//! named after what it decides:
//!
//! 1. [`admission`]: may the call be made at all (the floor, the circuit
//!    of the endpoint [`choose`] picks, a concurrency permit paid from the
//!    budget, the retry and hedge budgets' deposits)?
//! 2. [`attempt`]: one attempt under its deadline (what is left, or a
//!    per-attempt cap, or the fixed timeout), sent by the [`Transport`]
//!    with its headers [stamped](headers); [`hedge`] races a second one
//!    against a slow first.
//! 3. [`classify`]: what the answer is (the transport reads its
//!    protocol's status; the breaker's verdict is the same for all).
//! 4. [`record`]: the ledger entry, metric, span and log line of every
//!    attempt and every refusal, written in one place.
//! 5. [`learn`]: the learned floor, the hedge delay and the adaptive limit
//!    hear the attempt.
//! 6. [`retry`]: another attempt or not, and the wait before it, paid
//!    from the budget, with the floor checked again and the next attempt's
//!    endpoint [chosen](choose) (another replica, when there is one); an
//!    attempt that never reached its replica is retried on another at
//!    once, without the wait.
//!
//! The engine is generic over the [`Transport`], so its timing rules are
//! tested with a paused clock and no sockets (`testing::Fake`); a new
//! transport is one more implementation.

mod admission;
pub(crate) mod attempt;
pub(crate) mod call;
mod choose;
mod classify;
pub(crate) mod endpoints;
pub(crate) mod error;
pub(crate) mod headers;
mod hedge;
pub(crate) mod hedging;
mod learn;
pub(crate) mod permits;
pub(crate) mod record;
pub(crate) mod resolve;
mod retry;
#[cfg(test)]
pub(crate) mod testing;
mod timing;
pub(crate) mod transport;

use std::sync::Arc;

use crate::admission::criticality::Criticality;
use crate::floor::DependencyFloor;
use crate::ledger::Ledger;
use crate::retry::{Decision, Outcome, RetryBudget, RetryPolicy};
use endpoints::Endpoints;
use hedging::Hedging;
use permits::Permits;

pub(crate) use attempt::{AttemptError, AttemptSpec};
pub(crate) use call::Call;
pub(crate) use classify::http_outcome;
pub(crate) use headers::{Deadline, HeaderRules};
pub use record::QUEUE_SUFFIX;
pub use timing::TimeoutMode;
pub(crate) use timing::Timing;
pub(crate) use transport::{Head, Transport};

/// What the engine knows of one dependency, shared by all its calls: its
/// name, floor, retry policy and budget, endpoints (each with its breaker
/// and load), permits and hedging.
///
/// The floor and the hedge delay are the dependency's, not each
/// endpoint's: the floor is what any answer needs at least and the
/// balancer steers calls to the endpoints that give it; the hedge delay is
/// the dependency's p95, and the hedge goes to another replica. The
/// breaker, the latency estimate and an adaptive limit are per endpoint:
/// they tell the replicas apart, and each replica is a partner with its own
/// workers and no-queue latency, whose knee one limit over all of them
/// cannot learn (the permit queue's size is their sum).
#[derive(Clone, Debug)]
pub(crate) struct Dependency {
    pub(crate) name: Arc<str>,
    pub(crate) floor: DependencyFloor,
    pub(crate) policy: RetryPolicy,
    pub(crate) retry_budget: Option<RetryBudget>,
    pub(crate) endpoints: Endpoints,
    pub(crate) permits: Option<Permits>,
    pub(crate) hedge: Option<Arc<Hedging>>,
}

impl Dependency {
    /// A dependency of one endpoint, known by its `name`: no floor, the
    /// retry `policy`, no retry budget, breaker, permits or hedging.
    #[cfg(any(
        feature = "grpc",
        feature = "tower-client",
        feature = "reqwest-middleware",
        feature = "postgres"
    ))]
    pub(crate) fn single(name: Arc<str>, policy: RetryPolicy) -> Self {
        Self {
            endpoints: Endpoints::single(&name, None),
            name,
            floor: DependencyFloor::Fixed(crate::floor::Floor::new(std::time::Duration::ZERO)),
            policy,
            retry_budget: None,
            permits: None,
            hedge: None,
        }
    }
}

/// One call, apart from the request itself.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) timing: Timing,
    pub(crate) ledger: Option<Ledger>,
    /// Idempotent (or keyed) and with a replayable body.
    pub(crate) may_retry: bool,
    /// The request's method, for the attempts' spans.
    pub(crate) method: http::Method,
    /// The request's criticality: the permit queue's order.
    pub(crate) criticality: Criticality,
    /// A `401` is answered by refreshing the client's token (the `auth`
    /// module), not a sign of a failing dependency: the breaker hears it
    /// as neutral.
    pub(crate) refreshes_auth: bool,
    /// The telemetry's `rpc.system` (`grpc`); `None` for plain HTTP.
    pub(crate) rpc_system: Option<&'static str>,
    /// What every attempt's headers carry besides its budget.
    pub(crate) headers: HeaderRules,
    /// The call's own limit on each attempt (a reqwest request's own
    /// timeout), below what is left.
    pub(crate) attempt_timeout: Option<std::time::Duration>,
    /// The request's budget before its per-hop reserve was taken off, and
    /// the reserve, for a refusal to name (`3ms left after the 5ms
    /// reserve < floor 20ms`); `None` without a reserve.
    pub(crate) reserved: Option<(crate::Budget, std::time::Duration)>,
}

impl Plan {
    /// Rule 2: `Err` when what is left does not reach `floor`; when the
    /// per-hop reserve is what decided it (the budget before the reserve
    /// would have reached the floor), the refusal names it. Fixed mode has
    /// no floor.
    pub(crate) fn check_floor(
        &self,
        floor: &crate::floor::Effective,
    ) -> Result<(), crate::floor::BelowFloor> {
        self.timing
            .check_floor(floor)
            .map_err(|below| match self.reserved {
                Some((gross, reserve)) if floor.check(gross.remaining()).is_ok() => {
                    below.after_reserve(gross.remaining(), reserve)
                }
                _ => below,
            })
    }
}

#[cfg(test)]
impl Plan {
    /// A plan for the engine's tests: a `GET` of default criticality over
    /// HTTP, recorded in `ledger`.
    pub(crate) fn test(timing: Timing, ledger: &Ledger, may_retry: bool) -> Self {
        Self {
            timing,
            ledger: Some(ledger.clone()),
            may_retry,
            method: http::Method::GET,
            criticality: Criticality::Default,
            refreshes_auth: false,
            rpc_system: None,
            headers: HeaderRules {
                forward: true,
                deadline: Deadline::Http,
                criticality: Criticality::Default,
                inbound_trace: None,
            },
            attempt_timeout: None,
            reserved: None,
        }
    }
}

/// The answer of a call's last attempt, and what the engine made of it.
#[derive(Debug)]
pub(crate) struct Finished<R> {
    pub(crate) response: R,
    /// The attempts made (the HTTP client's answer says how many).
    #[cfg(any(feature = "client", test))]
    pub(crate) attempts: u32,
    /// What the engine made of the answer (the HTTP client's `Retry-After`).
    #[cfg(feature = "client")]
    pub(crate) outcome: Outcome,
    /// Whether the answer is passed up (the HTTP client's).
    #[cfg(feature = "client")]
    pub(crate) decision: Decision,
}

impl<R> Finished<R> {
    /// The answer after `attempts`, classified `outcome`, ended by
    /// `decision`: the gRPC layer and the adapters read the answer alone,
    /// the HTTP client the rest too.
    fn new(response: R, attempts: u32, outcome: Outcome, decision: Decision) -> Self {
        #[cfg(not(any(feature = "client", test)))]
        let _ = attempts;
        #[cfg(not(feature = "client"))]
        let _ = (outcome, decision);
        Self {
            response,
            #[cfg(any(feature = "client", test))]
            attempts,
            #[cfg(feature = "client")]
            outcome,
            #[cfg(feature = "client")]
            decision,
        }
    }
}
