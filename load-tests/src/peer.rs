//! `PeerCheckout`: checkout as an experienced tower user would write it
//! without this project, the third mode of every scenario (`peer`), and
//! its variant without shedding, the fourth (`queue`).
//!
//! The load tests compare budget mode with generous fixed timeouts
//! (`naive`); that alone invites the question "and against what a careful
//! engineer would have done anyway?". This is that baseline, built from
//! the standard parts a tower user would pick, and nothing of
//! `budget-core`:
//!
//! - an axum router: `GET`/`POST /checkout` and `GET /healthz`;
//! - one shared [`reqwest::Client`] (one connection pool);
//! - per dependency one `tower::ServiceBuilder` stack, built **once** and
//!   cloned per call ([`ServiceExt::oneshot`] on a clone):
//!   - [`LoadShedLayer`](tower::load_shed::LoadShedLayer), outermost: when
//!     the limit below is not ready, the call fails at once with
//!     `Overloaded` instead of queueing (a queue in front of a slow
//!     dependency is the pile-up the project is about);
//!   - [`ConcurrencyLimitLayer`](tower::limit::ConcurrencyLimitLayer) of
//!     [`PeerConfig::concurrency`] (8, the chain's
//!     [`ChainSettings::peer_concurrency`](crate::chain::ChainSettings::peer_concurrency):
//!     the partner's workers per path, or `--concurrency`): at most that
//!     many calls in flight to the dependency, hand-sized to its capacity.
//!     Clones of a `ConcurrencyLimit` share its semaphore, so the limit is
//!     applied once and holds across every request (a stack built per
//!     request would have a semaphore of its own each time, and no limit);
//!   - [`TimeoutLayer`](tower::timeout::TimeoutLayer) of
//!     [`PeerConfig::timeout`] (2 s, the client's budget): no attempt waits
//!     longer, whatever the dependency does;
//!   - a [`tower::service_fn`] around the reqwest call;
//! - in the `queue` mode ([`PeerConfig::shed`] `false`), what a tower user
//!   writes who does not shed: no `LoadShed`, so a call beyond the limit
//!   **waits** for the `ConcurrencyLimit`'s semaphore (first come, first
//!   served), and the `Timeout` is outside it and covers the wait and the
//!   call together. It is the same [`PeerConfig::timeout`] (2 s) as the
//!   shedding peer's, not the client's budget: this checkout knows nothing
//!   of budgets, its timeout is a fixed number. (tower's `Timeout` times
//!   only the response future, not `poll_ready`, so the stack waits for
//!   the permit inside its call: a `service_fn` that `oneshot`s the
//!   limited service, under the timeout);
//! - retries as a simple loop: pricing up to [`PeerConfig::pricing_attempts`]
//!   (3) attempts on a `5xx`, a timeout or `Overloaded`, without backoff;
//!   a `POST` without an `Idempotency-Key` is sent once (it is not safe to
//!   repeat). Inventory and recommendations get one attempt each;
//! - inventory and pricing required, recommendations optional: its failure
//!   marks the answer degraded, as checkout does;
//! - with [`PeerConfig::database_url`], checkout's stock reservation after
//!   pricing (required), on a raw deadpool-postgres pool whose connections
//!   carry a fixed `statement_timeout` ([`PeerConfig::statement_timeout`],
//!   1 s), under the same per-call `Timeout` (`stock`);
//! - replicas ([`PeerConfig::endpoints`]: base URLs, the dependency's path
//!   and query on each): in the `peer` and `queue` modes each replica gets
//!   the stack above of its own and the attempts take the replicas in turn
//!   (round robin, a retry on the next one), what a tower user writes who
//!   has a list of URLs and no balancer: a slow replica keeps its third of
//!   the calls. The `p2c` mode ([`PeerConfig::balance`]) balances them with
//!   tower's `Balance` over `PeakEwma` instead ([`crate::p2c`]).
//!
//! What it does not have is everything a budget gives: it forwards no
//! budget header (only `x-request-id`, so the partner's per-id scripts
//! work as with checkout), so each hop's timeout is its own, retries spend
//! time nobody is waiting for, and nothing knows the caller has given up.
//!
//! The answer is checkout's JSON ([`checkout::CheckoutAnswer`]:
//! `inventory`, `pricing`, `recommendations`, `degraded`); a failure is
//! `application/problem+json` (`type`, `title`, `status`, `detail`): `504`
//! when the last attempt timed out, `503` otherwise (overloaded, an error
//! status, a connection error, a body that is not JSON). Like a service
//! with ordinary observability it lists its attempts in `Server-Timing`
//! (`inventory;dur=21.3`, `pricing;dur=2000;desc="timeout"`,
//! `pricing;dur=0;desc="shed"`), in the format checkout's ledger uses, so
//! that the budget tables and the "partner calls not answered by the
//! client's deadline" row of [`report`](crate::report) read the same in
//! every mode.
//!
//! # Example
//!
//! ```no_run
//! use load_tests::peer::{PeerCheckout, PeerConfig};
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut config = PeerConfig::new("127.0.0.1:0".parse()?);
//! config.pricing_url = "http://127.0.0.1:9000/pricing?delay=50ms".into();
//! let (addr, server) = PeerCheckout::spawn(&config, std::future::pending()).await?;
//! println!("peer checkout on http://{addr}/checkout");
//! server.abort();
//! # Ok(()) }
//! ```

use std::fmt::Write as _;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use budget_core::config::ConfigError;
use bytes::Bytes;
use checkout::{CheckoutAnswer, Degraded};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, ServiceBuilder, ServiceExt};

use crate::client::{SERVER_TIMING, X_REQUEST_ID};

mod stock;

/// The `Idempotency-Key` header, forwarded to pricing with a `POST`.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The media type of a failure's body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// How a [`PeerCheckout`] is built.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerConfig {
    /// Where it listens (port 0 picks a free port).
    pub listen: SocketAddr,
    /// The inventory dependency (required, one attempt).
    pub inventory_url: String,
    /// The pricing dependency (required, retried).
    pub pricing_url: String,
    /// The recommendations dependency (optional, one attempt).
    pub recommendations_url: String,
    /// Calls in flight per dependency (8); one more is shed at once, or,
    /// without [`shed`](Self::shed), waits for a permit.
    pub concurrency: usize,
    /// Shed a call beyond [`concurrency`](Self::concurrency) at once
    /// (`LoadShed`, the `peer` mode; the default), or let it wait for a
    /// permit inside its [`timeout`](Self::timeout) (the `queue` mode).
    pub shed: bool,
    /// Every attempt's timeout (2 s); without [`shed`](Self::shed) it
    /// covers the wait for a permit too.
    pub timeout: Duration,
    /// Pricing's attempts (3).
    pub pricing_attempts: u32,
    /// How long an idle pooled connection is kept; `None`: reqwest's
    /// default (90 s).
    pub pool_idle_timeout: Option<Duration>,
    /// The replicas of every dependency, as base URLs
    /// (`http://127.0.0.1:9001`, at most [`MAX_ENDPOINTS`]): each
    /// dependency's path and query go to each of them. Empty (the default):
    /// the dependency's URL alone.
    pub endpoints: Vec<String>,
    /// Balance each dependency over its replicas with tower's p2c
    /// `Balance` over `PeakEwma` (the `p2c` mode, [`crate::p2c`]), instead
    /// of taking them in turn. Needs a tokio runtime to build.
    pub balance: bool,
    /// The orders database (a PostgreSQL URL): checkout's stock
    /// reservation after pricing, on a raw pool with
    /// [`statement_timeout`](Self::statement_timeout); `None`
    /// (the default): no database step.
    pub database_url: Option<String>,
    /// The database pool's fixed `statement_timeout` (1 s: half of
    /// [`timeout`](Self::timeout), so that a stopped statement leaves the
    /// call time to answer).
    pub statement_timeout: Duration,
}

/// The default [`PeerConfig::statement_timeout`]: 1 s.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(1);

/// The most replicas [`PeerConfig::endpoints`] may list.
pub const MAX_ENDPOINTS: usize = 64;

impl PeerConfig {
    /// The defaults, listening on `listen`, calling a slow partner on
    /// `127.0.0.1:9000`.
    ///
    /// ```
    /// let c = load_tests::peer::PeerConfig::new("127.0.0.1:0".parse().unwrap());
    /// assert_eq!((c.concurrency, c.pricing_attempts), (8, 3));
    /// assert_eq!(c.timeout, std::time::Duration::from_secs(2));
    /// assert!(c.shed);
    /// ```
    pub fn new(listen: SocketAddr) -> Self {
        Self {
            listen,
            inventory_url: "http://127.0.0.1:9000/inventory".into(),
            pricing_url: "http://127.0.0.1:9000/pricing".into(),
            recommendations_url: "http://127.0.0.1:9000/recommendations".into(),
            concurrency: 8,
            shed: true,
            timeout: Duration::from_secs(2),
            pricing_attempts: 3,
            pool_idle_timeout: None,
            endpoints: Vec::new(),
            balance: false,
            database_url: None,
            statement_timeout: DEFAULT_STATEMENT_TIMEOUT,
        }
    }

    /// The URLs of the dependency at `url` on each replica of
    /// [`endpoints`](Self::endpoints): `url`'s path and query on each base
    /// URL; `url` alone without endpoints.
    ///
    /// ```
    /// let mut c = load_tests::peer::PeerConfig::new("127.0.0.1:0".parse().unwrap());
    /// assert_eq!(c.replica_urls("http://127.0.0.1:9000/pricing?delay=5ms"),
    ///     ["http://127.0.0.1:9000/pricing?delay=5ms"]);
    /// c.endpoints = vec!["http://127.0.0.1:9001".into(), "http://127.0.0.1:9002/".into()];
    /// assert_eq!(c.replica_urls("http://127.0.0.1:9000/pricing?delay=5ms"),
    ///     ["http://127.0.0.1:9001/pricing?delay=5ms", "http://127.0.0.1:9002/pricing?delay=5ms"]);
    /// ```
    pub fn replica_urls(&self, url: &str) -> Vec<String> {
        let Ok(parsed) = reqwest::Url::parse(url) else {
            return vec![url.to_owned()];
        };
        if self.endpoints.is_empty() {
            return vec![url.to_owned()];
        }
        let mut path_and_query = parsed.path().to_owned();
        if let Some(q) = parsed.query() {
            path_and_query.push('?');
            path_and_query.push_str(q);
        }
        self.endpoints
            .iter()
            .map(|base| format!("{}{path_and_query}", base.trim_end_matches('/')))
            .collect()
    }

    /// Checks every value; an error names the field.
    ///
    /// ```
    /// let mut c = load_tests::peer::PeerConfig::new("127.0.0.1:0".parse().unwrap());
    /// c.concurrency = 0;
    /// assert_eq!(c.validate().unwrap_err().field(), "concurrency");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (field, url) in [
            ("inventory_url", &self.inventory_url),
            ("pricing_url", &self.pricing_url),
            ("recommendations_url", &self.recommendations_url),
        ] {
            match reqwest::Url::parse(url) {
                Ok(u) if u.scheme() == "http" && u.host().is_some() => {}
                _ => return Err(ConfigError::new(field, "must be an http URL with a host")),
            }
        }
        if self.concurrency == 0 {
            return Err(ConfigError::new("concurrency", "must be at least 1"));
        }
        if self.timeout.is_zero() {
            return Err(ConfigError::new("timeout", "must be more than zero"));
        }
        if !(1..=10).contains(&self.pricing_attempts) {
            return Err(ConfigError::new("pricing_attempts", "must be 1 to 10"));
        }
        if self.endpoints.len() > MAX_ENDPOINTS {
            return Err(ConfigError::new("endpoints", "lists more than 64 replicas"));
        }
        for base in &self.endpoints {
            match reqwest::Url::parse(base) {
                Ok(u)
                    if u.scheme() == "http"
                        && u.host().is_some()
                        && matches!(u.path(), "" | "/")
                        && u.query().is_none() => {}
                _ => {
                    return Err(ConfigError::new(
                        "endpoints",
                        "each must be an http://host:port base URL, without a path or query",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Why a [`PeerCheckout`] could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PeerError {
    /// A config value is out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP client could not be built.
    #[error("cannot build the http client")]
    Http(#[from] reqwest::Error),
    /// The address could not be bound.
    #[error("cannot listen")]
    Bind(#[from] std::io::Error),
    /// The `p2c` mode was built outside a tokio runtime (its balancer's
    /// buffer runs a task).
    #[error("the p2c balancer needs a tokio runtime")]
    Runtime,
}

/// One call to a dependency, as its stack gets it.
#[derive(Clone, Debug)]
pub(crate) struct DepRequest {
    pub(crate) method: Method,
    /// Appended to the dependency's URL (`""`, or `?query`).
    pub(crate) query: Option<String>,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl DepRequest {
    /// A `GET` carrying `x-request-id` when the inbound request had one.
    pub(crate) fn get(inbound: &HeaderMap) -> Self {
        let mut headers = HeaderMap::new();
        if let Some(id) = inbound.get(X_REQUEST_ID) {
            headers.insert(X_REQUEST_ID, id.clone());
        }
        Self {
            method: Method::GET,
            query: None,
            headers,
            body: Bytes::new(),
        }
    }
}

/// A dependency's answer: its status and body.
#[derive(Clone, Debug)]
pub(crate) struct DepResponse {
    pub(crate) status: StatusCode,
    pub(crate) body: Bytes,
}

/// A dependency's stack, type-erased; clones share its concurrency limit.
pub(crate) type DepService = BoxCloneSyncService<DepRequest, DepResponse, BoxError>;

/// The reqwest call to `url`, as a tower service.
pub(crate) fn http_call(
    http: reqwest::Client,
    url: String,
) -> impl tower::Service<
    DepRequest,
    Response = DepResponse,
    Error = BoxError,
    Future = impl Future<Output = Result<DepResponse, BoxError>> + Send,
> + Clone
+ Send
+ Sync
+ 'static {
    let url: Arc<str> = url.into();
    tower::service_fn(move |req: DepRequest| {
        let http = http.clone();
        let url = Arc::clone(&url);
        async move {
            let target = match &req.query {
                Some(q) if url.contains('?') => format!("{url}&{q}"),
                Some(q) => format!("{url}?{q}"),
                None => url.to_string(),
            };
            let res = http
                .request(req.method, target)
                .headers(req.headers)
                .body(req.body)
                .send()
                .await?;
            let status = res.status();
            let body = res.bytes().await?;
            Ok::<_, BoxError>(DepResponse { status, body })
        }
    })
}

/// The stack of one dependency around the reqwest call to `url`, built
/// once: with `shed`, LoadShed, ConcurrencyLimit(`limit`), Timeout(`timeout`)
/// (the timeout covers the call); without, Timeout(`timeout`) around a
/// call that waits for a ConcurrencyLimit(`limit`) permit and then calls
/// (the timeout covers the wait and the call).
pub(crate) fn dependency_stack(
    http: reqwest::Client,
    url: String,
    limit: usize,
    timeout: Duration,
    shed: bool,
) -> DepService {
    if shed {
        return BoxCloneSyncService::new(
            ServiceBuilder::new()
                .load_shed()
                .concurrency_limit(limit)
                .timeout(timeout)
                .service(http_call(http, url)),
        );
    }
    // Clones share the limit's semaphore; `oneshot` waits for a permit
    // inside the call, so the timeout around it covers the wait.
    let limited = ServiceBuilder::new()
        .concurrency_limit(limit)
        .service(http_call(http, url));
    BoxCloneSyncService::new(
        ServiceBuilder::new()
            .timeout(timeout)
            .service(tower::service_fn(move |req: DepRequest| {
                limited.clone().oneshot(req)
            })),
    )
}

/// One stack per replica, taken in turn per attempt: the `peer` and
/// `queue` modes over several replicas.
fn round_robin(stacks: Vec<DepService>) -> DepService {
    let stacks: Arc<[DepService]> = stacks.into();
    let next = Arc::new(AtomicUsize::new(0));
    BoxCloneSyncService::new(tower::service_fn(move |req: DepRequest| {
        let i = next.fetch_add(1, Ordering::Relaxed) % stacks.len().max(1);
        stacks[i].clone().oneshot(req)
    }))
}

/// Why a dependency call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DepFailure {
    /// The attempt's timeout passed.
    Timeout,
    /// Shed: the concurrency limit was reached.
    Overloaded,
    /// An error status.
    Status(StatusCode),
    /// A connection error.
    Transport(String),
    /// A body that is not JSON.
    BadBody,
}

impl DepFailure {
    pub(crate) fn of(e: &BoxError) -> Self {
        if e.is::<tower::timeout::error::Elapsed>() {
            DepFailure::Timeout
        } else if e.is::<tower::load_shed::error::Overloaded>() {
            DepFailure::Overloaded
        } else {
            DepFailure::Transport(e.to_string())
        }
    }

    fn retryable(&self) -> bool {
        match self {
            DepFailure::Timeout | DepFailure::Overloaded => true,
            DepFailure::Status(s) => s.is_server_error(),
            DepFailure::Transport(_) | DepFailure::BadBody => false,
        }
    }

    /// The `desc` of its `Server-Timing` entry.
    pub(crate) fn desc(&self) -> String {
        match self {
            DepFailure::Timeout => "timeout".into(),
            DepFailure::Overloaded => "shed".into(),
            DepFailure::Status(s) => s.as_u16().to_string(),
            DepFailure::Transport(_) => "transport".into(),
            DepFailure::BadBody => "bad body".into(),
        }
    }

    fn describe(&self) -> String {
        match self {
            DepFailure::Timeout => "timed out".into(),
            DepFailure::Overloaded => "overloaded: concurrency limit reached, shed".into(),
            DepFailure::Status(s) => format!("answered {}", s.as_u16()),
            DepFailure::Transport(e) => format!("connection error: {e}"),
            DepFailure::BadBody => "answered a body that is not json".into(),
        }
    }
}

/// The `Server-Timing` entries of one request, in call order.
#[derive(Debug, Default)]
pub(crate) struct Timing(Vec<String>);

impl Timing {
    pub(crate) fn push(&mut self, name: &str, took: Duration, desc: Option<&str>) {
        let mut entry = format!("{name};dur={:.1}", took.as_secs_f64() * 1000.0);
        if let Some(d) = desc {
            let _ = write!(entry, ";desc=\"{d}\"");
        }
        self.0.push(entry);
    }

    fn header(&self) -> Option<HeaderValue> {
        HeaderValue::from_str(&self.0.join(", ")).ok()
    }
}

/// Calls `stack` up to `attempts` times (retrying a retryable failure at
/// once), recording each attempt in `timing` as `name`.
pub(crate) async fn call_with_retries(
    stack: &DepService,
    name: &str,
    req: DepRequest,
    attempts: u32,
    timing: &mut Timing,
) -> Result<Value, DepFailure> {
    let mut last = DepFailure::Overloaded;
    for attempt in 1..=attempts.max(1) {
        let started = Instant::now();
        let result = stack.clone().oneshot(req.clone()).await;
        let took = started.elapsed();
        let failure = match result {
            Ok(res) if res.status.is_success() => match serde_json::from_slice(&res.body) {
                Ok(value) => {
                    timing.push(name, took, None);
                    return Ok(value);
                }
                Err(_) => DepFailure::BadBody,
            },
            Ok(res) => DepFailure::Status(res.status),
            Err(e) => DepFailure::of(&e),
        };
        timing.push(name, took, Some(&failure.desc()));
        let again = failure.retryable() && attempt < attempts;
        last = failure;
        if !again {
            break;
        }
    }
    Err(last)
}

/// The problem+json answer for `dependency`'s `failure`.
pub(crate) fn problem(dependency: &str, failure: &DepFailure, timing: &Timing) -> Response {
    let (status, kind, title) = match failure {
        DepFailure::Timeout => (
            StatusCode::GATEWAY_TIMEOUT,
            "dependency-timeout",
            "Dependency timed out",
        ),
        DepFailure::Overloaded => (
            StatusCode::SERVICE_UNAVAILABLE,
            "dependency-overloaded",
            "Dependency overloaded",
        ),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            "dependency-unavailable",
            "Dependency unavailable",
        ),
    };
    let body = serde_json::json!({
        "type": format!("urn:peer-checkout:{kind}"),
        "title": title,
        "status": status.as_u16(),
        "detail": format!("{dependency} {}", failure.describe()),
    });
    let mut res = (status, body.to_string()).into_response();
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    if let Some(t) = timing.header() {
        res.headers_mut().insert(SERVER_TIMING, t);
    }
    res
}

/// Checkout, plain tower: see the module docs.
#[derive(Clone, Debug)]
pub struct PeerCheckout {
    inner: Arc<Inner>,
}

struct Inner {
    inventory: DepService,
    pricing: DepService,
    recommendations: DepService,
    pricing_attempts: u32,
    /// The database pool, when there is one, and the call's timeout.
    stock: Option<(budget_core::postgres::deadpool_postgres::Pool, Duration)>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("pricing_attempts", &self.pricing_attempts)
            .finish_non_exhaustive()
    }
}

impl PeerCheckout {
    /// Builds the three stacks (once) on one shared HTTP client.
    ///
    /// # Errors
    ///
    /// An invalid config, naming the field, or a client reqwest cannot
    /// build.
    ///
    /// ```
    /// use load_tests::peer::{PeerCheckout, PeerConfig};
    /// let peer = PeerCheckout::new(&PeerConfig::new("127.0.0.1:0".parse().unwrap()));
    /// assert!(peer.is_ok());
    /// ```
    pub fn new(config: &PeerConfig) -> Result<Self, PeerError> {
        config.validate()?;
        let mut http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .http1_only();
        if let Some(idle) = config.pool_idle_timeout {
            http = http.pool_idle_timeout(idle);
        }
        let http = http.build()?;
        let stack = |url: &str| -> Result<DepService, PeerError> {
            let urls = config.replica_urls(url);
            if config.balance {
                return crate::p2c::balanced_stack(&http, urls, config.concurrency, config.timeout);
            }
            let mut stacks: Vec<DepService> = urls
                .into_iter()
                .map(|url| {
                    dependency_stack(
                        http.clone(),
                        url,
                        config.concurrency,
                        config.timeout,
                        config.shed,
                    )
                })
                .collect();
            Ok(if stacks.len() == 1 {
                stacks.remove(0)
            } else {
                round_robin(stacks)
            })
        };
        Ok(Self {
            inner: Arc::new(Inner {
                inventory: stack(&config.inventory_url)?,
                pricing: stack(&config.pricing_url)?,
                recommendations: stack(&config.recommendations_url)?,
                pricing_attempts: config.pricing_attempts,
                stock: config
                    .database_url
                    .as_deref()
                    .map(|url| {
                        checkout::stock::fixed_pool(
                            url,
                            Some(config.statement_timeout),
                            "database_url",
                        )
                        .map(|pool| (pool, config.timeout))
                    })
                    .transpose()?,
            }),
        })
    }

    /// Its routes: `GET`/`POST /checkout`, `GET /healthz`.
    ///
    /// ```
    /// use load_tests::peer::{PeerCheckout, PeerConfig};
    /// let app: axum::Router =
    ///     PeerCheckout::new(&PeerConfig::new("127.0.0.1:0".parse().unwrap())).unwrap().router();
    /// ```
    pub fn router(self) -> Router {
        Router::new()
            .route("/checkout", get(handle).post(handle))
            .route("/healthz", get(|| async { "ok" }))
            .with_state(self)
    }

    /// Starts it on `config.listen` and serves until `shutdown` resolves
    /// (then lets requests in flight finish); with a database, creates its
    /// schema first, as checkout does. Returns the bound address and the
    /// server task.
    ///
    /// # Errors
    ///
    /// An invalid config, or an address that cannot be bound.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), load_tests::peer::PeerError> {
    /// use load_tests::peer::{PeerCheckout, PeerConfig};
    /// let config = PeerConfig::new("127.0.0.1:0".parse().unwrap());
    /// let (addr, server) = PeerCheckout::spawn(&config, std::future::pending()).await?;
    /// server.abort();
    /// # Ok(()) }
    /// ```
    pub async fn spawn<F>(
        config: &PeerConfig,
        shutdown: F,
    ) -> Result<(SocketAddr, JoinHandle<std::io::Result<()>>), PeerError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let app = Self::new(config)?.router();
        if let Some(url) = &config.database_url {
            checkout::stock::create_schema(url).await?;
        }
        serve(config.listen, app, shutdown).await
    }
}

/// Binds `addr` and serves `app` until `shutdown` resolves.
pub(crate) async fn serve<F>(
    addr: SocketAddr,
    app: Router,
    shutdown: F,
) -> Result<(SocketAddr, JoinHandle<std::io::Result<()>>), PeerError>
where
    F: Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
    });
    Ok((addr, server))
}

async fn handle(
    State(peer): State<PeerCheckout>,
    method: Method,
    uri: http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let app = &peer.inner;
    let mut timing = Timing::default();
    let inventory = match call_with_retries(
        &app.inventory,
        "inventory",
        DepRequest::get(&headers),
        1,
        &mut timing,
    )
    .await
    {
        Ok(v) => v,
        Err(e) => return problem("inventory", &e, &timing),
    };
    let (pricing_req, pricing_attempts) =
        pricing_request(&method, &headers, body, app.pricing_attempts);
    let pricing = match call_with_retries(
        &app.pricing,
        "pricing",
        pricing_req,
        pricing_attempts,
        &mut timing,
    )
    .await
    {
        Ok(v) => v,
        Err(e) => return problem("pricing", &e, &timing),
    };
    if let Some((pool, timeout)) = &app.stock {
        let sku = checkout::stock::sku_of(uri.query());
        if let Err(e) = stock::reserve(pool, sku, *timeout, &mut timing).await {
            return problem(&stock::statement_name(), &e, &timing);
        }
    }
    let (recommendations, degraded) = match call_with_retries(
        &app.recommendations,
        "recommendations",
        DepRequest::get(&headers),
        1,
        &mut timing,
    )
    .await
    {
        Ok(v) => (Some(v), Vec::new()),
        Err(e) => (
            None,
            vec![Degraded {
                dependency: "recommendations".into(),
                reason: format!("failed: {}", e.describe()),
            }],
        ),
    };
    let answer = CheckoutAnswer {
        request_id: headers
            .get(X_REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        inventory,
        pricing,
        recommendations,
        degraded,
    };
    let mut res = axum::Json(answer).into_response();
    if let Some(t) = timing.header() {
        res.headers_mut().insert(SERVER_TIMING, t);
    }
    res
}

/// Pricing's request and attempts: a `GET`, or for a `POST` the inbound
/// body, content type and `Idempotency-Key`, sent once without a key (it
/// is not safe to repeat).
fn pricing_request(
    method: &Method,
    headers: &HeaderMap,
    body: Bytes,
    attempts: u32,
) -> (DepRequest, u32) {
    let mut req = DepRequest::get(headers);
    if method != Method::POST {
        return (req, attempts);
    }
    req.method = Method::POST;
    req.body = body;
    for name in [CONTENT_TYPE, HeaderName::from_static(IDEMPOTENCY_KEY)] {
        if let Some(v) = headers.get(&name) {
            req.headers.insert(name, v.clone());
        }
    }
    let attempts = if headers.contains_key(IDEMPOTENCY_KEY) {
        attempts
    } else {
        1
    };
    (req, attempts)
}

#[cfg(test)]
mod tests {
    use slow_partner::FaultMode;
    use test_support::partner;

    use super::*;

    async fn peer(config: PeerConfig) -> String {
        let (addr, _server) = PeerCheckout::spawn(&config, std::future::pending())
            .await
            .unwrap();
        format!("http://{addr}/checkout")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_ninth_concurrent_call_is_shed_at_once_and_the_limit_is_shared() {
        let partner = partner(FaultMode::Normal).await;
        let mut config = PeerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
        // Inventory holds its permit 1.5 s; the others answer at once.
        config.inventory_url = partner.url("/inventory?delay=1500ms");
        config.pricing_url = partner.url("/pricing");
        config.recommendations_url = partner.url("/recommendations");
        let url = peer(config).await;
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let held: Vec<_> = (0..8)
            .map(|i| {
                let req = http.get(&url).header(X_REQUEST_ID, format!("held-{i}"));
                tokio::spawn(req.send())
            })
            .collect();
        // Wait (bounded) until all 8 inventory calls are at the partner.
        tokio::time::timeout(Duration::from_secs(5), async {
            while partner.stats().requests < 8 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("8 calls reach the partner");
        let started = Instant::now();
        let ninth = http.get(&url).send().await.unwrap();
        let took = started.elapsed();
        assert_eq!(ninth.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(ninth.headers()[CONTENT_TYPE], PROBLEM_JSON);
        assert!(
            ninth.headers()[SERVER_TIMING]
                .to_str()
                .unwrap()
                .contains("inventory;dur=")
        );
        let body: Value = ninth.json().await.unwrap();
        assert_eq!(body["type"], "urn:peer-checkout:dependency-overloaded");
        assert_eq!(body["status"], 503);
        // At once: long before any held call's 1.5 s is over.
        assert!(took < Duration::from_millis(700), "{took:?}");
        // The ninth never reached the partner.
        assert_eq!(partner.stats().requests, 8);
        for h in held {
            let res = h.await.unwrap().unwrap();
            assert_eq!(res.status(), StatusCode::OK);
            let answer: CheckoutAnswer = res.json().await.unwrap();
            assert!(answer.degraded.is_empty());
        }
        // The permits came back: a tenth call goes through.
        let tenth = http.get(&url).send().await.unwrap();
        assert_eq!(tenth.status(), StatusCode::OK);
        partner.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_shedding_a_call_waits_for_a_permit_and_the_timeout_covers_the_wait() {
        let partner = partner(FaultMode::Normal).await;
        let mut config = PeerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
        // One permit; inventory holds it 600 ms; 1.5 s for the wait and
        // the call together.
        config.inventory_url = partner.url("/inventory?delay=600ms");
        config.pricing_url = partner.url("/pricing");
        config.recommendations_url = partner.url("/recommendations");
        config.concurrency = 1;
        config.timeout = Duration::from_millis(1500);
        config.shed = false;
        let url = peer(config).await;
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let started = Instant::now();
        let calls: Vec<_> = (0..3)
            .map(|i| {
                let req = http.get(&url).header(X_REQUEST_ID, format!("q-{i}"));
                tokio::spawn(async move {
                    let res = req.send().await.unwrap();
                    (res.status(), started.elapsed())
                })
            })
            .collect();
        let mut statuses = Vec::new();
        for c in calls {
            statuses.push(c.await.unwrap());
        }
        statuses.sort();
        // The first two in line are served one after the other (600 ms,
        // 1.2 s); the third waits 1.2 s for the permit and would end at
        // 1.8 s: its 1.5 s, counted from before the wait, run out during
        // its call, a 504, and nothing is shed (no 503).
        let codes: Vec<u16> = statuses.iter().map(|(s, _)| s.as_u16()).collect();
        assert_eq!(codes, [200, 200, 504], "{statuses:?}");
        let (_, timed_out_at) = statuses[2];
        assert!(
            timed_out_at >= Duration::from_millis(1400),
            "{timed_out_at:?}"
        );
        // Three inventory calls, two of pricing and recommendations each.
        assert_eq!(partner.stats().requests, 3 + 2 * 2);
        partner.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pricing_is_retried_on_5xx_and_a_timeout_is_a_504_problem() {
        let partner = partner(FaultMode::Normal).await;
        let mut config = PeerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
        config.inventory_url = partner.url("/inventory");
        config.pricing_url = partner.url("/pricing?script=503,503,200");
        config.recommendations_url = partner.url("/recommendations?status=500");
        config.timeout = Duration::from_millis(300);
        let url = peer(config.clone()).await;
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let res = http
            .get(&url)
            .header(X_REQUEST_ID, "r-1")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let timing = res.headers()[SERVER_TIMING].to_str().unwrap().to_owned();
        assert!(
            timing.contains("pricing;dur=")
                && timing.matches("desc=\"503\"").count() == 2
                && timing.contains("recommendations;dur="),
            "{timing}"
        );
        let answer: CheckoutAnswer = res.json().await.unwrap();
        assert_eq!(answer.degraded[0].dependency, "recommendations");
        assert!(answer.recommendations.is_none());
        // The partner saw 3 pricing attempts of r-1; no budget anywhere.
        let stats = partner.stats();
        assert_eq!(stats.ids["r-1"].attempts, 5, "{stats:?}");
        assert_eq!(stats.with_budget, 0);

        config.pricing_url = partner.url("/pricing?delay=2s");
        let url = peer(config).await;
        let started = Instant::now();
        let res = http.get(&url).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::GATEWAY_TIMEOUT);
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["type"], "urn:peer-checkout:dependency-timeout");
        // Three attempts of 300 ms each, no backoff.
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(900), "{took:?}");
        assert!(took < Duration::from_millis(1800), "{took:?}");
        partner.shutdown().await;
    }
}
