//! Retry configuration: [`RetryConfig`] and its [`BackoffConfig`] table.
//!
//! The module is private: its items are public in [`crate::retry`], and
//! their docs carry the design notes.

use std::time::Duration;

use http::StatusCode;
use serde::{Deserialize, Serialize};

use super::backoff::{Backoff, Jitter};
use super::classify::{Classifier, DEFAULT_RETRYABLE_STATUSES};
use super::policy::RetryPolicy;
use crate::config::ConfigError;

/// Retry configuration, as read from TOML or JSON (durations in humantime
/// form). Every field has a default, the contract's; validate it with
/// [`build`](Self::build).
///
/// The contract's defaults are stated once: [`RetryConfig::default`]
/// (with [`Backoff::default`] for the backoff), and
/// [`RetryPolicy::default`] is that configuration, built.
///
/// The jitter belongs to the backoff (`[retry.backoff] jitter = "none"`).
/// A `jitter` key directly in the retry table, where it used to be, is still
/// read as a deprecated spelling of `backoff.jitter`; giving both is refused.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::retry::{Jitter, RetryConfig};
///
/// let config: RetryConfig = toml::from_str(r#"
///     max_attempts = 4
///     retry_after_max = "5s"
///     retryable_statuses = [429, 503]
///     [backoff]
///     initial = "100ms"
///     max = "2s"
///     multiplier = 1.5
///     jitter = "none"
/// "#).unwrap();
/// let policy = config.build().unwrap();
/// assert_eq!(policy.max_attempts(), 4);
/// assert_eq!(policy.backoff().jitter(), Jitter::None);
/// assert_eq!(policy.backoff().ceiling(2), Duration::from_millis(150));
///
/// let defaults: RetryConfig = toml::from_str("").unwrap();
/// assert_eq!(defaults, RetryConfig::default());
/// ```
///
/// In code, start from [`Default`] and set the fields that differ (they
/// are plain public fields: a config has no setters);
/// [`build`](Self::build) validates:
///
/// ```
/// use std::time::Duration;
/// use budget_core::retry::{Jitter, RetryConfig};
///
/// let mut config = RetryConfig::default();
/// config.max_attempts = 4;
/// config.backoff.initial = Duration::from_millis(100);
/// config.backoff.jitter = Jitter::None;
/// config.retryable_statuses = vec![429, 503];
/// let policy = config.build().unwrap();
/// assert_eq!(policy.max_attempts(), 4);
/// assert_eq!(policy.backoff().ceiling(1), Duration::from_millis(100));
/// ```
///
/// The jitter is in the `backoff` table; its older spelling, beside
/// `max_attempts`, means the same:
///
/// ```
/// use budget_core::retry::{Jitter, RetryConfig, RetryPolicy};
///
/// let config: RetryConfig = toml::from_str(r#"
///     max_attempts = 2
///     [backoff]
///     jitter = "none"
/// "#).unwrap();
/// assert_eq!(config.backoff.jitter, Jitter::None);
///
/// // The older spelling, `jitter` beside `max_attempts`, means the same.
/// let old: RetryConfig = toml::from_str("max_attempts = 2\njitter = \"none\"").unwrap();
/// assert_eq!(old, config);
///
/// assert_eq!(RetryConfig::default().build().unwrap(), RetryPolicy::default());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RetryConfigToml")]
#[non_exhaustive]
pub struct RetryConfig {
    /// Total attempts, the first included (1 = never retry). Default 3.
    pub max_attempts: u32,
    /// The exponential backoff and its jitter.
    pub backoff: BackoffConfig,
    /// The longest `Retry-After` honoured by waiting; a longer one ends the
    /// call and is passed up. Default 10 s.
    #[serde(with = "crate::config::duration")]
    pub retry_after_max: Duration,
    /// Statuses worth another attempt. Default `[408, 429, 500, 502, 503, 504]`.
    pub retryable_statuses: Vec<u16>,
    /// The longest one attempt may take, whatever the budget allows; absent
    /// (the default): an attempt may take all that is left. With it, an
    /// attempt that times out with budget left is retried (docs/contract.md
    /// §2 rule 5) while the budget still holds the backoff and the floor.
    #[serde(with = "crate::config::duration")]
    pub attempt_timeout: Option<Duration>,
}

impl Default for RetryConfig {
    /// The contract's retry rules: 3 attempts, the default [`Backoff`],
    /// `Retry-After` honoured up to 10 s, statuses 408, 429, 500, 502, 503,
    /// 504, no per-attempt cap.
    fn default() -> Self {
        Self {
            max_attempts: 3,
            backoff: BackoffConfig::default(),
            retry_after_max: Duration::from_secs(10),
            retryable_statuses: DEFAULT_RETRYABLE_STATUSES
                .iter()
                .map(StatusCode::as_u16)
                .collect(),
            attempt_timeout: None,
        }
    }
}

/// The `backoff` table of a [`RetryConfig`]: the exponential backoff and
/// the jitter it draws its waits with.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::retry::{BackoffConfig, Jitter};
///
/// let b: BackoffConfig = serde_json::from_str(r#"{"initial": "20ms"}"#).unwrap();
/// assert_eq!(b.initial, Duration::from_millis(20));
/// assert_eq!(b.max, Duration::from_secs(1));
/// assert_eq!(b.multiplier, 2.0);
/// assert_eq!(b.jitter, Jitter::Full);
/// ```
///
/// In code, start from [`Default`] and set the fields that differ (they
/// are plain public fields: a config has no setters);
/// [`build`](Self::build) validates:
///
/// ```
/// use std::time::Duration;
/// use budget_core::retry::{BackoffConfig, Jitter};
///
/// let mut config = BackoffConfig::default();
/// config.initial = Duration::from_millis(20);
/// config.max = Duration::from_millis(500);
/// config.jitter = Jitter::None;
/// let backoff = config.build().unwrap();
/// assert_eq!(backoff.initial(), Duration::from_millis(20));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct BackoffConfig {
    /// The first retry's ceiling. Default 50 ms.
    #[serde(with = "crate::config::duration")]
    pub initial: Duration,
    /// The cap. Default 1 s.
    #[serde(with = "crate::config::duration")]
    pub max: Duration,
    /// The growth per retry, at least 1. Default 2.
    pub multiplier: f64,
    /// `"full"` (default) or `"none"`.
    pub jitter: Jitter,
}

impl Default for BackoffConfig {
    /// [`Backoff::default`], as configuration.
    fn default() -> Self {
        let b = Backoff::default();
        Self {
            initial: b.initial(),
            max: b.max(),
            multiplier: b.multiplier(),
            jitter: b.jitter(),
        }
    }
}

impl BackoffConfig {
    /// The same configuration with `initial`: the first retry's ceiling,
    /// more than zero (checked by [`build`](Self::build)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::retry::BackoffConfig;
    /// let b = BackoffConfig::default().initial(Duration::from_millis(20));
    /// assert_eq!(b.initial, Duration::from_millis(20));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.initial = ..."))]
    pub fn initial(mut self, value: Duration) -> Self {
        self.initial = value;
        self
    }

    /// The same configuration with `max`: the cap of every wait, at least
    /// `initial` (checked by [`build`](Self::build)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::retry::BackoffConfig;
    /// let b = BackoffConfig::default().max(Duration::from_secs(2));
    /// assert_eq!(b.max, Duration::from_secs(2));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.max = ..."))]
    pub fn max(mut self, value: Duration) -> Self {
        self.max = value;
        self
    }

    /// The same configuration with `multiplier`: the growth per retry, at
    /// least 1 and finite (checked by [`build`](Self::build)).
    ///
    /// ```
    /// # use budget_core::retry::BackoffConfig;
    /// assert_eq!(BackoffConfig::default().multiplier(1.5).multiplier, 1.5);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.multiplier = ..."))]
    pub fn multiplier(mut self, value: f64) -> Self {
        self.multiplier = value;
        self
    }

    /// The same configuration with `jitter`: how a wait is drawn below its
    /// ceiling.
    ///
    /// ```
    /// # use budget_core::retry::{BackoffConfig, Jitter};
    /// assert_eq!(BackoffConfig::default().jitter(Jitter::None).jitter, Jitter::None);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.jitter = ..."))]
    pub fn jitter(mut self, value: Jitter) -> Self {
        self.jitter = value;
        self
    }

    /// Validates the table into a [`Backoff`] (see [`Backoff::new`] for the
    /// errors).
    ///
    /// ```
    /// use budget_core::retry::{Backoff, BackoffConfig};
    ///
    /// assert_eq!(BackoffConfig::default().build().unwrap(), Backoff::default());
    /// ```
    pub fn build(&self) -> Result<Backoff, ConfigError> {
        Backoff::new(self.initial, self.max, self.multiplier, self.jitter)
    }
}

impl RetryConfig {
    /// The same configuration with `max_attempts`: the total attempts, the
    /// first included (1 = never retry); at least 1 (checked by
    /// [`build`](Self::build)).
    ///
    /// ```
    /// # use budget_core::retry::RetryConfig;
    /// assert_eq!(RetryConfig::default().max_attempts(1).max_attempts, 1);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.max_attempts = ...")
    )]
    pub fn max_attempts(mut self, value: u32) -> Self {
        self.max_attempts = value;
        self
    }

    /// The same configuration with `backoff`: the exponential backoff and
    /// its jitter (checked by [`build`](Self::build), see
    /// [`BackoffConfig::build`]).
    ///
    /// ```
    /// # use budget_core::retry::{BackoffConfig, Jitter, RetryConfig};
    /// let c = RetryConfig::default().backoff(BackoffConfig::default().jitter(Jitter::None));
    /// assert_eq!(c.backoff.jitter, Jitter::None);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.backoff = ..."))]
    pub fn backoff(mut self, value: BackoffConfig) -> Self {
        self.backoff = value;
        self
    }

    /// The same configuration with `retry_after_max`: the longest
    /// `Retry-After` honoured by waiting.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::retry::RetryConfig;
    /// let c = RetryConfig::default().retry_after_max(Duration::from_secs(5));
    /// assert_eq!(c.retry_after_max, Duration::from_secs(5));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.retry_after_max = ...")
    )]
    pub fn retry_after_max(mut self, value: Duration) -> Self {
        self.retry_after_max = value;
        self
    }

    /// The same configuration with `retryable_statuses`: the statuses
    /// worth another attempt, each from 100 to 599 (checked by
    /// [`build`](Self::build)). Takes a `Vec<u16>`, an array or a slice.
    ///
    /// ```
    /// # use budget_core::retry::RetryConfig;
    /// let c = RetryConfig::default().retryable_statuses([429, 503]);
    /// assert_eq!(c.retryable_statuses, vec![429, 503]);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.retryable_statuses = value.into()")
    )]
    pub fn retryable_statuses(mut self, value: impl Into<Vec<u16>>) -> Self {
        self.retryable_statuses = value.into();
        self
    }

    /// The same configuration with an `attempt_timeout`: the longest one
    /// attempt may take, more than zero (checked by
    /// [`build`](Self::build)). The default is none; to remove one, set the
    /// field to `None`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::retry::RetryConfig;
    /// let c = RetryConfig::default().attempt_timeout(Duration::from_millis(300));
    /// assert_eq!(c.attempt_timeout, Some(Duration::from_millis(300)));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.attempt_timeout = Some(...)")
    )]
    pub fn attempt_timeout(mut self, value: Duration) -> Self {
        self.attempt_timeout = Some(value);
        self
    }

    /// Validates the configuration into a [`RetryPolicy`], or a
    /// [`ConfigError`] naming the field: `max_attempts` of 0,
    /// `backoff.initial` of zero, `backoff.max` below `backoff.initial`,
    /// `backoff.multiplier` below 1 or not finite, a `retryable_statuses`
    /// entry outside 100-599.
    ///
    /// ```
    /// use budget_core::retry::RetryConfig;
    ///
    /// let mut config = RetryConfig::default();
    /// config.max_attempts = 0;
    /// let err = config.build().unwrap_err();
    /// assert_eq!(err.to_string(), "invalid config: `max_attempts` must be at least 1");
    /// let mut config = RetryConfig::default();
    /// config.retryable_statuses = vec![503, 600];
    /// let err = config.build().unwrap_err();
    /// assert_eq!(err.to_string(), "invalid config: `retryable_statuses` has 600, outside 100-599");
    /// ```
    pub fn build(&self) -> Result<RetryPolicy, ConfigError> {
        if self.max_attempts == 0 {
            return Err(ConfigError::new("max_attempts", "must be at least 1"));
        }
        if self.attempt_timeout.is_some_and(|t| t.is_zero()) {
            return Err(ConfigError::new(
                "attempt_timeout",
                "must be more than zero",
            ));
        }
        let backoff = self.backoff.build()?;
        let statuses = self
            .retryable_statuses
            .iter()
            .map(|&code| {
                (100..=599)
                    .contains(&code)
                    .then(|| StatusCode::from_u16(code).ok())
                    .flatten()
                    .ok_or_else(|| {
                        ConfigError::new(
                            "retryable_statuses",
                            format!("has {code}, outside 100-599"),
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RetryPolicy::from_parts(
            self.max_attempts,
            backoff,
            self.retry_after_max,
            Classifier::with_statuses(statuses),
            self.attempt_timeout,
        ))
    }

    /// Checks that an attempt can fit in the largest budget the service
    /// grants (its `max_budget`): an `attempt_timeout` longer than that
    /// could never apply and is a mistake in the config.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::retry::RetryConfig;
    ///
    /// let mut c = RetryConfig::default();
    /// c.attempt_timeout = Some(Duration::from_secs(5));
    /// assert!(c.check_within(Duration::from_secs(10)).is_ok());
    /// let err = c.check_within(Duration::from_secs(2)).unwrap_err();
    /// assert_eq!(err.to_string(), "invalid config: `attempt_timeout` is 5000ms, longer than the overall budget 2000ms");
    /// ```
    pub fn check_within(&self, overall: Duration) -> Result<(), ConfigError> {
        match self.attempt_timeout {
            Some(t) if t > overall => Err(ConfigError::new(
                "attempt_timeout",
                format!(
                    "is {}ms, longer than the overall budget {}ms",
                    t.as_millis(),
                    overall.as_millis()
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// What a retry table may say: [`RetryConfig`]'s fields, plus the
/// deprecated top-level `jitter`. The jitters are options so that one given
/// twice can be told from a default.
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RetryConfigToml {
    max_attempts: u32,
    backoff: BackoffToml,
    /// Deprecated: `backoff.jitter`.
    jitter: Option<Jitter>,
    #[serde(with = "crate::config::duration")]
    retry_after_max: Duration,
    retryable_statuses: Vec<u16>,
    #[serde(with = "crate::config::duration")]
    attempt_timeout: Option<Duration>,
}

/// The `backoff` table as read inside a retry table.
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct BackoffToml {
    #[serde(with = "crate::config::duration")]
    initial: Duration,
    #[serde(with = "crate::config::duration")]
    max: Duration,
    multiplier: f64,
    jitter: Option<Jitter>,
}

impl Default for RetryConfigToml {
    fn default() -> Self {
        let d = RetryConfig::default();
        Self {
            max_attempts: d.max_attempts,
            backoff: BackoffToml::default(),
            jitter: None,
            retry_after_max: d.retry_after_max,
            retryable_statuses: d.retryable_statuses,
            attempt_timeout: d.attempt_timeout,
        }
    }
}

impl Default for BackoffToml {
    fn default() -> Self {
        let d = BackoffConfig::default();
        Self {
            initial: d.initial,
            max: d.max,
            multiplier: d.multiplier,
            jitter: None,
        }
    }
}

impl TryFrom<RetryConfigToml> for RetryConfig {
    type Error = ConfigError;

    fn try_from(t: RetryConfigToml) -> Result<Self, ConfigError> {
        let jitter = match (t.jitter, t.backoff.jitter) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::new(
                    "jitter",
                    "is given twice; keep `backoff.jitter` (the top-level `jitter` is deprecated)",
                ));
            }
            (old, new) => new.or(old).unwrap_or_default(),
        };
        Ok(Self {
            max_attempts: t.max_attempts,
            backoff: BackoffConfig {
                initial: t.backoff.initial,
                max: t.backoff.max,
                multiplier: t.backoff.multiplier,
                jitter,
            },
            retry_after_max: t.retry_after_max,
            retryable_statuses: t.retryable_statuses,
            attempt_timeout: t.attempt_timeout,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn config_validation_names_each_field() {
        let field = |c: RetryConfig| c.build().unwrap_err().field().to_owned();
        let d = RetryConfig::default;
        assert_eq!(
            field(RetryConfig {
                max_attempts: 0,
                ..d()
            }),
            "max_attempts"
        );
        let b = |initial, max, multiplier| RetryConfig {
            backoff: BackoffConfig {
                initial,
                max,
                multiplier,
                jitter: Jitter::Full,
            },
            ..d()
        };
        assert_eq!(field(b(Duration::ZERO, ms(1), 2.0)), "backoff.initial");
        assert_eq!(field(b(ms(2), ms(1), 2.0)), "backoff.max");
        assert_eq!(field(b(ms(1), ms(1), 0.99)), "backoff.multiplier");
        assert_eq!(field(b(ms(1), ms(1), f64::INFINITY)), "backoff.multiplier");
        for bad in [0, 99, 600, 1000, u16::MAX] {
            assert_eq!(
                field(RetryConfig {
                    retryable_statuses: vec![bad],
                    ..d()
                }),
                "retryable_statuses",
                "{bad}"
            );
        }
        let ok = RetryConfig {
            retryable_statuses: vec![100, 599, 503, 503],
            ..d()
        }
        .build()
        .unwrap();
        assert_eq!(ok.classifier().statuses().len(), 3);
    }

    #[test]
    fn default_policy_is_the_built_default_config() {
        assert_eq!(
            RetryConfig::default().build().unwrap(),
            RetryPolicy::default()
        );
        assert_eq!(
            BackoffConfig::default().build().unwrap(),
            Backoff::default()
        );
    }

    #[test]
    fn config_round_trips_through_serde_and_rejects_unknown_fields() {
        let c = RetryConfig::default();
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<RetryConfig>(&json).unwrap(), c);
        assert!(json.contains("\"retry_after_max\":\"10s\""), "{json}");
        assert!(serde_json::from_str::<RetryConfig>(r#"{"max_retries": 3}"#).is_err());
        assert!(serde_json::from_str::<RetryConfig>(r#"{"jitter": "half"}"#).is_err());
        assert!(serde_json::from_str::<RetryConfig>(r#"{"backoff": {"jitter": "half"}}"#).is_err());
        let none = RetryConfig {
            backoff: BackoffConfig {
                jitter: Jitter::None,
                ..Default::default()
            },
            ..Default::default()
        };
        let text = toml::to_string(&none).unwrap();
        assert_eq!(toml::from_str::<RetryConfig>(&text).unwrap(), none);
    }

    #[test]
    fn the_deprecated_top_level_jitter_is_the_backoffs_and_may_not_be_given_twice() {
        let read = |s: &str| toml::from_str::<RetryConfig>(s);
        let none = |c: RetryConfig| c.backoff.jitter == Jitter::None;
        assert!(none(read("jitter = \"none\"").unwrap()));
        assert!(none(
            read("jitter = \"none\"\n[backoff]\ninitial = \"20ms\"").unwrap()
        ));
        assert!(none(read("[backoff]\njitter = \"none\"").unwrap()));
        assert_eq!(read("").unwrap().backoff.jitter, Jitter::Full);
        let err = read("jitter = \"none\"\n[backoff]\njitter = \"none\"").unwrap_err();
        assert!(err.to_string().contains("`jitter` is given twice"), "{err}");
        assert!(
            read("[backoff]\nretries = 3").is_err(),
            "unknown backoff field"
        );
    }
}
