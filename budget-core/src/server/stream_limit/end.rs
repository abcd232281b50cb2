use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use http_body::Frame;
use tokio::time::Instant;

use crate::grpc::{GRPC_MESSAGE, GRPC_STATUS, GrpcCode, encode_message, is_grpc};
use crate::server::StreamPolicy;
use crate::telemetry::semconv::{
    STREAM_END_CLIENT_GONE, STREAM_END_COMPLETE, STREAM_END_DEADLINE, STREAM_END_DURATION,
    STREAM_END_ERROR, STREAM_END_IDLE,
};

/// Why a response body stopped streaming: the `reason` label of
/// `budget_stream_ended_total` and of the `stream ended` tracing event.
///
/// # Example
///
/// ```
/// use budget_core::server::StreamEnd;
/// assert_eq!(StreamEnd::Idle.as_str(), "idle");
/// assert!(StreamEnd::Duration.is_limit());
/// assert!(!StreamEnd::Complete.is_limit());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamEnd {
    /// The handler's body ended on its own.
    Complete,
    /// No frame came within the route's `idle_timeout`: a clean end.
    Idle,
    /// The route's `max_duration` passed: a clean end.
    Duration,
    /// A gRPC call's deadline passed (gRPC's rule: the deadline covers
    /// the whole call): trailers with `grpc-status: 4`.
    Deadline,
    /// The body was dropped before its end: the client went away.
    ClientGone,
    /// The handler's body failed.
    Error,
}

impl StreamEnd {
    /// The label value (`complete`, `idle`, `duration`, `deadline`,
    /// `client_gone`, `error`).
    ///
    /// ```
    /// # use budget_core::server::StreamEnd;
    /// assert_eq!(StreamEnd::ClientGone.as_str(), "client_gone");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complete => STREAM_END_COMPLETE,
            Self::Idle => STREAM_END_IDLE,
            Self::Duration => STREAM_END_DURATION,
            Self::Deadline => STREAM_END_DEADLINE,
            Self::ClientGone => STREAM_END_CLIENT_GONE,
            Self::Error => STREAM_END_ERROR,
        }
    }

    /// Whether a limit ended the stream (`idle`, `duration`, `deadline`).
    ///
    /// ```
    /// # use budget_core::server::StreamEnd;
    /// assert!(StreamEnd::Deadline.is_limit());
    /// ```
    pub fn is_limit(self) -> bool {
        matches!(self, Self::Idle | Self::Duration | Self::Deadline)
    }
}

/// What a body streams under, fixed when its head goes out: the idle
/// limit, the instant it ends at, and how it ends there. Made by
/// [`StreamLimitLayer`](crate::server::StreamLimitLayer) from a route's
/// [`StreamPolicy`], and by [`BudgetLayer`](crate::server::BudgetLayer)
/// for a gRPC call (whose deadline covers the whole call); a body type
/// applies it through
/// [`ProblemBody::limited`](crate::problem::ProblemBody::limited).
///
/// # Example
///
/// ```
/// use budget_core::problem::ProblemBody;
/// use budget_core::server::{BodyLimit, LimitedBody};
/// use bytes::Bytes;
///
/// // A body type of one's own that the budget layer can hold to a gRPC
/// // call's deadline: it boxes the limited body.
/// struct MyBody(axum::body::Body);
/// impl ProblemBody for MyBody {
///     fn from_problem(json: Bytes) -> Self {
///         MyBody(json.into())
///     }
///     fn limited(self, limit: BodyLimit) -> Self {
///         MyBody(axum::body::Body::new(LimitedBody::new(self.0, limit)))
///     }
/// }
/// ```
#[derive(Clone, Debug)]
pub struct BodyLimit {
    pub(crate) idle: Option<Duration>,
    /// The instant the body ends at, and the reason it ends there.
    pub(crate) ends_at: Option<(Instant, StreamEnd)>,
    pub(crate) ending: Ending,
}

/// How a body ended by a limit ends.
#[derive(Clone, Debug)]
pub(crate) enum Ending {
    /// A final SSE event of this name, then the end of body.
    Sse(Arc<str>),
    /// Trailers with `grpc-status: 4`, the message naming the limit.
    Grpc,
    /// The end of body.
    Close,
}

impl BodyLimit {
    /// A route's `policy` for a response with `headers`, its head sent at
    /// `now`.
    pub(crate) fn for_response(policy: &StreamPolicy, headers: &HeaderMap, now: Instant) -> Self {
        let content_type = headers
            .get(http::header::CONTENT_TYPE)
            .map_or(&b""[..], HeaderValue::as_bytes);
        let ending = if is_grpc(content_type) {
            Ending::Grpc
        } else if is_event_stream(content_type) && !policy.end_event.is_empty() {
            Ending::Sse(Arc::from(policy.end_event.as_str()))
        } else {
            Ending::Close
        };
        Self {
            idle: policy.idle_timeout,
            ends_at: policy
                .max_duration
                .and_then(|d| now.checked_add(d))
                .map(|at| (at, StreamEnd::Duration)),
            ending,
        }
    }

    /// A gRPC call's whole-call rule: the body ends at `deadline`.
    pub(crate) fn grpc_deadline(deadline: Instant) -> Self {
        Self {
            idle: None,
            ends_at: Some((deadline, StreamEnd::Deadline)),
            ending: Ending::Grpc,
        }
    }

    /// The last frame of a body ended for `reason` (`None`: just end),
    /// `elapsed` after its head.
    pub(crate) fn last_frame(&self, reason: StreamEnd, elapsed: Duration) -> Option<Frame<Bytes>> {
        match &self.ending {
            Ending::Close => None,
            Ending::Sse(event) => Some(Frame::data(Bytes::from(format!(
                "event: {event}\ndata: {{\"reason\":\"{}\"}}\n\n",
                reason.as_str()
            )))),
            Ending::Grpc => {
                let mut trailers = HeaderMap::new();
                trailers.insert(GRPC_STATUS, GrpcCode::DeadlineExceeded.header_value());
                let message = match reason {
                    StreamEnd::Idle => "the stream was idle for longer than its limit".to_owned(),
                    _ => format!(
                        "the call's time ran out after {}ms of streaming",
                        elapsed.as_millis()
                    ),
                };
                if let Ok(value) = HeaderValue::try_from(encode_message(&message)) {
                    trailers.insert(GRPC_MESSAGE, value);
                }
                Some(Frame::trailers(trailers))
            }
        }
    }
}

/// `text/event-stream`, with or without parameters.
fn is_event_stream(content_type: &[u8]) -> bool {
    const SSE: &[u8] = b"text/event-stream";
    content_type
        .get(..SSE.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(SSE))
}
