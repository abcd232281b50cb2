//! The chain's capacity, and what checkout and the peers are configured with.

use super::*;
use crate::scenario::Scenario as _;
use crate::scenarios::blackhole::Blackhole;
use crate::scenarios::healthy::Healthy;
use crate::scenarios::replicas::Replicas;

#[test]
fn capacity_is_the_slowest_path_s_partner_workers_over_its_mean_latency() {
    let mut s = ChainSettings::default();
    assert_eq!(s.capacity(), 160.0);
    s.partner_workers = 4;
    assert_eq!(s.capacity(), 80.0);
    // A fixed client limit is a comparison row: same capacity, same load.
    s.concurrency = Some(2);
    assert_eq!(s.capacity(), 80.0);
    assert_eq!(s.peer_concurrency(), 2);
    let c = s.partner_config();
    assert_eq!(c.path_workers.len(), 3);
    assert!(PARTNER_PATHS.iter().all(|p| c.path_workers[*p] == 4));
    assert!(c.validate().is_ok());
}

#[tokio::test]
async fn checkout_keeps_its_default_limit_unless_a_comparison_row_sets_one() {
    let mut settings = ChainSettings::default();
    let partners = Partners::start_main(settings.partner_config())
        .await
        .unwrap();
    let healthy = Healthy.setup(&settings);
    let default = CheckoutConfig::new(loopback());
    let c = checkout_config(&healthy, &settings, BudgetMode::On, &partners).unwrap();
    for (dep, def) in [
        (&c.inventory, &default.inventory),
        (&c.pricing, &default.pricing),
        (&c.recommendations, &default.recommendations),
    ] {
        assert_eq!(dep.concurrency, def.concurrency);
    }
    assert_eq!(peer_config(&c, &settings).concurrency, 8);
    settings.concurrency = Some(5);
    let c = checkout_config(&healthy, &settings, BudgetMode::On, &partners).unwrap();
    for dep in [&c.inventory, &c.pricing, &c.recommendations] {
        assert_eq!(dep.concurrency, Some(5.into()));
    }
    assert_eq!(peer_config(&c, &settings).concurrency, 5);
    // Blackholed inventory needs the blackholed partner.
    let bh = Blackhole.setup(&settings);
    assert!(checkout_config(&bh, &settings, BudgetMode::On, &partners).is_err());
    partners.shutdown().await;
}

#[tokio::test]
async fn replicas_give_checkout_and_the_peers_every_replica_as_endpoints() {
    let settings = ChainSettings::default();
    let partners = Partners::start_replicas(&settings, 3).await.unwrap();
    assert_eq!(partners.all().len(), 3);
    let endpoints = partners.endpoints();
    assert!(endpoints.iter().all(|e| e.starts_with("http://127.0.0.1:")));
    let s = Replicas.setup(&settings);
    assert!(s.partners.is_replicas() && s.capacity == 480.0);
    let c = checkout_config(&s, &settings, BudgetMode::On, &partners).unwrap();
    for dep in [&c.inventory, &c.pricing, &c.recommendations] {
        assert_eq!(dep.endpoints.as_ref(), Some(&endpoints));
    }
    // The path and query are the scenario's, the healthy shapes.
    assert!(c.pricing_url.ends_with("/pricing?delay=45ms&jitter=10ms"));
    // Any other scenario: no endpoints.
    let healthy = Healthy.setup(&settings);
    let c = checkout_config(&healthy, &settings, BudgetMode::On, &partners).unwrap();
    assert!(c.pricing.endpoints.is_none());
    // Each replica has the chain's workers per path.
    for p in partners.all() {
        assert_eq!(p.stats().paths["/pricing"].workers, 8);
    }
    partners.shutdown().await;
}
