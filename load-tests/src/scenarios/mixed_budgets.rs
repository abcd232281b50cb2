//! `mixed-budgets`: as `slow`; per request a budget drawn uniformly from
//! 200-600 ms for half the callers and 1-2 s for the other half
//! ([`BudgetDistribution::mixed_default`], deterministic per index),
//! instead of `--budget`; reported per class of caller.

use crate::budgets::BudgetDistribution;
use crate::chain::ChainSettings;
use crate::scenario::{Scenario, Setup};

/// The `mixed-budgets` scenario.
#[derive(Clone, Copy, Debug)]
pub struct MixedBudgets;

impl Scenario for MixedBudgets {
    fn name(&self) -> &'static str {
        "mixed-budgets"
    }

    fn about(&self) -> &'static str {
        "The `slow` partner; half the callers give 200-600 ms, half 1-2 s"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        let f = settings.slowdown;
        let budgets = BudgetDistribution::mixed_default();
        Setup {
            budgets: Some(budgets),
            ..Setup::new(
                self.name(),
                format!("partner {f}x slower on every path; {}", budgets.describe()),
                settings,
            )
            .slower(f)
        }
    }
}
