use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use crate::server::{StreamLimitFuture, StreamPolicy};

/// Holds a route's response bodies to its [`StreamPolicy`]: each body
/// becomes a [`LimitedBody`](crate::server::LimitedBody) when its head
/// comes. Made by [`StreamLimitLayer`](crate::server::StreamLimitLayer).
///
/// # Example
///
/// ```
/// use std::convert::Infallible;
/// use budget_core::server::StreamPolicy;
/// use http_body_util::BodyExt;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let svc = StreamPolicy::default().layer().unwrap().layer(service_fn(|_req: http::Request<()>| async {
///     Ok::<_, Infallible>(http::Response::new(axum::body::Body::from("ok")))
/// }));
/// let res = svc.oneshot(http::Request::new(())).await.unwrap();
/// assert_eq!(res.into_body().collect().await.unwrap().to_bytes(), "ok");
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct StreamLimit<S> {
    inner: S,
    policy: Arc<StreamPolicy>,
}

impl<S> StreamLimit<S> {
    pub(crate) fn from_parts(inner: S, policy: Arc<StreamPolicy>) -> Self {
        Self { inner, policy }
    }

    /// The wrapped service.
    ///
    /// ```
    /// # use budget_core::server::StreamPolicy;
    /// # use tower::Layer;
    /// let svc = StreamPolicy::default().layer().unwrap().layer(7u8);
    /// assert_eq!(*svc.get_ref(), 7);
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    ///
    /// ```
    /// # use budget_core::server::StreamPolicy;
    /// # use tower::Layer;
    /// let mut svc = StreamPolicy::default().layer().unwrap().layer(7u8);
    /// *svc.get_mut() = 8;
    /// assert_eq!(*svc.get_ref(), 8);
    /// ```
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the service.
    ///
    /// ```
    /// # use budget_core::server::StreamPolicy;
    /// # use tower::Layer;
    /// assert_eq!(StreamPolicy::default().layer().unwrap().layer(7u8).into_inner(), 7);
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for StreamLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: http_body::Body,
{
    type Response = Response<crate::server::LimitedBody<ResBody>>;
    type Error = S::Error;
    type Future = StreamLimitFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        StreamLimitFuture::new(self.inner.call(req), Arc::clone(&self.policy))
    }
}
