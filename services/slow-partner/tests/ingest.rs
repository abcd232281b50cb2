//! `POST /ingest` on the wire (docs/binaries.md): batches applied once per
//! `Idempotency-Key`, the failing window's four modes, the batch limit,
//! and the counters of `GET /admin/ingest`.

mod common;

use std::time::Duration;

use common::{admin, assert_bad_request, bounded, client, partner};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use slow_partner::PartnerHandle;

async fn post(partner: &PartnerHandle, key: Option<&str>, body: &str) -> reqwest::Response {
    let mut request = client().post(partner.url("/ingest")).body(body.to_owned());
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    request.send().await.unwrap()
}

/// Ends the partner's ingest failure window at once.
async fn recover(partner: &PartnerHandle) {
    admin(
        partner,
        Method::PUT,
        "/admin/ingest",
        r#"{"fail_for":null}"#,
    )
    .await;
}

async fn counters(partner: &PartnerHandle) -> Value {
    admin(partner, Method::GET, "/admin/ingest", "").await.2
}

#[tokio::test]
async fn a_batch_is_applied_once_per_key() {
    bounded(async {
        let partner = partner().await;
        let first = post(&partner, Some("batch-1"), r#"[1,{"a":2},"x"]"#).await;
        assert_eq!(first.status(), StatusCode::OK);
        assert_eq!(
            first.json::<Value>().await.unwrap(),
            json!({"applied":true,"items":3})
        );
        let again = post(&partner, Some("batch-1"), r#"[1,{"a":2},"x"]"#).await;
        assert_eq!(
            again.json::<Value>().await.unwrap(),
            json!({"applied":false,"duplicate":true,"items":3})
        );
        let other = post(&partner, Some("batch-2"), "[]").await;
        assert_eq!(
            other.json::<Value>().await.unwrap(),
            json!({"applied":true,"items":0})
        );
        assert_eq!(
            counters(&partner).await,
            json!({"batches_applied":2,"items_applied":3,"items_applied_again":0,
                   "duplicates":1,"requests":3,
                   "requests_while_failing":0,"failing":false,"keys":2,
                   "max_batch_bytes":1048576})
        );
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_bad_key_or_body_is_a_problem_naming_it() {
    bounded(async {
        let partner = partner().await;
        let long = "k".repeat(201);
        for key in [None, Some(""), Some("has space"), Some(long.as_str())] {
            let response = post(&partner, key, "[1]").await;
            assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{key:?}");
            assert_eq!(
                response.headers()["content-type"],
                "application/problem+json"
            );
            let problem: Value = response.json().await.unwrap();
            assert_eq!(
                problem["type"],
                "urn:slow-partner:problem:bad-idempotency-key"
            );
            assert_eq!(problem["parameter"], "Idempotency-Key");
        }
        let max_key = "k".repeat(200);
        assert_eq!(
            post(&partner, Some(&max_key), "[1]").await.status(),
            StatusCode::OK
        );
        for body in ["{}", "not json", "[1"] {
            let response = post(&partner, Some("b"), body).await;
            assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{body}");
            let problem: Value = response.json().await.unwrap();
            assert_eq!(problem["parameter"], "body");
        }
        assert_eq!(counters(&partner).await["batches_applied"], 1);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_batch_over_the_limit_is_413() {
    bounded(async {
        let partner = partner().await;
        let (status, _, now) = admin(
            &partner,
            Method::PUT,
            "/admin/ingest",
            r#"{"max_batch_bytes":16}"#,
        )
        .await;
        assert_eq!(
            (status, now["max_batch_bytes"].clone()),
            (StatusCode::OK, json!(16))
        );
        let response = post(&partner, Some("big"), "[1,2,3,4,5,6,7,8,9]").await;
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json"
        );
        assert_eq!(
            post(&partner, Some("small"), "[1,2,3,4,5,6,7]")
                .await
                .status(),
            StatusCode::OK
        );
        assert_eq!(
            counters(&partner).await["keys"],
            1,
            "nothing of the large batch was kept"
        );
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn while_failing_nothing_is_applied_and_retry_after_is_sent() {
    bounded(async {
        let partner = partner().await;
        let body = r#"{"fail_for":"20s","status":503,"retry_after":"1500ms"}"#;
        let (status, _, now) = admin(&partner, Method::PUT, "/admin/ingest", body).await;
        assert_eq!(
            (status, now["failing"].clone()),
            (StatusCode::OK, json!(true))
        );
        let response = post(&partner, Some("b1"), "[1]").await;
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            response.headers()["retry-after"],
            "2",
            "whole seconds, rounded up"
        );
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json"
        );

        recover(&partner).await;
        assert_eq!(
            post(&partner, Some("b1"), "[1]").await.status(),
            StatusCode::OK
        );
        let counts = counters(&partner).await;
        assert_eq!(counts["requests_while_failing"], 1);
        assert_eq!(
            (counts["batches_applied"].clone(), counts["failing"].clone()),
            (json!(1), json!(false))
        );
        for (body, parameter) in [
            (r#"{"fail_for":"20s","mode":"explode"}"#, "mode"),
            (r#"{"fail_for":"20s","status":200}"#, "status"),
            (r#"{"fail_for":3}"#, "fail_for"),
            (r#"{"failing":true}"#, "body"),
        ] {
            let answer = admin(&partner, Method::PUT, "/admin/ingest", body).await;
            assert_bad_request(&answer, parameter, body);
            if parameter == "mode" {
                let detail = answer.2["detail"].as_str().unwrap_or_default();
                assert!(
                    detail.contains("status, hang, reset or applied-reset"),
                    "the valid modes are listed: {detail}"
                );
            }
        }
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_window_ends_by_itself() {
    bounded(async {
        let partner = partner().await;
        admin(
            &partner,
            Method::PUT,
            "/admin/ingest",
            r#"{"fail_for":"300ms","status":500}"#,
        )
        .await;
        assert_eq!(
            post(&partner, Some("b"), "[1]").await.status(),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert_eq!(
            post(&partner, Some("b"), "[1]").await.status(),
            StatusCode::OK
        );
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn mode_hang_holds_the_request_until_the_window_is_lifted() {
    bounded(async {
        let partner = partner().await;
        admin(
            &partner,
            Method::PUT,
            "/admin/ingest",
            r#"{"fail_for":"1h","mode":"hang"}"#,
        )
        .await;
        let held = client()
            .post(partner.url("/ingest"))
            .header("idempotency-key", "h")
            .body("[1]")
            .timeout(Duration::from_millis(300))
            .send()
            .await;
        assert!(
            held.is_err_and(|e| e.is_timeout()),
            "no answer while failing"
        );

        let pending = tokio::spawn({
            let request = client()
                .post(partner.url("/ingest"))
                .header("idempotency-key", "h")
                .body("[1]");
            async move { request.send().await.unwrap().status() }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!pending.is_finished());
        recover(&partner).await;
        assert_eq!(
            pending.await.unwrap(),
            StatusCode::SERVICE_UNAVAILABLE,
            "answered, not applied"
        );
        assert_eq!(counters(&partner).await["batches_applied"], 0);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn mode_reset_closes_the_connection_without_an_answer() {
    bounded(async {
        let partner = partner().await;
        admin(
            &partner,
            Method::PUT,
            "/admin/ingest",
            r#"{"fail_for":"1h","mode":"reset"}"#,
        )
        .await;
        let result = client()
            .post(partner.url("/ingest"))
            .header("idempotency-key", "r")
            .body("[1]")
            .send()
            .await;
        let err = result.expect_err("no answer");
        assert!(!err.is_timeout() && err.status().is_none(), "{err:?}");
        let counts = counters(&partner).await;
        assert_eq!(
            (
                counts["requests"].clone(),
                counts["batches_applied"].clone()
            ),
            (json!(1), json!(0))
        );
        partner.shutdown().await;
    })
    .await;
}

/// Posts `body` under `key` while the endpoint fails with `applied-reset`:
/// the connection closes without an answer.
async fn post_unanswered(partner: &PartnerHandle, key: &str, body: &str) {
    let result = client()
        .post(partner.url("/ingest"))
        .header("idempotency-key", key)
        .body(body.to_owned())
        .send()
        .await;
    let err = result.expect_err("no answer");
    assert!(!err.is_timeout() && err.status().is_none(), "{err:?}");
}

#[tokio::test]
async fn mode_applied_reset_applies_the_batch_then_loses_the_answer() {
    bounded(async {
        let partner = partner().await;
        admin(
            &partner,
            Method::PUT,
            "/admin/ingest",
            r#"{"fail_for":"1h","mode":"applied-reset"}"#,
        )
        .await;
        post_unanswered(&partner, "a", r#"[{"seq":1},{"seq":2}]"#).await;
        let counts = counters(&partner).await;
        assert_eq!(
            [
                &counts["batches_applied"],
                &counts["items_applied"],
                &counts["duplicates"],
                &counts["requests_while_failing"],
            ],
            [&json!(1), &json!(2), &json!(0), &json!(1)],
            "applied, though nobody was told: {counts}"
        );
        // Sent again under the same key, still failing: a duplicate.
        post_unanswered(&partner, "a", r#"[{"seq":1},{"seq":2}]"#).await;
        // Sent again under a new key (what a key per send does): applied
        // twice, and the partner sees the same items again.
        post_unanswered(&partner, "b", r#"[{"seq":1},{"seq":2}]"#).await;
        recover(&partner).await;
        let again = post(&partner, Some("a"), r#"[{"seq":1},{"seq":2}]"#).await;
        assert_eq!(
            again.json::<Value>().await.unwrap(),
            json!({"applied":false,"duplicate":true,"items":2})
        );
        let counts = counters(&partner).await;
        assert_eq!(
            [
                &counts["batches_applied"],
                &counts["items_applied"],
                &counts["items_applied_again"],
                &counts["duplicates"],
            ],
            [&json!(2), &json!(4), &json!(2), &json!(2)],
            "{counts}"
        );
        partner.shutdown().await;
    })
    .await;
}
