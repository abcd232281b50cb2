//! `burst-sweep`: every burst shape, cold and warm, in every mode
//! ([`crate::sweep`] runs it: the command line hands it the sweep's
//! flags). Through the registry's runner alone, it is its steady cell
//! ([`STEADY_CELL`]: warm, 600 at once, 2 s budgets, 50 ms with 8 workers
//! per path).

use std::time::Duration;

use crate::chain::ChainSettings;
use crate::generator::SpecError;
use crate::run::{LoadPlan, ModeRun};
use crate::scenario::{RunFuture, Scenario, Setup};
use crate::section::SectionKind;
use crate::sweep::{Cell, PartnerShape, SWEEP_NAME, Start, SweepBudget};
use crate::warm::{WarmUpReport, warm_then_load};

/// The sweep's steady cell: warm, 600 requests at once with 2 s budgets,
/// the partner 50 ms with 8 workers per path (about half of it fits).
pub const STEADY_CELL: Cell = Cell {
    start: Start::Warm,
    size: 600,
    budget: SweepBudget::Fixed(Duration::from_secs(2)),
    partner: PartnerShape::Delay50Workers8,
};

/// `burst-sweep`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BurstSweep;

impl Scenario for BurstSweep {
    fn name(&self) -> &'static str {
        SWEEP_NAME
    }

    fn about(&self) -> &'static str {
        "{cold, warm} x {100, 600, 2000 at once} x {500ms, 2s, 10s, mixed budgets} x \
         {instant, 50ms, 50ms-8w partner}, every mode, one table (--sweep-* filters, --repeat, \
         --noisy-neighbour); not in the default run"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        STEADY_CELL.setup(settings)
    }

    fn plan(&self, setup: &Setup, base: &LoadPlan) -> Result<LoadPlan, SpecError> {
        STEADY_CELL.plan(setup, base)
    }

    fn run<'a>(&'a self, run: ModeRun<'a>) -> RunFuture<'a> {
        Box::pin(warm_then_load(run))
    }

    fn sections(&self) -> &'static [SectionKind] {
        const SECTIONS: &[SectionKind] = &[SectionKind::of::<WarmUpReport>()];
        SECTIONS
    }
}
