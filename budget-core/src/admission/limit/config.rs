//! How an adaptive or fixed concurrency limit is configured: the
//! [`LimitConfig`] a config file gives, and the [`AdaptiveLimitConfig`] of
//! an [`AdaptiveLimit`](super::AdaptiveLimit).

use std::fmt;
use std::time::Duration;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use tokio::sync::Semaphore;

use crate::config::ConfigError;

/// A concurrency limit as a config file says it: a fixed number, or
/// adaptive.
///
/// In TOML: `concurrency = 8` is [`Fixed`](LimitConfig::Fixed);
/// `concurrency = "auto"` is [`Adaptive`](LimitConfig::Adaptive) with every
/// default; `concurrency = { min = 1, max = 200, initial = 16 }` is adaptive
/// with the fields given (the others at their defaults). Any other value is
/// an error: "expected a number, \"auto\" or a table". A fixed limit
/// serialises as a number, an adaptive one as a table.
///
/// # Example
///
/// ```
/// use budget_core::admission::limit::{AdaptiveLimitConfig, LimitConfig};
///
/// #[derive(serde::Deserialize)]
/// struct Dependency { concurrency: LimitConfig }
///
/// let d: Dependency = toml::from_str("concurrency = 8").unwrap();
/// assert_eq!(d.concurrency, LimitConfig::Fixed(8));
/// let d: Dependency = toml::from_str(r#"concurrency = "auto""#).unwrap();
/// assert_eq!(d.concurrency, LimitConfig::Adaptive(AdaptiveLimitConfig::default()));
/// let d: Dependency = toml::from_str("concurrency = { max = 200 }").unwrap();
/// let LimitConfig::Adaptive(adaptive) = d.concurrency else { panic!() };
/// assert_eq!((adaptive.min, adaptive.max), (1, 200));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LimitConfig {
    /// At most this many calls in flight, always.
    Fixed(usize),
    /// A limit learnt from latency by [`AdaptiveLimit`](super::AdaptiveLimit).
    Adaptive(AdaptiveLimitConfig),
}

impl LimitConfig {
    /// Checks the config, or returns a [`ConfigError`] naming the bad field.
    ///
    /// A fixed `0` (or more than tokio's `Semaphore::MAX_PERMITS`) is named
    /// `concurrency`, the key this type is read from; an adaptive table's
    /// errors name the table's own field (`min`, `max`, `initial`, ...), for
    /// the caller to prefix with [`ConfigError::within`].
    ///
    /// ```
    /// use budget_core::admission::limit::{AdaptiveLimitConfig, LimitConfig};
    ///
    /// assert!(LimitConfig::Fixed(8).validate().is_ok());
    /// assert_eq!(LimitConfig::Fixed(0).validate().unwrap_err().field(), "concurrency");
    /// let mut inverted = AdaptiveLimitConfig::default();
    /// inverted.min = 20;
    /// inverted.max = 10;
    /// assert_eq!(LimitConfig::Adaptive(inverted).validate().unwrap_err().field(), "max");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            Self::Fixed(0) => Err(ConfigError::new("concurrency", "must be at least 1")),
            Self::Fixed(n) if *n > Semaphore::MAX_PERMITS => Err(ConfigError::new(
                "concurrency",
                format!("must be at most {}", Semaphore::MAX_PERMITS),
            )),
            Self::Fixed(_) => Ok(()),
            Self::Adaptive(config) => config.validate(),
        }
    }
}

impl std::str::FromStr for LimitConfig {
    type Err = ConfigError;

    /// A flag's form: a number (`8`) or `auto`.
    ///
    /// ```
    /// use budget_core::admission::limit::LimitConfig;
    /// assert_eq!("8".parse::<LimitConfig>().unwrap(), LimitConfig::Fixed(8));
    /// assert!(matches!("auto".parse::<LimitConfig>().unwrap(), LimitConfig::Adaptive(_)));
    /// assert!("eight".parse::<LimitConfig>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "auto" {
            return Ok(LimitConfig::Adaptive(AdaptiveLimitConfig::default()));
        }
        s.parse::<usize>().map(LimitConfig::Fixed).map_err(|_| {
            ConfigError::new(
                "concurrency",
                format!("expected a number of requests or \"auto\", not {s:?}"),
            )
        })
    }
}

impl std::fmt::Display for LimitConfig {
    /// `8`, or `auto` for an adaptive limit (whatever its table).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitConfig::Fixed(n) => write!(f, "{n}"),
            LimitConfig::Adaptive(_) => f.write_str("auto"),
        }
    }
}

impl From<usize> for LimitConfig {
    /// A fixed limit of `n`.
    fn from(n: usize) -> Self {
        LimitConfig::Fixed(n)
    }
}

impl Serialize for LimitConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Fixed(n) => serializer.serialize_u64(*n as u64),
            Self::Adaptive(config) => config.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for LimitConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LimitConfigVisitor)
    }
}

/// Reads a number, `"auto"` or a table.
struct LimitConfigVisitor;

impl<'de> Visitor<'de> for LimitConfigVisitor {
    type Value = LimitConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number, \"auto\" or a table")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<LimitConfig, E> {
        usize::try_from(v)
            .map(LimitConfig::Fixed)
            .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<LimitConfig, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::invalid_value(de::Unexpected::Signed(v), &self)),
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<LimitConfig, E> {
        if v == "auto" {
            Ok(LimitConfig::Adaptive(AdaptiveLimitConfig::default()))
        } else {
            Err(E::invalid_value(de::Unexpected::Str(v), &self))
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<LimitConfig, A::Error> {
        AdaptiveLimitConfig::deserialize(de::value::MapAccessDeserializer::new(map))
            .map(LimitConfig::Adaptive)
    }
}

/// The settings of an [`AdaptiveLimit`](super::AdaptiveLimit), as read from a file.
///
/// Missing fields take their defaults (shown by [`Default`]); unknown
/// fields are an error. Durations are humantime strings (`"250ms"`).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::admission::limit::AdaptiveLimitConfig;
///
/// let c: AdaptiveLimitConfig =
///     toml::from_str("min = 2\nmax = 64\nwindow = \"500ms\"").unwrap();
/// assert_eq!((c.min, c.max, c.initial), (2, 64, None));
/// assert_eq!(c.window, Duration::from_millis(500));
/// assert_eq!(c.initial_limit(), 10);
/// assert!(c.validate().is_ok());
/// ```
///
/// In code, start from [`Default`] and set the fields that differ (they
/// are plain public fields: a config has no setters);
/// [`validate`](Self::validate) (and [`AdaptiveLimit::new`](super::AdaptiveLimit::new)) checks them:
///
/// ```
/// use budget_core::admission::limit::{AdaptiveLimitConfig, LimitConfig};
///
/// let mut c = AdaptiveLimitConfig::default();
/// c.min = 2;
/// c.max = 64;
/// c.initial = Some(16);
/// assert_eq!(c.initial_limit(), 16);
/// assert!(LimitConfig::Adaptive(c).validate().is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct AdaptiveLimitConfig {
    /// The smallest limit, at least 1. Default 1.
    pub min: usize,
    /// The largest limit, at least `min`. Default 256.
    pub max: usize,
    /// The limit once the first call has answered (the first calls go out
    /// at the min-RTT probe's 3, for 10 ms at most once it is full),
    /// within `[min, max]`. Absent (the
    /// default): 10, clamped into `[min, max]`. A value given outside `[min, max]` is
    /// an error, not silently moved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial: Option<usize>,
    /// The shortest sample window: the limit changes at most once per
    /// `window` (besides drops). More than zero. Default 250 ms.
    #[serde(with = "crate::config::duration")]
    pub window: Duration,
    /// The most answers a window waits for: it waits for as many as the
    /// limit (one round of calls), but no more than this. At least 1.
    /// Default 1000.
    pub window_samples: usize,
    /// How much slower than `min_rtt` the latency may be before the limit
    /// stops growing, as a fraction (`0.1`: 10 %). Finite, at least 0.
    /// Default 0.1.
    pub buffer: f64,
    /// What a [`Sample::Dropped`](super::Sample::Dropped) multiplies the limit by, more than 0 and
    /// less than 1. Default 0.9.
    pub drop_factor: f64,
    /// The time between two min-RTT probes. More than zero. Default 60 s.
    #[serde(with = "crate::config::duration")]
    pub probe_interval: Duration,
    /// Up to this fraction of `probe_interval` is added, at random, to each
    /// wait for the next probe. From 0 to 1. Default 0.15.
    pub probe_jitter: f64,
    /// The calls a min-RTT probe averages, at least 1. Default 20.
    pub probe_samples: usize,
}

impl Default for AdaptiveLimitConfig {
    /// The defaults of every field.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::limit::AdaptiveLimitConfig;
    ///
    /// let c = AdaptiveLimitConfig::default();
    /// assert_eq!((c.min, c.max, c.initial, c.window_samples, c.probe_samples), (1, 256, None, 1000, 20));
    /// assert_eq!((c.window, c.probe_interval), (Duration::from_millis(250), Duration::from_secs(60)));
    /// assert_eq!((c.buffer, c.drop_factor, c.probe_jitter), (0.1, 0.9, 0.15));
    /// ```
    fn default() -> Self {
        Self {
            min: 1,
            max: 256,
            initial: None,
            window: Duration::from_millis(250),
            window_samples: 1000,
            buffer: 0.1,
            drop_factor: 0.9,
            probe_interval: Duration::from_secs(60),
            probe_jitter: 0.15,
            probe_samples: 20,
        }
    }
}

impl AdaptiveLimitConfig {
    /// The same settings with `min`: the smallest limit, at least 1
    /// (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::admission::limit::AdaptiveLimitConfig;
    /// assert_eq!(AdaptiveLimitConfig::default().min(2).min, 2);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.min = ..."))]
    pub fn min(mut self, value: usize) -> Self {
        self.min = value;
        self
    }

    /// The same settings with `max`: the largest limit, at least `min`
    /// (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::admission::limit::AdaptiveLimitConfig;
    /// assert_eq!(AdaptiveLimitConfig::default().max(64).max, 64);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.max = ..."))]
    pub fn max(mut self, value: usize) -> Self {
        self.max = value;
        self
    }

    /// The same settings with `initial`: the limit once the first call has
    /// answered, within `[min, max]` (checked by
    /// [`validate`](Self::validate)). Unset (the default), it is 10
    /// clamped into `[min, max]`; to unset it again, set the field to
    /// `None`.
    ///
    /// ```
    /// # use budget_core::admission::limit::AdaptiveLimitConfig;
    /// assert_eq!(AdaptiveLimitConfig::default().initial(16).initial, Some(16));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.initial = Some(...)")
    )]
    pub fn initial(mut self, value: usize) -> Self {
        self.initial = Some(value);
        self
    }

    /// The same settings with `window`: the shortest sample window, more
    /// than zero (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::admission::limit::AdaptiveLimitConfig;
    /// let c = AdaptiveLimitConfig::default().window(Duration::from_millis(500));
    /// assert_eq!(c.window, Duration::from_millis(500));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.window = ..."))]
    pub fn window(mut self, value: Duration) -> Self {
        self.window = value;
        self
    }

    /// The same settings with `window_samples`: the most answers a window
    /// waits for, at least 1 (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::admission::limit::AdaptiveLimitConfig;
    /// assert_eq!(AdaptiveLimitConfig::default().window_samples(100).window_samples, 100);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.window_samples = ...")
    )]
    pub fn window_samples(mut self, value: usize) -> Self {
        self.window_samples = value;
        self
    }

    /// The same settings with `buffer`: how much slower than `min_rtt` the
    /// latency may be before the limit stops growing, finite and at least
    /// 0 (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::admission::limit::AdaptiveLimitConfig;
    /// assert_eq!(AdaptiveLimitConfig::default().buffer(0.2).buffer, 0.2);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.buffer = ..."))]
    pub fn buffer(mut self, value: f64) -> Self {
        self.buffer = value;
        self
    }

    /// The same settings with `drop_factor`: what a drop multiplies the
    /// limit by, more than 0 and less than 1 (checked by
    /// [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::admission::limit::AdaptiveLimitConfig;
    /// assert_eq!(AdaptiveLimitConfig::default().drop_factor(0.5).drop_factor, 0.5);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.drop_factor = ...")
    )]
    pub fn drop_factor(mut self, value: f64) -> Self {
        self.drop_factor = value;
        self
    }

    /// The same settings with `probe_interval`: the time between two
    /// min-RTT probes, more than zero (checked by
    /// [`validate`](Self::validate)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::admission::limit::AdaptiveLimitConfig;
    /// let c = AdaptiveLimitConfig::default().probe_interval(Duration::from_secs(30));
    /// assert_eq!(c.probe_interval, Duration::from_secs(30));
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.probe_interval = ...")
    )]
    pub fn probe_interval(mut self, value: Duration) -> Self {
        self.probe_interval = value;
        self
    }

    /// The same settings with `probe_jitter`: the largest fraction of
    /// `probe_interval` added at random to each wait for a probe, from 0
    /// to 1 (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::admission::limit::AdaptiveLimitConfig;
    /// assert_eq!(AdaptiveLimitConfig::default().probe_jitter(0.0).probe_jitter, 0.0);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.probe_jitter = ...")
    )]
    pub fn probe_jitter(mut self, value: f64) -> Self {
        self.probe_jitter = value;
        self
    }

    /// The same settings with `probe_samples`: the calls a min-RTT probe
    /// averages, at least 1 (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::admission::limit::AdaptiveLimitConfig;
    /// assert_eq!(AdaptiveLimitConfig::default().probe_samples(5).probe_samples, 5);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.probe_samples = ...")
    )]
    pub fn probe_samples(mut self, value: usize) -> Self {
        self.probe_samples = value;
        self
    }

    /// Checks every field, or returns a [`ConfigError`] naming the first bad
    /// one (`min`, `max`, `initial`, `window`, `window_samples`, `buffer`,
    /// `drop_factor`, `probe_interval`, `probe_jitter`, `probe_samples`).
    ///
    /// ```
    /// use budget_core::admission::limit::AdaptiveLimitConfig;
    ///
    /// let mut c = AdaptiveLimitConfig::default();
    /// c.buffer = f64::NAN;
    /// assert_eq!(c.validate().unwrap_err().to_string(), "invalid config: `buffer` must be a finite number, at least 0");
    /// let mut c = AdaptiveLimitConfig::default();
    /// c.initial = Some(300);
    /// assert_eq!(c.validate().unwrap_err().field(), "initial");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.min == 0 {
            return Err(ConfigError::new("min", "must be at least 1"));
        }
        if self.max < self.min {
            return Err(ConfigError::new("max", "must be at least min"));
        }
        if self.max > Semaphore::MAX_PERMITS {
            return Err(ConfigError::new(
                "max",
                format!("must be at most {}", Semaphore::MAX_PERMITS),
            ));
        }
        if let Some(initial) = self.initial
            && !(self.min..=self.max).contains(&initial)
        {
            return Err(ConfigError::new("initial", "must be within [min, max]"));
        }
        if self.window.is_zero() {
            return Err(ConfigError::new("window", "must be more than zero"));
        }
        if self.window_samples == 0 {
            return Err(ConfigError::new("window_samples", "must be at least 1"));
        }
        if !(self.buffer.is_finite() && self.buffer >= 0.0) {
            return Err(ConfigError::new(
                "buffer",
                "must be a finite number, at least 0",
            ));
        }
        if !(self.drop_factor > 0.0 && self.drop_factor < 1.0) {
            return Err(ConfigError::new(
                "drop_factor",
                "must be more than 0 and less than 1",
            ));
        }
        if self.probe_interval.is_zero() {
            return Err(ConfigError::new("probe_interval", "must be more than zero"));
        }
        if !(0.0..=1.0).contains(&self.probe_jitter) {
            return Err(ConfigError::new("probe_jitter", "must be from 0 to 1"));
        }
        if self.probe_samples == 0 {
            return Err(ConfigError::new("probe_samples", "must be at least 1"));
        }
        Ok(())
    }

    /// The limit an [`AdaptiveLimit`](super::AdaptiveLimit) runs at from its first answer on
    /// (until then, or until the first calls' 10 ms hold is over, at the
    /// probe's limit): `initial`, or 10 clamped into `[min, max]`.
    ///
    /// ```
    /// use budget_core::admission::limit::AdaptiveLimitConfig;
    ///
    /// let mut c = AdaptiveLimitConfig::default();
    /// c.max = 4;
    /// assert_eq!(c.initial_limit(), 4);
    /// let mut c = AdaptiveLimitConfig::default();
    /// c.initial = Some(16);
    /// assert_eq!(c.initial_limit(), 16);
    /// ```
    pub fn initial_limit(&self) -> usize {
        self.initial
            .unwrap_or(10)
            .clamp(self.min, self.max.max(self.min))
    }
}
