//! Classification: [`Outcome`], [`TransportKind`], [`Class`], [`Classifier`],
//! and [`is_idempotent`].
//!
//! The module is private: its items are public in [`crate::retry`], and
//! their docs carry the design notes.

use std::fmt;
use std::time::Duration;

use http::header::{HeaderMap, HeaderName, RETRY_AFTER};
use http::{Method, StatusCode};

use super::retry_after::parse_retry_after;
use crate::clock::WallClock;
use crate::grpc_status::{GrpcCode, Pushback};
use crate::proxy::{ProxyRefusal, ProxyReply};

/// The `Idempotency-Key` request header
/// (draft-ietf-httpapi-idempotency-key-header): with it, a POST or PATCH may
/// be retried.
///
/// # Example
///
/// ```
/// assert_eq!(budget_core::retry::IDEMPOTENCY_KEY.as_str(), "idempotency-key");
/// ```
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The statuses retried by default (docs/contract.md §2 rule 5): 408, 429,
/// 500, 502, 503, 504.
///
/// # Example
///
/// ```
/// use budget_core::retry::DEFAULT_RETRYABLE_STATUSES;
/// assert!(DEFAULT_RETRYABLE_STATUSES.contains(&http::StatusCode::TOO_MANY_REQUESTS));
/// assert!(!DEFAULT_RETRYABLE_STATUSES.contains(&http::StatusCode::NOT_IMPLEMENTED));
/// ```
pub const DEFAULT_RETRYABLE_STATUSES: [StatusCode; 6] = [
    StatusCode::REQUEST_TIMEOUT,
    StatusCode::TOO_MANY_REQUESTS,
    StatusCode::INTERNAL_SERVER_ERROR,
    StatusCode::BAD_GATEWAY,
    StatusCode::SERVICE_UNAVAILABLE,
    StatusCode::GATEWAY_TIMEOUT,
];

/// The gRPC statuses retried by default: `UNAVAILABLE` alone, as gRPC's
/// retry design advises (the others say the call reached the server).
///
/// ```
/// use budget_core::grpc::GrpcCode;
/// assert_eq!(budget_core::retry::DEFAULT_RETRYABLE_GRPC_CODES, [GrpcCode::Unavailable]);
/// ```
pub const DEFAULT_RETRYABLE_GRPC_CODES: [GrpcCode; 1] = [GrpcCode::Unavailable];

/// What one attempt ended with.
///
/// Not `#[non_exhaustive]`: the server answered (over HTTP or gRPC), a
/// proxy in the path answered in its place, or nothing answered, so a
/// caller's `match` stays exhaustive; new kinds of failure go into
/// [`TransportKind`] and [`ProxyRefusal`], which are.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::retry::{Outcome, TransportKind};
/// use http::StatusCode;
///
/// let throttled = Outcome::Status {
///     status: StatusCode::TOO_MANY_REQUESTS,
///     retry_after: Some(Duration::from_secs(1)),
/// };
/// assert_eq!(throttled.to_string(), "429");
/// assert_eq!(Outcome::Transport(TransportKind::ConnectTimeout).to_string(), "connect-timeout");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The server answered with a status.
    Status {
        /// The response status.
        status: StatusCode,
        /// The response's `Retry-After`, already parsed (see
        /// [`parse_retry_after`]); `None` when absent or malformed.
        retry_after: Option<Duration>,
    },
    /// No response head was received.
    Transport(TransportKind),
    /// A gRPC answer whose head carries a `grpc-status` other than `OK`
    /// (a trailers-only answer: the call failed before any message). An
    /// answer with messages reads as its HTTP status (`200`), its
    /// `grpc-status` still to come in the trailers.
    Grpc {
        /// The status code as on the wire (`14`: `UNAVAILABLE`).
        code: u8,
        /// The answer's `grpc-retry-pushback-ms`, if it gave a readable
        /// one.
        pushback: Option<Pushback>,
    },
    /// The proxy in front of the dependency (Envoy) answered itself: its
    /// route timeout, an overflowed circuit breaker, a failed connection
    /// (docs/contract.md §2, "Envoy in the path"). Not the dependency's
    /// answer: its own class ([`Classifier::classify`]) and ledger text
    /// (`envoy UT: upstream request timeout (504)`).
    Proxy(ProxyReply),
}

impl Outcome {
    /// A status outcome without `Retry-After`.
    ///
    /// ```
    /// use budget_core::retry::Outcome;
    /// assert_eq!(Outcome::status(http::StatusCode::OK).to_string(), "200");
    /// ```
    pub fn status(status: StatusCode) -> Self {
        Outcome::Status {
            status,
            retry_after: None,
        }
    }

    /// A status outcome from a response head: reads its `Retry-After`
    /// (delay-seconds or an HTTP-date, measured against `clock`). A malformed
    /// `Retry-After` counts as absent (and is logged at debug level): a peer's
    /// bad header must not turn a retryable answer into a fatal one.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use budget_core::clock::FixedClock;
    /// use budget_core::retry::Outcome;
    /// use http::{HeaderMap, StatusCode};
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert(http::header::RETRY_AFTER, "2".parse().unwrap());
    /// let clock = FixedClock::new(SystemTime::UNIX_EPOCH);
    /// let o = Outcome::from_response(StatusCode::SERVICE_UNAVAILABLE, &headers, &clock);
    /// assert_eq!(o.retry_after(), Some(Duration::from_secs(2)));
    /// ```
    pub fn from_response(status: StatusCode, headers: &HeaderMap, clock: &dyn WallClock) -> Self {
        let retry_after = headers.get(RETRY_AFTER).and_then(|value| {
            parse_retry_after(value.as_bytes(), clock.now())
                .inspect_err(|error| tracing::debug!(%error, "ignoring malformed retry-after"))
                .ok()
        });
        Outcome::Status {
            status,
            retry_after,
        }
    }

    /// The response status, if the server answered.
    ///
    /// ```
    /// use budget_core::retry::{Outcome, TransportKind};
    /// assert_eq!(Outcome::status(http::StatusCode::OK).status_code(), Some(http::StatusCode::OK));
    /// assert_eq!(Outcome::Transport(TransportKind::Reset).status_code(), None);
    /// ```
    pub fn status_code(&self) -> Option<StatusCode> {
        match self {
            Outcome::Status { status, .. } => Some(*status),
            Outcome::Transport(_) | Outcome::Grpc { .. } | Outcome::Proxy(_) => None,
        }
    }

    /// A proxy's refusal read as the answer it came as (its status, or its
    /// `grpc-status`), for the rules that have nothing of their own for
    /// its kind ([`ProxyRefusal::Other`]).
    pub(crate) fn as_sent(reply: &ProxyReply) -> Self {
        match reply.grpc_code() {
            Some(code) => Outcome::Grpc {
                code,
                pushback: None,
            },
            None => Outcome::status(reply.status()),
        }
    }

    /// The server's `Retry-After` (over gRPC, its
    /// `grpc-retry-pushback-ms`), if it gave one.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::grpc::Pushback;
    /// use budget_core::retry::Outcome;
    /// assert_eq!(Outcome::status(http::StatusCode::OK).retry_after(), None);
    /// let pushed = Outcome::Grpc { code: 14, pushback: Some(Pushback::After(Duration::from_millis(20))) };
    /// assert_eq!(pushed.retry_after(), Some(Duration::from_millis(20)));
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Outcome::Status { retry_after, .. } => *retry_after,
            Outcome::Grpc {
                pushback: Some(Pushback::After(wait)),
                ..
            } => Some(*wait),
            Outcome::Transport(_) | Outcome::Grpc { .. } | Outcome::Proxy(_) => None,
        }
    }
}

impl fmt::Display for Outcome {
    /// The status code (`503`), the gRPC status (`grpc-14`), the failure
    /// kind (`connect`) or the proxy's refusal (`envoy UO: upstream
    /// overflow (503)`), as the ledger records an attempt's outcome.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Status { status, .. } => write!(f, "{}", status.as_u16()),
            Outcome::Transport(kind) => kind.fmt(f),
            Outcome::Grpc { code, .. } => write!(f, "grpc-{code}"),
            Outcome::Proxy(reply) => reply.fmt(f),
        }
    }
}

/// Why an attempt produced no response head. The HTTP client maps its own
/// errors (reqwest's `is_connect`, `is_timeout`, ...) into these.
///
/// # Example
///
/// ```
/// use budget_core::retry::TransportKind;
/// assert_eq!(TransportKind::Timeout.to_string(), "timeout");
/// assert!(TransportKind::Reset.is_retryable());
/// assert!(!TransportKind::Body.is_retryable());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportKind {
    /// The connection could not be made (refused, unreachable, DNS).
    Connect,
    /// The connection was not made within the connect timeout.
    ConnectTimeout,
    /// The attempt ran out of its time limit while budget was left.
    Timeout,
    /// The connection was reset (or closed) before a response head arrived.
    Reset,
    /// The response body failed after its head arrived. Final: the status
    /// was already seen, and half a body says nothing about the next try.
    Body,
    /// Anything else (TLS, protocol, a bad request on our side). Final.
    Other,
}

impl TransportKind {
    /// True for connect failures, connect timeouts, attempt timeouts and
    /// resets (docs/contract.md §2 rule 5).
    ///
    /// ```
    /// use budget_core::retry::TransportKind;
    /// assert!(TransportKind::ConnectTimeout.is_retryable());
    /// assert!(!TransportKind::Other.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        match self {
            TransportKind::Connect
            | TransportKind::ConnectTimeout
            | TransportKind::Timeout
            | TransportKind::Reset => true,
            TransportKind::Body | TransportKind::Other => false,
        }
    }

    /// The kind's name as logs and the ledger show it.
    ///
    /// ```
    /// use budget_core::retry::TransportKind;
    /// assert_eq!(TransportKind::ConnectTimeout.as_str(), "connect-timeout");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            TransportKind::Connect => "connect",
            TransportKind::ConnectTimeout => "connect-timeout",
            TransportKind::Timeout => "timeout",
            TransportKind::Reset => "reset",
            TransportKind::Body => "body",
            TransportKind::Other => "other",
        }
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an outcome means for the call.
///
/// # Example
///
/// ```
/// use budget_core::retry::{Class, Classifier, Outcome};
/// let c = Classifier::default();
/// assert_eq!(c.classify(&Outcome::status(http::StatusCode::GATEWAY_TIMEOUT)), Class::Retryable);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Class {
    /// The server answered with something that is not an error to retry
    /// (1xx, 2xx, 3xx outside the retryable set): the call is done.
    Success,
    /// Worth another attempt, if the request is safe to repeat and the
    /// budget allows.
    Retryable,
    /// Final: another attempt would get the same answer.
    Fatal,
}

/// Sorts outcomes into [`Class`]es, with a configurable set of retryable
/// statuses.
///
/// A status in the set is retryable; otherwise below 400 it is a success and
/// from 400 on it is fatal. Transport failures follow
/// [`TransportKind::is_retryable`].
///
/// Classification is kept apart from the backoff policy (as reqwest-retry
/// keeps its `RetryableStrategy` apart from its `RetryPolicy`): what a
/// failure *means* does not depend on how long one waits before trying again.
///
/// Rules (docs/contract.md §2):
///
/// - rule 5: retryable outcomes are a connect failure (including a connect
///   timeout), an attempt timeout, a connection reset, and the statuses
///   408, 429, 500, 502, 503, 504 (the status set is configurable). Every
///   other 4xx is final. The contract does not list a *reset* by name; it is
///   retried here because, like a refused connection, it says nothing about
///   the request itself, and only requests that are safe to send twice are
///   retried anyway (rule 4). An attempt timeout is retried only "with budget
///   left": that part is the decision's fit check ([`RetryPolicy::decide`]),
///   which stops when no time remains.
/// - rule 4: only idempotent methods retry automatically; POST and PATCH only
///   with an `Idempotency-Key` header ([`is_idempotent`]).
/// - Envoy in the path: a proxy's own refusal ([`Outcome::Proxy`]) is
///   final when the mesh shed the call (an overflowed circuit breaker, the
///   concurrency limit: Envoy itself does not retry an overloaded answer,
///   and the same proxy would shed the retry), retryable when it timed out
///   or could not reach the dependency (as the transport's own timeout and
///   connect failure are), and read as its status otherwise.
///
/// # Example
///
/// ```
/// use budget_core::retry::{Class, Classifier, Outcome};
/// use http::StatusCode;
///
/// // Retry 409 Conflict too, but no longer 500.
/// let c = Classifier::with_statuses([StatusCode::CONFLICT, StatusCode::SERVICE_UNAVAILABLE]);
/// assert_eq!(c.classify(&Outcome::status(StatusCode::CONFLICT)), Class::Retryable);
/// assert_eq!(c.classify(&Outcome::status(StatusCode::INTERNAL_SERVER_ERROR)), Class::Fatal);
/// ```
///
/// The default set:
///
/// ```
/// use budget_core::retry::{Class, Classifier, Outcome, TransportKind};
/// use http::StatusCode;
///
/// let c = Classifier::default();
/// assert_eq!(c.classify(&Outcome::status(StatusCode::OK)), Class::Success);
/// assert_eq!(c.classify(&Outcome::status(StatusCode::SERVICE_UNAVAILABLE)), Class::Retryable);
/// assert_eq!(c.classify(&Outcome::status(StatusCode::NOT_FOUND)), Class::Fatal);
/// assert_eq!(c.classify(&Outcome::Transport(TransportKind::Connect)), Class::Retryable);
/// assert_eq!(c.classify(&Outcome::Transport(TransportKind::Body)), Class::Fatal);
/// ```
///
/// [`RetryPolicy::decide`]: super::RetryPolicy::decide
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classifier {
    /// Sorted, without duplicates.
    statuses: Vec<StatusCode>,
    /// The retryable gRPC status codes, sorted, without duplicates.
    grpc: Vec<u8>,
}

impl Classifier {
    /// A classifier retrying exactly `statuses` (and the retryable transport
    /// failures).
    ///
    /// ```
    /// use budget_core::retry::Classifier;
    /// let c = Classifier::with_statuses([]);
    /// assert!(!c.is_retryable_status(http::StatusCode::SERVICE_UNAVAILABLE));
    /// ```
    pub fn with_statuses(statuses: impl IntoIterator<Item = StatusCode>) -> Self {
        let mut statuses: Vec<StatusCode> = statuses.into_iter().collect();
        statuses.sort_unstable();
        statuses.dedup();
        Self {
            statuses,
            grpc: DEFAULT_RETRYABLE_GRPC_CODES.map(|code| code as u8).to_vec(),
        }
    }

    /// The same classifier, retrying gRPC answers with exactly `codes`
    /// (default: `UNAVAILABLE` alone, as gRPC's retry design advises).
    ///
    /// ```
    /// use budget_core::grpc::{GrpcCode, Pushback};
    /// use budget_core::retry::{Class, Classifier, Outcome};
    /// let c = Classifier::default().with_grpc_codes([GrpcCode::Internal]);
    /// assert_eq!(c.classify(&Outcome::Grpc { code: 13, pushback: None }), Class::Retryable);
    /// assert_eq!(c.classify(&Outcome::Grpc { code: 14, pushback: None }), Class::Fatal);
    /// ```
    pub fn with_grpc_codes(mut self, codes: impl IntoIterator<Item = GrpcCode>) -> Self {
        let mut grpc: Vec<u8> = codes.into_iter().map(|code| code as u8).collect();
        grpc.sort_unstable();
        grpc.dedup();
        self.grpc = grpc;
        self
    }

    /// True when `status` is in the retryable set.
    ///
    /// ```
    /// use budget_core::retry::Classifier;
    /// assert!(Classifier::default().is_retryable_status(http::StatusCode::REQUEST_TIMEOUT));
    /// ```
    pub fn is_retryable_status(&self, status: StatusCode) -> bool {
        self.statuses.binary_search(&status).is_ok()
    }

    /// The retryable statuses, in ascending order.
    ///
    /// ```
    /// use budget_core::retry::Classifier;
    /// assert_eq!(Classifier::default().statuses().len(), 6);
    /// ```
    pub fn statuses(&self) -> &[StatusCode] {
        &self.statuses
    }

    /// The class of `outcome`.
    ///
    /// ```
    /// use budget_core::retry::{Class, Classifier, Outcome};
    /// let c = Classifier::default();
    /// assert_eq!(c.classify(&Outcome::status(http::StatusCode::NOT_MODIFIED)), Class::Success);
    /// assert_eq!(c.classify(&Outcome::status(http::StatusCode::NOT_IMPLEMENTED)), Class::Fatal);
    /// ```
    pub fn classify(&self, outcome: &Outcome) -> Class {
        match outcome {
            Outcome::Status { status, .. } if self.is_retryable_status(*status) => Class::Retryable,
            Outcome::Status { status, .. } if status.as_u16() < 400 => Class::Success,
            Outcome::Status { .. } => Class::Fatal,
            Outcome::Transport(kind) if kind.is_retryable() => Class::Retryable,
            Outcome::Transport(_) => Class::Fatal,
            // A negative pushback is the server's "do not retry".
            Outcome::Grpc {
                pushback: Some(Pushback::DoNotRetry),
                ..
            } => Class::Fatal,
            Outcome::Grpc { code, .. } if self.grpc.binary_search(code).is_ok() => Class::Retryable,
            Outcome::Grpc { .. } => Class::Fatal,
            // The mesh shedding load: the same proxy would shed the retry.
            Outcome::Proxy(reply) if reply.refusal().sheds() => Class::Fatal,
            Outcome::Proxy(reply) if reply.refusal() == ProxyRefusal::Other => {
                self.classify(&Outcome::as_sent(reply))
            }
            // A timeout, a failed connection: as the transport's own.
            Outcome::Proxy(_) => Class::Retryable,
        }
    }
}

impl Default for Classifier {
    /// The contract's set: [`DEFAULT_RETRYABLE_STATUSES`].
    fn default() -> Self {
        Self::with_statuses(DEFAULT_RETRYABLE_STATUSES)
    }
}

/// True when a request with `method` and `headers` may be sent more than
/// once (docs/contract.md §2 rule 4).
///
/// GET, HEAD, OPTIONS, PUT, DELETE and TRACE are idempotent (RFC 9110
/// section 9.2.2). POST and PATCH are only when the request carries a
/// non-empty [`IDEMPOTENCY_KEY`] header. Every other method (CONNECT,
/// extension methods) is not.
///
/// Idempotent is not enough to retry: the body must also be replayable
/// (buffered, not a one-shot stream). The caller checks that and passes
/// both as [`DecisionInput::may_retry`](super::DecisionInput::may_retry).
///
/// # Example
///
/// ```
/// use budget_core::retry::{is_idempotent, IDEMPOTENCY_KEY};
/// use http::{HeaderMap, Method};
///
/// let mut headers = HeaderMap::new();
/// assert!(is_idempotent(&Method::GET, &headers));
/// assert!(!is_idempotent(&Method::POST, &headers));
/// headers.insert(IDEMPOTENCY_KEY, "8e03978e-40d5-43e8-bc93-6894a57f9324".parse().unwrap());
/// assert!(is_idempotent(&Method::POST, &headers));
/// ```
pub fn is_idempotent(method: &Method, headers: &HeaderMap) -> bool {
    match *method {
        Method::GET
        | Method::HEAD
        | Method::OPTIONS
        | Method::PUT
        | Method::DELETE
        | Method::TRACE => true,
        Method::POST | Method::PATCH => headers
            .get_all(IDEMPOTENCY_KEY)
            .iter()
            .any(|v| !v.as_bytes().trim_ascii().is_empty()),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
