//! What an attempt's answer is: the [`Outcome`] the retry policy, the
//! ledger and the telemetry read (the [transport](super::Transport)
//! reads its own protocol's answers), and the [`Verdict`] the breaker
//! hears, for every transport alike.

use http::StatusCode;

use super::Plan;
use super::attempt::Tried;
use super::transport::Transport;
use crate::breaker::Verdict;
use crate::clock::WallClock;
use crate::grpc_status::GrpcCode;
use crate::retry::Outcome;

/// An HTTP answer's outcome: its status, and when to come back
/// (`Retry-After`).
#[inline]
pub(crate) fn http_outcome<B>(res: &http::Response<B>, clock: &dyn WallClock) -> Outcome {
    Outcome::from_response(res.status(), res.headers(), clock)
}

/// What the retry policy and the ledger read of an attempt's result.
pub(crate) fn outcome_of<T: Transport>(
    transport: &T,
    tried: &Tried<T::Answer>,
    clock: &dyn WallClock,
) -> Outcome {
    match tried {
        Ok(answer) => transport.classify(answer, clock),
        Err(e) => Outcome::Transport(e.kind),
    }
}

/// What the breaker hears of an attempt whose result read as `outcome`: a
/// `401` the client answers with a token refresh is neutral; a gRPC
/// answer is a failure when its status says the callee is unwell
/// (`UNKNOWN`, `DEADLINE_EXCEEDED`, `INTERNAL`, `UNAVAILABLE`), neutral
/// otherwise (the call reached a healthy callee that said no).
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
