//! Checkout with `on_unavailable = "stale"` for inventory, against a real
//! slow partner on loopback: after an outage starts, the answer carries
//! inventory's last good answer, marked degraded with its age as the
//! ledger says it. Timing bounds are generous; every test runs under an
//! outer bound.

mod common;

use checkout::CheckoutAnswer;
use common::*;
use slow_partner::FaultMode;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stale_inventory_keeps_checkout_answering_and_marks_the_answer_degraded() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let mut config = config(&partner, "?sku=7", "", "");
        config.inventory =
            toml::from_str("on_unavailable = \"stale\"\nmax_stale = \"30s\"").unwrap();
        let url = start(&config).await;

        let res = client()
            .get(&url)
            .header("x-request-id", "fresh-1")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let fresh: CheckoutAnswer = res.json().await.unwrap();
        assert!(fresh.degraded.is_empty(), "{:?}", fresh.degraded);

        // Inventory's outage starts.
        partner.set_path_status("/inventory", Some(503)).unwrap();
        tokio::time::sleep(ms(50)).await;
        let res = client()
            .get(&url)
            .header("x-request-id", "stale-1")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "answered, not 502");
        let timing = server_timing(&res);
        let answer: CheckoutAnswer = res.json().await.unwrap();
        assert_eq!(answer.inventory, fresh.inventory, "the last good answer");
        assert_eq!(answer.pricing["path"], "/pricing", "the others are fresh");
        assert_eq!(answer.request_id.as_deref(), Some("stale-1"));
        assert_eq!(answer.degraded.len(), 1, "{:?}", answer.degraded);
        let degraded = &answer.degraded[0];
        assert_eq!(degraded.dependency, "inventory");
        assert!(degraded.reason.starts_with("stale "), "{}", degraded.reason);

        // The ledger: inventory's two 503 attempts and the wait, then the
        // note the answer repeats, then pricing and recommendations.
        let inventory: Vec<_> = timing.iter().filter(|m| m.name == "inventory").collect();
        assert_eq!(inventory.len(), 3, "{timing:?}");
        assert_eq!(inventory[0].desc.as_deref(), Some("503"));
        assert_eq!(inventory[1].desc.as_deref(), Some("503"));
        assert_eq!(inventory[2].desc.as_deref(), Some(degraded.reason.as_str()));
        assert_eq!(inventory[2].dur, None);
        assert_eq!(
            paths_seen(&partner, "stale-1"),
            ["/inventory", "/inventory", "/pricing", "/recommendations"]
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_the_stale_fallback_the_same_outage_is_a_502() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let url = start(&config(&partner, "", "", "")).await;
        let res = client().get(&url).send().await.unwrap();
        assert_eq!(res.status(), 200);
        partner.set_path_status("/inventory", Some(503)).unwrap();
        let res = client().get(&url).send().await.unwrap();
        assert_eq!(res.status(), 502, "on_unavailable defaults to fail");
    })
    .await;
}

/// The same over gRPC (`inventory_url = grpc://...`, the slow partner's
/// gRPC face): the layer keeps inventory's last `OK` answer and serves it
/// when the partner answers `UNAVAILABLE`, and checkout marks it degraded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stale_grpc_inventory_keeps_checkout_answering_and_marks_the_answer_degraded() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let mut config = config(&partner, "", "", "");
        config.inventory_url = format!("grpc://{}/inventory?sku=7", partner.addr());
        config.inventory =
            toml::from_str("on_unavailable = \"stale\"\nmax_stale = \"30s\"").unwrap();
        let url = start(&config).await;

        let res = client().get(&url).send().await.unwrap();
        assert_eq!(res.status(), 200);
        let fresh: CheckoutAnswer = res.json().await.unwrap();
        assert!(fresh.degraded.is_empty(), "{:?}", fresh.degraded);
        assert_eq!(fresh.inventory["path"], "/inventory");

        partner.set_path_status("/inventory", Some(503)).unwrap();
        let res = client().get(&url).send().await.unwrap();
        assert_eq!(res.status(), 200, "answered, not 503");
        let timing = server_timing(&res);
        let answer: CheckoutAnswer = res.json().await.unwrap();
        assert_eq!(answer.inventory, fresh.inventory, "the last good answer");
        assert_eq!(answer.degraded.len(), 1, "{:?}", answer.degraded);
        let degraded = &answer.degraded[0];
        assert_eq!(degraded.dependency, "inventory");
        assert!(degraded.reason.starts_with("stale "), "{}", degraded.reason);
        // The attempts answered UNAVAILABLE, then the note.
        let inventory: Vec<_> = timing.iter().filter(|m| m.name == "inventory").collect();
        assert!(inventory.len() >= 2, "{timing:?}");
        assert_eq!(inventory[0].desc.as_deref(), Some("grpc-14"), "{timing:?}");
        let note = inventory.last().unwrap();
        assert_eq!(note.desc.as_deref(), Some(degraded.reason.as_str()));

        // Without the fallback the same outage fails the request
        // (`UNAVAILABLE` with no pushback: dependency-unavailable, 504).
        config.inventory = Default::default();
        let url = start(&config).await;
        let res = client().get(&url).send().await.unwrap();
        assert_eq!(res.status(), 504, "on_unavailable defaults to fail");
        let problem: budget_core::problem::Problem = res.json().await.unwrap();
        assert_eq!(problem.dependency.as_deref(), Some("inventory"));
    })
    .await;
}
