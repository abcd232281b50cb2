//! The call engine: docs/contract.md §2 for one dependency call, from the
//! floor check to the last attempt.
//!
//! It is generic over the attempt (a function from [`AttemptSpec`] to a
//! buffered response), so the timing rules are tested here with a paused
//! clock and no sockets; [`attempt`](super::attempt) is the reqwest one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use tracing::Instrument;

use super::config::Settings;
use super::error::{
    AttemptTimedOut, BodyTooLarge, BoxError, CallError, CallErrorKind, NoPermitInBudget,
};
use super::hedge::{CANCELLED, Declined, HEDGE_SUFFIX, Hedging};
use super::permits::{Permit, Permits};
use super::response::BudgetResponse;
use crate::admission::{Criticality, Refusal as QueueRefusal, RefusalReason, Sample};
use crate::breaker::{BreakerPermit, CircuitOpen, Verdict};
use crate::budget::{Budget, whole_millis};
use crate::clock::WallClock;
use crate::floor::{BelowFloor, Effective, Floor};
use crate::ledger::{Entry, Ledger};
use crate::retry::{
    Decision, DecisionInput, Outcome, RetryBudget, StopReason, TransportKind, sleep_within,
};
use crate::telemetry::semconv::{
    OUTCOME_BELOW_FLOOR, OUTCOME_CIRCUIT_OPEN, OUTCOME_NO_PERMIT, REASON_EXPIRED,
    REASON_PREDICTED_WAIT, REASON_STANDING_QUEUE,
};
use crate::telemetry::{meter, trace};

/// The ledger metric suffix for the time a call waited for a concurrency
/// permit: `pricing-queue;dur=12`.
pub const QUEUE_SUFFIX: &str = "-queue";

/// Where a call's time comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Timing {
    /// The request's budget, already net of the per-hop reserve.
    Budget(Budget),
    /// Every attempt gets this long; no budget.
    Fixed(Duration),
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
}

/// What one attempt is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AttemptSpec {
    /// 1 for the first attempt.
    pub(crate) number: u32,
    /// The budget to send (`request-budget-ms`), net of the reserve, taken
    /// the moment the attempt starts; `None` in fixed mode.
    pub(crate) budget: Option<Duration>,
}

/// An attempt that produced no response.
#[derive(Debug)]
pub(crate) struct AttemptError {
    pub(crate) kind: TransportKind,
    /// What the breaker hears: a timeout is [`Verdict::TimedOut`] (the
    /// breaker judges it by how long it went unanswered), a body over
    /// `max_body` is neutral (our limit, not the endpoint's health), any
    /// other failure a failure.
    pub(crate) verdict: Verdict,
    pub(crate) source: BoxError,
}

impl AttemptError {
    pub(crate) fn new(kind: TransportKind, source: impl Into<BoxError>) -> Self {
        let verdict = match kind {
            TransportKind::Timeout => Verdict::TimedOut,
            _ => Verdict::Failure,
        };
        Self {
            kind,
            verdict,
            source: source.into(),
        }
    }

    fn timed_out(limit: Duration) -> Self {
        Self::new(TransportKind::Timeout, AttemptTimedOut::new(limit))
    }

    pub(crate) fn too_large(limit: u64) -> Self {
        Self {
            kind: TransportKind::Body,
            verdict: Verdict::Neutral,
            source: Box::new(BodyTooLarge::new(limit)),
        }
    }
}

/// The result of one attempt.
pub(crate) type AttemptResult = Result<http::Response<Bytes>, AttemptError>;

/// Runs one call: refuses it below the floor or with the circuit open,
/// waits for a concurrency permit (paid from the budget), then makes
/// attempts until the [retry policy](crate::retry::RetryPolicy) stops,
/// sleeping its backoff within the budget. Every attempt, wait and skip
/// goes into `plan.ledger`.
///
/// Each attempt runs under `timeout_at(deadline)` on tokio's clock: the
/// budget's deadline (net of the reserve), or `fixed_timeout` from its
/// start. Dropping the returned future drops the attempt in flight, and
/// no further attempt starts.
///
/// Every refusal, before the first attempt or before a retry, goes
/// through [`refuse`]: one ledger note, log line, metric and span each.
pub(crate) async fn run<A, F>(
    settings: &Settings,
    clock: &dyn WallClock,
    plan: Plan,
    mut attempt: A,
) -> Result<BudgetResponse, CallError>
where
    A: FnMut(AttemptSpec) -> F,
    F: Future<Output = AttemptResult>,
{
    let name = &settings.name;
    let timing = plan.timing;
    let record = |entry: Entry| {
        if let Some(ledger) = &plan.ledger {
            ledger.record(entry);
        }
    };

    // Rule 2: below the floor, no I/O at all.
    let floor = settings.floor.current();
    if let Err(below) = timing.check_floor(&floor) {
        return Err(refuse(
            settings,
            timing,
            &plan.ledger,
            Refusal::BelowFloor(below),
        ));
    }

    let mut breaker_permit = acquire_breaker(settings)
        .map_err(|open| refuse(settings, timing, &plan.ledger, Refusal::CircuitOpen(open)))?;

    // Held to the end of the call, backoff included (rule 8).
    let _permit = match &settings.permits {
        Some(permits) => {
            let acquired = acquire_permit(permits, timing, floor.floor, plan.criticality).await;
            let waited = match &acquired {
                Ok(permit) => permit.waited,
                // Refused at arrival: no wait to show, the skip note says why.
                Err(Refusal::NoPermit { waited, .. }) => Some(*waited).filter(|w| !w.is_zero()),
                Err(_) => None,
            };
            if let Some(waited) = waited {
                record(Entry::local(format!("{name}{QUEUE_SUFFIX}"), waited, None));
            }
            Some(acquired.map_err(|refusal| refuse(settings, timing, &plan.ledger, refusal))?)
        }
        None => None,
    };

    let retry_budget = timing.retry_budget(settings);
    if let Some(retry_budget) = retry_budget {
        retry_budget.deposit();
    }
    // Only a call that may be sent twice is hedged, in budget mode, on its
    // first attempt (README, "Hedged requests").
    let hedging = match (&settings.hedge, timing) {
        (Some(hedging), Timing::Budget(_)) if plan.may_retry => {
            hedging.deposit();
            Some(&**hedging)
        }
        _ => None,
    };

    let mut number = 0;
    let mut waited = None;
    loop {
        number += 1;
        // The breaker counts the attempt's silence from now, not from its
        // admission (before the wait for a concurrency permit).
        if let Some(permit) = &mut breaker_permit {
            permit.mark_sent();
        }
        let started = Instant::now();
        let window = timing.attempt(started, attempt_cap(settings, breaker_permit.as_ref()));
        let budget = window.budget;
        let span = trace::attempt_span(name, &plan.method, number, budget, waited);
        meter::attempt(name, number, budget);
        let in_flight = settings
            .permits
            .as_ref()
            .and_then(Permits::adaptive_in_flight);
        let hedge_delay = hedging.filter(|_| number == 1).and_then(Hedging::delay);
        // The attempt lives in this block only: a race's loser is dropped
        // (cancelled) as soon as the race ends.
        let (result, took, hedge_won) = {
            // Pinned where it is: awaiting it (or racing it) through the
            // pin keeps one copy of the attempt's state in this future,
            // not two.
            let mut sent = std::pin::pin!(bounded(
                window,
                attempt(AttemptSpec { number, budget }).instrument(span.clone()),
            ));
            match (hedging, hedge_delay) {
                (Some(hedging), Some(delay)) => {
                    let race = Race {
                        settings,
                        clock,
                        plan: &plan,
                        timing,
                        hedging,
                        started,
                    };
                    let primary_breaker = breaker_permit.take();
                    // Boxed: a race holds a second attempt, and only hedged
                    // calls should carry its size.
                    let raced =
                        Box::pin(race.run(delay, sent.as_mut(), primary_breaker, &mut attempt))
                            .await;
                    (raced.result, raced.took, raced.hedge_won)
                }
                _ => (sent.as_mut().await, started.elapsed(), false),
            }
        };

        let outcome = outcome_of(&result, clock);
        if hedge_won {
            record(Entry::attempt(
                format!("{name}{HEDGE_SUFFIX}"),
                number,
                took,
                outcome.to_string(),
            ));
        } else {
            record(Entry::attempt(&**name, number, took, outcome.to_string()));
        }
        meter::attempt_done(name, &plan.method, &outcome, took);
        if let Some(permit) = breaker_permit.take() {
            permit.record(verdict_of(&result, &plan));
        }

        let floor = settings.floor.current();
        let (remaining, keep) = timing.for_decision(floor.floor);
        let input = DecisionInput {
            outcome,
            attempts: number,
            may_retry: plan.may_retry,
            remaining,
            floor: keep,
            previous_wait: waited,
        };
        let decision = settings
            .policy
            .decide(&input, retry_budget, &mut rand::rng());
        if matches!(decision, Decision::Stop(StopReason::Succeeded))
            || outcome == Outcome::Transport(TransportKind::Timeout)
        {
            // Rule 10: a learned floor learns from successful attempts,
            // and from timed-out ones (their latency is at least `took`).
            settings.floor.observe(took);
            if let Some(hedging) = &settings.hedge {
                hedging.observe(took);
            }
        }
        if let (Some(permits), Some(in_flight)) = (&settings.permits, in_flight) {
            let sample = limit_sample(&outcome, &decision);
            permits.sample(took, in_flight, sample, budget);
        }
        tracing::debug!(
            dependency = %name,
            attempt = number,
            outcome = %outcome,
            duration_ms = whole_millis(took),
            budget_sent_ms = budget.map(whole_millis),
            remaining_ms = (remaining != Duration::MAX).then_some(whole_millis(remaining)),
            %decision,
            "dependency attempt"
        );
        trace::record_attempt(&span, &outcome, &decision, remaining);
        drop(span);
        meter::decision(name, &decision);

        let Decision::Retry { after } = decision else {
            return finish(name, timing, result, outcome, number, decision);
        };

        let waiting = Instant::now();
        match timing {
            // An error means the deadline came: the floor check below stops.
            Timing::Budget(net) => sleep_within(after, &net).await.unwrap_or_default(),
            Timing::Fixed(_) => tokio::time::sleep(after).await,
        }
        let wait = waiting.elapsed();
        record(Entry::wait(&**name, wait));
        waited = Some(wait);
        // Rule 2 holds for retries too: the wait was chosen to leave the
        // floor, but time passes between the decision and the send (rule 3).
        if let Err(below) = timing.check_floor(&settings.floor.current()) {
            refuse(settings, timing, &plan.ledger, Refusal::BelowFloor(below));
            let stop = Decision::Stop(StopReason::WaitExceedsBudget {
                wait: after,
                remaining,
                floor: keep,
            });
            return finish(name, timing, result, outcome, number, stop);
        }
        match acquire_breaker(settings) {
            Ok(permit) => breaker_permit = permit,
            Err(open) => {
                refuse(settings, timing, &plan.ledger, Refusal::CircuitOpen(open));
                let stop = Decision::Stop(StopReason::NotRetryable);
                return finish(name, timing, result, outcome, number, stop);
            }
        }
    }
}

/// An attempt bounded by its window: past its deadline it is dropped and
/// reads as a timeout.
async fn bounded<F>(window: AttemptWindow, sent: F) -> AttemptResult
where
    F: Future<Output = AttemptResult>,
{
    tokio::time::timeout_at(window.deadline, sent)
        .await
        .unwrap_or_else(|_| Err(AttemptError::timed_out(window.limit)))
}

/// What the retry policy and the ledger read of an attempt's result.
fn outcome_of(result: &AttemptResult, clock: &dyn WallClock) -> Outcome {
    match result {
        Ok(res) => Outcome::from_response(res.status(), res.headers(), clock),
        Err(e) => Outcome::Transport(e.kind),
    }
}

/// What the breaker hears of an attempt's result: a `401` the client
/// answers with a token refresh is neutral.
fn verdict_of(result: &AttemptResult, plan: &Plan) -> Verdict {
    match result {
        Ok(res) if plan.refreshes_auth && res.status() == http::StatusCode::UNAUTHORIZED => {
            Verdict::Neutral
        }
        Ok(res) => Verdict::from_status(res.status()),
        Err(e) => e.verdict,
    }
}

/// A first attempt that may be hedged.
struct Race<'a> {
    settings: &'a Settings,
    clock: &'a dyn WallClock,
    plan: &'a Plan,
    timing: Timing,
    hedging: &'a Hedging,
    /// When the first attempt started.
    started: Instant,
}

/// The answer of a [`Race`]: the result that won, its attempt's own
/// duration, and whether it was the hedge's.
struct Raced {
    result: AttemptResult,
    took: Duration,
    hedge_won: bool,
}

impl Race<'_> {
    /// Waits for `first` until `delay` after its start; then, if a hedge
    /// is admitted ([`Race::admit`]), sends one and takes the first answer
    /// (a response, whatever its status). A failed attempt (no response)
    /// waits for the other; when both fail, the later failure is the
    /// answer. The loser is dropped (cancelled) and leaves its own ledger
    /// entry: its outcome, or `cancelled` with how long it ran.
    /// `first_breaker` is the first attempt's breaker permit: it hears the
    /// first attempt's own result, or nothing when it was cancelled.
    async fn run<A, F, P>(
        &self,
        delay: Duration,
        mut first: Pin<&mut P>,
        first_breaker: Option<BreakerPermit>,
        attempt: &mut A,
    ) -> Raced
    where
        A: FnMut(AttemptSpec) -> F,
        F: Future<Output = AttemptResult>,
        P: Future<Output = AttemptResult>,
    {
        let name = &self.settings.name;
        let started = self.started;
        let settle_first = |breaker: Option<BreakerPermit>, result: &AttemptResult| {
            if let Some(permit) = breaker {
                permit.record(verdict_of(result, self.plan));
            }
        };
        let due = started.checked_add(delay).unwrap_or(started);
        tokio::select! {
            biased;
            result = &mut first => {
                settle_first(first_breaker, &result);
                return Raced { result, took: started.elapsed(), hedge_won: false };
            }
            () = tokio::time::sleep_until(due) => {}
        }
        let (_permit, hedge_breaker) = match self.admit() {
            Ok(admitted) => admitted,
            Err(declined) => {
                tracing::debug!(dependency = %name, reason = declined.label(), "hedge not sent");
                meter::hedge_declined_by(name, declined.label(), 1);
                let result = first.await;
                settle_first(first_breaker, &result);
                return Raced {
                    result,
                    took: started.elapsed(),
                    hedge_won: false,
                };
            }
        };

        let hedge_started = Instant::now();
        let window = self.timing.attempt(
            hedge_started,
            attempt_cap(self.settings, hedge_breaker.as_ref()),
        );
        tracing::debug!(
            dependency = %name,
            after_ms = whole_millis(delay),
            budget_sent_ms = window.budget.map(whole_millis),
            "hedge sent"
        );
        let span = trace::attempt_span(name, &self.plan.method, 1, window.budget, None);
        meter::attempt(name, 1, window.budget);
        let spec = AttemptSpec {
            number: 1,
            budget: window.budget,
        };
        let mut second = std::pin::pin!(bounded(window, attempt(spec).instrument(span)));

        let hedge_name = format!("{name}{HEDGE_SUFFIX}");
        let record = |entry: Entry| {
            if let Some(ledger) = &self.plan.ledger {
                ledger.record(entry);
            }
        };
        let mut first_breaker = first_breaker;
        let mut first_failed: Option<(AttemptResult, Duration)> = None;
        let mut second_failed: Option<(AttemptResult, Duration)> = None;
        loop {
            tokio::select! {
                result = &mut first, if first_failed.is_none() => {
                    let took = started.elapsed();
                    settle_first(first_breaker.take(), &result);
                    if result.is_err() && second_failed.is_none() {
                        first_failed = Some((result, took));
                        continue;
                    }
                    match second_failed.take() {
                        Some((failed, ran)) => {
                            record(Entry::attempt(&*hedge_name, 1, ran, outcome_of(&failed, self.clock).to_string()));
                            if let Some(permit) = hedge_breaker {
                                permit.record(verdict_of(&failed, self.plan));
                            }
                        }
                        // The hedge is cancelled: its breaker permit is
                        // dropped unheard (neutral).
                        None => record(Entry::attempt(&*hedge_name, 1, hedge_started.elapsed(), CANCELLED)),
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
                    if let Some(permit) = hedge_breaker {
                        permit.record(verdict_of(&result, self.plan));
                    }
                    match first_failed.take() {
                        Some((failed, ran)) => {
                            record(Entry::attempt(&**name, 1, ran, outcome_of(&failed, self.clock).to_string()));
                        }
                        None => {
                            let ran = started.elapsed();
                            // The first attempt's latency is at least this.
                            self.hedging.observe(ran);
                            record(Entry::attempt(&**name, 1, ran, CANCELLED));
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
        let settings = self.settings;
        if self.timing.check_floor(&settings.floor.current()).is_err() {
            return Err(Declined::Floor);
        }
        let breaker = acquire_breaker(settings).map_err(|_| Declined::Circuit)?;
        let permit = match &settings.permits {
            Some(permits) => Some(permits.try_acquire().ok_or(Declined::Permit)?),
            None => None,
        };
        if !self.hedging.withdraw() {
            return Err(Declined::HedgeBudget);
        }
        Ok((permit, breaker))
    }
}

/// One attempt's time: when it must end, how long that is, and the budget
/// its header says (`None` in fixed mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AttemptWindow {
    deadline: Instant,
    limit: Duration,
    budget: Option<Duration>,
}

impl Timing {
    /// What is left, net of the reserve; `None` in fixed mode.
    fn remaining(self) -> Option<Duration> {
        match self {
            Timing::Budget(net) => Some(net.remaining()),
            Timing::Fixed(_) => None,
        }
    }

    /// Rule 2: `Err` when what is left does not reach `floor`. Fixed mode
    /// has no floor.
    fn check_floor(self, floor: &Effective) -> Result<(), BelowFloor> {
        match self {
            Timing::Budget(net) => floor.check(net.remaining()),
            Timing::Fixed(_) => Ok(()),
        }
    }

    /// An attempt starting at `started`: it gets what is left, or less
    /// with a per-attempt `cap`, and its header says what it will be
    /// waited for; in fixed mode, the fixed timeout.
    fn attempt(self, started: Instant, cap: Option<Duration>) -> AttemptWindow {
        match self {
            Timing::Budget(net) => {
                let attempt = match cap {
                    Some(cap) => net.child_capped(cap),
                    None => net,
                };
                let left = attempt.remaining_at(started);
                AttemptWindow {
                    deadline: attempt.deadline(),
                    limit: left,
                    budget: Some(left),
                }
            }
            Timing::Fixed(timeout) => AttemptWindow {
                deadline: Budget::starting_at(started, timeout).deadline(),
                limit: timeout,
                budget: None,
            },
        }
    }

    /// Until when a call may wait for a concurrency permit (or a token
    /// refresh): until only the floor is left (later, the call could not
    /// be made anyway), or the fixed timeout from `start`.
    pub(crate) fn wait_until(self, start: Instant, floor: Floor) -> Instant {
        match self {
            Timing::Budget(net) => net
                .deadline()
                .checked_sub(floor.get())
                .map_or(start, |until| until.max(start)),
            Timing::Fixed(timeout) => Budget::starting_at(start, timeout).deadline(),
        }
    }

    /// What the retry decision sees: the time left and the floor the next
    /// attempt needs; unbounded and no floor in fixed mode.
    fn for_decision(self, floor: Floor) -> (Duration, Floor) {
        match self {
            Timing::Budget(net) => (net.remaining(), floor),
            Timing::Fixed(_) => (Duration::MAX, Floor::default()),
        }
    }

    /// The retry budget that pays for retries: none in fixed mode.
    fn retry_budget(self, settings: &Settings) -> Option<&RetryBudget> {
        match self {
            Timing::Budget(_) => settings.retry_budget.as_ref(),
            Timing::Fixed(_) => None,
        }
    }
}

/// Why a call, or its next attempt, was not made.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Too little budget left for the dependency's floor.
    BelowFloor(BelowFloor),
    /// The dependency's circuit is open.
    CircuitOpen(CircuitOpen),
    /// No concurrency permit came in time, or the queue predicted none
    /// would.
    NoPermit {
        /// How long the call waited for one.
        waited: Duration,
        /// The floor the wait kept free.
        floor: Floor,
        /// What the queue said (`None`: the fixed-mode wait timed out).
        queue: Option<QueueRefusal>,
        /// The budget left when the queue refused (`None` in fixed mode).
        left: Option<Duration>,
    },
}

impl Refusal {
    /// The span's and the log's outcome.
    fn outcome(&self) -> &'static str {
        match self {
            Refusal::BelowFloor(_) => OUTCOME_BELOW_FLOOR,
            Refusal::CircuitOpen(_) => OUTCOME_CIRCUIT_OPEN,
            Refusal::NoPermit { .. } => OUTCOME_NO_PERMIT,
        }
    }

    /// The ledger's skip note (docs/contract.md §4).
    fn note(&self) -> String {
        match self {
            Refusal::BelowFloor(below) => format!("skipped: {below}"),
            Refusal::CircuitOpen(open) => open.skip_note(),
            Refusal::NoPermit {
                waited,
                floor,
                queue,
                left,
            } => {
                let why = no_permit_in_budget(*waited, *floor, *queue, *left);
                if why.prediction().is_some() {
                    return format!("skipped: {why}");
                }
                // Overtaken in a standing queue for longer than it may wait,
                // or the wait ran to the floor.
                let standing = queue.is_some_and(|q| q.reason() == RefusalReason::StandingQueue);
                format!(
                    "skipped: no concurrency permit in {}ms{}",
                    waited.as_millis(),
                    if standing { " (standing queue)" } else { "" }
                )
            }
        }
    }
}

/// Records a refusal once everywhere it shows (the ledger's skip note, a
/// debug log line, the metrics, a span of the call not sent) and returns
/// the call's error. A refused retry records the same and then ends the
/// call with its last outcome instead of this error.
fn refuse(
    settings: &Settings,
    timing: Timing,
    ledger: &Option<Ledger>,
    refusal: Refusal,
) -> CallError {
    let name = &settings.name;
    let note = refusal.note();
    tracing::debug!(dependency = %name, outcome = refusal.outcome(), %note, "dependency call not made");
    if let Some(ledger) = ledger {
        ledger.record(Entry::skip(&**name, note.clone()));
    }
    let remaining = timing.remaining();
    let error = CallError::new(Arc::clone(name), refusal_kind(&refusal)).with_skip_note(note);
    match refusal {
        Refusal::BelowFloor(below) => {
            meter::below_floor(name);
            let source: &dyn std::fmt::Display = match below.basis() {
                Some(basis) => basis,
                None => &"fixed",
            };
            trace::refused(
                name,
                OUTCOME_BELOW_FLOOR,
                Some(below.remaining()),
                Some(below.floor()),
                Some(source),
            );
            error
                .with_budget(below.remaining(), below.remaining().is_zero())
                .with_floor(below.floor())
                .with_source(below)
        }
        Refusal::CircuitOpen(open) => {
            trace::refused(name, OUTCOME_CIRCUIT_OPEN, remaining, None, None);
            error
                .with_retry_after(Some(open.retry_after()))
                .with_source(open)
        }
        Refusal::NoPermit {
            waited,
            floor,
            queue,
            left,
        } => {
            trace::refused(name, OUTCOME_NO_PERMIT, remaining, Some(floor.get()), None);
            let why = no_permit_in_budget(waited, floor, queue, left);
            let error = error.with_source(why);
            match (queue.map(|q| q.reason()), remaining) {
                // Overload, not the budget: the caller may come back soon.
                (Some(RefusalReason::StandingQueue), Some(left)) => {
                    meter::no_permit(name, REASON_STANDING_QUEUE);
                    error
                        .with_budget(left, false)
                        .with_retry_after(Some(STANDING_QUEUE_RETRY_AFTER))
                }
                // The wait would not fit this budget: a larger one might.
                (Some(RefusalReason::PredictedWait), Some(left)) => {
                    meter::no_permit(name, REASON_PREDICTED_WAIT);
                    error.with_budget(left, false).with_floor(floor.get())
                }
                (_, Some(left)) => {
                    meter::no_permit(name, REASON_EXPIRED);
                    error.with_budget(left, true).with_floor(floor.get())
                }
                (_, None) => error,
            }
        }
    }
}

/// Why a call got no permit, as its error's source says it.
fn no_permit_in_budget(
    waited: Duration,
    floor: Floor,
    queue: Option<QueueRefusal>,
    left: Option<Duration>,
) -> NoPermitInBudget {
    match (
        queue.and_then(|q| Some((q.reason(), q.prediction()?))),
        left,
    ) {
        (Some((reason, prediction)), Some(left)) => {
            NoPermitInBudget::predicted(reason, prediction, floor.get(), left).after(waited)
        }
        _ => NoPermitInBudget::new(waited),
    }
}

fn refusal_kind(refusal: &Refusal) -> CallErrorKind {
    match refusal {
        Refusal::BelowFloor(_) => CallErrorKind::BelowFloor,
        Refusal::CircuitOpen(_) => CallErrorKind::CircuitOpen,
        Refusal::NoPermit { .. } => CallErrorKind::NoPermit,
    }
}

/// An attempt's own limit, below what is left of the budget: the retry
/// policy's `attempt_timeout`, shortened for the breaker's half-open probe
/// to its [`attempt_limit`](BreakerPermit::attempt_limit), so that a probe
/// of an endpoint that still does not answer ends soon.
fn attempt_cap(settings: &Settings, breaker: Option<&BreakerPermit>) -> Option<Duration> {
    let probe = breaker.and_then(BreakerPermit::attempt_limit);
    match (settings.policy.attempt_timeout(), probe) {
        (Some(timeout), Some(probe)) => Some(timeout.min(probe)),
        (timeout, probe) => timeout.or(probe),
    }
}

/// A breaker permit for the next attempt (`None` without a breaker), or
/// why the circuit refuses.
fn acquire_breaker(settings: &Settings) -> Result<Option<BreakerPermit>, CircuitOpen> {
    match &settings.breaker {
        Some(breaker) => breaker.try_acquire().map(Some),
        None => Ok(None),
    }
}

/// The `Retry-After` of a call refused by a standing queue: the
/// dependency is overloaded now, not for long.
const STANDING_QUEUE_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Waits for a concurrency permit: at once when one is free; otherwise at
/// most until [`Timing::wait_until`] (the queue may refuse earlier, rule 11).
async fn acquire_permit(
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

/// What an attempt tells an adaptive limit: a success or an answer that
/// is not about load is latency to learn from; a failed connection or an
/// overload answer (`429`, `503`) is a drop; a timeout is a drop whose
/// latency counts too.
fn limit_sample(outcome: &Outcome, decision: &Decision) -> Sample {
    match outcome {
        Outcome::Transport(TransportKind::Timeout) => Sample::TimedOut,
        Outcome::Transport(_) => Sample::Dropped,
        Outcome::Status { status, .. } if matches!(status.as_u16(), 429 | 503) => Sample::Dropped,
        _ if matches!(decision, Decision::Stop(StopReason::Succeeded)) => Sample::Success,
        _ => Sample::Ignore,
    }
}

/// The call's answer after its last attempt.
fn finish(
    name: &Arc<str>,
    timing: Timing,
    result: AttemptResult,
    outcome: Outcome,
    attempts: u32,
    decision: Decision,
) -> Result<BudgetResponse, CallError> {
    match result {
        Ok(res) => Ok(BudgetResponse::new(
            res,
            Arc::clone(name),
            attempts,
            outcome.retry_after(),
            decision.passes_up(&outcome),
        )),
        Err(e) => {
            let mut error = CallError::from_transport(Arc::clone(name), e.kind)
                .with_attempts(attempts)
                .with_boxed_source(Some(e.source));
            if let Some(remaining) = timing.remaining() {
                let ran_out = remaining.is_zero()
                    && matches!(
                        e.kind,
                        TransportKind::Timeout | TransportKind::ConnectTimeout
                    );
                error = error.with_budget(remaining, ran_out);
            }
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::time::SystemTime;

    use http::StatusCode;
    use http::header::RETRY_AFTER;

    use super::*;
    use crate::breaker::BreakerConfig;
    use crate::client::config::DependencyConfig;
    use crate::clock::FixedClock;
    use crate::retry::{BackoffConfig, Jitter, RetryBudgetConfig, RetryConfig};

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn config() -> DependencyConfig {
        let mut c = DependencyConfig::new("pricing", "http://127.0.0.1:9/pricing");
        c.retry = RetryConfig {
            max_attempts: 3,
            backoff: BackoffConfig {
                initial: ms(100),
                max: ms(1000),
                multiplier: 2.0,
                jitter: Jitter::None,
            },
            ..RetryConfig::default()
        };
        c
    }

    fn clock() -> FixedClock {
        FixedClock::new(SystemTime::UNIX_EPOCH)
    }

    fn response(status: u16) -> AttemptResult {
        let mut res = http::Response::new(Bytes::from_static(b"{}"));
        *res.status_mut() = StatusCode::from_u16(status).unwrap();
        Ok(res)
    }

    fn plan(timing: Timing, ledger: &Ledger) -> Plan {
        Plan {
            timing,
            ledger: Some(ledger.clone()),
            may_retry: true,
            method: http::Method::GET,
            criticality: Criticality::Default,
            refreshes_auth: false,
        }
    }

    /// A fake dependency: each attempt takes `took`, answers the next
    /// status of `script` (the last repeats), and records what it was told.
    struct Fake {
        script: Vec<u16>,
        took: Duration,
        seen: Mutex<Vec<AttemptSpec>>,
    }

    impl Fake {
        fn new(script: &[u16], took: Duration) -> Self {
            Self {
                script: script.to_vec(),
                took,
                seen: Mutex::new(Vec::new()),
            }
        }

        async fn attempt(&self, spec: AttemptSpec) -> AttemptResult {
            let i = {
                let mut seen = self.seen.lock().unwrap();
                seen.push(spec);
                seen.len() - 1
            };
            tokio::time::sleep(self.took).await;
            let status = self.script[i.min(self.script.len() - 1)];
            if status == 0 {
                std::future::pending::<()>().await;
            }
            response(status)
        }

        fn seen(&self) -> Vec<AttemptSpec> {
            self.seen.lock().unwrap().clone()
        }
    }

    /// A fake dependency whose attempt N takes `shape[N].1` and answers
    /// `shape[N].0` (0: a connection error); the last entry repeats.
    struct Shaped {
        shape: Vec<(u16, Duration)>,
        seen: Mutex<Vec<(Instant, AttemptSpec)>>,
    }

    impl Shaped {
        fn new(shape: &[(u16, u64)]) -> Self {
            Self {
                shape: shape.iter().map(|(s, t)| (*s, ms(*t))).collect(),
                seen: Mutex::new(Vec::new()),
            }
        }

        async fn attempt(&self, spec: AttemptSpec) -> AttemptResult {
            let i = {
                let mut seen = self.seen.lock().unwrap();
                seen.push((Instant::now(), spec));
                seen.len() - 1
            };
            let (status, took) = self.shape[i.min(self.shape.len() - 1)];
            tokio::time::sleep(took).await;
            if status == 0 {
                return Err(AttemptError::new(TransportKind::Connect, "refused"));
            }
            response(status)
        }

        fn sent(&self) -> usize {
            self.seen.lock().unwrap().len()
        }

        /// When each attempt started, from `origin`, and the budget it was sent.
        fn starts(&self, origin: Instant) -> Vec<(Duration, Option<Duration>)> {
            self.seen
                .lock()
                .unwrap()
                .iter()
                .map(|(at, spec)| (*at - origin, spec.budget))
                .collect()
        }
    }

    /// `config()` with hedging after a fixed `delay`, one hedge per call
    /// allowed (the ratio's own test is separate).
    fn hedged(delay: u64) -> DependencyConfig {
        let mut c = config();
        c.hedge = Some(HedgeConfig {
            ratio: 1.0,
            ..HedgeConfig::after(ms(delay))
        });
        c
    }

    use crate::client::HedgeConfig;

    /// One call of `settings` to `fake` with a budget of `budget` ms.
    async fn shaped(
        settings: &Settings,
        ledger: &Ledger,
        budget: u64,
        fake: &Shaped,
    ) -> BudgetResponse {
        run(
            settings,
            &clock(),
            plan(Timing::Budget(Budget::new(ms(budget))), ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn hedge_a_slow_first_attempt_is_hedged_after_the_delay_and_the_first_answer_wins() {
        let settings = hedged(40).settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Shaped::new(&[(200, 1000), (200, 30)]);
        let start = Instant::now();
        let budget = Budget::new(ms(2000));
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(
            start.elapsed(),
            ms(70),
            "the hedge's answer, not the first's"
        );
        // The hedge is sent 40 ms in, with what is left then.
        assert_eq!(
            fake.starts(start),
            [(ms(0), Some(ms(2000))), (ms(40), Some(ms(1960)))]
        );
        assert_eq!(
            ledger.server_timing(),
            "pricing;dur=70;desc=\"cancelled\", pricing-hedge;dur=30"
        );
        // Dropped, the first attempt makes no more progress.
        tokio::time::advance(ms(2000)).await;
        assert_eq!(fake.sent(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn hedge_a_first_attempt_that_answers_first_cancels_the_hedge() {
        let settings = hedged(40).settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Shaped::new(&[(200, 100), (200, 1000)]);
        let start = Instant::now();
        let res = shaped(&settings, &ledger, 2000, &fake).await;
        assert_eq!((res.status(), start.elapsed()), (StatusCode::OK, ms(100)));
        assert_eq!(
            ledger.server_timing(),
            "pricing-hedge;dur=60;desc=\"cancelled\", pricing;dur=100"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn hedge_an_attempt_answering_before_the_delay_sends_no_hedge() {
        let settings = hedged(40).settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Shaped::new(&[(503, 30), (200, 30)]);
        let res = shaped(&settings, &ledger, 2000, &fake).await;
        // A 503 is an answer: no hedge, the retry policy's retry.
        assert_eq!((res.status(), res.attempts()), (StatusCode::OK, 2));
        assert_eq!(
            ledger.server_timing(),
            "pricing;dur=30;desc=\"503\", pricing-wait;dur=100, pricing;dur=30"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn hedge_a_failed_attempt_waits_for_the_other_one() {
        let settings = hedged(40).settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Shaped::new(&[(0, 50), (200, 100)]);
        let start = Instant::now();
        let res = shaped(&settings, &ledger, 2000, &fake).await;
        assert_eq!((res.status(), start.elapsed()), (StatusCode::OK, ms(140)));
        assert_eq!(
            ledger.server_timing(),
            "pricing;dur=50;desc=\"connect\", pricing-hedge;dur=100"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn hedge_not_sent_when_what_is_left_would_not_cover_the_floor() {
        let mut c = hedged(40);
        c.floor = crate::floor::FloorConfig::fixed(ms(500));
        let settings = c.settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Shaped::new(&[(200, 300), (200, 10)]);
        let start = Instant::now();
        let res = shaped(&settings, &ledger, 530, &fake).await;
        // 40 ms in, 490 ms are left: below the 500 ms floor.
        assert_eq!((res.status(), start.elapsed()), (StatusCode::OK, ms(300)));
        assert_eq!(fake.sent(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn hedge_never_for_a_call_that_may_not_be_sent_twice_nor_in_fixed_mode() {
        let settings = hedged(40).settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Shaped::new(&[(200, 300), (200, 10)]);
        let mut once = plan(Timing::Budget(Budget::new(ms(2000))), &ledger);
        once.may_retry = false;
        run(&settings, &clock(), once, |s| fake.attempt(s))
            .await
            .unwrap();
        assert_eq!(fake.sent(), 1, "a POST without a key is sent once");

        let fake = Shaped::new(&[(200, 300), (200, 10)]);
        run(
            &settings,
            &clock(),
            plan(Timing::Fixed(ms(2000)), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap();
        assert_eq!(
            fake.sent(),
            1,
            "fixed mode (budget mode off) does not hedge"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn hedge_the_hedge_budget_caps_hedges_at_its_ratio_of_calls() {
        let mut c = config();
        c.hedge = Some(HedgeConfig::after(ms(40))); // ratio 0.1
        let settings = c.settings(None).unwrap();
        let fake = Shaped::new(&[(200, 100)]);
        for _ in 0..100 {
            shaped(&settings, &Ledger::new(), 2000, &fake).await;
        }
        // Every call was slow enough for a hedge; the budget allowed 10.
        assert_eq!(fake.sent(), 110);
    }

    #[tokio::test(start_paused = true)]
    async fn hedge_a_learned_delay_hedges_only_once_it_has_samples() {
        let mut c = config();
        c.hedge = Some(HedgeConfig {
            ratio: 1.0,
            min_samples: 5,
            ..HedgeConfig::default()
        });
        let settings = c.settings(None).unwrap();
        let ledger = Ledger::new();
        let go = |fake| shaped(&settings, &ledger, 2000, fake);
        let slow = Shaped::new(&[(200, 300), (200, 20)]);
        go(&slow).await;
        assert_eq!(slow.sent(), 1, "cold: no latency known, no hedge");
        let fast = Shaped::new(&[(200, 20)]);
        for _ in 0..30 {
            go(&fast).await;
        }
        tokio::time::advance(ms(200)).await;
        let slow = Shaped::new(&[(200, 300), (200, 20)]);
        let start = Instant::now();
        go(&slow).await;
        assert_eq!(slow.sent(), 2);
        // The p95 of 30 samples of 20 ms and one of 300 ms: hedged at 20 ms.
        let hedge_at = slow.starts(start)[1].0;
        assert!(hedge_at >= ms(19) && hedge_at <= ms(21), "{hedge_at:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn rule1_the_header_is_what_is_left_at_each_attempt_and_shrinks() {
        let settings = config().settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Fake::new(&[503, 503, 200], ms(50));
        let budget = Budget::new(ms(2000)).less(ms(5));
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap();
        assert_eq!((res.status(), res.attempts()), (StatusCode::OK, 3));
        let sent: Vec<_> = fake.seen().iter().map(|s| s.budget.unwrap()).collect();
        // 1995; after 50 ms + 100 ms backoff: 1845; after 50 + 200: 1595.
        assert_eq!(sent, [ms(1995), ms(1845), ms(1595)]);
        assert_eq!(
            ledger.server_timing(),
            "pricing;dur=50;desc=\"503\", pricing-wait;dur=100, pricing;dur=50;desc=\"503\", \
             pricing-wait;dur=200, pricing;dur=50"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule1_an_attempt_is_limited_to_what_is_left_net_of_the_reserve() {
        let settings = config().settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Fake::new(&[0], Duration::ZERO); // hangs
        let start = Instant::now();
        let budget = Budget::new(ms(700)).less(ms(20));
        let err = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap_err();
        assert_eq!(start.elapsed(), ms(680));
        assert!(err.is_timeout() && err.is_budget_exhausted());
        assert_eq!(err.attempts(), 1);
        assert_eq!(err.problem().status, 504);
        assert_eq!(
            err.to_string(),
            "call to `pricing` ran out of budget after 1 attempt"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule5_an_attempt_timeout_with_budget_left_is_retried_and_the_header_says_the_cap() {
        let mut c = config();
        c.retry.attempt_timeout = Some(ms(300));
        c.retry.backoff.jitter = crate::retry::Jitter::None;
        let settings = c.settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Fake::new(&[0, 200], ms(10)); // the first attempt hangs
        let start = Instant::now();
        let budget = Budget::new(ms(2000));
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap();
        assert_eq!((res.status(), res.attempts()), (StatusCode::OK, 2));
        // 300 ms cap + 100 ms backoff + 10 ms: not the whole 2 s budget.
        assert_eq!(start.elapsed(), ms(410));
        let sent: Vec<_> = fake.seen().iter().map(|s| s.budget.unwrap()).collect();
        assert_eq!(sent, [ms(300), ms(300)], "each attempt is told its cap");
        assert_eq!(
            ledger.server_timing(),
            "pricing;dur=300;desc=\"timeout\", pricing-wait;dur=100, pricing;dur=10"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule1_the_attempt_cap_never_lengthens_an_attempt_past_the_budget() {
        let mut c = config();
        c.retry.attempt_timeout = Some(ms(5000));
        let settings = c.settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Fake::new(&[0], Duration::ZERO);
        let start = Instant::now();
        let err = run(
            &settings,
            &clock(),
            plan(Timing::Budget(Budget::new(ms(400))), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap_err();
        assert_eq!(start.elapsed(), ms(400));
        assert!(err.is_budget_exhausted());
        assert_eq!(fake.seen()[0].budget, Some(ms(400)));
    }

    #[tokio::test(start_paused = true)]
    async fn rule2_below_the_floor_no_attempt_is_made_and_the_ledger_says_why() {
        let mut c = config();
        c.floor = Floor::new(ms(1000)).into();
        let settings = c.settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Fake::new(&[200], Duration::ZERO);
        let budget = Budget::new(ms(855)).less(ms(5));
        let err = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap_err();
        assert!(err.is_below_floor() && err.is_unavailable());
        assert!(fake.seen().is_empty());
        assert_eq!(
            ledger.entries(),
            [Entry::skip("pricing", "skipped: 850ms < floor 1000ms")]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule10_a_learned_floor_refuses_below_the_observed_latency_and_says_why() {
        let mut c = config();
        c.floor = crate::floor::FloorConfig::auto();
        let settings = c.settings(None).unwrap();
        let fake = Fake::new(&[200], ms(400));
        for _ in 0..20 {
            let ledger = Ledger::new();
            let timing = Timing::Budget(Budget::new(ms(2000)));
            run(&settings, &clock(), plan(timing, &ledger), |s| {
                fake.attempt(s)
            })
            .await
            .unwrap();
        }
        tokio::time::advance(crate::floor::REFRESH).await;
        let ledger = Ledger::new();
        let timing = Timing::Budget(Budget::new(ms(300)));
        let err = run(&settings, &clock(), plan(timing, &ledger), |s| {
            fake.attempt(s)
        })
        .await
        .unwrap_err();
        assert!(err.is_below_floor());
        assert_eq!(fake.seen().len(), 20, "no attempt below the learned floor");
        assert_eq!(
            ledger.entries(),
            [Entry::skip(
                "pricing",
                "skipped: 300ms < floor 400ms (p95 400ms x 1)"
            )]
        );
        assert_eq!(err.problem().floor_ms, Some(400));
    }

    #[tokio::test(start_paused = true)]
    async fn rule2_a_retry_refused_after_its_backoff_is_noted_like_the_first_call() {
        let mut c = config();
        c.floor = crate::floor::FloorConfig::Learned(crate::floor::LearnedFloorConfig {
            min_samples: 1,
            ..Default::default()
        });
        let settings = c.settings(None).unwrap();
        let crate::floor::DependencyFloor::Learned(learned) = &settings.floor else {
            unreachable!("configured learned")
        };
        let learned = Arc::clone(learned);
        // While the call backs off (10 ms attempt, then 100 ms), other
        // calls learn that the partner now takes 900 ms.
        tokio::spawn(async move {
            tokio::time::sleep(ms(50)).await;
            for _ in 0..10 {
                learned.observe(ms(900));
            }
        });
        let fake = Fake::new(&[503, 200], ms(10));
        let ledger = Ledger::new();
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(Budget::new(ms(1000))), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap();
        // The last outcome is the answer; the refused retry is in the
        // ledger as a refused first call would be.
        assert_eq!(
            (res.status(), res.attempts()),
            (StatusCode::SERVICE_UNAVAILABLE, 1)
        );
        assert_eq!(fake.seen().len(), 1);
        assert_eq!(
            ledger.server_timing(),
            "pricing;dur=10;desc=\"503\", pricing-wait;dur=100, \
             pricing;desc=\"skipped: 890ms < floor 900ms (p95 900ms x 1)\""
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule3_backoff_never_sleeps_past_the_deadline_and_keeps_the_floor() {
        let mut c = config();
        c.floor = Floor::new(ms(300)).into();
        c.retry.backoff.initial = ms(400);
        c.retry.max_attempts = 10;
        let settings = c.settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Fake::new(&[503], ms(100));
        let start = Instant::now();
        let budget = Budget::new(ms(1000));
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap();
        // t=0..100 attempt 1; 400 ms wait + 300 floor fits in 900: wait;
        // t=500..600 attempt 2; 800 ms wait + 300 does not fit in 400: stop.
        assert_eq!(res.attempts(), 2);
        assert_eq!(start.elapsed(), ms(600));
        assert!(
            !res.passes_up(),
            "our own backoff did not fit, not the server's wait"
        );
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    }

    #[tokio::test(start_paused = true)]
    async fn rule7_the_backoff_is_told_the_previous_wait() {
        // The test-only decorrelated jitter draws the second wait from
        // [100 ms, 3 x the first wait]; the first from [100, 300]. A second
        // wait above 300 ms shows the loop handed the first one on.
        let mut c = config();
        c.retry.backoff.jitter = Jitter::Decorrelated;
        let settings = c.settings(None).unwrap();
        let mut longest_second = Duration::ZERO;
        for _ in 0..30 {
            let fake = Shaped::new(&[(503, 10)]);
            let start = Instant::now();
            let ledger = Ledger::new();
            let timing = Timing::Fixed(ms(1000));
            let res = run(&settings, &clock(), plan(timing, &ledger), |s| {
                fake.attempt(s)
            })
            .await
            .unwrap();
            assert_eq!(res.attempts(), 3);
            let starts: Vec<Duration> = fake.starts(start).into_iter().map(|(at, _)| at).collect();
            let first = starts[1] - starts[0] - ms(10);
            let second = starts[2] - starts[1] - ms(10);
            assert!((ms(100)..=ms(300)).contains(&first), "{first:?}");
            assert!(
                second >= ms(100) && second <= first * 3,
                "{first:?} {second:?}"
            );
            longest_second = longest_second.max(second);
        }
        assert!(longest_second > ms(300), "{longest_second:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn rule6_a_retry_after_that_does_not_fit_is_passed_up_without_sleeping() {
        let settings = config().settings(None).unwrap();
        let ledger = Ledger::new();
        let start = Instant::now();
        let budget = Budget::new(ms(500));
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |_| async {
                let mut res = response(429)?;
                res.headers_mut()
                    .insert(RETRY_AFTER, http::HeaderValue::from_static("1"));
                Ok(res)
            },
        )
        .await
        .unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert!(res.passes_up());
        assert_eq!(res.retry_after(), Some(ms(1000)));
        let p = res.deferred().unwrap();
        assert_eq!((p.status, p.retry_after_ms), (429, Some(1000)));
    }

    #[tokio::test(start_paused = true)]
    async fn rule8_the_permit_wait_is_paid_from_the_budget_and_bounded_by_it() {
        let mut c = config();
        c.concurrency = Some(1.into());
        c.floor = Floor::new(ms(200)).into();
        // No standing-queue refusal within this test (rule 11 has its own).
        c.queue.interval = Duration::from_secs(60);
        let settings = c.settings(None).unwrap();
        let holder = hold(&settings).await;
        let ledger = Ledger::new();
        let fake = Fake::new(&[200], Duration::ZERO);
        let start = Instant::now();
        let budget = Budget::new(ms(1000));
        let err = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap_err();
        // Waited until only the floor was left, not a moment more.
        assert_eq!(start.elapsed(), ms(800));
        assert_eq!(err.kind(), CallErrorKind::NoPermit);
        assert!(err.is_unavailable() && err.is_budget_exhausted());
        assert!(fake.seen().is_empty());
        assert_eq!(
            ledger.server_timing(),
            "pricing-queue;dur=800, pricing;desc=\"skipped: no concurrency permit in 800ms\""
        );

        // Freed after 300 ms: the call goes on with 700 ms left, and says so.
        let ledger = Ledger::new();
        let budget = Budget::new(ms(1000));
        tokio::spawn(async move {
            tokio::time::sleep(ms(300)).await;
            drop(holder);
        });
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(fake.seen()[0].budget, Some(ms(700)));
        assert_eq!(
            ledger.server_timing(),
            "pricing-queue;dur=300, pricing;dur=0"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule8_the_permit_is_held_through_backoff() {
        let mut c = config();
        c.concurrency = Some(1.into());
        let settings = c.settings(None).unwrap();
        let permits = settings.permits.clone().unwrap();
        let fake = Fake::new(&[503, 200], ms(10));
        let free_during_backoff = AtomicU32::new(0);
        let ledger = Ledger::new();
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(Budget::new(ms(2000))), &ledger),
            |s| {
                if s.number == 2 && permits.in_use() == 0 {
                    free_during_backoff.fetch_add(1, Ordering::Relaxed);
                }
                fake.attempt(s)
            },
        )
        .await
        .unwrap();
        assert_eq!(res.attempts(), 2);
        assert_eq!(free_during_backoff.load(Ordering::Relaxed), 0);
        assert_eq!(permits.in_use(), 0, "released at the end");
    }

    /// Takes the dependency's one permit, as another call would.
    async fn hold(settings: &Settings) -> Permit {
        let far = Instant::now() + Duration::from_secs(3600);
        settings
            .permits
            .as_ref()
            .unwrap()
            .acquire(far, Criticality::Default)
            .await
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn rule11_a_call_whose_predicted_wait_does_not_fit_is_refused_at_once() {
        let mut c = config();
        c.concurrency = Some(1.into());
        let settings = c.settings(None).unwrap();
        // The queue learns that its one permit is held 500 ms.
        let first = hold(&settings).await;
        tokio::time::sleep(ms(500)).await;
        drop(first);
        let _holder = hold(&settings).await;
        let ledger = Ledger::new();
        let fake = Fake::new(&[200], Duration::ZERO);
        let start = Instant::now();
        let err = run(
            &settings,
            &clock(),
            plan(Timing::Budget(Budget::new(ms(300))), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap_err();
        // A wait of one hold (500 ms) cannot fit in 300 ms: refused at
        // arrival, not at the deadline less the floor.
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(err.kind(), CallErrorKind::NoPermit);
        assert!(!err.is_budget_exhausted());
        assert_eq!(err.retry_after(), None);
        assert!(fake.seen().is_empty());
        assert_eq!(
            ledger.server_timing(),
            "pricing;desc=\"skipped: expected wait 500ms + floor 0ms > 300ms left (0 queued, 2.0/s)\""
        );
        let detail = err.problem().detail;
        assert!(
            detail.ends_with(": expected wait 500ms + floor 0ms > 300ms left (0 queued, 2.0/s)"),
            "{detail}"
        );
    }

    /// A standing queue's refusal is about the dependency's load, not the
    /// caller's budget: not spent, `Retry-After` 1 s, the prediction in the
    /// note and the problem.
    #[tokio::test(start_paused = true)]
    async fn rule11_a_standing_queue_refusal_is_overload_with_a_retry_after() {
        let settings = config().settings(None).unwrap();
        let ledger = Ledger::new();
        let prediction = crate::admission::Prediction::new(ms(300), 12, ms(25));
        let err = refuse(
            &settings,
            Timing::Budget(Budget::new(ms(1100))),
            &Some(ledger.clone()),
            Refusal::NoPermit {
                waited: Duration::ZERO,
                floor: Floor::default(),
                queue: Some(QueueRefusal::predicted(
                    RefusalReason::StandingQueue,
                    prediction,
                )),
                left: Some(ms(1100)),
            },
        );
        assert_eq!(err.kind(), CallErrorKind::NoPermit);
        assert!(!err.is_budget_exhausted());
        assert_eq!(err.retry_after(), Some(ms(1000)));
        let note = "standing queue: expected wait 300ms (12 queued, 40/s), \
                    more than a newcomer may wait with 1.1s left";
        assert_eq!(
            ledger.server_timing(),
            format!("pricing;desc=\"skipped: {note}\"")
        );
        assert!(
            err.problem().detail.ends_with(note),
            "{}",
            err.problem().detail
        );
    }

    /// A waiter overtaken in a standing queue (refused after a wait, with
    /// no prediction) is overload too: not spent, `Retry-After` 1 s, and
    /// its note says why.
    #[tokio::test(start_paused = true)]
    async fn rule11_an_overtaken_waiter_s_refusal_is_overload_with_a_retry_after() {
        let settings = config().settings(None).unwrap();
        let ledger = Ledger::new();
        let err = refuse(
            &settings,
            Timing::Budget(Budget::new(ms(820))),
            &Some(ledger.clone()),
            Refusal::NoPermit {
                waited: ms(280),
                floor: Floor::default(),
                queue: Some(QueueRefusal::new(RefusalReason::StandingQueue, ms(280))),
                left: Some(ms(820)),
            },
        );
        assert_eq!(err.kind(), CallErrorKind::NoPermit);
        assert!(!err.is_budget_exhausted());
        assert_eq!(err.retry_after(), Some(ms(1000)));
        assert_eq!(
            ledger.server_timing(),
            "pricing;desc=\"skipped: no concurrency permit in 280ms (standing queue)\""
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule11_a_freed_permit_goes_to_the_more_critical_waiter() {
        let mut c = config();
        c.concurrency = Some(1.into());
        let settings = Arc::new(c.settings(None).unwrap());
        let holder = hold(&settings).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (i, criticality) in [
            Criticality::Sheddable,
            Criticality::Default,
            Criticality::Critical,
        ]
        .into_iter()
        .enumerate()
        {
            let (settings, order) = (Arc::clone(&settings), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep(ms(i as u64)).await;
                let mut plan = plan(Timing::Budget(Budget::new(ms(2000))), &Ledger::new());
                plan.criticality = criticality;
                let fake = Fake::new(&[200], ms(10));
                let res = run(&settings, &clock(), plan, |s| fake.attempt(s)).await;
                order.lock().unwrap().push(criticality);
                res.map(|r| r.status())
            }));
        }
        tokio::time::sleep(ms(20)).await;
        drop(holder);
        for task in tasks {
            assert_eq!(task.await.unwrap().unwrap(), StatusCode::OK);
        }
        assert_eq!(
            *order.lock().unwrap(),
            [
                Criticality::Critical,
                Criticality::Default,
                Criticality::Sheddable
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule9_the_retry_budget_is_deposited_once_per_call() {
        let mut c = config();
        c.retry_budget = Some(RetryBudgetConfig {
            min_per_sec: 0,
            ratio: 0.5,
            ..Default::default()
        });
        let settings = c.settings(None).unwrap();
        let fake = Fake::new(&[503], Duration::ZERO);
        let ledger = Ledger::new();
        for _ in 0..10 {
            let timing = Timing::Budget(Budget::new(ms(10_000)));
            let _ = run(&settings, &clock(), plan(timing, &ledger), |s| {
                fake.attempt(s)
            })
            .await;
        }
        // 10 calls deposit 5 retries: 15 attempts, not 30.
        assert_eq!(fake.seen().len(), 15);
    }

    #[tokio::test(start_paused = true)]
    async fn fixed_mode_sends_no_budget_and_gives_each_attempt_the_fixed_timeout() {
        let mut c = config();
        c.mode = crate::client::TimeoutMode::Fixed;
        c.fixed_timeout = ms(1000);
        c.floor = Floor::new(ms(60_000)).into(); // ignored in fixed mode
        let settings = c.settings(None).unwrap();
        let fake = Fake::new(&[0], Duration::ZERO); // hangs
        let ledger = Ledger::new();
        let start = Instant::now();
        let err = run(
            &settings,
            &clock(),
            plan(Timing::Fixed(ms(1000)), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap_err();
        // 3 x 1000 ms + 100 + 200 ms backoff, whatever a budget would say.
        assert_eq!(start.elapsed(), ms(3300));
        assert_eq!(err.attempts(), 3);
        assert!(err.is_timeout() && !err.is_budget_exhausted());
        assert_eq!(err.problem().status, 504);
        assert!(fake.seen().iter().all(|s| s.budget.is_none()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_breaker_opened_by_failures_refuses_before_any_attempt() {
        let mut c = config();
        c.retry.max_attempts = 1;
        c.breaker = Some(BreakerConfig {
            failure_threshold: 2,
            open_for: ms(5000),
            ..Default::default()
        });
        let settings = c.settings(None).unwrap();
        let fake = Fake::new(&[503], Duration::ZERO);
        let ledger = Ledger::new();
        for _ in 0..2 {
            let timing = Timing::Budget(Budget::new(ms(1000)));
            let res = run(&settings, &clock(), plan(timing, &ledger), |s| {
                fake.attempt(s)
            })
            .await
            .unwrap();
            assert_eq!(res.status(), 503);
        }
        let timing = Timing::Budget(Budget::new(ms(1000)));
        let err = run(&settings, &clock(), plan(timing, &ledger), |s| {
            fake.attempt(s)
        })
        .await
        .unwrap_err();
        assert!(err.is_circuit_open());
        assert_eq!(err.retry_after(), Some(ms(5000)));
        assert_eq!(fake.seen().len(), 2);
        let p = err.problem();
        assert_eq!((p.status, p.retry_after_ms), (503, Some(5000)));
    }

    /// The breaker's silence rule through the engine: a 200 ms dependency
    /// that stops answering, called one call at a time, two a second, with
    /// 2 s budgets (the breaker module's "A dependency that stops
    /// answering").
    #[tokio::test(start_paused = true)]
    async fn a_dependency_that_stops_answering_is_refused_at_once_after_three_timeouts() {
        let mut c = config();
        c.breaker = Some(BreakerConfig {
            failure_threshold: 20,
            open_for: ms(1000),
            ..Default::default()
        });
        let settings = c.settings(None).unwrap();
        let hanging = AtomicBool::new(false);
        let sent = Mutex::new(Vec::new());
        let attempt = |spec: AttemptSpec| {
            sent.lock().unwrap().push(spec);
            let hang = hanging.load(Ordering::Relaxed);
            async move {
                if hang {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep(ms(200)).await;
                response(200)
            }
        };
        // One call; how long it took and how it ended, paced at 2 a second.
        let call = || async {
            let start = Instant::now();
            let ledger = Ledger::new();
            let timing = Timing::Budget(Budget::new(ms(2000)));
            let res = run(&settings, &clock(), plan(timing, &ledger), attempt).await;
            let took = start.elapsed();
            tokio::time::sleep(ms(500).saturating_sub(took)).await;
            (took, res, ledger.server_timing())
        };
        for _ in 0..5 {
            assert_eq!(call().await.1.unwrap().status(), StatusCode::OK);
        }
        let breaker = settings.breaker.clone().unwrap();
        assert_eq!(breaker.typical_latency(), Some(ms(200)));

        hanging.store(true, Ordering::Relaxed);
        for _ in 0..3 {
            let (took, res, _) = call().await;
            assert_eq!(took, ms(2000), "each waits out its budget");
            assert!(res.unwrap_err().is_timeout());
        }
        // From now on: refused at once, but for one probe at a time, which
        // gets the silence limit (800 ms) rather than the whole budget.
        let probes_before = sent.lock().unwrap().len();
        let mut refused = 0;
        for _ in 0..10 {
            let (took, res, timing) = call().await;
            let err = res.unwrap_err();
            if err.is_circuit_open() {
                assert_eq!(took, Duration::ZERO);
                assert_eq!(err.problem().status, 503);
                assert!(
                    timing.starts_with("pricing;desc=\"skipped: circuit open (no answer for "),
                    "{timing}"
                );
                refused += 1;
            } else {
                assert!(err.is_timeout(), "{err}");
                assert!(took <= ms(1000), "the probe ends early: {took:?}");
            }
        }
        let probes: Vec<AttemptSpec> = sent.lock().unwrap()[probes_before..].to_vec();
        assert!(refused >= 7, "{refused} of 10 refused at once");
        assert!(!probes.is_empty() && probes.len() <= 3, "{probes:?}");
        assert!(
            probes.iter().all(|p| p.budget == Some(ms(800))),
            "{probes:?}"
        );

        // Back: within open_for plus one probe limit, a call succeeds.
        hanging.store(false, Ordering::Relaxed);
        let back = Instant::now();
        loop {
            let (_, res, _) = call().await;
            if res.is_ok() {
                break;
            }
        }
        assert!(back.elapsed() <= ms(2000), "{:?}", back.elapsed());
        assert_eq!(breaker.state(), crate::breaker::BreakerState::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_call_makes_no_further_attempt() {
        let settings = config().settings(None).unwrap();
        let fake = Fake::new(&[503], ms(10));
        let ledger = Ledger::new();
        let timing = Timing::Budget(Budget::new(ms(5000)));
        // Dropped during the first backoff (10 ms attempt + 100 ms wait).
        let cut = tokio::time::timeout(
            ms(50),
            run(&settings, &clock(), plan(timing, &ledger), |s| {
                fake.attempt(s)
            }),
        )
        .await;
        assert!(cut.is_err());
        tokio::time::sleep(ms(10_000)).await;
        assert_eq!(fake.seen().len(), 1);
    }
}
