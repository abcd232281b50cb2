//! [`QueueConfig`]: how a [`PermitQueue`](super::PermitQueue) orders its
//! waiters and when it calls its queue a standing one.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::ConfigError;

/// How long a waiter may wait while the queue is overloaded, when the config
/// does not say (the 5 ms of the "controlled delay" rule; see the
/// [module docs](super)).
///
/// ```
/// use budget_core::admission::queue::{QueueConfig, DEFAULT_TARGET};
/// assert_eq!(QueueConfig::default().target, DEFAULT_TARGET);
/// ```
pub const DEFAULT_TARGET: Duration = Duration::from_millis(5);

/// How long the queue must go without emptying before it counts as
/// overloaded, when the config does not say (100 ms).
///
/// ```
/// use budget_core::admission::queue::{QueueConfig, DEFAULT_INTERVAL};
/// assert_eq!(QueueConfig::default().interval, DEFAULT_INTERVAL);
/// ```
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// The share of what a newcomer can wait that a standing queue lets it
/// wait, when the config does not say (a quarter: the rest of its budget
/// stays for the calls after this one).
///
/// ```
/// use budget_core::admission::queue::{QueueConfig, DEFAULT_STANDING_SHARE};
/// assert_eq!(QueueConfig::default().standing_share, DEFAULT_STANDING_SHARE);
/// ```
pub const DEFAULT_STANDING_SHARE: f64 = 0.25;

/// How long a queue stands without a break before it counts as a
/// sustained overload rather than a burst, when the config does not say
/// (2 s): from then on the wait it lets a newcomer have shrinks.
///
/// ```
/// use budget_core::admission::queue::{QueueConfig, DEFAULT_SUSTAINED};
/// assert_eq!(QueueConfig::default().sustained, DEFAULT_SUSTAINED);
/// ```
pub const DEFAULT_SUSTAINED: Duration = Duration::from_secs(2);

/// Which waiter of one criticality a free permit goes to.
///
/// Criticality always comes first (a [`Critical`] waiter is served before
/// any [`Default`] one); the order decides among waiters of the same
/// criticality. Serialises in lower case: `"fifo"`, `"lifo"`, `"adaptive"`.
///
/// [`Critical`]: super::Criticality::Critical
/// [`Default`]: super::Criticality::Default
///
/// # Example
///
/// ```
/// use budget_core::admission::queue::QueueOrder;
///
/// assert_eq!(QueueOrder::default(), QueueOrder::Adaptive);
/// let order: QueueOrder = serde_json::from_str("\"lifo\"").unwrap();
/// assert_eq!(order, QueueOrder::Lifo);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueOrder {
    /// Oldest first, always.
    Fifo,
    /// Newest first, always.
    Lifo,
    /// Oldest first normally, newest first while the queue is overloaded
    /// (adaptive LIFO).
    #[default]
    Adaptive,
}

/// A permit queue's configuration, as read from a file: an order alone
/// (`queue = "lifo"`) or a table (`queue = { order = "fifo", target =
/// "10ms" }`).
///
/// Durations are humantime strings (`"5ms"`); missing fields take their
/// defaults ([`QueueOrder::Adaptive`], [`DEFAULT_TARGET`],
/// [`DEFAULT_INTERVAL`], [`DEFAULT_STANDING_SHARE`]); unknown fields are
/// an error.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::admission::queue::{QueueConfig, QueueOrder};
///
/// let config: QueueConfig =
///     serde_json::from_str(r#"{ "order": "fifo", "target": "10ms" }"#).unwrap();
/// assert_eq!(config.order, QueueOrder::Fifo);
/// assert_eq!(config.target, Duration::from_millis(10));
/// assert_eq!(config.interval, Duration::from_millis(100));
/// config.validate().unwrap();
///
/// let lifo: QueueConfig = serde_json::from_str(r#""lifo""#).unwrap();
/// assert_eq!(lifo.order, QueueOrder::Lifo);
/// assert_eq!(lifo.target, QueueConfig::default().target);
/// assert!(serde_json::from_str::<QueueConfig>(r#""random""#).is_err());
/// ```
///
/// In code, start from [`Default`] and set the fields that differ (they
/// are plain public fields: a config has no setters);
/// [`validate`](Self::validate) checks them:
///
/// ```
/// use std::time::Duration;
/// use budget_core::admission::queue::{QueueConfig, QueueOrder};
///
/// let mut c = QueueConfig::default();
/// c.order = QueueOrder::Fifo;
/// c.target = Duration::from_millis(10);
/// assert!(c.validate().is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, remote = "Self")]
#[non_exhaustive]
pub struct QueueConfig {
    /// The order among waiters of one criticality.
    pub order: QueueOrder,
    /// While the queue stands, a newcomer may always wait this long (the
    /// least of its standing wait); more than zero and shorter than
    /// `interval`.
    #[serde(with = "crate::config::duration")]
    pub target: Duration,
    /// A queue can stand only once it has not been empty for this long,
    /// and stands on for this long after it last refused a newcomer;
    /// more than zero.
    #[serde(with = "crate::config::duration")]
    pub interval: Duration,
    /// While the queue stands, a newcomer may wait at most this share of
    /// what it can wait (the time to its give-up instant), or `target`
    /// if that is longer; more than 0, at most 1.
    pub standing_share: f64,
    /// A queue that has stood this long without a break is a sustained
    /// overload, not a burst: from then on the share a newcomer may wait
    /// shrinks in proportion to how long it has stood
    /// (`standing_share * sustained / stood`, never below `target`), so
    /// that the queue it keeps drains towards `target` and is short when
    /// the overload ends; more than zero.
    #[serde(with = "crate::config::duration")]
    pub sustained: Duration,
}

impl Serialize for QueueConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        QueueConfig::serialize(self, s)
    }
}

impl<'de> Deserialize<'de> for QueueConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{self, MapAccess, Visitor};

        struct QueueVisitor;

        impl<'de> Visitor<'de> for QueueVisitor {
            type Value = QueueConfig;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "an order (\"adaptive\", \"fifo\", \"lifo\") or a table \
                     ({ order = \"adaptive\", target = \"5ms\", interval = \"100ms\", \
                     standing_share = 0.25, sustained = \"2s\" })",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<QueueConfig, E> {
                let order = QueueOrder::deserialize(de::value::StrDeserializer::<E>::new(v))?;
                Ok(QueueConfig {
                    order,
                    ..QueueConfig::default()
                })
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<QueueConfig, A::Error> {
                QueueConfig::deserialize(de::value::MapAccessDeserializer::new(map))
            }
        }

        d.deserialize_any(QueueVisitor)
    }
}

impl Default for QueueConfig {
    /// Adaptive order, 5 ms target, 100 ms interval, a standing share of
    /// a quarter, sustained after 2 s.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use budget_core::admission::queue::{QueueConfig, QueueOrder};
    /// let c = QueueConfig::default();
    /// assert_eq!(
    ///     (c.order, c.target, c.interval, c.standing_share, c.sustained),
    ///     (QueueOrder::Adaptive, Duration::from_millis(5), Duration::from_millis(100), 0.25,
    ///      Duration::from_secs(2))
    /// );
    /// ```
    fn default() -> Self {
        Self {
            order: QueueOrder::Adaptive,
            target: DEFAULT_TARGET,
            interval: DEFAULT_INTERVAL,
            standing_share: DEFAULT_STANDING_SHARE,
            sustained: DEFAULT_SUSTAINED,
        }
    }
}

impl QueueConfig {
    /// How long a waiter that could wait `could` may wait while the queue
    /// stands and has stood for `stood` (rule 4): `standing_share` of it,
    /// times `sustained / stood` once the queue has stood longer than
    /// `sustained`, at least `target`. The one bound for a newcomer
    /// admitted and for a waiter overtaken.
    pub(super) fn standing_wait(&self, could: Duration, stood: Duration) -> Duration {
        let share = if stood > self.sustained {
            self.standing_share * self.sustained.as_secs_f64() / stood.as_secs_f64()
        } else {
            self.standing_share
        };
        could.mul_f64(share).max(self.target)
    }

    /// The same config with `order`: the order among waiters of one
    /// criticality.
    ///
    /// ```
    /// # use budget_core::admission::queue::{QueueConfig, QueueOrder};
    /// assert_eq!(QueueConfig::default().order(QueueOrder::Lifo).order, QueueOrder::Lifo);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.order = ..."))]
    pub fn order(mut self, value: QueueOrder) -> Self {
        self.order = value;
        self
    }

    /// The same config with `target`: what a newcomer may always wait
    /// while the queue stands, more than zero and shorter than `interval`
    /// (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::admission::queue::QueueConfig;
    /// let c = QueueConfig::default().target(Duration::from_millis(10));
    /// assert_eq!(c.target, Duration::from_millis(10));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.target = ..."))]
    pub fn target(mut self, value: Duration) -> Self {
        self.target = value;
        self
    }

    /// The same config with `interval`: how long the queue must go
    /// without emptying before it can stand, more than zero (checked by
    /// [`validate`](Self::validate)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::admission::queue::QueueConfig;
    /// let c = QueueConfig::default().interval(Duration::from_millis(200));
    /// assert_eq!(c.interval, Duration::from_millis(200));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.interval = ..."))]
    pub fn interval(mut self, value: Duration) -> Self {
        self.interval = value;
        self
    }

    /// The same config with `standing_share`: the share of what a
    /// newcomer can wait that a standing queue lets it wait, more than 0
    /// and at most 1 (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::admission::queue::QueueConfig;
    /// assert_eq!(QueueConfig::default().standing_share(0.5).standing_share, 0.5);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.standing_share = ...")
    )]
    pub fn standing_share(mut self, value: f64) -> Self {
        self.standing_share = value;
        self
    }

    /// The same config with `sustained`: how long a queue stands without
    /// a break before the wait it lets a newcomer have shrinks, more than
    /// zero (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::admission::queue::QueueConfig;
    /// let c = QueueConfig::default().sustained(Duration::from_secs(5));
    /// assert_eq!(c.sustained, Duration::from_secs(5));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.sustained = ..."))]
    pub fn sustained(mut self, value: Duration) -> Self {
        self.sustained = value;
        self
    }

    /// Checks the config, or returns a [`ConfigError`] naming the bad field:
    /// `target` or `interval` zero, `target` not shorter than `interval`,
    /// `standing_share` not more than 0 and at most 1, or `sustained`
    /// zero.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::QueueConfig;
    ///
    /// let mut c = QueueConfig::default();
    /// c.target = Duration::from_millis(100);
    /// let err = c.validate().unwrap_err();
    /// assert_eq!(err.field(), "target");
    /// assert_eq!(err.problem(), "must be shorter than interval (100ms)");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.target.is_zero() {
            return Err(ConfigError::new("target", "must be more than zero"));
        }
        if self.interval.is_zero() {
            return Err(ConfigError::new("interval", "must be more than zero"));
        }
        if self.target >= self.interval {
            return Err(ConfigError::new(
                "target",
                format!(
                    "must be shorter than interval ({})",
                    humantime::format_duration(self.interval)
                ),
            ));
        }
        if !(self.standing_share > 0.0 && self.standing_share <= 1.0) {
            return Err(ConfigError::new(
                "standing_share",
                "must be more than 0 and at most 1",
            ));
        }
        if self.sustained.is_zero() {
            return Err(ConfigError::new("sustained", "must be more than zero"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_toml_is_the_default_config() {
        let config: QueueConfig = toml::from_str("").unwrap();
        assert_eq!(config, QueueConfig::default());
        config.validate().unwrap();
    }

    #[test]
    fn toml_reads_order_and_humantime_durations() {
        let config: QueueConfig =
            toml::from_str("order = \"lifo\"\ntarget = \"2ms\"\ninterval = \"1s 500ms\"").unwrap();
        assert_eq!(
            config,
            QueueConfig {
                order: QueueOrder::Lifo,
                target: Duration::from_millis(2),
                interval: Duration::from_millis(1500),
                standing_share: DEFAULT_STANDING_SHARE,
                sustained: DEFAULT_SUSTAINED,
            }
        );
        let back = toml::to_string(&config).unwrap();
        assert_eq!(toml::from_str::<QueueConfig>(&back).unwrap(), config);
        for (word, order) in [
            ("fifo", QueueOrder::Fifo),
            ("lifo", QueueOrder::Lifo),
            ("adaptive", QueueOrder::Adaptive),
        ] {
            let config: QueueConfig = toml::from_str(&format!("order = \"{word}\"")).unwrap();
            assert_eq!(config.order, order);
        }
    }

    #[test]
    fn toml_refuses_unknown_fields_orders_and_durations() {
        assert!(toml::from_str::<QueueConfig>("targte = \"5ms\"").is_err());
        assert!(toml::from_str::<QueueConfig>("order = \"random\"").is_err());
        assert!(toml::from_str::<QueueConfig>("order = \"FIFO\"").is_err());
        assert!(toml::from_str::<QueueConfig>("interval = \"soon\"").is_err());
        assert!(toml::from_str::<QueueConfig>("interval = 100").is_err());
    }

    #[test]
    fn zero_target_is_an_error_naming_target() {
        let err = QueueConfig {
            target: Duration::ZERO,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(err.field(), "target");
        assert_eq!(
            err.to_string(),
            "invalid config: `target` must be more than zero"
        );
    }

    #[test]
    fn zero_sustained_is_an_error_naming_it() {
        let err = QueueConfig {
            sustained: Duration::ZERO,
            ..QueueConfig::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(err.field(), "sustained");
        assert_eq!(err.problem(), "must be more than zero");
        // Shorter than `interval` is fine: the share shrinks from the
        // moment the queue stands.
        QueueConfig {
            sustained: Duration::from_millis(50),
            ..QueueConfig::default()
        }
        .validate()
        .unwrap();
        let config: QueueConfig = toml::from_str("sustained = \"5s\"").unwrap();
        assert_eq!(config.sustained, Duration::from_secs(5));
        config.validate().unwrap();
    }

    #[test]
    fn the_standing_wait_shrinks_once_the_queue_has_stood_longer_than_sustained() {
        let c = QueueConfig::default();
        let could = Duration::from_secs(2);
        let at = |stood_ms| c.standing_wait(could, Duration::from_millis(stood_ms));
        // A quarter of 2 s while it has stood up to 2 s.
        assert_eq!(at(0), Duration::from_millis(500));
        assert_eq!(at(2_000), Duration::from_millis(500));
        // Then in proportion: half at 4 s, a tenth at 20 s.
        assert_eq!(at(4_000), Duration::from_millis(250));
        assert_eq!(at(20_000), Duration::from_millis(50));
        // Never below target.
        assert_eq!(at(3_600_000), c.target);
    }

    #[test]
    fn standing_share_out_of_range_is_an_error_naming_it() {
        for bad in [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
            let err = QueueConfig {
                standing_share: bad,
                ..Default::default()
            }
            .validate()
            .unwrap_err();
            assert_eq!(err.field(), "standing_share", "{bad}");
            assert_eq!(err.problem(), "must be more than 0 and at most 1");
        }
        let whole: QueueConfig = toml::from_str("standing_share = 1.0").unwrap();
        whole.validate().unwrap();
        assert!(toml::from_str::<QueueConfig>("standing_share = \"half\"").is_err());
    }

    #[test]
    fn zero_interval_is_an_error_naming_interval() {
        let err = QueueConfig {
            interval: Duration::ZERO,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(err.field(), "interval");
        assert_eq!(err.problem(), "must be more than zero");
    }

    #[test]
    fn target_not_shorter_than_interval_is_an_error_naming_target() {
        let at = QueueConfig {
            target: Duration::from_millis(100),
            ..Default::default()
        };
        let err = at.validate().unwrap_err();
        assert_eq!(err.field(), "target");
        assert_eq!(err.problem(), "must be shorter than interval (100ms)");
        let above: QueueConfig = toml::from_str("target = \"2s\"\ninterval = \"1s\"").unwrap();
        assert_eq!(
            above.validate().unwrap_err().to_string(),
            "invalid config: `target` must be shorter than interval (1s)"
        );
        let just_below = QueueConfig {
            target: Duration::from_millis(99),
            ..Default::default()
        };
        just_below.validate().unwrap();
    }
}
