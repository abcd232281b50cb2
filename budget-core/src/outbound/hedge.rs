//! A first attempt raced against a hedge: when the first has not answered
//! within the hedge delay and a hedge is admitted (the floor, an
//! endpoint's circuit, another replica than the first's when there is
//! one, a free permit, the hedge budget), a second copy is sent and the
//! first answer wins (docs/hedging-and-stale.md, "Hedged requests").

use std::future::Future;
use std::pin::{Pin, pin};
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::attempt::{self, AttemptSpec, Tried};
use super::call::Call;
use super::choose::{self, Chosen};
use super::classify;
use super::transport::Transport;
use super::{learn, record};
use crate::breaker::BreakerPermit;
use crate::budget::whole_millis;
use crate::ledger::Entry;
use crate::outbound::hedging::{CANCELLED, Declined, HEDGE_SUFFIX, Hedging};
use crate::outbound::permits::Permit;
use crate::telemetry::meter;

/// A first attempt that may be hedged.
pub(crate) struct Race<'a, 'c, T> {
    pub(crate) call: &'a Call<'c, T>,
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

/// The hedge on its way: its endpoint, when it was sent, the name its
/// ledger entries carry.
struct Hedge {
    chosen: Chosen,
    started: Instant,
    name: String,
}

/// A result that came back and waits for the other attempt's, with how
/// long its attempt ran.
type Failed<R> = Option<(Tried<R>, Duration)>;

impl<T: Transport> Race<'_, '_, T> {
    /// What the breaker hears of `result`.
    fn settle(&self, breaker: Option<BreakerPermit>, result: &Tried<T::Answer>) {
        if let Some(permit) = breaker {
            let call = self.call;
            let outcome = classify::outcome_of(call.transport, result, call.clock);
            permit.record(classify::verdict_of(result, &outcome, &call.plan));
        }
    }

    /// What the hedge's endpoint learns of `result` (its breaker and its
    /// load), when it ran to an answer or a failure.
    fn settle_hedge(&self, hedge: &mut Chosen, result: &Tried<T::Answer>, took: Duration) {
        let call = self.call;
        let outcome = classify::outcome_of(call.transport, result, call.clock);
        let verdict = classify::verdict_of(result, &outcome, &call.plan);
        learn::heard(call.dep, hedge, verdict, took);
    }

    /// Records an attempt of the race that lost: its outcome, or
    /// `cancelled` with how long it ran.
    /// `from` is the attempt's endpoint, when chosen among several.
    fn lost(
        &self,
        name: &str,
        ran: Duration,
        failed: Option<&Tried<T::Answer>>,
        from: Option<&std::sync::Arc<str>>,
    ) {
        let call = self.call;
        let said = match failed {
            Some(failed) => record::said(
                &classify::outcome_of(call.transport, failed, call.clock),
                from,
                classify::upstream_of(call.transport, failed).as_ref(),
            ),
            None => record::said(&CANCELLED, from, None),
        };
        record::ledger(&call.plan, Entry::attempt(name, 1, ran, said));
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
    pub(crate) async fn run<P>(
        &self,
        delay: Duration,
        mut first: Pin<&mut P>,
        first_chosen: &mut Chosen,
    ) -> Raced<T::Answer>
    where
        P: Future<Output = Tried<T::Answer>>,
    {
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
        let (_permit, chosen) = match self.admit(&first_chosen.endpoint) {
            Ok(admitted) => admitted,
            Err(declined) => {
                self.declined(declined);
                let result = first.await;
                self.settle(first_breaker, &result);
                return Raced::alone(result, started);
            }
        };
        let mut hedge = self.hedge(chosen);
        let window = self.call.plan.timing.attempt(
            hedge.started,
            attempt::cap(
                self.call.dep,
                &self.call.plan,
                hedge.chosen.breaker.as_ref(),
                None,
            ),
        );
        let spec = AttemptSpec {
            number: 1,
            budget: window.budget,
            endpoint: std::sync::Arc::clone(&hedge.chosen.endpoint),
        };
        tracing::debug!(
            dependency = %self.call.dep.name,
            after_ms = whole_millis(hedge.started.saturating_duration_since(self.started)),
            budget_sent_ms = window.budget.map(whole_millis),
            "hedge sent"
        );
        let span = record::attempt_started(self.call.dep, &self.call.plan, &spec, None);
        let second = pin!(attempt::bounded(
            window,
            self.call.send(spec).instrument(span)
        ));
        self.first_answer((first, first_breaker, first_chosen), second, &mut hedge)
            .await
    }

    /// The hedge, sent now to `chosen`: its breaker's silence counted from
    /// now.
    fn hedge(&self, mut chosen: Chosen) -> Hedge {
        let started = Instant::now();
        if let Some(permit) = &mut chosen.breaker {
            permit.mark_sent();
        }
        let name = &self.call.dep.name;
        Hedge {
            chosen,
            started,
            name: format!("{name}{HEDGE_SUFFIX}"),
        }
    }

    /// Races `first` against `second`, the hedge: the first answer wins
    /// (a failure waits for the other's result).
    async fn first_answer<P, S>(
        &self,
        (mut first, mut first_breaker, first_chosen): (
            Pin<&mut P>,
            Option<BreakerPermit>,
            &mut Chosen,
        ),
        mut second: Pin<&mut S>,
        hedge: &mut Hedge,
    ) -> Raced<T::Answer>
    where
        P: Future<Output = Tried<T::Answer>>,
        S: Future<Output = Tried<T::Answer>>,
    {
        let _in_flight_to = hedge.chosen.start();
        let mut first_failed: Failed<T::Answer> = None;
        let mut second_failed: Failed<T::Answer> = None;
        loop {
            tokio::select! {
                result = &mut first, if first_failed.is_none() => {
                    let took = self.started.elapsed();
                    self.settle(first_breaker.take(), &result);
                    if result.is_err() && second_failed.is_none() {
                        first_failed = Some((result, took));
                        continue;
                    }
                    self.first_won(hedge, second_failed.take());
                    return Raced { result, took, hedge_won: false };
                }
                result = &mut second, if second_failed.is_none() => {
                    let took = hedge.started.elapsed();
                    if result.is_err() && first_failed.is_none() {
                        second_failed = Some((result, took));
                        continue;
                    }
                    self.settle(hedge.chosen.breaker.take(), &result);
                    self.hedge_won(first_chosen, first_failed.take());
                    // The call goes on as the hedge's: the engine records
                    // its endpoint and teaches it the answer.
                    std::mem::swap(first_chosen, &mut hedge.chosen);
                    return Raced { result, took, hedge_won: true };
                }
            }
        }
    }

    /// The first attempt won: the hedge's record (its failure, or
    /// `cancelled`) and what its endpoint learns.
    fn first_won(&self, hedge: &mut Hedge, failed: Failed<T::Answer>) {
        match failed {
            Some((failed, ran)) => {
                self.lost(&hedge.name, ran, Some(&failed), hedge.chosen.shown());
                self.settle_hedge(&mut hedge.chosen, &failed, ran);
            }
            // The hedge is cancelled: its breaker permit is dropped
            // unheard (neutral), and its endpoint's latency is at least
            // what it ran (a hedge to a slow replica that lost must not
            // leave it looking fast).
            None => {
                let ran = hedge.started.elapsed();
                if hedge.chosen.balanced {
                    hedge.chosen.endpoint.load.at_least(ran, Instant::now());
                }
                self.lost(&hedge.name, ran, None, hedge.chosen.shown());
            }
        }
        meter::hedge(&self.call.dep.name, false, 1);
    }

    /// The hedge won: the first attempt's record (its failure, or
    /// `cancelled`) and what its endpoint and the hedge delay learn.
    fn hedge_won(&self, first_chosen: &Chosen, failed: Failed<T::Answer>) {
        let name = &self.call.dep.name;
        match failed {
            Some((failed, ran)) => {
                self.lost(name, ran, Some(&failed), first_chosen.shown());
            }
            None => {
                let ran = self.started.elapsed();
                // The first attempt's latency is at least this. Its
                // endpoint lost to one sent later: to the balancer, its
                // estimate doubles, and its next answers bring it down at
                // a latency's pace, or a replica whose slow calls are all
                // cut short by hedges would look as fast as the hedge
                // delay.
                self.hedging.observe(ran);
                if first_chosen.balanced {
                    first_chosen.endpoint.load.outrun(ran, Instant::now());
                }
                self.lost(name, ran, None, first_chosen.shown());
            }
        }
        meter::hedge(name, true, 1);
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
        let others = self.call.dep.endpoints.current();
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
        let name = &self.call.dep.name;
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
        let (dep, timing) = (self.call.dep, self.call.plan.timing);
        if self.call.plan.check_floor(&dep.floor.current()).is_err() {
            return Err(Declined::Floor);
        }
        let chosen =
            choose::next(dep, timing.remaining(), Some(first)).map_err(|_| Declined::Circuit)?;
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
