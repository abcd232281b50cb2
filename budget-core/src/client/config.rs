//! [`DependencyConfig`]: what a config file says about one dependency, and
//! its validation into the settings a [`BudgetClient`](super::BudgetClient)
//! runs with.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::stale::{DEFAULT_MAX_STALE, StaleCacheConfig};
use crate::admission::limit::LimitConfig;
use crate::admission::queue::QueueConfig;
use crate::breaker::BreakerConfig;
#[cfg(feature = "client")]
use crate::config::ConfigError;
use crate::floor::FloorConfig;
use crate::outbound::TimeoutMode;
use crate::outbound::endpoints::DEFAULT_RESOLVE_INTERVAL;
use crate::outbound::hedging::HedgeConfig;
use crate::retry::{RetryBudgetConfig, RetryConfig};

mod setters;
mod settings;

#[cfg(feature = "client")]
pub(crate) use settings::Settings;

/// The connect cap when the config does not say: 1 s.
///
/// ```
/// use budget_core::client::{DependencyConfig, DEFAULT_CONNECT_CAP};
/// assert_eq!(DependencyConfig::new("a", "http://a").connect_cap, DEFAULT_CONNECT_CAP);
/// ```
pub const DEFAULT_CONNECT_CAP: Duration = Duration::from_secs(1);

/// How long an idle pooled connection may be reused when the config does
/// not say: 60 s, below the 75 s idle timeout of the chain's servers (docs/operations.md,
/// "HTTP server limits and errors"), so that a call never goes out on a
/// connection the server is closing.
///
/// ```
/// use budget_core::client::{DependencyConfig, DEFAULT_POOL_IDLE_TIMEOUT};
/// assert_eq!(DependencyConfig::new("a", "http://a").pool_idle_timeout, DEFAULT_POOL_IDLE_TIMEOUT);
/// ```
pub const DEFAULT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The per-attempt timeout of [`TimeoutMode::Fixed`] when the config does not say:
/// 30 s, the "generous fixed timeout" of the usual setup.
///
/// ```
/// use budget_core::client::{DependencyConfig, DEFAULT_FIXED_TIMEOUT};
/// assert_eq!(DependencyConfig::new("a", "http://a").fixed_timeout, DEFAULT_FIXED_TIMEOUT);
/// ```
pub const DEFAULT_FIXED_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest response body buffered when the config does not say: 4 MiB.
///
/// ```
/// use budget_core::client::{DependencyConfig, DEFAULT_MAX_BODY};
/// assert_eq!(DependencyConfig::new("a", "http://a").max_body, DEFAULT_MAX_BODY);
/// ```
pub const DEFAULT_MAX_BODY: u64 = 4 * 1024 * 1024;

/// What a call does when it cannot be made at all (below the floor,
/// circuit open, no concurrency permit within the budget), and, for
/// `stale`, when it gets no usable answer: the three answers to a budget
/// that cannot be met.
///
/// Serialises as `"fail"`, `"skip"` or `"stale"`.
///
/// ```
/// use budget_core::client::OnUnavailable;
/// let o: OnUnavailable = serde_json::from_str("\"skip\"").unwrap();
/// assert_eq!(o, OnUnavailable::Skip);
/// let o: OnUnavailable = serde_json::from_str("\"stale\"").unwrap();
/// assert_eq!(o, OnUnavailable::Stale);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum OnUnavailable {
    /// A required dependency: the call is an error (`504`, or `503` for an
    /// open circuit, once turned into a problem).
    #[default]
    Fail,
    /// An optional dependency: `send_optional` answers `Skipped` and the
    /// caller serves its fallback (a default, "degraded").
    Skip,
    /// The last good answer, at most `max_stale` old: the client keeps
    /// each `GET`/`HEAD` URL's last `2xx` answer (bounded by
    /// `stale_cache`), and `send` returns it, marked
    /// ([`BudgetResponse::stale`][response-stale]) and noted
    /// in the ledger (`inventory;desc="stale 12s"`), when a call is not
    /// made, gets no usable answer, or ends with a `500`/`502`/`503`/`504`
    /// (see the [stale fallback](super::stale)). With no such answer the
    /// call ends as with `fail`.
    ///
    #[cfg_attr(
        feature = "client",
        doc = "[response-stale]: super::BudgetResponse::stale"
    )]
    #[cfg_attr(not(feature = "client"), doc = "[response-stale]: crate::docs::client")]
    Stale,
}

/// One dependency's configuration, as read from TOML or JSON (durations in
/// humantime form, unknown fields rejected). Validate it with
/// `build`.
///
/// | field | meaning | default |
/// | --- | --- | --- |
/// | `name` | the ledger's and the logs' name for it; a token | required |
/// | `url` | base URL; its query string is kept on every call | required |
/// | `connect_cap` | the longest a connect may take (still capped by the budget) | `1s` |
/// | `pool_idle_timeout` | an idle keep-alive connection is not reused after this, and is closed between once and twice this after its last use | `60s` |
/// | `floor` | below this (net of the reserve), the call is not made: `"250ms"`, `"auto"` or a table ([`FloorConfig`]) | `0s` |
/// | `retry` | the [`RetryConfig`] | the contract's |
/// | `retry_budget` | a per-client [`RetryBudgetConfig`]; absent: none | none |
/// | `breaker` | a [`BreakerConfig`]; absent: no breaker | none |
/// | `concurrency` | in-flight calls at most (waits are paid from the budget): `8`, `"auto"` or a table ([`LimitConfig`]) | unlimited |
/// | `hedge` | hedged requests: `"auto"`, `"40ms"`, `"off"` or a table ([`HedgeConfig`]); idempotent calls, budget mode | none; `"auto"` to another replica for a dependency with replicas |
/// | `queue` | how calls wait for a permit ([`QueueConfig`]: `order`, `target`, `interval`) | adaptive LIFO, 5 ms / 100 ms |
/// | `on_unavailable` | `fail`, `skip` or `stale` ([`OnUnavailable`]) | `fail` |
/// | `max_stale` | with `on_unavailable = "stale"`: the oldest answer served in place of a failed call | `30s` |
/// | `stale_cache` | with `on_unavailable = "stale"`: `{ max_entries, max_bytes }` kept ([`StaleCacheConfig`]) | 1024 entries, 8 MiB |
/// | `grpc_timeout` | also send `grpc-timeout` | `false` |
/// | `forward` | send the budget and criticality headers; `false`: the call keeps every rule but the dependency (a third-party API) is sent neither | `true` |
/// | `max_body` | the largest response body buffered, in bytes | 4 MiB |
/// | `trace_query` | `url.full` on the attempt span keeps the query's values (else `REDACTED`) | `false` |
/// | `mode` | `budget` or `fixed` ([`TimeoutMode`]) | `budget` |
/// | `fixed_timeout` | each attempt's timeout in `fixed` mode | `30s` |
/// | `default_budget` | the budget of a call made outside any request (a start-up warm-up, a background job) and without its own `.budget(..)`; absent: such a call fails with `NoBudget` | none |
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::client::{DependencyConfig, TimeoutMode, OnUnavailable};
///
/// let config: DependencyConfig = toml::from_str(r#"
///     name = "pricing"
///     url = "http://127.0.0.1:9000/pricing?script=503@250ms,200@400ms"
///     connect_cap = "200ms"
///     floor = "50ms"
///     concurrency = 32
///     on_unavailable = "skip"
///     [retry]
///     max_attempts = 2
///     [retry_budget]
///     ratio = 0.1
///     [breaker]
///     failure_threshold = 10
/// "#).unwrap();
/// assert_eq!(config.connect_cap, Duration::from_millis(200));
/// assert_eq!(config.on_unavailable, OnUnavailable::Skip);
/// assert_eq!(config.mode, TimeoutMode::Budget);
/// let client = config.build().unwrap();
/// assert_eq!(client.name(), "pricing");
///
/// // A typo is an error, not a silent default.
/// let err = toml::from_str::<DependencyConfig>("name = \"a\"\nurl = \"http://a\"\nfloor_ms = 5")
///     .unwrap_err();
/// assert!(err.to_string().contains("unknown field `floor_ms`"));
/// ```
///
/// In code, start from [`new`](Self::new) (name and URL, every other field
/// at its default) and set the fields that differ. A config is plain
/// public fields and has no setters (the setters of earlier versions are
/// deprecated); builders are for layers (`GrpcBudgetLayer`,
/// `BudgetLayer`). `build`
/// validates:
///
/// ```
/// use std::time::Duration;
/// use budget_core::breaker::BreakerConfig;
/// use budget_core::client::{DependencyConfig, OnUnavailable};
/// use budget_core::floor::FloorConfig;
///
/// let mut config = DependencyConfig::new("pricing", "http://127.0.0.1:9000/pricing");
/// config.connect_cap = Duration::from_millis(200);
/// config.floor = FloorConfig::fixed(Duration::from_millis(50));
/// config.concurrency = Some(32.into());
/// config.retry.max_attempts = 2;
/// let mut breaker = BreakerConfig::default();
/// breaker.failure_threshold = 10;
/// config.breaker = Some(breaker);
/// config.on_unavailable = OnUnavailable::Skip;
/// assert_eq!(config.breaker.map(|b| b.failure_threshold), Some(10));
/// # #[cfg(feature = "client")]
/// assert_eq!(config.build().unwrap().name(), "pricing");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct DependencyConfig {
    /// The dependency's name in the ledger and the logs (an HTTP token:
    /// letters, digits and `!#$%&'*+-.^_`|~`).
    pub name: String,
    /// The base URL (`http` or `https`). A query string is kept on every
    /// call; a call's path is appended to the URL's path. An `http` URL
    /// whose host is a name is as many endpoints as the name resolves to
    /// (see `resolve_interval`).
    pub url: String,
    /// The dependency's replicas, `scheme://host:port` each
    /// (`["http://10.0.0.1:9000", "http://10.0.0.2:9000"]`): each call's
    /// attempt goes to one of them, chosen by load and by what the call
    /// can still afford, the URL's path and query kept; empty (the
    /// default): the URL's own host.
    #[serde(default)]
    pub endpoints: Vec<String>,
    /// How often an `http` URL's host name is looked up again, each
    /// address it resolves to an endpoint (default 5 s); `0s`: the name is
    /// one endpoint, resolved by the HTTP client as it connects. Not used
    /// with an `endpoints` list, an address as the host, or `https` (the
    /// certificate names the host).
    #[serde(default = "default_resolve_interval", with = "crate::config::duration")]
    pub resolve_interval: Duration,
    /// The longest a TCP (and TLS) connect may take; the budget caps it
    /// further (docs/contract.md §2 rule 1).
    #[serde(default = "default_connect_cap", with = "crate::config::duration")]
    pub connect_cap: Duration,
    /// How long an idle keep-alive connection may be reused. hyper's pool
    /// never hands out a connection idle for longer, and closes idle ones
    /// when it next checks; it checks every `pool_idle_timeout`, so an
    /// idle connection is closed between once and twice this after its last
    /// use (90 s gives 90-180 s). Set it below the idle timeout of the
    /// dependency's server and of whatever sits in between (a load balancer
    /// that drops idle connections silently turns the next call on them
    /// into a reset).
    #[serde(
        default = "default_pool_idle_timeout",
        with = "crate::config::duration"
    )]
    pub pool_idle_timeout: Duration,
    /// The least remaining budget (net of the per-hop reserve) with which
    /// a call, or a retry, is still made: fixed (`"250ms"`) or learned
    /// from the dependency's latency (`"auto"`, or a table: [`FloorConfig`]).
    #[serde(default)]
    pub floor: FloorConfig,
    /// Attempts, backoff, `Retry-After` cap, retryable statuses.
    #[serde(default)]
    pub retry: RetryConfig,
    /// The per-client retry budget (a ratio of retries to calls); absent:
    /// none, only `retry.max_attempts` bounds retries.
    #[serde(default)]
    pub retry_budget: Option<RetryBudgetConfig>,
    /// The circuit breaker; absent: none.
    #[serde(default)]
    pub breaker: Option<BreakerConfig>,
    /// How many calls may be in flight at once: a number, `"auto"` (an
    /// adaptive limit learned from latency) or an adaptive table
    /// ([`LimitConfig`]); absent: no limit. A call waits for a permit, paid
    /// from its budget, and holds it through its retries and backoff.
    #[serde(default)]
    pub concurrency: Option<LimitConfig>,
    /// Hedged requests: `"auto"`, a delay (`"40ms"`), `"off"` or a table
    /// ([`HedgeConfig`]). Absent: none for a dependency with one
    /// endpoint; `"auto"`, to another replica only, for one with replicas
    /// (an `endpoints` list or a host name to resolve). Only idempotent
    /// (or keyed) calls are hedged, and only in budget mode.
    #[serde(default)]
    pub hedge: Option<HedgeConfig>,
    /// How calls wait for a permit in budget mode: order (`adaptive`,
    /// `fifo`, `lifo`) and the standing-queue `target` and `interval`
    /// ([`QueueConfig`]).
    #[serde(default)]
    pub queue: QueueConfig,
    /// What a call does when it cannot be made (and, for `stale`, when it
    /// fails): fail, skip (`send_optional`), or serve the last good answer.
    #[serde(default)]
    pub on_unavailable: OnUnavailable,
    /// With `on_unavailable = "stale"`, the oldest a kept answer may be to
    /// be served in place of a call that failed (HTTP's `max-stale`); more
    /// than zero.
    #[serde(default = "default_max_stale", with = "crate::config::duration")]
    pub max_stale: Duration,
    /// With `on_unavailable = "stale"`, how much the client keeps: at most
    /// `max_entries` URLs and `max_bytes` bytes ([`StaleCacheConfig`]).
    #[serde(default)]
    pub stale_cache: StaleCacheConfig,
    /// Also send `grpc-timeout` (same value as `request-budget-ms`).
    #[serde(default)]
    pub grpc_timeout: bool,
    /// Send the budget on (`request-budget-ms`, and `grpc-timeout` with
    /// `grpc_timeout`) and `request-criticality` (default `true`). `false`
    /// for a dependency outside the chain (a third-party API): the call
    /// still spends the budget (deadlines, floor, retries and their waits
    /// paid from it), and the dependency is sent none of these headers.
    /// A gRPC call keeps its `grpc-timeout`, gRPC's own deadline that
    /// every gRPC server reads, and drops `request-criticality`.
    #[serde(default = "default_forward")]
    pub forward: bool,
    /// The largest response body buffered, in bytes.
    #[serde(default = "default_max_body")]
    pub max_body: u64,
    /// Record the URL's query string in the attempt span's `url.full` as it
    /// is; `false` (the default): every query value reads `REDACTED`, as
    /// queries may carry secrets.
    #[serde(default)]
    pub trace_query: bool,
    /// `budget` (default) or `fixed`.
    #[serde(default)]
    pub mode: TimeoutMode,
    /// Each attempt's timeout in [`TimeoutMode::Fixed`]; ignored in budget mode.
    #[serde(default = "default_fixed_timeout", with = "crate::config::duration")]
    pub fixed_timeout: Duration,
    /// In budget mode, the budget of a call made outside any request's
    /// budget (a start-up warm-up, a background job, a task spawned without
    /// the request's context) and without its own
    /// `RequestBuilder::budget`: a fresh budget of
    /// this much, every rule applied as within a request. Absent (the
    /// default): such a call fails with
    /// [`CallErrorKind::NoBudget`](crate::client::CallErrorKind::NoBudget)
    /// over HTTP, and passes through untouched over gRPC.
    #[serde(default, with = "crate::config::duration")]
    pub default_budget: Option<Duration>,
}

impl DependencyConfig {
    /// Whether a call may need TLS: the URL or an `endpoints` entry is
    /// `https` (a bad one is refused before this is asked).
    #[cfg(feature = "client")]
    pub(crate) fn needs_tls(&self) -> bool {
        let https = |url: &str| {
            url.get(..8)
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
        };
        https(&self.url) || self.endpoints.iter().any(|e| https(e))
    }
}

fn default_forward() -> bool {
    true
}

fn default_resolve_interval() -> Duration {
    DEFAULT_RESOLVE_INTERVAL
}

fn default_connect_cap() -> Duration {
    DEFAULT_CONNECT_CAP
}

fn default_pool_idle_timeout() -> Duration {
    DEFAULT_POOL_IDLE_TIMEOUT
}

fn default_max_body() -> u64 {
    DEFAULT_MAX_BODY
}

fn default_max_stale() -> Duration {
    DEFAULT_MAX_STALE
}

fn default_fixed_timeout() -> Duration {
    DEFAULT_FIXED_TIMEOUT
}

impl DependencyConfig {
    /// A configuration with every optional field at its default.
    ///
    /// ```
    /// use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("inventory", "http://127.0.0.1:9000/inventory");
    /// assert_eq!(c.name, "inventory");
    /// assert!(c.breaker.is_none());
    /// ```
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            url: url.into(),
            endpoints: Vec::new(),
            resolve_interval: DEFAULT_RESOLVE_INTERVAL,
            connect_cap: DEFAULT_CONNECT_CAP,
            pool_idle_timeout: DEFAULT_POOL_IDLE_TIMEOUT,
            floor: FloorConfig::default(),
            retry: RetryConfig::default(),
            retry_budget: None,
            breaker: None,
            concurrency: None,
            hedge: None,
            queue: QueueConfig::default(),
            on_unavailable: OnUnavailable::default(),
            max_stale: DEFAULT_MAX_STALE,
            stale_cache: StaleCacheConfig::default(),
            grpc_timeout: false,
            forward: true,
            max_body: DEFAULT_MAX_BODY,
            trace_query: false,
            mode: TimeoutMode::default(),
            fixed_timeout: DEFAULT_FIXED_TIMEOUT,
            default_budget: None,
        }
    }

    /// Shorthand for `BudgetClient::builder(self.clone()).build()`: a
    /// [`BudgetClient`](super::BudgetClient) with its own HTTP client and
    /// its own breaker. [`BudgetClient::builder`](super::BudgetClient::builder)
    /// is the one way to build a client, and the way to share a breaker
    /// registry or an HTTP client, inject a clock or give a token source;
    /// the errors are [its `build`'s](super::BudgetClientBuilder::build),
    /// naming the field.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::client::DependencyConfig;
    ///
    /// let mut c = DependencyConfig::new("pricing", "ftp://pricing");
    /// assert_eq!(c.build().unwrap_err().field(), "url");
    /// c.url = "http://pricing".into();
    /// c.retry.max_attempts = 0;
    /// assert_eq!(c.build().unwrap_err().to_string(), "invalid config: `retry.max_attempts` must be at least 1");
    /// ```
    #[cfg(feature = "client")]
    pub fn build(&self) -> Result<super::BudgetClient, ConfigError> {
        super::BudgetClient::builder(self.clone()).build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::BreakerRegistry;

    fn err(c: &DependencyConfig) -> String {
        c.settings(None).unwrap_err().field().to_owned()
    }

    /// Absent `hedge`: none for one endpoint, the default to another
    /// replica only for a list or a name to resolve; `off` and a given
    /// config are as said.
    #[tokio::test]
    async fn a_dependency_with_replicas_is_hedged_by_default_to_another_replica() {
        let hedge = |c: DependencyConfig| {
            c.settings(None)
                .unwrap()
                .dependency
                .hedge
                .map(|h| h.other_replica_only)
        };
        let one = DependencyConfig::new("a", "http://127.0.0.1:9000/p");
        let list = DependencyConfig {
            endpoints: vec![
                "http://127.0.0.1:9001".into(),
                "http://127.0.0.1:9002".into(),
            ],
            ..one.clone()
        };
        let name = DependencyConfig::new("a", "http://partner.invalid:9000/p");
        assert_eq!(hedge(one.clone()), None);
        assert_eq!(hedge(list.clone()), Some(true));
        assert_eq!(hedge(name), Some(true));
        let with = |c: &DependencyConfig, h: HedgeConfig| DependencyConfig {
            hedge: Some(h),
            ..c.clone()
        };
        assert_eq!(hedge(with(&list, HedgeConfig::OFF)), None);
        assert_eq!(hedge(with(&list, HedgeConfig::default())), Some(false));
        assert_eq!(hedge(with(&one, HedgeConfig::default())), Some(false));
    }

    #[test]
    fn validation_names_each_field() {
        let ok = DependencyConfig::new("pricing", "http://127.0.0.1:9000/p?x=1");
        assert!(ok.settings(None).is_ok());
        let with = |f: &dyn Fn(&mut DependencyConfig)| {
            let mut c = ok.clone();
            f(&mut c);
            err(&c)
        };
        assert_eq!(with(&|c| c.name = String::new()), "name");
        assert_eq!(with(&|c| c.name = "a b".into()), "name");
        assert_eq!(with(&|c| c.url = "/relative".into()), "url");
        assert_eq!(with(&|c| c.url = "ftp://a".into()), "url");
        assert_eq!(with(&|c| c.url = "http://a/#frag".into()), "url");
        assert_eq!(with(&|c| c.connect_cap = Duration::ZERO), "connect_cap");
        assert_eq!(
            with(&|c| c.pool_idle_timeout = Duration::ZERO),
            "pool_idle_timeout"
        );
        assert_eq!(with(&|c| c.fixed_timeout = Duration::ZERO), "fixed_timeout");
        assert_eq!(
            with(&|c| c.default_budget = Some(Duration::ZERO)),
            "default_budget"
        );
        assert_eq!(with(&|c| c.max_body = 0), "max_body");
        assert_eq!(with(&|c| c.max_stale = Duration::ZERO), "max_stale");
        assert_eq!(
            with(&|c| c.stale_cache.max_entries = 0),
            "stale_cache.max_entries"
        );
        assert_eq!(
            with(&|c| c.concurrency = Some(LimitConfig::Fixed(0))),
            "concurrency"
        );
        assert_eq!(
            with(&|c| {
                c.concurrency = Some(LimitConfig::Adaptive(
                    crate::admission::limit::AdaptiveLimitConfig {
                        min: 0,
                        ..Default::default()
                    },
                ))
            }),
            "concurrency.min"
        );
        assert_eq!(with(&|c| c.queue.target = Duration::ZERO), "queue.target");
        let learned = |f: &dyn Fn(&mut crate::floor::LearnedFloorConfig)| {
            let mut l = crate::floor::LearnedFloorConfig::default();
            f(&mut l);
            FloorConfig::Learned(l)
        };
        assert_eq!(
            with(&|c| c.floor = learned(&|l| l.quantile = 1.5)),
            "floor.quantile"
        );
        assert_eq!(
            with(&|c| c.floor = learned(&|l| l.margin = 0.5)),
            "floor.margin"
        );
        assert_eq!(
            with(&|c| c.floor = learned(&|l| l.min = Duration::from_secs(5))),
            "floor.min"
        );
        assert_eq!(
            with(&|c| c.queue.interval = Duration::from_millis(1)),
            "queue.target"
        );
        assert_eq!(
            with(&|c| c.retry.backoff.initial = Duration::ZERO),
            "retry.backoff.initial"
        );
        assert_eq!(
            with(&|c| {
                c.retry_budget = Some(RetryBudgetConfig {
                    ratio: -1.0,
                    ..Default::default()
                })
            }),
            "retry_budget.ratio"
        );
        assert_eq!(
            with(&|c| {
                c.breaker = Some(BreakerConfig {
                    failure_threshold: 0,
                    ..Default::default()
                })
            }),
            "breaker.failure_threshold"
        );
    }

    #[test]
    fn a_shared_registry_must_run_the_configured_breaker_policy() {
        // A name not resolved into replicas is one endpoint, keyed by it.
        let mut c = DependencyConfig::new("pricing", "http://pricing:9000/p");
        c.resolve_interval = Duration::ZERO;
        c.breaker = Some(BreakerConfig {
            failure_threshold: 3,
            ..Default::default()
        });
        let other = BreakerRegistry::default(); // threshold 5
        assert_eq!(c.settings(Some(&other)).unwrap_err().field(), "breaker");

        let registry = BreakerRegistry::new(c.breaker.unwrap().build().unwrap());
        let a = c.settings(Some(&registry)).unwrap().dependency.endpoints;
        let a = a.breaker().unwrap();
        c.url = "http://PRICING:9000/other?q=1".into();
        let b = c.settings(Some(&registry)).unwrap().dependency.endpoints;
        assert!(
            std::ptr::eq(a, b.breaker().unwrap()),
            "one endpoint, one breaker"
        );
        // Without a registry, each client has its own.
        let c1 = c.settings(None).unwrap().dependency.endpoints;
        assert!(!std::ptr::eq(a, c1.breaker().unwrap()));
    }

    #[test]
    fn minimal_toml_takes_every_default() {
        let c: DependencyConfig = toml::from_str("name = \"a\"\nurl = \"http://a\"").unwrap();
        assert_eq!(c, DependencyConfig::new("a", "http://a"));
    }
}
