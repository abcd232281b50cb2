//! Checkout's configuration: the same fields as the binary's flags, plus one
//! TOML table per dependency, with humantime durations.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use checkout::CheckoutConfig;
//!
//! let config = CheckoutConfig::from_toml(r#"
//!     listen = "127.0.0.1:8081"
//!     pricing_url = "http://127.0.0.1:9000/pricing?script=503@250ms,200@400ms"
//!     recommendations_floor = "800ms"
//!
//!     [pricing.retry]
//!     max_attempts = 4
//!     jitter = "none"
//!
//!     [inventory.breaker]
//!     failure_threshold = 10
//!     open_for = "2s"
//! "#).unwrap();
//! assert_eq!(config.recommendations_floor, Duration::from_millis(800));
//! assert_eq!(config.pricing.retry.as_ref().unwrap().max_attempts, 4);
//! assert!(checkout::router(&config).is_ok());
//!
//! let err = CheckoutConfig::from_toml("[pricing]\nretries = 3").unwrap_err();
//! let message = service_kit::error_chain(&err);
//! assert!(message.contains("unknown field `retries`"), "{message}");
//!
//! assert_eq!(CheckoutConfig::from_toml("").unwrap(), CheckoutConfig::default());
//! assert!(CheckoutConfig::from_toml("max_budget = \"0s\"").is_err());
//! let err = CheckoutConfig::load("/no/such/checkout.toml".as_ref()).unwrap_err();
//! assert!(matches!(err, checkout::Error::ConfigFile(_)));
//! ```

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use budget_core::client::{
    BudgetClient, DependencyConfig, OnUnavailable, TimeoutMode, stale::StaleCacheConfig,
};
use budget_core::config::ConfigError;
use budget_core::floor::Floor;
use budget_core::grpc::GrpcBudgetLayer;
use budget_core::retry::{RetryBudgetConfig, RetryConfig};
use service_kit::RequestLayer;

use crate::grpc_inventory::{self, GrpcInventory};
use crate::handler::Inventory;
use crate::stock::Stock;
use service_kit::{ServiceConfig, ServiceSettings, overlay};

/// The default listen address: loopback, port 8081.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8081);

/// The default [`CheckoutConfig::recommendations_floor`]: 1 s.
pub const DEFAULT_RECOMMENDATIONS_FLOOR: Duration = Duration::from_secs(1);

/// The floor of `inventory` and `pricing` when their table does not say:
/// a call with less than 10 ms left is not worth sending.
pub use service_kit::DEFAULT_DEPENDENCY_FLOOR;

/// The three dependencies, in call order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dep {
    Inventory,
    Pricing,
    Recommendations,
}

impl Dep {
    /// The name in the ledger, the logs, the problem bodies and the config.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Dep::Inventory => "inventory",
            Dep::Pricing => "pricing",
            Dep::Recommendations => "recommendations",
        }
    }

    /// Attempts per call when the config does not say: pricing is the
    /// retried one; recommendations is optional and never retried.
    fn default_attempts(self) -> u32 {
        match self {
            Dep::Inventory => 2,
            Dep::Pricing => 3,
            Dep::Recommendations => 1,
        }
    }
}

service_kit::service_config! {
    /// How checkout starts. Every field has a default, so a TOML file needs
    /// only what it changes; unknown fields are an error.
    ///
    /// | field | flag | default |
    /// | --- | --- | --- |
    /// | `listen` | `--listen` | `127.0.0.1:8081` |
    /// | `budget_mode`, `default_budget`, `max_budget`, `floor`, `max_in_flight` | `--budget-mode`, `--default-budget`, `--max-budget`, `--floor`, `--max-in-flight` | every service's ([`ServiceSettings`'s defaults](ServiceSettings#defaults)); `floor` is the ingress floor (shed with `504` below it) |
    /// | `reserve` | `--reserve` | `5ms` (held back on every outbound call) |
    /// | `inventory_url` | `--inventory-url` | `http://127.0.0.1:9000/inventory` (`grpc://host:port/path?query`: over gRPC, the slow partner's `Partner/Call`, with the same floor, attempts, breaker and retry budget) |
    /// | `pricing_url` | `--pricing-url` | `http://127.0.0.1:9000/pricing` |
    /// | `recommendations_url` | `--recommendations-url` | `http://127.0.0.1:9000/recommendations` |
    /// | `recommendations_floor` | `--recommendations-floor` | `1s` |
    /// | `database_url` | `--database-url` | none: no database step ([`crate::stock`]) |
    /// | `[inventory]`, `[pricing]`, `[recommendations]` | (file only) | see [`DependencySettings`] |
    ///
    /// The first three rows are every service's fields ([`ServiceSettings`]). With
    /// `budget_mode = off` there is no budget layer, nothing is forwarded,
    /// every attempt gets a fixed 30 s timeout, retries are the fixed
    /// attempt counts, and recommendations is always called.
    ///
    /// A URL's query string is kept on every call, so pointing a dependency at
    /// the slow partner with query parameters shapes its behaviour.
    pub struct CheckoutConfig {
        /// The inventory dependency (required).
        pub inventory_url: String = "http://127.0.0.1:9000/inventory".to_owned(),
        /// The pricing dependency (required, retried).
        pub pricing_url: String = "http://127.0.0.1:9000/pricing".to_owned(),
        /// The recommendations dependency (optional).
        pub recommendations_url: String = "http://127.0.0.1:9000/recommendations".to_owned(),
        /// Below this budget (net of the reserve), recommendations is skipped
        /// and the answer marked degraded. Not applied with `budget_mode = off`.
        #[serde(with = "budget_core::config::duration")]
        pub recommendations_floor: Duration = DEFAULT_RECOMMENDATIONS_FLOOR,
        /// Client settings of inventory (default: 2 attempts).
        pub inventory: DependencySettings = DependencySettings::default(),
        /// Client settings of pricing (default: 3 attempts).
        pub pricing: DependencySettings = DependencySettings::default(),
        /// Client settings of recommendations (default: 1 attempt); its floor
        /// is `recommendations_floor`.
        pub recommendations: DependencySettings = DependencySettings::default(),
        /// The orders database (PostgreSQL, `postgres://user@host:port/db`):
        /// each checkout reserves a unit of stock in it (`reserve-stock`,
        /// see [`crate::stock`]). Absent: no database step.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub database_url: Option<String> = None,
        ..ServiceSettings::new(DEFAULT_LISTEN, Duration::from_millis(5))
    }
}

service_kit::client_settings! {
    /// One dependency's client settings, as a TOML table (`[pricing]`,
    /// `[pricing.retry]`, ...): the fields of
    /// [`DependencyConfig`](budget_core::client::DependencyConfig) that are
    /// checkout's to choose ([`ClientSettings`](service_kit::ClientSettings)'
    /// and three more). An absent field takes checkout's default for that
    /// dependency; a present table (`[pricing.retry]`) replaces that default
    /// whole, its own missing fields taking `budget-core`'s defaults.
    ///
    /// | field | default |
    /// | --- | --- |
    /// | `connect_cap` | `1s` (the budget caps it further) |
    /// | `pool_idle_timeout` | `60s` (an idle keep-alive connection is not reused after it, and is closed 1-2x it after its last use) |
    /// | `floor` | `auto` (learned from latency); recommendations: `recommendations_floor` (set that instead) |
    /// | `breaker` | 20 consecutive failures, or 3 attempts without an answer for 4 typical latencies, open it for 1 s (`budget_mode = on` only; [`DEFAULT_DEPENDENCY_BREAKER`](service_kit::DEFAULT_DEPENDENCY_BREAKER)) |
    /// | `concurrency` | `auto` (an adaptive limit; ignored with `budget_mode = off`) |
    /// | `hedge` | none for a dependency of one endpoint; `"auto"`, to another replica only, for one with replicas (`endpoints`, or a host name to resolve); `"auto"` sends one more attempt after the learned p95 (idempotent calls only: inventory's `GET`, pricing's `GET`, or its `POST` when the caller sent an `idempotency-key`), `budget_mode = on` only; `"off"`: never ([`HedgeConfig`](budget_core::client::HedgeConfig)) |
    /// | `max_body` | 4 MiB |
    /// | `fixed_timeout` | `30s` (`budget_mode = off` only) |
    /// | `retry` | 3 attempts for pricing, 2 for inventory, 1 for recommendations; exponential backoff from 50 ms with full jitter |
    /// | `retry_budget` | a 20 % retry budget (`budget_mode = on` only) |
    /// | `grpc_timeout` | `false` |
    /// | `on_unavailable` | `fail` for inventory and pricing (`"stale"`: answer with the last good answer, at most `max_stale` old, when a call is not made or fails, and mark the answer degraded; over gRPC too, keyed by the method and request), `skip` for recommendations |
    /// | `max_stale` | `30s` (with `on_unavailable = "stale"`) |
    /// | `stale_cache` | `{ max_entries = 1024, max_bytes = 8388608 }` (with `on_unavailable = "stale"`; [`StaleCacheConfig`](budget_core::client::stale::StaleCacheConfig)) |
    ///
    /// ```
    /// let s: checkout::DependencySettings = toml::from_str(r#"
    ///     connect_cap = "200ms"
    ///     [breaker]
    ///     failure_threshold = 3
    /// "#).unwrap();
    /// assert_eq!(s.connect_cap, Some(std::time::Duration::from_millis(200)));
    /// ```
    pub struct DependencySettings {
        /// Attempts, backoff, `Retry-After` cap, retryable statuses.
        pub retry: Option<RetryConfig>,
        /// The per-client retry budget.
        pub retry_budget: Option<RetryBudgetConfig>,
        /// Also send `grpc-timeout`.
        pub grpc_timeout: Option<bool>,
        /// `fail`, `skip` (recommendations only) or `stale`.
        pub on_unavailable: Option<OnUnavailable>,
        /// The oldest answer served with `on_unavailable = "stale"`.
        #[serde(with = "budget_core::config::duration")]
        pub max_stale: Option<Duration>,
        /// How much the stale fallback keeps: `max_entries`, `max_bytes`.
        pub stale_cache: Option<StaleCacheConfig>,
    }
}

/// A validated [`CheckoutConfig`]: the layer in front of the route (the
/// ledger layer alone with `budget_mode = off`), the three clients and the
/// database, when there is one.
#[derive(Debug)]
pub(crate) struct Built {
    pub(crate) layer: RequestLayer,
    pub(crate) inventory: Inventory,
    pub(crate) pricing: BudgetClient,
    pub(crate) recommendations: BudgetClient,
    pub(crate) stock: Option<Stock>,
}

impl CheckoutConfig {
    /// The defaults, listening on `listen`.
    ///
    /// ```
    /// let config = checkout::CheckoutConfig::new("127.0.0.1:0".parse().unwrap());
    /// assert_eq!(config.listen.port(), 0);
    /// ```
    pub fn new(listen: SocketAddr) -> Self {
        Self {
            listen,
            ..Self::default()
        }
    }

    /// Checks every value; errors name the field (`max_budget`,
    /// `pricing_url`, `pricing.retry.max_attempts`, ...).
    ///
    /// ```
    /// # use checkout::CheckoutConfig;
    /// let mut config = CheckoutConfig::default();
    /// config.pricing_url = "pricing".into();
    /// assert_eq!(config.validate().unwrap_err().field(), "pricing_url");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.build().map(drop)
    }

    pub(crate) fn build(&self) -> Result<Built, ConfigError> {
        let layer = self.settings().request_layer()?;
        if self.recommendations.floor.is_some() {
            return Err(ConfigError::new(
                "recommendations.floor",
                "is set by recommendations_floor (--recommendations-floor)",
            ));
        }
        let inventory = if grpc_inventory::is_grpc(&self.inventory_url) {
            Inventory::Grpc(Box::new(self.grpc_inventory()?))
        } else {
            Inventory::Http(self.client(Dep::Inventory)?)
        };
        Ok(Built {
            layer,
            inventory,
            pricing: self.client(Dep::Pricing)?,
            recommendations: self.client(Dep::Recommendations)?,
            stock: self
                .database_url
                .as_deref()
                .map(|url| Stock::connect(url, self.budget_mode.is_on()))
                .transpose()?,
        })
    }

    /// Inventory's gRPC client (`inventory_url = grpc://...`): the layer
    /// made from the very `DependencyConfig` its HTTP client would have
    /// (floor, attempts, breaker, retry budget, permit queue and adaptive
    /// concurrency, and in off mode the fixed timeout), on the same call
    /// engine.
    fn grpc_inventory(&self) -> Result<GrpcInventory, ConfigError> {
        let within = |e: ConfigError| e.within(grpc_inventory::INVENTORY);
        let mut c = self.dependency_config(Dep::Inventory)?;
        // The endpoint (or a name's addresses, or the `endpoints` listed),
        // one channel each.
        c.url = grpc_inventory::endpoint_url(&self.inventory_url)?;
        let connect: grpc_inventory::Connect = grpc_inventory::connect;
        let (layer, channels) =
            GrpcBudgetLayer::balanced(&c, None, connect).map_err(|e| match e.field() {
                "url" => ConfigError::new("inventory_url", e.problem().to_owned()),
                _ => within(e),
            })?;
        GrpcInventory::new(&self.inventory_url, layer, channels)
    }

    /// The client of `dep`: checkout's defaults for it, then its table.
    fn client(&self, dep: Dep) -> Result<BudgetClient, ConfigError> {
        service_kit::dependency_client(&self.dependency_config(dep)?)
    }

    /// The configuration of `dep`'s client: checkout's defaults for it,
    /// then its table.
    fn dependency_config(&self, dep: Dep) -> Result<DependencyConfig, ConfigError> {
        let name = dep.name();
        let (url, settings) = match dep {
            Dep::Inventory => (&self.inventory_url, &self.inventory),
            Dep::Pricing => (&self.pricing_url, &self.pricing),
            Dep::Recommendations => (&self.recommendations_url, &self.recommendations),
        };
        let mut c = DependencyConfig::new(name, url.as_str());
        c.retry.max_attempts = dep.default_attempts();
        if dep == Dep::Recommendations {
            c.floor = Floor::new(self.recommendations_floor).into();
            c.on_unavailable = OnUnavailable::Skip;
        } else {
            c.floor = DEFAULT_DEPENDENCY_FLOOR;
        }
        c.concurrency = Some(service_kit::default_dependency_concurrency());
        if self.budget_mode.is_on() {
            c.retry_budget = Some(RetryBudgetConfig::default());
            c.breaker = Some(service_kit::DEFAULT_DEPENDENCY_BREAKER);
        } else {
            c.mode = TimeoutMode::Fixed;
        }
        settings.apply(&mut c);
        if dep != Dep::Recommendations && c.on_unavailable == OnUnavailable::Skip {
            return Err(ConfigError::new(
                format!("{name}.on_unavailable"),
                "must be `fail` or `stale`: `skip` is for an optional dependency",
            ));
        }
        // An attempt longer than any budget this service grants is a typo.
        c.retry
            .check_within(self.max_budget)
            .map_err(|e| e.within("retry").within(name))?;
        Ok(c)
    }
}

impl DependencySettings {
    /// Puts every field that is set onto `c`.
    fn apply(&self, c: &mut DependencyConfig) {
        self.shared().apply(c);
        overlay(&mut c.retry, self.retry.clone());
        overlay(&mut c.retry_budget, self.retry_budget.map(Some));
        overlay(&mut c.grpc_timeout, self.grpc_timeout);
        overlay(&mut c.on_unavailable, self.on_unavailable);
        overlay(&mut c.max_stale, self.max_stale);
        overlay(&mut c.stale_cache, self.stale_cache);
    }
}

#[cfg(test)]
mod tests {
    use budget_core::breaker::BreakerConfig;
    use service_kit::BudgetMode;

    use super::*;

    #[test]
    fn an_attempt_timeout_is_checked_against_the_overall_budget() {
        let mut config = CheckoutConfig::from_toml(
            "max_budget = \"2s\"\n[pricing.retry]\nattempt_timeout = \"500ms\"\n",
        )
        .unwrap();
        assert!(config.validate().is_ok());
        let mut retry = RetryConfig::default();
        retry.attempt_timeout = Some(std::time::Duration::from_secs(3));
        config.pricing.retry = Some(retry.clone());
        let err = config.validate().unwrap_err();
        assert_eq!(err.field(), "pricing.retry.attempt_timeout");
        retry.attempt_timeout = Some(std::time::Duration::ZERO);
        config.pricing.retry = Some(retry);
        assert_eq!(
            config.validate().unwrap_err().to_string(),
            "invalid config: `pricing.retry.attempt_timeout` must be more than zero"
        );
    }

    #[test]
    fn a_dependency_takes_a_default_budget_and_a_zero_one_is_named() {
        let config = CheckoutConfig::from_toml("[pricing]\ndefault_budget = \"1500ms\"\n").unwrap();
        let c = config.dependency_config(Dep::Pricing).unwrap();
        assert_eq!(
            c.default_budget,
            Some(std::time::Duration::from_millis(1500))
        );
        let err = CheckoutConfig::from_toml("[pricing]\ndefault_budget = \"0s\"\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("`pricing.default_budget` must be more than zero"),
            "{err}"
        );
    }

    #[test]
    fn a_dependency_takes_replicas_and_a_bad_one_is_named() {
        let config = CheckoutConfig::from_toml(
            "[pricing]\nendpoints = [\"http://127.0.0.1:9001\", \"http://127.0.0.1:9002\"]\n\
             resolve_interval = \"2s\"\n",
        )
        .unwrap();
        let c = config.dependency_config(Dep::Pricing).unwrap();
        assert_eq!(
            c.endpoints,
            ["http://127.0.0.1:9001", "http://127.0.0.1:9002"]
        );
        assert_eq!(c.resolve_interval, std::time::Duration::from_secs(2));
        assert!(config.validate().is_ok());
        let mut bad = config.clone();
        bad.pricing.endpoints = Some(vec![
            "http://127.0.0.1:9001".into(),
            "http://127.0.0.1:9001/pricing".into(),
        ]);
        let err = bad.validate().unwrap_err();
        assert_eq!(err.field(), "pricing.endpoints[1]");
        assert!(
            err.problem().contains("path and query come from `url`"),
            "{err}"
        );
        // Read from a file, the same error.
        let err = CheckoutConfig::from_toml(
            "[pricing]\nendpoints = [\"http://127.0.0.1:9001\", \"http://127.0.0.1:9001/pricing\"]\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("pricing.endpoints[1]"), "{err}");
    }

    #[test]
    fn every_field_reads_from_toml() {
        let config = CheckoutConfig::from_toml(
            r#"
            listen = "127.0.0.1:9181"
            budget_mode = "off"
            default_budget = "1500ms"
            max_budget = "5s"
            floor = "20ms"
            reserve = "7ms"
            inventory_url = "http://127.0.0.1:9000/i"
            pricing_url = "http://127.0.0.1:9000/p?delay=10ms"
            recommendations_url = "http://127.0.0.1:9000/r"
            recommendations_floor = "300ms"
            [inventory]
            connect_cap = "250ms"
            floor = "15ms"
            concurrency = 8
            grpc_timeout = true
            max_body = 1024
            fixed_timeout = "3s"
            [pricing.retry_budget]
            ratio = 0.1
            [recommendations.breaker]
            failure_threshold = 2
            "#,
        )
        .unwrap();
        assert_eq!(config.listen.port(), 9181);
        assert_eq!(config.budget_mode, BudgetMode::Off);
        assert_eq!(config.default_budget, Duration::from_millis(1500));
        assert_eq!(config.max_budget, Duration::from_secs(5));
        assert_eq!(config.floor, Duration::from_millis(20));
        assert_eq!(config.reserve, Duration::from_millis(7));
        assert_eq!(config.pricing_url, "http://127.0.0.1:9000/p?delay=10ms");
        assert_eq!(config.recommendations_floor, Duration::from_millis(300));
        assert_eq!(
            config.inventory.connect_cap,
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            config.inventory.floor,
            Some(budget_core::floor::FloorConfig::fixed(
                Duration::from_millis(15)
            ))
        );
        assert_eq!(config.inventory.concurrency, Some(8.into()));
        assert_eq!(config.inventory.grpc_timeout, Some(true));
        assert_eq!(config.inventory.max_body, Some(1024));
        assert_eq!(config.inventory.fixed_timeout, Some(Duration::from_secs(3)));
        assert_eq!(config.pricing.retry_budget.unwrap().ratio, 0.1);
        assert_eq!(config.recommendations.breaker.unwrap().failure_threshold, 2);
    }

    #[test]
    fn the_defaults_are_loopback_and_valid_in_both_modes() {
        let mut config = CheckoutConfig::default();
        assert!(config.listen.ip().is_loopback());
        assert!(config.validate().is_ok());
        config.budget_mode = BudgetMode::Off;
        assert!(!config.build().unwrap().layer.is_budget());
    }

    #[test]
    fn the_clients_get_each_dependency_s_role() {
        let built = CheckoutConfig::default().build().unwrap();
        let Inventory::Http(inventory) = &built.inventory else {
            panic!("an http:// inventory is called over HTTP");
        };
        assert_eq!(inventory.name(), "inventory");
        let grpc = CheckoutConfig {
            inventory_url: "grpc://127.0.0.1:9000/inventory".into(),
            ..CheckoutConfig::default()
        };
        assert!(matches!(
            grpc.build().unwrap().inventory,
            Inventory::Grpc(_)
        ));
        assert_eq!(built.pricing.mode(), TimeoutMode::Budget);
        assert!(built.pricing.retry_budget().is_some());
        let off = CheckoutConfig {
            budget_mode: BudgetMode::Off,
            ..CheckoutConfig::default()
        }
        .build()
        .unwrap();
        assert_eq!(off.pricing.mode(), TimeoutMode::Fixed);
        assert_eq!(off.recommendations.mode(), TimeoutMode::Fixed);
    }

    #[test]
    fn errors_name_the_field_of_this_config() {
        let field = |edit: &dyn Fn(&mut CheckoutConfig)| {
            let mut config = CheckoutConfig::default();
            edit(&mut config);
            config.validate().unwrap_err().field().to_owned()
        };
        assert_eq!(field(&|c| c.max_budget = Duration::ZERO), "max_budget");
        let toml_field = |text: &str| {
            let config: CheckoutConfig = toml::from_str(text).unwrap();
            config.validate().unwrap_err().field().to_owned()
        };
        assert_eq!(
            toml_field("[pricing]\nfloor = { margin = 0.5 }"),
            "pricing.floor.margin"
        );
        assert_eq!(
            toml_field("[inventory]\nconcurrency = { min = 4, max = 2 }"),
            "inventory.concurrency.max"
        );
        assert_eq!(
            toml_field("[inventory.queue]\ntarget = \"0s\""),
            "inventory.queue.target"
        );
        assert_eq!(field(&|c| c.floor = Duration::from_secs(60)), "floor");
        assert_eq!(
            field(&|c| c.inventory_url = "ftp://x".into()),
            "inventory_url"
        );
        assert_eq!(
            field(&|c| {
                let mut retry = RetryConfig::default();
                retry.max_attempts = 0;
                c.pricing.retry = Some(retry);
            }),
            "pricing.retry.max_attempts"
        );
        assert_eq!(
            field(&|c| c.recommendations.floor =
                Some(budget_core::floor::FloorConfig::fixed(Duration::ZERO))),
            "recommendations.floor"
        );
        assert_eq!(
            field(&|c| c.inventory.connect_cap = Some(Duration::ZERO)),
            "inventory.connect_cap"
        );
        assert_eq!(
            field(&|c| c.pricing.pool_idle_timeout = Some(Duration::ZERO)),
            "pricing.pool_idle_timeout"
        );
        assert_eq!(
            field(&|c| {
                let mut hedge = budget_core::client::HedgeConfig::default();
                hedge.ratio = 2.0;
                c.pricing.hedge = Some(hedge);
            }),
            "pricing.hedge.ratio"
        );
    }

    #[test]
    fn a_dependency_table_takes_a_hedge() {
        let config = CheckoutConfig::from_toml(
            "[pricing]\nhedge = \"auto\"\n[inventory]\nhedge = { delay = \"30ms\", ratio = 0.05 }",
        )
        .unwrap();
        assert_eq!(
            config.pricing.hedge,
            Some(budget_core::client::HedgeConfig::default())
        );
        let inventory = config.inventory.hedge.unwrap();
        assert_eq!(
            (inventory.delay, inventory.ratio),
            (
                budget_core::client::HedgeDelay::Fixed(Duration::from_millis(30)),
                0.05
            )
        );
        assert_eq!(CheckoutConfig::default().pricing.hedge, None, "opt-in");
    }

    #[test]
    fn a_malformed_file_is_an_error_naming_the_file_and_the_field() {
        let err = CheckoutConfig::from_toml("recommendations_floor = \"soon\"").unwrap_err();
        let text = service_kit::error_chain(&err);
        assert!(text.starts_with("invalid config file <inline>"), "{text}");
        assert!(text.contains("recommendations_floor"), "{text}");
    }

    #[test]
    fn a_dependency_table_takes_the_stale_fallback_and_checks_it() {
        let config = CheckoutConfig::from_toml(
            "[inventory]\non_unavailable = \"stale\"\nmax_stale = \"5s\"\n\
             stale_cache = { max_entries = 10 }",
        )
        .unwrap();
        assert_eq!(config.inventory.on_unavailable, Some(OnUnavailable::Stale));
        assert_eq!(config.inventory.max_stale, Some(Duration::from_secs(5)));
        assert_eq!(config.inventory.stale_cache.unwrap().max_entries, 10);
        assert!(config.validate().is_ok());
        assert_eq!(CheckoutConfig::default().inventory.on_unavailable, None);

        let field = |text: &str| {
            let config: CheckoutConfig = toml::from_str(text).unwrap();
            config.validate().unwrap_err().field().to_owned()
        };
        assert_eq!(field("[pricing]\nmax_stale = \"0s\""), "pricing.max_stale");
        assert_eq!(
            field("[inventory]\nstale_cache = { max_bytes = 0 }"),
            "inventory.stale_cache.max_bytes"
        );
        assert_eq!(
            field("[pricing]\non_unavailable = \"skip\""),
            "pricing.on_unavailable"
        );
        // Over gRPC too: stale is the layer's, skip is still refused.
        let grpc = "inventory_url = \"grpc://127.0.0.1:9000/inventory\"\n[inventory]\n";
        let config = CheckoutConfig::from_toml(&format!("{grpc}on_unavailable = \"stale\""));
        assert!(config.unwrap().validate().is_ok());
        assert_eq!(
            field(&format!("{grpc}on_unavailable = \"skip\"")),
            "inventory.on_unavailable"
        );
        // Recommendations may be answered stale too.
        let config = CheckoutConfig::from_toml("[recommendations]\non_unavailable = \"stale\"");
        assert!(config.unwrap().validate().is_ok());
    }

    #[test]
    fn the_config_round_trips_through_toml() {
        let mut config = CheckoutConfig::default();
        config.pricing.breaker = Some(BreakerConfig::default());
        config.inventory.connect_cap = Some(Duration::from_millis(300));
        let text = toml::to_string(&config).unwrap();
        assert_eq!(CheckoutConfig::from_toml(&text).unwrap(), config);
    }
}
