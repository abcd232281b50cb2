//! What every attempt and every refusal leaves behind, written in one
//! place: the ledger entry (docs/contract.md §4), the metric, the span and
//! the debug log line.

use std::sync::Arc;
use std::time::Duration;

use tracing::Span;

use super::attempt::{AttemptSpec, Attempted};
use super::choose::Chosen;
use super::retry::Decided;
use super::timing::Timing;
use super::{Dependency, Plan};
use crate::admission::queue::{Refusal as QueueRefusal, RefusalReason};
use crate::breaker::CircuitOpen;
use crate::budget::whole_millis;
use crate::floor::{BelowFloor, Floor};
use crate::ledger::{Entry, Ledger};
use crate::outbound::endpoints::ResolveError;
use crate::outbound::error::{CallError, CallErrorKind, NoPermitInBudget};
use crate::outbound::hedging::HEDGE_SUFFIX;
use crate::proxy::UpstreamTime;
use crate::telemetry::semconv::{
    OUTCOME_BELOW_FLOOR, OUTCOME_CIRCUIT_OPEN, OUTCOME_NO_PERMIT, OUTCOME_UNRESOLVED,
    REASON_EXPIRED, REASON_PREDICTED_WAIT, REASON_STANDING_QUEUE,
};
use crate::telemetry::{meter, trace};

/// The ledger metric suffix for the time a call waited for a concurrency
/// permit: `pricing-queue;dur=12`.
pub const QUEUE_SUFFIX: &str = "-queue";

/// The `Retry-After` of a call refused by a standing queue: the
/// dependency is overloaded now, not for long.
const STANDING_QUEUE_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Records `entry` in the call's ledger, if it has one.
pub(crate) fn ledger(plan: &Plan, entry: Entry) {
    if let Some(ledger) = &plan.ledger {
        ledger.record(entry);
    }
}

/// The span of attempt `spec` about to be sent after `waited`, and its
/// metrics.
pub(crate) fn attempt_started(
    dep: &Dependency,
    plan: &Plan,
    spec: &AttemptSpec,
    waited: Option<Duration>,
) -> Span {
    let (number, budget) = (spec.number, spec.budget);
    let span = trace::attempt_span(
        &dep.name,
        &plan.method,
        number,
        budget,
        waited,
        plan.rpc_system,
    );
    meter::attempt(&dep.name, number, budget);
    span
}

/// An attempt's answer (or the hedge's, when it won) after `took`: its
/// ledger entry (saying which replica answered, when there are several:
/// `200 from 10.0.0.2:9000`) and its duration metric.
pub(crate) fn attempt_ended<R>(
    dep: &Dependency,
    plan: &Plan,
    attempted: &Attempted<R>,
    chosen: &Chosen,
) {
    let (number, took, outcome) = (attempted.number, attempted.took, &attempted.outcome);
    let name = &dep.name;
    let said = said(outcome, chosen.shown(), attempted.upstream.as_ref());
    if attempted.hedge_won {
        ledger(
            plan,
            Entry::attempt(format!("{name}{HEDGE_SUFFIX}"), number, took, said),
        );
    } else {
        ledger(plan, Entry::attempt(&**name, number, took, said));
    }
    meter::attempt_done(name, &plan.method, outcome, took, plan.rpc_system);
}

/// An attempt's ledger outcome: `what` (`200`, `timeout`, `cancelled`,
/// `envoy UT: upstream request timeout (504)`), the replica it went to
/// when it was chosen among several (`200 from 10.0.0.2:9000`), and what
/// the proxy in front of the dependency said the dependency took (`200
/// (upstream 35ms)`), or that it said it unreadably (docs/contract.md §4):
/// the first word stays the outcome.
pub(crate) fn said(
    what: &dyn std::fmt::Display,
    from: Option<&Arc<str>>,
    upstream: Option<&UpstreamTime>,
) -> String {
    use std::fmt::Write as _;
    let mut said = what.to_string();
    // Writing to a `String` cannot fail.
    if let Some(endpoint) = from {
        let _ = write!(said, " from {endpoint}");
    }
    match upstream {
        Some(Ok(took)) => {
            let _ = write!(said, " (upstream {}ms)", took.as_millis());
        }
        Some(Err(malformed)) => {
            let _ = write!(said, " ({malformed})");
        }
        None => {}
    }
    said
}

/// What was decided after an attempt: the log line, the span's outcome
/// and the decision's metric.
pub(crate) fn decided<R>(dep: &Dependency, attempted: &Attempted<R>, decided: &Decided) {
    let (decision, remaining) = (&decided.decision, decided.remaining);
    let (number, outcome, took, budget) = (
        attempted.number,
        &attempted.outcome,
        attempted.took,
        attempted.budget,
    );
    let span = &attempted.span;
    tracing::debug!(
        dependency = %dep.name,
        attempt = number,
        outcome = %outcome,
        duration_ms = whole_millis(took),
        budget_sent_ms = budget.map(whole_millis),
        remaining_ms = (remaining != Duration::MAX).then_some(whole_millis(remaining)),
        %decision,
        "dependency attempt"
    );
    trace::record_attempt(span, outcome, decision, remaining);
    meter::decision(&dep.name, decision);
}

/// Why a call, or its next attempt, was not made.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Too little budget left for the dependency's floor.
    BelowFloor(BelowFloor),
    /// The dependency's circuit is open (every endpoint's, with several).
    CircuitOpen(CircuitOpen),
    /// The dependency's host name gave no endpoints.
    Unresolved(ResolveError),
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
            Refusal::Unresolved(_) => OUTCOME_UNRESOLVED,
            Refusal::NoPermit { .. } => OUTCOME_NO_PERMIT,
        }
    }

    /// The ledger's skip note (docs/contract.md §4).
    pub(crate) fn note(&self) -> String {
        match self {
            Refusal::BelowFloor(below) => below.skip_note(),
            Refusal::CircuitOpen(open) => open.skip_note(),
            Refusal::Unresolved(e) => format!("skipped: {e}"),
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

    fn kind(&self) -> CallErrorKind {
        match self {
            Refusal::BelowFloor(_) => CallErrorKind::BelowFloor,
            Refusal::CircuitOpen(_) => CallErrorKind::CircuitOpen,
            Refusal::Unresolved(_) => CallErrorKind::Unresolved,
            Refusal::NoPermit { .. } => CallErrorKind::NoPermit,
        }
    }
}

/// Records a refusal once everywhere it shows (the ledger's skip note, a
/// debug log line, the metrics, a span of the call not sent) and returns
/// the call's error. A refused retry records the same and then ends the
/// call with its last outcome instead of this error.
pub(crate) fn refused(
    name: &Arc<str>,
    timing: Timing,
    ledger: &Option<Ledger>,
    refusal: Refusal,
) -> CallError {
    let note = refusal.note();
    tracing::debug!(dependency = %name, outcome = refusal.outcome(), %note, "dependency call not made");
    if let Some(ledger) = ledger {
        ledger.record(Entry::skip(&**name, note.clone()));
    }
    let remaining = timing.remaining();
    let error = CallError::new(Arc::clone(name), refusal.kind()).with_skip_note(note);
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
            error.below(below)
        }
        Refusal::CircuitOpen(open) => {
            trace::refused(name, OUTCOME_CIRCUIT_OPEN, remaining, None, None);
            error
                .with_retry_after(Some(open.retry_after()))
                .with_source(open)
        }
        Refusal::Unresolved(e) => {
            trace::refused(name, OUTCOME_UNRESOLVED, remaining, None, None);
            error.with_source(e)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::queue::Prediction;
    use crate::budget::Budget;
    use crate::floor::Effective;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_below_the_floor_is_one_skip_note_and_an_error_that_says_why() {
        let name: Arc<str> = Arc::from("pricing");
        let ledger = Ledger::new();
        let timing = Timing::Budget(Budget::new(ms(30)));
        let below = Effective::fixed(Floor::new(ms(50)))
            .check(ms(30))
            .unwrap_err();
        let error = refused(
            &name,
            timing,
            &Some(ledger.clone()),
            Refusal::BelowFloor(below),
        );
        assert!(error.is_below_floor());
        let entries = ledger.entries();
        assert!(
            matches!(&entries[..], [Entry::Skip { reason, .. }] if reason == "skipped: 30ms < floor 50ms"),
            "{entries:?}"
        );
        assert_eq!(error.skip_note(), Some("skipped: 30ms < floor 50ms"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_name_that_never_resolved_is_a_skip_note_and_a_502_naming_it() {
        let name: Arc<str> = Arc::from("partner");
        let ledger = Ledger::new();
        let timing = Timing::Budget(Budget::new(ms(900)));
        let error = refused(
            &name,
            timing,
            &Some(ledger.clone()),
            Refusal::Unresolved(ResolveError::new("partner.internal", "no such host")),
        );
        assert_eq!(error.kind(), CallErrorKind::Unresolved);
        let note = "skipped: cannot resolve `partner.internal`: no such host";
        assert_eq!(error.skip_note(), Some(note));
        let problem = error.problem();
        assert_eq!(problem.status, 502);
        assert!(
            problem.detail.contains("cannot resolve `partner.internal`"),
            "{}",
            problem.detail
        );
        assert!(
            matches!(&ledger.entries()[..], [Entry::Skip { reason, .. }] if reason == note),
            "{:?}",
            ledger.entries()
        );
    }

    #[test]
    fn a_wait_that_ran_to_the_floor_says_how_long_it_waited() {
        let refusal = Refusal::NoPermit {
            waited: ms(280),
            floor: Floor::new(ms(10)),
            queue: None,
            left: Some(ms(12)),
        };
        assert_eq!(refusal.note(), "skipped: no concurrency permit in 280ms");
    }

    /// A standing queue's refusal is about the dependency's load, not the
    /// caller's budget: not spent, `Retry-After` 1 s, the prediction in the
    /// note and the problem.
    #[tokio::test(start_paused = true)]
    async fn rule11_a_standing_queue_refusal_is_overload_with_a_retry_after() {
        let name: Arc<str> = Arc::from("pricing");
        let ledger = Ledger::new();
        let prediction = Prediction::new(ms(300), 12, ms(25));
        let err = refused(
            &name,
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
        let name: Arc<str> = Arc::from("pricing");
        let ledger = Ledger::new();
        let err = refused(
            &name,
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
}
