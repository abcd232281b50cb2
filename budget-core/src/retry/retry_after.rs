//! `Retry-After`: [`parse_retry_after`] and [`RetryAfterError`].
//!
//! The module is private: its items are public in [`crate::retry`], and
//! their docs carry the design notes.

use std::time::{Duration, SystemTime};

/// Why a `Retry-After` value was rejected.
///
/// # Example
///
/// ```
/// use std::time::SystemTime;
/// use budget_core::retry::{parse_retry_after, RetryAfterError};
///
/// let err = parse_retry_after(b"-1", SystemTime::UNIX_EPOCH).unwrap_err();
/// assert_eq!(err, RetryAfterError::Sign);
/// assert_eq!(err.to_string(), "retry-after delay-seconds has a sign");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RetryAfterError {
    /// Nothing but whitespace.
    #[error("retry-after is empty")]
    Empty,
    /// A leading `+` or `-`.
    #[error("retry-after delay-seconds has a sign")]
    Sign,
    /// Digits with a decimal point or comma (`1.5`).
    #[error("retry-after delay-seconds has a decimal point")]
    Decimal,
    /// Digits with whitespace between them (`1 2`).
    #[error("retry-after delay-seconds has whitespace inside")]
    Whitespace,
    /// Digits followed by something that is not a digit (`5s`).
    #[error("retry-after delay-seconds has a non-digit")]
    NotDigit,
    /// Neither delay-seconds nor an HTTP-date in any of the three forms.
    #[error("retry-after is neither delay-seconds nor an http-date")]
    InvalidDate,
}

/// Parses a `Retry-After` field value (RFC 9110 section 10.2.3: how
/// long a server asks to be left alone, in either of its forms) into the
/// wait it asks for, measured from `now` when the value is a date.
///
/// ```text
/// Retry-After = HTTP-date / delay-seconds
/// delay-seconds = 1*DIGIT
/// ```
///
/// - delay-seconds: ASCII digits only. A sign, a decimal point, a space
///   inside or an empty value is rejected, each with its own reason. RFC
///   9110 puts no upper bound on the digits: more seconds than a `u64`
///   holds *saturate* at `u64::MAX` seconds (a wait longer than any
///   budget), so a dependency asking for an absurd wait is passed up at once
///   instead of being read as "no `Retry-After`" and retried.
/// - HTTP-date: all three RFC 9110 forms (IMF-fixdate, the obsolete RFC 850
///   form and asctime), read by [`httpdate::parse_http_date`]. A date in the
///   past means "now": zero.
///
/// Leading and trailing whitespace (SP, HTAB) is trimmed first: RFC 9110
/// section 5.5 excludes it from the field value, and HTTP parsers such as
/// hyper already strip it, so trimming only makes the function agree with
/// them. Whitespace *inside* a value is an error.
///
/// Capping the wait by a configured maximum and by the budget is the
/// policy's job ([`RetryPolicy::decide`](super::RetryPolicy::decide)), not
/// the parser's.
///
/// Never panics, whatever the bytes (a property test pins this).
///
/// # Example
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use budget_core::retry::{parse_retry_after, RetryAfterError};
///
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000_000);
/// assert_eq!(parse_retry_after(b" 0 ", now), Ok(Duration::ZERO));
/// // A date in the past: no wait.
/// assert_eq!(parse_retry_after(b"Sun Nov  6 08:49:37 1994", now), Ok(Duration::ZERO));
/// assert_eq!(parse_retry_after(b"", now), Err(RetryAfterError::Empty));
/// ```
///
/// Both forms:
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use budget_core::retry::{parse_retry_after, RetryAfterError};
///
/// // 1994-11-06 08:49:07 UTC, 30 s before the date below.
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_747);
/// assert_eq!(parse_retry_after(b"120", now), Ok(Duration::from_secs(120)));
/// assert_eq!(
///     parse_retry_after(b"Sun, 06 Nov 1994 08:49:37 GMT", now),
///     Ok(Duration::from_secs(30))
/// );
/// assert_eq!(parse_retry_after(b"1.5", now), Err(RetryAfterError::Decimal));
/// ```
pub fn parse_retry_after(value: &[u8], now: SystemTime) -> Result<Duration, RetryAfterError> {
    let value = trim_ows(value);
    match value.first() {
        None => Err(RetryAfterError::Empty),
        Some(b'+' | b'-') => Err(RetryAfterError::Sign),
        Some(b'0'..=b'9') => parse_delay_seconds(value),
        Some(_) => parse_date(value, now),
    }
}

/// `value` without leading and trailing SP / HTAB.
fn trim_ows(value: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = value.iter().position(|b| !is_ows(b)).unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|b| !is_ows(b))
        .map_or(start, |i| i + 1);
    &value[start..end]
}

/// `1*DIGIT`, saturating at `u64::MAX` seconds; every byte is still
/// checked, so `99999999999999999999x` is [`RetryAfterError::NotDigit`].
fn parse_delay_seconds(digits: &[u8]) -> Result<Duration, RetryAfterError> {
    let mut secs: u64 = 0;
    for &b in digits {
        let digit = match b {
            b'0'..=b'9' => u64::from(b - b'0'),
            b'.' | b',' => return Err(RetryAfterError::Decimal),
            b' ' | b'\t' => return Err(RetryAfterError::Whitespace),
            _ => return Err(RetryAfterError::NotDigit),
        };
        secs = secs.saturating_mul(10).saturating_add(digit);
    }
    Ok(Duration::from_secs(secs))
}

/// An HTTP-date in any of the three forms; a past date is zero.
fn parse_date(value: &[u8], now: SystemTime) -> Result<Duration, RetryAfterError> {
    let text = std::str::from_utf8(value).map_err(|_| RetryAfterError::InvalidDate)?;
    let at = httpdate::parse_http_date(text).map_err(|_| RetryAfterError::InvalidDate)?;
    Ok(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// 1994-11-06 08:49:37 UTC, the RFC's example date.
    const EXAMPLE: u64 = 784_111_777;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn parse(s: &str) -> Result<Duration, RetryAfterError> {
        parse_retry_after(s.as_bytes(), at(EXAMPLE - 60))
    }

    #[test]
    fn rule6_delay_seconds() {
        assert_eq!(parse("120"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("007"), Ok(Duration::from_secs(7)));
        assert_eq!(
            parse("18446744073709551615"),
            Ok(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn rule6_delay_seconds_rejects_each_malformed_form_with_its_reason() {
        assert_eq!(parse("-1"), Err(RetryAfterError::Sign));
        assert_eq!(parse("+1"), Err(RetryAfterError::Sign));
        assert_eq!(parse("1.5"), Err(RetryAfterError::Decimal));
        assert_eq!(parse("1,5"), Err(RetryAfterError::Decimal));
        assert_eq!(parse(" 1 2"), Err(RetryAfterError::Whitespace));
        assert_eq!(parse("1\t2"), Err(RetryAfterError::Whitespace));
        assert_eq!(parse("5s"), Err(RetryAfterError::NotDigit));
        assert_eq!(parse(""), Err(RetryAfterError::Empty));
        assert_eq!(parse(" \t "), Err(RetryAfterError::Empty));
        assert_eq!(
            parse("99999999999999999999x"),
            Err(RetryAfterError::NotDigit)
        );
        assert_eq!(
            parse("99999999999999999999.5"),
            Err(RetryAfterError::Decimal)
        );
    }

    #[test]
    fn rule6_delay_seconds_beyond_a_u64_saturate() {
        let max = Ok(Duration::from_secs(u64::MAX));
        assert_eq!(parse("18446744073709551616"), max);
        assert_eq!(parse("99999999999999999999999"), max);
        assert_eq!(parse(&"9".repeat(100)), max);
        assert_eq!(parse(&"1".repeat(10_000)), max);
    }

    #[test]
    fn rule6_surrounding_whitespace_is_trimmed() {
        assert_eq!(parse("  120\t"), Ok(Duration::from_secs(120)));
        assert_eq!(
            parse(" Sun, 06 Nov 1994 08:49:37 GMT "),
            Ok(Duration::from_secs(60))
        );
    }

    #[test]
    fn rule6_all_three_http_date_forms() {
        for form in [
            "Sun, 06 Nov 1994 08:49:37 GMT",  // IMF-fixdate
            "Sunday, 06-Nov-94 08:49:37 GMT", // RFC 850
            "Sun Nov  6 08:49:37 1994",       // asctime
        ] {
            assert_eq!(parse(form), Ok(Duration::from_secs(60)), "{form}");
        }
    }

    #[test]
    fn rule6_a_past_or_present_date_means_zero() {
        let now = at(EXAMPLE + 3600);
        assert_eq!(
            parse_retry_after(b"Sun, 06 Nov 1994 08:49:37 GMT", now),
            Ok(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after(b"Sun, 06 Nov 1994 08:49:37 GMT", at(EXAMPLE)),
            Ok(Duration::ZERO)
        );
    }

    #[test]
    fn rule6_garbage_and_near_dates_are_invalid() {
        for bad in [
            "soon",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 31 Feb 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994",
            "\u{e9}",
        ] {
            assert_eq!(parse(bad), Err(RetryAfterError::InvalidDate), "{bad}");
        }
        assert_eq!(
            parse_retry_after(b"\xff\xfe", at(0)),
            Err(RetryAfterError::InvalidDate)
        );
    }

    proptest! {
        #[test]
        fn rule6_parse_retry_after_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
            now in any::<u32>(),
        ) {
            let _ = parse_retry_after(&bytes, at(u64::from(now)));
        }

        #[test]
        fn rule6_date_like_inputs_never_panic(
            s in "[A-Za-z]{3,9},? [0-9]{1,2}[ -][A-Za-z]{3}[ -][0-9]{2,4} [0-9]{2}:[0-9]{2}:[0-9]{2} (GMT|[0-9]{4})",
        ) {
            let _ = parse_retry_after(s.as_bytes(), at(EXAMPLE));
        }

        #[test]
        fn rule6_any_u64_of_digits_round_trips(secs in any::<u64>()) {
            prop_assert_eq!(parse(&secs.to_string()), Ok(Duration::from_secs(secs)));
        }

        /// Digit strings of any length: the value is theirs when it fits a
        /// `u64` (leading zeros included), `u64::MAX` seconds otherwise;
        /// never an error, never absent.
        #[test]
        fn rule6_digit_strings_of_any_length_fit_or_saturate(
            digits in "[0-9]{1,400}",
        ) {
            let expected = digits.parse::<u64>().unwrap_or(u64::MAX);
            prop_assert_eq!(parse(&digits), Ok(Duration::from_secs(expected)));
        }
    }
}
