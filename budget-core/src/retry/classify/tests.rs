//! The classification rules (docs/contract.md §2 rules 4 to 6, and
//! "Envoy in the path").

use super::*;
use std::time::SystemTime;

use crate::clock::FixedClock;

fn class(code: u16) -> Class {
    Classifier::default().classify(&Outcome::status(StatusCode::from_u16(code).unwrap()))
}

#[test]
fn rule5_408_429_500_502_503_504_are_retryable() {
    for code in [408, 429, 500, 502, 503, 504] {
        assert_eq!(class(code), Class::Retryable, "{code}");
    }
}

#[test]
fn rule5_other_4xx_never_retry() {
    for code in (400..=499).filter(|c| ![408, 429].contains(c)) {
        assert_eq!(class(code), Class::Fatal, "{code}");
    }
}

#[test]
fn rule5_other_5xx_are_final_by_default() {
    for code in [501, 505, 506, 507, 508, 510, 511, 599] {
        assert_eq!(class(code), Class::Fatal, "{code}");
    }
}

#[test]
fn rule5_1xx_2xx_3xx_are_success() {
    for code in [100, 101, 200, 201, 204, 206, 301, 304, 308, 399] {
        assert_eq!(class(code), Class::Success, "{code}");
    }
}

#[test]
fn rule5_the_status_set_is_configurable() {
    let c = Classifier::with_statuses([StatusCode::CONFLICT, StatusCode::CONFLICT]);
    assert_eq!(c.statuses(), &[StatusCode::CONFLICT]);
    assert_eq!(
        c.classify(&Outcome::status(StatusCode::CONFLICT)),
        Class::Retryable
    );
    assert_eq!(
        c.classify(&Outcome::status(StatusCode::SERVICE_UNAVAILABLE)),
        Class::Fatal
    );
    // Transport failures are not part of the status set.
    assert_eq!(
        c.classify(&Outcome::Transport(TransportKind::Connect)),
        Class::Retryable
    );
}

#[test]
fn rule5_connect_failure_connect_timeout_attempt_timeout_and_reset_retry() {
    let c = Classifier::default();
    for kind in [
        TransportKind::Connect,
        TransportKind::ConnectTimeout,
        TransportKind::Timeout,
        TransportKind::Reset,
    ] {
        assert_eq!(
            c.classify(&Outcome::Transport(kind)),
            Class::Retryable,
            "{kind}"
        );
    }
    for kind in [TransportKind::Body, TransportKind::Other] {
        assert_eq!(
            c.classify(&Outcome::Transport(kind)),
            Class::Fatal,
            "{kind}"
        );
    }
}

#[test]
fn rule4_get_head_options_put_delete_trace_are_idempotent() {
    let h = HeaderMap::new();
    for m in [
        Method::GET,
        Method::HEAD,
        Method::OPTIONS,
        Method::PUT,
        Method::DELETE,
        Method::TRACE,
    ] {
        assert!(is_idempotent(&m, &h), "{m}");
    }
    assert!(!is_idempotent(&Method::CONNECT, &h));
    assert!(!is_idempotent(&Method::from_bytes(b"PURGE").unwrap(), &h));
}

#[test]
fn rule4_post_and_patch_retry_only_with_an_idempotency_key() {
    let mut h = HeaderMap::new();
    assert!(!is_idempotent(&Method::POST, &h));
    assert!(!is_idempotent(&Method::PATCH, &h));
    h.insert(IDEMPOTENCY_KEY, " ".parse().unwrap());
    assert!(!is_idempotent(&Method::POST, &h), "an empty key is no key");
    h.insert(IDEMPOTENCY_KEY, "abc".parse().unwrap());
    assert!(is_idempotent(&Method::POST, &h));
    assert!(is_idempotent(&Method::PATCH, &h));
    // The key does not make a non-idempotent extension method safe.
    assert!(!is_idempotent(&Method::CONNECT, &h));
}

#[test]
fn rule6_from_response_reads_retry_after_and_ignores_a_malformed_one() {
    let clock = FixedClock::new(SystemTime::UNIX_EPOCH);
    let mut h = HeaderMap::new();
    h.insert(RETRY_AFTER, "7".parse().unwrap());
    let o = Outcome::from_response(StatusCode::TOO_MANY_REQUESTS, &h, &clock);
    assert_eq!(o.retry_after(), Some(Duration::from_secs(7)));
    assert_eq!(o.status_code(), Some(StatusCode::TOO_MANY_REQUESTS));
    h.insert(RETRY_AFTER, "soon".parse().unwrap());
    let o = Outcome::from_response(StatusCode::TOO_MANY_REQUESTS, &h, &clock);
    assert_eq!(o.retry_after(), None);
    assert_eq!(Classifier::default().classify(&o), Class::Retryable);
}

#[test]
fn envoy_s_shedding_is_final_its_timeouts_and_failed_connections_retry() {
    use crate::proxy::{ProxyRefusal as R, ProxyReply};
    let c = Classifier::default();
    let http = |r| {
        c.classify(&Outcome::Proxy(ProxyReply::new(
            r,
            StatusCode::SERVICE_UNAVAILABLE,
        )))
    };
    assert_eq!(http(R::Overflow), Class::Fatal);
    assert_eq!(http(R::ConcurrencyLimit), Class::Fatal);
    for r in [
        R::UpstreamTimeout,
        R::StreamDuration,
        R::ConnectFailure,
        R::UpstreamReset,
        R::NoHealthyUpstream,
    ] {
        assert_eq!(http(r), Class::Retryable, "{r:?}");
    }
    // Another local reply: as its status, or its gRPC code.
    let other = |status| Outcome::Proxy(ProxyReply::new(R::Other, status));
    assert_eq!(
        c.classify(&other(StatusCode::SERVICE_UNAVAILABLE)),
        Class::Retryable
    );
    assert_eq!(c.classify(&other(StatusCode::NOT_FOUND)), Class::Fatal);
    assert_eq!(
        c.classify(&Outcome::Proxy(ProxyReply::grpc(R::Other, 3))),
        Class::Fatal
    );
    assert_eq!(
        c.classify(&Outcome::Proxy(ProxyReply::grpc(R::Overflow, 14))),
        Class::Fatal
    );
    // Not the dependency's status, and no Retry-After of its own.
    let o = other(StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!((o.status_code(), o.retry_after()), (None, None));
    assert_eq!(o.to_string(), "envoy: local reply (503)");
}

#[test]
fn outcomes_render_as_the_ledger_records_them() {
    assert_eq!(Outcome::status(StatusCode::BAD_GATEWAY).to_string(), "502");
    let names: Vec<String> = [
        TransportKind::Connect,
        TransportKind::ConnectTimeout,
        TransportKind::Timeout,
        TransportKind::Reset,
        TransportKind::Body,
        TransportKind::Other,
    ]
    .iter()
    .map(|k| Outcome::Transport(*k).to_string())
    .collect();
    assert_eq!(
        names,
        [
            "connect",
            "connect-timeout",
            "timeout",
            "reset",
            "body",
            "other"
        ]
    );
}
