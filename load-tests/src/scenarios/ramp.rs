//! `ramp`: healthy; offered load 0.5x, 1x, 2x, 4x, 1x, 0.5x of the
//! capacity ([`RAMP_FACTORS`]), 10 s per step; `--duration` is split
//! evenly over the six steps, and a given `--rate` stands for the capacity
//! ([`ramp_steps`]); reported per step and per second.

use std::time::Duration;

use crate::chain::ChainSettings;
use crate::generator::{RateStep, SpecError};
use crate::run::LoadPlan;
use crate::scenario::{Scenario, Setup, shaped_steps};

/// The `ramp` scenario's steps, as multiples of the healthy capacity.
pub const RAMP_FACTORS: [f64; 6] = [0.5, 1.0, 2.0, 4.0, 1.0, 0.5];

/// How long each step of the `ramp` scenario lasts when `--duration` is
/// not given.
pub const RAMP_STEP: Duration = Duration::from_secs(10);

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
/// use load_tests::scenarios::ramp::{RAMP_FACTORS, ramp_steps};
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

/// The `ramp` scenario.
#[derive(Clone, Copy, Debug)]
pub struct Ramp;

impl Scenario for Ramp {
    fn name(&self) -> &'static str {
        "ramp"
    }

    fn about(&self) -> &'static str {
        "The healthy partner under 0.5x, 1x, 2x, 4x, 1x, 0.5x of the capacity, one step after the other"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        let description = format!(
            "healthy partner; offered load {} of capacity ({:.0} req/s)",
            RAMP_FACTORS
                .iter()
                .map(|f| format!("{f}x"))
                .collect::<Vec<_>>()
                .join(", "),
            settings.capacity()
        );
        Setup {
            phases: Some(RAMP_FACTORS.iter().map(|&f| (f, RAMP_STEP)).collect()),
            ..Setup::new(self.name(), description, settings)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Patience;
    use crate::generator::LoadSpec;
    use crate::scenarios::criticality::Criticality;
    use crate::scenarios::healthy::Healthy;

    fn base(rate: f64, secs: u64) -> LoadPlan {
        LoadPlan::fixed(
            LoadSpec::new(rate, Duration::from_secs(secs)).unwrap(),
            Duration::from_secs(2),
            Patience::Budget,
        )
    }

    #[test]
    fn the_ramp_schedule_follows_the_capacity_or_the_asked_rate_and_duration() {
        let settings = ChainSettings::default();
        let ramp = Ramp.setup(&settings);
        let base = base(128.0, 20);
        let plan = Ramp.plan(&ramp, &base).unwrap();
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
            ..self::base(10.0, 3)
        };
        let plan = Ramp.plan(&ramp, &asked).unwrap();
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
        let crit = Criticality.setup(&settings);
        assert_eq!(crit.plan(&base).unwrap().spec.rate(), 320.0);
        assert_eq!(crit.plan(&asked).unwrap().spec.rate(), 10.0);
        assert_eq!(crit.plan(&base).unwrap().criticality.unwrap().percent(), 30);
        let healthy = Healthy.setup(&settings);
        assert!(healthy.plan(&base).unwrap().spec.steps().is_empty());
    }
}
