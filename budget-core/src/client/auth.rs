//! Bearer tokens from a [`TokenSource`], refreshed once on a `401`.
//!
//! A client built with
//! [`BudgetClientBuilder::token_source`][token-source]
//! sends `Authorization: Bearer <token>` on every attempt (marked
//! sensitive: never logged, never indexed by HTTP/2's header compression).
//! The first call fetches the token; later calls reuse it. When a call is
//! answered `401 Unauthorized`:
//!
//! 1. if another call has already replaced the token this one was sent
//!    with, it is retried with the new token at once (tokens carry a
//!    generation number, so a late `401` never causes a second refresh);
//! 2. otherwise the token is refreshed in a single flight
//!    (`single_flight.rs`): the calls that meet a `401` while a refresh is in
//!    the air wait for that one refresh and share its token;
//! 3. each call waits for the refresh out of its own budget, at most until
//!    only the dependency's floor is left (later, the retry could not be
//!    made anyway), and the wait is in the ledger as `<name>-auth`
//!    (`inventory-auth;dur=20`; `desc="failed"` or `desc="timeout"` when
//!    no token came);
//! 4. the call is then made once more with the new token, through the
//!    whole engine again (floor, breaker, permit, its own retries), and its
//!    answer is the call's answer, a second `401` included: one refresh per
//!    call, at most.
//!
//! A refresh that fails, or that does not come in time, ends the call with
//! the `401` it got, as a [`BudgetResponse`] (and so
//! does a retry that is then not made, below the floor or with the circuit
//! open). When the *first* token cannot be had, there is no answer to
//! return: the call is a [`CallErrorKind::Auth`]
//! error, not made, with a [`TokenUnavailable`] source (`502` as a
//! problem, or `504` when the budget ran out waiting).
//!
//! # Every method is retried after a refresh
//!
//! A `401` says the server did not accept the request's credentials, so it
//! did not act on the request: sending it again with other credentials is
//! safe whatever the method, as HTTP authentication schemes do when they
//! answer a challenge. The body is replayable (it is always `Bytes`), so a
//! `POST` without an `Idempotency-Key` is retried after a refresh too, once;
//! the retry rules for other failures are unchanged.
//!
//! A request that carries its own `Authorization` header is sent as it is:
//! no token is added and a `401` is not refreshed.
//!
//! # Example
//!
//! ```no_run
//! use budget_core::client::{BoxError, BudgetClient, DependencyConfig, auth::Token};
//!
//! async fn fetch_token() -> Result<Token, BoxError> {
//!     // Ask the identity provider (not shown); a plain string here.
//!     Ok(Token::bearer("eyJhbGciOi...")?)
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let orders = BudgetClient::builder(DependencyConfig::new("orders", "http://127.0.0.1:9000/orders"))
//!     .token_source(fetch_token) // any `Fn() -> impl Future<Output = Result<Token, BoxError>>`
//!     .build()?;
//! # Ok(()) }
//! ```
//!
#![cfg_attr(
    feature = "client",
    doc = "[token-source]: super::BudgetClientBuilder::token_source"
)]
#![cfg_attr(not(feature = "client"), doc = "[token-source]: crate::docs::client")]

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use http::HeaderValue;
use http::header::AUTHORIZATION;
use tokio::time::Instant;

use super::response::BudgetResponse;
use crate::floor::Floor;
use crate::ledger::{Entry, Ledger};
use crate::outbound::Timing;
use crate::outbound::error::{BoxError, CallError, CallErrorKind, error_chain};
use crate::single_flight::SingleFlight;

/// The ledger metric suffix for the time a call waited for a bearer token
/// (the first one, or a refresh after a `401`): `orders-auth;dur=20`.
///
/// ```
/// assert_eq!(budget_core::client::auth::AUTH_SUFFIX, "-auth");
/// ```
pub const AUTH_SUFFIX: &str = "-auth";

/// A bearer token: what a [`TokenSource`] gives, sent as
/// `Authorization: Bearer <token>`. Its `Debug` never shows the token.
///
/// ```
/// use budget_core::client::auth::Token;
/// let token = Token::bearer("abc.def").unwrap();
/// assert_eq!(format!("{token:?}"), "Token(REDACTED)");
/// assert!(Token::bearer("line\nbreak").is_err());
/// assert!(Token::bearer("").is_err());
/// ```
#[derive(Clone)]
pub struct Token {
    header: HeaderValue,
}

impl Token {
    /// A bearer token; its text must be non-empty and fit in a header
    /// value (visible ASCII and spaces, as RFC 6750's `b64token` is).
    ///
    /// # Errors
    ///
    /// [`InvalidToken`] for an empty token or one with a control or
    /// non-ASCII character.
    ///
    /// ```
    /// # use budget_core::client::auth::Token;
    /// assert!(Token::bearer("mF_9.B5f-4.1JqM").is_ok());
    /// ```
    pub fn bearer(token: impl AsRef<str>) -> Result<Self, InvalidToken> {
        let token = token.as_ref();
        if token.is_empty() || !token.bytes().all(|b| (b' '..=b'~').contains(&b)) {
            return Err(InvalidToken(()));
        }
        let mut header =
            HeaderValue::try_from(format!("Bearer {token}")).map_err(|_| InvalidToken(()))?;
        header.set_sensitive(true);
        Ok(Self { header })
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(REDACTED)")
    }
}

/// A token that cannot be sent: empty, or not a valid header value.
///
/// ```
/// use budget_core::client::auth::Token;
/// let err = Token::bearer("é").unwrap_err();
/// assert_eq!(err.to_string(), "bearer token is empty or not visible ASCII");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bearer token is empty or not visible ASCII")]
pub struct InvalidToken(());

/// Where a client gets its bearer token: asked for the first one, and again
/// when the dependency answers `401` (see the [module docs](self)).
///
/// Implemented for every `Fn() -> impl Future<Output = Result<Token,
/// BoxError>>` that is `Send + Sync + 'static`; implement it on a type of
/// your own to keep state (a refresh token, a client for the identity
/// provider).
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use budget_core::client::{BoxError, auth::{Token, TokenSource}};
///
/// struct Rotating { fetched: AtomicU32 }
///
/// impl TokenSource for Rotating {
///     async fn fetch(&self) -> Result<Token, BoxError> {
///         let n = self.fetched.fetch_add(1, Ordering::SeqCst) + 1;
///         Ok(Token::bearer(format!("token-{n}"))?)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let source = Rotating { fetched: AtomicU32::new(0) };
/// assert!(source.fetch().await.is_ok());
/// assert_eq!(source.fetched.load(Ordering::SeqCst), 1);
/// # }
/// ```
pub trait TokenSource: Send + Sync + 'static {
    /// Fetches a token. The call that fetches it waits for it out of its
    /// own budget (and the calls sharing the refresh, out of theirs); it is
    /// dropped, and the fetch with it, when none of them can wait longer.
    fn fetch(&self) -> impl Future<Output = Result<Token, BoxError>> + Send;
}

impl<F, Fut> TokenSource for F
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Token, BoxError>> + Send,
{
    fn fetch(&self) -> impl Future<Output = Result<Token, BoxError>> + Send {
        self()
    }
}

/// A [`TokenSource`] behind a pointer.
type Fetching<'a> = Pin<Box<dyn Future<Output = Result<Token, BoxError>> + Send + 'a>>;

trait DynTokenSource: Send + Sync {
    fn fetch_boxed(&self) -> Fetching<'_>;
}

impl<T: TokenSource> DynTokenSource for T {
    fn fetch_boxed(&self) -> Fetching<'_> {
        Box::pin(self.fetch())
    }
}

/// No bearer token for a call's first attempt: the
/// [`TokenSource`] failed (its error is the source), or did not answer
/// while the budget still allowed the call.
///
/// ```
/// use budget_core::client::auth::TokenUnavailable;
/// let late = TokenUnavailable::late();
/// assert_eq!(late.to_string(), "no bearer token within the budget");
/// assert!(late.is_late());
/// ```
#[derive(Clone, Debug)]
pub struct TokenUnavailable {
    source: Option<SharedError>,
}

impl TokenUnavailable {
    /// The token source did not answer in time.
    ///
    /// ```
    /// # use budget_core::client::auth::TokenUnavailable;
    /// assert!(std::error::Error::source(&TokenUnavailable::late()).is_none());
    /// ```
    pub fn late() -> Self {
        Self { source: None }
    }

    /// True when the token source did not answer in time (rather than
    /// failing).
    ///
    /// ```
    /// # use budget_core::client::auth::TokenUnavailable;
    /// assert!(TokenUnavailable::late().is_late());
    /// ```
    pub fn is_late(&self) -> bool {
        self.source.is_none()
    }
}

impl fmt::Display for TokenUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            None => f.write_str("no bearer token within the budget"),
            Some(_) => f.write_str("the token source failed"),
        }
    }
}

impl StdError for TokenUnavailable {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_ref()
            .map(|e| &*e.0 as &(dyn StdError + 'static))
    }
}

/// A token source's error, shared by every call that waited for it.
#[derive(Clone, Debug)]
struct SharedError(Arc<dyn StdError + Send + Sync>);

/// The token in use and its generation (1 for the first).
#[derive(Clone)]
struct Current {
    header: HeaderValue,
    generation: u64,
}

/// Why no token came.
enum NoToken {
    Failed(SharedError),
    Late,
}

/// A client's token: its source, the token in use, the refresh in the air.
pub(crate) struct Auth {
    source: Box<dyn DynTokenSource>,
    current: Mutex<Option<Current>>,
    flight: SingleFlight<Current, SharedError>,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth")
            .field("generation", &self.lock().as_ref().map(|c| c.generation))
            .finish_non_exhaustive()
    }
}

impl Auth {
    pub(crate) fn new(source: impl TokenSource) -> Self {
        Self {
            source: Box::new(source),
            current: Mutex::new(None),
            flight: SingleFlight::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Current>> {
        // No user code runs under the lock: a poisoned one is consistent.
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The token in use, if it is newer than generation `replacing` (any
    /// token for `None`).
    fn in_use(&self, replacing: Option<u64>) -> Option<Current> {
        self.lock()
            .as_ref()
            .filter(|c| replacing.is_none_or(|g| c.generation > g))
            .cloned()
    }

    /// A token newer than generation `replacing` (any token for `None`):
    /// the result of one refresh shared by every call that needs it,
    /// waited for until `until`.
    async fn refresh(&self, replacing: Option<u64>, until: Instant) -> Result<Current, NoToken> {
        let refresh = self.flight.run(|| async {
            // A refresh may have landed between the look above and this
            // flight taking off: no second one for the same generation.
            if let Some(current) = self.in_use(replacing) {
                return Ok(current);
            }
            let token = self
                .source
                .fetch_boxed()
                .await
                .map_err(|e| SharedError(Arc::from(e)))?;
            let mut current = self.lock();
            let generation = current
                .as_ref()
                .map_or(1, |c| c.generation.saturating_add(1));
            let fresh = Current {
                header: token.header,
                generation,
            };
            *current = Some(fresh.clone());
            Ok(fresh)
        });
        match tokio::time::timeout_at(until, refresh).await {
            Ok(Ok(current)) => Ok(current),
            Ok(Err(e)) => Err(NoToken::Failed(e)),
            Err(_) => Err(NoToken::Late),
        }
    }
}

/// An answer whose status says whether the token was refused (`401`): a
/// buffered [`BudgetResponse`], or a stream's opening.
pub(crate) trait Answered {
    /// The answer's status.
    fn status(&self) -> http::StatusCode;
}

impl Answered for BudgetResponse {
    fn status(&self) -> http::StatusCode {
        BudgetResponse::status(self)
    }
}

/// Runs a call with the client's bearer token and the refresh rule of the
/// [module docs](self): `send` makes the call (the whole engine) with an
/// `Authorization` value; it is called once, or twice after a `401`.
pub(crate) async fn send_with_token<R, S, Fut>(
    auth: &Auth,
    dependency: &Arc<str>,
    timing: Timing,
    floor: Floor,
    ledger: Option<&Ledger>,
    send: S,
) -> Result<R, CallError>
where
    R: Answered,
    S: Fn(HeaderValue) -> Fut,
    Fut: Future<Output = Result<R, CallError>>,
{
    let first = match wait_for(auth, None, dependency, timing, floor, ledger).await {
        Ok(current) => current,
        Err(no_token) => {
            let unavailable = match no_token {
                NoToken::Failed(e) => TokenUnavailable { source: Some(e) },
                NoToken::Late => TokenUnavailable::late(),
            };
            let mut error = CallError::new(Arc::clone(dependency), CallErrorKind::Auth);
            if let Timing::Budget(net) = timing {
                error = error.with_budget(net.remaining(), unavailable.is_late());
            }
            return Err(error.with_source(unavailable));
        }
    };
    let answer = send(first.header).await;
    match &answer {
        Ok(res) if res.status() == http::StatusCode::UNAUTHORIZED => {}
        _ => return answer,
    }
    let Ok(fresh) = wait_for(
        auth,
        Some(first.generation),
        dependency,
        timing,
        floor,
        ledger,
    )
    .await
    else {
        return answer;
    };
    match send(fresh.header).await {
        // The retry was not made: the 401 is the answer there is.
        Err(e) if e.is_unavailable() => answer,
        retried => retried,
    }
}

/// A token newer than generation `replacing`: the one in use if it is,
/// else a refresh waited for within the call's time, until only `floor` is
/// left of the budget (fixed mode: the fixed timeout); the wait is recorded
/// in `ledger` as `<name>-auth`, a failure logged.
async fn wait_for(
    auth: &Auth,
    replacing: Option<u64>,
    dependency: &Arc<str>,
    timing: Timing,
    floor: Floor,
    ledger: Option<&Ledger>,
) -> Result<Current, NoToken> {
    if let Some(current) = auth.in_use(replacing) {
        return Ok(current);
    }
    let start = Instant::now();
    let until = timing.wait_until(start, floor);
    let result = auth.refresh(replacing, until).await;
    let waited = start.elapsed();
    let desc = match &result {
        Ok(_) => None,
        Err(NoToken::Failed(e)) => {
            tracing::warn!(dependency = %dependency, error = %error_chain(&*e.0), "token source failed");
            Some("failed")
        }
        Err(NoToken::Late) => {
            tracing::debug!(dependency = %dependency, waited_ms = crate::budget::whole_millis(waited), "no bearer token within the budget");
            Some("timeout")
        }
    };
    if let Some(ledger) = ledger {
        ledger.record(Entry::local(
            format!("{dependency}{AUTH_SUFFIX}"),
            waited,
            desc.map(str::to_owned),
        ));
    }
    result
}

/// True when the request brings its own credentials.
pub(crate) fn has_own(headers: &http::HeaderMap) -> bool {
    headers.contains_key(AUTHORIZATION)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use bytes::Bytes;
    use http::StatusCode;

    use super::*;
    use crate::budget::Budget;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn dep() -> Arc<str> {
        Arc::from("orders")
    }

    /// A source whose `n`th fetch gives `token-n` after `took`, or fails
    /// when `fail` is set.
    struct Counting {
        fetched: Arc<AtomicU32>,
        took: Duration,
        fail: bool,
    }

    impl TokenSource for Counting {
        async fn fetch(&self) -> Result<Token, BoxError> {
            let n = self.fetched.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(self.took).await;
            if self.fail {
                return Err("identity provider down".into());
            }
            Ok(Token::bearer(format!("token-{n}"))?)
        }
    }

    fn auth(took: Duration, fail: bool) -> (Arc<Auth>, Arc<AtomicU32>) {
        let fetched = Arc::new(AtomicU32::new(0));
        let source = Counting {
            fetched: Arc::clone(&fetched),
            took,
            fail,
        };
        (Arc::new(Auth::new(source)), fetched)
    }

    /// A dependency that accepts only `Bearer <accepted>`, answering after
    /// `took`; records the headers it got.
    struct Server {
        accepted: Mutex<String>,
        took: Duration,
        seen: Mutex<Vec<String>>,
    }

    impl Server {
        fn new(accepted: &str, took: Duration) -> Arc<Self> {
            Arc::new(Self {
                accepted: Mutex::new(accepted.to_owned()),
                took,
                seen: Mutex::new(Vec::new()),
            })
        }

        async fn call(&self, header: HeaderValue) -> Result<BudgetResponse, CallError> {
            let header = header.to_str().unwrap().to_owned();
            self.seen.lock().unwrap().push(header.clone());
            tokio::time::sleep(self.took).await;
            let ok = header == format!("Bearer {}", self.accepted.lock().unwrap());
            let mut res = http::Response::new(Bytes::new());
            if !ok {
                *res.status_mut() = StatusCode::UNAUTHORIZED;
            }
            Ok(BudgetResponse::new(res, dep(), 1, None, false))
        }

        fn seen(&self) -> Vec<String> {
            self.seen.lock().unwrap().clone()
        }
    }

    async fn call(
        auth: &Auth,
        server: &Server,
        budget: Duration,
        ledger: &Ledger,
    ) -> Result<BudgetResponse, CallError> {
        let timing = Timing::Budget(Budget::new(budget));
        send_with_token(auth, &dep(), timing, Floor::default(), Some(ledger), |h| {
            server.call(h)
        })
        .await
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_call_fetches_the_token_and_pays_for_it() {
        let (auth, fetched) = auth(ms(20), false);
        let server = Server::new("token-1", ms(5));
        let ledger = Ledger::new();
        let res = call(&auth, &server, ms(1000), &ledger).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(ledger.server_timing(), "orders-auth;dur=20");
        // The next call reuses it: no fetch, no ledger entry.
        let ledger = Ledger::new();
        call(&auth, &server, ms(1000), &ledger).await.unwrap();
        assert_eq!(fetched.load(Ordering::SeqCst), 1);
        assert_eq!(ledger.server_timing(), "");
        assert_eq!(server.seen(), ["Bearer token-1", "Bearer token-1"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_401_refreshes_once_and_retries_once_with_the_new_token() {
        let (auth, fetched) = auth(ms(20), false);
        let server = Server::new("token-1", ms(5));
        call(&auth, &server, ms(1000), &Ledger::new())
            .await
            .unwrap();
        *server.accepted.lock().unwrap() = "token-2".into();
        let ledger = Ledger::new();
        let res = call(&auth, &server, ms(1000), &ledger).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(fetched.load(Ordering::SeqCst), 2);
        assert_eq!(ledger.server_timing(), "orders-auth;dur=20");
        assert_eq!(server.seen()[1..], ["Bearer token-1", "Bearer token-2"]);

        // A second 401 after the refresh is the answer: one refresh a call.
        *server.accepted.lock().unwrap() = "never".into();
        let res = call(&auth, &server, ms(1000), &Ledger::new())
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(fetched.load(Ordering::SeqCst), 3);
        assert_eq!(server.seen().len(), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_401s_share_one_refresh_and_a_late_401_refreshes_nothing() {
        let (auth, fetched) = auth(ms(50), false);
        let server = Server::new("token-1", Duration::ZERO);
        call(&auth, &server, ms(1000), &Ledger::new())
            .await
            .unwrap();
        *server.accepted.lock().unwrap() = "token-2".into();
        let calls: Vec<_> = (0..50)
            .map(|_| {
                let (auth, server) = (Arc::clone(&auth), Arc::clone(&server));
                tokio::spawn(async move {
                    call(&auth, &server, ms(1000), &Ledger::new())
                        .await
                        .map(|r| r.status())
                })
            })
            .collect();
        for c in calls {
            assert_eq!(c.await.unwrap().unwrap(), StatusCode::OK);
        }
        assert_eq!(
            fetched.load(Ordering::SeqCst),
            2,
            "one refresh for 50 calls"
        );

        // A call sent with generation 2 whose 401 comes after generation 3
        // replaced it retries with 3 at once, without a fourth fetch.
        *server.accepted.lock().unwrap() = "token-3".into();
        let stale = auth.lock().clone().unwrap();
        assert_eq!(stale.generation, 2);
        auth.refresh(Some(2), Instant::now() + ms(1000))
            .await
            .ok()
            .unwrap();
        assert_eq!(fetched.load(Ordering::SeqCst), 3);
        let start = Instant::now();
        assert_eq!(auth.in_use(Some(stale.generation)).unwrap().generation, 3);
        // And a refresh for it that was already in the air lands on it too.
        let again = auth.refresh(Some(stale.generation), start + ms(1000)).await;
        assert_eq!(again.ok().unwrap().generation, 3);
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(fetched.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_refresh_passes_the_401_up() {
        let fetched = Arc::new(AtomicU32::new(0));
        let failing = Arc::new(AtomicU32::new(0));
        let (fetched2, failing2) = (Arc::clone(&fetched), Arc::clone(&failing));
        // Gives token-1, then fails.
        let auth = Auth::new(move || {
            let (fetched, failing) = (Arc::clone(&fetched2), Arc::clone(&failing2));
            async move {
                if fetched.fetch_add(1, Ordering::SeqCst) == 0 {
                    Ok(Token::bearer("token-1")?)
                } else {
                    failing.fetch_add(1, Ordering::SeqCst);
                    Err(BoxError::from("identity provider down"))
                }
            }
        });
        let server = Server::new("token-1", ms(5));
        call(&auth, &server, ms(1000), &Ledger::new())
            .await
            .unwrap();
        *server.accepted.lock().unwrap() = "token-2".into();
        let ledger = Ledger::new();
        let res = call(&auth, &server, ms(1000), &ledger).await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(failing.load(Ordering::SeqCst), 1);
        assert_eq!(server.seen().len(), 2, "no retry without a new token");
        assert_eq!(ledger.server_timing(), "orders-auth;dur=0;desc=\"failed\"");
    }

    #[tokio::test(start_paused = true)]
    async fn a_refresh_slower_than_the_budget_ends_the_call_with_the_401_at_the_floor() {
        let (auth, _) = auth(ms(5000), false);
        // The first token, fetched with all the time in the world.
        let server = Server::new("token-1", ms(10));
        call(&auth, &server, ms(10_000), &Ledger::new())
            .await
            .unwrap();
        *server.accepted.lock().unwrap() = "token-2".into();
        let ledger = Ledger::new();
        let start = Instant::now();
        let timing = Timing::Budget(Budget::new(ms(500)));
        let res = send_with_token(
            &auth,
            &dep(),
            timing,
            Floor::new(ms(100)),
            Some(&ledger),
            |h| server.call(h),
        )
        .await
        .unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        // 10 ms attempt, then waited until only the 100 ms floor was left.
        assert_eq!(start.elapsed(), ms(400));
        assert_eq!(
            ledger.server_timing(),
            "orders-auth;dur=390;desc=\"timeout\""
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_first_token_is_an_auth_error_not_made() {
        let (auth, fetched) = auth(ms(10), true);
        let server = Server::new("token-1", ms(5));
        let ledger = Ledger::new();
        let err = call(&auth, &server, ms(1000), &ledger).await.unwrap_err();
        assert_eq!((err.kind(), err.attempts()), (CallErrorKind::Auth, 0));
        assert_eq!(
            err.to_string(),
            "call to `orders` not made: no bearer token"
        );
        assert_eq!(err.problem().status, 502);
        let source = StdError::source(&err).unwrap();
        assert_eq!(source.to_string(), "the token source failed");
        assert_eq!(
            source.source().unwrap().to_string(),
            "identity provider down"
        );
        assert!(server.seen().is_empty());
        assert_eq!(fetched.load(Ordering::SeqCst), 1);

        let (slow, _) = auth_slow();
        let err = call(&slow, &server, ms(300), &Ledger::new())
            .await
            .unwrap_err();
        assert!(err.is_budget_exhausted());
        assert_eq!(err.problem().status, 504);
    }

    fn auth_slow() -> (Arc<Auth>, Arc<AtomicU32>) {
        auth(ms(60_000), false)
    }
}
