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
                left: remaining,
                reserve: Duration::ZERO,
                floor: self.0,
                basis: None,
            })
        } else {
            Ok(())
        }
    }

    /// [`check`](Self::check) of what is left once `reserve` (the per-hop
    /// reserve a service keeps for its own reply) is taken off `left`; the
    /// refusal names the reserve, so that a call refused because of it
    /// says so (`no budget left: 5ms left, all of it the 5ms per-hop
    /// reserve`, `3ms left after the 5ms reserve < floor 20ms`).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::Floor;
    /// let ms = Duration::from_millis;
    /// let e = Floor::default().check_after_reserve(ms(5), ms(5)).unwrap_err();
    /// assert_eq!(e.to_string(), "no budget left: 5ms left, all of it the 5ms per-hop reserve");
    /// assert_eq!((e.remaining(), e.reserve(), e.before_reserve()), (ms(0), ms(5), ms(5)));
    /// let e = Floor::new(ms(20)).check_after_reserve(ms(8), ms(5)).unwrap_err();
    /// assert_eq!(e.to_string(), "3ms left after the 5ms reserve < floor 20ms");
    /// assert!(Floor::new(ms(20)).check_after_reserve(ms(25), ms(5)).is_ok());
    /// ```
    pub fn check_after_reserve(&self, left: Duration, reserve: Duration) -> Result<(), BelowFloor> {
        self.check(left.saturating_sub(reserve))
            .map_err(|below| BelowFloor {
                left,
                reserve,
                ..below
            })
    }
}

impl From<Duration> for Floor {
    fn from(d: Duration) -> Self {
        Self(d)
    }
}

/// A call was refused because too little budget was left for it.
///
/// Its `Display` is the one text of the refusal, with the numbers that
/// decided it: the ledger's skip note (`skipped: ...`), a refused
/// [`CallError`][call-error]'s message and its problem
/// `detail`, and the server layer's `504` for a request below the ingress
/// floor all say it (docs/contract.md §3, §4):
///
/// | left | reserve | floor | text |
/// | --- | --- | --- | --- |
/// | 850ms | none | 1000ms | `850ms < floor 1000ms` |
/// | 0ms | none | none | `no budget left` |
/// | 8ms | 5ms | 20ms | `3ms left after the 5ms reserve < floor 20ms` |
/// | 5ms | 5ms | none | `no budget left: 5ms left, all of it the 5ms per-hop reserve` |
///
/// A learned floor adds where it came from
/// (`420ms < floor 610ms (p99 407ms x 1.5)`, see
/// [`FloorBasis`](super::FloorBasis)).
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
/// let reserved = Floor::default()
///     .check_after_reserve(Duration::from_millis(4), Duration::from_millis(5))
///     .unwrap_err();
/// assert_eq!(reserved.to_string(), "no budget left: 4ms left, all of it the 5ms per-hop reserve");
/// ```
///
#[cfg_attr(
    any(feature = "client", feature = "grpc"),
    doc = "[call-error]: crate::client::CallError"
)]
#[cfg_attr(
    not(any(feature = "client", feature = "grpc")),
    doc = "[call-error]: crate::docs::client"
)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BelowFloor {
    /// What was left before the reserve was taken off; less the reserve,
    /// what the floor was compared with.
    left: Duration,
    reserve: Duration,
    floor: Duration,
    basis: Option<FloorBasis>,
}

impl BelowFloor {
    /// The ledger's note of a call not made for it (docs/contract.md
    /// §4): `skipped: 30ms < floor 50ms`, `skipped: no budget left`.
    #[cfg(any(outbound, test))]
    pub(crate) fn skip_note(&self) -> String {
        format!("skipped: {self}")
    }

    /// The `detail` of the server layer's `504` for a request whose budget
    /// was below the ingress floor on arrival: `30ms < floor 50ms: the
    /// request was not started`; for a budget of zero and no floor,
    /// `no budget left: the request came with 0ms and was not started`.
    #[cfg(any(feature = "server", test))]
    pub(crate) fn not_started(&self) -> String {
        if self.is_nothing_left() && self.reserve.is_zero() {
            return format!(
                "{self}: the request came with {}ms and was not started",
                self.left.as_millis()
            );
        }
        format!("{self}: the request was not started")
    }

    /// Nothing was left (net of the reserve) and there is no floor.
    fn is_nothing_left(&self) -> bool {
        self.remaining().is_zero() && self.floor.is_zero()
    }
}

/// The one place the refusal's text is made (the table above).
impl std::fmt::Display for BelowFloor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (left, floor) = (self.remaining().as_millis(), self.floor.as_millis());
        let reserve = self.reserve.as_millis();
        if self.is_nothing_left() {
            // Not `0ms < floor 0ms`. With a floor, the note keeps saying
            // it and where it came from (docs/contract.md §2 rule 10).
            f.write_str("no budget left")?;
            if !self.reserve.is_zero() {
                let before = self.left.as_millis();
                write!(
                    f,
                    ": {before}ms left, all of it the {reserve}ms per-hop reserve"
                )?;
            }
            return Ok(());
        }
        if self.reserve.is_zero() {
            write!(f, "{left}ms < floor {floor}ms")?;
        } else {
            write!(
                f,
                "{left}ms left after the {reserve}ms reserve < floor {floor}ms"
            )?;
        }
        match &self.basis {
            Some(basis) => write!(f, " ({basis})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for BelowFloor {}

impl BelowFloor {
    /// The same refusal of what was left after `reserve` was taken off
    /// `left`: its text names the reserve.
    #[cfg(outbound)]
    pub(crate) fn after_reserve(self, left: Duration, reserve: Duration) -> Self {
        Self {
            left,
            reserve,
            ..self
        }
    }

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

    /// The budget that was left, net of the [`reserve`](Self::reserve):
    /// what the floor was compared with.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::Floor;
    /// let e = Floor::new(Duration::from_millis(10)).check(Duration::from_millis(3)).unwrap_err();
    /// assert_eq!(e.remaining(), Duration::from_millis(3));
    /// ```
    pub fn remaining(&self) -> Duration {
        self.left.saturating_sub(self.reserve)
    }

    /// The per-hop reserve taken off what was left before the floor was
    /// compared (zero for [`Floor::check`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::Floor;
    /// let ms = Duration::from_millis;
    /// assert_eq!(Floor::new(ms(10)).check(ms(3)).unwrap_err().reserve(), ms(0));
    /// assert_eq!(Floor::new(ms(10)).check_after_reserve(ms(8), ms(5)).unwrap_err().reserve(), ms(5));
    /// ```
    pub fn reserve(&self) -> Duration {
        self.reserve
    }

    /// What was left before the [`reserve`](Self::reserve) was taken off
    /// ([`remaining`](Self::remaining) is what was left after it).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::Floor;
    /// let ms = Duration::from_millis;
    /// let e = Floor::new(ms(10)).check_after_reserve(ms(8), ms(5)).unwrap_err();
    /// assert_eq!((e.before_reserve(), e.remaining()), (ms(8), ms(3)));
    /// ```
    pub fn before_reserve(&self) -> Duration {
        self.left
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Every refusal names its numbers, the reserve when there was one.
    #[test]
    fn every_text_names_what_was_left_the_reserve_and_the_floor() {
        let text = |floor: u64, left: u64, reserve: u64| {
            Floor::new(ms(floor))
                .check_after_reserve(ms(left), ms(reserve))
                .unwrap_err()
                .to_string()
        };
        // Without a reserve: as docs/contract.md §4 quotes them.
        assert_eq!(text(1000, 850, 0), "850ms < floor 1000ms");
        assert_eq!(text(0, 0, 0), "no budget left");
        assert_eq!(text(50, 0, 0), "0ms < floor 50ms");
        // With one.
        assert_eq!(
            text(0, 5, 5),
            "no budget left: 5ms left, all of it the 5ms per-hop reserve"
        );
        assert_eq!(
            text(0, 2, 5),
            "no budget left: 2ms left, all of it the 5ms per-hop reserve"
        );
        assert_eq!(
            text(20, 8, 5),
            "3ms left after the 5ms reserve < floor 20ms"
        );
        assert_eq!(
            text(20, 5, 5),
            "0ms left after the 5ms reserve < floor 20ms"
        );
        assert!(
            Floor::new(ms(20))
                .check_after_reserve(ms(25), ms(5))
                .is_ok()
        );
    }

    #[test]
    fn the_ledger_note_and_the_ingress_detail_are_the_same_text() {
        let below = Floor::new(ms(50)).check(ms(30)).unwrap_err();
        assert_eq!(below.skip_note(), "skipped: 30ms < floor 50ms");
        assert_eq!(
            below.not_started(),
            "30ms < floor 50ms: the request was not started"
        );
        let zero = Floor::default().check(ms(0)).unwrap_err();
        assert_eq!(zero.skip_note(), "skipped: no budget left");
        assert_eq!(
            zero.not_started(),
            "no budget left: the request came with 0ms and was not started"
        );
        let reserved = Floor::default()
            .check_after_reserve(ms(5), ms(5))
            .unwrap_err();
        assert_eq!(
            reserved.skip_note(),
            "skipped: no budget left: 5ms left, all of it the 5ms per-hop reserve"
        );
    }
}
