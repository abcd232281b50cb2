use std::net::SocketAddr;
use std::time::Duration;

use budget_core::config::ConfigError;
use budget_core::server::{LedgerLayer, ServerConfig};

use crate::{BudgetMode, HttpLimits, RequestLayer};

/// The default [`ServiceSettings::default_budget`]: 2 s, the library's
/// own ([`ServerConfig`]'s default); see [the defaults](ServiceSettings#defaults).
///
/// ```
/// assert_eq!(service_kit::DEFAULT_BUDGET.as_secs(), 2);
/// ```
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(2);

/// The default [`ServiceSettings::max_budget`]: 10 s, not the library's
/// 30 s; see [the defaults](ServiceSettings#defaults) for why.
///
/// ```
/// assert_eq!(service_kit::DEFAULT_MAX_BUDGET.as_secs(), 10);
/// ```
pub const DEFAULT_MAX_BUDGET: Duration = Duration::from_secs(10);

/// The default [`ServiceSettings::floor`]: 10 ms, not the library's 0;
/// see [the defaults](ServiceSettings#defaults) for why.
///
/// ```
/// assert_eq!(service_kit::DEFAULT_FLOOR.as_millis(), 10);
/// ```
pub const DEFAULT_FLOOR: Duration = Duration::from_millis(10);

/// What every HTTP service of the chain is set up with, whatever else it
/// does: where it listens, the budget mode, and its budget layer's five
/// settings. Each service's config has these as its first fields (see
/// [`service_config!`](crate::service_config)), and
/// [`ServiceFlags`](crate::ServiceFlags) and
/// [`BudgetFlags`](crate::BudgetFlags) set them.
///
/// "Budget" here is the time budget of a request, not tower's retry budget.
///
/// # Defaults
///
/// The one place that says every service's defaults of the budget layer
/// and why they differ from the library's ([`ServerConfig::default`]); a
/// service's config and flags tables refer here. The budget layer's part
/// is made from a [`ServerConfig`] and turned back into one
/// ([`server_config`](Self::server_config)), so the fields a service does
/// not set are the library's.
///
/// | field | a service | the library | why |
/// | --- | --- | --- | --- |
/// | `budget_mode` | `on` | (none) | the switch is the services' own |
/// | `default_budget` | [`DEFAULT_BUDGET`] (`2s`) | `2s` | the same |
/// | `max_budget` | [`DEFAULT_MAX_BUDGET`] (`10s`) | `30s` | a public edge clamps what a caller can ask for to 10 s, and every hop behind it clamps the same, so no request holds a service's work longer |
/// | `floor` | [`DEFAULT_FLOOR`] (`10ms`) | `0s` | a request arriving with less than 10 ms is not worth starting: after the reserve, too little is left for a dependency call and the reply; the library sheds only an exhausted budget and leaves the choice to its user |
/// | `reserve` | each service's (edge `10ms`, checkout `5ms`) | `5ms` | what a service needs for its own reply depends on the service |
/// | `max_in_flight` | none | none | the same |
/// | `[ledger]` | 64 entries, 4 KiB | 64 entries, 4 KiB | the same |
///
/// ```
/// use std::time::Duration;
/// use budget_core::server::ServerConfig;
/// use service_kit::ServiceSettings;
///
/// let service = ServiceSettings::new("127.0.0.1:8080".parse().unwrap(), Duration::from_millis(10));
/// let library = ServerConfig::default();
/// assert_eq!(service.default_budget, library.default_budget);
/// assert_eq!((service.max_budget, library.max_budget), (Duration::from_secs(10), Duration::from_secs(30)));
/// assert_eq!((service.floor, library.floor), (Duration::from_millis(10), Duration::ZERO));
/// ```
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use service_kit::{BudgetMode, ServiceSettings};
///
/// let mut settings = ServiceSettings::new("127.0.0.1:8081".parse().unwrap(), Duration::from_millis(5));
/// assert!(settings.request_layer().unwrap().is_budget());
/// settings.budget_mode = BudgetMode::Off;
/// assert!(!settings.request_layer().unwrap().is_budget());
/// settings.floor = Duration::from_secs(60);
/// assert_eq!(settings.request_layer().unwrap_err().field(), "floor");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServiceSettings {
    /// The address to listen on (port 0 picks a free one).
    pub listen: SocketAddr,
    /// `on`: the budget machinery; `off`: the baseline it is compared with.
    pub budget_mode: BudgetMode,
    /// The budget of a request that carries no budget header.
    pub default_budget: Duration,
    /// The largest budget any request gets, whatever its caller says.
    pub max_budget: Duration,
    /// Below this budget on arrival, a request is shed with `504`.
    pub floor: Duration,
    /// What every outbound call holds back for the service's own reply.
    pub reserve: Duration,
    /// Past this many requests at once, a new one is answered `503` with
    /// `Retry-After` instead of queueing; `None`: no limit. Budget mode
    /// only (it is the budget layer's). `auto`: an adaptive limit.
    pub max_in_flight: Option<budget_core::admission::limit::LimitConfig>,
    /// The HTTP server's connection limits: header and idle timeouts, open
    /// connections (the `[http]` table).
    pub http: HttpLimits,
    /// How much each request's ledger keeps and renders as `Server-Timing`
    /// in budget mode (the `[ledger]` table: `max_entries`, `max_bytes`;
    /// 64 and 4 KiB). With `budget_mode = off` the handler's own ledger
    /// keeps the defaults.
    pub ledger: budget_core::ledger::LedgerLimits,
}

impl ServiceSettings {
    /// The defaults of every service ([the table](Self#defaults):
    /// `budget_mode` on, [`DEFAULT_BUDGET`], [`DEFAULT_MAX_BUDGET`],
    /// [`DEFAULT_FLOOR`], the rest the library's) with the two that differ
    /// from service to service.
    ///
    /// ```
    /// use std::time::Duration;
    /// let s = service_kit::ServiceSettings::new("127.0.0.1:8080".parse().unwrap(), Duration::from_millis(10));
    /// assert_eq!(s.max_budget, Duration::from_secs(10));
    /// ```
    pub fn new(listen: SocketAddr, reserve: Duration) -> Self {
        let mut budget = ServerConfig::default();
        budget.default_budget = DEFAULT_BUDGET;
        budget.max_budget = DEFAULT_MAX_BUDGET;
        budget.floor = DEFAULT_FLOOR;
        budget.reserve = reserve;
        Self::from_server_config(listen, &budget)
    }

    /// Settings whose budget layer's part is `budget`'s (the inverse of
    /// [`server_config`](Self::server_config) for the fields a service
    /// has), with `budget_mode` on and the default [`HttpLimits`].
    fn from_server_config(listen: SocketAddr, budget: &ServerConfig) -> Self {
        Self {
            listen,
            budget_mode: BudgetMode::On,
            default_budget: budget.default_budget,
            max_budget: budget.max_budget,
            floor: budget.floor,
            reserve: budget.reserve,
            max_in_flight: budget.max_in_flight,
            http: HttpLimits::default(),
            ledger: budget.ledger,
        }
    }

    /// The budget layer's part, for [`ServerConfig::layer`].
    ///
    /// ```
    /// use std::time::Duration;
    /// let s = service_kit::ServiceSettings::new("127.0.0.1:8080".parse().unwrap(), Duration::from_millis(10));
    /// assert_eq!(s.server_config().reserve, Duration::from_millis(10));
    /// ```
    pub fn server_config(&self) -> ServerConfig {
        let mut config = ServerConfig::default();
        config.default_budget = self.default_budget;
        config.max_budget = self.max_budget;
        config.floor = self.floor;
        config.reserve = self.reserve;
        config.ledger = self.ledger;
        config.max_in_flight = self.max_in_flight;
        config
    }

    /// The layer in front of the service's route: the budget layer with
    /// `budget_mode = on`, the ledger layer (the same `[ledger]` limits)
    /// with `off`. The budget settings are validated in both modes (a bad
    /// value is an error either way). Validates the
    /// [`http`](Self::http) limits too, so that a service's `validate`
    /// checks every shared field by calling this.
    ///
    /// # Errors
    ///
    /// A bad value, naming its field (`default_budget`, `max_budget`,
    /// `floor`, `reserve`, `max_in_flight`, `ledger.max_entries`,
    /// `ledger.max_bytes`, `http.header_timeout`, `http.idle_timeout`,
    /// `http.max_connections`).
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut s = service_kit::ServiceSettings::new("127.0.0.1:8080".parse().unwrap(), Duration::from_millis(10));
    /// s.max_budget = Duration::ZERO;
    /// assert_eq!(s.request_layer().unwrap_err().field(), "max_budget");
    /// s.max_budget = Duration::from_secs(10);
    /// s.max_in_flight = Some(0.into());
    /// assert_eq!(s.request_layer().unwrap_err().field(), "max_in_flight");
    /// s.max_in_flight = None;
    /// s.http.max_connections = 0;
    /// assert_eq!(s.request_layer().unwrap_err().field(), "http.max_connections");
    /// ```
    pub fn request_layer(&self) -> Result<RequestLayer, ConfigError> {
        self.http.validate().map_err(|e| e.within("http"))?;
        let layer = self.server_config().layer()?;
        Ok(if self.budget_mode.is_on() {
            RequestLayer::Budget(layer)
        } else {
            RequestLayer::Ledger(LedgerLayer::new(self.ledger))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One set of defaults: a service's differ from the library's only
    /// where the table of [`ServiceSettings`] says so.
    #[test]
    fn a_service_takes_the_library_defaults_but_the_documented_three() {
        let reserve = Duration::from_millis(7);
        let service = ServiceSettings::new("127.0.0.1:0".parse().unwrap(), reserve);
        let mut library = ServerConfig::default();
        assert_eq!(DEFAULT_BUDGET, library.default_budget);
        library.max_budget = DEFAULT_MAX_BUDGET;
        library.floor = DEFAULT_FLOOR;
        library.reserve = reserve;
        assert_eq!(service.server_config(), library);
        assert_eq!(
            ServiceSettings::from_server_config(service.listen, &service.server_config()),
            service
        );
    }
}
