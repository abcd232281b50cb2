//! One call through the engine: [`Call`] holds what the call knows, and
//! [`Call::run`] states the order of its steps
//! (docs/architecture.md, "The outbound engine").

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::admission::{self, Admitted};
use super::attempt::{self, AttemptSpec, Attempted};
use super::choose::Chosen;
use super::classify;
use super::hedge::{self, Raced};
use super::retry::{self, Decided};
use super::transport::Transport;
use super::{Dependency, Finished, Plan, learn, record};
use crate::clock::WallClock;
use crate::outbound::error::CallError;
use crate::outbound::hedging::Hedging;
use crate::retry::{Decision, RetryBudget};

/// One dependency call: the dependency, the plan the steps before the
/// engine made, and the transport its attempts go by.
pub(crate) struct Call<'a, T> {
    pub(crate) dep: &'a Dependency,
    pub(crate) clock: &'a dyn WallClock,
    pub(crate) plan: Plan,
    pub(crate) transport: &'a T,
}

/// Where a call is between its attempts.
struct Progress {
    /// The endpoint the next attempt goes to, with its breaker permit.
    chosen: Chosen,
    /// The attempts made so far.
    number: u32,
    /// The wait before the next attempt (the backoff's memory).
    waited: Option<Duration>,
}

/// After an attempt: another one, or the call's end.
enum Next {
    Again,
    Done(Decision),
}

impl<T: Transport> Call<'_, T> {
    /// Runs the call: [admission], then attempts (the first maybe
    /// [hedged](hedge)) until the [retry step](retry) stops, each
    /// [classified](classify), [recorded](record) and [learned](learn)
    /// from. Every attempt, wait and skip goes into the plan's ledger.
    ///
    /// Dropping the future drops the attempt in flight, and no further
    /// attempt starts.
    pub(crate) async fn run(self) -> Result<Finished<T::Answer>, CallError> {
        let Admitted {
            // Held to the end of the call, backoff included (rule 8).
            permit: _permit,
            chosen,
            retry_budget,
            hedging,
        } = admission::admit(self.dep, &self.plan).await?;
        let mut progress = Progress {
            chosen,
            number: 0,
            waited: None,
        };
        loop {
            progress.number = progress.number.saturating_add(1);
            let attempted = self.attempt(hedging, &mut progress).await;
            let decided = self.decide(&attempted, &mut progress, retry_budget);
            match self.next(decided, &mut progress).await {
                Next::Again => {}
                Next::Done(decision) => return self.finish(attempted, decision),
            }
        }
    }

    /// One attempt to `progress.chosen` under its window, raced against a
    /// hedge when it is the first and the dependency hedges.
    async fn attempt(
        &self,
        hedging: Option<&Hedging>,
        progress: &mut Progress,
    ) -> Attempted<T::Answer> {
        let (dep, number) = (self.dep, progress.number);
        let chosen = &mut progress.chosen;
        if let Some(permit) = &mut chosen.breaker {
            // The breaker counts the attempt's silence from now, not from
            // its admission (before the wait for a concurrency permit).
            permit.mark_sent();
        }
        let in_flight_to = chosen.start();
        let started = Instant::now();
        let elsewhere = attempt::elsewhere(dep, chosen, self.plan.may_retry, number);
        let cap = attempt::cap(dep, &self.plan, chosen.breaker.as_ref(), elsewhere);
        let window = self.plan.timing.attempt(started, cap);
        let budget = window.budget;
        let spec = AttemptSpec {
            number,
            budget,
            endpoint: Arc::clone(&chosen.endpoint),
        };
        let span = record::attempt_started(dep, &self.plan, &spec, progress.waited);
        let in_flight = dep
            .permits
            .as_ref()
            .and_then(|p| p.adaptive_in_flight(&chosen.endpoint));
        let hedge = hedging.filter(|_| number == 1);
        // The attempt lives in this block only: a race's loser is dropped
        // (cancelled) as soon as the race ends.
        let raced = {
            let sent = self.send(spec).instrument(span.clone());
            let mut sent = pin!(attempt::bounded(window, sent));
            match hedge.and_then(|h| h.delay().map(|delay| (h, delay))) {
                Some((hedging, delay)) => {
                    let race = hedge::Race {
                        call: self,
                        hedging,
                        started,
                    };
                    // Boxed: a race holds a second attempt, and only
                    // hedged calls should carry its size.
                    Box::pin(race.run(delay, sent.as_mut(), chosen)).await
                }
                None => Raced::alone(sent.as_mut().await, started),
            }
        };
        drop(in_flight_to);
        let outcome = classify::outcome_of(self.transport, &raced.result, self.clock);
        Attempted {
            number,
            outcome,
            upstream: classify::upstream_of(self.transport, &raced.result),
            took: raced.took,
            budget,
            waited: progress.waited,
            in_flight,
            hedge_won: raced.hedge_won,
            span,
            result: raced.result,
        }
    }

    /// Sends attempt `spec` by the transport, its failure classified.
    pub(crate) async fn send(&self, spec: AttemptSpec) -> attempt::Tried<T::Answer> {
        let transport = self.transport;
        transport
            .send(spec, &self.plan.headers)
            .await
            .map_err(|e| transport.classify_error(e))
    }

    /// What the attempt teaches (the endpoint, the floor, the limit), its
    /// record, and the retry policy's decision after it.
    fn decide(
        &self,
        attempted: &Attempted<T::Answer>,
        progress: &mut Progress,
        retry_budget: Option<&RetryBudget>,
    ) -> Decided {
        let (dep, plan, chosen) = (self.dep, &self.plan, &mut progress.chosen);
        if chosen.breaker.is_some() || chosen.balanced {
            let verdict = classify::verdict_of(&attempted.result, &attempted.outcome, plan);
            // When the hedge won, `chosen` is the hedge's endpoint.
            learn::heard(dep, chosen, verdict, attempted.took);
        }
        record::attempt_ended(dep, plan, attempted, chosen);
        let mut decided = retry::decide(dep, plan, attempted, retry_budget);
        // A retry of an attempt that reached no replica goes to another at
        // once: its record says so (a wait of zero).
        decided.requeued = match decided.decision {
            Decision::Retry { .. } => retry::requeue(dep, plan, attempted.outcome, chosen),
            _ => None,
        };
        if decided.requeued.is_some() {
            decided.decision = Decision::Retry {
                after: Duration::ZERO,
            };
        }
        learn::attempt(dep, attempted, &decided.decision, chosen);
        record::decided(dep, attempted, &decided);
        decided
    }

    /// After `decided`: the next attempt's endpoint (at once for a
    /// requeue, else after the wait, paid from the budget), or the end.
    async fn next(&self, decided: Decided, progress: &mut Progress) -> Next {
        let Decision::Retry { .. } = decided.decision else {
            return Next::Done(decided.decision);
        };
        if let Some(next) = decided.requeued {
            // No wait before it, so none to remember for the backoff.
            progress.waited = None;
            progress.chosen = next;
            return Next::Again;
        }
        match retry::wait(self.dep, &self.plan, &decided, &progress.chosen).await {
            Ok((wait, next)) => {
                progress.waited = Some(wait);
                progress.chosen = next;
                Next::Again
            }
            Err(stop) => Next::Done(stop),
        }
    }

    /// The call's answer after its last attempt: the answer, or the
    /// transport failure as the call's error.
    fn finish(
        &self,
        attempted: Attempted<T::Answer>,
        decision: Decision,
    ) -> Result<Finished<T::Answer>, CallError> {
        match attempted.result {
            Ok(response) => Ok(Finished::new(
                response,
                attempted.number,
                attempted.outcome,
                decision,
            )),
            Err(e) => Err(e.into_call_error(&self.dep.name, self.plan.timing, attempted.number)),
        }
    }
}
