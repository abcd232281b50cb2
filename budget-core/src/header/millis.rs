//! The millisecond headers: every inbound format but `grpc-timeout`, and
//! the outbound `request-budget-ms`.

use std::time::Duration;

use http::HeaderValue;

use super::InvalidReason;
use super::decode::digits;

/// The most digits of a millisecond value, for every millisecond header.
///
/// Ten digits are up to 9 999 999 999 ms (about 115 days): far beyond any
/// sensible budget, and small enough that reading them cannot overflow.
const MAX_DIGITS: u8 = 10;

/// The largest millisecond value on the wire: ten nines.
const MAX_MILLIS: u64 = 9_999_999_999;

/// Parses a millisecond header value: 1 to 10 ASCII digits, nothing else (no
/// sign, no whitespace, no decimal point, no unit).
///
/// The 10-digit cap, the same for every millisecond header, makes overflow
/// impossible: the largest value is 9 999 999 999 ms. A huge value is still
/// valid here; it saturates later at the service's maximum
/// ([`Inbound`](super::Inbound)).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::header::{parse_millis, InvalidReason};
///
/// assert_eq!(parse_millis(b"1500"), Ok(Duration::from_millis(1500)));
/// assert_eq!(parse_millis(b"9999999999"), Ok(Duration::from_millis(9_999_999_999)));
/// assert_eq!(parse_millis(b"1.5"), Err(InvalidReason::DecimalPoint));
/// assert_eq!(parse_millis(b""), Err(InvalidReason::Empty));
/// ```
pub fn parse_millis(value: &[u8]) -> Result<Duration, InvalidReason> {
    digits(value, MAX_DIGITS).map(Duration::from_millis)
}

/// Encodes `d` as a millisecond header value (`request-budget-ms`), rounded
/// down so the callee never gets more time than we had, and saturating at
/// 9 999 999 999 so the value is always one [`parse_millis`] accepts.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::header::encode_ms;
///
/// assert_eq!(encode_ms(Duration::from_micros(1_500_999)), "1500");
/// assert_eq!(encode_ms(Duration::from_micros(999)), "0");
/// assert_eq!(encode_ms(Duration::MAX), "9999999999");
/// ```
pub fn encode_ms(d: Duration) -> HeaderValue {
    let millis = d.as_millis().min(u128::from(MAX_MILLIS));
    HeaderValue::from(u64::try_from(millis).unwrap_or(MAX_MILLIS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_to_ten_digits_are_milliseconds() {
        assert_eq!(parse_millis(b"0"), Ok(Duration::ZERO));
        assert_eq!(parse_millis(b"7"), Ok(Duration::from_millis(7)));
        assert_eq!(parse_millis(b"0000000250"), Ok(Duration::from_millis(250)));
        assert_eq!(
            parse_millis(b"9999999999"),
            Ok(Duration::from_millis(MAX_MILLIS))
        );
    }

    #[test]
    fn eleven_digits_are_too_many_even_with_leading_zeros() {
        let too_many = Err(InvalidReason::TooManyDigits { max: 10 });
        assert_eq!(parse_millis(b"10000000000"), too_many);
        assert_eq!(parse_millis(b"00000000001"), too_many);
        assert_eq!(parse_millis(&[b'9'; 100_000]), too_many);
    }

    #[test]
    fn the_first_offending_byte_names_the_reason() {
        assert_eq!(parse_millis(b"-0"), Err(InvalidReason::Sign('-')));
        assert_eq!(parse_millis(b"5\t"), Err(InvalidReason::Whitespace));
        assert_eq!(parse_millis(b"5ms"), Err(InvalidReason::NotADigit('m')));
        assert_eq!(parse_millis(b"1e3"), Err(InvalidReason::NotADigit('e')));
        assert_eq!(parse_millis(b"\x80"), Err(InvalidReason::NonAscii(0x80)));
    }

    #[test]
    fn encoding_rounds_down_to_the_millisecond() {
        assert_eq!(encode_ms(Duration::ZERO), "0");
        assert_eq!(encode_ms(Duration::from_nanos(1_999_999)), "1");
        assert_eq!(encode_ms(Duration::from_secs(2)), "2000");
    }

    #[test]
    fn encoding_saturates_at_ten_nines() {
        assert_eq!(encode_ms(Duration::from_millis(MAX_MILLIS)), "9999999999");
        assert_eq!(
            encode_ms(Duration::from_millis(MAX_MILLIS + 1)),
            "9999999999"
        );
        assert_eq!(encode_ms(Duration::MAX), "9999999999");
    }

    #[test]
    fn encode_then_parse_round_trips_whole_milliseconds() {
        for ms in [0, 1, 999, 1000, 1500, 86_400_000, MAX_MILLIS] {
            let d = Duration::from_millis(ms);
            assert_eq!(parse_millis(encode_ms(d).as_bytes()), Ok(d));
        }
    }
}
