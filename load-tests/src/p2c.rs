//! The `p2c` mode: the plain-tower peer checkout ([`crate::peer`]) with each
//! dependency balanced over its replicas, as a tower user would balance it
//! without this project.
//!
//! A dependency with several replicas (`PeerConfig::endpoints`: base URLs
//! `http://host:port`, the dependency's path and query on each) gets one
//! stack, built once and cloned per call:
//!
//! - [`LoadShed`](tower::load_shed::LoadShed), outermost, as in the `peer`
//!   mode: when the buffer below has no room, the call fails at once with
//!   `Overloaded`;
//! - [`Timeout`](tower::timeout::Timeout) of `PeerConfig::timeout` (2 s):
//!   it is outside the buffer, so it covers the wait for a replica and the
//!   call together (no call waits in the buffer longer than that);
//! - a [`Buffer`] of [`PeerConfig::concurrency`](crate::peer::PeerConfig::concurrency)
//!   (8) calls: tower's `Balance` needs `&mut self` and is not `Clone`, so
//!   the clones every call takes share it through a buffer, whose worker
//!   task owns the balancer (tower's own advice, and what Linkerd does). The
//!   buffer is where calls wait when no replica can take one more: at most
//!   8 of them, then `LoadShed` sheds;
//! - [`Balance`]: power of two choices over the replicas that are ready,
//!   the less loaded of two picked at random;
//! - per replica, [`PeakEwma`] with [`CompleteOnResponse`]: its load is
//!   the peak-sensitive moving average of the replica's latency times its
//!   calls in flight plus one. The parameters are Linkerd's: a **default
//!   RTT of 30 ms** ([`DEFAULT_RTT`]: a replica nothing was measured of yet
//!   looks like a healthy one, so a fresh replica gets calls at once) and
//!   a **decay of 10 s** ([`DECAY`]: the estimate falls back towards zero
//!   with that time constant, and a faster answer moves it little; a
//!   slower one replaces it at once). tower's docs mention a 1 s default,
//!   but its constructor takes any; 1 s would starve a fresh replica until
//!   the others' estimates climbed to it. The flip side, measured by the
//!   `replicas` scenario: a replica whose calls once took 0.5 s (ten times
//!   slower) or 2 s (timed out while blackholed) costs more than a healthy
//!   replica with its calls in flight for the next 15 to 30 s, so it gets
//!   about 2 % of the calls long after it recovered;
//! - per replica, a [`ConcurrencyLimit`](tower::limit::ConcurrencyLimit) of
//!   [`PeerConfig::concurrency`](crate::peer::PeerConfig::concurrency) (8,
//!   the partner's workers per path), **inside** `PeakEwma`: the `peer`
//!   mode's hand-sized limit, now per replica, which is what a tower user
//!   sizing each replica would write. It also makes a full replica *not
//!   ready*, and `Balance` only picks among ready replicas, so a replica
//!   that holds 8 calls (a blackholed one, whose calls wait for their
//!   timeout) gets no more until one ends; without it, p2c would only lean
//!   away from it by its load, and nothing would bound the work sent to a
//!   replica's queue;
//! - the reqwest call ([`crate::peer`]'s, on the one shared client).
//!
//! Errors and retries are the `peer` mode's: pricing retried up to 3 times
//! on a `5xx`, a timeout or `Overloaded` (each retry is a new pick, so
//! usually another replica), a connection error not retried. `PeakEwma`
//! measures failures too, when they end: a replica that refuses
//! connections answers fast and so looks *cheap*, a known weakness of
//! latency-based balancing that no tower layer here corrects (Linkerd adds
//! failure accrual for it); the `replicas` scenario shows what it costs.
//!
//! With one URL per dependency (no `endpoints`), the stack is the `peer`
//! mode's with balancing over one and a buffer of 8 calls in front.
//!
//! # Example
//!
//! ```no_run
//! use load_tests::peer::{PeerCheckout, PeerConfig};
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut config = PeerConfig::new("127.0.0.1:0".parse()?);
//! config.pricing_url = "http://127.0.0.1:9000/pricing?delay=50ms".into();
//! config.endpoints = vec!["http://127.0.0.1:9001".into(), "http://127.0.0.1:9002".into()];
//! config.balance = true;
//! let (addr, server) = PeerCheckout::spawn(&config, std::future::pending()).await?;
//! println!("p2c peer checkout on http://{addr}/checkout");
//! server.abort();
//! # Ok(()) }
//! ```

use std::time::Duration;

use tower::ServiceBuilder;
use tower::balance::p2c::Balance;
use tower::buffer::Buffer;
use tower::discover::ServiceList;
use tower::load::{CompleteOnResponse, PeakEwma};
use tower::util::BoxCloneSyncService;

use crate::peer::{DepRequest, DepService, PeerError, http_call};

/// What `PeakEwma` assumes of a replica before it measured one: Linkerd's
/// default, about a healthy partner's latency.
pub const DEFAULT_RTT: Duration = Duration::from_millis(30);

/// How fast `PeakEwma` forgets a peak: Linkerd's default.
pub const DECAY: Duration = Duration::from_secs(10);

/// The balanced stack of one dependency over `urls` (one per replica, each
/// the full URL of the dependency on it): see the module docs. `limit` is
/// both the per-replica concurrency limit and the buffer's size.
///
/// # Errors
///
/// [`PeerError::Runtime`] outside a tokio runtime (the buffer's worker is a
/// task); [`PeerError::Config`] for an empty list.
pub(crate) fn balanced_stack(
    http: &reqwest::Client,
    urls: Vec<String>,
    limit: usize,
    timeout: Duration,
) -> Result<DepService, PeerError> {
    if urls.is_empty() {
        return Err(budget_core::config::ConfigError::new("endpoints", "must not be empty").into());
    }
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| PeerError::Runtime)?;
    let decay_ns = DECAY.as_nanos() as f64;
    let replicas: Vec<_> = urls
        .into_iter()
        .map(|url| {
            PeakEwma::new(
                ServiceBuilder::new()
                    .concurrency_limit(limit)
                    .service(http_call(http.clone(), url)),
                DEFAULT_RTT,
                decay_ns,
                CompleteOnResponse::default(),
            )
        })
        .collect();
    let balance = Balance::new(ServiceList::new::<DepRequest>(replicas));
    let (buffer, worker) = Buffer::pair(balance, limit);
    // The worker ends when the last clone of the buffer is dropped (the
    // peer checkout's router, at shutdown).
    runtime.spawn(worker);
    Ok(BoxCloneSyncService::new(
        ServiceBuilder::new()
            .load_shed()
            .timeout(timeout)
            .service(buffer),
    ))
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use checkout::CheckoutAnswer;
    use http::StatusCode;
    use slow_partner::{FaultMode, PartnerHandle};
    use test_support::{bounded, partner};

    use crate::client::X_REQUEST_ID;
    use crate::peer::{PeerCheckout, PeerConfig};

    /// A peer checkout over `replicas` (each serving every dependency with
    /// `query`), balancing or taking them in turn.
    async fn peer_over(replicas: &[PartnerHandle], query: &str, balance: bool) -> String {
        let mut config = PeerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
        // The URLs' own host is replaced by each replica's.
        config.inventory_url = format!("http://127.0.0.1:1/inventory?{query}");
        config.pricing_url = format!("http://127.0.0.1:1/pricing?{query}");
        config.recommendations_url = format!("http://127.0.0.1:1/recommendations?{query}");
        config.endpoints = replicas.iter().map(|p| p.url("")).collect();
        config.balance = balance;
        let (addr, _server) = PeerCheckout::spawn(&config, std::future::pending())
            .await
            .unwrap();
        format!("http://{addr}/checkout")
    }

    /// Sends `n` requests, `concurrent` at a time; their statuses.
    async fn send(url: &str, n: usize, concurrent: usize) -> Vec<StatusCode> {
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let mut statuses = Vec::new();
        for round in 0..n.div_ceil(concurrent) {
            let calls: Vec<_> = (0..concurrent.min(n - round * concurrent))
                .map(|i| {
                    let req = http
                        .get(url)
                        .header(X_REQUEST_ID, format!("p2c-{round}-{i}"));
                    tokio::spawn(req.send())
                })
                .collect();
            for c in calls {
                let res = c.await.unwrap().unwrap();
                let status = res.status();
                if status == StatusCode::OK {
                    let answer: CheckoutAnswer = res.json().await.unwrap();
                    assert!(answer.degraded.is_empty(), "{answer:?}");
                }
                statuses.push(status);
            }
        }
        statuses
    }

    /// Three healthy slow partners.
    async fn three() -> [PartnerHandle; 3] {
        [
            partner(FaultMode::Normal).await,
            partner(FaultMode::Normal).await,
            partner(FaultMode::Normal).await,
        ]
    }

    fn all_ok(statuses: &[StatusCode]) {
        assert!(
            statuses.iter().all(|s| *s == StatusCode::OK),
            "{statuses:?}"
        );
    }

    /// The calls each replica received; the replicas are shut down.
    async fn calls_of(replicas: [PartnerHandle; 3]) -> Vec<u64> {
        let calls = replicas.iter().map(|r| r.stats().requests).collect();
        for r in replicas {
            r.shutdown().await;
        }
        calls
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p2c_answers_over_three_real_partners_and_every_replica_works() {
        bounded(async {
            let replicas = three().await;
            let url = peer_over(&replicas, "delay=5ms", true).await;
            let statuses = send(&url, 60, 6).await;
            all_ok(&statuses);
            // 60 requests, three calls each, spread over the three.
            let calls = calls_of(replicas).await;
            assert_eq!(calls.iter().sum::<u64>(), 180, "{calls:?}");
            assert!(calls.iter().all(|&c| c >= 10), "{calls:?}");
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn p2c_leans_away_from_a_replica_ten_times_slower() {
        bounded(async {
            let replicas = three().await;
            replicas[1].set_slowdown(10).unwrap();
            let url = peer_over(&replicas, "delay=10ms", true).await;
            let statuses = send(&url, 60, 6).await;
            all_ok(&statuses);
            let calls = calls_of(replicas).await;
            // Round robin would give it 60; the 100 ms replica gets far
            // fewer than a third once its latency is measured.
            assert!(calls[1] < 40, "{calls:?}");
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_balancing_the_peer_takes_the_replicas_in_turn() {
        bounded(async {
            let replicas = three().await;
            let url = peer_over(&replicas, "delay=1ms", false).await;
            // One at a time: each dependency's counter moves by one per
            // request, so each replica gets exactly a third of its calls.
            let statuses = send(&url, 30, 1).await;
            all_ok(&statuses);
            let calls = calls_of(replicas).await;
            assert_eq!(calls, [30, 30, 30]);
        })
        .await;
    }

    #[test]
    fn endpoints_are_base_urls_and_p2c_needs_a_runtime() {
        let mut config = PeerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
        for bad in [
            "http://127.0.0.1:9001/pricing",
            "http://127.0.0.1:9001?x=1",
            "https://127.0.0.1:9001",
            "127.0.0.1:9001",
        ] {
            config.endpoints = vec![bad.into()];
            assert_eq!(config.validate().unwrap_err().field(), "endpoints", "{bad}");
        }
        config.endpoints = vec!["http://127.0.0.1:9001".into(); 65];
        assert_eq!(config.validate().unwrap_err().field(), "endpoints");
        config.endpoints = vec!["http://127.0.0.1:9001/".into()];
        assert!(config.validate().is_ok());
        config.balance = true;
        // Outside a runtime: an error, not a panic.
        assert!(matches!(
            PeerCheckout::new(&config),
            Err(crate::peer::PeerError::Runtime)
        ));
    }
}
