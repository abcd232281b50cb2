//! [`LedgerLayer`]: a request ledger and its `Server-Timing` header without
//! a budget, for a service running with its budget turned off.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::ledger::{Ledger, LedgerLimits};
use crate::server::response::append_server_timing;
use crate::server::{SERVER_TIMING, ServerTiming};

/// Gives every request a [`Ledger`] (in its extensions, where the
/// [`Ledger`] extractor finds it) and adds it to the response as
/// `Server-Timing`, with no budget: what a service runs instead of
/// [`BudgetLayer`](crate::server::BudgetLayer) when its budget is off, so
/// that the side-by-side tables still see where the time went, and the
/// header has one writer in both modes.
///
/// An empty ledger adds no header.
///
/// # Example
///
/// ```
/// use axum::{Router, routing::get};
/// use budget_core::ledger::{Entry, Ledger};
/// use budget_core::server::LedgerLayer;
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let app = Router::new()
///     .route("/", get(|ledger: Ledger| async move {
///         ledger.record(Entry::skip("recommendations", "skipped: circuit open"));
///         "ok"
///     }))
///     .layer(LedgerLayer::default());
/// let res = app.oneshot(http::Request::new(axum::body::Body::empty())).await.unwrap();
/// assert_eq!(res.headers()["server-timing"], "recommendations;desc=\"skipped: circuit open\"");
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct LedgerLayer {
    limits: LedgerLimits,
    server_timing: ServerTiming,
}

impl LedgerLayer {
    /// A layer whose ledgers keep to `limits`.
    ///
    /// ```
    /// # use budget_core::{ledger::LedgerLimits, server::LedgerLayer};
    /// let layer = LedgerLayer::new(LedgerLimits { max_entries: 8, ..Default::default() });
    /// # let _ = layer;
    /// ```
    pub fn new(limits: LedgerLimits) -> Self {
        Self {
            limits,
            server_timing: ServerTiming::Always,
        }
    }

    /// Whether answers carry the ledger as `Server-Timing`, as
    /// [`BudgetLayer::server_timing`](crate::server::BudgetLayer::server_timing).
    ///
    /// ```
    /// use axum::{Router, routing::get};
    /// use budget_core::ledger::{Entry, Ledger};
    /// use budget_core::server::{LedgerLayer, ServerTiming};
    /// use tower::ServiceExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let app = Router::new()
    ///     .route("/", get(|ledger: Ledger| async move {
    ///         ledger.record(Entry::skip("recommendations", "skipped: circuit open"));
    ///         "ok"
    ///     }))
    ///     .layer(LedgerLayer::default().server_timing(ServerTiming::Never));
    /// let res = app.oneshot(http::Request::new(axum::body::Body::empty())).await.unwrap();
    /// assert!(!res.headers().contains_key("server-timing"));
    /// # }
    /// ```
    pub fn server_timing(mut self, server_timing: ServerTiming) -> Self {
        self.server_timing = server_timing;
        self
    }
}

impl<S> Layer<S> for LedgerLayer {
    type Service = LedgerService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        LedgerService {
            inner,
            limits: self.limits,
            server_timing: self.server_timing.clone(),
        }
    }
}

/// The service of [`LedgerLayer`].
///
/// ```
/// # use budget_core::server::LedgerLayer;
/// # use tower::Layer;
/// let svc = LedgerLayer::default().layer(tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(()))
/// }));
/// # let _ = svc;
/// ```
#[derive(Clone, Debug)]
pub struct LedgerService<S> {
    inner: S,
    limits: LedgerLimits,
    server_timing: ServerTiming,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for LedgerService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = LedgerFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqBody>) -> Self::Future {
        let ledger = Ledger::with_limits(self.limits);
        req.extensions_mut().insert(ledger.clone());
        let show = self.server_timing.shows(req.headers());
        LedgerFuture {
            inner: self.inner.call(req),
            ledger,
            show,
        }
    }
}

pin_project! {
    /// The response future of [`LedgerService`]: the inner answer with the
    /// ledger appended as `Server-Timing` (or, when the layer's
    /// [`ServerTiming`] hides it, no `Server-Timing` at all).
    pub struct LedgerFuture<F> {
        #[pin]
        inner: F,
        ledger: Ledger,
        show: bool,
    }
}

impl<F, B, E> Future for LedgerFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        this.inner.poll(cx).map_ok(|mut res| {
            if *this.show {
                append_server_timing(&mut res, this.ledger);
            } else {
                res.headers_mut().remove(SERVER_TIMING);
            }
            res
        })
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use bytes::Bytes;
    use http_body_util::Full;
    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::ledger::Entry;

    #[tokio::test]
    async fn the_ledger_reaches_the_handler_and_comes_back_once_in_any_body() {
        let svc = LedgerLayer::default().layer(service_fn(|req: Request<()>| async move {
            let ledger = req
                .extensions()
                .get::<Ledger>()
                .expect("the layer's ledger")
                .clone();
            ledger.record(Entry::skip("pricing", "skipped: circuit open"));
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
        }));
        let res = svc.oneshot(Request::new(())).await.unwrap();
        let values: Vec<_> = res.headers().get_all("server-timing").iter().collect();
        assert_eq!(values, ["pricing;desc=\"skipped: circuit open\""]);
    }

    #[tokio::test]
    async fn an_empty_ledger_adds_no_header() {
        let svc = LedgerLayer::default().layer(service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(()))
        }));
        let res = svc.oneshot(Request::new(())).await.unwrap();
        assert!(!res.headers().contains_key("server-timing"));
    }
}
