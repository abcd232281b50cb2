//! Running loads: one against a URL ([`run_load`]), or a scenario in each
//! budget mode against chains this process starts ([`run_scenario`]).

use std::future::Future;
use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use service_kit::BudgetMode;
use service_kit::pg_cluster::{Cluster, ClusterError};
use slow_partner::{PartnerHandle, StatsSnapshot};

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::budgets::BudgetDistribution;
use crate::chain::{Chain, ChainError, ChainMode, ChainSettings, Partners};
use crate::client::{ClientConfig, LoadClient, Patience, Sample};
use crate::criticality::CriticalitySplit;
use crate::gauges::sample_per_second;
use crate::generator::{LoadSpec, SpecError, run_open_loop};
use crate::report::{Recorder, RunInfo, RunReport, ServiceSeries, load_average};
use crate::resources::listen_overflows;
use crate::scenario::{Scenario, Setup, Topology};
use crate::target::{LoopbackUrl, NotLoopback, loopback_client};
use crate::window::Watch;

/// How every run of an invocation loads its target.
#[derive(Clone, Debug)]
pub struct LoadPlan {
    /// Rate, duration, count, arrivals.
    pub spec: LoadSpec,
    /// The budget each request is given (one, or a mix of callers).
    pub budgets: BudgetDistribution,
    /// Which requests carry `request-criticality: critical`; `None`: none.
    pub criticality: Option<CriticalitySplit>,
    /// How long the client waits for an answer.
    pub patience: Patience,
    /// Show a progress bar on stderr (hidden anyway when it is not a
    /// terminal).
    pub progress: bool,
    /// Whether the rate was asked for (`--rate`): a scenario with an
    /// offered load of its own (`criticality`, `ramp`) keeps its own
    /// otherwise.
    pub rate_given: bool,
    /// Whether the duration was asked for (`--duration`): the `ramp`
    /// scenario keeps its 10 s steps otherwise.
    pub duration_given: bool,
    /// A window of the run whose requests are also reported on their own
    /// ([`RunReport::window`](crate::report::RunReport::window)); `None`:
    /// none.
    pub watch: Option<Watch>,
    /// Every request on a connection of its own, none reused (the
    /// `burst-*` scenarios); otherwise the client keeps a pool.
    pub fresh_connections: bool,
    /// Warm the chain before a burst (`--warm`; the `burst-*` scenarios,
    /// [`crate::warm`]); the others ignore it.
    pub warm: bool,
}

impl LoadPlan {
    /// `spec` with one fixed `budget` for every request, no criticality.
    ///
    /// ```
    /// use std::time::Duration;
    /// use load_tests::client::Patience;
    /// use load_tests::generator::LoadSpec;
    /// use load_tests::run::LoadPlan;
    ///
    /// let spec = LoadSpec::new(10.0, Duration::from_secs(1)).unwrap();
    /// let plan = LoadPlan::fixed(spec, Duration::from_secs(2), Patience::Budget);
    /// assert_eq!(plan.budgets.budget(7), Duration::from_secs(2));
    /// assert_eq!(plan.class(7), None);
    /// ```
    pub fn fixed(spec: LoadSpec, budget: Duration, patience: Patience) -> Self {
        Self {
            spec,
            budgets: BudgetDistribution::Fixed(budget),
            criticality: None,
            patience,
            progress: false,
            rate_given: false,
            duration_given: false,
            watch: None,
            fresh_connections: false,
            warm: false,
        }
    }

    /// The report class of request `index`: its criticality class when the
    /// plan marks criticality, else its budget class when budgets are
    /// mixed, else none.
    pub fn class(&self, index: u64) -> Option<&'static str> {
        class_of(self.criticality, &self.budgets, index)
    }
}

/// See [`LoadPlan::class`].
pub(crate) fn class_of(
    criticality: Option<CriticalitySplit>,
    budgets: &BudgetDistribution,
    index: u64,
) -> Option<&'static str> {
    match criticality {
        Some(split) => Some(split.class(index)),
        None => budgets.class(index).map(|c| c.as_str()),
    }
}

/// Where a run reads the partner's counters from.
#[derive(Debug)]
pub enum PartnerStats<'a> {
    /// A partner in this process.
    InProcess(&'a PartnerHandle),
    /// Several partners in this process (the `replicas` scenario), their
    /// counters summed.
    InProcessAll(Vec<&'a PartnerHandle>),
    /// A running partner's `/stats` (its base URL; loopback).
    Http(LoopbackUrl),
    /// No partner to ask.
    None,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The chain did not start.
    #[error(transparent)]
    Chain(#[from] ChainError),
    /// The partners did not start.
    #[error("the slow partner did not start")]
    Partner(#[from] slow_partner::PartnerError),
    /// An HTTP client could not be built, or the partner's `/stats` could
    /// not be read.
    #[error("http")]
    Http(#[from] reqwest::Error),
    /// A URL that is not loopback.
    #[error(transparent)]
    NotLoopback(#[from] NotLoopback),
    /// A scenario's own load is out of range (a rate over the cap).
    #[error("the scenario's load")]
    Spec(#[from] SpecError),
    /// The throwaway PostgreSQL cluster of a scenario with a database did
    /// not start (or PostgreSQL is not installed).
    #[error("the PostgreSQL cluster did not start")]
    Database(#[from] ClusterError),
    /// A client of `budget_core` (a stream follower, a batch uploader)
    /// refused its config.
    #[error("a budget_core client's config")]
    ClientConfig(#[from] budget_core::config::ConfigError),
    /// The peer SSE client (`reqwest-eventsource`'s reqwest) could not be
    /// built.
    #[error("the peer SSE client")]
    PeerClient(#[from] reqwest_012::Error),
    /// A scenario's clients need more open files than this process may
    /// have (`ulimit -n`).
    #[error(
        "{needed} open files are needed for the scenario's clients and the limit is {limit}: \
         raise it (`ulimit -n`) or ask for fewer (`--requests`)"
    )]
    OpenFiles {
        /// What the clients need.
        needed: u64,
        /// The process's soft limit.
        limit: u64,
    },
    /// The sweep's noisy neighbour (`--noisy-neighbour`) did not start.
    #[error("the noisy neighbour did not start")]
    Noisy(#[source] std::io::Error),
}

/// What one run is called and sends.
#[derive(Clone, Debug)]
pub struct RunLabel {
    /// Scenario name (`slow`, or `target`).
    pub scenario: String,
    /// `budget`, `naive` or `target`.
    pub mode: String,
    /// One line on the scenario.
    pub description: String,
    /// Consecutive requests sharing one `x-request-id`.
    pub id_group: u64,
}

/// The start of every `x-request-id` of a run: `lt-{scenario}-{mode}`.
pub fn id_prefix(label: &RunLabel) -> String {
    format!("lt-{}-{}", label.scenario, label.mode)
}

/// The longest a run waits for the partner's work to end, before it
/// starts (left over from the previous run) and after its last answer
/// (work whose caller is gone), so that `/stats` counts all of it.
pub const MAX_SETTLE: Duration = Duration::from_secs(40);

/// Runs `plan` once against `target`: waits until the partner is idle,
/// resets its counters, sends the schedule, waits for every answer and
/// then for the partner to be idle again (at most [`MAX_SETTLE`] each),
/// and reads the counters.
///
/// # Errors
///
/// When the HTTP client cannot be built or the partner's `/stats` cannot
/// be read or reset.
pub async fn run_load(
    plan: &LoadPlan,
    target: LoopbackUrl,
    label: RunLabel,
    partner: PartnerStats<'_>,
) -> Result<RunReport, RunError> {
    run_load_with(plan, target, label, partner, None, || {}).await
}

/// [`run_load`], calling `on_start` right before the first request is
/// due (after the settle and the reset), so that something can happen at
/// set times of the run (the `outage` scenario's fault); and, with a
/// `metrics` URL (a service's `/metrics`), reading the services' gauges
/// at the end of each second of the run into
/// [`RunReport::services`](crate::report::RunReport::services)
/// ([`crate::gauges`]).
///
/// # Errors
///
/// As [`run_load`]; a failed scrape is only a missing sample.
pub async fn run_load_with(
    plan: &LoadPlan,
    target: LoopbackUrl,
    label: RunLabel,
    partner: PartnerStats<'_>,
    metrics: Option<&LoopbackUrl>,
    on_start: impl FnOnce(),
) -> Result<RunReport, RunError> {
    let http = loopback_client(Duration::from_secs(5))?;
    settle(&partner, &http).await?;
    reset(&partner, &http).await?;
    let overflows_before = listen_overflows();
    let client = LoadClient::new(ClientConfig {
        target,
        budgets: plan.budgets,
        criticality: plan.criticality,
        patience: plan.patience,
        id_prefix: id_prefix(&label),
        id_group: label.id_group,
        fresh_connections: plan.fresh_connections,
    })?;
    let info = RunInfo {
        scenario: label.scenario.clone(),
        mode: label.mode.clone(),
        description: label.description,
        spec: plan.spec.clone(),
        budgets: plan.budgets,
        patience: plan.patience,
        load_average: load_average(),
    };
    let bar = progress_bar(plan, &format!("{} / {} mode", label.scenario, label.mode));
    let mut recorder = Recorder::for_spec(&plan.spec).watching(plan.watch.clone());
    let (ended, end) = tokio::sync::oneshot::channel::<()>();
    on_start();
    let start = tokio::time::Instant::now();
    let load = async {
        let totals = run_open_loop(
            &plan.spec,
            &bar,
            |scheduled| client.send(scheduled),
            |scheduled, sample: Option<Sample>| {
                let sample = sample.unwrap_or_else(|| Sample {
                    class: plan.class(scheduled.index),
                    ..Sample::not_sent(scheduled, plan.budgets.budget(scheduled.index))
                });
                recorder.record(&sample);
            },
        )
        .await;
        let _ = ended.send(());
        totals
    };
    let sampler = async {
        match metrics {
            Some(url) => Some(
                sample_per_second(&http, url, start, async {
                    let _ = end.await;
                })
                .await,
            ),
            None => None,
        }
    };
    let (totals, samples) = tokio::join!(load, sampler);
    bar.finish_and_clear();
    settle(&partner, &http).await?;
    let stats = read(&partner, &http).await?;
    let mut report = recorder.finish(info, totals, stats.as_ref());
    report.listen_overflows = overflows_before
        .zip(listen_overflows())
        .map(|(before, after)| after.saturating_sub(before));
    if let Some(samples) = samples {
        let seconds = report.timeline.len();
        report.set_services(ServiceSeries::from_samples(&samples, seconds));
    }
    Ok(report)
}

/// Runs `scenario` once per mode of `modes` (budget, naive, peer,
/// queue), back to back, each against a fresh checkout (or peer checkout)
/// and edge, and, when its [`Topology`] says, partners of its own started
/// for each run; [`Scenario::run`] does what happens during each run.
///
/// # Errors
///
/// When a chain cannot start or a run fails.
pub async fn run_scenario(
    scenario: &dyn Scenario,
    settings: &ChainSettings,
    plan: &LoadPlan,
    modes: &[ChainMode],
    partners: &Partners,
) -> Result<Vec<RunReport>, RunError> {
    let setup = scenario.setup(settings);
    let plan = &scenario.plan(&setup, plan)?;
    let mut reports = Vec::new();
    for &mode in modes {
        let own = match &setup.partners {
            Topology::Shared => None,
            Topology::Fresh(config) => Some(Partners::start_main(config.clone()).await?),
            Topology::Replicas(n) => Some(Partners::start_replicas(settings, *n).await?),
        };
        let database = if setup.database {
            Some(start_cluster().await?)
        } else {
            None
        };
        let url = database.as_ref().map(Cluster::url);
        let report = run_mode(
            scenario,
            &setup,
            settings,
            url.as_deref(),
            plan,
            mode,
            own.as_ref().unwrap_or(partners),
        )
        .await;
        // Stopped off the runtime's threads: `pg_ctl stop` waits for it.
        if let Some(cluster) = database {
            let _ = tokio::task::spawn_blocking(move || drop(cluster)).await;
        }
        if let Some(own) = own {
            own.shutdown().await;
        }
        reports.push(report?);
    }
    Ok(reports)
}

/// A throwaway PostgreSQL cluster, started off the runtime's threads (it
/// takes about a second).
async fn start_cluster() -> Result<Cluster, ClusterError> {
    match tokio::task::spawn_blocking(Cluster::start).await {
        Ok(started) => started,
        Err(e) => Err(ClusterError::Command {
            what: "the cluster's start task".into(),
            status: None,
            stderr: e.to_string(),
        }),
    }
}

/// One run of `scenario` in `mode` on `partners` (and checkout's
/// `database`, when there is one): its chain started, its
/// [`Scenario::run`], its chain stopped.
async fn run_mode(
    scenario: &dyn Scenario,
    setup: &Setup,
    settings: &ChainSettings,
    database: Option<&str>,
    plan: &LoadPlan,
    mode: ChainMode,
    partners: &Partners,
) -> Result<RunReport, RunError> {
    let chain = Chain::start_with_database(setup, settings, mode, partners, database).await?;
    let run = ModeRun::new(setup, settings, plan, mode, partners, &chain);
    let report = match run.map(|run| run.with_database(database)) {
        Ok(run) => scenario.run(run).await,
        Err(e) => Err(e),
    };
    chain.stop().await;
    report
}

/// One run of a scenario in one mode, its chain started: what
/// [`Scenario::run`] is given to send the load, beside whatever else the
/// scenario does during the run.
#[derive(Debug)]
pub struct ModeRun<'a> {
    /// The scenario's setup.
    pub setup: &'a Setup,
    /// How the chain is built.
    pub settings: &'a ChainSettings,
    /// The scenario's load.
    pub plan: &'a LoadPlan,
    /// The run's mode.
    pub mode: ChainMode,
    /// The partners the chain calls.
    pub partners: &'a Partners,
    /// The chain.
    pub chain: &'a Chain,
    /// The URL of checkout's database, when the scenario has one
    /// ([`Setup::database`]).
    pub database: Option<&'a str>,
    label: RunLabel,
    target: LoopbackUrl,
    metrics: Option<LoopbackUrl>,
}

impl<'a> ModeRun<'a> {
    fn new(
        setup: &'a Setup,
        settings: &'a ChainSettings,
        plan: &'a LoadPlan,
        mode: ChainMode,
        partners: &'a Partners,
        chain: &'a Chain,
    ) -> Result<Self, RunError> {
        let target = LoopbackUrl::parse(&chain.url)?;
        let label = RunLabel {
            scenario: setup.name.to_owned(),
            mode: mode.as_str().to_owned(),
            description: if settings.via_envoy {
                format!("{} ({})", setup.description, crate::envoy::VIA_ENVOY)
            } else {
                setup.description.clone()
            },
            id_group: setup.id_group,
        };
        // The services' gauges, in budget mode only: the registry is the
        // process's, and the other modes would show what budget mode left.
        let metrics = if matches!(mode, ChainMode::Budget | ChainMode::Hedged) {
            Some(LoopbackUrl::parse(&chain.checkout_url)?.with_path("/metrics"))
        } else {
            None
        };
        Ok(Self {
            setup,
            settings,
            plan,
            mode,
            partners,
            chain,
            database: None,
            label,
            target,
            metrics,
        })
    }

    fn with_database(self, database: Option<&'a str>) -> Self {
        Self { database, ..self }
    }

    /// The start of the run's `x-request-id`s ([`id_prefix`]).
    pub fn id_prefix(&self) -> String {
        id_prefix(&self.label)
    }

    /// Sends the load ([`run_load_with`]) and reports it.
    ///
    /// # Errors
    ///
    /// As [`run_load`].
    pub async fn load(self) -> Result<RunReport, RunError> {
        self.load_with(|| {}).await
    }

    /// [`load`](Self::load), calling `on_start` right before the first
    /// request is due.
    ///
    /// # Errors
    ///
    /// As [`run_load`].
    pub async fn load_with(self, on_start: impl FnOnce()) -> Result<RunReport, RunError> {
        let stats = if self.setup.partners.is_replicas() {
            PartnerStats::InProcessAll(self.partners.all())
        } else {
            PartnerStats::InProcess(&self.partners.main)
        };
        run_load_with(
            self.plan,
            self.target,
            self.label,
            stats,
            self.metrics.as_ref(),
            on_start,
        )
        .await
    }

    /// The report of a run that sent no request load through the chain (a
    /// scenario whose [`Scenario::request_load`] is `false`): its label and
    /// `elapsed` as the wall time, no request counted; the scenario adds
    /// its own section to it.
    pub fn report_of(&self, elapsed: Duration) -> RunReport {
        let info = RunInfo {
            scenario: self.label.scenario.clone(),
            mode: self.label.mode.clone(),
            description: self.label.description.clone(),
            spec: self.plan.spec.clone(),
            budgets: self.plan.budgets,
            patience: self.plan.patience,
            load_average: load_average(),
        };
        let totals = crate::generator::RunTotals {
            elapsed,
            ..Default::default()
        };
        Recorder::new().finish(info, totals, None)
    }

    /// The load, and beside it `beside`, given the instant the first
    /// request is due (sent when it is; dropped when the run never
    /// starts): a fault at set times of the run, a sampler. Both results.
    pub async fn load_beside<T, F>(
        self,
        beside: impl FnOnce(oneshot::Receiver<Instant>) -> F,
    ) -> (Result<RunReport, RunError>, T)
    where
        F: Future<Output = T>,
    {
        let (started, start) = oneshot::channel();
        let run = self.load_with(move || {
            let _ = started.send(Instant::now());
        });
        tokio::join!(run, beside(start))
    }
}

/// `budget` for budget mode on, `naive` for off.
pub fn mode_name(mode: BudgetMode) -> &'static str {
    match mode {
        BudgetMode::On => "budget",
        BudgetMode::Off => "naive",
    }
}

/// The run's progress bar on stderr: answers so far of those expected.
/// Hidden unless the plan asks for one and stderr is a terminal, so that
/// logs, pipes and tests get only the run's own lines.
fn progress_bar(plan: &LoadPlan, message: &str) -> ProgressBar {
    if !plan.progress || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(
        Some(plan.spec.expected_requests()),
        ProgressDrawTarget::stderr(),
    );
    if let Ok(style) =
        ProgressStyle::with_template("{msg:28} [{elapsed_precise}] {wide_bar} {pos}/{len} answered")
    {
        bar.set_style(style);
    }
    bar.set_message(message.to_owned());
    bar
}

/// Waits until every call the partner received has ended (answered, or
/// abandoned by its caller), then 200 ms more; at most [`MAX_SETTLE`].
/// Without a partner to ask, returns at once.
async fn settle(partner: &PartnerStats<'_>, http: &reqwest::Client) -> Result<(), RunError> {
    let started = tokio::time::Instant::now();
    while let Some(stats) = read(partner, http).await? {
        let ended = stats.answered.values().sum::<u64>() + stats.abandoned;
        if ended >= stats.requests || started.elapsed() >= MAX_SETTLE {
            tokio::time::sleep(Duration::from_millis(200)).await;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

async fn reset(partner: &PartnerStats<'_>, http: &reqwest::Client) -> Result<(), RunError> {
    match partner {
        PartnerStats::InProcess(p) => p.reset_stats(),
        PartnerStats::InProcessAll(all) => all.iter().for_each(|p| p.reset_stats()),
        PartnerStats::Http(base) => {
            http.post(base.with_path("/stats/reset").url().clone())
                .send()
                .await?
                .error_for_status()?;
        }
        PartnerStats::None => {}
    }
    Ok(())
}

async fn read(
    partner: &PartnerStats<'_>,
    http: &reqwest::Client,
) -> Result<Option<StatsSnapshot>, RunError> {
    Ok(match partner {
        PartnerStats::InProcess(p) => Some(p.stats()),
        PartnerStats::InProcessAll(all) => Some(sum_stats(all.iter().map(|p| p.stats()))),
        PartnerStats::Http(base) => Some(
            http.get(base.with_path("/stats").url().clone())
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?,
        ),
        PartnerStats::None => None,
    })
}

/// The counters of several partners as one: requests, answers, budgets,
/// late and abandoned work summed, and the ids' calls together (an id
/// whose attempts went to several partners has them all). The worker
/// pools and hung paths are each partner's own and are left out.
fn sum_stats(all: impl Iterator<Item = StatsSnapshot>) -> StatsSnapshot {
    let mut sum = StatsSnapshot::default();
    for s in all {
        sum.requests += s.requests;
        for (status, n) in s.answered {
            *sum.answered.entry(status).or_default() += n;
        }
        sum.with_budget += s.with_budget;
        sum.late += s.late;
        sum.abandoned += s.abandoned;
        sum.evicted_ids += s.evicted_ids;
        for (id, stats) in s.ids {
            let into = sum.ids.entry(id).or_default();
            into.attempts += stats.attempts;
            into.calls.extend(stats.calls);
        }
    }
    sum
}
