//! Checkout against real slow partners on loopback, called with a real
//! client: the three dependencies, the degraded answer, retries, and the
//! status of every way a required dependency fails (docs/contract.md §§2-4
//! and 6). Timing bounds are generous; every test runs under an outer
//! bound.

mod common;

use budget_core::problem::Problem;
use checkout::CheckoutAnswer;
use common::*;
use slow_partner::FaultMode;
use tokio::time::Instant;

/// docs/contract.md §6: inventory, pricing, recommendations in that order,
/// each answer in the body, the ledger in the same order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_healthy_call_returns_all_three_answers_and_the_ledger_in_call_order() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = start(&config(&partner, "", "", "")).await;
        let res = client()
            .get(&url)
            .header("x-request-id", "healthy-1")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["x-request-id"], "healthy-1");
        let timing = server_timing(&res);
        assert_eq!(
            names(&timing),
            ["budget", "inventory", "pricing", "recommendations"]
        );
        assert_eq!(timing[0].dur, Some(2000.0), "the default budget");
        let answer: CheckoutAnswer = res.json().await.unwrap();
        assert_eq!(answer.request_id.as_deref(), Some("healthy-1"));
        assert_eq!(answer.inventory["path"], "/inventory");
        assert_eq!(answer.pricing["path"], "/pricing");
        assert_eq!(answer.recommendations.unwrap()["path"], "/recommendations");
        assert!(answer.degraded.is_empty());
        assert_eq!(
            paths_seen(&partner, "healthy-1"),
            ["/inventory", "/pricing", "/recommendations"],
            "x-request-id goes on every call"
        );
        // Each call got what was left, and less each time.
        let budgets: Vec<u64> = partner.stats().ids["healthy-1"]
            .budgets_ms()
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert!(budgets[0] < 2000 && budgets[1] <= budgets[0] && budgets[2] <= budgets[1]);
    })
    .await;
}

/// docs/contract.md §6: recommendations below its floor is skipped, and the
/// answer says degraded instead of failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn recommendations_below_its_floor_is_skipped_and_the_answer_degraded() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = start(&config(&partner, "", "", "")).await;
        let res = client()
            .get(&url)
            .header("x-request-id", "skip-1")
            .header("request-budget-ms", "800")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let timing = server_timing(&res);
        let recs = timing.last().unwrap();
        assert_eq!(recs.name, "recommendations");
        assert_eq!(recs.dur, None);
        let skip = recs.desc.clone().unwrap();
        assert!(
            skip.starts_with("skipped: ") && skip.ends_with("ms < floor 1000ms"),
            "{skip}"
        );
        let answer: CheckoutAnswer = res.json().await.unwrap();
        assert_eq!(answer.recommendations, None);
        assert_eq!(answer.degraded.len(), 1);
        assert_eq!(answer.degraded[0].dependency, "recommendations");
        assert_eq!(
            answer.degraded[0].reason, skip,
            "the body says what the ledger says"
        );
        assert_eq!(paths_seen(&partner, "skip-1"), ["/inventory", "/pricing"]);
    })
    .await;
}

/// A failing optional dependency degrades the answer, never fails it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_recommendations_degrades_the_answer() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = start(&config(&partner, "", "", "?status=500")).await;
        let res = client().get(&url).send().await.unwrap();
        assert_eq!(res.status(), 200);
        let answer: CheckoutAnswer = res.json().await.unwrap();
        assert_eq!(answer.recommendations, None);
        assert_eq!(answer.degraded[0].dependency, "recommendations");
        assert!(
            answer.degraded[0].reason.starts_with("failed: ")
                && answer.degraded[0].reason.contains("500"),
            "{:?}",
            answer.degraded
        );
    })
    .await;
}

/// docs/contract.md §§2 and 4: pricing is retried within the budget, and the
/// ledger shows the failed attempt, the wait and the retry; the URL's query
/// string is kept on every attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pricing_503_is_retried_and_the_retry_shows_in_server_timing() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = start(&config(&partner, "", "?script=503@50ms,200@50ms", "")).await;
        let res = client()
            .get(&url)
            .header("x-request-id", "retry-1")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let timing = server_timing(&res);
        assert_eq!(
            names(&timing),
            [
                "budget",
                "inventory",
                "pricing",
                "pricing-wait",
                "pricing",
                "recommendations"
            ]
        );
        assert_eq!(timing[2].desc.as_deref(), Some("503"));
        assert_eq!(timing[4].desc, None, "the retry succeeded");
        let answer: CheckoutAnswer = res.json().await.unwrap();
        assert_eq!(answer.pricing["attempt"], 2);
        let budgets = partner.stats().ids["retry-1"].budgets_ms();
        assert!(
            budgets[2] < budgets[1],
            "the header shrinks on the retry: {budgets:?}"
        );
    })
    .await;
}

/// docs/contract.md §3: a required dependency that hangs or cannot be
/// connected to within the budget is a `504`, at the budget, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hanging_or_blackholed_required_dependency_is_a_504_within_the_budget() {
    bounded(async {
        let healthy = partner(FaultMode::Normal).await;
        for mode in [FaultMode::Hang, FaultMode::Blackhole] {
            let broken = partner(mode).await;
            let mut config = config(&healthy, "", "", "");
            config.inventory_url = broken.url("/inventory");
            let url = start(&config).await;
            let start = Instant::now();
            let res = client()
                .get(&url)
                .header("request-budget-ms", "600")
                .send()
                .await
                .unwrap();
            let elapsed = start.elapsed();
            assert_eq!(res.status(), 504, "{mode}");
            assert!(
                elapsed >= ms(500) && elapsed < ms(3000),
                "{mode}: answered at the budget, not later: {elapsed:?}"
            );
            assert_eq!(res.headers()["content-type"], "application/problem+json");
            let problem: Problem = res.json().await.unwrap();
            assert_eq!(problem.dependency.as_deref(), Some("inventory"), "{mode}");
            assert!(!problem.retryable);
            assert_eq!(
                healthy.stats().requests,
                0,
                "{mode}: nothing after inventory"
            );
        }
    })
    .await;
}

/// A required dependency that fails fast and finally (refused, reset) with
/// budget left is a `504` (`dependency-unavailable`) naming it, fast: no
/// answer came through, and the caller is not kept waiting for one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refusing_or_resetting_required_dependency_is_a_fast_504() {
    bounded(async {
        let healthy = partner(FaultMode::Normal).await;
        for mode in [FaultMode::Refuse, FaultMode::Reset] {
            let broken = partner(mode).await;
            let mut config = config(&healthy, "", "", "");
            config.pricing_url = broken.url("/pricing");
            let url = start(&config).await;
            let start = Instant::now();
            let res = client()
                .get(&url)
                .header("request-budget-ms", "5000")
                .send()
                .await
                .unwrap();
            let elapsed = start.elapsed();
            assert_eq!(res.status(), 504, "{mode}");
            assert!(elapsed < ms(2500), "{mode}: fast: {elapsed:?}");
            let timing = server_timing(&res);
            assert_eq!(
                timing.iter().filter(|m| m.name == "pricing").count(),
                3,
                "{mode}: pricing's 3 attempts, in the ledger: {timing:?}"
            );
            let problem: Problem = res.json().await.unwrap();
            assert_eq!(problem.dependency.as_deref(), Some("pricing"));
            assert_eq!(problem.status, 504);
            assert_eq!(
                problem.type_uri,
                "urn:budget:problem:dependency-unavailable"
            );
        }
    })
    .await;
}

/// docs/contract.md §3: a 429 whose Retry-After does not fit the budget is
/// passed up with its Retry-After, at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pricing_429_with_a_long_retry_after_is_passed_up_fast() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = start(&config(&partner, "", "?status=429&retry_after=30", "")).await;
        let start = Instant::now();
        let res = client()
            .get(&url)
            .header("x-request-id", "defer-1")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 429);
        assert!(start.elapsed() < ms(1000), "{:?}", start.elapsed());
        assert_eq!(res.headers()["retry-after"], "30");
        let problem: Problem = res.json().await.unwrap();
        assert!(problem.retryable);
        assert_eq!(problem.dependency.as_deref(), Some("pricing"));
        assert_eq!(paths_seen(&partner, "defer-1"), ["/inventory", "/pricing"]);
    })
    .await;
}

/// A delay-seconds too large for any integer is a wait longer than any
/// budget, never "no Retry-After": the 429 (or 503) is passed up at once,
/// pricing called once, with the saturated delay-seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_after_beyond_any_integer_is_passed_up_at_once() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let cases = [
            ("429", "18446744073709551616".to_owned()),
            ("503", "9".repeat(100)),
            ("429", "18446744073709551615".to_owned()),
        ];
        for (i, (status, retry_after)) in cases.iter().enumerate() {
            let query = format!("?status={status}&retry_after={retry_after}");
            let url = start(&config(&partner, "", &query, "")).await;
            let id = format!("saturated-{i}");
            let start = Instant::now();
            let res = client()
                .get(&url)
                .header("x-request-id", &id)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status().as_str(), *status, "{retry_after}");
            assert!(start.elapsed() < ms(1000), "{:?}", start.elapsed());
            assert_eq!(res.headers()["retry-after"], "18446744073709551615");
            let problem: Problem = res.json().await.unwrap();
            assert_eq!(problem.retry_after_ms, Some(u64::MAX));
            assert_eq!(paths_seen(&partner, &id), ["/inventory", "/pricing"]);
        }
    })
    .await;
}

/// docs/contract.md §3: an open circuit on a required dependency is a 503
/// with Retry-After, and the dependency is not called.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_open_circuit_is_a_503_with_retry_after() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let mut config = config(&partner, "", "?status=500", "");
        config.pricing = toml::from_str(
            "[retry]\nmax_attempts = 1\n[breaker]\nfailure_threshold = 2\nopen_for = \"30s\"",
        )
        .unwrap();
        let url = start(&config).await;
        for _ in 0..2 {
            let res = client().get(&url).send().await.unwrap();
            assert_eq!(res.status(), 502, "a 500 is a dependency failure");
        }
        let res = client()
            .get(&url)
            .header("x-request-id", "open-1")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 503);
        let wait: u64 = res.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=30).contains(&wait), "{wait}");
        let timing = server_timing(&res);
        assert_eq!(timing[2].desc.as_deref(), Some("skipped: circuit open"));
        assert_eq!(paths_seen(&partner, "open-1"), ["/inventory"]);
    })
    .await;
}

/// docs/contract.md §2 rule 4: a POST is retried only with an
/// Idempotency-Key; without one, a failing pricing sees it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_post_is_retried_only_with_an_idempotency_key() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = start(&config(&partner, "", "?status=503", "")).await;
        let res = client()
            .post(&url)
            .header("x-request-id", "post-no-key")
            .header("content-type", "application/json")
            .body(r#"{"sku":7}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 502);
        assert_eq!(
            paths_seen(&partner, "post-no-key"),
            ["/inventory", "/pricing"],
            "sent once"
        );

        let res = client()
            .post(&url)
            .header("x-request-id", "post-key")
            .header("idempotency-key", "order-42")
            .body(r#"{"sku":7}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 502);
        assert_eq!(
            paths_seen(&partner, "post-key"),
            ["/inventory", "/pricing", "/pricing", "/pricing"],
            "retried: 3 attempts"
        );
    })
    .await;
}

/// The budget layer's answers: malformed header 400, below the floor 504
/// with no call made; `/healthz` is outside the layer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_budget_layer_guards_checkout_and_healthz_answers() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let mut config = config(&partner, "", "", "");
        config.floor = ms(100);
        let url = start(&config).await;
        let res = client()
            .get(&url)
            .header("request-budget-ms", "1.5")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400);
        let problem: Problem = res.json().await.unwrap();
        assert_eq!(problem.header.as_deref(), Some("request-budget-ms"));
        let res = client()
            .get(&url)
            .header("request-budget-ms", "50")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 504);
        assert_eq!(partner.stats().requests, 0);
        let health = client()
            .get(url.replace("/checkout", "/healthz"))
            .header("request-budget-ms", "junk")
            .send()
            .await
            .unwrap();
        assert_eq!(health.status(), 200);
        assert_eq!(health.text().await.unwrap(), "ok");
    })
    .await;
}

/// `budget_mode = off` with inventory over gRPC forwards nothing either:
/// no `grpc-timeout` (the slow partner's gRPC face reports the budget
/// header it saw), and the fixed timeout is checkout's own, per attempt
/// as over HTTP: a 2 s call against a 300 ms `fixed_timeout` is a `504`
/// after its attempts of 300 ms each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn budget_mode_off_sends_no_grpc_timeout_and_keeps_the_fixed_timeout_local() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let mut config = config(&partner, "", "", "");
        config.budget_mode = service_kit::BudgetMode::Off;
        config.inventory_url = format!("grpc://{}/inventory?delay=5ms", partner.addr());
        let url = start(&config).await;
        let res = client()
            .get(&url)
            .header("request-budget-ms", "300")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let answer: serde_json::Value = res.json().await.unwrap();
        assert_eq!(answer["inventory"]["path"], "/inventory");
        assert_eq!(
            answer["inventory"]["budget_header"],
            serde_json::Value::Null,
            "no grpc-timeout sent: {answer}"
        );

        config.inventory_url = format!("grpc://{}/inventory?delay=2s", partner.addr());
        config.inventory.fixed_timeout = Some(ms(300));
        let url = start(&config).await;
        let started = tokio::time::Instant::now();
        let res = client().get(&url).send().await.unwrap();
        let took = started.elapsed();
        assert_eq!(res.status(), 504);
        assert!(took >= ms(300) && took < ms(1500), "{took:?}");
        let problem: budget_core::problem::Problem = res.json().await.unwrap();
        assert_eq!(problem.dependency.as_deref(), Some("inventory"));
        assert!(
            problem.detail.contains("attempt timed out after 300ms"),
            "{}",
            problem.detail
        );
    })
    .await;
}

/// `budget_mode = off`: no budget forwarded, no floor (recommendations is
/// called whatever the budget), attempts still listed in Server-Timing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn budget_mode_off_forwards_nothing_and_always_calls_recommendations() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let mut config = config(&partner, "", "", "");
        config.budget_mode = service_kit::BudgetMode::Off;
        let url = start(&config).await;
        let res = client()
            .get(&url)
            .header("x-request-id", "off-1")
            .header("request-budget-ms", "300")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(
            names(&server_timing(&res)),
            ["inventory", "pricing", "recommendations"]
        );
        let answer: CheckoutAnswer = res.json().await.unwrap();
        assert!(answer.degraded.is_empty());
        assert_eq!(
            partner.stats().ids["off-1"].budgets_ms(),
            [None, None, None],
            "no budget header forwarded"
        );
    })
    .await;
}
