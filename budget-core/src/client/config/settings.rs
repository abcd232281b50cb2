//! A [`DependencyConfig`]'s validation into the [`Settings`] a client
//! runs with.

use std::sync::Arc;
use std::time::Duration;

use url::Url;

#[cfg(feature = "client")]
use super::OnUnavailable;
use super::{DependencyConfig, TimeoutMode};
use crate::admission::limit::LimitConfig;
use crate::breaker::{BreakerConfig, BreakerRegistry};
#[cfg(any(feature = "client", feature = "grpc"))]
use crate::client::stale::StaleCache;
use crate::config::ConfigError;
use crate::floor::DependencyFloor;
use crate::ledger::is_tchar;
use crate::outbound::Dependency;
use crate::outbound::endpoints::{Breakers, Endpoints};
use crate::outbound::hedging::{HedgeConfig, Hedging};
use crate::outbound::permits::Permits;

impl DependencyConfig {
    /// Checks the fields that need nothing built: the durations that must
    /// be more than zero, the body cap, the queue.
    fn check_plain_fields(&self) -> Result<(), ConfigError> {
        if self.connect_cap.is_zero() {
            return Err(ConfigError::new("connect_cap", "must be more than zero"));
        }
        if self.pool_idle_timeout.is_zero() {
            return Err(ConfigError::new(
                "pool_idle_timeout",
                "must be more than zero",
            ));
        }
        if self.fixed_timeout.is_zero() {
            return Err(ConfigError::new("fixed_timeout", "must be more than zero"));
        }
        if self.default_budget.is_some_and(|b| b.is_zero()) {
            return Err(ConfigError::new("default_budget", "must be more than zero"));
        }
        if self.max_body == 0 {
            return Err(ConfigError::new("max_body", "must be at least 1 byte"));
        }
        self.queue.validate().map_err(|e| e.within("queue"))
    }

    /// Checks every field and produces the runtime settings. The breaker
    /// comes from `registry` when one is given.
    pub(crate) fn settings(
        &self,
        registry: Option<&BreakerRegistry>,
    ) -> Result<Settings, ConfigError> {
        validate_name(&self.name)?;
        let base = parse_base(&self.url)?;
        self.check_plain_fields()?;
        let name: Arc<str> = Arc::from(self.name.as_str());
        let floor = self.floor.build().map_err(|e| e.within("floor"))?;
        // The stale cache is the HTTP client's and the gRPC layer's; its
        // fields are checked with every feature.
        #[cfg(any(feature = "client", feature = "grpc"))]
        let stale =
            crate::client::stale::build(self.on_unavailable, self.max_stale, &self.stale_cache)?;
        #[cfg(not(any(feature = "client", feature = "grpc")))]
        crate::client::stale::check(self.max_stale, &self.stale_cache)?;
        let policy = self.retry.build().map_err(|e| e.within("retry"))?;
        let retry_budget = self
            .retry_budget
            .map(|c| c.build().map_err(|e| e.within("retry_budget")))
            .transpose()?;
        let breakers = self.breaker.map(|c| breakers(&c, registry)).transpose()?;
        // Replicas each get an adaptive limit of their own in budget mode
        // (docs/architecture.md, "Replicas").
        let endpoint_limit = match (&self.concurrency, self.mode) {
            (Some(LimitConfig::Adaptive(c)), TimeoutMode::Budget) => Some(*c),
            _ => None,
        };
        let endpoints = Endpoints::new(
            &name,
            &base,
            &self.endpoints,
            self.resolve_interval,
            breakers,
            endpoint_limit,
        )?;
        let permits = self
            .concurrency
            .as_ref()
            .map(|c| Permits::new(&name, c, self.queue, self.mode, Some(&endpoints)))
            .transpose()?
            .flatten();
        let hedge = self.hedging(&endpoints)?;
        // Every field is valid: the client's gauges start now, and its
        // counters at 0.
        start_metrics(&name, permits.as_ref(), &floor, hedge.is_some());
        Ok(Settings {
            dependency: Dependency {
                name,
                floor,
                policy,
                retry_budget,
                endpoints,
                permits,
                hedge,
            },
            #[cfg(any(feature = "client", feature = "grpc"))]
            base,
            #[cfg(feature = "client")]
            connect_cap: self.connect_cap,
            #[cfg(feature = "client")]
            pool_idle_timeout: self.pool_idle_timeout,
            #[cfg(feature = "client")]
            on_unavailable: self.on_unavailable,
            #[cfg(any(feature = "client", feature = "grpc"))]
            stale,
            #[cfg(any(feature = "client", feature = "tower-client"))]
            grpc_timeout: self.grpc_timeout,
            forward: self.forward,
            #[cfg(feature = "client")]
            max_body: self.max_body,
            #[cfg(feature = "client")]
            trace_query: self.trace_query,
            mode: self.mode,
            fixed_timeout: self.fixed_timeout,
            default_budget: self.default_budget,
        })
    }
}

impl DependencyConfig {
    /// The dependency's hedging: its own, or by default, for a dependency
    /// with replicas, to another replica only (docs/hedging-and-stale.md).
    fn hedging(&self, endpoints: &Endpoints) -> Result<Option<Arc<Hedging>>, ConfigError> {
        Ok(match self.hedge {
            Some(c) => c.build(false),
            None if endpoints.replicated() => HedgeConfig::DEFAULT.build(true),
            None => Ok(None),
        }
        .map_err(|e| e.within("hedge"))?
        .map(Arc::new))
    }
}

/// A validated [`DependencyConfig`].
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// What the call engine knows of the dependency.
    pub(crate) dependency: Dependency,
    #[cfg(any(feature = "client", feature = "grpc"))]
    pub(crate) base: Url,
    #[cfg(feature = "client")]
    pub(crate) connect_cap: Duration,
    #[cfg(feature = "client")]
    pub(crate) pool_idle_timeout: Duration,
    #[cfg(feature = "client")]
    pub(crate) on_unavailable: OnUnavailable,
    /// The last good answers, with `on_unavailable = "stale"`.
    #[cfg(any(feature = "client", feature = "grpc"))]
    pub(crate) stale: Option<Arc<StaleCache>>,
    #[cfg(any(feature = "client", feature = "tower-client"))]
    pub(crate) grpc_timeout: bool,
    /// The budget and criticality headers are sent.
    pub(crate) forward: bool,
    #[cfg(feature = "client")]
    pub(crate) max_body: u64,
    #[cfg(feature = "client")]
    pub(crate) trace_query: bool,
    pub(crate) mode: TimeoutMode,
    pub(crate) fixed_timeout: Duration,
    /// The budget of a call made outside any request.
    pub(crate) default_budget: Option<Duration>,
}

/// Starts `name`'s metrics (with the `metrics` feature): its counters at 0
/// and its gauges (concurrency limit, floor) at their values now.
fn start_metrics(
    name: &Arc<str>,
    permits: Option<&Permits>,
    floor: &DependencyFloor,
    hedged: bool,
) {
    crate::telemetry::meter::register_dependency(name);
    if let Some(permits) = permits {
        crate::telemetry::meter::concurrency_limit(name, permits.limit());
    }
    crate::telemetry::meter::report_floor(floor, name);
    if hedged {
        crate::telemetry::meter::register_hedging(
            name,
            crate::outbound::hedging::Declined::ALL.map(crate::outbound::hedging::Declined::label),
        );
    }
}

fn validate_name(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::new("name", "must not be empty"));
    }
    if let Some(c) = name.chars().find(|c| !is_tchar(*c)) {
        return Err(ConfigError::new(
            "name",
            format!("must be a token (letters, digits, `-`, `_`, ...), found {c:?}"),
        ));
    }
    Ok(())
}

fn parse_base(url: &str) -> Result<Url, ConfigError> {
    let base = Url::parse(url)
        .map_err(|e| ConfigError::new("url", format!("is not an absolute URL: {e}")))?;
    if !matches!(base.scheme(), "http" | "https") {
        return Err(ConfigError::new(
            "url",
            format!("must be http or https, not {:?}", base.scheme()),
        ));
    }
    if base.host_str().is_none_or(str::is_empty) {
        return Err(ConfigError::new("url", "must name a host"));
    }
    if base.fragment().is_some() {
        return Err(ConfigError::new(
            "url",
            "must not have a #fragment: it is never sent",
        ));
    }
    Ok(base)
}

/// How the endpoints' breakers are made: from `registry` when given (its
/// policy must be the config's, so that a shared breaker cannot silently
/// run with other numbers), else private ones.
fn breakers(
    config: &BreakerConfig,
    registry: Option<&BreakerRegistry>,
) -> Result<Breakers, ConfigError> {
    let policy = config.build().map_err(|e| e.within("breaker"))?;
    let policy = crate::telemetry::meter::observe_breakers(policy);
    match registry {
        None => Ok(Breakers::new(policy, None)),
        Some(registry) => {
            let shared = registry.policy();
            if shared.failure_threshold() != policy.failure_threshold()
                || shared.open_for() != policy.open_for()
                || shared.timeout_threshold() != policy.timeout_threshold()
            {
                return Err(ConfigError::new(
                    "breaker",
                    format!(
                        "differs from the shared breaker registry's policy \
                         (failure_threshold {}, open_for {}ms, timeout_threshold {})",
                        shared.failure_threshold(),
                        shared.open_for().as_millis(),
                        shared.timeout_threshold()
                    ),
                ));
            }
            Ok(Breakers::new(policy, Some(registry.clone())))
        }
    }
}

impl Settings {
    /// What the steps before the engine read of this configuration (the
    /// gRPC layer has its own).
    #[cfg(any(feature = "client", feature = "tower-client"))]
    pub(crate) fn defaults(&self) -> crate::outbound::resolve::CallDefaults {
        use crate::outbound::Deadline;
        crate::outbound::resolve::CallDefaults {
            mode: self.mode,
            fixed_timeout: self.fixed_timeout,
            default_budget: self.default_budget,
            forward: self.forward,
            deadline: if self.grpc_timeout {
                Deadline::HttpAndGrpcTimeout
            } else {
                Deadline::Http
            },
        }
    }
}
