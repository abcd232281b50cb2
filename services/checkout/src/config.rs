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
//! ```

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use budget_core::Floor;
use budget_core::breaker::BreakerConfig;
use budget_core::client::{BudgetClient, DependencyConfig, Mode, OnUnavailable};
use budget_core::config::ConfigError;
use budget_core::retry::{RetryBudgetConfig, RetryConfig};
use budget_core::server::{BudgetLayer, ServerConfig};
use serde::{Deserialize, Serialize};
use service_kit::BudgetMode;

use crate::Error;

/// The default listen address: loopback, port 8081.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8081);

/// The default [`CheckoutConfig::recommendations_floor`]: 1 s.
pub const DEFAULT_RECOMMENDATIONS_FLOOR: Duration = Duration::from_secs(1);

/// The floor of `inventory` and `pricing` when their table does not say:
/// a call with less than 10 ms left is not worth sending.
pub const DEFAULT_DEPENDENCY_FLOOR: Duration = Duration::from_millis(10);

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

/// How checkout starts. Every field has a default, so a TOML file needs
/// only what it changes; unknown fields are an error.
///
/// | field | flag | default |
/// | --- | --- | --- |
/// | `listen` | `--listen` | `127.0.0.1:8081` |
/// | `budget_mode` | `--budget-mode` | `on` |
/// | `default_budget` | `--default-budget` | `2s` |
/// | `max_budget` | `--max-budget` | `10s` |
/// | `floor` | `--floor` | `10ms` (ingress: shed with `504` below it) |
/// | `reserve` | `--reserve` | `5ms` (held back on every outbound call) |
/// | `inventory_url` | `--inventory-url` | `http://127.0.0.1:9000/inventory` |
/// | `pricing_url` | `--pricing-url` | `http://127.0.0.1:9000/pricing` |
/// | `recommendations_url` | `--recommendations-url` | `http://127.0.0.1:9000/recommendations` |
/// | `recommendations_floor` | `--recommendations-floor` | `1s` |
/// | `[inventory]`, `[pricing]`, `[recommendations]` | (file only) | see [`DependencySettings`] |
///
/// A URL's query string is kept on every call, so pointing a dependency at
/// the slow partner with query parameters shapes its behaviour.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckoutConfig {
    /// The address to listen on (port 0 picks a free one).
    pub listen: SocketAddr,
    /// `on`: the budget machinery; `off`: no budget layer, nothing
    /// forwarded, fixed 30 s timeouts and fixed retries, recommendations
    /// always called (the baseline it is compared with).
    pub budget_mode: BudgetMode,
    /// The budget of a request that carries no budget header.
    #[serde(with = "humantime_serde")]
    pub default_budget: Duration,
    /// The largest budget any request gets, whatever its caller says.
    #[serde(with = "humantime_serde")]
    pub max_budget: Duration,
    /// Below this budget on arrival, a request is shed with `504`.
    #[serde(with = "humantime_serde")]
    pub floor: Duration,
    /// What every outbound call holds back for checkout's own reply.
    #[serde(with = "humantime_serde")]
    pub reserve: Duration,
    /// The inventory dependency (required).
    pub inventory_url: String,
    /// The pricing dependency (required, retried).
    pub pricing_url: String,
    /// The recommendations dependency (optional).
    pub recommendations_url: String,
    /// Below this budget (net of the reserve), recommendations is skipped
    /// and the answer marked degraded. Not applied with `budget_mode = off`.
    #[serde(with = "humantime_serde")]
    pub recommendations_floor: Duration,
    /// Client settings of inventory (default: 2 attempts).
    pub inventory: DependencySettings,
    /// Client settings of pricing (default: 3 attempts).
    pub pricing: DependencySettings,
    /// Client settings of recommendations (default: 1 attempt); its floor
    /// is `recommendations_floor`.
    pub recommendations: DependencySettings,
}

impl Default for CheckoutConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN,
            budget_mode: BudgetMode::On,
            default_budget: Duration::from_secs(2),
            max_budget: Duration::from_secs(10),
            floor: Duration::from_millis(10),
            reserve: Duration::from_millis(5),
            inventory_url: "http://127.0.0.1:9000/inventory".to_owned(),
            pricing_url: "http://127.0.0.1:9000/pricing".to_owned(),
            recommendations_url: "http://127.0.0.1:9000/recommendations".to_owned(),
            recommendations_floor: DEFAULT_RECOMMENDATIONS_FLOOR,
            inventory: DependencySettings::default(),
            pricing: DependencySettings::default(),
            recommendations: DependencySettings::default(),
        }
    }
}

/// One dependency's client settings, as a TOML table (`[pricing]`,
/// `[pricing.retry]`, ...): the fields of
/// [`DependencyConfig`](budget_core::client::DependencyConfig) that are
/// checkout's to choose. An absent field takes checkout's default for that
/// dependency; a present table (`[pricing.retry]`) replaces that default
/// whole, its own missing fields taking `budget-core`'s defaults.
///
/// | field | default |
/// | --- | --- |
/// | `connect_cap` | `1s` (the budget caps it further) |
/// | `floor` | `10ms`; recommendations: `recommendations_floor` (set that instead) |
/// | `retry` | 3 attempts for pricing, 2 for inventory, 1 for recommendations; exponential backoff from 50 ms with full jitter |
/// | `retry_budget` | a 20 % retry budget (`budget_mode = on` only) |
/// | `breaker` | none |
/// | `concurrency` | unlimited |
/// | `grpc_timeout` | `false` |
/// | `max_body` | 4 MiB |
/// | `fixed_timeout` | `30s` (`budget_mode = off` only) |
///
/// ```
/// let s: checkout::DependencySettings = toml::from_str(r#"
///     connect_cap = "200ms"
///     [breaker]
///     failure_threshold = 3
/// "#).unwrap();
/// assert_eq!(s.connect_cap, Some(std::time::Duration::from_millis(200)));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DependencySettings {
    /// The longest a connect may take.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub connect_cap: Option<Duration>,
    /// Below this budget (net of the reserve), the call is not made.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub floor: Option<Duration>,
    /// Attempts, backoff, `Retry-After` cap, retryable statuses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryConfig>,
    /// The per-client retry budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_budget: Option<RetryBudgetConfig>,
    /// A circuit breaker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerConfig>,
    /// In-flight calls at most.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    /// Also send `grpc-timeout`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grpc_timeout: Option<bool>,
    /// The largest response body buffered, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_body: Option<u64>,
    /// Each attempt's timeout with `budget_mode = off`.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub fixed_timeout: Option<Duration>,
}

/// A validated [`CheckoutConfig`]: the budget layer (none with
/// `budget_mode = off`) and the three clients.
#[derive(Debug)]
pub(crate) struct Built {
    pub(crate) layer: Option<BudgetLayer>,
    pub(crate) inventory: BudgetClient,
    pub(crate) pricing: BudgetClient,
    pub(crate) recommendations: BudgetClient,
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

    /// Parses TOML text and [validates](Self::validate) it.
    ///
    /// ```
    /// # use checkout::CheckoutConfig;
    /// assert_eq!(CheckoutConfig::from_toml("").unwrap(), CheckoutConfig::default());
    /// assert!(CheckoutConfig::from_toml("max_budget = \"0s\"").is_err());
    /// ```
    pub fn from_toml(text: &str) -> Result<Self, Error> {
        let config: Self = service_kit::parse_toml(text, Path::new("<inline>"))?;
        config.validate()?;
        Ok(config)
    }

    /// Reads, parses and validates a TOML config file.
    ///
    /// ```
    /// # use checkout::{CheckoutConfig, Error};
    /// let err = CheckoutConfig::load("/no/such/checkout.toml".as_ref()).unwrap_err();
    /// assert!(matches!(err, Error::ConfigFile(_)));
    /// ```
    pub fn load(path: &Path) -> Result<Self, Error> {
        let config: Self = service_kit::load_toml(path)?;
        config.validate()?;
        Ok(config)
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

    /// The budget layer's part of the config.
    fn server(&self) -> ServerConfig {
        ServerConfig {
            default_budget: self.default_budget,
            max_budget: self.max_budget,
            floor: self.floor,
            reserve: self.reserve,
            ..ServerConfig::default()
        }
    }

    pub(crate) fn build(&self) -> Result<Built, ConfigError> {
        // Validated in both modes: a bad value is an error either way.
        let layer = self.server().layer()?;
        if self.recommendations.floor.is_some() {
            return Err(ConfigError::new(
                "recommendations.floor",
                "is set by recommendations_floor (--recommendations-floor)",
            ));
        }
        Ok(Built {
            layer: self.budget_mode.is_on().then_some(layer),
            inventory: self.client(Dep::Inventory)?,
            pricing: self.client(Dep::Pricing)?,
            recommendations: self.client(Dep::Recommendations)?,
        })
    }

    /// The client of `dep`: checkout's defaults for it, then its table.
    fn client(&self, dep: Dep) -> Result<BudgetClient, ConfigError> {
        let name = dep.name();
        let (url, settings) = match dep {
            Dep::Inventory => (&self.inventory_url, &self.inventory),
            Dep::Pricing => (&self.pricing_url, &self.pricing),
            Dep::Recommendations => (&self.recommendations_url, &self.recommendations),
        };
        let mut c = DependencyConfig::new(name, url.as_str());
        c.retry = RetryConfig {
            max_attempts: dep.default_attempts(),
            ..RetryConfig::default()
        };
        if dep == Dep::Recommendations {
            c.floor = Floor::new(self.recommendations_floor);
            c.on_unavailable = OnUnavailable::Skip;
        } else {
            c.floor = Floor::new(DEFAULT_DEPENDENCY_FLOOR);
        }
        if self.budget_mode.is_on() {
            c.retry_budget = Some(RetryBudgetConfig::default());
        } else {
            c.mode = Mode::Fixed;
        }
        settings.apply(&mut c);
        c.build().map_err(|e| match e.field() {
            "url" => ConfigError::new(format!("{name}_url"), e.problem().to_owned()),
            _ => e.within(name),
        })
    }
}

impl DependencySettings {
    /// Puts every field that is set onto `c`.
    fn apply(&self, c: &mut DependencyConfig) {
        if let Some(v) = self.connect_cap {
            c.connect_cap = v;
        }
        if let Some(v) = self.floor {
            c.floor = Floor::new(v);
        }
        if let Some(v) = &self.retry {
            c.retry = v.clone();
        }
        if let Some(v) = self.retry_budget {
            c.retry_budget = Some(v);
        }
        if let Some(v) = self.breaker {
            c.breaker = Some(v);
        }
        if let Some(v) = self.concurrency {
            c.concurrency = Some(v);
        }
        if let Some(v) = self.grpc_timeout {
            c.grpc_timeout = v;
        }
        if let Some(v) = self.max_body {
            c.max_body = v;
        }
        if let Some(v) = self.fixed_timeout {
            c.fixed_timeout = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(config.inventory.floor, Some(Duration::from_millis(15)));
        assert_eq!(config.inventory.concurrency, Some(8));
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
        assert!(config.build().unwrap().layer.is_none());
    }

    #[test]
    fn the_clients_get_each_dependency_s_role() {
        let built = CheckoutConfig::default().build().unwrap();
        assert_eq!(built.inventory.name(), "inventory");
        assert_eq!(built.pricing.mode(), Mode::Budget);
        assert!(built.pricing.retry_budget().is_some());
        let off = CheckoutConfig {
            budget_mode: BudgetMode::Off,
            ..CheckoutConfig::default()
        }
        .build()
        .unwrap();
        assert_eq!(off.pricing.mode(), Mode::Fixed);
        assert_eq!(off.recommendations.mode(), Mode::Fixed);
    }

    #[test]
    fn errors_name_the_field_of_this_config() {
        let field = |edit: &dyn Fn(&mut CheckoutConfig)| {
            let mut config = CheckoutConfig::default();
            edit(&mut config);
            config.validate().unwrap_err().field().to_owned()
        };
        assert_eq!(field(&|c| c.max_budget = Duration::ZERO), "max_budget");
        assert_eq!(field(&|c| c.floor = Duration::from_secs(60)), "floor");
        assert_eq!(
            field(&|c| c.inventory_url = "ftp://x".into()),
            "inventory_url"
        );
        assert_eq!(
            field(&|c| c.pricing.retry = Some(RetryConfig {
                max_attempts: 0,
                ..RetryConfig::default()
            })),
            "pricing.retry.max_attempts"
        );
        assert_eq!(
            field(&|c| c.recommendations.floor = Some(Duration::ZERO)),
            "recommendations.floor"
        );
        assert_eq!(
            field(&|c| c.inventory.connect_cap = Some(Duration::ZERO)),
            "inventory.connect_cap"
        );
    }

    #[test]
    fn a_malformed_file_is_an_error_naming_the_file_and_the_field() {
        let err = CheckoutConfig::from_toml("recommendations_floor = \"soon\"").unwrap_err();
        let text = service_kit::error_chain(&err);
        assert!(text.starts_with("invalid config file <inline>"), "{text}");
        assert!(text.contains("recommendations_floor"), "{text}");
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
