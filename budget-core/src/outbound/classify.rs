//! What an attempt's answer is: the [`Outcome`] the retry policy, the
//! ledger and the telemetry read, and the [`Verdict`] the breaker hears,
//! for an HTTP answer (its status and `Retry-After`) and a gRPC one (its
//! head's `grpc-status` and `grpc-retry-pushback-ms`) alike.

use http::StatusCode;

use super::attempt::Tried;
use super::{Plan, Rpc};
use crate::breaker::Verdict;
use crate::clock::WallClock;
use crate::grpc::{GRPC_RETRY_PUSHBACK_MS, GRPC_STATUS, GrpcCode, parse_pushback};
use crate::retry::Outcome;

/// An answer the engine can read.
pub(crate) trait Answer {
    /// What the answer says, read as `rpc` answers read.
    fn outcome(&self, rpc: Rpc, clock: &dyn WallClock) -> Outcome;
}

impl<B> Answer for http::Response<B> {
    fn outcome(&self, rpc: Rpc, clock: &dyn WallClock) -> Outcome {
        match rpc {
            Rpc::Http => Outcome::from_response(self.status(), self.headers(), clock),
            Rpc::Grpc => grpc_outcome(self),
        }
    }
}

/// A gRPC answer: a non-`OK` `grpc-status` in its head is the call's
/// status; otherwise the call is under way (its status comes in the
/// trailers) and reads as its HTTP status.
fn grpc_outcome<B>(res: &http::Response<B>) -> Outcome {
    let headers = res.headers();
    let code = headers
        .get(GRPC_STATUS)
        .and_then(|v| std::str::from_utf8(v.as_bytes()).ok()?.parse::<u8>().ok());
    match code {
        Some(code) if code != 0 => Outcome::Grpc {
            code,
            pushback: headers
                .get(GRPC_RETRY_PUSHBACK_MS)
                .and_then(|v| parse_pushback(v.as_bytes())),
        },
        _ => Outcome::status(res.status()),
    }
}

/// What the retry policy and the ledger read of an attempt's result.
pub(crate) fn outcome_of<R: Answer>(tried: &Tried<R>, rpc: Rpc, clock: &dyn WallClock) -> Outcome {
    match tried {
        Ok(answer) => answer.outcome(rpc, clock),
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
    use crate::admission::criticality::Criticality;
    use crate::clock::FixedClock;
    use crate::grpc::Pushback;
    use crate::outbound::{AttemptError, Timing};
    use crate::retry::TransportKind;

    fn plan(refreshes_auth: bool, rpc: Rpc) -> Plan {
        Plan {
            timing: Timing::Fixed(Duration::from_secs(1)),
            ledger: None,
            may_retry: true,
            method: http::Method::POST,
            criticality: Criticality::Default,
            refreshes_auth,
            rpc,
        }
    }

    fn answer(status: u16, headers: &[(&'static str, &'static str)]) -> Tried<http::Response<()>> {
        let mut res = http::Response::new(());
        *res.status_mut() = StatusCode::from_u16(status).unwrap();
        for (name, value) in headers {
            res.headers_mut().insert(*name, value.parse().unwrap());
        }
        Ok(res)
    }

    fn read(tried: &Tried<http::Response<()>>, rpc: Rpc) -> (String, Verdict) {
        let clock = FixedClock::new(SystemTime::UNIX_EPOCH);
        let outcome = outcome_of(tried, rpc, &clock);
        (
            outcome.to_string(),
            verdict_of(tried, &outcome, &plan(false, rpc)),
        )
    }

    #[test]
    fn an_http_answer_is_its_status_with_its_retry_after() {
        let clock = FixedClock::new(SystemTime::UNIX_EPOCH);
        let tried = answer(503, &[("retry-after", "2")]);
        let outcome = outcome_of(&tried, Rpc::Http, &clock);
        assert_eq!(outcome.retry_after(), Some(Duration::from_secs(2)));
        assert_eq!(read(&tried, Rpc::Http), ("503".into(), Verdict::Failure));
        assert_eq!(
            read(&answer(404, &[]), Rpc::Http),
            ("404".into(), Verdict::Neutral)
        );
        // grpc-status means nothing on a plain HTTP call.
        assert_eq!(
            read(&answer(200, &[("grpc-status", "14")]), Rpc::Http).0,
            "200"
        );
    }

    #[test]
    fn a_grpc_answer_is_its_head_s_status_with_its_pushback() {
        let clock = FixedClock::new(SystemTime::UNIX_EPOCH);
        let tried = answer(
            200,
            &[("grpc-status", "14"), ("grpc-retry-pushback-ms", "20")],
        );
        assert_eq!(
            outcome_of(&tried, Rpc::Grpc, &clock),
            Outcome::Grpc {
                code: 14,
                pushback: Some(Pushback::After(Duration::from_millis(20)))
            }
        );
        assert_eq!(
            read(&tried, Rpc::Grpc),
            ("grpc-14".into(), Verdict::Failure)
        );
        for unwell in ["2", "4", "13"] {
            let tried = answer(200, &[("grpc-status", unwell)]);
            assert_eq!(read(&tried, Rpc::Grpc).1, Verdict::Failure, "{unwell}");
        }
        for neutral in ["3", "5", "12"] {
            let tried = answer(200, &[("grpc-status", neutral)]);
            assert_eq!(read(&tried, Rpc::Grpc).1, Verdict::Neutral, "{neutral}");
        }
        // Messages under way, or OK in the head: the call's HTTP status.
        assert_eq!(
            read(&answer(200, &[]), Rpc::Grpc),
            ("200".into(), Verdict::Success)
        );
        assert_eq!(
            read(&answer(200, &[("grpc-status", "0")]), Rpc::Grpc),
            ("200".into(), Verdict::Success)
        );
    }

    #[test]
    fn a_refreshed_401_is_neutral_and_a_failed_attempt_is_its_own_verdict() {
        let clock = FixedClock::new(SystemTime::UNIX_EPOCH);
        let tried = answer(401, &[]);
        let outcome = outcome_of(&tried, Rpc::Http, &clock);
        assert_eq!(
            verdict_of(&tried, &outcome, &plan(true, Rpc::Http)),
            Verdict::Neutral
        );
        assert_eq!(
            verdict_of(&tried, &outcome, &plan(false, Rpc::Http)),
            Verdict::Failure
        );
        let failed: Tried<http::Response<()>> = Err(AttemptError::too_large(1));
        let outcome = outcome_of(&failed, Rpc::Http, &clock);
        assert_eq!(outcome, Outcome::Transport(TransportKind::Body));
        assert_eq!(
            verdict_of(&failed, &outcome, &plan(false, Rpc::Http)),
            Verdict::Neutral
        );
    }
}
