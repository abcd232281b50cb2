//! `healthy`: every dependency answers quickly (inventory 15 ms + up to
//! 10 ms jitter, pricing 45 + 10 ms, recommendations 25 + 10 ms).

use crate::chain::ChainSettings;
use crate::scenario::{Scenario, Setup};

/// The `healthy` scenario.
#[derive(Clone, Copy, Debug)]
pub struct Healthy;

impl Scenario for Healthy {
    fn name(&self) -> &'static str {
        "healthy"
    }

    fn about(&self) -> &'static str {
        "Every dependency answers quickly"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        Setup::new(self.name(), "every dependency answers quickly", settings)
    }
}
