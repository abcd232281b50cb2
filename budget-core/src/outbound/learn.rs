//! What an attempt teaches the dependency's shared state: the learned
//! floor and the hedge delay hear its latency (docs/contract.md §2 rule
//! 10), an adaptive concurrency limit its latency and whether it was
//! dropped, and the endpoint it went to (among several) its latency or
//! its failure.

use std::time::Duration;

use tokio::time::Instant;

use super::Dependency;
use super::attempt::Attempted;
use super::choose::Chosen;
use crate::admission::limit::Sample;
use crate::breaker::Verdict;
use crate::proxy::ProxyRefusal;
use crate::retry::{Decision, Outcome, StopReason, TransportKind};
use crate::telemetry::meter;

/// Teaches `dep` an attempt to `chosen` (what it took and read as, the
/// calls out when it started: an adaptive limit's sample, and the budget
/// sent with it), after which the retry policy decided `decision`.
pub(crate) fn attempt<R>(
    dep: &Dependency,
    attempted: &Attempted<R>,
    decision: &Decision,
    chosen: &Chosen,
) {
    let (outcome, took, in_flight, budget) = (
        &attempted.outcome,
        attempted.took,
        attempted.in_flight,
        attempted.budget,
    );
    let timed_out = match outcome {
        Outcome::Transport(kind) => *kind == TransportKind::Timeout,
        Outcome::Proxy(reply) => reply.refusal().timed_out(),
        _ => false,
    };
    if matches!(decision, Decision::Stop(StopReason::Succeeded)) || timed_out {
        // Rule 10: a learned floor learns from successful attempts, and
        // from timed-out ones (their latency is at least `took`; the
        // proxy's timeout too).
        dep.floor.observe(took);
        if let Some(hedging) = &dep.hedge {
            hedging.observe(took);
        }
    }
    if let (Some(permits), Some(in_flight)) = (&dep.permits, in_flight) {
        let sample = match (chosen.balanced && !permits.per_endpoint(), outcome) {
            // One replica that does not connect or answer is that
            // replica's failure, not the dependency's overload: when the
            // limit is the whole dependency's, it is not cut for it (its
            // breaker and the balancer deal with it; an attempt given up
            // for a retry on another replica reads as a timeout too). A
            // replica's own limit hears it.
            (true, Outcome::Transport(_)) => Sample::Ignore,
            _ => limit_sample(outcome, decision),
        };
        permits.sample(&chosen.endpoint, took, in_flight, sample, budget);
    }
}

/// Tells the endpoint `chosen` how its attempt went: its breaker permit
/// hears `verdict`, and its load (when chosen among several) the latency
/// or the failure ([`endpoint`]). The first attempt's (or the hedge that
/// won) in [`Call::run`](super::Call::run), the hedge's that lost in its race.
pub(crate) fn heard(dep: &Dependency, chosen: &mut Chosen, verdict: Verdict, took: Duration) {
    if let Some(permit) = chosen.breaker.take() {
        permit.record(verdict);
    }
    endpoint(dep, chosen, verdict, took);
}

/// Teaches the endpoint `chosen` (when chosen among several) an attempt
/// that took `took` and that the breaker reads as `verdict`: an answer's
/// latency goes into its estimate, and so does a timeout's (the latency
/// was at least that); a failure (no connection, a reset, a `5xx`, a
/// `429`) doubles it until its next answer, so that a replica that fails
/// fast does not look fast; a neutral answer (a `404`) teaches nothing.
pub(crate) fn endpoint(dep: &Dependency, chosen: &Chosen, verdict: Verdict, took: Duration) {
    if !chosen.balanced {
        return;
    }
    let endpoint = &chosen.endpoint;
    let now = Instant::now();
    match verdict {
        Verdict::Success => endpoint.load.observe(took, now),
        Verdict::TimedOut => endpoint.load.at_least(took, now),
        Verdict::Failure => endpoint.load.penalize(took, now),
        _ => {}
    }
    meter::endpoint_attempt(
        &dep.name,
        &endpoint.metric_label,
        endpoint.load.estimate(now),
    );
}

/// What an attempt tells an adaptive limit: a success or an answer that
/// is not about load is latency to learn from; a failed connection or an
/// overload answer (`429`, `503`, gRPC's `UNAVAILABLE` and
/// `RESOURCE_EXHAUSTED`, the proxy's shedding) is a drop; a timeout (the
/// proxy's too) is a drop whose latency counts too.
fn limit_sample(outcome: &Outcome, decision: &Decision) -> Sample {
    match outcome {
        Outcome::Transport(TransportKind::Timeout) => Sample::TimedOut,
        Outcome::Transport(_) => Sample::Dropped,
        Outcome::Proxy(reply) if reply.refusal().timed_out() => Sample::TimedOut,
        Outcome::Proxy(reply) if reply.refusal() == ProxyRefusal::Other => {
            limit_sample(&Outcome::as_sent(reply), decision)
        }
        Outcome::Proxy(_) => Sample::Dropped,
        Outcome::Status { status, .. } if matches!(status.as_u16(), 429 | 503) => Sample::Dropped,
        Outcome::Grpc { code: 8 | 14, .. } => Sample::Dropped,
        _ if matches!(decision, Decision::Stop(StopReason::Succeeded)) => Sample::Success,
        _ => Sample::Ignore,
    }
}

#[cfg(test)]
mod tests {
    use http::StatusCode;

    use super::*;

    #[test]
    fn a_limit_hears_overload_as_a_drop_and_a_success_as_latency() {
        let ok = Decision::Stop(StopReason::Succeeded);
        let stop = Decision::Stop(StopReason::NotRetryable);
        let retry = Decision::Retry {
            after: Duration::ZERO,
        };
        assert_eq!(
            limit_sample(&Outcome::status(StatusCode::OK), &ok),
            Sample::Success
        );
        assert_eq!(
            limit_sample(&Outcome::status(StatusCode::NOT_FOUND), &stop),
            Sample::Ignore
        );
        for overload in [
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::SERVICE_UNAVAILABLE,
        ] {
            assert_eq!(
                limit_sample(&Outcome::status(overload), &retry),
                Sample::Dropped
            );
        }
        let unavailable = Outcome::Grpc {
            code: 14,
            pushback: None,
        };
        assert_eq!(limit_sample(&unavailable, &retry), Sample::Dropped);
        let invalid = Outcome::Grpc {
            code: 3,
            pushback: None,
        };
        assert_eq!(limit_sample(&invalid, &stop), Sample::Ignore);
        let timeout = Outcome::Transport(TransportKind::Timeout);
        assert_eq!(limit_sample(&timeout, &retry), Sample::TimedOut);
        let refused = Outcome::Transport(TransportKind::Connect);
        assert_eq!(limit_sample(&refused, &retry), Sample::Dropped);
    }

    /// Envoy's shedding and failed connections are drops, its timeouts
    /// drops whose latency counts, another local reply as its status.
    #[test]
    fn a_limit_hears_the_proxy_s_shedding_as_a_drop_and_its_timeout_as_one() {
        use crate::proxy::ProxyReply;
        let retry = Decision::Retry {
            after: Duration::ZERO,
        };
        let stop = Decision::Stop(StopReason::NotRetryable);
        let proxy = |r| Outcome::Proxy(ProxyReply::new(r, StatusCode::SERVICE_UNAVAILABLE));
        for r in [
            ProxyRefusal::Overflow,
            ProxyRefusal::ConcurrencyLimit,
            ProxyRefusal::ConnectFailure,
            ProxyRefusal::NoHealthyUpstream,
            ProxyRefusal::Other,
        ] {
            assert_eq!(limit_sample(&proxy(r), &retry), Sample::Dropped, "{r:?}");
        }
        for r in [ProxyRefusal::UpstreamTimeout, ProxyRefusal::StreamDuration] {
            assert_eq!(limit_sample(&proxy(r), &retry), Sample::TimedOut, "{r:?}");
        }
        let not_found = Outcome::Proxy(ProxyReply::new(ProxyRefusal::Other, StatusCode::NOT_FOUND));
        assert_eq!(limit_sample(&not_found, &stop), Sample::Ignore);
    }

    /// A replica that refuses its connections cuts its own limit, and the
    /// other replica's is not touched.
    #[tokio::test(start_paused = true)]
    async fn a_replica_that_refuses_connections_cuts_its_own_limit_only() {
        use crate::admission::limit::{AdaptiveLimitConfig, LimitConfig};
        use crate::client::DependencyConfig;
        use crate::outbound::choose;
        let dep = DependencyConfig::new("pricing", "http://127.0.0.1:9/")
            .endpoints(["http://127.0.0.1:9001", "http://127.0.0.1:9002"])
            .concurrency(LimitConfig::Adaptive(AdaptiveLimitConfig::default()))
            .settings(None)
            .unwrap()
            .dependency;
        let set = dep.endpoints.current();
        let ok = Decision::Stop(StopReason::Succeeded);
        let budget = Some(Duration::from_secs(2));
        let limit_of = |i: usize| set[i].limit.as_ref().unwrap().current();
        // Both warm: three answers each end their probes.
        for _ in 0..3 {
            for i in 0..2 {
                let chosen = choose::next(&dep, None, Some(&set[1 - i])).unwrap();
                assert_eq!(chosen.endpoint, set[i]);
                let _going = chosen.start();
                let in_flight = dep.permits.as_ref().unwrap().adaptive_in_flight(&set[i]);
                let status = Outcome::status(StatusCode::OK);
                let attempted =
                    Attempted::test(status, Duration::from_millis(50), in_flight, budget);
                attempt(&dep, &attempted, &ok, &chosen);
            }
        }
        let (first, second) = (limit_of(0), limit_of(1));
        tokio::time::advance(Duration::from_millis(200)).await;
        let chosen = choose::next(&dep, None, Some(&set[1])).unwrap();
        let refused = Outcome::Transport(TransportKind::Connect);
        let retry = Decision::Retry {
            after: Duration::ZERO,
        };
        let attempted = Attempted::test(refused, Duration::from_millis(1), Some(1), budget);
        attempt(&dep, &attempted, &retry, &chosen);
        assert!(limit_of(0) < first, "{} vs {first}", limit_of(0));
        assert_eq!(limit_of(1), second);
    }
}
