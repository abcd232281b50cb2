//! The inbound budget header decoder, every format.
//!
//! Input: the first byte picks the header (its value mod 8: 0..=5 the six
//! `INBOUND` names in order, 6 and 7 a header that carries no budget); the
//! rest is the value. Values `http::HeaderValue` refuses are still fed to the
//! two value parsers, but never to `decode`.
//!
//! What must hold for any input:
//! - the value parsers never panic; a value of only digits within the digit
//!   cap is always valid, and equals the number read independently here;
//! - `decode` agrees with the parser of the header's format, names that
//!   header, and a budget is at most the format's largest value;
//! - what decoded re-encodes (`encode_ms`, `encode_grpc_timeout`) to a value
//!   that decodes to the same budget;
//! - a malformed value is an error naming the header, its quoted value cut to
//!   64 characters;
//! - `Inbound::resolve` never exceeds the maximum, and `use-default` never
//!   refuses.

#![no_main]

use std::time::Duration;

use budget_core::header::{
    self, Decoded, GRPC_TIMEOUT, INBOUND, Inbound, OnMalformed, encode_grpc_timeout, encode_ms,
    parse_grpc_timeout, parse_millis,
};
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

/// The largest millisecond value: ten nines.
const MAX_MILLIS: Duration = Duration::from_millis(9_999_999_999);
/// The largest `grpc-timeout`: `99999999H`.
const MAX_GRPC: Duration = Duration::from_secs(99_999_999 * 3600);

fuzz_target!(|data: &[u8]| {
    let Some((&selector, value)) = data.split_first() else {
        return;
    };
    check_parsers(value);

    let index = usize::from(selector % 8);
    let name = INBOUND.get(index).cloned().unwrap_or(http::header::ACCEPT);
    let Ok(header_value) = HeaderValue::from_bytes(value) else {
        return;
    };
    let mut headers = HeaderMap::new();
    headers.insert(name.clone(), header_value);
    check_decode(&headers, &name, value);
    check_resolve(&headers, &name);
});

/// Both value parsers, on any bytes, against an independent reading.
fn check_parsers(value: &[u8]) {
    let millis = parse_millis(value);
    let grpc = parse_grpc_timeout(value);

    let all_digits = !value.is_empty() && value.iter().all(u8::is_ascii_digit);
    if all_digits && value.len() <= 10 {
        let n: u64 = std::str::from_utf8(value).unwrap().parse().unwrap();
        assert_eq!(millis, Ok(Duration::from_millis(n)), "{value:?}");
    } else {
        assert!(millis.is_err(), "{value:?} read as {millis:?}");
    }
    if let Ok(d) = millis {
        assert!(d <= MAX_MILLIS);
    }

    // 1 to 8 digits and one unit letter: always valid, and exactly this.
    if let Some((&unit, digits)) = value.split_last()
        && (1..=8).contains(&digits.len())
        && digits.iter().all(u8::is_ascii_digit)
        && let Some(unit) = unit_of(unit)
    {
        let n: u32 = std::str::from_utf8(digits).unwrap().parse().unwrap();
        assert_eq!(grpc, Ok(unit * n), "{value:?}");
    } else {
        assert!(grpc.is_err(), "{value:?} read as {grpc:?}");
    }
    if let Ok(d) = grpc {
        assert!(d <= MAX_GRPC);
    }
    for reason in [millis.err(), grpc.err()].into_iter().flatten() {
        assert!(!reason.to_string().is_empty());
    }
}

fn unit_of(letter: u8) -> Option<Duration> {
    Some(match letter {
        b'n' => Duration::from_nanos(1),
        b'u' => Duration::from_micros(1),
        b'm' => Duration::from_millis(1),
        b'S' => Duration::from_secs(1),
        b'M' => Duration::from_secs(60),
        b'H' => Duration::from_secs(3600),
        _ => return None,
    })
}

/// `decode` on one header: the same answer as that format's parser.
fn check_decode(headers: &HeaderMap, name: &HeaderName, value: &[u8]) {
    let is_grpc = *name == GRPC_TIMEOUT;
    let parsed = if is_grpc {
        parse_grpc_timeout(value)
    } else {
        parse_millis(value)
    };
    match header::decode(headers) {
        Decoded::Absent => assert!(!INBOUND.contains(name), "{name} ignored"),
        Decoded::Valid { budget, header } => {
            assert_eq!(&header, name);
            assert_eq!(parsed, Ok(budget));
            assert!(budget <= if is_grpc { MAX_GRPC } else { MAX_MILLIS });
            // Re-encoded, it reads back the same: every valid value is a
            // whole number of its unit, so nothing is rounded away.
            let wire = if is_grpc {
                encode_grpc_timeout(budget)
            } else {
                encode_ms(budget)
            };
            let mut again = HeaderMap::new();
            again.insert(header.clone(), wire.clone());
            assert_eq!(
                header::decode(&again),
                Decoded::Valid { budget, header },
                "{value:?} re-encoded as {wire:?}"
            );
        }
        Decoded::Invalid(err) => {
            assert_eq!(err.header(), name);
            assert_eq!(Err(err.reason()), parsed);
            assert!(err.value().chars().count() <= 64);
            assert!(err.to_string().starts_with("malformed `"));
        }
    }
}

/// The ingress policy: clamped to the maximum; `use-default` never refuses.
fn check_resolve(headers: &HeaderMap, name: &HeaderName) {
    let (default, max) = (Duration::from_secs(2), Duration::from_secs(10));
    let strict = Inbound::new(default, max).unwrap();
    let lenient = strict.with_on_malformed(OnMalformed::UseDefault);
    let strict = strict.resolve(headers);
    let lenient = lenient.resolve(headers).expect("use-default never refuses");
    assert!(lenient.budget <= max);
    match strict {
        Ok(resolved) => {
            assert_eq!(resolved, lenient);
            assert!(resolved.budget <= max);
            match &resolved.source {
                Some(source) => assert_eq!(source, name),
                None => assert_eq!((resolved.budget, resolved.clamped), (default, false)),
            }
        }
        Err(err) => {
            assert_eq!(err.header(), name);
            assert_eq!((lenient.budget, lenient.source), (default, None));
        }
    }
}
