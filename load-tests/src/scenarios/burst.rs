//! `burst-fits`, `burst-fits-unlimited`, `burst-part`,
//! `burst-part-unlimited`: a partner of its own per run, started cold,
//! 50 ms on every path, 8 workers per path or none (`-unlimited`);
//! [`BURST_REQUESTS`] (300, or `--requests`) sent at once, one connection
//! each; budgets of 10 s (`-fits`, the whole burst) or 1 s (`-part`); the
//! client waits the budget plus [`BURST_MARGIN`] at most. The whole burst
//! is the run's watched window ([`crate::window`]). With `--warm`
//! ([`LoadPlan::warm`]) the chain is warmed first ([`crate::warm`]): the
//! warm-up is reported in a row of its own, never in the burst's.

use std::net::SocketAddr;
use std::time::Duration;

use slow_partner::PartnerConfig;

use crate::budgets::BudgetDistribution;
use crate::chain::{ChainSettings, PARTNER_PATHS};
use crate::client::Patience;
use crate::generator::{LoadSpec, MAX_REQUESTS, SpecError};
use crate::report::{RunReport, row, section_cell};
use crate::run::{LoadPlan, ModeRun};
use crate::scenario::{RunFuture, Scenario, Setup, Topology};
use crate::section::SectionKind;
use crate::warm::{WARM_FOR, WARM_RATE, WarmUpReport, warm_then_load};
use crate::window::Watch;

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

/// One of the `burst-*` scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Burst {
    name: &'static str,
    about: &'static str,
    /// Every request's budget.
    pub budget: Duration,
    /// Whether the partner has the chain's workers per path (else none).
    pub limited: bool,
}

/// `burst-fits`.
pub const BURST_FITS: Burst = Burst {
    name: "burst-fits",
    about: "A cold chain; every request at once; 50 ms on every path, 8 workers per path; 10 s \
            budgets, which cover the whole burst",
    budget: BURST_FITS_BUDGET,
    limited: true,
};

/// `burst-fits-unlimited`.
pub const BURST_FITS_UNLIMITED: Burst = Burst {
    name: "burst-fits-unlimited",
    about: "As `burst-fits`, with no worker limit at the partner",
    limited: false,
    ..BURST_FITS
};

/// `burst-part`.
pub const BURST_PART: Burst = Burst {
    name: "burst-part",
    about: "As `burst-fits`, with 1 s budgets, which cover a part of it",
    budget: BURST_PART_BUDGET,
    limited: true,
};

/// `burst-part-unlimited`.
pub const BURST_PART_UNLIMITED: Burst = Burst {
    name: "burst-part-unlimited",
    about: "As `burst-part`, with no worker limit at the partner",
    limited: false,
    ..BURST_PART
};

/// The config of the partner of one burst run: on `127.0.0.1:0`, with
/// `workers` on each of [`PARTNER_PATHS`], or none.
///
/// ```
/// use load_tests::scenarios::burst::partner_config;
///
/// assert_eq!(partner_config(Some(8)).path_workers["/pricing"], 8);
/// let c = partner_config(None);
/// assert!(c.path_workers.is_empty() && c.workers.is_none());
/// ```
pub fn partner_config(workers: Option<usize>) -> PartnerConfig {
    let base = PartnerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)))
        .with_shutdown_grace(Duration::from_secs(1));
    match workers {
        Some(n) => PARTNER_PATHS
            .iter()
            .fold(base, |c, path| c.with_path_workers(*path, n)),
        None => base,
    }
}

impl Scenario for Burst {
    fn name(&self) -> &'static str {
        self.name
    }

    fn about(&self) -> &'static str {
        self.about
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        let workers = self.limited.then_some(settings.partner_workers);
        let delay = format!("delay={}ms", BURST_DELAY.as_millis());
        let description = format!(
            "fresh chain and partner (cold, or warmed first with --warm); every request at once, one connection each; {} ms \
             on every path, {}; {} s budgets, which cover {} the burst",
            BURST_DELAY.as_millis(),
            match workers {
                Some(n) => format!(
                    "{n} workers per path ({:.0} req/s)",
                    n as f64 / BURST_DELAY.as_secs_f64()
                ),
                None => "no worker limit".to_owned(),
            },
            self.budget.as_secs(),
            if self.budget == BURST_FITS_BUDGET {
                "all of"
            } else {
                "a part of"
            }
        );
        Setup {
            inventory: delay.clone(),
            pricing: delay.clone(),
            recommendations: delay,
            partners: Topology::Fresh(partner_config(workers)),
            ..Setup::new(self.name, description, settings)
        }
    }

    /// Every request at once: [`BURST_REQUESTS`] (or `--requests`), the
    /// burst's budget, one connection each, the whole burst watched
    /// ([`burst_plan`]).
    fn plan(&self, setup: &Setup, base: &LoadPlan) -> Result<LoadPlan, SpecError> {
        // `--requests` when given (the spec's count is below the cap).
        let n = if base.spec.max_requests() < MAX_REQUESTS {
            base.spec.max_requests()
        } else {
            BURST_REQUESTS
        };
        burst_plan(setup, base, n, BudgetDistribution::Fixed(self.budget))
    }

    /// The burst, warmed first when the plan says ([`warm_then_load`]).
    fn run<'a>(&'a self, run: ModeRun<'a>) -> RunFuture<'a> {
        Box::pin(warm_then_load(run))
    }

    fn rows(&self, runs: &[RunReport]) -> Vec<Vec<String>> {
        warm_up_rows(runs)
    }

    fn sections(&self) -> &'static [SectionKind] {
        const SECTIONS: &[SectionKind] = &[SectionKind::of::<WarmUpReport>()];
        SECTIONS
    }
}

/// The load of a burst of `n` requests of `budgets` on `setup`: every
/// request at once, one connection each, the client waiting the largest
/// budget plus [`BURST_MARGIN`] at most, the whole burst watched; `base`'s
/// in-flight cap and warm-up ([`LoadPlan::warm`]).
///
/// # Errors
///
/// `n` of zero or over the generator's caps.
///
/// ```
/// use std::time::Duration;
/// use load_tests::budgets::BudgetDistribution;
/// use load_tests::chain::ChainSettings;
/// use load_tests::client::Patience;
/// use load_tests::generator::LoadSpec;
/// use load_tests::run::LoadPlan;
/// use load_tests::scenario::Scenario as _;
/// use load_tests::scenarios::burst::{BURST_FITS, burst_plan};
///
/// let base = LoadPlan::fixed(LoadSpec::new(10.0, Duration::from_secs(1)).unwrap(),
///     Duration::from_secs(2), Patience::Budget);
/// let setup = BURST_FITS.setup(&ChainSettings::default());
/// let plan = burst_plan(&setup, &base, 100, BudgetDistribution::Fixed(Duration::from_secs(2))).unwrap();
/// assert_eq!(plan.spec.expected_requests(), 100);
/// assert_eq!(plan.patience, Patience::Fixed(Duration::from_secs(7)));
/// assert!(burst_plan(&setup, &base, 0, plan.budgets).is_err());
/// ```
pub fn burst_plan(
    setup: &Setup,
    base: &LoadPlan,
    n: u64,
    budgets: BudgetDistribution,
) -> Result<LoadPlan, SpecError> {
    let mut plan = setup.plan(base)?;
    plan.spec = LoadSpec::burst(n)?.with_max_in_flight(base.spec.max_in_flight())?;
    plan.budgets = budgets;
    plan.patience = Patience::Fixed(budgets.max().saturating_add(BURST_MARGIN));
    plan.fresh_connections = true;
    plan.watch = Some(Watch {
        what: "the burst".into(),
        from: Duration::ZERO,
        to: plan.spec.duration(),
        mark: None,
    });
    Ok(plan)
}

/// The warm-up's row, when a run was warmed ([`WarmUpReport`]): kept
/// apart from the burst's rows.
fn warm_up_rows(runs: &[RunReport]) -> Vec<Vec<String>> {
    if !runs.iter().any(|r| r.section::<WarmUpReport>().is_some()) {
        return Vec::new();
    }
    let name = format!(
        "warm-up before the burst ({WARM_RATE:.0} req/s for {} s, not counted above): \
         2xx within budget / refused, of requests",
        WARM_FOR.as_secs()
    );
    vec![row(runs, &name, &|r| {
        section_cell(r, |w: &WarmUpReport| {
            format!("{} / {} of {}", w.good, w.refused, w.requests)
        })
    })]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_send_every_request_at_once_with_their_budget() {
        let settings = ChainSettings::default();
        let base = LoadPlan::fixed(
            LoadSpec::new(128.0, Duration::from_secs(20)).unwrap(),
            Duration::from_secs(2),
            Patience::Fixed(Duration::from_secs(35)),
        );
        for (burst, budget, workers) in [
            (BURST_FITS, 10, Some(8)),
            (BURST_FITS_UNLIMITED, 10, None),
            (BURST_PART, 1, Some(8)),
            (BURST_PART_UNLIMITED, 1, None),
        ] {
            let s = burst.setup(&settings);
            assert_eq!(burst.budget, Duration::from_secs(budget), "{burst:?}");
            assert_eq!(
                s.partners,
                Topology::Fresh(partner_config(workers)),
                "{burst:?}"
            );
            for q in [&s.inventory, &s.pricing, &s.recommendations] {
                assert_eq!(q, "delay=50ms");
            }
            let plan = burst.plan(&s, &base).unwrap();
            assert_eq!(plan.spec.expected_requests(), BURST_REQUESTS);
            assert!(plan.spec.schedule().all(|o| o.is_zero()));
            assert_eq!(plan.budgets.max(), Duration::from_secs(budget));
            assert_eq!(
                plan.patience,
                Patience::Fixed(Duration::from_secs(budget + 5))
            );
            assert!(plan.fresh_connections && plan.watch.is_some());
        }
        // --requests sets the burst's size.
        let asked = LoadPlan {
            spec: base.spec.clone().with_max_requests(40).unwrap(),
            ..base.clone()
        };
        let s = BURST_PART.setup(&settings);
        assert_eq!(
            BURST_PART.plan(&s, &asked).unwrap().spec.expected_requests(),
            40
        );
    }
}
