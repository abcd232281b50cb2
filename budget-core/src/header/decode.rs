//! Reading the inbound headers: [`decode`], its answer [`Decoded`], and what
//! a malformed value looks like ([`InvalidHeader`], [`InvalidReason`]).

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};

use super::{FORMATS, INBOUND, format};

/// At most this many characters of a malformed value are kept, so a hostile
/// header cannot blow up a log line or an error body.
const MAX_VALUE_CHARS: usize = 64;

/// [`INBOUND`] as a static, so the decoder hands out its names by reference
/// and clones them without allocating.
static NAMES: [HeaderName; FORMATS] = INBOUND;

/// What [`decode`] found in a request's headers.
///
/// The three answers are complete (nothing present, a usable budget, or a
/// malformed value), so this enum is not `#[non_exhaustive]`.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::header::{self, Decoded};
///
/// let mut headers = http::HeaderMap::new();
/// assert_eq!(header::decode(&headers), Decoded::Absent);
///
/// headers.insert("connect-timeout-ms", "250".parse().unwrap());
/// let Decoded::Valid { budget, header: from } = header::decode(&headers) else { panic!() };
/// assert_eq!((budget, from), (Duration::from_millis(250), header::CONNECT_TIMEOUT_MS));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// No inbound header is present: the service's default budget applies.
    Absent,
    /// Every present value is well-formed; this is the smallest.
    Valid {
        /// The smallest budget found (not yet clamped: see
        /// [`Inbound::resolve`](super::Inbound::resolve)).
        budget: Duration,
        /// The header that carried it; on a tie, the earliest in [`INBOUND`].
        header: HeaderName,
    },
    /// A present value is malformed (the first in [`INBOUND`] order when
    /// several are).
    Invalid(InvalidHeader),
}

/// Reads every inbound format ([`INBOUND`], every value of each if repeated):
/// the smallest valid value wins; any malformed value makes the whole answer
/// [`Decoded::Invalid`], naming the first malformed header in [`INBOUND`]
/// order.
///
/// The budget is not clamped here: that is the service's policy
/// ([`Inbound`](super::Inbound)). Nothing is allocated unless a value is
/// malformed.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::header::{self, Decoded, InvalidReason};
///
/// let mut headers = http::HeaderMap::new();
/// headers.insert("request-budget-ms", "1500".parse().unwrap());
/// headers.insert("grpc-timeout", "1S".parse().unwrap());
/// assert_eq!(
///     header::decode(&headers),
///     Decoded::Valid { budget: Duration::from_secs(1), header: header::GRPC_TIMEOUT },
/// );
///
/// headers.insert("x-request-timeout-ms", "1.5".parse().unwrap());
/// let Decoded::Invalid(err) = header::decode(&headers) else { panic!() };
/// assert_eq!(err.header(), header::X_REQUEST_TIMEOUT_MS);
/// assert_eq!(err.reason(), InvalidReason::DecimalPoint);
/// ```
pub fn decode(headers: &HeaderMap) -> Decoded {
    decode_with(headers, |_, _| {})
}

/// [`decode`], handing every other header to `other` in the same pass: the
/// server layer reads the request's criticality and trace context there
/// rather than hashing their names for lookups of their own.
pub(super) fn decode_with<'a>(
    headers: &'a HeaderMap,
    other: impl FnMut(&'a HeaderName, &'a HeaderValue),
) -> Decoded {
    let mut invalid: Option<(usize, &HeaderValue, InvalidReason)> = None;
    let smallest = smallest(
        headers,
        None,
        |rank, value, reason| {
            if invalid.is_none_or(|(first, ..)| rank < first) {
                invalid = Some((rank, value, reason));
            }
        },
        other,
    );
    match (invalid, smallest) {
        (Some((rank, value, reason)), _) => {
            Decoded::Invalid(InvalidHeader::new(name(rank), value.as_bytes(), reason))
        }
        (None, Some((budget, rank))) => Decoded::Valid {
            budget,
            header: name(rank).clone(),
        },
        (None, None) => Decoded::Absent,
    }
}

/// The smallest valid inbound budget in `headers`, with the rank (index in
/// [`INBOUND`]) of the header that carried it; ties go to the lower rank.
/// The format of rank `skip` is not read. Every malformed value is handed
/// to `on_invalid` and otherwise skipped; every header that is not a
/// budget format, to `other`.
///
/// One pass over the map rather than one lookup per format: hashing six
/// names (FNV, a byte at a time) costs about 100 ns, three times a pass over
/// a typical request (see BENCHMARKS.md).
pub(super) fn smallest<'a>(
    headers: &'a HeaderMap,
    skip: Option<usize>,
    mut on_invalid: impl FnMut(usize, &'a HeaderValue, InvalidReason),
    mut other: impl FnMut(&'a HeaderName, &'a HeaderValue),
) -> Option<(Duration, usize)> {
    let mut smallest: Option<(Duration, usize)> = None;
    for (header, value) in headers {
        let Some((rank, parse)) = format(header) else {
            other(header, value);
            continue;
        };
        if skip == Some(rank) {
            continue;
        }
        match parse(value.as_bytes()) {
            Ok(budget) if smallest.is_none_or(|min| (budget, rank) < min) => {
                smallest = Some((budget, rank));
            }
            Ok(_) => {}
            Err(reason) => on_invalid(rank, value, reason),
        }
    }
    smallest
}

/// What the caller's own budget header said when Envoy's expected timeout
/// (`x-envoy-expected-rq-timeout-ms`: its route's timeout) is smaller and
/// became the budget `budget`: the smallest valid budget of the other
/// formats and its header, when larger than `budget` (docs/contract.md
/// §1, "Through Envoy").
#[cfg(feature = "server")]
pub(super) fn cut_by_envoy(
    headers: &HeaderMap,
    budget: Duration,
) -> Option<(Duration, &'static HeaderName)> {
    let envoy = super::Rank::X_ENVOY_EXPECTED_RQ_TIMEOUT_MS as usize;
    let (said, rank) = smallest(headers, Some(envoy), |_, _, _| {}, |_, _| {})?;
    (said > budget).then(|| (said, name(rank)))
}

/// A parser of one header value.
pub(super) type Parser = fn(&[u8]) -> Result<Duration, InvalidReason>;

/// The inbound header of `rank`.
pub(super) fn name(rank: usize) -> &'static HeaderName {
    &NAMES[rank]
}

/// Reads `value` as 1 to `max` ASCII digits, naming the first byte that is
/// not one. The cap keeps the number below `10^max`, so for `max <= 19` the
/// arithmetic cannot overflow a `u64`; a longer value is refused at its
/// `max + 1`-th digit, without reading further.
pub(super) fn digits(value: &[u8], max: u8) -> Result<u64, InvalidReason> {
    debug_assert!(max <= 19, "10^{max} does not fit a u64");
    if value.is_empty() {
        return Err(InvalidReason::Empty);
    }
    let mut number: u64 = 0;
    for (i, &byte) in value.iter().enumerate() {
        if !byte.is_ascii_digit() {
            return Err(InvalidReason::unexpected(byte, InvalidReason::NotADigit));
        }
        if i >= usize::from(max) {
            return Err(InvalidReason::TooManyDigits { max });
        }
        number = number * 10 + u64::from(byte - b'0');
    }
    Ok(number)
}

/// Why a budget header's value cannot be read.
///
/// # Example
///
/// ```
/// use budget_core::header::{parse_grpc_timeout, parse_millis, InvalidReason};
///
/// assert_eq!(parse_millis(b"+5"), Err(InvalidReason::Sign('+')));
/// assert_eq!(parse_millis(b"12345678901"), Err(InvalidReason::TooManyDigits { max: 10 }));
/// assert_eq!(parse_grpc_timeout(b"5x").unwrap_err().to_string(), "unknown unit 'x'");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidReason {
    /// The value is empty.
    #[error("empty value")]
    Empty,
    /// A `+` or `-`: a budget is a plain count, never signed.
    #[error("sign {0:?} not allowed")]
    Sign(char),
    /// A space or tab, around or inside the digits.
    #[error("whitespace not allowed")]
    Whitespace,
    /// A `.`: fractions are not part of any budget format.
    #[error("decimal point not allowed")]
    DecimalPoint,
    /// Some other ASCII character where a digit belongs.
    #[error("non-digit character {0:?}")]
    NotADigit(char),
    /// A byte outside ASCII (HTTP allows them in values; no budget format does).
    #[error("non-ASCII byte {0:#04x}")]
    NonAscii(u8),
    /// More digits than the format allows: 10 for milliseconds, 8 for
    /// `grpc-timeout`.
    #[error("more than {max} digits")]
    TooManyDigits {
        /// The most digits the format allows.
        max: u8,
    },
    /// A `grpc-timeout` value that ends in a digit.
    #[error("missing unit (one of H M S m u n)")]
    MissingUnit,
    /// A `grpc-timeout` value that is only a unit.
    #[error("no digits before the unit")]
    NoDigits,
    /// A `grpc-timeout` unit other than `H M S m u n`.
    #[error("unknown unit {0:?}")]
    UnknownUnit(char),
    /// A `grpc-timeout` value that goes on after its unit (`5ms`).
    #[error("unexpected {0:?} after the unit")]
    AfterUnit(char),
}

impl InvalidReason {
    /// Why `byte` cannot stand where a digit (or a unit) belongs: a sign,
    /// whitespace, a decimal point or a non-ASCII byte say so; any other
    /// character is `other(c)`.
    pub(super) fn unexpected(byte: u8, other: fn(char) -> Self) -> Self {
        match byte {
            b'+' | b'-' => Self::Sign(char::from(byte)),
            b'.' => Self::DecimalPoint,
            _ if byte.is_ascii_whitespace() => Self::Whitespace,
            _ if !byte.is_ascii() => Self::NonAscii(byte),
            _ => other(char::from(byte)),
        }
    }
}

/// A budget header that is present but malformed: which header, what it
/// held, and why it cannot be read. The same error names a malformed
/// millisecond header of an answer (Envoy's
/// [`x-envoy-upstream-service-time`](crate::proxy::upstream_time)).
///
/// The server side answers it with `400 Bad Request` (or ignores the header,
/// by [`OnMalformed::UseDefault`](super::OnMalformed::UseDefault)).
///
/// # Example
///
/// ```
/// use budget_core::header::{self, Decoded, InvalidReason};
///
/// let mut headers = http::HeaderMap::new();
/// headers.insert("grpc-timeout", "5x".parse().unwrap());
/// let Decoded::Invalid(err) = header::decode(&headers) else { panic!() };
/// assert_eq!(err.to_string(), "malformed `grpc-timeout` header \"5x\": unknown unit 'x'");
/// assert_eq!(err.header(), header::GRPC_TIMEOUT);
/// assert_eq!(err.value(), "5x");
/// assert_eq!(err.reason(), InvalidReason::UnknownUnit('x'));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed `{header}` header {value:?}: {reason}")]
pub struct InvalidHeader {
    header: HeaderName,
    value: String,
    reason: InvalidReason,
}

impl InvalidHeader {
    /// The error for `header`'s `value`, kept printable and short.
    pub(crate) fn new(header: &HeaderName, value: &[u8], reason: InvalidReason) -> Self {
        // A char takes at most 4 bytes: this head holds the first
        // MAX_VALUE_CHARS chars, and the rest of the value is never looked at.
        let head = &value[..value.len().min(4 * MAX_VALUE_CHARS)];
        Self {
            header: header.clone(),
            value: String::from_utf8_lossy(head)
                .chars()
                .take(MAX_VALUE_CHARS)
                .collect(),
            reason,
        }
    }

    /// The malformed header.
    ///
    /// ```
    /// # use budget_core::header::{self, Decoded};
    /// # let mut headers = http::HeaderMap::new();
    /// headers.insert("request-budget-ms", "".parse().unwrap());
    /// let Decoded::Invalid(err) = header::decode(&headers) else { panic!() };
    /// assert_eq!(err.header(), "request-budget-ms");
    /// ```
    pub fn header(&self) -> &HeaderName {
        &self.header
    }

    /// The value it held: invalid UTF-8 replaced by `U+FFFD`, cut to at most
    /// 64 characters.
    ///
    /// ```
    /// # use budget_core::header::{self, Decoded};
    /// # let mut headers = http::HeaderMap::new();
    /// headers.insert("request-budget-ms", "9".repeat(1000).parse().unwrap());
    /// let Decoded::Invalid(err) = header::decode(&headers) else { panic!() };
    /// assert_eq!(err.value(), "9".repeat(64));
    /// ```
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Why it cannot be read.
    ///
    /// ```
    /// # use budget_core::header::{self, Decoded, InvalidReason};
    /// # let mut headers = http::HeaderMap::new();
    /// headers.insert("request-budget-ms", " 5".parse().unwrap());
    /// let Decoded::Invalid(err) = header::decode(&headers) else { panic!() };
    /// assert_eq!(err.reason(), InvalidReason::Whitespace);
    /// ```
    pub fn reason(&self) -> InvalidReason {
        self.reason
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{
        CONNECT_TIMEOUT_MS, GRPC_TIMEOUT, REQUEST_BUDGET_MS, REQUEST_TIMEOUT_MS,
        X_ENVOY_EXPECTED_RQ_TIMEOUT_MS, X_REQUEST_TIMEOUT_MS,
    };

    fn map(pairs: &[(&HeaderName, &[u8])]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            let value = HeaderValue::from_bytes(value).expect("test values are valid");
            headers.append(*name, value);
        }
        headers
    }

    fn valid(ms: u64, header: &HeaderName) -> Decoded {
        Decoded::Valid {
            budget: Duration::from_millis(ms),
            header: header.clone(),
        }
    }

    fn invalid(headers: &HeaderMap) -> InvalidHeader {
        match decode(headers) {
            Decoded::Invalid(err) => err,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn the_inbound_formats_in_tie_order() {
        assert_eq!(INBOUND.len(), 6);
        assert_eq!(
            INBOUND,
            [
                REQUEST_BUDGET_MS,
                GRPC_TIMEOUT,
                X_ENVOY_EXPECTED_RQ_TIMEOUT_MS,
                CONNECT_TIMEOUT_MS,
                REQUEST_TIMEOUT_MS,
                X_REQUEST_TIMEOUT_MS,
            ]
        );
    }

    #[test]
    fn dispatch_follows_inbound() {
        for (rank, name) in INBOUND.iter().enumerate() {
            let (found, parse) = format(name).expect("every inbound name is dispatched");
            assert_eq!(found, rank, "{name}");
            let grpc = *name == GRPC_TIMEOUT;
            assert_eq!(parse(b"1S").is_ok(), grpc, "{name} reads its own format");
        }
        assert!(format(&http::header::ACCEPT).is_none());
        assert!(format(&HeaderName::from_static("request-budget-s")).is_none());
    }

    #[test]
    fn every_inbound_format_is_read() {
        for name in &INBOUND {
            let value: &[u8] = if *name == GRPC_TIMEOUT {
                b"250m"
            } else {
                b"250"
            };
            assert_eq!(decode(&map(&[(name, value)])), valid(250, name), "{name}");
        }
    }

    #[test]
    fn no_inbound_header_is_absent() {
        assert_eq!(decode(&HeaderMap::new()), Decoded::Absent);
        assert_eq!(
            decode(&map(&[(&http::header::ACCEPT, b"*/*")])),
            Decoded::Absent
        );
    }

    #[test]
    fn of_two_formats_the_smallest_wins() {
        let headers = map(&[(&REQUEST_BUDGET_MS, b"1500"), (&GRPC_TIMEOUT, b"900m")]);
        assert_eq!(decode(&headers), valid(900, &GRPC_TIMEOUT));
        let headers = map(&[(&REQUEST_BUDGET_MS, b"800"), (&GRPC_TIMEOUT, b"900m")]);
        assert_eq!(decode(&headers), valid(800, &REQUEST_BUDGET_MS));
    }

    #[test]
    fn of_all_six_formats_the_smallest_wins() {
        let headers = map(&[
            (&REQUEST_BUDGET_MS, b"600"),
            (&GRPC_TIMEOUT, b"1S"),
            (&X_ENVOY_EXPECTED_RQ_TIMEOUT_MS, b"500"),
            (&CONNECT_TIMEOUT_MS, b"400"),
            (&REQUEST_TIMEOUT_MS, b"300"),
            (&X_REQUEST_TIMEOUT_MS, b"700"),
        ]);
        assert_eq!(decode(&headers), valid(300, &REQUEST_TIMEOUT_MS));
    }

    #[test]
    fn every_value_of_a_repeated_header_is_read() {
        let headers = map(&[(&REQUEST_BUDGET_MS, b"900"), (&REQUEST_BUDGET_MS, b"200")]);
        assert_eq!(decode(&headers), valid(200, &REQUEST_BUDGET_MS));
        let headers = map(&[(&REQUEST_BUDGET_MS, b"900"), (&REQUEST_BUDGET_MS, b"2x")]);
        assert_eq!(invalid(&headers).value(), "2x");
    }

    #[test]
    fn a_tie_names_the_earliest_inbound_header_whatever_the_map_order() {
        let headers = map(&[(&CONNECT_TIMEOUT_MS, b"300"), (&GRPC_TIMEOUT, b"300m")]);
        assert_eq!(decode(&headers), valid(300, &GRPC_TIMEOUT));
    }

    #[test]
    fn a_huge_ten_digit_value_is_valid_and_left_to_the_clamp() {
        let headers = map(&[(&REQUEST_BUDGET_MS, b"9999999999")]);
        assert_eq!(decode(&headers), valid(9_999_999_999, &REQUEST_BUDGET_MS));
    }

    #[test]
    fn zero_is_a_valid_spent_budget_not_an_error() {
        assert_eq!(
            decode(&map(&[(&REQUEST_BUDGET_MS, b"0")])),
            valid(0, &REQUEST_BUDGET_MS)
        );
    }

    #[test]
    fn every_malformed_form_is_invalid_and_names_the_header() {
        use InvalidReason::*;
        let cases: [(&HeaderName, &[u8], InvalidReason); 16] = [
            (&REQUEST_BUDGET_MS, b"-5", Sign('-')),
            (&REQUEST_BUDGET_MS, b"+5", Sign('+')),
            (&CONNECT_TIMEOUT_MS, b" 5", Whitespace),
            (&CONNECT_TIMEOUT_MS, b"5 0", Whitespace),
            (&REQUEST_TIMEOUT_MS, b"1.5", DecimalPoint),
            (&X_REQUEST_TIMEOUT_MS, b"", Empty),
            (
                &X_ENVOY_EXPECTED_RQ_TIMEOUT_MS,
                b"12345678901",
                TooManyDigits { max: 10 },
            ),
            (&REQUEST_BUDGET_MS, b"100, 200", NotADigit(',')),
            (&REQUEST_BUDGET_MS, b"5s", NotADigit('s')),
            (&REQUEST_BUDGET_MS, "5\u{e9}".as_bytes(), NonAscii(0xc3)),
            (&REQUEST_BUDGET_MS, b"5\xff", NonAscii(0xff)),
            (&GRPC_TIMEOUT, b"5x", UnknownUnit('x')),
            (&GRPC_TIMEOUT, b"500", MissingUnit),
            (&GRPC_TIMEOUT, b"123456789m", TooManyDigits { max: 8 }),
            (&GRPC_TIMEOUT, b"S", NoDigits),
            (&GRPC_TIMEOUT, b"\xffS", NonAscii(0xff)),
        ];
        for (name, value, reason) in cases {
            let err = invalid(&map(&[(name, value), (&X_REQUEST_TIMEOUT_MS, b"100")]));
            assert_eq!((err.header(), err.reason()), (name, reason), "{value:?}");
        }
    }

    #[test]
    fn one_malformed_value_makes_the_answer_invalid_even_beside_a_valid_one() {
        let headers = map(&[(&REQUEST_BUDGET_MS, b"100"), (&CONNECT_TIMEOUT_MS, b"-1")]);
        assert_eq!(invalid(&headers).header(), CONNECT_TIMEOUT_MS);
    }

    #[test]
    fn of_several_malformed_headers_the_first_in_inbound_order_is_named() {
        let headers = map(&[(&X_REQUEST_TIMEOUT_MS, b"x"), (&GRPC_TIMEOUT, b"1")]);
        let err = invalid(&headers);
        assert_eq!(
            (err.header(), err.reason()),
            (&GRPC_TIMEOUT, InvalidReason::MissingUnit)
        );
    }

    #[test]
    fn the_error_message_is_lower_case_and_precise() {
        let err = invalid(&map(&[(&GRPC_TIMEOUT, b"5x")]));
        assert_eq!(
            err.to_string(),
            "malformed `grpc-timeout` header \"5x\": unknown unit 'x'"
        );
        let err = invalid(&map(&[(&REQUEST_BUDGET_MS, b"5\xff")]));
        assert_eq!(
            err.to_string(),
            "malformed `request-budget-ms` header \"5\u{fffd}\": non-ASCII byte 0xff"
        );
    }

    #[test]
    fn a_hostile_value_is_cut_to_64_chars_in_the_error() {
        let long = "\u{e9}".repeat(5000);
        let err = invalid(&map(&[(&REQUEST_BUDGET_MS, long.as_bytes())]));
        assert_eq!(err.value(), "\u{e9}".repeat(64));
        let err = invalid(&map(&[(&REQUEST_BUDGET_MS, &[0xff; 5000])]));
        assert_eq!(err.value().chars().count(), 64);
        assert!(err.to_string().len() < 300);
    }

    #[test]
    fn every_reason_displays_precisely() {
        use InvalidReason::*;
        let cases = [
            (Empty, "empty value"),
            (Sign('-'), "sign '-' not allowed"),
            (Whitespace, "whitespace not allowed"),
            (DecimalPoint, "decimal point not allowed"),
            (NotADigit('a'), "non-digit character 'a'"),
            (NonAscii(0xc3), "non-ASCII byte 0xc3"),
            (TooManyDigits { max: 8 }, "more than 8 digits"),
            (MissingUnit, "missing unit (one of H M S m u n)"),
            (NoDigits, "no digits before the unit"),
            (UnknownUnit('x'), "unknown unit 'x'"),
            (AfterUnit('s'), "unexpected 's' after the unit"),
        ];
        for (reason, text) in cases {
            assert_eq!(reason.to_string(), text);
        }
    }
}
