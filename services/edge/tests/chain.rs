//! The whole chain over loopback, in-process: a real client -> edge ->
//! checkout -> slow partners (docs/contract.md §§1, 3, 4 and 6). Timing
//! bounds are generous; every test runs under an outer bound.

use budget_core::ledger::Metric;
use budget_core::problem::Problem;
use checkout::{CheckoutAnswer, CheckoutConfig};
use edge::EdgeConfig;
use service_kit::BudgetMode;
use slow_partner::{FaultMode, PartnerHandle};
use test_support::{bounded, client, ms, names, partner, single_server_timing};
use tokio::time::Instant;

/// A chain to start: checkout's dependencies are paths of one partner.
struct Chain {
    checkout: CheckoutConfig,
    edge: EdgeConfig,
}

impl Chain {
    /// Queries (`""` for none) shape inventory, pricing and recommendations.
    fn new(partner: &PartnerHandle, inventory: &str, pricing: &str, recs: &str) -> Self {
        let loopback = "127.0.0.1:0".parse().unwrap();
        let mut checkout = CheckoutConfig::new(loopback);
        checkout.inventory_url = partner.url(&format!("/inventory{inventory}"));
        checkout.pricing_url = partner.url(&format!("/pricing{pricing}"));
        checkout.recommendations_url = partner.url(&format!("/recommendations{recs}"));
        Self {
            checkout,
            edge: EdgeConfig::new(loopback, "http://unused.invalid"),
        }
    }

    fn mode(mut self, mode: BudgetMode) -> Self {
        self.checkout.budget_mode = mode;
        self.edge.budget_mode = mode;
        self
    }

    /// Starts checkout, then edge in front of it; returns edge's
    /// `/checkout` URL.
    async fn start(mut self) -> String {
        let (checkout, _) = checkout::spawn(&self.checkout, std::future::pending())
            .await
            .expect("checkout starts");
        self.edge.checkout_url = format!("http://{checkout}");
        let (edge, _) = edge::spawn(&self.edge, std::future::pending())
            .await
            .expect("edge starts");
        format!("http://{edge}/checkout")
    }
}

fn dur(metrics: &[Metric], name: &str) -> f64 {
    metrics
        .iter()
        .find(|m| m.name == name)
        .and_then(|m| m.dur)
        .unwrap_or_else(|| panic!("no {name} with a duration in {metrics:?}"))
}

/// docs/contract.md §§4 and 6: one Server-Timing header shows where the
/// time went at both hops, checkout's metrics prefixed `checkout.`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_healthy_chain_answers_200_with_both_hops_in_one_server_timing() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = Chain::new(&partner, "", "", "").start().await;
        let res = client()
            .get(&url)
            .header("x-request-id", "e2e-1")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-type"], "application/json");
        assert_eq!(res.headers()["x-request-id"], "e2e-1");
        let timing = single_server_timing(&res);
        assert_eq!(
            names(&timing),
            [
                "budget",
                "checkout",
                "checkout.budget",
                "checkout.inventory",
                "checkout.pricing",
                "checkout.recommendations"
            ]
        );
        assert_eq!(dur(&timing, "budget"), 2000.0, "edge's default budget");
        let answer: CheckoutAnswer = res.json().await.unwrap();
        assert_eq!(answer.request_id.as_deref(), Some("e2e-1"));
        assert_eq!(answer.inventory["path"], "/inventory");
        assert_eq!(answer.pricing["path"], "/pricing");
        assert!(answer.recommendations.is_some());
        assert!(answer.degraded.is_empty());
    })
    .await;
}

/// docs/contract.md §1: the budget shrinks hop by hop; every hop forwards
/// what is left, so the partner sees less than edge got.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_budget_header_shrinks_hop_by_hop() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = Chain::new(&partner, "?delay=50ms", "?delay=50ms", "")
            .start()
            .await;
        let res = client()
            .get(&url)
            .header("x-request-id", "shrink-1")
            .header("request-budget-ms", "1500")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let timing = single_server_timing(&res);
        let at_edge = dur(&timing, "budget");
        let at_checkout = dur(&timing, "checkout.budget");
        assert_eq!(at_edge, 1500.0);
        assert!(at_checkout < at_edge, "{at_checkout} < {at_edge}");
        let seen: Vec<f64> = partner.stats().ids["shrink-1"]
            .budgets_ms()
            .into_iter()
            .map(|b| b.unwrap() as f64)
            .collect();
        assert_eq!(seen.len(), 3);
        assert!(seen[0] < at_checkout, "{seen:?} vs {at_checkout}");
        assert!(seen[1] <= seen[0] - 40.0, "inventory took 50 ms: {seen:?}");
        assert!(seen[2] <= seen[1] - 40.0, "pricing took 50 ms: {seen:?}");
    })
    .await;
}

/// docs/contract.md §1: the default applies when the caller sends nothing,
/// the maximum clamps what it sends; x-request-id is made up at edge.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn edge_clamps_the_budget_and_makes_up_a_request_id() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = Chain::new(&partner, "", "", "").start().await;
        let res = client()
            .get(&url)
            .header("request-budget-ms", "3600000")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(
            dur(&single_server_timing(&res), "budget"),
            10_000.0,
            "clamped"
        );
        let id = res.headers()["x-request-id"].to_str().unwrap().to_owned();
        assert_eq!(id.len(), 36, "a UUID: {id}");
        assert_eq!(id.matches('-').count(), 4, "a UUID: {id}");
        let answer: CheckoutAnswer = res.json().await.unwrap();
        assert_eq!(answer.request_id.as_deref(), Some(id.as_str()));
        assert_eq!(
            partner.stats().ids[&id].calls.len(),
            3,
            "propagated to the partner"
        );
    })
    .await;
}

/// docs/contract.md §6: below recommendations' floor the answer is a 200,
/// degraded, and the skip shows in edge's header.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn recommendations_is_skipped_below_its_floor_through_edge() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = Chain::new(&partner, "", "", "").start().await;
        let res = client()
            .get(&url)
            .header("x-request-id", "e2e-skip")
            .header("request-budget-ms", "900")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let timing = single_server_timing(&res);
        let skip = timing.last().unwrap();
        assert_eq!(skip.name, "checkout.recommendations");
        assert!(
            skip.desc.as_deref().unwrap().ends_with("< floor 1000ms"),
            "{skip:?}"
        );
        let answer: CheckoutAnswer = res.json().await.unwrap();
        assert_eq!(answer.degraded[0].dependency, "recommendations");
        assert_eq!(partner.stats().ids["e2e-skip"].calls.len(), 2);
    })
    .await;
}

/// docs/contract.md §4: checkout's retry of pricing reads in edge's header.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pricing_retry_is_visible_at_edge() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = Chain::new(&partner, "", "?script=503@50ms,200@50ms", "")
            .start()
            .await;
        let res = client().get(&url).send().await.unwrap();
        assert_eq!(res.status(), 200);
        let timing = single_server_timing(&res);
        let pricing: Vec<&Metric> = timing
            .iter()
            .filter(|m| m.name == "checkout.pricing")
            .collect();
        assert_eq!(pricing.len(), 2, "{timing:?}");
        assert_eq!(pricing[0].desc.as_deref(), Some("503"));
        assert!(names(&timing).contains(&"checkout.pricing-wait"));
    })
    .await;
}

/// docs/contract.md §3: a dependency's 429 whose Retry-After does not fit
/// reaches the caller through both hops, with its Retry-After, fast.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_429_with_retry_after_reaches_the_caller_through_edge() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = Chain::new(&partner, "", "?status=429&retry_after=30", "")
            .start()
            .await;
        let start = Instant::now();
        let res = client().get(&url).send().await.unwrap();
        assert!(start.elapsed() < ms(1000), "{:?}", start.elapsed());
        assert_eq!(res.status(), 429);
        assert_eq!(res.headers()["retry-after"], "30");
        assert_eq!(res.headers()["content-type"], "application/problem+json");
        let timing = single_server_timing(&res);
        assert_eq!(
            timing.iter().filter(|m| m.name == "checkout").count(),
            1,
            "edge did not retry"
        );
        let problem: Problem = res.json().await.unwrap();
        assert_eq!((problem.status, problem.retryable), (429, true));
        assert_eq!(problem.dependency.as_deref(), Some("pricing"));
    })
    .await;
}

/// docs/contract.md §3: a hanging required dependency is a 504 at the
/// caller, at its budget, not later.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hanging_dependency_is_a_504_within_the_caller_s_budget() {
    bounded(async {
        let healthy = partner(FaultMode::Normal).await;
        let hanging = partner(FaultMode::Hang).await;
        let mut chain = Chain::new(&healthy, "", "", "");
        chain.checkout.pricing_url = hanging.url("/pricing");
        let url = chain.start().await;
        let start = Instant::now();
        let res = client()
            .get(&url)
            .header("request-budget-ms", "700")
            .send()
            .await
            .unwrap();
        let elapsed = start.elapsed();
        assert_eq!(res.status(), 504);
        assert!(
            elapsed >= ms(600) && elapsed < ms(1500),
            "at the budget: {elapsed:?}"
        );
        let problem: Problem = res.json().await.unwrap();
        assert_eq!(problem.status, 504);
    })
    .await;
}

/// docs/contract.md §3: below edge's floor the request is shed with a 504;
/// nothing downstream is called.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_budget_below_edge_s_floor_is_a_504_and_no_call_is_made() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let mut chain = Chain::new(&partner, "", "", "");
        chain.edge.floor = ms(100);
        let url = chain.start().await;
        let res = client()
            .get(&url)
            .header("request-budget-ms", "40")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 504);
        assert_eq!(res.headers()["content-type"], "application/problem+json");
        let problem: Problem = res.json().await.unwrap();
        assert_eq!(
            (problem.remaining_ms, problem.floor_ms),
            (Some(40), Some(100))
        );
        assert_eq!(partner.stats().requests, 0, "the partner saw nothing");
    })
    .await;
}

/// docs/contract.md §1: a malformed budget header is a 400 naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_malformed_budget_header_is_a_400_naming_the_header() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = Chain::new(&partner, "", "", "").start().await;
        let res = client()
            .get(&url)
            .header("grpc-timeout", "5X")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400);
        assert_eq!(res.headers()["content-type"], "application/problem+json");
        let problem: Problem = res.json().await.unwrap();
        assert_eq!(problem.header.as_deref(), Some("grpc-timeout"));
        assert_eq!(partner.stats().requests, 0);
    })
    .await;
}

/// docs/contract.md §2 rule 4, across hops: edge forwards the POST's body
/// and Idempotency-Key; without a key the failing pricing sees it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_post_through_edge_is_retried_only_with_its_idempotency_key() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = Chain::new(&partner, "", "?status=503", "").start().await;
        let attempts = |id: &str| {
            partner.stats().ids[id]
                .calls
                .iter()
                .filter(|c| c.path == "/pricing")
                .count()
        };
        let res = client()
            .post(&url)
            .header("x-request-id", "e2e-post")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 502);
        assert_eq!(attempts("e2e-post"), 1);
        let res = client()
            .post(&url)
            .header("x-request-id", "e2e-post-key")
            .header("idempotency-key", "k-1")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 502);
        assert_eq!(attempts("e2e-post-key"), 3);
    })
    .await;
}

/// Checkout down: edge's own problem, 504 (refused: no answer came
/// through) naming checkout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn checkout_down_is_edge_s_own_504_problem() {
    bounded(async {
        let down = partner(FaultMode::Refuse).await;
        let mut config = EdgeConfig::new("127.0.0.1:0".parse().unwrap(), down.url(""));
        config.budget_mode = BudgetMode::On;
        let (addr, _) = edge::spawn(&config, std::future::pending()).await.unwrap();
        let res = client()
            .get(format!("http://{addr}/checkout"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 504);
        let timing = single_server_timing(&res);
        assert_eq!(names(&timing), ["budget", "checkout"], "one attempt");
        let problem: Problem = res.json().await.unwrap();
        assert_eq!(problem.dependency.as_deref(), Some("checkout"));
    })
    .await;
}

/// The point of it all: with budgets off, a 2 s partner holds the caller
/// 2 s; with a 500 ms budget, the caller has its answer at 500 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn budget_mode_off_waits_for_a_slow_partner_and_budget_mode_does_not() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let off = Chain::new(&partner, "?delay=2s", "", "")
            .mode(BudgetMode::Off)
            .start()
            .await;
        let on = Chain::new(&partner, "?delay=2s", "", "").start().await;

        let start = Instant::now();
        let res = client()
            .get(&off)
            .header("request-budget-ms", "500")
            .send()
            .await
            .unwrap();
        let off_elapsed = start.elapsed();
        assert_eq!(res.status(), 200);
        assert!(off_elapsed >= ms(2000), "{off_elapsed:?}");
        assert!(
            names(&single_server_timing(&res)).contains(&"checkout.inventory"),
            "off mode still lists attempts"
        );

        let start = Instant::now();
        let res = client()
            .get(&on)
            .header("request-budget-ms", "500")
            .send()
            .await
            .unwrap();
        let on_elapsed = start.elapsed();
        assert_eq!(res.status(), 504);
        assert!(
            on_elapsed >= ms(400) && on_elapsed < ms(1200),
            "{on_elapsed:?}"
        );
    })
    .await;
}

/// `GET /healthz` answers without a budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn healthz_answers_ok() {
    bounded(async {
        let config = EdgeConfig::new("127.0.0.1:0".parse().unwrap(), "http://127.0.0.1:9");
        let (addr, _) = edge::spawn(&config, std::future::pending()).await.unwrap();
        let res = client()
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.text().await.unwrap(), "ok");
    })
    .await;
}

/// Every fault shape of a required dependency, seen through the
/// whole chain, is answered with the contract's 504 within the caller's
/// budget (plus a generous tolerance), never a hang: refuse, blackhole,
/// hang, drip (a body slower than the budget) and reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_fault_shape_of_a_required_dependency_is_a_504_within_the_budget() {
    bounded(async {
        let healthy = partner(FaultMode::Normal).await;
        let budget = 800u64;
        for (shape, mode, query) in [
            ("refuse", FaultMode::Refuse, ""),
            ("blackhole", FaultMode::Blackhole, ""),
            ("hang", FaultMode::Hang, ""),
            ("reset", FaultMode::Reset, ""),
            ("drip", FaultMode::Normal, "?drip=400ms&body_bytes=4096"),
        ] {
            let broken = partner(mode).await;
            let mut chain = Chain::new(&healthy, "", "", "");
            chain.checkout.inventory_url = broken.url(&format!("/inventory{query}"));
            // Which hop is named depends on checkout's own 504 reaching edge
            // before edge's call to checkout runs out. Checkout gives up on
            // inventory its reserve (5 ms by default) before the budget edge
            // sent it ends, so that reserve is all the time its answer has
            // to get back; on a loaded 2-core CI machine it is not always
            // enough (CI failed on it twice, naming `checkout` for `hang`),
            // and that timing is not what this test is about. Edge's reserve
            // covers edge's own answer the same way.
            chain.checkout.reserve = ms(150);
            chain.edge.reserve = ms(150);
            let url = chain.start().await;
            let start = Instant::now();
            let res = client()
                .get(&url)
                .header("request-budget-ms", budget.to_string())
                .send()
                .await
                .unwrap();
            let elapsed = start.elapsed();
            let status = res.status();
            let content_type = res.headers()["content-type"].clone();
            let timing = res.headers()["server-timing"].clone();
            let body = res.text().await.unwrap();
            assert_eq!(status, 504, "{shape}: {body} {timing:?}");
            assert!(
                elapsed < ms(budget + 700),
                "{shape}: answered within the budget: {elapsed:?}"
            );
            assert_eq!(content_type, "application/problem+json");
            let problem: Problem = serde_json::from_str(&body).unwrap();
            assert_eq!(problem.dependency.as_deref(), Some("inventory"), "{shape}");
            assert!(!problem.retryable, "{shape}");
        }
    })
    .await;
}

/// "No data lost": a POST without `Idempotency-Key` reaches the
/// partner at most once under every fault shape the partner can play per
/// request (error statuses, a rate limit with a short `Retry-After`, a
/// body slower than the budget, an answer after the budget), and an answer
/// whose budget ran out mid-flight is reported as such, never as success.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_post_without_a_key_is_never_sent_twice_and_an_expired_one_is_never_a_success() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        for (n, (pricing, want)) in [
            ("?status=503", 502u16),
            ("?status=500", 502),
            ("?status=502", 502),
            ("?status=429&retry_after=0", 502),
            ("?status=503&retry_after=1", 502),
            ("?delay=3s", 504),
            ("?drip=300ms&body_bytes=4096", 504),
        ]
        .into_iter()
        .enumerate()
        {
            let url = Chain::new(&partner, "", pricing, "").start().await;
            let id = format!("no-loss-{n}");
            let res = client()
                .post(&url)
                .header("x-request-id", &id)
                .header("request-budget-ms", "1200")
                .body("{\"order\":1}")
                .send()
                .await
                .unwrap();
            let status = res.status().as_u16();
            assert_eq!(status, want, "{pricing}");
            assert!(status >= 500, "{pricing}: never reported as a success");
            let sent = partner.stats().ids[&id]
                .calls
                .iter()
                .filter(|c| c.path == "/pricing")
                .count();
            assert_eq!(sent, 1, "{pricing}: the POST reached pricing once");
        }
    })
    .await;
}

/// Retry amplification across hops: with pricing failing every
/// time, per-request retries (3 attempts at checkout, 1 at edge) and a
/// retry budget of 10 % of calls keep pricing's attempts per client request
/// at 1.1 in steady state (the goal), not 3 (or 3 x 3 without the
/// one-attempt edge). Bounded: 60 requests, sequential.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retry_amplification_through_three_hops_stays_near_one_plus_the_ratio() {
    bounded(async {
        // Pricing attempts per client request, with the partner's pricing
        // always 503, through client -> edge -> checkout -> partner;
        // without a retry budget: budget mode off (fixed retries only).
        /// `Some(None)`: checkout's defaults; `Some(Some(ratio))`: that
        /// retry budget alone (the default breaker kept from opening);
        /// `None`: budget mode off.
        async fn amplification(retry_budget: Option<Option<f64>>) -> f64 {
            let partner = partner(FaultMode::Normal).await;
            let mut chain = Chain::new(&partner, "", "?status=503", "");
            let mut defaults = false;
            match retry_budget {
                Some(Some(ratio)) => {
                    let mut retry_budget = budget_core::retry::RetryBudgetConfig::default();
                    retry_budget.min_per_sec = 0;
                    retry_budget.ratio = ratio;
                    chain.checkout.pricing.retry_budget = Some(retry_budget);
                    let mut breaker = budget_core::breaker::BreakerConfig::default();
                    breaker.failure_threshold = 1_000_000;
                    chain.checkout.pricing.breaker = Some(breaker);
                }
                Some(None) => defaults = true,
                None => chain = chain.mode(BudgetMode::Off),
            }
            let url = chain.start().await;
            let requests = 60;
            for _ in 0..requests {
                let res = client().get(&url).send().await.unwrap();
                if defaults {
                    // Once the breaker is open: 503 with Retry-After.
                    assert!(matches!(res.status().as_u16(), 502 | 503), "{}", res.status());
                } else {
                    assert_eq!(res.status(), 502);
                }
            }
            let stats = partner.stats();
            let pricing: usize = stats
                .ids
                .values()
                .map(|id| id.calls.iter().filter(|c| c.path == "/pricing").count())
                .sum();
            let ratio = pricing as f64 / requests as f64;
            println!(
                "retry budget {retry_budget:?}: pricing attempts per client request {ratio:.3} ({pricing}/{requests})"
            );
            ratio
        }
        // Per-request retries alone: every request makes checkout's 3
        // pricing attempts (edge makes one attempt, so the hops do not
        // multiply them further).
        assert_eq!(amplification(None).await, 3.0);
        // With a 10 % retry budget on top: about 1.1.
        let ratio = amplification(Some(Some(0.1))).await;
        assert!(
            ratio <= 1.25,
            "amplification {ratio:.3} > 1 + ratio (0.1) + slack"
        );
        assert!(ratio >= 1.0, "every request reached pricing at least once");
        // Checkout's defaults (the outage scenario): the retry budget and the
        // breaker (20 consecutive failures open it for 1 s). 60 sequential
        // requests take well under a second: 20 failing attempts open it,
        // and the rest are refused without a call.
        let ratio = amplification(Some(None)).await;
        assert!(ratio <= 0.5, "the default breaker stops the calls: {ratio:.3}");
    })
    .await;
}

/// Edge trust: told to distrust inbound budgets, edge gives every
/// request its own default whatever the caller sends (a huge or a tiny
/// budget, in any format, even a malformed one), and told to strip internal
/// headers, it returns no `Server-Timing` to the public.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn edge_can_distrust_inbound_budgets_and_strip_internal_headers() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let mut chain = Chain::new(&partner, "", "", "");
        chain.edge.trust_inbound_budget = false;
        chain.edge.strip_internal_headers = true;
        chain.edge.default_budget = ms(1500);
        let url = chain.start().await;
        for (n, (name, value)) in [
            ("request-budget-ms", "9999999999"),
            ("request-budget-ms", "1"),
            ("grpc-timeout", "1m"),
            ("request-budget-ms", "-5"),
        ]
        .into_iter()
        .enumerate()
        {
            let id = format!("distrust-{n}");
            let res = client()
                .get(&url)
                .header("x-request-id", &id)
                .header(name, value)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "{name}: {value}");
            assert!(
                res.headers().get("server-timing").is_none(),
                "internal timings stripped"
            );
            let budgets = partner.stats().ids[&id].budgets_ms();
            let first = budgets[0].expect("the partner got a budget");
            assert!(
                (1300..1500).contains(&first),
                "{name}: {value}: edge's own 1500 ms, less the hops: {first}"
            );
        }
    })
    .await;
}

/// Edge's `max_in_flight` at the service (docs/contract.md §3): at the
/// limit a request waits for a slot while its budget covers the wait and
/// the floor; one that cannot is answered `504` when only the floor
/// (10 ms) is left, nothing downstream called; one with time to spare is
/// served once a slot frees, its wait in `Server-Timing`; the requests in
/// flight finish as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn edge_at_its_in_flight_limit_serves_who_can_wait_and_refuses_who_cannot() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let mut chain = Chain::new(&partner, "", "?delay=1500ms", "");
        chain.edge.max_in_flight = Some(2.into());
        let url = chain.start().await;
        let busy: Vec<_> = (0..2)
            .map(|n| {
                let request = client()
                    .get(&url)
                    .header("x-request-id", format!("busy-{n}"))
                    .header("request-budget-ms", "5000")
                    .send();
                tokio::spawn(request)
            })
            .collect();
        // Both are in flight once the partner holds both pricing calls.
        let in_pricing = |id: &str| {
            partner
                .stats()
                .ids
                .get(id)
                .is_some_and(|s| s.calls.iter().any(|c| c.path == "/pricing"))
        };
        let waiting = Instant::now();
        while !(in_pricing("busy-0") && in_pricing("busy-1")) {
            assert!(waiting.elapsed() < ms(5000), "both reach pricing");
            tokio::time::sleep(ms(10)).await;
        }
        let start = Instant::now();
        let short = client()
            .get(&url)
            .header("x-request-id", "short")
            .header("request-budget-ms", "400")
            .send()
            .await
            .unwrap();
        let took = start.elapsed();
        assert!(
            took >= ms(380) && took < ms(1000),
            "refused when only the floor was left: {took:?}"
        );
        assert_eq!(short.status(), 504);
        assert_eq!(short.headers()["content-type"], "application/problem+json");
        let timing = short.headers()["server-timing"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(timing.contains("budget-queue;dur="), "{timing}");
        let problem: Problem = short.json().await.unwrap();
        assert_eq!(problem.type_uri, "urn:budget:problem:below-floor");
        assert!(
            problem.detail.contains("in-flight slot"),
            "{}",
            problem.detail
        );
        assert!(
            !partner.stats().ids.contains_key("short"),
            "nothing downstream was called"
        );
        let over = client()
            .get(&url)
            .header("x-request-id", "over")
            .header("request-budget-ms", "5000")
            .send()
            .await
            .unwrap();
        assert_eq!(over.status(), 200, "served once a slot freed");
        let timing = over.headers()["server-timing"].to_str().unwrap().to_owned();
        assert!(timing.contains("budget-queue;dur="), "{timing}");
        for request in busy {
            assert_eq!(request.await.unwrap().unwrap().status(), 200);
        }
        // The slots are free again.
        let after = client()
            .get(&url)
            .header("request-budget-ms", "5000")
            .send()
            .await
            .unwrap();
        assert_eq!(after.status(), 200);
    })
    .await;
}
