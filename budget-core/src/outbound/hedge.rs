//! A first attempt raced against a hedge: when the first has not answered
//! within the hedge delay and a hedge is admitted (the floor, an
//! endpoint's circuit, another replica than the first's when there is
//! one, a free permit, the hedge budget), a second copy is sent and the
//! first answer wins (docs/hedging-and-stale.md, "Hedged requests").

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::attempt::{self, AttemptSpec, Tried};
use super::choose::{self, Chosen};
use super::classify::{self, Answer};
use super::{Dependency, Plan};
use super::{learn, record};
use crate::breaker::BreakerPermit;
use crate::budget::whole_millis;
use crate::clock::WallClock;
use crate::ledger::Entry;
use crate::outbound::hedging::{CANCELLED, Declined, HEDGE_SUFFIX, Hedging};
use crate::outbound::permits::Permit;
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

    /// What the hedge's endpoint learns of `result` (its breaker and its
    /// load), when it ran to an answer or a failure.
    fn settle_hedge<R: Answer>(&self, hedge: &mut Chosen, result: &Tried<R>, took: Duration) {
        let outcome = classify::outcome_of(result, self.plan.rpc, self.clock);
        let verdict = classify::verdict_of(result, &outcome, self.plan);
        learn::heard(self.dep, hedge, verdict, took);
    }

    /// Records an attempt of the race that lost: its outcome, or
    /// `cancelled` with how long it ran.
    /// `from` is the attempt's endpoint, when chosen among several.
    fn lost<R: Answer>(
        &self,
        name: &str,
        ran: Duration,
        failed: Option<&Tried<R>>,
        from: Option<&std::sync::Arc<str>>,
    ) {
        let said = match failed {
            Some(failed) => record::said(
                &classify::outcome_of(failed, self.plan.rpc, self.clock),
                from,
            ),
            None => record::said(&CANCELLED, from),
        };
        record::ledger(self.plan, Entry::attempt(name, 1, ran, said));
    }

    /// Waits for `first` until `delay` after its start; then, if a hedge
    /// is admitted ([`Race::admit`]), sends one and takes the first answer
    /// (a response, whatever its status). A failed attempt (no response)
    /// waits for the other; when both fail, the later failure is the
    /// answer. The loser is dropped (cancelled) and leaves its own ledger
    /// entry: its outcome, or `cancelled` with how long it ran.
    /// `first_chosen` is the first attempt's endpoint: its breaker permit
    /// hears the first attempt's own result, or nothing when it was
    /// cancelled; when the hedge wins, it becomes the hedge's endpoint
    /// (its breaker already told), for the call's record and its retry.
    pub(crate) async fn run<R, A, F, P>(
        &self,
        delay: Duration,
        mut first: Pin<&mut P>,
        first_chosen: &mut Chosen,
        attempt: &mut A,
    ) -> Raced<R>
    where
        R: Answer,
        A: FnMut(AttemptSpec) -> F,
        F: Future<Output = Tried<R>>,
        P: Future<Output = Tried<R>>,
    {
        let name = &self.dep.name;
        let first_breaker = first_chosen.breaker.take();
        let started = self.started;
        let due = started.checked_add(delay).unwrap_or(started);
        if let Some(result) = answered_before(first.as_mut(), due).await {
            self.settle(first_breaker, &result);
            return Raced::alone(result, started);
        }
        if let Some(until) = self.held_until(first_chosen, delay)
            && let Some(result) = answered_before(first.as_mut(), until).await
        {
            self.declined(Declined::CannotWin);
            self.settle(first_breaker, &result);
            return Raced::alone(result, started);
        }
        let (_permit, mut hedge) = match self.admit(&first_chosen.endpoint) {
            Ok(admitted) => admitted,
            Err(declined) => {
                self.declined(declined);
                let result = first.await;
                self.settle(first_breaker, &result);
                return Raced::alone(result, started);
            }
        };

        let hedge_started = Instant::now();
        if let Some(permit) = &mut hedge.breaker {
            permit.mark_sent();
        }
        let _in_flight_to = hedge.start();
        let window = self.plan.timing.attempt(
            hedge_started,
            attempt::cap(self.dep, hedge.breaker.as_ref(), None),
        );
        tracing::debug!(
            dependency = %name,
            after_ms = whole_millis(hedge_started.saturating_duration_since(started)),
            budget_sent_ms = window.budget.map(whole_millis),
            "hedge sent"
        );
        let span = record::attempt_started(self.dep, self.plan, 1, window.budget, None);
        let spec = AttemptSpec {
            number: 1,
            budget: window.budget,
            endpoint: std::sync::Arc::clone(&hedge.endpoint),
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
                            self.lost(&hedge_name, ran, Some(&failed), hedge.shown());
                            self.settle_hedge(&mut hedge, &failed, ran);
                        }
                        // The hedge is cancelled: its breaker permit is
                        // dropped unheard (neutral), and its endpoint's
                        // latency is at least what it ran (a hedge to a
                        // slow replica that lost must not leave it looking
                        // fast).
                        None => {
                            let ran = hedge_started.elapsed();
                            if hedge.balanced {
                                hedge.endpoint.load.at_least(ran, Instant::now());
                            }
                            self.lost::<R>(&hedge_name, ran, None, hedge.shown());
                        }
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
                    self.settle(hedge.breaker.take(), &result);
                    match first_failed.take() {
                        Some((failed, ran)) => {
                            self.lost(name, ran, Some(&failed), first_chosen.shown());
                        }
                        None => {
                            let ran = started.elapsed();
                            // The first attempt's latency is at least this.
                            // Its endpoint lost to one sent later: to the
                            // balancer, its estimate doubles, and its next
                            // answers bring it down at a latency's pace, or
                            // a replica whose slow calls are all cut short
                            // by hedges would look as fast as the hedge
                            // delay.
                            self.hedging.observe(ran);
                            if first_chosen.balanced {
                                first_chosen.endpoint.load.outrun(ran, Instant::now());
                            }
                            self.lost::<R>(name, ran, None, first_chosen.shown());
                        }
                    }
                    meter::hedge(name, true, 1);
                    // The call goes on as the hedge's: the engine records
                    // its endpoint and teaches it the answer.
                    *first_chosen = hedge;
                    return Raced { result, took, hedge_won: true };
                }
            }
        }
    }

    /// When a hedge due now, `delay` after the first attempt's start, is
    /// put off to (docs/hedging-and-stale.md, "A hedge that can win"):
    /// the first attempt's start plus its replica's latency estimate, when
    /// a hedge sent now could not answer first. That is when the first
    /// attempt went to a replica chosen among several, the dependency's
    /// latencies reach no further than `delay` plus their median
    /// ([`Hedging::tail_past`]), the replica's estimate is longer than
    /// `delay` (the attempt has not yet run longer than that replica's
    /// answers take), and no other replica is estimated faster by more
    /// than `delay` (a replica known to be slow is hedged at the delay).
    /// The first attempt is then as late as the dependency's answers get,
    /// not stuck: it answers within about what its replica's recent
    /// answers took, and a hedge needs a whole answer's time, at another
    /// replica whose free worker it takes from the calls behind it. One
    /// that outlives its replica's estimate is stuck, and is hedged then.
    /// `None`: the hedge is due now.
    fn held_until(&self, first: &Chosen, delay: Duration) -> Option<Instant> {
        if !first.balanced {
            return None;
        }
        let now = Instant::now();
        let expected = first.endpoint.load.estimate(now)?;
        if expected <= delay {
            return None;
        }
        let others = self.dep.endpoints.current();
        let fastest_other = others
            .iter()
            .filter(|e| !std::ptr::eq(&***e, &*first.endpoint))
            .filter_map(|e| e.load.estimate(now))
            .min();
        if fastest_other.is_some_and(|other| delay.saturating_add(other) < expected)
            || self.hedging.tail_past(delay)
        {
            return None;
        }
        self.started.checked_add(expected)
    }

    /// A hedge that was due and not sent, and why: the log line and the
    /// counter.
    fn declined(&self, why: Declined) {
        let name = &self.dep.name;
        tracing::debug!(dependency = %name, reason = why.label(), "hedge not sent");
        meter::hedge_declined_by(name, why.label(), 1);
    }

    /// A hedge may be sent when what is left covers the floor, an
    /// endpoint's circuit (another than `first`'s, when there is one) lets
    /// another call through, a concurrency permit is free at once, and the
    /// hedge budget has one; the permits are held until the race ends.
    fn admit(
        &self,
        first: &crate::outbound::endpoints::Endpoint,
    ) -> Result<(Option<Permit>, Chosen), Declined> {
        let dep = self.dep;
        if self.plan.timing.check_floor(&dep.floor.current()).is_err() {
            return Err(Declined::Floor);
        }
        let chosen = choose::next(dep, self.plan.timing.remaining(), Some(first))
            .map_err(|_| Declined::Circuit)?;
        if self.hedging.other_replica_only && std::ptr::eq(&*chosen.endpoint, first) {
            return Err(Declined::NoOtherReplica);
        }
        let permit = match &dep.permits {
            Some(permits) => Some(permits.try_acquire().ok_or(Declined::Permit)?),
            None => None,
        };
        if !self.hedging.withdraw() {
            return Err(Declined::HedgeBudget);
        }
        Ok((permit, chosen))
    }
}

/// The first attempt's result, when it comes before `at` (first if both
/// are ready); `None` once `at` has passed.
async fn answered_before<P: Future>(first: Pin<&mut P>, at: Instant) -> Option<P::Output> {
    tokio::select! {
        biased;
        result = first => Some(result),
        () = tokio::time::sleep_until(at) => None,
    }
}

#[cfg(test)]
mod tests;
