//! The stale fallback over gRPC: with `on_unavailable = "stale"`, a
//! [`GrpcBudgetLayer`](super::GrpcBudgetLayer) keeps the last `OK` answer
//! of each method and request message, and serves it in place of a call
//! that ends without a usable answer, as the HTTP client does for `GET`
//! (docs/hedging-and-stale.md, "Stale answers over gRPC").
//!
//! | the call ended with | stale answer served |
//! | --- | --- |
//! | not made: below the floor, circuit open, no concurrency permit in time | yes |
//! | no usable answer: connect failure, timeout, reset, the answer's body failed | yes |
//! | `UNAVAILABLE`, `DEADLINE_EXCEEDED`, `INTERNAL`, `UNKNOWN` after the retries | yes |
//! | any other status (`RESOURCE_EXHAUSTED`, `NOT_FOUND`, `INVALID_ARGUMENT`, ...) | no: the dependency answered |
//!
//! The codes are the gRPC statuses of HTTP's `stale-if-error` set (`500`,
//! `502`, `503`, `504`). A served answer carries a [`Stale`] extension
//! (tonic's `Response::extensions`), the request's ledger says
//! `inventory;desc="stale 12s"`, and `budget_stale_served_total` counts it.
//!
//! A gRPC method has no safe verb: turn the fallback on only for a
//! dependency whose calls read (a stock lookup, a price), never for one
//! whose calls change something. Only unary answers are meant: the layer
//! reads the answer whole (within what is left of the budget) before the
//! caller gets it, to know its trailers' `grpc-status`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use http_body_util::BodyExt;

use crate::client::stale::{StaleCache, StaleKey};
use crate::grpc::{GRPC_STATUS, GrpcCode, grpc_answer};
use crate::ledger::Ledger;
use crate::problem::{Problem, ProblemBody, ProblemKind};

/// Marks an answer the gRPC layer served from its stale cache: the answer
/// is `age` old. Found in the answer's extensions (tonic's
/// `Response::extensions().get::<Stale>()`); say in the caller's own
/// answer that it is degraded.
///
/// ```
/// use std::time::Duration;
/// use budget_core::grpc::Stale;
///
/// let mut extensions = http::Extensions::new();
/// extensions.insert(Stale::new(Duration::from_secs(12)));
/// let age = extensions.get::<Stale>().map(Stale::age);
/// assert_eq!(age, Some(Duration::from_secs(12)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stale {
    age: Duration,
}

impl Stale {
    /// An answer `age` old.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let stale = budget_core::grpc::Stale::new(Duration::from_secs(3));
    /// assert_eq!(stale.age(), Duration::from_secs(3));
    /// ```
    pub fn new(age: Duration) -> Self {
        Self { age }
    }

    /// How old the answer is: from when the layer kept it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// assert_eq!(budget_core::grpc::Stale::new(Duration::ZERO).age(), Duration::ZERO);
    /// ```
    pub fn age(&self) -> Duration {
        self.age
    }
}

/// The stale cache of a call: where its answer is kept and looked up.
pub(crate) struct Fallback<'a> {
    pub(crate) cache: &'a StaleCache,
    pub(crate) key: StaleKey,
    pub(crate) dependency: &'a Arc<str>,
    pub(crate) ledger: Option<&'a Ledger>,
}

/// The `grpc-status` codes a stale answer stands in for.
fn stands_in_for(code: u32) -> bool {
    [
        GrpcCode::Unknown,
        GrpcCode::DeadlineExceeded,
        GrpcCode::Internal,
        GrpcCode::Unavailable,
    ]
    .iter()
    .any(|c| *c as u32 == code)
}

/// The numeric `grpc-status` in `headers`, if there is one.
fn status_in(headers: &HeaderMap) -> Option<u32> {
    headers
        .get(GRPC_STATUS)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// Whether `B` can carry a kept answer (its message and trailers).
pub(crate) fn can_carry<B: ProblemBody>() -> bool {
    B::from_frames(Bytes::new(), HeaderMap::new()).is_some()
}

impl Fallback<'_> {
    /// The kept answer, as `B`, if one is young enough (and says so in the
    /// ledger, metrics and trace).
    pub(crate) fn serve<B: ProblemBody>(&self) -> Option<Response<B>> {
        let served = self.cache.serve(&self.key, self.dependency, self.ledger)?;
        let (mut parts, data) = served.answer.into_parts();
        let body = B::from_frames(data, served.trailers.unwrap_or_default())?;
        parts.extensions.insert(Stale::new(served.age));
        Some(Response::from_parts(parts, body))
    }

    /// The call's answer, kept when it is `OK`, or the kept one in its
    /// place when it is a status a stale answer stands in for. The answer
    /// is read whole, for at most `within`; one that cannot be read in
    /// time is a failed call.
    pub(crate) async fn settle<B>(&self, answer: Response<B>, within: Duration) -> Response<B>
    where
        B: http_body::Body<Data = Bytes> + ProblemBody,
    {
        if let Some(code) = status_in(answer.headers()) {
            // Trailers-only: the status is in the head.
            return match code {
                0 => answer,
                code if stands_in_for(code) => self.serve().unwrap_or(answer),
                _ => answer,
            };
        }
        if answer.status() != StatusCode::OK {
            return answer;
        }
        let (parts, body) = answer.into_parts();
        let collected = match tokio::time::timeout(within, body.collect()).await {
            Ok(Ok(collected)) => collected,
            failed => {
                if let Some(kept) = self.serve() {
                    return kept;
                }
                let detail = match failed {
                    Ok(_) => "the answer's body failed",
                    Err(_) => "the answer's body did not arrive within the budget",
                };
                let problem = Problem::new(ProblemKind::DependencyFailed, detail);
                return grpc_answer::<Bytes>(&problem).map(B::from_problem);
            }
        };
        let trailers = collected.trailers().cloned().unwrap_or_default();
        let data = collected.to_bytes();
        match status_in(&trailers) {
            Some(0) => {
                let mut kept = Response::new(data.clone());
                *kept.status_mut() = parts.status;
                *kept.version_mut() = parts.version;
                *kept.headers_mut() = parts.headers.clone();
                self.cache.keep(&self.key, &kept, Some(&trailers));
            }
            Some(code) if stands_in_for(code) => {
                if let Some(kept) = self.serve() {
                    return kept;
                }
            }
            _ => {}
        }
        // `B` carries trailers: `can_carry` was asked before the call.
        let body = match B::from_frames(data.clone(), trailers) {
            Some(body) => body,
            None => B::from_problem(data),
        };
        Response::from_parts(parts, body)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body_util::combinators::BoxBody;

    use super::*;
    use crate::client::OnUnavailable;
    use crate::client::stale::StaleCacheConfig;

    type Body = BoxBody<Bytes, Infallible>;

    fn cache() -> Arc<StaleCache> {
        crate::client::stale::build(
            OnUnavailable::Stale,
            Duration::from_secs(30),
            &StaleCacheConfig::default(),
        )
        .unwrap()
        .unwrap()
    }

    fn trailers(code: &str) -> HeaderMap {
        let mut t = HeaderMap::new();
        t.insert(GRPC_STATUS, code.parse().unwrap());
        t
    }

    /// A gRPC answer with `message` and `grpc-status: code` in its trailers.
    fn answer(message: &'static str, code: &str) -> Response<Body> {
        let mut res = Response::new(
            Body::from_frames(Bytes::from_static(message.as_bytes()), trailers(code)).unwrap(),
        );
        res.headers_mut()
            .insert("content-type", "application/grpc".parse().unwrap());
        res
    }

    /// A trailers-only answer with `grpc-status: code`.
    fn trailers_only(code: &str) -> Response<Body> {
        let mut res = Response::new(Body::from_problem(Bytes::new()));
        res.headers_mut().insert(GRPC_STATUS, code.parse().unwrap());
        res
    }

    async fn read(res: Response<Body>) -> (Option<Stale>, Bytes, Option<HeaderMap>) {
        let stale = res.extensions().get::<Stale>().copied();
        let collected = res.into_body().collect().await.unwrap();
        let trailers = collected.trailers().cloned();
        (stale, collected.to_bytes(), trailers)
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[tokio::test(start_paused = true)]
    async fn an_ok_answer_is_kept_and_stands_in_for_an_unavailable_one_later() {
        let cache = cache();
        let dependency: Arc<str> = Arc::from("inventory");
        let ledger = Ledger::new();
        let fallback = Fallback {
            cache: &cache,
            key: StaleCache::grpc_key("/stock.Stock/Get", b"\0\0\0\0\x02id"),
            dependency: &dependency,
            ledger: Some(&ledger),
        };
        // The good answer goes through whole, trailers included.
        let (stale, data, t) = read(fallback.settle(answer("7 left", "0"), SECOND).await).await;
        assert_eq!(
            (stale, &data[..], t),
            (None, &b"7 left"[..], Some(trailers("0")))
        );
        tokio::time::advance(Duration::from_secs(12)).await;
        // UNAVAILABLE after the retries, trailers-only: the kept answer.
        let (stale, data, t) = read(fallback.settle(trailers_only("14"), SECOND).await).await;
        assert_eq!(stale, Some(Stale::new(Duration::from_secs(12))));
        assert_eq!((&data[..], t), (&b"7 left"[..], Some(trailers("0"))));
        assert_eq!(ledger.server_timing(), r#"inventory;desc="stale 12s""#);
        // INTERNAL in the trailers of an answer with a body: the same.
        let (stale, data, _) = read(fallback.settle(answer("oops", "13"), SECOND).await).await;
        assert!(stale.is_some());
        assert_eq!(&data[..], b"7 left");
    }

    #[tokio::test(start_paused = true)]
    async fn a_status_the_dependency_meant_is_passed_up_and_another_question_gets_nothing() {
        let cache = cache();
        let dependency: Arc<str> = Arc::from("inventory");
        let asked = |message: &'static [u8]| Fallback {
            cache: &cache,
            key: StaleCache::grpc_key("/stock.Stock/Get", message),
            dependency: &dependency,
            ledger: None,
        };
        let _ = read(asked(b"a").settle(answer("7 left", "0"), SECOND).await).await;
        // NOT_FOUND (5) and RESOURCE_EXHAUSTED (8) are answers.
        for code in ["5", "8"] {
            let res = asked(b"a").settle(trailers_only(code), SECOND).await;
            assert_eq!(res.headers()[GRPC_STATUS], code);
            assert!(res.extensions().get::<Stale>().is_none());
        }
        // Another request message was never answered: nothing stands in.
        let res = asked(b"b").settle(trailers_only("14"), SECOND).await;
        assert_eq!(res.headers()[GRPC_STATUS], "14");
        // Served directly when the call was not made at all.
        assert!(asked(b"a").serve::<Body>().is_some());
        assert!(asked(b"b").serve::<Body>().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_whose_body_does_not_arrive_in_budget_is_a_failed_call() {
        let cache = cache();
        let dependency: Arc<str> = Arc::from("inventory");
        let fallback = Fallback {
            cache: &cache,
            key: StaleCache::grpc_key("/stock.Stock/Get", b"a"),
            dependency: &dependency,
            ledger: None,
        };
        let hung = || {
            let body = http_body_util::StreamBody::new(futures_util::stream::pending::<
                Result<http_body::Frame<Bytes>, Infallible>,
            >());
            Response::new(Body::new(body))
        };
        // Nothing kept: the layer's own answer, said as a gRPC status.
        let res = fallback.settle(hung(), SECOND).await;
        assert_eq!(res.headers()[GRPC_STATUS], "14");
        let _ = read(fallback.settle(answer("7 left", "0"), SECOND).await).await;
        let started = tokio::time::Instant::now();
        let (stale, data, _) = read(fallback.settle(hung(), SECOND).await).await;
        assert_eq!(
            started.elapsed(),
            SECOND,
            "waits what it was given, no more"
        );
        assert!(stale.is_some());
        assert_eq!(&data[..], b"7 left");
    }

    #[test]
    fn only_a_body_that_carries_trailers_can_carry_a_kept_answer() {
        assert!(can_carry::<Body>());
        assert!(can_carry::<tonic::body::Body>());
        assert!(!can_carry::<http_body_util::Full<Bytes>>());
    }
}
