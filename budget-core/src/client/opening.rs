//! A stream's opening as a call: reqwest as a [`Transport`] whose answer
//! is the response head, its body left unread for the caller to stream
//! (docs/streams.md, "Following a stream").

use std::sync::Arc;

use super::budget_client::Inner;
use super::transport::{Failed, Prepared, Reqwest, head_failure};
use crate::clock::WallClock;
use crate::outbound::error::CallError;
use crate::outbound::{AttemptError, AttemptSpec, Call, Head, HeaderRules, Plan, Transport};
use crate::retry::{Outcome, TransportKind};
use crate::stream::StreamResponse;

/// [`Prepared`] requests sent by a `reqwest::Client`, each attempt ending
/// with its answer's head: the engine's deadline, permit and breaker cover
/// the opening and nothing after it.
struct Opening<'a> {
    reqwest: Reqwest<'a>,
}

impl Transport for Opening<'_> {
    type Answer = reqwest::Response;
    type Error = Failed;

    async fn send(&self, spec: AttemptSpec, rules: &HeaderRules) -> Result<Self::Answer, Failed> {
        let req = self.reqwest.request(&spec, rules);
        self.reqwest.http.execute(req).await.map_err(Failed::Head)
    }

    fn classify(&self, answer: &Self::Answer, clock: &dyn WallClock) -> Outcome {
        // The status (and `Retry-After`) as any HTTP answer's: the breaker
        // hears it by `Verdict::from_status`, one rule for calls and
        // streams.
        Outcome::from_response(answer.status(), answer.headers(), clock)
    }

    fn head<'a>(&self, answer: &'a Self::Answer) -> Option<Head<'a>> {
        Some(Head::new(answer.headers(), None))
    }

    fn classify_error(&self, error: Failed) -> AttemptError {
        match error {
            Failed::Head(e) => AttemptError::new(head_failure(&e), e.without_url()),
            // An opening reads no body: neither arises, but a failure is
            // read the same way whatever its stage.
            Failed::Body(e) => AttemptError::new(TransportKind::Body, e.without_url()),
            Failed::TooLarge(limit) => {
                AttemptError::new(TransportKind::Body, crate::client::BodyTooLarge::new(limit))
            }
        }
    }
}

/// One pass of the call engine over reqwest, ending at the answer's head.
pub(crate) async fn engine(
    inner: &Inner,
    plan: Plan,
    prepared: Prepared,
) -> Result<StreamResponse, CallError> {
    let settings = &inner.settings;
    let dep = &settings.dependency;
    let transport = Opening {
        reqwest: Reqwest {
            http: &inner.http,
            prepared: &prepared,
            max_body: settings.max_body,
        },
    };
    let finished = Call {
        dep,
        clock: &*inner.clock,
        plan,
        transport: &transport,
    }
    .run()
    .await?;
    Ok(StreamResponse::new(
        finished.response,
        Arc::clone(&dep.name),
        finished.attempts,
        finished.outcome.retry_after(),
    ))
}
