use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use pin_project_lite::pin_project;
use tokio::task::futures::TaskLocalFuture;
use tokio::time::{Instant, Sleep};

use crate::context::RequestContext;
use crate::ledger::Ledger;
use crate::problem::{Problem, ProblemKind};
use crate::server::in_flight::InFlightGuard;
use crate::server::response::append_server_timing;
use crate::server::service::answer;
use crate::server::{BudgetEvent, OnBudgetEvent, ProblemBody};
use crate::telemetry::semconv::{OUTCOME_EXPIRED, OUTCOME_OK};
use crate::telemetry::{meter, trace};

pin_project! {
    /// The response future of [`BudgetService`](crate::server::BudgetService):
    /// the inner future raced against the request's deadline.
    ///
    /// When the deadline comes first the inner future is dropped on the spot
    /// (cancelling its downstream calls) and the answer is `504`. On a tie,
    /// the deadline wins.
    pub struct ResponseFuture<F, E> {
        #[pin]
        kind: Kind<F, E>,
        // The request's server span; `None` when no subscriber wants it.
        span: Option<tracing::Span>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, E> {
        // The layer's own answer, its body made in the inner body type
        // when polled.
        Ready { response: Option<Response<Bytes>> },
        Running {
            // The inner future, run in the request's context; the context
            // (its ledger) is taken back out of it for the answer.
            #[pin]
            inner: TaskLocalFuture<RequestContext, F>,
            // The budget's deadline and the budget it arrived with (the
            // context's whole `Budget` is in `inner`, out of reach until
            // taken back).
            deadline: Instant,
            original: Duration,
            // Armed only once the inner future is pending: a handler that
            // answers on its first poll never touches the timer wheel (or
            // allocates it).
            timer: Option<Pin<Box<Sleep>>>,
            on_event: E,
            // The in-flight slot, held until this future is done or dropped.
            slot: Option<InFlightGuard>,
            // A gRPC call: an expired budget is answered the gRPC way.
            grpc: bool,
        },
    }
}

impl<F, E> ResponseFuture<F, E> {
    /// An answer given without calling the inner service; `outcome` is
    /// the span's `budget.outcome`.
    pub(crate) fn ready(
        response: Response<Bytes>,
        ledger: &Ledger,
        span: Option<tracing::Span>,
        outcome: &'static str,
    ) -> Self {
        if let Some(span) = &span {
            trace::record_response(span, response.status(), ledger, outcome);
        }
        Self {
            kind: Kind::Ready {
                response: Some(response),
            },
            span,
        }
    }

    pub(crate) fn running(
        cx: RequestContext,
        inner: F,
        on_event: E,
        span: Option<tracing::Span>,
        slot: Option<InFlightGuard>,
        grpc: bool,
    ) -> Self
    where
        F: Future,
    {
        Self {
            kind: Kind::Running {
                deadline: cx.budget().deadline(),
                original: cx.budget().original(),
                inner: cx.scope(inner),
                timer: None,
                on_event,
                slot,
                grpc,
            },
            span,
        }
    }
}

impl<F, E, B, Err> Future for ResponseFuture<F, E>
where
    F: Future<Output = Result<Response<B>, Err>>,
    E: OnBudgetEvent,
    B: ProblemBody,
{
    type Output = Result<Response<B>, Err>;

    fn poll(self: Pin<&mut Self>, task: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let span: &Option<tracing::Span> = this.span;
        let _entered = span.as_ref().map(tracing::Span::enter);
        let mut kind = this.kind;
        let expired = match kind.as_mut().project() {
            KindProj::Ready { response } => {
                let response = response.take().expect("polled after completion");
                return Poll::Ready(Ok(response.map(B::from_problem)));
            }
            KindProj::Running {
                mut inner,
                deadline,
                original,
                timer,
                on_event,
                slot,
                grpc,
            } => {
                // The deadline is checked first: on a tie, it wins. Before
                // the timer is armed (the first poll, which comes straight
                // after `call` started the budget, and `call` runs only a
                // budget the floor admitted, never a zero one) it has not
                // passed; the clock is read once the inner future is
                // pending, by the timer (one clock read per request, not
                // two).
                let passed = match timer.as_mut() {
                    Some(sleep) => sleep.as_mut().poll(task).is_ready(),
                    None => false,
                };
                if !passed {
                    if let Poll::Ready(result) = inner.as_mut().poll(task) {
                        let cx = inner.take_value();
                        return Poll::Ready(result.map(|res| {
                            if let Some(slot) = slot.as_mut() {
                                slot.answered(res.status());
                            }
                            let mut res = res;
                            if let Some(cx) = &cx {
                                append_server_timing(&mut res, cx.ledger());
                                if let Some(span) = span {
                                    trace::record_response(
                                        span,
                                        res.status(),
                                        cx.ledger(),
                                        OUTCOME_OK,
                                    );
                                }
                            }
                            res
                        }));
                    }
                    let sleep =
                        timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(*deadline)));
                    // Registers the waker; a deadline that passed meanwhile
                    // fires on the spot.
                    if sleep.as_mut().poll(task).is_pending() {
                        return Poll::Pending;
                    }
                }
                let cx = inner.take_value();
                let ledger = cx.as_ref().map(RequestContext::ledger);
                let expired = expired_response::<B, E>(*original, ledger, on_event, *grpc);
                if let Some(span) = span {
                    trace::record_response(
                        span,
                        expired.status(),
                        ledger.unwrap_or(&Ledger::new()),
                        OUTCOME_EXPIRED,
                    );
                }
                expired
            }
        };
        // Drop the inner future now, before answering.
        kind.set(Kind::Ready { response: None });
        Poll::Ready(Ok(expired))
    }
}

/// The `504` for a budget that ran out while the handler worked.
fn expired_response<B: ProblemBody, E: OnBudgetEvent>(
    budget: Duration,
    ledger: Option<&Ledger>,
    on_event: &E,
    grpc: bool,
) -> Response<B> {
    tracing::debug!(
        budget_ms = crate::budget::whole_millis(budget),
        "budget expired in the handler"
    );
    meter::expired();
    on_event.on_event(&BudgetEvent::Expired { budget });
    let problem = Problem::new(
        ProblemKind::Expired,
        format!(
            "the budget of {}ms ran out before the answer was ready",
            budget.as_millis()
        ),
    )
    .with_remaining(std::time::Duration::ZERO);
    answer(&problem, ledger.unwrap_or(&Ledger::new()), grpc).map(B::from_problem)
}
