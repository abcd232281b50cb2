//! A first attempt raced against a hedge: when the first has not answered
//! within the hedge delay and a hedge is admitted (the floor, the circuit,
//! a free permit, the hedge budget), a second copy is sent and the first
//! answer wins (README, "Hedged requests").

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::attempt::{self, AttemptSpec, Tried};
use super::classify::{self, Answer};
use super::record;
use super::{Dependency, Plan, admission};
use crate::breaker::BreakerPermit;
use crate::budget::whole_millis;
use crate::client::hedge::{CANCELLED, Declined, HEDGE_SUFFIX, Hedging};
use crate::client::permits::Permit;
use crate::clock::WallClock;
use crate::ledger::Entry;
use crate::telemetry::meter;

/// A first attempt that may be hedged.
pub(crate) struct Race<'a> {
    pub(crate) dep: &'a Dependency,
    pub(crate) clock: &'a dyn WallClock,
    pub(crate) plan: &'a Plan,
    pub(crate) hedging: &'a Hedging,
    /// When the first attempt started.
    pub(crate) started: Instant,
}

/// The answer of an attempt, or of a [`Race`]: the result that won, its
/// attempt's own duration, and whether it was the hedge's.
pub(crate) struct Raced<R> {
    pub(crate) result: Tried<R>,
    pub(crate) took: Duration,
    pub(crate) hedge_won: bool,
}

impl<R> Raced<R> {
    /// An attempt that ran alone, started at `started`.
    pub(crate) fn alone(result: Tried<R>, started: Instant) -> Self {
        Self {
            result,
            took: started.elapsed(),
            hedge_won: false,
        }
    }
}

impl Race<'_> {
    /// What the breaker hears of `result`.
    fn settle<R: Answer>(&self, breaker: Option<BreakerPermit>, result: &Tried<R>) {
        if let Some(permit) = breaker {
            let outcome = classify::outcome_of(result, self.plan.rpc, self.clock);
            permit.record(classify::verdict_of(result, &outcome, self.plan));
        }
    }

    /// Records an attempt of the race that lost: its outcome, or
    /// `cancelled` with how long it ran.
    fn lost<R: Answer>(&self, name: &str, ran: Duration, failed: Option<&Tried<R>>) {
        let outcome = match failed {
            Some(failed) => classify::outcome_of(failed, self.plan.rpc, self.clock).to_string(),
            None => CANCELLED.to_owned(),
        };
        record::ledger(self.plan, Entry::attempt(name, 1, ran, outcome));
    }

    /// Waits for `first` until `delay` after its start; then, if a hedge
    /// is admitted ([`Race::admit`]), sends one and takes the first answer
    /// (a response, whatever its status). A failed attempt (no response)
    /// waits for the other; when both fail, the later failure is the
    /// answer. The loser is dropped (cancelled) and leaves its own ledger
    /// entry: its outcome, or `cancelled` with how long it ran.
    /// `first_breaker` is the first attempt's breaker permit: it hears the
    /// first attempt's own result, or nothing when it was cancelled.
    pub(crate) async fn run<R, A, F, P>(
        &self,
        delay: Duration,
        mut first: Pin<&mut P>,
        first_breaker: Option<BreakerPermit>,
        attempt: &mut A,
    ) -> Raced<R>
    where
        R: Answer,
        A: FnMut(AttemptSpec) -> F,
        F: Future<Output = Tried<R>>,
        P: Future<Output = Tried<R>>,
    {
        let name = &self.dep.name;
        let started = self.started;
        let due = started.checked_add(delay).unwrap_or(started);
        tokio::select! {
            biased;
            result = &mut first => {
                self.settle(first_breaker, &result);
                return Raced::alone(result, started);
            }
            () = tokio::time::sleep_until(due) => {}
        }
        let (_permit, hedge_breaker) = match self.admit() {
            Ok(admitted) => admitted,
            Err(declined) => {
                tracing::debug!(dependency = %name, reason = declined.label(), "hedge not sent");
                meter::hedge_declined_by(name, declined.label(), 1);
                let result = first.await;
                self.settle(first_breaker, &result);
                return Raced::alone(result, started);
            }
        };

        let hedge_started = Instant::now();
        let window = self.plan.timing.attempt(
            hedge_started,
            attempt::cap(self.dep, hedge_breaker.as_ref()),
        );
        tracing::debug!(
            dependency = %name,
            after_ms = whole_millis(delay),
            budget_sent_ms = window.budget.map(whole_millis),
            "hedge sent"
        );
        let span = record::attempt_started(self.dep, self.plan, 1, window.budget, None);
        let spec = AttemptSpec {
            number: 1,
            budget: window.budget,
        };
        let mut second = std::pin::pin!(attempt::bounded(window, attempt(spec).instrument(span)));

        let hedge_name = format!("{name}{HEDGE_SUFFIX}");
        let mut first_breaker = first_breaker;
        let mut first_failed: Option<(Tried<R>, Duration)> = None;
        let mut second_failed: Option<(Tried<R>, Duration)> = None;
        loop {
            tokio::select! {
                result = &mut first, if first_failed.is_none() => {
                    let took = started.elapsed();
                    self.settle(first_breaker.take(), &result);
                    if result.is_err() && second_failed.is_none() {
                        first_failed = Some((result, took));
                        continue;
                    }
                    match second_failed.take() {
                        Some((failed, ran)) => {
                            self.lost(&hedge_name, ran, Some(&failed));
                            self.settle(hedge_breaker, &failed);
                        }
                        // The hedge is cancelled: its breaker permit is
                        // dropped unheard (neutral).
                        None => self.lost::<R>(&hedge_name, hedge_started.elapsed(), None),
                    }
                    meter::hedge(name, false, 1);
                    return Raced { result, took, hedge_won: false };
                }
                result = &mut second, if second_failed.is_none() => {
                    let took = hedge_started.elapsed();
                    if result.is_err() && first_failed.is_none() {
                        second_failed = Some((result, took));
                        continue;
                    }
                    self.settle(hedge_breaker, &result);
                    match first_failed.take() {
                        Some((failed, ran)) => self.lost(name, ran, Some(&failed)),
                        None => {
                            let ran = started.elapsed();
                            // The first attempt's latency is at least this.
                            self.hedging.observe(ran);
                            self.lost::<R>(name, ran, None);
                        }
                    }
                    meter::hedge(name, true, 1);
                    return Raced { result, took, hedge_won: true };
                }
            }
        }
    }

    /// A hedge may be sent when what is left covers the floor, the circuit
    /// lets another call through, a concurrency permit is free at once, and
    /// the hedge budget has one; the permits are held until the race ends.
    fn admit(&self) -> Result<(Option<Permit>, Option<BreakerPermit>), Declined> {
        let dep = self.dep;
        if self.plan.timing.check_floor(&dep.floor.current()).is_err() {
            return Err(Declined::Floor);
        }
        let breaker = admission::breaker(dep).map_err(|_| Declined::Circuit)?;
        let permit = match &dep.permits {
            Some(permits) => Some(permits.try_acquire().ok_or(Declined::Permit)?),
            None => None,
        };
        if !self.hedging.withdraw() {
            return Err(Declined::HedgeBudget);
        }
        Ok((permit, breaker))
    }
}
