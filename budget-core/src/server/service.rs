use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use tokio::time::Instant;
use tower_service::Service;

use crate::admission::criticality::Criticality;
use crate::budget::Budget;
use crate::context::RequestContext;
use crate::floor::BelowFloor;
use crate::grpc::grpc_answer;
use crate::header::{
    Inbound, InvalidHeader, Resolved, X_ENVOY_EXPECTED_RQ_TIMEOUT_MS, envoy_cut_note,
};
use crate::ledger::{Entry, INGRESS_METRIC, Ledger};
use crate::problem::ProblemBody;
use crate::problem::{Problem, ProblemKind};
use crate::server::future::ResponseFuture;
use crate::server::in_flight::{InFlight, SlotWait};
use crate::server::ingress::Scanned;
use crate::server::layer::Settings;
use crate::server::response::{append_server_timing, problem_answer};
use crate::server::{BudgetEvent, OnBudgetEvent};
use crate::telemetry::semconv::{OUTCOME_MALFORMED, OUTCOME_SHED};
use crate::telemetry::{meter, trace};

/// Gives every request a budget; see the [module docs](crate::server).
///
/// Made by [`BudgetLayer`](crate::server::BudgetLayer).
///
/// # Example
///
/// ```
/// use std::convert::Infallible;
/// use axum::body::Body;
/// use budget_core::server::ServerConfig;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let svc = ServerConfig::default().layer().unwrap().layer(service_fn(|_req: http::Request<Body>| async {
///     Ok::<_, Infallible>(http::Response::new(Body::from("ok")))
/// }));
/// let req = http::Request::builder().header("request-budget-ms", "-1").body(Body::empty()).unwrap();
/// let res = svc.oneshot(req).await.unwrap();
/// assert_eq!(res.status(), 400);
/// assert!(res.headers().contains_key("server-timing"));
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct BudgetService<S, E = ()> {
    inner: S,
    settings: Arc<Settings>,
    on_event: E,
}

impl<S, E> BudgetService<S, E> {
    pub(crate) fn from_parts(inner: S, settings: Arc<Settings>, on_event: E) -> Self {
        Self {
            inner,
            settings,
            on_event,
        }
    }

    /// The wrapped service.
    ///
    /// ```
    /// # use budget_core::server::ServerConfig;
    /// # use tower::Layer;
    /// let svc = ServerConfig::default().layer().unwrap().layer(7u8);
    /// assert_eq!(*svc.get_ref(), 7);
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    ///
    /// ```
    /// # use budget_core::server::ServerConfig;
    /// # use tower::Layer;
    /// let mut svc = ServerConfig::default().layer().unwrap().layer(7u8);
    /// *svc.get_mut() = 8;
    /// assert_eq!(svc.into_inner(), 8);
    /// ```
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the service.
    ///
    /// ```
    /// # use budget_core::server::ServerConfig;
    /// # use tower::Layer;
    /// assert_eq!(ServerConfig::default().layer().unwrap().layer(7u8).into_inner(), 7);
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, E, ReqBody, ResBody> Service<Request<ReqBody>> for BudgetService<S, E>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    E: OnBudgetEvent,
    ResBody: ProblemBody,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, E>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let start = Instant::now();
        let span = trace::server_span(&req, self.settings.floor.get());
        let mut scanned = Scanned::default();
        let show = self.settings.server_timing.shows(req.headers());
        let mut ignored = None;
        let resolved = if self.settings.trust_inbound {
            match self.settings.inbound.resolve_with(
                req.headers(),
                |name, value| scanned.note(name, value),
                |invalid| {
                    ignored.get_or_insert(invalid);
                },
            ) {
                Ok(resolved) => resolved,
                Err(invalid) => return self.malformed(&invalid, span, scanned.grpc, show),
            }
        } else {
            untrusted(&self.settings.inbound, req.headers(), &mut scanned)
        };
        let budget = Budget::starting_at(start, resolved.budget);
        let ledger = Ledger::for_ingress(self.settings.ledger, resolved.budget);
        if ignored.is_some() || resolved.source.as_ref() == Some(&X_ENVOY_EXPECTED_RQ_TIMEOUT_MS) {
            ingress_notes(&ledger, req.headers(), &resolved, ignored);
        }
        meter::ingress(resolved.budget);
        if let Some(span) = &span {
            trace::record_ingress(span, resolved.budget);
        }

        // At its start a budget's remaining is its duration.
        if let Err(below) = self.settings.floor.check(resolved.budget) {
            return self.shed(below, resolved.budget, &ledger, span, scanned.grpc, show);
        }

        let criticality = Criticality::from_header(scanned.criticality);
        if criticality.unknown {
            meter::unknown_criticality();
        }
        // At the limit the request waits in its response future, until
        // only the floor is left (`in_flight.rs`).
        let mut wait = None;
        let guard = match &self.settings.in_flight {
            None => None,
            Some(in_flight) => match in_flight.try_acquire() {
                Some(guard) => Some(guard),
                None => {
                    wait = Some(self.wait_for_slot(in_flight, &budget, criticality.criticality));
                    None
                }
            },
        };

        let cx = RequestContext::for_request(
            budget,
            ledger,
            self.settings.reserve,
            criticality.criticality,
            (scanned.traceparent, scanned.tracestate),
        );
        let inner = &mut self.inner;
        // The context is current where the work is, while the inner future
        // is polled (the module docs): lending it to `call` as well would
        // mean a clone, and with it a shared (allocated) ledger.
        let grpc = scanned.grpc;
        let fut = match &span {
            Some(span) => span.in_scope(|| inner.call(req)),
            None => inner.call(req),
        };
        let on_event = self.on_event.clone();
        match wait {
            None => ResponseFuture::running(cx, fut, on_event, span, guard, grpc, show),
            Some(wait) => ResponseFuture::queued(cx, fut, on_event, span, wait, grpc, show),
        }
    }
}

// The layer's own answers, out of line: kept out of `call`, the path every
// request takes stays small (BENCHMARKS.md, "The server layer's cost in
// instructions").
impl<S, E> BudgetService<S, E>
where
    E: OnBudgetEvent,
{
    /// `400`: a budget header that does not parse.
    #[cold]
    #[inline(never)]
    fn malformed<F>(
        &self,
        invalid: &InvalidHeader,
        span: Option<tracing::Span>,
        grpc: bool,
        show: bool,
    ) -> ResponseFuture<F, E> {
        tracing::debug!(error = %invalid, "malformed budget header");
        self.on_event
            .on_event(&BudgetEvent::Malformed { error: invalid });
        meter::malformed();
        let ledger = Ledger::starting_with(
            self.settings.ledger,
            Entry::skip(INGRESS_METRIC, format!("rejected: {invalid}")),
        );
        let problem = Problem::new(ProblemKind::MalformedBudget, invalid.to_string())
            .with_header(invalid.header().as_str());
        ResponseFuture::ready(
            answer(&problem, &ledger, grpc),
            &ledger,
            span,
            OUTCOME_MALFORMED,
            show,
        )
    }

    /// `504` without starting: a budget below the ingress floor.
    #[cold]
    #[inline(never)]
    fn shed<F>(
        &self,
        below: BelowFloor,
        budget: Duration,
        ledger: &Ledger,
        span: Option<tracing::Span>,
        grpc: bool,
        show: bool,
    ) -> ResponseFuture<F, E> {
        let floor = self.settings.floor.get();
        tracing::debug!(%below, "budget below the ingress floor: shed");
        self.on_event.on_event(&BudgetEvent::Shed { budget, floor });
        meter::shed();
        let problem = Problem::new(ProblemKind::BelowFloor, below.not_started())
            .with_remaining(below.remaining())
            .with_floor(below.floor());
        let res = answer(&problem, ledger, grpc);
        ResponseFuture::ready(res, ledger, span, OUTCOME_SHED, show)
    }

    /// The wait for an in-flight slot of a request that found none free:
    /// until `give_up_at`, the last instant at which what `budget` has
    /// left still covers the floor.
    #[cold]
    #[inline(never)]
    fn wait_for_slot(
        &self,
        in_flight: &Arc<InFlight>,
        budget: &Budget,
        criticality: Criticality,
    ) -> SlotWait {
        let floor = self.settings.floor.get();
        let give_up_at = budget
            .deadline()
            .checked_sub(floor)
            .unwrap_or_else(Instant::now);
        in_flight.wait(
            give_up_at,
            criticality,
            floor,
            self.settings.overload_retry_after,
        )
    }
}

/// The ingress findings beside the budget (docs/contract.md §4): a
/// malformed budget header ignored (`on_malformed = "use-default"`), and
/// the caller's budget cut by Envoy's route timeout
/// (`x-envoy-expected-rq-timeout-ms`). Out of line: most requests have
/// neither.
#[cold]
#[inline(never)]
fn ingress_notes(
    ledger: &Ledger,
    headers: &HeaderMap,
    resolved: &Resolved,
    ignored: Option<InvalidHeader>,
) {
    if let Some(invalid) = ignored {
        ledger.record(Entry::skip(INGRESS_METRIC, format!("ignored: {invalid}")));
    }
    if let Some(note) = envoy_cut_note(headers, resolved) {
        ledger.record(Entry::skip(INGRESS_METRIC, note));
    }
}

/// What a request of a caller not trusted with its budget
/// ([`BudgetLayer::trust_inbound`](crate::server::BudgetLayer::trust_inbound))
/// works with: the default budget and criticality, whatever its headers
/// say; the other headers the layer reads are noted in `scanned`. Out of
/// line, so that the trusting path of `call` stays small.
#[inline(never)]
fn untrusted<'a>(inbound: &Inbound, headers: &'a HeaderMap, scanned: &mut Scanned<'a>) -> Resolved {
    for (name, value) in headers {
        scanned.note(name, value);
    }
    scanned.criticality = None;
    Resolved {
        budget: inbound.default(),
        source: None,
        clamped: false,
    }
}

/// The layer's own answer to a request it does not pass on: `problem`
/// (the gRPC way for a gRPC call) with the request's `ledger`, its body
/// made later in the inner service's body type.
pub(crate) fn answer(problem: &Problem, ledger: &Ledger, grpc: bool) -> Response<Bytes> {
    let mut res = if grpc {
        grpc_answer(problem)
    } else {
        problem_answer(problem)
    };
    append_server_timing(&mut res, ledger);
    res
}
