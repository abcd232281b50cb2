//! The current request's budget, reachable from any code running inside it.
//!
//! The server layer polls each request's handler (the inner service's
//! future) inside a scope holding a [`RequestContext`]: the budget, the
//! ledger and the per-hop reserve. The client side reads it with [`current`], so a handler can make
//! budget-aware downstream calls without threading the budget through.
//!
//! The context is current only while a future in its scope is polled, as
//! with a tokio task-local: it does not cross `tokio::spawn`, so code that
//! spawns must carry it into the new task with [`RequestContext::scope`].
//! Unlike a task-local, the scope does not move the context into a
//! thread-local on every poll: it lends it, by reference, to a scoped
//! thread-local (the `scoped-tls` crate), so a poll costs a pointer's swap
//! rather than two moves of the whole context (BENCHMARKS.md, "The server
//! layer's cost in instructions").
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::{context, Budget};
//! use budget_core::context::RequestContext;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! assert!(context::current().is_none());
//! let cx = RequestContext::new(Budget::new(Duration::from_secs(2)));
//! cx.scope(async {
//!     let inner = context::current().expect("inside the scope");
//!     assert!(inner.budget().remaining() <= Duration::from_secs(2));
//! })
//! .await;
//! # }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;

use crate::admission::criticality::Criticality;
use crate::budget::Budget;
use crate::ledger::Ledger;

scoped_tls::scoped_thread_local!(
    /// The context of the future being polled, lent by its [`Scoped`].
    static CURRENT: RequestContext
);

/// The W3C header of the parent span (read by the server layer, carried
/// by outbound calls).
#[cfg(any(outbound, feature = "server"))]
pub(crate) const TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");
/// The W3C header of vendor trace state.
#[cfg(any(outbound, feature = "server"))]
pub(crate) const TRACESTATE: http::HeaderName = http::HeaderName::from_static("tracestate");

/// What a request carries: its budget, its ledger and the reserve each
/// outbound call holds back for this service's own reply.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::{Budget, context::RequestContext};
///
/// let cx = RequestContext::new(Budget::new(Duration::from_secs(1)))
///     .with_reserve(Duration::from_millis(20));
/// assert_eq!(cx.reserve(), Duration::from_millis(20));
/// ```
#[derive(Clone, Debug)]
pub struct RequestContext {
    budget: Budget,
    ledger: Ledger,
    reserve: Duration,
    criticality: Criticality,
    /// The caller's W3C trace context, as it came: passed on unchanged by
    /// outbound calls that have no trace context of their own (no
    /// OpenTelemetry layer, or spans off), so one trace crosses this hop
    /// whether or not it exports. Without a feature that makes outbound
    /// calls nothing reads it, and nothing is kept.
    #[cfg(outbound)]
    inbound_trace: Option<Box<InboundTrace>>,
}

/// The `traceparent` and `tracestate` a request arrived with (read by the
/// client side only).
#[cfg(outbound)]
#[derive(Clone, Debug)]
pub(crate) struct InboundTrace {
    pub(crate) traceparent: http::HeaderValue,
    pub(crate) tracestate: Option<http::HeaderValue>,
}

/// The context's copy of a caller's trace context. Boxed: most requests
/// carry none, and the context is cloned and moved with every request.
#[cfg(outbound)]
#[inline]
fn inbound_trace(
    traceparent: Option<&http::HeaderValue>,
    tracestate: Option<&http::HeaderValue>,
) -> Option<Box<InboundTrace>> {
    traceparent.map(|traceparent| boxed_trace(traceparent, tracestate))
}

/// The boxed copy [`inbound_trace`] makes when there is a trace context.
#[cfg(outbound)]
#[inline(never)]
fn boxed_trace(
    traceparent: &http::HeaderValue,
    tracestate: Option<&http::HeaderValue>,
) -> Box<InboundTrace> {
    Box::new(InboundTrace {
        traceparent: traceparent.clone(),
        tracestate: tracestate.cloned(),
    })
}

impl RequestContext {
    /// A context with `budget`, a fresh ledger and no reserve.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, context::RequestContext};
    /// let cx = RequestContext::new(Budget::new(Duration::from_secs(1)));
    /// assert!(cx.ledger().is_empty());
    /// ```
    pub fn new(budget: Budget) -> Self {
        Self::with_budget_and_ledger(budget, Ledger::new())
    }

    /// A context with `budget` writing to `ledger`, no reserve: what
    /// `new(budget).with_ledger(ledger)` gives, without making (and
    /// dropping) a fresh ledger first. The server layer builds every
    /// request's context with it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, context::RequestContext, ledger::Ledger};
    /// let ledger = Ledger::new();
    /// let cx = RequestContext::with_budget_and_ledger(Budget::new(Duration::from_secs(1)), ledger.clone());
    /// cx.ledger().record(budget_core::ledger::Entry::skip("x", "skipped"));
    /// assert!(!ledger.is_empty());
    /// ```
    pub fn with_budget_and_ledger(budget: Budget, ledger: Ledger) -> Self {
        Self {
            budget,
            ledger,
            reserve: Duration::ZERO,
            criticality: Criticality::Default,
            #[cfg(outbound)]
            inbound_trace: None,
        }
    }

    /// Every field at once, as the server layer has them: one move rather
    /// than one per builder.
    #[cfg(feature = "server")]
    #[inline]
    pub(crate) fn for_request(
        budget: Budget,
        ledger: Ledger,
        reserve: Duration,
        criticality: Criticality,
        trace: (Option<&http::HeaderValue>, Option<&http::HeaderValue>),
    ) -> Self {
        // Kept for outbound calls only: without them nothing reads it.
        #[cfg(not(outbound))]
        let _ = trace;
        Self {
            budget,
            ledger,
            reserve,
            criticality,
            #[cfg(outbound)]
            inbound_trace: inbound_trace(trace.0, trace.1),
        }
    }

    /// The same context carrying `headers`' W3C trace context
    /// (`traceparent`, `tracestate`), if any, for outbound calls to pass
    /// on when they have none of their own. The server layer calls it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, context::RequestContext};
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse().unwrap());
    /// let cx = RequestContext::new(Budget::new(Duration::from_secs(1))).with_inbound_trace(&headers);
    /// # let _ = cx;
    /// ```
    pub fn with_inbound_trace(mut self, headers: &http::HeaderMap) -> Self {
        self.keep_inbound_trace(headers);
        self
    }

    /// Keeps `headers`' trace context for outbound calls; without a
    /// feature that makes them, nothing would read it, and nothing is kept.
    #[inline]
    fn keep_inbound_trace(&mut self, headers: &http::HeaderMap) {
        #[cfg(outbound)]
        {
            self.inbound_trace = inbound_trace(headers.get(TRACEPARENT), headers.get(TRACESTATE));
        }
        #[cfg(not(outbound))]
        let _ = headers;
    }

    /// The caller's trace context, for [`with_inbound_trace`](Self::with_inbound_trace).
    #[cfg(outbound)]
    pub(crate) fn inbound_trace(&self) -> Option<&InboundTrace> {
        self.inbound_trace.as_deref()
    }

    /// The same context with the request's `criticality` (read at ingress
    /// from `request-criticality`, forwarded on every outbound call, and
    /// the order in which the client's permit queues serve and refuse).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, admission::criticality::Criticality, context::RequestContext};
    /// let cx = RequestContext::new(Budget::new(Duration::from_secs(1))).with_criticality(Criticality::Critical);
    /// assert_eq!(cx.criticality(), Criticality::Critical);
    /// ```
    pub fn with_criticality(mut self, criticality: Criticality) -> Self {
        self.criticality = criticality;
        self
    }

    /// The request's criticality (`default` unless the caller said).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, admission::criticality::Criticality, context::RequestContext};
    /// assert_eq!(RequestContext::new(Budget::new(Duration::from_secs(1))).criticality(), Criticality::Default);
    /// ```
    pub fn criticality(&self) -> Criticality {
        self.criticality
    }

    /// The same context writing to `ledger`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, context::RequestContext, ledger::Ledger};
    /// let ledger = Ledger::new();
    /// let cx = RequestContext::new(Budget::new(Duration::from_secs(1))).with_ledger(ledger.clone());
    /// cx.ledger().record(budget_core::ledger::Entry::skip("x", "skipped"));
    /// assert!(!ledger.is_empty());
    /// ```
    pub fn with_ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = ledger;
        self
    }

    /// The same context with a per-hop `reserve`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, context::RequestContext};
    /// let cx = RequestContext::new(Budget::new(Duration::from_secs(1))).with_reserve(Duration::from_millis(5));
    /// assert_eq!(cx.reserve(), Duration::from_millis(5));
    /// ```
    pub fn with_reserve(mut self, reserve: Duration) -> Self {
        self.reserve = reserve;
        self
    }

    /// The request's budget.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, context::RequestContext};
    /// let b = Budget::new(Duration::from_secs(1));
    /// assert_eq!(RequestContext::new(b).budget(), b);
    /// ```
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// The request's ledger (clones share entries).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, context::RequestContext};
    /// let cx = RequestContext::new(Budget::new(Duration::from_secs(1)));
    /// assert!(cx.ledger().is_empty());
    /// ```
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The per-hop reserve every outbound call holds back.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, context::RequestContext};
    /// assert!(RequestContext::new(Budget::new(Duration::from_secs(1))).reserve().is_zero());
    /// ```
    pub fn reserve(&self) -> Duration {
        self.reserve
    }

    /// Runs `fut` with this context as the current one.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, context::{self, RequestContext}};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let cx = RequestContext::new(Budget::new(Duration::from_secs(1)));
    /// let seen = cx.scope(async { context::current().is_some() }).await;
    /// assert!(seen);
    /// # }
    /// ```
    pub fn scope<F: Future>(self, fut: F) -> Scoped<F> {
        Scoped {
            cx: self,
            future: Some(fut),
        }
    }

    /// Runs the synchronous `f` with this context as the current one (for
    /// the work a tower service does in `call` before its future is polled).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, context::{self, RequestContext}};
    /// let cx = RequestContext::new(Budget::new(Duration::from_secs(1)));
    /// assert!(cx.sync_scope(|| context::current().is_some()));
    /// ```
    pub fn sync_scope<R>(self, f: impl FnOnce() -> R) -> R {
        CURRENT.set(&self, f)
    }
}

pin_project! {
    /// The future of [`RequestContext::scope`]: polls `F` with the context
    /// current, and drops `F` inside the scope too (once it is done, or
    /// when the scope is dropped first), as tokio's `TaskLocalFuture` does.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, context::{self, RequestContext, Scoped}};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let cx = RequestContext::new(Budget::new(Duration::from_secs(1)));
    /// let scoped: Scoped<_> = cx.scope(async { context::current_budget().is_some() });
    /// assert!(scoped.context().ledger().is_empty());
    /// assert!(scoped.await);
    /// # }
    /// ```
    #[must_use = "futures do nothing unless polled"]
    pub struct Scoped<F> {
        cx: RequestContext,
        // `None` once done: dropped inside the scope as soon as it answered.
        #[pin]
        future: Option<F>,
    }

    impl<F> PinnedDrop for Scoped<F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if this.future.is_some() {
                let mut future = this.future;
                CURRENT.set(this.cx, || future.set(None));
            }
        }
    }
}

impl<F> Scoped<F> {
    /// The context the future runs in (its ledger holds what the future
    /// recorded).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, context::RequestContext};
    /// let cx = RequestContext::new(Budget::new(Duration::from_secs(1)));
    /// let scoped = cx.scope(async {});
    /// assert_eq!(scoped.context().budget().original(), Duration::from_secs(1));
    /// ```
    pub fn context(&self) -> &RequestContext {
        &self.cx
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, task: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let mut future = this.future;
        CURRENT.set(this.cx, || {
            let output = future
                .as_mut()
                .as_pin_mut()
                .expect("`Scoped` polled after completion")
                .poll(task);
            if output.is_ready() {
                future.set(None);
            }
            output
        })
    }
}

impl<F> std::fmt::Debug for Scoped<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scoped")
            .field("cx", &self.cx)
            .finish_non_exhaustive()
    }
}

/// The context of the request this code runs in, if any.
///
/// ```
/// assert!(budget_core::context::current().is_none());
/// ```
pub fn current() -> Option<RequestContext> {
    CURRENT.is_set().then(|| CURRENT.with(Clone::clone))
}

/// The current request's budget, if any.
///
/// ```
/// assert!(budget_core::context::current_budget().is_none());
/// ```
pub fn current_budget() -> Option<Budget> {
    CURRENT.is_set().then(|| CURRENT.with(|cx| cx.budget))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn context_is_visible_inside_the_scope_only_and_does_not_cross_spawn() {
        let cx = RequestContext::new(Budget::new(Duration::from_secs(1)));
        let (inside, spawned) = cx
            .scope(async {
                let spawned = tokio::spawn(async { current().is_some() }).await.unwrap();
                (current().is_some(), spawned)
            })
            .await;
        assert!(inside);
        assert!(!spawned);
        assert!(current().is_none());
    }

    /// Sees, when dropped, whether a context was current and which.
    struct SeesOnDrop(std::sync::Arc<std::sync::Mutex<Option<Duration>>>);

    impl Drop for SeesOnDrop {
        fn drop(&mut self) {
            if let Ok(mut seen) = self.0.lock() {
                *seen = current_budget().map(|b| b.original());
            }
        }
    }

    #[tokio::test]
    async fn the_inner_future_is_dropped_inside_the_scope_done_or_not() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
        // Done: dropped as soon as it answered, still in the scope.
        let guard = SeesOnDrop(seen.clone());
        let cx = RequestContext::new(Budget::new(Duration::from_secs(3)));
        cx.scope(async move {
            let _guard = guard;
        })
        .await;
        assert_eq!(*seen.lock().unwrap(), Some(Duration::from_secs(3)));
        // Not done: dropped with the scope, in it.
        *seen.lock().unwrap() = None;
        let guard = SeesOnDrop(seen.clone());
        let cx = RequestContext::new(Budget::new(Duration::from_secs(4)));
        let pending = cx.scope(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        let mut pending = Box::pin(pending);
        assert!(futures_util::poll!(pending.as_mut()).is_pending());
        assert_eq!(*seen.lock().unwrap(), None);
        drop(pending);
        assert_eq!(*seen.lock().unwrap(), Some(Duration::from_secs(4)));
        assert!(current().is_none());
    }

    #[tokio::test]
    async fn a_nested_scope_is_current_inside_and_the_outer_one_again_after() {
        let outer = RequestContext::new(Budget::new(Duration::from_secs(5)));
        let seen = outer
            .scope(async {
                let before = current_budget().map(|b| b.original());
                let inner = RequestContext::new(Budget::new(Duration::from_secs(1)))
                    .scope(async { current_budget().map(|b| b.original()) })
                    .await;
                let after = current_budget().map(|b| b.original());
                let sync = RequestContext::new(Budget::new(Duration::from_secs(2)))
                    .sync_scope(|| current_budget().map(|b| b.original()));
                (
                    before,
                    inner,
                    after,
                    sync,
                    current_budget().map(|b| b.original()),
                )
            })
            .await;
        let s = Duration::from_secs;
        assert_eq!(
            seen,
            (Some(s(5)), Some(s(1)), Some(s(5)), Some(s(2)), Some(s(5)))
        );
        assert!(current().is_none());
    }

    #[tokio::test]
    async fn a_panic_inside_the_scope_leaves_no_context_behind() {
        let cx = RequestContext::new(Budget::new(Duration::from_secs(1)));
        let caught = std::panic::AssertUnwindSafe(cx.scope(async { panic!("in the handler") }));
        let res = futures_util::FutureExt::catch_unwind(caught).await;
        assert!(res.is_err());
        assert!(current().is_none());
    }

    /// The server layer moves the context into every request's future
    /// (and axum boxes that future): a ledger that holds only the ingress
    /// budget keeps it small (BENCHMARKS.md, "The server layer's cost in
    /// instructions").
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn the_context_and_its_ingress_only_ledger_stay_small() {
        assert!(std::mem::size_of::<Ledger>() <= 48);
        assert!(std::mem::size_of::<RequestContext>() <= 128);
    }
}
