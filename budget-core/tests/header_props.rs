//! Property tests of the header codec: the parsers never panic on any
//! bytes, and an encoded budget never decodes to more than it was.

use std::time::Duration;

use budget_core::header::{
    self, Decoded, GRPC_TIMEOUT, INBOUND, REQUEST_BUDGET_MS, encode_grpc_timeout, encode_ms,
    parse_grpc_timeout, parse_millis,
};
use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;

/// The largest value each encoder writes without saturating.
const MAX_MS: Duration = Duration::from_millis(9_999_999_999);
const MAX_GRPC: Duration = Duration::from_secs(99_999_999 * 3600);

/// The unit a `grpc-timeout` value is written in.
fn grpc_unit(wire: &[u8]) -> Duration {
    match wire.last() {
        Some(b'n') => Duration::from_nanos(1),
        Some(b'u') => Duration::from_micros(1),
        Some(b'm') => Duration::from_millis(1),
        Some(b'S') => Duration::from_secs(1),
        Some(b'M') => Duration::from_secs(60),
        Some(b'H') => Duration::from_secs(3600),
        other => panic!("not a grpc-timeout unit: {other:?}"),
    }
}

/// Any duration, with the edges and the saturation points well represented.
fn any_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (any::<u64>(), 0..1_000_000_000u32).prop_map(|(s, n)| Duration::new(s, n)),
        (0..200_000u64).prop_map(Duration::from_millis),
        (0..u64::MAX).prop_map(Duration::from_nanos),
        Just(Duration::ZERO),
        Just(Duration::MAX),
        Just(MAX_MS),
        Just(MAX_GRPC),
    ]
}

/// Bytes that look like budget values more often than uniform bytes do.
fn value_bytes() -> impl Strategy<Value = Vec<u8>> {
    let alphabet = prop_oneof![
        4 => b'0'..=b'9',
        1 => prop::sample::select(b"HMSmunx+-. \t,".to_vec()),
        1 => any::<u8>(),
    ];
    prop::collection::vec(alphabet, 0..24)
}

fn decode_one(name: &HeaderName, value: HeaderValue) -> Decoded {
    let mut headers = HeaderMap::new();
    headers.insert(name.clone(), value);
    header::decode(&headers)
}

proptest! {
    #[test]
    fn parsers_never_panic_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = parse_millis(&bytes);
        let _ = parse_grpc_timeout(&bytes);
    }

    #[test]
    fn decode_never_panics_and_agrees_with_the_parsers(bytes in value_bytes(), at in 0..INBOUND.len()) {
        // Only what HTTP allows in a value can reach `decode`.
        if let Ok(value) = HeaderValue::from_bytes(&bytes) {
            let name = &INBOUND[at];
            let parsed = if *name == GRPC_TIMEOUT { parse_grpc_timeout(&bytes) } else { parse_millis(&bytes) };
            match (decode_one(name, value), parsed) {
                (Decoded::Valid { budget, header }, Ok(d)) => {
                    prop_assert_eq!(budget, d);
                    prop_assert_eq!(&header, name);
                }
                (Decoded::Invalid(err), Err(reason)) => {
                    prop_assert_eq!(err.header(), name);
                    prop_assert_eq!(err.reason(), reason);
                    prop_assert!(err.value().chars().count() <= 64);
                }
                (decoded, parsed) => prop_assert!(false, "{decoded:?} vs {parsed:?}"),
            }
        }
    }

    #[test]
    fn decode_of_encode_ms_never_exceeds_and_loses_under_a_millisecond(d in any_duration()) {
        let Decoded::Valid { budget, .. } = decode_one(&REQUEST_BUDGET_MS, encode_ms(d)) else {
            return Err(TestCaseError::fail("encode_ms wrote an unreadable value"));
        };
        prop_assert!(budget <= d);
        if d <= MAX_MS {
            prop_assert!(d - budget < Duration::from_millis(1), "{d:?} -> {budget:?}");
        } else {
            prop_assert_eq!(budget, MAX_MS);
        }
    }

    /// Rounded up, as grpc-go does (the contract): never short, and over
    /// by less than one unit of the finest unit that fits.
    #[test]
    fn decode_of_encode_grpc_is_never_short_and_over_by_under_one_unit(d in any_duration()) {
        let wire = encode_grpc_timeout(d);
        prop_assert!(wire.len() <= 9, "{wire:?}");
        let unit = grpc_unit(wire.as_bytes());
        let Decoded::Valid { budget, .. } = decode_one(&GRPC_TIMEOUT, wire) else {
            return Err(TestCaseError::fail("encode_grpc_timeout wrote an unreadable value"));
        };
        if d <= MAX_GRPC {
            prop_assert!(budget >= d, "{d:?} -> {budget:?}");
            prop_assert!(budget - d < unit, "{d:?} -> {budget:?}");
        } else {
            prop_assert_eq!(budget, MAX_GRPC);
        }
    }
}
