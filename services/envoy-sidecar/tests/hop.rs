//! Envoy as a hop the budget crosses: client -> edge -> Envoy -> checkout
//! -> Envoy -> slow partner, budget mode on, every process on 127.0.0.1
//! (docs/contract.md §1, "Through Envoy"). What each Envoy received is its
//! access log's; what checkout read, its ledger's (through edge's
//! `Server-Timing`); what the partner read, its answers'.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use budget_core::ledger::Metric;
use checkout::CheckoutConfig;
use common::{envoy, logged, millis, seen_at_least};
use edge::EdgeConfig;
use envoy_sidecar::Sidecar;
use envoy_sidecar::config::{self, Hop};
use slow_partner::{FaultMode, PartnerHandle};
use test_support::{bounded, client, partner, server_timing};

/// The chain with an Envoy on each hop; the one in front of checkout has
/// `route_timeout`.
struct Chain {
    edge: SocketAddr,
    to_checkout: Sidecar,
    to_partner: Sidecar,
    partner: PartnerHandle,
}

async fn chain(route_timeout: Duration) -> Chain {
    let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let partner = partner(FaultMode::Normal).await;
    let to_partner = envoy(&logged(
        &config::hop(&Hop::new([partner.addr()])),
        "to-partner",
    ))
    .await;
    let via = |path: &str| format!("http://{}{path}?delay=10ms", to_partner.listener("hop"));
    let mut checkout = CheckoutConfig::new(loopback);
    checkout.inventory_url = via("/inventory");
    checkout.pricing_url = via("/pricing");
    checkout.recommendations_url = via("/recommendations");
    let (checkout, _) = checkout::spawn(&checkout, std::future::pending())
        .await
        .expect("checkout starts");
    let hop = Hop::new([checkout]).route_timeout(route_timeout);
    let to_checkout = envoy(&logged(&config::hop(&hop), "to-checkout")).await;
    let edge = EdgeConfig::new(loopback, format!("http://{}", to_checkout.listener("hop")));
    let (edge, _) = edge::spawn(&edge, std::future::pending())
        .await
        .expect("edge starts");
    Chain {
        edge,
        to_checkout,
        to_partner,
        partner,
    }
}

/// `/checkout` through the chain with a 2 s budget: its status, ledger and
/// answer.
async fn checkout(edge: SocketAddr) -> (u16, Vec<Metric>, serde_json::Value) {
    let res = client()
        .get(format!("http://{edge}/checkout"))
        .header("request-budget-ms", "2000")
        .header("x-request-id", "through-envoy")
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let metrics = server_timing(&res);
    (status, metrics, res.json().await.unwrap())
}

/// The metric named `name` whose `desc` starts with `desc`.
fn metric<'a>(metrics: &'a [Metric], name: &str, desc: &str) -> &'a Metric {
    metrics
        .iter()
        .find(|m| m.name == name && m.desc.as_deref().unwrap_or("").starts_with(desc))
        .unwrap_or_else(|| panic!("no {name} \"{desc}...\" in {metrics:?}"))
}

/// How much of an attempt through Envoy may be Envoy's and the
/// network's on loopback, a new connection included (a loaded machine's
/// scheduling too): the attempt minus Envoy's `x-envoy-upstream-service-time`.
const ENVOY_SHARE_MS: f64 = 10.0;

/// An attempt's duration and the upstream time Envoy stamped on its
/// answer (`200 (upstream 12ms)`), in ms.
fn through_envoy(step: &Metric) -> (f64, f64) {
    let desc = step.desc.as_deref().unwrap_or_default();
    let upstream = desc
        .strip_prefix("200 (upstream ")
        .and_then(|rest| rest.strip_suffix("ms)"))
        .unwrap_or_else(|| panic!("not an answer carried by Envoy: {step:?}"));
    (step.dur.expect("a duration"), upstream.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_budget_crosses_both_envoys_intact_less_their_time() {
    bounded(async {
        let chain = chain(config::ENVOY_DEFAULT_ROUTE_TIMEOUT).await;
        let (status, metrics, answer) = checkout(chain.edge).await;
        assert_eq!(status, 200, "{metrics:?}");

        // Hop 1: what edge sent into Envoy is what checkout read, within 2 ms.
        let sent = millis(
            &seen_at_least(&chain.to_checkout, "to-checkout", 1).await[0],
            "budget",
        );
        let read = metric(&metrics, "checkout.budget", "ingress").dur.unwrap();
        assert!(
            read <= sent as f64 && read >= sent as f64 - 2.0,
            "sent {sent}, read {read}"
        );
        assert!(
            sent < 2000 && sent > 1900,
            "edge's reserve and time off 2000: {sent}"
        );
        // Edge's step says how much of it was Envoy's (and the network's).
        let (took, upstream) = through_envoy(metric(&metrics, "checkout", "200"));
        assert!(
            took >= upstream && took - upstream < ENVOY_SHARE_MS,
            "{took} ms, upstream {upstream} ms"
        );

        // Hop 2: what checkout sent into Envoy per dependency is what the
        // partner read, within 2 ms; checkout's steps carry Envoy's time.
        let lines = seen_at_least(&chain.to_partner, "to-partner", 3).await;
        for dependency in ["inventory", "pricing", "recommendations"] {
            let line = lines
                .iter()
                .find(|l| l["path"].starts_with(&format!("/{dependency}")))
                .unwrap_or_else(|| panic!("no {dependency} in {lines:?}"));
            let sent = millis(line, "budget");
            let read = answer[dependency]["budget_ms"].as_u64().unwrap();
            assert!(
                read <= sent && read + 2 >= sent,
                "{dependency}: sent {sent}, read {read}"
            );
            assert!(sent as f64 <= metric(&metrics, "checkout.budget", "ingress").dur.unwrap());
            let (took, upstream) =
                through_envoy(metric(&metrics, &format!("checkout.{dependency}"), "200"));
            assert!(
                took >= upstream && took - upstream < ENVOY_SHARE_MS,
                "{dependency}: {took} ms, upstream {upstream} ms"
            );
        }
        chain.partner.shutdown().await;
    })
    .await;
}

/// Envoy's route timeout shorter than the budget is the budget checkout
/// works with (`x-envoy-expected-rq-timeout-ms` wins), and the ledger says
/// Envoy's route cut it and what edge had sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_route_timeout_shorter_than_the_budget_wins_and_the_ledger_says_so() {
    bounded(async {
        let chain = chain(Duration::from_millis(700)).await;
        let (status, metrics, answer) = checkout(chain.edge).await;
        assert_eq!(status, 200, "{metrics:?}");
        let sent = millis(&seen_at_least(&chain.to_checkout, "to-checkout", 1).await[0], "budget");
        assert_eq!(metric(&metrics, "checkout.budget", "ingress").dur, Some(700.0));
        let finding = metric(&metrics, "checkout.budget", "cut to");
        assert_eq!(
            finding.desc.as_deref(),
            Some(format!("cut to 700ms by x-envoy-expected-rq-timeout-ms: request-budget-ms said {sent}ms").as_str())
        );
        // The partner got what was left of the 700 ms, not of edge's budget.
        let read = answer["pricing"]["budget_ms"].as_u64().unwrap();
        assert!(read < 700 && read > 500, "{read}");
        chain.partner.shutdown().await;
    })
    .await;
}
