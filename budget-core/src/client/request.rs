//! [`RequestBuilder`]: one call to a dependency, before it is sent.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use reqwest::Url;
use serde::Serialize;

use super::auth;
use super::budget_client::{BudgetClient, Inner};
use super::call;
use super::config::OnUnavailable;
use super::optional::{OptionalResponse, Skipped};
use super::response::BudgetResponse;
use super::stale::StaleCache;
use super::transport::{Prepared, Reqwest};
use crate::budget::Budget;
use crate::context::{self, RequestContext};
use crate::ledger::{Entry, Ledger};
use crate::outbound::Plan;
use crate::outbound::error::{BoxError, CallError, CallErrorKind};
use crate::outbound::resolve::{NoBudget, Own};
use crate::retry::is_idempotent;

/// A call being put together; [`send`](Self::send) makes it.
///
/// The body is always [`Bytes`], so every attempt replays it: streaming
/// request bodies are not supported, because a request that cannot be sent
/// twice cannot be retried.
///
/// The budget, the ledger and the reserve come from the current request's
/// [`context`](crate::context) (set by the server layer) unless given here;
/// they are read when `send` is called, so the future it returns may be
/// spawned and still spend the right budget.
///
/// # Coming from reqwest
///
/// The methods a reqwest user reaches for are here with reqwest's
/// meaning: [`header`](Self::header), [`query`](Self::query),
/// [`body`](Self::body), [`json`](Self::json), [`form`](Self::form),
/// [`bearer_auth`](Self::bearer_auth), [`basic_auth`](Self::basic_auth).
/// What differs, and why:
///
/// - **Paths, not URLs.** `client.get("/quote")` is appended to the
///   dependency's URL (its query string kept); an absolute URL is an
///   error, since the client's endpoints, breakers and limits are that
///   dependency's. Another host is another `DependencyConfig`.
/// - **Buffered bodies.** The request body is [`Bytes`], replayed on every
///   attempt; the answer is read whole within the budget, up to
///   `max_body` (4 MiB by default, a [`BodyTooLarge`](super::BodyTooLarge) error past it), so
///   [`BudgetResponse::json`](super::BudgetResponse::json) and
///   [`text`](super::BudgetResponse::text) are synchronous. Streaming
///   either way has no place in a call that may be sent twice and must end
///   within its budget.
/// - **No per-request timeout.** The budget is the timeout
///   ([`budget`](Self::budget) to give one outside a request).
/// - For anything else (a multipart body, a proxy, client certificates),
///   [`reqwest`](super::reqwest) is re-exported: call it directly, and
///   forward the budget with [`Budget::remaining`](crate::Budget::remaining)
///   as `request-budget-ms`.
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use budget_core::Budget;
///
/// # async fn run(orders: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
/// // Outside a request (a background job), the budget is given.
/// let res = orders
///     .post("/orders")
///     .header("idempotency-key", "order-42") // makes the POST retryable
///     .json(&serde_json::json!({ "sku": 7 }))
///     .budget(Budget::new(Duration::from_secs(2)))
///     .send()
///     .await?;
/// # Ok(()) }
/// ```
#[must_use = "a request does nothing until sent"]
#[derive(Debug)]
pub struct RequestBuilder {
    client: BudgetClient,
    method: Method,
    url: Url,
    headers: HeaderMap,
    body: Option<Bytes>,
    budget: Option<Budget>,
    reserve: Option<Duration>,
    ledger: Option<Ledger>,
    error: Option<BoxError>,
}

impl RequestBuilder {
    pub(crate) fn new(client: BudgetClient, method: Method, path: &str) -> Self {
        let url = join(&client.inner().settings.base, path);
        Self {
            client,
            method,
            url,
            headers: HeaderMap::new(),
            body: None,
            budget: None,
            reserve: None,
            ledger: None,
            error: absolute(path),
        }
    }

    /// Adds `query`'s fields to the URL's query string (after the base
    /// URL's own and any in the path), as reqwest's `query` does. A value
    /// that does not serialise as URL-encoded pairs makes `send` fail with
    /// [`CallErrorKind::Request`].
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a/items?v=2").build().unwrap();
    /// let req = c.get("/search").query(&[("q", "red shoes"), ("page", "2")]);
    /// assert_eq!(req.url().as_str(), "http://a/items/search?v=2&q=red+shoes&page=2");
    /// ```
    pub fn query<T: Serialize + ?Sized>(mut self, query: &T) -> Self {
        match serde_urlencoded::to_string(query) {
            Ok(pairs) if pairs.is_empty() => {}
            Ok(pairs) => {
                let joined = match self.url.query() {
                    Some(own) if !own.is_empty() => format!("{own}&{pairs}"),
                    _ => pairs,
                };
                self.url.set_query(Some(&joined));
            }
            Err(e) => self.fail(Box::new(e)),
        }
        self
    }

    /// The body as a URL-encoded form, with `content-type:
    /// application/x-www-form-urlencoded`, as reqwest's `form` does. A
    /// value that does not serialise makes `send` fail with
    /// [`CallErrorKind::Request`].
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").build().unwrap();
    /// let req = c.post("/login").form(&[("user", "ada"), ("next", "/home")]);
    /// assert_eq!(req.headers()["content-type"], "application/x-www-form-urlencoded");
    /// ```
    pub fn form<T: Serialize + ?Sized>(mut self, form: &T) -> Self {
        match serde_urlencoded::to_string(form) {
            Ok(body) => {
                self.headers.insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static("application/x-www-form-urlencoded"),
                );
                self.body = Some(Bytes::from(body));
            }
            Err(e) => self.fail(Box::new(e)),
        }
        self
    }

    /// `Authorization: Bearer <token>`, marked sensitive (kept out of
    /// logs), as reqwest's `bearer_auth` does. A client with a token source
    /// sends a request with its own `Authorization` as it is.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").build().unwrap();
    /// let req = c.get("").bearer_auth("t0k3n");
    /// assert_eq!(req.headers()["authorization"], "Bearer t0k3n");
    /// assert!(req.headers()["authorization"].is_sensitive());
    /// ```
    pub fn bearer_auth(self, token: impl std::fmt::Display) -> Self {
        self.authorization(format!("Bearer {token}"))
    }

    /// `Authorization: Basic <base64 of user:password>`, marked sensitive,
    /// as reqwest's `basic_auth` does.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").build().unwrap();
    /// let req = c.get("").basic_auth("ada", Some("lovelace"));
    /// assert_eq!(req.headers()["authorization"], "Basic YWRhOmxvdmVsYWNl");
    /// assert_eq!(c.get("").basic_auth("ada", None::<&str>).headers()["authorization"], "Basic YWRhOg==");
    /// ```
    pub fn basic_auth(
        self,
        user: impl std::fmt::Display,
        password: Option<impl std::fmt::Display>,
    ) -> Self {
        use base64::Engine;
        let pair = match password {
            Some(password) => format!("{user}:{password}"),
            None => format!("{user}:"),
        };
        let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
        self.authorization(format!("Basic {encoded}"))
    }

    /// Sets `Authorization` to `value`, sensitive.
    fn authorization(mut self, value: String) -> Self {
        match HeaderValue::try_from(value) {
            Ok(mut value) => {
                value.set_sensitive(true);
                self.headers.insert(AUTHORIZATION, value);
            }
            Err(e) => self.fail(Box::new(e)),
        }
        self
    }

    /// Adds a header (appended, as reqwest does). An invalid name or value
    /// makes `send` fail with [`CallErrorKind::Request`], before any I/O.
    ///
    /// `request-budget-ms` and `grpc-timeout` are set by the client on
    /// every attempt; values given here are overwritten in budget mode.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").build().unwrap();
    /// let req = c.get("").header("x-request-id", "abc").header(http::header::ACCEPT, "application/json");
    /// assert_eq!(req.headers()["x-request-id"], "abc");
    /// ```
    pub fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        HeaderName: TryFrom<K>,
        <HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        HeaderValue: TryFrom<V>,
        <HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        match (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            (Ok(name), Ok(value)) => {
                self.headers.append(name, value);
            }
            (Err(e), _) => self.fail(Box::new(e.into())),
            (_, Err(e)) => self.fail(Box::new(e.into())),
        }
        self
    }

    /// Adds every header of `headers`.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").build().unwrap();
    /// let mut h = http::HeaderMap::new();
    /// h.insert("x-request-id", "abc".parse().unwrap());
    /// assert_eq!(c.get("").headers_from(h).headers().len(), 1);
    /// ```
    pub fn headers_from(mut self, headers: HeaderMap) -> Self {
        let mut name = None;
        for (key, value) in headers {
            name = key.or(name);
            if let Some(name) = &name {
                self.headers.append(name.clone(), value);
            }
        }
        self
    }

    /// The body, as bytes (replayed on every attempt).
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").build().unwrap();
    /// let _ = c.put("/x").body("plain text");
    /// ```
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// The body as JSON, with `content-type: application/json` unless one
    /// was set. A value that does not serialise makes `send` fail with
    /// [`CallErrorKind::Request`].
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").build().unwrap();
    /// let req = c.post("/x").json(&serde_json::json!({ "sku": 7 }));
    /// assert_eq!(req.headers()["content-type"], "application/json");
    /// ```
    pub fn json<T: Serialize + ?Sized>(mut self, value: &T) -> Self {
        match serde_json::to_vec(value) {
            Ok(body) => {
                if !self.headers.contains_key(CONTENT_TYPE) {
                    self.headers
                        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                }
                self.body = Some(Bytes::from(body));
            }
            Err(e) => self.fail(Box::new(e)),
        }
        self
    }

    /// Spends `budget` instead of the current request's (for code outside
    /// a request: a background job, a test). With no budget here and no
    /// current request, a budget-mode call spends the dependency's
    /// `default_budget`, and without one fails with
    /// [`CallErrorKind::NoBudget`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, client::DependencyConfig};
    /// let c = DependencyConfig::new("a", "http://a").build().unwrap();
    /// let _ = c.get("").budget(Budget::new(Duration::from_millis(800)));
    /// ```
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Holds back `reserve` of the budget (default: the current request's
    /// per-hop reserve, or zero outside a request).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").build().unwrap();
    /// let _ = c.get("").reserve(Duration::from_millis(5));
    /// ```
    pub fn reserve(mut self, reserve: Duration) -> Self {
        self.reserve = Some(reserve);
        self
    }

    /// Records attempts, waits and skips in `ledger` (default: the current
    /// request's ledger, or none outside a request).
    ///
    /// ```
    /// # use budget_core::{client::DependencyConfig, ledger::Ledger};
    /// let c = DependencyConfig::new("a", "http://a").build().unwrap();
    /// let ledger = Ledger::new();
    /// let _ = c.get("").ledger(ledger.clone());
    /// ```
    pub fn ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// Spends `cx`'s budget, reserve and ledger (for work that left the
    /// request's task without carrying its scope).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, client::DependencyConfig, context::RequestContext};
    /// let c = DependencyConfig::new("a", "http://a").build().unwrap();
    /// let cx = RequestContext::new(Budget::new(Duration::from_secs(1)));
    /// let _ = c.get("").context(&cx);
    /// ```
    pub fn context(self, cx: &RequestContext) -> Self {
        self.budget(cx.budget())
            .reserve(cx.reserve())
            .ledger(cx.ledger().clone())
    }

    /// The URL the call goes to.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a/base?k=v").build().unwrap();
    /// assert_eq!(c.get("/x").url().as_str(), "http://a/base/x?k=v");
    /// ```
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The method.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").build().unwrap();
    /// assert_eq!(c.get("").method(), http::Method::GET);
    /// ```
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The headers set so far.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").build().unwrap();
    /// assert!(c.get("").headers().is_empty());
    /// ```
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// Makes the call: `Ok` with the answer for any HTTP status (check
    /// [`passes_up`](BudgetResponse::passes_up) and
    /// [`error_for_status`](BudgetResponse::error_for_status)), `Err` when
    /// no usable answer came (see [`CallError`]).
    ///
    /// The budget is read now, not when the future is first polled. The
    /// future does the whole call on the task that polls it (nothing is
    /// spawned): dropping it drops the attempt in flight, which closes its
    /// connection, and no further attempt is made.
    ///
    /// ```no_run
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// let res = c.get("/stock/7").send().await?;
    /// println!("{} in {} attempts", res.status(), res.attempts());
    /// # Ok(()) }
    /// ```
    pub fn send(self) -> impl Future<Output = Result<BudgetResponse, CallError>> + Send + 'static {
        // Boxed: the call's state (its attempt in flight, the retry loop)
        // is several KB, and a future held inline is copied every time the
        // caller's own future moves (into axum's box, into a spawned task):
        // one allocation costs less than those copies (BENCHMARKS.md, "The
        // server layer's cost in instructions").
        Box::pin(self.run(context::current()))
    }

    /// Like [`send`](Self::send), for a dependency configured with
    /// `on_unavailable = "skip"`: a call that could not be made (below the
    /// floor, circuit open, no concurrency permit in time) is
    /// `Ok(`[`OptionalResponse::Skipped`]`)`, which says why
    /// ([`Skipped::reason`], the ledger's note), and the caller serves its
    /// fallback. An answer is `Ok(`[`OptionalResponse::Answered`]`)`. With
    /// `on_unavailable = "fail"` a call not made is an error, as with
    /// `send`; with `"stale"`, `send`'s stale answer is `Answered`, and a
    /// call with none is an error.
    ///
    /// ```no_run
    /// # #[derive(serde::Deserialize, Default)] struct Recs(Vec<String>);
    /// # async fn run(recommendations: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
    /// use budget_core::client::OptionalResponse;
    ///
    /// // An optional dependency: no time left means no recommendations.
    /// let recs: Recs = match recommendations.get("").send_optional().await? {
    ///     OptionalResponse::Answered(res) => res.error_for_status()?.json()?,
    ///     OptionalResponse::Skipped(skipped) => {
    ///         println!("degraded: {}", skipped.reason()); // skipped: 850ms < floor 1000ms
    ///         Recs::default()
    ///     }
    /// };
    /// // or, forgiving every failure of an optional dependency:
    /// let recs: Recs = recommendations
    ///     .get("")
    ///     .send_optional()
    ///     .await
    ///     .ok()
    ///     .and_then(OptionalResponse::into_response)
    ///     .and_then(|res| res.json().ok())
    ///     .unwrap_or_default();
    /// # Ok(()) }
    /// ```
    pub fn send_optional(
        self,
    ) -> impl Future<Output = Result<OptionalResponse, CallError>> + Send + 'static {
        let skip = self.client.inner().settings.on_unavailable == OnUnavailable::Skip;
        let call = self.send();
        async move {
            match call.await {
                Ok(res) => Ok(OptionalResponse::Answered(res)),
                Err(e) if skip && e.is_unavailable() => {
                    Ok(OptionalResponse::Skipped(Skipped::new(e)))
                }
                Err(e) => Err(e),
            }
        }
    }

    fn fail(&mut self, error: BoxError) {
        self.error.get_or_insert(error);
    }

    /// What `send` and `open` share before the engine: the budget
    /// resolved (or the call refused for want of one), the plan, the
    /// request prepared for its attempts.
    fn ready(self, cx: Option<RequestContext>) -> Result<Ready, CallError> {
        let inner = self.client.inner();
        let settings = &inner.settings;
        let name = &settings.dependency.name;
        if let Some(error) = self.error {
            return Err(CallError::new(Arc::clone(name), CallErrorKind::Request).with_source(error));
        }
        let own = Own {
            budget: self.budget,
            reserve: self.reserve,
            ledger: self.ledger.clone(),
            cap: None,
        };
        let resolved = match settings.defaults().resolve(own, cx.as_ref()) {
            Ok(resolved) => resolved,
            Err(NoBudget) => {
                let ledger = self.ledger.or_else(|| cx.map(|cx| cx.ledger().clone()));
                if let Some(ledger) = &ledger {
                    ledger.record(Entry::skip(&**name, "skipped: no budget"));
                }
                return Err(CallError::new(Arc::clone(name), CallErrorKind::NoBudget));
            }
        };
        let may_retry = is_idempotent(&self.method, &self.headers);
        // A request with its own `Authorization` is sent as it is.
        let refreshes_auth = inner.auth.is_some() && !auth::has_own(&self.headers);
        let (timing, ledger) = (resolved.timing, resolved.ledger.clone());
        let mut plan = resolved.plan(self.method.clone(), may_retry);
        plan.refreshes_auth = refreshes_auth;
        let prepared = Prepared {
            method: self.method,
            url: self.url,
            headers: self.headers,
            body: self.body,
            trace_query: settings.trace_query,
        };
        Ok(Ready {
            client: self.client,
            plan,
            prepared,
            timing,
            ledger,
            refreshes_auth,
        })
    }

    async fn run(self, cx: Option<RequestContext>) -> Result<BudgetResponse, CallError> {
        let ready = self.ready(cx)?;
        // The engine's pass borrows the client while `ready` moves on.
        let client = ready.client.clone();
        let inner = client.inner();
        let settings = &inner.settings;
        let stale_key = settings
            .stale
            .as_ref()
            .and_then(|_| StaleCache::key(&ready.prepared.method, &ready.prepared.url));
        // The token (and its refresh on a 401) around the engine, the
        // stale fallback around both: see the `auth` and `stale` modules.
        let settle_in = stale_key.as_ref().and_then(|_| ready.ledger.clone());
        let result = ready
            .with_token(|plan, prepared| engine(inner, plan, prepared))
            .await;
        let name = &settings.dependency.name;
        match (&settings.stale, &stale_key) {
            (Some(cache), Some(key)) => cache.settle(key, result, name, settle_in.as_ref()),
            _ => result,
        }
    }

    /// Opens a stream (server-sent events, a long body): the opening is a
    /// call like [`send`](Self::send)'s, through the same engine (the
    /// floor, admission and its concurrency permit, the endpoint's
    /// breaker, retries of the opening, the ledger and the attempt's
    /// span), that ends when the answer's head arrives; its body is not
    /// read. `Ok` for any status (the breaker heard it: `5xx`, `401` and
    /// `429` count as failures, other `4xx` are neutral, by
    /// [`Verdict::from_status`](crate::breaker::Verdict::from_status));
    /// `Err` when no answer came.
    ///
    /// The budget covers the opening only: once the head is in, the body
    /// is read at the caller's pace, under no deadline and holding no
    /// concurrency permit, and how it ends (a clean end, a disconnect) is
    /// never recorded on the breaker (docs/streams.md, "Following a
    /// stream"). [`EventSource`](crate::stream::sse::EventSource) follows
    /// an SSE stream on top of it, reconnecting.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use budget_core::Budget;
    /// use futures_util::StreamExt;
    ///
    /// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), Box<dyn std::error::Error>> {
    /// let res = c
    ///     .get("/events")
    ///     .header("accept", "text/event-stream")
    ///     .budget(Budget::new(Duration::from_secs(2))) // for the opening
    ///     .open()
    ///     .await?;
    /// assert!(res.status().is_success());
    /// let mut body = res.bytes_stream();
    /// while let Some(chunk) = body.next().await {
    ///     println!("{} bytes", chunk?.len());
    /// }
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "streams")]
    #[cfg_attr(docsrs, doc(cfg(feature = "streams")))]
    pub fn open(
        self,
    ) -> impl Future<Output = Result<crate::stream::StreamResponse, CallError>> + Send + 'static
    {
        let cx = context::current();
        Box::pin(async move {
            let ready = self.ready(cx)?;
            let client = ready.client.clone();
            let inner = client.inner();
            ready
                .with_token(|plan, prepared| super::opening::engine(inner, plan, prepared))
                .await
        })
    }
}

#[cfg(feature = "streams")]
impl RequestBuilder {
    /// A WebSocket handshake to the request's URL (made `ws`), through the
    /// engine like [`open`](Self::open); messages up to `max_message`
    /// bytes.
    pub(crate) fn upgrade(
        self,
        max_message: usize,
    ) -> impl Future<Output = Result<super::upgrade::Upgrade, CallError>> + Send + 'static {
        let cx = context::current();
        Box::pin(async move {
            let ready = self.ready(cx)?;
            let client = ready.client.clone();
            let inner = client.inner();
            ready
                .with_token(|plan, prepared| {
                    super::upgrade::engine(inner, plan, prepared, max_message)
                })
                .await
        })
    }
}

/// A call ready for the engine.
struct Ready {
    client: BudgetClient,
    plan: Plan,
    prepared: Prepared,
    timing: crate::outbound::Timing,
    ledger: Option<Ledger>,
    refreshes_auth: bool,
}

impl Ready {
    /// One pass of the engine by `engine`, with the client's token (and its
    /// refresh on a `401`) when it has a token source.
    async fn with_token<R, F, Fut>(self, engine: F) -> Result<R, CallError>
    where
        R: auth::Answered,
        F: Fn(Plan, Prepared) -> Fut,
        Fut: Future<Output = Result<R, CallError>>,
    {
        let Ready {
            client,
            plan,
            prepared,
            timing,
            ledger,
            refreshes_auth,
        } = self;
        let inner = client.inner();
        let settings = &inner.settings;
        match &inner.auth {
            Some(auth) if refreshes_auth => {
                let floor = settings.dependency.floor.current().floor;
                // Boxed: it may hold two passes of the engine, and only
                // clients with a token source should carry their size.
                Box::pin(auth::send_with_token(
                    auth,
                    &settings.dependency.name,
                    timing,
                    floor,
                    ledger.as_ref(),
                    |token| {
                        let prepared = with_authorization(&prepared, token);
                        engine(plan.clone(), prepared)
                    },
                ))
                .await
            }
            _ => engine(plan, prepared).await,
        }
    }
}

/// One pass of the call engine over reqwest.
async fn engine(
    inner: &Inner,
    plan: Plan,
    prepared: Prepared,
) -> Result<BudgetResponse, CallError> {
    let settings = &inner.settings;
    let transport = Reqwest {
        http: &inner.http,
        prepared: &prepared,
        max_body: settings.max_body,
    };
    call::run(settings, &*inner.clock, plan, &transport).await
}

/// `prepared` with `Authorization: <value>`.
fn with_authorization(prepared: &Prepared, value: HeaderValue) -> Prepared {
    let mut with = prepared.clone();
    with.headers.insert(AUTHORIZATION, value);
    with
}

/// `base` with `path` appended to its path and `path`'s query, if any,
/// after its own: `http://a/p?x=1` + `/q?y=2` = `http://a/p/q?x=1&y=2`.
/// An empty `path` is `base` exactly.
/// The error of a `path` that is an absolute URL: a client calls paths
/// under its dependency's URL, whose endpoints, breakers and limits are
/// that dependency's; it is not appended to the base path as a string.
fn absolute(path: &str) -> Option<BoxError> {
    // Every call passes here: only a path that could be one is parsed.
    (path.contains("://") && Url::parse(path).is_ok_and(|url| url.has_host())).then(|| {
        format!("`{path}` is an absolute URL: a client calls paths under its dependency's URL")
            .into()
    })
}

fn join(base: &Url, path: &str) -> Url {
    let mut url = base.clone();
    if path.is_empty() {
        return url;
    }
    let (path, query) = match path.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path, None),
    };
    if !path.is_empty() {
        let base_path = base.path().trim_end_matches('/');
        let sep = if path.starts_with('/') { "" } else { "/" };
        url.set_path(&format!("{base_path}{sep}{path}"));
    }
    if let Some(query) = query {
        match base.query() {
            Some(own) if !own.is_empty() => url.set_query(Some(&format!("{own}&{query}"))),
            _ => url.set_query(Some(query)),
        }
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(base: &str, path: &str) -> String {
        join(&Url::parse(base).unwrap(), path).to_string()
    }

    /// An absolute URL is not a path under the dependency's: `send` says
    /// so before any I/O, where it was appended to the base path.
    #[tokio::test]
    async fn an_absolute_url_is_a_request_error_naming_it() {
        let client = crate::client::DependencyConfig::new("a", "http://127.0.0.1:9/base")
            .build()
            .unwrap();
        let err = client
            .get("http://elsewhere.example/x")
            .budget(Budget::new(Duration::from_secs(1)))
            .send()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), CallErrorKind::Request);
        let source = std::error::Error::source(&err).unwrap().to_string();
        assert!(
            source.contains("`http://elsewhere.example/x` is an absolute URL"),
            "{source}"
        );
        // A path with a colon in it is still a path.
        assert_eq!(
            client.get("/v1/items:batch").url().path(),
            "/base/v1/items:batch"
        );
        let relative = client.get("items:batch");
        assert!(relative.error.is_none());
        assert_eq!(relative.url().path(), "/base/items:batch");
    }

    #[test]
    fn a_query_and_a_form_that_do_not_serialise_are_request_errors() {
        let client = crate::client::DependencyConfig::new("a", "http://127.0.0.1:9/")
            .build()
            .unwrap();
        // A sequence of bare numbers is not a list of pairs.
        let bad = client.get("").query(&[1, 2]);
        assert!(bad.error.is_some());
        let bad = client.post("").form(&[1, 2]);
        assert!(bad.error.is_some());
        let empty: [(&str, &str); 0] = [];
        assert_eq!(
            client.get("").query(&empty).url().as_str(),
            "http://127.0.0.1:9/"
        );
    }

    #[test]
    fn a_call_future_is_one_pointer_and_its_state_stays_small() {
        // Regression guard: a hedge's race and the token refresh once made
        // the call's state about 15 KB, copied on every move of the
        // caller's future (BENCHMARKS.md, "The server layer's cost in
        // instructions": 32 000 instructions per call).
        let client = crate::client::DependencyConfig::new("backend", "http://127.0.0.1:9/")
            .build()
            .unwrap();
        let send = client.get("").send();
        assert_eq!(std::mem::size_of_val(&send), std::mem::size_of::<usize>());
        let state = client.get("").run(None);
        let size = std::mem::size_of_val(&state);
        assert!(size <= 8 * 1024, "the call's state is {size} bytes");
    }

    #[test]
    fn the_base_query_is_kept_on_every_call() {
        let base = "http://127.0.0.1:9000/pricing?script=503@250ms,200@400ms";
        assert_eq!(j(base, ""), base);
        assert_eq!(
            j(base, "/quote"),
            "http://127.0.0.1:9000/pricing/quote?script=503@250ms,200@400ms"
        );
        assert_eq!(
            j(base, "?sku=1"),
            "http://127.0.0.1:9000/pricing?script=503@250ms,200@400ms&sku=1"
        );
        assert_eq!(j("http://a", "/x"), "http://a/x");
        assert_eq!(j("http://a/", "x"), "http://a/x");
        assert_eq!(j("http://a/b/", "/x/"), "http://a/b/x/");
        assert_eq!(j("http://a/b", "?q=1"), "http://a/b?q=1");
    }
}
