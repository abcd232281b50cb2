//! The partner's finite capacity (`workers`, `path_workers`): at most N
//! requests of a path do their work at once, the others wait in the path's
//! FIFO queue, and the wait counts toward `late`. A real partner on
//! 127.0.0.1:0 and real reqwest clients.

mod common;

use std::time::Duration;

use common::{bounded, client, config, stats, stats_until};
use reqwest::StatusCode;
use slow_partner::{PartnerConfig, PartnerHandle};
use tokio::time::Instant;

/// A request's `delay` in these tests.
const DELAY: Duration = Duration::from_millis(100);

/// Far below two delays, far above one plus loopback noise.
const ONE_DELAY_AT_MOST: Duration = Duration::from_millis(190);

/// Far above two delays.
const TWO_DELAYS_AT_MOST: Duration = Duration::from_millis(400);

async fn spawn(config: PartnerConfig) -> PartnerHandle {
    slow_partner::spawn(config.with_admin_listen("127.0.0.1:0".parse().unwrap()))
        .await
        .expect("the partner starts")
}

/// Sends `n` requests to `path_and_query` at once, with `headers`; returns
/// how long each took, shortest first.
async fn at_once(
    partner: &PartnerHandle,
    n: usize,
    path_and_query: &str,
    headers: &[(&'static str, &'static str)],
) -> Vec<Duration> {
    let client = client();
    let start = Instant::now();
    let calls = (0..n).map(|_| {
        let mut request = client.get(partner.url(path_and_query));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            response.bytes().await.unwrap();
            start.elapsed()
        }
    });
    let mut took = futures_util::future::join_all(calls).await;
    took.sort();
    took
}

#[tokio::test]
async fn two_workers_answer_four_requests_in_two_rounds() {
    bounded(async {
        let partner = spawn(config().with_workers(Some(2))).await;
        let took = at_once(&partner, 4, "/p?delay=100ms", &[]).await;
        for first in &took[..2] {
            assert!(*first >= DELAY && *first < ONE_DELAY_AT_MOST, "{took:?}");
        }
        for second in &took[2..] {
            assert!(
                *second >= ONE_DELAY_AT_MOST && *second < TWO_DELAYS_AT_MOST,
                "{took:?}"
            );
        }
        let stats = stats(&partner).await;
        let p = &stats.paths["/p"];
        assert_eq!(p.workers, 2);
        assert_eq!((p.queued_max, p.in_work_max), (2, 2), "{p:?}");
        assert_eq!((p.queued, p.in_work, p.left_queue), (0, 0, 0), "{p:?}");
        assert_eq!(p.queue_wait_ms.count, 4);
        assert!(p.queue_wait_ms.max >= 90, "{p:?}");
        assert_eq!(stats.answered(200), 4);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn without_workers_the_capacity_is_unlimited() {
    bounded(async {
        let partner = spawn(config()).await;
        let took = at_once(&partner, 4, "/p?delay=100ms", &[]).await;
        for t in &took {
            assert!(*t >= DELAY && *t < ONE_DELAY_AT_MOST, "{took:?}");
        }
        assert!(stats(&partner).await.paths.is_empty());
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn per_path_workers_override_the_global_value() {
    bounded(async {
        let partner = spawn(config().with_workers(Some(1)).with_path_workers("/wide", 4)).await;
        assert_eq!(
            partner.stats().paths["/wide"].workers,
            4,
            "a configured path is listed from the start"
        );

        let wide = at_once(&partner, 4, "/wide?delay=100ms", &[]).await;
        assert!(wide.iter().all(|t| *t < ONE_DELAY_AT_MOST), "{wide:?}");
        let narrow = at_once(&partner, 2, "/narrow?delay=100ms", &[]).await;
        assert!(narrow[0] < ONE_DELAY_AT_MOST, "{narrow:?}");
        assert!(narrow[1] >= ONE_DELAY_AT_MOST, "{narrow:?}");

        let stats = stats(&partner).await;
        assert_eq!(stats.paths["/wide"].queued_max, 0);
        assert_eq!(stats.paths["/wide"].in_work_max, 4);
        assert_eq!(stats.paths["/narrow"].workers, 1);
        assert_eq!(stats.paths["/narrow"].queued_max, 1);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn reserved_paths_never_wait_for_a_worker() {
    bounded(async {
        let partner = spawn(config().with_workers(Some(1))).await;
        // Were `/admin/...` limited, its one worker would be busy for 2 s.
        let busy = tokio::spawn(client().get(partner.url("/admin/unknown?delay=2s")).send());
        stats_until(&partner, |s| s.requests == 1).await;

        let start = Instant::now();
        for path in [
            "/healthz",
            "/stats",
            "/admin/mode",
            "/admin/paths",
            "/admin/unknown?delay=10ms",
        ] {
            let response = client().get(partner.url(path)).send().await.unwrap();
            assert!(response.status().is_success(), "{path}");
        }
        let reset = client()
            .post(partner.url("/stats/reset"))
            .send()
            .await
            .unwrap();
        assert_eq!(reset.status(), StatusCode::NO_CONTENT);
        assert!(start.elapsed() < Duration::from_secs(1), "nothing queued");
        assert!(
            partner.stats().paths.is_empty(),
            "no reserved path has a pool"
        );
        busy.abort();
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_queued_request_whose_caller_goes_away_does_no_work() {
    bounded(async {
        let partner = spawn(config().with_workers(Some(1))).await;
        let first = tokio::spawn(client().get(partner.url("/p?delay=300ms")).send());
        stats_until(&partner, |s| {
            s.paths.get("/p").is_some_and(|p| p.in_work == 1)
        })
        .await;

        let impatient = reqwest::Client::builder()
            .tls_backend_rustls()
            .timeout(Duration::from_millis(100))
            .build()
            .unwrap();
        let err = impatient
            .get(partner.url("/p?delay=300ms"))
            .header("request-budget-ms", "100")
            .send()
            .await
            .unwrap_err();
        assert!(err.is_timeout(), "{err:?}");
        let left = stats_until(&partner, |s| s.paths["/p"].left_queue == 1).await;
        assert_eq!(left.paths["/p"].queued, 0, "{left:?}");

        assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
        // The next request finds the worker free: nobody works for the one
        // that left.
        let start = Instant::now();
        let next = client().get(partner.url("/p?delay=100ms")).send().await;
        assert_eq!(next.unwrap().status(), StatusCode::OK);
        assert!(start.elapsed() < ONE_DELAY_AT_MOST);

        let stats = stats_until(&partner, |s| s.paths["/p"].in_work == 0).await;
        let p = &stats.paths["/p"];
        assert_eq!(stats.requests, 3);
        assert_eq!(stats.answered(200), 2, "the one that left is not answered");
        assert_eq!((stats.abandoned, stats.late), (0, 0), "{stats:?}");
        assert_eq!((p.left_queue, p.in_work_max, p.queued_max), (1, 1, 1));
        assert_eq!(p.queue_wait_ms.count, 2);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_queue_wait_counts_toward_late() {
    bounded(async {
        let partner = spawn(config().with_workers(Some(1))).await;
        // 100 ms of work each, 150 ms of budget: the first is done at ~100
        // ms, the second at ~200 ms after ~100 ms in the queue.
        let took = at_once(
            &partner,
            2,
            "/p?delay=100ms",
            &[("request-budget-ms", "150")],
        )
        .await;
        assert!(took[1] >= ONE_DELAY_AT_MOST, "{took:?}");
        let stats = stats_until(&partner, |s| s.late == 1).await;
        assert_eq!((stats.late, stats.with_budget), (1, 2), "{stats:?}");
        assert!(stats.paths["/p"].queue_wait_ms.max >= 90, "{stats:?}");
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn stats_reset_restarts_the_high_water_marks() {
    bounded(async {
        let partner = spawn(config().with_workers(Some(1))).await;
        at_once(&partner, 2, "/p?delay=50ms", &[]).await;
        assert_eq!(partner.stats().paths["/p"].queued_max, 1);
        partner.reset_stats();
        let stats = partner.stats();
        assert!(
            stats.paths.is_empty(),
            "an idle, unconfigured path is forgotten: {stats:?}"
        );
        partner.shutdown().await;
    })
    .await;
}

/// `GET /metrics` counts what `/stats` counts, in the Prometheus text
/// format, and `promtool check metrics` finds nothing to say about it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_count_requests_answers_late_work_and_paths() {
    bounded(async {
        let partner = spawn(config().with_path_workers("/pricing", 2)).await;
        let client = client();
        for query in [
            "/pricing?delay=10ms",
            "/pricing?status=503",
            "/other?delay=300ms",
        ] {
            let req = client.get(partner.url(query));
            let req = if query.starts_with("/other") {
                req.header("request-budget-ms", "100")
            } else {
                req
            };
            let _ = req.send().await.unwrap();
        }
        stats_until(&partner, |s| s.late == 1).await;
        let res = client.get(partner.url("/metrics")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(
            res.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain")
        );
        let text = res.text().await.unwrap();
        for line in [
            "partner_requests_total 3",
            "partner_answers_total{status=\"200\"} 2",
            "partner_answers_total{status=\"503\"} 1",
            "partner_late_total 1",
            "partner_path_workers{path=\"/pricing\"} 2",
            "partner_path_queue_wait_seconds_count{path=\"/pricing\"} 2",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
        assert_eq!(stats(&partner).await.requests, 3, "/metrics is not work");

        service_kit::assert_promtool_clean(&text);
    })
    .await;
}
