//! A slowdown of the whole partner switched at run time (`/admin/slowdown`
//! and `PartnerHandle::set_slowdown`): every work request planned after it
//! waits `factor` times what its query string asks, until it is set back
//! to 1. A real partner on 127.0.0.1:0 and real reqwest clients.

mod common;

use std::time::Duration;

use common::{admin, assert_bad_request, bounded, client, partner};
use reqwest::StatusCode;
use serde_json::{Value, json};
use slow_partner::{Answer, PartnerHandle, SlowdownError};
use tokio::time::Instant;

/// The admin endpoint under test.
const SLOWDOWN: &str = "/admin/slowdown";

/// `GET path_and_query` on the main port: the answer and how long it took.
async fn work(partner: &PartnerHandle, path_and_query: &str) -> (Answer, Duration) {
    let start = Instant::now();
    let response = client()
        .get(partner.url(path_and_query))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let answer: Answer = response.json().await.unwrap();
    (answer, start.elapsed())
}

#[tokio::test]
async fn put_factor_10_makes_every_wait_ten_times_longer_until_it_is_set_back() {
    bounded(async {
        let partner = partner().await;
        let (status, _, body) = admin(&partner, reqwest::Method::GET, SLOWDOWN, "").await;
        assert_eq!((status, body), (StatusCode::OK, json!({"factor": 1})));

        let (status, _, body) = admin(
            &partner,
            reqwest::Method::PUT,
            SLOWDOWN,
            r#"{"factor": 10}"#,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, json!({"factor": 10, "previous": 1}));
        assert_eq!(partner.slowdown().factor(), 10);

        // delay 30 ms: 300 ms; a script's delay too.
        let (answer, took) = work(&partner, "/pricing?delay=30ms").await;
        assert_eq!(answer.delay_ms, 300);
        assert!(took >= Duration::from_millis(300), "{took:?}");
        let (answer, _) = work(&partner, "/pricing?script=200@20ms").await;
        assert_eq!(answer.delay_ms, 200);
        // Jitter is multiplied with it: 0 + up to 10 ms becomes up to 100.
        let (answer, _) = work(&partner, "/inventory?jitter=10ms").await;
        assert!(answer.delay_ms <= 100, "{answer:?}");

        // The main port takes it too, with POST; back to 1.
        let back = client()
            .post(partner.url("/admin/slowdown"))
            .body(r#"{"factor": 1}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(back.status(), StatusCode::OK);
        assert_eq!(
            back.json::<Value>().await.unwrap(),
            json!({"factor": 1, "previous": 10})
        );
        let (answer, took) = work(&partner, "/pricing?delay=30ms").await;
        assert_eq!(answer.delay_ms, 30);
        assert!(took < Duration::from_millis(300), "{took:?}");
        // Four work requests; the admin calls are not counted.
        assert_eq!(partner.requests(), 4);
        assert_eq!(partner.requests(), partner.stats().requests);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_request_keeps_the_factor_it_was_planned_with_and_overrides_are_not_slowed() {
    bounded(async {
        let partner = partner().await;
        partner.set_slowdown(10).unwrap();
        // Planned at 10x (500 ms); the slowdown ends while it waits. The
        // client is made first: with native-tls (`--all-features`)
        // making one loads the CA store, tens of milliseconds.
        let slow = tokio::spawn({
            let url = partner.url("/pricing?delay=50ms");
            let client = client();
            async move { client.get(url).send().await.unwrap().json::<Answer>().await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(partner.set_slowdown(1).unwrap().factor(), 10);
        assert_eq!(slow.await.unwrap().unwrap().delay_ms, 500);

        // An overridden path answers at once, slowdown or not.
        partner.set_slowdown(100).unwrap();
        partner.set_path_status("/pricing", Some(503)).unwrap();
        let start = Instant::now();
        let res = client()
            .get(partner.url("/pricing?delay=1s"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(start.elapsed() < Duration::from_millis(500));
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn bad_slowdown_input_is_a_400_problem_naming_it_and_changes_nothing() {
    bounded(async {
        let partner = partner().await;
        partner.set_slowdown(3).unwrap();
        for (body, parameter) in [
            ("", "body"),
            ("10", "body"),
            ("{}", "body"),
            (r#"{"factor": 10, "delay": "1s"}"#, "body"),
            (r#"{"factor": "10"}"#, "factor"),
            (r#"{"factor": 0}"#, "factor"),
            (r#"{"factor": 101}"#, "factor"),
            (r#"{"factor": -2}"#, "factor"),
            (r#"{"factor": 1.5}"#, "factor"),
            (r#"{"factor": 18446744073709551616}"#, "factor"),
        ] {
            let answer = admin(&partner, reqwest::Method::PUT, SLOWDOWN, body).await;
            assert_bad_request(&answer, parameter, body);
        }
        assert_eq!(partner.slowdown().factor(), 3, "unchanged");
        assert_eq!(
            partner.set_slowdown(101).unwrap_err(),
            SlowdownError::Factor(101)
        );
        assert_eq!(partner.slowdown().factor(), 3);
        partner.shutdown().await;
    })
    .await;
}
