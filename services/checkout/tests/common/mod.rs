//! Helpers shared by the integration tests: slow partners and checkout on
//! loopback, a client with bounded timeouts, and a bound on every test.

#![allow(dead_code)] // each test binary uses its own subset

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use budget_core::ledger::{Metric, parse_server_timing};
use checkout::CheckoutConfig;
use slow_partner::{FaultMode, PartnerConfig, PartnerHandle};

/// No test may take longer than this, whatever goes wrong.
pub const TEST_BOUND: Duration = Duration::from_secs(30);

/// Runs `test` with [`TEST_BOUND`] as its limit.
pub async fn bounded<T>(test: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_BOUND, test)
        .await
        .expect("the test ran past its bound")
}

/// Milliseconds.
pub fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A slow partner on a free loopback port, in `mode`.
pub async fn partner(mode: FaultMode) -> PartnerHandle {
    let config = PartnerConfig::new("127.0.0.1:0".parse().unwrap())
        .with_mode(mode)
        .with_shutdown_grace(ms(200));
    slow_partner::spawn(config)
        .await
        .expect("the partner starts")
}

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

/// A client whose every request gives up after 15 s.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap()
}

/// The response's `Server-Timing` metrics (every field of the header).
pub fn server_timing(res: &reqwest::Response) -> Vec<Metric> {
    let fields: Vec<&str> = res
        .headers()
        .get_all("server-timing")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    parse_server_timing(&fields.join(", "))
}

/// The metric names, in order.
pub fn names(metrics: &[Metric]) -> Vec<&str> {
    metrics.iter().map(|m| m.name.as_str()).collect()
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
