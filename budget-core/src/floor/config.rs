//! How a dependency's floor is configured ([`FloorConfig`]) and what a
//! client runs with ([`DependencyFloor`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::fixed::Floor;
use super::learned::{Effective, LearnedFloor, LearnedFloorConfig};
use super::observer::Observer;
use crate::config::ConfigError;

/// A dependency's floor, as a config file says it:
///
/// - `floor = "250ms"`: a fixed floor ([`Floor`]);
/// - `floor = "auto"`: learned with every default ([`LearnedFloorConfig`]);
/// - `floor = { quantile = 0.99, margin = 1.5, min = "5ms", max = "2s" }`:
///   learned with these settings (absent fields take the defaults).
///
/// Anything else is an error that says which forms exist.
///
/// ```
/// use std::time::Duration;
/// use budget_core::floor::{FloorConfig, LearnedFloorConfig};
///
/// #[derive(Debug, serde::Deserialize)]
/// struct T { floor: FloorConfig }
/// let fixed: T = toml::from_str("floor = \"250ms\"").unwrap();
/// assert_eq!(fixed.floor, FloorConfig::fixed(Duration::from_millis(250)));
/// let auto: T = toml::from_str("floor = \"auto\"").unwrap();
/// assert_eq!(auto.floor, FloorConfig::Learned(LearnedFloorConfig::default()));
/// let table: T = toml::from_str("floor = { quantile = 0.95, max = \"1s\" }").unwrap();
/// assert!(matches!(table.floor, FloorConfig::Learned(c) if c.quantile == 0.95));
/// let err = toml::from_str::<T>("floor = \"soon\"").unwrap_err().to_string();
/// assert!(err.contains("\"auto\""), "{err}");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum FloorConfig {
    /// A fixed floor.
    Fixed(Floor),
    /// A floor learned from the dependency's latency.
    Learned(LearnedFloorConfig),
}

impl Default for FloorConfig {
    /// A fixed floor of zero: every call with time left is made.
    fn default() -> Self {
        FloorConfig::Fixed(Floor::default())
    }
}

impl From<Floor> for FloorConfig {
    fn from(floor: Floor) -> Self {
        FloorConfig::Fixed(floor)
    }
}

impl FloorConfig {
    /// A fixed floor of `d`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::FloorConfig;
    /// assert_eq!(FloorConfig::fixed(Duration::ZERO), FloorConfig::default());
    /// ```
    pub const fn fixed(d: Duration) -> Self {
        FloorConfig::Fixed(Floor::new(d))
    }

    /// A learned floor with every default (`floor = "auto"`).
    ///
    /// ```
    /// # use budget_core::floor::FloorConfig;
    /// assert_eq!(FloorConfig::auto(), FloorConfig::AUTO);
    /// ```
    pub const fn auto() -> Self {
        Self::AUTO
    }

    /// `floor = "auto"`, as a constant.
    ///
    /// ```
    /// # use budget_core::floor::{FloorConfig, LearnedFloorConfig};
    /// assert_eq!(FloorConfig::AUTO, FloorConfig::Learned(LearnedFloorConfig::DEFAULT));
    /// ```
    pub const AUTO: Self = FloorConfig::Learned(LearnedFloorConfig::DEFAULT);

    /// Validates it into what a client runs with.
    ///
    /// # Errors
    ///
    /// A learned floor's [`LearnedFloorConfig::validate`] error.
    ///
    /// ```
    /// # use budget_core::floor::{FloorConfig, LearnedFloorConfig};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let mut learned = LearnedFloorConfig::default();
    /// learned.margin = 0.0;
    /// let bad = FloorConfig::Learned(learned);
    /// assert_eq!(bad.build().unwrap_err().field(), "margin");
    /// # }
    /// ```
    pub fn build(&self) -> Result<DependencyFloor, ConfigError> {
        Ok(match self {
            FloorConfig::Fixed(floor) => DependencyFloor::Fixed(*floor),
            FloorConfig::Learned(c) => DependencyFloor::Learned(Arc::new(LearnedFloor::new(*c)?)),
        })
    }
}

impl std::str::FromStr for FloorConfig {
    type Err = ConfigError;

    /// A flag's form: `auto` or a duration (`250ms`); a learned floor's
    /// other knobs are the config file's.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::floor::FloorConfig;
    /// assert_eq!("auto".parse::<FloorConfig>().unwrap(), FloorConfig::AUTO);
    /// assert_eq!("250ms".parse::<FloorConfig>().unwrap(), FloorConfig::fixed(Duration::from_millis(250)));
    /// assert_eq!("soon".parse::<FloorConfig>().unwrap_err().field(), "floor");
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == AUTO {
            return Ok(FloorConfig::AUTO);
        }
        crate::config::duration::parse(s)
            .map(FloorConfig::fixed)
            .map_err(|e| {
                ConfigError::new(
                    "floor",
                    format!("expected `auto` or a duration (`250ms`): {e}"),
                )
            })
    }
}

impl Serialize for FloorConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FloorConfig::Fixed(floor) => floor.serialize(s),
            FloorConfig::Learned(c) if *c == LearnedFloorConfig::default() => s.serialize_str(AUTO),
            FloorConfig::Learned(c) => c.serialize(s),
        }
    }
}

const AUTO: &str = "auto";

impl<'de> Deserialize<'de> for FloorConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct FloorVisitor;

        impl<'de> Visitor<'de> for FloorVisitor {
            type Value = FloorConfig;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a duration (\"250ms\"), \"auto\" or a table \
                     ({ quantile = 0.99, margin = 1.5, min = \"5ms\", max = \"2s\" })",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<FloorConfig, E> {
                if v == AUTO {
                    return Ok(FloorConfig::auto());
                }
                crate::config::duration::parse(v)
                    .map(FloorConfig::fixed)
                    .map_err(|e| E::invalid_value(de::Unexpected::Str(v), &FloorHint(e)))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<FloorConfig, A::Error> {
                LearnedFloorConfig::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(FloorConfig::Learned)
            }
        }

        d.deserialize_any(FloorVisitor)
    }
}

/// The expectation named in a bad floor string's error.
struct FloorHint(humantime::DurationError);

impl de::Expected for FloorHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a duration (\"250ms\": {}), \"auto\" or a table of a learned floor",
            self.0
        )
    }
}

/// The floor a client runs with: fixed, or learned and shared by every
/// clone of the client.
///
/// ```
/// use std::time::Duration;
/// use budget_core::floor::FloorConfig;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let floor = FloorConfig::fixed(Duration::from_millis(10)).build().unwrap();
/// assert_eq!(floor.current().floor.get(), Duration::from_millis(10));
/// floor.observe(Duration::from_millis(500)); // a fixed floor learns nothing
/// assert_eq!(floor.current().floor.get(), Duration::from_millis(10));
/// # }
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum DependencyFloor {
    /// A fixed floor.
    Fixed(Floor),
    /// A learned floor.
    Learned(Arc<LearnedFloor>),
}

impl DependencyFloor {
    /// The floor in force now, and where it came from.
    ///
    /// ```
    /// # use budget_core::floor::FloorConfig;
    /// assert!(FloorConfig::default().build().unwrap().current().basis.is_none());
    /// ```
    pub fn current(&self) -> Effective {
        match self {
            DependencyFloor::Fixed(floor) => Effective::fixed(*floor),
            DependencyFloor::Learned(learned) => learned.current(),
        }
    }

    /// Records the latency of a successful attempt (a learned floor learns
    /// from it; a fixed one ignores it).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::FloorConfig;
    /// FloorConfig::default().build().unwrap().observe(Duration::from_millis(3));
    /// ```
    pub fn observe(&self, latency: Duration) {
        if let DependencyFloor::Learned(learned) = self {
            learned.observe(latency);
        }
    }

    /// Reports the floor of `dependency` to `observer`: a fixed floor
    /// once, now; a learned one now and each time it is recomputed (see
    /// [`LearnedFloor::report_to`]).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// use budget_core::floor::{FloorConfig, Observer};
    ///
    /// struct Print;
    /// impl Observer for Print {
    ///     fn floor_changed(&self, dependency: &Arc<str>, floor: Duration) {
    ///         println!("{dependency}: {floor:?}");
    ///     }
    /// }
    /// let floor = FloorConfig::fixed(Duration::from_millis(20)).build().unwrap();
    /// floor.report_to(Arc::from("pricing"), Arc::new(Print)); // prints 20ms
    /// ```
    pub fn report_to(&self, dependency: Arc<str>, observer: Arc<dyn Observer>) {
        match self {
            DependencyFloor::Fixed(floor) => observer.floor_changed(&dependency, floor.get()),
            DependencyFloor::Learned(learned) => learned.report_to(dependency, observer),
        }
    }

    /// Whether it is learned.
    ///
    /// ```
    /// # use budget_core::floor::FloorConfig;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// assert!(FloorConfig::auto().build().unwrap().is_learned());
    /// # }
    /// ```
    pub fn is_learned(&self) -> bool {
        matches!(self, DependencyFloor::Learned(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize, PartialEq)]
    struct T {
        floor: FloorConfig,
    }

    #[test]
    fn every_form_round_trips_through_toml() {
        for text in [
            "floor = \"250ms\"\n",
            "floor = \"auto\"\n",
            "[floor]\nquantile = 0.95\nmargin = 2.0\nmin = \"10ms\"\nmax = \"1s\"\nmin_samples = 5\nwindow = \"30s\"\n",
        ] {
            let t: T = toml::from_str(text).unwrap();
            let back = toml::to_string(&t).unwrap();
            assert_eq!(toml::from_str::<T>(&back).unwrap(), t, "{text} -> {back}");
        }
    }

    #[test]
    fn bad_forms_are_errors_that_name_the_forms() {
        for text in [
            "floor = \"soon\"",
            "floor = 5",
            "floor = { p = 0.9 }",
            "floor = true",
        ] {
            let err = toml::from_str::<T>(text).unwrap_err().to_string();
            assert!(
                err.contains("auto") || err.contains("unknown field"),
                "{text}: {err}"
            );
        }
    }
}
