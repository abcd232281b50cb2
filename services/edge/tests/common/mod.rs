//! What the chain tests of this directory share: checkout and edge in this
//! process, in front of whatever partner a test runs.

use std::net::SocketAddr;
use std::time::Duration;

use checkout::CheckoutConfig;
use edge::EdgeConfig;

/// Starts checkout with these inventory, pricing and recommendations URLs,
/// then edge in front of it; returns (edge, checkout).
#[allow(dead_code)] // each test binary uses its own subset
pub async fn chain(
    inventory: String,
    pricing: String,
    recommendations: String,
) -> (SocketAddr, SocketAddr) {
    chain_reserving(inventory, pricing, recommendations, None).await
}

/// [`chain`] with checkout's per-hop reserve set to `reserve` (its
/// default, 5 ms, when `None`): the time checkout's own answer has to
/// reach edge after checkout gives up on a dependency, which a test that
/// asserts which hop is named gives more than a loaded machine may take.
#[allow(dead_code)] // each test binary uses its own subset
pub async fn chain_reserving(
    inventory: String,
    pricing: String,
    recommendations: String,
    reserve: Option<Duration>,
) -> (SocketAddr, SocketAddr) {
    let loopback = "127.0.0.1:0".parse().unwrap();
    let mut checkout = CheckoutConfig::new(loopback);
    checkout.inventory_url = inventory;
    checkout.pricing_url = pricing;
    checkout.recommendations_url = recommendations;
    if let Some(reserve) = reserve {
        checkout.reserve = reserve;
    }
    let (checkout, _) = checkout::spawn(&checkout, std::future::pending())
        .await
        .expect("checkout starts");
    let edge = EdgeConfig::new(loopback, format!("http://{checkout}"));
    let (edge, _) = edge::spawn(&edge, std::future::pending())
        .await
        .expect("edge starts");
    (edge, checkout)
}

/// The `grpc://` URL of `partner`'s gRPC face with `path_and_query`.
#[allow(dead_code)] // each test binary uses its own subset
pub fn grpc_url(partner: &slow_partner::PartnerHandle, path_and_query: &str) -> String {
    format!("grpc://{}{path_and_query}", partner.addr())
}
