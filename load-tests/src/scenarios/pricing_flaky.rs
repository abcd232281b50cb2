//! `pricing-flaky`: 1 request in 2 meets a pricing `503` on its first
//! attempt; a retry succeeds (ids and scripts as in
//! [`crate::scenarios::rate_limit`]).

use crate::chain::{ChainSettings, PRICING};
use crate::scenario::{Scenario, Setup};

/// The `pricing-flaky` scenario.
#[derive(Clone, Copy, Debug)]
pub struct PricingFlaky;

impl Scenario for PricingFlaky {
    fn name(&self) -> &'static str {
        "pricing-flaky"
    }

    fn about(&self) -> &'static str {
        "Half the pricing calls fail once"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        Setup {
            pricing: format!("script=503,200&{}", PRICING.query(1)),
            id_group: 2,
            ..Setup::new(
                self.name(),
                "1 request in 2 meets a pricing 503 on its first attempt; a retry succeeds",
                settings,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_id_in_two_meets_the_503() {
        let flaky = PricingFlaky.setup(&ChainSettings::default());
        assert_eq!(flaky.id_group, 2);
        assert!(flaky.pricing.starts_with("script=503,200&"));
    }
}
