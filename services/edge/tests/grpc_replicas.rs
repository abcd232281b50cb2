//! Inventory's replicas over gRPC: checkout with `[inventory] endpoints`
//! and a `grpc://` inventory URL, the slow partner's gRPC face behind one
//! of them (docs/architecture.md, "Replicas"). Its own binary: the chain
//! tests of `grpc_hop.rs` time a 504 to the millisecond, and this one's
//! twenty calls beside them would be their noise.

mod common;

use slow_partner::FaultMode;
use test_support::{bounded, partner};

/// Inventory's replicas over gRPC (`[inventory] endpoints`): a replica that
/// refuses its connections costs a retry on the live one, which answers,
/// and the ledger says which replica did.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grpc_replicas_are_balanced_and_a_dead_one_is_passed_over() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let dead = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let loopback = "127.0.0.1:0".parse().unwrap();
        let mut checkout = checkout::CheckoutConfig::new(loopback);
        checkout.inventory_url = common::grpc_url(&partner, "/inventory?delay=5ms");
        checkout.inventory.endpoints = Some(vec![
            format!("http://{dead}"),
            format!("http://{}", partner.addr()),
        ]);
        checkout.pricing_url = partner.url("/pricing");
        checkout.recommendations_url = partner.url("/recommendations");
        let (checkout, _) = checkout::spawn(&checkout, std::future::pending())
            .await
            .expect("checkout starts");
        let client = reqwest::Client::builder()
            .tls_backend_rustls()
            .build()
            .unwrap();
        let answered = format!("200 from {}", partner.addr());
        let mut named = 0;
        for _ in 0..20 {
            let res = client
                .get(format!("http://{checkout}/checkout"))
                .header("request-budget-ms", "1500")
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200);
            let timing = res.headers()["server-timing"].to_str().unwrap().to_owned();
            if timing.contains(&answered) {
                named += 1;
            }
            assert!(!timing.contains(&format!("200 from {dead}")), "{timing}");
        }
        assert_eq!(named, 20, "every inventory answer names its replica");
        partner.shutdown().await;
    })
    .await;
}
