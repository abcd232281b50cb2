//! [`BreakerConfig`] (what a config file says) and [`BreakerPolicy`] (the
//! validated policy breakers run with).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::BreakerState;
use super::observer::SharedObserver;
use crate::config::ConfigError;

/// The consecutive failures that open a breaker when the config does not say.
///
/// ```
/// use budget_core::breaker::{BreakerConfig, DEFAULT_FAILURE_THRESHOLD};
/// assert_eq!(BreakerConfig::default().failure_threshold, DEFAULT_FAILURE_THRESHOLD);
/// ```
pub const DEFAULT_FAILURE_THRESHOLD: u32 = 5;
/// How long a breaker stays open when the config does not say.
///
/// ```
/// use budget_core::breaker::{BreakerConfig, DEFAULT_OPEN_FOR};
/// assert_eq!(BreakerConfig::default().open_for, DEFAULT_OPEN_FOR);
/// ```
pub const DEFAULT_OPEN_FOR: Duration = Duration::from_secs(5);
/// The attempts in a row that went without an answer (see the
/// [module docs](super#a-dependency-that-stops-answering)) that open a
/// breaker when the config does not say.
///
/// Three: at two calls a second with budgets of about two seconds, a
/// dependency that stops answering costs three calls their budget (or
/// fewer, as outstanding calls count before they end), and every call
/// after them is refused at once. One or two would open the breaker on a
/// single stall of a healthy dependency more often.
///
/// ```
/// use budget_core::breaker::{BreakerConfig, DEFAULT_TIMEOUT_THRESHOLD};
/// assert_eq!(BreakerConfig::default().timeout_threshold, DEFAULT_TIMEOUT_THRESHOLD);
/// ```
pub const DEFAULT_TIMEOUT_THRESHOLD: u32 = 3;

/// A circuit breaker's configuration, as read from a file.
///
/// Durations are humantime strings; missing fields take their defaults
/// ([`DEFAULT_FAILURE_THRESHOLD`], [`DEFAULT_OPEN_FOR`],
/// [`DEFAULT_TIMEOUT_THRESHOLD`]); unknown fields are an error, so a typo
/// does not silently fall back to a default.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::breaker::BreakerConfig;
///
/// let config: BreakerConfig =
///     serde_json::from_str(r#"{ "failure_threshold": 3, "open_for": "750ms" }"#).unwrap();
/// let policy = config.build().unwrap();
/// assert_eq!(policy.failure_threshold(), 3);
/// assert_eq!(policy.open_for(), Duration::from_millis(750));
/// assert_eq!(policy.timeout_threshold(), 3, "the default");
/// ```
///
/// In code, start from [`Default`] (or [`DEFAULT`](Self::DEFAULT) in a
/// `const`) and set the fields that differ (they are plain public fields:
/// a config has no setters); [`build`](Self::build) validates:
///
/// ```
/// use std::time::Duration;
/// use budget_core::breaker::BreakerConfig;
///
/// let mut config = BreakerConfig::default();
/// config.failure_threshold = 20;
/// config.open_for = Duration::from_secs(1);
/// let policy = config.build().unwrap();
/// assert_eq!(policy.failure_threshold(), 20);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct BreakerConfig {
    /// Consecutive failures that open the breaker; at least 1.
    pub failure_threshold: u32,
    /// How long an open breaker refuses calls before it admits a probe;
    /// more than zero.
    #[serde(with = "crate::config::duration")]
    pub open_for: Duration,
    /// Attempts that went without an answer for the silence limit (four
    /// times the endpoint's typical latency, at least 250 ms), ended in a
    /// row or still outstanding, that open the breaker; at least 1. See
    /// the [module docs](super#a-dependency-that-stops-answering).
    pub timeout_threshold: u32,
}

impl Default for BreakerConfig {
    /// Five failures, five seconds, three silent attempts.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::breaker::BreakerConfig;
    /// let c = BreakerConfig::default();
    /// assert_eq!((c.failure_threshold, c.open_for), (5, Duration::from_secs(5)));
    /// assert_eq!(c.timeout_threshold, 3);
    /// ```
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl BreakerConfig {
    /// Every default, as a constant (for a `const` config that sets a few
    /// fields in a `const` block).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::breaker::BreakerConfig;
    ///
    /// const FAST: BreakerConfig = {
    ///     let mut config = BreakerConfig::DEFAULT;
    ///     config.open_for = Duration::from_secs(1);
    ///     config
    /// };
    /// assert_eq!(FAST.timeout_threshold, BreakerConfig::default().timeout_threshold);
    /// ```
    pub const DEFAULT: Self = Self {
        failure_threshold: DEFAULT_FAILURE_THRESHOLD,
        open_for: DEFAULT_OPEN_FOR,
        timeout_threshold: DEFAULT_TIMEOUT_THRESHOLD,
    };

    /// The same config with `failure_threshold`: the consecutive failures
    /// that open the breaker, at least 1 (checked by [`build`](Self::build)).
    ///
    /// ```
    /// # use budget_core::breaker::BreakerConfig;
    /// assert_eq!(BreakerConfig::default().failure_threshold(20).failure_threshold, 20);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.failure_threshold = ...")
    )]
    pub const fn failure_threshold(mut self, value: u32) -> Self {
        self.failure_threshold = value;
        self
    }

    /// The same config with `open_for`: how long an open breaker refuses
    /// calls before it admits a probe, more than zero (checked by
    /// [`build`](Self::build)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::breaker::BreakerConfig;
    /// let c = BreakerConfig::default().open_for(Duration::from_secs(1));
    /// assert_eq!(c.open_for, Duration::from_secs(1));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.open_for = ..."))]
    pub const fn open_for(mut self, value: Duration) -> Self {
        self.open_for = value;
        self
    }

    /// The same config with `timeout_threshold`: the attempts in a row
    /// without an answer that open the breaker, at least 1 (checked by
    /// [`build`](Self::build)).
    ///
    /// ```
    /// # use budget_core::breaker::BreakerConfig;
    /// assert_eq!(BreakerConfig::default().timeout_threshold(5).timeout_threshold, 5);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.timeout_threshold = ...")
    )]
    pub const fn timeout_threshold(mut self, value: u32) -> Self {
        self.timeout_threshold = value;
        self
    }

    /// Validates the config into a [`BreakerPolicy`] (with no
    /// [`Observer`](super::Observer) and a no-op state-change hook), or a
    /// [`ConfigError`] naming the bad field.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::breaker::BreakerConfig;
    /// let with = |change: fn(&mut BreakerConfig)| {
    ///     let mut config = BreakerConfig::default();
    ///     change(&mut config);
    ///     config.build().unwrap_err().field().to_owned()
    /// };
    /// assert_eq!(with(|c| c.failure_threshold = 0), "failure_threshold");
    /// assert_eq!(with(|c| c.open_for = Duration::ZERO), "open_for");
    /// assert_eq!(with(|c| c.timeout_threshold = 0), "timeout_threshold");
    /// ```
    pub fn build(&self) -> Result<BreakerPolicy, ConfigError> {
        if self.failure_threshold == 0 {
            return Err(ConfigError::new("failure_threshold", "must be at least 1"));
        }
        if self.open_for.is_zero() {
            return Err(ConfigError::new("open_for", "must be more than zero"));
        }
        if self.timeout_threshold == 0 {
            return Err(ConfigError::new("timeout_threshold", "must be at least 1"));
        }
        Ok(BreakerPolicy {
            failure_threshold: self.failure_threshold,
            open_for: self.open_for,
            timeout_threshold: self.timeout_threshold,
            on_state_change: no_hook(),
            observer: None,
        })
    }
}

/// The function called on every state change: endpoint key, old state, new
/// state.
type StateHook = Arc<dyn Fn(&str, BreakerState, BreakerState) + Send + Sync>;

/// The default hook: does nothing.
fn no_hook() -> StateHook {
    Arc::new(|_: &str, _: BreakerState, _: BreakerState| {})
}

/// How breakers behave: a validated [`BreakerConfig`] plus an optional
/// [`Observer`](super::Observer) told of every breaker made with it and of
/// its state changes (metrics: [`with_observer`](Self::with_observer)), and
/// an optional hook called on every state change.
///
/// Made by [`BreakerConfig::build`]; `BreakerPolicy::default()` is the
/// default config's. Cloning is cheap (the hook and observer are shared).
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use budget_core::breaker::{BreakerPolicy, BreakerState};
///
/// let opened = Arc::new(AtomicUsize::new(0));
/// let counter = Arc::clone(&opened);
/// let policy = BreakerPolicy::default().with_on_state_change(move |_key, _from, to| {
///     if to == BreakerState::Open {
///         counter.fetch_add(1, Ordering::Relaxed);
///     }
/// });
/// assert_eq!(policy.failure_threshold(), 5);
/// ```
#[derive(Clone)]
pub struct BreakerPolicy {
    failure_threshold: u32,
    open_for: Duration,
    timeout_threshold: u32,
    on_state_change: StateHook,
    /// Told of every breaker made with the policy and of its state changes.
    observer: Option<SharedObserver>,
}

impl BreakerPolicy {
    /// Consecutive failures that open the breaker (at least 1).
    ///
    /// ```
    /// # use budget_core::breaker::BreakerPolicy;
    /// assert_eq!(BreakerPolicy::default().failure_threshold(), 5);
    /// ```
    pub fn failure_threshold(&self) -> u32 {
        self.failure_threshold
    }

    /// How long an open breaker refuses calls (more than zero).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::breaker::BreakerPolicy;
    /// assert_eq!(BreakerPolicy::default().open_for(), Duration::from_secs(5));
    /// ```
    pub fn open_for(&self) -> Duration {
        self.open_for
    }

    /// Attempts gone without an answer that open the breaker (at least 1).
    ///
    /// ```
    /// # use budget_core::breaker::BreakerPolicy;
    /// assert_eq!(BreakerPolicy::default().timeout_threshold(), 3);
    /// ```
    pub fn timeout_threshold(&self) -> u32 {
        self.timeout_threshold
    }

    /// The same policy calling `hook(endpoint_key, from, to)` on every state
    /// change of every breaker made with it.
    ///
    /// The hook runs after the breaker's lock is released, on the thread
    /// that caused the change; keep it short (count, log). Changes of one
    /// breaker racing on two threads may reach the hook in either order.
    ///
    /// ```
    /// # use budget_core::breaker::BreakerPolicy;
    /// let policy = BreakerPolicy::default()
    ///     .with_on_state_change(|key, from, to| tracing::info!(key, %from, %to, "breaker"));
    /// # let _ = policy;
    /// ```
    pub fn with_on_state_change<F>(mut self, hook: F) -> Self
    where
        F: Fn(&str, BreakerState, BreakerState) + Send + Sync + 'static,
    {
        self.on_state_change = Arc::new(hook);
        self
    }

    /// The same policy telling `observer` of every breaker made with it
    /// (when made, and on each state change): see [`Observer`](super::Observer).
    /// It replaces the policy's observer, if it had one; the
    /// [`on_state_change`](Self::with_on_state_change) hook is kept.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use budget_core::breaker::{BreakerPolicy, NoObserver};
    ///
    /// let policy = BreakerPolicy::default().with_observer(Arc::new(NoObserver));
    /// assert!(policy.has_observer());
    /// ```
    pub fn with_observer(mut self, observer: Arc<dyn super::Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Whether an observer was given ([`with_observer`](Self::with_observer)).
    ///
    /// ```
    /// # use budget_core::breaker::BreakerPolicy;
    /// assert!(!BreakerPolicy::default().has_observer());
    /// ```
    pub fn has_observer(&self) -> bool {
        self.observer.is_some()
    }

    /// The policy's observer, if it has one.
    #[cfg(outbound)]
    pub(crate) fn observer(&self) -> Option<&SharedObserver> {
        self.observer.as_ref()
    }

    /// Tells the observer that a breaker of `key` was made.
    pub(super) fn registered(&self, key: &str) {
        if let Some(observer) = &self.observer {
            observer.registered(key);
        }
    }

    /// Tells the observer and the hook that the breaker `key` went from
    /// `from` to `to`.
    pub(super) fn notify(&self, key: &str, from: BreakerState, to: BreakerState) {
        if let Some(observer) = &self.observer {
            observer.transition(key, from, to);
        }
        (self.on_state_change)(key, from, to);
    }
}

impl Default for BreakerPolicy {
    /// The policy of [`BreakerConfig::default`], with no hook.
    ///
    /// ```
    /// # use budget_core::breaker::BreakerPolicy;
    /// assert_eq!(BreakerPolicy::default().failure_threshold(), 5);
    /// ```
    fn default() -> Self {
        Self {
            failure_threshold: DEFAULT_FAILURE_THRESHOLD,
            open_for: DEFAULT_OPEN_FOR,
            timeout_threshold: DEFAULT_TIMEOUT_THRESHOLD,
            on_state_change: no_hook(),
            observer: None,
        }
    }
}

impl fmt::Debug for BreakerPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerPolicy")
            .field("failure_threshold", &self.failure_threshold)
            .field("open_for", &self.open_for)
            .field("timeout_threshold", &self.timeout_threshold)
            .field("observer", &self.observer.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_threshold_is_an_error_naming_failure_threshold() {
        let err = BreakerConfig {
            failure_threshold: 0,
            ..Default::default()
        }
        .build()
        .unwrap_err();
        assert_eq!(err.field(), "failure_threshold");
        assert_eq!(
            err.to_string(),
            "invalid config: `failure_threshold` must be at least 1"
        );
    }

    #[test]
    fn zero_open_for_is_an_error_naming_open_for() {
        let err = BreakerConfig {
            open_for: Duration::ZERO,
            ..Default::default()
        }
        .build()
        .unwrap_err();
        assert_eq!(err.field(), "open_for");
    }

    #[test]
    fn zero_timeout_threshold_is_an_error_naming_timeout_threshold() {
        let err = BreakerConfig {
            timeout_threshold: 0,
            ..Default::default()
        }
        .build()
        .unwrap_err();
        assert_eq!(err.field(), "timeout_threshold");
        assert_eq!(
            err.to_string(),
            "invalid config: `timeout_threshold` must be at least 1"
        );
    }

    #[test]
    fn missing_fields_take_the_defaults_five_failures_five_seconds_three_silences() {
        let config: BreakerConfig = toml::from_str("").unwrap();
        assert_eq!(config, BreakerConfig::default());
        let policy = config.build().unwrap();
        assert_eq!(policy.failure_threshold(), 5);
        assert_eq!(policy.open_for(), Duration::from_secs(5));
        assert_eq!(policy.timeout_threshold(), 3);
        let config: BreakerConfig = toml::from_str("timeout_threshold = 2").unwrap();
        assert_eq!(config.build().unwrap().timeout_threshold(), 2);
    }

    #[test]
    fn durations_are_humantime_and_unknown_fields_are_refused() {
        let config: BreakerConfig =
            toml::from_str("failure_threshold = 2\nopen_for = \"1s 500ms\"").unwrap();
        assert_eq!(config.open_for, Duration::from_millis(1500));
        assert!(toml::from_str::<BreakerConfig>("failure_treshold = 2").is_err());
        let back = toml::to_string(&config).unwrap();
        assert_eq!(toml::from_str::<BreakerConfig>(&back).unwrap(), config);
    }
}
