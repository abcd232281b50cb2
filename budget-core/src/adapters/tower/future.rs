//! [`ResponseFuture`]: the answer of an [`OutboundBudget`](super::OutboundBudget).

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

type BoxError = Box<dyn StdError + Send + Sync>;

/// The answer of an [`OutboundBudget`](super::OutboundBudget): the
/// inner client's response, or the call's error (boxed, tower's
/// `BoxError`): a [`CallError`](crate::client::CallError) when the
/// request was not made or ran out of its budget, the inner client's own
/// error otherwise.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use budget_core::adapters::tower::OutboundBudget;
/// use tower::ServiceExt;
/// let ok = tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(()))
/// });
/// // Outside any request: as it came.
/// let res = OutboundBudget::new(ok, "pricing").oneshot(http::Request::new(())).await;
/// assert!(res.is_ok());
/// # }
/// ```
pub struct ResponseFuture<T> {
    inner: Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>,
}

impl<T> ResponseFuture<T> {
    pub(super) fn new(inner: impl Future<Output = Result<T, BoxError>> + Send + 'static) -> Self {
        Self {
            inner: Box::pin(inner),
        }
    }
}

impl<T> std::fmt::Debug for ResponseFuture<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<T> Future for ResponseFuture<T> {
    type Output = Result<T, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}
