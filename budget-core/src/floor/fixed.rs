//! A fixed floor, and the error of a call below a floor.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::floor::Floor;
//!
//! let floor = Floor::new(Duration::from_millis(1000));
//! assert!(floor.check(Duration::from_millis(1200)).is_ok());
//!
//! let err = floor.check(Duration::from_millis(850)).unwrap_err();
//! assert_eq!(err.remaining(), Duration::from_millis(850));
//! assert_eq!(err.floor(), Duration::from_millis(1000));
//! assert_eq!(err.to_string(), "850ms < floor 1000ms");
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::learned::FloorBasis;

/// The least remaining time with which a call is still made.
///
/// `Floor::default()` is zero: every call with any time left is made.
/// Deserialises from a humantime string (`"1s"`).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::floor::Floor;
///
/// let floor: Floor = serde_json::from_str("\"250ms\"").unwrap();
/// assert_eq!(floor.get(), Duration::from_millis(250));
/// ```
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Floor(#[serde(with = "crate::config::duration")] Duration);

impl Floor {
    /// A floor of `min`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::Floor;
    /// assert_eq!(Floor::new(Duration::from_secs(1)).get(), Duration::from_secs(1));
    /// ```
    pub const fn new(min: Duration) -> Self {
        Self(min)
    }

    /// The floor's duration.
    ///
    /// ```
    /// # use budget_core::floor::Floor;
    /// assert!(Floor::default().get().is_zero());
    /// ```
    pub const fn get(&self) -> Duration {
        self.0
    }

    /// `Ok(())` when `remaining` reaches the floor; [`BelowFloor`] when it
    /// does not. A zero remaining budget is always below the floor, even a
    /// zero floor: nothing can be done in no time.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::Floor;
    /// assert!(Floor::default().check(Duration::ZERO).is_err());
    /// assert!(Floor::new(Duration::from_millis(5)).check(Duration::from_millis(5)).is_ok());
    /// ```
    pub fn check(&self, remaining: Duration) -> Result<(), BelowFloor> {
        if remaining.is_zero() || remaining < self.0 {
            Err(BelowFloor {
                remaining,
                floor: self.0,
                basis: None,
            })
        } else {
            Ok(())
        }
    }
}

impl From<Duration> for Floor {
    fn from(d: Duration) -> Self {
        Self(d)
    }
}

/// A call was refused because too little budget was left for it.
///
/// Its `Display` is the reason the ledger records for the skip:
/// `850ms < floor 1000ms`, followed by where a learned floor came from
/// (`420ms < floor 610ms (p99 407ms x 1.5)`, see
/// [`FloorBasis`](super::FloorBasis)); `no budget left` when nothing was
/// and there is no floor.
///
/// # Example
///
/// ```
/// # use std::time::Duration;
/// # use budget_core::floor::Floor;
/// let err = Floor::new(Duration::from_millis(10)).check(Duration::from_millis(3)).unwrap_err();
/// assert_eq!(err.to_string(), "3ms < floor 10ms");
/// let spent = Floor::default().check(Duration::ZERO).unwrap_err();
/// assert_eq!(spent.to_string(), "no budget left");
/// let below = Floor::new(Duration::from_millis(10)).check(Duration::ZERO).unwrap_err();
/// assert_eq!(below.to_string(), "0ms < floor 10ms");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BelowFloor {
    remaining: Duration,
    floor: Duration,
    basis: Option<FloorBasis>,
}

impl BelowFloor {
    /// The ledger's note of a call not made for it (docs/contract.md
    /// §4): `skipped: 30ms < floor 50ms`, `skipped: no budget left`.
    #[cfg_attr(not(outbound), allow(dead_code))]
    pub(crate) fn skip_note(&self) -> String {
        format!("skipped: {self}")
    }
}

impl std::fmt::Display for BelowFloor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.remaining.is_zero() && self.floor.is_zero() {
            // Not `0ms < floor 0ms`. With a floor, the note keeps saying
            // it and where it came from (docs/contract.md §2 rule 10).
            return f.write_str("no budget left");
        }
        write!(
            f,
            "{}ms < floor {}ms",
            self.remaining.as_millis(),
            self.floor.as_millis()
        )?;
        match &self.basis {
            Some(basis) => write!(f, " ({basis})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for BelowFloor {}

impl BelowFloor {
    /// The same refusal, saying where its floor came from.
    pub(crate) fn with_basis(mut self, basis: Option<FloorBasis>) -> Self {
        self.basis = basis;
        self
    }

    /// Where a learned floor came from; `None` for a fixed floor.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::Floor;
    /// let e = Floor::new(Duration::from_millis(10)).check(Duration::from_millis(3)).unwrap_err();
    /// assert!(e.basis().is_none());
    /// ```
    pub fn basis(&self) -> Option<&FloorBasis> {
        self.basis.as_ref()
    }

    /// The budget that was left.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::Floor;
    /// let e = Floor::new(Duration::from_millis(10)).check(Duration::from_millis(3)).unwrap_err();
    /// assert_eq!(e.remaining(), Duration::from_millis(3));
    /// ```
    pub fn remaining(&self) -> Duration {
        self.remaining
    }

    /// The floor it fell short of.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::Floor;
    /// let e = Floor::new(Duration::from_millis(10)).check(Duration::from_millis(3)).unwrap_err();
    /// assert_eq!(e.floor(), Duration::from_millis(10));
    /// ```
    pub fn floor(&self) -> Duration {
        self.floor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_floor_the_call_is_made_below_it_is_not() {
        let f = Floor::new(Duration::from_millis(100));
        assert!(f.check(Duration::from_millis(100)).is_ok());
        assert!(f.check(Duration::from_millis(99)).is_err());
        assert!(f.check(Duration::MAX).is_ok());
    }

    #[test]
    fn nothing_is_made_with_no_time_left() {
        assert!(Floor::default().check(Duration::ZERO).is_err());
    }
}
