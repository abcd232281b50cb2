//! Request criticality: how much a request matters when there is not
//! enough capacity for all of them, and its `request-criticality` header.
//!
//! Under overload something has to wait or be refused; criticality says
//! what. A [`PermitQueue`](super::queue::PermitQueue) serves [`Critical`] waiters
//! before [`Default`] ones and those before [`Sheddable`] ones, and refuses
//! the least critical first.
//!
//! # On the wire
//!
//! The header [`REQUEST_CRITICALITY`] carries one of `critical`, `default`
//! or `sheddable`. Reading it is forward compatible and never an error:
//! case does not matter, surrounding spaces and tabs are ignored, and any
//! other value (empty, a word this version does not know, non-ASCII bytes)
//! reads as [`Default`], flagged [`ReadCriticality::unknown`] so the caller
//! can count or log it. An absent header is [`Default`], not unknown.
//!
//! [`Critical`]: Criticality::Critical
//! [`Default`]: Criticality::Default
//! [`Sheddable`]: Criticality::Sheddable
//!
//! # Example
//!
//! ```
//! use budget_core::admission::criticality::{Criticality, REQUEST_CRITICALITY};
//!
//! let mut headers = http::HeaderMap::new();
//! headers.insert(REQUEST_CRITICALITY, Criticality::Sheddable.header_value());
//! let read = Criticality::from_headers(&headers);
//! assert_eq!(read.criticality, Criticality::Sheddable);
//! assert!(!read.unknown);
//! assert!(Criticality::Sheddable < Criticality::Critical);
//! ```

use std::fmt;

use http::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

/// The `request-criticality` header.
///
/// ```
/// use budget_core::admission::criticality::REQUEST_CRITICALITY;
/// assert_eq!(REQUEST_CRITICALITY.as_str(), "request-criticality");
/// ```
pub const REQUEST_CRITICALITY: HeaderName = HeaderName::from_static("request-criticality");

/// How much a request matters under overload, least first:
/// `Sheddable < Default < Critical`.
///
/// Serialises in lower case (`"critical"`, `"default"`, `"sheddable"`), the
/// same words as the header.
///
/// # Example
///
/// ```
/// use budget_core::admission::criticality::Criticality;
///
/// assert_eq!(Criticality::default(), Criticality::Default);
/// assert_eq!(Criticality::Critical.to_string(), "critical");
/// let parsed: Criticality = serde_json::from_str("\"sheddable\"").unwrap();
/// assert_eq!(parsed, Criticality::Sheddable);
/// ```
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Criticality {
    /// May be refused first: prefetches, background refreshes, retries of
    /// optional work.
    Sheddable,
    /// An ordinary request; what an absent or unreadable header means.
    #[default]
    Default,
    /// Served before everything else: the request a user is waiting on and
    /// cannot do without.
    Critical,
}

/// What [`Criticality::from_header`] read: the criticality to use, and
/// whether the header held a value this version does not know.
///
/// # Example
///
/// ```
/// use budget_core::admission::criticality::{Criticality, ReadCriticality};
/// use http::HeaderValue;
///
/// let read = Criticality::from_header(Some(&HeaderValue::from_static("urgent")));
/// assert_eq!(read, ReadCriticality { criticality: Criticality::Default, unknown: true });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReadCriticality {
    /// The criticality to treat the request with ([`Criticality::Default`]
    /// when the header was absent or unknown).
    pub criticality: Criticality,
    /// The header was present but held no known name.
    pub unknown: bool,
}

impl Criticality {
    /// Every criticality, least critical first.
    const ALL: [Criticality; 3] = [
        Criticality::Sheddable,
        Criticality::Default,
        Criticality::Critical,
    ];

    /// The lower-case name, as on the wire.
    ///
    /// ```
    /// use budget_core::admission::criticality::Criticality;
    /// assert_eq!(Criticality::Sheddable.as_str(), "sheddable");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Criticality::Sheddable => "sheddable",
            Criticality::Default => "default",
            Criticality::Critical => "critical",
        }
    }

    /// The header value for this criticality (a static value, no
    /// allocation).
    ///
    /// ```
    /// use budget_core::admission::criticality::Criticality;
    /// assert_eq!(Criticality::Critical.header_value(), "critical");
    /// ```
    pub const fn header_value(self) -> HeaderValue {
        HeaderValue::from_static(self.as_str())
    }

    /// Reads a `request-criticality` header value; never fails.
    ///
    /// Absent: [`Default`](Criticality::Default), not unknown. One of the
    /// three names, in any case, with surrounding spaces or tabs: that
    /// criticality. Anything else: [`Default`](Criticality::Default) with
    /// `unknown` set.
    ///
    /// ```
    /// use budget_core::admission::criticality::Criticality;
    /// use http::HeaderValue;
    ///
    /// let read = Criticality::from_header(Some(&HeaderValue::from_static(" Critical\t")));
    /// assert_eq!(read.criticality, Criticality::Critical);
    /// assert!(!read.unknown);
    /// assert!(!Criticality::from_header(None).unknown);
    /// ```
    pub fn from_header(value: Option<&HeaderValue>) -> ReadCriticality {
        let Some(value) = value else {
            return ReadCriticality {
                criticality: Criticality::Default,
                unknown: false,
            };
        };
        let trimmed = trim_spaces_and_tabs(value.as_bytes());
        match Self::ALL
            .into_iter()
            .find(|c| trimmed.eq_ignore_ascii_case(c.as_str().as_bytes()))
        {
            Some(criticality) => ReadCriticality {
                criticality,
                unknown: false,
            },
            None => ReadCriticality {
                criticality: Criticality::Default,
                unknown: true,
            },
        }
    }

    /// Reads the [`REQUEST_CRITICALITY`] header of `headers` (the first
    /// value if there are several), as [`Criticality::from_header`] does.
    ///
    /// ```
    /// use budget_core::admission::criticality::{Criticality, REQUEST_CRITICALITY};
    ///
    /// let mut headers = http::HeaderMap::new();
    /// assert_eq!(Criticality::from_headers(&headers).criticality, Criticality::Default);
    /// headers.insert(REQUEST_CRITICALITY, "SHEDDABLE".parse().unwrap());
    /// assert_eq!(Criticality::from_headers(&headers).criticality, Criticality::Sheddable);
    /// ```
    pub fn from_headers(headers: &HeaderMap) -> ReadCriticality {
        Self::from_header(headers.get(REQUEST_CRITICALITY))
    }

    /// The index of this criticality among [`Criticality::ALL`] (0 is the
    /// least critical), for per-class tables.
    pub(crate) const fn rank(self) -> usize {
        match self {
            Criticality::Sheddable => 0,
            Criticality::Default => 1,
            Criticality::Critical => 2,
        }
    }

    /// The number of criticalities, the size of a per-class table.
    pub(crate) const COUNT: usize = Self::ALL.len();
}

/// `bytes` without leading and trailing spaces and tabs (the optional
/// whitespace of an HTTP field value).
fn trim_spaces_and_tabs(bytes: &[u8]) -> &[u8] {
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let start = bytes.iter().position(|b| !blank(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !blank(b))
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

impl fmt::Display for Criticality {
    /// The lower-case name, as on the wire.
    ///
    /// ```
    /// use budget_core::admission::criticality::Criticality;
    /// assert_eq!(format!("{}", Criticality::Default), "default");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(bytes: &[u8]) -> ReadCriticality {
        Criticality::from_header(Some(&HeaderValue::from_bytes(bytes).unwrap()))
    }

    #[test]
    fn order_is_sheddable_then_default_then_critical() {
        assert!(Criticality::Sheddable < Criticality::Default);
        assert!(Criticality::Default < Criticality::Critical);
        let mut all = [
            Criticality::Critical,
            Criticality::Sheddable,
            Criticality::Default,
        ];
        all.sort();
        assert_eq!(all, Criticality::ALL);
        for (rank, c) in Criticality::ALL.into_iter().enumerate() {
            assert_eq!(c.rank(), rank);
        }
    }

    #[test]
    fn absent_header_is_default_and_not_unknown() {
        assert_eq!(
            Criticality::from_header(None),
            ReadCriticality {
                criticality: Criticality::Default,
                unknown: false
            }
        );
        assert_eq!(
            Criticality::from_headers(&HeaderMap::new()),
            Criticality::from_header(None)
        );
    }

    #[test]
    fn names_are_case_insensitive_and_trimmed_of_spaces_and_tabs() {
        for (bytes, want) in [
            (&b"critical"[..], Criticality::Critical),
            (b"CRITICAL", Criticality::Critical),
            (b" \tCritical \t", Criticality::Critical),
            (b"Default", Criticality::Default),
            (b"sheddable", Criticality::Sheddable),
            (b"\tSheDDable", Criticality::Sheddable),
        ] {
            let got = read(bytes);
            assert_eq!(got.criticality, want, "{bytes:?}");
            assert!(!got.unknown, "{bytes:?}");
        }
    }

    #[test]
    fn anything_else_is_default_flagged_unknown() {
        for bytes in [
            &b""[..],
            b"   ",
            b"urgent",
            b"critical,sheddable",
            b"crit ical",
            b"critical1",
            b"\xc3\xa9critical",
            b"sheddable\xff",
        ] {
            let got = read(bytes);
            assert_eq!(got.criticality, Criticality::Default, "{bytes:?}");
            assert!(got.unknown, "{bytes:?}");
        }
    }

    #[test]
    fn from_headers_reads_the_first_value() {
        let mut headers = HeaderMap::new();
        headers.append(REQUEST_CRITICALITY, HeaderValue::from_static("critical"));
        headers.append(REQUEST_CRITICALITY, HeaderValue::from_static("sheddable"));
        assert_eq!(
            Criticality::from_headers(&headers).criticality,
            Criticality::Critical
        );
    }

    #[test]
    fn serde_uses_the_lower_case_names_and_refuses_others() {
        for c in Criticality::ALL {
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
            assert_eq!(serde_json::from_str::<Criticality>(&json).unwrap(), c);
        }
        assert!(serde_json::from_str::<Criticality>("\"Critical\"").is_err());
    }

    proptest! {
        #[test]
        fn any_header_bytes_read_without_panicking(
            bytes in proptest::collection::vec(any::<u8>(), 0..32),
        ) {
            if let Ok(value) = HeaderValue::from_bytes(&bytes) {
                let got = Criticality::from_header(Some(&value));
                // Unknown always means Default.
                prop_assert!(!got.unknown || got.criticality == Criticality::Default);
            }
        }

        #[test]
        fn the_three_names_round_trip_in_any_case_and_padding(
            index in 0usize..3,
            upper in proptest::collection::vec(any::<bool>(), 9),
            left in "[ \t]{0,3}",
            right in "[ \t]{0,3}",
        ) {
            let c = Criticality::ALL[index];
            prop_assert_eq!(Criticality::from_header(Some(&c.header_value())).criticality, c);
            let cased: String = c
                .as_str()
                .chars()
                .zip(&upper)
                .map(|(ch, up)| if *up { ch.to_ascii_uppercase() } else { ch })
                .collect();
            let padded = format!("{left}{cased}{right}");
            let got = read(padded.as_bytes());
            prop_assert_eq!(got, ReadCriticality { criticality: c, unknown: false });
            prop_assert_eq!(c.to_string().parse::<HeaderValue>().unwrap(), c.header_value());
        }
    }
}
