//! Envoy's own refusals, as the budget client in front of it sees them
//! (docs/contract.md §2, "Envoy in the path"): a real Envoy between a
//! `BudgetClient` and the slow partner, on 127.0.0.1. Its route timeout,
//! its circuit breaker's overflow, its concurrency limit and its failed
//! connection are named as Envoy's in the caller's ledger and metrics,
//! apart from the partner's own `503`, which carries Envoy's upstream
//! time; the mesh's shedding is neither retried nor held against the
//! partner.

mod common;

use std::time::Duration;

use budget_core::Budget;
use budget_core::breaker::{BreakerConfig, BreakerState};
use budget_core::client::{BudgetClient, DependencyConfig};
use budget_core::context::RequestContext;
use budget_core::ledger::Ledger;
use common::{
    attempts, attempts_with, envoy, envoy_on_one_worker, one_at_a_time, one_concurrent,
    with_metrics,
};
use envoy_sidecar::config::{self, Hop};
use slow_partner::FaultMode;
use test_support::{bounded, client, partner};

/// One `GET` through `pricing` inside a request of `budget`: its status
/// and attempts (or the call's error), and the request's ledger.
async fn call(pricing: &BudgetClient, budget: Duration) -> (Result<(u16, u32), String>, Ledger) {
    let cx = RequestContext::new(Budget::new(budget));
    let ledger = cx.ledger().clone();
    let answer = cx
        .scope(async { pricing.get("").send().await })
        .await
        .map(|res| (res.status().as_u16(), res.attempts()))
        .map_err(|e| e.to_string());
    (answer, ledger)
}

#[test]
fn envoy_s_route_timeout_is_envoy_s_in_the_ledger_and_metrics_and_retried() {
    let (answer, outcomes, rendered) = with_metrics(|handle| async move {
        let partner = partner(FaultMode::Normal).await;
        let hop = Hop::new([partner.addr()]).route_timeout(Duration::from_millis(150));
        let envoy = envoy(&config::hop(&hop)).await;
        let url = format!("http://{}/pricing?delay=2s", envoy.listener("hop"));
        let pricing = DependencyConfig::new("pricing", url).build().unwrap();
        let (answer, ledger) = call(&pricing, Duration::from_millis(900)).await;
        partner.shutdown().await;
        (answer, attempts(&ledger, "pricing"), handle.render())
    });
    // Envoy's 504, each attempt named as Envoy's route timeout.
    let (status, tried) = answer.unwrap();
    assert_eq!(status, 504);
    assert!(
        tried >= 2,
        "a route timeout is retried within the budget: {outcomes:?}"
    );
    assert_eq!(outcomes.len(), tried as usize);
    assert!(
        outcomes
            .iter()
            .all(|o| o == "envoy UT: upstream request timeout (504)"),
        "{outcomes:?}"
    );
    assert_eq!(
        attempts_with(&rendered, "pricing", "envoy-upstream-timeout"),
        u64::from(tried)
    );
    assert_eq!(attempts_with(&rendered, "pricing", "504"), 0, "{rendered}");
}

#[test]
fn envoy_s_overflow_is_envoy_s_not_retried_and_not_held_against_the_partner() {
    let (answer, outcomes, breaker, rendered) = with_metrics(|handle| async move {
        let partner = partner(FaultMode::Normal).await;
        let hop = one_at_a_time(&config::hop(&Hop::new([partner.addr()])));
        let envoy = envoy_on_one_worker(&hop).await;
        let base = format!("http://{}", envoy.listener("hop"));
        // One call in flight, then one waiting for the connection, fill the
        // circuit breaker: the next one overflows.
        let mut busy = Vec::new();
        for gauge in ["upstream_rq_active", "upstream_rq_pending_active"] {
            busy.push(tokio::spawn(
                client().get(format!("{base}/slow?delay=3s")).send(),
            ));
            common::wait_for_stat(&envoy, &format!("cluster.upstream.{gauge}"), 1).await;
        }
        let mut config = DependencyConfig::new("pricing", format!("{base}/pricing"));
        let mut breaker = BreakerConfig::default();
        breaker.failure_threshold = 1;
        config.breaker = Some(breaker);
        let pricing = config.build().unwrap();
        let (answer, ledger) = call(&pricing, Duration::from_millis(900)).await;
        let breaker = pricing.breaker().map(|b| b.state());
        busy.iter().for_each(tokio::task::JoinHandle::abort);
        partner.shutdown().await;
        (
            answer,
            attempts(&ledger, "pricing"),
            breaker,
            handle.render(),
        )
    });
    assert_eq!(answer.unwrap(), (503, 1), "{outcomes:?}");
    assert_eq!(outcomes, ["envoy UO: upstream overflow (503)"]);
    assert_eq!(
        breaker,
        Some(BreakerState::Closed),
        "the mesh shed it: not the partner's failure"
    );
    assert_eq!(
        attempts_with(&rendered, "pricing", "envoy-overflow"),
        1,
        "{rendered}"
    );
    assert_eq!(attempts_with(&rendered, "pricing", "503"), 0);
}

#[test]
fn a_partner_s_own_503_through_envoy_is_the_partner_s_with_envoy_s_upstream_time() {
    let (answer, outcomes, rendered) = with_metrics(|handle| async move {
        let partner = partner(FaultMode::Normal).await;
        let envoy = envoy(&config::hop(&Hop::new([partner.addr()]))).await;
        let url = format!(
            "http://{}/pricing?status=503&delay=5ms",
            envoy.listener("hop")
        );
        let pricing = DependencyConfig::new("pricing", url).build().unwrap();
        let (answer, ledger) = call(&pricing, Duration::from_millis(900)).await;
        partner.shutdown().await;
        (answer, attempts(&ledger, "pricing"), handle.render())
    });
    let (status, tried) = answer.unwrap();
    assert_eq!(
        (status, tried),
        (503, 3),
        "retried as a 503 is: {outcomes:?}"
    );
    for outcome in &outcomes {
        let upstream = outcome
            .strip_prefix("503 (upstream ")
            .and_then(|ms| ms.strip_suffix("ms)"))
            .unwrap_or_else(|| panic!("the partner's 503 with Envoy's time: {outcome}"));
        assert!(upstream.parse::<u64>().unwrap() >= 5, "{outcome}");
    }
    assert_eq!(attempts_with(&rendered, "pricing", "503"), 3, "{rendered}");
    assert_eq!(attempts_with(&rendered, "pricing", "envoy-other"), 0);
}

/// The adaptive concurrency filter's `503`: the mesh shedding load, told
/// apart by Envoy's text in the body (`BudgetClient` holds it whole).
#[test]
fn envoy_s_concurrency_limit_is_envoy_s_and_not_retried() {
    let (answer, outcomes, rendered) = with_metrics(|handle| async move {
        let partner = partner(FaultMode::Normal).await;
        let envoy =
            envoy_on_one_worker(&one_concurrent(&config::hop(&Hop::new([partner.addr()])))).await;
        let base = format!("http://{}", envoy.listener("hop"));
        let busy = tokio::spawn(client().get(format!("{base}/slow?delay=3s")).send());
        common::wait_for_stat(&envoy, "cluster.upstream.upstream_rq_active", 1).await;
        let pricing = DependencyConfig::new("pricing", format!("{base}/pricing"))
            .build()
            .unwrap();
        let (answer, ledger) = call(&pricing, Duration::from_millis(900)).await;
        busy.abort();
        partner.shutdown().await;
        (answer, attempts(&ledger, "pricing"), handle.render())
    });
    assert_eq!(answer.unwrap(), (503, 1), "{outcomes:?}");
    assert_eq!(outcomes, ["envoy: reached concurrency limit (503)"]);
    assert_eq!(
        attempts_with(&rendered, "pricing", "envoy-concurrency-limit"),
        1,
        "{rendered}"
    );
}

/// Envoy that cannot connect to the partner: its `503` named as a failed
/// connection, retried as a connect failure is.
#[tokio::test]
async fn envoy_s_failed_connection_is_envoy_s_and_retried() {
    bounded(async {
        // A port nothing listens on: bound, then closed.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let envoy = envoy(&config::hop(&Hop::new([closed]))).await;
        let url = format!("http://{}/pricing", envoy.listener("hop"));
        let pricing = DependencyConfig::new("pricing", url).build().unwrap();
        let (answer, ledger) = call(&pricing, Duration::from_millis(900)).await;
        let outcomes = attempts(&ledger, "pricing");
        assert_eq!(answer.unwrap(), (503, 3), "{outcomes:?}");
        assert!(
            outcomes
                .iter()
                .all(|o| o == "envoy UF: upstream connection failure (503)"),
            "{outcomes:?}"
        );
    })
    .await;
}
