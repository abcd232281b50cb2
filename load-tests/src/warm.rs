//! Warming a burst's chain (`--warm`, and the warm cells of
//! `burst-sweep`): before the burst, [`WARM_RATE`] requests a second for
//! [`WARM_FOR`] through the same fresh chain, then [`WARM_SETTLE`] of
//! quiet, then the burst.
//!
//! A service in production is warm when a burst comes: its connection
//! pools are open, its floors and limits have seen answers. Each warm-up
//! request has the burst's budget, capped at [`WARM_MAX_BUDGET`]: the
//! traffic a user expects before a burst is the same callers at a calm
//! rate, and a calm caller's budget above 2 s changes nothing for a
//! partner that answers in 50 ms, while the cap keeps the warm-up's
//! bounded wait short. Warm-up requests go on a connection each, as the
//! burst's do, so no keep-alive connection of the warm-up is left open
//! at edge when the burst comes.
//!
//! Only the burst counts in the scenario's figures: the warm-up is a load
//! of its own ([`run_load`]; the partner's counters are reset before the
//! burst), and its answers are reported apart, as the run's
//! [`WarmUpReport`] section.
//!
//! ```
//! use std::time::Duration;
//! use load_tests::budgets::BudgetDistribution;
//! use load_tests::warm::warm_budgets;
//!
//! let b = warm_budgets(BudgetDistribution::Fixed(Duration::from_secs(10)));
//! assert_eq!(b, BudgetDistribution::Fixed(Duration::from_secs(2)));
//! let b = warm_budgets(BudgetDistribution::Fixed(Duration::from_millis(500)));
//! assert_eq!(b, BudgetDistribution::Fixed(Duration::from_millis(500)));
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::budgets::{BudgetDistribution, BudgetRange};
use crate::client::Patience;
use crate::generator::{LoadSpec, SpecError};
use crate::report::RunReport;
use crate::run::{LoadPlan, ModeRun, PartnerStats, RunError, RunLabel, run_load};
use crate::scenarios::burst::BURST_MARGIN;
use crate::section::Section;
use crate::target::LoopbackUrl;

/// The warm-up's rate, requests per second.
pub const WARM_RATE: f64 = 20.0;

/// How long the warm-up sends.
pub const WARM_FOR: Duration = Duration::from_secs(3);

/// The quiet between the warm-up's last answer and the burst.
pub const WARM_SETTLE: Duration = Duration::from_millis(200);

/// The largest budget of a warm-up request.
pub const WARM_MAX_BUDGET: Duration = Duration::from_secs(2);

/// What came of a run's warm-up: reported apart from the burst.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WarmUpReport {
    /// Requests sent (due) in the warm-up.
    pub requests: u64,
    /// `2xx` within their budget.
    pub good: u64,
    /// Answered with an error status.
    pub refused: u64,
    /// No answer in time, or a connection error, or not sent.
    pub other_failures: u64,
}

impl Section for WarmUpReport {
    const KEY: &'static str = "warm_up";
}

impl WarmUpReport {
    /// The warm-up's figures from its run's report.
    pub fn of(report: &RunReport) -> Self {
        let o = &report.outcomes;
        Self {
            requests: report.scheduled,
            good: report.good,
            refused: o.too_many_requests + o.unavailable + o.gateway_timeout + o.other,
            other_failures: o.client_timeout + o.transport + o.not_sent,
        }
    }
}

/// `budgets`, each capped at [`WARM_MAX_BUDGET`] (a mix stays a mix of
/// the same callers).
pub fn warm_budgets(budgets: BudgetDistribution) -> BudgetDistribution {
    let cap = |r: BudgetRange| BudgetRange {
        min: r.min.min(WARM_MAX_BUDGET),
        max: r.max.min(WARM_MAX_BUDGET),
    };
    match budgets {
        BudgetDistribution::Fixed(d) => BudgetDistribution::Fixed(d.min(WARM_MAX_BUDGET)),
        BudgetDistribution::Mixed { short, long, seed } => BudgetDistribution::Mixed {
            short: cap(short),
            long: cap(long),
            seed,
        },
        BudgetDistribution::Uniform { range, seed } => BudgetDistribution::Uniform {
            range: cap(range),
            seed,
        },
    }
}

/// The warm-up's load before a burst of `burst`'s budgets: [`WARM_RATE`]
/// for [`WARM_FOR`], [`warm_budgets`], a connection each, the client
/// waiting the largest budget plus [`BURST_MARGIN`] at most.
///
/// # Errors
///
/// None in practice (the rate and duration are within the generator's
/// caps); typed for the generator's checks.
///
/// ```
/// use std::time::Duration;
/// use load_tests::client::Patience;
/// use load_tests::generator::LoadSpec;
/// use load_tests::run::LoadPlan;
/// use load_tests::warm::warm_plan;
///
/// let burst = LoadPlan::fixed(LoadSpec::burst(600).unwrap(), Duration::from_secs(10),
///     Patience::Fixed(Duration::from_secs(15)));
/// let warm = warm_plan(&burst).unwrap();
/// assert_eq!(warm.spec.expected_requests(), 60);
/// assert_eq!(warm.patience, Patience::Fixed(Duration::from_secs(7)));
/// assert!(warm.fresh_connections && warm.watch.is_none());
/// ```
pub fn warm_plan(burst: &LoadPlan) -> Result<LoadPlan, SpecError> {
    let budgets = warm_budgets(burst.budgets);
    let spec = LoadSpec::new(WARM_RATE, WARM_FOR)?;
    let patience = Patience::Fixed(budgets.max().saturating_add(BURST_MARGIN));
    Ok(LoadPlan {
        budgets,
        fresh_connections: true,
        ..LoadPlan::fixed(spec, WARM_MAX_BUDGET, patience)
    })
}

/// Warms `run`'s chain ([`warm_plan`] through the chain's edge, the
/// partner's counters read and then reset by the burst's own run) and
/// waits [`WARM_SETTLE`].
///
/// # Errors
///
/// As [`run_load`].
pub async fn warm_up(run: &ModeRun<'_>) -> Result<WarmUpReport, RunError> {
    let plan = warm_plan(run.plan)?;
    let target = LoopbackUrl::parse(&run.chain.url)?;
    let label = RunLabel {
        scenario: format!("{} warm-up", run.setup.name),
        mode: run.mode.as_str().to_owned(),
        description: "the warm-up before the burst".into(),
        id_group: 1,
    };
    let report = run_load(
        &plan,
        target,
        label,
        PartnerStats::InProcess(&run.partners.main),
    )
    .await?;
    tokio::time::sleep(WARM_SETTLE).await;
    Ok(WarmUpReport::of(&report))
}

/// The burst of `run`, after a warm-up when its plan says
/// ([`LoadPlan::warm`]); the warm-up's figures in the report's
/// [`WarmUpReport`] section.
///
/// # Errors
///
/// As [`run_load`].
pub async fn warm_then_load(run: ModeRun<'_>) -> Result<RunReport, RunError> {
    let warm = if run.plan.warm {
        Some(warm_up(&run).await?)
    } else {
        None
    };
    let mut report = run.load().await?;
    if let Some(warm) = warm {
        report.set_section(warm);
    }
    Ok(report)
}
