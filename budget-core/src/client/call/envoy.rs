//! The HTTP client's calls through Envoy (docs/contract.md §2, "Envoy in
//! the path"): its own refusals classified as the proxy's, with their
//! retry and breaker rules, and its upstream time in the ledger. The
//! answers' heads and bodies are Envoy 1.40's, recorded with curl.

use std::sync::Mutex;

use bytes::Bytes;
use http::StatusCode;

use super::run;
use crate::breaker::{BreakerConfig, BreakerState};
use crate::budget::Budget;
use crate::ledger::Ledger;
use crate::outbound::attempt::Tried;
use crate::outbound::testing::{Fake, clock, config, ms, plan};
use crate::outbound::{AttemptSpec, Timing};

/// An answer of `status` with `headers` and `body`, after 20 ms.
async fn answer(
    status: u16,
    headers: &[(&'static str, &'static str)],
    body: &'static str,
) -> Tried<http::Response<Bytes>> {
    tokio::time::sleep(ms(20)).await;
    let mut res = http::Response::new(Bytes::from_static(body.as_bytes()));
    *res.status_mut() = StatusCode::from_u16(status).unwrap();
    for (name, value) in headers {
        res.headers_mut().insert(*name, value.parse().unwrap());
    }
    Ok(res)
}

const OVERFLOW: [(&str, &str); 3] = [
    ("server", "envoy"),
    ("content-type", "text/plain"),
    ("x-envoy-overloaded", "true"),
];
const OVERFLOW_BODY: &str =
    "upstream connect error or disconnect/reset before headers. reset reason: overflow";

/// Three attempts, a breaker that opens at the second failure.
fn settings() -> crate::client::config::Settings {
    let mut c = config();
    c.breaker = Some(BreakerConfig {
        failure_threshold: 2,
        open_for: ms(5000),
        ..Default::default()
    });
    c.settings(None).unwrap()
}

fn budget(ledger: &Ledger) -> crate::outbound::Plan {
    plan(Timing::Budget(Budget::new(ms(2000))), ledger)
}

/// The mesh shedding load: one attempt (Envoy does not retry an
/// overloaded answer, nor do we), the answer passed on as it came, named
/// as Envoy's in the ledger, and the breaker untouched however often.
#[tokio::test(start_paused = true)]
async fn envoy_s_overflow_is_named_not_retried_and_not_held_against_the_partner() {
    let settings = settings();
    let sent = Mutex::new(0);
    for _ in 0..3 {
        let ledger = Ledger::new();
        let res = run(
            &settings,
            &clock(),
            budget(&ledger),
            &Fake(|_: AttemptSpec| {
                *sent.lock().unwrap() += 1;
                answer(503, &OVERFLOW, OVERFLOW_BODY)
            }),
        )
        .await
        .unwrap();
        assert_eq!(
            (res.status(), res.attempts()),
            (StatusCode::SERVICE_UNAVAILABLE, 1)
        );
        assert_eq!(
            ledger.server_timing(),
            "pricing;dur=20;desc=\"envoy UO: upstream overflow (503)\""
        );
    }
    assert_eq!(*sent.lock().unwrap(), 3);
    let breaker = settings.dependency.endpoints.breaker().unwrap();
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// The route's timeout, an empty-bodied `504`: the partner too slow for
/// the route. Retried as a timeout is, each attempt named, and held
/// against the partner by its breaker.
#[tokio::test(start_paused = true)]
async fn envoy_s_route_timeout_is_named_retried_and_counted_against_the_partner() {
    let settings = settings();
    let ledger = Ledger::new();
    let err = run(
        &settings,
        &clock(),
        budget(&ledger),
        &Fake(|_: AttemptSpec| answer(504, &[("server", "envoy")], "")),
    )
    .await;
    // The breaker opened at the second failure: the third attempt was
    // refused.
    let timing = ledger.server_timing();
    assert!(
        timing.starts_with(
            "pricing;dur=20;desc=\"envoy UT: upstream request timeout (504)\", pricing-wait;dur=100, \
             pricing;dur=20;desc=\"envoy UT: upstream request timeout (504)\""
        ),
        "{timing}"
    );
    assert!(
        timing.ends_with("pricing;desc=\"skipped: circuit open\""),
        "{timing}"
    );
    assert_eq!(err.unwrap().status(), StatusCode::GATEWAY_TIMEOUT);
    let breaker = settings.dependency.endpoints.breaker().unwrap();
    assert_eq!(breaker.state(), BreakerState::Open);
}

const CARRIED_503: [(&str, &str); 2] =
    [("server", "envoy"), ("x-envoy-upstream-service-time", "12")];
const CARRIED_200: [(&str, &str); 2] =
    [("server", "envoy"), ("x-envoy-upstream-service-time", "17")];

/// The partner's own `503`, carried by Envoy: the partner's answer (its
/// status, its retries), with Envoy's upstream time in each step; a `2xx`
/// with it too.
#[tokio::test(start_paused = true)]
async fn a_partner_s_answer_through_envoy_shows_envoy_s_upstream_time() {
    let settings = config().settings(None).unwrap();
    let ledger = Ledger::new();
    let tried = Mutex::new(0);
    let res = run(
        &settings,
        &clock(),
        budget(&ledger),
        &Fake(|_: AttemptSpec| {
            let mut n = tried.lock().unwrap();
            *n += 1;
            if *n == 1 {
                answer(503, &CARRIED_503, "{}")
            } else {
                answer(200, &CARRIED_200, "{}")
            }
        }),
    )
    .await
    .unwrap();
    assert_eq!((res.status(), res.attempts()), (StatusCode::OK, 2));
    assert_eq!(
        ledger.server_timing(),
        "pricing;dur=20;desc=\"503 (upstream 12ms)\", pricing-wait;dur=100, \
         pricing;dur=20;desc=\"200 (upstream 17ms)\""
    );
}

/// A non-numeric `x-envoy-upstream-service-time`: the answer stands, and
/// the step says the value was unreadable (never a zero).
#[tokio::test(start_paused = true)]
async fn a_malformed_upstream_time_is_a_ledger_note() {
    let settings = config().settings(None).unwrap();
    let ledger = Ledger::new();
    let res = run(
        &settings,
        &clock(),
        budget(&ledger),
        &Fake(|_: AttemptSpec| answer(200, &[("x-envoy-upstream-service-time", "fast")], "{}")),
    )
    .await
    .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        ledger.server_timing(),
        "pricing;dur=20;desc=\"200 (malformed `x-envoy-upstream-service-time` header \
         \\\"fast\\\": non-digit character 'f')\""
    );
}
