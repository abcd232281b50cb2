//! A tonic channel as a [`Transport`]: one attempt of a call, its headers
//! stamped (`grpc-timeout` is the protocol's deadline), its answer's head
//! read as gRPC reads it, and the channel's own error kept to give back to
//! the caller as it came.

use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use http::{Request, Response};
use tokio::time::Instant;
use tower_service::Service;

use crate::clock::WallClock;
use crate::grpc::channels::set_origin;
use crate::grpc_status::{GRPC_RETRY_PUSHBACK_MS, GRPC_STATUS, parse_pushback};
use crate::outbound::{AttemptError, AttemptSpec, Head, HeaderRules, Transport, http_outcome};
use crate::problem::ProblemBody;
use crate::retry::{Outcome, TransportKind};

/// The body of a call: sent once as it came, or buffered to be sent again.
pub(crate) enum Sent<B> {
    Once(Mutex<Option<B>>),
    Buffered(Bytes),
}

impl<B: ProblemBody> Sent<B> {
    /// The body for the next attempt: the buffered bytes again, or the
    /// one body the first time.
    fn next(&self) -> Option<B> {
        match self {
            Sent::Once(body) => body.lock().unwrap_or_else(PoisonError::into_inner).take(),
            Sent::Buffered(bytes) => Some(B::from_problem(bytes.clone())),
        }
    }
}

/// A call's attempts through a clone of `channel` each.
pub(crate) struct Channel<'a, S: Service<Request<B>>, B> {
    /// Behind a lock only to be cloned from by attempts on other threads
    /// (a channel need not be `Sync`).
    pub(crate) channel: Mutex<S>,
    pub(crate) parts: &'a http::request::Parts,
    pub(crate) body: &'a Sent<B>,
    /// Balanced over endpoints: each attempt's URI gets its endpoint's
    /// origin (this scheme when the endpoint keeps the URL's).
    pub(crate) balanced: Option<&'a str>,
    /// The channel's own error of the last attempt that failed, given
    /// back to the caller as it came.
    pub(crate) failed: Mutex<Option<S::Error>>,
}

/// How an attempt through the channel failed.
pub(crate) enum Failed<E> {
    /// Before it was sent (no body left to send, a bad origin).
    Unsent(&'static str),
    /// The channel's error; `timed_out` when it came past the budget sent
    /// (tonic's own timeout on that `grpc-timeout`).
    Channel { error: E, timed_out: bool },
}

impl<S, B, RB> Transport for Channel<'_, S, B>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send,
    S::Future: Send,
    S::Error: Send,
    B: ProblemBody + Send,
    RB: Send,
{
    type Answer = Response<RB>;
    type Error = Failed<S::Error>;

    async fn send(
        &self,
        spec: AttemptSpec,
        rules: &HeaderRules,
    ) -> Result<Response<RB>, Self::Error> {
        let mut inner = self
            .channel
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // Always there: a body sent once is never sent again (its call may
        // not be retried).
        let Some(body) = self.body.next() else {
            return Err(Failed::Unsent("no request body to send"));
        };
        let mut req = Request::from_parts(self.parts.clone(), body);
        if let Some(scheme) = self.balanced
            && set_origin(&mut req, &spec.endpoint.origin(scheme)).is_err()
        {
            return Err(Failed::Unsent("the endpoint's origin is not a URI"));
        }
        // The attempt's span is current here (the engine instruments this
        // future with it): its trace context, or the caller's.
        self.stamp(req.headers_mut(), rules, spec.budget);
        let started = Instant::now();
        let answered = match std::future::poll_fn(|task| inner.poll_ready(task)).await {
            Ok(()) => inner.call(req).await,
            Err(e) => Err(e),
        };
        answered.map_err(|error| Failed::Channel {
            error,
            // Past the budget sent, tonic's channel times the call out on
            // that `grpc-timeout` at the same instant as the engine would,
            // and calls that `Cancelled`: it is the budget running out.
            timed_out: spec.budget.is_some_and(|b| started.elapsed() >= b),
        })
    }

    fn classify(&self, answer: &Response<RB>, clock: &dyn WallClock) -> Outcome {
        outcome(answer, clock)
    }

    fn head<'a>(&self, answer: &'a Response<RB>) -> Option<Head<'a>> {
        Some(Head::new(answer.headers(), None))
    }

    fn classify_error(&self, failed: Self::Error) -> AttemptError {
        match failed {
            // Ours, not the endpoint's.
            Failed::Unsent(why) => AttemptError::neutral(TransportKind::Other, why),
            Failed::Channel { error, timed_out } => {
                *self.failed.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
                let kind = if timed_out {
                    TransportKind::Timeout
                } else {
                    TransportKind::Reset
                };
                AttemptError::new(kind, "the channel failed")
            }
        }
    }
}

/// A gRPC answer: a non-`OK` `grpc-status` in its head is the call's
/// status (with its `grpc-retry-pushback-ms`); otherwise the call is under
/// way (its status comes in the trailers) and reads as an HTTP answer (its
/// status, and a proxy's `Retry-After`).
fn outcome<B>(res: &Response<B>, clock: &dyn WallClock) -> Outcome {
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
        _ => http_outcome(res, clock),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::FixedClock;
    use crate::grpc::Pushback;

    fn outcome(res: &Response<()>) -> Outcome {
        super::outcome(res, &FixedClock::new(std::time::SystemTime::UNIX_EPOCH))
    }

    fn answer(headers: &[(&'static str, &'static str)]) -> Response<()> {
        let mut res = Response::new(());
        for (name, value) in headers {
            res.headers_mut().insert(*name, value.parse().unwrap());
        }
        res
    }

    #[test]
    fn a_grpc_answer_is_its_head_s_status_with_its_pushback() {
        let res = answer(&[("grpc-status", "14"), ("grpc-retry-pushback-ms", "20")]);
        assert_eq!(
            outcome(&res),
            Outcome::Grpc {
                code: 14,
                pushback: Some(Pushback::After(Duration::from_millis(20)))
            }
        );
        assert_eq!(outcome(&res).to_string(), "grpc-14");
        // Messages under way, or OK in the head: the call's HTTP status.
        assert_eq!(outcome(&answer(&[])).to_string(), "200");
        assert_eq!(outcome(&answer(&[("grpc-status", "0")])).to_string(), "200");
    }
}
