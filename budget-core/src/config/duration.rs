//! Durations as text (`"250ms"`, `"2s"`, `"1h 30m"`): humantime's grammar,
//! read without humantime's one panic.
//!
//! `humantime::parse_duration` 2.x panics (`overflow in Duration::new`)
//! instead of returning an error when the seconds it adds up reach
//! `u64::MAX` while the nanoseconds add up to exactly one second, e.g.
//! `"18446744073709551615s 500ms 500ms"`: its carry of whole seconds out
//! of the nanoseconds skips exactly one second (reported upstream, not
//! fixed in 2.4).
//! The slow partner reads durations from the query of every request, and
//! configs and flags read them from files and the command line: a panic is
//! never the answer to bad input. [`parse`] first bounds what the text could
//! add up to, digit run by digit run at the largest unit humantime knows (a
//! year); text that could reach `u64::MAX` seconds is refused as
//! [`DurationError::NumberOverflow`] without being handed to humantime.
//! Anything below about 292 billion years parses exactly as humantime parses
//! it.
//!
//! The module is also a serde `with` module, a drop-in for
//! `humantime_serde` on `Duration` and `Option<Duration>` fields, reading
//! through [`parse`].
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::config::duration;
//!
//! assert_eq!(duration::parse("1s 500ms"), Ok(Duration::from_millis(1500)));
//! // humantime itself panics on this one.
//! assert_eq!(
//!     duration::parse("18446744073709551615s 500ms 500ms"),
//!     Err(duration::DurationError::NumberOverflow)
//! );
//!
//! #[derive(serde::Deserialize)]
//! struct Settings {
//!     #[serde(with = "budget_core::config::duration")]
//!     timeout: Duration,
//!     #[serde(default, with = "budget_core::config::duration")]
//!     grace: Option<Duration>,
//! }
//! let s: Settings = serde_json::from_str(r#"{ "timeout": "250ms" }"#).unwrap();
//! assert_eq!(s.timeout, Duration::from_millis(250));
//! assert_eq!(s.grace, None);
//! ```

use std::fmt;
use std::time::Duration;

pub use humantime::DurationError;
use serde::{Deserialize, Deserializer, Serializer, de};

/// Seconds in humantime's largest unit, a year (365.25 days).
const LARGEST_UNIT_SECS: u64 = 31_557_600;

/// Parses humantime text (`"250ms"`, `"2s"`, `"1h 30m"`) into a
/// [`Duration`], refusing text that could overflow instead of panicking.
///
/// # Errors
///
/// humantime's own [`DurationError`] for text it cannot read, and
/// [`DurationError::NumberOverflow`] for text whose numbers could add up to
/// `u64::MAX` seconds.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::config::duration::{self, DurationError};
///
/// assert_eq!(duration::parse("2m"), Ok(Duration::from_secs(120)));
/// assert!(matches!(duration::parse("soon"), Err(DurationError::NumberExpected(0))));
/// ```
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    if could_reach_u64_max_secs(text) {
        return Err(DurationError::NumberOverflow);
    }
    humantime::parse_duration(text)
}

/// Whether the integer parts in `text`, each taken at the largest unit and
/// rounded up by one for a fraction and a carry, could add up to `u64::MAX`
/// seconds.
///
/// Every digit run counts, a fraction's digits as one unit. humantime skips
/// whitespace inside a number (`"1 000s"` is a thousand seconds), so
/// whitespace does not end a run here either. The result is an upper bound
/// on the seconds humantime adds up: `false` means they stay below
/// `u64::MAX` and its carry cannot overflow.
fn could_reach_u64_max_secs(text: &str) -> bool {
    let mut bound: u64 = 0;
    let mut run: Option<u64> = None;
    let mut after_point = false;
    let mut end_run = |run: &mut Option<u64>, after_point: bool| {
        if let Some(n) = run.take() {
            let n = if after_point { 1 } else { n.saturating_add(1) };
            bound = bound.saturating_add(n.saturating_mul(LARGEST_UNIT_SECS));
        }
    };
    for c in text.chars() {
        if let Some(digit) = c.to_digit(10) {
            let n = run.unwrap_or(0).saturating_mul(10);
            run = Some(n.saturating_add(u64::from(digit)));
        } else if !c.is_whitespace() {
            end_run(&mut run, after_point);
            after_point = c == '.';
        }
    }
    end_run(&mut run, after_point);
    bound == u64::MAX
}

/// Serializes a `Duration` or `Option<Duration>` as humantime text
/// (`"1s 500ms"`); the serde `with` half that writes.
///
/// # Errors
///
/// The serializer's own.
///
/// # Example
///
/// ```
/// use std::time::Duration;
///
/// #[derive(serde::Serialize)]
/// struct Out(#[serde(with = "budget_core::config::duration")] Duration);
/// assert_eq!(serde_json::to_string(&Out(Duration::from_millis(1500))).unwrap(), r#""1s 500ms""#);
/// ```
pub fn serialize<T: Text, S: Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    value.serialize_text(serializer)
}

/// Deserializes a `Duration` or `Option<Duration>` from humantime text
/// through [`parse`]; the serde `with` half that reads.
///
/// # Errors
///
/// `invalid value: string "…", expected a duration` for text [`parse`]
/// refuses, as `humantime_serde` words it.
///
/// # Example
///
/// ```
/// use std::time::Duration;
///
/// #[derive(Debug, serde::Deserialize)]
/// struct In(#[serde(with = "budget_core::config::duration")] Duration);
/// let err = serde_json::from_str::<In>(r#""soon""#).unwrap_err();
/// assert!(err.to_string().contains("expected a duration"), "{err}");
/// ```
pub fn deserialize<'de, T: Text, D: Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
    T::deserialize_text(deserializer)
}

/// What [`serialize`] and [`deserialize`] accept: `Duration` and
/// `Option<Duration>`. Sealed.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::config::duration::Text;
///
/// fn takes<T: Text>(_: T) {}
/// takes(Duration::ZERO);
/// takes(Some(Duration::ZERO));
/// ```
pub trait Text: Sized + sealed::Sealed {
    #[doc(hidden)]
    fn serialize_text<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error>;
    #[doc(hidden)]
    fn deserialize_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for std::time::Duration {}
    impl Sealed for Option<std::time::Duration> {}
}

impl Text for Duration {
    fn serialize_text<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&humantime::format_duration(*self))
    }

    fn deserialize_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(DurationVisitor)
    }
}

impl Text for Option<Duration> {
    fn serialize_text<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Some(d) => serializer.serialize_some(&humantime::format_duration(*d).to_string()),
            None => serializer.serialize_none(),
        }
    }

    fn deserialize_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Option::<Read>::deserialize(deserializer)?.map(|Read(d)| d))
    }
}

/// A duration read through [`parse`], for `Option<Duration>`.
struct Read(Duration);

impl<'de> Deserialize<'de> for Read {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(DurationVisitor).map(Read)
    }
}

struct DurationVisitor;

impl de::Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        parse(v).map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_humantime_panics_on_is_refused_as_overflow() {
        for text in [
            "18446744073709551615s 500ms 500ms",
            "18446744073709551615s 1000000000ns",
            "18446744073709551615s 999999999ns 1ns",
            "18446744073709551615s500ms500ms",
            // humantime reads a number across whitespace.
            "18446 744073709551615s 500ms 500ms",
            // The fuzzer's find, as one delay (the seed
            // fuzz/corpus/partner_knobs/q25 is the whole script).
            "000000000000ms\n00500ms\n0000000000018446744073709551615s\n0ms\n00500ms\n0\n00500m500ms",
        ] {
            assert_eq!(parse(text), Err(DurationError::NumberOverflow), "{text:?}");
        }
    }

    #[test]
    fn everyday_text_parses_as_humantime_parses_it() {
        for text in [
            "0",
            "250ms",
            "2s",
            "1.5s",
            "1h 30m",
            "1s500ms",
            "7.123us 4ns",
            "00500ms",
            "100years",
            "soon",
            "",
            "5 x",
            "1 000s",
        ] {
            assert_eq!(parse(text), humantime::parse_duration(text), "{text:?}");
        }
    }

    #[test]
    fn the_bound_refuses_only_what_could_reach_u64_max_seconds() {
        // 584 billion years is past u64::MAX seconds; 1 billion is not.
        assert_eq!(parse("584942417355y"), Err(DurationError::NumberOverflow));
        assert_eq!(
            parse("1000000000y"),
            Ok(Duration::from_secs(1_000_000_000 * LARGEST_UNIT_SECS))
        );
        // Leading zeros do not count, and a long fraction counts as one unit.
        assert_eq!(
            parse("000000000000000000000001s"),
            Ok(Duration::from_secs(1))
        );
        assert_eq!(
            parse("1.000000001s"),
            Ok(Duration::new(1, 1)),
            "a fraction's digits are not an integer part"
        );
    }

    #[test]
    fn serde_reads_and_writes_duration_and_option() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct S {
            #[serde(with = "super")]
            d: Duration,
            #[serde(default, with = "super", skip_serializing_if = "Option::is_none")]
            o: Option<Duration>,
        }
        let s: S = toml::from_str("d = \"1s 500ms\"\no = \"2s\"").unwrap();
        assert_eq!(
            s,
            S {
                d: Duration::from_millis(1500),
                o: Some(Duration::from_secs(2))
            }
        );
        let back: S = toml::from_str(&toml::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let none: S = toml::from_str("d = \"0s\"").unwrap();
        assert_eq!(none.o, None);

        let err = toml::from_str::<S>("d = \"18446744073709551615s 500ms 500ms\"").unwrap_err();
        assert!(err.to_string().contains("expected a duration"), "{err}");
        let err = toml::from_str::<S>("d = 5").unwrap_err();
        assert!(err.to_string().contains("a duration"), "{err}");
    }
}
