//! A per-path fault switched at run time (`/admin/paths/{path}` and
//! `PartnerHandle::set_path_status`): every request to the path answers the
//! status at once, without a delay or a worker, until it is ended. A real
//! partner on 127.0.0.1:0 and real reqwest clients.

mod common;

use std::time::Duration;

use common::{admin, assert_bad_request, bounded, client, config, partner, stats_until};
use reqwest::StatusCode;
use serde_json::json;
use slow_partner::{Answer, OverrideError, PartnerHandle};
use tokio::time::Instant;

/// "At once": far below the 1 s delay the overridden requests ask for.
const AT_ONCE: Duration = Duration::from_millis(500);

/// `GET path_and_query` on the main port: its status, `Retry-After` and how
/// long it took.
async fn get(
    partner: &PartnerHandle,
    path_and_query: &str,
) -> (StatusCode, Option<String>, Duration) {
    let start = Instant::now();
    let response = client()
        .get(partner.url(path_and_query))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    response.bytes().await.unwrap();
    (status, retry_after, start.elapsed())
}

#[tokio::test]
async fn put_503_answers_at_once_and_delete_restores_the_work() {
    bounded(async {
        let partner = partner().await;
        let (status, _, body) = admin(
            &partner,
            reqwest::Method::PUT,
            "/admin/paths/pricing",
            r#"{"status": 503, "retry_after": "1"}"#,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            body,
            json!({"path": "/pricing", "status": 503, "retry_after": "1"})
        );

        let (status, retry_after, took) = get(&partner, "/pricing?delay=1s").await;
        assert_eq!(
            (status, retry_after.as_deref()),
            (StatusCode::SERVICE_UNAVAILABLE, Some("1"))
        );
        assert!(took < AT_ONCE, "{took:?}");
        // Even a malformed query: the override comes first.
        assert_eq!(
            get(&partner, "/pricing?delay=soon").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        // Other paths, and the same path with another suffix, are not touched.
        assert_eq!(get(&partner, "/inventory").await.0, StatusCode::OK);
        assert_eq!(get(&partner, "/pricing/x").await.0, StatusCode::OK);

        let (status, _, list) = admin(&partner, reqwest::Method::GET, "/admin/paths", "").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            list,
            json!({"paths": {"/pricing": {"status": 503, "retry_after": "1"}}})
        );
        let (_, _, one) = admin(&partner, reqwest::Method::GET, "/admin/paths/pricing", "").await;
        assert_eq!(one["status"], 503);

        let (status, _, body) = admin(
            &partner,
            reqwest::Method::DELETE,
            "/admin/paths/pricing",
            "",
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, json!({"path": "/pricing", "status": null}));
        let (status, retry_after, _) = get(&partner, "/pricing?delay=10ms").await;
        assert_eq!((status, retry_after), (StatusCode::OK, None));
        let (_, _, list) = admin(&partner, reqwest::Method::GET, "/admin/paths", "").await;
        assert_eq!(list, json!({"paths": {}}));

        let stats = partner.stats();
        assert_eq!(
            stats.answered(503),
            2,
            "overridden answers are counted by status"
        );
        assert_eq!(stats.answered(200), 3);
        assert_eq!(stats.requests, 5);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_main_port_takes_overrides_too_and_status_null_ends_one() {
    bounded(async {
        let partner = partner().await;
        let set = client()
            .put(partner.url("/admin/paths/api/pricing"))
            .body(r#"{"status": 429, "retry_after": 30}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(set.status(), StatusCode::OK);
        let response = client()
            .get(partner.url("/api/pricing"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()["retry-after"], "30");
        let answer: Answer = response.json().await.unwrap();
        assert_eq!(
            (answer.path.as_str(), answer.status, answer.delay_ms),
            ("/api/pricing", 429, 0)
        );

        let end = client()
            .put(partner.url("/admin/paths/api/pricing"))
            .body(r#"{"status": null}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(end.status(), StatusCode::OK);
        assert_eq!(get(&partner, "/api/pricing").await.0, StatusCode::OK);
        assert!(partner.path_overrides().is_empty());
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn an_overridden_path_needs_no_worker() {
    bounded(async {
        let partner = slow_partner::spawn(
            config()
                .with_workers(Some(1))
                .with_admin_listen("127.0.0.1:0".parse().unwrap()),
        )
        .await
        .unwrap();
        let held = tokio::spawn(client().get(partner.url("/pricing?delay=2s")).send());
        stats_until(&partner, |s| {
            s.paths.get("/pricing").is_some_and(|p| p.in_work == 1)
        })
        .await;
        partner.set_path_status("/pricing", Some(503)).unwrap();
        let (status, _, took) = get(&partner, "/pricing?delay=1s").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            took < AT_ONCE,
            "not queued behind the busy worker: {took:?}"
        );
        assert_eq!(partner.stats().paths["/pricing"].queued_max, 0);
        held.abort();
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn bad_override_input_is_a_400_problem_naming_it() {
    bounded(async {
        let partner = partner().await;
        for (path, body, parameter) in [
            ("/admin/paths/pricing", "{", "body"),
            ("/admin/paths/pricing", "503", "body"),
            ("/admin/paths/pricing", "{}", "body"),
            ("/admin/paths/pricing", r#"{"status": "503"}"#, "body"),
            ("/admin/paths/pricing", r#"{"status": 600}"#, "status"),
            ("/admin/paths/pricing", r#"{"status": 99}"#, "status"),
            (
                "/admin/paths/pricing",
                r#"{"status": 503, "retry_after": "a\nb"}"#,
                "retry_after",
            ),
            ("/admin/paths/stats", r#"{"status": 503}"#, "path"),
            ("/admin/paths/admin/mode", r#"{"status": 503}"#, "path"),
        ] {
            let answer = admin(&partner, reqwest::Method::PUT, path, body).await;
            assert_bad_request(&answer, parameter, &format!("{path} {body}"));
        }
        assert!(partner.path_overrides().is_empty(), "nothing was set");
        assert_eq!(get(&partner, "/pricing").await.0, StatusCode::OK);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_handle_sets_and_ends_an_override() {
    bounded(async {
        let partner = partner().await;
        partner.set_path_status("/pricing", Some(502)).unwrap();
        assert_eq!(partner.path_overrides()["/pricing"].status, 502);
        let (status, retry_after, took) = get(&partner, "/pricing?delay=1s").await;
        assert_eq!((status, retry_after), (StatusCode::BAD_GATEWAY, None));
        assert!(took < AT_ONCE, "{took:?}");

        assert_eq!(
            partner.set_path_status("/pricing", Some(99)),
            Err(OverrideError::Status(99))
        );
        assert!(matches!(
            partner.set_path_status("pricing", Some(503)),
            Err(OverrideError::NoLeadingSlash(_))
        ));
        assert!(matches!(
            partner.set_path_status("/healthz", Some(503)),
            Err(OverrideError::Reserved(_))
        ));
        assert_eq!(
            partner.path_overrides()["/pricing"].status,
            502,
            "unchanged"
        );

        partner.set_path_status("/pricing", None).unwrap();
        assert_eq!(get(&partner, "/pricing").await.0, StatusCode::OK);
        assert_eq!(partner.stats().answered(502), 1);
        partner.shutdown().await;
    })
    .await;
}
