//! `grpc-timeout`, as gRPC's PROTOCOL-HTTP2 defines it:
//!
//! ```text
//! Timeout      → "grpc-timeout" TimeoutValue TimeoutUnit
//! TimeoutValue → {positive integer as ASCII string of at most 8 digits}
//! TimeoutUnit  → Hour "H" / Minute "M" / Second "S" / Millisecond "m" / Microsecond "u" / Nanosecond "n"
//! ```
//!
//! One deviation: a zero value (`0m`) is read as a spent budget rather than
//! refused, as the millisecond headers read `0`; the floor check then turns
//! it away.

use std::time::Duration;

use http::HeaderValue;

use super::InvalidReason;
use super::decode::digits;

/// The most digits of a `TimeoutValue`.
const MAX_DIGITS: u8 = 8;

/// The largest `TimeoutValue`: eight nines.
const MAX_VALUE: u64 = 99_999_999;

/// The units, most precise first (the order the encoder tries them in), with
/// their lengths. The one table both directions read.
const UNITS: [(u8, Duration); 6] = [
    (b'n', Duration::from_nanos(1)),
    (b'u', Duration::from_micros(1)),
    (b'm', Duration::from_millis(1)),
    (b'S', Duration::from_secs(1)),
    (b'M', Duration::from_secs(60)),
    (b'H', Duration::from_secs(60 * 60)),
];

/// Parses a `grpc-timeout` value: 1 to 8 ASCII digits and one unit of
/// `H M S m u n`.
///
/// The 8-digit cap makes overflow impossible: the longest value,
/// `99999999H`, is about 11 400 years and fits a [`Duration`] many times
/// over (the multiplication saturates all the same).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::header::{parse_grpc_timeout, InvalidReason};
///
/// assert_eq!(parse_grpc_timeout(b"1S"), Ok(Duration::from_secs(1)));
/// assert_eq!(parse_grpc_timeout(b"1500000u"), Ok(Duration::from_millis(1500)));
/// assert_eq!(parse_grpc_timeout(b"99999999H"), Ok(Duration::from_secs(99_999_999 * 3600)));
/// assert_eq!(parse_grpc_timeout(b"123456789H"), Err(InvalidReason::TooManyDigits { max: 8 }));
/// assert_eq!(parse_grpc_timeout(b"100"), Err(InvalidReason::MissingUnit));
/// assert_eq!(parse_grpc_timeout(b"5x"), Err(InvalidReason::UnknownUnit('x')));
/// ```
pub fn parse_grpc_timeout(value: &[u8]) -> Result<Duration, InvalidReason> {
    let end = value.iter().position(|b| !b.is_ascii_digit());
    let (number, rest) = value.split_at(end.unwrap_or(value.len()));
    let count = if number.is_empty() {
        None
    } else {
        Some(digits(number, MAX_DIGITS)?)
    };
    let Some((&letter, after)) = rest.split_first() else {
        return Err(match count {
            None => InvalidReason::Empty,
            Some(_) => InvalidReason::MissingUnit,
        });
    };
    let Some(&(_, unit)) = UNITS.iter().find(|(known, _)| *known == letter) else {
        return Err(InvalidReason::unexpected(
            letter,
            InvalidReason::UnknownUnit,
        ));
    };
    let count = count.ok_or(InvalidReason::NoDigits)?;
    if let Some(&byte) = after.first() {
        return Err(InvalidReason::unexpected(byte, InvalidReason::AfterUnit));
    }
    // Eight digits always fit a u32; saturate rather than trust that blindly.
    Ok(unit.saturating_mul(u32::try_from(count).unwrap_or(u32::MAX)))
}

/// Encodes `d` as a `grpc-timeout` value in the most precise unit whose
/// count fits 8 digits (trying `n`, `u`, `m`, `S`, `M`, `H` in that order),
/// the count rounded up, as grpc-go encodes it (the finest unit that fits
/// loses less than one part in ten million, which the per-hop reserve
/// covers). Longer than `99999999H` saturates there.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::header::encode_grpc_timeout;
///
/// // 1.5 s is 1 500 000 000 ns (10 digits): too many; 1 500 000 us fits.
/// assert_eq!(encode_grpc_timeout(Duration::from_millis(1500)), "1500000u");
/// assert_eq!(encode_grpc_timeout(Duration::from_nanos(99_999_999)), "99999999n");
/// assert_eq!(encode_grpc_timeout(Duration::from_nanos(123_456_789)), "123457u");
/// assert_eq!(encode_grpc_timeout(Duration::from_secs(100)), "100000m");
/// assert_eq!(encode_grpc_timeout(Duration::from_secs(2 * 24 * 3600)), "172800S");
/// assert_eq!(encode_grpc_timeout(Duration::MAX), "99999999H");
/// ```
pub fn encode_grpc_timeout(d: Duration) -> HeaderValue {
    let nanos = d.as_nanos();
    let (count, letter) = UNITS
        .iter()
        .find_map(|&(letter, unit)| {
            let count = u64::try_from(nanos.div_ceil(unit.as_nanos())).ok()?;
            (count <= MAX_VALUE).then_some((count, letter))
        })
        .unwrap_or((MAX_VALUE, b'H'));

    // The digits, then the unit.
    let mut wire = [0; MAX_DIGITS as usize + 1];
    let end = wire.len() - 1;
    wire[end] = letter;
    let start = crate::decimal::digits_ending_at(&mut wire, end, count);
    HeaderValue::from_bytes(&wire[start..])
        .expect("ASCII digits and a unit letter are a valid header value")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_example_and_every_unit_of_the_grammar_parse() {
        let hour = Duration::from_secs(3600);
        let cases: [(&[u8], Duration); 8] = [
            (b"1S", Duration::from_secs(1)), // PROTOCOL-HTTP2's sample request
            (b"1H", hour),
            (b"3M", Duration::from_secs(180)),
            (b"10S", Duration::from_secs(10)),
            (b"10000m", Duration::from_secs(10)),
            (b"250u", Duration::from_micros(250)),
            (b"82n", Duration::from_nanos(82)),
            (b"99999999H", hour * 99_999_999),
        ];
        for (value, expected) in cases {
            assert_eq!(parse_grpc_timeout(value), Ok(expected), "{value:?}");
        }
    }

    #[test]
    fn zero_is_a_spent_budget() {
        assert_eq!(parse_grpc_timeout(b"0m"), Ok(Duration::ZERO));
    }

    #[test]
    fn every_malformed_form_is_named_in_reading_order() {
        use InvalidReason::*;
        let cases: [(&[u8], InvalidReason); 19] = [
            (b"", Empty),
            (b"5", MissingUnit),
            (b"12345678", MissingUnit),
            (b"123456789", TooManyDigits { max: 8 }),
            (b"100000000n", TooManyDigits { max: 8 }),
            (b"000000001S", TooManyDigits { max: 8 }),
            (b"m", NoDigits),
            (b"5x", UnknownUnit('x')),
            (b"5s", UnknownUnit('s')),
            (b"5h", UnknownUnit('h')),
            (b"x", UnknownUnit('x')),
            (b"5ms", AfterUnit('s')),
            (b"5m5", AfterUnit('5')),
            (b"-1S", Sign('-')),
            (b"1-", Sign('-')),
            (b"1 S", Whitespace),
            (b"1S ", Whitespace),
            (b"1.5S", DecimalPoint),
            (b"1\xb5", NonAscii(0xb5)),
        ];
        for (value, reason) in cases {
            assert_eq!(parse_grpc_timeout(value), Err(reason), "{value:?}");
        }
    }

    #[test]
    fn encoding_picks_the_most_precise_unit_that_fits_eight_digits() {
        let cases = [
            (Duration::ZERO, "0n"),
            (Duration::from_nanos(99_999_999), "99999999n"),
            (Duration::from_millis(100), "100000u"),
            (Duration::from_millis(1500), "1500000u"),
            (Duration::from_secs(2), "2000000u"),
            (Duration::from_secs(100), "100000m"),
            (Duration::from_secs(3600), "3600000m"),
            (Duration::from_secs(100_000), "100000S"),
            (Duration::from_secs(200_000_000), "3333334M"),
            (Duration::from_secs(5_999_999_940), "99999999M"),
            (Duration::from_secs(6_000_000_000), "1666667H"),
        ];
        for (d, wire) in cases {
            assert_eq!(encode_grpc_timeout(d), wire, "{d:?}");
        }
    }

    /// Decoder vectors of tonic (`grpc_timeout.rs`) and grpc-go
    /// (`TestDecodeTimeout`): every unit, and the forms both refuse.
    #[test]
    fn decoding_matches_tonic_and_grpc_go() {
        let (ns, s) = (Duration::from_nanos, Duration::from_secs);
        for (wire, d) in [
            (&b"3H"[..], s(3 * 3600)),
            (b"1M", s(60)),
            (b"42S", s(42)),
            (b"13m", Duration::from_millis(13)),
            (b"2u", Duration::from_micros(2)),
            (b"82n", ns(82)),
            (b"99999999H", s(99_999_999 * 3600)),
            (b"1234567n", ns(1_234_567)),
        ] {
            assert_eq!(
                parse_grpc_timeout(wire),
                Ok(d),
                "{}",
                String::from_utf8_lossy(wire)
            );
        }
        for wire in [
            &b""[..],
            b"1",
            b"H",
            b"1x",
            b"123456789H",
            b"-1S",
            b"1.5S",
            b" 1S",
        ] {
            assert!(
                parse_grpc_timeout(wire).is_err(),
                "{}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    /// grpc-go's own vectors (`TestEncodeTimeout`,
    /// internal/transport/http_util_test.go): the finest unit that fits
    /// eight digits, the count rounded up.
    #[test]
    fn encoding_matches_grpc_go() {
        let (ns, us, ms, s, m) = (
            Duration::from_nanos,
            Duration::from_micros,
            Duration::from_millis,
            Duration::from_secs,
            |n: u64| Duration::from_secs(n * 60),
        );
        for (d, wire) in [
            (ns(12_345_678), "12345678n"),
            (ns(123_456_789), "123457u"),
            (us(12_345_678), "12345678u"),
            (us(123_456_789), "123457m"),
            (ms(12_345_678), "12345678m"),
            (ms(123_456_789), "123457S"),
            (s(12_345_678), "12345678S"),
            (s(123_456_789), "2057614M"),
            (m(12_345_678), "12345678M"),
            (m(123_456_789), "2057614H"),
            (Duration::ZERO, "0n"),
        ] {
            assert_eq!(encode_grpc_timeout(d), wire, "{d:?}");
        }
    }

    #[test]
    fn encoding_rounds_up_and_the_rounding_moves_to_a_coarser_unit_when_needed() {
        assert_eq!(encode_grpc_timeout(ns(100_000_999)), "100001u");
        assert_eq!(
            encode_grpc_timeout(Duration::from_secs(200_000_059)),
            "3333335M"
        );
        // 99 999 999.5 us rounds up to 100 000 000 us: nine digits, so ms.
        assert_eq!(encode_grpc_timeout(ns(99_999_999_500)), "100000m");
    }

    fn ns(n: u64) -> Duration {
        Duration::from_nanos(n)
    }

    #[test]
    fn encoding_saturates_at_eight_nines_of_hours() {
        let most = Duration::from_secs(99_999_999 * 3600);
        assert_eq!(encode_grpc_timeout(most), "99999999H");
        assert_eq!(encode_grpc_timeout(most * 2), "99999999H");
        assert_eq!(encode_grpc_timeout(Duration::MAX), "99999999H");
    }

    #[test]
    fn encode_then_parse_round_trips_exactly_when_nothing_is_rounded() {
        for d in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(1500),
            Duration::from_secs(3600),
            Duration::from_secs(99_999_999 * 3600),
        ] {
            assert_eq!(parse_grpc_timeout(encode_grpc_timeout(d).as_bytes()), Ok(d));
        }
    }
}
