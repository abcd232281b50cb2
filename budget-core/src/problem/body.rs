//! [`ProblemBody`]: the response bodies the budget layer and the gRPC
//! client layer can make their own answers with, so that each keeps the
//! inner service's body type (features `server` or `grpc`).

use bytes::Bytes;

/// A response body type the budget layer can write its own answers in
/// (the problem+json of a refusal or an expired budget), and the gRPC
/// client layer its trailers-only answers.
///
/// The server's `BudgetService` answers with the inner
/// service's own body type, as tower-http's `TimeoutLayer` does (it asks
/// `Default` of the body, for an empty one): a response the handler made
/// passes through without being re-boxed, so the layer wraps an axum
/// router, a plain hyper service or a tonic server alike. Implemented for
/// axum's `Body`, http-body-util's `Full<Bytes>` and its boxed bodies,
/// and `String`; a service with a body of its own implements it too.
///
/// # Example
///
/// ```
/// use budget_core::problem::ProblemBody;
/// use bytes::Bytes;
/// use http_body_util::{BodyExt, Full};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let body = <Full<Bytes> as ProblemBody>::from_problem(Bytes::from_static(b"{}"));
/// assert_eq!(body.collect().await.unwrap().to_bytes(), "{}");
/// # }
/// ```
pub trait ProblemBody {
    /// A body of exactly `json` (a problem+json document, UTF-8).
    fn from_problem(json: Bytes) -> Self;

    /// A body of `data` followed by `trailers`: a gRPC answer the gRPC
    /// client layer kept and serves again in place of a failed call (its
    /// stale fallback, `on_unavailable = "stale"`). `None`, the default,
    /// for a body type that cannot carry trailers: the layer then keeps
    /// no answers.
    ///
    /// ```
    /// use budget_core::problem::ProblemBody;
    /// use bytes::Bytes;
    /// use http::HeaderMap;
    /// use http_body_util::{BodyExt, Full};
    /// use http_body_util::combinators::BoxBody;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let mut trailers = HeaderMap::new();
    /// trailers.insert("grpc-status", "0".parse().unwrap());
    /// let body = BoxBody::<Bytes, std::convert::Infallible>::from_frames(
    ///     Bytes::from_static(b"message"),
    ///     trailers.clone(),
    /// )
    /// .unwrap();
    /// let collected = body.collect().await.unwrap();
    /// assert_eq!(collected.trailers(), Some(&trailers));
    /// assert_eq!(collected.to_bytes(), "message");
    /// // A body type without trailers says so.
    /// assert!(Full::<Bytes>::from_frames(Bytes::new(), HeaderMap::new()).is_none());
    /// # }
    /// ```
    fn from_frames(data: Bytes, trailers: http::HeaderMap) -> Option<Self>
    where
        Self: Sized,
    {
        let _ = (data, trailers);
        None
    }

    /// This body held to `limit` ([`LimitedBody`](crate::server::LimitedBody)):
    /// how the budget layer holds a gRPC call's body to its deadline after
    /// the head (gRPC's rule: the deadline covers the whole call). The
    /// default leaves the body as it is, for a body type that cannot box
    /// another (a whole body such as `Full`, which has nothing left to
    /// stream); axum's, tonic's and the boxed bodies apply it.
    ///
    /// ```
    /// use budget_core::problem::ProblemBody;
    /// use budget_core::server::StreamPolicy;
    /// use http_body_util::BodyExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let limit = StreamPolicy::default().limit_for(&http::HeaderMap::new());
    /// let body = axum::body::Body::from("streamed").limited(limit);
    /// assert_eq!(body.collect().await.unwrap().to_bytes(), "streamed");
    /// # }
    /// ```
    #[cfg(feature = "server")]
    fn limited(self, limit: crate::server::BodyLimit) -> Self
    where
        Self: Sized,
    {
        let _ = limit;
        self
    }
}

/// `data` then `trailers` as one body that cannot fail.
fn frames(
    data: Bytes,
    trailers: http::HeaderMap,
) -> impl http_body::Body<Data = Bytes, Error = std::convert::Infallible> + Send + Sync + 'static {
    use http_body_util::BodyExt;
    http_body_util::Full::new(data).with_trailers(std::future::ready(Some(Ok(trailers))))
}

/// axum's body (feature `server`).
#[cfg(feature = "server")]
impl ProblemBody for axum::body::Body {
    fn from_problem(json: Bytes) -> Self {
        Self::from(json)
    }

    fn from_frames(data: Bytes, trailers: http::HeaderMap) -> Option<Self> {
        Some(Self::new(frames(data, trailers)))
    }

    fn limited(self, limit: crate::server::BodyLimit) -> Self {
        Self::new(crate::server::LimitedBody::new(self, limit))
    }
}

impl ProblemBody for http_body_util::Full<Bytes> {
    fn from_problem(json: Bytes) -> Self {
        Self::new(json)
    }
}

impl<E: 'static> ProblemBody for http_body_util::combinators::BoxBody<Bytes, E> {
    fn from_problem(json: Bytes) -> Self {
        use http_body_util::BodyExt;
        http_body_util::Full::new(json)
            .map_err(|never| match never {})
            .boxed()
    }

    fn from_frames(data: Bytes, trailers: http::HeaderMap) -> Option<Self> {
        use http_body_util::BodyExt;
        Some(
            frames(data, trailers)
                .map_err(|never| match never {})
                .boxed(),
        )
    }

    #[cfg(feature = "server")]
    fn limited(self, limit: crate::server::BodyLimit) -> Self {
        use http_body_util::BodyExt;
        crate::server::LimitedBody::new(self, limit).boxed()
    }
}

impl<E: 'static> ProblemBody for http_body_util::combinators::UnsyncBoxBody<Bytes, E> {
    fn from_problem(json: Bytes) -> Self {
        use http_body_util::BodyExt;
        http_body_util::Full::new(json)
            .map_err(|never| match never {})
            .boxed_unsync()
    }

    fn from_frames(data: Bytes, trailers: http::HeaderMap) -> Option<Self> {
        use http_body_util::BodyExt;
        Some(
            frames(data, trailers)
                .map_err(|never| match never {})
                .boxed_unsync(),
        )
    }

    #[cfg(feature = "server")]
    fn limited(self, limit: crate::server::BodyLimit) -> Self {
        use http_body_util::BodyExt;
        crate::server::LimitedBody::new(self, limit).boxed_unsync()
    }
}

/// tonic's body (feature `grpc`): the budget layer in front of a tonic
/// server, and the gRPC client layer's own answers. gRPC answers are
/// trailers-only, so their body is empty; a kept answer served stale has
/// its message and trailers.
#[cfg(feature = "grpc")]
impl ProblemBody for tonic::body::Body {
    fn from_problem(json: Bytes) -> Self {
        tonic::body::Body::new(http_body_util::Full::new(json))
    }

    fn from_frames(data: Bytes, trailers: http::HeaderMap) -> Option<Self> {
        Some(tonic::body::Body::new(frames(data, trailers)))
    }

    #[cfg(feature = "server")]
    fn limited(self, limit: crate::server::BodyLimit) -> Self {
        tonic::body::Body::new(crate::server::LimitedBody::new(self, limit))
    }
}

impl ProblemBody for Bytes {
    fn from_problem(json: Bytes) -> Self {
        json
    }
}

impl ProblemBody for String {
    fn from_problem(json: Bytes) -> Self {
        // The layer's problems are serde_json's output: UTF-8.
        String::from_utf8_lossy(&json).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test]
    async fn every_body_carries_the_problem_unchanged() {
        let json = Bytes::from_static(br#"{"status":504}"#);
        #[cfg(feature = "server")]
        {
            let axum = axum::body::Body::from_problem(json.clone());
            assert_eq!(axum.collect().await.unwrap().to_bytes(), json);
        }
        let boxed = http_body_util::combinators::BoxBody::<Bytes, std::io::Error>::from_problem(
            json.clone(),
        );
        assert_eq!(boxed.collect().await.unwrap().to_bytes(), json);
        let unsync =
            http_body_util::combinators::UnsyncBoxBody::<Bytes, std::io::Error>::from_problem(
                json.clone(),
            );
        assert_eq!(unsync.collect().await.unwrap().to_bytes(), json);
        assert_eq!(String::from_problem(json.clone()).as_bytes(), &json[..]);
    }
}
