use budget_core::admission::limit::{AdaptiveLimitConfig, LimitConfig};
use budget_core::breaker::BreakerConfig;
use budget_core::client::{BudgetClient, DependencyConfig};
use budget_core::config::ConfigError;
use budget_core::floor::FloorConfig;

/// The floor of a dependency whose table does not say: learned from its
/// latency (`floor = "auto"`: the p95 of its successful attempts, at
/// least 5 ms and at most 2 s; see
/// [`LearnedFloorConfig`](budget_core::floor::LearnedFloorConfig)).
///
/// ```
/// use budget_core::floor::FloorConfig;
/// assert_eq!(service_kit::DEFAULT_DEPENDENCY_FLOOR, FloorConfig::AUTO);
/// ```
pub const DEFAULT_DEPENDENCY_FLOOR: FloorConfig = FloorConfig::AUTO;

/// The circuit breaker of checkout's dependencies in budget mode when
/// their table does not say: 20 consecutive failures open it for 1 s, then
/// one probe call decides. A partner that fails every call (an outage)
/// costs about one attempt per second instead of one or more per request;
/// one that fails half its calls (flaky) almost never opens it
/// (`0.5^20`); and a recovered partner is called again within a second.
/// A partner that stops answering opens it after 3 attempts without an
/// answer for 4 times its typical latency (`timeout_threshold`, the
/// default; see [`budget_core::breaker`]), not after 20 budgets.
///
/// ```
/// use std::time::Duration;
/// let b = service_kit::DEFAULT_DEPENDENCY_BREAKER;
/// assert_eq!((b.failure_threshold, b.open_for), (20, Duration::from_secs(1)));
/// assert_eq!(b.timeout_threshold, 3);
/// ```
pub const DEFAULT_DEPENDENCY_BREAKER: BreakerConfig = {
    let mut breaker = BreakerConfig::DEFAULT;
    breaker.failure_threshold = 20;
    breaker.open_for = std::time::Duration::from_secs(1);
    breaker
};

/// The concurrency limit of checkout's dependencies when their table does
/// not say: adaptive (`concurrency = "auto"`), so that a call waits in
/// checkout's deadline-aware queue rather than in the partner's, with no
/// number sized by hand (see
/// [`AdaptiveLimitConfig`](budget_core::admission::limit::AdaptiveLimitConfig)).
///
/// ```
/// use budget_core::admission::limit::LimitConfig;
/// assert!(matches!(service_kit::default_dependency_concurrency(), LimitConfig::Adaptive(_)));
/// ```
pub fn default_dependency_concurrency() -> LimitConfig {
    LimitConfig::Adaptive(AdaptiveLimitConfig::default())
}

/// Builds the client of a service's dependency, its config errors named as
/// the service's config names them: the URL is the `{name}_url` field (and
/// flag), every other field is in the `[{name}]` table.
///
/// ```
/// use budget_core::client::DependencyConfig;
///
/// let mut c = DependencyConfig::new("pricing", "pricing:80");
/// assert_eq!(service_kit::dependency_client(&c).unwrap_err().field(), "pricing_url");
/// c.url = "http://127.0.0.1:9000/pricing".into();
/// c.concurrency = Some(0.into());
/// assert_eq!(service_kit::dependency_client(&c).unwrap_err().field(), "pricing.concurrency");
/// ```
pub fn dependency_client(config: &DependencyConfig) -> Result<BudgetClient, ConfigError> {
    config.build().map_err(|e| match e.field() {
        "url" => ConfigError::new(format!("{}_url", config.name), e.problem().to_owned()),
        _ => e.within(&config.name),
    })
}
