//! The whole-listener fault modes ([`FaultMode`]), and the `--budget-mode` switch
//! the partner accepts and ignores ([`BudgetMode`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What the main port does with connections, before any HTTP is spoken.
///
/// Each mode produces the failure a client sees from a partner that is down
/// in a particular way. Serialises (TOML, JSON) as its lower-case name.
///
/// | mode | on the wire | what the client sees |
/// | --- | --- | --- |
/// | [`Normal`](FaultMode::Normal) | accepts and serves HTTP | answers shaped by the query string |
/// | [`Refuse`](FaultMode::Refuse) | the port is held (bound), nothing listens on it | connection refused, at once |
/// | [`Blackhole`](FaultMode::Blackhole) | listens, never accepts, accept queue full | a connect timeout |
/// | [`Reset`](FaultMode::Reset) | accepts, then closes with `SO_LINGER` 0 | a connection reset, at once |
/// | [`Hang`](FaultMode::Hang) | accepts and reads, never answers | a read (request) timeout |
///
/// # Example
///
/// ```
/// use slow_partner::FaultMode;
///
/// let mode: FaultMode = "blackhole".parse().unwrap();
/// assert_eq!(mode, FaultMode::Blackhole);
/// assert_eq!(mode.to_string(), "blackhole");
/// assert_eq!(
///     "sleep".parse::<FaultMode>().unwrap_err().to_string(),
///     "unknown mode `sleep`: expected one of normal, refuse, blackhole, reset, hang",
/// );
/// ```
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum FaultMode {
    /// Accept connections and serve HTTP.
    #[default]
    Normal,
    /// Nothing listens on the port: connections are refused.
    Refuse,
    /// The port listens but never accepts and its accept queue is full, so
    /// new connections time out in the handshake.
    Blackhole,
    /// Accept each connection, then reset it (`SO_LINGER` 0 and close).
    Reset,
    /// Accept each connection and read from it, but never answer; the
    /// connection is held until the mode changes or the partner stops.
    Hang,
}

impl FaultMode {
    /// Every mode, in the order the docs list them.
    ///
    /// ```
    /// assert_eq!(slow_partner::FaultMode::ALL.len(), 5);
    /// ```
    pub const ALL: [FaultMode; 5] = [
        FaultMode::Normal,
        FaultMode::Refuse,
        FaultMode::Blackhole,
        FaultMode::Reset,
        FaultMode::Hang,
    ];

    /// The mode's name on the wire, in flags and in config files.
    ///
    /// ```
    /// assert_eq!(slow_partner::FaultMode::Hang.as_str(), "hang");
    /// ```
    pub const fn as_str(&self) -> &'static str {
        match self {
            FaultMode::Normal => "normal",
            FaultMode::Refuse => "refuse",
            FaultMode::Blackhole => "blackhole",
            FaultMode::Reset => "reset",
            FaultMode::Hang => "hang",
        }
    }
}

impl fmt::Display for FaultMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FaultMode {
    type Err = ParseModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FaultMode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == s)
            .ok_or_else(|| ParseModeError {
                given: crate::knobs::shorten(s),
            })
    }
}

/// A mode name that is not one of [`FaultMode::ALL`].
///
/// ```
/// let err = "HANG ".parse::<slow_partner::FaultMode>().unwrap_err();
/// assert_eq!(err.given(), "HANG ");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode `{given}`: expected one of normal, refuse, blackhole, reset, hang")]
pub struct ParseModeError {
    given: String,
}

impl ParseModeError {
    /// The name that was given (cut to a readable length).
    ///
    /// ```
    /// assert_eq!("x".parse::<slow_partner::FaultMode>().unwrap_err().given(), "x");
    /// ```
    pub fn given(&self) -> &str {
        &self.given
    }
}

/// The `--budget-mode on|off` switch every binary of the project takes.
///
/// The slow partner accepts it so that one docker-compose file can pass the
/// same variables to every service, and ignores it: the partner always
/// *reads* the budget (to echo it and count late work) and *never* enforces
/// it, whichever way this is set. It plays a partner that does not care.
///
/// ```
/// use slow_partner::BudgetMode;
/// let mode: BudgetMode = serde_json::from_str("\"off\"").unwrap();
/// assert_eq!(mode, BudgetMode::Off);
/// ```
pub use service_kit::BudgetMode;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_round_trips_through_its_name() {
        for mode in FaultMode::ALL {
            assert_eq!(mode.as_str().parse::<FaultMode>(), Ok(mode));
            let json = serde_json::to_string(&mode).unwrap();
            assert_eq!(json, format!("\"{mode}\""));
            assert_eq!(serde_json::from_str::<FaultMode>(&json).unwrap(), mode);
        }
    }

    #[test]
    fn mode_names_are_exact_not_case_folded() {
        assert!("Normal".parse::<FaultMode>().is_err());
        assert!(" hang".parse::<FaultMode>().is_err());
        assert!("".parse::<FaultMode>().is_err());
    }
}
