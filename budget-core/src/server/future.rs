use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use crate::context::{RequestContext, Scoped};
use crate::ledger::{Entry, IN_FLIGHT_QUEUE_METRIC, Ledger};
use crate::problem::ProblemBody;
use crate::problem::{Problem, ProblemKind};
use crate::server::in_flight::{InFlightGuard, NoSlot, SlotWait};
use crate::server::response::append_server_timing;
use crate::server::service::answer;
use crate::server::{BodyLimit, BudgetEvent, OnBudgetEvent, SERVER_TIMING};
use crate::telemetry::semconv::{OUTCOME_EXPIRED, OUTCOME_OK, OUTCOME_OVERLOADED, OUTCOME_SHED};
use crate::telemetry::{meter, trace};

pin_project! {
    /// The response future of [`BudgetService`](crate::server::BudgetService):
    /// the inner future raced against the request's deadline, until the
    /// answer's head: the body that follows is not held to it (a gRPC
    /// call's is, by gRPC's rule, through
    /// [`LimitedBody`](crate::server::LimitedBody)), and the in-flight slot
    /// is given back with the head.
    ///
    /// When the deadline comes first the inner future is dropped on the spot
    /// (cancelling its downstream calls) and the answer is `504`. On a tie,
    /// the deadline wins. At the service's `max_in_flight` it first waits
    /// for a slot, the inner future not yet polled (its handler not run),
    /// and answers the refusal itself when none comes in time.
    pub struct ResponseFuture<F, E> {
        #[pin]
        kind: Kind<F, E>,
        // The request's server span; `None` when no subscriber wants it.
        span: Option<tracing::Span>,
        // The answer carries the ledger as `Server-Timing` (`ServerTiming`).
        show_ledger: bool,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, E> {
        // The layer's own answer, its body made in the inner body type
        // when polled.
        Ready { response: Option<Response<Bytes>> },
        // At the in-flight limit: waiting for a slot. The inner future,
        // made by `call`, is parked unpolled (so never pinned, and free to
        // move into `Running`): the handler runs only once a slot comes.
        Queued {
            wait: SlotWait,
            parked: Option<Parked<F, E>>,
            grpc: bool,
        },
        Running {
            // The inner future, run in the request's context, which holds
            // the ledger for the answer.
            #[pin]
            inner: Scoped<F>,
            // The budget's deadline and the budget it arrived with. The
            // context in `inner` has them too; reading them there instead
            // measured 73 instructions more per request (BENCHMARKS.md,
            // "The server layer's cost in instructions").
            deadline: Instant,
            original: Duration,
            // Armed only once the inner future is pending: a handler that
            // answers on its first poll never touches the timer wheel (or
            // allocates it).
            timer: Option<Pin<Box<Sleep>>>,
            on_event: E,
            // The in-flight slot, given back with the head (or when this
            // future is dropped before it).
            slot: Option<InFlightGuard>,
            // A gRPC call: an expired budget is answered the gRPC way.
            grpc: bool,
        },
    }
}

/// What a request waiting for an in-flight slot runs with once it has one.
struct Parked<F, E> {
    cx: RequestContext,
    inner: F,
    on_event: E,
}

impl<F: Future, E> Kind<F, E> {
    /// The inner future running in the request's context, holding `slot`.
    fn running(
        cx: RequestContext,
        inner: F,
        on_event: E,
        slot: Option<InFlightGuard>,
        grpc: bool,
    ) -> Self {
        Kind::Running {
            deadline: cx.budget().deadline(),
            original: cx.budget().original(),
            inner: cx.scope(inner),
            timer: None,
            on_event,
            slot,
            grpc,
        }
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
        show_ledger: bool,
    ) -> Self {
        if let Some(span) = &span {
            trace::record_response(span, response.status(), ledger, outcome);
        }
        Self {
            kind: Kind::Ready {
                response: Some(response),
            },
            span,
            show_ledger,
        }
    }

    pub(crate) fn running(
        cx: RequestContext,
        inner: F,
        on_event: E,
        span: Option<tracing::Span>,
        slot: Option<InFlightGuard>,
        grpc: bool,
        show_ledger: bool,
    ) -> Self
    where
        F: Future,
    {
        Self {
            kind: Kind::running(cx, inner, on_event, slot, grpc),
            span,
            show_ledger,
        }
    }

    /// A request at the in-flight limit: `inner` runs once `wait` gives it
    /// a slot.
    pub(crate) fn queued(
        cx: RequestContext,
        inner: F,
        on_event: E,
        span: Option<tracing::Span>,
        wait: SlotWait,
        grpc: bool,
        show_ledger: bool,
    ) -> Self {
        Self {
            kind: Kind::Queued {
                wait,
                parked: Some(Parked {
                    cx,
                    inner,
                    on_event,
                }),
                grpc,
            },
            span,
            show_ledger,
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
        let show = *this.show_ledger;
        let answer = ready!(poll_kind(this.kind, span, task, show));
        Poll::Ready(if show {
            answer
        } else {
            answer.map(hide_ledger)
        })
    }
}

/// An answer without any `Server-Timing` (`ServerTiming::Never`, or a
/// request without the marker): the layer added none, and what the
/// handler set goes too.
fn hide_ledger<B>(mut res: Response<B>) -> Response<B> {
    res.headers_mut().remove(SERVER_TIMING);
    res
}

/// Polls the request's [`Kind`] to its answer; the ledger goes on a
/// handler's answer only when `show` (the layer's own answers carry it
/// from [`answer`]).
#[inline]
fn poll_kind<F, E, B, Err>(
    mut kind: Pin<&mut Kind<F, E>>,
    span: &Option<tracing::Span>,
    task: &mut Context<'_>,
    show: bool,
) -> Poll<Result<Response<B>, Err>>
where
    F: Future<Output = Result<Response<B>, Err>>,
    E: OnBudgetEvent,
    B: ProblemBody,
{
    let expired = loop {
        match kind.as_mut().project() {
            KindProj::Ready { response } => {
                let response = response.take().expect("polled after completion");
                return Poll::Ready(Ok(response.map(B::from_problem)));
            }
            // Out of line: a request that found a free slot (or no limit)
            // never comes here.
            KindProj::Queued { .. } => {
                if let Some(refused) = ready!(poll_queued(kind.as_mut(), task, span)) {
                    return Poll::Ready(Ok(refused));
                }
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
                // budget the floor admitted, never a zero one; or straight
                // after a slot came, which the queue gives only before
                // `deadline - floor`) it has not passed; the clock is read
                // once the inner future is pending, by the timer (one clock
                // read per request, not two).
                let passed = match timer.as_mut() {
                    Some(sleep) => sleep.as_mut().poll(task).is_ready(),
                    None => false,
                };
                if !passed {
                    if let Poll::Ready(result) = inner.as_mut().poll(task) {
                        let ledger = inner.context().ledger();
                        // A gRPC call's body stays held to the deadline.
                        let grpc_deadline = grpc.then_some(*deadline);
                        return Poll::Ready(result.map(|res| {
                            handler_answer(res, slot, ledger, span, show, grpc_deadline)
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
                let ledger = inner.context().ledger();
                let expired = expired_response::<B, E>(*original, ledger, on_event, *grpc);
                if let Some(span) = span {
                    trace::record_response(span, expired.status(), ledger, OUTCOME_EXPIRED);
                }
                break expired;
            }
        }
    };
    // Drop the inner future now, before answering.
    kind.set(Kind::Ready { response: None });
    Poll::Ready(Ok(expired))
}

/// The handler's answer: its slot learns its status and is given back
/// (the slot covers the work up to the head, not a body that streams
/// after it), it carries the ledger when `show`, and the span records it.
/// A gRPC call's body is held to `grpc_deadline` (gRPC's rule: the
/// deadline covers the whole call); any other body is free of the budget
/// once its head is out (a streaming route has its own
/// [`StreamPolicy`](crate::server::StreamPolicy)).
#[inline]
fn handler_answer<B: ProblemBody>(
    mut res: Response<B>,
    slot: &mut Option<InFlightGuard>,
    ledger: &Ledger,
    span: &Option<tracing::Span>,
    show: bool,
    grpc_deadline: Option<Instant>,
) -> Response<B> {
    if let Some(mut slot) = slot.take() {
        slot.answered(res.status());
    }
    if let Some(deadline) = grpc_deadline {
        res = res.map(|body| body.limited(BodyLimit::grpc_deadline(deadline)));
    }
    if show {
        append_server_timing(&mut res, ledger);
    }
    if let Some(span) = span {
        trace::record_response(span, res.status(), ledger, OUTCOME_OK);
    }
    res
}

/// Polls a request waiting for an in-flight slot: `Ready(None)` once it has
/// one (`kind` is then running, its wait in the ledger), `Ready(Some(answer))`
/// when it was refused (`kind` is then done).
#[cold]
#[inline(never)]
fn poll_queued<F, E, B>(
    mut kind: Pin<&mut Kind<F, E>>,
    task: &mut Context<'_>,
    span: &Option<tracing::Span>,
) -> Poll<Option<Response<B>>>
where
    F: Future,
    E: OnBudgetEvent,
    B: ProblemBody,
{
    let KindProj::Queued { wait, parked, grpc } = kind.as_mut().project() else {
        return Poll::Ready(None);
    };
    let outcome = ready!(wait.as_mut().poll(task));
    let grpc = *grpc;
    let Parked {
        cx,
        inner,
        on_event,
    } = parked.take().expect("polled after completion");
    match outcome {
        Ok(slot) => {
            if !slot.waited().is_zero() {
                cx.ledger()
                    .record(Entry::local(IN_FLIGHT_QUEUE_METRIC, slot.waited(), None));
            }
            kind.set(Kind::running(cx, inner, on_event, Some(slot), grpc));
            Poll::Ready(None)
        }
        Err(no_slot) => {
            // The inner future is dropped unpolled: its handler never runs.
            drop(inner);
            let res = no_slot_response(&no_slot, &cx, &on_event, grpc, span);
            kind.set(Kind::Ready { response: None });
            Poll::Ready(Some(res))
        }
    }
}

/// The answer to a request that got no in-flight slot: `503` when the line
/// stood (overload), `504` when its budget could not cover the wait and the
/// floor (docs/contract.md §3); the wait is in its ledger.
#[cold]
#[inline(never)]
fn no_slot_response<B: ProblemBody, E: OnBudgetEvent>(
    no_slot: &NoSlot,
    cx: &RequestContext,
    on_event: &E,
    grpc: bool,
    span: &Option<tracing::Span>,
) -> Response<B> {
    let (budget, ledger) = (cx.budget(), cx.ledger());
    ledger.record(Entry::local(
        IN_FLIGHT_QUEUE_METRIC,
        no_slot.waited(),
        Some(no_slot.reason().to_owned()),
    ));
    let waited_ms = crate::budget::whole_millis(no_slot.waited());
    let outcome = if no_slot.is_overload() {
        tracing::debug!(
            waited_ms,
            "no in-flight slot in a standing line: overloaded"
        );
        on_event.on_event(&BudgetEvent::Overloaded {
            limit: no_slot.limit(),
        });
        meter::overloaded();
        OUTCOME_OVERLOADED
    } else {
        tracing::debug!(
            waited_ms,
            reason = no_slot.reason(),
            "no in-flight slot within the budget: shed"
        );
        on_event.on_event(&BudgetEvent::Shed {
            budget: budget.original(),
            floor: no_slot.floor(),
        });
        meter::shed();
        OUTCOME_SHED
    };
    let res = answer(&no_slot.problem(budget.remaining()), ledger, grpc);
    if let Some(span) = span {
        trace::record_response(span, res.status(), ledger, outcome);
    }
    res.map(B::from_problem)
}

/// The `504` for a budget that ran out while the handler worked.
fn expired_response<B: ProblemBody, E: OnBudgetEvent>(
    budget: Duration,
    ledger: &Ledger,
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
    answer(&problem, ledger, grpc).map(B::from_problem)
}
