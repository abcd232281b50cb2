//! One attempt: what it is told ([`AttemptSpec`]), how it fails
//! ([`AttemptError`]), and the deadline it runs under ([`bounded`], with
//! its [cap](cap)).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::choose::Chosen;
use super::timing::{AttemptWindow, Timing};
use super::{Dependency, Plan};
use crate::breaker::{BreakerPermit, Verdict};
use crate::outbound::endpoints::Endpoint;
use crate::outbound::error::{AttemptTimedOut, BoxError, CallError};
use crate::retry::TransportKind;

/// What one attempt is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AttemptSpec {
    /// 1 for the first attempt.
    pub(crate) number: u32,
    /// The budget to send (`request-budget-ms`, `grpc-timeout`), net of
    /// the reserve, taken the moment the attempt starts; `None` in fixed
    /// mode.
    pub(crate) budget: Option<Duration>,
    /// Where it goes (the URL as it is, or a replica).
    pub(crate) endpoint: Arc<Endpoint>,
}

/// An attempt that produced no answer.
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

/// The result of one attempt.
pub(crate) type Tried<R> = Result<R, AttemptError>;

/// One attempt as it ended: what came back, what it reads as, and what it
/// was told and took, for the steps after it (learn, record, retry).
#[derive(Debug)]
pub(crate) struct Attempted<R> {
    /// 1 for the first attempt.
    pub(crate) number: u32,
    /// The answer, or the failure (the hedge's, when it won).
    pub(crate) result: Tried<R>,
    /// What the result reads as.
    pub(crate) outcome: crate::retry::Outcome,
    /// What the proxy in front of the dependency said the dependency took
    /// (`x-envoy-upstream-service-time`), when the answer carries it.
    pub(crate) upstream: Option<crate::proxy::UpstreamTime>,
    /// How long the attempt that won took.
    pub(crate) took: Duration,
    /// The budget it was sent (`None` in fixed mode).
    pub(crate) budget: Option<Duration>,
    /// The wait before it.
    pub(crate) waited: Option<Duration>,
    /// The calls out to its endpoint when it started (an adaptive limit's
    /// sample).
    pub(crate) in_flight: Option<usize>,
    /// The hedge's answer won.
    pub(crate) hedge_won: bool,
    /// Its span, for the decision's record.
    pub(crate) span: tracing::Span,
}

#[cfg(test)]
impl Attempted<()> {
    /// A first attempt that answered, read as `outcome`, after `took`.
    pub(crate) fn test(
        outcome: crate::retry::Outcome,
        took: Duration,
        in_flight: Option<usize>,
        budget: Option<Duration>,
    ) -> Self {
        Self {
            number: 1,
            result: Ok(()),
            outcome,
            upstream: None,
            took,
            budget,
            waited: None,
            in_flight,
            hedge_won: false,
            span: tracing::Span::none(),
        }
    }
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

    /// The attempt ran out of its `limit`.
    pub(crate) fn timed_out(limit: Duration) -> Self {
        Self::new(TransportKind::Timeout, AttemptTimedOut::new(limit))
    }

    /// A failure of ours, not the endpoint's (an answer over our body
    /// limit, a request we could not send): neutral to the breaker.
    pub(crate) fn neutral(kind: TransportKind, source: impl Into<BoxError>) -> Self {
        Self {
            kind,
            verdict: Verdict::Neutral,
            source: source.into(),
        }
    }

    /// The call's error when this was its last attempt's: with the
    /// attempts made and, in budget mode, what was left (spent, for a
    /// timeout with nothing left).
    pub(crate) fn into_call_error(
        self,
        name: &Arc<str>,
        timing: Timing,
        attempts: u32,
    ) -> CallError {
        let mut error = CallError::from_transport(Arc::clone(name), self.kind)
            .with_attempts(attempts)
            .with_boxed_source(Some(self.source));
        if let Some(remaining) = timing.remaining() {
            let ran_out = remaining.is_zero()
                && matches!(
                    self.kind,
                    TransportKind::Timeout | TransportKind::ConnectTimeout
                );
            error = error.with_budget(remaining, ran_out);
        }
        error
    }
}

/// An attempt bounded by its window: past its deadline it is dropped and
/// reads as a timeout.
pub(crate) async fn bounded<F, R>(window: AttemptWindow, sent: F) -> Tried<R>
where
    F: Future<Output = Tried<R>>,
{
    tokio::time::timeout_at(window.deadline, sent)
        .await
        .unwrap_or_else(|_| Err(AttemptError::timed_out(window.limit)))
}

/// An attempt's own limit, below what is left of the budget: the retry
/// policy's `attempt_timeout` or the call's own (`plan`'s), shortened for the breaker's half-open probe
/// to its [`attempt_limit`](BreakerPermit::attempt_limit), so that a probe
/// of an endpoint that still does not answer ends soon, and to
/// `elsewhere` (see [`elsewhere`]) when another replica could take a
/// retry.
pub(crate) fn cap(
    dep: &Dependency,
    plan: &Plan,
    breaker: Option<&BreakerPermit>,
    elsewhere: Option<Duration>,
) -> Option<Duration> {
    let probe = breaker.and_then(BreakerPermit::attempt_limit);
    [
        dep.policy.attempt_timeout(),
        plan.attempt_timeout,
        probe,
        elsewhere,
    ]
    .into_iter()
    .flatten()
    .min()
}

/// How long attempt `number` may go unanswered by the replica `chosen`
/// before it is given up for a retry on another: a silence limit (four
/// typical latencies, at least 250 ms: the breakers' own measure of
/// "stopped answering"), the replica's own or, when shorter, that of
/// another replica (which would have answered by then), when the call was
/// chosen among several replicas, has an attempt left and the replica has
/// a breaker. A replica that has not answered yet (new, or never heard
/// from by this client) gets the others' limit; with no replica heard
/// from, there is none. A replica that hangs, or has become slower than
/// the others, then costs the call that much, not its whole budget, and
/// the retry goes elsewhere.
pub(crate) fn elsewhere(
    dep: &Dependency,
    chosen: &Chosen,
    may_retry: bool,
    number: u32,
) -> Option<Duration> {
    if !(chosen.balanced && may_retry && number < dep.policy.max_attempts()) {
        return None;
    }
    let own = chosen.endpoint.breaker.as_ref()?.silence_limit();
    let others = dep
        .endpoints
        .current()
        .iter()
        .filter(|e| !Arc::ptr_eq(e, &chosen.endpoint))
        .filter_map(|e| e.breaker.as_ref()?.silence_limit())
        .min();
    own.into_iter().chain(others).min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Budget;
    use crate::outbound::error::BodyTooLarge;
    use tokio::time::Instant;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_past_its_deadline_is_dropped_and_reads_as_a_timeout() {
        let timing = Timing::Budget(Budget::new(ms(100)));
        let window = timing.attempt(Instant::now(), None);
        let start = Instant::now();
        let tried: Tried<()> = bounded(window, std::future::pending()).await;
        assert_eq!(start.elapsed(), ms(100));
        let error = tried.unwrap_err();
        assert_eq!(
            (error.kind, error.verdict),
            (TransportKind::Timeout, Verdict::TimedOut)
        );
        assert_eq!(
            error.source.to_string(),
            AttemptTimedOut::new(ms(100)).to_string()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_before_the_deadline_is_the_attempt_s() {
        let window = Timing::Fixed(ms(100)).attempt(Instant::now(), None);
        let tried = bounded(window, async {
            tokio::time::sleep(ms(99)).await;
            Ok::<_, AttemptError>(7)
        })
        .await;
        assert_eq!(tried.unwrap(), 7);
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_with_another_to_retry_on_is_given_its_silence_limit_and_no_more() {
        use crate::breaker::BreakerConfig;
        use crate::client::DependencyConfig;
        use crate::retry::RetryConfig;
        let config = |endpoints: &[&str]| {
            DependencyConfig::new("p", "http://127.0.0.1:9000/")
                .endpoints(endpoints.iter().copied())
                .breaker(BreakerConfig::default())
                .retry(RetryConfig::default().max_attempts(2))
                .settings(None)
                .unwrap()
                .dependency
        };
        let two = config(&["http://127.0.0.1:9001", "http://127.0.0.1:9002"]);
        let chosen = super::super::choose::next(&two, None, None).unwrap();
        // No answer seen yet: no silence limit to go by.
        assert_eq!(elsewhere(&two, &chosen, true, 1), None);
        let set = two.endpoints.current();
        let other = set
            .iter()
            .find(|e| !Arc::ptr_eq(e, &chosen.endpoint))
            .unwrap();
        let answer = |breaker: &crate::breaker::CircuitBreaker, took| {
            let permit = breaker.try_acquire().unwrap();
            async move {
                tokio::time::advance(ms(took)).await;
                permit.record(Verdict::Success);
            }
        };
        // The other replica answered in 100 ms: this one, never heard
        // from, is given the other's limit.
        answer(other.breaker.as_ref().unwrap(), 100).await;
        assert_eq!(elsewhere(&two, &chosen, true, 1), Some(ms(400)));
        // Its own, once it has answered (the shorter of the two).
        answer(chosen.endpoint.breaker.as_ref().unwrap(), 80).await;
        assert_eq!(elsewhere(&two, &chosen, true, 1), Some(ms(320)));
        let mut plan = crate::outbound::Plan::test(
            crate::outbound::Timing::Fixed(ms(1000)),
            &Default::default(),
            true,
        );
        assert_eq!(cap(&two, &plan, None, Some(ms(400))), Some(ms(400)));
        // The call's own attempt timeout, when shorter.
        plan.attempt_timeout = Some(ms(150));
        assert_eq!(cap(&two, &plan, None, Some(ms(400))), Some(ms(150)));
        // Not for the last attempt, a call that may not be retried, or a
        // dependency that is one endpoint.
        assert_eq!(elsewhere(&two, &chosen, true, 2), None);
        assert_eq!(elsewhere(&two, &chosen, false, 1), None);
        let one = config(&["http://127.0.0.1:9001"]);
        let alone = super::super::choose::next(&one, None, None).unwrap();
        assert_eq!(elsewhere(&one, &alone, true, 1), None);
    }

    /// A replica slower than another is waited for no longer than the
    /// other's silence limit: by then the other would have answered.
    #[tokio::test(start_paused = true)]
    async fn a_slow_replica_is_given_the_silence_limit_of_a_faster_one() {
        use crate::breaker::BreakerConfig;
        use crate::client::DependencyConfig;
        let two = DependencyConfig::new("p", "http://127.0.0.1:9000/")
            .endpoints(["http://127.0.0.1:9001", "http://127.0.0.1:9002"])
            .breaker(BreakerConfig::default())
            .settings(None)
            .unwrap()
            .dependency;
        let set = two.endpoints.current();
        let answer = |i: usize, took: u64| {
            let permit = set[i].breaker.as_ref().unwrap().try_acquire().unwrap();
            async move {
                tokio::time::advance(ms(took)).await;
                permit.record(Verdict::Success);
            }
        };
        answer(0, 300).await;
        answer(1, 100).await;
        let slow = super::super::choose::next(&two, None, Some(&set[1])).unwrap();
        assert_eq!(slow.endpoint, set[0]);
        assert_eq!(
            set[0].breaker.as_ref().unwrap().silence_limit(),
            Some(ms(1200))
        );
        assert_eq!(elsewhere(&two, &slow, true, 1), Some(ms(400)));
        let fast = super::super::choose::next(&two, None, Some(&set[0])).unwrap();
        assert_eq!(elsewhere(&two, &fast, true, 1), Some(ms(400)));
    }

    #[test]
    fn a_body_over_the_limit_is_neutral_to_the_breaker_and_other_failures_count() {
        let too_large = AttemptError::neutral(TransportKind::Body, BodyTooLarge::new(10));
        assert_eq!(too_large.verdict, Verdict::Neutral);
        assert_eq!(
            AttemptError::new(TransportKind::Connect, "refused").verdict,
            Verdict::Failure
        );
        assert_eq!(
            AttemptError::new(TransportKind::Timeout, "late").verdict,
            Verdict::TimedOut
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_with_nothing_left_is_the_budget_running_out() {
        let name: Arc<str> = Arc::from("pricing");
        let timing = Timing::Budget(Budget::new(ms(50)));
        tokio::time::advance(ms(50)).await;
        let spent = AttemptError::timed_out(ms(50)).into_call_error(&name, timing, 2);
        assert!(spent.is_budget_exhausted());
        assert_eq!(spent.attempts(), 2);
        let refused =
            AttemptError::new(TransportKind::Connect, "refused").into_call_error(&name, timing, 1);
        assert!(!refused.is_budget_exhausted());
        assert!(refused.is_connect());
    }
}
