//! The scenarios, the chain they run against, and its capacity.
//!
//! Each scenario starts the real services in this process, on
//! `127.0.0.1:0`: one slow partner (inventory, pricing and recommendations
//! are three paths of it, shaped by their query strings), a second one in
//! `blackhole` mode, and per run a fresh checkout and edge in the run's
//! budget mode. Budget mode on and off run back to back, same load.
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
//!
//! # The scenarios
//!
//! | scenario | what the partner does |
//! | --- | --- |
//! | `healthy` | inventory 15 ms + up to 10 ms jitter, pricing 45 + 10 ms, recommendations 25 + 10 ms |
//! | `slow` | all three [`ChainSettings::slowdown`] times slower (10x: 150 + 100, 450 + 100, 250 + 100 ms) |
//! | `blackhole` | inventory on the blackholed partner (connects time out at its 300 ms connect cap) |
//! | `rate-limit` | 1 request in 10 meets a pricing `429` with `Retry-After: 5` |
//! | `pricing-flaky` | 1 request in 2 meets a pricing `503` on its first attempt; a retry succeeds |
//! | `recs-slow` | recommendations `slowdown` times slower |
//! | `criticality` | healthy, but offered **2x the capacity** (`--rate` overrides it); 30 % of requests (spread evenly by index, [`CriticalitySplit`]) carry `request-criticality: critical`, the rest none; reported per class |
//! | `ramp` | healthy; offered load 0.5x, 1x, 2x, 4x, 1x, 0.5x of the capacity ([`RAMP_FACTORS`]), 10 s per step; `--duration` is split evenly over the six steps, and a given `--rate` stands for the capacity ([`ramp_steps`]); reported per step and per second |
//! | `deep` | as `slow`, with a fourth hop: checkout's three URLs point at [`Middle`] (`/inventory?...` and so on), which calls the partner's same path with the same query: budget-aware in budget mode, fixed timeouts in naive mode, plain tower in peer mode |
//! | `outage` | healthy; from a quarter into the run `/pricing` answers `503` to every call for half of it (5 s to 15 s of the default 20 s; `PartnerHandle::set_path_status`), then recovers; reports pricing attempts per client request during the outage and the time until goodput is back ([`crate::outage`]) |
//! | `tail` | healthy, but 5 % of calls on every path `slowdown` times slower, at half the capacity; run in budget mode with and without hedging |
//! | `spike` | healthy; 0.5x of the capacity for 4 s, 3x for 2 s, 0.5x for 6 s ([`SPIKE_PHASES`]; a given `--duration` in the same proportions, [`shaped_steps`]); reported per phase and per second, with the time until p99 is back ([`crate::spike`]) |
//! | `burst-fits`, `burst-fits-unlimited`, `burst-part`, `burst-part-unlimited` | a partner of its own per run, started cold, 50 ms on every path, 8 workers per path or none (`-unlimited`); [`BURST_REQUESTS`] (300, or `--requests`) sent at once, one connection each; budgets of 10 s (`-fits`, the whole burst) or 1 s (`-part`); the client waits the budget plus [`BURST_MARGIN`] at most ([`Burst`]) |
//! | `hang`, `hang-slow-rate` | healthy at 20 (or 2) req/s, budgets 1.9 to 2.1 s per request index; `/inventory` hangs from a quarter of the run for half of it (`PartnerHandle::set_path_hang`), then answers again ([`crate::hang`]) |
//! | `replicas` | three partners of their own per run ([`Partners::start_replicas`]), each the healthy partner with 8 workers per path, behind every dependency (checkout's `endpoints`; the peers' [`PeerConfig::endpoints`]); offered 60 % of their combined capacity (3 x 160 x 0.6 = 288 req/s); replica 2 is 10x slower, blackholed, then restarted, in phases of 5, 5, 2, 5, 2 and 10 s ([`crate::replicas`]); run in the `p2c` mode too |
//! | `mixed-budgets` | as `slow`; per request a budget drawn uniformly from 200-600 ms for half the callers and 1-2 s for the other half ([`BudgetDistribution::mixed_default`], deterministic per index), instead of `--budget` |
//!
//! The partner has no random status. Its `script` is per `x-request-id`
//! and path (attempt N of an id gets entry N, the last repeats), so the
//! fraction comes from the ids: the generator gives `id_group`
//! consecutive requests one `x-request-id`, and the first of them to reach
//! pricing is that id's attempt 1. `script=429,200` with groups of 10 makes
//! 1 request in 10 meet the `429`; `script=503,200` with groups of 2 makes
//! 1 in 2 meet a `503`, and its retry (attempt 3 of the id) the `200`.
//! Nothing was added to the partner for this.

use std::net::SocketAddr;
use std::time::Duration;

use checkout::CheckoutConfig;
use edge::EdgeConfig;
use serde::{Deserialize, Serialize};
use service_kit::BudgetMode;
use slow_partner::{FaultMode, PartnerConfig, PartnerHandle};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::budgets::BudgetDistribution;
use crate::client::Patience;
use crate::criticality::CriticalitySplit;
use crate::generator::{LoadSpec, MAX_REQUESTS, RateStep, SpecError};
use crate::hang::{HANG_BUDGETS, HANG_PATH};
use crate::middle::Middle;
use crate::outage::OutageWindow;
use crate::peer::{PeerCheckout, PeerConfig};
use crate::replicas::{PHASES as REPLICA_PHASES, REPLICA_LOAD, REPLICAS, SLOWDOWN};
use crate::run::LoadPlan;
use crate::window::Watch;

/// The `Retry-After` of the `rate-limit` scenario, seconds: longer than
/// any budget here, and within the 10 s a fixed-timeout client honours.
pub const RATE_LIMIT_RETRY_AFTER_S: u64 = 5;

/// The share of critical requests in the `criticality` scenario, percent.
pub const CRITICAL_PERCENT: u8 = 30;

/// The `ramp` scenario's steps, as multiples of the healthy capacity.
pub const RAMP_FACTORS: [f64; 6] = [0.5, 1.0, 2.0, 4.0, 1.0, 0.5];

/// How long each step of the `ramp` scenario lasts when `--duration` is
/// not given.
pub const RAMP_STEP: Duration = Duration::from_secs(10);

/// The `tail` scenario's share of slow partner calls, percent.
pub const TAIL_PERCENT: u8 = 5;

/// The `tail` scenario's offered load, as a share of the capacity: a
/// tail call holds a partner worker `slowdown` times longer.
pub const TAIL_RATE: f64 = 0.5;

/// The `spike` scenario's phases: (multiple of the capacity, length when
/// `--duration` is not given): 4 s calm at half the capacity, 2 s at three
/// times it, 6 s calm again. A given `--duration` is split in the same
/// proportions (a third, a sixth, a half).
pub const SPIKE_PHASES: [(f64, Duration); 3] = [
    (0.5, Duration::from_secs(4)),
    (3.0, Duration::from_secs(2)),
    (0.5, Duration::from_secs(6)),
];

/// How many requests a `burst-*` scenario sends at once, unless
/// `--requests` says.
pub const BURST_REQUESTS: u64 = 300;

/// Each partner call's delay in the `burst-*` scenarios, on every path:
/// with 8 workers per path, 8 / 50 ms = 160 requests/s.
pub const BURST_DELAY: Duration = Duration::from_millis(50);

/// The budget of the `burst-fits*` scenarios: enough for the whole burst
/// (300 requests at 160 req/s take under 2 s).
pub const BURST_FITS_BUDGET: Duration = Duration::from_secs(10);

/// The budget of the `burst-part*` scenarios: enough for a part of the
/// burst only (about 160 of 300 requests at 160 req/s).
pub const BURST_PART_BUDGET: Duration = Duration::from_secs(1);

/// How long after its budget a burst's client stops waiting for an
/// answer: a bounded wait for the last answer, so that the run ends by
/// itself even when a mode ignores budgets.
pub const BURST_MARGIN: Duration = Duration::from_secs(5);

/// The offered load of the `hang` scenario, requests/s (`--rate`
/// overrides it).
pub const HANG_RATE: f64 = 20.0;

/// The offered load of the `hang-slow-rate` scenario, requests/s.
pub const HANG_SLOW_RATE: f64 = 2.0;

/// A burst's shape (the `burst-*` scenarios).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Burst {
    /// Every request's budget.
    pub budget: Duration,
    /// Workers per path of the burst's own partner; `None`: no limit.
    pub partner_workers: Option<usize>,
}

impl Burst {
    /// The config of the partner of one burst run: on `127.0.0.1:0`, with
    /// its workers on each of [`PARTNER_PATHS`], or none.
    ///
    /// ```
    /// use std::time::Duration;
    /// use load_tests::scenario::Burst;
    ///
    /// let limited = Burst { budget: Duration::from_secs(1), partner_workers: Some(8) };
    /// assert_eq!(limited.partner_config().path_workers["/pricing"], 8);
    /// let unlimited = Burst { partner_workers: None, ..limited };
    /// let c = unlimited.partner_config();
    /// assert!(c.path_workers.is_empty() && c.workers.is_none());
    /// ```
    pub fn partner_config(&self) -> PartnerConfig {
        let base = PartnerConfig::new(loopback()).with_shutdown_grace(Duration::from_secs(1));
        match self.partner_workers {
            Some(n) => PARTNER_PATHS
                .iter()
                .fold(base, |c, path| c.with_path_workers(*path, n)),
            None => base,
        }
    }
}

/// The ramp's steps: `factors` times `capacity` (or times the plan's rate,
/// when it was asked for), each [`RAMP_STEP`] long (or an equal share of
/// the plan's duration, when it was asked for).
///
/// # Errors
///
/// A step's rate over the generator's cap.
///
/// ```
/// use std::time::Duration;
/// use load_tests::client::Patience;
/// use load_tests::generator::LoadSpec;
/// use load_tests::run::LoadPlan;
/// use load_tests::scenario::{RAMP_FACTORS, ramp_steps};
///
/// let base = LoadPlan::fixed(LoadSpec::new(128.0, Duration::from_secs(20)).unwrap(),
///     Duration::from_secs(2), Patience::Budget);
/// let steps = ramp_steps(&RAMP_FACTORS, 160.0, &base).unwrap();
/// assert_eq!(steps.iter().map(|s| s.rate).collect::<Vec<_>>(), [80.0, 160.0, 320.0, 640.0, 160.0, 80.0]);
/// assert!(steps.iter().all(|s| s.duration == Duration::from_secs(10)));
/// ```
pub fn ramp_steps(
    factors: &[f64],
    capacity: f64,
    base: &LoadPlan,
) -> Result<Vec<RateStep>, SpecError> {
    let shape: Vec<(f64, Duration)> = factors.iter().map(|&f| (f, RAMP_STEP)).collect();
    shaped_steps(&shape, capacity, base)
}

/// The steps of a load of several phases: each (factor, length) of
/// `shape` is `factor` times `capacity` (or times the plan's rate, when it
/// was asked for) for `length` (or, when the plan's duration was asked
/// for, the same share of it as `length` is of the lengths' sum).
///
/// # Errors
///
/// A step's rate over the generator's cap, or a step of no length.
///
/// ```
/// use std::time::Duration;
/// use load_tests::client::Patience;
/// use load_tests::generator::LoadSpec;
/// use load_tests::run::LoadPlan;
/// use load_tests::scenario::{SPIKE_PHASES, shaped_steps};
///
/// let mut base = LoadPlan::fixed(LoadSpec::new(128.0, Duration::from_secs(6)).unwrap(),
///     Duration::from_secs(2), Patience::Budget);
/// let steps = shaped_steps(&SPIKE_PHASES, 160.0, &base).unwrap();
/// assert_eq!(steps.iter().map(|s| (s.rate, s.duration.as_secs())).collect::<Vec<_>>(),
///     [(80.0, 4), (480.0, 2), (80.0, 6)]);
/// base.duration_given = true;
/// let steps = shaped_steps(&SPIKE_PHASES, 160.0, &base).unwrap();
/// assert_eq!(steps.iter().map(|s| s.duration.as_secs()).collect::<Vec<_>>(), [2, 1, 3]);
/// ```
pub fn shaped_steps(
    shape: &[(f64, Duration)],
    capacity: f64,
    base: &LoadPlan,
) -> Result<Vec<RateStep>, SpecError> {
    let reference = if base.rate_given {
        base.spec.rate()
    } else {
        capacity
    };
    let total: u128 = shape.iter().map(|(_, d)| d.as_nanos()).sum();
    shape
        .iter()
        .map(|&(f, length)| {
            let duration = if base.duration_given && total > 0 {
                let share = base.spec.duration().as_nanos() * length.as_nanos() / total;
                Duration::from_nanos(u64::try_from(share).unwrap_or(u64::MAX))
            } else {
                length
            };
            let rate = f * reference;
            LoadSpec::new(rate, duration)?;
            Ok(RateStep {
                rate,
                duration,
                factor: Some(f),
            })
        })
        .collect()
}

/// Inventory's connect cap in every scenario (as in the chain demo).
pub const INVENTORY_CONNECT_CAP: Duration = Duration::from_millis(300);

/// A scenario's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ScenarioName {
    /// Every dependency answers quickly.
    Healthy,
    /// The partner is `slowdown` times slower on every path.
    Slow,
    /// Inventory's partner is blackholed.
    Blackhole,
    /// A fraction of pricing calls get `429` with a long `Retry-After`.
    RateLimit,
    /// Half the pricing calls fail once.
    PricingFlaky,
    /// Recommendations is `slowdown` times slower.
    RecsSlow,
    /// The `slow` partner; half the callers give 200-600 ms, half 1-2 s.
    MixedBudgets,
    /// The healthy partner at twice the capacity; 30 % of requests are
    /// critical.
    Criticality,
    /// The healthy partner under 0.5x, 1x, 2x, 4x, 1x, 0.5x of the
    /// capacity, one step after the other.
    Ramp,
    /// Four hops, edge -> checkout -> middle -> partner, under the slow
    /// partner.
    Deep,
    /// The healthy partner; a quarter into the run `/pricing` answers
    /// `503` for half of it, then recovers.
    Outage,
    /// The healthy partner, except that 5 % of its calls on every path are
    /// `slowdown` times slower (a latency tail), at half the capacity; run
    /// in budget mode with and without hedging ([`ChainMode::Hedged`]).
    Tail,
    /// The healthy partner at half the capacity, three times it for a
    /// while, then half again; reported per phase and per second.
    Spike,
    /// A cold chain; every request at once; 50 ms on every path, 8 workers
    /// per path; 10 s budgets, which cover the whole burst.
    BurstFits,
    /// As `burst-fits`, with no worker limit at the partner.
    BurstFitsUnlimited,
    /// As `burst-fits`, with 1 s budgets, which cover a part of it.
    BurstPart,
    /// As `burst-part`, with no worker limit at the partner.
    BurstPartUnlimited,
    /// The healthy partner at 20 req/s; a quarter into the run
    /// `/inventory` stops answering for half of it, then recovers; budgets
    /// of 1.9 to 2.1 s.
    Hang,
    /// As `hang`, at 2 req/s.
    HangSlowRate,
    /// Three replicas of the healthy partner behind every dependency, at
    /// 60 % of their combined capacity; replica 2 gets 10x slower, then
    /// blackholed, then restarted ([`crate::replicas`]).
    Replicas,
}

impl ScenarioName {
    /// Every scenario, in the order they run.
    pub const ALL: [ScenarioName; 20] = [
        ScenarioName::Healthy,
        ScenarioName::Slow,
        ScenarioName::Blackhole,
        ScenarioName::RateLimit,
        ScenarioName::PricingFlaky,
        ScenarioName::RecsSlow,
        ScenarioName::MixedBudgets,
        ScenarioName::Criticality,
        ScenarioName::Ramp,
        ScenarioName::Deep,
        ScenarioName::Outage,
        ScenarioName::Tail,
        ScenarioName::Spike,
        ScenarioName::BurstFits,
        ScenarioName::BurstFitsUnlimited,
        ScenarioName::BurstPart,
        ScenarioName::BurstPartUnlimited,
        ScenarioName::Hang,
        ScenarioName::HangSlowRate,
        ScenarioName::Replicas,
    ];

    /// The name as on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ScenarioName::Healthy => "healthy",
            ScenarioName::Slow => "slow",
            ScenarioName::Blackhole => "blackhole",
            ScenarioName::RateLimit => "rate-limit",
            ScenarioName::PricingFlaky => "pricing-flaky",
            ScenarioName::RecsSlow => "recs-slow",
            ScenarioName::MixedBudgets => "mixed-budgets",
            ScenarioName::Criticality => "criticality",
            ScenarioName::Ramp => "ramp",
            ScenarioName::Deep => "deep",
            ScenarioName::Outage => "outage",
            ScenarioName::Tail => "tail",
            ScenarioName::Spike => "spike",
            ScenarioName::BurstFits => "burst-fits",
            ScenarioName::BurstFitsUnlimited => "burst-fits-unlimited",
            ScenarioName::BurstPart => "burst-part",
            ScenarioName::BurstPartUnlimited => "burst-part-unlimited",
            ScenarioName::Hang => "hang",
            ScenarioName::HangSlowRate => "hang-slow-rate",
            ScenarioName::Replicas => "replicas",
        }
    }
}

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
}

impl ChainMode {
    /// The four every scenario runs, in the order they run.
    pub const ALL: [ChainMode; 4] = [
        ChainMode::Budget,
        ChainMode::Naive,
        ChainMode::Peer,
        ChainMode::Queue,
    ];

    /// The modes `scenario` runs of `asked`: `asked`; for `tail` and
    /// `replicas` [`ChainMode::Hedged`] right after [`ChainMode::Budget`],
    /// so that hedging is compared with budget mode without it in the same
    /// run; and for `replicas` [`ChainMode::P2c`] right after
    /// [`ChainMode::Peer`], so that balancing is compared with taking the
    /// replicas in turn.
    ///
    /// ```
    /// use load_tests::scenario::{ChainMode, ScenarioName};
    ///
    /// let tail = ChainMode::for_scenario(&ChainMode::ALL, ScenarioName::Tail);
    /// assert_eq!(tail, [ChainMode::Budget, ChainMode::Hedged, ChainMode::Naive, ChainMode::Peer, ChainMode::Queue]);
    /// let replicas = ChainMode::for_scenario(&ChainMode::ALL, ScenarioName::Replicas);
    /// assert_eq!(replicas, [ChainMode::Budget, ChainMode::Hedged, ChainMode::Naive, ChainMode::Peer,
    ///     ChainMode::P2c, ChainMode::Queue]);
    /// assert_eq!(ChainMode::for_scenario(&ChainMode::ALL, ScenarioName::Slow), ChainMode::ALL);
    /// assert_eq!(ChainMode::for_scenario(&[ChainMode::Naive], ScenarioName::Tail), [ChainMode::Naive]);
    /// assert_eq!(ChainMode::for_scenario(&[ChainMode::Peer, ChainMode::P2c], ScenarioName::Replicas),
    ///     [ChainMode::Peer, ChainMode::P2c]);
    /// ```
    pub fn for_scenario(asked: &[ChainMode], scenario: ScenarioName) -> Vec<ChainMode> {
        let mut modes = Vec::with_capacity(asked.len() + 2);
        let replicas = scenario == ScenarioName::Replicas;
        for &mode in asked {
            modes.push(mode);
            if mode == ChainMode::Budget
                && (scenario == ScenarioName::Tail || replicas)
                && !asked.contains(&ChainMode::Hedged)
            {
                modes.push(ChainMode::Hedged);
            }
            if mode == ChainMode::Peer && replicas && !asked.contains(&ChainMode::P2c) {
                modes.push(ChainMode::P2c);
            }
        }
        modes
    }

    /// `budget`, `naive`, `peer`, `queue` or `hedged`: the report's `mode`.
    ///
    /// ```
    /// assert_eq!(load_tests::scenario::ChainMode::Peer.as_str(), "peer");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ChainMode::Budget => "budget",
            ChainMode::Naive => "naive",
            ChainMode::Peer => "peer",
            ChainMode::Queue => "queue",
            ChainMode::Hedged => "hedged",
            ChainMode::P2c => "p2c",
        }
    }

    /// What the mode is, in a few words, for a report's legend.
    ///
    /// ```
    /// use load_tests::scenario::ChainMode;
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
        }
    }

    /// Whether checkout is swapped for [`PeerCheckout`] (`peer`, `queue`,
    /// `p2c`).
    ///
    /// ```
    /// use load_tests::scenario::ChainMode;
    /// assert!(ChainMode::P2c.is_peer() && !ChainMode::Hedged.is_peer());
    /// ```
    pub fn is_peer(self) -> bool {
        matches!(self, ChainMode::Peer | ChainMode::Queue | ChainMode::P2c)
    }

    /// The budget mode of edge (and of checkout, where it runs).
    pub fn budget_mode(self) -> BudgetMode {
        match self {
            ChainMode::Budget
            | ChainMode::Peer
            | ChainMode::Queue
            | ChainMode::Hedged
            | ChainMode::P2c => BudgetMode::On,
            ChainMode::Naive => BudgetMode::Off,
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
struct Shape {
    delay_ms: u64,
    jitter_ms: u64,
}

impl Shape {
    /// The mean latency, ms.
    fn mean_ms(self) -> f64 {
        self.delay_ms as f64 + self.jitter_ms as f64 / 2.0
    }

    /// The healthy query string, with [`TAIL_PERCENT`] of the calls
    /// waiting `factor` times the delay instead.
    fn with_tail(self, factor: u64) -> String {
        format!(
            "{}&tail={}@{}ms",
            self.query(1),
            f64::from(TAIL_PERCENT) / 100.0,
            self.delay_ms * factor
        )
    }

    /// The query string, `factor` times slower.
    fn query(self, factor: u64) -> String {
        format!(
            "delay={}ms&jitter={}ms",
            self.delay_ms * factor,
            self.jitter_ms * factor
        )
    }
}

const INVENTORY: Shape = Shape {
    delay_ms: 15,
    jitter_ms: 10,
};
const PRICING: Shape = Shape {
    delay_ms: 45,
    jitter_ms: 10,
};
const RECOMMENDATIONS: Shape = Shape {
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
    /// How long checkout's and edge's clients keep an idle pooled
    /// connection; `None`: the services' default (90 s). The soak sets it
    /// short, so that "no connection left open" can be checked between
    /// phases.
    #[serde(default, with = "crate::report::opt_millis")]
    pub pool_idle_timeout: Option<Duration>,
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
            pool_idle_timeout: None,
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
    /// let s = load_tests::scenario::ChainSettings::default();
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
    /// let m = load_tests::scenario::ChainSettings::default()
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
    /// use load_tests::scenario::ChainSettings;
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
    /// let c = load_tests::scenario::ChainSettings::default().partner_config();
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

/// One scenario, ready to run.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Its name.
    pub name: ScenarioName,
    /// One line on what it does.
    pub description: String,
    /// Inventory's query string on the partner.
    pub inventory: String,
    /// Pricing's.
    pub pricing: String,
    /// Recommendations'.
    pub recommendations: String,
    /// Inventory on the blackholed partner.
    pub blackholed_inventory: bool,
    /// Consecutive requests sharing one `x-request-id`.
    pub id_group: u64,
    /// The budgets of its requests; `None`: the plan's (`--budget`).
    pub budgets: Option<BudgetDistribution>,
    /// Which requests carry `request-criticality: critical`.
    pub criticality: Option<CriticalitySplit>,
    /// Its own offered load, requests per second (`criticality`: twice
    /// the capacity), unless the plan's rate was asked for; `None`: the
    /// plan's.
    pub rate: Option<f64>,
    /// The steps of the `ramp` and `spike` scenarios: (multiple of the
    /// capacity, or of the plan's rate when it was asked for; length when
    /// the plan's duration was not asked for), see [`shaped_steps`].
    pub ramp: Option<Vec<(f64, Duration)>>,
    /// The chain's healthy capacity ([`ChainSettings::capacity`]).
    pub capacity: f64,
    /// A [`Middle`] hop between checkout and the partner (`deep`).
    pub deep: bool,
    /// `/pricing` fails for a while during the run (`outage`,
    /// [`crate::outage`]).
    pub outage: bool,
    /// Every request at once, against a partner of its own started for
    /// each run (the `burst-*` scenarios).
    pub burst: Option<Burst>,
    /// `/inventory` hangs for a while during the run (`hang`,
    /// `hang-slow-rate`, [`crate::hang`]).
    pub hang: bool,
    /// The run is a spike between calm phases, reported as such
    /// ([`crate::spike`]).
    pub spike: bool,
    /// Every dependency is served by [`REPLICAS`]
    /// partners of its own, started for each run, one of which is troubled
    /// during it (`replicas`, [`crate::replicas`]).
    pub replicas: bool,
}

impl Scenario {
    /// The load of this scenario: `base` with the scenario's own budgets,
    /// criticality and, unless `base` says its rate was asked for, rate.
    ///
    /// ```
    /// use std::time::Duration;
    /// use load_tests::budgets::BudgetDistribution;
    /// use load_tests::client::Patience;
    /// use load_tests::generator::LoadSpec;
    /// use load_tests::run::LoadPlan;
    /// use load_tests::scenario::{ChainSettings, Scenario, ScenarioName};
    ///
    /// let base = LoadPlan::fixed(LoadSpec::new(50.0, Duration::from_secs(2)).unwrap(),
    ///     Duration::from_secs(2), Patience::Budget);
    /// let s = Scenario::new(ScenarioName::MixedBudgets, &ChainSettings::default());
    /// assert_eq!(s.plan(&base).unwrap().budgets, BudgetDistribution::mixed_default());
    /// let s = Scenario::new(ScenarioName::Criticality, &ChainSettings::default());
    /// assert_eq!(s.plan(&base).unwrap().spec.rate(), 320.0);
    /// ```
    ///
    /// # Errors
    ///
    /// The scenario's own rate over the generator's cap.
    pub fn plan(&self, base: &LoadPlan) -> Result<LoadPlan, SpecError> {
        let mut plan = base.clone();
        if let Some(b) = self.budgets {
            plan.budgets = b;
        }
        if self.criticality.is_some() {
            plan.criticality = self.criticality;
        }
        if let Some(rate) = self.rate
            && !base.rate_given
        {
            plan.spec = plan.spec.with_rate(rate)?;
        }
        if let Some(shape) = &self.ramp {
            plan.spec = plan
                .spec
                .with_steps(shaped_steps(shape, self.capacity, base)?)?;
        }
        if let Some(burst) = self.burst {
            // `--requests` when given (the spec's count is below the cap).
            let n = if base.spec.max_requests() < MAX_REQUESTS {
                base.spec.max_requests()
            } else {
                BURST_REQUESTS
            };
            plan.spec = LoadSpec::burst(n)?.with_max_in_flight(base.spec.max_in_flight())?;
            plan.budgets = BudgetDistribution::Fixed(burst.budget);
            plan.patience = Patience::Fixed(burst.budget.saturating_add(BURST_MARGIN));
            plan.fresh_connections = true;
            plan.watch = Some(Watch {
                what: "the burst".into(),
                from: Duration::ZERO,
                to: plan.spec.duration(),
                mark: None,
            });
        }
        if self.hang {
            plan.watch = Some(crate::hang::watch(OutageWindow::of_run(
                plan.spec.duration(),
            )));
        }
        Ok(plan)
    }

    /// The scenario `name` under `settings`.
    ///
    /// ```
    /// use load_tests::scenario::{ChainSettings, Scenario, ScenarioName};
    ///
    /// let s = Scenario::new(ScenarioName::Slow, &ChainSettings::default());
    /// assert_eq!(s.pricing, "delay=450ms&jitter=100ms");
    /// ```
    pub fn new(name: ScenarioName, settings: &ChainSettings) -> Self {
        let f = settings.slowdown;
        let mut s = Scenario {
            name,
            description: String::new(),
            inventory: INVENTORY.query(1),
            pricing: PRICING.query(1),
            recommendations: RECOMMENDATIONS.query(1),
            blackholed_inventory: false,
            id_group: 1,
            budgets: None,
            criticality: None,
            rate: None,
            ramp: None,
            capacity: settings.capacity(),
            deep: false,
            outage: false,
            burst: None,
            hang: false,
            spike: false,
            replicas: false,
        };
        match name {
            ScenarioName::Healthy => s.description = "every dependency answers quickly".into(),
            ScenarioName::Slow => {
                s.description = format!("partner {f}x slower on every path");
                s.inventory = INVENTORY.query(f);
                s.pricing = PRICING.query(f);
                s.recommendations = RECOMMENDATIONS.query(f);
            }
            ScenarioName::Blackhole => {
                s.description = "inventory on a blackholed partner (connects time out)".into();
                s.blackholed_inventory = true;
            }
            ScenarioName::RateLimit => {
                s.description = format!(
                    "1 request in 10 meets a pricing 429 with Retry-After: {RATE_LIMIT_RETRY_AFTER_S}"
                );
                s.pricing = format!(
                    "script=429,200&retry_after={RATE_LIMIT_RETRY_AFTER_S}&{}",
                    PRICING.query(1)
                );
                s.id_group = 10;
            }
            ScenarioName::PricingFlaky => {
                s.description =
                    "1 request in 2 meets a pricing 503 on its first attempt; a retry succeeds"
                        .into();
                s.pricing = format!("script=503,200&{}", PRICING.query(1));
                s.id_group = 2;
            }
            ScenarioName::RecsSlow => {
                s.description = format!("recommendations {f}x slower");
                s.recommendations = RECOMMENDATIONS.query(f);
            }
            ScenarioName::MixedBudgets => {
                let budgets = BudgetDistribution::mixed_default();
                s.description =
                    format!("partner {f}x slower on every path; {}", budgets.describe());
                s.inventory = INVENTORY.query(f);
                s.pricing = PRICING.query(f);
                s.recommendations = RECOMMENDATIONS.query(f);
                s.budgets = Some(budgets);
            }
            ScenarioName::Criticality => {
                let capacity = settings.capacity();
                s.description = format!(
                    "healthy partner at 2x capacity ({:.0} req/s); {} % of requests carry \
                     request-criticality: critical",
                    2.0 * capacity,
                    CRITICAL_PERCENT
                );
                s.criticality = CriticalitySplit::new(CRITICAL_PERCENT);
                s.rate = Some(2.0 * capacity);
            }
            ScenarioName::Ramp => {
                s.description = format!(
                    "healthy partner; offered load {} of capacity ({:.0} req/s)",
                    RAMP_FACTORS
                        .iter()
                        .map(|f| format!("{f}x"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    settings.capacity()
                );
                s.ramp = Some(RAMP_FACTORS.iter().map(|&f| (f, RAMP_STEP)).collect());
            }
            ScenarioName::Deep => {
                s.description = format!(
                    "four hops (edge, checkout, middle, partner); partner {f}x slower on every path"
                );
                s.inventory = INVENTORY.query(f);
                s.pricing = PRICING.query(f);
                s.recommendations = RECOMMENDATIONS.query(f);
                s.deep = true;
            }
            ScenarioName::Outage => {
                s.description = "healthy; from a quarter into the run, /pricing answers 503 \
                                 for half of it (5 s to 15 s of 20 s), then recovers"
                    .into();
                s.outage = true;
            }
            ScenarioName::Spike => {
                s.description = format!(
                    "healthy partner; offered load {}x of capacity ({:.0} req/s) for 4 s, {}x for \
                     2 s, {}x for 6 s (a given --duration in the same proportions)",
                    SPIKE_PHASES[0].0,
                    settings.capacity(),
                    SPIKE_PHASES[1].0,
                    SPIKE_PHASES[2].0,
                );
                s.ramp = Some(SPIKE_PHASES.to_vec());
                s.spike = true;
            }
            ScenarioName::BurstFits
            | ScenarioName::BurstFitsUnlimited
            | ScenarioName::BurstPart
            | ScenarioName::BurstPartUnlimited => {
                let fits = matches!(
                    name,
                    ScenarioName::BurstFits | ScenarioName::BurstFitsUnlimited
                );
                let limited = matches!(name, ScenarioName::BurstFits | ScenarioName::BurstPart);
                let burst = Burst {
                    budget: if fits {
                        BURST_FITS_BUDGET
                    } else {
                        BURST_PART_BUDGET
                    },
                    partner_workers: limited.then_some(settings.partner_workers),
                };
                let delay = format!("delay={}ms", BURST_DELAY.as_millis());
                s.inventory.clone_from(&delay);
                s.pricing.clone_from(&delay);
                s.recommendations = delay;
                s.description = format!(
                    "cold chain and partner; every request at once, one connection each; {} ms \
                     on every path, {}; {} s budgets, which cover {} the burst",
                    BURST_DELAY.as_millis(),
                    match burst.partner_workers {
                        Some(n) => format!(
                            "{n} workers per path ({:.0} req/s)",
                            n as f64 / BURST_DELAY.as_secs_f64()
                        ),
                        None => "no worker limit".to_owned(),
                    },
                    burst.budget.as_secs(),
                    if fits { "all of" } else { "a part of" }
                );
                s.burst = Some(burst);
            }
            ScenarioName::Hang | ScenarioName::HangSlowRate => {
                let rate = if name == ScenarioName::Hang {
                    HANG_RATE
                } else {
                    HANG_SLOW_RATE
                };
                let budgets = BudgetDistribution::uniform(HANG_BUDGETS.0, HANG_BUDGETS.1);
                s.description = format!(
                    "healthy, {rate} req/s; from a quarter into the run {HANG_PATH} stops \
                     answering for half of it (5 s to 15 s of 20 s), then recovers; budgets {}",
                    budgets.describe()
                );
                s.rate = Some(rate);
                s.budgets = Some(budgets);
                s.hang = true;
            }
            ScenarioName::Replicas => {
                let combined = REPLICAS as f64 * settings.capacity();
                s.description = format!(
                    "{REPLICAS} replicas of the healthy partner ({} workers per path each) behind \
                     every dependency, at {:.0} % of their combined capacity ({:.0} req/s); replica \
                     2 is {SLOWDOWN}x slower, then blackholed, then restarted (phases of {}; a \
                     given --duration in the same proportions)",
                    settings.partner_workers,
                    REPLICA_LOAD * 100.0,
                    REPLICA_LOAD * combined,
                    REPLICA_PHASES
                        .iter()
                        .map(|(p, d)| format!("{} {} s", p.as_str(), d.as_secs()))
                        .collect::<Vec<_>>()
                        .join(", "),
                );
                s.capacity = combined;
                s.ramp = Some(crate::replicas::load_shape());
                s.replicas = true;
            }
            ScenarioName::Tail => {
                let capacity = settings.capacity();
                s.description = format!(
                    "healthy partner, but {TAIL_PERCENT} % of its calls on every path are {f}x \
                     slower; at half the capacity ({:.0} req/s)",
                    TAIL_RATE * capacity
                );
                s.inventory = INVENTORY.with_tail(f);
                s.pricing = PRICING.with_tail(f);
                s.recommendations = RECOMMENDATIONS.with_tail(f);
                s.rate = Some(TAIL_RATE * capacity);
            }
        }
        s
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
    /// use load_tests::scenario::{ChainSettings, Partners};
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
    fn new(service: &'static str, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self {
            service,
            source: Box::new(source),
        }
    }
}

/// The checkout config of `scenario` in `mode`.
///
/// # Errors
///
/// A scenario with a blackholed inventory on partners started without the
/// blackholed one ([`Partners::start_main`]).
pub fn checkout_config(
    scenario: &Scenario,
    settings: &ChainSettings,
    mode: BudgetMode,
    partners: &Partners,
) -> Result<CheckoutConfig, ChainError> {
    let mut c = CheckoutConfig::new(loopback());
    c.budget_mode = mode;
    let inventory_partner = if scenario.blackholed_inventory {
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
    c.inventory_url = inventory_partner.url(&format!("/inventory?{}", scenario.inventory));
    c.pricing_url = partners.main.url(&format!("/pricing?{}", scenario.pricing));
    c.recommendations_url = partners
        .main
        .url(&format!("/recommendations?{}", scenario.recommendations));
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
        if scenario.replicas {
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
    peer
}

impl Chain {
    /// Starts checkout (or, in [`ChainMode::Peer`], [`ChainMode::Queue`]
    /// and [`ChainMode::P2c`], the peer checkout, shedding or not,
    /// balancing or not) and edge for `scenario` in `mode`; in the
    /// `replicas` scenario, every dependency is served by each of
    /// [`Partners::all`].
    ///
    /// # Errors
    ///
    /// When either cannot start.
    pub async fn start(
        scenario: &Scenario,
        settings: &ChainSettings,
        mode: ChainMode,
        partners: &Partners,
    ) -> Result<Self, ChainError> {
        let mut stops = Vec::new();
        let mut servers = Vec::new();
        let mut checkout = checkout_config(scenario, settings, mode.budget_mode(), partners)?;
        if mode == ChainMode::Hedged {
            // The opt-in under test, with every default: after the learned
            // p95, at most 10 % more calls.
            for dep in [
                &mut checkout.inventory,
                &mut checkout.pricing,
                &mut checkout.recommendations,
            ] {
                dep.hedge = Some(budget_core::client::HedgeConfig::default());
            }
        }
        let middle = if scenario.deep {
            let (stop, stopped) = oneshot::channel::<()>();
            let middle = Middle::spawn(
                mode,
                &partners.main.url(""),
                settings.pool_idle_timeout,
                async move {
                    let _ = stopped.await;
                },
            )
            .await
            .map_err(|e| ChainError::new("middle", e))?;
            stops.push(stop);
            let base = middle.url();
            checkout.inventory_url = format!("{base}/inventory?{}", scenario.inventory);
            checkout.pricing_url = format!("{base}/pricing?{}", scenario.pricing);
            checkout.recommendations_url =
                format!("{base}/recommendations?{}", scenario.recommendations);
            Some(middle)
        } else {
            None
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let stopped = async move {
            let _ = stopped.await;
        };
        let (checkout_addr, server) = if mode.is_peer() {
            let mut peer = peer_config(&checkout, settings);
            peer.shed = mode != ChainMode::Queue;
            peer.balance = mode == ChainMode::P2c;
            if scenario.replicas {
                peer.endpoints = partners.endpoints();
            }
            PeerCheckout::spawn(&peer, stopped)
                .await
                .map_err(|e| ChainError::new("peer checkout", e))?
        } else {
            checkout::spawn(&checkout, stopped)
                .await
                .map_err(|e| ChainError::new("checkout", e))?
        };
        stops.push(stop);
        servers.push(server);
        let mut edge = EdgeConfig::new(loopback(), format!("http://{checkout_addr}"));
        edge.budget_mode = mode.budget_mode();
        edge.checkout.pool_idle_timeout = settings.pool_idle_timeout;
        let (stop, stopped) = oneshot::channel::<()>();
        let (edge_addr, server) = edge::spawn(&edge, async move {
            let _ = stopped.await;
        })
        .await
        .map_err(|e| ChainError::new("edge", e))?;
        stops.push(stop);
        servers.push(server);
        Ok(Self {
            url: format!("http://{edge_addr}/checkout"),
            checkout_url: format!("http://{checkout_addr}"),
            middle,
            stops,
            servers,
        })
    }

    /// Stops both: graceful shutdown, then, after 2 s, abort.
    pub async fn stop(self) {
        for stop in self.stops {
            let _ = stop.send(());
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let healthy = Scenario::new(ScenarioName::Healthy, &settings);
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
        let bh = Scenario::new(ScenarioName::Blackhole, &settings);
        assert!(checkout_config(&bh, &settings, BudgetMode::On, &partners).is_err());
        partners.shutdown().await;
    }

    #[test]
    fn the_ramp_schedule_follows_the_capacity_or_the_asked_rate_and_duration() {
        let settings = ChainSettings::default();
        let ramp = Scenario::new(ScenarioName::Ramp, &settings);
        let spec = LoadSpec::new(128.0, Duration::from_secs(20)).unwrap();
        let base = LoadPlan::fixed(
            spec,
            Duration::from_secs(2),
            crate::client::Patience::Budget,
        );
        let plan = ramp.plan(&base).unwrap();
        let rates: Vec<f64> = plan.spec.steps().iter().map(|s| s.rate).collect();
        assert_eq!(rates, [80.0, 160.0, 320.0, 640.0, 160.0, 80.0]);
        assert_eq!(plan.spec.duration(), Duration::from_secs(60));
        // 10 s of each: 800 + 1600 + 3200 + 6400 + 1600 + 800.
        assert_eq!(plan.spec.expected_requests(), 14_400);
        let factors: Vec<Option<f64>> = plan.spec.steps().iter().map(|s| s.factor).collect();
        assert_eq!(factors, RAMP_FACTORS.map(Some));
        // --rate 10 --duration 3s: 0.5 s steps of 5 to 40 req/s.
        let asked = LoadPlan {
            rate_given: true,
            duration_given: true,
            ..LoadPlan::fixed(
                LoadSpec::new(10.0, Duration::from_secs(3)).unwrap(),
                Duration::from_secs(2),
                crate::client::Patience::Budget,
            )
        };
        let plan = ramp.plan(&asked).unwrap();
        let steps = plan.spec.steps();
        assert!(
            steps
                .iter()
                .all(|s| s.duration == Duration::from_millis(500))
        );
        assert_eq!(
            steps.iter().map(|s| s.rate).collect::<Vec<_>>(),
            [5.0, 10.0, 20.0, 40.0, 10.0, 5.0]
        );
        assert_eq!(plan.spec.expected_requests(), 3 + 5 + 10 + 20 + 5 + 3);
        // The criticality scenario's own rate, unless one was asked for.
        let crit = Scenario::new(ScenarioName::Criticality, &settings);
        assert_eq!(crit.plan(&base).unwrap().spec.rate(), 320.0);
        assert_eq!(crit.plan(&asked).unwrap().spec.rate(), 10.0);
        assert_eq!(crit.plan(&base).unwrap().criticality.unwrap().percent(), 30);
        assert!(
            Scenario::new(ScenarioName::Healthy, &settings)
                .plan(&base)
                .unwrap()
                .spec
                .steps()
                .is_empty()
        );
    }

    #[test]
    fn bursts_hangs_and_the_spike_shape_their_own_load() {
        let settings = ChainSettings::default();
        let base = LoadPlan::fixed(
            LoadSpec::new(128.0, Duration::from_secs(20)).unwrap(),
            Duration::from_secs(2),
            crate::client::Patience::Fixed(Duration::from_secs(35)),
        );
        for (name, budget, workers) in [
            (ScenarioName::BurstFits, 10, Some(8)),
            (ScenarioName::BurstFitsUnlimited, 10, None),
            (ScenarioName::BurstPart, 1, Some(8)),
            (ScenarioName::BurstPartUnlimited, 1, None),
        ] {
            let s = Scenario::new(name, &settings);
            let burst = s.burst.expect("a burst");
            assert_eq!(burst.budget, Duration::from_secs(budget), "{name:?}");
            assert_eq!(burst.partner_workers, workers, "{name:?}");
            for q in [&s.inventory, &s.pricing, &s.recommendations] {
                assert_eq!(q, "delay=50ms");
            }
            let plan = s.plan(&base).unwrap();
            assert_eq!(plan.spec.expected_requests(), BURST_REQUESTS);
            assert!(plan.spec.schedule().all(|o| o.is_zero()));
            assert_eq!(plan.budgets.max(), Duration::from_secs(budget));
            assert_eq!(
                plan.patience,
                crate::client::Patience::Fixed(Duration::from_secs(budget + 5))
            );
            assert!(plan.fresh_connections && plan.watch.is_some());
        }
        // --requests sets the burst's size.
        let asked = LoadPlan {
            spec: base.spec.clone().with_max_requests(40).unwrap(),
            ..base.clone()
        };
        let burst = Scenario::new(ScenarioName::BurstPart, &settings);
        assert_eq!(burst.plan(&asked).unwrap().spec.expected_requests(), 40);
        // The hangs: their own rates unless one was asked for, budgets of
        // 1.9 to 2.1 s, the failures' window 2 s after the hang began.
        for (name, rate) in [
            (ScenarioName::Hang, 20.0),
            (ScenarioName::HangSlowRate, 2.0),
        ] {
            let s = Scenario::new(name, &settings);
            assert!(s.hang);
            let plan = s.plan(&base).unwrap();
            assert_eq!(plan.spec.rate(), rate);
            assert_eq!(plan.budgets.max(), Duration::from_millis(2100));
            let watch = plan.watch.unwrap();
            assert_eq!(
                (watch.from, watch.to),
                (Duration::from_secs(7), Duration::from_secs(15))
            );
            assert!(!plan.fresh_connections);
        }
        // The spike: 0.5x, 3x, 0.5x of the capacity for 4, 2 and 6 s.
        let spike = Scenario::new(ScenarioName::Spike, &settings)
            .plan(&base)
            .unwrap();
        let steps: Vec<(f64, u64)> = spike
            .spec
            .steps()
            .iter()
            .map(|s| (s.rate, s.duration.as_secs()))
            .collect();
        assert_eq!(steps, [(80.0, 4), (480.0, 2), (80.0, 6)]);
    }

    #[tokio::test]
    async fn replicas_give_checkout_and_the_peers_every_replica_as_endpoints() {
        let settings = ChainSettings::default();
        let partners = Partners::start_replicas(&settings, 3).await.unwrap();
        assert_eq!(partners.all().len(), 3);
        let endpoints = partners.endpoints();
        assert!(endpoints.iter().all(|e| e.starts_with("http://127.0.0.1:")));
        let s = Scenario::new(ScenarioName::Replicas, &settings);
        assert!(s.replicas && s.capacity == 480.0);
        let c = checkout_config(&s, &settings, BudgetMode::On, &partners).unwrap();
        for dep in [&c.inventory, &c.pricing, &c.recommendations] {
            assert_eq!(dep.endpoints.as_ref(), Some(&endpoints));
        }
        // The path and query are the scenario's, the healthy shapes.
        assert!(c.pricing_url.ends_with("/pricing?delay=45ms&jitter=10ms"));
        // Any other scenario: no endpoints.
        let healthy = Scenario::new(ScenarioName::Healthy, &settings);
        let c = checkout_config(&healthy, &settings, BudgetMode::On, &partners).unwrap();
        assert!(c.pricing.endpoints.is_none());
        // Each replica has the chain's workers per path.
        for p in partners.all() {
            assert_eq!(p.stats().paths["/pricing"].workers, 8);
        }
        partners.shutdown().await;
    }

    #[test]
    fn fractions_come_from_id_groups_and_the_per_id_script() {
        let s = ChainSettings::default();
        let rl = Scenario::new(ScenarioName::RateLimit, &s);
        assert_eq!(rl.id_group, 10);
        assert!(rl.pricing.starts_with("script=429,200&retry_after=5&"));
        let flaky = Scenario::new(ScenarioName::PricingFlaky, &s);
        assert_eq!(flaky.id_group, 2);
        assert!(flaky.pricing.starts_with("script=503,200&"));
        let recs = Scenario::new(ScenarioName::RecsSlow, &s);
        assert_eq!(recs.recommendations, "delay=250ms&jitter=100ms");
        assert_eq!(recs.pricing, "delay=45ms&jitter=10ms");
        for name in ScenarioName::ALL {
            let q = Scenario::new(name, &s);
            for query in [&q.inventory, &q.pricing, &q.recommendations] {
                assert!(slow_partner::Knobs::from_query(query).is_ok(), "{query}");
            }
        }
    }
}
