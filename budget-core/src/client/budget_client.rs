//! [`BudgetClient`] and its [`BudgetClientBuilder`].

use std::fmt;
use std::sync::Arc;

use http::Method;
use reqwest::Url;

use super::auth::{Auth, TokenSource};
use super::config::{DependencyConfig, Settings};
use super::request::RequestBuilder;
use crate::breaker::{BreakerRegistry, CircuitBreaker};
use crate::clock::{SystemClock, WallClock};
use crate::config::ConfigError;
use crate::outbound::TimeoutMode;
use crate::outbound::error::error_chain;
use crate::outbound::permits::Permits;
use crate::retry::RetryBudget;

/// A budget-aware HTTP client for one dependency.
///
/// Cheap to clone (an `Arc` inside): make one per dependency at start-up
/// and clone it into handlers. Every call reads the current request's
/// budget (see the [module docs](super)), refuses what cannot fit, forwards
/// what is left, and retries within it.
///
/// # Example
///
/// ```no_run
/// use budget_core::client::{BudgetClient, DependencyConfig};
/// use budget_core::breaker::BreakerRegistry;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let config = DependencyConfig::new("inventory", "http://127.0.0.1:9000/inventory");
/// let inventory = BudgetClient::builder(config)
///     .breakers(BreakerRegistry::default()) // share breakers between clients
///     .build()?;
/// let also_inventory = inventory.clone();
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct BudgetClient {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) http: reqwest::Client,
    pub(crate) settings: Settings,
    pub(crate) clock: Arc<dyn WallClock>,
    /// The bearer token source, if the builder was given one.
    pub(crate) auth: Option<Auth>,
}

impl BudgetClient {
    /// A builder for a client of the dependency `config` describes: the one
    /// way to build a client ([`DependencyConfig::build`] is its shorthand
    /// for a client with its own HTTP client and breaker).
    ///
    /// ```
    /// use budget_core::client::{BudgetClient, DependencyConfig};
    /// let client = BudgetClient::builder(DependencyConfig::new("a", "http://127.0.0.1:1")).build();
    /// assert!(client.is_ok());
    /// ```
    pub fn builder(config: DependencyConfig) -> BudgetClientBuilder {
        BudgetClientBuilder {
            config,
            http: None,
            breakers: None,
            clock: Arc::new(SystemClock),
            auth: None,
        }
    }

    /// A `GET` of `path`, appended to the base URL's path (`""` calls the
    /// base URL itself); the base URL's query string is kept, and a query in
    /// `path` is added after it.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("p", "http://127.0.0.1:9000/pricing?script=503@250ms").build().unwrap();
    /// assert_eq!(c.get("").url().as_str(), "http://127.0.0.1:9000/pricing?script=503@250ms");
    /// assert_eq!(c.get("/quote?sku=7").url().as_str(), "http://127.0.0.1:9000/pricing/quote?script=503@250ms&sku=7");
    /// ```
    pub fn get(&self, path: &str) -> RequestBuilder {
        self.request(Method::GET, path)
    }

    /// A `POST` of `path` (retried only with an `Idempotency-Key` header).
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("orders", "http://127.0.0.1:9000").build().unwrap();
    /// let req = c.post("/orders").header("idempotency-key", "k-42").body("{}");
    /// assert_eq!(req.url().as_str(), "http://127.0.0.1:9000/orders");
    /// ```
    pub fn post(&self, path: &str) -> RequestBuilder {
        self.request(Method::POST, path)
    }

    /// A `PUT` of `path`.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://127.0.0.1:9000").build().unwrap();
    /// assert_eq!(c.put("/x").method(), http::Method::PUT);
    /// ```
    pub fn put(&self, path: &str) -> RequestBuilder {
        self.request(Method::PUT, path)
    }

    /// A `DELETE` of `path`.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://127.0.0.1:9000").build().unwrap();
    /// assert_eq!(c.delete("/x").method(), http::Method::DELETE);
    /// ```
    pub fn delete(&self, path: &str) -> RequestBuilder {
        self.request(Method::DELETE, path)
    }

    /// A request of any method (see [`get`](Self::get) for `path`).
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://127.0.0.1:9000/base/").build().unwrap();
    /// let req = c.request(http::Method::HEAD, "item");
    /// assert_eq!(req.url().as_str(), "http://127.0.0.1:9000/base/item");
    /// ```
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        RequestBuilder::new(self.clone(), method, path)
    }

    /// The dependency's configured name.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// assert_eq!(DependencyConfig::new("inventory", "http://a").build().unwrap().name(), "inventory");
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.settings.dependency.name
    }

    /// The base URL.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a:81/x?y=1").build().unwrap();
    /// assert_eq!(c.base_url().as_str(), "http://a:81/x?y=1");
    /// ```
    pub fn base_url(&self) -> &Url {
        &self.inner.settings.base
    }

    /// Budget or fixed mode.
    ///
    /// ```
    /// # use budget_core::client::{DependencyConfig, TimeoutMode};
    /// assert_eq!(DependencyConfig::new("a", "http://a").build().unwrap().mode(), TimeoutMode::Budget);
    /// ```
    pub fn mode(&self) -> TimeoutMode {
        self.inner.settings.mode
    }

    /// The dependency's circuit breaker, if it has one and is one
    /// endpoint (its URL's host an address, or an `https` URL, or
    /// `resolve_interval` zero, or a one-entry `endpoints` list). With
    /// replicas each endpoint has its own breaker: `None`.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let mut config = DependencyConfig::new("a", "http://127.0.0.1:9000");
    /// assert!(config.build().unwrap().breaker().is_none());
    /// config.breaker = Some(Default::default());
    /// assert_eq!(config.build().unwrap().breaker().unwrap().key(), "http://127.0.0.1:9000");
    /// let replicas = config.endpoints(["http://127.0.0.1:9001", "http://127.0.0.1:9002"]);
    /// assert!(replicas.build().unwrap().breaker().is_none());
    /// ```
    pub fn breaker(&self) -> Option<&CircuitBreaker> {
        self.inner.settings.dependency.endpoints.breaker()
    }

    /// The floor in force now and where it came from (fixed, or learned
    /// from the dependency's latency).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{client::DependencyConfig, floor::Floor};
    /// let mut config = DependencyConfig::new("a", "http://a");
    /// config.floor = Floor::new(Duration::from_millis(50)).into();
    /// assert_eq!(config.build().unwrap().floor().floor.get(), Duration::from_millis(50));
    /// ```
    pub fn floor(&self) -> crate::floor::Effective {
        self.inner.settings.dependency.floor.current()
    }

    /// The concurrency limit now (fixed, or where an adaptive limit stands);
    /// `None` without a limit.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let mut config = DependencyConfig::new("a", "http://a");
    /// assert_eq!(config.build().unwrap().concurrency_limit(), None);
    /// config.concurrency = Some(8.into());
    /// assert_eq!(config.build().unwrap().concurrency_limit(), Some(8));
    /// ```
    pub fn concurrency_limit(&self) -> Option<usize> {
        self.inner
            .settings
            .dependency
            .permits
            .as_ref()
            .map(Permits::limit)
    }

    /// The client's retry budget, if it has one.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let mut config = DependencyConfig::new("a", "http://a");
    /// config.retry_budget = Some(Default::default());
    /// assert!(config.build().unwrap().retry_budget().is_some());
    /// ```
    pub fn retry_budget(&self) -> Option<&RetryBudget> {
        self.inner.settings.dependency.retry_budget.as_ref()
    }

    /// The underlying reqwest client.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").build().unwrap();
    /// let _raw: &reqwest::Client = c.get_ref();
    /// ```
    pub fn get_ref(&self) -> &reqwest::Client {
        &self.inner.http
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }
}

impl fmt::Debug for BudgetClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // No URL: it may carry credentials.
        let settings = &self.inner.settings;
        f.debug_struct("BudgetClient")
            .field("name", &settings.dependency.name)
            .field("mode", &settings.mode)
            .field("floor", &settings.dependency.floor)
            .finish_non_exhaustive()
    }
}

/// Builds a [`BudgetClient`]: share a [`BreakerRegistry`] or a
/// `reqwest::Client`, inject the [`WallClock`] that reads HTTP-date
/// `Retry-After` values, or give it a bearer [`TokenSource`].
///
/// # Example
///
/// ```
/// use budget_core::client::{BudgetClient, DependencyConfig};
/// use budget_core::breaker::BreakerRegistry;
///
/// let registry = BreakerRegistry::default();
/// let mut config = DependencyConfig::new("pricing", "http://127.0.0.1:9000/pricing");
/// config.breaker = Some(Default::default());
/// let a = BudgetClient::builder(config.clone()).breakers(registry.clone()).build().unwrap();
/// let b = BudgetClient::builder(config).breakers(registry).build().unwrap();
/// assert!(std::ptr::eq(a.breaker().unwrap(), b.breaker().unwrap()));
/// ```
#[must_use]
pub struct BudgetClientBuilder {
    config: DependencyConfig,
    http: Option<reqwest::Client>,
    breakers: Option<BreakerRegistry>,
    clock: Arc<dyn WallClock>,
    auth: Option<Auth>,
}

impl BudgetClientBuilder {
    /// Uses `http` instead of building a client. Connect timeouts and the
    /// pool are client-wide settings in reqwest: give it
    /// `connect_timeout(connect_cap)` and `pool_idle_timeout(...)` yourself
    /// (the budget still caps every attempt, connect included).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::client::{BudgetClient, DependencyConfig};
    /// let http = reqwest::Client::builder().connect_timeout(Duration::from_millis(200)).build().unwrap();
    /// let c = BudgetClient::builder(DependencyConfig::new("a", "http://a")).http_client(http).build();
    /// assert!(c.is_ok());
    /// ```
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Takes the breaker (when the config has one) from `registry`, shared
    /// with every other client of the same endpoint (`scheme://host:port`).
    /// The registry's policy must be the config's `breaker`.
    ///
    /// ```
    /// use budget_core::breaker::{BreakerConfig, BreakerRegistry};
    /// use budget_core::client::{BudgetClient, DependencyConfig};
    /// let mut config = DependencyConfig::new("a", "http://a");
    /// let mut breaker = BreakerConfig::default();
    /// breaker.failure_threshold = 2;
    /// config.breaker = Some(breaker);
    /// let err = BudgetClient::builder(config).breakers(BreakerRegistry::default()).build().unwrap_err();
    /// assert_eq!(err.field(), "breaker");
    /// ```
    pub fn breakers(mut self, registry: BreakerRegistry) -> Self {
        self.breakers = Some(registry);
        self
    }

    /// Reads HTTP-date `Retry-After` values against `clock` (default: the
    /// system clock).
    ///
    /// ```
    /// use std::time::SystemTime;
    /// use budget_core::clock::FixedClock;
    /// use budget_core::client::{BudgetClient, DependencyConfig};
    /// let c = BudgetClient::builder(DependencyConfig::new("a", "http://a"))
    ///     .wall_clock(FixedClock::new(SystemTime::UNIX_EPOCH))
    ///     .build();
    /// assert!(c.is_ok());
    /// ```
    pub fn wall_clock(mut self, clock: impl WallClock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Sends `Authorization: Bearer <token>` from `source` on every
    /// attempt; on a `401`, refreshes the token once (one refresh shared by
    /// the concurrent calls, waited for out of each call's budget) and
    /// makes the call once more. See [`auth`](super::auth).
    ///
    /// ```
    /// use budget_core::client::{BoxError, BudgetClient, DependencyConfig, auth::Token};
    /// let c = BudgetClient::builder(DependencyConfig::new("a", "http://a"))
    ///     .token_source(|| async { Token::bearer("s3cr3t").map_err(BoxError::from) })
    ///     .build();
    /// assert!(c.is_ok());
    /// ```
    pub fn token_source(mut self, source: impl TokenSource) -> Self {
        self.auth = Some(Auth::new(source));
        self
    }

    /// Validates the config and builds the client (with `connect_cap` as
    /// its connect timeout and `pool_idle_timeout`, unless given an
    /// [`http_client`](Self::http_client)).
    ///
    /// Errors name the field: `name` empty or not a token; `url` not an
    /// absolute `http`/`https` URL with a host, or with a `#fragment`;
    /// `connect_cap`, `pool_idle_timeout`, `fixed_timeout`, `max_stale`
    /// zero; `concurrency`, `max_body` zero; `stale_cache.max_entries`,
    /// `stale_cache.max_bytes` zero; the nested `retry.*`, `retry_budget.*`,
    /// `breaker.*` fields; `breaker` when a shared registry's policy is not
    /// the config's. A dependency with only `http` URLs gets a client that
    /// loads no CA store; an `https` one whose client cannot be built (no
    /// CA certificates on the machine, say) is reported against `url`.
    ///
    /// ```
    /// use budget_core::client::{BudgetClient, DependencyConfig};
    /// let mut config = DependencyConfig::new("a", "http://a");
    /// config.concurrency = Some(0.into());
    /// assert_eq!(BudgetClient::builder(config).build().unwrap_err().field(), "concurrency");
    /// let err = BudgetClient::builder(DependencyConfig::new("", "http://a")).build().unwrap_err();
    /// assert_eq!(err.field(), "name");
    /// ```
    pub fn build(self) -> Result<BudgetClient, ConfigError> {
        let settings = self.config.settings(self.breakers.as_ref())?;
        let http = match self.http {
            Some(http) => http,
            None => {
                let builder = reqwest::Client::builder()
                    .connect_timeout(settings.connect_cap)
                    .pool_idle_timeout(settings.pool_idle_timeout);
                let tls = self.config.needs_tls();
                if tls && !TLS {
                    return Err(ConfigError::new(
                        "url",
                        "is https, and budget-core was built without TLS \
                         (turn on its `rustls` or `native-tls` feature)",
                    ));
                }
                // A dependency called over plain HTTP only needs no CA
                // store: the machine's is not loaded (a container built
                // `FROM scratch` has none), and an `https` URL could not
                // reach it anyway.
                let builder = if tls {
                    builder
                } else {
                    without_ca_store(builder)
                };
                builder.build().map_err(|e| {
                    let why = error_chain(&e);
                    if tls {
                        ConfigError::new(
                            "url",
                            format!("is https, and the HTTPS client cannot be built: {why}"),
                        )
                    } else {
                        ConfigError::new("url", format!("cannot build the HTTP client: {why}"))
                    }
                })?
            }
        };
        Ok(BudgetClient {
            inner: Arc::new(Inner {
                http,
                settings,
                clock: self.clock,
                auth: self.auth,
            }),
        })
    }
}

/// Whether budget-core was built with a TLS implementation for reqwest
/// (its `rustls` or `native-tls` feature).
const TLS: bool = cfg!(any(feature = "rustls", feature = "native-tls"));

/// A client builder that loads no CA certificates.
#[cfg(any(feature = "rustls", feature = "native-tls"))]
fn without_ca_store(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    builder.tls_certs_only(std::iter::empty())
}

/// Without a TLS feature there is no CA store to leave out.
#[cfg(not(any(feature = "rustls", feature = "native-tls")))]
fn without_ca_store(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    builder
}

impl fmt::Debug for BudgetClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BudgetClientBuilder")
            .field("name", &self.config.name)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::DependencyConfig;

    /// With TLS (the default `rustls`, or `native-tls`) an `https`
    /// dependency's client builds; without, it is refused naming `url`,
    /// while an `http` one builds either way. CI runs this in both builds.
    #[test]
    fn an_https_dependency_needs_a_tls_feature_and_an_http_one_does_not() {
        let http = BudgetClient::builder(DependencyConfig::new("a", "http://127.0.0.1:9/")).build();
        assert!(http.is_ok(), "{:?}", http.err());
        let https =
            BudgetClient::builder(DependencyConfig::new("a", "https://127.0.0.1:9/")).build();
        if TLS {
            assert!(https.is_ok(), "{:?}", https.err());
        } else {
            let err = https.unwrap_err();
            assert_eq!(err.field(), "url");
            assert!(
                err.to_string().contains("`rustls` or `native-tls`"),
                "{err}"
            );
        }
    }
}
