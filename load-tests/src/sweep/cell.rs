//! One cell of the burst sweep: how the chain starts (cold or warm), how
//! many requests come at once, their budgets and the partner's shape; a
//! [`Cell`] is a burst scenario of its own, run in every mode on a fresh
//! chain and partner ([`Topology::Fresh`]).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::budgets::{BudgetDistribution, BudgetRange};
use crate::chain::ChainSettings;
use crate::generator::SpecError;
use crate::run::{LoadPlan, ModeRun};
use crate::scenario::{RunFuture, Scenario, Setup, Topology};
use crate::scenarios::burst::{BURST_DELAY, BURST_MARGIN, burst_plan, partner_config};
use crate::section::SectionKind;
use crate::warm::{WarmUpReport, warm_then_load};

/// The sweep's name on the command line and in its report.
pub const SWEEP_NAME: &str = "burst-sweep";

/// The short budget of a mixed cell (half the burst).
pub const MIXED_SHORT: Duration = Duration::from_millis(400);

/// The long budget of a mixed cell (the other half).
pub const MIXED_LONG: Duration = Duration::from_secs(4);

/// The workers per path of the `50ms-8w` partner.
pub const SWEEP_WORKERS: usize = 8;

/// How the chain meets the burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Start {
    /// Nothing before the burst.
    Cold,
    /// Warmed first ([`crate::warm`]: 20 req/s for 3 s, 200 ms of quiet).
    Warm,
}

/// The partner's shape on every path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum PartnerShape {
    /// Answers at once, no worker limit.
    #[value(name = "instant")]
    #[serde(rename = "instant")]
    Instant,
    /// 50 ms on every path, no worker limit.
    #[value(name = "50ms")]
    #[serde(rename = "50ms")]
    Delay50,
    /// 50 ms on every path, 8 workers per path (160 req/s).
    #[value(name = "50ms-8w")]
    #[serde(rename = "50ms-8w")]
    Delay50Workers8,
}

impl PartnerShape {
    /// Its name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            PartnerShape::Instant => "instant",
            PartnerShape::Delay50 => "50ms",
            PartnerShape::Delay50Workers8 => "50ms-8w",
        }
    }

    /// Each call's delay.
    pub fn delay(self) -> Duration {
        match self {
            PartnerShape::Instant => Duration::ZERO,
            PartnerShape::Delay50 | PartnerShape::Delay50Workers8 => BURST_DELAY,
        }
    }

    /// Workers per path; `None`: no limit.
    pub fn workers(self) -> Option<usize> {
        (self == PartnerShape::Delay50Workers8).then_some(SWEEP_WORKERS)
    }
}

/// The budgets of a cell's requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SweepBudget {
    /// Every request this budget (ms in JSON).
    Fixed(#[serde(with = "crate::report::millis")] Duration),
    /// Half the requests [`MIXED_SHORT`], half [`MIXED_LONG`], interleaved
    /// by a seeded hash of the request index (as the `mixed-budgets`
    /// scenario mixes its callers).
    Mixed,
}

impl SweepBudget {
    /// The requests' budgets.
    ///
    /// ```
    /// use std::time::Duration;
    /// use load_tests::budgets::BudgetClass;
    /// use load_tests::sweep::SweepBudget;
    ///
    /// let mixed = SweepBudget::Mixed.distribution();
    /// let short = (0..1000).filter(|i| mixed.class(*i) == Some(BudgetClass::Short)).count();
    /// assert!((400..600).contains(&short), "{short}");
    /// assert!((0..50).all(|i| [400, 4000].contains(&(mixed.budget(i).as_millis() as u64))));
    /// ```
    pub fn distribution(self) -> BudgetDistribution {
        let exactly = |d| BudgetRange { min: d, max: d };
        match self {
            SweepBudget::Fixed(d) => BudgetDistribution::Fixed(d),
            SweepBudget::Mixed => BudgetDistribution::Mixed {
                short: exactly(MIXED_SHORT),
                long: exactly(MIXED_LONG),
                seed: 1,
            },
        }
    }
}

impl fmt::Display for SweepBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SweepBudget::Fixed(d) => write!(f, "{}", humantime::format_duration(*d)),
            SweepBudget::Mixed => f.write_str("mixed"),
        }
    }
}

/// One cell of the sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    /// Cold or warm.
    pub start: Start,
    /// Requests at once.
    pub size: u64,
    /// Their budgets.
    pub budget: SweepBudget,
    /// The partner's shape.
    pub partner: PartnerShape,
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let start = match self.start {
            Start::Cold => "cold",
            Start::Warm => "warm",
        };
        write!(
            f,
            "{start} / {} at once / {} / {}",
            self.size,
            self.budget,
            self.partner.as_str()
        )
    }
}

impl Cell {
    /// How long the client waits for an answer at most: the longest
    /// budget plus [`BURST_MARGIN`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use load_tests::sweep::{Cell, PartnerShape, Start, SweepBudget};
    ///
    /// let cell = Cell { start: Start::Warm, size: 600, budget: SweepBudget::Mixed,
    ///     partner: PartnerShape::Delay50Workers8 };
    /// assert_eq!(cell.patience(), Duration::from_secs(9));
    /// assert_eq!(cell.to_string(), "warm / 600 at once / mixed / 50ms-8w");
    /// ```
    pub fn patience(&self) -> Duration {
        self.budget
            .distribution()
            .max()
            .saturating_add(BURST_MARGIN)
    }
}

impl Scenario for Cell {
    fn name(&self) -> &'static str {
        SWEEP_NAME
    }

    fn about(&self) -> &'static str {
        "One cell of the burst sweep"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        let delay = format!("delay={}ms", self.partner.delay().as_millis());
        Setup {
            inventory: delay.clone(),
            pricing: delay.clone(),
            recommendations: delay,
            partners: Topology::Fresh(partner_config(self.partner.workers())),
            ..Setup::new(SWEEP_NAME, self.to_string(), settings)
        }
    }

    fn plan(&self, setup: &Setup, base: &LoadPlan) -> Result<LoadPlan, SpecError> {
        let mut plan = burst_plan(setup, base, self.size, self.budget.distribution())?;
        plan.warm = self.start == Start::Warm;
        Ok(plan)
    }

    fn run<'a>(&'a self, run: ModeRun<'a>) -> RunFuture<'a> {
        Box::pin(warm_then_load(run))
    }

    fn sections(&self) -> &'static [SectionKind] {
        const SECTIONS: &[SectionKind] = &[SectionKind::of::<WarmUpReport>()];
        SECTIONS
    }
}
