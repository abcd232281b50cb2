//! Fuzz targets, as property tests, in the test suite beside the
//! coverage-guided `cargo fuzz` targets of `fuzz/` (docs/operations.md, "Fuzzing"): the
//! parsers that take peer or user input, driven by proptest with generated
//! input.
//! Each target asserts what must hold for *any* input: no panic, and an
//! answer of the documented shape (a typed error or a bounded value).
//!
//! CI runs the default 256 cases per target. The long run (10^6 each):
//!
//!     PROPTEST_CASES=1000000 cargo test --release -p budget-core --all-features --test fuzz
//!
//! A failure prints the minimal input; add it to the unit tests of the
//! parser as a regression test.

use std::time::{Duration, SystemTime};

use budget_core::client::DependencyConfig;
use budget_core::header::{self, Decoded, INBOUND, Inbound};
use budget_core::retry::{RetryConfig, parse_retry_after};
use budget_core::server::ServerConfig;
use http::{HeaderMap, HeaderValue};
use proptest::prelude::*;

/// Header values: digits, units, signs and separators often; any byte a
/// header value may hold sometimes.
fn header_value() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        6 => b'0'..=b'9',
        2 => prop::sample::select(b"HMSmun+-. \t,:eE".to_vec()),
        1 => 0x20u8..=0x7e,
        1 => 0x80u8..=0xff,
    ];
    prop::collection::vec(byte, 0..32)
}

/// TOML-ish text: keys of the configs, durations, numbers and junk.
fn config_text() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("default_budget = ".to_owned()),
        Just("max_budget = ".to_owned()),
        Just("floor = ".to_owned()),
        Just("reserve = ".to_owned()),
        Just("max_in_flight = ".to_owned()),
        Just("max_attempts = ".to_owned()),
        Just("attempt_timeout = ".to_owned()),
        Just("retry_after_max = ".to_owned()),
        Just("[backoff]\n".to_owned()),
        Just("initial = ".to_owned()),
        Just("multiplier = ".to_owned()),
        Just("name = \"pricing\"\n".to_owned()),
        Just("url = \"http://127.0.0.1:9/p?q=1\"\n".to_owned()),
        Just("connect_cap = ".to_owned()),
        Just("concurrency = ".to_owned()),
        (0u64..100_000).prop_map(|n| format!("\"{n}ms\"\n")),
        (0u64..u64::MAX).prop_map(|n| format!("\"{n}s\"\n")),
        any::<i64>().prop_map(|n| format!("{n}\n")),
        any::<f64>().prop_map(|f| format!("{f}\n")),
        "[ -~\n]{0,12}",
    ];
    prop::collection::vec(token, 0..12).prop_map(|t| t.concat())
}

proptest! {
    /// Every inbound format at once, any values: `decode` answers absent,
    /// valid (at most the largest value a header can carry) or invalid
    /// naming one of the headers; it never panics.
    #[test]
    fn fuzz_budget_header_decoder(values in prop::collection::vec((0..INBOUND.len(), header_value()), 0..8)) {
        let mut headers = HeaderMap::new();
        for (i, bytes) in values {
            if let Ok(v) = HeaderValue::from_bytes(&bytes) {
                headers.append(INBOUND[i].clone(), v);
            }
        }
        match header::decode(&headers) {
            Decoded::Absent => prop_assert!(headers.is_empty()),
            Decoded::Valid { budget, header } => {
                prop_assert!(INBOUND.contains(&header));
                prop_assert!(budget <= Duration::from_secs(99_999_999 * 3600));
            }
            Decoded::Invalid(e) => {
                prop_assert!(INBOUND.contains(e.header()));
                prop_assert!(e.value().chars().count() <= 64);
            }
        }
        let inbound = Inbound::new(Duration::from_secs(2), Duration::from_secs(10)).unwrap();
        if let Ok(resolved) = inbound.resolve(&headers) {
            prop_assert!(resolved.budget <= Duration::from_secs(10));
        }
    }

    /// Any bytes as `Retry-After`, at any wall-clock time: a duration or a
    /// typed error, never a panic.
    #[test]
    fn fuzz_retry_after_parser(bytes in header_value(), now_secs in 0u64..8_000_000_000) {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(now_secs);
        let _ = parse_retry_after(&bytes, now);
    }

    /// Any date-shaped text as `Retry-After`.
    #[test]
    fn fuzz_retry_after_dates(text in "[A-Za-z]{3}, [0-9]{1,2} [A-Za-z]{3} [0-9]{1,5} [0-9:]{1,9} [A-Z]{1,4}") {
        let _ = parse_retry_after(text.as_bytes(), SystemTime::UNIX_EPOCH);
    }

    /// Config files: parse, then validate; either step may refuse with an
    /// error naming the problem, neither may panic.
    #[test]
    fn fuzz_config_loader(text in config_text()) {
        if let Ok(c) = toml::from_str::<ServerConfig>(&text)
            && let Err(e) = c.layer()
        {
            prop_assert!(!e.field().is_empty());
        }
        if let Ok(c) = toml::from_str::<RetryConfig>(&text)
            && let Err(e) = c.build()
        {
            prop_assert!(!e.field().is_empty());
        }
        if let Ok(c) = toml::from_str::<DependencyConfig>(&text)
            && let Err(e) = c.build()
        {
            prop_assert!(!e.field().is_empty());
        }
    }
}
