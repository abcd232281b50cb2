//! `Retry-After`, both forms: `budget_core::retry::parse_retry_after`.
//!
//! Input: the first 5 bytes are the wall-clock "now", big-endian seconds
//! since the Unix epoch (0 to about year 36 800; shorter inputs are padded
//! with zeros); the rest is the field value.
//!
//! What must hold for any input:
//! - no panic; an error displays as a `retry-after ...` message;
//! - surrounding SP / HTAB never changes the answer;
//! - a leading sign is `Sign`; a value of only digits is always `Ok`: that
//!   many seconds, saturating at `u64::MAX` seconds (never an error);
//! - a date is never further than year 9999 from now, and a future date,
//!   re-encoded as an IMF-fixdate (`httpdate::fmt_http_date`), parses again
//!   to the same wait.

#![no_main]

use std::time::{Duration, SystemTime};

use budget_core::retry::{RetryAfterError, parse_retry_after};
use libfuzzer_sys::fuzz_target;

/// 9999-12-31 23:59:59 UTC, the last second an HTTP-date can name.
const LAST_HTTP_DATE: u64 = 253_402_300_799;

fuzz_target!(|data: &[u8]| {
    let split = data.len().min(5);
    let mut clock = [0u8; 8];
    clock[8 - split..].copy_from_slice(&data[..split]);
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(u64::from_be_bytes(clock));
    let value = &data[split..];

    let answer = parse_retry_after(value, now);

    // Optional whitespace around the value is not part of it.
    let padded = [b" \t".as_slice(), value, b"\t "].concat();
    assert_eq!(parse_retry_after(&padded, now), answer, "{value:?}");

    let trimmed = trim_ows(value);
    match answer {
        Err(err) => {
            assert!(err.to_string().starts_with("retry-after "), "{err}");
            assert!(!is_delay_seconds(trimmed), "{value:?} refused: {err}");
        }
        Ok(wait) if is_delay_seconds(trimmed) => {
            let expected = std::str::from_utf8(trimmed)
                .unwrap()
                .parse::<u64>()
                .unwrap_or(u64::MAX);
            assert_eq!(wait, Duration::from_secs(expected), "{value:?}");
        }
        Ok(wait) => {
            // A date: no later than the last HTTP-date.
            let at = now + wait;
            let secs = at.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
            assert!(wait.is_zero() || secs <= LAST_HTTP_DATE, "{value:?}");
            if !wait.is_zero() {
                let again = httpdate::fmt_http_date(at);
                assert_eq!(
                    parse_retry_after(again.as_bytes(), now),
                    Ok(wait),
                    "{value:?} re-encoded as {again:?}"
                );
            }
        }
    }
    if matches!(trimmed.first(), Some(b'+' | b'-')) {
        assert_eq!(answer, Err(RetryAfterError::Sign));
    }
});

/// `1*DIGIT`.
fn is_delay_seconds(value: &[u8]) -> bool {
    !value.is_empty() && value.iter().all(u8::is_ascii_digit)
}

/// `value` without leading and trailing SP / HTAB (RFC 9110's OWS: only
/// those two, not every ASCII whitespace).
fn trim_ows(value: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = value.iter().position(|b| !is_ows(b)).unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|b| !is_ows(b))
        .map_or(start, |i| i + 1);
    &value[start..end]
}
