//! [`StreamError`]: why a stream could not be opened, or what went wrong
//! while following it.

use std::time::Duration;

use http::StatusCode;

use crate::outbound::error::{BoxError, CallError, CallErrorKind};

/// Why a stream could not be opened, or what went wrong while following
/// it.
///
/// A follower ([`EventSource`](super::sse::EventSource),
/// [`WebSocket`](super::ws::WebSocket)) yields a *transient* error as an
/// item and reconnects after its [`ReconnectPolicy`](super::ReconnectPolicy)'s
/// wait; it yields a *final* one ([`is_final`](Self::is_final)) and
/// ends, because reconnecting cannot help (docs/streams.md, "Following a
/// stream").
///
/// # Example
///
/// ```
/// use budget_core::stream::StreamError;
/// use http::StatusCode;
///
/// let gone = StreamError::Status { status: StatusCode::NOT_FOUND, retry_after: None };
/// assert!(gone.is_final());
/// let busy = StreamError::Status { status: StatusCode::SERVICE_UNAVAILABLE, retry_after: None };
/// assert!(!busy.is_final());
/// assert_eq!(busy.to_string(), "the stream's opening was answered 503 Service Unavailable");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The opening got no answer (a transport failure, the circuit open,
    /// below the floor, no permit in time): the call's error.
    #[error("the stream could not be opened: {0}")]
    Open(#[source] CallError),
    /// The opening was answered with a status that is not a stream (for
    /// SSE, anything but `200`; for a WebSocket, anything but `101`).
    #[error("the stream's opening was answered {status}")]
    Status {
        /// The opening's status.
        status: StatusCode,
        /// Its `Retry-After`, when it had a valid one.
        retry_after: Option<Duration>,
    },
    /// A `200` whose `content-type` is not `text/event-stream`.
    #[error("the stream's opening is not an event stream (content-type {content_type:?})")]
    NotEventStream {
        /// The answer's `content-type`, if any.
        content_type: Option<String>,
    },
    /// The connection failed after the stream opened (a disconnect).
    #[error("the stream was cut")]
    Body(#[source] BoxError),
    /// Nothing arrived (not even a comment or a ping) for this long.
    #[error("nothing arrived on the stream for {after:?}")]
    Idle {
        /// The idle timeout.
        after: Duration,
    },
    /// A line of the event stream longer than the limit.
    #[error("an event-stream line is over {limit} bytes")]
    LineTooLong {
        /// The limit, in bytes.
        limit: usize,
    },
    /// A line of the event stream that is not UTF-8.
    #[error("an event-stream line is not valid UTF-8")]
    InvalidUtf8,
    /// The WebSocket failed (protocol error, connection lost).
    #[error("the WebSocket failed")]
    WebSocket(#[source] BoxError),
    /// The server closed the WebSocket with a code other than `1000`
    /// (normal) or `1001` (going away), which are clean ends. A code no
    /// endpoint may send (below 1000, 1004 to 1006, 1015, 1016 to 2999,
    /// 5000 and up) arrives as `1002`, "Protocol violation": tungstenite
    /// answers it as a protocol error and reports that.
    #[error("the WebSocket was closed with code {code} ({reason})")]
    CloseCode {
        /// The close code.
        code: u16,
        /// The close reason.
        reason: String,
    },
}

impl StreamError {
    /// Whether reconnecting cannot help, so a follower ends after yielding
    /// it: a `4xx` opening other than `408` and `429`, a `204` (the
    /// server's way to say "stop", by the WHATWG HTML spec's event stream
    /// rules), any other non-`5xx` status, an answer that is not an event
    /// stream, and an opening refused as a malformed request or for want
    /// of a budget. Everything else (a `5xx`, `408`, `429`, a transport
    /// failure, the circuit open, a cut, an idle stream, a malformed frame,
    /// a bad close code) is transient.
    ///
    /// ```
    /// use budget_core::stream::StreamError;
    /// use http::StatusCode;
    /// let status = |code| StreamError::Status { status: StatusCode::from_u16(code).unwrap(), retry_after: None };
    /// assert!(status(204).is_final() && status(401).is_final() && status(404).is_final());
    /// assert!(!status(429).is_final() && !status(408).is_final() && !status(502).is_final());
    /// assert!(!StreamError::Idle { after: std::time::Duration::from_secs(30) }.is_final());
    /// ```
    pub fn is_final(&self) -> bool {
        match self {
            Self::Status { status, .. } => {
                !(status.is_server_error()
                    || *status == StatusCode::REQUEST_TIMEOUT
                    || *status == StatusCode::TOO_MANY_REQUESTS)
            }
            Self::NotEventStream { .. } => true,
            Self::Open(e) => matches!(e.kind(), CallErrorKind::Request | CallErrorKind::NoBudget),
            _ => false,
        }
    }

    /// How long the server asked to wait (an opening's `Retry-After`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::stream::StreamError;
    /// let e = StreamError::Status {
    ///     status: http::StatusCode::TOO_MANY_REQUESTS,
    ///     retry_after: Some(Duration::from_secs(1)),
    /// };
    /// assert_eq!(e.retry_after(), Some(Duration::from_secs(1)));
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            Self::Open(e) => e.retry_after(),
            _ => None,
        }
    }
}
