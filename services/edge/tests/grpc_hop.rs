//! A gRPC hop in the chain: client -> edge -> checkout, whose inventory is
//! the slow partner's gRPC face (`inventory_url = grpc://...`), the others
//! its HTTP paths. The budget crosses the gRPC hop as `grpc-timeout`, the
//! hop's attempts are in the one ledger, and a slow gRPC inventory is the
//! same 504 as a slow HTTP one (gRPC in the chain).

mod common;

use std::time::Duration;

use budget_core::problem::Problem;
use slow_partner::FaultMode;
use test_support::{bounded, partner};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_budget_crosses_the_grpc_hop_as_grpc_timeout() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let (edge, _) = common::chain(
            common::grpc_url(&partner, "/inventory?delay=20ms"),
            partner.url("/pricing"),
            partner.url("/recommendations"),
        )
        .await;
        let res = reqwest::Client::builder()
            .tls_backend_rustls()
            .build()
            .unwrap()
            .get(format!("http://{edge}/checkout"))
            .header("request-budget-ms", "1500")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let timing = res.headers()["server-timing"].to_str().unwrap().to_owned();
        assert!(timing.contains("checkout.inventory;dur="), "{timing}");
        let answer: serde_json::Value = res.json().await.unwrap();
        let inventory = &answer["inventory"];
        assert_eq!(inventory["path"], "/inventory");
        assert_eq!(inventory["budget_header"], "grpc-timeout");
        let budget = inventory["budget_ms"].as_u64().unwrap();
        // Edge's 10 ms and checkout's 5 ms reserves, and what they spent.
        assert!(budget < 1500 - 15 && budget > 1000, "{budget}");
        let pricing = &answer["pricing"];
        assert_eq!(pricing["budget_header"], "request-budget-ms");
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_grpc_inventory_is_the_contract_s_504_within_the_budget() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let (edge, _) = common::chain_reserving(
            common::grpc_url(&partner, "/inventory?delay=5s"),
            partner.url("/pricing"),
            partner.url("/recommendations"),
            // Checkout's 504 for inventory must reach edge before edge's
            // own call runs out: which hop is named is what this test
            // asserts, not whether 5 ms is enough on a loaded machine.
            Some(Duration::from_millis(150)),
        )
        .await;
        let start = Instant::now();
        let res = reqwest::Client::builder()
            .tls_backend_rustls()
            .build()
            .unwrap()
            .get(format!("http://{edge}/checkout"))
            .header("request-budget-ms", "800")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 504);
        assert!(
            start.elapsed() < Duration::from_millis(800 + 700),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(res.headers()["content-type"], "application/problem+json");
        let timing = res.headers()["server-timing"].to_str().unwrap().to_owned();
        let problem: Problem = res.json().await.unwrap();
        assert_eq!(
            problem.dependency.as_deref(),
            Some("inventory"),
            "{problem:?} {timing}"
        );
        partner.shutdown().await;
    })
    .await;
}
