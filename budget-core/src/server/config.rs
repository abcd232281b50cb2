use std::num::NonZeroUsize;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::admission::limit::{AdaptiveLimit, LimitConfig};
use crate::config::ConfigError;
use crate::header::{Inbound, OnMalformed};
use crate::ledger::LedgerLimits;
use crate::server::layer::DEFAULT_OVERLOAD_RETRY_AFTER;
use crate::server::{BudgetLayer, ServerTiming};

/// The server side's configuration, with humantime durations.
///
/// | field | meaning | default |
/// | --- | --- | --- |
/// | `default_budget` | budget when the caller sends none | `2s` |
/// | `max_budget` | clamp on any inbound budget, applied at every hop | `30s` |
/// | `floor` | below this on arrival, shed with `504` | `0s` (only an exhausted budget is shed) |
/// | `reserve` | per-hop reserve each outbound call holds back | `5ms` |
/// | `on_malformed` | `reject` (400) or `use-default` | `reject` |
/// | `max_in_flight` | at most this many requests at once: `256`, `"auto"` (adaptive) or a table ([`LimitConfig`]); past it a request waits for a slot, most critical first, while its budget covers the wait and the `floor`, else `504` (`below-floor`); a line not empty for `max_budget` is overload: `503` + `Retry-After` | none (no limit) |
/// | `overload_retry_after` | the `Retry-After` of that `503` | `1s` |
/// | `ledger` | each request's ledger bound: `{ max_entries = 64, max_bytes = 4096 }` ([`LedgerLimits`]) | 64 entries, 4 KiB |
/// | `trust_inbound` | read the caller's budget headers and `request-criticality`; `false` for a service that answers the public: every request gets `default_budget` and the default criticality | `true` |
/// | `server_timing` | whether answers carry the ledger: `"always"`, `"never"`, or `{ when = { header = "…", value = "…" } }` ([`ServerTiming`]) | `"always"` |
///
/// A public service (docs/contract.md §4) sets both:
///
/// ```
/// use budget_core::server::{ServerConfig, ServerTiming};
///
/// let public: ServerConfig = toml::from_str(r#"
///     trust_inbound = false
///     server_timing = "never"
/// "#).unwrap();
/// assert!(!public.trust_inbound);
/// assert_eq!(public.server_timing, ServerTiming::Never);
/// ```
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::server::ServerConfig;
///
/// let config: ServerConfig = toml::from_str(r#"default_budget = "1500ms""#).unwrap();
/// assert_eq!(config.default_budget, Duration::from_millis(1500));
/// assert!(config.layer().is_ok());
///
/// let bad: ServerConfig = toml::from_str(r#"floor = "40s""#).unwrap();
/// assert_eq!(bad.layer().unwrap_err().field(), "floor");
/// ```
///
/// In code, start from [`Default`] and set the fields that differ. A
/// config is plain public fields and has no setters (the setters of
/// earlier versions are deprecated); the layer it makes,
/// [`BudgetLayer`], is the builder. [`layer`](Self::layer) validates:
///
/// ```
/// use std::time::Duration;
/// use budget_core::server::ServerConfig;
///
/// let mut config = ServerConfig::default();
/// config.max_budget = Duration::from_secs(10);
/// config.floor = Duration::from_millis(10);
/// config.max_in_flight = Some(256.into());
/// assert!(config.layer().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The budget a request gets when it carries no budget header.
    #[serde(with = "crate::config::duration")]
    pub default_budget: Duration,
    /// The largest budget any request gets, whatever its caller says.
    #[serde(with = "crate::config::duration")]
    pub max_budget: Duration,
    /// The least budget with which a request is worth starting.
    #[serde(with = "crate::config::duration")]
    pub floor: Duration,
    /// The time every outbound call holds back for this service's reply.
    #[serde(with = "crate::config::duration")]
    pub reserve: Duration,
    /// What to do with a malformed budget header.
    pub on_malformed: OnMalformed,
    /// The most requests worked on at once: a number, `"auto"` (an
    /// adaptive limit learned from the requests' latency) or an adaptive
    /// table ([`LimitConfig`]); absent: no limit. A request at the limit
    /// waits for a slot until what its budget has left is down to `floor`
    /// (see [`BudgetLayer::max_in_flight`]).
    pub max_in_flight: Option<LimitConfig>,
    /// The `Retry-After` of a `503` at the in-flight limit (a line that
    /// has stood for `max_budget`).
    #[serde(with = "crate::config::duration")]
    pub overload_retry_after: Duration,
    /// How much each request's ledger keeps and renders as
    /// `Server-Timing`.
    pub ledger: LedgerLimits,
    /// Whether the caller's budget headers and `request-criticality` are
    /// read ([`BudgetLayer::trust_inbound`]).
    pub trust_inbound: bool,
    /// Whether answers carry the ledger as `Server-Timing`
    /// ([`BudgetLayer::server_timing`]).
    pub server_timing: ServerTiming,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            default_budget: Duration::from_secs(2),
            max_budget: Duration::from_secs(30),
            floor: Duration::ZERO,
            reserve: Duration::from_millis(5),
            on_malformed: OnMalformed::Reject,
            max_in_flight: None,
            overload_retry_after: DEFAULT_OVERLOAD_RETRY_AFTER,
            ledger: LedgerLimits::default(),
            trust_inbound: true,
            server_timing: ServerTiming::Always,
        }
    }
}

impl ServerConfig {
    /// The same configuration with `default_budget`: the budget of a
    /// request that carries no budget header (checked by
    /// [`layer`](Self::layer): more than zero, at most `max_budget`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::server::ServerConfig;
    /// let c = ServerConfig::default().default_budget(Duration::from_millis(1500));
    /// assert_eq!(c.default_budget, Duration::from_millis(1500));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.default_budget = ...")
    )]
    pub fn default_budget(mut self, value: Duration) -> Self {
        self.default_budget = value;
        self
    }

    /// The same configuration with `max_budget`: the largest budget any
    /// request gets (checked by [`layer`](Self::layer): more than zero).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::server::ServerConfig;
    /// let c = ServerConfig::default().max_budget(Duration::from_secs(10));
    /// assert_eq!(c.max_budget, Duration::from_secs(10));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.max_budget = ..."))]
    pub fn max_budget(mut self, value: Duration) -> Self {
        self.max_budget = value;
        self
    }

    /// The same configuration with `floor`: a request with less budget
    /// than this on arrival is shed (checked by [`layer`](Self::layer):
    /// below `max_budget`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::server::ServerConfig;
    /// let c = ServerConfig::default().floor(Duration::from_millis(10));
    /// assert_eq!(c.floor, Duration::from_millis(10));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.floor = ..."))]
    pub fn floor(mut self, value: Duration) -> Self {
        self.floor = value;
        self
    }

    /// The same configuration with `reserve`: the time every outbound call
    /// holds back for this service's reply (checked by
    /// [`layer`](Self::layer): below `max_budget`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::server::ServerConfig;
    /// let c = ServerConfig::default().reserve(Duration::from_millis(10));
    /// assert_eq!(c.reserve, Duration::from_millis(10));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.reserve = ..."))]
    pub fn reserve(mut self, value: Duration) -> Self {
        self.reserve = value;
        self
    }

    /// The same configuration with `on_malformed`: what to do with a
    /// malformed budget header.
    ///
    /// ```
    /// # use budget_core::header::OnMalformed;
    /// # use budget_core::server::ServerConfig;
    /// let c = ServerConfig::default().on_malformed(OnMalformed::UseDefault);
    /// assert_eq!(c.on_malformed, OnMalformed::UseDefault);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.on_malformed = ...")
    )]
    pub fn on_malformed(mut self, value: OnMalformed) -> Self {
        self.on_malformed = value;
        self
    }

    /// The same configuration with an in-flight limit: a number (`256`) or
    /// a [`LimitConfig`] (`LimitConfig::Adaptive(..)` for `"auto"`). The
    /// default is no limit; to remove one, set the field to `None`.
    /// Checked by [`layer`](Self::layer): at least 1, an adaptive table
    /// valid.
    ///
    /// ```
    /// # use budget_core::admission::limit::{AdaptiveLimitConfig, LimitConfig};
    /// # use budget_core::server::ServerConfig;
    /// let c = ServerConfig::default().max_in_flight(256);
    /// assert_eq!(c.max_in_flight, Some(LimitConfig::Fixed(256)));
    /// let auto = ServerConfig::default().max_in_flight(LimitConfig::Adaptive(AdaptiveLimitConfig::default()));
    /// assert!(auto.layer().is_ok());
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.max_in_flight = Some(value.into())")
    )]
    pub fn max_in_flight(mut self, value: impl Into<LimitConfig>) -> Self {
        self.max_in_flight = Some(value.into());
        self
    }

    /// The same configuration with `overload_retry_after`: the
    /// `Retry-After` of a `503` at the in-flight limit.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::server::ServerConfig;
    /// let c = ServerConfig::default().overload_retry_after(Duration::from_secs(2));
    /// assert_eq!(c.overload_retry_after, Duration::from_secs(2));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.overload_retry_after = ...")
    )]
    pub fn overload_retry_after(mut self, value: Duration) -> Self {
        self.overload_retry_after = value;
        self
    }

    /// The same configuration with `ledger`: each request's ledger bound
    /// (checked by [`layer`](Self::layer), see [`LedgerLimits::validate`]).
    ///
    /// ```
    /// # use budget_core::ledger::LedgerLimits;
    /// # use budget_core::server::ServerConfig;
    /// let limits: LedgerLimits = toml::from_str("max_entries = 32").unwrap();
    /// let c = ServerConfig::default().ledger(limits);
    /// assert_eq!(c.ledger.max_entries, 32);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.ledger = ..."))]
    pub fn ledger(mut self, value: LedgerLimits) -> Self {
        self.ledger = value;
        self
    }

    /// The same configuration with `trust_inbound`: `false` for a service
    /// that answers the public ([`BudgetLayer::trust_inbound`]).
    ///
    /// ```
    /// # use budget_core::server::ServerConfig;
    /// assert!(!ServerConfig::default().trust_inbound(false).trust_inbound);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.trust_inbound = ...")
    )]
    pub fn trust_inbound(mut self, value: bool) -> Self {
        self.trust_inbound = value;
        self
    }

    /// The same configuration with `server_timing`
    /// ([`BudgetLayer::server_timing`]).
    ///
    /// ```
    /// # use budget_core::server::{ServerConfig, ServerTiming};
    /// let c = ServerConfig::default().server_timing(ServerTiming::Never);
    /// assert_eq!(c.server_timing, ServerTiming::Never);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.server_timing = ...")
    )]
    pub fn server_timing(mut self, value: ServerTiming) -> Self {
        self.server_timing = value;
        self
    }

    /// Validates the configuration into a [`BudgetLayer`] (with no event
    /// hook; add one with [`BudgetLayer::on_event`]).
    ///
    /// Errors name the field: `default_budget` or `max_budget` zero,
    /// `default_budget` above `max_budget`, `floor` or `reserve` not below
    /// `max_budget`, `max_in_flight` zero, `ledger.max_entries` below 2,
    /// `ledger.max_bytes` below 256.
    ///
    /// ```
    /// use budget_core::server::ServerConfig;
    /// let mut config = ServerConfig::default();
    /// config.reserve = std::time::Duration::from_secs(60);
    /// let err = config.layer().unwrap_err();
    /// assert_eq!(err.field(), "reserve");
    /// ```
    pub fn layer(&self) -> Result<BudgetLayer, ConfigError> {
        let inbound = Inbound::new(self.default_budget, self.max_budget)
            .map_err(rename_inbound_field)?
            .with_on_malformed(self.on_malformed);
        if self.floor >= self.max_budget {
            return Err(ConfigError::new(
                "floor",
                "must be below max_budget, or every request is shed",
            ));
        }
        if self.reserve >= self.max_budget {
            return Err(ConfigError::new(
                "reserve",
                "must be below max_budget, or no downstream call is ever made",
            ));
        }
        self.ledger.validate().map_err(|e| e.within("ledger"))?;
        let layer = BudgetLayer::new(inbound)
            .floor(self.floor)
            .reserve(self.reserve)
            .ledger_limits(self.ledger)
            .trust_inbound(self.trust_inbound)
            .server_timing(self.server_timing.clone());
        match self.max_in_flight {
            None => Ok(layer),
            Some(LimitConfig::Fixed(limit)) => {
                let limit = NonZeroUsize::new(limit).ok_or_else(|| {
                    ConfigError::new("max_in_flight", "must be at least 1 (absent: no limit)")
                })?;
                Ok(layer.max_in_flight(limit, self.overload_retry_after))
            }
            Some(LimitConfig::Adaptive(config)) => {
                let adaptive = AdaptiveLimit::new(config).map_err(|e| e.within("max_in_flight"))?;
                Ok(layer.adaptive_in_flight(adaptive, self.overload_retry_after))
            }
        }
    }
}

/// `Inbound::new` names its own parameters; say which config field they are.
fn rename_inbound_field(e: ConfigError) -> ConfigError {
    let field = match e.field() {
        "default" => "default_budget",
        "max" => "max_budget",
        other => return ConfigError::new(other.to_owned(), e.problem().to_owned()),
    };
    ConfigError::new(field, e.problem().to_owned())
}
