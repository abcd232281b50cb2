//! What a scenario is: the [`Scenario`] trait, the [`Setup`] it asks of
//! the chain, and the load helpers scenarios share; the scenarios
//! themselves, one file each, are in [`crate::scenarios`].
//!
//! A scenario says, through [`Scenario`]:
//!
//! - its name on the command line and one line of help
//!   ([`Scenario::name`], [`Scenario::about`]);
//! - what it asks of the chain ([`Scenario::setup`], a [`Setup`]): the
//!   partner's shape per dependency (its query strings), the requests'
//!   budgets, criticality and ids, its own rate or phases of load, and its
//!   topology (a [`Middle`](crate::middle::Middle) hop, partners of its
//!   own per run: [`Topology`]);
//! - its load ([`Scenario::plan`]: by default the [`Setup`]'s, on top of
//!   the command line's [`LoadPlan`]), and the modes it runs in
//!   ([`Scenario::modes`]);
//! - what happens during a run and what it measures besides the common
//!   report ([`Scenario::run`], given a [`ModeRun`]: a fault at set
//!   times, a measurement kept in the report as a typed
//!   [`Section`](crate::section::Section));
//! - its part of the report ([`Scenario::rows`], rows of the side-by-side
//!   table, and [`Scenario::after_table`], markdown after it), which the
//!   markdown, JSON and HTML outputs take from the registry.
//!
//! # Adding a scenario
//!
//! 1. Write `src/scenarios/<name>.rs`: a (usually unit) struct
//!    implementing [`Scenario`]. Only [`Scenario::name`],
//!    [`Scenario::about`] and [`Scenario::setup`] are required; start
//!    from [`Setup::new`] (the healthy partner) and change what the
//!    scenario changes. Something to do during the run (a fault) and a
//!    measurement of its own go in [`Scenario::run`]; the measurement's
//!    type implements [`Section`](crate::section::Section) and is put in
//!    the report with [`RunReport::set_section`](crate::report::RunReport::set_section);
//!    its rows in [`Scenario::rows`].
//! 2. Add one line to the `registry!` list in
//!    [`crate::scenarios`]: `name: [name::Name],`.
//!
//! That is all: `--scenario`, its help, the default run of every scenario,
//! the markdown, the JSON and the HTML page take it from the registry.
//!
//! ```
//! use load_tests::chain::ChainSettings;
//! use load_tests::scenario::{Scenario, Setup};
//!
//! /// Pricing twice as slow.
//! struct PricingSlow;
//!
//! impl Scenario for PricingSlow {
//!     fn name(&self) -> &'static str { "pricing-slow" }
//!     fn about(&self) -> &'static str { "Pricing twice as slow" }
//!     fn setup(&self, settings: &ChainSettings) -> Setup {
//!         Setup {
//!             pricing: "delay=90ms&jitter=20ms".into(),
//!             ..Setup::new(self.name(), "pricing 2x slower", settings)
//!         }
//!     }
//! }
//! assert_eq!(PricingSlow.setup(&ChainSettings::default()).inventory, "delay=15ms&jitter=10ms");
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use slow_partner::PartnerConfig;

use crate::budgets::BudgetDistribution;
use crate::chain::{ChainMode, ChainSettings, INVENTORY, PRICING, RECOMMENDATIONS};
use crate::criticality::CriticalitySplit;
use crate::generator::{LoadSpec, RateStep, SpecError};
use crate::report::RunReport;
use crate::run::{LoadPlan, ModeRun, RunError};
use crate::section::SectionKind;

/// What [`Scenario::run`] returns: one run's report, boxed so that the
/// trait stays object safe.
pub type RunFuture<'a> = Pin<Box<dyn Future<Output = Result<RunReport, RunError>> + Send + 'a>>;

/// One scenario: its load, its faults, its measurements and its part of
/// the report (see the module docs, and [`crate::scenarios`] for every
/// one).
pub trait Scenario: Sync {
    /// Its name on the command line (`--scenario`) and in the report:
    /// kebab-case, unique in the registry.
    fn name(&self) -> &'static str;

    /// One line on what it does, for `--help` (no closing period, as
    /// clap writes the others).
    fn about(&self) -> &'static str;

    /// What it asks of the chain under `settings`: partner shapes,
    /// budgets, its own load, topology.
    fn setup(&self, settings: &ChainSettings) -> Setup;

    /// Its load: `base` (the command line's) with the setup's own
    /// ([`Setup::plan`]). A scenario whose load is not a rate (a burst),
    /// or that watches a window of the run, changes it here.
    ///
    /// # Errors
    ///
    /// Its own rate or steps over the generator's caps.
    fn plan(&self, setup: &Setup, base: &LoadPlan) -> Result<LoadPlan, SpecError> {
        setup.plan(base)
    }

    /// The modes it runs of `asked`, in order: `asked`, unless it adds
    /// one of its own ([`ChainMode::insert_after`]).
    fn modes(&self, asked: &[ChainMode]) -> Vec<ChainMode> {
        asked.to_vec()
    }

    /// One run in one mode, on a chain already started: by default the
    /// load alone ([`ModeRun::load`]). A scenario with a fault runs it
    /// beside the load ([`ModeRun::load_beside`]) and may add its
    /// measurements to the report
    /// ([`RunReport::set_section`](crate::report::RunReport::set_section)).
    fn run<'a>(&'a self, run: ModeRun<'a>) -> RunFuture<'a> {
        Box::pin(run.load())
    }

    /// Its rows in the side-by-side table of its runs (a cell per run;
    /// [`crate::report::row`] makes one), after the rows every scenario
    /// has and the watched window's.
    fn rows(&self, runs: &[RunReport]) -> Vec<Vec<String>> {
        let _ = runs;
        Vec::new()
    }

    /// What the per-step table of a load with steps is called.
    fn steps_title(&self) -> &'static str {
        "Per step of the ramp"
    }

    /// Whether the report has a row per second of the run (after the
    /// per-step table).
    fn per_second(&self) -> bool {
        false
    }

    /// Markdown after its tables (before the budget tables).
    fn after_table(&self, runs: &[RunReport]) -> String {
        let _ = runs;
        String::new()
    }

    /// The types of the sections it puts in its reports, so that a
    /// report read back from JSON has them again.
    fn sections(&self) -> &'static [SectionKind] {
        &[]
    }

    /// Whether its runs send the request load through the chain, so that
    /// the report has the rows of that load (outcomes, goodput, latency,
    /// the partner's calls) and the budget tables. A scenario that drives
    /// something else (streams, a batch uploader: [`ModeRun::report_of`])
    /// says `false`, and its report is its own rows.
    fn request_load(&self) -> bool {
        true
    }

    /// Why Envoy cannot be put in its chain, when it cannot: its runs skip
    /// the `envoy` mode, saying this ([`modes_of`]), and `--via-envoy`
    /// skips it (refuses it when named).
    fn without_envoy(&self) -> Option<&'static str> {
        None
    }
}

/// The modes `scenario` runs of `asked` ([`Scenario::modes`]), less the
/// `envoy` mode where it cannot have Envoy ([`Scenario::without_envoy`]),
/// and a note for each mode asked that it does not run.
///
/// ```
/// use load_tests::chain::ChainMode;
/// use load_tests::scenario::modes_of;
/// use load_tests::scenarios::find;
///
/// let (modes, notes) = modes_of(find("db-slow").unwrap().get(), &ChainMode::ALL);
/// assert!(!modes.contains(&ChainMode::Envoy));
/// assert!(notes[0].starts_with("db-slow skips the envoy mode: "), "{notes:?}");
/// let (modes, notes) = modes_of(find("slow").unwrap().get(), &ChainMode::ALL);
/// assert_eq!((modes, notes.len()), (ChainMode::ALL.to_vec(), 0));
/// ```
pub fn modes_of(scenario: &dyn Scenario, asked: &[ChainMode]) -> (Vec<ChainMode>, Vec<String>) {
    let mut modes = scenario.modes(asked);
    let mut notes = Vec::new();
    if let Some(why) = scenario.without_envoy() {
        modes.retain(|m| *m != ChainMode::Envoy);
        if asked.contains(&ChainMode::Envoy) {
            notes.push(format!("{} skips the envoy mode: {why}", scenario.name()));
        }
    }
    for mode in asked
        .iter()
        .filter(|m| !modes.contains(m) && **m != ChainMode::Envoy)
    {
        notes.push(format!(
            "{} does not run the {} mode",
            scenario.name(),
            mode.as_str()
        ));
    }
    (modes, notes)
}

/// A scenario of the registry, as the command line and the reports name
/// it: compared by name.
#[derive(Clone, Copy)]
pub struct ScenarioRef(pub &'static dyn Scenario);

impl ScenarioRef {
    /// The scenario.
    pub fn get(self) -> &'static dyn Scenario {
        self.0
    }

    /// Its name ([`Scenario::name`]).
    pub fn name(self) -> &'static str {
        self.0.name()
    }
}

impl fmt::Debug for ScenarioRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq for ScenarioRef {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for ScenarioRef {}

impl clap::ValueEnum for ScenarioRef {
    fn value_variants<'a>() -> &'a [Self] {
        crate::scenarios::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()).help(self.0.about()))
    }
}

/// Where a scenario's partners come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Topology {
    /// The partners every scenario shares (started once per invocation).
    Shared,
    /// A partner of its own, started cold for each run, as configured
    /// (the bursts).
    Fresh(PartnerConfig),
    /// This many replicas of the main partner, started for each run, each
    /// serving every dependency ([`crate::chain::Partners::start_replicas`]).
    Replicas(usize),
}

impl Topology {
    /// Whether every dependency is served by several replicas.
    pub fn is_replicas(&self) -> bool {
        matches!(self, Topology::Replicas(_))
    }
}

/// What one scenario asks of the chain and of the load, under the chain's
/// settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    /// Its name ([`Scenario::name`]).
    pub name: &'static str,
    /// One line on what it does, in the report.
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
    /// Its own offered load, requests per second, unless the plan's rate
    /// was asked for; `None`: the plan's.
    pub rate: Option<f64>,
    /// Its load in phases: (multiple of the capacity, or of the plan's
    /// rate when it was asked for; length when the plan's duration was not
    /// asked for), see [`shaped_steps`].
    pub phases: Option<Vec<(f64, Duration)>>,
    /// The capacity its phases are multiples of (the chain's healthy
    /// capacity, [`ChainSettings::capacity`], unless it has more
    /// partners).
    pub capacity: f64,
    /// A [`Middle`](crate::middle::Middle) hop between checkout and the
    /// partner.
    pub middle: bool,
    /// Where its partners come from.
    pub partners: Topology,
    /// Checkout's database step on, against a throwaway PostgreSQL
    /// cluster started for each run (`service_kit::pg_cluster`; the
    /// `db-slow` scenario).
    pub database: bool,
}

impl Setup {
    /// The healthy chain: every dependency answers quickly (inventory
    /// 15 ms + up to 10 ms jitter, pricing 45 + 10 ms, recommendations
    /// 25 + 10 ms), one id per request, the plan's load, shared partners.
    ///
    /// ```
    /// use load_tests::chain::ChainSettings;
    /// use load_tests::scenario::Setup;
    ///
    /// let s = Setup::new("healthy", "every dependency answers quickly", &ChainSettings::default());
    /// assert_eq!(s.pricing, "delay=45ms&jitter=10ms");
    /// assert_eq!((s.id_group, s.capacity), (1, 160.0));
    /// ```
    pub fn new(
        name: &'static str,
        description: impl Into<String>,
        settings: &ChainSettings,
    ) -> Self {
        Self {
            name,
            description: description.into(),
            inventory: INVENTORY.query(1),
            pricing: PRICING.query(1),
            recommendations: RECOMMENDATIONS.query(1),
            blackholed_inventory: false,
            id_group: 1,
            budgets: None,
            criticality: None,
            rate: None,
            phases: None,
            capacity: settings.capacity(),
            middle: false,
            partners: Topology::Shared,
            database: false,
        }
    }

    /// The same, with the partner `factor` times slower on every path.
    pub fn slower(self, factor: u64) -> Self {
        Self {
            inventory: INVENTORY.query(factor),
            pricing: PRICING.query(factor),
            recommendations: RECOMMENDATIONS.query(factor),
            ..self
        }
    }

    /// The load of this setup: `base` with the setup's own budgets,
    /// criticality, phases and, unless `base` says its rate was asked for,
    /// rate.
    ///
    /// ```
    /// use std::time::Duration;
    /// use load_tests::budgets::BudgetDistribution;
    /// use load_tests::chain::ChainSettings;
    /// use load_tests::client::Patience;
    /// use load_tests::generator::LoadSpec;
    /// use load_tests::run::LoadPlan;
    /// use load_tests::scenario::Scenario as _;
    /// use load_tests::scenarios::{criticality::Criticality, mixed_budgets::MixedBudgets};
    ///
    /// let base = LoadPlan::fixed(LoadSpec::new(50.0, Duration::from_secs(2)).unwrap(),
    ///     Duration::from_secs(2), Patience::Budget);
    /// let s = MixedBudgets.setup(&ChainSettings::default());
    /// assert_eq!(s.plan(&base).unwrap().budgets, BudgetDistribution::mixed_default());
    /// let s = Criticality.setup(&ChainSettings::default());
    /// assert_eq!(s.plan(&base).unwrap().spec.rate(), 320.0);
    /// ```
    ///
    /// # Errors
    ///
    /// The setup's own rate or steps over the generator's cap.
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
        if let Some(shape) = &self.phases {
            plan.spec = plan
                .spec
                .with_steps(shaped_steps(shape, self.capacity, base)?)?;
        }
        Ok(plan)
    }
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
/// use load_tests::scenario::shaped_steps;
/// use load_tests::scenarios::spike::SPIKE_PHASES;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios::{ALL, find};

    #[test]
    fn every_scenario_has_a_unique_name_a_line_of_help_and_valid_partner_queries() {
        let s = ChainSettings::default();
        let mut names = Vec::new();
        for scenario in ALL {
            let name = scenario.name();
            assert!(!names.contains(&name), "{name} twice");
            names.push(name);
            assert!(!scenario.get().about().is_empty(), "{name}");
            assert_eq!(find(name), Some(*scenario));
            let setup = scenario.get().setup(&s);
            assert_eq!(setup.name, name);
            for query in [&setup.inventory, &setup.pricing, &setup.recommendations] {
                assert!(slow_partner::Knobs::from_query(query).is_ok(), "{query}");
            }
        }
        assert_eq!(names.len(), 24);
        assert_eq!(find("no-such-scenario"), None);
    }
}
