//! The command line: flags, their checks, running what they ask for
//! ([`execute`]) and the program around it ([`main_with`]); what a run
//! prints and writes is [`crate::output`]'s.
//!
//! Every value is checked before anything starts, and a refusal is a
//! message naming the flag and exit code 2: a target that is not loopback,
//! a rate over [`MAX_RATE`](crate::generator::MAX_RATE), a duration over
//! [`MAX_DURATION`](crate::generator::MAX_DURATION), a count over
//! [`MAX_REQUESTS`](crate::generator::MAX_REQUESTS), a client timeout over
//! [`MAX_CLIENT_TIMEOUT`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::chain::{ChainMode, ChainSettings, Partners};
use crate::client::{MAX_CLIENT_TIMEOUT, Patience};
use crate::generator::{Arrivals, DEFAULT_MAX_IN_FLIGHT, LoadSpec, SpecError};
use crate::html::write_html;
use crate::output::{markdown, write_json, write_sweep_json};
use crate::plot::write_svg;
use crate::report::RunReport;
use crate::run::{LoadPlan, PartnerStats, RunError, RunLabel, run_load, run_scenario};
use crate::scenario::{ScenarioRef, modes_of};
use crate::sweep::{SWEEP_NAME, SweepArgs, SweepPlan, run_sweep, sweep_markdown};
use crate::target::{LoopbackUrl, NotLoopback};

/// How long each run sends when `--duration` is not given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(20);

/// The largest budget a request may be given (edge's own maximum).
pub const MAX_BUDGET: Duration = Duration::from_secs(10);

/// Which modes a scenario runs in (`--modes` takes several,
/// comma-separated: `on,queue`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Modes {
    /// Every mode: budget mode, budget mode off, the plain-tower peer, the
    /// plain-tower queue and the Envoy sidecar, back to back.
    #[default]
    All,
    /// Budget mode, then budget mode off.
    Both,
    /// Budget mode only.
    On,
    /// Budget mode off only (generous fixed timeouts).
    Off,
    /// The plain-tower peer checkout only ([`crate::peer`]): LoadShed +
    /// ConcurrencyLimit + Timeout.
    Peer,
    /// The plain-tower peer checkout without shedding only: a call waits
    /// for the ConcurrencyLimit's permit inside its Timeout.
    Queue,
    /// The plain-tower peer checkout balancing each dependency over its
    /// replicas only ([`crate::p2c`]): p2c Balance over PeakEwma, LoadShed,
    /// Timeout (the `replicas` scenario adds it after `peer`).
    P2c,
    /// Naive checkout behind an Envoy sidecar only ([`crate::envoy`]).
    Envoy,
}

impl Modes {
    /// The modes, in run order.
    ///
    /// ```
    /// use load_tests::cli::Modes;
    /// use load_tests::chain::ChainMode;
    /// assert_eq!(Modes::All.chain_modes(), ChainMode::ALL);
    /// assert_eq!(Modes::Peer.chain_modes(), [ChainMode::Peer]);
    /// assert_eq!(Modes::Queue.chain_modes(), [ChainMode::Queue]);
    /// assert_eq!(Modes::P2c.chain_modes(), [ChainMode::P2c]);
    /// assert_eq!(Modes::Envoy.chain_modes(), [ChainMode::Envoy]);
    /// ```
    pub fn chain_modes(self) -> Vec<ChainMode> {
        match self {
            Modes::All => ChainMode::ALL.to_vec(),
            Modes::Both => vec![ChainMode::Budget, ChainMode::Naive],
            Modes::On => vec![ChainMode::Budget],
            Modes::Off => vec![ChainMode::Naive],
            Modes::Peer => vec![ChainMode::Peer],
            Modes::Queue => vec![ChainMode::Queue],
            Modes::P2c => vec![ChainMode::P2c],
            Modes::Envoy => vec![ChainMode::Envoy],
        }
    }

    /// The modes of several values, in the order given, each once.
    ///
    /// ```
    /// use load_tests::cli::Modes;
    /// use load_tests::chain::ChainMode;
    /// assert_eq!(
    ///     Modes::union(&[Modes::Queue, Modes::Both, Modes::On]),
    ///     [ChainMode::Queue, ChainMode::Budget, ChainMode::Naive]
    /// );
    /// assert_eq!(Modes::union(&[]), ChainMode::ALL);
    /// ```
    pub fn union(values: &[Modes]) -> Vec<ChainMode> {
        if values.is_empty() {
            return ChainMode::ALL.to_vec();
        }
        let mut modes = Vec::new();
        for mode in values.iter().flat_map(|v| v.chain_modes()) {
            if !modes.contains(&mode) {
                modes.push(mode);
            }
        }
        modes
    }
}

/// Open-loop load tests of the budget chain (edge -> checkout -> slow
/// partner): budget mode against generous fixed timeouts and against a
/// plain-tower peer checkout.
///
/// Without --target, each scenario starts a slow partner, checkout and edge
/// in this process on 127.0.0.1 and runs the load once per mode: budget
/// mode on, off, with checkout swapped for the plain-tower peer, with and
/// without load shedding (peer, queue), and naive checkout behind an Envoy
/// sidecar (envoy). With --target, the load goes
/// to an edge that is already running (loopback only). Prints markdown
/// tables on stdout.
#[derive(Debug, Parser)]
#[command(name = "load-tests", version)]
pub struct Args {
    /// Scenarios to run, comma-separated [default: every one, in the
    /// order listed]. The bursts send every request at once, 300 or
    /// --requests; `spike` is 0.5x, 3x, 0.5x of the capacity; `hang` and
    /// `hang-slow-rate` hang /inventory for the middle half of the run;
    /// `replicas` serves every dependency from three partners, one of
    /// which gets slow, dark and restarted (29 s).
    #[arg(long = "scenario", value_enum, value_delimiter = ',')]
    pub scenarios: Vec<ScenarioRef>,
    /// Requests per second [default: 80% of the chain's capacity: 128;
    /// `criticality`: 2x the capacity; `ramp`, `spike`: steps of the
    /// capacity, and a given rate stands for the capacity; `replicas`:
    /// 60 % of three replicas' capacity, 288, and a given rate stands for
    /// the three's capacity; `hang`: 20;
    /// `hang-slow-rate`: 2; a burst ignores it].
    #[arg(long)]
    pub rate: Option<f64>,
    /// How long each run sends (humantime: 20s, 1m) [default: 20s; the
    /// `ramp` scenario: 10 s per step, and a given duration is split over
    /// its six steps; `spike`: 12 s, and a given duration is split 4:2:6;
    /// a burst ignores it].
    #[arg(long, value_parser = budget_core::config::duration::parse)]
    pub duration: Option<Duration>,
    /// Stop each run after this many requests; the size of a burst
    /// [default there: 300].
    #[arg(long)]
    pub requests: Option<u64>,
    /// How send times are spread.
    #[arg(long, value_enum, default_value_t = Arrivals::Constant)]
    pub arrivals: Arrivals,
    /// Seed of Poisson arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The budget each request is given (request-budget-ms); the
    /// `mixed-budgets` and `hang` scenarios draw their own per request
    /// instead, and the bursts give 10 s (`-fits`) or 1 s (`-part`).
    #[arg(long, default_value = "2s", value_parser = budget_core::config::duration::parse)]
    pub budget: Duration,
    /// How long the client waits for an answer: a duration, or `budget`
    /// to hang up at the budget [a burst: its budget plus 5 s].
    #[arg(long, default_value = "35s")]
    pub client_timeout: String,
    /// Modes to run each scenario in, comma-separated, in that order:
    /// budget (on), naive (off), peer (tower LoadShed + ConcurrencyLimit +
    /// Timeout), queue (tower ConcurrencyLimit + Timeout, no shedding),
    /// p2c (the peer balancing over replicas: p2c Balance over PeakEwma),
    /// envoy (naive checkout behind an Envoy sidecar), both (on,off), all
    /// (budget, naive, peer, queue, envoy) [default: all; `tail` and
    /// `replicas` add hedged right after budget, `replicas` p2c right
    /// after peer; the streams and batch scenarios and `db-slow` skip the
    /// modes they cannot have, saying why].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub modes: Vec<Modes>,
    /// Workers per path of the slow partner: calls of a path worked on at
    /// once, the rest queue (the chain's capacity).
    #[arg(long, default_value_t = crate::chain::DEFAULT_PARTNER_WORKERS)]
    pub partner_workers: usize,
    /// A fixed limit of calls in flight per dependency in checkout's
    /// clients, a hand-sized comparison row (e.g. 8) [default: none,
    /// checkout's own default (adaptive)]; also the peer checkout's limit
    /// [default there: --partner-workers].
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// How much slower `slow` and `recs-slow` make the partner.
    #[arg(long, default_value_t = 10)]
    pub slowdown: u64,
    /// Inventory's floor in budget mode, a hand-sized comparison row (e.g.
    /// 900ms) [default: none, checkout's own default configuration].
    #[arg(long, value_parser = budget_core::config::duration::parse)]
    pub inventory_floor: Option<Duration>,
    /// Pricing's floor in budget mode, a hand-sized comparison row (e.g.
    /// 600ms) [default: none, checkout's own default configuration].
    #[arg(long, value_parser = budget_core::config::duration::parse)]
    pub pricing_floor: Option<Duration>,
    /// Edge's floor for its call of checkout in budget mode, a hand-sized
    /// comparison row (e.g. 10ms) [default: none, edge's own default
    /// configuration (learned)].
    #[arg(long, value_parser = budget_core::config::duration::parse)]
    pub checkout_floor: Option<Duration>,
    /// Load a running edge instead (its /checkout URL; loopback only).
    #[arg(long)]
    pub target: Option<String>,
    /// With --target: the slow partner's base URL, to reset and read its
    /// /stats (loopback only).
    #[arg(long, requires = "target")]
    pub partner_stats: Option<String>,
    /// With --target: consecutive requests sharing one x-request-id.
    #[arg(long, default_value_t = 1)]
    pub id_group: u64,
    /// Requests in flight at most; one due beyond that is not sent.
    #[arg(long, default_value_t = DEFAULT_MAX_IN_FLIGHT)]
    pub max_in_flight: usize,
    /// Also write every run as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write the p99-latency and goodput plot to this SVG file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Also write one self-contained HTML page to this file: the tables,
    /// the budget tables and the charts of every scenario, with what they
    /// mean; it loads nothing from the network.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// No progress bar (it is hidden anyway when stderr is not a terminal).
    #[arg(long)]
    pub no_progress: bool,
    /// The `burst-*` scenarios: warm the chain first (20 req/s for 3 s,
    /// each with the burst's budget or 2 s if shorter, then 200 ms of
    /// quiet); only the burst is counted [default: cold].
    #[arg(long)]
    pub warm: bool,
    /// The in-line Envoy topology: edge -> Envoy -> checkout -> Envoy ->
    /// partner (Envoy's hop config: default 15 s route timeout, every
    /// header passed on), in every mode asked; in the `envoy` mode the
    /// sidecar is checkout's Envoy to the partner. Not with the streams
    /// and batch scenarios, `db-slow` or --target.
    #[arg(long)]
    pub via_envoy: bool,
    /// The flags of `--scenario burst-sweep`.
    #[command(flatten)]
    pub sweep: SweepArgs,
}

/// A refused command line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// `--target` is not a loopback `http` URL.
    #[error("--target: {0}")]
    Target(NotLoopback),
    /// `--partner-stats` is not a loopback `http` URL.
    #[error("--partner-stats: {0}")]
    PartnerStats(NotLoopback),
    /// A load flag is out of range.
    #[error("--{flag}: {source}")]
    Load {
        /// The flag.
        flag: &'static str,
        /// What is wrong.
        source: SpecError,
    },
    /// Any other flag out of range.
    #[error("--{flag}: {problem}")]
    Flag {
        /// The flag.
        flag: &'static str,
        /// What is wrong.
        problem: String,
    },
}

/// What a checked command line runs.
#[derive(Clone, Debug)]
pub enum Invocation {
    /// Scenarios against chains started here.
    Scenarios {
        /// Which, in order.
        scenarios: Vec<ScenarioRef>,
        /// How the chain is built.
        settings: ChainSettings,
        /// In which modes.
        modes: Vec<ChainMode>,
        /// The load.
        plan: LoadPlan,
    },
    /// `--scenario burst-sweep`: the sweep's cells against chains started
    /// here ([`crate::sweep`]).
    Sweep {
        /// What it runs.
        sweep: SweepPlan,
        /// How the chain is built.
        settings: ChainSettings,
        /// The command line's load (its in-flight cap).
        plan: LoadPlan,
    },
    /// One load against a running edge.
    Target {
        /// Its `/checkout` URL.
        target: LoopbackUrl,
        /// The partner's base URL, for `/stats`.
        partner_stats: Option<LoopbackUrl>,
        /// Consecutive requests sharing one `x-request-id`.
        id_group: u64,
        /// The load.
        plan: LoadPlan,
    },
}

impl Invocation {
    /// The load.
    pub fn plan(&self) -> &LoadPlan {
        match self {
            Invocation::Scenarios { plan, .. }
            | Invocation::Sweep { plan, .. }
            | Invocation::Target { plan, .. } => plan,
        }
    }
}

/// Refuses an output file that cannot be made before a run spends its
/// time: a directory, or a file in a directory that does not exist. (What
/// only writing shows, such as a read-only directory, is said after the
/// run, with exit code 1.)
fn check_output(name: &'static str, path: &std::path::Path) -> Result<(), CliError> {
    if path.is_dir() {
        return Err(flag(name, format!("{} is a directory", path.display())));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    if !parent.is_dir() {
        return Err(flag(
            name,
            format!(
                "cannot write {}: directory {} does not exist",
                path.display(),
                parent.display()
            ),
        ));
    }
    Ok(())
}

fn flag(flag: &'static str, problem: impl Into<String>) -> CliError {
    CliError::Flag {
        flag,
        problem: problem.into(),
    }
}

impl Args {
    /// Checks every flag and says what to run.
    ///
    /// # Errors
    ///
    /// The first refused flag, named.
    ///
    /// ```
    /// use clap::Parser;
    /// use load_tests::cli::Args;
    ///
    /// let err = Args::try_parse_from(["load-tests", "--target", "http://10.1.2.3:8080/checkout"])
    ///     .unwrap()
    ///     .invocation()
    ///     .unwrap_err();
    /// assert!(err.to_string().starts_with("--target: refusing http://10.1.2.3:8080/checkout"));
    /// ```
    pub fn invocation(&self) -> Result<Invocation, CliError> {
        for (name, path) in [
            ("json", &self.json),
            ("svg", &self.svg),
            ("html", &self.html),
        ] {
            if let Some(path) = path {
                check_output(name, path)?;
            }
        }
        let settings = self.chain_settings()?;
        let plan = self.plan(&settings)?;
        if let Some(target) = &self.target {
            if self.via_envoy {
                return Err(flag(
                    "via-envoy",
                    "the chain is not started here with --target",
                ));
            }
            let target = LoopbackUrl::parse(target).map_err(CliError::Target)?;
            let partner_stats = self
                .partner_stats
                .as_deref()
                .map(LoopbackUrl::parse)
                .transpose()
                .map_err(CliError::PartnerStats)?;
            if !self.scenarios.is_empty() {
                return Err(flag(
                    "scenario",
                    "scenarios shape partners this tool starts; they do not apply with --target",
                ));
            }
            if self.id_group == 0 {
                return Err(flag("id-group", "must be at least 1"));
            }
            return Ok(Invocation::Target {
                target,
                partner_stats,
                id_group: self.id_group,
                plan,
            });
        }
        if let Some(sweep) = self.sweep_invocation(&settings, &plan)? {
            return Ok(sweep);
        }
        let scenarios = if self.scenarios.is_empty() {
            // The sweep is run only when asked for (hundreds of runs).
            crate::scenarios::ALL
                .iter()
                .copied()
                .filter(|s| s.name() != SWEEP_NAME)
                .collect()
        } else {
            let mut seen = Vec::new();
            for s in &self.scenarios {
                if !seen.contains(s) {
                    seen.push(*s);
                }
            }
            seen
        };
        if self.via_envoy
            && let Some((name, why)) = self
                .scenarios
                .iter()
                .find_map(|s| s.get().without_envoy().map(|why| (s.name(), why)))
        {
            return Err(flag("via-envoy", format!("not with {name}: {why}")));
        }
        if self.warm && !scenarios.iter().any(|s| s.name().starts_with("burst-")) {
            return Err(flag("warm", "only the burst-* scenarios can be warmed"));
        }
        let modes = Modes::union(&self.modes);
        Ok(Invocation::Scenarios {
            scenarios,
            settings,
            modes,
            plan,
        })
    }

    /// The sweep, when `--scenario burst-sweep` asks for it; a sweep flag
    /// without it, or it beside another scenario, is refused.
    fn sweep_invocation(
        &self,
        settings: &ChainSettings,
        plan: &LoadPlan,
    ) -> Result<Option<Invocation>, CliError> {
        let asked = self.scenarios.iter().any(|s| s.name() == SWEEP_NAME);
        if !asked {
            return match self.sweep.given() {
                Some(name) => Err(flag(name, "only with --scenario burst-sweep")),
                None => Ok(None),
            };
        }
        if self.scenarios.iter().any(|s| s.name() != SWEEP_NAME) {
            return Err(flag("scenario", "burst-sweep runs on its own"));
        }
        if self.warm {
            return Err(flag(
                "warm",
                "burst-sweep runs cold and warm cells: choose with --sweep-start",
            ));
        }
        for (name, given) in [("svg", self.svg.is_some()), ("html", self.html.is_some())] {
            if given {
                return Err(flag(name, "burst-sweep writes one table: use --json"));
            }
        }
        Ok(Some(Invocation::Sweep {
            sweep: self.sweep.plan(&Modes::union(&self.modes))?,
            settings: settings.clone(),
            plan: plan.clone(),
        }))
    }

    fn chain_settings(&self) -> Result<ChainSettings, CliError> {
        if let Some(concurrency) = self.concurrency
            && !(1..=1024).contains(&concurrency)
        {
            return Err(flag(
                "concurrency",
                format!("{concurrency} is outside 1 to 1024"),
            ));
        }
        if !(1..=1024).contains(&self.partner_workers) {
            return Err(flag(
                "partner-workers",
                format!("{} is outside 1 to 1024", self.partner_workers),
            ));
        }
        if !(1..=100).contains(&self.slowdown) {
            return Err(flag(
                "slowdown",
                format!("{} is outside 1 to 100", self.slowdown),
            ));
        }
        for (name, floor) in [
            ("inventory-floor", self.inventory_floor),
            ("pricing-floor", self.pricing_floor),
            ("checkout-floor", self.checkout_floor),
        ] {
            if let Some(floor) = floor
                && floor > MAX_BUDGET
            {
                return Err(flag(
                    name,
                    format!(
                        "{} is over the largest budget, 10s",
                        humantime::format_duration(floor)
                    ),
                ));
            }
        }
        Ok(ChainSettings {
            partner_workers: self.partner_workers,
            concurrency: self.concurrency,
            slowdown: self.slowdown,
            inventory_floor: self.inventory_floor,
            pricing_floor: self.pricing_floor,
            checkout_floor: self.checkout_floor,
            pool_idle_timeout: None,
            via_envoy: self.via_envoy,
        })
    }

    fn plan(&self, settings: &ChainSettings) -> Result<LoadPlan, CliError> {
        let load = |flag, source| CliError::Load { flag, source };
        let rate = self.rate.unwrap_or(0.8 * settings.capacity());
        let duration = self.duration.unwrap_or(DEFAULT_DURATION);
        let spec = LoadSpec::new(rate, duration).map_err(|e| match e {
            SpecError::ZeroDuration | SpecError::DurationOverCap { .. } => load("duration", e),
            e => load("rate", e),
        })?;
        let spec = match self.requests {
            Some(n) => spec.with_max_requests(n).map_err(|e| load("requests", e))?,
            None => spec,
        }
        .with_arrivals(self.arrivals, self.seed)
        .with_max_in_flight(self.max_in_flight)
        .map_err(|e| load("max-in-flight", e))?;
        if self.budget.is_zero() || self.budget > MAX_BUDGET {
            return Err(flag(
                "budget",
                format!(
                    "{} is outside 1ms to 10s",
                    humantime::format_duration(self.budget)
                ),
            ));
        }
        let patience = if self.client_timeout == "budget" {
            Patience::Budget
        } else {
            let d = budget_core::config::duration::parse(&self.client_timeout).map_err(|e| {
                flag(
                    "client-timeout",
                    format!("`{}`: {e} (a duration, or `budget`)", self.client_timeout),
                )
            })?;
            if d.is_zero() || d > MAX_CLIENT_TIMEOUT {
                return Err(flag(
                    "client-timeout",
                    format!("{} is outside 1ms to 60s", humantime::format_duration(d)),
                ));
            }
            Patience::Fixed(d)
        };
        Ok(LoadPlan {
            progress: !self.no_progress,
            rate_given: self.rate.is_some(),
            duration_given: self.duration.is_some(),
            warm: self.warm,
            ..LoadPlan::fixed(spec, self.budget, patience)
        })
    }
}

/// Runs what `invocation` says; the reports in run order.
///
/// # Errors
///
/// When a chain or partner cannot start, or a target cannot be reached
/// for its stats.
pub async fn execute(invocation: &Invocation) -> Result<Vec<RunReport>, RunError> {
    match invocation {
        Invocation::Target {
            target,
            partner_stats,
            id_group,
            plan,
        } => {
            let label = RunLabel {
                scenario: "target".into(),
                mode: "target".into(),
                description: format!("a running edge at {target}"),
                id_group: *id_group,
            };
            let stats = match partner_stats {
                Some(url) => PartnerStats::Http(url.clone()),
                None => PartnerStats::None,
            };
            Ok(vec![run_load(plan, target.clone(), label, stats).await?])
        }
        Invocation::Sweep {
            sweep,
            settings,
            plan,
        } => Ok(run_sweep(sweep, settings, plan).await?.1),
        Invocation::Scenarios {
            scenarios,
            settings,
            modes,
            plan,
        } => {
            let partners = Partners::start(settings).await?;
            let mut reports = Vec::new();
            for scenario in scenarios {
                let scenario = scenario.get();
                if let (true, Some(why)) = (settings.via_envoy, scenario.without_envoy()) {
                    eprintln!(
                        "load-tests: {} skipped with --via-envoy: {why}",
                        scenario.name()
                    );
                    continue;
                }
                let (modes, skipped) = modes_of(scenario, modes);
                for note in skipped {
                    eprintln!("load-tests: {note}");
                }
                // The scenario's own load (a ramp's mean rate, a burst's
                // count), or the plan's when it cannot have one.
                let spec = scenario
                    .plan(&scenario.setup(settings), plan)
                    .map_or_else(|_| plan.spec.clone(), |p| p.spec);
                if scenario.request_load() {
                    eprintln!(
                        "load-tests: {} at {:.0} req/s for {}, {} mode(s)",
                        scenario.name(),
                        spec.rate(),
                        humantime::format_duration(spec.duration()),
                        modes.len()
                    );
                } else {
                    eprintln!("load-tests: {}, {} mode(s)", scenario.name(), modes.len());
                }
                let runs = run_scenario(scenario, settings, plan, &modes, &partners).await;
                match runs {
                    Ok(runs) => reports.extend(runs),
                    Err(e) => {
                        partners.shutdown().await;
                        return Err(e);
                    }
                }
            }
            partners.shutdown().await;
            Ok(reports)
        }
    }
}

/// A multi-thread runtime; when it cannot start, says so as `program` and
/// gives exit code 1.
pub(crate) fn start_runtime(program: &str) -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("{program}: cannot start the runtime: {e}");
            ExitCode::FAILURE
        })
}

/// The whole program: check `args`, run, print, write. Exit code 2 for a
/// refused command line, 1 for a failed run.
pub fn main_with(args: Args, command: &str) -> ExitCode {
    let invocation = match args.invocation() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("load-tests: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match start_runtime("load-tests") {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    if let Invocation::Sweep {
        sweep,
        settings,
        plan,
    } = &invocation
    {
        return sweep_main(&runtime, sweep, settings, plan, &args, command);
    }
    let reports = match runtime.block_on(execute(&invocation)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("load-tests: {}", service_kit::error_chain(&e));
            return ExitCode::FAILURE;
        }
    };
    print!("{}", markdown(&invocation, command, &reports));
    if let Some(path) = &args.json
        && let Err(e) = write_json(path, &invocation, command, &reports)
    {
        eprintln!("load-tests: --json {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    if let Some(path) = &args.svg
        && let Err(e) = write_svg(path, &reports)
    {
        eprintln!("load-tests: --svg {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    if let Some(path) = &args.html
        && let Err(e) = write_html(path, &invocation, command, &reports)
    {
        eprintln!("load-tests: --html: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The sweep's program: run it, print its table, write its JSON.
fn sweep_main(
    runtime: &tokio::runtime::Runtime,
    sweep: &SweepPlan,
    settings: &ChainSettings,
    plan: &LoadPlan,
    args: &Args,
    command: &str,
) -> ExitCode {
    let report = match runtime.block_on(run_sweep(sweep, settings, plan)) {
        Ok((report, _)) => report,
        Err(e) => {
            eprintln!("load-tests: {}", service_kit::error_chain(&e));
            return ExitCode::FAILURE;
        }
    };
    print!("Command: `{command}`\n\n{}", sweep_markdown(&report));
    if let Some(path) = &args.json
        && let Err(e) = write_sweep_json(path, command, settings, &report)
    {
        eprintln!("load-tests: --json {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests;
