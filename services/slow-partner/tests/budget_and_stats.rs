//! The budget as the partner sees it (read like any budget-aware service,
//! never enforced) and the `/stats` counters of docs/contract.md §5: a real
//! partner on 127.0.0.1:0 and a real reqwest client.

mod common;

use std::time::Duration;

use common::{bounded, client, partner, stats, stats_until};
use reqwest::StatusCode;
use slow_partner::{Answer, StatsSnapshot};

async fn answer(url: String, headers: &[(&str, &str)]) -> Answer {
    let mut request = client().get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.unwrap()
}

#[tokio::test]
async fn the_budget_is_echoed_from_request_budget_ms() {
    bounded(async {
        let partner = partner().await;
        let a = answer(partner.url("/p"), &[("request-budget-ms", "1500")]).await;
        assert_eq!(a.budget_ms, Some(1500));
        assert_eq!(a.budget_header.as_deref(), Some("request-budget-ms"));
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_budget_is_echoed_from_grpc_timeout() {
    bounded(async {
        let partner = partner().await;
        let a = answer(partner.url("/p"), &[("grpc-timeout", "2S")]).await;
        assert_eq!(a.budget_ms, Some(2000));
        assert_eq!(a.budget_header.as_deref(), Some("grpc-timeout"));
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_smallest_budget_of_every_format_wins() {
    bounded(async {
        let partner = partner().await;
        let a = answer(
            partner.url("/p"),
            &[
                ("request-budget-ms", "1500"),
                ("grpc-timeout", "900m"),
                ("x-envoy-expected-rq-timeout-ms", "1200"),
            ],
        )
        .await;
        assert_eq!(a.budget_ms, Some(900));
        assert_eq!(a.budget_header.as_deref(), Some("grpc-timeout"));
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_budget_is_null_when_absent() {
    bounded(async {
        let partner = partner().await;
        let response = client().get(partner.url("/p")).send().await.unwrap();
        let json: serde_json::Value = response.json().await.unwrap();
        assert!(json["budget_ms"].is_null());
        assert!(json.as_object().unwrap().contains_key("budget_ms"));
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_malformed_budget_is_unknown_not_a_400() {
    bounded(async {
        let partner = partner().await;
        let a = answer(partner.url("/p"), &[("request-budget-ms", "-5")]).await;
        assert_eq!(a.budget_ms, None);
        let stats = partner.stats();
        assert_eq!(stats.with_budget, 0);
        assert_eq!(stats.answered(200), 1);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_budget_is_never_enforced() {
    bounded(async {
        let partner = partner().await;
        let response = client()
            .get(partner.url("/p?delay=150ms"))
            .header("request-budget-ms", "10")
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "no 504 from a partner that ignores budgets"
        );
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn late_counts_work_that_finished_after_its_budget_ran_out() {
    bounded(async {
        let partner = partner().await;
        answer(
            partner.url("/p?delay=200ms"),
            &[("request-budget-ms", "50")],
        )
        .await;
        assert_eq!(partner.stats().late, 1);
        answer(
            partner.url("/p?delay=200ms"),
            &[("request-budget-ms", "1000")],
        )
        .await;
        answer(partner.url("/p?delay=200ms"), &[]).await;
        let stats = partner.stats();
        assert_eq!(stats.late, 1, "not in budget, not without a budget");
        assert_eq!(stats.with_budget, 2);
        assert_eq!(stats.requests, 3);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_dripped_body_is_late_when_its_last_chunk_is() {
    bounded(async {
        let partner = partner().await;
        // No delay, but 15 pauses of 20 ms: done after ~300 ms, budget 100 ms.
        let response = client()
            .get(partner.url("/p?drip=20ms&body_bytes=500"))
            .header("request-budget-ms", "100")
            .send()
            .await
            .unwrap();
        response.bytes().await.unwrap();
        let stats = stats_until(&partner, |s| s.late == 1).await;
        assert_eq!(stats.late, 1);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn work_abandoned_by_its_caller_still_counts_as_late() {
    bounded(async {
        let partner = partner().await;
        let impatient = reqwest::Client::builder()
            .tls_backend_rustls()
            .timeout(Duration::from_millis(100))
            .build()
            .unwrap();
        let err = impatient
            .get(partner.url("/p?delay=400ms"))
            .header("request-budget-ms", "100")
            .send()
            .await
            .unwrap_err();
        assert!(err.is_timeout());
        let stats = stats_until(&partner, |s| s.late == 1).await;
        assert_eq!(stats.late, 1, "{stats:?}");
        assert_eq!(stats.abandoned, 1, "{stats:?}");
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn stats_list_each_attempt_with_the_budget_it_arrived_with() {
    bounded(async {
        let partner = partner().await;
        let url = partner.url("/pricing?script=503,200");
        for budget in ["900", "640"] {
            let response = client()
                .get(&url)
                .header("x-request-id", "order-1")
                .header("request-budget-ms", budget)
                .send()
                .await
                .unwrap();
            response.bytes().await.unwrap();
        }
        client()
            .get(&url)
            .header("x-request-id", "order-1")
            .send()
            .await
            .unwrap();
        client()
            .get(partner.url("/inventory"))
            .header("x-request-id", "order-2")
            .header("grpc-timeout", "300m")
            .send()
            .await
            .unwrap();

        let stats = stats(&partner).await; // over HTTP, on the admin listener
        assert_eq!(stats, partner.stats(), "the handle and /stats agree");
        let order1 = &stats.ids["order-1"];
        assert_eq!(order1.attempts, 3);
        assert_eq!(order1.budgets_ms(), vec![Some(900), Some(640), None]);
        assert_eq!(
            order1.calls.iter().map(|c| c.attempt).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(stats.ids["order-2"].budgets_ms(), vec![Some(300)]);
        assert_eq!(stats.ids["order-2"].calls[0].path, "/inventory");
        assert_eq!(stats.answered(503), 1);
        assert_eq!(stats.answered(200), 3);
        assert_eq!(stats.requests, 4);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn stats_reset_zeroes_counters_and_attempts() {
    bounded(async {
        let partner = partner().await;
        let url = partner.url("/p?script=503,200");
        let first = client()
            .get(&url)
            .header("x-request-id", "r")
            .send()
            .await
            .unwrap();
        assert_eq!(first.status(), StatusCode::SERVICE_UNAVAILABLE);

        let reset = client()
            .post(partner.url("/stats/reset"))
            .send()
            .await
            .unwrap();
        assert_eq!(reset.status(), StatusCode::NO_CONTENT);
        assert_eq!(partner.stats(), StatsSnapshot::default());

        let again = client()
            .get(&url)
            .header("x-request-id", "r")
            .send()
            .await
            .unwrap();
        assert_eq!(
            again.status(),
            StatusCode::SERVICE_UNAVAILABLE,
            "attempts start over"
        );
        partner.reset_stats();
        assert_eq!(partner.stats().requests, 0);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn reserved_paths_are_not_counted_as_work() {
    bounded(async {
        let partner = partner().await;
        for path in ["/healthz", "/stats", "/admin/mode"] {
            let response = client().get(partner.url(path)).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK, "{path}");
        }
        assert_eq!(
            client()
                .get(partner.url("/healthz"))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap(),
            "ok"
        );
        assert_eq!(partner.stats().requests, 0);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_tracked_ids_are_bounded() {
    bounded(async {
        let mut config = common::config();
        config.max_tracked_ids = 3;
        let partner = slow_partner::spawn(config).await.unwrap();
        for i in 0..5 {
            client()
                .get(partner.url("/p"))
                .header("x-request-id", format!("id-{i}"))
                .send()
                .await
                .unwrap();
        }
        let stats = partner.stats();
        assert_eq!(
            stats.ids.keys().collect::<Vec<_>>(),
            ["id-2", "id-3", "id-4"]
        );
        assert_eq!(stats.evicted_ids, 2);
        partner.shutdown().await;
    })
    .await;
}
