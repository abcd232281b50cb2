//! The setters of earlier versions, one per field of [`DependencyConfig`],
//! kept (deprecated) so that code using them gets a migration line: set
//! the field instead.

use std::time::Duration;

use super::{DependencyConfig, OnUnavailable, TimeoutMode};
use crate::admission::limit::LimitConfig;
use crate::admission::queue::QueueConfig;
use crate::breaker::BreakerConfig;
use crate::client::stale::StaleCacheConfig;
use crate::floor::FloorConfig;
use crate::outbound::hedging::HedgeConfig;
use crate::retry::{RetryBudgetConfig, RetryConfig};

impl DependencyConfig {
    /// The same configuration with `endpoints`: the replicas
    /// (`scheme://host:port` each) a call's attempts are spread over.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a/items")
    ///     .endpoints(["http://127.0.0.1:9001", "http://127.0.0.1:9002"]);
    /// assert_eq!(c.endpoints.len(), 2);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(
            note = "set the field: config.endpoints = vec![\"http://host:port\".into(), ...]"
        )
    )]
    pub fn endpoints<I, S>(mut self, value: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.endpoints = value.into_iter().map(Into::into).collect();
        self
    }

    /// The same configuration with `resolve_interval`: how often the URL's
    /// host name is looked up again (`Duration::ZERO`: never; the name is
    /// one endpoint).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://partner:9000").resolve_interval(Duration::ZERO);
    /// assert!(c.resolve_interval.is_zero());
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.resolve_interval = ...")
    )]
    pub fn resolve_interval(mut self, value: Duration) -> Self {
        self.resolve_interval = value;
        self
    }

    /// The same configuration with `connect_cap`: the longest a TCP (and
    /// TLS) connect may take, more than zero (checked by
    /// `build`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").connect_cap(Duration::from_millis(200));
    /// assert_eq!(c.connect_cap, Duration::from_millis(200));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.connect_cap = ...")
    )]
    pub fn connect_cap(mut self, value: Duration) -> Self {
        self.connect_cap = value;
        self
    }

    /// The same configuration with `pool_idle_timeout`: how long an idle
    /// keep-alive connection may be reused, more than zero (checked by
    /// `build`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").pool_idle_timeout(Duration::from_secs(30));
    /// assert_eq!(c.pool_idle_timeout, Duration::from_secs(30));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.pool_idle_timeout = ...")
    )]
    pub fn pool_idle_timeout(mut self, value: Duration) -> Self {
        self.pool_idle_timeout = value;
        self
    }

    /// The same configuration with `floor`: a fixed floor
    /// ([`FloorConfig::fixed`], or a [`Floor`](crate::floor::Floor)) or a
    /// learned one ([`FloorConfig::auto`], [`FloorConfig::Learned`]);
    /// checked by `build`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::DependencyConfig;
    /// # use budget_core::floor::{Floor, FloorConfig};
    /// let c = DependencyConfig::new("a", "http://a").floor(FloorConfig::auto());
    /// assert_eq!(c.floor, FloorConfig::AUTO);
    /// let c = c.floor(Floor::new(Duration::from_millis(50)));
    /// assert_eq!(c.floor, FloorConfig::fixed(Duration::from_millis(50)));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.floor = value.into()")
    )]
    pub fn floor(mut self, value: impl Into<FloorConfig>) -> Self {
        self.floor = value.into();
        self
    }

    /// The same configuration with `retry`: attempts, backoff,
    /// `Retry-After` cap, retryable statuses (checked by
    /// `build`, see [`RetryConfig::build`]).
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// # use budget_core::retry::RetryConfig;
    /// let c = DependencyConfig::new("a", "http://a").retry(RetryConfig::default().max_attempts(1));
    /// assert_eq!(c.retry.max_attempts, 1);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.retry = ..."))]
    pub fn retry(mut self, value: RetryConfig) -> Self {
        self.retry = value;
        self
    }

    /// The same configuration with a per-client retry budget (checked by
    /// `build`, see [`RetryBudgetConfig::build`]). The
    /// default is none; to remove one, set the field to `None`.
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// # use budget_core::retry::RetryBudgetConfig;
    /// let c = DependencyConfig::new("a", "http://a").retry_budget(RetryBudgetConfig::default().ratio(0.1));
    /// assert_eq!(c.retry_budget.map(|b| b.ratio), Some(0.1));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.retry_budget = Some(...)")
    )]
    pub fn retry_budget(mut self, value: RetryBudgetConfig) -> Self {
        self.retry_budget = Some(value);
        self
    }

    /// The same configuration with a circuit breaker (checked by
    /// `build`, see [`BreakerConfig::build`]). The default
    /// is none; to remove one, set the field to `None`.
    ///
    /// ```
    /// # use budget_core::breaker::BreakerConfig;
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").breaker(BreakerConfig::default());
    /// assert_eq!(c.breaker, Some(BreakerConfig::default()));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.breaker = Some(...)")
    )]
    pub fn breaker(mut self, value: BreakerConfig) -> Self {
        self.breaker = Some(value);
        self
    }

    /// The same configuration with a concurrency limit: a number (`8`) or a
    /// [`LimitConfig`] (`LimitConfig::Adaptive(..)` for `"auto"`). The
    /// default is no limit; to remove one, set the field to `None`.
    /// Checked by `build`: at least 1, an adaptive table
    /// valid.
    ///
    /// ```
    /// # use budget_core::admission::limit::{AdaptiveLimitConfig, LimitConfig};
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").concurrency(8);
    /// assert_eq!(c.concurrency, Some(LimitConfig::Fixed(8)));
    /// let c = c.concurrency(LimitConfig::Adaptive(AdaptiveLimitConfig::default()));
    /// assert!(matches!(c.concurrency, Some(LimitConfig::Adaptive(_))));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.concurrency = Some(value.into())")
    )]
    pub fn concurrency(mut self, value: impl Into<LimitConfig>) -> Self {
        self.concurrency = Some(value.into());
        self
    }

    /// The same configuration with hedged requests (checked by
    /// `build`, see [`HedgeConfig::validate`]). The default
    /// is none; to remove it, set the field to `None`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::{DependencyConfig, HedgeConfig};
    /// let c = DependencyConfig::new("a", "http://a").hedge(HedgeConfig::after(Duration::from_millis(40)));
    /// assert_eq!(c.hedge, Some(HedgeConfig::after(Duration::from_millis(40))));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.hedge = Some(...)")
    )]
    pub fn hedge(mut self, value: HedgeConfig) -> Self {
        self.hedge = Some(value);
        self
    }

    /// The same configuration with `queue`: how calls wait for a permit
    /// (checked by `build`, see [`QueueConfig::validate`]).
    ///
    /// ```
    /// # use budget_core::admission::queue::{QueueConfig, QueueOrder};
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").queue(QueueConfig::default().order(QueueOrder::Fifo));
    /// assert_eq!(c.queue.order, QueueOrder::Fifo);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.queue = ..."))]
    pub fn queue(mut self, value: QueueConfig) -> Self {
        self.queue = value;
        self
    }

    /// The same configuration with `on_unavailable`: what a call does when
    /// it cannot be made (and, for `stale`, when it fails).
    ///
    /// ```
    /// # use budget_core::client::{DependencyConfig, OnUnavailable};
    /// let c = DependencyConfig::new("a", "http://a").on_unavailable(OnUnavailable::Stale);
    /// assert_eq!(c.on_unavailable, OnUnavailable::Stale);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.on_unavailable = ...")
    )]
    pub fn on_unavailable(mut self, value: OnUnavailable) -> Self {
        self.on_unavailable = value;
        self
    }

    /// The same configuration with `max_stale`: with `on_unavailable =
    /// "stale"`, the oldest answer served in place of a failed call, more
    /// than zero (checked by `build`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").max_stale(Duration::from_secs(10));
    /// assert_eq!(c.max_stale, Duration::from_secs(10));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.max_stale = ..."))]
    pub fn max_stale(mut self, value: Duration) -> Self {
        self.max_stale = value;
        self
    }

    /// The same configuration with `stale_cache`: with `on_unavailable =
    /// "stale"`, how much the client keeps (checked by
    /// `build`, see [`StaleCacheConfig::validate`]).
    ///
    /// ```
    /// # use budget_core::client::{DependencyConfig, stale::StaleCacheConfig};
    /// let c = DependencyConfig::new("a", "http://a").stale_cache(StaleCacheConfig::default().max_entries(16));
    /// assert_eq!(c.stale_cache.max_entries, 16);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.stale_cache = ...")
    )]
    pub fn stale_cache(mut self, value: StaleCacheConfig) -> Self {
        self.stale_cache = value;
        self
    }

    /// The same configuration with `grpc_timeout`: also send
    /// `grpc-timeout` (same value as `request-budget-ms`).
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// assert!(DependencyConfig::new("a", "http://a").grpc_timeout(true).grpc_timeout);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.grpc_timeout = ...")
    )]
    pub fn grpc_timeout(mut self, value: bool) -> Self {
        self.grpc_timeout = value;
        self
    }

    /// The same configuration with `forward`: whether the budget and
    /// criticality headers are sent (`false`: every rule kept, no header).
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// assert!(DependencyConfig::new("a", "http://a").forward);
    /// assert!(!DependencyConfig::new("a", "http://a").forward(false).forward);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.forward = ..."))]
    pub fn forward(mut self, value: bool) -> Self {
        self.forward = value;
        self
    }

    /// The same configuration with `max_body`: the largest response body
    /// buffered, in bytes, at least 1 (checked by `build`).
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// assert_eq!(DependencyConfig::new("a", "http://a").max_body(1 << 20).max_body, 1 << 20);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.max_body = ..."))]
    pub fn max_body(mut self, value: u64) -> Self {
        self.max_body = value;
        self
    }

    /// The same configuration with `trace_query`: keep the query's values
    /// in the attempt span's `url.full` (else `REDACTED`).
    ///
    /// ```
    /// # use budget_core::client::DependencyConfig;
    /// assert!(DependencyConfig::new("a", "http://a").trace_query(true).trace_query);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.trace_query = ...")
    )]
    pub fn trace_query(mut self, value: bool) -> Self {
        self.trace_query = value;
        self
    }

    /// The same configuration with `mode`: spend the request's budget
    /// ([`TimeoutMode::Budget`], the default) or a fixed timeout.
    ///
    /// ```
    /// # use budget_core::client::{DependencyConfig, TimeoutMode};
    /// let c = DependencyConfig::new("a", "http://a").mode(TimeoutMode::Fixed);
    /// assert_eq!(c.mode, TimeoutMode::Fixed);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.mode = ..."))]
    pub fn mode(mut self, value: TimeoutMode) -> Self {
        self.mode = value;
        self
    }

    /// The same configuration with `fixed_timeout`: each attempt's timeout
    /// in [`TimeoutMode::Fixed`], more than zero (checked by
    /// `build`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").fixed_timeout(Duration::from_secs(2));
    /// assert_eq!(c.fixed_timeout, Duration::from_secs(2));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.fixed_timeout = ...")
    )]
    pub fn fixed_timeout(mut self, value: Duration) -> Self {
        self.fixed_timeout = value;
        self
    }

    /// The same configuration with `default_budget`: the budget of a call
    /// made outside any request and without its own, more than zero
    /// (checked by `build`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::DependencyConfig;
    /// let c = DependencyConfig::new("a", "http://a").default_budget(Duration::from_secs(2));
    /// assert_eq!(c.default_budget, Some(Duration::from_secs(2)));
    /// let parsed: DependencyConfig =
    ///     toml::from_str("name = \"a\"\nurl = \"http://a\"\ndefault_budget = \"1500ms\"").unwrap();
    /// assert_eq!(parsed.default_budget, Some(Duration::from_millis(1500)));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.default_budget = Some(...)")
    )]
    pub fn default_budget(mut self, value: Duration) -> Self {
        self.default_budget = Some(value);
        self
    }
}
