//! A learned floor's settings ([`LearnedFloorConfig`]), as a dependency's
//! config table gives them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::ConfigError;

/// A learned floor's settings, as in a dependency's TOML table
/// (`floor = { quantile = 0.99, margin = 1.5, min = "5ms", max = "2s" }`;
/// `floor = "auto"` takes every default).
///
/// | field | meaning | default |
/// | --- | --- | --- |
/// | `quantile` | the latency quantile of successful attempts, in (0, 1) | `0.95` |
/// | `margin` | the quantile is multiplied by this, at least 1 | `1` |
/// | `min` | the floor is never below this | `5ms` |
/// | `max` | the floor is never above this | `2s` |
/// | `cold_start` | the floor until `min_samples` exist | `min` |
/// | `min_samples` | samples in the window before the quantile is trusted | `20` |
/// | `window` | how long samples count (a decaying window) | `10s` |
///
/// ```
/// use std::time::Duration;
/// use budget_core::floor::LearnedFloorConfig;
///
/// let c: LearnedFloorConfig = toml::from_str("quantile = 0.95\nmax = \"800ms\"").unwrap();
/// assert_eq!((c.quantile, c.max), (0.95, Duration::from_millis(800)));
/// assert_eq!(c.margin, 1.0);
/// assert!(toml::from_str::<LearnedFloorConfig>("p = 0.9").is_err());
/// ```
///
/// In code, start from [`Default`] (or [`DEFAULT`](Self::DEFAULT) in a
/// `const`) and set the fields that differ (they are plain public fields:
/// a config has no setters); [`validate`](Self::validate) (and
/// [`LearnedFloor::new`](super::LearnedFloor::new)) checks them:
///
/// ```
/// use std::time::Duration;
/// use budget_core::floor::LearnedFloorConfig;
///
/// const P99: LearnedFloorConfig = {
///     let mut config = LearnedFloorConfig::DEFAULT;
///     config.quantile = 0.99;
///     config.max = Duration::from_secs(1);
///     config
/// };
/// assert!(P99.validate().is_ok());
/// assert_eq!(P99.margin, LearnedFloorConfig::default().margin);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct LearnedFloorConfig {
    /// The latency quantile, strictly between 0 and 1.
    pub quantile: f64,
    /// The factor on the quantile, at least 1.
    pub margin: f64,
    /// The lowest floor.
    #[serde(with = "crate::config::duration")]
    pub min: Duration,
    /// The highest floor.
    #[serde(with = "crate::config::duration")]
    pub max: Duration,
    /// The floor while fewer than `min_samples` exist; absent: `min`.
    #[serde(
        with = "crate::config::duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub cold_start: Option<Duration>,
    /// How many samples the window needs before its quantile is used.
    pub min_samples: u64,
    /// How long a sample counts.
    #[serde(with = "crate::config::duration")]
    pub window: Duration,
}

impl Default for LearnedFloorConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl LearnedFloorConfig {
    /// Every default, as a constant (`floor = "auto"`).
    ///
    /// The quantile is the p95, not the p99: a dependency slow enough
    /// for its floor to matter answers few calls, and a p99 of fewer than
    /// 100 samples is their maximum. A pricing call of about 1 s with 8
    /// workers leaves at most 80 samples in the 10 s window, so one
    /// outlier (a call that met a passing queue at the partner, or a
    /// timed-out attempt, which counts at its budget) would set the floor
    /// for up to 10 s and refuse calls that fit. The p95 of such a window
    /// is its fifth-longest sample (and a sparser window's is read as no
    /// higher than that, fewer); for a dependency whose latency is a
    /// steady body with jitter it is within a few percent of the p99.
    /// Most calls start with more time left than the floor (the permit
    /// queue serves the freshest waiter first under load), so the share of
    /// calls that outlive their budget stays near 1 % (`BENCHMARKS.md`,
    /// "Overload without hand-tuning": `slow` at 10x and 20x,
    /// `mixed-budgets`, `deep`).
    ///
    /// The margin is 1: the quantile already holds the tail. A larger
    /// margin refuses calls that would succeed 95 times in 100, and when
    /// most of a dependency's latency is a constant part (a partner 20
    /// times slower), `1.5 x p95` can exceed every caller's budget, so the
    /// dependency would never be called.
    ///
    /// ```
    /// # use budget_core::floor::LearnedFloorConfig;
    /// assert_eq!(LearnedFloorConfig::DEFAULT, LearnedFloorConfig::default());
    /// ```
    pub const DEFAULT: Self = Self {
        quantile: 0.95,
        margin: 1.0,
        min: Duration::from_millis(5),
        max: Duration::from_secs(2),
        cold_start: None,
        min_samples: 20,
        window: Duration::from_secs(10),
    };

    /// The same settings with `quantile`: the latency quantile, strictly
    /// between 0 and 1 (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::floor::LearnedFloorConfig;
    /// assert_eq!(LearnedFloorConfig::default().quantile(0.99).quantile, 0.99);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.quantile = ..."))]
    pub const fn quantile(mut self, value: f64) -> Self {
        self.quantile = value;
        self
    }

    /// The same settings with `margin`: the factor on the quantile, at
    /// least 1 (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::floor::LearnedFloorConfig;
    /// assert_eq!(LearnedFloorConfig::default().margin(1.5).margin, 1.5);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.margin = ..."))]
    pub const fn margin(mut self, value: f64) -> Self {
        self.margin = value;
        self
    }

    /// The same settings with `min`: the lowest floor, at most `max`
    /// (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::LearnedFloorConfig;
    /// let c = LearnedFloorConfig::default().min(Duration::from_millis(20));
    /// assert_eq!(c.min, Duration::from_millis(20));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.min = ..."))]
    pub const fn min(mut self, value: Duration) -> Self {
        self.min = value;
        self
    }

    /// The same settings with `max`: the highest floor, more than zero
    /// (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::LearnedFloorConfig;
    /// let c = LearnedFloorConfig::default().max(Duration::from_secs(1));
    /// assert_eq!(c.max, Duration::from_secs(1));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.max = ..."))]
    pub const fn max(mut self, value: Duration) -> Self {
        self.max = value;
        self
    }

    /// The same settings with `cold_start`: the floor while fewer than
    /// `min_samples` exist, within `[min, max]` (checked by
    /// [`validate`](Self::validate)). Unset (the default), it is `min`;
    /// to unset it again, set the field to `None`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::LearnedFloorConfig;
    /// let c = LearnedFloorConfig::default().cold_start(Duration::from_millis(50));
    /// assert_eq!(c.cold_start, Some(Duration::from_millis(50)));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.cold_start = Some(...)")
    )]
    pub const fn cold_start(mut self, value: Duration) -> Self {
        self.cold_start = Some(value);
        self
    }

    /// The same settings with `min_samples`: how many samples the window
    /// needs before its quantile is used, at least 1 (checked by
    /// [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::floor::LearnedFloorConfig;
    /// assert_eq!(LearnedFloorConfig::default().min_samples(50).min_samples, 50);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.min_samples = ...")
    )]
    pub const fn min_samples(mut self, value: u64) -> Self {
        self.min_samples = value;
        self
    }

    /// The same settings with `window`: how long a sample counts, more
    /// than zero (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::LearnedFloorConfig;
    /// let c = LearnedFloorConfig::default().window(Duration::from_secs(30));
    /// assert_eq!(c.window, Duration::from_secs(30));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.window = ..."))]
    pub const fn window(mut self, value: Duration) -> Self {
        self.window = value;
        self
    }

    /// Checks every field; the error names it.
    ///
    /// # Errors
    ///
    /// `quantile` outside (0, 1), `margin` below 1 (or not a number),
    /// `min` above `max`, `max` zero, `cold_start` outside `[min, max]`,
    /// `min_samples` zero, `window` zero.
    ///
    /// ```
    /// use budget_core::floor::LearnedFloorConfig;
    /// let mut bad = LearnedFloorConfig::default();
    /// bad.margin = 0.5;
    /// assert_eq!(bad.validate().unwrap_err().field(), "margin");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.quantile > 0.0 && self.quantile < 1.0) {
            return Err(ConfigError::new(
                "quantile",
                format!("must be between 0 and 1 (exclusive), not {}", self.quantile),
            ));
        }
        if !(self.margin >= 1.0 && self.margin.is_finite()) {
            return Err(ConfigError::new(
                "margin",
                format!("must be a number of at least 1, not {}", self.margin),
            ));
        }
        if self.max.is_zero() {
            return Err(ConfigError::new("max", "must be more than zero"));
        }
        if self.min > self.max {
            return Err(ConfigError::new(
                "min",
                format!(
                    "must not be above max ({}ms > {}ms)",
                    self.min.as_millis(),
                    self.max.as_millis()
                ),
            ));
        }
        if let Some(cold) = self.cold_start
            && (cold < self.min || cold > self.max)
        {
            return Err(ConfigError::new(
                "cold_start",
                format!(
                    "must lie between min and max ({}ms..={}ms)",
                    self.min.as_millis(),
                    self.max.as_millis()
                ),
            ));
        }
        if self.min_samples == 0 {
            return Err(ConfigError::new("min_samples", "must be at least 1"));
        }
        if self.window.is_zero() {
            return Err(ConfigError::new("window", "must be more than zero"));
        }
        Ok(())
    }
}
