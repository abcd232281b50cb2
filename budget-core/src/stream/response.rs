//! [`StreamResponse`]: an opened stream's head, its body still to read;
//! [`BodyStream`]: that body, chunk by chunk.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use http::{HeaderMap, StatusCode};

use super::StreamError;

/// The answer to a stream's opening ([`RequestBuilder::open`]): its
/// status and headers, and its body unread.
///
/// The opening was a call (budget, breaker, ledger); the body is read at
/// the caller's pace under no deadline, and how it ends is never heard by
/// the breaker.
///
/// [`RequestBuilder::open`]: crate::client::RequestBuilder::open
///
/// # Example
///
/// ```no_run
/// use futures_util::StreamExt;
///
/// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), Box<dyn std::error::Error>> {
/// let res = c.get("/export").open().await?;
/// println!("{} after {} attempts", res.status(), res.attempts());
/// let mut body = res.bytes_stream();
/// while let Some(chunk) = body.next().await {
///     let chunk = chunk?; // a disconnect mid-stream is a `StreamError::Body`
///     println!("{} bytes", chunk.len());
/// }
/// # Ok(()) }
/// ```
pub struct StreamResponse {
    inner: reqwest::Response,
    dependency: Arc<str>,
    attempts: u32,
    retry_after: Option<Duration>,
}

impl fmt::Debug for StreamResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamResponse")
            .field("dependency", &self.dependency)
            .field("status", &self.inner.status())
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl StreamResponse {
    pub(crate) fn new(
        inner: reqwest::Response,
        dependency: Arc<str>,
        attempts: u32,
        retry_after: Option<Duration>,
    ) -> Self {
        Self {
            inner,
            dependency,
            attempts,
            retry_after,
        }
    }

    /// The opening's status.
    ///
    /// ```no_run
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let res = c.get("/events").open().await?;
    /// if res.status().is_server_error() { /* the breaker heard a failure */ }
    /// # Ok(()) }
    /// ```
    pub fn status(&self) -> StatusCode {
        self.inner.status()
    }

    /// The opening's headers.
    ///
    /// ```no_run
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let res = c.get("/events").open().await?;
    /// let sse = res.headers().get("content-type").is_some_and(|v| v == "text/event-stream");
    /// # Ok(()) }
    /// ```
    pub fn headers(&self) -> &HeaderMap {
        self.inner.headers()
    }

    /// The attempts the opening took (retries of a `503`, say).
    ///
    /// ```no_run
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// assert!(c.get("/events").open().await?.attempts() >= 1);
    /// # Ok(()) }
    /// ```
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The opening's `Retry-After` (either RFC 9110 form), if it had a
    /// valid one: how long a refused stream (`429`, `503`) asks to wait.
    ///
    /// ```no_run
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let wait = c.get("/events").open().await?.retry_after();
    /// # Ok(()) }
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The dependency's name.
    ///
    /// ```no_run
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// println!("{}", c.get("/events").open().await?.dependency());
    /// # Ok(()) }
    /// ```
    pub fn dependency(&self) -> &str {
        &self.dependency
    }

    /// The body, chunk by chunk as it arrives.
    ///
    /// ```no_run
    /// use futures_util::TryStreamExt;
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), Box<dyn std::error::Error>> {
    /// let chunks: Vec<bytes::Bytes> = c.get("/export").open().await?.bytes_stream().try_collect().await?;
    /// # Ok(()) }
    /// ```
    pub fn bytes_stream(self) -> BodyStream {
        BodyStream::new(self.inner)
    }

    /// The answer as an `http::Response` whose body streams: to hand on
    /// as it is (an axum handler's answer, with
    /// `axum::body::Body::new(body)`: [`BodyStream`] is an
    /// `http_body::Body`).
    ///
    /// ```no_run
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let res = c.get("/events").open().await?.into_http();
    /// let res: http::Response<axum::body::Body> = res.map(axum::body::Body::new);
    /// # Ok(()) }
    /// ```
    pub fn into_http(self) -> http::Response<BodyStream> {
        let mut out = http::Response::new(BodyStream::empty());
        *out.status_mut() = self.inner.status();
        *out.version_mut() = self.inner.version();
        *out.headers_mut() = self.inner.headers().clone();
        *out.body_mut() = BodyStream::new(self.inner);
        out
    }
}

type Chunks = Pin<Box<dyn Stream<Item = Result<Bytes, StreamError>> + Send>>;

/// An opened stream's body: `Stream<Item = Result<Bytes, StreamError>>`
/// and an `http_body::Body`. A connection lost mid-stream is one
/// [`StreamError::Body`], then the end.
///
/// # Example
///
/// ```no_run
/// use futures_util::StreamExt;
/// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), Box<dyn std::error::Error>> {
/// let mut body: budget_core::stream::BodyStream = c.get("/export").open().await?.bytes_stream();
/// while let Some(chunk) = body.next().await {
///     println!("{} bytes", chunk?.len());
/// }
/// # Ok(()) }
/// ```
pub struct BodyStream {
    chunks: Chunks,
}

impl fmt::Debug for BodyStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyStream").finish_non_exhaustive()
    }
}

impl BodyStream {
    fn new(res: reqwest::Response) -> Self {
        let chunks = futures_util::stream::unfold(Some(res), |res| async move {
            let mut res = res?;
            match res.chunk().await {
                Ok(Some(chunk)) => Some((Ok(chunk), Some(res))),
                Ok(None) => None,
                Err(e) => Some((Err(StreamError::Body(Box::new(e.without_url()))), None)),
            }
        });
        Self {
            chunks: Box::pin(chunks),
        }
    }

    fn empty() -> Self {
        Self {
            chunks: Box::pin(futures_util::stream::empty()),
        }
    }
}

impl Stream for BodyStream {
    type Item = Result<Bytes, StreamError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.chunks.as_mut().poll_next(cx)
    }
}

impl http_body::Body for BodyStream {
    type Data = Bytes;
    type Error = StreamError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, StreamError>>> {
        self.chunks
            .as_mut()
            .poll_next(cx)
            .map(|next| next.map(|chunk| chunk.map(http_body::Frame::data)))
    }
}

impl crate::client::auth::Answered for StreamResponse {
    fn status(&self) -> StatusCode {
        self.inner.status()
    }
}
