//! Helpers shared by the integration tests: checkout on loopback in front
//! of a slow partner; the partner, the client, the bound on every test and
//! the `Server-Timing` readers are `test_support`'s (re-exported here).

#![allow(dead_code)] // each test binary uses its own subset

use std::net::SocketAddr;

use checkout::CheckoutConfig;
use slow_partner::{PartnerConfig, PartnerHandle};

#[allow(unused_imports)] // each test binary uses its own subset
pub use test_support::{bounded, client, ms, names, partner, server_timing};

/// A checkout config on a free loopback port whose three dependencies are
/// paths of `partner`, each with its query string (`""` for none).
pub fn config(
    partner: &PartnerHandle,
    inventory: &str,
    pricing: &str,
    recs: &str,
) -> CheckoutConfig {
    let mut config = CheckoutConfig::new("127.0.0.1:0".parse().unwrap());
    config.inventory_url = partner.url(&format!("/inventory{inventory}"));
    config.pricing_url = partner.url(&format!("/pricing{pricing}"));
    config.recommendations_url = partner.url(&format!("/recommendations{recs}"));
    config
}

/// Starts checkout; returns its `/checkout` URL.
pub async fn start(config: &CheckoutConfig) -> String {
    let (addr, _server): (SocketAddr, _) = checkout::spawn(config, std::future::pending())
        .await
        .expect("checkout starts");
    format!("http://{addr}/checkout")
}

/// The paths `partner` saw for `id`, in order.
pub fn paths_seen(partner: &PartnerHandle, id: &str) -> Vec<String> {
    partner
        .stats()
        .ids
        .get(id)
        .map(|s| s.calls.iter().map(|c| c.path.clone()).collect())
        .unwrap_or_default()
}

/// A slow partner on a free loopback port that works on at most `workers`
/// calls at once per path (FIFO beyond), as a real server's latency grows
/// with load.
pub async fn partner_with_workers(workers: usize) -> PartnerHandle {
    slow_partner::spawn(
        PartnerConfig::new("127.0.0.1:0".parse().unwrap())
            .with_workers(Some(workers))
            .with_shutdown_grace(std::time::Duration::from_secs(1)),
    )
    .await
    .unwrap()
}
