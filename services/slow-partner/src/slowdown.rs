//! A slowdown of the whole partner switched at run time: a factor that
//! multiplies every work request's waits, for "one replica became ten times
//! slower" in a load test.
//!
//! The factor (a whole number, [`MIN_SLOWDOWN`] to [`MAX_SLOWDOWN`], `1` by
//! default: no slowdown) multiplies what a work request waits as its query
//! string planned it: `delay` (or a `script` entry's delay, or a `tail`
//! draw's), its `jitter`, and the pauses of a `drip`. It is read once, when
//! the request's work is planned, so requests already waiting finish as they
//! started; a worker is held for the longer wait, so a limited path's
//! capacity shrinks by the same factor. A path override (which answers at
//! once) and a hanging path are not slowed.
//!
//! Set through [`PartnerHandle::set_slowdown`](crate::PartnerHandle::set_slowdown)
//! or `PUT /admin/slowdown` with `{"factor": 10}` (the HTTP side is in the
//! app module).
//!
//! ```
//! use std::time::Duration;
//! use slow_partner::Slowdown;
//!
//! let ten = Slowdown::new(10).unwrap();
//! assert_eq!(ten.apply(Duration::from_millis(45)), Duration::from_millis(450));
//! assert_eq!(Slowdown::new(0).unwrap_err().to_string(), "factor 0 is outside 1..=100");
//! ```

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The smallest factor: no slowdown.
pub const MIN_SLOWDOWN: u32 = 1;

/// The largest factor: a partner 100 times slower.
pub const MAX_SLOWDOWN: u32 = 100;

/// A checked slowdown factor, [`MIN_SLOWDOWN`] to [`MAX_SLOWDOWN`].
/// Serialises as the bare number.
///
/// ```
/// use slow_partner::Slowdown;
///
/// assert_eq!(Slowdown::default().factor(), 1);
/// assert_eq!(serde_json::to_string(&Slowdown::new(10).unwrap()).unwrap(), "10");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u32")]
pub struct Slowdown(u32);

impl Default for Slowdown {
    fn default() -> Self {
        Self(MIN_SLOWDOWN)
    }
}

impl Slowdown {
    /// The factor `factor`.
    ///
    /// # Errors
    ///
    /// [`SlowdownError::Factor`] outside [`MIN_SLOWDOWN`]`..=`[`MAX_SLOWDOWN`].
    pub fn new(factor: u64) -> Result<Self, SlowdownError> {
        u32::try_from(factor)
            .ok()
            .filter(|f| (MIN_SLOWDOWN..=MAX_SLOWDOWN).contains(f))
            .map(Self)
            .ok_or(SlowdownError::Factor(factor))
    }

    /// The factor, `1` to `100`.
    pub fn factor(self) -> u32 {
        self.0
    }

    /// `wait` times the factor (saturating; the longest knob is an hour).
    pub fn apply(self, wait: Duration) -> Duration {
        wait.saturating_mul(self.0)
    }
}

impl TryFrom<u64> for Slowdown {
    type Error = SlowdownError;

    fn try_from(factor: u64) -> Result<Self, Self::Error> {
        Self::new(factor)
    }
}

impl From<Slowdown> for u32 {
    fn from(s: Slowdown) -> Self {
        s.0
    }
}

/// Why a slowdown cannot be set.
///
/// ```
/// let err = slow_partner::SlowdownError::Factor(101);
/// assert_eq!(err.parameter(), "factor");
/// assert_eq!(err.to_string(), "factor 101 is outside 1..=100");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SlowdownError {
    /// The factor is outside [`MIN_SLOWDOWN`]`..=`[`MAX_SLOWDOWN`].
    #[error("factor {0} is outside 1..=100")]
    Factor(u64),
    /// The factor given is not a whole number (the JSON value, as given).
    #[error("factor `{0}` is not a whole number from 1 to 100")]
    NotANumber(String),
    /// The admin request's body is not what the endpoint takes.
    #[error("body is not {{\"factor\": 10}}: {0}")]
    Body(String),
}

impl SlowdownError {
    /// The input that is wrong: `factor` or `body`.
    ///
    /// ```
    /// # use slow_partner::SlowdownError;
    /// assert_eq!(SlowdownError::Body("not json".into()).parameter(), "body");
    /// ```
    pub fn parameter(&self) -> &'static str {
        match self {
            Self::Factor(_) | Self::NotANumber(_) => "factor",
            Self::Body(_) => "body",
        }
    }
}

/// The factor in force, shared by every connection and the handle.
#[derive(Debug)]
pub(crate) struct Slowdowns {
    factor: AtomicU32,
}

impl Default for Slowdowns {
    fn default() -> Self {
        Self {
            factor: AtomicU32::new(MIN_SLOWDOWN),
        }
    }
}

impl Slowdowns {
    /// The factor now.
    pub(crate) fn get(&self) -> Slowdown {
        // Only checked values are stored.
        Slowdown(self.factor.load(Ordering::Relaxed))
    }

    /// Sets `to`; returns the previous factor.
    pub(crate) fn set(&self, to: Slowdown) -> Slowdown {
        Slowdown(self.factor.swap(to.0, Ordering::Relaxed))
    }
}

/// The factor a `PUT /admin/slowdown` body asks for: `{"factor": 10}`.
pub(crate) fn requested_slowdown(body: &[u8]) -> Result<Slowdown, SlowdownError> {
    let bad = |why: &str| SlowdownError::Body(why.to_owned());
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| SlowdownError::Body(e.to_string()))?;
    let object = value.as_object().ok_or_else(|| bad("not a json object"))?;
    if let Some(key) = object.keys().find(|k| k.as_str() != "factor") {
        return Err(SlowdownError::Body(format!("unknown field `{key}`")));
    }
    match object.get("factor") {
        None => Err(bad("no `factor` field")),
        Some(factor) => match factor.as_u64() {
            Some(f) => Slowdown::new(f),
            None => Err(SlowdownError::NotANumber(crate::knobs::shorten(
                &factor.to_string(),
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_factor_is_a_whole_number_from_1_to_100() {
        for bad in [0, 101, 1_000, u64::from(u32::MAX) + 1] {
            assert_eq!(Slowdown::new(bad), Err(SlowdownError::Factor(bad)));
        }
        assert_eq!(Slowdown::new(1).unwrap().factor(), 1);
        assert_eq!(Slowdown::new(100).unwrap().factor(), 100);
    }

    #[test]
    fn the_factor_multiplies_a_wait_and_saturates() {
        let ten = Slowdown::new(10).unwrap();
        assert_eq!(
            ten.apply(Duration::from_millis(25)),
            Duration::from_millis(250)
        );
        assert_eq!(ten.apply(Duration::ZERO), Duration::ZERO);
        assert_eq!(
            Slowdown::default().apply(Duration::from_secs(3)),
            Duration::from_secs(3)
        );
        assert_eq!(ten.apply(Duration::MAX), Duration::MAX);
    }

    #[test]
    fn the_shared_factor_starts_at_1_and_a_set_returns_the_previous() {
        let s = Slowdowns::default();
        assert_eq!(s.get().factor(), 1);
        assert_eq!(s.set(Slowdown::new(10).unwrap()).factor(), 1);
        assert_eq!(s.get().factor(), 10);
        assert_eq!(s.set(Slowdown::default()).factor(), 10);
    }

    #[test]
    fn a_slowdown_body_names_what_is_wrong() {
        assert_eq!(
            requested_slowdown(br#"{"factor":10}"#).unwrap().factor(),
            10
        );
        assert_eq!(
            requested_slowdown(b" {\"factor\": 1} ").unwrap().factor(),
            1
        );
        for (body, parameter) in [
            (&b"10"[..], "body"),
            (b"{", "body"),
            (b"{}", "body"),
            (br#"{"factor":10,"delay":1}"#, "body"),
            (br#"{"factor":"10"}"#, "factor"),
            (br#"{"factor":null}"#, "factor"),
            (br#"{"factor":0}"#, "factor"),
            (br#"{"factor":101}"#, "factor"),
            (br#"{"factor":-1}"#, "factor"),
            (br#"{"factor":2.5}"#, "factor"),
        ] {
            let err = requested_slowdown(body).unwrap_err();
            assert_eq!(
                err.parameter(),
                parameter,
                "{}: {err}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
