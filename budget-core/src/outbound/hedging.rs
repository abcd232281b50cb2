//! Hedged requests, paid from the budget: when a call's first attempt has
//! not answered after the dependency's usual latency, one more is sent and
//! the first answer wins (docs/hedging-and-stale.md, "Hedged requests").
//!
//! A slow answer is most often bad luck on one connection, one replica or
//! one garbage collection, not a slow dependency: a second copy sent a
//! little later usually answers first (Dean and Barroso, *The Tail at
//! Scale*; Finagle's backup requests; tower's `hedge`). Three rules keep it
//! from becoming load the dependency cannot afford:
//!
//! - **Only calls that may be sent twice**: idempotent methods, or keyed
//!   ones (the same rule as retries), with a replayable body; only the
//!   first attempt is hedged, and only in budget mode.
//! - **Only when it fits**: the hedge is sent only if what is left still
//!   covers the dependency's floor, its circuit lets it through, and a
//!   concurrency permit is free at once (a hedge never waits for one).
//! - **Only within its own budget**: every hedgeable call deposits `ratio`
//!   of a hedge, every hedge withdraws one ([`RetryBudget`]'s sliding
//!   window over `window`, no per-second allowance), so hedges are at most
//!   `ratio` of the calls, whatever the latency does. It shares nothing
//!   with the retry budget.
//!
//! The delay is fixed (`hedge = "40ms"`) or the dependency's learned
//! latency quantile (`hedge = "auto"`: the p95 of its recent successful
//! attempts, [`LearnedFloor`]'s decaying window); a learned delay sends no
//! hedge until `min_samples` attempts were seen.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::client::{HedgeConfig, HedgeDelay};
//!
//! #[derive(serde::Deserialize)]
//! struct T { hedge: HedgeConfig }
//! let t: T = toml::from_str("hedge = \"auto\"").unwrap();
//! assert_eq!(t.hedge, HedgeConfig::default());
//! let t: T = toml::from_str("hedge = \"40ms\"").unwrap();
//! assert_eq!(t.hedge.delay, HedgeDelay::Fixed(Duration::from_millis(40)));
//! let t: T = toml::from_str("hedge = { quantile = 0.9, ratio = 0.05 }").unwrap();
//! assert_eq!((t.hedge.quantile, t.hedge.ratio), (0.9, 0.05));
//! assert!(toml::from_str::<T>("hedge = \"soon\"").is_err());
//! ```

use std::fmt;
use std::time::Duration;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::ConfigError;
use crate::floor::{FloorBasis, LearnedFloor, LearnedFloorConfig};
use crate::retry::{RetryBudget, RetryBudgetConfig};

/// The ledger suffix of a hedge: `pricing-hedge;dur=31`.
pub const HEDGE_SUFFIX: &str = "-hedge";

/// The ledger's outcome of an attempt dropped because the other one
/// answered first: `pricing;dur=120;desc="cancelled"`.
pub const CANCELLED: &str = "cancelled";

/// When a hedge is sent.
///
/// ```
/// use std::time::Duration;
/// use budget_core::client::HedgeDelay;
///
/// assert_eq!("auto".parse::<HedgeDelay>().unwrap(), HedgeDelay::Auto);
/// assert_eq!("40ms".parse::<HedgeDelay>().unwrap(), HedgeDelay::Fixed(Duration::from_millis(40)));
/// assert_eq!(HedgeDelay::Fixed(Duration::from_millis(40)).to_string(), "40ms");
/// assert_eq!("off".parse::<HedgeDelay>().unwrap(), HedgeDelay::Off);
/// assert!("0s".parse::<HedgeDelay>().is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum HedgeDelay {
    /// After the dependency's learned latency quantile
    /// ([`HedgeConfig::quantile`]).
    #[default]
    Auto,
    /// After this long.
    Fixed(Duration),
    /// Never: no hedge is sent (`hedge = "off"`). The way to turn off the
    /// hedging a dependency with replicas has by default
    /// ([`DependencyConfig::hedge`](crate::client::DependencyConfig::hedge)).
    Off,
}

impl std::str::FromStr for HedgeDelay {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == AUTO {
            return Ok(HedgeDelay::Auto);
        }
        if s == OFF {
            return Ok(HedgeDelay::Off);
        }
        let delay = crate::config::duration::parse(s).map_err(|e| {
            ConfigError::new(
                "delay",
                format!("expected `auto`, `off` or a duration (`40ms`): {e}"),
            )
        })?;
        if delay.is_zero() {
            return Err(ConfigError::new("delay", "must be more than zero"));
        }
        Ok(HedgeDelay::Fixed(delay))
    }
}

impl fmt::Display for HedgeDelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HedgeDelay::Auto => f.write_str(AUTO),
            HedgeDelay::Off => f.write_str(OFF),
            HedgeDelay::Fixed(d) => write!(f, "{}", humantime::format_duration(*d)),
        }
    }
}

impl Serialize for HedgeDelay {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HedgeDelay {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

const AUTO: &str = "auto";
const OFF: &str = "off";

/// A dependency's hedging, as a config file says it:
///
/// - `hedge = "auto"`: after the learned p95, every other default;
/// - `hedge = "40ms"`: after a fixed delay;
/// - `hedge = "off"`: never (see below);
/// - `hedge = { delay = "auto", quantile = 0.95, ratio = 0.1, min_samples = 20, window = "10s" }`.
///
/// | field | meaning | default |
/// | --- | --- | --- |
/// | `delay` | `auto` (the learned quantile) or a duration | `auto` |
/// | `quantile` | the latency quantile a learned delay waits, in (0, 1) | `0.95` |
/// | `min_samples` | attempts seen before a learned delay hedges at all | `20` |
/// | `window` | how long latency samples and hedge deposits count, 1 s to 60 s | `10s` |
/// | `ratio` | hedges per hedgeable call at most, in (0, 1] | `0.1` |
///
/// Absent (the default of [`DependencyConfig`](crate::client::DependencyConfig)):
/// no hedging for a dependency with one endpoint; for one with replicas
/// (an `endpoints` list, or a host name that may resolve to several
/// addresses), every default, and a hedge is sent only to another replica
/// than the first attempt's (docs/hedging-and-stale.md, "Replicas are
/// hedged by default"). `hedge = "off"` turns that off.
///
/// ```
/// use budget_core::client::HedgeConfig;
///
/// let mut bad = HedgeConfig::default();
/// bad.ratio = 1.5;
/// assert_eq!(bad.validate().unwrap_err().field(), "ratio");
/// assert!(HedgeConfig::default().validate().is_ok());
/// ```
///
/// In code, start from [`Default`] (`hedge = "auto"`) or
/// [`after`](Self::after) (both usable in a `const`: [`DEFAULT`](Self::DEFAULT))
/// and set the fields that differ (they are plain public fields: a config
/// has no setters); [`validate`](Self::validate) checks:
///
/// ```
/// use std::time::Duration;
/// use budget_core::client::HedgeConfig;
///
/// let mut c = HedgeConfig::after(Duration::from_millis(40));
/// c.ratio = 0.05;
/// assert!(c.validate().is_ok());
/// const CAREFUL: HedgeConfig = {
///     let mut config = HedgeConfig::DEFAULT;
///     config.quantile = 0.99;
///     config.min_samples = 100;
///     config
/// };
/// assert_eq!(CAREFUL.ratio, HedgeConfig::default().ratio);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct HedgeConfig {
    /// When the hedge is sent.
    pub delay: HedgeDelay,
    /// The quantile a learned delay waits, strictly between 0 and 1.
    pub quantile: f64,
    /// Attempts in the window before a learned delay is trusted.
    pub min_samples: u64,
    /// How long a latency sample and a hedge deposit count.
    #[serde(with = "crate::config::duration")]
    pub window: Duration,
    /// Hedges per hedgeable call at most.
    pub ratio: f64,
}

impl Default for HedgeConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl HedgeConfig {
    /// Every default (`hedge = "auto"`).
    ///
    /// ```
    /// # use budget_core::client::HedgeConfig;
    /// assert_eq!(HedgeConfig::DEFAULT.ratio, 0.1);
    /// ```
    pub const DEFAULT: Self = Self {
        delay: HedgeDelay::Auto,
        quantile: 0.95,
        min_samples: 20,
        window: Duration::from_secs(10),
        ratio: 0.1,
    };

    /// No hedging, even for a dependency with replicas (`hedge = "off"`).
    ///
    /// ```
    /// # use budget_core::client::{HedgeConfig, HedgeDelay};
    /// assert_eq!(HedgeConfig::OFF.delay, HedgeDelay::Off);
    /// assert_eq!("off".parse::<HedgeConfig>().unwrap(), HedgeConfig::OFF);
    /// ```
    pub const OFF: Self = Self {
        delay: HedgeDelay::Off,
        ..Self::DEFAULT
    };

    /// Hedging after a fixed `delay`, every other default.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::{HedgeConfig, HedgeDelay};
    /// let c = HedgeConfig::after(Duration::from_millis(40));
    /// assert_eq!(c.delay, HedgeDelay::Fixed(Duration::from_millis(40)));
    /// ```
    pub const fn after(delay: Duration) -> Self {
        Self {
            delay: HedgeDelay::Fixed(delay),
            ..Self::DEFAULT
        }
    }

    /// The same config with `delay`: when the hedge is sent, after the
    /// learned quantile ([`HedgeDelay::Auto`]) or a fixed delay, more than
    /// zero (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::{HedgeConfig, HedgeDelay};
    /// let c = HedgeConfig::default().delay(HedgeDelay::Fixed(Duration::from_millis(40)));
    /// assert_eq!(c, HedgeConfig::after(Duration::from_millis(40)));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.delay = ..."))]
    pub const fn delay(mut self, value: HedgeDelay) -> Self {
        self.delay = value;
        self
    }

    /// The same config with `quantile`: the latency quantile a learned
    /// delay waits, strictly between 0 and 1 (checked by
    /// [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::client::HedgeConfig;
    /// assert_eq!(HedgeConfig::default().quantile(0.9).quantile, 0.9);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.quantile = ..."))]
    pub const fn quantile(mut self, value: f64) -> Self {
        self.quantile = value;
        self
    }

    /// The same config with `min_samples`: the attempts in the window
    /// before a learned delay hedges at all, at least 1 (checked by
    /// [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::client::HedgeConfig;
    /// assert_eq!(HedgeConfig::default().min_samples(50).min_samples, 50);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.min_samples = ...")
    )]
    pub const fn min_samples(mut self, value: u64) -> Self {
        self.min_samples = value;
        self
    }

    /// The same config with `window`: how long a latency sample and a
    /// hedge deposit count, 1 s to 60 s (checked by
    /// [`validate`](Self::validate)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::client::HedgeConfig;
    /// let c = HedgeConfig::default().window(Duration::from_secs(5));
    /// assert_eq!(c.window, Duration::from_secs(5));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.window = ..."))]
    pub const fn window(mut self, value: Duration) -> Self {
        self.window = value;
        self
    }

    /// The same config with `ratio`: the hedges per hedgeable call at
    /// most, more than 0 and at most 1 (checked by
    /// [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::client::HedgeConfig;
    /// assert_eq!(HedgeConfig::default().ratio(0.05).ratio, 0.05);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.ratio = ..."))]
    pub const fn ratio(mut self, value: f64) -> Self {
        self.ratio = value;
        self
    }

    /// Checks every field; the error names it.
    ///
    /// # Errors
    ///
    /// A fixed `delay` of zero, `quantile` outside (0, 1), `min_samples`
    /// zero, `window` outside 1 s to 60 s, `ratio` outside (0, 1].
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::client::HedgeConfig;
    ///
    /// let mut bad = HedgeConfig::default();
    /// bad.window = Duration::ZERO;
    /// assert_eq!(bad.validate().unwrap_err().field(), "window");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.delay == HedgeDelay::Fixed(Duration::ZERO) {
            return Err(ConfigError::new("delay", "must be more than zero"));
        }
        if !(self.quantile > 0.0 && self.quantile < 1.0) {
            return Err(ConfigError::new(
                "quantile",
                format!("must be between 0 and 1 (exclusive), not {}", self.quantile),
            ));
        }
        if self.min_samples == 0 {
            return Err(ConfigError::new("min_samples", "must be at least 1"));
        }
        if !(Duration::from_secs(1)..=Duration::from_secs(60)).contains(&self.window) {
            return Err(ConfigError::new("window", "must be from 1s to 60s"));
        }
        if !(self.ratio > 0.0 && self.ratio <= 1.0) {
            return Err(ConfigError::new(
                "ratio",
                format!("must be more than 0 and at most 1, not {}", self.ratio),
            ));
        }
        Ok(())
    }

    /// Validates it into what a client runs with (`None` when off); with
    /// `other_replica_only`, a hedge goes only to another endpoint than
    /// the first attempt's (the default hedging of a dependency with
    /// replicas).
    pub(crate) fn build(&self, other_replica_only: bool) -> Result<Option<Hedging>, ConfigError> {
        self.validate()?;
        let delay = match self.delay {
            HedgeDelay::Off => return Ok(None),
            HedgeDelay::Fixed(d) => Delay::Fixed(d),
            HedgeDelay::Auto => Delay::Learned(Box::new(LearnedFloor::new(LearnedFloorConfig {
                quantile: self.quantile,
                margin: 1.0,
                min: Duration::from_millis(1),
                max: Duration::from_secs(60),
                cold_start: None,
                min_samples: self.min_samples,
                window: self.window,
            })?)),
        };
        let budget = RetryBudgetConfig {
            ttl: self.window,
            min_per_sec: 0,
            ratio: self.ratio,
        }
        .build()?;
        Ok(Some(Hedging {
            delay,
            budget,
            other_replica_only,
        }))
    }
}

impl std::str::FromStr for HedgeConfig {
    type Err = ConfigError;

    /// A flag's form: `auto` or a duration; the other knobs are the config
    /// file's.
    ///
    /// ```
    /// use budget_core::client::HedgeConfig;
    /// assert_eq!("auto".parse::<HedgeConfig>().unwrap(), HedgeConfig::default());
    /// assert_eq!("later".parse::<HedgeConfig>().unwrap_err().field(), "delay");
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self {
            delay: s.parse()?,
            ..Self::DEFAULT
        })
    }
}

/// The table form, every field optional.
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Table {
    delay: HedgeDelay,
    quantile: f64,
    min_samples: u64,
    #[serde(with = "crate::config::duration")]
    window: Duration,
    ratio: f64,
}

impl Default for Table {
    fn default() -> Self {
        let d = HedgeConfig::DEFAULT;
        Self {
            delay: d.delay,
            quantile: d.quantile,
            min_samples: d.min_samples,
            window: d.window,
            ratio: d.ratio,
        }
    }
}

impl<'de> Deserialize<'de> for HedgeConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct HedgeVisitor;

        impl<'de> Visitor<'de> for HedgeVisitor {
            type Value = HedgeConfig;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "\"auto\", a duration (\"40ms\") or a table \
                     ({ delay = \"auto\", quantile = 0.95, ratio = 0.1 })",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<HedgeConfig, E> {
                v.parse().map_err(E::custom)
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<HedgeConfig, A::Error> {
                let t = Table::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(HedgeConfig {
                    delay: t.delay,
                    quantile: t.quantile,
                    min_samples: t.min_samples,
                    window: t.window,
                    ratio: t.ratio,
                })
            }
        }

        d.deserialize_any(HedgeVisitor)
    }
}

/// A client's hedging: when, and how many.
#[derive(Debug)]
pub(crate) struct Hedging {
    delay: Delay,
    budget: RetryBudget,
    /// A hedge goes only to another endpoint than the first attempt's:
    /// none is sent while the dependency has one.
    pub(crate) other_replica_only: bool,
}

#[derive(Debug)]
enum Delay {
    Fixed(Duration),
    /// Boxed: its histograms are large, a fixed delay is not.
    Learned(Box<LearnedFloor>),
}

/// Why a hedge that was due was not sent; the `reason` label of
/// `budget_hedges_declined_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Declined {
    /// The hedge budget is spent.
    HedgeBudget,
    /// What is left does not cover the floor.
    Floor,
    /// The circuit does not let another call through.
    Circuit,
    /// No concurrency permit is free.
    Permit,
    /// No other replica than the first attempt's can take it (a
    /// dependency hedged by default, for its replicas).
    NoOtherReplica,
    /// A hedge sent at the delay could not have answered first, and the
    /// first attempt answered while the hedge waited for it to outlive
    /// its replica's estimate (docs/hedging-and-stale.md, "A hedge that
    /// can win").
    CannotWin,
}

impl Declined {
    /// The metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Declined::HedgeBudget => "hedge_budget",
            Declined::Floor => "floor",
            Declined::Circuit => "circuit",
            Declined::Permit => "permit",
            Declined::NoOtherReplica => "no_other_replica",
            Declined::CannotWin => "cannot_win",
        }
    }

    /// Every reason, for registering the counters at 0.
    pub(crate) const ALL: [Declined; 6] = [
        Declined::HedgeBudget,
        Declined::Floor,
        Declined::Circuit,
        Declined::Permit,
        Declined::NoOtherReplica,
        Declined::CannotWin,
    ];
}

impl Hedging {
    /// A hedgeable call starts: it pays its share of a hedge.
    pub(crate) fn deposit(&self) {
        self.budget.deposit();
    }

    /// How long after its start an attempt is hedged; `None` while a
    /// learned delay has too few samples.
    pub(crate) fn delay(&self) -> Option<Duration> {
        match &self.delay {
            Delay::Fixed(d) => Some(*d),
            Delay::Learned(learned) => {
                let current = learned.current();
                match current.basis {
                    Some(FloorBasis::ColdStart { .. }) => None,
                    _ => Some(current.floor.get()),
                }
            }
        }
    }

    /// Whether the dependency's own latencies say a hedge sent `after` the
    /// first attempt's start may answer first: whether they reach past
    /// `after` plus their median (their p99 does). A latency spread no
    /// wider than that (a partner whose slowest answers are a few
    /// milliseconds past its p95) has a first attempt still running at
    /// the hedge delay answer long before a hedge could. A fixed delay,
    /// or a learned one with too few samples, says nothing against it:
    /// true.
    pub(crate) fn tail_past(&self, after: Duration) -> bool {
        match &self.delay {
            Delay::Fixed(_) => true,
            Delay::Learned(learned) => learned
                .spread()
                .is_none_or(|spread| spread.p99 > after.saturating_add(spread.p50)),
        }
    }

    /// One attempt's latency (or a lower bound of it), for a learned delay.
    pub(crate) fn observe(&self, latency: Duration) {
        if let Delay::Learned(learned) = &self.delay {
            learned.observe(latency);
        }
    }

    /// Takes one hedge from the hedge budget.
    pub(crate) fn withdraw(&self) -> bool {
        self.budget.withdraw()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn every_bad_field_is_named() {
        let d = HedgeConfig::default();
        for (bad, field) in [
            (
                HedgeConfig {
                    delay: HedgeDelay::Fixed(Duration::ZERO),
                    ..d
                },
                "delay",
            ),
            (HedgeConfig { quantile: 1.0, ..d }, "quantile"),
            (
                HedgeConfig {
                    quantile: f64::NAN,
                    ..d
                },
                "quantile",
            ),
            (
                HedgeConfig {
                    min_samples: 0,
                    ..d
                },
                "min_samples",
            ),
            (
                HedgeConfig {
                    window: ms(999),
                    ..d
                },
                "window",
            ),
            (
                HedgeConfig {
                    window: Duration::from_secs(61),
                    ..d
                },
                "window",
            ),
            (HedgeConfig { ratio: 0.0, ..d }, "ratio"),
            (
                HedgeConfig {
                    ratio: f64::NAN,
                    ..d
                },
                "ratio",
            ),
        ] {
            assert_eq!(bad.validate().unwrap_err().field(), field, "{bad:?}");
            assert_eq!(bad.build(false).unwrap_err().field(), field, "{bad:?}");
        }
    }

    #[test]
    fn a_table_keeps_the_defaults_it_does_not_name_and_refuses_unknown_fields() {
        #[derive(Debug, Deserialize)]
        struct T {
            #[allow(dead_code)]
            hedge: HedgeConfig,
        }
        let t: T = toml::from_str("hedge = { delay = \"25ms\", window = \"5s\" }").unwrap();
        assert_eq!(
            t.hedge,
            HedgeConfig {
                delay: HedgeDelay::Fixed(ms(25)),
                window: Duration::from_secs(5),
                ..HedgeConfig::default()
            }
        );
        let err = toml::from_str::<T>("hedge = { after = \"25ms\" }").unwrap_err();
        assert!(err.to_string().contains("after"), "{err}");
        let err = toml::from_str::<T>("hedge = 3").unwrap_err();
        assert!(err.to_string().contains("auto"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_learned_delay_waits_for_its_samples_then_follows_the_quantile() {
        let hedging = HedgeConfig {
            min_samples: 10,
            ..HedgeConfig::default()
        }
        .build(false)
        .unwrap()
        .unwrap();
        assert_eq!(hedging.delay(), None, "no sample yet: no hedge");
        for i in 0..100 {
            hedging.observe(ms(if i % 20 == 0 { 900 } else { 40 }));
        }
        tokio::time::advance(ms(200)).await;
        // 95 of 100 samples at 40 ms: the p95 is 40 ms, not the 900 ms tail.
        let delay = hedging.delay().unwrap();
        assert!(delay >= ms(39) && delay <= ms(41), "{delay:?}");
    }

    #[test]
    fn off_builds_no_hedging_and_round_trips() {
        assert!(HedgeConfig::OFF.build(true).unwrap().is_none());
        assert!(HedgeConfig::OFF.validate().is_ok());
        let built = HedgeConfig::DEFAULT.build(true).unwrap().unwrap();
        assert!(built.other_replica_only);
        #[derive(Debug, Deserialize)]
        struct T {
            hedge: HedgeConfig,
        }
        let t: T = toml::from_str("hedge = \"off\"").unwrap();
        assert_eq!(t.hedge, HedgeConfig::OFF);
        assert_eq!(
            HedgeDelay::Off.to_string().parse::<HedgeDelay>().unwrap(),
            HedgeDelay::Off
        );
    }

    #[tokio::test(start_paused = true)]
    async fn hedges_are_at_most_ratio_of_the_calls() {
        let hedging = HedgeConfig::after(ms(10)).build(false).unwrap().unwrap();
        assert!(!hedging.withdraw(), "no call yet: no hedge");
        let mut hedges = 0;
        for _ in 0..1000 {
            hedging.deposit();
            if hedging.withdraw() {
                hedges += 1;
            }
        }
        assert_eq!(hedges, 100);
    }
}
