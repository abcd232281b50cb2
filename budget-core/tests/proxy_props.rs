//! Property tests of Envoy's marks (docs/contract.md §2, "Envoy in the
//! path"): reading a proxy's answer never panics on any head or body, an
//! answer carrying `x-envoy-upstream-service-time` is never Envoy's own,
//! and an upstream time is read back as written or named as malformed,
//! never as zero.

use std::time::Duration;

use budget_core::proxy::{ProxyReply, X_ENVOY_UPSTREAM_SERVICE_TIME, upstream_time};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use proptest::prelude::*;

/// The headers the rule reads, and one it does not.
const NAMES: [&str; 8] = [
    "server",
    "x-envoy-overloaded",
    "x-envoy-response-flags",
    "x-envoy-upstream-service-time",
    "grpc-status",
    "grpc-message",
    "content-type",
    "x-other",
];

/// Any header value: Envoy's own words and flags well represented, and any
/// visible bytes.
fn any_value() -> impl Strategy<Value = HeaderValue> {
    prop_oneof![
        prop::sample::select(vec![
            "envoy",
            "true",
            "UT",
            "URX,UT",
            "UO",
            "-",
            "4",
            "14",
            "0",
            "12",
            "upstream request timeout",
            "no healthy upstream",
        ])
        .prop_map(HeaderValue::from_static),
        prop::collection::vec(0x20u8..0x7f, 0..40)
            .prop_map(|bytes| HeaderValue::from_bytes(&bytes).expect("visible ASCII")),
    ]
}

fn any_head() -> impl Strategy<Value = HeaderMap> {
    prop::collection::vec((prop::sample::select(NAMES.to_vec()), any_value()), 0..8).prop_map(
        |pairs| {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                headers.append(HeaderName::from_static(name), value);
            }
            headers
        },
    )
}

proptest! {
    #[test]
    fn reading_any_answer_never_panics_and_a_carried_one_is_never_envoy_s(
        status in 100u16..600,
        mut headers in any_head(),
        body in prop::option::of(prop::collection::vec(any::<u8>(), 0..600)),
    ) {
        let status = StatusCode::from_u16(status).expect("a status in range");
        if let Some(reply) = ProxyReply::recognise(status, &headers, body.as_deref()) {
            let text = reply.to_string();
            prop_assert!(text.starts_with("envoy"), "{}", text);
            prop_assert!(!reply.refusal().label().is_empty());
        }
        let _ = upstream_time(&headers);
        headers.insert(X_ENVOY_UPSTREAM_SERVICE_TIME, HeaderValue::from_static("3"));
        prop_assert_eq!(ProxyReply::recognise(status, &headers, body.as_deref()), None);
    }

    #[test]
    fn an_upstream_time_reads_back_as_written_or_is_malformed(value in any_value(), ms in 0u64..10_000_000_000) {
        let mut headers = HeaderMap::new();
        headers.insert(X_ENVOY_UPSTREAM_SERVICE_TIME, HeaderValue::from(ms));
        prop_assert_eq!(upstream_time(&headers), Some(Ok(Duration::from_millis(ms))));
        headers.insert(X_ENVOY_UPSTREAM_SERVICE_TIME, value.clone());
        let digits = !value.is_empty() && value.len() <= 10 && value.as_bytes().iter().all(u8::is_ascii_digit);
        match upstream_time(&headers) {
            Some(Ok(_)) => prop_assert!(digits, "{:?} read as a time", value),
            Some(Err(malformed)) => {
                prop_assert!(!digits);
                prop_assert_eq!(malformed.header().as_str(), "x-envoy-upstream-service-time");
            }
            None => prop_assert!(false, "a present header read as absent"),
        }
    }
}
