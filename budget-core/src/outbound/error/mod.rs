//! [`CallError`]: a dependency call that produced no usable response, and
//! the small typed errors in its source chain.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

use crate::floor::BelowFloor;
use crate::problem::{Problem, ProblemKind};
use crate::retry::TransportKind;

mod causes;

pub use causes::{AttemptTimedOut, BodyTooLarge, NoPermitInBudget};

/// A boxed error, as kept in a [`CallError`]'s source chain.
pub type BoxError = Box<dyn StdError + Send + Sync>;

pub(crate) use crate::error_chain;

/// What kind of failure a [`CallError`] is.
///
/// The first four are calls that were *not made* (no I/O happened, see
/// [`CallError::is_unavailable`]); the others ended after at least one
/// attempt (or, for [`Request`](Self::Request) and
/// [`Decode`](Self::Decode), on our side of the wire).
///
/// # Example
///
/// ```
/// use budget_core::client::CallErrorKind;
/// assert_eq!(CallErrorKind::BelowFloor.as_str(), "below-floor");
/// assert!(CallErrorKind::CircuitOpen.is_unavailable());
/// assert!(!CallErrorKind::Timeout.is_unavailable());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallErrorKind {
    /// Budget mode, and no budget: the call was made outside a budget-aware
    /// request (no [`context`](crate::context)) and none was given with
    /// [`budget`][request-budget]. A bug in the caller.
    ///
    #[cfg_attr(
        feature = "client",
        doc = "[request-budget]: crate::client::RequestBuilder::budget"
    )]
    #[cfg_attr(not(feature = "client"), doc = "[request-budget]: crate::docs::client")]
    NoBudget,
    /// Not made: what is left of the budget (net of the reserve) is below
    /// the dependency's floor, or nothing is left at all.
    BelowFloor,
    /// Not made: the dependency's circuit is open.
    CircuitOpen,
    /// Not made: no concurrency permit came free while the budget still
    /// allowed the call.
    NoPermit,
    /// The last attempt ran out of time (in budget mode: the budget ran out).
    Timeout,
    /// The last attempt could not connect within the connect cap.
    ConnectTimeout,
    /// The last attempt could not connect (refused, unreachable, DNS).
    Connect,
    /// The connection was reset or closed before a response head arrived.
    Reset,
    /// The response body failed after its head arrived, or was larger than
    /// `max_body`.
    Body,
    /// The dependency answered with an error status
    /// ([`BudgetResponse::error_for_status`][error-for-status]).
    ///
    #[cfg_attr(
        feature = "client",
        doc = "[error-for-status]: crate::client::BudgetResponse::error_for_status"
    )]
    #[cfg_attr(
        not(feature = "client"),
        doc = "[error-for-status]: crate::docs::client"
    )]
    Status,
    /// The response body is not what the caller expected (JSON).
    Decode,
    /// The request could not be built (a bad header, path or JSON body).
    Request,
    /// Not made: the dependency's [token source][token-source] gave
    /// no bearer token for the call's first attempt (it failed, or did not
    /// answer while the budget still allowed the call; see
    /// [`TokenUnavailable`][token-unavailable] in the source chain).
    ///
    #[cfg_attr(
        feature = "client",
        doc = "[token-source]: crate::client::auth::TokenSource"
    )]
    #[cfg_attr(not(feature = "client"), doc = "[token-source]: crate::docs::client")]
    #[cfg_attr(
        feature = "client",
        doc = "[token-unavailable]: crate::client::auth::TokenUnavailable"
    )]
    #[cfg_attr(
        not(feature = "client"),
        doc = "[token-unavailable]: crate::docs::client"
    )]
    Auth,
    /// Not made: the dependency's host name gave no endpoints (never
    /// resolved; see [`DependencyConfig::resolve_interval`](crate::client::DependencyConfig::resolve_interval)).
    /// A `502 dependency-failed`: no waiting makes a name resolve.
    Unresolved,
    /// Anything else (TLS, protocol).
    Other,
}

impl CallErrorKind {
    /// The kind's name for logs: `below-floor`, `circuit-open`, `timeout`, ...
    ///
    /// ```
    /// use budget_core::client::CallErrorKind;
    /// assert_eq!(CallErrorKind::ConnectTimeout.as_str(), "connect-timeout");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            CallErrorKind::NoBudget => "no-budget",
            CallErrorKind::BelowFloor => "below-floor",
            CallErrorKind::CircuitOpen => "circuit-open",
            CallErrorKind::NoPermit => "no-permit",
            CallErrorKind::Timeout => "timeout",
            CallErrorKind::ConnectTimeout => "connect-timeout",
            CallErrorKind::Connect => "connect",
            CallErrorKind::Reset => "reset",
            CallErrorKind::Body => "body",
            CallErrorKind::Status => "status",
            CallErrorKind::Decode => "decode",
            CallErrorKind::Request => "request",
            CallErrorKind::Auth => "auth",
            CallErrorKind::Unresolved => "unresolved",
            CallErrorKind::Other => "other",
        }
    }

    /// True for the calls that were not made because the dependency could
    /// not be called in time ([`BelowFloor`](Self::BelowFloor),
    /// [`CircuitOpen`](Self::CircuitOpen), [`NoPermit`](Self::NoPermit)):
    /// the cases `on_unavailable = "skip"` turns into a
    /// [`Skipped`][skipped].
    ///
    /// ```
    /// use budget_core::client::CallErrorKind;
    /// assert!(CallErrorKind::NoPermit.is_unavailable());
    /// assert!(!CallErrorKind::NoBudget.is_unavailable());
    /// ```
    #[cfg_attr(feature = "client", doc = "[skipped]: crate::client::Skipped")]
    #[cfg_attr(not(feature = "client"), doc = "[skipped]: crate::docs::client")]
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            CallErrorKind::BelowFloor | CallErrorKind::CircuitOpen | CallErrorKind::NoPermit
        )
    }

    fn from_transport(kind: TransportKind) -> Self {
        match kind {
            TransportKind::Connect => CallErrorKind::Connect,
            TransportKind::ConnectTimeout => CallErrorKind::ConnectTimeout,
            TransportKind::Timeout => CallErrorKind::Timeout,
            TransportKind::Reset => CallErrorKind::Reset,
            TransportKind::Body => CallErrorKind::Body,
            _ => CallErrorKind::Other,
        }
    }
}

impl fmt::Display for CallErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A dependency call that produced no usable response.
///
/// An HTTP answer of any status is *not* a `CallError`: `send()` returns it
/// as a [`BudgetResponse`][budget-response] (as reqwest does), and
/// [`error_for_status`][error-for-status] turns an
/// error status into one when the caller wants `?`.
///
/// The source chain is intact: the floor's [`BelowFloor`](crate::floor::BelowFloor),
/// the breaker's [`CircuitOpen`](crate::breaker::CircuitOpen), an
/// [`AttemptTimedOut`], a [`BodyTooLarge`], a [`NoPermitInBudget`] or the
/// underlying `reqwest::Error` (without its URL: a URL can carry
/// credentials).
///
/// Turn it into the contract's answer with [`problem`](Self::problem)
/// (`504` for a call that did not fit in the budget or got no usable
/// answer, `503` with `Retry-After` for an open circuit, the dependency's
/// own `429`/`503` when its `Retry-After` did not fit, `502` for an error
/// status or an unusable body). With the `server`
/// feature it is an axum `IntoResponse`, so a handler can `?` it.
///
/// # Example
///
/// ```
/// # async fn run(pricing: budget_core::client::BudgetClient) {
/// match pricing.get("/quote").send().await {
///     Ok(res) => println!("{} after {} attempts", res.status(), res.attempts()),
///     Err(e) if e.is_below_floor() => println!("not called: {e}"),
///     Err(e) => println!("failed: {e}; answering {}", e.problem().status),
/// }
/// # }
/// ```
#[cfg_attr(
    feature = "client",
    doc = "[budget-response]: crate::client::BudgetResponse"
)]
#[cfg_attr(
    not(feature = "client"),
    doc = "[budget-response]: crate::docs::client"
)]
#[cfg_attr(
    feature = "client",
    doc = "[error-for-status]: crate::client::BudgetResponse::error_for_status"
)]
#[cfg_attr(
    not(feature = "client"),
    doc = "[error-for-status]: crate::docs::client"
)]
#[derive(Debug, thiserror::Error)]
#[error("call to `{dependency}` {}", Summary(self))]
pub struct CallError {
    dependency: Arc<str>,
    kind: CallErrorKind,
    attempts: u32,
    budget_exhausted: bool,
    remaining: Option<Duration>,
    floor: Option<Duration>,
    retry_after: Option<Duration>,
    status: Option<StatusCode>,
    passes_up: bool,
    /// The ledger's skip note of a call that was not made.
    skip_note: Option<String>,
    #[source]
    source: Option<BoxError>,
}

/// The part of the message after the dependency's name.
struct Summary<'a>(&'a CallError);

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.0;
        let what = match e.kind {
            CallErrorKind::NoBudget => {
                return f.write_str(
                    "not made: no request budget (not inside a budget-aware request, \
                     and none given with `.budget()`)",
                );
            }
            CallErrorKind::BelowFloor => {
                // The floor's own text, the numbers that decided it: the
                // same as the ledger's skip note.
                let below = e
                    .source
                    .as_deref()
                    .and_then(|s| s.downcast_ref::<BelowFloor>());
                return match below {
                    Some(below) => write!(f, "not made: {below}"),
                    None => f.write_str("not made: budget below its floor"),
                };
            }
            CallErrorKind::CircuitOpen => return f.write_str("not made: circuit open"),
            CallErrorKind::NoPermit => {
                return f.write_str("not made: no concurrency permit within the budget");
            }
            CallErrorKind::Request => return f.write_str("not made: the request is invalid"),
            CallErrorKind::Auth => return f.write_str("not made: no bearer token"),
            CallErrorKind::Unresolved => {
                return f.write_str("not made: its host name gave no endpoints");
            }
            CallErrorKind::Decode => return f.write_str("answered a body that does not decode"),
            CallErrorKind::Status => {
                let status = e.status.unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                return write!(f, "answered {status} after {}", Attempts(e.attempts));
            }
            CallErrorKind::Timeout if e.budget_exhausted => "ran out of budget",
            CallErrorKind::Timeout => "timed out",
            CallErrorKind::ConnectTimeout => "timed out connecting",
            CallErrorKind::Connect => "could not connect",
            CallErrorKind::Reset => "had its connection reset",
            CallErrorKind::Body => "failed reading the response body",
            CallErrorKind::Other => "failed",
        };
        write!(f, "{what} after {}", Attempts(e.attempts))
    }
}

struct Attempts(u32);

impl fmt::Display for Attempts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => f.write_str("1 attempt"),
            n => write!(f, "{n} attempts"),
        }
    }
}

impl CallError {
    pub(crate) fn new(dependency: Arc<str>, kind: CallErrorKind) -> Self {
        Self {
            dependency,
            kind,
            attempts: 0,
            budget_exhausted: false,
            remaining: None,
            floor: None,
            retry_after: None,
            status: None,
            passes_up: false,
            skip_note: None,
            source: None,
        }
    }

    pub(crate) fn from_transport(dependency: Arc<str>, kind: TransportKind) -> Self {
        Self::new(dependency, CallErrorKind::from_transport(kind))
    }

    /// The same error without its source, for a copy of one found by
    /// reference inside another error's chain (a retry middleware's).
    #[cfg(feature = "reqwest-middleware")]
    pub(crate) fn echo(&self) -> Self {
        Self {
            dependency: Arc::clone(&self.dependency),
            skip_note: self.skip_note.clone(),
            source: None,
            ..*self
        }
    }

    /// What a layer in the caller's stack gives back for this error: the
    /// stack's own error `own` of the last attempt, as it came, when the
    /// call failed in the transport (no connection, a reset, a body that
    /// broke off), so that the stack's other layers (a retry middleware)
    /// read it as theirs; else this error, made the stack's by `wrap` (a
    /// call not made, or out of budget).
    #[cfg(any(
        feature = "grpc",
        feature = "tower-client",
        feature = "reqwest-middleware"
    ))]
    pub(crate) fn given_back<E>(self, own: Option<E>, wrap: impl FnOnce(Self) -> E) -> E {
        let transport = matches!(
            self.kind,
            CallErrorKind::Connect
                | CallErrorKind::ConnectTimeout
                | CallErrorKind::Reset
                | CallErrorKind::Other
                | CallErrorKind::Body
        );
        match own {
            Some(own) if transport => own,
            _ => wrap(self),
        }
    }

    pub(crate) fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    pub(crate) fn with_boxed_source(mut self, source: Option<BoxError>) -> Self {
        self.source = source;
        self
    }

    pub(crate) fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }

    pub(crate) fn with_budget(mut self, remaining: Duration, exhausted: bool) -> Self {
        self.remaining = Some(remaining);
        self.budget_exhausted = exhausted;
        self
    }

    pub(crate) fn with_floor(mut self, floor: Duration) -> Self {
        self.floor = Some(floor);
        self
    }

    pub(crate) fn with_retry_after(mut self, retry_after: Option<Duration>) -> Self {
        self.retry_after = retry_after;
        self
    }

    /// The error's budget, floor, message and source from `below`, the
    /// refusal of a call below its floor.
    pub(crate) fn below(self, below: BelowFloor) -> Self {
        self.with_budget(below.remaining(), below.remaining().is_zero())
            .with_floor(below.floor())
            .with_source(below)
    }

    /// Keeps `note`, the ledger's skip note of a call not made, for
    /// [`Skipped::reason`](crate::client::Skipped::reason).
    pub(crate) fn with_skip_note(mut self, note: String) -> Self {
        self.skip_note = Some(note);
        self
    }

    /// The ledger's skip note, for a call that was not made.
    #[cfg(any(feature = "client", test))]
    pub(crate) fn skip_note(&self) -> Option<&str> {
        self.skip_note.as_deref()
    }

    #[cfg(any(feature = "client", test))]
    pub(crate) fn with_status(mut self, status: StatusCode, passes_up: bool) -> Self {
        self.status = Some(status);
        self.passes_up = passes_up;
        self
    }

    /// What kind of failure this is.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) {
    /// use budget_core::client::CallErrorKind;
    /// if let Err(e) = c.get("").send().await {
    ///     if e.kind() == CallErrorKind::Reset { /* ... */ }
    /// }
    /// # }
    /// ```
    pub fn kind(&self) -> CallErrorKind {
        self.kind
    }

    /// The dependency's configured name.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) {
    /// if let Err(e) = c.get("").send().await {
    ///     assert_eq!(e.dependency(), c.name());
    /// }
    /// # }
    /// ```
    pub fn dependency(&self) -> &str {
        &self.dependency
    }

    /// Attempts made: 0 for a call that was not made.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) {
    /// if let Err(e) = c.get("").send().await {
    ///     if e.is_unavailable() { assert_eq!(e.attempts(), 0); }
    /// }
    /// # }
    /// ```
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The call ended because the budget ran out: the last attempt reached
    /// the deadline, or no concurrency permit came free in time.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) {
    /// if let Err(e) = c.get("").send().await {
    ///     if e.is_budget_exhausted() { assert_eq!(e.problem().status, 504); }
    /// }
    /// # }
    /// ```
    pub fn is_budget_exhausted(&self) -> bool {
        self.budget_exhausted
    }

    /// The call was not made: the remaining budget was below the floor.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) {
    /// if let Err(e) = c.get("").send().await {
    ///     if e.is_below_floor() { assert_eq!(e.attempts(), 0); }
    /// }
    /// # }
    /// ```
    pub fn is_below_floor(&self) -> bool {
        self.kind == CallErrorKind::BelowFloor
    }

    /// The call was not made: the circuit is open; see
    /// [`retry_after`](Self::retry_after).
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) {
    /// if let Err(e) = c.get("").send().await {
    ///     if e.is_circuit_open() { assert!(e.retry_after().is_some()); }
    /// }
    /// # }
    /// ```
    pub fn is_circuit_open(&self) -> bool {
        self.kind == CallErrorKind::CircuitOpen
    }

    /// The last attempt could not connect (including a connect timeout).
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) {
    /// if let Err(e) = c.get("").send().await {
    ///     if e.is_connect() && e.is_timeout() { /* blackholed */ }
    /// }
    /// # }
    /// ```
    pub fn is_connect(&self) -> bool {
        matches!(
            self.kind,
            CallErrorKind::Connect | CallErrorKind::ConnectTimeout
        )
    }

    /// The last attempt, or its connect, ran out of time (also true when
    /// the deadline was reached waiting for a concurrency permit).
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) {
    /// if let Err(e) = c.get("").send().await {
    ///     println!("timeout: {}", e.is_timeout());
    /// }
    /// # }
    /// ```
    pub fn is_timeout(&self) -> bool {
        matches!(
            self.kind,
            CallErrorKind::Timeout | CallErrorKind::ConnectTimeout | CallErrorKind::NoPermit
        )
    }

    /// The call was not made (below the floor, circuit open, no permit in
    /// budget): what `on_unavailable = "skip"` forgives.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) {
    /// if let Err(e) = c.get("").send().await {
    ///     if e.is_unavailable() { assert_eq!(e.attempts(), 0); }
    /// }
    /// # }
    /// ```
    pub fn is_unavailable(&self) -> bool {
        self.kind.is_unavailable()
    }

    /// How long the caller should wait before trying again: the open
    /// circuit's time until its probe, or the dependency's own
    /// `Retry-After` when it asked for a wait that did not fit.
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) {
    /// if let Err(e) = c.get("").send().await {
    ///     if let Some(wait) = e.retry_after() { println!("come back in {wait:?}"); }
    /// }
    /// # }
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The dependency's status, for [`CallErrorKind::Status`].
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) {
    /// if let Err(e) = c.get("").send().await.and_then(|r| r.error_for_status()) {
    ///     println!("{:?}", e.status());
    /// }
    /// # }
    /// ```
    pub fn status(&self) -> Option<StatusCode> {
        self.status
    }

    /// The problem body (docs/contract.md §3) a handler answers with:
    ///
    /// | error | status |
    /// | --- | --- |
    /// | below the floor, budget ran out (timeout at the deadline, no permit) | `504` |
    /// | no usable answer: refused, connect timeout, reset, timeout, body failed | `504` (`dependency-unavailable`) |
    /// | circuit open | `503` with `Retry-After` |
    /// | the dependency's `429`/`503` whose `Retry-After` did not fit | the same status, with `Retry-After` |
    /// | an error status after the retries, a body that is not JSON, anything else | `502` |
    ///
    /// It names the dependency, and the remaining budget and floor where
    /// they apply. Its `detail` is the error chain (never a URL or a body).
    ///
    /// ```
    /// # async fn run(c: budget_core::client::BudgetClient) {
    /// if let Err(e) = c.get("").send().await {
    ///     let p = e.problem();
    ///     assert_eq!(p.dependency.as_deref(), Some(c.name()));
    /// }
    /// # }
    /// ```
    pub fn problem(&self) -> Problem {
        let kind = match self.kind {
            CallErrorKind::BelowFloor => ProblemKind::DependencyOutOfBudget,
            _ if self.budget_exhausted => ProblemKind::DependencyOutOfBudget,
            CallErrorKind::CircuitOpen => ProblemKind::CircuitOpen,
            CallErrorKind::Status if self.passes_up => ProblemKind::Deferred {
                status: self.status.map_or(503, |s| s.as_u16()),
            },
            // No answer came through: the caller sees a gateway timeout, as
            // for a hang (docs/contract.md §3, its fault shapes).
            CallErrorKind::Connect
            | CallErrorKind::ConnectTimeout
            | CallErrorKind::Reset
            | CallErrorKind::Timeout
            | CallErrorKind::Body
            | CallErrorKind::NoPermit => ProblemKind::DependencyUnavailable,
            _ => ProblemKind::DependencyFailed,
        };
        let mut problem = Problem::new(kind, error_chain(self)).with_dependency(&*self.dependency);
        if let Some(remaining) = self.remaining {
            problem = problem.with_remaining(remaining);
        }
        if let Some(floor) = self.floor {
            problem = problem.with_floor(floor);
        }
        if let Some(wait) = self.retry_after {
            problem = problem.with_retry_after(wait);
        }
        problem
    }
}

impl From<&CallError> for Problem {
    fn from(e: &CallError) -> Self {
        e.problem()
    }
}

impl From<CallError> for Problem {
    fn from(e: CallError) -> Self {
        e.problem()
    }
}

#[cfg(feature = "server")]
impl axum::response::IntoResponse for CallError {
    /// The [`problem`](CallError::problem) as an `application/problem+json`
    /// response with `Retry-After` where it applies. The budget layer adds
    /// the request's `Server-Timing` ledger on its way out.
    fn into_response(self) -> axum::response::Response {
        self.problem().into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::floor::Floor;

    fn dep() -> Arc<str> {
        Arc::from("pricing")
    }

    #[test]
    fn messages_are_lower_case_and_chain_their_source() {
        let below = Floor::new(Duration::from_millis(1000))
            .check(Duration::from_millis(850))
            .unwrap_err();
        let e = CallError::new(dep(), CallErrorKind::BelowFloor).below(below);
        assert_eq!(
            e.to_string(),
            "call to `pricing` not made: 850ms < floor 1000ms"
        );
        assert_eq!(e.source().unwrap().to_string(), "850ms < floor 1000ms");
        let p = e.problem();
        assert_eq!(p.status, 504);
        assert_eq!((p.remaining_ms, p.floor_ms), (Some(850), Some(1000)));
        // The detail says the floor's text once, though it is the source too.
        assert_eq!(p.detail, "call to `pricing` not made: 850ms < floor 1000ms");
    }

    /// The message, the problem's detail and the ledger's skip note are
    /// one text, the per-hop reserve named when it decided.
    #[test]
    fn a_refusal_names_the_reserve_the_floor_and_what_was_left() {
        let ms = Duration::from_millis;
        for (floor, left, reserve, text) in [
            (
                0,
                5,
                5,
                "no budget left: 5ms left, all of it the 5ms per-hop reserve",
            ),
            (20, 8, 5, "3ms left after the 5ms reserve < floor 20ms"),
            (20, 3, 0, "3ms < floor 20ms"),
            (0, 0, 0, "no budget left"),
        ] {
            let below = Floor::new(ms(floor))
                .check_after_reserve(ms(left), ms(reserve))
                .unwrap_err();
            let e = CallError::new(dep(), CallErrorKind::BelowFloor)
                .with_skip_note(below.skip_note())
                .below(below);
            let message = format!("call to `pricing` not made: {text}");
            assert_eq!(e.to_string(), message);
            assert_eq!(e.problem().detail, message);
            assert_eq!(e.skip_note(), Some(format!("skipped: {text}").as_str()));
            assert_eq!(e.problem().floor_ms, Some(floor));
        }
    }

    #[test]
    fn section3_statuses() {
        let timeout = CallError::from_transport(dep(), TransportKind::Timeout)
            .with_attempts(2)
            .with_budget(Duration::ZERO, true)
            .with_source(AttemptTimedOut::new(Duration::from_millis(300)));
        assert_eq!(
            timeout.to_string(),
            "call to `pricing` ran out of budget after 2 attempts"
        );
        assert_eq!(timeout.problem().status, 504);
        assert!(timeout.is_timeout() && timeout.is_budget_exhausted());

        let open = CallError::new(dep(), CallErrorKind::CircuitOpen)
            .with_retry_after(Some(Duration::from_millis(1500)));
        let p = open.problem();
        assert_eq!((p.status, p.retry_after_ms), (503, Some(1500)));
        assert!(p.retryable);

        let deferred = CallError::new(dep(), CallErrorKind::Status)
            .with_attempts(1)
            .with_status(StatusCode::TOO_MANY_REQUESTS, true)
            .with_retry_after(Some(Duration::from_secs(30)));
        let p = deferred.problem();
        assert_eq!((p.status, p.retry_after_ms), (429, Some(30_000)));
        assert_eq!(
            deferred.to_string(),
            "call to `pricing` answered 429 Too Many Requests after 1 attempt"
        );

        let refused = CallError::from_transport(dep(), TransportKind::Connect).with_attempts(3);
        assert_eq!(refused.problem().status, 504);
        assert_eq!(
            refused.problem().type_uri,
            "urn:budget:problem:dependency-unavailable"
        );
        assert!(refused.is_connect() && !refused.is_timeout());
        let plain_503 = CallError::new(dep(), CallErrorKind::Status)
            .with_status(StatusCode::SERVICE_UNAVAILABLE, false);
        assert_eq!(plain_503.problem().status, 502);
        assert_eq!(
            CallError::new(dep(), CallErrorKind::NoBudget)
                .problem()
                .status,
            502
        );
    }
}
