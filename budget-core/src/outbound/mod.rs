//! The call engine: docs/contract.md §2 for one dependency call, from the
//! floor check to the last attempt, shared by the HTTP client and the gRPC
//! layer.
//!
//! [`run`] reads as the order of its steps; each step is one file, named
//! after what it decides:
//!
//! 1. [`admission`]: may the call be made at all (the floor, the circuit
//!    of the endpoint [`choose`] picks, a concurrency permit paid from the
//!    budget, the retry and hedge budgets' deposits)?
//! 2. [`attempt`]: one attempt under its deadline (what is left, or a
//!    per-attempt cap, or the fixed timeout), the budget it is sent;
//!    [`hedge`] races a second one against a slow first.
//! 3. [`classify`]: what the answer is (the retry policy's outcome, the
//!    breaker's verdict), for HTTP and gRPC answers alike.
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
//! The engine is generic over the attempt (a function from
//! [`AttemptSpec`] to an answer), so the timing rules are tested with a
//! paused clock and no sockets; the transports (reqwest, a tonic channel)
//! each provide one.

// With `grpc` alone some of the HTTP client's parts are built but unread.
#![cfg_attr(not(feature = "client"), allow(dead_code))]

mod admission;
mod attempt;
mod choose;
mod classify;
pub(crate) mod endpoints;
pub(crate) mod error;
mod hedge;
pub(crate) mod hedging;
mod learn;
pub(crate) mod permits;
mod record;
mod retry;
#[cfg(test)]
pub(crate) mod testing;
mod timing;

use std::future::Future;
use std::sync::Arc;

use tokio::time::Instant;
use tracing::Instrument;

use crate::admission::criticality::Criticality;
use crate::clock::WallClock;
use crate::floor::DependencyFloor;
use crate::ledger::Ledger;
use crate::retry::{Decision, Outcome, RetryBudget, RetryPolicy};
use endpoints::Endpoints;
use error::CallError;
use hedging::Hedging;
use permits::{Permit, Permits};

pub(crate) use attempt::{AttemptError, AttemptSpec};
pub(crate) use classify::Answer;
pub use record::QUEUE_SUFFIX;
pub(crate) use timing::Timing;

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

/// The protocol of a call's answers, for reading them ([`classify`]) and
/// for the telemetry's `rpc.system`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rpc {
    /// Plain HTTP: the status and `Retry-After`.
    Http,
    /// gRPC: `grpc-status` and `grpc-retry-pushback-ms` in the head.
    Grpc,
}

/// One call, apart from the request itself.
#[derive(Debug)]
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
    /// How the answers read.
    pub(crate) rpc: Rpc,
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
            rpc: Rpc::Http,
        }
    }
}

/// The answer of a call's last attempt, and what the engine made of it.
#[derive(Debug)]
pub(crate) struct Finished<R> {
    pub(crate) response: R,
    pub(crate) attempts: u32,
    pub(crate) outcome: Outcome,
    pub(crate) decision: Decision,
}

/// Runs one call: [`admission`], then attempts (the first maybe
/// [hedged](hedge)) until the [retry step](retry) stops, each
/// [classified](classify), [recorded](record) and [learned](learn) from.
/// Every attempt, wait and skip goes into `plan.ledger`.
///
/// Dropping the returned future drops the attempt in flight, and no
/// further attempt starts.
///
/// `answer` turns the last attempt's answer into the call's (the HTTP
/// client's `BudgetResponse`, the gRPC layer's response as it came), in
/// place where the engine finishes.
pub(crate) async fn run<R, T, A, F>(
    dep: &Dependency,
    clock: &dyn WallClock,
    plan: Plan,
    mut attempt: A,
    answer: impl FnOnce(Finished<R>) -> T,
) -> Result<T, CallError>
where
    R: Answer,
    A: FnMut(AttemptSpec) -> F,
    F: Future<Output = attempt::Tried<R>>,
{
    let admitted = admission::admit(dep, &plan).await?;
    // Held to the end of the call, backoff included (rule 8).
    let _permit: Option<Permit> = admitted.permit;
    let mut chosen = admitted.chosen;
    let mut number = 0;
    let mut waited = None;
    loop {
        number += 1;
        if let Some(permit) = &mut chosen.breaker {
            // The breaker counts the attempt's silence from now, not from
            // its admission (before the wait for a concurrency permit).
            permit.mark_sent();
        }
        let in_flight_to = chosen.start();
        let started = Instant::now();
        let elsewhere = attempt::elsewhere(dep, &chosen, plan.may_retry, number);
        let window = plan.timing.attempt(
            started,
            attempt::cap(dep, chosen.breaker.as_ref(), elsewhere),
        );
        // Only the budget is kept past the attempt: the call's state holds
        // no more than it needs across its awaits.
        let budget = window.budget;
        let span = record::attempt_started(dep, &plan, number, budget, waited);
        let in_flight = dep
            .permits
            .as_ref()
            .and_then(|p| p.adaptive_in_flight(&chosen.endpoint));
        let hedge_delay = admitted
            .hedging
            .filter(|_| number == 1)
            .and_then(Hedging::delay);
        // The attempt lives in this block only: a race's loser is dropped
        // (cancelled) as soon as the race ends.
        let tried = {
            let spec = AttemptSpec {
                number,
                budget,
                endpoint: Arc::clone(&chosen.endpoint),
            };
            // Pinned where it is: awaiting it (or racing it) through the
            // pin keeps one copy of the attempt's state in this future.
            let mut sent = std::pin::pin!(attempt::bounded(
                window,
                attempt(spec).instrument(span.clone())
            ));
            match (admitted.hedging, hedge_delay) {
                (Some(hedging), Some(delay)) => {
                    let race = hedge::Race {
                        dep,
                        clock,
                        plan: &plan,
                        hedging,
                        started,
                    };
                    // Boxed: a race holds a second attempt, and only
                    // hedged calls should carry its size.
                    Box::pin(race.run(delay, sent.as_mut(), &mut chosen, &mut attempt)).await
                }
                _ => {
                    let result = sent.as_mut().await;
                    hedge::Raced::alone(result, started)
                }
            }
        };

        drop(in_flight_to);
        let hedge::Raced {
            result,
            took,
            hedge_won,
        } = tried;
        let outcome = classify::outcome_of(&result, plan.rpc, clock);
        if chosen.breaker.is_some() || chosen.balanced {
            let verdict = classify::verdict_of(&result, &outcome, &plan);
            // When the hedge won, `chosen` is the hedge's endpoint.
            learn::heard(dep, &mut chosen, verdict, took);
        }
        record::attempt_ended(dep, &plan, number, took, hedge_won, &outcome, &chosen);
        let mut decided = retry::decide(dep, &plan, outcome, number, waited, admitted.retry_budget);
        // A retry of an attempt that reached no replica goes to another at
        // once: its record says so (a wait of zero).
        let requeued = match decided.decision {
            Decision::Retry { .. } => retry::requeue(dep, &plan, outcome, &chosen),
            _ => None,
        };
        if requeued.is_some() {
            decided.decision = Decision::Retry {
                after: std::time::Duration::ZERO,
            };
        }
        learn::attempt(
            dep,
            &outcome,
            &decided.decision,
            took,
            in_flight,
            budget,
            &chosen,
        );
        record::decided(dep, &span, number, &outcome, &decided, took, budget);
        drop(span);

        let retry::Decided {
            decision,
            remaining,
            floor,
        } = decided;
        let Decision::Retry { after } = decision else {
            return finish(dep, &plan, result, outcome, number, decision).map(answer);
        };
        if let Some(next) = requeued {
            // No wait before it, so none to remember for the backoff.
            waited = None;
            chosen = next;
            continue;
        }
        match retry::wait(dep, &plan, after, remaining, floor, &chosen).await {
            Ok((wait, next)) => {
                waited = Some(wait);
                chosen = next;
            }
            Err(stop) => {
                return finish(dep, &plan, result, outcome, number, stop).map(answer);
            }
        }
    }
}

/// The call's answer after its last attempt: the answer, or the transport
/// failure as the call's error.
#[inline]
fn finish<R>(
    dep: &Dependency,
    plan: &Plan,
    result: attempt::Tried<R>,
    outcome: Outcome,
    attempts: u32,
    decision: Decision,
) -> Result<Finished<R>, CallError> {
    match result {
        Ok(response) => Ok(Finished {
            response,
            attempts,
            outcome,
            decision,
        }),
        Err(e) => Err(e.into_call_error(&dep.name, plan.timing, attempts)),
    }
}
