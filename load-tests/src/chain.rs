//! The chain every scenario runs against (edge -> checkout -> slow
//! partner, started in this process on `127.0.0.1:0`), its modes, and its
//! capacity.
//!
//! # Capacity
//!
//! A service has a capacity only when something in it is bounded. Here it
//! is the slow partner: each of its three paths has
//! [`ChainSettings::partner_workers`] workers (8; the partner's
//! per-path `workers`, `PartnerConfig::with_path_workers`), so a path
//! does at most that many calls' work at once and queues the rest, first
//! in, first out, before their delay starts: a dependency of mean latency
//! `L` serves at most `workers / L` calls per second, however many its
//! clients send. With the healthy shapes below (inventory 20 ms, pricing
//! 50 ms, recommendations 30 ms, means) and 8 workers, pricing is the
//! bottleneck: **capacity = 8 / 50 ms = 160 requests/s**, and the default
//! rate, **80 % of capacity, is 128 requests/s** ([`ChainSettings::capacity`]).
//! A partner 10x slower divides that capacity by ten, so the same offered
//! load is 8 times what the chain can serve: the overload in which waiting
//! work piles up (here, in the partner's queues or in checkout's).
//!
//! Checkout's client of each dependency keeps **its own default limit**
//! (checkout's `concurrency` default, an adaptive limit that learns how
//! much the partner takes): the load test does not size it. A fixed client
//! limit per dependency remains as a comparison row (`--concurrency 8`,
//! [`ChainSettings::concurrency`]); it does not change the capacity above
//! or the offered load, so that the rows compare. The peer checkout
//! ([`PeerCheckout`]) has no default of its own to keep: it holds the
//! `ConcurrencyLimit` a tower user would hand-size, the partner's workers
//! (or `--concurrency`).
//!
//! In budget mode a call waits for its permit only until what is left of
//! its budget reaches the dependency's floor (`budget_core`'s client), and
//! is not made at all below it. By default the load test sets **no
//! floor**: inventory and pricing run with checkout's own default
//! configuration, as a service deployed without hand tuning would. The
//! hand-sized floors of earlier runs remain as a comparison row
//! (`--inventory-floor 900ms --pricing-floor 600ms`,
//! [`ChainSettings::inventory_floor`] and [`ChainSettings::pricing_floor`]:
//! a latency objective per dependency, so that checkout does not start a
//! required call with less time than it and the required calls after it
//! may take). Recommendations keeps checkout's default floor of 1 s. With budget mode
//! off, floors are ignored and every wait and attempt has the usual fixed
//! 30 s timeout.

use std::net::SocketAddr;
use std::time::Duration;

use checkout::CheckoutConfig;
use edge::EdgeConfig;
use serde::{Deserialize, Serialize};
use service_kit::BudgetMode;
use slow_partner::{FaultMode, PartnerConfig, PartnerHandle};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::envoy::Envoys;
use crate::middle::Middle;
use crate::peer::{PeerCheckout, PeerConfig};
use crate::scenario::Setup;

/// Inventory's connect cap in every scenario (as in the chain demo).
pub const INVENTORY_CONNECT_CAP: Duration = Duration::from_millis(300);

/// How a run's chain is built: the three modes every scenario compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ChainMode {
    /// Budget mode on in edge and checkout ([`BudgetMode::On`]).
    Budget,
    /// Budget mode off: generous fixed timeouts ([`BudgetMode::Off`]).
    Naive,
    /// Edge in budget mode with its default config, checkout swapped for
    /// [`PeerCheckout`]: plain tower, no budget.
    Peer,
    /// Edge in budget mode with its default config, checkout swapped for
    /// [`PeerCheckout`] without shedding: per dependency a tower
    /// `ConcurrencyLimit` whose calls wait for a permit, under a `Timeout`
    /// (2 s, the peer's) that covers the wait and the call; no budget.
    Queue,
    /// Budget mode, with checkout's three dependencies hedged
    /// (`hedge = "auto"`, opt-in): the `tail` and `replicas` scenarios run
    /// it, beside [`ChainMode::Budget`].
    Hedged,
    /// Edge in budget mode with its default config, checkout swapped for
    /// [`PeerCheckout`] whose dependencies are balanced over their replicas
    /// with tower's p2c `Balance` over `PeakEwma` ([`crate::p2c`]): the
    /// `replicas` scenario runs it right after [`ChainMode::Peer`]; over one
    /// replica it is the `peer` mode balancing over one.
    P2c,
    /// Edge in budget mode with its default config, checkout in naive mode
    /// ([`BudgetMode::Off`], unchanged) calling its dependencies through
    /// an Envoy sidecar configured as an experienced Envoy user would:
    /// route and per-try timeouts, retries under a retry budget, adaptive
    /// concurrency, outlier detection, circuit breakers, `LEAST_REQUEST`
    /// over the replicas ([`crate::envoy`]).
    Envoy,
}

impl ChainMode {
    /// The five every scenario runs, in the order they run.
    pub const ALL: [ChainMode; 5] = [
        ChainMode::Budget,
        ChainMode::Naive,
        ChainMode::Peer,
        ChainMode::Queue,
        ChainMode::Envoy,
    ];

    /// `asked` with `extra` right after `after`, unless `asked` has it
    /// already: how a scenario adds a mode of its own beside the one it
    /// compares with (`tail` adds [`ChainMode::Hedged`] after
    /// [`ChainMode::Budget`], `replicas` also [`ChainMode::P2c`] after
    /// [`ChainMode::Peer`]).
    ///
    /// ```
    /// use load_tests::chain::ChainMode;
    ///
    /// let tail = ChainMode::insert_after(&ChainMode::ALL, ChainMode::Budget, ChainMode::Hedged);
    /// assert_eq!(tail, [ChainMode::Budget, ChainMode::Hedged, ChainMode::Naive, ChainMode::Peer,
    ///     ChainMode::Queue, ChainMode::Envoy]);
    /// assert_eq!(ChainMode::insert_after(&[ChainMode::Naive], ChainMode::Budget, ChainMode::Hedged),
    ///     [ChainMode::Naive]);
    /// assert_eq!(ChainMode::insert_after(&[ChainMode::Peer, ChainMode::P2c], ChainMode::Peer, ChainMode::P2c),
    ///     [ChainMode::Peer, ChainMode::P2c]);
    /// ```
    pub fn insert_after(asked: &[ChainMode], after: ChainMode, extra: ChainMode) -> Vec<ChainMode> {
        let mut modes = Vec::with_capacity(asked.len() + 1);
        for &mode in asked {
            modes.push(mode);
            if mode == after && !asked.contains(&extra) {
                modes.push(extra);
            }
        }
        modes
    }

    /// `budget`, `naive`, `peer`, `queue`, `hedged`, `p2c` or `envoy`: the
    /// report's `mode`.
    ///
    /// ```
    /// assert_eq!(load_tests::chain::ChainMode::Peer.as_str(), "peer");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ChainMode::Budget => "budget",
            ChainMode::Naive => "naive",
            ChainMode::Peer => "peer",
            ChainMode::Queue => "queue",
            ChainMode::Hedged => "hedged",
            ChainMode::P2c => "p2c",
            ChainMode::Envoy => "envoy",
        }
    }

    /// What the mode is, in a few words, for a report's legend.
    ///
    /// ```
    /// use load_tests::chain::ChainMode;
    /// assert_eq!(ChainMode::Queue.label(), "queue (tower ConcurrencyLimit + Timeout, no shedding)");
    /// ```
    pub fn label(self) -> &'static str {
        match self {
            ChainMode::Budget => "budget (budget mode on)",
            ChainMode::Naive => "naive (budget mode off: fixed 30 s timeouts)",
            ChainMode::Peer => "peer (tower LoadShed + ConcurrencyLimit + Timeout)",
            ChainMode::Queue => "queue (tower ConcurrencyLimit + Timeout, no shedding)",
            ChainMode::Hedged => "hedged (budget mode, hedge = \"auto\")",
            ChainMode::P2c => "p2c (tower p2c Balance over PeakEwma + LoadShed + Timeout)",
            ChainMode::Envoy => "envoy (naive checkout behind an Envoy sidecar)",
        }
    }

    /// Whether checkout is swapped for [`PeerCheckout`] (`peer`, `queue`,
    /// `p2c`).
    ///
    /// ```
    /// use load_tests::chain::ChainMode;
    /// assert!(ChainMode::P2c.is_peer() && !ChainMode::Hedged.is_peer());
    /// ```
    pub fn is_peer(self) -> bool {
        matches!(self, ChainMode::Peer | ChainMode::Queue | ChainMode::P2c)
    }

    /// The budget mode of edge.
    ///
    /// ```
    /// use load_tests::chain::ChainMode;
    /// use service_kit::BudgetMode;
    /// assert_eq!(ChainMode::Envoy.budget_mode(), BudgetMode::On);
    /// ```
    pub fn budget_mode(self) -> BudgetMode {
        match self {
            ChainMode::Budget
            | ChainMode::Peer
            | ChainMode::Queue
            | ChainMode::Hedged
            | ChainMode::P2c
            | ChainMode::Envoy => BudgetMode::On,
            ChainMode::Naive => BudgetMode::Off,
        }
    }

    /// The budget mode of checkout, where it runs: edge's, except behind
    /// Envoy, where checkout is naive.
    ///
    /// ```
    /// use load_tests::chain::ChainMode;
    /// use service_kit::BudgetMode;
    /// assert_eq!(ChainMode::Envoy.checkout_budget_mode(), BudgetMode::Off);
    /// assert_eq!(ChainMode::Budget.checkout_budget_mode(), BudgetMode::On);
    /// ```
    pub fn checkout_budget_mode(self) -> BudgetMode {
        match self {
            ChainMode::Envoy => BudgetMode::Off,
            mode => mode.budget_mode(),
        }
    }
}

impl From<BudgetMode> for ChainMode {
    fn from(mode: BudgetMode) -> Self {
        match mode {
            BudgetMode::On => ChainMode::Budget,
            BudgetMode::Off => ChainMode::Naive,
        }
    }
}

/// A dependency's healthy shape: a delay plus up to `jitter` more.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    /// The delay, ms.
    pub(crate) delay_ms: u64,
    /// Up to this much more, ms.
    pub(crate) jitter_ms: u64,
}

impl Shape {
    /// The mean latency, ms.
    pub(crate) fn mean_ms(self) -> f64 {
        self.delay_ms as f64 + self.jitter_ms as f64 / 2.0
    }

    /// The healthy query string, with `percent` of the calls waiting
    /// `factor` times the delay instead.
    pub(crate) fn with_tail(self, percent: u8, factor: u64) -> String {
        format!(
            "{}&tail={}@{}ms",
            self.query(1),
            f64::from(percent) / 100.0,
            self.delay_ms * factor
        )
    }

    /// The query string, `factor` times slower.
    pub(crate) fn query(self, factor: u64) -> String {
        format!(
            "delay={}ms&jitter={}ms",
            self.delay_ms * factor,
            self.jitter_ms * factor
        )
    }
}

/// Inventory's healthy shape.
pub(crate) const INVENTORY: Shape = Shape {
    delay_ms: 15,
    jitter_ms: 10,
};
/// Pricing's healthy shape.
pub(crate) const PRICING: Shape = Shape {
    delay_ms: 45,
    jitter_ms: 10,
};
/// Recommendations's healthy shape.
pub(crate) const RECOMMENDATIONS: Shape = Shape {
    delay_ms: 25,
    jitter_ms: 10,
};

/// How the chain is built for every scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainSettings {
    /// Workers per path of the slow partner (8): at most this many calls
    /// of `/inventory`, `/pricing` or `/recommendations` are worked on at
    /// once, the rest queue. The chain's capacity ([`Self::capacity`]).
    #[serde(default = "default_partner_workers")]
    pub partner_workers: usize,
    /// A fixed limit of calls in flight per dependency in checkout's
    /// clients, a hand-sized comparison row; `None` (the default): not set
    /// by the load test, checkout's own default (adaptive) applies. The
    /// peer checkout's `ConcurrencyLimit` is this, or
    /// [`partner_workers`](Self::partner_workers) when `None`.
    #[serde(default)]
    pub concurrency: Option<usize>,
    /// How much slower `slow` and `recs-slow` make the partner (10).
    pub slowdown: u64,
    /// Inventory's floor in budget mode; `None` (the default): none set by
    /// the load test, checkout's own default configuration applies. The
    /// hand-sized comparison row used 900 ms: inventory's latency
    /// objective (300 ms) plus pricing's (600 ms), the required call after
    /// it.
    #[serde(default, with = "crate::report::opt_millis")]
    pub inventory_floor: Option<Duration>,
    /// Pricing's floor in budget mode; `None` (the default): checkout's own
    /// default. The hand-sized comparison row used 600 ms, its latency
    /// objective.
    #[serde(default, with = "crate::report::opt_millis")]
    pub pricing_floor: Option<Duration>,
    /// Edge's floor for its call of checkout in budget mode; `None` (the
    /// default): edge's own default (learned). A fixed one is a comparison
    /// row: a learned floor rests on checkout's successful latencies, which
    /// under `db-slow` include answers that waited out a lock for most of
    /// their budget.
    #[serde(default, with = "crate::report::opt_millis")]
    pub checkout_floor: Option<Duration>,
    /// How long checkout's and edge's clients keep an idle pooled
    /// connection; `None`: the services' default (90 s). The soak sets it
    /// short, so that "no connection left open" can be checked between
    /// phases.
    #[serde(default, with = "crate::report::opt_millis")]
    pub pool_idle_timeout: Option<Duration>,
    /// The in-line Envoy topology (`--via-envoy`): edge -> Envoy ->
    /// checkout -> Envoy -> partner, with Envoy's hop config
    /// ([`crate::envoy`]); in the `envoy` mode, checkout's sidecar is its
    /// Envoy to the partner.
    #[serde(default)]
    pub via_envoy: bool,
}

/// The default [`ChainSettings::partner_workers`].
pub const DEFAULT_PARTNER_WORKERS: usize = 8;

fn default_partner_workers() -> usize {
    DEFAULT_PARTNER_WORKERS
}

/// The partner's paths that get [`ChainSettings::partner_workers`] each.
pub const PARTNER_PATHS: [&str; 3] = ["/inventory", "/pricing", "/recommendations"];

impl Default for ChainSettings {
    fn default() -> Self {
        Self {
            partner_workers: DEFAULT_PARTNER_WORKERS,
            concurrency: None,
            slowdown: 10,
            inventory_floor: None,
            pricing_floor: None,
            checkout_floor: None,
            pool_idle_timeout: None,
            via_envoy: false,
        }
    }
}

impl ChainSettings {
    /// Requests per second the healthy chain can serve: the smallest
    /// `partner_workers / mean latency` over the three dependencies (the
    /// partner's paths). A smaller fixed client limit
    /// ([`concurrency`](Self::concurrency)) does not change it: it is the
    /// reference of the offered load, the same for every comparison row.
    ///
    /// ```
    /// let s = load_tests::chain::ChainSettings::default();
    /// assert_eq!(s.capacity(), 160.0);
    /// ```
    pub fn capacity(&self) -> f64 {
        [INVENTORY, PRICING, RECOMMENDATIONS]
            .iter()
            .map(|s| self.partner_workers as f64 * 1000.0 / s.mean_ms())
            .fold(f64::INFINITY, f64::min)
    }

    /// The healthy chain as the `spike` scenario's ideal schedules see it
    /// ([`crate::spike`]): the bottleneck's workers (the partner's per
    /// path), its mean latency (pricing's 50 ms), and the longest a request
    /// of `budget` may wait for one: the budget less the three calls' mean
    /// latencies (100 ms).
    ///
    /// ```
    /// use std::time::Duration;
    /// let m = load_tests::chain::ChainSettings::default()
    ///     .bottleneck_model(Duration::from_secs(2));
    /// assert_eq!((m.workers, m.service, m.max_wait),
    ///     (8, Duration::from_millis(50), Duration::from_millis(1900)));
    /// ```
    pub fn bottleneck_model(&self, budget: Duration) -> crate::spike::BottleneckModel {
        let chain: f64 = [INVENTORY, PRICING, RECOMMENDATIONS]
            .map(Shape::mean_ms)
            .iter()
            .sum();
        let ms = |ms: f64| Duration::from_micros((ms * 1000.0).round() as u64);
        // The bottleneck's workers serve `capacity` a second together.
        let service = ms(self.partner_workers as f64 * 1000.0 / self.capacity());
        crate::spike::BottleneckModel::new(
            self.partner_workers,
            service,
            budget.saturating_sub(ms(chain)),
        )
    }

    /// The peer checkout's `ConcurrencyLimit` per dependency: the fixed
    /// client limit when one is set, else the partner's workers.
    ///
    /// ```
    /// use load_tests::chain::ChainSettings;
    ///
    /// let mut s = ChainSettings::default();
    /// assert_eq!(s.peer_concurrency(), 8);
    /// s.concurrency = Some(3);
    /// assert_eq!(s.peer_concurrency(), 3);
    /// ```
    pub fn peer_concurrency(&self) -> usize {
        self.concurrency.unwrap_or(self.partner_workers)
    }

    /// The main partner's config: on `127.0.0.1:0`, with
    /// [`partner_workers`](Self::partner_workers) for each of
    /// [`PARTNER_PATHS`].
    ///
    /// ```
    /// let c = load_tests::chain::ChainSettings::default().partner_config();
    /// assert_eq!(c.path_workers["/pricing"], 8);
    /// assert_eq!(c.workers, None);
    /// ```
    pub fn partner_config(&self) -> PartnerConfig {
        PARTNER_PATHS.iter().fold(
            PartnerConfig::new(loopback()).with_shutdown_grace(Duration::from_secs(1)),
            |c, path| c.with_path_workers(*path, self.partner_workers),
        )
    }
}

/// The slow partners the scenarios share.
#[derive(Debug)]
pub struct Partners {
    /// The partner that answers.
    pub main: PartnerHandle,
    /// The one in `blackhole` mode, for the `blackhole` scenario; `None`
    /// when started with [`Partners::start_main`].
    pub blackhole: Option<PartnerHandle>,
    /// More replicas of the main one (`replicas` scenario: replicas 2 and
    /// 3, [`Partners::start_replicas`]); empty otherwise.
    pub replicas: Vec<PartnerHandle>,
}

impl Partners {
    /// Starts both on `127.0.0.1:0`: the main one with the chain's
    /// workers per path ([`ChainSettings::partner_config`]).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slow_partner::PartnerError> {
    /// use load_tests::chain::{ChainSettings, Partners};
    ///
    /// let partners = Partners::start(&ChainSettings::default()).await?;
    /// assert!(partners.blackhole.is_some());
    /// partners.shutdown().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// When one cannot start.
    pub async fn start(settings: &ChainSettings) -> Result<Self, slow_partner::PartnerError> {
        let mut partners = Self::start_main(settings.partner_config()).await?;
        partners.blackhole = Some(
            slow_partner::spawn(
                PartnerConfig::new(loopback())
                    .with_mode(FaultMode::Blackhole)
                    .with_shutdown_grace(Duration::from_secs(1)),
            )
            .await?,
        );
        Ok(partners)
    }

    /// Starts only the partner that answers, as `config` says (its mode is
    /// switched at run time by the soak, which gives it unlimited workers:
    /// [`PartnerConfig::new`]); a `blackhole` scenario cannot run on these.
    ///
    /// # Errors
    ///
    /// When it cannot start.
    pub async fn start_main(config: PartnerConfig) -> Result<Self, slow_partner::PartnerError> {
        let main = slow_partner::spawn(config).await?;
        Ok(Self {
            main,
            blackhole: None,
            replicas: Vec::new(),
        })
    }

    /// Starts `n` replicas of the main partner (`n` at least 1), each with
    /// the chain's workers per path ([`ChainSettings::partner_config`]):
    /// the first is [`main`](Self::main), the others
    /// [`replicas`](Self::replicas); no blackholed one.
    ///
    /// # Errors
    ///
    /// When one cannot start (those started are stopped).
    pub async fn start_replicas(
        settings: &ChainSettings,
        n: usize,
    ) -> Result<Self, slow_partner::PartnerError> {
        let mut partners = Self::start_main(settings.partner_config()).await?;
        for _ in 1..n {
            match slow_partner::spawn(settings.partner_config()).await {
                Ok(p) => partners.replicas.push(p),
                Err(e) => {
                    partners.shutdown().await;
                    return Err(e);
                }
            }
        }
        Ok(partners)
    }

    /// The main partner and its replicas, in order (replica 1 first).
    pub fn all(&self) -> Vec<&PartnerHandle> {
        std::iter::once(&self.main).chain(&self.replicas).collect()
    }

    /// The base URLs (`http://127.0.0.1:port`) of [`all`](Self::all): the
    /// `endpoints` of a dependency served by every replica.
    pub fn endpoints(&self) -> Vec<String> {
        self.all().iter().map(|p| p.url("")).collect()
    }

    /// Zeroes the partners' counters.
    pub fn reset_stats(&self) {
        for r in &self.replicas {
            r.reset_stats();
        }
        self.main.reset_stats();
        if let Some(b) = &self.blackhole {
            b.reset_stats();
        }
    }

    /// Stops them.
    pub async fn shutdown(self) {
        for r in self.replicas {
            r.shutdown().await;
        }
        self.main.shutdown().await;
        if let Some(b) = self.blackhole {
            b.shutdown().await;
        }
    }
}

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A running checkout and edge (and middle, for `deep`).
#[derive(Debug)]
pub struct Chain {
    /// Edge's `/checkout` URL.
    pub url: String,
    /// Checkout's (or the peer checkout's) base URL, `http://127.0.0.1:port`:
    /// its `/metrics` are the process's ([`crate::gauges`]).
    pub checkout_url: String,
    /// The middle hop, for the `deep` scenario.
    pub middle: Option<Middle>,
    /// Its Envoys: checkout's sidecar in the `envoy` mode, the hops with
    /// `--via-envoy`.
    pub envoys: Envoys,
    stops: Vec<oneshot::Sender<()>>,
    servers: Vec<JoinHandle<std::io::Result<()>>>,
}

/// Why a chain could not start: which service, and its error.
#[derive(Debug, thiserror::Error)]
#[error("{service} did not start")]
pub struct ChainError {
    service: &'static str,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl ChainError {
    pub(crate) fn new(
        service: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            service,
            source: Box::new(source),
        }
    }
}

/// The checkout config of `setup` in `mode`.
///
/// # Errors
///
/// A scenario with a blackholed inventory on partners started without the
/// blackholed one ([`Partners::start_main`]).
pub fn checkout_config(
    setup: &Setup,
    settings: &ChainSettings,
    mode: BudgetMode,
    partners: &Partners,
) -> Result<CheckoutConfig, ChainError> {
    let mut c = CheckoutConfig::new(loopback());
    c.budget_mode = mode;
    let inventory_partner = if setup.blackholed_inventory {
        partners.blackhole.as_ref().ok_or_else(|| {
            ChainError::new(
                "checkout",
                std::io::Error::other(
                    "the scenario blackholes inventory, and no blackholed partner was started",
                ),
            )
        })?
    } else {
        &partners.main
    };
    c.inventory_url = inventory_partner.url(&format!("/inventory?{}", setup.inventory));
    c.pricing_url = partners.main.url(&format!("/pricing?{}", setup.pricing));
    c.recommendations_url = partners
        .main
        .url(&format!("/recommendations?{}", setup.recommendations));
    c.inventory.connect_cap = Some(INVENTORY_CONNECT_CAP);
    // `None` leaves checkout's own default (a learned floor, CheckoutConfig's docs).
    c.inventory.floor = settings
        .inventory_floor
        .map(budget_core::floor::FloorConfig::fixed);
    c.pricing.floor = settings
        .pricing_floor
        .map(budget_core::floor::FloorConfig::fixed);
    for dep in [&mut c.inventory, &mut c.pricing, &mut c.recommendations] {
        // `None` leaves checkout's own default limit (adaptive); a number is
        // the hand-sized comparison row.
        if let Some(limit) = settings.concurrency {
            dep.concurrency = Some(limit.into());
        }
        dep.pool_idle_timeout = settings.pool_idle_timeout;
        if setup.partners.is_replicas() {
            // Every replica serves every dependency; the path and query
            // come from the URLs above.
            dep.endpoints = Some(partners.endpoints());
        }
    }
    Ok(c)
}

/// The peer checkout of a chain: checkout's URLs, the chain's
/// [`ChainSettings::peer_concurrency`], the defaults of [`PeerConfig`]
/// otherwise (it sheds: the `peer` mode; the `queue` mode sets
/// [`PeerConfig::shed`] to `false`, the `p2c` mode [`PeerConfig::balance`]
/// to `true`).
pub fn peer_config(checkout: &CheckoutConfig, settings: &ChainSettings) -> PeerConfig {
    let mut peer = PeerConfig::new(loopback());
    peer.inventory_url = checkout.inventory_url.clone();
    peer.pricing_url = checkout.pricing_url.clone();
    peer.recommendations_url = checkout.recommendations_url.clone();
    peer.concurrency = settings.peer_concurrency();
    peer.pool_idle_timeout = settings.pool_idle_timeout;
    peer.database_url = checkout.database_url.clone();
    peer
}

/// A server's stop signal and the future it waits on.
fn stop_signal() -> (
    oneshot::Sender<()>,
    impl std::future::Future<Output = ()> + Send + 'static,
) {
    let (stop, stopped) = oneshot::channel::<()>();
    (stop, async move {
        let _ = stopped.await;
    })
}

/// Every dependency of `checkout` hedged, with every default: after the
/// learned p95, at most 10 % more calls (the [`ChainMode::Hedged`] opt-in).
fn hedge_all(checkout: &mut CheckoutConfig) {
    for dep in [
        &mut checkout.inventory,
        &mut checkout.pricing,
        &mut checkout.recommendations,
    ] {
        dep.hedge = Some(budget_core::client::HedgeConfig::default());
    }
}

impl Chain {
    /// Starts checkout (or, in [`ChainMode::Peer`], [`ChainMode::Queue`]
    /// and [`ChainMode::P2c`], the peer checkout, shedding or not,
    /// balancing or not) and edge for `setup` in `mode`; with
    /// [`Setup::middle`], a [`Middle`] hop before the partner; with
    /// [`Topology::Replicas`](crate::scenario::Topology::Replicas), every dependency is served by each of
    /// [`Partners::all`].
    ///
    /// # Errors
    ///
    /// When either cannot start.
    pub async fn start(
        setup: &Setup,
        settings: &ChainSettings,
        mode: ChainMode,
        partners: &Partners,
    ) -> Result<Self, ChainError> {
        Self::start_with_database(setup, settings, mode, partners, None).await
    }

    /// [`start`](Self::start), with checkout's (or the peer checkout's)
    /// database step on against `database` (a PostgreSQL URL) when given.
    ///
    /// # Errors
    ///
    /// When either cannot start (the database's schema included).
    pub async fn start_with_database(
        setup: &Setup,
        settings: &ChainSettings,
        mode: ChainMode,
        partners: &Partners,
        database: Option<&str>,
    ) -> Result<Self, ChainError> {
        let mut envoys = Envoys::default();
        let started = Self::start_in(setup, settings, mode, partners, database, &mut envoys).await;
        match started {
            Ok(mut chain) => {
                chain.envoys = envoys;
                Ok(chain)
            }
            Err(e) => {
                envoys.shutdown().await;
                Err(e)
            }
        }
    }

    /// [`start_with_database`](Self::start_with_database), the Envoys it
    /// starts kept in `envoys` (so that they are stopped if a later service
    /// does not start).
    async fn start_in(
        setup: &Setup,
        settings: &ChainSettings,
        mode: ChainMode,
        partners: &Partners,
        database: Option<&str>,
        envoys: &mut Envoys,
    ) -> Result<Self, ChainError> {
        let mut stops = Vec::new();
        let mut servers = Vec::new();
        let mut checkout = checkout_config(setup, settings, mode.checkout_budget_mode(), partners)?;
        checkout.database_url = database.map(str::to_owned);
        if mode == ChainMode::Hedged {
            hedge_all(&mut checkout);
        }
        let middle = if setup.middle {
            let (middle, stop) =
                start_middle(setup, settings, mode, partners, &mut checkout).await?;
            stops.push(stop);
            Some(middle)
        } else {
            None
        };
        if mode == ChainMode::Envoy {
            envoys.start_sidecar(&mut checkout).await?;
        } else if settings.via_envoy {
            envoys.hop_checkouts_calls(&mut checkout).await?;
        }
        let (stop, stopped) = stop_signal();
        let (checkout_addr, server) =
            spawn_checkout(setup, settings, mode, &checkout, stopped).await?;
        stops.push(stop);
        servers.push(server);
        let mut checkout_url = format!("http://{checkout_addr}");
        if settings.via_envoy {
            checkout_url = envoys.through_hop(&checkout_url).await?;
        }
        let mut edge = EdgeConfig::new(loopback(), checkout_url);
        edge.budget_mode = mode.budget_mode();
        edge.checkout.pool_idle_timeout = settings.pool_idle_timeout;
        if let Some(floor) = settings.checkout_floor {
            edge.checkout.floor = Some(budget_core::floor::FloorConfig::fixed(floor));
        }
        let (stop, stopped) = stop_signal();
        let (edge_addr, server) = edge::spawn(&edge, stopped)
            .await
            .map_err(|e| ChainError::new("edge", e))?;
        stops.push(stop);
        servers.push(server);
        Ok(Self {
            url: format!("http://{edge_addr}/checkout"),
            checkout_url: format!("http://{checkout_addr}"),
            middle,
            envoys: Envoys::default(),
            stops,
            servers,
        })
    }

    /// Stops both (and its Envoys): graceful shutdown, then, after 2 s,
    /// abort.
    pub async fn stop(self) {
        for stop in self.stops {
            let _ = stop.send(());
        }
        self.envoys.shutdown().await;
        let mut servers = self.servers;
        servers.extend(self.middle.map(|m| m.server));
        for mut server in servers {
            if tokio::time::timeout(Duration::from_secs(2), &mut server)
                .await
                .is_err()
            {
                server.abort();
            }
        }
    }
}

/// Starts checkout, or in [`ChainMode::Peer`], [`ChainMode::Queue`] and
/// [`ChainMode::P2c`] the peer checkout (shedding or not, balancing or
/// not, over the replicas `checkout` lists), until `stopped`.
async fn spawn_checkout(
    setup: &Setup,
    settings: &ChainSettings,
    mode: ChainMode,
    checkout: &CheckoutConfig,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, JoinHandle<std::io::Result<()>>), ChainError> {
    if !mode.is_peer() {
        return checkout::spawn(checkout, stopped)
            .await
            .map_err(|e| ChainError::new("checkout", e));
    }
    let mut peer = peer_config(checkout, settings);
    peer.shed = mode != ChainMode::Queue;
    peer.balance = mode == ChainMode::P2c;
    if setup.partners.is_replicas() {
        // The replicas as checkout calls them (through their hops with
        // `--via-envoy`).
        peer.endpoints = checkout.pricing.endpoints.clone().unwrap_or_default();
    }
    PeerCheckout::spawn(&peer, stopped)
        .await
        .map_err(|e| ChainError::new("peer checkout", e))
}

/// Starts the [`Middle`] hop of `setup` in `mode` in front of the main
/// partner, and points `checkout`'s three URLs at it (same paths and
/// queries).
async fn start_middle(
    setup: &Setup,
    settings: &ChainSettings,
    mode: ChainMode,
    partners: &Partners,
    checkout: &mut CheckoutConfig,
) -> Result<(Middle, oneshot::Sender<()>), ChainError> {
    let (stop, stopped) = stop_signal();
    let middle = Middle::spawn(
        mode,
        &partners.main.url(""),
        settings.pool_idle_timeout,
        stopped,
    )
    .await
    .map_err(|e| ChainError::new("middle", e))?;
    let base = middle.url();
    checkout.inventory_url = format!("{base}/inventory?{}", setup.inventory);
    checkout.pricing_url = format!("{base}/pricing?{}", setup.pricing);
    checkout.recommendations_url = format!("{base}/recommendations?{}", setup.recommendations);
    Ok((middle, stop))
}

#[cfg(test)]
mod tests;
