//! `slow`: the partner [`ChainSettings::slowdown`] times slower on every
//! path (10x: 150 + 100, 450 + 100, 250 + 100 ms).

use crate::chain::ChainSettings;
use crate::scenario::{Scenario, Setup};

/// The `slow` scenario.
#[derive(Clone, Copy, Debug)]
pub struct Slow;

impl Scenario for Slow {
    fn name(&self) -> &'static str {
        "slow"
    }

    fn about(&self) -> &'static str {
        "The partner is `slowdown` times slower on every path"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        let f = settings.slowdown;
        Setup::new(
            self.name(),
            format!("partner {f}x slower on every path"),
            settings,
        )
        .slower(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_is_slowdown_times_slower() {
        let s = Slow.setup(&ChainSettings::default());
        assert_eq!(s.pricing, "delay=450ms&jitter=100ms");
        assert_eq!(s.inventory, "delay=150ms&jitter=100ms");
    }
}
