//! What an attempt's answer is: the [`Outcome`] the retry policy, the
//! ledger and the telemetry read (the [transport](super::Transport)
//! reads its own protocol's answers), and the [`Verdict`] the breaker
//! hears, for every transport alike.

use http::StatusCode;

use super::Plan;
use super::attempt::Tried;
use super::transport::{Head, Transport};
use crate::breaker::Verdict;
use crate::clock::WallClock;
use crate::grpc_status::GrpcCode;
use crate::proxy::{ProxyRefusal, ProxyReply, UpstreamTime, upstream_time};
use crate::retry::Outcome;

/// An HTTP answer's outcome: its status, and when to come back
/// (`Retry-After`).
#[inline]
pub(crate) fn http_outcome<B>(res: &http::Response<B>, clock: &dyn WallClock) -> Outcome {
    Outcome::from_response(res.status(), res.headers(), clock)
}

/// What the retry policy and the ledger read of an attempt's result: an
/// answer as its transport reads it, unless a proxy in the path made it
/// itself ([`ProxyReply::recognise`], docs/contract.md §2 "Envoy in the
/// path").
pub(crate) fn outcome_of<T: Transport>(
    transport: &T,
    tried: &Tried<T::Answer>,
    clock: &dyn WallClock,
) -> Outcome {
    match tried {
        Ok(answer) => {
            let outcome = transport.classify(answer, clock);
            match transport.head(answer) {
                Some(head) => proxy_outcome(outcome, head),
                None => outcome,
            }
        }
        Err(e) => Outcome::Transport(e.kind),
    }
}

/// `outcome` as read from the transport, or the proxy's refusal when
/// `head` says the proxy made the answer.
fn proxy_outcome(outcome: Outcome, head: Head<'_>) -> Outcome {
    let status = match outcome {
        // Envoy's refusals are never a success (nor are its gRPC ones,
        // read as `Grpc` by a gRPC transport).
        Outcome::Status { status, .. } if status.is_success() => return outcome,
        Outcome::Status { status, .. } => status,
        // A gRPC failure in the head: its HTTP status was `200`.
        Outcome::Grpc { .. } => StatusCode::OK,
        Outcome::Transport(_) | Outcome::Proxy(_) => return outcome,
    };
    ProxyReply::recognise(status, head.headers, head.body).map_or(outcome, Outcome::Proxy)
}

/// What the proxy in front of the dependency said the dependency took
/// (`x-envoy-upstream-service-time`), when an answer carries it.
pub(crate) fn upstream_of<T: Transport>(
    transport: &T,
    tried: &Tried<T::Answer>,
) -> Option<UpstreamTime> {
    let answer = tried.as_ref().ok()?;
    upstream_time(transport.head(answer)?.headers)
}

/// What the breaker hears of an attempt whose result read as `outcome`: a
/// `401` the client answers with a token refresh is neutral; a gRPC
/// answer is a failure when its status says the callee is unwell
/// (`UNKNOWN`, `DEADLINE_EXCEEDED`, `INTERNAL`, `UNAVAILABLE`), neutral
/// otherwise (the call reached a healthy callee that said no). A proxy's
/// own refusal ([`proxy_verdict`]) is judged by its kind, not its status.
pub(crate) fn verdict_of<R>(tried: &Tried<R>, outcome: &Outcome, plan: &Plan) -> Verdict {
    const UNWELL: [GrpcCode; 4] = [
        GrpcCode::Unknown,
        GrpcCode::DeadlineExceeded,
        GrpcCode::Internal,
        GrpcCode::Unavailable,
    ];
    match (tried, outcome) {
        (Err(e), _) => e.verdict,
        (Ok(_), Outcome::Status { status, .. })
            if plan.refreshes_auth && *status == StatusCode::UNAUTHORIZED =>
        {
            Verdict::Neutral
        }
        (Ok(_), Outcome::Status { status, .. }) => Verdict::from_status(*status),
        (Ok(_), Outcome::Grpc { code, .. }) if UNWELL.iter().any(|u| *u as u8 == *code) => {
            Verdict::Failure
        }
        (Ok(_), Outcome::Grpc { .. }) => Verdict::Neutral,
        (Ok(_), Outcome::Transport(_)) => Verdict::Failure,
        (Ok(_), Outcome::Proxy(reply)) => proxy_verdict(tried, reply, plan),
    }
}

/// What the breaker hears of the proxy's own refusal (docs/contract.md §2,
/// "Envoy in the path"): the mesh shedding load says nothing of the
/// dependency's health (neutral; the proxy's own breaker is at work); the
/// route's timeout is the dependency too slow for the route (a failure);
/// the stream's duration is the call's deadline run out at the proxy
/// (judged as the engine's own timeout); a failed connection, a reset or
/// no healthy endpoint is a failure; another local reply is read as the
/// answer it came as.
fn proxy_verdict<R>(tried: &Tried<R>, reply: &ProxyReply, plan: &Plan) -> Verdict {
    match reply.refusal() {
        refusal if refusal.sheds() => Verdict::Neutral,
        ProxyRefusal::StreamDuration => Verdict::TimedOut,
        ProxyRefusal::Other => verdict_of(tried, &Outcome::as_sent(reply), plan),
        _ => Verdict::Failure,
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::clock::FixedClock;
    use crate::outbound::{AttemptError, Timing};
    use crate::retry::TransportKind;

    fn plan(refreshes_auth: bool) -> Plan {
        let mut plan = Plan::test(
            Timing::Fixed(Duration::from_secs(1)),
            &Default::default(),
            true,
        );
        plan.refreshes_auth = refreshes_auth;
        plan
    }

    fn answer(status: u16, headers: &[(&'static str, &'static str)]) -> http::Response<()> {
        let mut res = http::Response::new(());
        *res.status_mut() = StatusCode::from_u16(status).unwrap();
        for (name, value) in headers {
            res.headers_mut().insert(*name, value.parse().unwrap());
        }
        res
    }

    fn read(res: http::Response<()>) -> (String, Verdict) {
        let clock = FixedClock::new(SystemTime::UNIX_EPOCH);
        let outcome = http_outcome(&res, &clock);
        (
            outcome.to_string(),
            verdict_of(&Ok(res), &outcome, &plan(false)),
        )
    }

    #[test]
    fn an_http_answer_is_its_status_with_its_retry_after() {
        let clock = FixedClock::new(SystemTime::UNIX_EPOCH);
        let res = answer(503, &[("retry-after", "2")]);
        let outcome = http_outcome(&res, &clock);
        assert_eq!(outcome.retry_after(), Some(Duration::from_secs(2)));
        assert_eq!(read(res), ("503".into(), Verdict::Failure));
        assert_eq!(read(answer(404, &[])), ("404".into(), Verdict::Neutral));
        // grpc-status means nothing on a plain HTTP call.
        assert_eq!(read(answer(200, &[("grpc-status", "14")])).0, "200");
    }

    #[test]
    fn a_grpc_status_is_a_failure_when_the_callee_is_unwell() {
        let tried: Tried<()> = Ok(());
        for (code, verdict) in [
            (2, Verdict::Failure),
            (4, Verdict::Failure),
            (13, Verdict::Failure),
            (14, Verdict::Failure),
            (3, Verdict::Neutral),
            (5, Verdict::Neutral),
            (12, Verdict::Neutral),
        ] {
            let outcome = Outcome::Grpc {
                code,
                pushback: None,
            };
            let mut grpc = plan(false);
            grpc.rpc_system = Some("grpc");
            assert_eq!(verdict_of(&tried, &outcome, &grpc), verdict, "{code}");
        }
    }

    /// A gRPC answer's head as Envoy 1.40 sent it: trailers-only, its
    /// refusal in `grpc-message`.
    fn grpc_head(code: &'static str, message: &'static str) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        for (name, value) in [
            ("server", "envoy"),
            ("content-type", "application/grpc"),
            ("grpc-status", code),
            ("grpc-message", message),
        ] {
            headers.insert(name, value.parse().unwrap());
        }
        headers
    }

    /// Envoy's own `DEADLINE_EXCEEDED` and its route timeout (which it
    /// answers `UNAVAILABLE`) are its own, apart from each other and from
    /// the partner's `UNAVAILABLE` and `CANCELLED`, in the ledger's text
    /// and the metrics' label; the breaker judges each by its kind.
    #[test]
    fn envoy_s_grpc_refusals_stay_apart_from_the_partner_s_statuses() {
        let grpc = |code: u8| Outcome::Grpc {
            code,
            pushback: None,
        };
        let read = |code, message| {
            let headers = grpc_head(if code == 4 { "4" } else { "14" }, message);
            proxy_outcome(grpc(code), Head::new(&headers, None))
        };
        let deadline = read(4, "downstream duration timeout");
        let timeout = read(14, "upstream request timeout");
        assert_eq!(
            deadline.to_string(),
            "envoy: max stream duration reached (grpc-4)"
        );
        assert_eq!(
            timeout.to_string(),
            "envoy UT: upstream request timeout (grpc-14)"
        );
        let label = |o: &Outcome| match o {
            Outcome::Proxy(reply) => reply.refusal().label(),
            _ => "not the proxy's",
        };
        assert_eq!(label(&deadline), "envoy-stream-duration");
        assert_eq!(label(&timeout), "envoy-upstream-timeout");
        // The partner's own, carried: its status as it is.
        let mut carried = grpc_head("14", "");
        carried.insert("x-envoy-upstream-service-time", "3".parse().unwrap());
        assert_eq!(proxy_outcome(grpc(14), Head::new(&carried, None)), grpc(14));
        assert_eq!(
            proxy_outcome(grpc(1), Head::new(&carried, None)).to_string(),
            "grpc-1"
        );
        // What the breaker hears.
        let mut grpc_plan = plan(false);
        grpc_plan.rpc_system = Some("grpc");
        let tried: Tried<()> = Ok(());
        assert_eq!(verdict_of(&tried, &deadline, &grpc_plan), Verdict::TimedOut);
        assert_eq!(verdict_of(&tried, &timeout, &grpc_plan), Verdict::Failure);
        let shed = read(
            14,
            "upstream connect error or disconnect/reset before headers. reset reason: overflow",
        );
        assert_eq!(verdict_of(&tried, &shed, &grpc_plan), Verdict::Neutral);
        // Another local reply is judged as its code: `INVALID_ARGUMENT`
        // says nothing of the partner.
        let mut other = grpc_head("3", "");
        other.insert("x-envoy-response-flags", "NR".parse().unwrap());
        let other = proxy_outcome(grpc(3), Head::new(&other, None));
        assert_eq!(other.to_string(), "envoy: local reply (grpc-3)");
        assert_eq!(verdict_of(&tried, &other, &grpc_plan), Verdict::Neutral);
    }

    /// Over HTTP the transport's outcome stands unless Envoy made the
    /// answer: a success never is Envoy's refusal.
    #[test]
    fn an_http_answer_is_envoy_s_only_when_its_head_says_so() {
        let clock = FixedClock::new(SystemTime::UNIX_EPOCH);
        let envoy = answer(504, &[("server", "envoy")]);
        let outcome = proxy_outcome(
            http_outcome(&envoy, &clock),
            Head::new(envoy.headers(), None),
        );
        assert_eq!(
            outcome.to_string(),
            "envoy UT: upstream request timeout (504)"
        );
        assert_eq!(
            verdict_of(&Ok(()), &outcome, &plan(false)),
            Verdict::Failure
        );
        let ok = answer(200, &[("server", "envoy"), ("grpc-status", "14")]);
        let outcome = proxy_outcome(http_outcome(&ok, &clock), Head::new(ok.headers(), None));
        assert_eq!(outcome.to_string(), "200");
    }

    #[test]
    fn a_refreshed_401_is_neutral_and_a_failed_attempt_is_its_own_verdict() {
        let clock = FixedClock::new(SystemTime::UNIX_EPOCH);
        let res = answer(401, &[]);
        let outcome = http_outcome(&res, &clock);
        let tried = Ok(res);
        assert_eq!(verdict_of(&tried, &outcome, &plan(true)), Verdict::Neutral);
        assert_eq!(verdict_of(&tried, &outcome, &plan(false)), Verdict::Failure);
        let failed: Tried<http::Response<()>> = Err(AttemptError::neutral(
            TransportKind::Body,
            crate::outbound::error::BodyTooLarge::new(1),
        ));
        let outcome = Outcome::Transport(failed.as_ref().unwrap_err().kind);
        assert_eq!(outcome, Outcome::Transport(TransportKind::Body));
        assert_eq!(
            verdict_of(&failed, &outcome, &plan(false)),
            Verdict::Neutral
        );
    }
}
