use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use http::Response;
use pin_project_lite::pin_project;

use crate::server::{LimitedBody, StreamPolicy};

pin_project! {
    /// The response future of [`StreamLimit`](crate::server::StreamLimit):
    /// the inner future, whose answer's body is held to the route's
    /// [`StreamPolicy`] from the moment its head comes.
    ///
    /// # Example
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use budget_core::server::{StreamLimit, StreamLimitFuture, StreamPolicy};
    /// use tower::{Layer, Service, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let mut svc: StreamLimit<_> = StreamPolicy::default().layer().unwrap().layer(service_fn(|_req: http::Request<()>| async {
    ///     Ok::<_, Infallible>(http::Response::new(axum::body::Body::empty()))
    /// }));
    /// let fut: StreamLimitFuture<_> = svc.call(http::Request::new(()));
    /// assert_eq!(fut.await.unwrap().status(), 200);
    /// # }
    /// ```
    pub struct StreamLimitFuture<F> {
        #[pin]
        inner: F,
        policy: Arc<StreamPolicy>,
    }
}

impl<F> StreamLimitFuture<F> {
    pub(crate) fn new(inner: F, policy: Arc<StreamPolicy>) -> Self {
        Self { inner, policy }
    }
}

impl<F, B, E> Future for StreamLimitFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: http_body::Body,
{
    type Output = Result<Response<LimitedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let res = ready!(this.inner.poll(cx))?;
        let limit = this.policy.limit_for(res.headers());
        Poll::Ready(Ok(res.map(|body| LimitedBody::new(body, limit))))
    }
}
